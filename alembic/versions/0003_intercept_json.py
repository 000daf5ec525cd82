"""intercepts as JSON (one per class for one-vs-rest models)

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22 04:20:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("models", schema=None) as batch_op:
        batch_op.alter_column(
            "intercept",
            existing_type=sa.Float(),
            type_=sa.JSON(),
            existing_nullable=True,
            postgresql_using="to_json(intercept)",
        )


def downgrade() -> None:
    with op.batch_alter_table("models", schema=None) as batch_op:
        batch_op.alter_column(
            "intercept",
            existing_type=sa.JSON(),
            type_=sa.Float(),
            existing_nullable=True,
            postgresql_using="(intercept::text)::double precision",
        )
