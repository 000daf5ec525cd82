"""Turning a job's dp_accounting event into the RDP curve the ledger charges.

Every charge is the job's Rényi-DP curve ρ(α) on one fixed grid Λ of orders, computed by
``dp_accounting``'s RDP accountant under REPLACE_ONE adjacency. One accountant for the whole
ledger (never mix accountants on one ledger: docs/ledger.md#the-z-convention).

Convention (docs/ledger.md#the-z-convention; dp-accounting 0.6.0, upstream issue #378): optimizers
compute the
replace-one L2 sensitivity Δ of what they release themselves and hand the accountant the noise
multiplier σ/Δ; the RDP accountant does not double it. A test pins the Gaussian case
ρ(α) = α/(2 z²) so an upstream change cannot silently move our charges.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Sequence
from typing import Any

from dp_accounting import NeighboringRelation, dp_event
from dp_accounting.rdp import rdp_privacy_accountant

from service.privacy.output_perturbation import pure_dp_event

__all__ = [
    "ORDERS",
    "charge_curve",
    "event_from_json",
    "event_to_json",
    "pure_dp_event",
    "rdp_curve",
]

#: PrivateKube's 13 orders (docs/ledger.md#the-grid-of-orders). Small on purpose: the filter pays
#: log|Λ| (see filter.py).
ORDERS: tuple[float, ...] = (1.5, 1.75, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 16.0, 32.0, 64.0, 1e6)


#: Events whose RDP at huge orders costs O(α) terms (dp-accounting sums over α for them).
_EXPENSIVE_AT_HUGE_ORDERS = (
    dp_event.SampledWithoutReplacementDpEvent,
    dp_event.SampledWithReplacementDpEvent,
    dp_event.PoissonSampledDpEvent,
)
_HUGE_ORDER = 1e3


def rdp_curve(event: dp_event.DpEvent) -> list[float]:
    """ρ(α) for α in :data:`ORDERS` of ``event`` under REPLACE_ONE adjacency.

    For events with subsampling, dp-accounting's cost grows linearly in α, so at α = 10⁶ the
    curve is charged as +inf: a valid (conservative) upper bound that only means such a job
    cannot be admitted through that order — which a Gaussian-noise job never could anyway.
    Raises ``ValueError`` when the accountant cannot account the event (e.g. Poisson sampling
    under REPLACE_ONE), so such a job is never admitted.
    """
    cheap_orders = [a for a in ORDERS if a <= _HUGE_ORDER or not _has_expensive(event)]
    accountant = rdp_privacy_accountant.RdpAccountant(cheap_orders, NeighboringRelation.REPLACE_ONE)
    if not accountant.supports(event):
        raise ValueError(f"the RDP accountant cannot account {type(event).__name__}")
    accountant.compose(event)
    values = dict(zip(cheap_orders, (float(v) for v in accountant.rdp), strict=True))
    # RDP is ≥ 0; dp-accounting can round a sampled event's tiny RDP slightly below 0, and
    # a charge must never credit the budget. NaN reads as +inf (never optimistic).
    return [
        max(values[a], 0.0) if a in values and math.isfinite(values[a]) else math.inf
        for a in ORDERS
    ]


def charge_curve(
    event: dp_event.DpEvent, parallel_events: Sequence[dp_event.DpEvent] = ()
) -> list[float]:
    """The curve the ledger charges for a plan: ``rdp_curve(event)``, or for a declared
    parallel composition the pointwise maximum of its parts' curves (see ReleasePlan)."""
    if not parallel_events:
        return rdp_curve(event)
    curves = [rdp_curve(e) for e in parallel_events]
    return [max(values) for values in zip(*curves, strict=True)]


def _has_expensive(event: dp_event.DpEvent) -> bool:
    if isinstance(event, _EXPENSIVE_AT_HUGE_ORDERS):
        return True
    children = getattr(event, "events", None) or [getattr(event, "event", None)]
    return any(isinstance(c, dp_event.DpEvent) and _has_expensive(c) for c in children)


_EVENT_MODULE = "dp_accounting.dp_event"


def event_to_json(event: dp_event.DpEvent) -> dict[str, Any]:
    """A JSON-able description of ``event`` for audit (``to_named_tuple`` mapped to dicts)."""
    return _named_tuple_to_json(event.to_named_tuple())


def _named_tuple_to_json(value: Any) -> Any:
    if hasattr(value, "_fields"):
        return {field: _named_tuple_to_json(getattr(value, field)) for field in value._fields}
    if isinstance(value, (list, tuple)):
        return [_named_tuple_to_json(v) for v in value]
    return value


def event_from_json(payload: dict[str, Any]) -> dp_event.DpEvent:
    """Rebuild an event written by :func:`event_to_json`, accepting only dp_event classes.

    ``DpEvent.from_named_tuple`` would import whatever module a payload names; here only classes
    of :mod:`dp_accounting.dp_event` that subclass ``DpEvent`` are ever instantiated.
    """
    if payload.get("module_name") != _EVENT_MODULE:
        raise ValueError("event payload names a module other than dp_accounting.dp_event")
    cls = getattr(importlib.import_module(_EVENT_MODULE), str(payload.get("class_name")), None)
    if not (isinstance(cls, type) and issubclass(cls, dp_event.DpEvent)):
        raise ValueError("event payload names an unknown DpEvent class")
    kwargs = {
        key: _value_from_json(value)
        for key, value in payload.items()
        if key not in ("module_name", "class_name")
    }
    return cls(**kwargs)


def _value_from_json(value: Any) -> Any:
    if isinstance(value, dict) and "class_name" in value:
        return event_from_json(value)
    if isinstance(value, list):
        return [_value_from_json(v) for v in value]
    return value
