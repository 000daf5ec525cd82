"""dataset sources: one budget per data (source claims), validation reports, retirement

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-22 23:10:00

- ``datasets.validation`` (JSON, nullable): the owner's validation report from registration;
  NULL for datasets registered before this revision (they were never validated).
- ``datasets.retired_at`` (nullable): set when an admin retires a dataset; no job is admitted on
  a retired dataset.
- ``source_claims``: ``key`` (primary key) → ``dataset_id``. Every dataset claims its canonical
  location (``"location:" + sha256(source_path)``) and its content
  (``"content:" + sha256(fingerprint)``); the primary key lets no second dataset claim either.
  Claims are never deleted, so the rule holds across retired datasets too (the service never
  hands out a second budget for the same data). ``service/domain/registration.py`` computes the same
  keys (``location_claim``/``content_claim``).

Existing databases may already hold several datasets of one location or content (the old
service allowed it). This migration never fails on them: datasets are visited in registration
order (``created_at``, then ``id``); each claims whichever of its two keys are still free, and a
dataset that finds either key already taken by an earlier one is a duplicate: it is marked
retired (``retired_at`` = the migration's time). Its charges, jobs and models stay as they were;
the earliest registration keeps its budget and the later ones' budgets become final.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def _key(kind: str, value: str) -> str:
    return f"{kind}:{hashlib.sha256(value.encode()).hexdigest()}"


def upgrade() -> None:
    with op.batch_alter_table("datasets", schema=None) as batch_op:
        batch_op.add_column(sa.Column("validation", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("retired_at", sa.DateTime(timezone=True), nullable=True))
    op.create_table(
        "source_claims",
        sa.Column("key", sa.String(length=80), nullable=False),
        sa.Column("dataset_id", sa.String(length=40), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["dataset_id"], ["datasets.id"]),
        sa.PrimaryKeyConstraint("key"),
    )
    with op.batch_alter_table("source_claims", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_source_claims_dataset_id"), ["dataset_id"], unique=False
        )
    _claim_existing_datasets()


def _claim_existing_datasets() -> None:
    datasets = sa.table(
        "datasets",
        sa.column("id", sa.String()),
        sa.column("source_path", sa.Text()),
        sa.column("fingerprint", sa.String()),
        sa.column("created_at", sa.DateTime(timezone=True)),
        sa.column("retired_at", sa.DateTime(timezone=True)),
    )
    claims = sa.table(
        "source_claims",
        sa.column("key", sa.String()),
        sa.column("dataset_id", sa.String()),
        sa.column("created_at", sa.DateTime(timezone=True)),
    )
    bind = op.get_bind()
    now = datetime.now(UTC)
    rows = bind.execute(
        sa.select(datasets.c.id, datasets.c.source_path, datasets.c.fingerprint).order_by(
            datasets.c.created_at, datasets.c.id
        )
    ).all()
    taken: set[str] = set()
    for dataset_id, location, fingerprint in rows:
        keys = [_key("location", location), _key("content", fingerprint)]
        free = [k for k in keys if k not in taken]
        for key in free:
            bind.execute(sa.insert(claims).values(key=key, dataset_id=dataset_id, created_at=now))
        taken.update(free)
        if len(free) < len(keys):
            bind.execute(
                sa.update(datasets).where(datasets.c.id == dataset_id).values(retired_at=now)
            )


def downgrade() -> None:
    with op.batch_alter_table("source_claims", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_source_claims_dataset_id"))
    op.drop_table("source_claims")
    with op.batch_alter_table("datasets", schema=None) as batch_op:
        batch_op.drop_column("retired_at")
        batch_op.drop_column("validation")
