"""The ledger's transactions: atomic admission of a job with its charge, refunds, audits.

Admission is one transaction (docs/ledger.md#admission-is-one-transaction): lock the dataset row
(``SELECT … FOR UPDATE`` on
PostgreSQL; on SQLite every transaction already began with ``BEGIN IMMEDIATE``, see
db/session.py), read the cached spend, ask the filter, insert the job and its charge, update the
cache, commit. Two admissions on one dataset therefore never interleave, so no interleaving
overspends. Charges are append-only; a refund is a new row of kind ``refund``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy import Row, select
from sqlalchemy.orm import Session

from service import job_status
from service.db.models import Charge, Dataset, Grant, Job
from service.errors import DatasetNotFound
from service.ledger import filter as privacy_filter


class BudgetExceeded(Exception):
    """The filter refused the job; ``reason`` says what remains."""

    def __init__(self, reason: str, remaining: float) -> None:
        super().__init__(reason)
        self.reason = reason
        self.remaining = remaining


class IdempotencyConflict(Exception):
    """The Idempotency-Key was used before with a different request body."""


@dataclass(frozen=True)
class JobCharge:
    """What a new job costs: its RDP curve, its exact μ if it is a Gaussian-family job, its ε
    if pure, and its event for audit."""

    epsilon: float
    delta: float
    rdp: Sequence[float]
    pure_epsilon: float | None
    event: dict[str, object]
    mu: float | None = None

    @property
    def cost(self) -> privacy_filter.Cost:
        return privacy_filter.Cost(rdp=tuple(self.rdp), mu=self.mu, pure_epsilon=self.pure_epsilon)


def curve_to_json(curve: Sequence[float]) -> list[float | None]:
    """+∞ (and NaN, read as +∞: never optimistic) become null in JSON."""
    return [None if not math.isfinite(v) else float(v) for v in curve]


def curve_from_json(curve: Sequence[float | None]) -> tuple[float, ...]:
    return tuple(math.inf if v is None else float(v) for v in curve)


def budget_of(dataset: Dataset) -> privacy_filter.Budget:
    return privacy_filter.Budget(epsilon=dataset.epsilon, delta=dataset.delta)


class StoredCost(Protocol):
    """The cost columns of a ledger row (a ``Charge`` or a row of just those columns)."""

    @property
    def rdp(self) -> Any: ...
    @property
    def gdp_mu(self) -> float | None: ...
    @property
    def pure_epsilon(self) -> float | None: ...


def cost_of(row: StoredCost) -> privacy_filter.Cost:
    """What a stored charge costs (rows written before revision 0006 have no μ: Rényi only)."""
    return privacy_filter.Cost(
        rdp=curve_from_json(row.rdp), mu=row.gdp_mu, pure_epsilon=row.pure_epsilon
    )


def spent_of(dataset: Dataset) -> privacy_filter.Spent:
    """The dataset's *cached* Rényi and pure totals (audit only; admission recomputes)."""
    return privacy_filter.Spent(
        rdp=curve_from_json(dataset.spent_rdp),
        mu_squared=0.0,
        all_gaussian=False,
        pure_epsilon=dataset.spent_pure_epsilon,
    )


# The columns a standing charge's cost needs: rows, not ORM objects (admission reads the whole
# ledger of a dataset at every job; an instance per row was most of that read's cost).
_COST_COLUMNS = (
    Charge.kind,
    Charge.job_id,
    Charge.principal,
    Charge.rdp,
    Charge.gdp_mu,
    Charge.pure_epsilon,
)


def standing_charges(
    session: Session, dataset_id: str, principal: str | None = None
) -> list[Row[Any]]:
    """The cost columns (``kind``, ``job_id``, ``principal``, ``rdp``, ``gdp_mu``,
    ``pure_epsilon``) of the dataset's charges that stand — no refund row for their job —,
    oldest first; only ``principal``'s when given."""
    query = select(*_COST_COLUMNS).where(Charge.dataset_id == dataset_id)
    if principal is not None:
        query = query.where(Charge.principal == principal)
    rows = session.execute(query.order_by(Charge.id)).all()
    refunded = {r.job_id for r in rows if r.kind == "refund"}
    return [r for r in rows if r.kind == "charge" and r.job_id not in refunded]


def live_spent(
    session: Session, dataset_id: str, principal: str | None = None
) -> privacy_filter.Spent:
    """The sum of the live charges, recomputed from the rows (never by subtracting a refund:
    a curve holding +∞ then never meets ∞ − ∞)."""
    return privacy_filter.Spent.of(
        cost_of(r) for r in standing_charges(session, dataset_id, principal)
    )


def _write_cache(dataset: Dataset, spent: privacy_filter.Spent) -> None:
    dataset.spent_rdp = curve_to_json(spent.rdp)
    dataset.spent_pure_epsilon = spent.pure_epsilon


def lock_dataset(session: Session, dataset_id: str) -> Dataset | None:
    """The dataset row, locked until the transaction ends."""
    return session.scalar(select(Dataset).where(Dataset.id == dataset_id).with_for_update())


def find_idempotent(session: Session, principal: str, key: str) -> Job | None:
    return session.scalar(select(Job).where(Job.principal == principal, Job.idempotency_key == key))


