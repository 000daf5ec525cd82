"""``GET /v1/me``: whom the caller's key belongs to (name and role).

The dashboard labels its view by it (an admin's page is not an "owner view") and tells an
owner's datasets from those granted to them. It tells the caller only what their key already
is: no other principal, no data.
"""

from __future__ import annotations

from fastapi import APIRouter

from service.api.deps import AnyRole
from service.api.strict_json import StrictJSONRoute
from service.schemas import WhoAmI

router = APIRouter(prefix="/v1", tags=["keys"], route_class=StrictJSONRoute)


@router.get("/me", response_model=WhoAmI, summary="Who am I")
def who_am_i(principal: AnyRole) -> WhoAmI:
    """The name and role of the principal the key belongs to (every role; 401 without a key)."""
    return WhoAmI(name=principal.name, role=principal.role)  # type: ignore[arg-type]
