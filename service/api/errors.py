"""RFC 9457 problem+json errors, with the field at fault.

Messages never contain data values: validation errors quote only the request's own field paths
and pydantic's message, never the offending input; unexpected exceptions become a bare 500.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

PROBLEM_JSON = "application/problem+json"
logger = logging.getLogger("dpfit.api")


class ProblemError(Exception):
    """An error the API reports as problem+json."""

    def __init__(
        self,
        status: int,
        title: str,
        detail: str,
        field: str | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.title = title
        self.detail = detail
        self.field = field
        self.extra = extra or {}


def not_found(what: str, field: str | None = None) -> ProblemError:
    return ProblemError(404, "Not found", f"{what} does not exist or is not visible to you.", field)


def invalid(field: str, message: str) -> ProblemError:
    return ProblemError(422, "Invalid request", message, field)


def problem_response(
    status: int, title: str, detail: str, field: str | None = None, **extra: Any
) -> JSONResponse:
    body: dict[str, Any] = {
        "type": "about:blank",
        "title": title,
        "status": status,
        "detail": detail,
    }
    if field is not None:
        body["field"] = field
        body.setdefault("errors", [{"field": field, "message": detail}])
    body.update(extra)
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse(body, status_code=status, media_type=PROBLEM_JSON, headers=headers)


def _dotted(loc: tuple[Any, ...]) -> str:
    """``("body", "model", "logistic_regression", "l2")`` → ``model.logistic_regression.l2``.

    Body fields drop the ``body`` prefix; query/path/header fields keep theirs. Discriminated
    unions add the tag to the path; it is kept because it says which variant was checked.
    """
    parts = [str(p) for p in loc]
    if parts[:1] == ["body"]:
        parts = parts[1:]
    return ".".join(parts) or "body"


def install_error_handlers(app: FastAPI) -> None:
    install_registration_handlers(app)
    install_domain_handlers(app)

    @app.exception_handler(ProblemError)
    async def _problem(_: Request, exc: ProblemError) -> JSONResponse:
        return problem_response(exc.status, exc.title, exc.detail, exc.field, **exc.extra)

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [
            {"field": _dotted(tuple(e.get("loc", ()))), "message": str(e.get("msg", "invalid"))}
            for e in exc.errors()
        ]
        first = errors[0] if errors else {"field": "body", "message": "invalid request"}
        return problem_response(
            422,
            "Invalid request",
            f"{first['field']}: {first['message']}",
            first["field"],
            errors=errors,
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 400:  # FastAPI could not decode the body (e.g. not UTF-8)
            return problem_response(
                422, "Invalid request", "body: not a JSON document in UTF-8", "body"
            )
        return problem_response(exc.status_code, str(exc.detail), str(exc.detail))

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
        logger.error("unhandled %s", type(exc).__name__)
        return problem_response(
            500, "Internal error", "The server failed; nothing was charged twice."
        )


def install_registration_handlers(app: FastAPI) -> None:
    """The domain errors of dataset registration and retirement (service/registration.py)."""
    from service.registration import (
        DatasetRetired,
        RegistrationRefused,
        SourceAlreadyRegistered,
    )

    @app.exception_handler(RegistrationRefused)
    async def _refused(_: Request, exc: RegistrationRefused) -> JSONResponse:
        return problem_response(422, "Invalid request", exc.message, exc.field)

    @app.exception_handler(SourceAlreadyRegistered)
    async def _registered(_: Request, exc: SourceAlreadyRegistered) -> JSONResponse:
        if exc.existing_id is None:
            detail = "This data (its location, a folder holding it or a file inside it, or its "
            detail += "content) is already registered as a dataset."
            return problem_response(409, "Already registered", detail, "source.uri")
        detail = (
            "This data (its location, a folder holding it or a file inside it, or its content) "
            f"is already registered as dataset {exc.existing_id!r}; one source has one budget."
        )
        return problem_response(
            409, "Already registered", detail, "source.uri", dataset_id=exc.existing_id
        )

    @app.exception_handler(DatasetRetired)
    async def _retired(_: Request, exc: DatasetRetired) -> JSONResponse:
        detail = f"Dataset {exc.dataset_id!r} is retired: its budget is final, no job is admitted."
        return problem_response(409, "Dataset retired", detail, "dataset_id")


def install_domain_handlers(app: FastAPI) -> None:
    """Every other domain error a service function raises, mapped once (service/errors.py)."""
    from service.errors import ConcurrentChange, DatasetNotFound
    from service.ledger.admission import BudgetExceeded, IdempotencyConflict
    from service.optimizers.base import InfeasibleSpec

    @app.exception_handler(DatasetNotFound)
    async def _not_found(_: Request, exc: DatasetNotFound) -> JSONResponse:
        detail = f"Dataset {exc.dataset_id!r} does not exist or is not visible to you."
        return problem_response(404, "Not found", detail, exc.field)

    @app.exception_handler(InfeasibleSpec)
    async def _infeasible(_: Request, exc: InfeasibleSpec) -> JSONResponse:
        return problem_response(422, "Invalid request", exc.message, exc.field)

    @app.exception_handler(BudgetExceeded)
    async def _budget(_: Request, exc: BudgetExceeded) -> JSONResponse:
        return problem_response(
            409,
            "Budget exceeded",
            exc.reason,
            "privacy.epsilon",
            epsilon_remaining=exc.remaining,
        )

    @app.exception_handler(IdempotencyConflict)
    async def _idempotency(_: Request, exc: IdempotencyConflict) -> JSONResponse:
        return problem_response(
            422,
            "Invalid request",
            "this Idempotency-Key was already used with a different request",
            "Idempotency-Key",
        )

    @app.exception_handler(ConcurrentChange)
    async def _concurrent(_: Request, exc: ConcurrentChange) -> JSONResponse:
        return problem_response(409, "Conflict", "A concurrent change conflicted; retry.")
