"""The budget's history: ε spent at δ_B after each charge and refund (burn-down data).

Replays the append-only ledger in row order, keeping the live charges (charged, not yet
refunded) and summing them afresh at each point (ledger/filter.py ``Spent.of``: never a
subtraction). Each point is what ``GET /v1/datasets/{id}/budget`` would have answered right
after that row. Job ids are shown only where the viewer may see them: everyone's to owners and
admins, their own to an analyst (the dataset's total curve is shown to every viewer).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.db.models import Charge, Dataset
from service.ledger import filter as privacy_filter
from service.ledger.admission import budget_of
from service.ledger.totals import cost_of


@dataclass(frozen=True)
class HistoryPoint:
    at: datetime
    kind: str
    job_id: str | None
    epsilon_spent: float
    your_epsilon_spent: float


def budget_history(
    session: Session, dataset: Dataset, viewer: str, sees_all: bool
) -> list[HistoryPoint]:
    """One point per ledger row of ``dataset``, oldest first (see module docstring)."""
    budget = budget_of(dataset)
    live: dict[str, privacy_filter.Cost] = {}
    mine: dict[str, privacy_filter.Cost] = {}
    spent = privacy_filter.Spent.nothing()
    my_spent = privacy_filter.Spent.nothing()
    points: list[HistoryPoint] = []
    rows = session.scalars(
        select(Charge).where(Charge.dataset_id == dataset.id).order_by(Charge.id)
    )
    for row in rows:
        own = row.principal == viewer
        if row.kind == "charge":
            cost = cost_of(row)
            live[row.job_id] = cost
            spent = spent.plus(cost)
            if own:
                mine[row.job_id] = cost
                my_spent = my_spent.plus(cost)
        else:
            live.pop(row.job_id, None)
            spent = privacy_filter.Spent.of(live.values())
            if own and mine.pop(row.job_id, None) is not None:
                my_spent = privacy_filter.Spent.of(mine.values())
        points.append(
            HistoryPoint(
                at=row.created_at,
                kind=row.kind,
                job_id=row.job_id if (sees_all or own) else None,
                epsilon_spent=privacy_filter.spent_epsilon(budget, spent),
                your_epsilon_spent=privacy_filter.spent_epsilon(budget, my_spent),
            )
        )
    return points
