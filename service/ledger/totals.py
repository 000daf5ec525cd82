"""The ledger's running totals: what each dataset, and each principal on it, has spent.

A total is the sum of the *standing* charges (a charge whose job has no refund row) of one scope
— the whole dataset (:data:`DATASET`) or one principal — kept in ``ledger_totals``. It is read
in O(1) by admission, the estimate, ``GET …/budget``, the grants list and the metrics, instead
of summing the dataset's whole ledger at every request (that sum grew with every job).

**Exactly the rows, not approximately.** Totals are written only inside the transactions that
write the charge rows, under the dataset's lock (``admission.lock_dataset``), so writers of one
dataset are serialised and a charge's row id order is its admission order:

- a charge adds its cost to both of its scopes (:func:`add_charge`) — the same floating-point
  additions, in the same order, as :meth:`Spent.of` over the standing rows in id order;
- a refund recomputes both of its scopes from the rows (:func:`rebuild`), never subtracting (a
  curve holding +∞ would meet ∞ − ∞), which again is :meth:`Spent.of` over the rows.

Hence a stored total is bit-for-bit the standing rows summed again in ledger order, which
:func:`recompute` does and ``GET /v1/datasets/{id}/ledger`` compares for equality
(:mod:`service.ledger.audit`; ``tests/live/test_ledger_totals.py`` drives random charge and
refund sequences on both backends and checks equality after every step). A missing row is the
empty sum (a principal who never spent, a dataset registered before any charge).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy import Row, select
from sqlalchemy.orm import Session

from service.db.models import Charge, LedgerTotal
from service.ledger import filter as privacy_filter

#: The scope of a dataset's own total (a principal's scope is its name, never empty).
DATASET = ""


def curve_to_json(curve: Sequence[float]) -> list[float | None]:
    """+∞ (and NaN, read as +∞: never optimistic) become null in JSON."""
    return [None if not math.isfinite(v) else float(v) for v in curve]


def curve_from_json(curve: Sequence[float | None]) -> tuple[float, ...]:
    return tuple(math.inf if v is None else float(v) for v in curve)


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


# The columns a standing charge's cost needs: rows, not ORM objects.
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


@dataclass(frozen=True)
class Total:
    """One scope's standing spend and how many charges it sums."""

    spent: privacy_filter.Spent
    charges: int

    @staticmethod
    def nothing() -> Total:
        return Total(privacy_filter.Spent.nothing(), 0)

    @staticmethod
    def of(costs: Iterable[privacy_filter.Cost]) -> Total:
        spent, count = privacy_filter.Spent.nothing(), 0
        for cost in costs:
            spent, count = spent.plus(cost), count + 1
        return Total(spent, count)


def _total(row: LedgerTotal | None) -> Total:
    if row is None:
        return Total.nothing()
    return Total(
        privacy_filter.Spent(
            rdp=curve_from_json(row.rdp),
            mu_squared=row.mu_squared,
            all_gaussian=row.all_gaussian,
            pure_epsilon=row.pure_epsilon,
        ),
        row.charges,
    )


def _store(session: Session, dataset_id: str, scope: str, total: Total) -> None:
    _write(session, session.get(LedgerTotal, (dataset_id, scope)), dataset_id, scope, total)


def _write(
    session: Session, row: LedgerTotal | None, dataset_id: str, scope: str, total: Total
) -> None:
    if row is None:
        row = LedgerTotal(dataset_id=dataset_id, scope=scope)
        session.add(row)
    row.rdp = curve_to_json(total.spent.rdp)
    row.mu_squared = total.spent.mu_squared
    row.all_gaussian = total.spent.all_gaussian
    row.pure_epsilon = total.spent.pure_epsilon
    row.charges = total.charges


def read(session: Session, dataset_id: str, scope: str = DATASET) -> Total:
    """The stored total of one scope (the dataset's by default)."""
    return _total(session.get(LedgerTotal, (dataset_id, scope)))


def read_scopes(session: Session, dataset_id: str, scopes: Iterable[str]) -> dict[str, Total]:
    """The stored totals of several scopes of one dataset, in one statement."""
    wanted = set(scopes)
    rows = session.scalars(
        select(LedgerTotal).where(
            LedgerTotal.dataset_id == dataset_id, LedgerTotal.scope.in_(wanted)
        )
    ).all()
    found = {row.scope: _total(row) for row in rows}
    return {scope: found.get(scope, Total.nothing()) for scope in wanted}


def read_datasets(session: Session, dataset_ids: Sequence[str]) -> dict[str, Total]:
    """The dataset-scope totals of several datasets, in one statement."""
    rows = session.scalars(
        select(LedgerTotal).where(
            LedgerTotal.dataset_id.in_(list(dataset_ids)), LedgerTotal.scope == DATASET
        )
    ).all()
    found = {row.dataset_id: _total(row) for row in rows}
    return {i: found.get(i, Total.nothing()) for i in dataset_ids}


def add_charge(
    session: Session, dataset_id: str, principal: str, cost: privacy_filter.Cost
) -> None:
    """Add a new charge to the dataset's and its principal's totals. The caller holds the
    dataset's lock and inserts the charge row in the same transaction."""
    for scope in (DATASET, principal):
        row = session.get(LedgerTotal, (dataset_id, scope))
        before = _total(row)
        _write(session, row, dataset_id, scope, Total(before.spent.plus(cost), before.charges + 1))


def rebuild(session: Session, dataset_id: str, principal: str) -> None:
    """Recompute the dataset's and ``principal``'s totals from the rows (after a refund). The
    caller holds the dataset's lock; pending rows must be flushed."""
    rows = standing_charges(session, dataset_id)
    _store(session, dataset_id, DATASET, Total.of(cost_of(r) for r in rows))
    _store(
        session,
        dataset_id,
        principal,
        Total.of(cost_of(r) for r in rows if r.principal == principal),
    )


def recompute(session: Session, dataset_id: str) -> dict[str, Total]:
    """Every scope's total summed again from the standing rows in ledger order (the audit)."""
    rows = standing_charges(session, dataset_id)
    by_principal: dict[str, list[privacy_filter.Cost]] = defaultdict(list)
    for row in rows:
        by_principal[row.principal].append(cost_of(row))
    totals = {DATASET: Total.of(cost_of(r) for r in rows)}
    totals.update({who: Total.of(costs) for who, costs in by_principal.items()})
    return totals


def stored(session: Session, dataset_id: str) -> dict[str, Total]:
    """Every scope's stored total of one dataset (the audit's other side)."""
    rows = session.scalars(select(LedgerTotal).where(LedgerTotal.dataset_id == dataset_id))
    return {row.scope: _total(row) for row in rows}
