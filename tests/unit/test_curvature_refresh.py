"""The curvature refresh of the Gram form (``service/optimizers/kits/curvature_refresh.py``) and its
place in ``dp_agd_averaged``'s plan and fits.

(a) Sensitivity of B is √(8/27): never exceeded on random and adversarial neighbours (extreme
    weights, unit and zero rows, rows of no declared class, K = 2–12), attained by two
    orthogonal unit rows at w = 0 with K = 3; B is the sum of its rows' terms, each a
    symmetric block per class of Frobenius norm at most √(4/27) (the simplex bound), two rows'
    terms never at an obtuse angle (the premise of the bound); B's diagonals are the
    per-direction curvatures Σ m p_k(1 − p_k)(q_jᵀφ)².
(b) Calibration: the release's noise has the stated std (σ_r on the diagonals, σ_r/√2 off
    them), none when off; an empirical audit on the attaining pair stays below the claimed ε
    and catches a sixth of the noise.
(c) Step 2: each P_k⁻¹ is symmetric, ⪯ I/l2; with every off-diagonal entry below the keep line
    it is Q diag(1/(B⁺_jj/n + l2)) Qᵀ with the floors applied; an off-diagonal entry above the
    line is kept and the eigenvalues floored; a released block not finite is refused. The
    per-class step multiplies each class row by its own matrix.
(d) The plan: the share only where the Gram form scales by the curvature at w = 0 (or the
    analyst sets it), the event composes five releases to the target, refusals on
    ``curvature_refresh_share``.
(e) The loop: the preconditioner changes after step t_r exactly, at the iterate w_{t_r}; a fit
    with the refresh draws K·w(w+1)/2 more values than one without and releases another model; an
    oracle without the capability keeps the one preconditioner (the share unspent).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from service.models.multinomial import MultinomialLoss
from service.optimizers.dp_agd_averaged import DPAGDAveraged, DPAGDAveragedParams
from service.optimizers.kits.accelerated_kit import oracle_accelerated_descent
from service.optimizers.kits.base import InfeasibleSpec, PrivacyTarget
from service.optimizers.kits.curvature_refresh import (
    REFRESH_FLOOR,
    REFRESH_KEEP,
    REFRESH_MARGIN,
    REFRESH_SENSITIVITY,
    REFRESH_SHARE,
    REFRESH_STEP,
    CurvatureRefresh,
    curvature_terms,
    per_class_step,
    refreshed_preconditioners,
    release_curvature,
)
from service.optimizers.kits.full_gradient import LocalGradient
from service.optimizers.kits.gram_step import scales_at_zero
from service.privacy.gdp import event_mu, gdp_mu
from service.privacy.secure_random import SecureRandom
from tests.support.nonconvex_loss import epsilon_lower_bound
from tests.unit.test_curvature_step import _joint_plan  # the same joint plan (TARGET ε = 1)
from tests.unit.test_row_map_oracle import MappableSplit

TARGET = PrivacyTarget(1.0, 1e-5)


def _loss(K: int) -> MultinomialLoss:
    return MultinomialLoss(l2=1e-3, classes=K, gradient_clip=0.5, fit_intercept=True)


def _basis(rng: np.random.Generator, w: int) -> np.ndarray:
    Q, _ = np.linalg.qr(rng.normal(size=(w, w)))
    return Q


def _rows(rng: np.random.Generator, n: int, w: int) -> np.ndarray:
    """Rows of norm ≤ 1: some unit, some zero, the rest in between."""
    X = rng.normal(size=(n, w))
    X *= rng.uniform(0.0, 1.0, (n, 1)) / np.linalg.norm(X, axis=1, keepdims=True)
    X[: n // 4] /= np.linalg.norm(X[: n // 4], axis=1, keepdims=True)
    X[n // 4 : n // 4 + 1] = 0.0
    return X


# --- (a) sensitivity ---------------------------------------------------------------------------


def test_b_moves_by_at_most_its_sensitivity_when_a_row_is_replaced() -> None:
    rng = np.random.default_rng(1)
    worst = 0.0
    for trial in range(300):
        K, w, n = int(rng.integers(2, 13)), int(rng.integers(1, 9)), int(rng.integers(2, 20))
        loss = _loss(K)
        X = _rows(rng, n, w)
        y = rng.integers(-1, K, n).astype(float)
        scale = float(rng.choice([0.0, 0.3, 3.0, 50.0]))
        weights = rng.normal(size=K * w) * scale
        Q = _basis(rng, w)
        X2, y2 = X.copy(), y.copy()
        i = int(rng.integers(n))
        if trial % 3 == 0:  # a unit row in another direction, another class
            X2[i] = Q[:, int(rng.integers(w))]
            y2[i] = float(rng.integers(0, K))
        elif trial % 3 == 1:  # the row removed to zero, no class
            X2[i], y2[i] = 0.0, -1.0
        else:
            X2[i] = _rows(rng, 1, w)[0]
            y2[i] = float(rng.integers(-1, K))
        gap = curvature_terms(loss, weights, X, y, Q) - curvature_terms(loss, weights, X2, y2, Q)
        worst = max(worst, float(np.linalg.norm(gap)))
    assert worst <= REFRESH_SENSITIVITY * (1 + 1e-9)
    assert worst > 0.5 * REFRESH_SENSITIVITY  # the random pairs come near it


def test_the_sensitivity_is_attained_by_orthogonal_unit_rows_at_zero() -> None:
    rng = np.random.default_rng(2)
    w, K, n = 5, 3, 10
    Q = _basis(rng, w)
    X = _rows(rng, n, w)
    y = rng.integers(0, K, n).astype(float)
    X[0], y[0] = Q[:, 0], 0.0
    X2 = X.copy()
    X2[0] = Q[:, 1]
    zero = np.zeros(K * w)
    gap = curvature_terms(_loss(K), zero, X, y, Q) - curvature_terms(_loss(K), zero, X2, y, Q)
    assert float(np.linalg.norm(gap)) == pytest.approx(math.sqrt(8.0 / 27.0), rel=1e-12)
    assert pytest.approx(math.sqrt(8.0 / 27.0), rel=1e-15) == REFRESH_SENSITIVITY


def test_b_is_the_sum_of_row_terms_and_a_row_term_is_at_most_root_4_over_27() -> None:
    rng = np.random.default_rng(3)
    K, w, n = 6, 4, 40
    loss, Q = _loss(K), _basis(rng, w)
    X, y = _rows(rng, n, w), rng.integers(-1, K, n).astype(float)
    weights = rng.normal(size=K * w) * 2.0
    rows = [curvature_terms(loss, weights, X[i : i + 1], y[i : i + 1], Q) for i in range(n)]
    np.testing.assert_allclose(curvature_terms(loss, weights, X, y, Q), sum(rows), rtol=1e-12)
    assert max(float(np.linalg.norm(r)) for r in rows) <= math.sqrt(4.0 / 27.0) * (1 + 1e-12)
    np.testing.assert_array_equal(rows[0], rows[0].transpose(0, 2, 1))
    inner = [float((a * b).sum()) for a in rows for b in rows]  # ⟨v, v'⟩ = Σ h h' (r·r')² ≥ 0
    assert min(inner) >= -1e-15
    p = loss.predict_proba(weights, X)
    diagonal = (p * (1 - p) * (y >= 0)[:, None]).T @ (X @ Q) ** 2  # the diagonal form's c
    blocks = curvature_terms(loss, weights, X, y, Q)
    np.testing.assert_allclose(np.diagonal(blocks, axis1=1, axis2=2), diagonal, rtol=1e-12)
    assert all(float(np.abs(r).sum()) == 0.0 for r, label in zip(rows, y, strict=True) if label < 0)
    p = rng.dirichlet(np.full(K, 0.3), size=20_000)  # the simplex bound Σ (p(1−p))² ≤ 4/27
    assert float(((p * (1 - p)) ** 2).sum(axis=1).max()) <= 4.0 / 27.0


# --- (b) calibration ---------------------------------------------------------------------------


def test_the_release_has_the_stated_noise_and_none_when_off() -> None:
    rng = np.random.default_rng(4)
    half = rng.normal(size=(3, 4, 4)) * 30
    terms = half + half.transpose(0, 2, 1)
    off = release_curvature(terms, 0.0, SecureRandom(rng.bytes))
    np.testing.assert_allclose(off, terms, rtol=0, atol=1e-12)
    secure = SecureRandom(np.random.default_rng(5).bytes)
    std = 2.5
    draws = np.stack([release_curvature(terms, std, secure) for _ in range(3_000)]) - terms
    np.testing.assert_array_equal(draws, draws.transpose(0, 1, 3, 2))
    diagonal = np.diagonal(draws, axis1=2, axis2=3)
    upper = draws[:, :, *np.triu_indices(4, 1)]
    assert diagonal.std() == pytest.approx(std, rel=0.03)
    assert upper.std() == pytest.approx(std / math.sqrt(2.0), rel=0.03)
    assert abs(draws.mean()) < 4 * std / math.sqrt(diagonal.size)


def test_the_plans_std_is_its_share_of_mu_at_the_sensitivity() -> None:
    _, plan = _joint_plan(20_000)
    hyper = plan.hyperparameters  # type: ignore[attr-defined]
    z_r = 1.0 / (gdp_mu(TARGET.epsilon, TARGET.delta) * math.sqrt(REFRESH_SHARE))
    assert hyper["curvature_refresh_share"] == REFRESH_SHARE
    assert hyper["curvature_refresh_noise_std"] == pytest.approx(
        z_r * REFRESH_SENSITIVITY, rel=1e-9
    )
    assert hyper["curvature_refresh_step"] == REFRESH_STEP


def test_empirical_audit_of_the_release_on_the_attaining_pair() -> None:
    """The attaining pair released at z_r = 1/μ(ε, δ) (a 1/z_r-GDP release): the ε lower bound
    from the optimal statistic (the projection on the difference) stays below ε; at a sixth of
    the noise it is caught."""
    eps, w, K = 2.0, 3, 3
    Q = np.eye(w)
    X = np.zeros((4, w))
    X[0] = Q[:, 0]
    X2 = X.copy()
    X2[0] = Q[:, 1]
    y = np.zeros(4)
    zero = np.zeros(K * w)
    A, B = curvature_terms(_loss(K), zero, X, y, Q), curvature_terms(_loss(K), zero, X2, y, Q)
    direction = (A - B) / np.linalg.norm(A - B)
    z = 1.0 / gdp_mu(eps, 1e-5)

    def bound(multiplier: float, seed: int) -> float:
        secure = SecureRandom(np.random.default_rng(seed).bytes)
        std = multiplier * REFRESH_SENSITIVITY

        def statistic(terms: np.ndarray) -> float:
            return float(((release_curvature(terms, std, secure) - B) * direction).sum())

        low = np.array([statistic(B) for _ in range(3_000)])
        high = np.array([statistic(A) for _ in range(3_000)])
        gap = float(np.linalg.norm(A - B))
        thresholds = [gap / 2 + k * std for k in (-1.0, -0.5, 0.0, 0.5, 1.0)]
        return epsilon_lower_bound(low, high, thresholds, 1e-5)

    assert bound(z, 10) < eps
    assert bound(z / 6, 11) > eps


# --- (c) step 2 and the per-class step ----------------------------------------------------------


def _refresh(rng: np.random.Generator, w: int, n: int = 1_000) -> CurvatureRefresh:
    return CurvatureRefresh(
        step=REFRESH_STEP,
        noise_std=3.0,
        basis=_basis(rng, w),
        gram_curvature=rng.uniform(0.0, 0.05, w),
        n=n,
        l2=1e-3,
    )


def _blocks(rng: np.random.Generator, K: int, w: int, off: float) -> np.ndarray:
    """K symmetric blocks: diagonals N(0, 40²) (some below the floors, some negative),
    off-diagonal entries uniform in ±``off``."""
    upper = np.triu(rng.uniform(-off, off, (K, w, w)), 1)
    diagonal = rng.normal(size=(K, w)) * 40.0
    return upper + upper.transpose(0, 2, 1) + np.einsum("kj,jl->kjl", diagonal, np.eye(w))


def test_below_the_keep_line_each_preconditioner_is_the_floored_diagonal_in_the_basis() -> None:
    rng = np.random.default_rng(6)
    K, w = 4, 5
    spec = _refresh(rng, w)
    line = REFRESH_KEEP * spec.noise_std / math.sqrt(2.0)
    released = _blocks(rng, K, w, 0.99 * line)  # every off-diagonal entry noise-sized
    M = refreshed_preconditioners(released, spec)
    assert M.shape == (K, w, w)
    np.testing.assert_allclose(M, M.transpose(0, 2, 1), rtol=0, atol=0)
    floor = np.maximum(REFRESH_MARGIN * 3.0 / spec.n, REFRESH_FLOOR * spec.gram_curvature)
    for k in range(K):
        diagonal = np.diag(released[k]) / spec.n
        expected = 1.0 / (np.maximum(diagonal, floor) + spec.l2)
        in_basis = spec.basis.T @ M[k] @ spec.basis
        np.testing.assert_allclose(np.diag(in_basis), expected, rtol=1e-10)
        assert np.abs(in_basis - np.diag(np.diag(in_basis))).max() < 1e-9 * expected.max()
        assert np.linalg.eigvalsh(M[k]).max() <= (1.0 / spec.l2) * (1 + 1e-12)
    with pytest.raises(ValueError):
        refreshed_preconditioners(np.full((K, w, w), np.nan), spec)
    with pytest.raises(ValueError):
        refreshed_preconditioners(np.ones((K, w)), spec)  # the diagonal form's shape


def test_above_the_keep_line_an_off_diagonal_entry_is_kept_and_the_eigenvalues_floored() -> None:
    rng = np.random.default_rng(12)
    K, w = 3, 4
    spec = _refresh(rng, w)
    line = REFRESH_KEEP * spec.noise_std / math.sqrt(2.0)
    released = _blocks(rng, K, w, 0.5 * line)
    released[:, 0, 1] = released[:, 1, 0] = 8.0 * line  # a strong coupling of q_0 and q_1
    M = refreshed_preconditioners(released, spec)
    gram = REFRESH_FLOOR * spec.n * spec.gram_curvature
    floor = np.maximum(REFRESH_MARGIN * spec.noise_std, gram)
    for k in range(K):
        kept = np.diag(np.maximum(np.diag(released[k]), floor))
        kept[0, 1] = kept[1, 0] = released[k, 0, 1]
        values, vectors = np.linalg.eigh(kept)
        lifted = (vectors * np.maximum(values, floor.min())) @ vectors.T
        expected = np.linalg.inv(lifted / spec.n + spec.l2 * np.eye(w))
        in_basis = spec.basis.T @ M[k] @ spec.basis
        np.testing.assert_allclose(in_basis, expected, rtol=1e-9, atol=1e-12 * expected.max())
        assert np.linalg.eigvalsh(M[k]).min() > 0.0
        assert np.linalg.eigvalsh(M[k]).max() <= (1.0 / spec.l2) * (1 + 1e-12)


def test_the_per_class_step_multiplies_each_class_row_by_its_matrix() -> None:
    rng = np.random.default_rng(7)
    K, w = 3, 4
    g = rng.normal(size=K * w)
    M = rng.normal(size=(K, w, w))
    expected = np.concatenate([g[k * w : (k + 1) * w] @ M[k] for k in range(K)])
    np.testing.assert_allclose(per_class_step(g, M), expected, rtol=1e-13)
    shared = (g.reshape(K, w) @ M[0]).reshape(-1)
    np.testing.assert_allclose(per_class_step(g, M[0]), shared, rtol=1e-13)


# --- (d) the plan ------------------------------------------------------------------------------


def test_the_plans_event_composes_the_five_releases_to_the_target() -> None:
    _, plan = _joint_plan(20_000)
    hyper = plan.hyperparameters  # type: ignore[attr-defined]
    n = 20_000
    z_s = hyper["column_scale_noise_std"] / (math.sqrt(2.0) / n)
    z_r = hyper["curvature_refresh_noise_std"] / REFRESH_SENSITIVITY
    total = (
        1 / hyper["mean_noise_multiplier"] ** 2
        + 1 / z_s**2
        + 1 / hyper["curvature_noise_std"] ** 2
        + 1 / z_r**2
        + hyper["iterations"] / hyper["noise_multiplier"] ** 2
    )
    mu = gdp_mu(TARGET.epsilon, TARGET.delta)
    assert math.sqrt(total) <= mu * (1 + 1e-9)
    assert event_mu(plan.event) == pytest.approx(math.sqrt(total), rel=1e-9)  # type: ignore[attr-defined]
    assert event_mu(plan.event) == pytest.approx(mu, rel=1e-6)  # type: ignore[attr-defined]
    assert len(plan.event.events) == 5  # type: ignore[attr-defined]


def test_the_default_spends_the_share_only_where_the_gram_form_scales_at_zero() -> None:
    _, many = _joint_plan(20_000)
    assert many.hyperparameters["curvature_form"] == "gram"  # type: ignore[attr-defined]
    assert many.hyperparameters["curvature_refresh_share"] == REFRESH_SHARE  # type: ignore[attr-defined]
    _, eigen = _joint_plan(1_500)
    assert eigen.hyperparameters["curvature_form"] == "eigenvalue"  # type: ignore[attr-defined]
    assert "curvature_refresh_share" not in eigen.hyperparameters  # type: ignore[attr-defined]
    _, off = _joint_plan(20_000, curvature_refresh_share=0.0)
    assert "curvature_refresh_share" not in off.hyperparameters  # type: ignore[attr-defined]
    # the Gram form, but its noise edge above a third of the rows' average eigenvalue: no share
    for n, width in ((20_000, 32), (8_000, 20)):
        _, edge = _joint_plan(n, width=width)
        hyper = edge.hyperparameters  # type: ignore[attr-defined]
        assert hyper["curvature_form"] == "gram"
        assert not scales_at_zero(n, width, hyper["curvature_noise_std"])
        assert "curvature_refresh_share" not in hyper
    _, asked = _joint_plan(20_000, width=32, curvature_refresh_share=0.1)
    assert asked.hyperparameters["curvature_refresh_share"] == 0.1  # type: ignore[attr-defined]


def test_the_share_is_refused_where_the_refresh_cannot_run() -> None:
    for params in (
        {"curvature_refresh_share": 0.05, "curvature_form": "eigenvalue"},
        {"curvature_refresh_share": 0.05, "curvature_share": 0.0},
        {"curvature_refresh_share": 0.45, "row_map_share": 0.55},
    ):
        with pytest.raises(InfeasibleSpec) as caught:
            _joint_plan(20_000, **params)
        assert caught.value.field == "optimizer.params.curvature_refresh_share"
    with pytest.raises(ValueError):
        DPAGDAveragedParams.model_validate({"curvature_refresh_share": 1e-9})


# --- (e) the loop and the fits ------------------------------------------------------------------


def test_the_preconditioner_changes_after_step_t_r_at_its_iterate() -> None:
    rng = np.random.default_rng(8)
    K, w, n = 3, 4, 200
    loss = _loss(K)
    X, y = _rows(rng, n, w), rng.integers(0, K, n).astype(float)
    seen: list[tuple[int, np.ndarray]] = []
    iterates: dict[int, np.ndarray] = {}
    calls: list[np.ndarray] = []

    def keep(t: int, wt: np.ndarray) -> None:
        iterates[t] = wt.copy()

    def refresh(wt: np.ndarray) -> np.ndarray:
        calls.append(wt.copy())
        return np.stack([np.eye(w) * (k + 2.0) for k in range(K)])

    class Recording(LocalGradient):
        def gradient(self, v: np.ndarray) -> np.ndarray:
            seen.append((len(seen) + 1, v.copy()))
            return super().gradient(v)

    kwargs = {"step_size": 1.0, "iterations": 8, "noise_std": 0.0, "rng": SecureRandom(rng.bytes)}
    oracle_accelerated_descent(
        loss, Recording(loss, X, y), on_iterate=keep, preconditioner=np.eye(w),
        refresh=(5, refresh), **kwargs,  # type: ignore[arg-type]
    )  # fmt: skip
    assert len(calls) == 1
    np.testing.assert_array_equal(calls[0], iterates[5])
    plain: dict[int, np.ndarray] = {}
    oracle_accelerated_descent(
        loss, LocalGradient(loss, X, y), on_iterate=lambda t, wt: plain.__setitem__(t, wt.copy()),
        preconditioner=np.eye(w), **kwargs,  # type: ignore[arg-type]
    )  # fmt: skip
    for t in range(1, 6):
        np.testing.assert_allclose(plain[t], iterates[t], rtol=1e-13, atol=1e-15)
    assert float(np.abs(plain[6] - iterates[6]).max()) > 1e-6


class _Counting(SecureRandom):
    draws = 0

    def discrete_gaussian_pooled(self, plan, size):  # type: ignore[no-untyped-def]
        self.draws += size
        return super().discrete_gaussian_pooled(plan, size)


def _gram_case(
    n: int = 20_000, **params: object
) -> tuple[MultinomialLoss, object, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(9)
    w, K = 6, 4
    X = rng.normal(size=(n, w - 1)) * 0.3 + 0.2
    X /= np.linalg.norm(X, axis=1, keepdims=True).max() * math.sqrt(w / (w - 1))
    X = np.column_stack([X, np.full(n, 1.0 / math.sqrt(w))])
    y = np.argmax(X[:, :K] * 6 + rng.normal(size=(n, K)), axis=1).astype(float)
    loss = _loss(K)
    plan = DPAGDAveraged().plan(DPAGDAveragedParams(**params), loss, n, K * w, TARGET)
    return loss, plan, X, y


def test_a_fit_with_the_refresh_draws_its_release_and_moves_the_model() -> None:
    loss, plan, X, y = _gram_case()
    hyper = plan.hyperparameters  # type: ignore[attr-defined]
    assert hyper["curvature_refresh_share"] == REFRESH_SHARE
    optimizer = DPAGDAveraged()
    params = DPAGDAveragedParams(curvature_refresh_share=0.0)
    without = optimizer.plan(params, loss, X.shape[0], plan.hyperparameters["d"], TARGET)  # type: ignore[attr-defined]
    a, b = _Counting(np.random.default_rng(1).bytes), _Counting(np.random.default_rng(1).bytes)
    refreshed = optimizer.fit(plan, loss, X, y, a, lambda _: None)  # type: ignore[arg-type]
    plain = optimizer.fit(without, loss, X, y, b, lambda _: None)  # type: ignore[arg-type]
    w = X.shape[1]
    assert a.draws == b.draws + loss.classes * w * (w + 1) // 2
    assert np.all(np.isfinite(refreshed))
    assert float(np.abs(refreshed - plain).max()) > 1e-6


def test_fit_oracle_runs_the_refresh_where_the_oracle_sums_c_and_skips_it_elsewhere() -> None:
    loss, plan, X, y = _gram_case(column_scale_share=0.0)  # MappableSplit sums no deviations
    assert plan.hyperparameters["curvature_refresh_share"] == REFRESH_SHARE  # type: ignore[attr-defined]
    optimizer = DPAGDAveraged()
    local = optimizer.fit(plan, loss, X, y, np.random.default_rng(5), lambda _: None)  # type: ignore[arg-type]
    split = optimizer.fit_oracle(
        plan, loss, MappableSplit(loss, X, y, (7_000, 13_000)), np.random.default_rng(5),  # type: ignore[arg-type]
        lambda _: None,
    )  # fmt: skip
    np.testing.assert_allclose(split, local, rtol=1e-7, atol=1e-9 * np.abs(local).max())
    gram_only = MappableSplit(loss, X, y, (7_000, 13_000), terms=False)
    other = optimizer.fit_oracle(plan, loss, gram_only, np.random.default_rng(5), lambda _: None)  # type: ignore[arg-type]
    without = optimizer.plan(
        DPAGDAveragedParams(column_scale_share=0.0, curvature_refresh_share=0.0), loss,
        X.shape[0], plan.hyperparameters["d"], TARGET,  # type: ignore[attr-defined]
    )  # fmt: skip
    plain = optimizer.fit(without, loss, X, y, np.random.default_rng(5), lambda _: None)  # type: ignore[arg-type]
    # the one preconditioner throughout (the share unspent): the steps run at the refresh
    # plan's noise, so the model is neither the refreshed one nor the plain plan's
    assert np.all(np.isfinite(other))
    assert float(np.abs(other - local).max()) > 1e-6
    assert float(np.abs(other - plain).max()) > 1e-9
