"""The model catalog: every loss's derived constants (L, β, convexity), gradients, the L1 prox,
labels and predictions, and the registry round trip
(docs/adding-an-optimizer.md#losses-and-their-constants).

The constants are checked three ways: (1) the declared values equal the closed forms derived in
each module's docstring (restated here independently); (2) random probes over rows with
‖x‖₂ ≤ 1 (and for regression labels in [−B, B]) and arbitrary w never exceed them; (3) a fine
1-D scan of the scalar loss φ(z, y) (the worst case of a linear-model loss is a unit-norm row
with w ∥ x) comes within 0.1% of them, so they are not loose either.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest
from pydantic import BaseModel, ValidationError
from scipy.special import expit

from service.models import registry
from service.models.base import FloatArray, LinearModelLoss, Loss, soft_threshold
from service.models.cauchy_regression import CauchyRegressionLoss, CauchyRegressionSpec
from service.models.huber_regression import HuberRegressionLoss, HuberRegressionSpec
from service.models.huber_svm import HuberSVMLoss, HuberSVMSpec
from service.models.logistic import LogisticLoss, LogisticRegressionSpec
from service.models.registry import build_loss, model_names, parse_model_spec
from service.models.sigmoid import SigmoidClassifierSpec, SigmoidLoss


@dataclass(frozen=True)
class Case:
    id: str
    make: Callable[..., LinearModelLoss]  # make(l2=…, l1=…)
    lipschitz: float  # the closed form derived in the module docstring
    smoothness: float
    convex: bool
    label_bound: float | None = None  # None: classification, y ∈ {−1, +1}


CASES = [
    Case("logistic", LogisticLoss, 1.0, 0.25, True),
    # clipped-slope logistic: L = C, β = c(1 − c) with c = min(C, 1/2)
    Case("logistic_clip0.5", lambda **kw: LogisticLoss(gradient_clip=0.5, **kw), 0.5, 0.25, True),
    Case("logistic_clip0.2", lambda **kw: LogisticLoss(gradient_clip=0.2, **kw), 0.2, 0.16, True),
    Case("huber_svm_h0.5", lambda **kw: HuberSVMLoss(width=0.5, **kw), 1.0, 1.0, True),
    Case("huber_svm_h0.1", lambda **kw: HuberSVMLoss(width=0.1, **kw), 1.0, 5.0, True),
    Case("huber_svm_h2", lambda **kw: HuberSVMLoss(width=2.0, **kw), 1.0, 0.25, True),
    Case(
        "huber_regression_d1",
        lambda **kw: HuberRegressionLoss(delta=1.0, label_bound=5.0, **kw),
        1.0,
        1.0,
        True,
        5.0,
    ),
    Case(
        "huber_regression_d0.3",
        lambda **kw: HuberRegressionLoss(delta=0.3, label_bound=2.0, **kw),
        0.3,
        1.0,
        True,
        2.0,
    ),
    Case("sigmoid", SigmoidLoss, 0.25, 1.0 / (6.0 * math.sqrt(3.0)), False),
    Case(
        "cauchy_c1",
        lambda **kw: CauchyRegressionLoss(scale=1.0, label_bound=3.0, **kw),
        0.5,
        1.0,
        False,
        3.0,
    ),
    Case(
        "cauchy_c2.5",
        lambda **kw: CauchyRegressionLoss(scale=2.5, label_bound=1.0, **kw),
        1.25,
        1.0,
        False,
        1.0,
    ),
]
IDS = [c.id for c in CASES]

#: one valid payload per registered model type (required fields only, or close to it)
EXAMPLES: dict[str, dict[str, object]] = {
    "logistic_regression": {"type": "logistic_regression"},
    "huber_svm": {"type": "huber_svm", "huber_width": 0.25, "l1": 0.01},
    "huber_regression": {"type": "huber_regression", "label_bound": 10.0, "huber_delta": 2.0},
    "sigmoid_classifier": {"type": "sigmoid_classifier", "l2": 0.5, "fit_intercept": False},
    "cauchy_regression": {"type": "cauchy_regression", "label_bound": 1.0, "cauchy_scale": 0.5},
    "multinomial_logistic_regression": {
        "type": "multinomial_logistic_regression",
        "gradient_clip": 0.5,
    },
}


def _unit_rows(rng: np.random.Generator, n: int, d: int, shrink: bool = False) -> FloatArray:
    x = rng.normal(size=(n, d))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    if shrink:
        x *= rng.uniform(0.0, 1.0, size=(n, 1))
    return x


def _labels(rng: np.random.Generator, case: Case, n: int) -> FloatArray:
    if case.label_bound is None:
        return rng.choice([-1.0, 1.0], size=n)
    b = case.label_bound
    y = rng.uniform(-b, b, size=n)
    y[: n // 10] = rng.choice([-b, b], size=n // 10)  # the bound itself is admissible
    return y


def _label_grid(case: Case) -> FloatArray:
    if case.label_bound is None:
        return np.array([-1.0, 1.0])
    return np.linspace(-case.label_bound, case.label_bound, 9)


# --- declared constants -----------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_declared_constants_and_protocol(case: Case) -> None:
    loss: Loss = case.make(l2=0.3, l1=0.2)
    assert loss.lipschitz == pytest.approx(case.lipschitz, rel=1e-15)
    assert loss.smoothness == pytest.approx(case.smoothness, rel=1e-15)
    assert loss.convex is case.convex
    assert (loss.l2, loss.l1) == (0.3, 0.2)
    assert loss.task == ("classification" if case.label_bound is None else "regression")
    if loss.task == "classification":
        assert callable(getattr(loss, "predict_proba", None))
    else:
        assert loss.label_bound == case.label_bound  # type: ignore[attr-defined]
    for bad in ({"l2": -1.0}, {"l1": -1e-9}, {"l1": math.inf}, {"l2": math.nan}):
        with pytest.raises(ValueError):
            case.make(**bad)


def test_family_parameters_are_validated() -> None:
    for make in (
        lambda: HuberSVMLoss(width=0.0),
        lambda: HuberSVMLoss(width=math.inf),
        lambda: HuberRegressionLoss(delta=-1.0),
        lambda: HuberRegressionLoss(label_bound=0.0),
        lambda: CauchyRegressionLoss(scale=0.0),
        lambda: CauchyRegressionLoss(label_bound=math.nan),
    ):
        with pytest.raises(ValueError):
            make()


# --- values and gradients ---------------------------------------------------------------------


def _reference_phi(loss: LinearModelLoss, z: FloatArray, y: FloatArray) -> FloatArray:
    """The per-row loss written straight from each definition (no shared code)."""
    if isinstance(loss, LogisticLoss):
        if loss.gradient_clip is None:
            return np.log1p(np.exp(-y * z))
        # the logistic loss for m ≥ m_C = log((1 − C)/C), its tangent line at m_C below
        c, m = loss.gradient_clip, y * z
        m_c = math.log((1 - c) / c)
        return np.where(m >= m_c, np.log1p(np.exp(-m)), math.log1p(math.exp(-m_c)) - c * (m - m_c))
    if isinstance(loss, HuberSVMLoss):
        h, m = loss.width, y * z
        out = np.empty_like(m)
        for i, mi in enumerate(m):
            if mi > 1 + h:
                out[i] = 0.0
            elif abs(1 - mi) <= h:
                out[i] = (1 + h - mi) ** 2 / (4 * h)
            else:
                out[i] = 1 - mi
        return out
    if isinstance(loss, HuberRegressionLoss):
        d, r = loss.delta, z - y
        return np.array([ri**2 / 2 if abs(ri) <= d else d * (abs(ri) - d / 2) for ri in r])
    if isinstance(loss, SigmoidLoss):
        return 1.0 / (1.0 + np.exp(y * z))
    if isinstance(loss, CauchyRegressionLoss):
        c = loss.scale
        return c**2 / 2 * np.log(1 + (z - y) ** 2 / c**2)
    raise AssertionError(type(loss))


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_value_matches_definition(case: Case) -> None:
    rng = np.random.default_rng(0)
    n, d = 60, 4
    X, y = _unit_rows(rng, n, d, shrink=True), _labels(rng, case, n)
    l2, l1 = 0.07, 0.03
    loss = case.make(l2=l2, l1=l1)
    for scale in (0.1, 1.0, 5.0):
        w = rng.normal(scale=scale, size=d)
        data = float(np.mean(_reference_phi(loss, X @ w, y)))
        smooth = data + l2 / 2 * float(w @ w)
        assert loss.smooth_value(w, X, y) == pytest.approx(smooth, rel=1e-12, abs=1e-14)
        assert loss.value(w, X, y) == pytest.approx(
            smooth + l1 * float(np.abs(w).sum()), rel=1e-12, abs=1e-14
        )
    # at w = 0 every loss has a known value
    zero = case.make().value(np.zeros(d), X, y)
    expected = float(np.mean(_reference_phi(loss, np.zeros(n), y)))
    assert zero == pytest.approx(expected, rel=1e-14)


@pytest.mark.parametrize("case", CASES, ids=IDS)
@pytest.mark.parametrize(("l2", "l1"), [(0.0, 0.0), (0.05, 0.0), (0.05, 0.2)])
def test_gradient_matches_finite_differences(case: Case, l2: float, l1: float) -> None:
    """∇F is the gradient of the smooth part (no L1 term), and the mean of the per-row
    gradients plus μw."""
    rng = np.random.default_rng(1)
    n, d = 40, 5
    X, y = _unit_rows(rng, n, d, shrink=True), _labels(rng, case, n)
    loss = case.make(l2=l2, l1=l1)
    h = 1e-6
    for scale in (0.3, 2.0, 10.0):
        w = rng.normal(scale=scale, size=d)
        g = loss.gradient(w, X, y)
        fd = np.array(
            [
                (loss.smooth_value(w + h * e, X, y) - loss.smooth_value(w - h * e, X, y)) / (2 * h)
                for e in np.eye(d)
            ]
        )
        np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-7)
        per_row = loss.example_gradients(w, X, y)
        assert per_row.shape == (n, d)
        np.testing.assert_allclose(per_row.mean(axis=0) + l2 * w, g, rtol=1e-12, atol=1e-14)
        # value − smooth_value is exactly the L1 term
        assert loss.value(w, X, y) - loss.smooth_value(w, X, y) == pytest.approx(
            l1 * np.abs(w).sum(), rel=1e-9, abs=1e-12
        )


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_extreme_weights_stay_finite(case: Case) -> None:
    rng = np.random.default_rng(2)
    X, y = _unit_rows(rng, 20, 3), _labels(rng, case, 20)
    loss = case.make(l2=0.0)
    for scale in (1e3, 1e8, 1e150):
        w = rng.normal(scale=scale, size=3)
        assert math.isfinite(loss.value(w, X, y))
        grads = loss.example_gradients(w, X, y)
        assert np.all(np.isfinite(grads))
        assert np.all(np.linalg.norm(grads, axis=1) <= loss.lipschitz * (1 + 1e-12))


# --- Lipschitz and smoothness: random probes (upper bounds) ------------------------------------


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_lipschitz_random_probes(case: Case) -> None:
    rng = np.random.default_rng(3)
    loss = case.make(l2=0.0)
    worst = 0.0
    for scale in (0.01, 0.3, 1.0, 3.0, 30.0, 1e3):
        n, d = 3000, 4
        X, y = _unit_rows(rng, n, d, shrink=bool(scale > 1)), _labels(rng, case, n)
        w = rng.normal(scale=scale, size=d)
        norms = np.linalg.norm(loss.example_gradients(w, X, y), axis=1)
        assert np.all(norms <= case.lipschitz * (1 + 1e-12))
        worst = max(worst, float(norms.max()))
    assert worst > 0.95 * case.lipschitz  # random rows come close to L


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_smoothness_random_probes(case: Case) -> None:
    rng = np.random.default_rng(4)
    loss = case.make(l2=0.0)
    worst = 0.0
    for scale in (0.01, 0.3, 1.0, 3.0, 30.0):
        n, d = 3000, 3
        X, y = _unit_rows(rng, n, d), _labels(rng, case, n)
        w1 = rng.normal(scale=scale, size=d)
        for step in (1e-3, 0.1, 1.0):
            w2 = w1 + rng.normal(scale=step * max(scale, 0.1), size=d)
            diff = loss.example_gradients(w1, X, y) - loss.example_gradients(w2, X, y)
            ratio = np.linalg.norm(diff, axis=1) / np.linalg.norm(w1 - w2)
            assert np.all(ratio <= case.smoothness * (1 + 1e-9))
            worst = max(worst, float(ratio.max()))
    assert worst > 0.5 * case.smoothness


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_objective_hessian_between_bounds(case: Case) -> None:
    """FD Hessian of F: eigenvalues ≤ β + μ always; ≥ μ for convex losses."""
    rng = np.random.default_rng(5)
    mu = 0.05
    X, y = _unit_rows(rng, 30, 3, shrink=True), _labels(rng, case, 30)
    loss = case.make(l2=mu)
    h = 1e-5
    for scale in (0.1, 1.0, 4.0):
        for _ in range(4):
            w = rng.normal(scale=scale, size=3)
            H = np.array(
                [
                    (loss.gradient(w + h * e, X, y) - loss.gradient(w - h * e, X, y)) / (2 * h)
                    for e in np.eye(3)
                ]
            )
            eig = np.linalg.eigvalsh(0.5 * (H + H.T))
            assert eig.max() <= case.smoothness + mu + 1e-6
            assert np.abs(eig).max() <= case.smoothness + mu + 1e-6
            if case.convex:
                assert eig.min() >= mu - 1e-6


# --- Lipschitz and smoothness: the 1-D worst case is attained ----------------------------------


def _scan(case: Case) -> tuple[float, float, float]:
    """max |φ'|, max slope of φ' and min slope of φ' over a fine grid of z = w·x (unit x, w ∥ x,
    so ‖∇ℓ‖ = |φ'| and the gradient-Lipschitz ratio along x is |Δφ'/Δz|) and admissible y."""
    loss = case.make(l2=0.0)
    z = np.linspace(-40.0, 40.0, 400_001)  # spacing 2e-4
    max_grad, max_slope, min_slope = 0.0, -math.inf, math.inf
    for label in _label_grid(case):
        y = np.full_like(z, label)
        g = loss.dphi(z, y)
        # and through the public API: w = z·x for the unit row x = e1
        sample = np.linspace(0, z.size - 1, 201).astype(int)
        X1 = np.array([[1.0, 0.0]])
        for i in sample[::20]:
            api = loss.example_gradients(np.array([z[i], 0.0]), X1, y[:1])[0, 0]
            assert api == pytest.approx(g[i], rel=1e-12, abs=1e-300)
        slope = np.diff(g) / np.diff(z)
        max_grad = max(max_grad, float(np.abs(g).max()))
        max_slope = max(max_slope, float(np.abs(slope).max()))
        min_slope = min(min_slope, float(slope.min()))
    return max_grad, max_slope, min_slope


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_constants_are_attained(case: Case) -> None:
    max_grad, max_slope, min_slope = _scan(case)
    assert max_grad <= case.lipschitz * (1 + 1e-12)
    assert max_grad >= case.lipschitz * (1 - 1e-3)
    assert max_slope <= case.smoothness * (1 + 1e-9)
    assert max_slope >= case.smoothness * (1 - 1e-3)
    if case.convex:
        assert min_slope >= -1e-12  # φ' non-decreasing: φ convex in z
    else:
        assert min_slope < -0.05 * case.smoothness  # φ'' < 0 somewhere


def test_known_extremal_points() -> None:
    """The maximisers named in the docstrings give exactly L and β."""
    one = np.array([1.0])
    # sigmoid: |φ'| = 1/4 at m = 0, |φ''| = 1/(6√3) at m = ±log(2 + √3)
    s = SigmoidLoss()
    assert abs(s.dphi(np.array([0.0]), one)[0]) == pytest.approx(0.25, rel=1e-15)
    m, h = math.log(2 + math.sqrt(3)), 1e-6
    for sign in (-1.0, 1.0):
        curv = s.dphi(np.array([sign * m + h]), one) - s.dphi(np.array([sign * m - h]), one)
        assert abs(curv[0]) / (2 * h) == pytest.approx(1 / (6 * math.sqrt(3)), rel=1e-8)
    # Cauchy: |ρ'| = c/2 at |r| = c; ρ'' = 1 at r = 0 and −1/8 at r² = 3c²
    c = 2.5
    cl = CauchyRegressionLoss(scale=c, label_bound=1.0)
    zero = np.array([0.0])
    assert cl.dphi(np.array([c]), zero)[0] == pytest.approx(c / 2, rel=1e-15)
    assert cl.dphi(np.array([-c]), zero)[0] == pytest.approx(-c / 2, rel=1e-15)
    for r, curvature in ((0.0, 1.0), (math.sqrt(3) * c, -1 / 8)):
        fd = (cl.dphi(np.array([r + h]), zero) - cl.dphi(np.array([r - h]), zero))[0] / (2 * h)
        assert fd == pytest.approx(curvature, rel=1e-7, abs=1e-9)
    # Huber SVM: slope −1 below the band, 1/(2h) inside, 0 above
    hs = HuberSVMLoss(width=0.25)
    grid = np.array([0.0, 0.75, 0.9, 1.0, 1.1, 1.25, 3.0])
    np.testing.assert_allclose(
        hs.dphi(grid, np.ones(7)), [-1.0, -1.0, -0.7, -0.5, -0.3, 0.0, 0.0], atol=1e-12
    )
    # Huber regression: clip(r, −δ, δ), whatever the label bound
    hr = HuberRegressionLoss(delta=0.3, label_bound=100.0)
    np.testing.assert_allclose(
        hr.dphi(np.array([-100.0, -0.1, 0.0, 0.2, 250.0]), np.zeros(5)),
        [-0.3, -0.1, 0.0, 0.2, 0.3],
    )


# --- convexity probes -------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_convexity_probes(case: Case) -> None:
    """Midpoint convexity of ℓ on random chords; a non-convex loss must violate it somewhere."""
    rng = np.random.default_rng(6)
    loss = case.make(l2=0.0)
    worst = -math.inf  # max over chords of f(mid) − mean(f(ends))
    for scale in (0.5, 2.0, 8.0):
        X, y = _unit_rows(rng, 200, 2), _labels(rng, case, 200)
        for _ in range(40):
            a, b = rng.normal(scale=scale, size=2), rng.normal(scale=scale, size=2)
            ends = 0.5 * (loss.phi(X @ a, y) + loss.phi(X @ b, y))
            gap = loss.phi(X @ (0.5 * (a + b)), y) - ends
            worst = max(worst, float(gap.max()))
    if case.convex:
        assert worst <= 1e-12
    else:
        assert worst > 1e-3


def test_sigmoid_is_not_convex_along_a_chord() -> None:
    """ℓ = σ(−m) is concave for m < 0: one row, the chord from m = −4 to m = −1."""
    loss = SigmoidLoss()
    X, y = np.array([[1.0, 0.0]]), np.array([1.0])
    a, b = np.array([-4.0, 0.0]), np.array([-1.0, 0.0])
    mid = loss.value(0.5 * (a + b), X, y)
    assert mid > 0.5 * (loss.value(a, X, y) + loss.value(b, X, y)) + 0.05
    # and the regularised objective stays non-convex for μ below the worst curvature
    reg = SigmoidLoss(l2=0.05)
    assert reg.value(0.5 * (a + b), X, y) > 0.5 * (reg.value(a, X, y) + reg.value(b, X, y))


# --- the L1 prox ------------------------------------------------------------------------------


def test_soft_threshold() -> None:
    w = np.array([-3.0, -0.5, 0.0, 0.2, 0.5, 2.0])
    np.testing.assert_array_equal(soft_threshold(w, 0.5), [-2.5, 0.0, 0.0, 0.0, 0.0, 1.5])
    np.testing.assert_array_equal(soft_threshold(w, 0.0), w)
    np.testing.assert_array_equal(soft_threshold(w, 10.0), np.zeros(6))
    for bad in (-1.0, math.nan, math.inf):
        with pytest.raises(ValueError):
            soft_threshold(w, bad)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_prox_is_soft_thresholding_and_optimal(case: Case) -> None:
    rng = np.random.default_rng(7)
    w = rng.normal(scale=2.0, size=50)
    # l1 = 0: identity (a copy, so an optimizer may update it in place)
    plain = case.make(l2=0.1)
    out = plain.prox(w, 3.0)
    np.testing.assert_array_equal(out, w)
    assert out is not w
    loss = case.make(l2=0.1, l1=0.4)
    for step in (0.0, 0.01, 0.5, 2.0, 100.0):
        u = loss.prox(w, step)
        t = step * loss.l1
        np.testing.assert_allclose(u, np.sign(w) * np.maximum(np.abs(w) - t, 0.0), atol=0)
        # optimality: 0 ∈ (u − w) + t ∂‖u‖₁
        nz = u != 0
        np.testing.assert_allclose((w - u)[nz], t * np.sign(u[nz]), rtol=1e-12, atol=1e-15)
        assert np.all(np.abs(w[~nz]) <= t * (1 + 1e-12))

        # and u minimises l1‖v‖₁ + ‖v − w‖²/(2·step) against random perturbations
        def objective(v: FloatArray, step: float = step) -> float:
            return loss.l1 * float(np.abs(v).sum()) + float((v - w) @ (v - w)) / (2 * step)

        if step > 0:
            best = objective(u)
            for _ in range(50):
                assert objective(u + rng.normal(scale=0.05, size=50)) >= best - 1e-12
    with pytest.raises(ValueError):
        loss.prox(w, -1.0)


# --- labels and predictions -------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_label_checks(case: Case) -> None:
    loss = case.make()
    rng = np.random.default_rng(8)
    loss.check_labels(_labels(rng, case, 100))
    if case.label_bound is None:
        bad_sets = [np.array([1.0, 0.0]), np.array([0.5]), np.array([-1.0, 2.0])]
    else:
        b = case.label_bound
        loss.check_labels(np.array([-b, b, 0.0]))
        bad_sets = [np.array([0.0, b * 1.001]), np.array([math.nan]), np.array([-math.inf])]
    for bad in bad_sets:
        with pytest.raises(ValueError) as info:
            loss.check_labels(bad)
        assert "1.001" not in str(info.value) and "nan" not in str(info.value).lower()


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_predictions(case: Case) -> None:
    rng = np.random.default_rng(9)
    X = _unit_rows(rng, 200, 3)
    w = rng.normal(scale=3.0, size=3)
    loss = case.make()
    z = X @ w
    pred = loss.predict(w, X)
    if case.label_bound is not None:
        np.testing.assert_allclose(pred, z)
        return
    np.testing.assert_array_equal(pred, np.where(z >= 0, 1.0, -1.0))
    proba = loss.predict_proba(w, X)  # type: ignore[attr-defined]
    assert np.all((proba >= 0) & (proba <= 1))
    np.testing.assert_array_equal(proba >= 0.5, z >= 0)
    order = np.argsort(z)
    assert np.all(np.diff(proba[order]) >= 0)  # monotone in the margin


def test_predict_proba_formulas() -> None:
    X = np.array([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]])
    w = np.array([3.0, -0.5])
    z = X @ w
    np.testing.assert_allclose(LogisticLoss().predict_proba(w, X), expit(z))
    np.testing.assert_allclose(SigmoidLoss().predict_proba(w, X), expit(z))
    np.testing.assert_allclose(HuberSVMLoss().predict_proba(w, X), np.clip((1 + z) / 2, 0, 1))


# --- specs and the registry -------------------------------------------------------------------


def test_every_registered_model_has_an_example() -> None:
    names = model_names()
    assert len(names) == len(set(names))  # discriminator values are unique
    assert set(names) == set(EXAMPLES)
    assert {
        "logistic_regression",
        "huber_svm",
        "huber_regression",
        "sigmoid_classifier",
    } <= set(names)


@pytest.mark.parametrize("type_", sorted(EXAMPLES))
def test_spec_round_trip(type_: str) -> None:
    payload = EXAMPLES[type_]
    spec = parse_model_spec(payload)
    assert spec.type == type_  # type: ignore[attr-defined]
    # JSON round trip gives the same spec
    again = parse_model_spec(spec.model_dump(mode="json"))
    assert again == spec and type(again) is type(spec)
    loss = build_loss(spec)
    assert loss.name == type_
    assert loss.l2 == spec.l2 and loss.l1 == spec.l1  # type: ignore[attr-defined]
    assert loss.task in ("classification", "regression")
    assert math.isfinite(loss.lipschitz) and loss.lipschitz > 0
    assert math.isfinite(loss.smoothness) and loss.smoothness > 0
    assert isinstance(spec.fit_intercept, bool)  # type: ignore[attr-defined]
    if loss.task == "regression":
        assert loss.label_bound == spec.label_bound  # type: ignore[attr-defined]
    # every field is documented, unknown fields are rejected, l1 is validated
    schema = type(spec).model_json_schema()
    assert schema["additionalProperties"] is False
    for name, prop in schema["properties"].items():
        assert prop.get("description"), name
    assert {"l2", "l1", "fit_intercept"} <= set(schema["properties"])
    for bad in ({"l1": -0.1}, {"l1": math.inf}, {"l2": -1.0}, {"unknown": 1}):
        with pytest.raises(ValidationError):
            parse_model_spec({**payload, **bad})


def test_spec_defaults_and_family_parameters() -> None:
    svm = parse_model_spec({"type": "huber_svm"})
    assert isinstance(svm, HuberSVMSpec)
    assert (svm.l2, svm.l1, svm.fit_intercept, svm.huber_width) == (1e-4, 0.0, True, 0.5)
    svm_loss = build_loss(parse_model_spec({"type": "huber_svm", "huber_width": 0.2}))
    assert svm_loss.smoothness == pytest.approx(2.5) and svm_loss.lipschitz == 1.0

    reg = parse_model_spec({"type": "huber_regression", "label_bound": 4.0})
    assert isinstance(reg, HuberRegressionSpec) and reg.huber_delta == 1.0
    reg_loss = build_loss(
        parse_model_spec({"type": "huber_regression", "label_bound": 4.0, "huber_delta": 0.7})
    )
    assert (reg_loss.lipschitz, reg_loss.smoothness) == (0.7, 1.0)  # L = δ, whatever B

    sig = parse_model_spec({"type": "sigmoid_classifier"})
    assert isinstance(sig, SigmoidClassifierSpec) and build_loss(sig).convex is False

    cauchy = parse_model_spec({"type": "cauchy_regression", "label_bound": 2.0})
    assert isinstance(cauchy, CauchyRegressionSpec) and cauchy.cauchy_scale == 1.0
    assert build_loss(cauchy).lipschitz == 0.5

    assert isinstance(parse_model_spec({"type": "logistic_regression"}), LogisticRegressionSpec)

    for bad in (
        {"type": "huber_svm", "huber_width": 0.0},
        {"type": "huber_regression"},  # the label bound must be declared
        {"type": "huber_regression", "label_bound": 0.0},
        {"type": "huber_regression", "label_bound": math.inf},
        {"type": "huber_regression", "label_bound": 1.0, "huber_delta": -1.0},
        {"type": "cauchy_regression", "label_bound": 1.0, "cauchy_scale": 0.0},
        {"type": "svm"},
    ):
        with pytest.raises(ValidationError):
            parse_model_spec(bad)


def test_each_module_binds_spec_and_build() -> None:
    """The registry found every spec class and each builds the loss its ``type`` names."""
    builders = registry._BUILDERS
    for spec_cls in builders:
        assert issubclass(spec_cls, BaseModel)
    assert {cls.__name__ for cls in builders} == {
        "CauchyRegressionSpec",
        "HuberRegressionSpec",
        "HuberSVMSpec",
        "LogisticRegressionSpec",
        "MultinomialLogisticSpec",
        "SigmoidClassifierSpec",
    }
