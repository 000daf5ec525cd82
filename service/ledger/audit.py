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

import threading
import time
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from service.db.models import Charge, Dataset
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
    return _audit(totals.stored(session, dataset.id), totals.recompute(session, dataset.id))


def _audit(stored: dict[str, totals.Total], again: dict[str, totals.Total]) -> LedgerAudit:
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


class AuditCache:
    """The ledger pages' audit, recomputed only when the ledger may have changed.

    ``GET /v1/datasets/{id}/ledger`` shows the audit on every page; recomputing it from all the
    rows on each page made paging through n rows cost O(n²/limit). The ledger is append-only, so
    the recomputation depends only on its rows: an audit is reused while the dataset's last
    ledger row id and its stored totals (read afresh for every page, in the page's snapshot) are
    the same, for at most ``max_age`` seconds (so an edit of an old row in place, which changes
    neither, still shows within that time). Bounded: at most ``capacity`` datasets remembered.
    Thread-safe; held by the app (no global state).
    """

    def __init__(self, capacity: int = 256, max_age: float = 60.0) -> None:
        self.capacity = capacity
        self.max_age = max_age
        self._entries: OrderedDict[str, tuple[Hashable, float, LedgerAudit]] = OrderedDict()
        self._lock = threading.Lock()
        self.recomputed = 0

    def audit(self, session: Session, dataset: Dataset) -> LedgerAudit:
        stored = totals.stored(session, dataset.id)
        last_row = session.scalar(
            select(func.max(Charge.id)).where(Charge.dataset_id == dataset.id)
        )
        key = (last_row, _fingerprint(stored))
        now = time.monotonic()
        with self._lock:
            cached = self._entries.get(dataset.id)
            if cached is not None and cached[0] == key and now - cached[1] < self.max_age:
                self._entries.move_to_end(dataset.id)
                return cached[2]
        checked = _audit(stored, totals.recompute(session, dataset.id))
        with self._lock:
            self.recomputed += 1
            self._entries[dataset.id] = (key, now, checked)
            self._entries.move_to_end(dataset.id)
            while len(self._entries) > self.capacity:
                self._entries.popitem(last=False)
        return checked


def _fingerprint(stored: dict[str, totals.Total]) -> Hashable:
    return tuple(
        sorted(
            (
                scope,
                t.charges,
                t.spent.rdp,
                t.spent.mu_squared,
                t.spent.all_gaussian,
                t.spent.pure_epsilon,
            )
            for scope, t in stored.items()
        )
    )
