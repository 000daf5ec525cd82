"""The optimizer catalog and health (API keys: service/api/keys.py)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from service.api.deps import Sessions
from service.api.errors import problem_response
from service.api.middleware import RETRY_AFTER_SECONDS
from service.api.strict_json import StrictJSONRoute
from service.db.session import schema_revision
from service.optimizers.kits.registry import catalog
from service.schemas import Health, OptimizerInfo

router = APIRouter(route_class=StrictJSONRoute)


@router.get(
    "/v1/optimizers", response_model=list[OptimizerInfo], tags=["optimizers"], summary="Catalog"
)
def list_optimizers() -> list[OptimizerInfo]:
    """Every optimizer with its parameters, assumptions, guarantee and paper reference."""
    return [OptimizerInfo.model_validate(entry) for entry in catalog()]


@router.get("/healthz", response_model=Health, tags=["health"], summary="Health")
def healthz(request: Request, sessions: Sessions) -> Health | JSONResponse:
    """ok only when the database answers, is intact (SQLite: ``PRAGMA quick_check`` at most
    every 30 s, service/api/health.py) AND carries the schema revision this code expects.

    Unreachable database → 503 (middleware); reachable but empty or at another Alembic
    revision (e.g. recreated, or not migrated) → 503 naming both revisions. Both carry
    ``Retry-After``.
    """
    expected = request.app.state.schema_revision
    with sessions() as session:
        found = schema_revision(session)
        intact = request.app.state.integrity.intact(session)
    if not intact:
        response = problem_response(
            503,
            "Service unavailable",
            "The database file failed its integrity check; restore it from a backup.",
        )
        response.headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response
    if expected is not None and found != expected:
        response = problem_response(
            503,
            "Service unavailable",
            f"The database schema is missing or out of date (found revision {found or 'none'}, "
            f"this service needs {expected}); run `dpfit migrate`.",
        )
        response.headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response
    dispatcher = request.app.state.dispatcher
    workers = dispatcher.describe() if dispatcher is not None else "none"
    return Health(status="ok", database=sessions.kw["bind"].dialect.name, workers=workers)
