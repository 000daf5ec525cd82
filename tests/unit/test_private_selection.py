"""Private selection with a random number of repetitions (Papernot & Steinke 2022, Thm 2).

The accounting is checked three ways: our closed form against the ledger's (dp-accounting's
RepeatAndSelectDpEvent, evaluated on the ledger's orders), the bound against the *exact* Rényi
divergence of a brute-forced repeat-and-select of randomized response (where a bound without
the selection overhead is shown to be violated, so the check has teeth), and the sampler's law
against the pmf the theorem is about. The truncated schedule (issue 22, item 6): the tails
against the pmf, the truncation lemma against a brute-forced truncated repeat-and-select, the
calibration over a grid of targets, and a run's observables (fits, progress) identical at
K = 1 and K = F. Then the optimizer: its plan, its charge, data independence of K and the
candidates picked, and the score's sensitivity.
"""

from __future__ import annotations

import math
import struct

import numpy as np
import pytest
from dp_accounting import dp_event
from pydantic import ValidationError
from scipy import stats

from service.ledger.accounting import ORDERS, charge_curve, rdp_curve
from service.ledger.filter import rdp_to_epsilon
from service.models.logistic import LogisticLoss
from service.models.registry import parse_model_spec
from service.optimizers.kits.base import InfeasibleSpec, PrivacyTarget
from service.optimizers.kits.planning import plan_from_json, plan_job, plan_to_json
from service.optimizers.kits.registry import optimizer_names
from service.optimizers.private_selection import (
    PrivateSelection,
    PrivateSelectionParams,
    check_score_share,
    correct_count,
)
from service.privacy.gdp import event_mu, gdp_mu
from service.privacy.private_selection import (
    KAPPA_MAX,
    overhead_mu,
    repeat_and_select_rdp,
    repetition_slots,
    sample_repetitions,
    sample_untruncated,
    selection_event,
    tnb_gamma,
    tnb_mean,
    tnb_pmf,
    tnb_tail,
    truncated_table,
    truncation_overhead,
)
from service.privacy.secure_random import SecureRandom
from service.privacy.secure_release import secure_gaussian

SHAPES = (0.0, 0.5, 1.0, 2.0)


# --- the distribution -------------------------------------------------------------------------


@pytest.mark.parametrize("shape", SHAPES)
def test_the_pmf_sums_to_one_and_has_the_stated_mean(shape: float) -> None:
    gamma = tnb_gamma(3.0, shape)
    ks = range(1, 2000)
    assert math.fsum(tnb_pmf(k, gamma, shape) for k in ks) == pytest.approx(1.0, abs=1e-12)
    mean = math.fsum(k * tnb_pmf(k, gamma, shape) for k in ks)
    assert mean == pytest.approx(3.0, rel=1e-9) == tnb_mean(gamma, shape)


def test_the_pmf_matches_the_papers_product_form() -> None:
    # P[K = k] = (1 − γ)^k / (γ^{−η} − 1) · Π_{ℓ<k} (ℓ + η)/(ℓ + 1), written out literally
    gamma, shape = 0.3, 1.7
    for k in (1, 2, 5, 9):
        product = math.prod((ell + shape) / (ell + 1) for ell in range(k))
        literal = (1 - gamma) ** k / (gamma ** (-shape) - 1) * product
        assert tnb_pmf(k, gamma, shape) == pytest.approx(literal, rel=1e-12)
    # geometric and logarithmic special cases
    assert tnb_pmf(3, 0.25, 1.0) == pytest.approx(0.25 * 0.75**2, rel=1e-12)
    assert tnb_pmf(3, 0.25, 0.0) == pytest.approx(0.75**3 / (3 * math.log(4)), rel=1e-12)


