"""Principals and their API keys: one name and one role per principal, several keys each.

The rules (shared by ``POST /v1/keys``, ``POST /v1/keys/{id}/revoke``, grants and
``dpfit keys create``):

- A principal's ``name`` is unique and permanent: it is never deleted and never given to another
  principal. Datasets, grants, jobs, charges and models name their principal, so whatever a
  principal owns stays with that principal whatever happens to its keys.
- A key for a new name creates the principal with the requested role. A key for an existing name
  with the **same** role is a new key of that principal (rotation) — also when all its keys were
  revoked: a principal whose keys are all revoked is disabled, not gone, and an admin who makes it
  a new key gives access back to the same principal. A key for an existing name with **another**
  role is refused (`RoleConflict`); roles never change.
- Revoking a key affects that key only. The last active admin key cannot be revoked
  (`LastAdminKey`): the service would have no one left to manage it.
- Grants name existing analyst principals only (`require_analyst`).

Keys are 32 random bytes (url-safe); only their SHA-256 is stored — the secret is shown once.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from typing import Literal, Protocol

from sqlalchemy import bindparam, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from service.db.models import ApiKey, utcnow
from service.db.models import Principal as PrincipalRow
from service.ids import new_id

Role = Literal["admin", "owner", "analyst"]
KEY_PREFIX = "dpf_"


class Actor(Protocol):
    """Who acts: the API's authenticated principal (only its name and admin flag matter here)."""

    @property
    def name(self) -> str: ...

    @property
    def is_admin(self) -> bool: ...


class RoleConflict(Exception):
    """The name belongs to a principal with another role (roles never change)."""

    def __init__(self, name: str, existing_role: str, requested_role: str) -> None:
        super().__init__(
            f"the principal {name!r} exists with role {existing_role!r}; a principal has one "
            f"role, so a {requested_role!r} key needs another name"
        )
        self.name = name
        self.existing_role = existing_role


class KeyNotFound(Exception):
    """No key with this id."""


class LastAdminKey(Exception):
    """Revoking this key would leave no active admin key."""


class NotAnAnalyst(Exception):
    """A grant names something other than an existing analyst principal."""


@dataclass(frozen=True)
class IssuedKey:
    """A new key row, its principal and the plaintext secret (shown once, never stored)."""

    key: ApiKey
    principal: PrincipalRow
    secret: str


def new_secret() -> str:
    """A fresh key: 32 random bytes, url-safe (high entropy, so a plain SHA-256 is enough)."""
    return KEY_PREFIX + secrets.token_urlsafe(32)


def hash_key(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def find_principal(session: Session, name: str) -> PrincipalRow | None:
    return session.scalar(select(PrincipalRow).where(PrincipalRow.name == name))


def _principal_for(session: Session, name: str, role: Role) -> PrincipalRow:
    """The principal called ``name``, created with ``role`` if new; `RoleConflict` otherwise.

    Two concurrent first keys for one name race on the unique name: the loser's insert is rolled
    back to a savepoint and it then sees the winner's principal (PostgreSQL, READ COMMITTED; on
    SQLite every transaction holds the write lock from its start, so there is no race).
    """
    principal = find_principal(session, name)
    if principal is None:
        try:
            with session.begin_nested():
                principal = PrincipalRow(id=new_id("pr"), name=name, role=role, created_at=utcnow())
                session.add(principal)
        except IntegrityError:
            principal = find_principal(session, name)
            if principal is None:  # pragma: no cover - the unique violation names a committed row
                raise
    if principal.role != role:
        raise RoleConflict(name, principal.role, role)
    return principal


def issue_key(session: Session, *, name: str, role: Role) -> IssuedKey:
    """A new key for principal ``name`` (created if new); `RoleConflict` if it has another role.

    The caller commits; the secret exists only in the returned value.
    """
    principal = _principal_for(session, name, role)
    secret = new_secret()
    key = ApiKey(
        id="key_" + secrets.token_hex(8),
        principal_id=principal.id,
        key_hash=hash_key(secret),
        created_at=utcnow(),
    )
    session.add(key)
    session.flush()
    return IssuedKey(key=key, principal=principal, secret=secret)


# Built once: every request authenticates, and building the expression cost more than running
# it (bound parameters keep it one cached statement).
_ACTIVE_KEY_PRINCIPAL = (
    select(PrincipalRow)
    .join(ApiKey, ApiKey.principal_id == PrincipalRow.id)
    .where(ApiKey.key_hash == bindparam("key_hash"), ApiKey.revoked_at.is_(None))
)


def authenticate_key(session: Session, secret: str) -> PrincipalRow | None:
    """The principal of an active key with this secret, or None (unknown or revoked)."""
    return session.scalar(_ACTIVE_KEY_PRINCIPAL, {"key_hash": hash_key(secret)})


def revoke_key(session: Session, key_id: str) -> tuple[ApiKey, PrincipalRow]:
    """Revoke one key (idempotent): it authenticates nothing from now on.

    Refuses (`LastAdminKey`) to revoke the last active admin key. The active admin keys are read
    ``FOR UPDATE`` (PostgreSQL; SQLite transactions are serialized), so two admins revoking each
    other's keys concurrently cannot both succeed and leave none.
    """
    found = session.execute(
        select(ApiKey, PrincipalRow)
        .join(PrincipalRow, ApiKey.principal_id == PrincipalRow.id)
        .where(ApiKey.id == key_id)
    ).first()
    if found is None:
        raise KeyNotFound(key_id)
    key, principal = found
    if key.revoked_at is not None:
        return key, principal
    if principal.role == "admin":
        active_admin_keys = session.scalars(
            select(ApiKey.id)
            .join(PrincipalRow, ApiKey.principal_id == PrincipalRow.id)
            .where(PrincipalRow.role == "admin", ApiKey.revoked_at.is_(None))
            .with_for_update(of=ApiKey)
        ).all()
        if set(active_admin_keys) <= {key_id}:
            raise LastAdminKey(key_id)
    key.revoked_at = utcnow()
    session.flush()
    return key, principal


def require_analyst(session: Session, name: str) -> PrincipalRow:
    """The analyst principal called ``name``; `NotAnAnalyst` if there is none.

    One message whether the name is unknown or has another role, so a grant attempt does not
    tell an owner which other principals exist or what they are.
    """
    principal = find_principal(session, name)
    if principal is None or principal.role != "analyst":
        raise NotAnAnalyst(
            f"there is no analyst principal {name!r}; grants name existing analyst principals "
            "(an admin creates one with POST /v1/keys)"
        )
    return principal
