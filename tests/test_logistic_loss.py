"""The logistic loss and its constants L = 1, β = 1/4, μ = l2 (DESIGN §3)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from pydantic import ValidationError
from scipy.special import expit

from service.models.base import Loss
from service.models.logistic import LogisticLoss, LogisticRegressionSpec
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
