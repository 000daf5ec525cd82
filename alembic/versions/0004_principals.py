"""principals: one name and one role per principal; keys belong to principals

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22 23:10:00

Before this revision a principal was whatever name an API key carried, names were not unique,
and two keys of one name could carry different roles. This revision creates ``principals``
(``name`` unique, ``role``) and gives every key a ``principal_id``; ``api_keys.name`` and
``api_keys.role`` are dropped (the principal holds them).

Migrating existing rows, deterministically:

- one principal per distinct key name; its role is the role of that name's **earliest key**
  (ordered by ``created_at``, then key id), revoked or not, and its ``created_at`` is that key's;
- every other key of that name with a **different role** is revoked now (it stays in the table,
  attached to the principal, so the audit trail is kept). The earliest key is the original
  identity; a later key of another role is exactly the issue-9 attack (an analyst key named like
  an owner, or a new key named like a revoked principal), so it is the one that loses. If this
  revokes the last admin key, `dpfit keys create --role admin --name NEW` (direct database
  access) makes a new admin;
- grants that name no analyst principal (an unknown name, or an owner/admin) are deleted: a grant
  to an unknown name would be inherited by whoever is later given that name, and grants are for
  analysts only. Grants are not part of the ledger; charges, jobs and models keep their
  principal names unchanged.

Downgrade restores ``api_keys.name``/``role`` from the principal (revocations and deleted grants
stay as they are).
"""

from __future__ import annotations

import secrets
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def _utc(value: datetime | str | None) -> datetime | None:
    """Timestamps as SQLite returns them (naive strings) or PostgreSQL (aware datetimes)."""
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def upgrade() -> None:
    op.create_table(
        "principals",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name"),
    )
    with op.batch_alter_table("api_keys", schema=None) as batch_op:
        batch_op.add_column(sa.Column("principal_id", sa.String(length=40), nullable=True))

    bind = op.get_bind()
    keys = sa.table(
        "api_keys",
        sa.column("id", sa.String),
        sa.column("name", sa.String),
        sa.column("role", sa.String),
        sa.column("created_at", sa.DateTime(timezone=True)),
        sa.column("revoked_at", sa.DateTime(timezone=True)),
        sa.column("principal_id", sa.String),
    )
    principals = sa.table(
        "principals",
        sa.column("id", sa.String),
        sa.column("name", sa.String),
        sa.column("role", sa.String),
        sa.column("created_at", sa.DateTime(timezone=True)),
    )
    grants = sa.table("grants", sa.column("id", sa.Integer), sa.column("principal", sa.String))
    rows = bind.execute(
        sa.select(keys.c.id, keys.c.name, keys.c.role, keys.c.created_at, keys.c.revoked_at)
        .order_by(keys.c.created_at, keys.c.id)
    ).all()
    now = datetime.now(UTC)
    chosen: dict[str, tuple[str, str]] = {}  # name -> (principal id, role)
    for key_id, name, role, created_at, revoked_at in rows:
        if name not in chosen:
            principal_id = "pr_" + secrets.token_hex(10)
            chosen[name] = (principal_id, role)
            bind.execute(
                principals.insert().values(
                    id=principal_id, name=name, role=role, created_at=_utc(created_at)
                )
            )
        principal_id, principal_role = chosen[name]
        values: dict[str, object] = {"principal_id": principal_id}
        if role != principal_role and revoked_at is None:
            values["revoked_at"] = now
        bind.execute(keys.update().where(keys.c.id == key_id).values(**values))
    analysts = [name for name, (_, role) in chosen.items() if role == "analyst"]
    bind.execute(grants.delete().where(grants.c.principal.not_in(analysts)))

    with op.batch_alter_table("api_keys", schema=None) as batch_op:
        batch_op.alter_column("principal_id", existing_type=sa.String(length=40), nullable=False)
        batch_op.create_foreign_key(
            "fk_api_keys_principal_id_principals", "principals", ["principal_id"], ["id"]
        )
        batch_op.create_index(batch_op.f("ix_api_keys_principal_id"), ["principal_id"])
        batch_op.drop_index(batch_op.f("ix_api_keys_name"))
        batch_op.drop_column("name")
        batch_op.drop_column("role")


def downgrade() -> None:
    with op.batch_alter_table("api_keys", schema=None) as batch_op:
        batch_op.add_column(sa.Column("name", sa.String(length=200), nullable=True))
        batch_op.add_column(sa.Column("role", sa.String(length=16), nullable=True))
    bind = op.get_bind()
    keys = sa.table(
        "api_keys",
        sa.column("principal_id", sa.String),
        sa.column("name", sa.String),
        sa.column("role", sa.String),
    )
    principals = sa.table(
        "principals", sa.column("id", sa.String), sa.column("name", sa.String),
        sa.column("role", sa.String),
    )
    for principal_id, name, role in bind.execute(
        sa.select(principals.c.id, principals.c.name, principals.c.role)
    ).all():
        bind.execute(
            keys.update().where(keys.c.principal_id == principal_id).values(name=name, role=role)
        )
    with op.batch_alter_table("api_keys", schema=None) as batch_op:
        batch_op.alter_column("name", existing_type=sa.String(length=200), nullable=False)
        batch_op.alter_column("role", existing_type=sa.String(length=16), nullable=False)
        batch_op.create_index(batch_op.f("ix_api_keys_name"), ["name"], unique=False)
        batch_op.drop_index(batch_op.f("ix_api_keys_principal_id"))
        batch_op.drop_constraint("fk_api_keys_principal_id_principals", type_="foreignkey")
        batch_op.drop_column("principal_id")
    op.drop_table("principals")