@pytest.mark.parametrize("shape", SHAPES)
def test_the_untruncated_sampler_draws_the_claimed_law(shape: float) -> None:
    # only plans stored before the public schedule still draw from it
    gamma = tnb_gamma(3.0, shape)
    rng = np.random.default_rng(7)
    draws = np.array([sample_untruncated(rng, gamma, shape) for _ in range(40_000)])
    assert draws.min() >= 1
    edges = list(range(1, 9))
    observed = [int(np.count_nonzero(draws == k)) for k in edges]
    observed.append(int(np.count_nonzero(draws > edges[-1])))
    probs = [tnb_pmf(k, gamma, shape) for k in edges]
    probs.append(1.0 - math.fsum(probs))
    expected = [p * draws.size for p in probs]
    assert stats.chisquare(observed, expected).pvalue > 1e-3
    # and a wrong law is rejected by the same test (it has power)
    wrong = [tnb_pmf(k, tnb_gamma(3.3, shape), shape) for k in edges]
    wrong.append(1.0 - math.fsum(wrong))
    assert stats.chisquare(observed, [p * draws.size for p in wrong]).pvalue < 1e-6


@pytest.mark.parametrize("shape", SHAPES)
def test_the_truncated_sampler_draws_the_conditioned_law(shape: float) -> None:
    gamma = tnb_gamma(2.0, shape)
    slots = 12  # a short schedule so that the conditioning is visible
    law = truncated_table(slots, gamma, shape)
    # the table's exact law is the pmf conditioned on K ≤ F (to the float pmf's rounding)
    kept = math.fsum(tnb_pmf(k, gamma, shape) for k in range(1, slots + 1))
    for k in range(1, slots + 1):
        assert float(law.probability(k)) == pytest.approx(
            tnb_pmf(k, gamma, shape) / kept, rel=1e-12
        )
    assert sum(law.probability(k) for k in range(1, slots + 1)) == 1
    rng = np.random.default_rng(11)
    draws = np.array([sample_repetitions(rng, law) for _ in range(30_000)])
    assert draws.min() >= 1 and draws.max() <= slots
    edges = list(range(1, 6))
    observed = [int(np.count_nonzero(draws == k)) for k in edges]
    observed.append(int(np.count_nonzero(draws > edges[-1])))
    probs = [float(law.probability(k)) for k in edges]
    probs.append(1.0 - math.fsum(probs))
    assert stats.chisquare(observed, [p * draws.size for p in probs]).pvalue > 1e-3
    # and a wrong law is rejected by the same test (it has power)
    other = truncated_table(slots, tnb_gamma(2.3, shape), shape)
    wrong = [float(other.probability(k)) for k in edges]
    wrong.append(1.0 - math.fsum(wrong))
    assert stats.chisquare(observed, [p * draws.size for p in wrong]).pvalue < 1e-6


# --- the tail and the truncation ----------------------------------------------------------


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("slots", [1, 5, 20, 40])
def test_the_tail_is_the_pmf_summed(shape: float, slots: int) -> None:
    gamma = tnb_gamma(3.0, shape)
    tau, tail_mean = tnb_tail(slots, gamma, shape)
    head = math.fsum(tnb_pmf(k, gamma, shape) for k in range(1, slots + 1))
    head_mean = math.fsum(k * tnb_pmf(k, gamma, shape) for k in range(1, slots + 1))
    assert tau == pytest.approx(1.0 - head, rel=1e-9, abs=1e-15)
    assert tail_mean == pytest.approx(3.0 - head_mean, rel=1e-9, abs=1e-14)
    # an upper bound (never optimistic) against a long direct sum
    direct = math.fsum(tnb_pmf(k, gamma, shape) for k in range(slots + 1, 20_000))
    assert tau >= direct * (1 - 1e-12)


@pytest.mark.parametrize("slots", [3, 26, 47, 120])
def test_the_geometric_tail_in_closed_form(slots: int) -> None:
    # η = 1: τ = (1 − γ)^F, E[K·1{K > F}] = (1 − γ)^F (F + 1/γ), even far below 1e-15
    for mean in (2.0, 3.0):
        gamma = 1.0 / mean
        tau, tail_mean = tnb_tail(slots, gamma, 1.0)
        assert tau == pytest.approx((1 - gamma) ** slots, rel=1e-9)
        assert tail_mean == pytest.approx((1 - gamma) ** slots * (slots + 1 / gamma), rel=1e-9)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("mean", [2.0, 3.0])
