"""dp_accmd (Wang, Ye & Xu 2017, Alg. 3): plan, per-step sensitivity, calibration, utility on
and off the ℓ1 constraint, a small empirical audit, and infeasible specs
(docs/privacy-model.md#testing-privacy)."""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field

import numpy as np
import pytest
from dp_accounting import dp_event
from pydantic import ValidationError
from scipy import optimize, stats
from scipy.special import expit
from sklearn.linear_model import LogisticRegression

from service.ledger.accounting import rdp_curve
from service.models.base import FloatArray
from service.models.logistic import LogisticLoss
from service.optimizers.dp_accmd import (
    AccMDConfig,
    AccMDStep,
    DPAccMD,
    DPAccMDParams,
    accmd_event,
    accmd_run,
    dual_noise_factor,
    simplex_to_weights,
)
from service.optimizers.kits.base import InfeasibleSpec, JobCancelled, PrivacyTarget, ReleasePlan
from service.optimizers.kits.registry import catalog, get_optimizer, optimizer_names
from service.privacy.gdp import event_mu, gdp_delta, gdp_epsilon, gdp_mu

OPT = DPAccMD()


@dataclass
class SigmoidLoss:
    """Local non-convex loss (rejected by dp_accmd)."""

    l2: float = 0.0
    name: str = field(default="sigmoid_test", init=False)
    lipschitz: float = field(default=0.25, init=False)
    smoothness: float = field(default=1 / (6 * math.sqrt(3)), init=False)
    convex: bool = field(default=False, init=False)

    def value(self, w: FloatArray, X: FloatArray, y: FloatArray) -> float:
        return float(np.mean(expit(-y * (X @ w))))

    def gradient(self, w: FloatArray, X: FloatArray, y: FloatArray) -> FloatArray:
        s = expit(y * (X @ w))
        out: FloatArray = -(X.T @ (s * (1 - s) * y)) / X.shape[0]
        return out

    def predict_proba(self, w: FloatArray, X: FloatArray) -> FloatArray:
        out: FloatArray = expit(X @ w)
        return out


def _params(**kw: object) -> DPAccMDParams:
    return DPAccMDParams.model_validate(kw)


def _plan(
    loss: object, n: int, d: int, eps: float = 1.0, delta: float = 1e-5, **kw: object
) -> ReleasePlan:
    return OPT.plan(_params(**kw), loss, n, d, PrivacyTarget(eps, delta))  # type: ignore[arg-type]


def _config(plan: ReleasePlan) -> AccMDConfig:
    return AccMDConfig.from_hyperparameters(plan.hyperparameters)


def _unit_rows(rng: np.random.Generator, n: int, d: int) -> FloatArray:
    x = rng.normal(size=(n, d))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x * rng.uniform(0.2, 1.0, size=(n, 1))


def _labels(rng: np.random.Generator, n: int) -> FloatArray:
    return rng.choice([-1.0, 1.0], size=n)


def _separable(rng: np.random.Generator, n: int, d: int) -> tuple[FloatArray, FloatArray]:
    """Linearly separable data with margin, a constant column, ‖x‖ ≤ 1 and ~72% majority."""
    Z = rng.uniform(-1, 1, size=(4 * n, d - 1))
    score = Z @ np.linspace(1.0, -0.5, d - 1) + 0.4
    keep = np.abs(score) > 0.1
    Z, score = Z[keep][:n], score[keep][:n]
    X = np.hstack([Z, np.ones((n, 1))]) / math.sqrt(d)
    return X, np.where(score > 0, 1.0, -1.0)


def _noop(_: int) -> None:
    return None


