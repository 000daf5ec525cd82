"""dp_agd (accelerated DP-GD): plan, per-step sensitivity, calibration, utility, audit.

docs/privacy-model.md#testing-privacy: the per-step query ∇F(v_t) is replayed on neighbouring
datasets at the points of a
noise-free run; the drawn noise is compared with the accountant's σ; the output is audited.
"""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
from dp_accounting import dp_event
from pydantic import ValidationError
from sklearn.linear_model import LogisticRegression

from service.models.base import FloatArray
from service.models.logistic import LogisticLoss
from service.optimizers.dp_agd import DPAGD, DPAGDParams
from service.optimizers.dp_gd import DPGD, DPGDParams, noisy_gradient_descent
from service.optimizers.kits.accelerated_kit import (
    accelerated_iterations,
    noisy_accelerated_descent,
)
from service.optimizers.kits.base import InfeasibleSpec, JobCancelled, PrivacyTarget, ReleasePlan
from service.optimizers.kits.gradient_kit import QueryRecord, single_release_multiplier
from service.optimizers.kits.planning import plan_from_json, plan_to_json
from service.optimizers.kits.registry import catalog, get_optimizer
from service.privacy.gdp import event_mu, gdp_delta, gdp_epsilon
from tests.support.nonconvex_loss import (
    LinearLoss,
    SigmoidLoss,
    audit_pair,
    epsilon_lower_bound,
    query_gaps,
)

OPT = DPAGD()


def _plan(loss: object, n: int, d: int, eps: float = 1.0, delta: float = 1e-5, **kw: object):
    params = DPAGDParams.model_validate(kw)
    return OPT.plan(params, loss, n, d, PrivacyTarget(eps, delta))  # type: ignore[arg-type]


def _noop(_: int) -> None:
    return None


def _unit_rows(rng: np.random.Generator, n: int, d: int) -> FloatArray:
    x = rng.normal(size=(n, d))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x * rng.uniform(0.2, 1.0, size=(n, 1))


def _ill_conditioned(rng: np.random.Generator, n: int, d: int) -> tuple[FloatArray, FloatArray]:
    """Noisy logistic data whose features have very different scales (κ ≈ 400), ‖x‖ ≤ 1."""
    scales = np.geomspace(1.0, 0.05, d - 1)
    Z = rng.normal(size=(n, d - 1)) * scales
    score = Z @ (np.linspace(1.0, -1.0, d - 1) / scales) + 0.3
    y = np.where(rng.random(n) < 1 / (1 + np.exp(-3 * score)), 1.0, -1.0)
    X = np.hstack([Z, np.ones((n, 1))])
    X /= np.max(np.linalg.norm(X, axis=1))
    return X, y


def _run(loss: object, X: FloatArray, y: FloatArray, plan: ReleasePlan, noise: bool, seed: int):
    trace: list[QueryRecord] = []
    hp = plan.hyperparameters
    w = noisy_accelerated_descent(
        loss,  # type: ignore[arg-type]
        X,
        y,
        step_size=hp["step_size"],
        iterations=hp["iterations"],
        noise_std=plan.noise_scale if noise else 0.0,
        sensitivity=plan.sensitivity,
        rng=np.random.default_rng(seed),
        trace=trace,
    )
    return w, trace


# --- plan: defaults and events ----------------------------------------------------------------


