"""The column scales of the row map (``service/optimizers/kits/column_scales.py``) and their place
in ``dp_agd_averaged``'s plan and fits.

(a) Sensitivity of Σ_i a(x_i) is √2: never exceeded on random and adversarial neighbours,
    attained by two rows whose centred features are unit vectors on different columns; each
    a(x) is its own row's (the sum over rows is the sum of the rows' sums).
(b) Calibration: the release's noise has the stated std (σ_s = z_s·√2/n from the plan's share),
    none when off; an empirical audit on the attaining pair stays below the claimed ε and
    catches a sixth of the noise.
(c) Step 3: D is 1 on columns that spread alike and on the intercept, at most SCALE_CAP, a
    column below its noise floor is not amplified beyond it; a released vector not finite is
    refused.
(d) The fold: the released model W̄ D P scores every row as a positive multiple of the fitted
    W̄ φ(x) (the same class).
(e) The plan: the share only where the Gram form runs (or the analyst sets it), its event
    composes the four releases to the target, refusals on ``column_scale_share``.
(f) The fits: ``fit_oracle`` through an oracle that can sum a(x) (``ColumnScalable``) releases
    ``fit``'s model; one without the capability gets D = I (the share unspent); on rows whose
    informative column spreads over 2 % of its range, the scales fit it where the plain map
    cannot.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from service.models.multinomial import MultinomialLoss
from service.optimizers.dp_agd_averaged import DPAGDAveraged, DPAGDAveragedParams
from service.optimizers.kits.base import InfeasibleSpec, PrivacyTarget
from service.optimizers.kits.column_scales import (
    COLUMN_SCALE_SHARE,
    SCALE_CAP,
    SCALE_FLOOR,
    ColumnScalable,
    column_scales,
    deviation_sum,
    release_deviations,
    with_one_hot_columns,
)
from service.optimizers.kits.dp_agd_row_map import RowMap, fold, mapped_rows, row_map
from service.privacy.gdp import event_mu, gdp_mu
from service.privacy.secure_random import SecureRandom
from tests.support.nonconvex_loss import epsilon_lower_bound
from tests.unit.test_curvature_step import _joint_plan  # the same joint plan (TARGET ε = 1)
from tests.unit.test_row_map_oracle import MappableSplit

TARGET = PrivacyTarget(1.0, 1e-5)


def _rows(rng: np.random.Generator, n: int, w: int) -> np.ndarray:
    """Rows of norm ≤ 1, the last column an intercept constant."""
    X = rng.normal(size=(n, w - 1)) * rng.uniform(0.01, 1.0, w - 1)
    X *= rng.uniform(0.0, 1.0, (n, 1)) / np.linalg.norm(X, axis=1, keepdims=True)
    X *= math.sqrt(1.0 - 1.0 / w)
    return np.column_stack([X, np.full(n, 1.0 / math.sqrt(w))])


def _centre(rng: np.random.Generator, w: int, size: float = 0.5) -> tuple[np.ndarray, float]:
    v = rng.normal(size=w)
    v[-1] = 0.0
    return v * size / np.linalg.norm(v), float(rng.uniform(1.0 / math.sqrt(w), 1.0))


# --- (a) sensitivity ---------------------------------------------------------------------------


def test_the_sum_moves_by_at_most_root_two_when_a_row_is_replaced() -> None:
    rng = np.random.default_rng(1)
    worst = 0.0
    for trial in range(400):
        n, w = int(rng.integers(2, 30)), int(rng.integers(2, 9))
        X = _rows(rng, n, w)
        centre, intercept = _centre(rng, w, float(rng.uniform(0.0, 3.0)))
        Y = X.copy()
        i = int(rng.integers(n))
        kind = trial % 3
        if kind == 0:
            Y[i] = _rows(rng, 1, w)[0]
        elif kind == 1:  # the replaced row's centred features on one column, its own on another
            Y[i, :-1] = 0.0
            X[i, :-1] = 0.0
            a, b = rng.choice(w - 1, 2, replace=False) if w > 2 else (0, 0)
            X[i, a] = Y[i, b] = math.sqrt(1.0 - 1.0 / w)
        else:  # a row far from the centre: its centred features clipped to norm 1
            Y[i, :-1] = -np.sign(centre[:-1]) * math.sqrt((1.0 - 1.0 / w) / (w - 1))
        moved = np.linalg.norm(
            deviation_sum(X, centre, intercept) - deviation_sum(Y, centre, intercept)
        )
        worst = max(worst, float(moved))
        assert moved <= math.sqrt(2.0) * (1 + 1e-12)
    assert worst > 1.2


def test_the_bound_is_attained_and_each_row_counts_alone() -> None:
    w = 4
    X = np.zeros((10, w))
    X[:, -1] = 0.5
    X[:, 0] = 1.0 - 1e-9
    Y = X.copy()
    Y[0, 0], Y[0, 1] = 0.0, 1.0 - 1e-9
    centre, intercept = np.zeros(w), 0.5
    moved = np.linalg.norm(
        deviation_sum(X, centre, intercept) - deviation_sum(Y, centre, intercept)
    )
    assert moved == pytest.approx(math.sqrt(2.0), rel=1e-8)
    rng = np.random.default_rng(2)
    Z = _rows(rng, 50, 6)
    v, c = _centre(rng, 6)
    by_row = sum(deviation_sum(Z[i : i + 1], v, c) for i in range(50))
    np.testing.assert_allclose(deviation_sum(Z, v, c), by_row, rtol=1e-12, atol=1e-14)


# --- (b) calibration ---------------------------------------------------------------------------


def test_the_release_has_the_stated_noise_and_none_when_off() -> None:
    rng = np.random.default_rng(3)
    total, n = np.abs(rng.normal(size=5)) * 40, 100
    off = release_deviations(total, n, 0.0, SecureRandom(rng.bytes))
    np.testing.assert_allclose(off, total / n, rtol=1e-15, atol=0)
    secure = SecureRandom(np.random.default_rng(4).bytes)
    std = 0.03
    draws = np.stack([release_deviations(total, n, std, secure) for _ in range(4_000)]) - total / n
    assert draws.std() == pytest.approx(std, rel=0.03)
    assert abs(draws.mean()) < 4 * std / math.sqrt(draws.size)
    assert abs(np.corrcoef(draws[:, 0], draws[:, 1])[0, 1]) < 0.05


def test_the_plans_std_is_its_share_of_mu_at_the_sensitivity() -> None:
    loss, plan = _joint_plan(20_000)
    hyper = plan.hyperparameters
    z_s = 1.0 / (gdp_mu(TARGET.epsilon, TARGET.delta) * math.sqrt(COLUMN_SCALE_SHARE))
    expected = z_s * math.sqrt(2.0) / 20_000
    assert hyper["column_scale_share"] == COLUMN_SCALE_SHARE
    assert hyper["column_scale_noise_std"] == pytest.approx(expected, rel=1e-9)


def test_empirical_audit_of_the_release_on_the_attaining_pair() -> None:
    """The attaining pair released at z_s = 1/μ(ε, δ) (a 1/z_s-GDP release): the ε lower bound
    from the optimal statistic (the projection on the sums' difference) stays below ε; at a
    sixth of the noise it is caught."""
    eps, n, w = 2.0, 30, 4
    X = np.zeros((n, w))
    X[:, -1], X[:, 0] = 0.5, 0.8
    Y = X.copy()
    Y[0, 0], Y[0, 1] = 0.0, 0.8
    centre, intercept = np.zeros(w), 0.5
    SX, SY = deviation_sum(X, centre, intercept), deviation_sum(Y, centre, intercept)
    direction = (SX - SY) / np.linalg.norm(SX - SY)
    z = 1.0 / gdp_mu(eps, 1e-5)

    def bound(multiplier: float, seed: int) -> float:
        secure = SecureRandom(np.random.default_rng(seed).bytes)
        std = multiplier * math.sqrt(2.0) / n

        def statistic(total: np.ndarray) -> float:
            return float((release_deviations(total, n, std, secure) - SY / n) @ direction)

        low = np.array([statistic(SY) for _ in range(3_000)])
        high = np.array([statistic(SX) for _ in range(3_000)])
        gap = float(np.linalg.norm(SX - SY)) / n
        thresholds = [gap / 2 + k * std for k in (-1.0, -0.5, 0.0, 0.5, 1.0)]
        return epsilon_lower_bound(low, high, thresholds, 1e-5)

    assert bound(z, 10) < eps
    assert bound(z / 6, 11) > eps


# --- (c) step 3 --------------------------------------------------------------------------------


def test_the_scales_equalise_spreads_within_their_bounds() -> None:
    assert np.allclose(column_scales(np.full(5, 0.2), 0.001), 1.0)
    spreads = np.array([0.2, 0.1, 0.02, 0.2])
    D = column_scales(spreads, 1e-4)
    assert D[-1] == 1.0 and D.shape == (5,)
    rms = math.sqrt(np.mean(spreads**2))
    np.testing.assert_allclose(D[:-1] * spreads, rms, rtol=1e-12)  # a common spread
    # a column below its noise floor is taken at the floor; none beyond the cap
    floored = column_scales(np.array([0.2, 0.2, -0.05, 1e-6]), 0.01)
    assert floored[2] == pytest.approx(floored[3]) and floored[2] <= SCALE_CAP
    rms = math.sqrt(np.mean(np.array([0.2, 0.2, SCALE_FLOOR * 0.01, SCALE_FLOOR * 0.01]) ** 2))
    assert floored[2] == pytest.approx(rms / (SCALE_FLOOR * 0.01))
    capped = column_scales(np.array([1.0, 1.0, 1.0, 1e-3]), 1e-6)
    assert capped.max() == pytest.approx(SCALE_CAP)
    for bad in (np.array([0.1, np.nan]), np.array([np.inf]), np.array([])):
        with pytest.raises(ValueError):
            column_scales(bad, 0.01)


def test_one_hot_columns_are_never_amplified_and_the_rest_as_before() -> None:
    """A one-hot column whose spread would scale it up keeps D = 1; one scaled down keeps its
    D; every other column's D is the unmasked one; indices outside the features are refused."""
    spreads = np.array([0.2, 0.01, 0.3, 0.05, 0.2])
    plain = column_scales(spreads, 1e-4)
    assert plain[1] > 1.0 and plain[2] < 1.0 and plain[3] > 1.0
    masked = column_scales(spreads, 1e-4, (1, 2))
    assert masked[1] == 1.0 and masked[2] == plain[2]
    others = [0, 3, 4, 5]
    np.testing.assert_array_equal(masked[others], plain[others])
    assert masked[-1] == 1.0
    for bad in ((5,), (-1,)):
        with pytest.raises(ValueError):
            column_scales(spreads, 1e-4, bad)


def test_a_fit_never_amplifies_the_plans_one_hot_columns_on_either_path() -> None:
    """The plan's one_hot_columns reach the scales on the single-process fit and on an oracle
    that sums the deviations where its rows live — the same release from both."""
    loss, plan, X, y = _narrow_case()
    one_hot = with_one_hot_columns(plan, (0, 2))  # type: ignore[arg-type]
    assert one_hot.hyperparameters["one_hot_columns"] == [0, 2]
    optimizer = DPAGDAveraged()
    oracle = ScalableSplit(loss, X, y, (1_000, 3_500))
    split = optimizer.fit_oracle(one_hot, loss, oracle, np.random.default_rng(5), lambda _: None)  # type: ignore[arg-type]
    scales = oracle.mappings[0].scales
    assert scales is not None and scales[0] == 1.0 and scales[2] <= 1.0
    plain = ScalableSplit(loss, X, y, (1_000, 3_500))
    optimizer.fit_oracle(plan, loss, plain, np.random.default_rng(5), lambda _: None)  # type: ignore[arg-type]
    assert plain.mappings[0].scales[0] > 1.0  # type: ignore[index]  # the narrow column, unmasked
    local = optimizer.fit(one_hot, loss, X, y, np.random.default_rng(5), lambda _: None)  # type: ignore[arg-type]
    np.testing.assert_allclose(split, local, rtol=1e-8, atol=1e-10 * np.abs(local).max())


def test_the_plan_records_the_one_hot_columns_only_where_the_scales_run() -> None:
    _, gram = _joint_plan(20_000)
    _, eigen = _joint_plan(1_500)
    recorded = with_one_hot_columns(gram, (3, 4, 5))  # type: ignore[arg-type]
    assert recorded.hyperparameters["one_hot_columns"] == [3, 4, 5]
    assert with_one_hot_columns(eigen, (3, 4, 5)) is eigen  # type: ignore[arg-type]
    assert with_one_hot_columns(gram, ()) is gram  # type: ignore[arg-type]
    rest = {k: v for k, v in recorded.hyperparameters.items() if k != "one_hot_columns"}
    assert rest == gram.hyperparameters and recorded.event == gram.event  # type: ignore[attr-defined]


# --- (d) the fold ------------------------------------------------------------------------------


def test_the_folded_model_scores_every_row_as_a_positive_multiple() -> None:
    rng = np.random.default_rng(6)
    w, K = 7, 4
    X = _rows(rng, 200, w)
    mapping = row_map(X.mean(axis=0) + 0.01 * rng.normal(size=w), 0.01)
    mapping = mapping.scaled(np.append(rng.uniform(0.2, 8.0, w - 1), 1.0))
    W = rng.normal(size=(K, w))
    fitted = mapped_rows(X, mapping) @ W.T
    released = X @ fold(W.reshape(-1), mapping, w).reshape(K, w).T
    ratio = released / fitted
    assert np.all(ratio > 0)
    np.testing.assert_allclose(ratio, ratio[:, :1] * np.ones((1, K)), rtol=1e-9)
    assert np.array_equal(released.argmax(axis=1), fitted.argmax(axis=1))
    with pytest.raises(ValueError):
        mapping.scaled(np.ones(w - 1))
    with pytest.raises(ValueError):
        mapping.scaled(np.append(np.zeros(w - 1), 1.0))


# --- (e) the plan ------------------------------------------------------------------------------


def test_the_share_is_spent_where_the_gram_form_runs_or_the_analyst_asks() -> None:
    _, gram = _joint_plan(20_000)
    _, eigen = _joint_plan(1_500)
    assert gram.hyperparameters["curvature_form"] == "gram"  # type: ignore[attr-defined]
    assert gram.hyperparameters["column_scale_share"] == COLUMN_SCALE_SHARE  # type: ignore[attr-defined]
    assert eigen.hyperparameters["curvature_form"] == "eigenvalue"  # type: ignore[attr-defined]
    assert "column_scale_share" not in eigen.hyperparameters  # type: ignore[attr-defined]
    _, asked = _joint_plan(1_500, column_scale_share=0.1)
    assert asked.hyperparameters["column_scale_share"] == 0.1  # type: ignore[attr-defined]
    _, off = _joint_plan(20_000, column_scale_share=0.0)
    assert "column_scale_share" not in off.hyperparameters  # type: ignore[attr-defined]
    assert off.hyperparameters["curvature_form"] == "gram"  # type: ignore[attr-defined]


def test_the_plans_event_composes_the_four_releases_to_the_target() -> None:
    _, plan = _joint_plan(20_000, curvature_refresh_share=0.0)  # the refresh: its own test
    hyper = plan.hyperparameters  # type: ignore[attr-defined]
    n = 20_000
    z_s = hyper["column_scale_noise_std"] / (math.sqrt(2.0) / n)
    total = (
        1 / hyper["mean_noise_multiplier"] ** 2
        + 1 / z_s**2
        + 1 / hyper["curvature_noise_std"] ** 2
        + hyper["iterations"] / hyper["noise_multiplier"] ** 2
    )
    mu = gdp_mu(TARGET.epsilon, TARGET.delta)
    assert math.sqrt(total) <= mu * (1 + 1e-9)
    assert event_mu(plan.event) == pytest.approx(math.sqrt(total), rel=1e-9)  # type: ignore[attr-defined]
    assert event_mu(plan.event) == pytest.approx(mu, rel=1e-6)  # type: ignore[attr-defined]
    assert len(plan.event.events) == 4  # type: ignore[attr-defined]


def test_the_analysts_share_is_refused_where_it_cannot_run() -> None:
    for params in (
        {"row_map_share": 0.0, "column_scale_share": 0.05},
        {"row_map_share": 0.4, "curvature_share": 0.3, "column_scale_share": 0.3},
    ):
        with pytest.raises(InfeasibleSpec) as caught:
            _joint_plan(20_000, **params)
        assert caught.value.field == "optimizer.params.column_scale_share"
    with pytest.raises(ValueError):
        DPAGDAveragedParams.model_validate({"column_scale_share": 1e-9})


# --- (f) the fits ------------------------------------------------------------------------------


class ScalableSplit(MappableSplit):
    """A mappable oracle that also sums a(x) part by part (``ColumnScalable``)."""

    deviation_sums = 0

    def deviation_sum(self, centre: np.ndarray, intercept: float) -> np.ndarray:
        self.deviation_sums += 1
        return sum(deviation_sum(self._X[a:b], centre, intercept) for a, b in self._parts)


def _narrow_case(
    n: int = 6_000, eps: float = 1.0
) -> tuple[MultinomialLoss, object, np.ndarray, np.ndarray]:
    """Rows of width 6 whose class (K = 4) is read off one column spread over 2 % of its range;
    the other features spread widely and carry nothing."""
    rng = np.random.default_rng(12)
    w, K = 6, 4
    y = rng.integers(0, K, n)
    informative = 0.02 * (y - 1.5) / 1.5 + 0.002 * rng.normal(size=n)
    noise = rng.uniform(-1.0, 1.0, (n, w - 2))
    X = np.column_stack([informative, noise]) / math.sqrt(w)
    X = np.column_stack([X, np.full(n, 1.0 / math.sqrt(w))])
    loss = MultinomialLoss(l2=1e-5, classes=K, gradient_clip=0.5, fit_intercept=True)
    target = PrivacyTarget(eps, 1e-5)
    plan = DPAGDAveraged().plan(DPAGDAveragedParams(), loss, n, K * w, target)
    return loss, plan, X, y.astype(float)


def test_fit_oracle_releases_fits_model_through_an_oracle_that_sums_deviations() -> None:
    loss, plan, X, y = _narrow_case()
    assert plan.hyperparameters["column_scale_share"] > 0.0  # type: ignore[attr-defined]
    optimizer = DPAGDAveraged()
    local = optimizer.fit(plan, loss, X, y, np.random.default_rng(5), lambda _: None)  # type: ignore[arg-type]
    oracle = ScalableSplit(loss, X, y, (1_000, 3_500))
    assert isinstance(oracle, ColumnScalable)
    split = optimizer.fit_oracle(plan, loss, oracle, np.random.default_rng(5), lambda _: None)  # type: ignore[arg-type]
    np.testing.assert_allclose(split, local, rtol=1e-8, atol=1e-10 * np.abs(local).max())
    assert oracle.deviation_sums == 1 and oracle.mappings[0].scales is not None
    # without the capability: D = I, another release (the share unspent)
    plain = MappableSplit(loss, X, y, (1_000, 3_500))
    unscaled = optimizer.fit_oracle(plan, loss, plain, np.random.default_rng(5), lambda _: None)  # type: ignore[arg-type]
    assert plain.mappings[0].scales is None
    assert not np.allclose(unscaled, local, rtol=1e-3)


def test_the_scales_fit_a_narrow_informative_column_the_plain_map_cannot() -> None:
    loss, plan, X, y = _narrow_case(eps=2.0)
    off = dataclasses.replace(
        plan,  # type: ignore[type-var]
        hyperparameters={**plan.hyperparameters, "column_scale_share": 0.0},  # type: ignore[attr-defined]
    )
    optimizer = DPAGDAveraged()

    def accuracy(p: object, seed: int) -> float:
        w = optimizer.fit(
            p, loss, X, y, SecureRandom(np.random.default_rng(seed).bytes), lambda _: None
        )  # type: ignore[arg-type]
        W = w.reshape(loss.classes, -1)
        return float(np.mean((X @ W.T).argmax(axis=1) == y))

    scaled = np.mean([accuracy(plan, s) for s in range(3)])
    plain = np.mean([accuracy(off, s) for s in range(3)])
    assert scaled > plain + 0.1, (scaled, plain)


def test_the_in_database_map_refuses_scales_outside_the_range_its_arithmetic_covers() -> None:
    """The database's floating-point argument (``in_database_row_map``) holds for scales in
    [2⁻⁶, 16]: ``column_scales`` never makes others (≥ 1/√(w − 1), ≤ SCALE_CAP), and
    ``mapped_statements`` refuses them."""
    from service.workers.in_database_row_map import mapped_statements

    rng = np.random.default_rng(9)
    for w in (2, 5, 40, 1601):
        D = column_scales(np.abs(rng.standard_cauchy(w - 1)) + 1e-12, 1e-9)
        assert D.min() >= 1.0 / math.sqrt(w - 1) * (1 - 1e-12) and D.max() <= SCALE_CAP
    centre = np.zeros(3)
    for scales in ([2.0, 0.5, 1.0], [2.0**-6, 16.0, 1.0]):
        mapping = RowMap(centre=centre, intercept=0.5).scaled(np.array(scales))
        assert mapped_statements("dpfit_rows", 3, mapping)[2]["d1"] == scales[1]
    for scales in ([2.0**-7, 1.0, 1.0], [1.0, 17.0, 1.0]):
        mapping = RowMap(centre=centre, intercept=0.5).scaled(np.array(scales))
        with pytest.raises(ValueError):
            mapped_statements("dpfit_rows", 3, mapping)
