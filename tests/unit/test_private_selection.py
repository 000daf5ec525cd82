"""Private selection with a random number of repetitions (Papernot & Steinke 2022, Thm 2).

The accounting is checked three ways: our closed form against the ledger's (dp-accounting's
RepeatAndSelectDpEvent, evaluated on the ledger's orders), the bound against the *exact* Rényi
divergence of a brute-forced repeat-and-select of randomized response (where a bound without
the selection overhead is shown to be violated, so the check has teeth), and the sampler's law
against the pmf the theorem is about. Then the optimizer: its plan, its charge, data
independence of K and the candidates picked, and the score's sensitivity.
"""

from __future__ import annotations

import math

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
    correct_count,
)
from service.privacy.gdp import event_mu, gdp_mu
from service.privacy.private_selection import (
    repeat_and_select_rdp,
    sample_repetitions,
    selection_event,
    tnb_gamma,
    tnb_mean,
    tnb_pmf,
)

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
def test_the_sampler_draws_the_claimed_law(shape: float) -> None:
    gamma = tnb_gamma(3.0, shape)
    rng = np.random.default_rng(7)
    draws = np.array([sample_repetitions(rng, gamma, shape) for _ in range(40_000)])
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
    assert isinstance(plan.event, dp_event.RepeatAndSelectDpEvent)
    curve = charge_curve(plan.event, plan.parallel_events)
    assert rdp_to_epsilon(curve, 1e-5) <= epsilon
    hp = plan.hyperparameters
    assert hp["mean_repetitions"] == pytest.approx(3.0)
    assert hp["shape"] == 0.0
    mu_q = hp["base_mu"]
    assert plan.event.event == dp_event.GaussianDpEvent(1.0 / mu_q)
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
    for seed in range(5):
        a = opt.run(job.plan, job.loss, X, y, np.random.default_rng(seed), lambda s: None)
        b = opt.run(job.plan, job.loss, X2, y2, np.random.default_rng(seed), lambda s: None)
        assert (a.repetitions, a.picked) == (b.repetitions, b.picked)
        assert a.repetitions == len(a.scores) >= 1
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
    assert run.scores[run.best] == max(run.scores)
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
    assert isinstance(event, dp_event.RepeatAndSelectDpEvent)
    assert list(charge.rdp) == rdp_curve(event)
    # the recorded plan holds the candidates and the law of K, nothing about their scores
    assert priced.plan_json["hyperparameters"]["candidates"][1]["optimizer"] == "dp_gd"
    decision = admit(Budget(3.0, 1e-5), Spent.nothing(), charge.cost)
    assert decision.admitted and "Rényi order" in decision.reason
    # a budget the curve does not fit refuses it, although one job of (1, 1e-5) is "ε = 1"
    assert not admit(Budget(1.0, 1e-5), Spent.nothing(), charge.cost).admitted
