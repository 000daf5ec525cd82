"""API keys: random secrets shown once, stored as SHA-256, carrying a role and a principal name."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy import select
from sqlalchemy.orm import Session

from service.api.errors import ProblemError
from service.db.models import ApiKey

KEY_PREFIX = "dpf_"
_bearer = HTTPBearer(
    auto_error=False, description="An API key from `dpfit keys create` or POST /v1/keys."
)


@dataclass(frozen=True)
class Principal:
    name: str
    role: str

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"


def new_key() -> str:
    """A fresh key: 32 random bytes, url-safe (high entropy, so a plain SHA-256 is enough)."""
    return KEY_PREFIX + secrets.token_urlsafe(32)


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def create_key(session: Session, name: str, role: str) -> tuple[ApiKey, str]:
    """Insert a key row; returns it and the plaintext key (never stored)."""
    key = new_key()
    row = ApiKey(id="key_" + secrets.token_hex(8), name=name, role=role, key_hash=hash_key(key))
    session.add(row)
    return row, key


def authenticate(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    if credentials is None or credentials.scheme.lower() != "bearer":
        raise ProblemError(401, "Unauthorized", "Send 'Authorization: Bearer <api key>'.")
    sessions = request.app.state.sessions
    with sessions() as session:
        row = session.scalar(
            select(ApiKey).where(
                ApiKey.key_hash == hash_key(credentials.credentials), ApiKey.revoked_at.is_(None)
            )
        )
    if row is None:
        raise ProblemError(401, "Unauthorized", "Unknown or revoked API key.")
    return Principal(name=row.name, role=row.role)


def require(*roles: str) -> Callable[[Principal], Principal]:
    """A dependency admitting only the given roles (admin is always admitted)."""

    def check(principal: Annotated[Principal, Depends(authenticate)]) -> Principal:
        if principal.role != "admin" and principal.role not in roles:
            allowed = ", ".join(("admin", *roles))
            raise ProblemError(403, "Forbidden", f"This needs one of the roles: {allowed}.")
        return principal

    return check