def test_defaults_follow_the_docstring() -> None:
    n, d, eps, delta, mu = 5000, 5, 1.0, 1e-5, 0.01
    z1 = single_release_multiplier(eps, delta)
    plan = _plan(LogisticLoss(l2=mu), n, d, eps, delta)
    bf = 0.25 + mu
    radius = math.sqrt(2 * 1.0 / mu)
    expected = math.ceil(math.sqrt(bf * radius * n / (2 * math.sqrt(2) * z1 * math.sqrt(d))))
    assert plan.total_steps == plan.hyperparameters["iterations"] == expected
    assert plan.hyperparameters["radius"] == pytest.approx(radius)
    assert plan.hyperparameters["step_size"] == pytest.approx(1 / bf)
    # T grows like √(n ε): 4× the rows → 2× the steps (up to rounding)
    bigger = _plan(LogisticLoss(l2=mu), 4 * n, d, eps, delta).total_steps
    assert abs(bigger - 2 * expected) <= 2
    # an explicit radius, explicit T, step size, clamps
    assert _plan(LogisticLoss(), n, d, radius=radius).total_steps == expected_for(
        0.25, radius, n, z1, d
    )
    assert _plan(LogisticLoss(), 100, 3, iterations=4321).total_steps == 4321
    assert (
        _plan(LinearLoss(), 100, 3, step_size=0.5, iterations=3).hyperparameters["step_size"] == 0.5
    )
    assert _plan(LogisticLoss(l2=1e-6), 10**9, d, 10.0, max_iterations=77).total_steps == 77
    assert accelerated_iterations(LogisticLoss(), 3, 100, 1e3, 1e-3, 50) == 1


def expected_for(beta_f: float, radius: float, n: int, z1: float, d: int) -> int:
    return math.ceil(math.sqrt(beta_f * radius * n / (2 * math.sqrt(2) * z1 * math.sqrt(d))))


@pytest.mark.parametrize(("eps", "delta"), [(0.2, 1e-8), (1.0, 1e-5), (8.0, 1e-6)])
def test_event_meets_the_target_tightly(eps: float, delta: float) -> None:
    n = 200
    plan = _plan(LogisticLoss(l2=0.01), n, 4, eps, delta, iterations=60)
    event = plan.event
    assert isinstance(event, dp_event.SelfComposedDpEvent) and event.count == 60
    assert isinstance(event.event, dp_event.GaussianDpEvent)
    z = event.event.noise_multiplier
    assert plan.sensitivity == pytest.approx(2 / n)
    assert plan.noise_scale == pytest.approx(z * plan.sensitivity, rel=1e-12)
    mu = event_mu(event)  # exact √T/z-GDP: the μ the ledger charges
    assert mu is not None and gdp_delta(eps, mu) <= delta
    assert gdp_epsilon(mu, delta) == pytest.approx(eps, rel=1e-6)
    # the accounting is exactly dp_gd's for the same T: acceleration is post-processing
    gd = DPGD().plan(
        DPGDParams(iterations=60), LogisticLoss(l2=0.01), n, 4, PrivacyTarget(eps, delta)
    )
    assert gd.noise_scale == pytest.approx(plan.noise_scale, rel=1e-9)


def test_plan_round_trips_through_json() -> None:
    rng = np.random.default_rng(3)
    X, y = _unit_rows(rng, 40, 3), rng.choice([-1.0, 1.0], size=40)
    loss = LogisticLoss(l2=0.05)
    plan = _plan(loss, 40, 3, iterations=7)
    rebuilt = plan_from_json(json.loads(json.dumps(plan_to_json(plan))))
    a = OPT.fit(plan, loss, X, y, np.random.default_rng(9), _noop)
    b = OPT.fit(rebuilt, loss, X, y, np.random.default_rng(9), _noop)
    np.testing.assert_array_equal(a, b)


def test_infeasible_specs_name_the_field() -> None:
    loss = LogisticLoss(l2=0.1)
    cases: list[tuple[object, PrivacyTarget, dict[str, object], str]] = [
        (loss, PrivacyTarget(1.0, 0.0), {}, "privacy.delta"),
        (loss, PrivacyTarget(0.0, 1e-5), {}, "privacy.epsilon"),
        (SigmoidLoss(), PrivacyTarget(1.0, 1e-5), {}, "model"),
        (LogisticLoss(), PrivacyTarget(1.0, 1e-5), {}, "optimizer.params.radius"),
        (LinearLoss(), PrivacyTarget(1.0, 1e-5), {"iterations": 5}, "optimizer.params.step_size"),
    ]
    for case_loss, target, kw, field in cases:
        with pytest.raises(InfeasibleSpec) as info:
            OPT.plan(DPAGDParams.model_validate(kw), case_loss, 100, 3, target)  # type: ignore[arg-type]
        assert info.value.field == field
        assert info.value.message
    assert _plan(LogisticLoss(l2=0.01, l1=0.01), 100, 3).total_steps >= 1