# --- plan: defaults, event, calibration -------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "d", "eps", "radius", "mu"),
    [(5000, 5, 1.0, 10.0, 0.0), (200, 1000, 0.5, 3.0, 0.01), (10**6, 20, 4.0, 50.0, 0.1)],
)
def test_default_plan_follows_the_stated_formulas(
    n: int, d: int, eps: float, radius: float, mu: float
) -> None:
    plan = _plan(LogisticLoss(l2=mu), n, d, eps, l1_radius=radius)
    cfg = _config(plan)
    hp = plan.hyperparameters
    sensitivity = 2.0 / n  # L = 1
    assert plan.sensitivity == cfg.gradient_sensitivity == pytest.approx(sensitivity)
    smooth_c = (0.25 + mu) * radius**2
    assert hp["smoothness_l1"] == pytest.approx(smooth_c)
    bregman = math.log(2 * d + 1)
    z1 = 1.0 / gdp_mu(eps, 1e-5)  # one exact Gaussian release
    floor = radius * sensitivity * z1 * math.sqrt(4 * math.log(d) + 2 * math.log(2))
    t_star = math.sqrt(smooth_c * math.sqrt(bregman) / floor)
    assert cfg.iterations == min(500, max(1, math.ceil(t_star)))
    # in GDP, T Gaussian steps with multiplier z are exactly one step with z/√T
    z = hp["noise_multiplier"]
    assert z == pytest.approx(z1 * math.sqrt(cfg.iterations), rel=1e-9)
    assert plan.noise_scale == cfg.noise_sigma == pytest.approx(z * sensitivity)
    dual_sq = radius**2 * cfg.noise_sigma**2 * dual_noise_factor(d)
    gamma = min(
        1 / (2 * smooth_c),
        math.sqrt(6 * bregman / (dual_sq * (cfg.iterations + 1) * (cfg.iterations + 2) ** 2)),
    )
    assert cfg.step_size == pytest.approx(gamma)
    assert plan.total_steps == cfg.iterations
    json.dumps(hp)


@pytest.mark.parametrize(("eps", "delta"), [(0.1, 1e-6), (1.0, 1e-5), (8.0, 1e-9), (1e9, 1e-5)])
def test_event_is_calibrated_composition(eps: float, delta: float) -> None:
    plan = _plan(LogisticLoss(), 3000, 10, eps, delta, iterations=40)
    assert plan.mechanism == "gaussian"
    assert isinstance(plan.event, dp_event.SelfComposedDpEvent)
    assert plan.event.count == 40
    inner = plan.event.event
    assert isinstance(inner, dp_event.GaussianDpEvent)
    assert inner.noise_multiplier == pytest.approx(plan.noise_scale / plan.sensitivity, rel=1e-12)
    mu = event_mu(plan.event)  # exact √T/z-GDP, the μ the ledger charges
    assert mu is not None and gdp_delta(eps, mu) <= delta
    assert gdp_epsilon(mu, delta) == pytest.approx(eps, rel=1e-6)
    curve = rdp_curve(plan.event)
    z = inner.noise_multiplier
    assert curve[0] == pytest.approx(40 * 1.5 / (2 * z * z), rel=1e-12)
    assert all(math.isfinite(v) for v in curve)


def test_plan_and_charge_work_at_large_n() -> None:
    plan = _plan(LogisticLoss(), 50_000, 500, 1.0, 1e-6)
    rdp_curve(plan.event)


def test_dual_noise_factor_bounds_the_expected_sup_norm() -> None:
    rng = np.random.default_rng(0)
    for d in (1, 2, 10, 1000):
        sample = rng.standard_normal((2000, d))
        assert float(np.mean(np.max(sample**2, axis=1))) <= dual_noise_factor(d)


def test_iterates_stay_in_the_l1_ball() -> None:
    rng = np.random.default_rng(1)
    n, d, radius = 100, 30, 2.5
    X, y = _unit_rows(rng, n, d), _labels(rng, n)
    for eps in (0.01, 1.0):
        plan = _plan(LogisticLoss(l1=0.01), n, d, eps, l1_radius=radius, iterations=50)
        trace: list[AccMDStep] = []
        w = accmd_run(LogisticLoss(l1=0.01), X, y, _config(plan), rng, trace=trace)
        assert np.abs(w).sum() <= radius * (1 + 1e-12)
        assert all(np.abs(s.point).sum() <= radius * (1 + 1e-12) for s in trace)
    lam = rng.dirichlet(np.ones(2 * d + 1))
    assert np.abs(simplex_to_weights(lam, radius)).sum() <= radius * (1 + 1e-12)


# --- sensitivity with the noise switched off: replay each step on the neighbour -----------------


def _pair_far_along_e1(n: int, alpha: float) -> tuple[FloatArray, FloatArray, FloatArray]:
    """A row misclassified far along the optimum (w ≈ R e1) against one nearly orthogonal to it
    with the opposite pull: the logistic gradients then differ by ≈ √(2 − 2α) (of at most 2)."""
    X = np.zeros((n, 3))
    X[:, 0] = 1.0
    y = np.ones(n)
    X2 = X.copy()
    y2 = y.copy()
    X[0], y[0] = (1.0, 0.0, 0.0), -1.0
    X2[0], y2[0] = (-alpha, math.sqrt(1 - alpha**2), 0.0), 1.0
    return X, y, X2, y2  # type: ignore[return-value]


