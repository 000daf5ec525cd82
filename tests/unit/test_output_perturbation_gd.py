"""output_perturbation_gd (Zhang et al. Alg. 1): plan, sensitivity, calibration, utility, audit.

docs/privacy-model.md#testing-privacy: sensitivity tests with the noise switched off on random
and adversarial neighbouring
pairs, calibration tests through ``plan``/``fit``, and a small empirical audit.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass

import numpy as np
import pytest
from dp_accounting import dp_event
from pydantic import ValidationError
from scipy import stats
from scipy.optimize import minimize
from sklearn.linear_model import LogisticRegression

from service.models.base import FloatArray, Loss
from service.models.cauchy_regression import CauchyRegressionLoss
from service.models.huber_regression import HuberRegressionLoss
from service.models.huber_svm import HuberSVMLoss
from service.models.logistic import LogisticLoss
from service.models.sigmoid import SigmoidLoss
from service.optimizers.kits.base import InfeasibleSpec, JobCancelled, PrivacyTarget, ReleasePlan
from service.optimizers.kits.limits import FULL_GRADIENT_STEPS_CAP
from service.optimizers.kits.registry import catalog, get_optimizer, optimizer_names
from service.optimizers.output_perturbation_gd import (
    OutputPerturbationGD,
    OutputPerturbationGDParams,
    default_iterations,
    gd_sensitivity,
    gradient_descent,
    max_step_size,
)
from service.privacy.analytic_gaussian import analytic_gaussian_sigma
from service.privacy.output_perturbation import release_with_noise
from service.privacy.secure_release import gaussian_release, laplace_release

OPT = OutputPerturbationGD()
BETA = 0.25


def _params(**kw: object) -> OutputPerturbationGDParams:
    return OutputPerturbationGDParams.model_validate(kw)


def _plan(
    l2: float, n: int, d: int, eps: float = 1.0, delta: float = 1e-5, **kw: object
) -> ReleasePlan:
    return OPT.plan(_params(**kw), LogisticLoss(l2=l2), n, d, PrivacyTarget(eps, delta))


def _unit_rows(rng: np.random.Generator, n: int, d: int) -> FloatArray:
    x = rng.normal(size=(n, d))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x * rng.uniform(0.2, 1.0, size=(n, 1))


def _labels(rng: np.random.Generator, n: int) -> FloatArray:
    return rng.choice([-1.0, 1.0], size=n)


def _noop(_: int) -> None:
    return None


# --- plan: formulas, defaults, events ---------------------------------------------------------


def test_default_step_sizes_and_bound() -> None:
    assert _plan(0.0, 100, 3).hyperparameters["step_size"] == pytest.approx(1 / BETA)
    for mu in (1e-4, 0.1, 2.0):
        plan = _plan(mu, 100, 3)
        assert plan.hyperparameters["step_size"] == pytest.approx(2 / (BETA + 2 * mu))
        assert max_step_size(BETA, mu) == pytest.approx(2 / (BETA + 2 * mu))


@pytest.mark.parametrize("mu", [0.0, 1e-6, 1e-3, 0.1, 1.0])
@pytest.mark.parametrize("n", [1, 37, 10_000])
@pytest.mark.parametrize("iterations", [1, 10, 1000])
def test_sensitivity_formula_and_paper_bounds(mu: float, n: int, iterations: int) -> None:
    for eta in (0.5 / (BETA + mu), 1 / (BETA + mu), max_step_size(BETA, mu)):
        plan = _plan(mu, n, 4, iterations=iterations, step_size=eta)
        delta_t = plan.sensitivity
        linear = 2 * eta * iterations / n  # L = 1
        if mu == 0.0:
            assert delta_t == pytest.approx(linear, rel=1e-12)
        else:
            direct = 2 * (1 - (1 - eta * mu) ** iterations) / (n * mu)
            assert delta_t == pytest.approx(direct, rel=1e-9)
            assert delta_t < 2 / (n * mu) * (1 + 1e-12)
            # Zhang et al. Lemma 3: 5L(μ+β)/(nμβ)
            assert delta_t <= 0.4 * 5 * (mu + BETA) / (n * mu * BETA) * (1 + 1e-12)
        assert delta_t <= linear * (1 + 1e-12)
        if eta <= 1 / BETA:  # Zhang et al. Lemma 2's range
            assert delta_t < 3 * eta * iterations / n


def test_sensitivity_monotone_in_t_and_saturates() -> None:
    values = [gd_sensitivity(1.0, 100, 2.0, t, 0.05) for t in (1, 2, 5, 50, 100, 5000)]
    assert all(a < b for a, b in zip(values, values[1:], strict=False))
    assert values[-1] == pytest.approx(2 / (100 * 0.05), rel=1e-12)
    # tiny μ agrees with the convex limit
    assert gd_sensitivity(1.0, 100, 2.0, 10, 1e-15) == pytest.approx(0.4, rel=1e-9)


def _paper_t(mu: float, n: int, d: int, eps: float, delta: float, radius: float) -> float:
    """Thm 3's T; for μ > 0 the smaller of Thm 2's and Thm 3's (both valid then)."""
    c = d * math.log(1 / delta) if delta > 0 else d * d
    convex = (BETA**2 * n**2 * eps**2 * radius**2 / c) ** (1 / 3)
    if mu == 0:
        return convex
    bf = BETA + mu
    ratio = mu**2 * n**2 * eps**2 * radius**2 / c
    return min(convex, (mu**2 + bf**2) / (mu * bf) * math.log(max(math.e, ratio)))


