"""API keys (admins only): create (new principal or rotation), list, revoke.

The rules live in ``service.domain.principals``; these routes translate its errors to HTTP.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from sqlalchemy import select

from service.api.deps import Admin, Sessions
from service.api.errors import ProblemError, not_found
from service.api.paging import PageParams, finish_page
from service.api.strict_json import StrictJSONRoute
from service.db.models import ApiKey
from service.db.models import Principal as PrincipalRow
from service.domain.principals import KeyNotFound, LastAdminKey, RoleConflict, issue_key, revoke_key
from service.pagination import paginate
from service.schemas import KeyCreate, KeyCreated, KeyOut

router = APIRouter(prefix="/v1/keys", tags=["keys"], route_class=StrictJSONRoute)


def key_out(key: ApiKey, principal: PrincipalRow) -> KeyOut:
    return KeyOut(
        id=key.id,
        name=principal.name,
        role=principal.role,  # type: ignore[arg-type]
        created_at=key.created_at,
        revoked_at=key.revoked_at,
    )


@router.post("", status_code=201, response_model=KeyCreated, summary="Create a key")
def create_api_key(body: KeyCreate, _: Admin, sessions: Sessions) -> KeyCreated:
    """Create an API key; the key is shown once.

    A new name creates the principal with this role; an existing name with the same role gets
    one more key (rotation, also after all its keys were revoked); an existing name with another
    role is refused with 409 (`field: role`) — a principal has one role, and names are never
    reused for someone else.
    """
    try:
        with sessions.begin() as session:
            issued = issue_key(session, name=body.name, role=body.role)
            return KeyCreated(
                id=issued.key.id,
                name=issued.principal.name,
                role=body.role,
                key=issued.secret,
                created_at=issued.key.created_at,
            )
    except RoleConflict as exc:
        raise ProblemError(409, "Conflict", str(exc), "role") from None


@router.get("", response_model=list[KeyOut], summary="List keys")
def list_api_keys(
    _: Admin, sessions: Sessions, page: PageParams, request: Request, response: Response
) -> list[KeyOut]:
    """Every key's id, principal name, role and dates (never the key itself), oldest first,
    one page per call (see `X-Next-Cursor`)."""
    query = select(ApiKey, PrincipalRow).join(PrincipalRow, ApiKey.principal_id == PrincipalRow.id)
    with sessions() as session:
        rows = session.execute(paginate(query, page, ApiKey.created_at, ApiKey.id)).all()
        rows = finish_page(rows, page, request, response, key=lambda r: (r[0].created_at, r[0].id))
        return [key_out(key, principal) for key, principal in rows]


@router.post("/{key_id}/revoke", response_model=KeyOut, summary="Revoke a key")
def revoke_api_key(key_id: str, _: Admin, sessions: Sessions) -> KeyOut:
    """Revoke a key: it authenticates nothing from now on. Idempotent.

    Its principal keeps its name, role, datasets, jobs and models; the last active admin key
    cannot be revoked (409).
    """
    try:
        with sessions.begin() as session:
            key, principal = revoke_key(session, key_id)
            return key_out(key, principal)
    except KeyNotFound:
        raise not_found(f"Key {key_id!r}") from None
    except LastAdminKey:
        raise ProblemError(
            409,
            "Conflict",
            "This is the last active admin key; create another admin key before revoking it.",
        ) from None