def test_the_slots_are_the_smallest_schedule_within_the_overhead(shape: float, mean: float) -> None:
    gamma = tnb_gamma(mean, shape)
    slots = repetition_slots(gamma, shape, min(ORDERS))
    kappa = truncation_overhead(truncated_table(slots, gamma, shape), ORDERS)
    assert kappa[0] <= KAPPA_MAX and kappa == sorted(kappa, reverse=True)  # κ decreases in λ
    tau, _ = tnb_tail(slots, gamma, shape)
    assert kappa[0] >= 2 * tau  # κ(1.5) ≥ log(1/(1 − τ))/(1.5 − 1)
    if slots > 1:  # one slot fewer would exceed the allowance
        shorter = truncated_table(slots - 1, gamma, shape)
        try:
            over = truncation_overhead(shorter, [min(ORDERS)])[0]
        except ValueError:
            over = math.inf
        assert over > KAPPA_MAX


def test_the_defaults_schedule() -> None:
    # geometric, E[K] = 2: γ = 1/2, τ = 2^−F; F = 26 (and E[K] = 3 would need 47)
    assert repetition_slots(0.5, 1.0, min(ORDERS)) == 26
    assert repetition_slots(1 / 3, 1.0, min(ORDERS)) == 47
    tau, tail_mean = tnb_tail(26, 0.5, 1.0)
    assert tau == pytest.approx(2.0**-26, rel=1e-12)
    assert tail_mean == pytest.approx(2.0**-26 * 28, rel=1e-12)


def _best_of_rr(law: list[float], p: float) -> tuple[float, float]:
    """P[A outputs 1 | x] for x = 1, 0: randomized response (P[1 | x=1] = p, P[1 | x=0] = 1 − p),
    score = the bit, the best of K runs, K ~ ``law`` (law[k−1] = P[K = k])."""

    def pgf(q: float) -> float:
        return math.fsum(pk * q**k for k, pk in enumerate(law, start=1))

    return 1 - pgf(1 - p), 1 - pgf(p)


@pytest.mark.parametrize("shape", [0.0, 1.0, 2.0])
@pytest.mark.parametrize("slots", [6, 10])
@pytest.mark.parametrize("eps0", [0.5, 2.0])
def test_the_truncation_lemma_covers_a_brute_forced_truncated_selection(
    shape: float, slots: int, eps0: float
) -> None:
    # Short schedules (κ large) so the check has teeth: the exact Rényi divergence of the
    # truncated mechanism stays below Thm 2 for the untruncated law plus κ(λ), and the
    # released law is within the lemma's multiplicative band [L(1 − r), U] of the untruncated.
    gamma = tnb_gamma(2.0, shape)
    try:
        law = truncated_table(slots, gamma, shape)
        kappa = truncation_overhead(law, ORDERS[:-1])
    except ValueError:
        pytest.skip("r ≥ 1 at this F: the lemma does not apply (and F is never chosen so)")
    p = math.exp(eps0) / (1 + math.exp(eps0))
    base = [_rr_divergence(a, p, 1 - p) for a in ORDERS[:-1]]
    bound = repeat_and_select_rdp(list(ORDERS[:-1]), base, gamma, shape)
    truncated = [float(law.probability(k)) for k in range(1, slots + 1)]
    full = [tnb_pmf(k, gamma, shape) for k in range(1, 5000)]
    one_q, zero_q = _best_of_rr(truncated, p)
    one_p, zero_p = _best_of_rr(full, p)
    for a, b in (
        (one_q, one_p),
        (1 - one_q, 1 - one_p),
        (zero_q, zero_p),
        (1 - zero_q, 1 - zero_p),
    ):
        ratio = a / b
        assert math.exp(-kappa[-1]) * (1 - 1e-12) <= ratio <= math.exp(kappa[-1]) * (1 + 1e-12)
    for i, order in enumerate(ORDERS[:-1]):
        exact = max(_rr_divergence(order, one_q, zero_q), _rr_divergence(order, zero_q, one_q))
        assert exact <= bound[i] + kappa[i] + 1e-12


# --- the bound --------------------------------------------------------------------------------


def _gaussian_curve(mu: float) -> list[float]:
    return [a * mu * mu / 2.0 for a in ORDERS]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("mean", [1.5, 3.0, 8.0])
