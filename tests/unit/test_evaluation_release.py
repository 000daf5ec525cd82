"""The private evaluation's released values (service/privacy/evaluation.py): post-processed into
the feasible set, the simplex projection exact, the plan's stated stds those of the noise, the
noise-off release the exact metrics, and the public warning on a useless mean loss."""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from service.domain.evaluation import price_evaluation
from service.privacy.evaluation import (
    MAX_CONFUSION_CLASSES,
    EvaluationKind,
    EvaluationPlan,
    confusion_warnings,
    feasible_metrics,
    loss_clip_bound,
    metric_stds,
    metric_sums,
    metric_warnings,
    noised_sums,
    plan_evaluation,
    project_to_simplex,
    release_metrics,
    unconstrained_metrics,
)
from service.schemas import EvaluationCreate

CELLS = ("true_positive", "false_negative", "false_positive", "true_negative")


def random_sums(rng: np.random.Generator, plan: EvaluationPlan) -> np.ndarray:
    """A noiseless vector u some dataset of n rows could have (counts summing to n; a loss sum
    in [0, n] in units of B), often at an edge (empty cells, zero or maximal loss)."""
    n = plan.n
    k = {"binary": 4, "categorical": 2, "regression": 0}[plan.kind]
    cells = rng.multinomial(n, rng.dirichlet(np.full(k, 0.3))) if k else np.zeros(0)
    loss = float(rng.choice([0.0, float(n), rng.uniform(0, n)]))
    if plan.kind == "categorical":
        return cells.astype(float)
    return np.append(cells.astype(float), loss)


def assert_feasible(plan: EvaluationPlan, metrics: dict[str, Any]) -> None:
    n, clip = plan.n, plan.loss_clip
    if plan.kind != "regression":
        assert 0.0 <= metrics["accuracy"] <= 1.0
    if plan.kind == "binary":
        cells = [metrics["confusion_matrix"][c] for c in CELLS]
        assert min(cells) >= 0.0 and max(cells) <= n
        assert sum(cells) == pytest.approx(n, abs=1e-9 * n)
        assert metrics["accuracy"] == pytest.approx((cells[0] + cells[3]) / n, abs=1e-12)
        assert 0.0 <= metrics["log_loss"] <= clip  # type: ignore[operator]
    if plan.kind == "regression":
        assert 0.0 <= metrics["mean_squared_error"] <= clip  # type: ignore[operator]


@pytest.mark.parametrize("kind", ["binary", "categorical", "regression"])
@pytest.mark.parametrize("n", [2, 3, 143, 5000])
@pytest.mark.parametrize("epsilon", [0.01, 0.3, 10.0])
def test_released_values_always_lie_in_the_feasible_set(
    kind: EvaluationKind, n: int, epsilon: float
) -> None:
    """Over many draws, tiny n and tiny ε included (σ ≫ n): counts in [0, n] summing to n,
    accuracy in [0, 1] and equal to (TP + TN)/n, mean losses in [0, B]. The unconstrained
    estimates leave that set in these same draws (so the test exercises the post-processing)."""
    clip = None if kind == "categorical" else 486_275.0
    plan = plan_evaluation(kind, n, epsilon, 1e-6, clip)
    rng = np.random.default_rng([n, int(epsilon * 100), len(kind)])
    left = 0
    for _ in range(400):
        noised = noised_sums(plan, random_sums(rng, plan), rng)
        assert_feasible(plan, feasible_metrics(plan, noised))
        raw = unconstrained_metrics(plan, noised)
        values = [raw.get("accuracy", 0.5), raw.get("mean_squared_error", 1.0)]
        if kind == "binary":
            values += [raw["log_loss"], *(v / n for v in raw["confusion_matrix"].values())]  # type: ignore[union-attr]
        left += any(not 0.0 <= v <= (clip or 1.0) for v in values)
    if epsilon < 1.0 or n < 10:
        assert left > 0


