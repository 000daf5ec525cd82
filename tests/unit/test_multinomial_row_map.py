"""dp_agd_averaged's row map on the joint multinomial model
(service/optimizers/kits/dp_agd_row_map.py).

(a) The mean row's release: noise-off neighbours move it by at most 2/n, attained (x' = −x,
    ‖x‖ = 1); its realised noise has the plan's std (an empirical calibration check).
(b) The mapped rows stay in the unit ball whatever the released mean (adversarial means,
    zero rows, rows equal to the centre), so the steps' sensitivity 2L/n holds on them:
    noise-off gradient queries on mapped neighbours stay within ``plan.sensitivity`` and
    reach it.
(c) The accounting: the plan's event composes one Gaussian of multiplier z₀ with T steps of
    multiplier z, 1/z₀² = f·μ² and T/z² = (1 − f)·μ², its exact δ(ε) ≤ δ; the mean's noise
    std is z₀·2/n.
(d) Post-processing: the folded model predicts the fitted model's class on every row.
(e) Defaults and refusals: the share defaults to 0.1 for a logistic model (joint or binary)
    with an intercept and no l1, 0 otherwise; a share > 0 without an intercept is refused on
    its field; a plan without noise on the mean is refused at fit.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from service.models.logistic import LogisticLoss
from service.models.multinomial import MultinomialLoss
from service.models.registry import build_loss, parse_model_spec
from service.optimizers.dp_agd_averaged import DPAGDAveraged, DPAGDAveragedParams
from service.optimizers.kits.base import InfeasibleSpec, PrivacyTarget
from service.optimizers.kits.dp_agd_row_map import (
    ROW_MAP_SHARE,
    RowMap,
    fold,
    mapped_rows,
    mean_sensitivity,
    release_mean,
    row_map,
)
from service.optimizers.kits.full_gradient import LocalGradient
from service.privacy.gdp import event_mu, gdp_delta, gdp_mu

K, WIDTH, N = 4, 5, 60
TARGET = PrivacyTarget(1.0, 1e-5)


def _rows(rng: np.random.Generator, n: int, width: int = WIDTH) -> np.ndarray:
    """Rows of norm ≤ 1 whose last column is the intercept's constant 1/√width."""
    X = rng.normal(size=(n, width - 1))
    X *= rng.uniform(0.0, 1.0, (n, 1)) / np.linalg.norm(X, axis=1, keepdims=True)
    X *= math.sqrt(1.0 - 1.0 / width)
    return np.column_stack([X, np.full(n, 1.0 / math.sqrt(width))])


def _joint(**params: object) -> tuple[MultinomialLoss, DPAGDAveraged, object]:
    loss = MultinomialLoss(l2=0.01, classes=K, gradient_clip=0.5, fit_intercept=True)
    optimizer = DPAGDAveraged()
    plan = optimizer.plan(DPAGDAveragedParams.model_validate(params), loss, N, K * WIDTH, TARGET)
    return loss, optimizer, plan


# --- (a) the mean row's release ---------------------------------------------------------------


def test_the_mean_row_moves_by_at_most_2_over_n_and_reaches_it() -> None:
    rng = np.random.default_rng(1)
    gaps = []
    for _ in range(20):
        X = _rows(rng, N)
        j = int(rng.integers(N))
        for x_new in (-X[j], np.zeros(WIDTH), X[(j + 1) % N]):
            X2 = X.copy()
            X2[j] = x_new
            a = release_mean(X, 0.0, np.random.default_rng(0))
            b = release_mean(X2, 0.0, np.random.default_rng(0))
            gaps.append(float(np.linalg.norm(a - b)))
    unit = np.zeros((N, WIDTH))
    unit[:, 0] = 1.0
    flipped = unit.copy()
    flipped[0] = -unit[0]
    attained = release_mean(unit, 0.0, np.random.default_rng(0)) - release_mean(
        flipped, 0.0, np.random.default_rng(0)
    )
    gaps.append(float(np.linalg.norm(attained)))
    assert max(gaps) <= mean_sensitivity(N) * (1 + 1e-12)
    assert max(gaps) >= (1 - 1e-12) * mean_sensitivity(N)