def check_admissible(
    session: Session, dataset: Dataset, principal: str, cost: privacy_filter.Cost
) -> privacy_filter.Spent:
    """Raise :class:`BudgetExceeded` unless a job of ``cost`` by ``principal`` fits the dataset's
    filter and the principal's cap; returns the dataset's live spend *before* the job.

    Read-only: ``POST /v1/jobs/estimate`` calls it without the lock, admission under it.
    """
    budget = budget_of(dataset)
    spent = live_spent(session, dataset.id)
    decision = privacy_filter.admit(budget, spent, cost)
    if not decision.admitted:
        raise BudgetExceeded(decision.reason, privacy_filter.remaining_epsilon(budget, spent))
    cap = principal_cap(session, dataset.id, principal)
    if cap is not None:
        capped = privacy_filter.Budget(epsilon=cap, delta=budget.delta)
        mine = live_spent(session, dataset.id, principal)
        decision = privacy_filter.admit(capped, mine, cost)
        if not decision.admitted:
            raise BudgetExceeded(
                f"your grant on this dataset is capped at ε = {cap:.6g}: {decision.reason}",
                min(
                    privacy_filter.remaining_epsilon(capped, mine),
                    privacy_filter.remaining_epsilon(budget, spent),
                ),
            )
    return spent


def admit_job(session: Session, dataset_id: str, job: Job, charge: JobCharge) -> Job:
    """Admit ``job`` with ``charge`` atomically, or raise :class:`BudgetExceeded`.

    With an idempotency key already used by the same principal, returns the earlier job (and
    charges nothing) or raises :class:`IdempotencyConflict` if the request differs. The check is
    made under the dataset lock, so concurrent retries of one request charge once.
    Must be called inside ``session.begin()``; the caller commits.
    """
    dataset = lock_dataset(session, dataset_id)
    if dataset is None:
        raise DatasetNotFound(dataset_id, "dataset_id")
    if job.idempotency_key is not None:
        earlier = find_idempotent(session, job.principal, job.idempotency_key)
        if earlier is not None:
            if earlier.request_hash != job.request_hash:
                raise IdempotencyConflict(job.idempotency_key)
            return earlier
    cost = charge.cost
    spent = check_admissible(session, dataset, job.principal, cost)
    session.add(job)
    session.flush()
    session.add(
        Charge(
            dataset_id=dataset_id,
            job_id=job.id,
            principal=job.principal,
            kind="charge",
            epsilon=charge.epsilon,
            delta=charge.delta,
            rdp=curve_to_json(charge.rdp),
            pure_epsilon=charge.pure_epsilon,
            gdp_mu=charge.mu,
            event=dict(charge.event),
        )
    )
    _write_cache(dataset, spent.plus(cost))
    return job


def refund_job(session: Session, job: Job) -> bool:
    """Append a refund for ``job``'s charge (once). Caller guarantees the data was never read.

    Must be called inside a transaction; locks the dataset row. The cached total is then the
    live charges summed again (no subtraction).
    """
    dataset = lock_dataset(session, job.dataset_id)
    if dataset is None:
        raise DatasetNotFound(job.dataset_id)
    rows = session.scalars(select(Charge).where(Charge.job_id == job.id)).all()
    if any(r.kind == "refund" for r in rows):
        return False
    original = next((r for r in rows if r.kind == "charge"), None)
    if original is None:
        return False
    session.add(
        Charge(
            dataset_id=original.dataset_id,
            job_id=job.id,
            principal=original.principal,
            kind="refund",
            epsilon=original.epsilon,
            delta=original.delta,
            rdp=list(original.rdp),
            pure_epsilon=original.pure_epsilon,
            gdp_mu=original.gdp_mu,
            event=dict(original.event),
        )
    )
    session.flush()
    _write_cache(dataset, live_spent(session, dataset.id))
    return True


def cancel_or_refund_unread(
    session: Session, job_id: str, status: job_status.Ending, error: str | None
) -> bool:
    """Move a job that no worker has read to ``status`` and refund it, atomically.

    :func:`service.job_status.end_unread` races safely with a worker's claim: exactly one of
    them matches the row. Returns whether it happened.
    """
    if not job_status.end_unread(session, job_id, status, error):
        return False
    job = session.get(Job, job_id)
    assert job is not None
    refund_job(session, job)
    return True


def principal_cap(session: Session, dataset_id: str, principal: str) -> float | None:
    """The ε cap of ``principal``'s grant on the dataset, if any (owners have none)."""
    return session.scalar(
        select(Grant.epsilon_cap).where(
            Grant.dataset_id == dataset_id, Grant.principal == principal
        )
    )


@dataclass(frozen=True)
class LedgerTotals:
    rdp: tuple[float, ...]
    pure_epsilon: float
    jobs_charged: int


def recompute_totals(session: Session, dataset_id: str) -> LedgerTotals:
    """The dataset's spend recomputed from its charge rows (the audit of the cached total)."""
    live = standing_charges(session, dataset_id)
    spent = privacy_filter.Spent.of(cost_of(r) for r in live)
    return LedgerTotals(rdp=spent.rdp, pure_epsilon=spent.pure_epsilon, jobs_charged=len(live))
