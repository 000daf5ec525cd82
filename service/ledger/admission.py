"""The ledger's transactions: atomic admission of a job with its charge, refunds, audits.

Admission is one transaction (docs/ledger.md#admission-is-one-transaction): lock the dataset row
(``SELECT … FOR UPDATE`` on
PostgreSQL; on SQLite every transaction already began with ``BEGIN IMMEDIATE``, see
db/session.py), read the running totals (service/ledger/totals.py: exactly the standing rows
summed, maintained under this lock), ask the filter, insert the job and its charge, add it to
the totals, commit. Two admissions on one dataset therefore never interleave, so no
interleaving overspends. Charges are append-only; a refund is a new row of kind ``refund``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.db import job_status
from service.db.models import Charge, Dataset, Grant, Job
from service.errors import DatasetNotFound
from service.ledger import filter as privacy_filter
from service.ledger import totals
from service.ledger.totals import curve_to_json


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
        return privacy_filter.Cost(
            rdp=tuple(self.rdp), mu=self.mu, pure_epsilon=self.pure_epsilon, delta=self.delta
        )


def budget_of(dataset: Dataset) -> privacy_filter.Budget:
    return privacy_filter.Budget(epsilon=dataset.epsilon, delta=dataset.delta)


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
    stored = principal_cap(session, dataset.id, principal)
    cap = binding_cap(stored, budget)
    scopes = totals.read_scopes(
        session, dataset.id, [totals.DATASET] + ([principal] if cap is not None else [])
    )
    spent = scopes[totals.DATASET].spent
    decision = privacy_filter.admit(budget, spent, cost)
    if not decision.admitted:
        raise BudgetExceeded(decision.reason, privacy_filter.remaining_epsilon(budget, spent))
    if cap == 0.0:
        raise BudgetExceeded(
            f"your grant on this dataset is capped at ε = {stored or 0.0:.6g}, which admits no job",
            0.0,
        )
    if cap is not None:
        capped = privacy_filter.Budget(epsilon=cap, delta=budget.delta)
        mine = scopes[principal].spent
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
    check_admissible(session, dataset, job.principal, cost)
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
    totals.add_charge(session, dataset_id, job.principal, cost)
    return job


def refund_job(session: Session, job: Job) -> bool:
    """Append a refund for ``job``'s charge (once). Caller guarantees the data was never read.

    Must be called inside a transaction; locks the dataset row. The totals are then the
    standing charges summed again (no subtraction: :func:`service.ledger.totals.rebuild`).
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
    totals.rebuild(session, dataset.id, original.principal)
    return True


def cancel_or_refund_unread(
    session: Session, job_id: str, status: job_status.Ending, error: str | None
) -> bool:
    """Move a job that no worker has read to ``status`` and refund it, atomically.

    :func:`service.db.job_status.end_unread` races safely with a worker's claim: exactly one of
    them matches the row. Returns whether it happened.
    """
    if not job_status.end_unread(session, job_id, status, error):
        return False
    job = session.get(Job, job_id)
    assert job is not None
    refund_job(session, job)
    return True


def binding_cap(cap: float | None, budget: privacy_filter.Budget) -> float | None:
    """The ε cap admission checks for a grant's stored ``cap``, whatever was stored (a cap is
    validated on the way in, but rows of older rules may hold anything):

    - None when there is no cap, or when it is at least ε_B (+∞ included): the principal's
      charges are among the dataset's, which the dataset's filter keeps (ε_B, δ_B)-DP, hence
      (cap, δ_B)-DP — what the cap promises holds without its own filter, whose thresholds are
      then never computed at an ε (1e12, +∞) where the Gaussian calibration fails;
    - 0.0 (admits nothing) for a NaN, or a cap at most 2H (``SECURE_NOISE_H``): the filter runs
      at ε − 2H, and no job fits a budget of ε ≤ 0;
    - the cap itself otherwise."""
    if cap is None:
        return None
    if math.isnan(cap) or cap <= 2.0 * privacy_filter.SECURE_NOISE_H:
        return 0.0
    return None if cap >= budget.epsilon else float(cap)


def principal_cap(session: Session, dataset_id: str, principal: str) -> float | None:
    """The ε cap of ``principal``'s grant on the dataset, if any (owners have none)."""
    return session.scalar(
        select(Grant.epsilon_cap).where(
            Grant.dataset_id == dataset_id, Grant.principal == principal
        )
    )