@pytest.mark.parametrize("mu", [0.1, 0.5, 1.5])
def test_our_closed_form_is_the_ledgers_charge(shape: float, mean: float, mu: float) -> None:
    gamma = tnb_gamma(mean, shape)
    ours = repeat_and_select_rdp(ORDERS, _gaussian_curve(mu), gamma, shape)
    event = selection_event(dp_event.GaussianDpEvent(1.0 / mu), gamma, shape)
    ledger = rdp_curve(event)
    for a, b in zip(ours, ledger, strict=True):
        assert b >= a * (1 - 1e-12)  # never below the theorem at the sampled γ
        assert b == pytest.approx(a, rel=1e-7)  # and no looser than dp-accounting's bisection
    assert event_mu(event) is None  # not a Gaussian-family charge: the filter's Rényi test


def test_the_closed_form_at_one_point_by_hand() -> None:
    # geometric (η = 1), γ = 1/2 (E[K] = 2), base μ = 1: the λ̂-part at λ̂ = 2 is
    # (1 − 1/2)·(2·1/2) + log 2 / 2, and ε′(λ = 4) ≤ 4/2 + 2·that + log 2 / 3.
    curve = repeat_and_select_rdp(ORDERS, _gaussian_curve(1.0), 0.5, 1.0)
    at_hat_2 = 2.0 + 2.0 * (0.5 * 1.0 + math.log(2) / 2) + math.log(2) / 3
    assert curve[ORDERS.index(4.0)] <= at_hat_2 + 1e-12
    # the minimum over λ̂ ∈ ORDERS of (1 − 1/λ̂)λ̂/2 + log 2/λ̂ is at λ̂ = 1.5
    best_hat = min((1 - 1 / h) * h / 2 + math.log(2) / h for h in ORDERS)
    assert best_hat == pytest.approx((0.5 / 1.5) * 0.75 + math.log(2) / 1.5)
    exact = 2.0 + 2.0 * best_hat + math.log(2) / 3
    assert curve[ORDERS.index(4.0)] == pytest.approx(min(exact, curve[ORDERS.index(5.0)]))


def _rr_divergence(order: float, p: float, q: float) -> float:
    """D_α(Bern(p) ‖ Bern(q)), exactly."""
    s = p**order * q ** (1 - order) + (1 - p) ** order * (1 - q) ** (1 - order)
    return math.log(s) / (order - 1)


def _pgf(q: float, gamma: float, shape: float) -> float:
    """E[q^K] under D_{η,γ}, by summation."""
    return math.fsum(tnb_pmf(k, gamma, shape) * q**k for k in range(1, 5000))


@pytest.mark.parametrize("shape", [0.0, 1.0])
@pytest.mark.parametrize("mean", [2.0, 10.0])
@pytest.mark.parametrize("eps0", [0.5, 1.0, 2.0])
def test_the_bound_covers_a_brute_forced_repeat_and_select(
    shape: float, mean: float, eps0: float
) -> None:
    # Base Q: randomized response on one bit, ε0-DP, score = the output bit. Repeating K times
    # and releasing the best outputs 1 iff some run said 1: P[A = 0 | x] = E[q_x^K]. Its exact
    # Rényi divergence must stay below Thm 2 with Q's exact RDP curve.
    gamma = tnb_gamma(mean, shape)
    p = math.exp(eps0) / (1 + math.exp(eps0))
    base = [_rr_divergence(a, p, 1 - p) for a in ORDERS[:-1]]
    orders = list(ORDERS[:-1])
    bound = repeat_and_select_rdp(orders, base, gamma, shape)
    a0_x1, a0_x0 = _pgf(1 - p, gamma, shape), _pgf(p, gamma, shape)
    violated_naive = False
    for i, order in enumerate(orders):
        exact = max(
            _rr_divergence(order, 1 - a0_x1, 1 - a0_x0),
            _rr_divergence(order, 1 - a0_x0, 1 - a0_x1),
        )
        assert exact <= bound[i] + 1e-12
        violated_naive |= exact > base[i]
    if mean == 10.0 and eps0 <= 1.0:
        assert violated_naive  # selection really leaks more than one run: the overhead matters


# --- the optimizer ----------------------------------------------------------------------------

