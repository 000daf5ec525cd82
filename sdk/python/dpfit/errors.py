"""Typed exceptions, built from the service's ``application/problem+json`` answers (RFC 9457).

Every error the service reports carries ``status``, ``title``, ``detail`` and, when one field of
the request is at fault, ``field``. :func:`raise_for_problem` maps a response to the most
specific class; catch :class:`DpfitError` to catch them all.
"""

from __future__ import annotations

from typing import Any

import httpx

__all__ = [
    "AuthError",
    "BudgetExceeded",
    "Conflict",
    "ConnectionFailed",
    "DpfitError",
    "InvalidSpec",
    "JobFailed",
    "NotFound",
    "PredictionWarning",
    "raise_for_problem",
    "warn_about_rows",
]


class DpfitError(Exception):
    """Base class of every error of this package.

    ``status`` is the HTTP status (``None`` for errors that are not an HTTP answer), ``problem``
    the whole problem+json body as sent by the service.
    """

    def __init__(
        self,
        detail: str,
        *,
        status: int | None = None,
        title: str | None = None,
        field: str | None = None,
        problem: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(detail)
        self.detail = detail
        self.status = status
        self.title = title
        self.field = field
        self.problem = problem or {}

    def __str__(self) -> str:
        where = f" [{self.field}]" if self.field else ""
        prefix = f"{self.status} " if self.status else ""
        return f"{prefix}{self.title or type(self).__name__}{where}: {self.detail}"


class PredictionWarning(UserWarning):
    """Rows given to a prediction held values the model's public encoding changed: a value that
    is not a declared category (scored as none of them), a number outside the declared bounds
    (clipped), a missing value. ``warnings`` lists them as the service does: ``{"row",
    "column", "kind", "message"}``."""

    def __init__(self, message: str, warnings: list[dict[str, Any]]) -> None:
        super().__init__(message)
        self.warnings = warnings


#: At most this many warnings are quoted in one :class:`PredictionWarning`'s message.
QUOTED_WARNINGS = 5


def warn_about_rows(found: list[dict[str, Any]], total: int | None = None) -> None:
    """Issue one :class:`PredictionWarning` for ``found`` (nothing when empty), attributed to the
    first caller outside this package."""
    if not found:
        return
    import warnings

    total = len(found) if total is None else total
    quoted = "; ".join(
        f"row {w['row']} {w['column']}: {w['message']}" for w in found[:QUOTED_WARNINGS]
    )
    more = f"; … {total - QUOTED_WARNINGS} more" if total > QUOTED_WARNINGS else ""
    message = (
        f"{total} cell(s) of the rows changed meaning when encoded: {quoted}{more} "
        "(the warnings attribute of this warning lists them)"
    )
    warnings.warn(PredictionWarning(message, found), stacklevel=_outside_this_package())


def _outside_this_package() -> int:
    """The ``stacklevel`` of the first frame whose code is not in the dpfit package."""
    import os
    import sys

    package = os.path.dirname(os.path.abspath(__file__))
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.dirname(os.path.abspath(frame.f_code.co_filename)) == package:
        frame, level = frame.f_back, level + 1  # type: ignore[assignment]
    return level


class InvalidSpec(DpfitError):
    """422: the request is invalid; ``field`` names the part at fault (e.g. ``privacy.epsilon``)."""


class NotFound(DpfitError):
    """404: the dataset, job or model does not exist or is not visible to this key."""


class AuthError(DpfitError):
    """401/403: no key, an unknown or revoked key, or a role that may not do this."""


class Conflict(DpfitError):
    """409 other than a budget refusal: e.g. the data is already registered (``dataset_id``
    names the existing dataset to its owner), the dataset is retired, the job already finished."""

    @property
    def dataset_id(self) -> str | None:
        """The existing dataset named by a 409 "Already registered" (owners and admins only)."""
        value = self.problem.get("dataset_id")
        return str(value) if value is not None else None


class BudgetExceeded(Conflict):
    """409: the dataset's remaining budget (or your grant's cap) does not admit the job;
    ``epsilon_remaining`` is what remains, at the dataset's δ_B."""

    @property
    def epsilon_remaining(self) -> float | None:
        value = self.problem.get("epsilon_remaining")
        return float(value) if value is not None else None


class JobFailed(DpfitError):
    """A job ended ``failed`` or ``cancelled``; ``job`` is its last state (``job.error`` is the
    service's public reason, ``job.refunded`` whether its charge was refunded)."""

    def __init__(self, job: Any) -> None:
        reason = getattr(job, "error", None) or "no reason given"
        super().__init__(
            f"job {job.id} ended {job.status}: {reason}",
            title="Job failed" if job.status == "failed" else "Job cancelled",
        )
        self.job = job


class ConnectionFailed(DpfitError):
    """The service could not be reached (after the retries)."""


def raise_for_problem(response: httpx.Response) -> None:
    """Raise the typed error for a 4xx/5xx ``response``; return for anything else."""
    if response.status_code < 400:
        return
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        body = {"title": response.reason_phrase, "detail": response.text[:500]}
    status = response.status_code
    kwargs: dict[str, Any] = {
        "status": status,
        "title": body.get("title"),
        "field": body.get("field"),
        "problem": body,
    }
    detail = str(body.get("detail") or body.get("title") or f"HTTP {status}")
    cls: type[DpfitError]
    if status in (401, 403):
        cls = AuthError
    elif status == 404:
        cls = NotFound
    elif status == 409:
        budget = body.get("title") == "Budget exceeded" or "epsilon_remaining" in body
        cls = BudgetExceeded if budget else Conflict
    elif status in (400, 413, 415, 422):
        cls = InvalidSpec
    else:
        cls = DpfitError
    raise cls(detail, **kwargs)
