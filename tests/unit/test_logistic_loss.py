"""The logistic loss and its constants L = 1, β = 1/4, μ = l2
(docs/adding-an-optimizer.md#losses-and-their-constants)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from pydantic import ValidationError
from scipy.special import expit

from service.models.base import Loss
from service.models.logistic import LogisticLoss, LogisticRegressionSpec, clip_margin
from service.models.registry import build_loss, model_names, parse_model_spec


def _unit_rows(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    x = rng.normal(size=(n, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _labels(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.choice([-1.0, 1.0], size=n)


def test_implements_protocol_and_constants() -> None:
    loss: Loss = LogisticLoss(l2=0.3)
    assert loss.name == "logistic_regression"
    assert (loss.lipschitz, loss.smoothness, loss.l2, loss.convex) == (1.0, 0.25, 0.3, True)
    assert (loss.l1, loss.task) == (0.0, "classification")
    with pytest.raises(ValueError):
        LogisticLoss(l2=-1.0)


def test_value_matches_definition_and_is_stable() -> None:
    rng = np.random.default_rng(0)
    X, y = _unit_rows(rng, 50, 4), _labels(rng, 50)
    w = rng.normal(size=4)
    loss = LogisticLoss(l2=0.2)
    naive = np.mean(np.log1p(np.exp(-y * (X @ w)))) + 0.1 * w @ w
    assert loss.value(w, X, y) == pytest.approx(naive, rel=1e-12)
    assert LogisticLoss().value(np.zeros(4), X, y) == pytest.approx(math.log(2.0))
    # huge margins: no overflow, exact asymptotics
    big = 1e4 * X[0]
    Xb, yb = X[:1], np.array([-1.0])
    assert LogisticLoss().value(big, Xb, yb) == pytest.approx(1e4, rel=1e-12)
    assert LogisticLoss().value(big, Xb, -yb) == pytest.approx(0.0, abs=1e-300)
    g = LogisticLoss().gradient(big, Xb, yb)
    assert np.all(np.isfinite(g)) and np.linalg.norm(g) == pytest.approx(1.0)


@pytest.mark.parametrize("l2", [0.0, 1e-3, 0.5])
def test_gradient_matches_finite_differences(l2: float) -> None:
    rng = np.random.default_rng(1)
    X, y = _unit_rows(rng, 40, 6) * rng.uniform(0, 1, size=(40, 1)), _labels(rng, 40)
    loss = LogisticLoss(l2=l2)
    for _ in range(5):
        w = rng.normal(scale=3.0, size=6)
        g = loss.gradient(w, X, y)
        h = 1e-6
        fd = np.array(
            [
                (loss.value(w + h * e, X, y) - loss.value(w - h * e, X, y)) / (2 * h)
                for e in np.eye(6)
            ]
        )
        np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)
        # and the mean of the per-example gradients plus μw
        np.testing.assert_allclose(
            loss.example_gradients(w, X, y).mean(axis=0) + l2 * w, g, rtol=1e-12, atol=1e-15
        )


def test_lipschitz_constant_is_one_and_tight() -> None:
    rng = np.random.default_rng(2)
    loss = LogisticLoss()
    worst = 0.0
    for scale in (0.1, 1.0, 10.0, 1e3):
        X = _unit_rows(rng, 2000, 5) * rng.uniform(0, 1, size=(2000, 1)) ** 0.1
        y = _labels(rng, 2000)
        w = rng.normal(scale=scale, size=5)
        norms = np.linalg.norm(loss.example_gradients(w, X, y), axis=1)
        assert np.all(norms <= loss.lipschitz * (1 + 1e-12))
        worst = max(worst, float(norms.max()))
    assert worst > 0.99  # L = 1 is attained (badly misclassified unit-norm rows)


def test_smoothness_is_one_quarter_and_tight() -> None:
    """‖∇ℓ(w) − ∇ℓ(w')‖ ≤ (1/4)‖w − w'‖ for every admissible row; ≈ 1/4 near w·x = 0."""
    rng = np.random.default_rng(3)
    loss = LogisticLoss()
    worst = 0.0
    for scale in (0.01, 0.5, 3.0, 30.0):
        X, y = _unit_rows(rng, 3000, 4), _labels(rng, 3000)
        w1 = rng.normal(scale=scale, size=4)
        w2 = w1 + rng.normal(scale=scale, size=4)
        g1 = loss.example_gradients(w1, X, y)
        g2 = loss.example_gradients(w2, X, y)
        ratio = np.linalg.norm(g1 - g2, axis=1) / np.linalg.norm(w1 - w2)
        assert np.all(ratio <= loss.smoothness * (1 + 1e-9))
        worst = max(worst, float(ratio.max()))
    assert worst > 0.24
    # tight: along x with w·x near 0 the ratio tends to 1/4
    x, yy = np.array([[1.0, 0.0, 0.0, 0.0]]), np.array([1.0])
    a, b = np.array([1e-4, 0, 0, 0]), np.array([-1e-4, 0, 0, 0])
    g = loss.example_gradients(a, x, yy) - loss.example_gradients(b, x, yy)
    assert np.linalg.norm(g) / 2e-4 == pytest.approx(0.25, rel=1e-6)


def test_objective_hessian_between_mu_and_beta_plus_mu() -> None:
    """F is μ-strongly convex and (β + μ)-smooth: FD Hessian eigenvalues lie in [μ, β + μ]."""
    rng = np.random.default_rng(4)
    mu = 0.05
    X, y = _unit_rows(rng, 30, 3), _labels(rng, 30)
    loss = LogisticLoss(l2=mu)
    for _ in range(5):
        w = rng.normal(size=3)
        h = 1e-5
        H = np.array(
            [
                (loss.gradient(w + h * e, X, y) - loss.gradient(w - h * e, X, y)) / (2 * h)
                for e in np.eye(3)
            ]
        )
        eig = np.linalg.eigvalsh(0.5 * (H + H.T))
        assert eig.min() >= mu - 1e-7
        assert eig.max() <= 0.25 + mu + 1e-7
    # convexity along random chords
    for _ in range(50):
        a, b = rng.normal(scale=5, size=3), rng.normal(scale=5, size=3)
        mid = loss.value(0.5 * (a + b), X, y)
        assert mid <= 0.5 * (loss.value(a, X, y) + loss.value(b, X, y)) + 1e-12


def test_predict_proba() -> None:
    rng = np.random.default_rng(5)
    X = _unit_rows(rng, 10, 3)
    w = rng.normal(size=3)
    p = LogisticLoss().predict_proba(w, X)
    np.testing.assert_allclose(p, expit(X @ w))
    assert np.all((p > 0) & (p < 1))


def test_spec_defaults_and_validation() -> None:
    spec = LogisticRegressionSpec(type="logistic_regression")
    assert spec.l2 == 1e-4 and spec.l1 == 0.0 and spec.fit_intercept is True
    with pytest.raises(ValidationError):
        LogisticRegressionSpec(type="logistic_regression", l2=-0.1)
    with pytest.raises(ValidationError):
        LogisticRegressionSpec(type="logistic_regression", l2=math.inf)
    with pytest.raises(ValidationError):
        LogisticRegressionSpec.model_validate({"type": "logistic_regression", "C": 1.0})
    schema = LogisticRegressionSpec.model_json_schema()
    for name in ("type", "l2", "l1", "fit_intercept"):
        assert schema["properties"][name].get("description")


def test_registry_parses_and_builds() -> None:
    spec = parse_model_spec({"type": "logistic_regression", "l2": 0.01, "fit_intercept": False})
    assert isinstance(spec, LogisticRegressionSpec)
    loss = build_loss(spec)
    assert isinstance(loss, LogisticLoss) and loss.l2 == 0.01
    assert "logistic_regression" in model_names()  # the full catalog: test_models_catalog.py
    with pytest.raises(ValidationError):
        parse_model_spec({"type": "svm"})
    with pytest.raises(ValidationError):
        parse_model_spec({"l2": 0.1})


# --- gradient_clip: the clipped-slope logistic loss ---------------------------------------------

CLIPS = [0.1, 0.3, 0.5, 0.9]


def _reference_clipped(m: np.ndarray, c: float) -> np.ndarray:
    """h_C(m) straight from the definition: logistic for m ≥ m_C, its tangent at m_C below."""
    m_c = math.log((1 - c) / c)
    tangent = math.log1p(math.exp(-m_c)) - c * (m - m_c)
    return np.where(m >= m_c, np.log1p(np.exp(-np.minimum(m, 700.0))), tangent)


def _plain_gradient(w: np.ndarray, X: np.ndarray, y: np.ndarray, l2: float) -> np.ndarray:
    """The unclipped gradient exactly as it was computed before gradient_clip existed."""
    coef = X @ w
    coef *= -y
    expit(coef, out=coef)
    coef *= y
    grad = X.T @ coef
    grad *= -1.0 / X.shape[0]
    if l2:
        grad += l2 * w
    return grad


def _plain_smooth_value(w: np.ndarray, X: np.ndarray, y: np.ndarray, l2: float) -> float:
    margins = X @ w
    margins *= -y
    return float(np.mean(np.logaddexp(0.0, margins))) + 0.5 * l2 * float(w @ w)


@pytest.mark.parametrize("clip", CLIPS)
def test_clipped_constants(clip: float) -> None:
    loss = LogisticLoss(l2=0.2, l1=0.1, gradient_clip=clip)
    c = min(clip, 0.5)
    assert loss.lipschitz == clip
    assert loss.smoothness == pytest.approx(c * (1 - c), rel=1e-15)
    assert loss.smoothness == pytest.approx(clip * (1 - clip) if clip < 0.5 else 0.25)
    assert (loss.convex, loss.l2, loss.l1, loss.gradient_clip) == (True, 0.2, 0.1, clip)
    assert clip_margin(clip) == pytest.approx(math.log((1 - clip) / clip), rel=1e-14, abs=1e-15)
    assert expit(-clip_margin(clip)) == pytest.approx(clip, rel=1e-14)  # σ(−m_C) = C
    # dataclasses.replace (private_tuning swaps l2 this way) keeps C and recomputes L, β
    swapped = dataclasses.replace(loss, l2=0.01)
    assert (swapped.gradient_clip, swapped.lipschitz, swapped.smoothness) == (
        clip,
        loss.lipschitz,
        loss.smoothness,
    )


@pytest.mark.parametrize("clip", CLIPS)
def test_clipped_value_matches_definition_and_is_stable(clip: float) -> None:
    rng = np.random.default_rng(10)
    X, y = _unit_rows(rng, 400, 3) * rng.uniform(0, 1, size=(400, 1)), _labels(rng, 400)
    loss = LogisticLoss(l2=0.1, gradient_clip=clip)
    m_c = clip_margin(clip)
    for scale in (0.5, 4.0, 30.0):
        w = rng.normal(scale=scale, size=3)
        m = y * (X @ w)
        np.testing.assert_allclose(loss.phi(X @ w, y), _reference_clipped(m, clip), rtol=1e-12)
        expected = float(np.mean(_reference_clipped(m, clip))) + 0.05 * float(w @ w)
        assert loss.smooth_value(w, X, y) == pytest.approx(expected, rel=1e-12)
        assert loss.value(w, X, y) == pytest.approx(expected, rel=1e-12)
    # continuous at m_C, below the logistic loss everywhere, equal to it for m ≥ m_C
    one = np.ones(1)
    for eps in (1e-9, 1e-6):
        lo, hi = loss.phi(np.array([m_c - eps]), one)[0], loss.phi(np.array([m_c + eps]), one)[0]
        assert abs(lo - hi) <= 2.1 * clip * eps
    grid = np.linspace(-60.0, 60.0, 12_001)
    ones = np.ones_like(grid)
    plain = np.logaddexp(0.0, -grid)
    clipped = loss.phi(grid, ones)
    assert np.all(clipped <= plain * (1 + 1e-15)) and np.all(clipped > 0.0)
    np.testing.assert_array_equal(clipped[grid >= m_c], plain[grid >= m_c])
    # the label flips the margin: φ(z, −1) = h_C(−z)
    np.testing.assert_array_equal(loss.phi(grid, -ones), loss.phi(-grid, ones))
    # huge margins: no overflow; linear growth with slope C on the wrong side
    big = np.array([-1e300, -1e6, 1e6, 1e300])
    out = loss.phi(big, np.ones(4))
    assert np.all(np.isfinite(out))
    assert out[1] == pytest.approx(clip * 1e6, rel=1e-4) and out[3] == 0.0
    np.testing.assert_allclose(loss.dphi(big, np.ones(4)), [-clip, -clip, 0.0, 0.0], atol=0)


def test_clip_one_half_is_logistic_on_correct_rows_and_its_tangent_at_zero_on_wrong_ones() -> None:
    loss = LogisticLoss(gradient_clip=0.5)
    m = np.linspace(-20.0, 20.0, 4001)
    ones = np.ones_like(m)
    assert clip_margin(0.5) == 0.0
    np.testing.assert_array_equal(loss.phi(m, ones)[m >= 0], np.logaddexp(0.0, -m[m >= 0]))
    np.testing.assert_allclose(loss.phi(m, ones)[m < 0], math.log(2.0) - 0.5 * m[m < 0], rtol=1e-14)
    assert (loss.lipschitz, loss.smoothness) == (0.5, 0.25)


@pytest.mark.parametrize("clip", CLIPS)
@pytest.mark.parametrize("l2", [0.0, 0.05])
def test_clipped_gradient_matches_finite_differences(clip: float, l2: float) -> None:
    rng = np.random.default_rng(11)
    n, d = 60, 5
    X, y = _unit_rows(rng, n, d) * rng.uniform(0.2, 1, size=(n, 1)), _labels(rng, n)
    loss = LogisticLoss(l2=l2, gradient_clip=clip)
    m_c = clip_margin(clip)
    below = above = 0
    h = 1e-6
    for scale in (0.5, 3.0, 10.0):
        for _ in range(3):
            w = rng.normal(scale=scale, size=d)
            m = y * (X @ w)
            below += int(np.sum(m < m_c - 1e-3))
            above += int(np.sum(m > m_c + 1e-3))
            g = loss.gradient(w, X, y)
            fd = np.array(
                [
                    (loss.smooth_value(w + h * e, X, y) - loss.smooth_value(w - h * e, X, y))
                    / (2 * h)
                    for e in np.eye(d)
                ]
            )
            np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)
            per_row = loss.example_gradients(w, X, y)
            np.testing.assert_allclose(per_row.mean(axis=0) + l2 * w, g, rtol=1e-12, atol=1e-15)
            # the closed form −y min(σ(−m), C) x, row by row
            closed = (-y * np.minimum(expit(-m), clip))[:, None] * X
            np.testing.assert_allclose(per_row, closed, rtol=1e-12, atol=1e-300)
    assert below > 50 and above > 50  # both sides of the kink were exercised
    # one-row checks straddling m_C: the scalar derivative matches a difference quotient
    one = np.ones(1)
    for m0 in (m_c - 0.5, m_c - 1e-4, m_c + 1e-4, m_c + 0.5, m_c - 40.0, m_c + 15.0):
        fd1 = (loss.phi(np.array([m0 + h]), one) - loss.phi(np.array([m0 - h]), one))[0] / (2 * h)
        assert loss.dphi(np.array([m0]), one)[0] == pytest.approx(fd1, rel=1e-6, abs=1e-9)


@pytest.mark.parametrize("clip", CLIPS)
def test_clipped_lipschitz_constant_is_c_and_tight(clip: float) -> None:
    """‖∇ℓ_C‖ ≤ C for every admissible row (a reported L smaller than the truth fails here),
    and adversarial unit-norm rows with very negative margins reach C."""
    rng = np.random.default_rng(12)
    loss = LogisticLoss(gradient_clip=clip)
    worst = 0.0
    for scale in (0.1, 1.0, 10.0, 1e3):
        X = _unit_rows(rng, 2000, 5) * rng.uniform(0, 1, size=(2000, 1)) ** 0.1
        y = _labels(rng, 2000)
        w = rng.normal(scale=scale, size=5)
        norms = np.linalg.norm(loss.example_gradients(w, X, y), axis=1)
        assert np.all(norms <= loss.lipschitz * (1 + 1e-12))
        worst = max(worst, float(norms.max()))
    # adversarial: ‖x‖ = 1, w = −s·y x, so m = −s (badly misclassified), for s up to 1e6
    X = _unit_rows(rng, 500, 5)
    y = _labels(rng, 500)
    for s in (0.0, 1.0, 10.0, 1e3, 1e6):
        for i in range(0, 500, 50):
            w = -s * y[i] * X[i]
            norms = np.linalg.norm(loss.example_gradients(w, X, y), axis=1)
            assert np.all(norms <= loss.lipschitz * (1 + 1e-12))
            worst = max(worst, float(norms.max()))
    assert worst >= 0.999 * clip
    assert loss.lipschitz == clip


@pytest.mark.parametrize("clip", CLIPS)
def test_clipped_smoothness_is_declared_and_tight(clip: float) -> None:
    """‖∇ℓ_C(w) − ∇ℓ_C(w')‖ ≤ β‖w − w'‖ on random and kink-straddling pairs, and the ratio
    reaches 0.99·β (at m = 0 for C ≥ 1/2, just above m_C for C < 1/2)."""
    rng = np.random.default_rng(13)
    loss = LogisticLoss(gradient_clip=clip)
    beta = loss.smoothness
    worst = 0.0
    for scale in (0.01, 0.5, 3.0, 30.0):
        X, y = _unit_rows(rng, 3000, 4), _labels(rng, 3000)
        w1 = rng.normal(scale=scale, size=4)
        for step in (1e-3, 0.1, 1.0):
            w2 = w1 + rng.normal(scale=step * max(scale, 0.1), size=4)
            diff = loss.example_gradients(w1, X, y) - loss.example_gradients(w2, X, y)
            ratio = np.linalg.norm(diff, axis=1) / np.linalg.norm(w1 - w2)
            assert np.all(ratio <= beta * (1 + 1e-9))
            worst = max(worst, float(ratio.max()))
    # along a unit row x (w ∥ x, so ratio = |Δh'|/|Δm|): pairs straddling m_C and near the
    # maximiser max(m_C, 0) of h''
    x = _unit_rows(rng, 1, 4)
    one = np.ones(1)
    m_c = clip_margin(clip)
    peak = max(m_c, 0.0)
    pairs = [(m_c - 1.0, m_c + 1.0), (m_c - 1e-3, m_c + 1e-3), (peak, peak + 1e-4)]
    pairs += [(peak + 1e-5, peak + 2e-5), (peak - 1e-4, peak + 1e-4)]
    pairs += [tuple(rng.normal(loc=m_c, scale=2.0, size=2)) for _ in range(200)]
    for a, b in pairs:
        ga = loss.example_gradients(a * x[0], x, one)
        gb = loss.example_gradients(b * x[0], x, one)
        ratio = float(np.linalg.norm(ga - gb)) / abs(a - b)
        assert ratio <= beta * (1 + 1e-9)
        worst = max(worst, ratio)
    assert worst >= 0.99 * beta


@pytest.mark.parametrize("clip", CLIPS)
@pytest.mark.parametrize("l2", [0.0, 0.05])
def test_clipped_loss_is_convex(clip: float, l2: float) -> None:
    """h_C' is non-decreasing on a fine grid; F(w') ≥ F(w) + ∇F(w)·(w' − w) + (μ/2)‖w' − w‖²."""
    loss = LogisticLoss(l2=l2, gradient_clip=clip)
    z = np.linspace(-40.0, 40.0, 400_001)
    for label in (-1.0, 1.0):
        slope = loss.dphi(z, np.full_like(z, label)) * label  # h_C'(m) along m = label·z
        m_order = np.argsort(label * z)
        assert np.all(np.diff(slope[m_order]) >= -1e-15)
        assert slope.min() >= -clip and slope.max() <= 0.0
    rng = np.random.default_rng(14)
    X, y = _unit_rows(rng, 200, 3) * rng.uniform(0, 1, size=(200, 1)), _labels(rng, 200)
    for scale in (0.5, 3.0, 20.0):
        for _ in range(40):
            a, b = rng.normal(scale=scale, size=3), rng.normal(scale=scale, size=3)
            fa, fb = loss.smooth_value(a, X, y), loss.smooth_value(b, X, y)
            lower = (
                fa + float(loss.gradient(a, X, y) @ (b - a)) + 0.5 * l2 * float((b - a) @ (b - a))
            )
            assert fb >= lower - 1e-10 * max(1.0, abs(fb))


def test_no_clip_and_clip_one_are_bit_identical_to_the_plain_loss() -> None:
    """C = None and C = 1 are the plain loss bit for bit; the gradient equals the expit-based
    reference formula to 2⁻⁵⁰ (it computes σ through tanh)."""
    rng = np.random.default_rng(15)
    X, y = _unit_rows(rng, 300, 6) * rng.uniform(0, 1, size=(300, 1)), _labels(rng, 300)
    for l2 in (0.0, 0.3):
        plain = LogisticLoss(l2=l2)
        for loss in (
            LogisticLoss(l2=l2, gradient_clip=None),
            LogisticLoss(l2=l2, gradient_clip=1.0),
        ):
            assert (loss.lipschitz, loss.smoothness) == (1.0, 0.25)
            for scale in (0.1, 3.0, 1e3):
                w = rng.normal(scale=scale, size=6)
                z = X @ w
                np.testing.assert_allclose(
                    loss.gradient(w, X, y), _plain_gradient(w, X, y, l2), rtol=0, atol=1e-15
                )
                np.testing.assert_array_equal(loss.gradient(w, X, y), plain.gradient(w, X, y))
                assert loss.smooth_value(w, X, y) == _plain_smooth_value(w, X, y, l2)
                assert loss.value(w, X, y) == plain.value(w, X, y)
                np.testing.assert_array_equal(loss.phi(z, y), np.logaddexp(0.0, -y * z))
                np.testing.assert_array_equal(loss.dphi(z, y), -y * expit(-y * z))
                np.testing.assert_array_equal(
                    loss.example_gradients(w, X, y), plain.example_gradients(w, X, y)
                )
                np.testing.assert_array_equal(loss.predict_proba(w, X), plain.predict_proba(w, X))


def test_gradient_clip_validation() -> None:
    for bad in (0.0, -0.5, 1.0 + 1e-12, 2.0, math.nan, math.inf, -math.inf):
        with pytest.raises(ValidationError):
            LogisticRegressionSpec(type="logistic_regression", gradient_clip=bad)
        with pytest.raises(ValidationError):
            parse_model_spec({"type": "logistic_regression", "gradient_clip": bad})
        with pytest.raises(ValueError):
            LogisticLoss(gradient_clip=bad)
    for good in (None, 1e-6, 0.5, 1.0):
        spec = LogisticRegressionSpec(type="logistic_regression", gradient_clip=good)
        assert spec.gradient_clip == good
    assert LogisticRegressionSpec(type="logistic_regression").gradient_clip is None
    prop = LogisticRegressionSpec.model_json_schema()["properties"]["gradient_clip"]
    assert prop.get("description") and prop["default"] is None


def test_gradient_clip_round_trips_through_the_registry() -> None:
    payload = {"type": "logistic_regression", "l2": 1e-4, "gradient_clip": 0.5}
    spec = parse_model_spec(payload)
    assert isinstance(spec, LogisticRegressionSpec) and spec.gradient_clip == 0.5
    assert parse_model_spec(spec.model_dump(mode="json")) == spec
    loss = build_loss(spec)
    assert isinstance(loss, LogisticLoss)
    assert (loss.lipschitz, loss.smoothness, loss.l2, loss.gradient_clip) == (0.5, 0.25, 1e-4, 0.5)
    small = build_loss(parse_model_spec({**payload, "gradient_clip": 0.2}))
    assert small.lipschitz == 0.2 and small.smoothness == pytest.approx(0.16)
    plain = build_loss(parse_model_spec({"type": "logistic_regression", "l2": 1e-4}))
    assert isinstance(plain, LogisticLoss) and plain.gradient_clip is None
    assert (plain.lipschitz, plain.smoothness) == (1.0, 0.25)


def test_clip_one_half_halves_an_optimizers_sensitivity_and_noise() -> None:
    """The optimizers only see L: dp_gd's per-step Δ = 2L/n and its noise halve at C = 1/2."""
    from service.optimizers.dp_gd import DPGD, DPGDParams
    from service.optimizers.kits.base import PrivacyTarget

    params = DPGDParams.model_validate({"iterations": 50})
    target = PrivacyTarget(1.0, 1e-5)
    plain = DPGD().plan(params, LogisticLoss(l2=0.01), 1000, 4, target)
    half = DPGD().plan(params, LogisticLoss(l2=0.01, gradient_clip=0.5), 1000, 4, target)
    assert plain.sensitivity == pytest.approx(2 / 1000)
    assert half.sensitivity == pytest.approx(plain.sensitivity / 2, rel=1e-12)
    assert half.noise_scale == pytest.approx(plain.noise_scale / 2, rel=1e-9)
