"""jobs.runs: how many times a worker started the job (the retry limit counts runs)

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-23 02:45:00

``attempt`` counts dispatches (every restart re-dispatches an unfinished job, whether or not a
worker ever ran it); ``runs`` counts claims — a worker starting the job and reading its data.
``DPFIT_MAX_ATTEMPTS`` bounds runs. Rows written before this revision get the old approximation:
``runs = attempt`` for jobs whose data was read, else 0.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("runs", sa.Integer(), nullable=False, server_default="0"))
    op.execute("UPDATE jobs SET runs = attempt WHERE data_read_at IS NOT NULL")


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("runs")