def test_the_mean_rows_noise_has_the_plans_std() -> None:
    _, _, plan = _joint()
    std = float(plan.hyperparameters["mean_noise_std"])
    X = _rows(np.random.default_rng(2), N)
    exact = X.mean(axis=0)
    rng = np.random.default_rng(3)
    draws = np.stack([release_mean(X, std, rng) - exact for _ in range(400)])
    realised = float(draws.std())
    # 2,000 draws: the sample std is within 5 % of σ with overwhelming probability; a release
    # at the steps' σ, or at half the plan's σ, is far outside.
    assert abs(realised / std - 1.0) < 0.05, (realised, std)


# --- (b) the mapped rows and the steps' sensitivity ------------------------------------------


def _adversarial_maps(rng: np.random.Generator) -> list[RowMap]:
    maps = [row_map(rng.normal(size=WIDTH) * scale, 0.01) for scale in (0.0, 0.1, 1.0, 1e3)]
    maps.append(row_map(np.full(WIDTH, -5.0), 0.0))  # a negative intercept estimate: clamped
    maps.append(RowMap(centre=np.r_[rng.normal(size=WIDTH - 1), 0.0] * 1e6, intercept=1e-3))
    return maps


def test_mapped_rows_stay_in_the_unit_ball_whatever_the_released_mean() -> None:
    rng = np.random.default_rng(4)
    X = _rows(rng, N)
    X[0] = 0.0  # a zero row
    for mapping in _adversarial_maps(rng):
        X[1] = mapping.centre * mapping.intercept / X[2, -1]  # P x = 0 for x = centre·ĉ/c …
        X[1, -1] = X[2, -1]
        if np.linalg.norm(X[1]) > 1:  # … when that row is admissible
            X[1] = X[2]
        rows = mapped_rows(X, mapping)
        norms = np.linalg.norm(rows, axis=1)
        assert np.all(np.isfinite(rows)) and np.all(norms < 1.0), norms.max()
        assert norms[0] == 0.0


def test_steps_on_mapped_neighbours_stay_within_the_plan_sensitivity() -> None:
    loss, _, plan = _joint()
    rng = np.random.default_rng(5)
    gaps = []
    for mapping in _adversarial_maps(rng)[:4]:
        X = _rows(rng, N)
        y = rng.integers(0, K, size=N).astype(float)
        for x_new, y_new in [(-X[0], y[0]), (X[0], float((y[0] + 1) % K)), (X[1], -1.0)]:
            X2, y2 = X.copy(), y.copy()
            X2[0], y2[0] = x_new, y_new
            A, B = mapped_rows(X, mapping), mapped_rows(X2, mapping)
            for w in (np.zeros(K * WIDTH), rng.normal(size=K * WIDTH) * 50):
                gaps.append(float(np.linalg.norm(loss.gradient(w, A, y) - loss.gradient(w, B, y2))))
    # the saturating pair: the differing rows (0, …, ±a, b) nearly antipodal (b = 0.01), both
    # pushed to class 1 by the last column's weight while labelled 0
    mapping = row_map(np.zeros(WIDTH), 0.0)
    X = np.zeros((N, WIDTH))
    X[:, 0] = 1.0
    X2 = X.copy()
    b = 0.01
    X[0] = (0.0, 0.0, 0.0, math.sqrt(1 - b * b), b)
    X2[0] = (0.0, 0.0, 0.0, -math.sqrt(1 - b * b), b)
    W = np.zeros((K, WIDTH))
    W[1, -1] = 1e6
    A, B = mapped_rows(X, mapping), mapped_rows(X2, mapping)
    zero = np.zeros(N)
    gaps.append(
        float(np.linalg.norm(loss.gradient(W.ravel(), A, zero) - loss.gradient(W.ravel(), B, zero)))
    )
    assert max(gaps) <= plan.sensitivity * (1 + 1e-9), (max(gaps), plan.sensitivity)
    assert max(gaps) >= 0.99 * plan.sensitivity, "the construction is far from the bound"


# --- (c) accounting --------------------------------------------------------------------------