@pytest.mark.parametrize("noise", [True, False])
def test_replayed_gradients_never_exceed_the_plan(noise: bool) -> None:
    rng = np.random.default_rng(2 + noise)
    n, d = 50, 3
    loss = LogisticLoss(l2=0.01)
    plan = _plan(loss, n, d, 1.0, 1e-5, l1_radius=10.0, iterations=30)
    cfg = _config(plan)
    bound = plan.sensitivity
    fractions: list[float] = []

    def check(trace: list[AccMDStep], X2: FloatArray, y2: FloatArray) -> None:
        for step in trace:
            gap = float(np.linalg.norm(step.gradient - loss.gradient(step.point, X2, y2)))
            assert gap <= bound * (1 + 1e-9)
            fractions.append(gap / bound)

    for base in range(5):
        X, y = _unit_rows(rng, n, d), _labels(rng, n)
        trace: list[AccMDStep] = []
        accmd_run(
            loss,
            X,
            y,
            cfg,
            np.random.default_rng(base),
            trace=trace,
            noise_sigma=None if noise else 0.0,
        )
        for _ in range(6):
            j = int(rng.integers(n))
            unit = X[j] / np.linalg.norm(X[j])
            last = trace[-1].point / max(float(np.linalg.norm(trace[-1].point)), 1e-12)
            for x_new, y_new in [
                (_unit_rows(rng, 1, d)[0], float(rng.choice([-1.0, 1.0]))),
                (-unit, y[j]),
                (unit, -y[j]),
                (last, -1.0),
                (-last, 1.0),
                (np.zeros(d), 1.0),
            ]:
                X2, y2 = X.copy(), y.copy()
                X2[j], y2[j] = x_new, y_new
                check(trace, X2, y2)
    # adversarial: data whose iterates go far along e1 (large steps: the plan of a large ε, the
    # same sensitivity 2L/n), then replace the critical row
    # (the optimum is at w₁ = ln(n − 1), so this part uses more rows)
    n_far = 2000
    unregularised = LogisticLoss()
    far_plan = _plan(unregularised, n_far, d, 1e6, 1e-5, l1_radius=10.0, iterations=300)
    far = _config(far_plan)
    for alpha in (0.15, 0.2, 0.25):
        X, y, X2, y2 = _pair_far_along_e1(n_far, alpha)
        trace = []
        accmd_run(unregularised, X, y, far, np.random.default_rng(9), trace=trace, noise_sigma=0.0)
        assert trace[-1].point[0] > 7.0
        for step in trace:
            gap = np.linalg.norm(step.gradient - unregularised.gradient(step.point, X2, y2))
            assert gap <= far_plan.sensitivity * (1 + 1e-9)
            fractions.append(float(gap) / far_plan.sensitivity)
    assert max(fractions) > 0.55  # would fail if the sensitivity were halved


def test_gradient_gap_construction_exceeds_half_the_bound() -> None:
    loss = LogisticLoss()
    n = 10
    X, y, X2, y2 = _pair_far_along_e1(n, 0.25)
    w = np.array([10.0, 0.0, 0.0])
    gap = np.linalg.norm(loss.gradient(w, X, y) - loss.gradient(w, X2, y2))
    assert 0.55 * (2 / n) < gap <= 2 / n


# --- calibration through the run --------------------------------------------------------------


def test_fit_draws_the_planned_noise() -> None:
    n, d = 400, 200
    rng = np.random.default_rng(4)
    X, y = _unit_rows(rng, n, d), _labels(rng, n)
    loss = LogisticLoss(l2=0.05)
    plan = _plan(loss, n, d, 0.8, 1e-5, iterations=20)
    trace: list[AccMDStep] = []
    accmd_run(loss, X, y, _config(plan), np.random.default_rng(5), trace=trace)
    noise = np.concatenate([s.noisy - s.gradient for s in trace])
    assert noise.std() == pytest.approx(plan.noise_scale, rel=0.03)
    assert abs(noise.mean()) < 5 * plan.noise_scale / math.sqrt(noise.size)
    assert stats.kstest(noise / plan.noise_scale, "norm").pvalue > 1e-3
    w_fit = OPT.fit(plan, loss, X, y, np.random.default_rng(6), _noop)
    np.testing.assert_array_equal(
        w_fit, accmd_run(loss, X, y, _config(plan), np.random.default_rng(6))
    )
    rebuilt = dataclasses.replace(
        plan, hyperparameters=json.loads(json.dumps(plan.hyperparameters))
    )
    np.testing.assert_array_equal(
        OPT.fit(rebuilt, loss, X, y, np.random.default_rng(6), _noop), w_fit
    )


