"""The budget filter's arithmetic, and the accountant's answers pinned for known cases."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dp_accounting import NeighboringRelation, dp_event
from dp_accounting.pld import pld_privacy_accountant
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import norm

from service.ledger import filter as f
from service.ledger.accounting import (
    ORDERS,
    event_from_json,
    event_to_json,
    pure_dp_event,
    rdp_curve,
)
from service.privacy.calibration import calibrate_noise_multiplier
from service.privacy.gdp import (
    event_mu,
    gaussian_steps_multiplier,
    gdp_delta,
    gdp_epsilon,
    gdp_mu,
    parallel_mu,
)


def gaussian_curve(z: float) -> list[float]:
    return rdp_curve(dp_event.GaussianDpEvent(noise_multiplier=z))


def test_gaussian_rdp_curve_is_pinned() -> None:
    """ρ(α) = α/(2z²) for the Gaussian mechanism with z = σ/Δ (no doubling under REPLACE_ONE:
    docs/ledger.md#the-z-convention, dp-accounting 0.6.0 issue #378). If upstream changes this,
    our charges move."""
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


def gaussian_cost(z: float) -> f.Cost:
    event = dp_event.GaussianDpEvent(noise_multiplier=z)
    return f.Cost(rdp=tuple(rdp_curve(event)), mu=event_mu(event))


def pure_cost(eps: float) -> f.Cost:
    return f.Cost(rdp=tuple(rdp_curve(pure_dp_event(eps))), pure_epsilon=eps)


def sampled_cost(z: float, steps: int) -> f.Cost:
    """A subsampled Gaussian job: Rényi only, +∞ at α = 10⁶."""
    event = dp_event.SelfComposedDpEvent(
        dp_event.SampledWithoutReplacementDpEvent(1000, 50, dp_event.GaussianDpEvent(z)), steps
    )
    return f.Cost(rdp=tuple(rdp_curve(event)), mu=event_mu(event))


def capacity(budget: f.Budget, costs: list[f.Cost]) -> int:
    """How many jobs, cycling through ``costs``, are admitted one by one until the first refusal."""
    spent, k = f.Spent.nothing(), 0
    while f.admit(budget, spent, costs[k % len(costs)]).admitted:
        spent, k = spent.plus(costs[k % len(costs)]), k + 1
    return k


def test_gdp_answers_are_pinned_and_match_pld() -> None:
    """δ(ε; μ) closed form, pinned; the PLD accountant (independent code; it doubles the
    Gaussian's sensitivity under REPLACE_ONE, so multiplier 2/μ) agrees on ε at δ."""
    assert gdp_mu(0.5, 1e-6) == pytest.approx(0.12410614903052825, rel=1e-12)
    assert gdp_mu(1.0, 1e-5) == pytest.approx(0.26805112321129376, rel=1e-12)
    assert gdp_delta(1.0, 1.0) == pytest.approx(0.12693673750664392, rel=1e-12)
    # δ(ε; μ) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2), written out independently
    mu, eps = 0.8, 0.6
    expected = norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2)
    assert gdp_delta(eps, mu) == pytest.approx(expected, rel=1e-10)
    for mu, delta in ((1.0, 1e-5), (0.3, 1e-6), (2.5, 1e-8)):
        pld = pld_privacy_accountant.PLDAccountant(
            NeighboringRelation.REPLACE_ONE, value_discretization_interval=1e-5
        )
        pld.compose(dp_event.GaussianDpEvent(noise_multiplier=2.0 / mu))
        assert gdp_epsilon(mu, delta) == pytest.approx(pld.get_epsilon(delta), rel=1e-4)
        assert gdp_delta(gdp_epsilon(mu, delta), mu) <= delta


def test_event_mu_is_exact_for_gaussian_compositions_only() -> None:
    g = dp_event.GaussianDpEvent(4.0)
    assert event_mu(g) == pytest.approx(0.25)
    assert event_mu(dp_event.SelfComposedDpEvent(g, 16)) == pytest.approx(1.0)
    both = dp_event.ComposedDpEvent([g, dp_event.GaussianDpEvent(3.0 / 4.0 * 4.0 / 1.0)])
    assert event_mu(both) == pytest.approx(math.sqrt(0.25**2 + (1 / 3.0) ** 2))
    assert event_mu(dp_event.NoOpDpEvent()) == 0.0
    assert event_mu(pure_dp_event(0.5)) is None
    sampled = dp_event.SampledWithoutReplacementDpEvent(100, 10, g)
    assert event_mu(sampled) is None
    assert event_mu(dp_event.ComposedDpEvent([g, sampled])) is None
    assert parallel_mu(dp_event.ComposedDpEvent([g, g]), (g, dp_event.GaussianDpEvent(2.0))) == 0.5


@pytest.mark.parametrize("steps", [1, 7, 100, 5000])
@pytest.mark.parametrize("epsilon", [0.1, 0.5, 2.0, 8.0])
def test_gaussian_steps_multiplier_is_exact(steps: int, epsilon: float) -> None:
    """T steps of multiplier z are √T/z-GDP: z meets (ε, δ) with equality up to rounding, and
    the old RDP calibration needed more noise (the issue's 1.07–1.14×)."""
    delta = 1e-6
    z = gaussian_steps_multiplier(steps, epsilon, delta)
    mu = math.sqrt(steps) / z
    assert gdp_delta(epsilon, mu) <= delta
    assert gdp_delta(epsilon, mu * (1 + 1e-9)) > delta * (1 - 1e-6)
    old = calibrate_noise_multiplier(
        lambda m: dp_event.SelfComposedDpEvent(dp_event.GaussianDpEvent(m), steps), epsilon, delta
    )
    assert old > z * 1.03


def test_thresholds_drop_useless_orders_and_convert_to_the_rdp_share() -> None:
    """Λ_B keeps the orders that can admit something; each B_α converts to
    (ε_B, δ_R/|Λ_B|) by CKS, and the union over Λ_B plus δ_G adds up to δ_B."""
    budget = f.Budget(epsilon=3.0, delta=1e-5)
    limits = f.thresholds(budget)
    kept = [ORDERS[i] for i, _ in limits.orders]
    assert kept == [6.0, 8.0, 16.0, 32.0, 64.0, 1e6]
    delta_r = (1 - f.GAUSSIAN_DELTA_SHARE) * budget.delta
    for i, limit in limits.orders:
        alpha = ORDERS[i]
        eps = (
            limit
            + math.log((alpha - 1) / alpha)
            - (math.log(delta_r / len(kept)) + math.log(alpha)) / (alpha - 1)
        )
        # at most ε_B: the rounding margin is taken off δ_R, never added (filter.py)
        assert budget.epsilon - 1e-5 < eps <= budget.epsilon
    assert gdp_delta(budget.epsilon, limits.mu) <= f.GAUSSIAN_DELTA_SHARE * budget.delta
    assert f.order_threshold(2.0, budget) is None


def test_capacity_table_of_the_issue() -> None:
    """(ε_B, δ_B) = (3, 1e-5), Gaussian jobs of (0.5, 1e-6): exact composition allows 33, the
    filter admits 32 (the old 13-order RDP filter 23)."""
    budget = f.Budget(epsilon=3.0, delta=1e-5)
    z = 1.0 / gdp_mu(0.5, 1e-6)
    exact = 0
    while gdp_delta(3.0, math.sqrt(exact + 1) / z) <= 1e-5:
        exact += 1
    assert exact == 33
    assert capacity(budget, [gaussian_cost(z)]) == 32
    dp_gd_like = gaussian_steps_multiplier(400, 0.5, 1e-6)
    cost = f.Cost(
        rdp=tuple(
            rdp_curve(dp_event.SelfComposedDpEvent(dp_event.GaussianDpEvent(dp_gd_like), 400))
        ),  # noqa: E501
        mu=math.sqrt(400) / dp_gd_like,
    )
    assert capacity(budget, [cost]) == 32


def test_pure_dataset_uses_basic_composition() -> None:
    budget = f.Budget(epsilon=1.0, delta=0.0)
    assert capacity(budget, [pure_cost(0.25)]) == 4
    assert capacity(f.Budget(epsilon=3.0, delta=0.0), [pure_cost(0.5)]) == 6
    spent = f.Spent.of([pure_cost(0.25)] * 4)
    assert "remains" in f.admit(budget, spent, pure_cost(0.25)).reason
    assert not f.admit(budget, f.Spent.nothing(), gaussian_cost(1.0)).admitted


def test_one_gaussian_job_reads_its_epsilon() -> None:
    """epsilon_spent of one Gaussian job of (ε, δ_B) on a fresh dataset is ε (exact)."""
    budget = f.Budget(epsilon=3.0, delta=1e-5)
    z = 1.0 / gdp_mu(0.5, 1e-5)
    assert f.spent_epsilon(budget, f.Spent.of([gaussian_cost(z)])) == pytest.approx(0.5, rel=1e-6)


def test_refund_of_an_infinite_curve_leaves_no_nan() -> None:
    """A sampled job's curve is +∞ at α = 10⁶; summing the live set again after its refund
    (never subtracting) gives exactly the other charges."""
    budget = f.Budget(epsilon=3.0, delta=1e-5)
    sampled, gauss = sampled_cost(2.0, 100), gaussian_cost(10.0)
    assert math.isinf(sampled.rdp[-1])
    before = f.Spent.of([gauss])
    after_refund = f.Spent.of([gauss])  # live set after charging and refunding `sampled`
    assert after_refund == before
    assert not any(math.isnan(v) for v in f.Spent.of([gauss, sampled]).rdp)
    assert f.spent_epsilon(budget, after_refund) == f.spent_epsilon(budget, before)


def test_mixed_and_subsampled_workloads_keep_their_capacity() -> None:
    """Rényi-only jobs lose at most a sliver to the δ split (numbers in
    docs/reference/benchmarks.md)."""
    budget = f.Budget(epsilon=3.0, delta=1e-5)
    z = calibrate_noise_multiplier(
        lambda m: dp_event.SelfComposedDpEvent(
            dp_event.SampledWithoutReplacementDpEvent(1000, 50, dp_event.GaussianDpEvent(m)), 400
        ),
        0.5,
        1e-6,
        subsampled=True,
    )
    sampled = sampled_cost(z, 400)
    gauss = gaussian_cost(1.0 / gdp_mu(0.5, 1e-6))
    for workload in ([sampled], [sampled, gauss]):
        old = _old_capacity(budget, workload)
        new = capacity(budget, workload)
        assert old >= 20
        assert new >= 0.95 * old


def _old_capacity(budget: f.Budget, costs: list[f.Cost]) -> int:
    """The previous filter: union over all 13 orders with δ_B/13, Rényi only."""
    log_delta = math.log(budget.delta / len(ORDERS))
    limits = [
        budget.epsilon - math.log((a - 1) / a) + (log_delta + math.log(a)) / (a - 1) for a in ORDERS
    ]
    total, k = [0.0] * len(ORDERS), 0
    while True:
        cost = costs[k % len(costs)]
        nxt = [t + c for t, c in zip(total, cost.rdp, strict=True)]
        if not any(v <= lim for v, lim in zip(nxt, limits, strict=True)):
            return k
        total, k = nxt, k + 1


job_strategy = st.one_of(
    st.tuples(st.just("gauss"), st.floats(min_value=0.5, max_value=40.0)),
    st.tuples(st.just("pure"), st.floats(min_value=0.01, max_value=2.0)),
)


#: The independent PLD check's loss grid: its pessimistic rounding adds at most this to ε per
#: composed event (a single pure ε = 0.5 job reads 0.5008 at δ = 1e-4).
PLD_INTERVAL = 1e-3


def _pld_epsilon(jobs: list[tuple[str, float]], delta: float) -> float:
    """ε at δ of the non-adaptive composition of ``jobs`` by the PLD accountant (independent of
    the filter's code; Gaussian multiplier doubled for its REPLACE_ONE convention)."""
    pld = pld_privacy_accountant.PLDAccountant(
        NeighboringRelation.REPLACE_ONE, value_discretization_interval=PLD_INTERVAL
    )
    for kind, value in jobs:
        if kind == "gauss":
            pld.compose(dp_event.GaussianDpEvent(noise_multiplier=2.0 * value))
        else:
            pld.compose(pure_dp_event(value))
    return float(pld.get_epsilon(delta))


@settings(max_examples=60, deadline=None)
@given(
    eps_budget=st.floats(min_value=0.2, max_value=6.0),
    log_delta=st.floats(min_value=-10, max_value=-4),
    cap=st.floats(min_value=0.1, max_value=6.0),
    jobs=st.lists(st.tuples(job_strategy, st.booleans(), st.booleans()), max_size=14),
)
def test_no_sequence_of_admissions_refunds_and_caps_overspends(
    eps_budget: float,
    log_delta: float,
    cap: float,
    jobs: list[tuple[tuple[str, float], bool, bool]],
) -> None:
    """Whatever arrives, in whatever order, with refunds and one capped analyst: after every
    step the live set satisfies the filter's invariant, the capped analyst's live set its cap,
    and the live set's composition computed independently (PLD, non-adaptive) is within
    (ε_B, δ_B)."""
    budget = f.Budget(epsilon=eps_budget, delta=10**log_delta)
    capped = f.Budget(epsilon=cap, delta=budget.delta)
    live: list[tuple[tuple[str, float], f.Cost, bool]] = []
    for (kind, value), refund, by_capped in jobs:
        cost = gaussian_cost(value) if kind == "gauss" else pure_cost(value)
        spent = f.Spent.of(c for _, c, _ in live)
        decision = f.admit(budget, spent, cost)
        if decision.admitted and by_capped:
            mine = f.Spent.of(c for _, c, who in live if who)
            decision = f.admit(capped, mine, cost)
        if decision.admitted:
            live.append(((kind, value), cost, by_capped))
            assert f.fits(budget, f.Spent.of(c for _, c, _ in live)) is not None
            assert f.fits(capped, f.Spent.of(c for _, c, who in live if who)) is not None
            if refund:
                live.pop()
    if live:
        rounding = PLD_INTERVAL * len(live)  # the check's own discretisation, not the filter's
        assert _pld_epsilon([j for j, _, _ in live], budget.delta) <= (
            budget.epsilon * (1 + 1e-3) + rounding
        )


def test_parallel_composition_charges_the_pointwise_max() -> None:
    from service.ledger.accounting import charge_curve

    a, b = dp_event.GaussianDpEvent(2.0), pure_dp_event(0.7)
    expected = np.maximum(rdp_curve(a), rdp_curve(b))
    assert charge_curve(dp_event.ComposedDpEvent([a, b]), (a, b)) == pytest.approx(expected)
    composed = rdp_curve(dp_event.ComposedDpEvent([a, b]))
    assert all(m <= c + 1e-12 for m, c in zip(expected, composed, strict=True))


@pytest.mark.parametrize("spent_mus", [(), (0.5,), (0.3, 0.2, 0.2)])
def test_a_refusal_states_exactly_the_largest_gaussian_job_that_fits(
    spent_mus: tuple[float, ...],
) -> None:
    """The refusal's "ε ≤ X at δ = δ_B" is the boundary of admission for Gaussian jobs: a job
    1e-6 below X is admitted, one at the refused size is not (an independent tester read "costs
    ε ≈ 9.9, remaining ε ≈ 10, does not fit" as a contradiction: the exact part of the filter
    runs at 0.7·δ_B)."""
    budget = f.Budget(3.0, 1e-5)

    def cost(mu: float) -> f.Cost:
        return f.Cost(rdp=tuple(a * mu * mu / 2 for a in ORDERS), mu=mu)

    spent = f.Spent.nothing()
    for mu in spent_mus:
        spent = spent.plus(cost(mu))
    refused = f.admit(budget, spent, cost(gdp_mu(2.99, 1e-5)))
    assert not refused.admitted
    stated = float(refused.reason.split("i.e. ε ≤ ")[1].split(" at δ")[0])
    assert f.admit(budget, spent, cost(gdp_mu(stated * (1 - 1e-5), 1e-5))).admitted
    assert not f.admit(budget, spent, cost(gdp_mu(stated * (1 + 1e-4), 1e-5))).admitted


def test_a_full_gaussian_part_says_so() -> None:
    budget = f.Budget(1.0, 1e-5)
    mu = f.thresholds(budget).mu
    full = f.Spent.nothing().plus(f.Cost(rdp=tuple(a * mu * mu / 2 for a in ORDERS), mu=mu))
    small = f.Cost(rdp=tuple(a * 1e-4 / 2 for a in ORDERS), mu=1e-2)
    refused = f.admit(budget, full, small)
    assert not refused.admitted
    assert "no room left" in refused.reason


def _gaussian_cost(mu: float, delta: float | None = None) -> f.Cost:
    return f.Cost(rdp=tuple(a * mu * mu / 2 for a in ORDERS), mu=mu, delta=delta)


def _stated_room(reason: str) -> float:
    return float(reason.split("i.e. ε ≤ ")[1].split(" at δ")[0])


def test_a_refusal_on_a_fresh_ledger_says_less_than_epsilon_remaining_fits() -> None:
    """Nothing spent: the exact part runs at 0.7·δ_B, so the largest Gaussian job is below
    epsilon_remaining = ε_B, and the refusal says so with both numbers."""
    budget = f.Budget(3.0, 1e-5)
    refused = f.admit(budget, f.Spent.nothing(), _gaussian_cost(gdp_mu(3.5, 1e-5)))
    assert not refused.admitted
    stated = _stated_room(refused.reason)
    assert stated < 3.0
    assert "at δ_B = 1e-05 (less than epsilon_remaining = 3," in refused.reason


def test_a_refusal_never_calls_a_room_above_epsilon_remaining_less() -> None:
    """A newcomer read "ε ≤ 2.01 at δ = δ_B (…, so less than epsilon_remaining fits)" next to
    epsilon_remaining = 0.715: once Gaussian charges stand, the room (μ² add up, ε does not)
    can exceed ε_B − epsilon_spent. The clause must then say "more than", with the number, and
    the room at the job's own δ must be the boundary of admission at that δ."""
    budget = f.Budget(3.0, 1e-5)
    spent = f.Spent.nothing().plus(_gaussian_cost(gdp_mu(2.2, 1e-5)))
    remaining = f.remaining_epsilon(budget, spent)
    refused = f.admit(budget, spent, _gaussian_cost(gdp_mu(3.0, 1e-6), delta=1e-6))
    assert not refused.admitted
    stated = _stated_room(refused.reason)
    assert stated > remaining
    assert "less than epsilon_remaining" not in refused.reason
    assert f"(more than epsilon_remaining = {remaining:.6g}:" in refused.reason
    at_job = float(refused.reason.split("which is ε ≤ ")[1].split(" at the job's own δ = 1e-06")[0])
    assert f.admit(budget, spent, _gaussian_cost(gdp_mu(at_job * (1 - 1e-5), 1e-6))).admitted
    assert not f.admit(budget, spent, _gaussian_cost(gdp_mu(at_job * (1 + 1e-4), 1e-6))).admitted


def test_a_refusal_at_delta_b_names_no_second_delta() -> None:
    budget = f.Budget(3.0, 1e-5)
    refused = f.admit(budget, f.Spent.nothing(), _gaussian_cost(gdp_mu(3.5, 1e-5), delta=1e-5))
    assert "the job's own δ" not in refused.reason