@pytest.mark.parametrize("share", [None, 0.05, 0.3])
def test_the_plan_composes_the_mean_and_the_steps_exactly(share: float | None) -> None:
    params = {} if share is None else {"row_map_share": share}
    _, _, plan = _joint(**params)
    hp = plan.hyperparameters
    f = ROW_MAP_SHARE if share is None else share
    mu = gdp_mu(TARGET.epsilon, TARGET.delta)
    z, z0, steps = hp["noise_multiplier"], hp["mean_noise_multiplier"], hp["iterations"]
    assert hp["row_map_share"] == f
    assert math.isclose(1.0 / z0**2, f * mu**2, rel_tol=1e-9)
    assert math.isclose(steps / z**2, (1.0 - f) * mu**2, rel_tol=1e-9)
    assert math.isclose(event_mu(plan.event) or 0.0, mu, rel_tol=1e-9)
    assert gdp_delta(TARGET.epsilon, event_mu(plan.event) or math.inf) <= TARGET.delta
    assert math.isclose(hp["mean_noise_std"], z0 * 2.0 / N, rel_tol=1e-12)
    assert math.isclose(plan.noise_scale, z * plan.sensitivity, rel_tol=1e-12)
    assert math.isclose(plan.sensitivity, 2.0 * loss_lipschitz() / N, rel_tol=1e-12)


def loss_lipschitz() -> float:
    return MultinomialLoss(classes=K, gradient_clip=0.5).lipschitz


# --- (d) post-processing -----------------------------------------------------------------------


@pytest.mark.parametrize("classes", [1, K])
def test_the_folded_model_predicts_the_fitted_class_on_every_row(classes: int) -> None:
    rng = np.random.default_rng(6)
    X = _rows(rng, 500)
    mapping = row_map(X.mean(axis=0) + rng.normal(size=WIDTH) * 0.01, 0.01)
    W = rng.normal(size=(classes, WIDTH)) * 3
    released = fold(W.ravel(), mapping, WIDTH).reshape(classes, WIDTH)
    fitted, ours = mapped_rows(X, mapping) @ W.T, X @ released.T
    if classes == 1:
        assert np.array_equal(np.sign(fitted), np.sign(ours))
    else:
        assert np.array_equal(fitted.argmax(axis=1), ours.argmax(axis=1))
    assert not np.allclose(released, W)  # the fold did change the model


# --- (e) defaults, refusals, the fit ------------------------------------------------------------


def test_the_share_defaults_to_logistic_models_with_an_intercept_only() -> None:
    target = TARGET
    joint = build_loss(parse_model_spec({"type": "multinomial_logistic_regression"}), K)
    plain = build_loss(
        parse_model_spec({"type": "multinomial_logistic_regression", "fit_intercept": False}), K
    )
    optimizer = DPAGDAveraged()
    params = DPAGDAveragedParams()
    assert (
        optimizer.plan(params, joint, N, K * WIDTH, target).hyperparameters["row_map_share"]
        == ROW_MAP_SHARE
    )
    binary = build_loss(parse_model_spec({"type": "logistic_regression"}))
    assert (
        optimizer.plan(params, binary, N, WIDTH, target).hyperparameters["row_map_share"]
        == ROW_MAP_SHARE
    )
    with_l1 = LogisticLoss(l2=0.01, l1=0.01, fit_intercept=True)
    for loss, d in ((plain, K * (WIDTH - 1)), (LogisticLoss(l2=0.01), WIDTH), (with_l1, WIDTH)):
        plan = optimizer.plan(params, loss, N, d, target)
        assert "row_map_share" not in plan.hyperparameters
    for loss, d in ((plain, K * (WIDTH - 1)), (LogisticLoss(l2=0.01), WIDTH)):
        with pytest.raises(InfeasibleSpec) as info:
            optimizer.plan(DPAGDAveragedParams(row_map_share=0.1), loss, N, d, target)
        assert info.value.field == "optimizer.params.row_map_share"


def test_the_fit_maps_the_rows_and_releases_a_folded_model() -> None:
    loss, optimizer, plan = _joint()
    rng = np.random.default_rng(7)
    centres = rng.normal(size=(K, WIDTH - 1)) * 0.15
    y = rng.integers(0, K, size=N)
    X = _rows(rng, N) * 0.2
    X[:, :-1] += centres[y] + 0.5  # a common offset the centre removes
    X[:, :-1] *= 0.8 / np.linalg.norm(X[:, :-1], axis=1, keepdims=True).max()
    X.flags.writeable = False
    w = optimizer.fit(plan, loss, X, y.astype(float), np.random.default_rng(8), lambda _: None)
    assert w.shape == (K * WIDTH,) and np.all(np.isfinite(w))
    silent = dataclasses.replace(
        plan, hyperparameters={**plan.hyperparameters, "mean_noise_std": 0.0}
    )
    with pytest.raises(ValueError):
        optimizer.fit(silent, loss, X, y.astype(float), np.random.default_rng(8), lambda _: None)
    oracle = LocalGradient(loss, X, y.astype(float))
    plain = optimizer.fit_oracle(plan, loss, oracle, np.random.default_rng(8), lambda _: None)
    assert plain.shape == (K * WIDTH,) and np.all(np.isfinite(plain))


