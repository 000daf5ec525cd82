"""evaluations: the noised metrics of a private evaluation job

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-23 00:20:00

- ``evaluations``: one row per finished evaluation job (``job_id`` unique: only the first
  finished result is stored and released), naming the evaluated model and the dataset whose
  ledger paid for it; ``metrics`` holds the noised values only (service/privacy/evaluation.py).
  The job itself is an ordinary ``jobs`` row (``spec.kind = "evaluation"``), admitted and charged
  like any job.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "evaluations",
        sa.Column("id", sa.String(length=40), primary_key=True),
        sa.Column("job_id", sa.String(length=40), sa.ForeignKey("jobs.id"), nullable=False),
        sa.Column("model_id", sa.String(length=40), sa.ForeignKey("models.id"), nullable=False),
        sa.Column(
            "dataset_id", sa.String(length=40), sa.ForeignKey("datasets.id"), nullable=False
        ),
        sa.Column("principal", sa.String(length=200), nullable=False),
        sa.Column("metrics", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("job_id", name="uq_evaluations_job_id"),
    )
    op.create_index("ix_evaluations_model_id", "evaluations", ["model_id"])


def downgrade() -> None:
    op.drop_index("ix_evaluations_model_id", table_name="evaluations")
    op.drop_table("evaluations")