def test_progress_and_cancellation() -> None:
    rng = np.random.default_rng(7)
    X, y = _unit_rows(rng, 20, 3), _labels(rng, 20)
    loss = LogisticLoss()
    plan = _plan(loss, 20, 3, iterations=12)
    steps: list[int] = []
    OPT.fit(plan, loss, X, y, rng, steps.append)
    assert steps == list(range(1, 13))

    def cancel_at_5(step: int) -> None:
        if step == 5:
            raise JobCancelled("job")

    with pytest.raises(JobCancelled):
        OPT.fit(plan, loss, X, y, rng, cancel_at_5)


def test_fit_checks_its_assumptions() -> None:
    rng = np.random.default_rng(8)
    n, d = 30, 3
    X, y = _unit_rows(rng, n, d), _labels(rng, n)
    loss = LogisticLoss()
    plan = _plan(loss, n, d, iterations=5)
    bad_norm = X.copy()
    bad_norm[3] *= 1.5 / np.linalg.norm(bad_norm[3])
    bad_labels = y.copy()
    bad_labels[0] = 0.0
    for Xb, yb in [(bad_norm, y), (X[:-1], y[:-1]), (X[:, :2], y), (X, bad_labels)]:
        with pytest.raises(ValueError):
            OPT.fit(plan, loss, Xb, yb, rng, _noop)
    for other in (SigmoidLoss(), LogisticLoss(l1=0.1)):
        with pytest.raises(ValueError):
            OPT.fit(plan, other, X, y, rng, _noop)  # type: ignore[arg-type]


# --- utility ----------------------------------------------------------------------------------


def _noisy_separable(seed: int, n: int, d: int) -> tuple[FloatArray, FloatArray]:
    rng = np.random.default_rng(seed)
    X, y = _separable(rng, n, d)
    y[rng.random(n) < 0.1] *= -1
    return X, y


def test_huge_epsilon_reaches_the_unconstrained_optimum() -> None:
    n, d, mu = 500, 5, 0.01
    X, y = _noisy_separable(10, n, d)
    sk = LogisticRegression(C=1 / (n * mu), fit_intercept=False, tol=1e-12, max_iter=10_000)
    coef = sk.fit(X, y).coef_[0]
    assert np.abs(coef).sum() < 15  # the ℓ1 constraint below is inactive
    loss = LogisticLoss(l2=mu)
    plan = _plan(loss, n, d, 1e9, 1e-5, l1_radius=20.0)
    assert plan.total_steps == 500  # the default cap
    w = OPT.fit(plan, loss, X, y, np.random.default_rng(11), _noop)
    assert np.linalg.norm(w - coef) / np.linalg.norm(coef) < 5e-3


def _constrained_optimum(
    loss: LogisticLoss, X: FloatArray, y: FloatArray, radius: float
) -> tuple[FloatArray, float]:
    """min P(w) over ‖w‖₁ ≤ R by SLSQP on w = u − v, u, v ≥ 0, Σu + Σv ≤ R."""
    d = X.shape[1]

    def objective(z: FloatArray) -> float:
        return loss.value(z[:d] - z[d:], X, y)

    def grad(z: FloatArray) -> FloatArray:
        g = loss.gradient(z[:d] - z[d:], X, y)
        return np.concatenate([g + loss.l1, -g + loss.l1])

    res = optimize.minimize(
        objective,
        np.zeros(2 * d),
        jac=grad,
        method="SLSQP",
        bounds=[(0.0, None)] * (2 * d),
        constraints=[{"type": "ineq", "fun": lambda z: radius - z.sum()}],
        options={"ftol": 1e-14, "maxiter": 1000},
    )
    w = res.x[:d] - res.x[d:]
    return w, loss.value(w, X, y)


