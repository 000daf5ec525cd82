"""What a dataset's budget stands at, for one caller: two running totals, one statement.

``GET /v1/datasets/{id}/budget`` is the route analysts poll most. It reads the dataset's total
and the caller's own from ``ledger_totals`` (service/ledger/totals.py: exactly the standing
charges summed, as admission reads them) — O(1) in the length of the ledger:

- the dataset's spend and ``jobs_charged`` (the number of standing charges);
- the caller's own spend (the standing charges whose ``principal`` is the caller).

``tests/api/test_budget_api.py`` checks the numbers against the ledger's rows.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from service.ledger import filter as privacy_filter
from service.ledger import totals


@dataclass(frozen=True)
class Standing:
    """The dataset's standing spend and the caller's share of it."""

    spent: privacy_filter.Spent
    yours: privacy_filter.Spent
    jobs_charged: int


def standing(session: Session, dataset_id: str, principal: str) -> Standing:
    """The dataset's standing total and ``principal``'s own (one statement)."""
    found = totals.read_scopes(session, dataset_id, [totals.DATASET, principal])
    dataset = found[totals.DATASET]
    return Standing(spent=dataset.spent, yours=found[principal].spent, jobs_charged=dataset.charges)
