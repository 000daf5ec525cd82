"""The optimizer catalog, API keys and health."""

from __future__ import annotations

from fastapi import APIRouter, Request
from sqlalchemy import select, text

from service.api.auth import create_key
from service.api.deps import Admin, Sessions
from service.api.errors import not_found
from service.db.models import ApiKey, utcnow
from service.optimizers.registry import catalog
from service.schemas import Health, KeyCreate, KeyCreated, KeyOut, OptimizerInfo

router = APIRouter()


@router.get(
    "/v1/optimizers", response_model=list[OptimizerInfo], tags=["optimizers"], summary="Catalog"
)
def list_optimizers() -> list[OptimizerInfo]:
    """Every optimizer with its parameters, assumptions, guarantee and paper reference."""
    return [OptimizerInfo.model_validate(entry) for entry in catalog()]


@router.post(
    "/v1/keys", status_code=201, response_model=KeyCreated, tags=["keys"], summary="Create a key"
)
def create_api_key(body: KeyCreate, _: Admin, sessions: Sessions) -> KeyCreated:
    """Create an API key with a role; the key is shown once."""
    with sessions.begin() as session:
        row, key = create_key(session, body.name, body.role)
        session.flush()
        return KeyCreated(
            id=row.id, name=row.name, role=body.role, key=key, created_at=row.created_at
        )


@router.get("/v1/keys", response_model=list[KeyOut], tags=["keys"], summary="List keys")
def list_api_keys(_: Admin, sessions: Sessions) -> list[KeyOut]:
    """Every key's id, principal name, role and dates (never the key itself)."""
    with sessions() as session:
        rows = session.scalars(select(ApiKey).order_by(ApiKey.created_at)).all()
        return [KeyOut.model_validate(r, from_attributes=True) for r in rows]


@router.post(
    "/v1/keys/{key_id}/revoke", response_model=KeyOut, tags=["keys"], summary="Revoke a key"
)
def revoke_api_key(key_id: str, _: Admin, sessions: Sessions) -> KeyOut:
    """Revoke a key: it authenticates nothing from now on. Idempotent."""
    with sessions.begin() as session:
        row = session.get(ApiKey, key_id)
        if row is None:
            raise not_found(f"Key {key_id!r}")
        if row.revoked_at is None:
            row.revoked_at = utcnow()
        return KeyOut.model_validate(row, from_attributes=True)


@router.get("/healthz", response_model=Health, tags=["health"], summary="Health")
def healthz(request: Request, sessions: Sessions) -> Health:
    with sessions() as session:
        session.execute(text("SELECT 1"))
    dispatcher = request.app.state.dispatcher
    workers = dispatcher.describe() if dispatcher is not None else "none"
    return Health(status="ok", database=sessions.kw["bind"].dialect.name, workers=workers)
