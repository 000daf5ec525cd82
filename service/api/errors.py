"""RFC 9457 problem+json errors, with the field at fault.

Messages never contain data values: validation errors quote only the request's own field paths
and pydantic's message, never the offending input; unexpected exceptions become a bare 500.

**Fields are paths of the request body** (``model.l2``, ``features.0.max``), never pydantic's
internal locations: the tag pydantic inserts for a discriminated union (``model.
logistic_regression.l2``) and the member name of a plain union (``label.negative.str``) are
dropped here, once, for every route (:func:`body_field`, :func:`untagged`); a body that is not
JSON is reported on ``body``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from service.api.strict_json import DUPLICATE_KEY

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


#: The longest id a 404 quotes: longer ones (no id the service issues is) are cut.
SHOWN_ID_CHARS = 64
_N = SHOWN_ID_CHARS
_QUOTED = re.compile(f"'([^']{{{_N}}})[^']+'|\"([^\"]{{{_N}}})[^\"]+\"")


def shown_ids(text: str) -> str:
    """``text`` with every quoted id longer than :data:`SHOWN_ID_CHARS` cut to that many
    characters and "…": a 404 does not echo back whatever a client put in a path."""
    return _QUOTED.sub(lambda m: f"'{m.group(1) or m.group(2)}…'", text)


def not_found(what: str, field: str | None = None) -> ProblemError:
    detail = f"{shown_ids(what)} does not exist or is not visible to you."
    return ProblemError(404, "Not found", detail, field)


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


@dataclass(frozen=True)
class UnionTags:
    """What the app's discriminated unions put into pydantic's error locations: the properties
    that discriminate (``type``), their tag values (``logistic_regression``, ``numeric``), and
    every property name any schema declares (a tag that is also a field name is never dropped
    from a field given without its body)."""

    properties: frozenset[str] = frozenset()
    tags: frozenset[str] = frozenset()
    fields: frozenset[str] = frozenset()

    @staticmethod
    def of_openapi(document: dict[str, Any]) -> UnionTags:
        """Read from an OpenAPI document (``discriminator`` objects and ``properties`` keys)."""
        properties: set[str] = set()
        tags: set[str] = set()
        fields: set[str] = set()

        def walk(node: Any) -> None:
            if isinstance(node, dict):
                found = node.get("discriminator")
                if isinstance(found, dict) and isinstance(found.get("propertyName"), str):
                    properties.add(found["propertyName"])
                    tags.update(str(tag) for tag in found.get("mapping", {}) or {})
                declared = node.get("properties")
                if isinstance(declared, dict):
                    fields.update(str(name) for name in declared)
                for value in node.values():
                    walk(value)
            elif isinstance(node, list):
                for value in node:
                    walk(value)

        walk(document)
        return UnionTags(frozenset(properties), frozenset(tags), frozenset(fields))


_MISSING = object()  # below a key the body does not have: the rest of the location is kept


def body_field(loc: Iterable[Any], body: Any, unions: UnionTags) -> str:
    """The request's own path for a pydantic error location, read along the body.

    ``("body", "model", "logistic_regression", "l2")`` → ``model.l2``: body fields drop the
    ``body`` prefix; query/path/header fields keep theirs (``query.limit``). Walking the body,
    a location element is dropped when it is not a path into it:

    - in an object, an element that is not one of its keys but the value of its discriminating
      property (``"type": "logistic_regression"``): the tag of a discriminated union;
    - in an array or a scalar, a name (``str``, ``int``, …): the member of a plain union.

    An element naming a key the object lacks (a required field) is kept, and so is all that
    follows it. Only locations and keys are read, never a value into the answer.
    """
    parts = list(loc)
    if parts[:1] != ["body"]:
        return ".".join(str(p) for p in parts) or "body"
    path: list[str] = []
    node: Any = body
    for part in parts[1:]:
        if node is _MISSING:
            path.append(str(part))
        elif isinstance(node, dict):
            if part in node:
                node = node[part]
            elif isinstance(part, str) and any(node.get(p) == part for p in unions.properties):
                continue  # the union's tag: the same object, checked as that variant
            else:
                node = _MISSING
            path.append(str(part))
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
            path.append(str(part))
        elif isinstance(part, str):
            continue  # a plain union's member name under an array or a scalar
        else:
            node = _MISSING
            path.append(str(part))
    return ".".join(path) or "body"


def untagged(field: str | None, unions: UnionTags) -> str | None:
    """A dotted field raised without its body (``InfeasibleSpec``), tags dropped:
    ``model.huber_regression.huber_delta`` → ``model.huber_delta``. A part is dropped when it is
    a discriminated union's tag and no schema has a field of that name; never the first."""
    if not field:
        return field
    parts = field.split(".")
    kept = parts[:1] + [p for p in parts[1:] if p not in unions.tags or p in unions.fields]
    return ".".join(kept)


def _union_tags(app: FastAPI) -> UnionTags:
    """The app's :class:`UnionTags`, read from its OpenAPI document once (none if it fails:
    fields then keep pydantic's location rather than the answer becoming a 500)."""
    cached = getattr(app.state, "union_tags", None)
    if isinstance(cached, UnionTags):
        return cached
    try:
        unions = UnionTags.of_openapi(app.openapi())
    except Exception as exc:  # noqa: BLE001 - an error answer must not fail
        logger.error("union tags unavailable: %s", type(exc).__name__)
        unions = UnionTags()
    app.state.union_tags = unions
    return unions


