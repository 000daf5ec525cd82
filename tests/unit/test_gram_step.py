"""The Gram form of the curvature step (``service/optimizers/kits/gram_step.py``) and its place
in ``dp_agd_averaged``'s plan.

(a) Sensitivity of u(G) is √2 (‖u(G)‖ = ‖G‖_F): never exceeded on random and adversarial
    neighbours, attained by two orthogonal unit rows; u and its inverse round-trip.
(b) Calibration: the released matrix's noise is symmetric with the stated stds (diagonal
    √2 z_c, off-diagonal z_c), none when off; an empirical audit on the attaining pair stays
    below the claimed ε and catches a sixth of the noise.
(c) Step 2: P⁻¹ symmetric with its spectrum in [1/(h + l2), 1/l2]; with the exact G, P is above
    h S + l2 I (h the curvature at w = 0: 1/K, the softmax Hessian's top eigenvalue there —
    checked against the loss's own gradient field, clipped and not; β for a model without
    one, and β where the Gram noise's edge e·w/n is above 1/3); the margin covers the noise;
    T_g = min(T, GRAM_STEPS) at the same total μ²; a released matrix not finite is refused.
(d) The plan: "gram" where the rule holds (many rows), "eigenvalue" on few, the event the same
    for both forms; the analyst's form refused on its field without a share, and "gram" with
    l1 > 0.
(e) The steps: noise off, GRAM_STEPS preconditioned steps on anisotropic rows come closer to
    the optimum than as many public steps; a preconditioner that does not fit is refused (the
    safeguard against a gross underestimate: ``test_curvature_step``'s ball test, both forms).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from service.models.base import curvature_at_zero
from service.models.logistic import LogisticLoss
from service.models.multinomial import MultinomialLoss
from service.optimizers.dp_agd_averaged import DPAGDAveraged, DPAGDAveragedParams
from service.optimizers.kits.accelerated_kit import averaged_accelerated_descent
from service.optimizers.kits.base import InfeasibleSpec, PrivacyTarget
from service.optimizers.kits.curvature_step import gram_of_rows
from service.optimizers.kits.full_gradient import LocalGradient
from service.optimizers.kits.gram_step import (
    CURVATURE_AT_ZERO_MAX_NOISE,
    GRAM_MARGIN,
    GRAM_MAX_WIDTH,
    GRAM_STEPS,
    SPANNED_MARGIN,
    SPANNED_MIN,
    curvature_scale,
    gram_edge,
    gram_from_vector,
    gram_margin,
    gram_pays,
    gram_steps,
    gram_vector,
    release_gram,
    well_spanned,
)
from service.privacy.gdp import event_mu, gdp_mu
from service.privacy.secure_random import SecureRandom
from tests.support.nonconvex_loss import epsilon_lower_bound

TARGET = PrivacyTarget(1.0, 1e-5)
LOSS = MultinomialLoss(l2=1e-3, classes=4, gradient_clip=0.5, fit_intercept=True)


def _unit_rows(rng: np.random.Generator, n: int, w: int) -> np.ndarray:
    X = rng.normal(size=(n, w))
    return X / np.linalg.norm(X, axis=1, keepdims=True) * rng.uniform(0.0, 1.0, (n, 1)) ** 0.1


# --- (a) sensitivity ---------------------------------------------------------------------------


def test_the_vector_has_the_frobenius_norm_and_round_trips() -> None:
    rng = np.random.default_rng(0)
    for w in (1, 2, 7, 30):
        G = gram_of_rows(_unit_rows(rng, 50, w))
        u = gram_vector(G)
        assert u.shape == (w * (w + 1) // 2,)
        assert np.linalg.norm(u) == pytest.approx(np.linalg.norm(G), rel=1e-12)
        np.testing.assert_allclose(gram_from_vector(u, w), G, rtol=1e-12, atol=1e-12)


def test_the_vector_moves_by_at_most_root_two_when_a_row_is_replaced() -> None:
    rng = np.random.default_rng(1)
    worst = 0.0
    for trial in range(300):
        n, w = int(rng.integers(2, 40)), int(rng.integers(1, 9))
        X = _unit_rows(rng, n, w)
        Y = X.copy()
        i = int(rng.integers(n))
        kind = trial % 3
        if kind == 0:
            Y[i] = _unit_rows(rng, 1, w)[0]
        elif kind == 1:  # against the row it replaces
            Y[i] = -X[i] / np.linalg.norm(X[i])
        else:  # across it: a unit row orthogonal to it where w allows
            v = rng.normal(size=w)
            if w > 1:
                v -= (v @ X[i]) / (X[i] @ X[i]) * X[i]
            Y[i] = v / np.linalg.norm(v)
        moved = float(np.linalg.norm(gram_vector(gram_of_rows(X)) - gram_vector(gram_of_rows(Y))))
        worst = max(worst, moved)
        assert moved <= math.sqrt(2.0) * (1 + 1e-12)
    assert worst > 1.3


def test_the_bound_is_attained() -> None:
    X = np.tile(np.eye(3)[0], (10, 1))
    Y = X.copy()
    Y[0] = np.eye(3)[1]
    moved = np.linalg.norm(gram_vector(gram_of_rows(X)) - gram_vector(gram_of_rows(Y)))
    assert moved == pytest.approx(math.sqrt(2.0), rel=1e-12)


# --- (b) calibration ---------------------------------------------------------------------------


def test_the_release_has_the_stated_noise_and_none_when_off() -> None:
    rng = np.random.default_rng(2)
    G = gram_of_rows(_unit_rows(rng, 300, 4))
    G = np.triu(G) + np.triu(G, 1).T  # the triangle u(G) reads (BLAS may round the halves apart)
    off = release_gram(G, 0.0, SecureRandom(rng.bytes))
    np.testing.assert_allclose(off, G, rtol=1e-14, atol=0)  # the √2 round trip's rounding only
    secure = SecureRandom(np.random.default_rng(3).bytes)
    z_c = 5.0
    released = np.stack([release_gram(G, z_c, secure) for _ in range(3_000)])
    assert np.array_equal(released, np.swapaxes(released, 1, 2))  # symmetric
    draws = released - G
    diagonal = draws[:, np.arange(4), np.arange(4)]
    off = draws[:, 0, 1:]
    assert diagonal.std() == pytest.approx(math.sqrt(2.0) * z_c, rel=0.05)
    assert off.std() == pytest.approx(z_c, rel=0.05)
    assert abs(diagonal.mean()) < 4 * math.sqrt(2.0) * z_c / math.sqrt(diagonal.size)
    assert abs(np.corrcoef(off[:, 0], off[:, 1])[0, 1]) < 0.06  # independent entries


def test_empirical_audit_of_the_release_on_the_attaining_pair() -> None:
    """The attaining pair released at the multiplier z_c = 1/μ(ε, δ) (a 1/z_c-GDP release):
    the ε lower bound from the optimal statistic (the projection on u(G) − u(G')) stays below
    ε; at a sixth of the noise it is caught."""
    eps, n = 2.0, 30
    X = np.tile(np.eye(3)[0], (n, 1))
    Y = X.copy()
    Y[0] = np.eye(3)[1]
    GX, GY = gram_of_rows(X), gram_of_rows(Y)
    direction = gram_vector(GX) - gram_vector(GY)
    direction /= np.linalg.norm(direction)
    z_c = 1.0 / gdp_mu(eps, 1e-5)

    def bound(multiplier: float, seed: int) -> float:
        secure = SecureRandom(np.random.default_rng(seed).bytes)

        def statistic(G: np.ndarray) -> float:
            released = gram_vector(release_gram(G, multiplier, secure))
            return float((released - gram_vector(GY)) @ direction)

        low = np.array([statistic(GY) for _ in range(3_000)])
        high = np.array([statistic(GX) for _ in range(3_000)])
        std = math.sqrt(2.0) * multiplier
        centre = math.sqrt(2.0) / 2
        thresholds = [centre + k * std for k in (-1.0, -0.5, 0.0, 0.5, 1.0)]
        return epsilon_lower_bound(low, high, thresholds, 1e-5)

    assert bound(z_c, 10) < eps
    assert bound(z_c / 6, 11) > eps


# --- (c) step 2 --------------------------------------------------------------------------------


def _steps(G: np.ndarray, n: int, z_c: float, iterations: int = 200) -> object:
    return gram_steps(
        G, n=n, loss=LOSS, iterations=iterations, step_noise_std=0.3, curvature_noise_std=z_c
    )


@pytest.mark.parametrize("seed", range(4))
def test_the_preconditioner_is_above_the_curvature_at_zero_and_within_the_public_bounds(
    seed: int,
) -> None:
    rng = np.random.default_rng(seed)
    n, w = 5_000, 12
    X = _unit_rows(rng, n, w) * np.linspace(1.0, 0.05, w)  # anisotropic rows
    G = gram_of_rows(X)
    h, l2 = 1.0 / LOSS.classes, LOSS.l2
    assert curvature_at_zero(LOSS) == h < LOSS.smoothness
    for released, z_c in ((G, 3.0), (release_gram(G, 3.0, SecureRandom(rng.bytes)), 3.0)):
        steps = _steps(released, n, z_c)
        M = steps.preconditioner  # type: ignore[attr-defined]
        assert np.array_equal(M, M.T)
        spectrum = np.linalg.eigvalsh(M)
        assert spectrum.min() >= 1.0 / (h + l2) * (1 - 1e-9)
        assert spectrum.max() <= 1.0 / l2 * (1 + 1e-9)
        P = np.linalg.inv(M)
        gap = np.linalg.eigvalsh(P - (h * G / n + l2 * np.eye(w)))
        assert gap.min() >= -1e-9  # the margin covered the noise (and 0 noise)
        top = min((np.linalg.eigvalsh(released)[-1] + GRAM_MARGIN * gram_edge(w, z_c)) / n, 1.0)
        assert np.linalg.eigvalsh(P)[-1] == pytest.approx(h * top + l2, rel=1e-9)  # h, not β
    edge = gram_edge(w, 3.0)
    secure = SecureRandom(rng.bytes)
    lowest = np.array([np.linalg.eigvalsh(release_gram(G, 3.0, secure) - G)[0] for _ in range(60)])
    assert np.all(lowest >= -GRAM_MARGIN * edge)  # the margin covers every draw …
    assert np.any(lowest < -0.8 * edge)  # … and the edge is the noise's scale, not far above it


@pytest.mark.parametrize(
    "loss",
    [
        MultinomialLoss(l2=1e-3, classes=3),
        MultinomialLoss(l2=1e-3, classes=10),
        MultinomialLoss(l2=1e-3, classes=4, gradient_clip=0.5),
        MultinomialLoss(l2=1e-3, classes=10, gradient_clip=0.5, gradient_norm_clip=0.527),
    ],
    ids=["K=3", "K=10", "K=4 slope clip", "K=10 both clips"],
)
def test_the_curvature_at_zero_bounds_the_field_at_zero_and_is_attained_unclipped(
    loss: MultinomialLoss,
) -> None:
    """Finite differences of the loss's own gradient field at w = 0 on one unit row per label:
    the field's Jacobian in the scores has no eigenvalue above curvature_at_zero = 1/K, and
    reaches it without clips (diag(u) − uuᵀ); β is far above it (the point of the scale)."""
    K, width, step = loss.classes, 1, 1e-6
    h = curvature_at_zero(loss)
    assert h == pytest.approx(1.0 / K, rel=1e-15) and h < loss.smoothness
    top = 0.0
    for label in range(K):
        x, y = np.ones((1, width)), np.array([float(label)])
        jac = np.empty((K, K))
        for k in range(K):
            e = np.zeros(K * width)
            e[k] = step
            plus = loss.gradient(e, x, y) - loss.l2 * e
            minus = loss.gradient(-e, x, y) + loss.l2 * e
            jac[:, k] = (plus - minus) / (2 * step)
        top = max(top, float(np.max(np.abs(np.linalg.eigvals(jac)))))
    assert top <= h * (1 + 1e-6)
    if loss.gradient_clip is None:
        assert top == pytest.approx(h, rel=1e-6)


def test_a_model_without_a_curvature_at_zero_keeps_its_smoothness() -> None:
    loss = LogisticLoss(l2=1e-3)
    assert curvature_at_zero(loss) == loss.smoothness


def test_the_curvature_scale_is_the_start_s_only_where_the_gram_noise_is_small() -> None:
    """h = 1/K where e·w/n ≤ 1/3, β above: the line by n alone (w = 12, z_c = 3, e = 2·3·√12),
    and the preconditioner built with the h of its side."""
    w, z_c = 12, 3.0
    line = gram_edge(w, z_c) * w / CURVATURE_AT_ZERO_MAX_NOISE
    small, large = math.ceil(line), math.floor(line)
    assert curvature_scale(LOSS, small, w, z_c) == 1.0 / LOSS.classes
    assert curvature_scale(LOSS, large, w, z_c) == LOSS.smoothness
    G = np.diag(np.linspace(0.5, 0.0, w)) * small  # a direction no row spans: not well spanned
    for n, h in ((small, 1.0 / LOSS.classes), (large, LOSS.smoothness)):
        P = np.linalg.inv(_steps(G * n / small, n, z_c).preconditioner)  # type: ignore[attr-defined]
        top = min(0.5 + GRAM_MARGIN * gram_edge(w, z_c) / n, 1.0)
        assert np.linalg.eigvalsh(P)[-1] == pytest.approx(h * top + LOSS.l2, rel=1e-9)


def test_well_spanned_rows_take_the_smoothness_step_even_inside_the_line() -> None:
    """Where G̃'s smallest eigenvalue over n is at least SPANNED_MIN/w the steps take h = β,
    else the line's h = 1/K: the same n, w and z_c (inside the line), two released spectra."""
    w, z_c = 12, 3.0
    n = math.ceil(gram_edge(w, z_c) * w / CURVATURE_AT_ZERO_MAX_NOISE)
    assert curvature_scale(LOSS, n, w, z_c) == 1.0 / LOSS.classes
    edge = SPANNED_MIN * n / w
    assert well_spanned(np.full(w, edge), n, w)
    assert not well_spanned(np.append(np.full(w - 1, 10 * edge), np.nextafter(edge, 0.0)), n, w)
    for least, h, kappa in (
        (0.9 / w, LOSS.smoothness, SPANNED_MARGIN),
        (0.4 / w, 1.0 / LOSS.classes, GRAM_MARGIN),
    ):
        spectrum = np.append(np.full(w - 1, 1.0 / w), least)
        G = np.diag(spectrum) * n
        P = np.linalg.inv(_steps(G, n, z_c).preconditioner)  # type: ignore[attr-defined]
        expected = h * np.minimum(spectrum + kappa * gram_edge(w, z_c) / n, 1.0) + LOSS.l2
        assert np.sort(np.linalg.eigvalsh(P)) == pytest.approx(np.sort(expected), rel=1e-9)


def test_the_margin_is_smaller_exactly_where_the_rows_are_well_spanned() -> None:
    """κ = SPANNED_MARGIN on a spectrum at the well-spanned floor, GRAM_MARGIN just below it."""
    n, w, z_c = 10_000, 12, 3.0
    floor = SPANNED_MIN * n / w
    spanned = np.full(w, floor)
    below = np.append(np.full(w - 1, 10 * floor), floor * (1 - 1e-12))
    assert gram_margin(spanned, n, w, z_c) == SPANNED_MARGIN * gram_edge(w, z_c)
    assert gram_margin(below, n, w, z_c) == GRAM_MARGIN * gram_edge(w, z_c)
    assert SPANNED_MARGIN < GRAM_MARGIN


def test_the_smaller_margin_keeps_five_eighths_of_the_lifted_curvature() -> None:
    """The docstring's worst case: G̃ = (n/2w)·I (the well-spanned floor) and e = n/w (the Gram
    form's ceiling). Each lifted eigenvalue is then (1/2 + 3/4)/(1/2 + 3/2) = 5/8 of the one at
    κ = 3/2 — attained — and above 5/8 of it on every other spanned spectrum the form admits."""
    w = 12
    z_c = 3.0
    e = gram_edge(w, z_c)
    n = math.ceil(e * w)  # e/n ≤ 1/w: the Gram form's ceiling, reached up to rounding n up
    assert gram_pays(n, w, z_c)
    rng = np.random.default_rng(5)
    ratios = []
    for spectrum in [np.full(w, SPANNED_MIN * n / w)] + [
        SPANNED_MIN * n / w * rng.uniform(1.0, 4.0, w) for _ in range(20)
    ]:
        P = np.linalg.inv(_steps(np.diag(spectrum), n, z_c).preconditioner)  # type: ignore[attr-defined]
        lifted = np.sort(np.linalg.eigvalsh(P)) - LOSS.l2
        wide = LOSS.smoothness * np.minimum((np.sort(spectrum) + GRAM_MARGIN * e) / n, 1.0)
        ratios.append(float(np.min(lifted / wide)))
    assert ratios[0] == pytest.approx(5.0 / 8.0, rel=1e-3)  # attained (n rounded up: 1e-3)
    assert min(ratios) >= 5.0 / 8.0 * (1 - 1e-9)


@pytest.mark.parametrize("seed", range(3))
def test_with_the_smaller_margin_p_majorises_five_eighths_of_the_bound(seed: int) -> None:
    """On released Gram matrices of uniform rows (well spanned, inside the Gram form): P ⪰
    (5/8)·β·S + l2 I wherever the noise's lowest eigenvalue is above −1.5 e (every draw here)."""
    rng = np.random.default_rng(seed)
    n, w, z_c = 20_000, 10, 3.0
    X = _unit_rows(rng, n, w)
    G = gram_of_rows(X)
    secure = SecureRandom(rng.bytes)
    for _ in range(10):
        released = release_gram(G, z_c, secure)
        assert well_spanned(np.linalg.eigvalsh(released), n, w)
        assert np.linalg.eigvalsh(released - G)[0] >= -GRAM_MARGIN * gram_edge(w, z_c)
        P = np.linalg.inv(_steps(released, n, z_c).preconditioner)  # type: ignore[attr-defined]
        bound = 5.0 / 8.0 * LOSS.smoothness * G / n + LOSS.l2 * np.eye(w)
        assert np.linalg.eigvalsh(P - bound)[0] >= -1e-12


@pytest.mark.parametrize("seed", range(3))
def test_uniform_rows_are_well_spanned_and_a_dead_column_is_not(seed: int) -> None:
    """The rule on released Gram matrices of real draws: rows uniform in a ball (every direction
    about 1/w) pass at n = 20,000, w = 10, z_c = 3; the same rows with one column zeroed (a
    direction no row spans, as a real table's redundant column) never do."""
    rng = np.random.default_rng(seed)
    n, w, z_c = 20_000, 10, 3.0
    X = _unit_rows(rng, n, w)
    dead = X.copy()
    dead[:, -1] = 0.0
    secure = SecureRandom(rng.bytes)
    for rows, spanned in ((X, True), (dead, False)):
        released = release_gram(gram_of_rows(rows), z_c, secure)
        assert well_spanned(np.linalg.eigvalsh(released), n, w) is spanned


def test_the_steps_are_public_and_keep_their_mu() -> None:
    G = np.eye(5) * 100.0
    for T in (5, 32, 200):
        steps = _steps(G, 1_000, 2.0, T)
        assert steps.iterations == min(T, GRAM_STEPS)  # type: ignore[attr-defined]
        ratio = steps.iterations / steps.noise_std**2  # type: ignore[attr-defined]
        assert ratio == pytest.approx(T / 0.3**2, rel=1e-12)
    with pytest.raises(ValueError):
        _steps(np.full((3, 3), np.inf), 1_000, 2.0)


def test_the_rule_needs_noise_below_the_average_eigenvalue() -> None:
    z_c = 26.0  # ε = 1, δ = 1e-5, share 0.02
    assert gram_pays(14_000, 21, z_c)
    assert not gram_pays(1_257, 65, z_c)  # digits: the Gram form's noise is above its spectrum
    assert not gram_pays(0, 21, z_c) and not gram_pays(14_000, 21, 0.0)
    assert gram_pays(10**7, GRAM_MAX_WIDTH, z_c) and not gram_pays(10**7, GRAM_MAX_WIDTH + 1, z_c)


# --- (d) the plan ------------------------------------------------------------------------------


def _plan(n: int, width: int = 20, loss: MultinomialLoss = LOSS, **params: object) -> object:
    return DPAGDAveraged().plan(
        DPAGDAveragedParams.model_validate(params), loss, n, loss.classes * width, TARGET
    )


def test_the_form_follows_the_rule_and_the_event_is_the_same() -> None:
    many, few = _plan(20_000), _plan(1_500)
    assert many.hyperparameters["curvature_form"] == "gram"  # type: ignore[attr-defined]
    assert few.hyperparameters["curvature_form"] == "eigenvalue"  # type: ignore[attr-defined]
    forced = _plan(20_000, curvature_form="eigenvalue")
    assert forced.hyperparameters["curvature_form"] == "eigenvalue"  # type: ignore[attr-defined]
    # the Gram form's plan also spends the column scales' share: the same μ, composed otherwise
    assert event_mu(forced.event) == pytest.approx(event_mu(many.event), rel=1e-9)  # type: ignore[attr-defined]
    assert event_mu(many.event) <= gdp_mu(TARGET.epsilon, TARGET.delta) * (1 + 1e-9)  # type: ignore[attr-defined]
    assert "curvature_form" not in _plan(20_000, curvature_share=0.0).hyperparameters  # type: ignore[attr-defined]


def test_a_gram_form_plan_counts_the_steps_it_runs() -> None:
    """The Gram form's step count is public, so the plan's total_steps (the job's progress
    denominator) is min(T, GRAM_STEPS) and the fit reports exactly that many; the eigenvalue
    form keeps T (its T' follows from a release)."""
    gram, eigen = _plan(20_000), _plan(20_000, curvature_form="eigenvalue")
    T = int(gram.hyperparameters["iterations"])  # type: ignore[attr-defined]
    assert T > GRAM_STEPS and eigen.total_steps == T  # type: ignore[attr-defined]
    assert gram.total_steps == GRAM_STEPS  # type: ignore[attr-defined]
    rng = np.random.default_rng(8)
    n, w = 20_000, 20
    X = np.column_stack([_unit_rows(rng, n, w - 1) * 0.8, np.full(n, 0.5)])
    y = rng.integers(0, LOSS.classes, n).astype(float)
    seen: list[int] = []
    DPAGDAveraged().fit(gram, LOSS, X, y, SecureRandom(rng.bytes), seen.append)  # type: ignore[arg-type]
    assert seen == list(range(1, GRAM_STEPS + 1))


def test_the_analysts_form_is_refused_where_it_cannot_run() -> None:
    with pytest.raises(InfeasibleSpec) as caught:
        _plan(20_000, curvature_share=0.0, curvature_form="gram")
    assert caught.value.field == "optimizer.params.curvature_form"
    sparse = MultinomialLoss(l2=1e-3, l1=1e-4, classes=4, gradient_clip=0.5, fit_intercept=True)
    with pytest.raises(InfeasibleSpec) as caught:
        _plan(20_000, loss=sparse, row_map_share=0.1, curvature_share=0.02, curvature_form="gram")
    assert caught.value.field == "optimizer.params.curvature_form"
    with pytest.raises(ValueError):
        DPAGDAveragedParams.model_validate({"curvature_form": "hessian"})


def test_a_gram_form_fit_is_finite_and_learns() -> None:
    rng = np.random.default_rng(5)
    n, w, K = 20_000, 6, 4
    centres = rng.normal(size=(K, w - 1)) * 0.6
    y = rng.integers(0, K, n)
    X = np.column_stack([(centres[y] + rng.normal(size=(n, w - 1)) * 0.5) * 0.3, np.full(n, 0.3)])
    X /= max(1.0, float(np.linalg.norm(X, axis=1).max()))
    plan = _plan(n, width=w)
    assert plan.hyperparameters["curvature_form"] == "gram"  # type: ignore[attr-defined]
    secure = SecureRandom(rng.bytes)
    out = DPAGDAveraged().fit(plan, LOSS, X, y.astype(float), secure, lambda _: None)  # type: ignore[arg-type]
    W = out.reshape(K, w)
    assert np.all(np.isfinite(W))
    assert np.mean((X @ W.T).argmax(axis=1) == y) > 0.6


# --- (e) the steps -----------------------------------------------------------------------------


def test_preconditioned_steps_come_closer_to_the_optimum_than_the_public_step() -> None:
    rng = np.random.default_rng(6)
    n, w, K = 3_000, 10, 3
    scales = np.geomspace(1.0, 0.02, w)
    X = _unit_rows(rng, n, w) * scales
    truth = rng.normal(size=(K, w)) / scales
    y = (X @ truth.T + rng.gumbel(size=(n, K))).argmax(axis=1).astype(float)
    loss = MultinomialLoss(l2=1e-3, classes=K, gradient_clip=0.5)
    oracle = LocalGradient(loss, X, y)
    common = {"iterations": GRAM_STEPS, "noise_std": 0.0, "rng": SecureRandom(rng.bytes)}
    steps = gram_steps(
        gram_of_rows(X), n=n, loss=loss, iterations=200, step_noise_std=0.0, curvature_noise_std=0.5
    )
    pre = averaged_accelerated_descent(
        loss,
        oracle,
        step_size=1.0,
        preconditioner=steps.preconditioner,
        **common,  # type: ignore[arg-type]
    )
    plain = averaged_accelerated_descent(
        loss,
        oracle,
        step_size=1.0 / (loss.smoothness + loss.l2),
        **common,  # type: ignore[arg-type]
    )
    best = averaged_accelerated_descent(
        loss, oracle, step_size=1.0, preconditioner=steps.preconditioner, iterations=2_000,
        noise_std=0.0, rng=SecureRandom(rng.bytes),
    )  # fmt: skip
    optimum = loss.value(best, X, y)
    assert loss.value(pre, X, y) - optimum < 0.2 * (loss.value(plain, X, y) - optimum)


def test_a_preconditioner_that_does_not_fit_is_refused() -> None:
    loss = MultinomialLoss(l2=1e-3, classes=3, gradient_clip=0.5)
    X = np.eye(4)[:3]
    y = np.array([0.0, 1.0, 2.0])
    for bad in (np.eye(5), np.ones((4, 3))):
        with pytest.raises(ValueError):
            averaged_accelerated_descent(
                loss, LocalGradient(loss, X, y), step_size=1.0, preconditioner=bad,
                iterations=2, noise_std=0.0, rng=SecureRandom(np.random.default_rng(0).bytes),
            )  # fmt: skip