@pytest.mark.parametrize(
    ("mu", "n", "d", "eps", "delta", "radius"),
    [
        (0.0, 5000, 5, 1.0, 1e-5, 10.0),
        (0.0, 100, 20, 0.5, 0.0, 3.0),
        (0.0, 10, 50, 0.01, 1e-6, 1.0),
        (0.5, 5000, 5, 1.0, 1e-5, 10.0),
        (1.0, 1000, 10, 2.0, 0.0, 10.0),
        (2.0, 10, 100, 0.1, 1e-8, 1.0),
    ],
)
def test_default_iterations_follow_theorems(
    mu: float, n: int, d: int, eps: float, delta: float, radius: float
) -> None:
    plan = _plan(mu, n, d, eps, delta, radius=radius, max_iterations=FULL_GRADIENT_STEPS_CAP)
    paper_t = math.ceil(_paper_t(mu, n, d, eps, delta, radius))
    expected = min(FULL_GRADIENT_STEPS_CAP, max(1, paper_t))
    assert plan.total_steps == plan.hyperparameters["iterations"] == expected
    assert plan.hyperparameters["radius"] == radius


def test_default_iterations_clamped() -> None:
    assert _plan(1e-4, 10**6, 5, 10.0, max_iterations=123).total_steps == 123
    assert _plan(0.0, 1, 1000, 1e-3).total_steps == 1
    loss = LogisticLoss(l2=0.0)
    huge = default_iterations(loss, 10**9, 2, PrivacyTarget(1e300, 0.5), 1e6, 77)
    assert huge == 77
    # an explicit iteration count is used as given, above the default cap too
    assert _plan(0.0, 100, 3, iterations=5000, max_iterations=10).total_steps == 5000


@pytest.mark.parametrize(("eps", "delta"), [(0.1, 1e-6), (1.0, 1e-5), (8.0, 1e-9), (1e9, 1e-5)])
def test_gaussian_plan_calibration(eps: float, delta: float) -> None:
    plan = _plan(0.01, 500, 5, eps, delta, iterations=50)
    assert plan.mechanism == "gaussian"
    assert plan.noise_scale == pytest.approx(
        analytic_gaussian_sigma(eps, delta, plan.sensitivity), rel=1e-12
    )
    assert isinstance(plan.event, dp_event.GaussianDpEvent)
    assert plan.event.noise_multiplier == pytest.approx(plan.noise_scale / plan.sensitivity)


@pytest.mark.parametrize("eps", [0.1, 1.0, 700.0])
def test_pure_plan_calibration(eps: float) -> None:
    plan = _plan(0.0, 500, 5, eps, 0.0, iterations=50)
    assert plan.mechanism == "norm_gamma"
    assert plan.noise_scale == pytest.approx(plan.sensitivity / eps, rel=1e-15)
    assert isinstance(plan.event, dp_event.RandomizedResponseDpEvent)
    assert plan.event.num_buckets == 2
    assert plan.event.noise_parameter == pytest.approx(2 / (1 + math.exp(eps)), rel=1e-12)


# --- infeasible specs and parameter validation ------------------------------------------------


@dataclass
class _NonConvexLoss(LogisticLoss):
    def __post_init__(self) -> None:
        super().__post_init__()
        self.convex = False
        self.name = "sigmoid_loss"


def test_infeasible_specs_name_the_field() -> None:
    loss = LogisticLoss(l2=0.1)
    bound = 2 / (BETA + 0.2)
    OPT.plan(_params(step_size=bound), loss, 10, 2, PrivacyTarget(1.0, 1e-5))  # at the bound: ok
    cases: list[tuple[OutputPerturbationGDParams, object, PrivacyTarget, str]] = [
        (
            _params(step_size=math.nextafter(bound, 9.0)),
            loss,
            PrivacyTarget(1, 1e-5),
            "optimizer.params.step_size",
        ),
        (
            _params(step_size=8.01),
            LogisticLoss(),
            PrivacyTarget(1, 1e-5),
            "optimizer.params.step_size",
        ),
        (_params(), _NonConvexLoss(), PrivacyTarget(1, 1e-5), "model"),
        (_params(), loss, PrivacyTarget(0.0, 1e-5), "privacy.epsilon"),
        (_params(), loss, PrivacyTarget(-1.0, 1e-5), "privacy.epsilon"),
        (_params(), loss, PrivacyTarget(math.inf, 1e-5), "privacy.epsilon"),
        (_params(), loss, PrivacyTarget(math.nan, 1e-5), "privacy.epsilon"),
        (_params(), loss, PrivacyTarget(1.0, -1e-9), "privacy.delta"),
        (_params(), loss, PrivacyTarget(1.0, 1.0), "privacy.delta"),
        (_params(), loss, PrivacyTarget(800.0, 0.0), "privacy.epsilon"),
    ]
    for params, case_loss, target, field in cases:
        with pytest.raises(InfeasibleSpec) as info:
            OPT.plan(params, case_loss, 10, 2, target)
        assert info.value.field == field
        assert info.value.message
    with pytest.raises(InfeasibleSpec, match=r"2/\(β \+ 2μ\)"):
        OPT.plan(_params(step_size=100.0), loss, 10, 2, PrivacyTarget(1, 1e-5))