def test_projection_is_the_least_squares_feasible_point() -> None:
    """project_to_simplex: exactly the hyperplane projection when that is non-negative; always
    on the scaled simplex; and no feasible point is closer (checked against random feasible
    points and the KKT conditions: cells > 0 share one shift τ, cells at 0 had v ≤ τ)."""
    rng = np.random.default_rng(11)
    for _ in range(2000):
        k = int(rng.choice([2, 4]))
        total = float(rng.choice([2.0, 143.0, 1e4]))
        v = rng.normal(total / k, rng.choice([0.1, 1.0, 10.0]) * total, k)
        p = project_to_simplex(v, total)
        assert p.min() >= 0.0 and p.sum() == pytest.approx(total, rel=1e-12)
        shifted = v - (float(v.sum()) - total) / k
        if shifted.min() >= 0.0:
            assert np.array_equal(p, shifted)  # exact: the raw value when already feasible
        positive = p > 0
        tau = float(np.mean((v - p)[positive]))
        assert np.allclose((v - p)[positive], tau, atol=1e-9 * total)
        assert np.all(v[~positive] <= tau + 1e-9 * total)
        others = rng.dirichlet(np.ones(k), 50) * total
        assert np.all(np.linalg.norm(others - v, axis=1) >= np.linalg.norm(p - v) - 1e-9)
    # a feasible vector (integers summing to n) is returned unchanged, bit for bit
    cells = np.array([100.0, 0.0, 3.0, 40.0])
    assert np.array_equal(project_to_simplex(cells, 143.0), cells)
    # cells summing to n, two negative: those become 0, the rest shift by one common τ
    projected = project_to_simplex(np.array([60.0, -2.02, -0.38, 85.4]), 143.0)
    assert projected.tolist() == pytest.approx([58.8, 0.0, 0.0, 84.2])  # τ = 1.2


def test_feasible_release_equals_the_unconstrained_one_inside_the_feasible_set() -> None:
    """Far from the edges (σ small against every cell and loss) the post-processing changes
    nothing: the released values are the unbiased estimates."""
    plan = plan_evaluation("binary", 1000, 50.0, 1e-6, 5.0)
    sums = np.array([400.0, 100.0, 100.0, 400.0, 120.0])
    rng = np.random.default_rng(5)
    for _ in range(200):
        noised = noised_sums(plan, sums, rng)
        assert feasible_metrics(plan, noised) == unconstrained_metrics(plan, noised)


