"""The curvature step (``service/optimizers/kits/curvature_step.py``) and its place in
``dp_agd_averaged``'s plan.

(a) Sensitivity of λ_max(Σ φφᵀ) is 1: never exceeded on random and adversarial neighbours
    (rows of norm ≤ 1, the replaced row along, against and across the top eigenvector), and
    attained by n copies of one unit row with one replaced by an orthogonal unit row.
(b) Calibration: the release's noise has the plan's std (mean 0), and the noise-off release
    is the exact value; an empirical audit of the release on the attaining pair stays below the
    claimed ε, and catches a sixth of the noise.
(c) Step 2 from λ̃ and public facts: λ⁺ ∈ [1/w, 1], T' ≤ T, the steps' total μ² unchanged
    (T'/σ'² = T/σ²), η between the public 1/β_F and 1/(β/w + l2); a λ̃ at or above n, or not
    finite, gives back the public step and T.
(d) The plan: the composed event's μ never exceeds μ(ε, δ); the default share only where the
    rule says (joint multinomial of K ≥ 3, row map, enough rows, no analyst-set T or step), the
    analyst's share refused on ``optimizer.params.curvature_share`` without the row map.
(e) The safeguard: steps far longer than the data allow stay in the public ball and finite.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from service.models.logistic import LogisticLoss
from service.models.multinomial import MultinomialLoss
from service.optimizers.dp_agd_averaged import DPAGDAveraged, DPAGDAveragedParams
from service.optimizers.kits.accelerated_kit import averaged_accelerated_descent
from service.optimizers.kits.base import InfeasibleSpec, PrivacyTarget
from service.optimizers.kits.curvature_step import (
    CURVATURE_MARGIN,
    CURVATURE_MAX_WIDTH,
    CURVATURE_SHARE,
    curvature_pays,
    curvature_steps,
    gram_of_rows,
    release_top_eigenvalue,
    top_eigenvalue,
)
from service.optimizers.kits.full_gradient import LocalGradient
from service.privacy.gdp import event_mu, gdp_mu
from service.privacy.secure_random import SecureRandom
from tests.support.nonconvex_loss import epsilon_lower_bound

TARGET = PrivacyTarget(1.0, 1e-5)


def _unit_rows(rng: np.random.Generator, n: int, w: int) -> np.ndarray:
    X = rng.normal(size=(n, w))
    return X / np.linalg.norm(X, axis=1, keepdims=True) * rng.uniform(0.0, 1.0, (n, 1)) ** 0.1


# --- (a) sensitivity ---------------------------------------------------------------------------


def test_top_eigenvalue_moves_by_at_most_one_when_a_row_is_replaced() -> None:
    rng = np.random.default_rng(0)
    worst = 0.0
    for trial in range(300):
        n, w = int(rng.integers(2, 40)), int(rng.integers(1, 9))
        X = _unit_rows(rng, n, w)
        if trial % 3 == 0:  # a dominant direction, which the replacement attacks
            X[: n // 2] = X[0] / np.linalg.norm(X[0])
        top = np.linalg.eigh(gram_of_rows(X))[1][:, -1]
        before = top_eigenvalue(gram_of_rows(X))
        i = int(rng.integers(0, n))
        other = rng.normal(size=w)
        other -= (other @ top) * top
        candidates = [top, -top, other / max(np.linalg.norm(other), 1e-300), np.zeros(w)]
        candidates += list(_unit_rows(rng, 4, w))
        for row in candidates:
            Y = X.copy()
            Y[i] = row
            change = abs(top_eigenvalue(gram_of_rows(Y)) - before)
            assert change <= 1.0 + 1e-12
            worst = max(worst, change)
    assert worst > 0.5  # the probes reach the bound's scale


def test_the_bound_is_attained() -> None:
    n, w = 50, 4
    X = np.zeros((n, w))
    X[:, 0] = 1.0
    Y = X.copy()
    Y[0] = (0.0, 1.0, 0.0, 0.0)
    change = top_eigenvalue(gram_of_rows(X)) - top_eigenvalue(gram_of_rows(Y))
    assert change == pytest.approx(1.0, abs=1e-12)


def test_gram_of_rows_is_the_rows_gram_matrix_over_blocks() -> None:
    rng = np.random.default_rng(1)
    X = _unit_rows(rng, 5_000, 70)  # several blocks at this width
    np.testing.assert_allclose(gram_of_rows(X), X.T @ X, rtol=1e-12, atol=1e-12)


# --- (b) calibration and audit -----------------------------------------------------------------


def test_the_release_has_the_stated_noise_and_no_noise_when_off() -> None:
    rng = np.random.default_rng(2)
    X = _unit_rows(rng, 300, 5)
    G = gram_of_rows(X)
    exact = top_eigenvalue(G)
    assert release_top_eigenvalue(G, 0.0, SecureRandom(rng.bytes)) == exact
    secure = SecureRandom(np.random.default_rng(3).bytes)
    draws = np.array([release_top_eigenvalue(G, 7.0, secure) for _ in range(4_000)]) - exact
    assert abs(draws.mean()) < 4 * 7.0 / math.sqrt(4_000)
    assert draws.std() == pytest.approx(7.0, rel=0.05)


def test_empirical_audit_of_the_release_on_the_attaining_pair() -> None:
    """The attaining pair (λ_max n vs n − 1) released at the noise of a 1/σ-GDP release with
    σ = 1/μ(ε, δ): the ε lower bound (Clopper–Pearson, Bonferroni) stays below ε; a sixth of the
    noise is caught."""
    eps, n = 2.0, 30
    X = np.zeros((n, 3))
    X[:, 0] = 1.0
    Y = X.copy()
    Y[0] = (0.0, 1.0, 0.0)
    GX, GY = gram_of_rows(X), gram_of_rows(Y)
    sigma = 1.0 / gdp_mu(eps, 1e-5)

    def bound(std: float, seed: int) -> float:
        secure = SecureRandom(np.random.default_rng(seed).bytes)
        low = np.array([release_top_eigenvalue(GY, std, secure) for _ in range(3_000)])
        high = np.array([release_top_eigenvalue(GX, std, secure) for _ in range(3_000)])
        centre = n - 0.5
        thresholds = [centre + k * std for k in (-1.0, -0.5, 0.0, 0.5, 1.0)]
        return epsilon_lower_bound(low, high, thresholds, 1e-5)

    assert bound(sigma, 10) < eps
    assert bound(sigma / 6, 11) > eps


# --- (c) step 2 --------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(5))
def test_the_steps_keep_their_mu_and_stay_within_the_public_bounds(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(200):
        n, w, T = int(rng.integers(10, 10**6)), int(rng.integers(2, 300)), int(rng.integers(1, 400))
        loss = MultinomialLoss(l2=float(10 ** rng.uniform(-5, -2)), classes=3, gradient_clip=0.5)
        sigma, sigma_c = float(rng.uniform(0.01, 2.0)), float(rng.uniform(0.1, 100.0))
        released = float(rng.uniform(-3 * sigma_c, n + 3 * sigma_c))
        out = curvature_steps(
            released, n=n, width=w, loss=loss, iterations=T,
            step_noise_std=sigma, curvature_noise_std=sigma_c,
        )  # fmt: skip
        beta_f = loss.smoothness + loss.l2
        assert 1.0 / w <= out.upper <= 1.0
        assert 1 <= out.iterations <= T
        assert out.iterations / out.noise_std**2 == pytest.approx(T / sigma**2, rel=1e-12)
        assert 1.0 / beta_f - 1e-15 <= out.step_size <= 1.0 / (loss.smoothness / w + loss.l2)
        assert out.upper >= min(1.0, (released + CURVATURE_MARGIN * sigma_c) / n) - 1e-15


def test_no_estimate_below_the_public_bound_gives_the_public_plan() -> None:
    loss = MultinomialLoss(l2=1e-3, classes=4, gradient_clip=0.5)
    for released in (5_000.0, math.inf, math.nan):
        out = curvature_steps(
            released, n=1_000, width=20, loss=loss, iterations=80,
            step_noise_std=0.3, curvature_noise_std=10.0,
        )  # fmt: skip
        assert (out.iterations, out.noise_std, out.upper) == (80, 0.3, 1.0)
        assert out.step_size == pytest.approx(1.0 / (loss.smoothness + loss.l2))


# --- (d) the plan ------------------------------------------------------------------------------


def _joint_plan(n: int, width: int = 20, **params: object) -> tuple[MultinomialLoss, object]:
    loss = MultinomialLoss(l2=1e-3, classes=5, gradient_clip=0.5, fit_intercept=True)
    plan = DPAGDAveraged().plan(
        DPAGDAveragedParams.model_validate(params), loss, n, 5 * width, TARGET
    )
    return loss, plan


def test_the_plans_event_composes_to_the_target() -> None:
    _, plan = _joint_plan(10_000, column_scale_share=0.0)  # with them: test_column_scales
    hp = plan.hyperparameters  # type: ignore[attr-defined]
    assert hp["curvature_share"] == CURVATURE_SHARE
    z_mean, z_steps, z_c = (
        hp["mean_noise_multiplier"],
        hp["noise_multiplier"],
        1.0 / (gdp_mu(TARGET.epsilon, TARGET.delta) * math.sqrt(CURVATURE_SHARE)),
    )
    assert hp["curvature_noise_std"] == pytest.approx(z_c, rel=1e-9)  # sensitivity 1: σ = z_c
    total = 1 / z_mean**2 + 1 / hp["curvature_noise_std"] ** 2 + hp["iterations"] / z_steps**2
    mu = gdp_mu(TARGET.epsilon, TARGET.delta)
    assert math.sqrt(total) <= mu * (1 + 1e-9)
    assert event_mu(plan.event) == pytest.approx(math.sqrt(total), rel=1e-9)  # type: ignore[attr-defined]


def test_the_default_share_only_where_the_rule_says() -> None:
    assert _joint_plan(10_000)[1].hyperparameters["curvature_share"] > 0  # type: ignore[attr-defined]
    few = 100
    assert not curvature_pays(few, CURVATURE_SHARE, TARGET)
    assert "curvature_share" not in _joint_plan(few)[1].hyperparameters  # type: ignore[attr-defined]
    for params in ({"iterations": 50}, {"step_size": 1.0}, {"row_map_share": 0.0}):
        assert "curvature_share" not in _joint_plan(10_000, **params)[1].hyperparameters  # type: ignore[attr-defined]
    wide = CURVATURE_MAX_WIDTH
    assert _joint_plan(10_000, width=wide)[1].hyperparameters["curvature_share"] > 0  # type: ignore[attr-defined]
    assert "curvature_share" not in _joint_plan(10_000, width=wide + 1)[1].hyperparameters  # type: ignore[attr-defined]
    two = MultinomialLoss(l2=1e-3, classes=2, gradient_clip=0.5, fit_intercept=True)
    plan = DPAGDAveraged().plan(DPAGDAveragedParams(), two, 10_000, 2 * 20, TARGET)
    assert "curvature_share" not in plan.hyperparameters  # K = 2 keeps the public step
    binary = LogisticLoss(l2=1e-3, gradient_clip=0.5, fit_intercept=True)
    plan = DPAGDAveraged().plan(DPAGDAveragedParams(), binary, 10_000, 20, TARGET)
    assert "curvature_share" not in plan.hyperparameters
    # the analyst may ask for it on a binary model with the row map
    asked = DPAGDAveraged().plan(
        DPAGDAveragedParams(curvature_share=0.05), binary, 10_000, 20, TARGET
    )
    assert asked.hyperparameters["curvature_share"] == 0.05


def test_the_analysts_share_needs_the_row_map_and_room() -> None:
    with pytest.raises(InfeasibleSpec) as caught:
        _joint_plan(10_000, curvature_share=0.1, row_map_share=0.0)
    assert caught.value.field == "optimizer.params.curvature_share"
    with pytest.raises(InfeasibleSpec) as caught:
        _joint_plan(10_000, curvature_share=0.45, row_map_share=0.6)
    assert caught.value.field == "optimizer.params.curvature_share"


@pytest.mark.parametrize("field", ["curvature_share", "row_map_share"])
def test_a_vanishing_share_is_refused_at_planning_not_at_the_fit(field: str) -> None:
    """A share of 1e-300 gives a noise multiplier ~1e300 whose secure release overflows at the
    fit (after the charge): refused on the field at planning (422), as is every share in
    (0, 1e-6); 1e-6 itself plans and fits at the smallest ε."""
    from service.models.registry import parse_model_spec
    from service.optimizers.kits.planning import plan_job

    spec = parse_model_spec(
        {"type": "multinomial_logistic_regression", "gradient_clip": 0.5, "l2": 1e-3}
    )
    for share in (1e-300, 5e-7):
        with pytest.raises(InfeasibleSpec) as caught:
            plan_job(spec, "dp_agd_averaged", {field: share}, 2_000, 5, TARGET, classes=3)
        assert caught.value.field == f"optimizer.params.{field}"
    rng = np.random.default_rng(6)
    X = np.column_stack([_unit_rows(rng, 2_000, 5) * 0.9, np.full(2_000, 0.4)])
    y = rng.integers(0, 3, 2_000).astype(float)
    job = plan_job(
        spec, "dp_agd_averaged", {field: 1e-6}, 2_000, 5, PrivacyTarget(1e-6, 1e-5), classes=3
    )
    out = job.optimizer.fit(job.plan, job.loss, X, y, SecureRandom(rng.bytes), lambda _: None)
    assert np.all(np.isfinite(out))


# --- (e) the safeguard -------------------------------------------------------------------------


@pytest.mark.parametrize("form", ["eigenvalue", "gram"])
def test_steps_far_too_long_stay_in_the_ball(form: str) -> None:
    """Rows all along one direction (λ_max = 1) run with the step of λ⁺ = 1/w (an underestimate
    the release makes with probability below 0.023) — or, for the Gram form (``gram_step``),
    with the preconditioner of a Gram matrix of 0 (P = l2 I: every direction's curvature
    missed): the iterates stay within R, finite."""
    rng = np.random.default_rng(4)
    n, w, K = 200, 30, 3
    X = np.tile(np.eye(w)[0], (n, 1)) * rng.choice([-1.0, 1.0], (n, 1))
    y = rng.integers(0, K, n).astype(float)
    loss = MultinomialLoss(l2=1e-3, classes=K, gradient_clip=0.5)
    radius = math.sqrt(2.0 * math.log(K) / loss.l2)
    iterates: list[np.ndarray] = []
    if form == "eigenvalue":
        steps: dict[str, object] = {"step_size": 1.0 / (loss.smoothness / w + loss.l2)}
    else:
        steps = {"step_size": 1.0, "preconditioner": np.eye(w) / loss.l2}
    out = averaged_accelerated_descent(
        loss, LocalGradient(loss, X, y), iterations=60, noise_std=0.5,
        rng=SecureRandom(rng.bytes), sensitivity=0.01, iterates=iterates, radius=radius,
        **steps,  # type: ignore[arg-type]
    )  # fmt: skip
    assert all(np.linalg.norm(v) <= radius * (1 + 1e-12) for v in iterates)
    assert np.all(np.isfinite(out))
