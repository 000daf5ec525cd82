"""The ledger's self-check: the running totals against the charge rows summed again.

Admission reads the running totals (service/ledger/totals.py), written in the same transaction
as every charge and refund, under the dataset's lock. The audit recomputes every scope — the
dataset's and each principal's — from the standing rows in ledger order and checks that the
stored totals are *equal* to them: the same additions in the same order give the same floats,
so any difference (a lost update, a bad migration, a hand edit) shows as ``consistent: false``
in ``GET /v1/datasets/{id}/ledger``. Read both sides in ONE snapshot
(``ApiSessions.snapshot``); across snapshots a concurrent admission would show a false
disagreement.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from service.db.models import Dataset
from service.ledger import totals
from service.ledger.filter import Spent


@dataclass(frozen=True)
class LedgerTotals:
    rdp: tuple[float, ...]
    pure_epsilon: float
    jobs_charged: int


@dataclass(frozen=True)
class LedgerAudit:
    cached_rdp: tuple[float, ...]
    cached_pure_epsilon: float
    recomputed: LedgerTotals
    consistent: bool


def recompute_totals(session: Session, dataset_id: str) -> LedgerTotals:
    """The dataset's spend recomputed from its charge rows."""
    total = totals.recompute(session, dataset_id)[totals.DATASET]
    return LedgerTotals(total.spent.rdp, total.spent.pure_epsilon, total.charges)


def _same(a: totals.Total, b: totals.Total) -> bool:
    """Equal sums (+∞ equals +∞; NaN never occurs: costs are finite or +∞ and never
    subtracted)."""
    return a.charges == b.charges and _same_spent(a.spent, b.spent)


def _same_spent(a: Spent, b: Spent) -> bool:
    return (
        a.rdp == b.rdp
        and a.mu_squared == b.mu_squared
        and a.all_gaussian == b.all_gaussian
        and a.pure_epsilon == b.pure_epsilon
    )


def audit(session: Session, dataset: Dataset) -> LedgerAudit:
    """Compare every stored total of the dataset with the rows summed again."""
    stored = totals.stored(session, dataset.id)
    again = totals.recompute(session, dataset.id)
    nothing = totals.Total.nothing()
    consistent = all(
        _same(stored.get(scope, nothing), again.get(scope, nothing))
        for scope in set(stored) | set(again)
    )
    mine, theirs = stored.get(totals.DATASET, nothing), again[totals.DATASET]
    return LedgerAudit(
        cached_rdp=mine.spent.rdp,
        cached_pure_epsilon=mine.spent.pure_epsilon,
        recomputed=LedgerTotals(theirs.spent.rdp, theirs.spent.pure_epsilon, theirs.charges),
        consistent=consistent,
    )