@pytest.mark.parametrize(
    ("kind", "n", "epsilon", "clip"),
    [
        ("binary", 143, 1.0, 5.0),
        ("binary", 4000, 0.2, 2.0),
        ("categorical", 500, 0.5, None),
        ("regression", 143, 1.0, 486_275.0),
    ],
)
def test_stated_stds_match_the_noise(
    kind: EvaluationKind, n: int, epsilon: float, clip: float | None
) -> None:
    """Empirical std of the unconstrained release over 6000 draws against metric_stds: a 7 %
    tolerance (the estimate's own relative error is ≈ 1/√(2·6000) ≈ 0.9 %), so a formula off
    by √2 either way (41 % or 29 %) fails. Also the closed forms: σ/n, σ/(√2 n), σ√3/2, B σ/n."""
    plan = plan_evaluation(kind, n, epsilon, 1e-6, clip)
    sums = {
        "binary": np.array([n * 0.4, n * 0.1, n * 0.1, n * 0.4, n * 0.3]),
        "categorical": np.array([n * 0.7, n * 0.3]),
        "regression": np.array([n * 0.01]),
    }[kind]
    rng = np.random.default_rng(int(n / epsilon))
    draws = [unconstrained_metrics(plan, noised_sums(plan, sums, rng)) for _ in range(6000)]
    stated = metric_stds(plan)
    sigma = plan.noise_scale
    observed: dict[str, float] = {}
    for name in ("accuracy", "log_loss", "mean_squared_error"):
        if name in draws[0]:
            observed[f"{name}_std"] = float(np.std([d[name] for d in draws]))
    if kind == "binary":
        cells = np.array([[d["confusion_matrix"][c] for c in CELLS] for d in draws])  # type: ignore[index]
        for j in range(4):
            assert cells[:, j].std() == pytest.approx(stated["confusion_matrix_std"], rel=0.07)
        observed["confusion_matrix_std"] = float(cells[:, 0].std())
    assert set(stated) == set(observed)
    for name, value in observed.items():
        assert value == pytest.approx(stated[name], rel=0.07), name
    if kind == "binary":
        assert stated["accuracy_std"] == pytest.approx(sigma / n)
        assert stated["confusion_matrix_std"] == pytest.approx(sigma * math.sqrt(3) / 2)
        assert stated["log_loss_std"] == pytest.approx(clip * sigma / n)  # type: ignore[operator]
    elif kind == "categorical":
        assert stated["accuracy_std"] == pytest.approx(sigma / (math.sqrt(2) * n))
    else:
        assert stated["mean_squared_error_std"] == pytest.approx(clip * sigma / n)  # type: ignore[operator]
        # the clamped release never errs more than the unconstrained one: its RMSE ≤ the std
        exact = clip * sums[0] / n  # type: ignore[operator]
        clamped = [feasible_metrics(plan, noised_sums(plan, sums, rng)) for _ in range(6000)]
        rmse = math.sqrt(np.mean([(m["mean_squared_error"] - exact) ** 2 for m in clamped]))  # type: ignore[operator]
        assert rmse < 0.8 * stated["mean_squared_error_std"]  # here the clamp at 0 binds often


@pytest.mark.parametrize("kind", ["binary", "categorical", "regression"])
def test_noise_off_release_is_the_exact_metrics(kind: EvaluationKind) -> None:
    """With the noise off, the released values are the exact metrics computed independently
    from the rows (confusion cells, accuracy, mean clipped log-loss / squared error)."""
    rng = np.random.default_rng(2)
    n = 97
    if kind == "categorical":
        y = rng.integers(0, 3, n).astype(float)
        scores = np.where(rng.random(n) < 0.6, y, rng.integers(0, 3, n)).astype(float)
        plan = plan_evaluation(kind, n, 1.0, 1e-6, None)
        got = release_metrics(plan, metric_sums(plan, scores, y), None)
        assert got == {"accuracy": pytest.approx(float(np.mean(scores == y)))}
        return
    scores = rng.normal(0.0, 2.0, n)
    if kind == "binary":
        y = np.where(rng.random(n) < 0.4, 1.0, -1.0)
        clip = loss_clip_bound(kind, 2.0 * 4, None)
        plan = plan_evaluation(kind, n, 1.0, 1e-6, clip)
        got = release_metrics(plan, metric_sums(plan, scores, y), None)
        pred = scores >= 0
        assert got["confusion_matrix"] == {
            "true_positive": float(np.sum(pred & (y > 0))),
            "false_negative": float(np.sum(~pred & (y > 0))),
            "false_positive": float(np.sum(pred & (y < 0))),
            "true_negative": float(np.sum(~pred & (y < 0))),
        }
        assert got["accuracy"] == pytest.approx(float(np.mean(np.where(pred, 1, -1) == y)))
        expected = float(np.mean(np.minimum(np.log1p(np.exp(-y * scores)), clip)))
        assert got["log_loss"] == pytest.approx(expected)
        return
    y = rng.uniform(-3.0, 3.0, n)
    plan = plan_evaluation(kind, n, 1.0, 1e-6, 4.0)  # clips some rows: the mean of min(e², B)
    got = release_metrics(plan, metric_sums(plan, scores, y), None)
    expected = float(np.mean(np.minimum((scores - y) ** 2, 4.0)))
    assert got == {"mean_squared_error": pytest.approx(expected)}
    assert 0 < expected < 4.0


