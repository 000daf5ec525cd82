"""Authentication: a bearer API key → the `Principal` (id, name, role) it belongs to.

Keys and principals live in ``service.domain.principals``; this module only turns a request into a
principal, and gates routes by role.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from service.api.errors import ProblemError
from service.domain.principals import authenticate_key

_bearer = HTTPBearer(
    auto_error=False, description="An API key from `dpfit keys create` or POST /v1/keys."
)


@dataclass(frozen=True)
class Principal:
    """The authenticated caller, from the principals table: one permanent name, one role."""

    id: str
    name: str
    role: str

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"


def authenticate(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    if credentials is None or credentials.scheme.lower() != "bearer":
        raise ProblemError(401, "Unauthorized", "Send 'Authorization: Bearer <api key>'.")
    sessions = request.app.state.sessions
    with sessions() as session:
        row = authenticate_key(session, credentials.credentials)
        principal = None if row is None else Principal(id=row.id, name=row.name, role=row.role)
    if principal is None:
        raise ProblemError(401, "Unauthorized", "Unknown or revoked API key.")
    return principal


def require(*roles: str) -> Callable[[Principal], Awaitable[Principal]]:
    """A dependency admitting only the given roles (admin is always admitted)."""

    async def check(principal: Annotated[Principal, Depends(authenticate)]) -> Principal:
        if principal.role != "admin" and principal.role not in roles:
            allowed = list(dict.fromkeys(("admin", *roles)))
            needs = (
                f"the role {allowed[0]}"
                if len(allowed) == 1
                else "one of the roles: " + ", ".join(allowed)
            )
            raise ProblemError(403, "Forbidden", f"This needs {needs}.")
        return principal

    return check