@pytest.mark.parametrize("l1", [0.0, 0.01])
def test_huge_epsilon_reaches_the_l1_constrained_optimum(l1: float) -> None:
    n, d, radius = 400, 6, 2.0
    X, y = _noisy_separable(12, n, d)
    loss = LogisticLoss(l1=l1)
    w_star, p_star = _constrained_optimum(loss, X, y, radius)
    assert np.abs(w_star).sum() > 0.99 * radius or l1 > 0  # the constraint binds (l1 = 0)
    plan = _plan(loss, n, d, 1e9, 1e-5, l1_radius=radius, iterations=1000)
    w = OPT.fit(plan, loss, X, y, np.random.default_rng(13), _noop)
    assert np.abs(w).sum() <= radius * (1 + 1e-12)
    assert loss.value(w, X, y) - p_star < 1e-4


def test_moderate_epsilon_beats_majority() -> None:
    rng = np.random.default_rng(14)
    n, d = 5000, 5
    X, y = _separable(rng, n, d)
    majority = max(np.mean(y == 1), np.mean(y == -1))
    loss = LogisticLoss()
    plan = _plan(loss, n, d, 1.0, 1e-5)  # theory defaults, R = 10
    accuracies = [
        float(np.mean(np.sign(X @ OPT.fit(plan, loss, X, y, np.random.default_rng(s), _noop)) == y))
        for s in range(5)
    ]
    assert np.mean(accuracies) > majority + 0.15
    assert min(accuracies) > majority


def test_moderate_epsilon_high_dimensional_sparse() -> None:
    """d = 500 ≫ informative features: the ℓ1 geometry keeps the noise at O(log d)."""
    rng = np.random.default_rng(15)
    n, d, k = 5000, 500, 5
    X = np.zeros((n, d))
    X[:, :k] = rng.uniform(-1, 1, size=(n, k))
    X[:, k:] = rng.normal(scale=0.02, size=(n, d - k))
    X[:, -1] = 1.0
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    score = X[:, :k] @ np.linspace(1.0, 0.5, k) + 0.1 * X[:, -1]
    y = np.where(score > 0, 1.0, -1.0)
    majority = max(np.mean(y == 1), np.mean(y == -1))
    loss = LogisticLoss()
    plan = _plan(loss, n, d, 1.0, 1e-5, l1_radius=10.0)
    accuracies = [
        float(np.mean(np.sign(X @ OPT.fit(plan, loss, X, y, np.random.default_rng(s), _noop)) == y))
        for s in range(3)
    ]
    assert min(accuracies) > majority + 0.15


# --- empirical audit --------------------------------------------------------------------------


def _clopper_pearson(k: int, trials: int, alpha: float) -> tuple[float, float]:
    lo = 0.0 if k == 0 else float(stats.beta.ppf(alpha, k, trials - k + 1))
    hi = 1.0 if k == trials else float(stats.beta.ppf(1 - alpha, k + 1, trials - k))
    return lo, hi


def _audit(plan: ReleasePlan, delta: float, runs: int, seed: int) -> float:
    """S: n rows (1, 0) with y = +1 under the logistic loss; S': one label flipped
    (gradients at 0 differ by 1/n = Δ/2). The 1-step release is a monotone function of the
    noisy first coordinate of the gradient; threshold tests on it give a 95% lower bound on ε."""
    n, d = plan.hyperparameters["n"], plan.hyperparameters["d"]
    X = np.zeros((n, d))
    X[:, 0] = 1.0
    y = np.ones(n)
    y2 = y.copy()
    y2[0] = -1.0
    loss = LogisticLoss()
    rng = np.random.default_rng(seed)
    outs = [
        np.array([OPT.fit(plan, loss, X, yy, rng, _noop)[0] for _ in range(runs)]) for yy in (y, y2)
    ]
    # the release decreases in the noisy gradient; S' has the larger gradient, so the smaller
    # output: count outputs below thresholds placed a priori in units of the noise
    quiet = [
        accmd_run(loss, X, yy, _config(plan), np.random.default_rng(0), noise_sigma=0.0)[0]
        for yy in (y, y2)
    ]
    cfg = _config(plan)
    slope = abs(quiet[1] - quiet[0]) / (1.0 / n)  # output change per unit of gradient
    scale = slope * cfg.noise_sigma
    thresholds = [quiet[0] - k * scale for k in (0.5, 1.0, 1.5, 2.0, 2.5)]
    alpha = 0.05 / (2 * len(thresholds))
    best = 0.0
    for t in thresholds:
        fp, tp = int(np.sum(outs[0] < t)), int(np.sum(outs[1] < t))
        fpr_lo, fpr_hi = _clopper_pearson(fp, runs, alpha)
        tpr_lo, tpr_hi = _clopper_pearson(tp, runs, alpha)
        if tpr_lo - delta > 0 and fpr_hi > 0:
            best = max(best, math.log((tpr_lo - delta) / fpr_hi))
        if (1 - fpr_lo) - delta > 0 and (1 - tpr_lo) > 0:
            best = max(best, math.log(((1 - fpr_lo) - delta) / (1 - tpr_lo)))
    return best