def test_warning_when_a_mean_loss_std_spans_its_useful_range() -> None:
    """Regression with the default clip (B = (‖w‖ + b)²), n = 143, ε = 1: the std is far above
    b²/4 — warned, naming loss_clip; a small declared clip or a large ε clears it; against b²
    the threshold is b²/100 (a declared bound is rarely filled), against a declared clip B/4.
    Binary: against log 2. Categorical: never."""
    n, b, norm = 143, 50.0, 647.0
    default = loss_clip_bound("regression", norm, b)
    plan = plan_evaluation("regression", n, 1.0, 1e-6, default)
    std = metric_stds(plan)["mean_squared_error_std"]
    assert std >= b**2 / 4
    (warning,) = metric_warnings(plan, b, 1.0)
    assert "loss_clip" in warning and "mean_squared_error_std" in warning
    assert f"{std:.4g}" in warning and f"{b**2:.4g}" in warning
    # just below / above the threshold b²/100 (clip above b²), then B/4 (clip below b²):
    # choose σ through the clip
    large_n = 2000  # so that the clip giving std = b²/100 lies above b²
    for factor, warned in [(0.99, False), (1.01, True)]:
        clip = factor * (b**2 / 100) * large_n / plan.noise_scale
        assert clip > b**2
        p = plan_evaluation("regression", large_n, 1.0, 1e-6, clip)
        assert bool(metric_warnings(p, b, 1.0)) is warned
        if warned:
            assert "1 % of" in metric_warnings(p, b, 1.0)[0]
    # a declared clip below b²: std = B·σ/n ≥ B/4 exactly when σ/n ≥ 1/4
    quiet = plan_evaluation("regression", n, 1.0, 1e-6, 20.0)
    assert quiet.noise_scale / n < 0.25 and metric_warnings(quiet, b, 1.0) == []
    loud = plan_evaluation("regression", n, 0.01, 1e-6, 20.0)
    assert loud.noise_scale / n >= 0.25
    assert "a quarter of 20" in metric_warnings(loud, b, 0.01)[0]
    assert metric_warnings(plan_evaluation("regression", n, 1.0, 1e-6, 20.0), b, 1.0) == []
    assert metric_warnings(plan_evaluation("regression", 10**6, 50.0, 1e-6, default), b, 50.0) == []
    # no label bound known: the range is [0, B] itself
    assert metric_warnings(plan_evaluation("regression", n, 0.01, 1e-6, 1.0), None, 0.01)
    binary = plan_evaluation("binary", n, 0.5, 1e-6, loss_clip_bound("binary", 8.0, None))
    (warning,) = metric_warnings(binary, None, 0.5)
    assert "log_loss_std" in warning and "loss_clip" in warning
    assert metric_warnings(plan_evaluation("binary", 4000, 100.0, 1e-6, 8.0), None, 100.0) == []
    assert metric_warnings(plan_evaluation("categorical", 3, 0.01, 1e-6, None), None, 0.01) == []


def regression_pair(n: int, b: float, coefficients: list[float]) -> tuple[Any, Any]:
    features = [{"name": "x", "type": "numeric", "min": 0, "max": 1}]
    label = {"column": "y", "type": "numeric"}
    dataset = SimpleNamespace(
        id="ds_1",
        retired_at=None,
        features=features,
        label=label,
        delta=1e-5,
        n_rows=n,
        execution="workers",
    )
    model = SimpleNamespace(
        id="mdl_1",
        encoder={"features": features},
        label=label,
        model_spec={"type": "huber_regression", "l2": 0.01, "label_bound": b},
        coefficients=coefficients,
        intercept=None,
    )
    return dataset, model


