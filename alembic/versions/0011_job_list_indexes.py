"""jobs: indexes for the job list's keyset pages

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-23 06:15:00

``GET /v1/jobs`` pages a principal's jobs (an admin's: all jobs) in (created_at, id) order.
With only ``ix_jobs_principal`` the database read every job of the principal and sorted them
for each page — a cost that grew with every job. ``ix_jobs_principal_created`` (principal,
created_at, id) and ``ix_jobs_created`` (created_at, id) let a page read just its rows.
"""

from __future__ import annotations

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_jobs_principal_created", "jobs", ["principal", "created_at", "id"])
    op.create_index("ix_jobs_created", "jobs", ["created_at", "id"])


def downgrade() -> None:
    op.drop_index("ix_jobs_created", table_name="jobs")
    op.drop_index("ix_jobs_principal_created", table_name="jobs")
