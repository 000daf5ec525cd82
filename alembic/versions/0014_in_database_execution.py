"""datasets.execution: where a dataset's jobs compute ("workers" or "in_database")

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-26 09:30:00

An owner may register a PostgreSQL table with ``"execution": "in_database"``: the rows never
leave the owner's database, jobs encode them there and only d-sized aggregates leave it
(service/workers/in_database.py). Every dataset registered before this revision is read by the
workers: the column is added with the server default ``'workers'``, so existing rows keep their
behaviour and nothing is rewritten.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("datasets") as batch:
        batch.add_column(
            sa.Column("execution", sa.String(length=16), nullable=False, server_default="workers")
        )


def downgrade() -> None:
    with op.batch_alter_table("datasets") as batch:
        batch.drop_column("execution")
