"""The budget filter's arithmetic, and the accountant's answers pinned for known cases."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dp_accounting import dp_event
from hypothesis import given, settings
from hypothesis import strategies as st

from service.ledger import filter as f
from service.ledger.accounting import (
    ORDERS,
    event_from_json,
    event_to_json,
    pure_dp_event,
    rdp_curve,
)


def gaussian_curve(z: float) -> list[float]:
    return rdp_curve(dp_event.GaussianDpEvent(noise_multiplier=z))


def test_gaussian_rdp_curve_is_pinned() -> None:
    """ρ(α) = α/(2z²) for the Gaussian mechanism with z = σ/Δ (no doubling under REPLACE_ONE:
    DESIGN §2, dp-accounting 0.6.0 issue #378). If upstream changes this, our charges move."""
    z = 1.7
    assert gaussian_curve(z) == pytest.approx([a / (2 * z * z) for a in ORDERS], rel=1e-12)


def test_pure_curve_is_randomized_response() -> None:
    """Binary RR at ε: ρ(α) = log(p^α q^(1−α) + q^α p^(1−α))/(α−1), p = e^ε/(1+e^ε)."""
    eps = 0.8
    p = math.exp(eps) / (1 + math.exp(eps))
    q = 1 - p
    expected = [math.log(p**a * q ** (1 - a) + q**a * p ** (1 - a)) / (a - 1) for a in ORDERS[:-1]]
    got = rdp_curve(pure_dp_event(eps))
    assert got[:-1] == pytest.approx(expected, rel=1e-9)
    assert all(r <= eps + 1e-12 for r in got)  # never above the pure-DP bound ρ ≤ ε
    assert got[-1] == pytest.approx(eps, rel=1e-4)


def test_event_json_round_trip_and_refuses_foreign_modules() -> None:
    event = dp_event.ComposedDpEvent(
        [dp_event.GaussianDpEvent(2.0), dp_event.SelfComposedDpEvent(pure_dp_event(0.5), 3)]
    )
    assert event_from_json(event_to_json(event)) == event
    with pytest.raises(ValueError):
        event_from_json({"module_name": "os", "class_name": "system", "command": "true"})
    with pytest.raises(ValueError):
        event_from_json({"module_name": "dp_accounting.dp_event", "class_name": "ORDERS"})


def test_threshold_matches_cks_conversion() -> None:
    """Admitting exactly up to B_α means the composed curve converts to (ε_B, δ_B/|Λ|) at α."""
    budget = f.Budget(epsilon=2.0, delta=1e-5)
    for alpha in ORDERS:
        rho = f.order_threshold(alpha, budget)
        curve = [rho if a == alpha else math.inf for a in ORDERS]
        assert f.rdp_to_epsilon(curve, budget.delta) == pytest.approx(max(0.0, 2.0), abs=1e-9)


def test_union_bound_costs_log_orders() -> None:
    """Dropping the |Λ| factor would admit more: our threshold is strictly lower."""
    budget = f.Budget(epsilon=1.0, delta=1e-6)
    alpha = 8.0
    unpaid = (
        budget.epsilon
        - math.log((alpha - 1) / alpha)
        + (math.log(budget.delta) + math.log(alpha)) / (alpha - 1)
    )
    assert f.order_threshold(alpha, budget) == pytest.approx(unpaid - math.log(13) / 7)


def test_pure_dataset_uses_basic_composition() -> None:
    budget = f.Budget(epsilon=1.0, delta=0.0)
    spent = f.Spent.nothing()
    eps = 0.25
    curve = rdp_curve(pure_dp_event(eps))
    admitted = 0
    while f.admit(budget, spent, curve, eps).admitted:
        spent = spent.plus(curve, eps)
        admitted += 1
    assert admitted == 4
    refusal = f.admit(budget, spent, curve, eps)
    assert "remains" in refusal.reason
    assert not f.admit(budget, f.Spent.nothing(), gaussian_curve(1.0), None).admitted


def test_gaussian_jobs_admitted_until_budget() -> None:
    budget = f.Budget(epsilon=1.0, delta=1e-5)
    spent = f.Spent.nothing()
    curve = gaussian_curve(20.0)
    count = 0
    while f.admit(budget, spent, curve, None).admitted:
        spent = spent.plus(curve, None)
        count += 1
    assert count > 1
    assert f.spent_epsilon(budget, spent) <= budget.epsilon
    assert f.spent_epsilon(budget, spent.plus(curve, None)) > budget.epsilon


job_strategy = st.one_of(
    st.tuples(st.just("gauss"), st.floats(min_value=0.3, max_value=50.0)),
    st.tuples(st.just("pure"), st.floats(min_value=0.01, max_value=2.0)),
)


@settings(max_examples=150, deadline=None)
@given(
    eps_budget=st.floats(min_value=0.1, max_value=10.0),
    log_delta=st.floats(min_value=-12, max_value=-3),
    jobs=st.lists(st.tuples(job_strategy, st.booleans()), max_size=25),
)
def test_no_sequence_of_admissions_and_refunds_overspends(
    eps_budget: float, log_delta: float, jobs: list[tuple[tuple[str, float], bool]]
) -> None:
    """Whatever arrives, in whatever order, with refunds mixed in: the admitted set always
    converts to at most (ε_B, δ_B), and the running total equals the sum of its charges."""
    budget = f.Budget(epsilon=eps_budget, delta=10**log_delta)
    spent = f.Spent.nothing()
    ledger: list[tuple[list[float], float | None]] = []
    for (kind, value), refund in jobs:
        if kind == "gauss":
            curve, pure = gaussian_curve(value), None
        else:
            curve, pure = rdp_curve(pure_dp_event(value)), value
        if f.admit(budget, spent, curve, pure).admitted:
            spent = spent.plus(curve, pure)
            ledger.append((curve, pure))
            assert f.spent_epsilon(budget, spent) <= budget.epsilon * (1 + 1e-9)
            if refund:
                spent = spent.plus(curve, pure, sign=-1)
                ledger.pop()
    total = np.sum([c for c, _ in ledger], axis=0) if ledger else np.zeros(len(ORDERS))
    assert np.allclose(spent.rdp, total, rtol=1e-9, atol=1e-12)


def test_parallel_composition_charges_the_pointwise_max() -> None:
    from service.ledger.accounting import charge_curve

    a, b = dp_event.GaussianDpEvent(2.0), pure_dp_event(0.7)
    expected = np.maximum(rdp_curve(a), rdp_curve(b))
    assert charge_curve(dp_event.ComposedDpEvent([a, b]), (a, b)) == pytest.approx(expected)
    composed = rdp_curve(dp_event.ComposedDpEvent([a, b]))
    assert all(m <= c + 1e-12 for m, c in zip(expected, composed, strict=True))
