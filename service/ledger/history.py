"""The budget's history: ε spent at δ_B after each charge and refund (burn-down data).

Replays the append-only ledger in row order, keeping the live charges (charged, not yet
refunded) and summing them afresh at each point (ledger/filter.py ``Spent.of``: never a
subtraction). Each point is what ``GET /v1/datasets/{id}/budget`` would have answered right
after that row. Job ids are shown only where the viewer may see them: everyone's to owners and
admins, their own to an analyst (the dataset's total curve is shown to every viewer).

Paged like the ledger (``after_id``, ``limit``: rows by ledger row id). A page's points still
need every earlier row's cost (the spend is a sum from the start), so the replay reads the rows
before the page too — summing, not building points or answering them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from service.db.models import Charge, Dataset
from service.ledger import filter as privacy_filter
from service.ledger.admission import budget_of
from service.ledger.totals import cost_of


@dataclass(frozen=True)
class HistoryPoint:
    row_id: int
    at: datetime
    kind: str
    job_id: str | None
    epsilon_spent: float
    your_epsilon_spent: float


def budget_history(
    session: Session,
    dataset: Dataset,
    viewer: str,
    sees_all: bool,
    after_id: int | None = None,
    limit: int | None = None,
) -> list[HistoryPoint]:
    """One point per ledger row of ``dataset``, oldest first (see module docstring): those of
    rows after ``after_id``, at most ``limit`` of them (all when None)."""
    budget = budget_of(dataset)
    live: dict[str, privacy_filter.Cost] = {}
    mine: dict[str, privacy_filter.Cost] = {}
    spent = privacy_filter.Spent.nothing()
    my_spent = privacy_filter.Spent.nothing()
    points: list[HistoryPoint] = []
    query = select(Charge).where(Charge.dataset_id == dataset.id).order_by(Charge.id)
    if after_id is not None and limit is not None:
        query = query.where(Charge.id <= _last_id_of_page(session, dataset.id, after_id, limit))
    for row in session.scalars(query):
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
        if after_id is not None and row.id <= after_id:
            continue
        points.append(
            HistoryPoint(
                row_id=row.id,
                at=row.created_at,
                kind=row.kind,
                job_id=row.job_id if (sees_all or own) else None,
                epsilon_spent=privacy_filter.spent_epsilon(budget, spent),
                your_epsilon_spent=privacy_filter.spent_epsilon(budget, my_spent),
            )
        )
        if limit is not None and len(points) >= limit:
            break
    return points


def _last_id_of_page(session: Session, dataset_id: str, after_id: int, limit: int) -> int:
    """The id of the last row a page after ``after_id`` of ``limit`` rows can hold."""
    ids = select(Charge.id).where(Charge.dataset_id == dataset_id, Charge.id > after_id)
    last = session.scalar(select(func.max(ids.order_by(Charge.id).limit(limit).subquery().c.id)))
    return int(last) if last is not None else after_id
