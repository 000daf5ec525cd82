"""charges: the exact μ of Gaussian-family jobs (GDP part of the budget filter)

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23 00:10:00

- ``charges.gdp_mu`` (Float, nullable): the exact Gaussian-DP parameter μ of a job whose release
  is a composition of Gaussian mechanisms (ledger/filter.py). NULL for every row written before
  this revision: those charges keep being accounted by their stored Rényi curve alone, which is
  what they were admitted by (sound, never cheaper than before).

The cached totals ``datasets.spent_rdp``/``spent_pure_epsilon`` stay; the service now rewrites
them from the live charges on every admission and refund (a refund no longer subtracts, so a
curve holding +∞ can no longer turn the cache into NaN). A cache already broken by that bug is
repaired on the dataset's next admission or refund; ``GET /v1/datasets/{id}/ledger`` shows both.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("charges", schema=None) as batch_op:
        batch_op.add_column(sa.Column("gdp_mu", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("charges", schema=None) as batch_op:
        batch_op.drop_column("gdp_mu")
