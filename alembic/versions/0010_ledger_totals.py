"""ledger_totals: the running totals of each dataset and each principal on it

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-23 05:30:00

Admission, the estimate, ``GET …/budget``, the grants list and the metrics summed a dataset's
whole ledger at every request, which grew with every job. ``ledger_totals`` holds the sum of the
standing charges (no refund row for their job) per (dataset, scope): scope "" is the dataset,
any other scope a principal. The service writes it in the transactions that write charges,
under the dataset's lock (service/ledger/totals.py), and the audit checks it equal to the rows.

The upgrade fills it from the charge rows, with the service's own arithmetic (the costs added in
ledger order from zero: Rényi curves element-wise with null as +∞, μ², the all-Gaussian flag,
pure ε), so the audit finds every migrated total equal to its recomputation. It then drops
``datasets.spent_rdp`` and ``spent_pure_epsilon``, which the totals replace (a cache broken by
the bug revision 0006 describes is thereby repaired too). The downgrade restores them from the
dataset scope.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

import sqlalchemy as sa

from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

_charges = sa.table(
    "charges",
    sa.column("id", sa.Integer()),
    sa.column("dataset_id", sa.String()),
    sa.column("job_id", sa.String()),
    sa.column("principal", sa.String()),
    sa.column("kind", sa.String()),
    sa.column("rdp", sa.JSON()),
    sa.column("gdp_mu", sa.Float()),
    sa.column("pure_epsilon", sa.Float()),
)
_totals = sa.table(
    "ledger_totals",
    sa.column("dataset_id", sa.String()),
    sa.column("scope", sa.String()),
    sa.column("rdp", sa.JSON()),
    sa.column("mu_squared", sa.Float()),
    sa.column("all_gaussian", sa.Boolean()),
    sa.column("pure_epsilon", sa.Float()),
    sa.column("charges", sa.Integer()),
)
_datasets = sa.table(
    "datasets",
    sa.column("id", sa.String()),
    sa.column("spent_rdp", sa.JSON()),
    sa.column("spent_pure_epsilon", sa.Float()),
)


class _Sum:
    """Spent.plus of service/ledger/filter.py, frozen here as of this revision."""

    def __init__(self) -> None:
        self.rdp: list[float] | None = None
        self.mu_squared = 0.0
        self.all_gaussian = True
        self.pure_epsilon = 0.0
        self.charges = 0

    def add(self, row: Any) -> None:
        curve = [math.inf if v is None else float(v) for v in row.rdp]
        before = self.rdp if self.rdp is not None else [0.0] * len(curve)
        self.rdp = [a + b for a, b in zip(before, curve, strict=True)]
        mu = row.gdp_mu
        self.mu_squared = self.mu_squared + (mu * mu if mu is not None else 0.0)
        self.all_gaussian = self.all_gaussian and mu is not None
        self.pure_epsilon = self.pure_epsilon + (row.pure_epsilon or 0.0)
        self.charges += 1

    def row(self, dataset_id: str, scope: str) -> dict[str, Any]:
        curve = self.rdp or []
        return {
            "dataset_id": dataset_id,
            "scope": scope,
            "rdp": [None if not math.isfinite(v) else v for v in curve],
            "mu_squared": self.mu_squared,
            "all_gaussian": self.all_gaussian,
            "pure_epsilon": self.pure_epsilon,
            "charges": self.charges,
        }


def upgrade() -> None:
    op.create_table(
        "ledger_totals",
        sa.Column("dataset_id", sa.String(40), sa.ForeignKey("datasets.id"), nullable=False),
        sa.Column("scope", sa.String(200), nullable=False),
        sa.Column("rdp", sa.JSON(), nullable=False),
        sa.Column("mu_squared", sa.Float(), nullable=False),
        sa.Column("all_gaussian", sa.Boolean(), nullable=False),
        sa.Column("pure_epsilon", sa.Float(), nullable=False),
        sa.Column("charges", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("dataset_id", "scope"),
    )
    bind = op.get_bind()
    rows = bind.execute(sa.select(_charges).order_by(_charges.c.id)).all()
    refunded = {(r.dataset_id, r.job_id) for r in rows if r.kind == "refund"}
    sums: dict[tuple[str, str], _Sum] = defaultdict(_Sum)
    for row in rows:
        if row.kind != "charge" or (row.dataset_id, row.job_id) in refunded:
            continue
        sums[(row.dataset_id, "")].add(row)
        sums[(row.dataset_id, row.principal)].add(row)
    if sums:
        op.bulk_insert(_totals, [s.row(ds, scope) for (ds, scope), s in sorted(sums.items())])
    with op.batch_alter_table("datasets") as batch:
        batch.drop_column("spent_rdp")
        batch.drop_column("spent_pure_epsilon")


def downgrade() -> None:
    with op.batch_alter_table("datasets") as batch:
        batch.add_column(sa.Column("spent_rdp", sa.JSON(), nullable=True))
        batch.add_column(
            sa.Column("spent_pure_epsilon", sa.Float(), nullable=False, server_default="0")
        )
    bind = op.get_bind()
    for row in bind.execute(sa.select(_totals).where(_totals.c.scope == "")).all():
        bind.execute(
            _datasets.update()
            .where(_datasets.c.id == row.dataset_id)
            .values(spent_rdp=row.rdp, spent_pure_epsilon=row.pure_epsilon)
        )
    empty = [0.0] * 13  # the ledger's 13 Rényi orders (service/ledger/accounting.py)
    bind.execute(_datasets.update().where(_datasets.c.spent_rdp.is_(None)).values(spent_rdp=empty))
    op.drop_table("ledger_totals")
