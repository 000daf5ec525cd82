"""The ledger's self-check: the dataset's cached spend against its charge rows summed again.

Admission keeps a cached total on the dataset row (written in the same transaction as every
charge and refund) and never trusts it: it recomputes from the rows. The audit shows both and
whether they agree — the evidence an owner or auditor can check through
``GET /v1/datasets/{id}/ledger``. Read both in ONE snapshot
(``ApiSessions.snapshot``); across snapshots a concurrent admission would show a false
disagreement.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sqlalchemy.orm import Session

from service.db.models import Dataset
from service.ledger.admission import LedgerTotals, recompute_totals, spent_of


@dataclass(frozen=True)
class LedgerAudit:
    cached_rdp: tuple[float, ...]
    cached_pure_epsilon: float
    recomputed: LedgerTotals
    consistent: bool


def audit(session: Session, dataset: Dataset) -> LedgerAudit:
    """Compare the cached totals with the rows. ``isclose``, never a difference: +∞ equals +∞
    (∞ − ∞ would be NaN); relative 1e-9 for the Rényi curve (sums in another order), absolute
    1e-9 for the pure ε."""
    cached = spent_of(dataset)
    totals = recompute_totals(session, dataset.id)
    consistent = all(
        math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
        for a, b in zip(cached.rdp, totals.rdp, strict=True)
    ) and math.isclose(cached.pure_epsilon, totals.pure_epsilon, rel_tol=0.0, abs_tol=1e-9)
    return LedgerAudit(
        cached_rdp=cached.rdp,
        cached_pure_epsilon=cached.pure_epsilon,
        recomputed=totals,
        consistent=consistent,
    )