@pytest.mark.parametrize(
    "payload",
    [
        {"eta": 1.0},
        {"step_size": 0.0},
        {"step_size": -1.0},
        {"step_size": math.inf},
        {"iterations": 0},
        {"iterations": FULL_GRADIENT_STEPS_CAP + 1},
        {"radius": 0.0},
        {"max_iterations": 0},
    ],
)
def test_params_validation(payload: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        OutputPerturbationGDParams.model_validate(payload)


def test_params_schema_is_documented() -> None:
    schema = OutputPerturbationGDParams.model_json_schema()
    assert schema["additionalProperties"] is False
    for name in ("iterations", "step_size", "radius", "max_iterations"):
        assert schema["properties"][name]["description"]


# --- sensitivity with the noise switched off --------------------------------------------------


def _gd(loss: Loss, X: FloatArray, y: FloatArray, plan: ReleasePlan) -> FloatArray:
    hp = plan.hyperparameters
    return gradient_descent(loss, X, y, hp["step_size"], hp["iterations"])


def _orthogonal_pair(n: int, alpha: float) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Shared rows e1 (y = +1) push w along e1 so the differing row (−α, ±b) stays
    misclassified, while the two versions pull w apart along e2, where no shared row adds
    curvature: the construction that comes closest to Δ_T for the logistic loss."""
    X = np.zeros((n, 3))
    X[:, 0] = 1.0
    y = np.ones(n)
    b = math.sqrt(1 - alpha**2)
    X2 = X.copy()
    X[0] = (-alpha, b, 0.0)
    X2[0] = (-alpha, -b, 0.0)
    return X, X2, y


SENSITIVITY_CASES = [
    # (μ, n, T, step: "max" | "default" | "small", is the construction expected to exceed Δ/2?)
    (0.0, 10, 1, "max", False),
    (0.0, 20, 25, "default", False),
    (0.0, 200, 20, "max", True),
    (0.0, 1000, 100, "max", True),
    (0.01, 200, 100, "max", True),
    (0.01, 50, 60, "small", False),
    (0.1, 1000, 20, "max", True),
    (0.5, 10, 30, "max", False),
]


@pytest.mark.parametrize(("mu", "n", "iterations", "step", "tight"), SENSITIVITY_CASES)
def test_observed_sensitivity_never_exceeds_plan(
    mu: float, n: int, iterations: int, step: str, tight: bool
) -> None:
    rng = np.random.default_rng(int(1000 * mu) + n + iterations)
    d = 3
    eta = {
        "max": max_step_size(BETA, mu),
        "default": None,
        "small": 1 / (BETA + mu),
    }[step]
    kw: dict[str, object] = {"iterations": iterations}
    if eta is not None:
        kw["step_size"] = eta
    plan = _plan(mu, n, d, **kw)
    loss = LogisticLoss(l2=mu)
    bound = plan.sensitivity
    observed: list[float] = []

    def check(X: FloatArray, y: FloatArray, X2: FloatArray, y2: FloatArray) -> None:
        gap = float(np.linalg.norm(_gd(loss, X, y, plan) - _gd(loss, X2, y2, plan)))
        assert gap <= bound * (1 + 1e-9), (gap, bound)
        observed.append(gap)

    for _ in range(8):  # base datasets
        X, y = _unit_rows(rng, n, d), _labels(rng, n)
        w_final = _gd(loss, X, y, plan)
        w_dir = w_final / max(float(np.linalg.norm(w_final)), 1e-12)
        for _ in range(4):  # random neighbours
            j = int(rng.integers(n))
            X2, y2 = X.copy(), y.copy()
            X2[j] = _unit_rows(rng, 1, d)[0]
            y2[j] = rng.choice([-1.0, 1.0])
            check(X, y, X2, y2)
        j = int(rng.integers(n))
        unit = X[j] / np.linalg.norm(X[j])
        candidates = [
            (-unit, y[j]),  # opposite row, same label: gradients at w_0 = 0 opposite
            (unit, -y[j]),  # flipped label
            (-X[j], -y[j]),  # −x with flipped label (same loss for logistic: gap 0)
            (w_dir, -1.0),  # aligned with the final iterate, badly misclassified
            (-w_dir, 1.0),
            (np.zeros(d), 1.0),  # a zero row
        ]
        candidates += [(u, s) for u in _unit_rows(rng, 6, d) for s in (-1.0, 1.0)]
        for x_new, y_new in candidates:
            X2, y2 = X.copy(), y.copy()
            X2[j], y2[j] = x_new, y_new
            check(X, y, X2, y2)
    construction = 0.0
    for alpha in (0.2, 0.3, 0.4, 0.5, 0.6):
        X, X2, y = _orthogonal_pair(n, alpha)
        check(X, y, X2, y)
        construction = max(construction, observed[-1])
    # the bound is not vacuous for any configuration …
    assert max(observed) >= 0.1 * bound
    # … and for these it would fail if Δ were scaled down by 2
    if tight:
        assert construction > 0.55 * bound


def test_first_step_gap_is_exactly_half_the_bound() -> None:
    """At w_0 = 0 logistic gradients are −y x/2, so one step with x' = −x gives exactly Δ_1/2:
    the factor 2L/n in Δ cannot be halved without the construction above exceeding it."""
    n, d = 7, 4
    rng = np.random.default_rng(11)
    X, y = _unit_rows(rng, n, d), _labels(rng, n)
    X[0] /= np.linalg.norm(X[0])
    X2 = X.copy()
    X2[0] = -X[0]
    plan = _plan(0.0, n, d, iterations=1, step_size=8.0)
    gap = np.linalg.norm(_gd(LogisticLoss(), X, y, plan) - _gd(LogisticLoss(), X2, y, plan))
    assert gap == pytest.approx(plan.sensitivity / 2, rel=1e-12)


# --- calibration through fit ------------------------------------------------------------------


@pytest.mark.parametrize("delta", [1e-5, 0.0])
def test_fit_noise_matches_plan(delta: float) -> None:
    n, d = 20, 200
    rng = np.random.default_rng(5)
    X, y = _unit_rows(rng, n, d), _labels(rng, n)
    loss = LogisticLoss(l2=0.05)
    plan = OPT.plan(_params(iterations=5), loss, n, d, PrivacyTarget(0.8, delta))
    w_t = _gd(loss, X, y, plan)
    noise_rng = np.random.default_rng(6)
    noise = np.array([OPT.fit(plan, loss, X, y, noise_rng, _noop) - w_t for _ in range(150)])
    if delta > 0:
        assert plan.mechanism == "gaussian"
        assert noise.std() == pytest.approx(plan.noise_scale, rel=0.02)
        assert abs(noise.mean()) < 4 * plan.noise_scale / math.sqrt(noise.size)
        # and it is not the classic calibration, which is ~25% larger here
        assert noise.std() < 0.9 * math.sqrt(2 * math.log(1.25 / delta)) * plan.sensitivity / 0.8
    else:
        assert plan.mechanism == "norm_gamma"
        # the stored name and scale λ = Δ/ε are kept; the draw is the exact discrete Laplace at
        # the ℓ1 sensitivity: i.i.d. coordinates of scale b ≈ √d·λ on the grid (≈ continuous
        # Laplace for b ≥ 2^20 grid steps), ‖z‖ ≈ √(2d)·b ≈ √2·dλ (√2 × norm-gamma's dλ)
        rel = laplace_release(d, plan.sensitivity / plan.noise_scale, plan.sensitivity)
        flat = noise.reshape(-1)
        assert stats.kstest(flat, stats.laplace(scale=rel.noise_scale).cdf).pvalue > 1e-3
        assert stats.kstest(flat, stats.laplace(scale=1.1 * rel.noise_scale).cdf).pvalue < 1e-3
        norms = np.linalg.norm(noise, axis=1)
        assert norms.mean() == pytest.approx(math.sqrt(2) * d * plan.noise_scale, rel=0.02)


def test_fit_is_gd_plus_one_noise_draw() -> None:
    rng = np.random.default_rng(8)
    n, d = 30, 4
    X, y = _unit_rows(rng, n, d), _labels(rng, n)
    loss = LogisticLoss(l2=0.01)
    plan = OPT.plan(_params(iterations=20), loss, n, d, PrivacyTarget(1.0, 1e-6))
    w = OPT.fit(plan, loss, X, y, np.random.default_rng(42), _noop)
    expected = release_with_noise(
        plan.mechanism, _gd(loss, X, y, plan), plan.noise_scale, plan.sensitivity,
        np.random.default_rng(42),
    )  # fmt: skip
    grid = gaussian_release(d, plan.noise_scale, plan.sensitivity).grid
    # the same exact draw; a rounding to the grid may differ by one step across kernels
    np.testing.assert_allclose(w, expected, rtol=0, atol=1.01 * grid)


def test_progress_and_cancellation() -> None:
    rng = np.random.default_rng(9)
    X, y = _unit_rows(rng, 10, 3), _labels(rng, 10)
    loss = LogisticLoss()
    plan = _plan(0.0, 10, 3, iterations=12)
    steps: list[int] = []
    OPT.fit(plan, loss, X, y, rng, steps.append)
    assert steps == list(range(1, 13))

    def cancel_at_5(step: int) -> None:
        steps.append(step)
        if step == 5:
            raise JobCancelled("job")

    steps.clear()
    with pytest.raises(JobCancelled):
        OPT.fit(plan, loss, X, y, rng, cancel_at_5)
    assert steps == [1, 2, 3, 4, 5]


def test_fit_checks_its_assumptions() -> None:
    rng = np.random.default_rng(10)
    n, d = 10, 3
    X, y = _unit_rows(rng, n, d), _labels(rng, n)
    loss = LogisticLoss(l2=0.1)
    plan = _plan(0.1, n, d, iterations=10)
    bad_norm = X.copy()
    bad_norm[3] *= 1.5 / np.linalg.norm(bad_norm[3])
    bad_labels = y.copy()
    bad_labels[0] = 0.0
    for Xb, yb in [
        (bad_norm, y),
        (X[:-1], y[:-1]),
        (X[:, :2], y),
        (X, bad_labels),
        (np.where(X > 0.5, np.nan, X), y),
    ]:
        with pytest.raises(ValueError):
            OPT.fit(plan, loss, Xb, yb, rng, _noop)
    with pytest.raises(ValueError, match="sensitivity"):  # plan made for a larger μ
        OPT.fit(plan, LogisticLoss(l2=0.0), X, y, rng, _noop)
    # rows over the bound by rounding only are rescaled, not rejected
    X_round = X.copy()
    X_round[2] *= (1 + 1e-9) / np.linalg.norm(X_round[2])
    assert np.all(np.isfinite(OPT.fit(plan, loss, X_round, y, rng, _noop)))


# --- utility ----------------------------------------------------------------------------------


def _separable(rng: np.random.Generator, n: int, d: int) -> tuple[FloatArray, FloatArray]:
    """Linearly separable data with margin, a constant column, ‖x‖ ≤ 1 and ~72% majority."""
    Z = rng.uniform(-1, 1, size=(4 * n, d - 1))
    score = Z @ np.linspace(1.0, -0.5, d - 1) + 0.4
    keep = np.abs(score) > 0.1
    Z, score = Z[keep][:n], score[keep][:n]
    X = np.hstack([Z, np.ones((n, 1))]) / math.sqrt(d)
    return X, np.where(score > 0, 1.0, -1.0)


def test_noise_free_limit_matches_sklearn() -> None:
    rng = np.random.default_rng(12)
    n, d, mu = 500, 5, 0.01
    X, y = _separable(rng, n, d)
    y[rng.random(n) < 0.1] *= -1  # some label noise
    sk = LogisticRegression(C=1 / (n * mu), fit_intercept=False, tol=1e-12, max_iter=10_000)
    ref = sk.fit(X, y)
    coef = ref.coef_[0]
    loss = LogisticLoss(l2=mu)
    for target in (PrivacyTarget(1e9, 1e-5), PrivacyTarget(700.0, 0.0)):
        plan = OPT.plan(_params(iterations=1000), loss, n, d, target)
        w = OPT.fit(plan, loss, X, y, np.random.default_rng(13), _noop)
        tol = 1e-3 if target.delta > 0 else 5e-2  # ε ≤ 700 for pure DP leaves visible noise
        assert np.linalg.norm(w - coef) / np.linalg.norm(coef) < tol
    w0 = gradient_descent(loss, X, y, plan.hyperparameters["step_size"], 1000)
    assert np.linalg.norm(w0 - coef) / np.linalg.norm(coef) < 1e-6


@pytest.mark.parametrize("mu", [0.0, 0.01])
@pytest.mark.parametrize("delta", [1e-5, 0.0])
def test_moderate_epsilon_beats_majority(mu: float, delta: float) -> None:
    rng = np.random.default_rng(14)
    n, d = 5000, 5
    X, y = _separable(rng, n, d)
    majority = max(np.mean(y == 1), np.mean(y == -1))
    loss = LogisticLoss(l2=mu)
    plan = OPT.plan(_params(), loss, n, d, PrivacyTarget(1.0, delta))  # theory defaults
    accuracies = [
        float(np.mean(np.sign(X @ OPT.fit(plan, loss, X, y, np.random.default_rng(s), _noop)) == y))
        for s in range(5)
    ]
    assert np.mean(accuracies) > majority + 0.15
    assert min(accuracies) > majority


# --- empirical audit --------------------------------------------------------------------------


def _clopper_pearson(k: int, trials: int, alpha: float) -> tuple[float, float]:
    lo = 0.0 if k == 0 else float(stats.beta.ppf(alpha, k, trials - k + 1))
    hi = 1.0 if k == trials else float(stats.beta.ppf(1 - alpha, k + 1, trials - k))
    return lo, hi


def _audit_epsilon_lower_bound(plan: ReleasePlan, delta: float, runs: int, seed: int) -> float:
    """Run fit on S and S' (an orthogonal-construction pair), project on the direction between
    the noiseless outputs and turn threshold tests into a 95% lower bound on ε."""
    n = 200
    X, X2, y = _orthogonal_pair(n, 0.4)
    loss = LogisticLoss(l2=0.0)
    w_s, w_s2 = _gd(loss, X, y, plan), _gd(loss, X2, y, plan)
    v = (w_s2 - w_s) / np.linalg.norm(w_s2 - w_s)
    rng = np.random.default_rng(seed)
    proj_s = np.array([OPT.fit(plan, loss, X, y, rng, _noop) @ v for _ in range(runs)])
    proj_s2 = np.array([OPT.fit(plan, loss, X2, y, rng, _noop) @ v for _ in range(runs)])
    # thresholds fixed a priori (before looking at the outputs), Bonferroni over them
    # (noise_scale is σ for the Gaussian and the Laplace-like scale Δ/ε for norm-gamma)
    thresholds = [float(w_s @ v) + k * plan.noise_scale for k in (0.5, 1.0, 1.5, 2.0, 2.5)]
    alpha = 0.05 / (2 * len(thresholds))
    best = 0.0
    for t in thresholds:
        fp, tp = int(np.sum(proj_s > t)), int(np.sum(proj_s2 > t))
        fpr_lo, fpr_hi = _clopper_pearson(fp, runs, alpha)
        tpr_lo, tpr_hi = _clopper_pearson(tp, runs, alpha)
        if tpr_lo - delta > 0 and fpr_hi > 0:
            best = max(best, math.log((tpr_lo - delta) / fpr_hi))
        if (1 - fpr_lo) - delta > 0 and (1 - tpr_lo) > 0:
            best = max(best, math.log(((1 - fpr_lo) - delta) / (1 - tpr_lo)))
    return best


@pytest.mark.parametrize(("eps", "delta"), [(1.0, 1e-5), (1.0, 0.0)])
def test_empirical_audit_below_claimed_epsilon(eps: float, delta: float) -> None:
    plan = _plan(0.0, 200, 3, eps, delta, iterations=10, step_size=8.0)
    lower = _audit_epsilon_lower_bound(plan, delta, runs=3000, seed=15)
    assert lower < eps
    # the audit has power: with the noise cut 6-fold it certifies a violation of the claim
    broken = dataclasses.replace(plan, noise_scale=plan.noise_scale / 6)
    assert _audit_epsilon_lower_bound(broken, delta, runs=3000, seed=16) > eps


# --- registry ---------------------------------------------------------------------------------


def test_registry() -> None:
    assert "output_perturbation_gd" in optimizer_names()
    opt = get_optimizer("output_perturbation_gd")
    assert isinstance(opt, OutputPerturbationGD)
    assert opt.Params is OutputPerturbationGDParams
    with pytest.raises(KeyError):
        get_optimizer("sgd")
    entries = catalog()
    json.dumps(entries)
    (entry,) = [e for e in entries if e["name"] == "output_perturbation_gd"]
    assert set(entry) == {"name", "summary", "assumptions", "guarantee", "reference", "params"}
    assert "step_size" in entry["params"]["properties"]
    assert "Zhang" in entry["reference"]


# --- the rest of the model catalog ------------------------------------------------------------
# The optimizer uses only (L, β, μ) and ``loss.check_labels``: every convex model runs unchanged;
# non-convex models and l1 > 0 are rejected at plan time.


def _huber_svm(mu: float) -> HuberSVMLoss:
    return HuberSVMLoss(l2=mu, width=0.5)  # L = 1, β = 1


def _huber_reg(mu: float) -> HuberRegressionLoss:
    return HuberRegressionLoss(l2=mu, delta=0.5, label_bound=3.0)  # L = 0.5, β = 1


def test_plan_for_every_convex_model_and_rejections() -> None:
    target = PrivacyTarget(1.0, 1e-5)
    for loss in (LogisticLoss(l2=0.01), _huber_svm(0.01), _huber_reg(0.01), _huber_reg(0.0)):
        plan = OPT.plan(_params(iterations=30), loss, 100, 3, target)
        eta = plan.hyperparameters["step_size"]
        assert eta == pytest.approx(max_step_size(loss.smoothness, loss.l2) if loss.l2 else 1.0)
        assert plan.sensitivity == pytest.approx(
            gd_sensitivity(loss.lipschitz, 100, eta, 30, loss.l2), rel=1e-15
        )
    assert _huber_reg(0.0).lipschitz == 0.5  # L = δ, not the label bound
    for non_convex in (SigmoidLoss(l2=0.01), CauchyRegressionLoss(label_bound=2.0)):
        with pytest.raises(InfeasibleSpec) as info:
            OPT.plan(_params(), non_convex, 100, 3, target)
        assert info.value.field == "model" and "not convex" in info.value.message
    for with_l1 in (
        LogisticLoss(l2=0.01, l1=0.1),
        HuberSVMLoss(l1=1e-6),
        HuberRegressionLoss(l1=0.5, label_bound=1.0),
    ):
        with pytest.raises(InfeasibleSpec) as info:
            OPT.plan(_params(), with_l1, 100, 3, target)
        assert info.value.field == "model"
        assert "dp_svrg" in info.value.message and "l1 = 0" in info.value.message
    # fit refuses an l1 loss even with a plan made for its smooth part
    rng = np.random.default_rng(20)
    X, y = _unit_rows(rng, 10, 3), _labels(rng, 10)
    plan = OPT.plan(_params(iterations=3), LogisticLoss(l2=0.1), 10, 3, target)
    with pytest.raises(ValueError, match="l1"):
        OPT.fit(plan, LogisticLoss(l2=0.1, l1=0.1), X, y, rng, _noop)


def test_fit_checks_labels_per_task() -> None:
    rng = np.random.default_rng(21)
    n, d = 12, 3
    X = _unit_rows(rng, n, d)
    loss = _huber_reg(0.1)
    plan = OPT.plan(_params(iterations=5), loss, n, d, PrivacyTarget(1.0, 1e-5))
    y = rng.uniform(-3.0, 3.0, size=n)
    y[0] = 3.0  # the bound itself is admissible
    assert np.all(np.isfinite(OPT.fit(plan, loss, X, y, rng, _noop)))
    for bad in (3.0001, math.nan, -math.inf):
        yb = y.copy()
        yb[1] = bad
        with pytest.raises(ValueError, match="label"):
            OPT.fit(plan, loss, X, yb, rng, _noop)
    svm = _huber_svm(0.1)
    svm_plan = OPT.plan(_params(iterations=5), svm, n, d, PrivacyTarget(1.0, 1e-5))
    with pytest.raises(ValueError, match="label"):
        OPT.fit(svm_plan, svm, X, y, rng, _noop)  # real labels for a classifier


def _huber_pair(
    kind: str, n: int, bound: float
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """Shared rows e1; the differing row is e2 in both datasets, pulled the opposite way:
    SVM: x = ±e2 with y = +1 (margin ±w₂, linear part of the hinge, slope 1 = L);
    regression: y = ±B (residual beyond δ, slope δ = L). While the differing row stays in the
    linear regime, each step moves w₂ by exactly ηL/n in opposite directions and no shared row
    adds curvature along e2, so ‖w_T − w'_T‖ equals Δ_T exactly."""
    X = np.zeros((n, 3))
    X[:, 0] = 1.0
    X[0] = (0.0, 1.0, 0.0)
    if kind == "svm":
        y = np.ones(n)
        X2 = X.copy()
        X2[0] = (0.0, -1.0, 0.0)
        return X, y, X2, y.copy()
    y = np.zeros(n)
    y[1:] = 0.5 * bound
    y2 = y.copy()
    y[0], y2[0] = bound, -bound
    return X, y, X.copy(), y2


HUBER_CASES = [
    # (kind, μ, n, T, step: "max" | "default" | "small")
    ("svm", 0.0, 200, 40, "max"),
    ("svm", 0.0, 50, 10, "default"),
    ("svm", 0.01, 1000, 200, "max"),
    ("svm", 0.3, 100, 30, "small"),
    ("reg", 0.0, 200, 40, "max"),
    ("reg", 0.0, 30, 15, "default"),
    ("reg", 0.01, 1000, 200, "max"),
    ("reg", 0.3, 100, 30, "small"),
]


@pytest.mark.parametrize(("kind", "mu", "n", "iterations", "step"), HUBER_CASES)
def test_huber_observed_sensitivity_never_exceeds_plan(
    kind: str, mu: float, n: int, iterations: int, step: str
) -> None:
    rng = np.random.default_rng(int(100 * mu) + n + iterations + (kind == "reg"))
    d = 3
    loss = _huber_svm(mu) if kind == "svm" else _huber_reg(mu)
    bound = 3.0
    eta = {
        "max": max_step_size(loss.smoothness, mu),
        "default": None,
        "small": 1 / (loss.smoothness + mu),
    }[step]
    kw: dict[str, object] = {"iterations": iterations}
    if eta is not None:
        kw["step_size"] = eta
    plan = OPT.plan(_params(**kw), loss, n, d, PrivacyTarget(1.0, 1e-5))
    delta_t = plan.sensitivity

    def labels(m: int) -> FloatArray:
        if kind == "svm":
            return _labels(rng, m)
        return rng.uniform(-bound, bound, size=m)

    def gap(X: FloatArray, y: FloatArray, X2: FloatArray, y2: FloatArray) -> float:
        g = float(np.linalg.norm(_gd(loss, X, y, plan) - _gd(loss, X2, y2, plan)))
        assert g <= delta_t * (1 + 1e-9), (g, delta_t)
        return g

    observed = []
    for _ in range(6):
        X, y = _unit_rows(rng, n, d), labels(n)
        w_final = _gd(loss, X, y, plan)
        w_dir = w_final / max(float(np.linalg.norm(w_final)), 1e-12)
        j = int(rng.integers(n))
        unit = X[j] / np.linalg.norm(X[j])
        if kind == "svm":
            candidates = [(-unit, y[j]), (unit, -y[j]), (w_dir, -1.0), (-w_dir, 1.0)]
        else:
            candidates = [
                (-unit, y[j]),
                (unit, -y[j]),
                (unit, bound if y[j] < 0 else -bound),
                (w_dir, -bound),
                (-w_dir, bound),
                (w_dir, bound),
            ]
        candidates += [(np.zeros(d), y[j])]
        candidates += [(u, yy) for u in _unit_rows(rng, 4, d) for yy in labels(2)]
        for x_new, y_new in candidates:
            X2, y2 = X.copy(), y.copy()
            X2[j], y2[j] = x_new, y_new
            observed.append(gap(X, y, X2, y2))
    assert max(observed) > 0.05 * delta_t
    # the construction attains Δ_T exactly: the bound cannot be lowered for these losses
    Xa, ya, Xb, yb = _huber_pair(kind, n, bound)
    assert gap(Xa, ya, Xb, yb) == pytest.approx(delta_t, rel=1e-9)


def _huber_svm_objective(
    w: FloatArray, X: FloatArray, y: FloatArray, mu: float, h: float
) -> tuple[float, FloatArray]:
    """Chaudhuri et al.'s smoothed hinge, written independently of service.models."""
    m = y * (X @ w)
    u = 1 + h - m
    loss = np.where(m > 1 + h, 0.0, np.where(m < 1 - h, 1 - m, u**2 / (4 * h)))
    dloss = np.where(m > 1 + h, 0.0, np.where(m < 1 - h, -1.0, -u / (2 * h)))
    value = float(loss.mean() + mu / 2 * w @ w)
    grad = X.T @ (dloss * y) / len(y) + mu * w
    return value, grad


def _huber_reg_objective(
    w: FloatArray, X: FloatArray, y: FloatArray, mu: float, delta: float
) -> tuple[float, FloatArray]:
    """The Huber regression objective of Zhang et al. §4, written independently."""
    r = X @ w - y
    small = np.abs(r) <= delta
    loss = np.where(small, r**2 / 2, delta * np.abs(r) - delta**2 / 2)
    dloss = np.where(small, r, delta * np.sign(r))
    value = float(loss.mean() + mu / 2 * w @ w)
    grad = X.T @ dloss / len(y) + mu * w
    return value, grad


@pytest.mark.parametrize("kind", ["svm", "reg"])
def test_huber_noise_free_limit_matches_scipy(kind: str) -> None:
    rng = np.random.default_rng(22)
    n, d, mu = 500, 5, 0.01
    if kind == "svm":
        X, y = _separable(rng, n, d)
        y[rng.random(n) < 0.1] *= -1
        loss: HuberSVMLoss | HuberRegressionLoss = _huber_svm(mu)

        def objective(w: FloatArray) -> tuple[float, FloatArray]:
            return _huber_svm_objective(w, X, y, mu, 0.5)
    else:
        Z = rng.uniform(-1, 1, size=(n, d - 1))
        X = np.hstack([Z, np.ones((n, 1))]) / math.sqrt(d)
        y = X @ np.array([4.0, -2.0, 1.0, 0.5, 1.0]) + rng.normal(scale=0.3, size=n)
        y[rng.random(n) < 0.05] += 20.0  # gross outliers …
        y = np.clip(y, -3.0, 3.0)  # … clipped to the declared bound, as the loader does
        loss = _huber_reg(mu)

        def objective(w: FloatArray) -> tuple[float, FloatArray]:
            return _huber_reg_objective(w, X, y, mu, 0.5)

    ref = minimize(
        objective,
        np.zeros(d),
        jac=True,
        method="L-BFGS-B",
        options={"gtol": 1e-13, "ftol": 1e-16, "maxiter": 20_000, "maxcor": 30},
    )
    coef = ref.x
    assert np.linalg.norm(objective(coef)[1]) < 1e-8
    # our loss computes the same objective
    assert loss.value(coef, X, y) == pytest.approx(objective(coef)[0], rel=1e-12)
    plan = OPT.plan(_params(iterations=1500), loss, n, d, PrivacyTarget(1e9, 1e-5))
    w = OPT.fit(plan, loss, X, y, np.random.default_rng(23), _noop)
    assert np.linalg.norm(w - coef) / np.linalg.norm(coef) < 1e-5
    w0 = gradient_descent(loss, X, y, plan.hyperparameters["step_size"], 1500)
    assert np.linalg.norm(w0 - coef) / np.linalg.norm(coef) < 1e-6
