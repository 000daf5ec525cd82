"""Retiring a dataset (admins: its budget is final) and withdrawing one no job was ever
submitted on (owners, admins: a mistake that cost nothing is forgiven; its row, grants and
claims go, a :class:`~service.db.models.DatasetWithdrawal` record stays).
"""

from __future__ import annotations

from sqlalchemy import delete, select
from sqlalchemy.orm import Session, sessionmaker

from service.db.models import (
    Charge,
    Dataset,
    DatasetWithdrawal,
    Grant,
    Job,
    LedgerTotal,
    SourceClaim,
    utcnow,
)
from service.domain.principals import Actor
from service.errors import DatasetHasCharges, DatasetNotFound, DatasetRetired
from service.ledger.admission import lock_dataset

# --------------------------------------------------------------------------------------------
# Retirement
# --------------------------------------------------------------------------------------------


def retire_dataset(
    *, sessions: sessionmaker[Session], principal: Actor, dataset_id: str
) -> Dataset:
    """Retire a dataset (admins only; :class:`DatasetNotFound` for everyone else).

    Takes the dataset row lock that admission takes, so no job is admitted after this commits;
    the budget spent so far is final. The dataset keeps its claims: the same location or content
    can never be registered again. Idempotent (a second call keeps the first ``retired_at``).
    """
    if not principal.is_admin:
        raise DatasetNotFound(dataset_id)
    with sessions.begin() as session:
        dataset = lock_dataset(session, dataset_id)
        if dataset is None:
            raise DatasetNotFound(dataset_id)
        if dataset.retired_at is None:
            dataset.retired_at = utcnow()
    return dataset


def ensure_not_retired(session: Session, dataset_id: str) -> None:
    """Raise :class:`DatasetRetired` if the dataset is retired. Called by job submission inside
    the admission transaction, after the dataset row is locked, so it races safely with
    :func:`retire_dataset`."""
    retired_at = session.scalar(select(Dataset.retired_at).where(Dataset.id == dataset_id))
    if retired_at is not None:
        raise DatasetRetired(dataset_id)


# --------------------------------------------------------------------------------------------
# Withdrawal
# --------------------------------------------------------------------------------------------


def withdraw_dataset(
    *, sessions: sessionmaker[Session], principal: Actor, dataset_id: str
) -> DatasetWithdrawal:
    """Withdraw a dataset on which no job was ever submitted: its owner's (or an admin's)
    way back from a registration mistake (a wrong label value, the wrong column, the wrong
    budget) that would otherwise lock the source's only budget.

    Under the dataset row lock that admission takes (so no job is admitted meanwhile, and one
    admitted before makes this refuse): if any job or ledger row names the dataset, raises
    :class:`DatasetHasCharges` (the ledger is append-only and the budget spent is final — an
    admin may retire it instead). Otherwise deletes its claims (location and content: the
    source may be registered again, corrected), its grants, its ledger totals and the dataset
    row, and records a :class:`~service.db.models.DatasetWithdrawal` for admins — all in one
    transaction. :class:`DatasetNotFound` for anyone but its owner and admins."""
    with sessions.begin() as session:
        dataset = lock_dataset(session, dataset_id)
        if dataset is None or not (principal.is_admin or dataset.owner == principal.name):
            raise DatasetNotFound(dataset_id)
        job = session.scalar(select(Job.id).where(Job.dataset_id == dataset_id).limit(1))
        charge = session.scalar(select(Charge.id).where(Charge.dataset_id == dataset_id).limit(1))
        if job is not None or charge is not None:
            raise DatasetHasCharges(dataset_id)
        record = DatasetWithdrawal(
            dataset_id=dataset.id,
            name=dataset.name,
            owner=dataset.owner,
            source_uri=dataset.source_uri,
            source_path=dataset.source_path,
            fingerprint=dataset.fingerprint,
            n_rows=dataset.n_rows,
            epsilon=dataset.epsilon,
            delta=dataset.delta,
            registered_at=dataset.created_at,
            withdrawn_by=principal.name,
            withdrawn_at=utcnow(),
        )
        for table in (SourceClaim, Grant, LedgerTotal):
            session.execute(delete(table).where(table.dataset_id == dataset_id))
        session.delete(dataset)
        session.add(record)
    return record


def list_withdrawals(session: Session) -> list[DatasetWithdrawal]:
    """Every withdrawal, oldest first (the admins' audit view)."""
    order = (DatasetWithdrawal.withdrawn_at, DatasetWithdrawal.id)
    return list(session.scalars(select(DatasetWithdrawal).order_by(*order)))
