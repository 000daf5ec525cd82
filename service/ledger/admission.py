"""The ledger's transactions: atomic admission of a job with its charge, refunds, audits.

Admission is one transaction (DESIGN §2): lock the dataset row (``SELECT … FOR UPDATE`` on
PostgreSQL; on SQLite every transaction already began with ``BEGIN IMMEDIATE``, see
db/session.py), read the cached spend, ask the filter, insert the job and its charge, update the
cache, commit. Two admissions on one dataset therefore never interleave, so no interleaving
overspends. Charges are append-only; a refund is a new row of kind ``refund``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from service.db.models import Charge, Dataset, Grant, Job, utcnow
from service.ledger import filter as privacy_filter
from service.ledger.accounting import ORDERS


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
    """What a new job costs: its RDP curve, its ε if pure, and its event for audit."""

    epsilon: float
    delta: float
    rdp: Sequence[float]
    pure_epsilon: float | None
    event: dict[str, object]


def curve_to_json(curve: Sequence[float]) -> list[float | None]:
    return [None if math.isinf(v) else float(v) for v in curve]


def curve_from_json(curve: Sequence[float | None]) -> tuple[float, ...]:
    return tuple(math.inf if v is None else float(v) for v in curve)


def budget_of(dataset: Dataset) -> privacy_filter.Budget:
    return privacy_filter.Budget(epsilon=dataset.epsilon, delta=dataset.delta)


def spent_of(dataset: Dataset) -> privacy_filter.Spent:
    return privacy_filter.Spent(
        rdp=curve_from_json(dataset.spent_rdp), pure_epsilon=dataset.spent_pure_epsilon
    )


def lock_dataset(session: Session, dataset_id: str) -> Dataset | None:
    """The dataset row, locked until the transaction ends."""
    return session.scalar(select(Dataset).where(Dataset.id == dataset_id).with_for_update())


def find_idempotent(session: Session, principal: str, key: str) -> Job | None:
    return session.scalar(select(Job).where(Job.principal == principal, Job.idempotency_key == key))


def admit_job(session: Session, dataset_id: str, job: Job, charge: JobCharge) -> Job:
    """Admit ``job`` with ``charge`` atomically, or raise :class:`BudgetExceeded`.

    With an idempotency key already used by the same principal, returns the earlier job (and
    charges nothing) or raises :class:`IdempotencyConflict` if the request differs. The check is
    made under the dataset lock, so concurrent retries of one request charge once.
    Must be called inside ``session.begin()``; the caller commits.
    """
    dataset = lock_dataset(session, dataset_id)
    if dataset is None:
        raise LookupError(dataset_id)
    if job.idempotency_key is not None:
        earlier = find_idempotent(session, job.principal, job.idempotency_key)
        if earlier is not None:
            if earlier.request_hash != job.request_hash:
                raise IdempotencyConflict(job.idempotency_key)
            return earlier
    budget, spent = budget_of(dataset), spent_of(dataset)
    decision = privacy_filter.admit(budget, spent, charge.rdp, charge.pure_epsilon)
    if not decision.admitted:
        raise BudgetExceeded(decision.reason, privacy_filter.remaining_epsilon(budget, spent))
    cap = principal_cap(session, dataset_id, job.principal)
    if cap is not None:
        capped = privacy_filter.Budget(epsilon=cap, delta=budget.delta)
        mine = principal_spent(session, dataset_id, job.principal)
        decision = privacy_filter.admit(capped, mine, charge.rdp, charge.pure_epsilon)
        if not decision.admitted:
            raise BudgetExceeded(
                f"your grant on this dataset is capped at ε = {cap:.6g}: {decision.reason}",
                min(
                    privacy_filter.remaining_epsilon(capped, mine),
                    privacy_filter.remaining_epsilon(budget, spent),
                ),
            )
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
            event=dict(charge.event),
        )
    )
    after = spent.plus(charge.rdp, charge.pure_epsilon)
    dataset.spent_rdp = curve_to_json(after.rdp)
    dataset.spent_pure_epsilon = after.pure_epsilon
    return job


def refund_job(session: Session, job: Job) -> bool:
    """Append a refund for ``job``'s charge (once). Caller guarantees the data was never read.

    Must be called inside a transaction; locks the dataset row.
    """
    dataset = lock_dataset(session, job.dataset_id)
    assert dataset is not None
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
            event=dict(original.event),
        )
    )
    after = spent_of(dataset).plus(curve_from_json(original.rdp), original.pure_epsilon, sign=-1)
    dataset.spent_rdp = curve_to_json(after.rdp)
    dataset.spent_pure_epsilon = after.pure_epsilon
    return True


def cancel_or_refund_unread(session: Session, job_id: str, status: str, error: str | None) -> bool:
    """Move a job that no worker has read to ``status`` and refund it, atomically.

    The conditional UPDATE (status still ``queued`` and ``data_read_at`` NULL) races safely with
    a worker's claim: exactly one of them matches the row. Returns whether it happened.
    """
    result = session.execute(
        update(Job)
        .where(Job.id == job_id, Job.status == "queued", Job.data_read_at.is_(None))
        .values(status=status, error=error, finished_at=utcnow())
    )
    if result.rowcount != 1:
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


def principal_spent(session: Session, dataset_id: str, principal: str) -> privacy_filter.Spent:
    """What ``principal``'s own standing charges on the dataset add up to.

    A per-principal cap is a second filter over a subset of the charges; the dataset-wide filter
    still bounds the whole interaction, the cap only refuses more (Sage/PrivateKube-style blocks).
    """
    spent = privacy_filter.Spent.nothing()
    for row in session.scalars(
        select(Charge).where(Charge.dataset_id == dataset_id, Charge.principal == principal)
    ):
        sign = 1 if row.kind == "charge" else -1
        spent = spent.plus(curve_from_json(row.rdp), row.pure_epsilon, sign)
    return spent


@dataclass(frozen=True)
class LedgerTotals:
    rdp: tuple[float, ...]
    pure_epsilon: float
    jobs_charged: int


def recompute_totals(session: Session, dataset_id: str) -> LedgerTotals:
    """The dataset's spend recomputed from its charge rows (the audit of the cached total)."""
    rdp = [0.0] * len(ORDERS)
    pure = 0.0
    charged: set[str] = set()
    for row in session.scalars(
        select(Charge).where(Charge.dataset_id == dataset_id).order_by(Charge.id)
    ):
        sign = 1 if row.kind == "charge" else -1
        for i, v in enumerate(curve_from_json(row.rdp)):
            rdp[i] += sign * v
        pure += sign * (row.pure_epsilon or 0.0)
        if sign > 0:
            charged.add(row.job_id)
        else:
            charged.discard(row.job_id)
    return LedgerTotals(rdp=tuple(rdp), pure_epsilon=pure, jobs_charged=len(charged))


def count_charged_jobs(session: Session, dataset_id: str) -> int:
    charges = session.scalar(
        select(func.count()).where(Charge.dataset_id == dataset_id, Charge.kind == "charge")
    )
    refunds = session.scalar(
        select(func.count()).where(Charge.dataset_id == dataset_id, Charge.kind == "refund")
    )
    return int(charges or 0) - int(refunds or 0)