LOGISTIC = {"type": "logistic_regression", "l2": 1e-4, "fit_intercept": True, "gradient_clip": 0.5}
CANDIDATES = [{"optimizer": "dp_agd"}, {"optimizer": "dp_gd", "params": {"iterations": 50}}]


def _plan(epsilon: float = 1.0, **params: object):  # type: ignore[no-untyped-def]
    return plan_job(
        parse_model_spec(LOGISTIC),
        "private_selection",
        {"candidates": CANDIDATES, **params},
        2000,
        9,
        PrivacyTarget(epsilon, 1e-5),
    )


def _rows(n: int, d: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, d))
    X[:, -1] = 1.0
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    y = np.where(X @ rng.normal(size=d) >= 0, 1.0, -1.0)
    return X, y


def test_it_is_in_the_catalog() -> None:
    assert "private_selection" in optimizer_names()


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 2.0])
def test_the_plan_meets_the_target_and_charges_the_selection_curve(epsilon: float) -> None:
    job = _plan(epsilon)
    plan = job.plan
    # Thm 2's event for the untruncated law, composed with the truncation's Gaussian term
    assert isinstance(plan.event, dp_event.ComposedDpEvent)
    select, truncation = plan.event.events
    assert isinstance(select, dp_event.RepeatAndSelectDpEvent)
    curve = charge_curve(plan.event, plan.parallel_events)
    assert rdp_to_epsilon(curve, 1e-5) <= epsilon
    hp = plan.hyperparameters
    assert hp["mean_repetitions"] == pytest.approx(2.0)
    assert hp["shape"] == 1.0
    mu_q = hp["base_mu"]
    assert select.event == dp_event.GaussianDpEvent(1.0 / mu_q)
    assert truncation == dp_event.GaussianDpEvent(1.0 / hp["truncation"]["overhead_mu"])
    # the public schedule and its price: F slots, every candidate fitted in each
    assert hp["slots"] == plan.total_steps == 26
    assert hp["fits"] == 26 * len(CANDIDATES)
    steps = [plan_from_json(c["plan"]).total_steps for c in hp["candidates"]]
    assert hp["fit_steps"] == 26 * sum(steps)
    # fit and score compose below μ_Q, and every candidate's own exact μ is ≤ μ_fit (+slack)
    mu_score = 1.0 / hp["score_noise_std"]
    for candidate in hp["candidates"]:
        mu_j = event_mu(plan_from_json(candidate["plan"]).event)
        assert mu_j is not None and mu_j == pytest.approx(candidate["mu"])
        assert math.hypot(mu_j, mu_score) <= mu_q * (1 + 1e-12)
    assert mu_q < gdp_mu(epsilon, 1e-5)  # selection costs: each run is below a single job's μ
    # the plan survives its JSON round trip (the worker runs what was charged)
    assert plan_from_json(plan_to_json(plan)).event == plan.event
    # nothing data-dependent can be in a plan; it records candidates and the law of K only
    assert set(hp) >= {"candidates", "gamma", "shape", "mean_repetitions", "score_noise_std"}


# (c) the calibration over a grid of targets: the charged curve covers Thm 2 plus the
# truncation's κ at every order, and converts to the target (ε, δ) — no δ set aside.
@pytest.mark.parametrize("delta", [1e-4, 1e-5, 1e-7])
@pytest.mark.parametrize("epsilon", [0.25, 0.5, 1.0, 2.0, 4.0])
@pytest.mark.parametrize(("mean", "shape"), [(2.0, 1.0), (3.0, 0.0)])
def test_the_calibration_covers_the_truncation_and_meets_the_target(
    epsilon: float, delta: float, mean: float, shape: float
) -> None:
    from service.optimizers.private_selection import base_mu

    gamma = tnb_gamma(mean, shape)
    law = truncated_table(repetition_slots(gamma, shape, min(ORDERS)), gamma, shape)
    kappa = truncation_overhead(law, ORDERS)
    mu_kappa = overhead_mu(law, ORDERS)
    mu_q = base_mu(epsilon, delta, gamma, shape, mu_kappa)
    charged = rdp_curve(selection_event(dp_event.GaussianDpEvent(1 / mu_q), gamma, shape, mu_kappa))
    theorem = rdp_curve(selection_event(dp_event.GaussianDpEvent(1 / mu_q), gamma, shape))
    for c, t, k in zip(charged, theorem, kappa, strict=True):
        assert c >= t + k - 1e-15 * max(1.0, t)  # the lemma's overhead is inside the charge
    assert rdp_to_epsilon(charged, delta) <= epsilon
    # and the bisection is tight: 0.1 % more noise-free budget would miss the target
    over = rdp_curve(
        selection_event(dp_event.GaussianDpEvent(1 / (mu_q * 1.001)), gamma, shape, mu_kappa)
    )
    assert rdp_to_epsilon(over, delta) > epsilon
    # the truncation costs almost nothing: μ_Q within 0.1 % of the untruncated calibration
    assert mu_q == pytest.approx(base_mu(epsilon, delta, gamma, shape), rel=1e-3)