def test_empirical_audit_below_claimed_epsilon() -> None:
    eps, delta = 1.0, 1e-5
    plan = _plan(LogisticLoss(), 20, 2, eps, delta, iterations=1, l1_radius=1.0)
    lower = _audit(plan, delta, runs=2500, seed=16)
    assert lower < eps
    # the audit has power: with 12× less noise it certifies a violation of the claim
    hp = {**plan.hyperparameters, "noise_sigma": plan.noise_scale / 12}
    broken = dataclasses.replace(plan, noise_scale=plan.noise_scale / 12, hyperparameters=hp)
    assert _audit(broken, delta, runs=2500, seed=17) > eps


def test_audit_statistic_is_monotone_in_the_gradient() -> None:
    """The 1-step release of the audit is a decreasing function of the noisy gradient, so
    thresholding it is thresholding the Gaussian mechanism's output."""
    plan = _plan(LogisticLoss(), 20, 2, iterations=1, l1_radius=1.0)
    cfg = dataclasses.replace(_config(plan), d=2)
    outs = []
    for g in np.linspace(-1, 1, 21):

        class Fixed:
            l2 = 0.0
            l1 = 0.0

            def gradient(self, w: FloatArray, X: FloatArray, y: FloatArray) -> FloatArray:
                return np.array([g, 0.0])  # noqa: B023

        outs.append(
            accmd_run(
                Fixed(),
                np.zeros((20, 2)),
                np.ones(20),
                cfg,
                np.random.default_rng(0),
                noise_sigma=0.0,
            )[0]
        )  # type: ignore[arg-type]
    assert all(a > b for a, b in zip(outs, outs[1:], strict=False))


# --- infeasible specs, parameters, registry ---------------------------------------------------


def test_infeasible_specs_name_the_field() -> None:
    loss = LogisticLoss()
    cases: list[tuple[DPAccMDParams, object, PrivacyTarget, str]] = [
        (_params(), SigmoidLoss(), PrivacyTarget(1.0, 1e-5), "model"),
        (_params(), loss, PrivacyTarget(1.0, 0.0), "privacy.delta"),
        (_params(), loss, PrivacyTarget(1.0, 1.0), "privacy.delta"),
        (_params(), loss, PrivacyTarget(1.0, math.nan), "privacy.delta"),
        (_params(), loss, PrivacyTarget(0.0, 1e-5), "privacy.epsilon"),
        (_params(), loss, PrivacyTarget(-1.0, 1e-5), "privacy.epsilon"),
        (_params(), loss, PrivacyTarget(math.inf, 1e-5), "privacy.epsilon"),
    ]
    for params, case_loss, target, field_name in cases:
        with pytest.raises(InfeasibleSpec) as info:
            OPT.plan(params, case_loss, 100, 3, target)  # type: ignore[arg-type]
        assert info.value.field == field_name
        assert info.value.message
    with pytest.raises(InfeasibleSpec, match="convex"):
        OPT.plan(_params(), SigmoidLoss(), 100, 3, PrivacyTarget(1.0, 1e-5))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "payload",
    [
        {"radius": 1.0},
        {"l1_radius": 0.0},
        {"l1_radius": -1.0},
        {"l1_radius": math.inf},
        {"iterations": 0},
        {"iterations": 10**9},
        {"max_iterations": 0},
    ],
)
def test_params_validation(payload: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        DPAccMDParams.model_validate(payload)


def test_params_schema_and_registry() -> None:
    schema = DPAccMDParams.model_json_schema()
    assert schema["additionalProperties"] is False
    for prop in schema["properties"].values():
        assert prop["description"]
    assert "dp_accmd" in optimizer_names()
    assert isinstance(get_optimizer("dp_accmd"), DPAccMD)
    (entry,) = [e for e in catalog() if e["name"] == "dp_accmd"]
    json.dumps(entry)
    assert "Wang" in entry["reference"]
    assert accmd_event(2.0, 3).count == 3
