"""source_claims: content claims are per owner; dataset_withdrawals: an admin's audit trail

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-26 08:40:00

**Content claims are scoped to the owner.** A content claim was global (``"content:" +
sha256(fingerprint)``, the primary key), so a registration's 409 told an owner whether *another*
owner had registered the same bytes: an owner who knows n − 1 rows of another owner's table
registered candidate tables in her own database and learnt the last row from the one that
answered 409 (issue 22). Now:

- a location claim (``"location:" + sha256(location)``) stays global: a path, an object key or a
  table backs one dataset, whoever registers it;
- a content claim's key is ``"owned:" + sha256(owner + "\\0" + content key)`` — the primary key
  still makes one owner's second registration of the same content impossible, also under
  concurrent registrations, but says nothing about other owners' data;
- the new column ``content`` keeps the unscoped content key (``"content:" + sha256(fingerprint)``,
  NULL on location claims), indexed: admins see which datasets of different owners hold the
  same content (``duplicates`` on their dataset view) and decide about the budgets.

``service/domain/registration.py`` computes the same keys (``location_claim``, ``content_claim``,
``owned_content_claim``).

The upgrade rewrites every existing content claim (keys starting ``content:``) to its owner's
key, keeping the old key in ``content``. It cannot collide: the old keys were globally unique.

**dataset_withdrawals** records every dataset an owner withdrew with ``DELETE
/v1/datasets/{id}`` (allowed only while nothing was ever charged on it): what it was, who
withdrew it and when. The dataset row, its grants and its claims are deleted in the same
transaction; this row is what remains, for admins.

Downgrade: content claims go back to global keys; where several owners now hold the same
content, the earliest registration keeps the claim and the others' content claims are dropped
(the older service then refuses that content again, for everyone — stricter, never looser).
The withdrawal records are dropped.
"""

from __future__ import annotations

import hashlib

import sqlalchemy as sa

from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

_datasets = sa.table(
    "datasets",
    sa.column("id", sa.String()),
    sa.column("owner", sa.String()),
    sa.column("created_at", sa.DateTime(timezone=True)),
)


def _claims_table() -> sa.TableClause:
    return sa.table(
        "source_claims",
        sa.column("key", sa.String()),
        sa.column("dataset_id", sa.String()),
        sa.column("content", sa.String()),
    )


def _owned_key(owner: str, content_key: str) -> str:
    """``service.domain.claims.owned_content_claim`` (a migration does not import the service)."""
    return "owned:" + hashlib.sha256(f"{owner}\0{content_key}".encode()).hexdigest()


def upgrade() -> None:
    with op.batch_alter_table("source_claims") as batch:
        batch.add_column(sa.Column("content", sa.String(length=80), nullable=True))
        batch.create_index("ix_source_claims_content", ["content"], unique=False)
    claims = _claims_table()
    bind = op.get_bind()
    rows = bind.execute(
        sa.select(claims.c.key, _datasets.c.owner)
        .select_from(claims.join(_datasets, _datasets.c.id == claims.c.dataset_id))
        .where(claims.c.key.like("content:%"))
    ).all()
    for key, owner in rows:
        bind.execute(
            sa.update(claims)
            .where(claims.c.key == key)
            .values(key=_owned_key(str(owner), str(key)), content=key)
        )
    op.create_table(
        "dataset_withdrawals",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("dataset_id", sa.String(length=40), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("owner", sa.String(length=200), nullable=False),
        sa.Column("source_uri", sa.Text(), nullable=False),
        sa.Column("source_path", sa.Text(), nullable=False),
        sa.Column("fingerprint", sa.String(length=80), nullable=False),
        sa.Column("n_rows", sa.Integer(), nullable=False),
        sa.Column("epsilon", sa.Float(), nullable=False),
        sa.Column("delta", sa.Float(), nullable=False),
        sa.Column("registered_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("withdrawn_by", sa.String(length=200), nullable=False),
        sa.Column("withdrawn_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("dataset_withdrawals") as batch:
        batch.create_index("ix_dataset_withdrawals_owner", ["owner"], unique=False)


def downgrade() -> None:
    op.drop_table("dataset_withdrawals")
    claims = _claims_table()
    bind = op.get_bind()
    rows = bind.execute(
        sa.select(claims.c.key, claims.c.content)
        .select_from(claims.join(_datasets, _datasets.c.id == claims.c.dataset_id))
        .where(claims.c.content.is_not(None))
        .order_by(_datasets.c.created_at, _datasets.c.id)
    ).all()
    kept: set[str] = set()
    for key, content in rows:
        if content in kept:
            bind.execute(sa.delete(claims).where(claims.c.key == key))
        else:
            kept.add(content)
            bind.execute(sa.update(claims).where(claims.c.key == key).values(key=content))
    with op.batch_alter_table("source_claims") as batch:
        batch.drop_index("ix_source_claims_content")
        batch.drop_column("content")