NOT_JSON = "the request body is not valid JSON"


def install_error_handlers(app: FastAPI) -> None:
    install_registration_handlers(app)
    install_domain_handlers(app)

    @app.exception_handler(ProblemError)
    async def _problem(_: Request, exc: ProblemError) -> JSONResponse:
        return problem_response(exc.status, exc.title, exc.detail, exc.field, **exc.extra)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        unions = _union_tags(request.app)
        errors: list[dict[str, str]] = []
        for e in exc.errors():
            if e.get("type") == "json_invalid":  # FastAPI's loc is ("body", offset)
                reason = str((e.get("ctx") or {}).get("error", ""))
                message = reason if reason.startswith(DUPLICATE_KEY) else NOT_JSON
                error = {"field": "body", "message": message}
            else:
                field = body_field(e.get("loc", ()), exc.body, unions)
                error = {"field": field, "message": str(e.get("msg", "invalid"))}
            if error not in errors:  # a plain union reports each member on one field
                errors.append(error)
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
        title = getattr(exc, "title", None) or HTTPStatus(exc.status_code).phrase.capitalize()
        return problem_response(exc.status_code, title, str(exc.detail))

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
        logger.error("unhandled %s", type(exc).__name__)
        return problem_response(
            500, "Internal error", "The server failed; nothing was charged twice."
        )


def install_registration_handlers(app: FastAPI) -> None:
    """The domain errors of dataset registration and retirement (service/domain/registration.py)."""
    from service.errors import (
        DatasetRetired,
        RegistrationRefused,
        SourceAlreadyRegistered,
        SourceNotOpen,
    )

    @app.exception_handler(RegistrationRefused)
    async def _refused(_: Request, exc: RegistrationRefused) -> JSONResponse:
        return problem_response(422, "Invalid request", exc.message, exc.field)

    @app.exception_handler(SourceAlreadyRegistered)
    async def _registered(_: Request, exc: SourceAlreadyRegistered) -> JSONResponse:
        if exc.existing_id is None:  # another owner's location: content is never compared
            detail = "This location (the path, object key or table, a folder holding it or a "
            detail += "file inside it) is already registered as a dataset."
            return problem_response(409, "Already registered", detail, "source.uri")
        detail = (
            "This data (its location, a folder holding it or a file inside it, or its content "
            f"among your datasets) is already registered as dataset {exc.existing_id!r}; one "
            "source has one budget."
        )
        return problem_response(
            409, "Already registered", detail, "source.uri", dataset_id=exc.existing_id
        )

    @app.exception_handler(DatasetRetired)
    async def _retired(_: Request, exc: DatasetRetired) -> JSONResponse:
        detail = f"Dataset {exc.dataset_id!r} is retired: its budget is final, no job is admitted."
        return problem_response(409, "Dataset retired", detail, "dataset_id")

    @app.exception_handler(SourceNotOpen)
    async def _not_open(_: Request, exc: SourceNotOpen) -> JSONResponse:
        detail = (
            f"The source of dataset {exc.dataset_id!r} lies outside the data roots open to its "
            "owner on this server (DPFIT_DATA_ROOTS / DPFIT_SQL_CONNECTIONS no longer hold it), "
            "so no worker may read it; nothing was charged. The data is not said to have "
            "changed: the server's operator must re-open the root that holds it."
        )
        return problem_response(409, "Source not open", detail, "dataset_id")


def install_domain_handlers(app: FastAPI) -> None:
    """Every other domain error a service function raises, mapped once (service/errors.py)."""
    from service.api.idempotency import FIELD as IDEMPOTENCY_FIELD
    from service.api.throttle import TooManyRequests
    from service.errors import ConcurrentChange, DatasetNotFound
    from service.ledger.admission import BudgetExceeded, IdempotencyConflict
    from service.optimizers.kits.base import InfeasibleSpec

    @app.exception_handler(TooManyRequests)
    async def _too_many(_: Request, exc: TooManyRequests) -> JSONResponse:
        response = problem_response(429, "Too many requests", exc.detail)
        response.headers["Retry-After"] = str(exc.retry_after)
        return response

    @app.exception_handler(DatasetNotFound)
    async def _not_found(_: Request, exc: DatasetNotFound) -> JSONResponse:
        detail = shown_ids(f"Dataset {exc.dataset_id!r} does not exist or is not visible to you.")
        return problem_response(404, "Not found", detail, exc.field)

    @app.exception_handler(InfeasibleSpec)
    async def _infeasible(request: Request, exc: InfeasibleSpec) -> JSONResponse:
        field = untagged(exc.field, _union_tags(request.app))
        return problem_response(422, "Invalid request", exc.message, field)

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
            IDEMPOTENCY_FIELD,
        )

    @app.exception_handler(ConcurrentChange)
    async def _concurrent(_: Request, exc: ConcurrentChange) -> JSONResponse:
        return problem_response(409, "Conflict", "A concurrent change conflicted; retry.")