def test_auto_lifts_the_l2_ceiling_for_two_class_jobs_on_mapped_rows_only() -> None:
    from service.optimizers.auto import L2_CEILING, L2_CEILING_MAPPED, resolve

    small = PrivacyTarget(0.5, 1e-5)  # n·ε = 350: dp_agd_averaged, the formula above 1e-2
    binary = resolve(parse_model_spec({"type": "logistic_regression"}), 700, 20, small, None)
    assert binary.optimizer == "dp_agd_averaged"
    assert binary.model["l2"] == L2_CEILING_MAPPED
    # a categorical label of two classes is the binary problem: its joint fit, the same ceiling
    two = resolve(parse_model_spec({"type": "logistic_regression"}), 700, 20, small, 2)
    assert two.model["type"] == "multinomial_logistic_regression"
    assert two.optimizer == "dp_agd_averaged"
    assert two.model["l2"] == L2_CEILING_MAPPED
    joint = resolve(parse_model_spec({"type": "logistic_regression"}), 700, 20, small, 3)
    assert joint.model["l2"] == L2_CEILING
    ovr = resolve(
        parse_model_spec({"type": "logistic_regression", "gradient_clip": 0.5}), 700, 20, small, 2
    )
    assert ovr.model["type"] == "logistic_regression" and ovr.model["l2"] == L2_CEILING
    plain = resolve(
        parse_model_spec({"type": "logistic_regression", "fit_intercept": False}),
        700,
        20,
        small,
        None,
    )
    assert plain.model["l2"] == L2_CEILING


@pytest.mark.parametrize("classes", [3, 4, 5])
def test_auto_lifts_the_joint_l2_ceiling_up_to_the_small_data_lines_only(classes: int) -> None:
    """A joint fit of 3 ≤ K ≤ 5 classes takes the mapped rows' ceiling 1e-2 on n ≤
    SMALL_JOINT_ROWS rows with n·ε ≤ SMALL_JOINT_N_EPSILON, and 1e-3 one row or one n·ε past
    either line, where the formula is above both; an analyst's l2 stays."""
    from service.optimizers.auto import L2_CEILING, L2_CEILING_MAPPED, resolve, rule_l2
    from service.optimizers.kits.joint_rule import SMALL_JOINT_N_EPSILON, SMALL_JOINT_ROWS

    spec = parse_model_spec({"type": "logistic_regression"})
    rows = SMALL_JOINT_ROWS
    line = SMALL_JOINT_N_EPSILON / rows  # the ε at which n·ε meets its line on n = rows
    for n, eps, ceiling in (
        (rows, 0.5, L2_CEILING_MAPPED),
        (rows + 1, 0.5, L2_CEILING),
        (rows, line, L2_CEILING_MAPPED),
        (rows, line * 1.01, L2_CEILING),
        (rows // 2, 2.0 * line * 1.01, L2_CEILING),
    ):
        target = PrivacyTarget(eps, 1e-5)
        job = resolve(spec, n, 40, target, classes)
        assert job.model["type"] == "multinomial_logistic_regression"
        assert job.optimizer == "dp_agd_averaged"
        assert rule_l2(0.5, n, classes * 41, target, 1.0) > L2_CEILING_MAPPED  # the cap binds
        assert job.model["l2"] == ceiling, (n, eps)
        assert job.record["filled"]["model.l2"] == ceiling
    own = resolve(
        parse_model_spec({"type": "logistic_regression", "l2": 1e-4}),
        100,
        20,
        PrivacyTarget(0.5, 1e-5),
        classes,
    )
    assert own.model["l2"] == 1e-4


@pytest.mark.parametrize("classes", [6, 10, 20])
def test_auto_keeps_the_joint_l2_ceiling_for_many_classes_on_small_data(classes: int) -> None:
    """From K = 6 the joint fit keeps 1e-3 on small data too (kits/joint_rule.py, "Many
    classes")."""
    from service.optimizers.auto import L2_CEILING, resolve

    job = resolve(
        parse_model_spec({"type": "logistic_regression"}), 200, 10, PrivacyTarget(1.0, 1e-5),
        classes,
    )  # fmt: skip
    assert job.model["type"] == "multinomial_logistic_regression"
    assert job.model["l2"] == L2_CEILING
