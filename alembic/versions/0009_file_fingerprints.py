"""datasets.file_fingerprints: a Parquet folder's per-file fingerprints

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-23 03:30:00

Fixed at registration in the same pass as ``fingerprint`` (file name → ``sha256:<hex>`` of its
bytes); NULL for single files, SQL tables and datasets registered before this revision (their
jobs keep checking the whole fingerprint).
"""

from __future__ import annotations

import sqlalchemy as sa

from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("datasets") as batch:
        batch.add_column(sa.Column("file_fingerprints", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("datasets") as batch:
        batch.drop_column("file_fingerprints")