def test_refusals_name_the_field() -> None:
    with pytest.raises(InfeasibleSpec) as small:
        _plan(0.1)
    assert small.value.field == "privacy.epsilon"
    with pytest.raises(InfeasibleSpec) as pure:
        plan_job(
            parse_model_spec(LOGISTIC),
            "private_selection",
            {"candidates": [{"optimizer": "noisy_sgd_bst14"}, {"optimizer": "dp_gd"}]},
            2000,
            9,
            PrivacyTarget(1.0, 1e-5),
        )
    assert pure.value.field == "optimizer.params.candidates.0.optimizer"
    with pytest.raises(InfeasibleSpec) as recursive:
        _plan(1.0, candidates=[{"optimizer": "private_selection"}, {"optimizer": "dp_gd"}])
    assert recursive.value.field == "optimizer.params.candidates.0.optimizer"
    with pytest.raises(InfeasibleSpec) as regression:
        plan_job(
            parse_model_spec({"type": "huber_regression", "label_bound": 1.0}),
            "private_selection",
            {"candidates": CANDIDATES},
            2000,
            9,
            PrivacyTarget(1.0, 1e-5),
        )
    assert regression.value.field == "model"
    with pytest.raises(ValidationError):
        PrivateSelectionParams.model_validate({"candidates": CANDIDATES[:1]})


def test_the_score_has_sensitivity_one_and_is_row_local() -> None:
    loss = LogisticLoss(l2=0.0)
    rng = np.random.default_rng(3)
    X, y = _rows(300, 6, 1)
    for _ in range(50):
        w = rng.normal(size=6)
        i = int(rng.integers(300))
        X2, y2 = X.copy(), y.copy()
        X2[i] = _rows(1, 6, int(rng.integers(1 << 30)))[0][0]
        y2[i] = -y2[i]
        base = correct_count(loss, w, X, y)
        assert abs(correct_count(loss, w, X2, y2) - base) <= 1
        # row-local: the count is the sum of its rows' own terms
        assert base == sum(correct_count(loss, w, X[j : j + 1], y[j : j + 1]) for j in range(300))


def test_repetitions_and_candidates_do_not_depend_on_the_data() -> None:
    job = _plan(1.0)
    X, y = _rows(2000, 10, 5)
    X2, y2 = X.copy(), -y
    opt = PrivateSelection()
    for seed in range(2):
        a = opt.run(job.plan, job.loss, X, y, np.random.default_rng(seed), lambda s: None)
        b = opt.run(job.plan, job.loss, X2, y2, np.random.default_rng(seed), lambda s: None)
        assert (a.repetitions, a.picked) == (b.repetitions, b.picked)
        assert len(a.scores) == a.slots == job.plan.hyperparameters["slots"]
        assert 1 <= a.repetitions <= a.slots
        assert np.array_equal(
            a.weights,
            opt.fit(job.plan, job.loss, X, y, np.random.default_rng(seed), lambda s: None),
        )


def test_it_releases_the_best_scored_fit_and_learns() -> None:
    job = _plan(2.0)
    X, y = _rows(2000, 10, 11)
    opt = PrivateSelection()
    progress: list[int] = []
    run = opt.run(job.plan, job.loss, X, y, np.random.default_rng(0), progress.append)
    assert run.best < run.repetitions  # only the first K slots compete
    assert run.scores[run.best] == max(run.scores[: run.repetitions])
    assert max(progress) == job.plan.total_steps and progress[-1] == job.plan.total_steps
    assert np.mean(np.where(X @ run.weights >= 0, 1.0, -1.0) == y) > 0.85


