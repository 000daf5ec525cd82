"""What a dataset's budget stands at, for one caller, from ONE read of its ledger rows.

``GET /v1/datasets/{id}/budget`` is the route analysts poll most. It used to issue seven
statements (the charges twice, two counts, the cap, the grant); this module reads the dataset's
charge rows once and derives everything from them:

- the standing charges (a charge whose job has no refund row), in ledger order;
- the dataset's spend (the sum of every standing charge) and the caller's own (the standing
  charges whose ``principal`` is the caller) — both recomputed from the rows, never from the
  cached total, exactly as admission does (:func:`service.ledger.admission.live_spent`);
- ``jobs_charged``: the number of standing charges.

The numbers are the ones admission and the old statements gave (``tests/api/test_budget_api.py``
checks them against the ledger); only the number of round trips changed.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from service.ledger import filter as privacy_filter
from service.ledger.admission import cost_of, standing_charges


@dataclass(frozen=True)
class Standing:
    """The dataset's standing spend and the caller's share of it."""

    spent: privacy_filter.Spent
    yours: privacy_filter.Spent
    jobs_charged: int


def standing(session: Session, dataset_id: str, principal: str) -> Standing:
    """The dataset's standing charges summed, and ``principal``'s own (one query)."""
    live = standing_charges(session, dataset_id)
    costs = [(row.principal, cost_of(row)) for row in live]
    return Standing(
        spent=privacy_filter.Spent.of(cost for _, cost in costs),
        yours=privacy_filter.Spent.of(cost for who, cost in costs if who == principal),
        jobs_charged=len(live),
    )