@pytest.mark.parametrize(
    "payload",
    [{"eta": 1.0}, {"step_size": 0.0}, {"radius": -1.0}, {"radius": math.nan}, {"iterations": 0}],
)
def test_params_validation(payload: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        DPAGDParams.model_validate(payload)
    schema = DPAGDParams.model_json_schema()
    assert schema["additionalProperties"] is False
    assert all(prop["description"] for prop in schema["properties"].values())


# --- (a) per-step sensitivity with the noise switched off -------------------------------------


@pytest.mark.parametrize("loss_name", ["logistic", "logistic_l1"])
def test_per_step_sensitivity_never_exceeds_plan(loss_name: str) -> None:
    loss = LogisticLoss(l2=0.01) if loss_name == "logistic" else LogisticLoss(l2=0.0, l1=0.02)
    n, d = 60, 3
    plan = _plan(loss, n, d, iterations=40)
    bound = plan.sensitivity
    assert bound == pytest.approx(2 * loss.lipschitz / n)
    rng = np.random.default_rng(7)
    observed: list[float] = []

    def check(X: FloatArray, y: FloatArray, X2: FloatArray, y2: FloatArray) -> None:
        _, trace = _run(loss, X, y, plan, noise=False, seed=0)
        assert len(trace) == plan.total_steps
        gaps = query_gaps(loss, trace, X, y, X2, y2)["full_gradient"]
        assert max(gaps) <= bound * (1 + 1e-9)
        observed.extend(gaps)

    for _ in range(5):
        X, y = _unit_rows(rng, n, d), rng.choice([-1.0, 1.0], size=n)
        w_end, _ = _run(loss, X, y, plan, noise=False, seed=0)
        direction = w_end / max(float(np.linalg.norm(w_end)), 1e-12)
        j = int(rng.integers(n))
        unit = X[j] / np.linalg.norm(X[j])
        for x_new, y_new in [
            (-unit, y[j]),
            (unit, -y[j]),
            (direction, -1.0),
            (-direction, 1.0),
            (np.zeros(d), 1.0),
            *[(u, s) for u in _unit_rows(rng, 3, d) for s in (-1.0, 1.0)],
        ]:
            X2, y2 = X.copy(), y.copy()
            X2[j], y2[j] = x_new, y_new
            check(X, y, X2, y2)
    # a constructed pair: shared rows e1 push w along e1; the differing row (−α, ±b) stays
    # misclassified on both sides, so the two gradients are nearly saturated and orthogonal
    X = np.zeros((n, d))
    X[:, 0] = 1.0
    y = np.ones(n)
    alpha = 0.6
    X2 = X.copy()
    X[0, :2] = (-alpha, math.sqrt(1 - alpha**2))
    X2[0, :2] = (-alpha, -math.sqrt(1 - alpha**2))
    check(X, y, X2, y)
    assert max(observed) > 0.6 * bound  # not vacuous: halving Δ would fail


# --- (b) the drawn noise is the accountant's --------------------------------------------------


def test_drawn_noise_matches_the_plan() -> None:
    rng = np.random.default_rng(4)
    n, d = 30, 50
    X, y = _unit_rows(rng, n, d), rng.choice([-1.0, 1.0], size=n)
    loss = LogisticLoss(l2=0.02)
    plan = _plan(loss, n, d, 0.7, 1e-6, iterations=200)
    _, trace = _run(loss, X, y, plan, noise=True, seed=5)
    noise = np.array([r.noise for r in trace])
    assert noise.std() == pytest.approx(plan.noise_scale, rel=0.02)
    assert abs(noise.mean()) < 4 * plan.noise_scale / math.sqrt(noise.size)
    w_fit = OPT.fit(plan, loss, X, y, np.random.default_rng(5), _noop)
    w_run, _ = _run(loss, X, y, plan, noise=True, seed=5)
    # fit's rows are GradientRows (inputs.py): the same terms summed in another order
    np.testing.assert_allclose(w_fit, w_run, rtol=1e-12, atol=1e-12)


# --- (c) utility ------------------------------------------------------------------------------


def test_huge_epsilon_reaches_the_non_private_optimum() -> None:
    rng = np.random.default_rng(12)
    n, d, mu = 400, 5, 0.01
    X, y = _ill_conditioned(rng, n, d)
    sk = LogisticRegression(C=1 / (n * mu), fit_intercept=False, tol=1e-12, max_iter=10_000)
    coef = sk.fit(X, y).coef_[0]
    target = PrivacyTarget(1e7, 1e-5)
    loss = LogisticLoss(l2=mu)
    plan = OPT.plan(DPAGDParams(iterations=3000), loss, n, d, target)
    w, _ = _run(loss, X, y, plan, noise=False, seed=0)  # the noiseless limit converges
    assert np.linalg.norm(w - coef) / np.linalg.norm(coef) < 1e-4
    # the noise at ε = 1e7 barely moves it (momentum accumulates noise, hence T = 300 here)
    plan = OPT.plan(DPAGDParams(iterations=300), loss, n, d, target)
    w = OPT.fit(plan, loss, X, y, np.random.default_rng(13), _noop)
    assert np.linalg.norm(w - coef) / np.linalg.norm(coef) < 1e-2
    # elastic net through the prox
    l1 = 0.005
    sk_en = LogisticRegression(
        solver="saga",
        penalty="elasticnet",
        l1_ratio=l1 / (l1 + mu),
        C=1 / (n * (l1 + mu)),
        fit_intercept=False,
        tol=1e-12,
        max_iter=100_000,
    )
    coef_en = sk_en.fit(X, y).coef_[0]
    loss_en = LogisticLoss(l2=mu, l1=l1)
    plan = OPT.plan(DPAGDParams(iterations=3000), loss_en, n, d, target)
    w, _ = _run(loss_en, X, y, plan, noise=False, seed=0)
    assert loss_en.value(w, X, y) <= loss_en.value(coef_en, X, y) + 1e-8


def test_acceleration_beats_plain_gradient_descent_at_equal_steps() -> None:
    """The point of the optimizer: on an ill-conditioned problem, with no noise, 60 accelerated
    steps get much closer to F* than 60 plain ones (FISTA's O(1/T²) vs GD's O(1/T))."""
    rng = np.random.default_rng(2)
    n, d, mu = 2000, 8, 1e-4
    X, y = _ill_conditioned(rng, n, d)
    loss = LogisticLoss(l2=mu)
    f_star = loss.value(
        LogisticRegression(C=1 / (n * mu), fit_intercept=False, tol=1e-12, max_iter=10_000)
        .fit(X, y)
        .coef_[0],
        X,
        y,
    )
    acc, _ = _run(loss, X, y, _plan(loss, n, d, iterations=60), noise=False, seed=0)
    plain = noisy_gradient_descent(
        loss, X, y, step_size=1 / (0.25 + mu), iterations=60, noise_std=0.0, rng=rng
    )
    assert loss.value(acc, X, y) - f_star < 0.5 * (loss.value(plain, X, y) - f_star)


def test_moderate_epsilon_beats_majority() -> None:
    rng = np.random.default_rng(14)
    n, d = 5000, 5
    X, y = _ill_conditioned(rng, n, d)
    majority = max(np.mean(y == 1), np.mean(y == -1))
    best = np.mean(np.sign(X @ LogisticRegression().fit(X, y).coef_[0]) == y)
    loss = LogisticLoss(l2=1e-3)
    plan = _plan(loss, n, d, 1.0, 1e-5)  # theory defaults
    accuracies = [
        float(np.mean(np.sign(X @ OPT.fit(plan, loss, X, y, np.random.default_rng(s), _noop)) == y))
        for s in range(4)
    ]
    assert min(accuracies) > majority + 0.5 * (best - majority)


# --- (d) empirical audit ----------------------------------------------------------------------


def _audit_outputs(plan: ReleasePlan, runs: int, seed: int) -> tuple[FloatArray, FloatArray]:
    """First coordinate of fit's output on the audit pair (S's differing row e1, S' has −e1:
    every gradient differs by the full sensitivity along e1)."""
    n = plan.hyperparameters["n"]
    X, X2, y = audit_pair(n)
    loss = LinearLoss()
    rng = np.random.default_rng(seed)
    high = np.array([OPT.fit(plan, loss, X, y, rng, _noop)[0] for _ in range(runs)])
    low = np.array([OPT.fit(plan, loss, X2, y, rng, _noop)[0] for _ in range(runs)])
    return low, high


def _audit(plan: ReleasePlan, runs: int, seed: int) -> float:
    pilot_low, pilot_high = _audit_outputs(plan, 200, seed + 1000)
    std = 0.5 * (pilot_low.std() + pilot_high.std())  # thresholds fixed before the audit runs
    low, high = _audit_outputs(plan, runs, seed)
    thresholds = [k * std for k in (0.5, 1.0, 1.5, 2.0, 2.5, 3.0)]
    return epsilon_lower_bound(low, high, thresholds, 1e-5)


def test_empirical_audit_below_claimed_epsilon() -> None:
    plan = _plan(LinearLoss(), 21, 2, 1.0, 1e-5, iterations=5, step_size=1.0)
    assert _audit(plan, runs=2000, seed=21) < 1.0
    broken = dataclasses.replace(plan, noise_scale=plan.noise_scale / 6)
    assert _audit(broken, runs=2000, seed=22) > 1.0


# --- plumbing ---------------------------------------------------------------------------------


def test_progress_cancellation_and_checks() -> None:
    rng = np.random.default_rng(9)
    n, d = 10, 3
    X, y = _unit_rows(rng, n, d), rng.choice([-1.0, 1.0], size=n)
    loss = LogisticLoss(l2=0.1)
    plan = _plan(loss, n, d, iterations=12)
    steps: list[int] = []
    OPT.fit(plan, loss, X, y, rng, steps.append)
    assert steps == list(range(1, 13))

    def cancel_at_5(step: int) -> None:
        if step == 5:
            raise JobCancelled("job")

    with pytest.raises(JobCancelled):
        OPT.fit(plan, loss, X, y, rng, cancel_at_5)
    bad_norm = X.copy()
    bad_norm[3] *= 1.5 / np.linalg.norm(bad_norm[3])
    for Xb, yb in [(bad_norm, y), (X[:-1], y[:-1]), (X[:, :2], y)]:
        with pytest.raises(ValueError):
            OPT.fit(plan, loss, Xb, yb, rng, _noop)
    bigger_l = LogisticLoss(l2=0.1)
    bigger_l.lipschitz = 2.0
    with pytest.raises(ValueError, match="sensitivity"):
        OPT.fit(plan, bigger_l, X, y, rng, _noop)


def test_registry_entry() -> None:
    assert isinstance(get_optimizer("dp_agd"), DPAGD)
    (entry,) = [e for e in catalog() if e["name"] == "dp_agd"]
    json.dumps(entry)
    assert "FISTA" in entry["reference"] and "radius" in entry["params"]["properties"]