def test_a_priced_job_is_a_renyi_charge_the_filter_admits_by_its_curve() -> None:
    from service.domain.submission import DatasetFacts, price_job
    from service.ledger.accounting import event_from_json
    from service.ledger.filter import Budget, Spent, admit
    from service.schemas import JobCreate

    facts = DatasetFacts(
        id="ds",
        n_rows=2000,
        n_features=9,
        delta=1e-5,
        label_type="binary",
        classes=None,
        retired=False,
    )
    body = JobCreate.model_validate(
        {
            "dataset_id": "ds",
            "model": LOGISTIC,
            "optimizer": {"name": "private_selection", "params": {"candidates": CANDIDATES}},
            "privacy": {"epsilon": 1.0, "delta": 1e-5},
        }
    )
    priced = price_job(facts, body)
    charge = priced.charge
    assert charge.mu is None  # not Gaussian-family: the Rényi half of the filter decides
    event = event_from_json(charge.event)
    assert isinstance(event, dp_event.ComposedDpEvent)
    assert isinstance(event.events[0], dp_event.RepeatAndSelectDpEvent)
    assert list(charge.rdp) == rdp_curve(event)
    # the recorded plan holds the candidates and the law of K, nothing about their scores
    assert priced.plan_json["hyperparameters"]["candidates"][1]["optimizer"] == "dp_gd"
    # the price shows the schedule: F slots of progress, F × m fits
    assert priced.plan_json["total_steps"] == priced.plan_json["hyperparameters"]["slots"]
    assert priced.plan_json["hyperparameters"]["fits"] == 2 * priced.plan_json["total_steps"]
    decision = admit(Budget(3.0, 1e-5), Spent.nothing(), charge.cost)
    assert decision.admitted and "Rényi order" in decision.reason
    # a budget the curve does not fit refuses it, although one job of (1, 1e-5) is "ε = 1"
    assert not admit(Budget(1.0, 1e-5), Spent.nothing(), charge.cost).admitted


# --- K does not show (issue 22, item 6) ---------------------------------------------------------


def _observed_run(
    monkeypatch: pytest.MonkeyPatch, force: int, seed: int
) -> tuple[list[int], list[str], object]:
    """Run the small default plan with K forced to ``force``; return the progress values in
    order, the candidate fits in order (by optimizer name) and the run."""
    from service.optimizers.kits.registry import get_optimizer

    job = _plan(1.0)
    fits: list[str] = []
    for name in ("dp_agd", "dp_gd"):
        cls = type(get_optimizer(name))
        original = cls.fit

        def counted(self, *args, _original=original, _name=name, **kwargs):  # type: ignore[no-untyped-def]
            fits.append(_name)
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(cls, "fit", counted)
    X, y = _rows(2000, 10, 21)
    progress: list[int] = []
    run = PrivateSelection().run(
        job.plan,
        job.loss,
        X,
        y,
        np.random.default_rng(seed),
        progress.append,
        force_repetitions=force,
    )
    monkeypatch.undo()
    return progress, fits, run


def test_the_work_and_the_progress_are_the_same_whatever_k(monkeypatch: pytest.MonkeyPatch) -> None:
    slots = _plan(1.0).plan.hyperparameters["slots"]
    one_progress, one_fits, one = _observed_run(monkeypatch, 1, seed=4)
    all_progress, all_fits, every = _observed_run(monkeypatch, slots, seed=4)
    # (a) the same fits, in the same order, and the same progress events, exactly
    assert one_fits == all_fits
    assert len(one_fits) == slots * len(CANDIDATES) == one.fits == every.fits  # type: ignore[attr-defined]
    assert one_progress == all_progress
    # progress counts slots out of F: non-decreasing, every slot boundary reported, ends at F
    assert one_progress == sorted(one_progress) and one_progress[-1] == slots
    assert set(one_progress) == set(range(slots + 1))
    # another seed (another K, other candidates drawn) runs the same schedule too
    other_progress, other_fits, _ = _observed_run(monkeypatch, 3, seed=9)
    assert (other_progress, other_fits) == (one_progress, one_fits)
    # the released model differs (K = 1 keeps slot 1; K = F the best of all): the hook works
    assert one.best == 0 and every.scores[every.best] == max(every.scores)  # type: ignore[attr-defined]