def test_the_plan_states_every_std_and_the_warning() -> None:
    """price_evaluation (what the estimate and the evaluation show before any charge): the
    regression plan states mean_squared_error_std = B σ/n and, with the default clip on 143
    rows, a warning suggesting loss_clip; a declared small clip has none."""
    dataset, model = regression_pair(143, 50.0, [600.0, 47.0])
    body = EvaluationCreate.model_validate(
        {"dataset_id": "ds_1", "privacy": {"epsilon": 1.0, "delta": 1e-6}}
    )
    priced = price_evaluation(dataset, model, body)  # type: ignore[arg-type]
    hyper = priced.plan_json["hyperparameters"]
    clip = hyper["loss_clip"]
    assert clip == pytest.approx((math.hypot(600.0, 47.0) + 50.0) ** 2)
    assert hyper["mean_squared_error_std"] == pytest.approx(clip * priced.plan.noise_scale / 143)
    assert "accuracy_std" not in hyper
    (warning,) = priced.plan_json["warnings"]
    assert "loss_clip" in warning
    small = EvaluationCreate.model_validate({**body.model_dump(), "loss_clip": 25.0})
    quiet = price_evaluation(dataset, model, small)  # type: ignore[arg-type]
    assert quiet.plan_json["warnings"] == []
    assert quiet.plan_json["hyperparameters"]["mean_squared_error_std"] == pytest.approx(
        25.0 * quiet.plan.noise_scale / 143
    )


def categorical_pair(n: int, classes: int) -> tuple[Any, Any]:
    """A categorical dataset of ``classes`` declared classes and a joint model of them."""
    features = [{"name": "x", "type": "numeric", "min": 0, "max": 1}]
    label = {"column": "y", "type": "categorical", "classes": [f"c{k}" for k in range(classes)]}
    dataset = SimpleNamespace(
        id="ds_1", retired_at=None, features=features, label=label, delta=1e-5, n_rows=n,
        execution="workers",
    )  # fmt: skip
    model = SimpleNamespace(
        id="mdl_1",
        encoder={"features": features},
        label=label,
        model_spec={"type": "multinomial_logistic_regression", "l2": 0.01},
        coefficients=np.zeros((classes, 1)).tolist(),
        intercept=np.zeros(classes).tolist(),
    )
    return dataset, model


def test_many_classes_release_accuracy_alone_and_the_plan_says_so() -> None:
    """Up to MAX_CONFUSION_CLASSES declared classes the plan releases the (K + 1)·K matrix
    (Δ = 2, one std per cell); one class more, the (correct, wrong) pair alone (Δ = √2, no
    matrix, its accuracy std z/n) with a public warning naming K — decided from K before any
    row is read, so a label of 10,000 classes never draws 10⁸ cells."""
    body = EvaluationCreate.model_validate(
        {"dataset_id": "ds_1", "privacy": {"epsilon": 1.0, "delta": 1e-6}}
    )
    at_cap = price_evaluation(*categorical_pair(500, MAX_CONFUSION_CLASSES), body)
    assert at_cap.plan.kind == "multiclass" and at_cap.plan.sensitivity == 2.0
    assert "confusion_matrix_std" in at_cap.plan_json["hyperparameters"]
    assert at_cap.plan_json["warnings"] == []
    above = price_evaluation(*categorical_pair(500, MAX_CONFUSION_CLASSES + 1), body)
    assert above.plan.kind == "categorical"
    assert above.plan.sensitivity == pytest.approx(math.sqrt(2.0))
    hyper = above.plan_json["hyperparameters"]
    assert hyper["metrics"] == "categorical" and "confusion_matrix_std" not in hyper
    assert hyper["accuracy_std"] == pytest.approx(above.plan.noise_multiplier / 500)
    (warning,) = above.plan_json["warnings"]
    assert f"{MAX_CONFUSION_CLASSES + 1} classes" in warning and "accuracy alone" in warning
    assert confusion_warnings(MAX_CONFUSION_CLASSES) == []
    # what the worker releases for that plan: two noised counts, accuracy only
    scores = np.arange(500) % (MAX_CONFUSION_CLASSES + 1)
    released = release_metrics(above.plan, metric_sums(above.plan, scores, scores), None)
    assert released == {"accuracy": 1.0}
