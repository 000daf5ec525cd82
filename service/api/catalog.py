"""The optimizer catalog and health (API keys: service/api/keys.py)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from sqlalchemy import text

from service.api.deps import Sessions
from service.optimizers.registry import catalog
from service.schemas import Health, OptimizerInfo

router = APIRouter()


@router.get(
    "/v1/optimizers", response_model=list[OptimizerInfo], tags=["optimizers"], summary="Catalog"
)
def list_optimizers() -> list[OptimizerInfo]:
    """Every optimizer with its parameters, assumptions, guarantee and paper reference."""
    return [OptimizerInfo.model_validate(entry) for entry in catalog()]


@router.get("/healthz", response_model=Health, tags=["health"], summary="Health")
def healthz(request: Request, sessions: Sessions) -> Health:
    with sessions() as session:
        session.execute(text("SELECT 1"))
    dispatcher = request.app.state.dispatcher
    workers = dispatcher.describe() if dispatcher is not None else "none"
    return Health(status="ok", database=sessions.kw["bind"].dialect.name, workers=workers)