def test_the_drawn_k_follows_the_truncated_law_through_the_optimizer() -> None:
    # the optimizer's own draw (no hook): K ≤ F always, and small K is the most likely
    job = _plan(1.0)
    config_slots = job.plan.hyperparameters["slots"]
    law = truncated_table(config_slots, 0.5, 1.0)
    rng = np.random.default_rng(5)
    draws = [sample_repetitions(rng, law) for _ in range(4000)]
    assert max(draws) <= config_slots
    assert np.mean(draws) == pytest.approx(2.0, abs=0.1)


def test_a_plan_stored_before_the_schedule_runs_its_charged_untruncated_law() -> None:
    import json
    from pathlib import Path

    stored = json.loads(
        (Path(__file__).parent / "data" / "stored_plans" / "private_selection.json").read_text()
    )["plan"]
    plan = plan_from_json(stored)
    assert "slots" not in plan.hyperparameters
    X, y = _rows(200, 4, 3)
    run = PrivateSelection().run(
        plan, LogisticLoss(l2=0.01), X, y, np.random.default_rng(2), lambda s: None
    )
    assert run.slots == run.repetitions == len(run.scores) >= 1
    assert run.fits == run.slots * len(stored["hyperparameters"]["candidates"])


# --- the score's noise stays within the exact sampler's range -----------------------------------


def _float_between(lo: float, hi: float) -> float:
    """The float halfway between two positive floats in the order of their bit patterns."""
    a, b = (struct.unpack("<q", struct.pack("<d", x))[0] for x in (lo, hi))
    return float(struct.unpack("<d", struct.pack("<q", (a + b) // 2))[0])


def test_a_score_share_is_admitted_exactly_when_its_score_release_cannot_overflow() -> None:
    """σ_s = 1/(μ_Q·√score_share), and the exact sampler's variance (Δ_int·σ_s)² must be a
    finite float64 (σ_s ≲ 1.3e148: score_share ≳ 6e-297/μ_Q²). Found reported: 1e-300 was
    charged, then the worker's first score release raised OverflowError. Bisected to two
    ADJACENT floats: the smaller share is refused at planning on its field and its score
    release overflows; the larger one plans, and the release the fit makes with the planned
    σ_s runs."""
    mu_q = float(_plan(1.0).plan.hyperparameters["base_mu"])

    def planned(share: float) -> float | None:  # the planned σ_s, or None if refused
        try:
            job = _plan(1.0, score_share=share)
        except InfeasibleSpec as refused:
            assert refused.field == "optimizer.params.score_share", refused.message
            assert "score_share ≥" in refused.message
            return None
        return float(job.plan.hyperparameters["score_noise_std"])

    def refused(share: float) -> bool:  # check_score_share's own test: cheap to bisect
        try:
            check_score_share(share, mu_q)
        except InfeasibleSpec:
            return True
        return False

    for share in (5e-324, 1e-300, 1e-296):
        assert planned(share) is None
    assert planned(1e-200) is not None
    lo, hi = 1e-300, 1e-200  # lo refused, hi admitted
    while math.nextafter(lo, 1.0) < hi:
        mid = _float_between(lo, hi)
        lo, hi = (mid, hi) if refused(mid) else (lo, mid)
    assert planned(lo) is None
    with pytest.raises(OverflowError):
        secure_gaussian(np.array([1000.0]), 1.0 / (mu_q * math.sqrt(lo)), 1.0, SecureRandom())
    std = planned(hi)
    assert std is not None and std > 1e148
    released = secure_gaussian(np.array([1000.0]), std, 1.0, SecureRandom())  # as run() does
    assert math.isfinite(float(released[0]))


def test_a_score_share_that_leaves_nothing_for_the_fits_is_refused_on_its_field() -> None:
    with pytest.raises(InfeasibleSpec) as caught:
        _plan(1.0, score_share=math.nextafter(1.0, 0.0))
    assert caught.value.field == "optimizer.params.score_share"
