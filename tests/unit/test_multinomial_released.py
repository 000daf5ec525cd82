"""A released joint multinomial model everywhere it goes: the runner's K × d' matrix, the server's
predictions, the client's local ``predict``/``predict_proba`` (equal to the server's within
1e-12), ``to_sklearn()`` (a multinomial ``LogisticRegression`` holding the weights), and the
private evaluation's confusion matrix (sensitivity exactly 2: attained, never exceeded)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
from dpfit.model import Model

from service.data.encoding import Encoder
from service.data.spec import CategoricalFeature, LabelSpec, NumericFeature
from service.domain.evaluation import model_scores
from service.domain.released_model import (
    SCORE_BLOCK_ENTRIES,
    class_probabilities,
    pack,
    predict,
    released_weights,
    row_blocks,
    weight_matrix,
)
from service.models.multinomial import MultinomialLoss
from service.models.registry import build_loss, parse_model_spec
from service.privacy.evaluation import (
    feasible_metrics,
    metric_stds,
    metric_sums,
    plan_evaluation,
    release_metrics,
)

CLASSES = ["setosa", "versicolor", "virginica", "other"]
FEATURES = [
    NumericFeature(name="length", min=0.0, max=10.0),
    NumericFeature(name="width", min=-5.0, max=5.0),
    CategoricalFeature(name="colour", categories=["red", "blue"]),
]
LABEL = LabelSpec(column="species", type="categorical", classes=CLASSES)
SPEC = {"type": "multinomial_logistic_regression", "l2": 0.001, "gradient_clip": 0.5}


def _records(rng: np.random.Generator, n: int) -> list[dict[str, object]]:
    return [
        {
            "length": float(rng.uniform(-1, 11)),
            "width": float(rng.uniform(-6, 6)),
            "colour": str(rng.choice(["red", "blue", "green"])),
        }
        for _ in range(n)
    ]


def _released(seed: int, scale: float) -> tuple[Encoder, np.ndarray, dict[str, object]]:
    """An encoder, the released K × d' matrix (from a flat K·d' fit output) and the model JSON
    ``GET /v1/models/{id}`` returns for it."""
    encoder = Encoder(features=FEATURES, fit_intercept=True)
    loss = build_loss(parse_model_spec(SPEC), len(CLASSES))
    flat = np.random.default_rng(seed).normal(size=len(CLASSES) * encoder.dimension) * scale
    weights = released_weights(loss, flat)
    assert weights.shape == (len(CLASSES), encoder.dimension)
    coefficients, intercept = pack(weights, fit_intercept=True)
    body = {
        "id": "mdl_1", "job_id": "job_1", "dataset_id": "dst_1", "model": SPEC,
        "coefficients": coefficients, "intercept": intercept, "classes": CLASSES,
        "feature_names": [f.name for f in FEATURES], "encoding": encoder.to_dict(),
        "privacy": {"epsilon": 1.0, "delta": 1e-5}, "created_at": None,
    }  # fmt: skip
    assert np.array_equal(weight_matrix(coefficients, intercept), weights)
    return encoder, weights, body


@pytest.mark.parametrize("scale", [0.5, 30.0])
def test_client_predictions_equal_the_servers(scale: float) -> None:
    encoder, weights, body = _released(1, scale)
    rows = _records(np.random.default_rng(2), 60)
    X = encoder.encode_records(rows)
    loss = build_loss(parse_model_spec(SPEC), len(CLASSES))
    server = predict(weights, loss, LABEL, X)
    model = Model.from_json(body)
    assert model.is_multiclass and model.type == "multinomial_logistic_regression"
    proba = model.predict_proba(rows)
    np.testing.assert_allclose(proba, class_probabilities(weights, loss, X), rtol=0, atol=1e-12)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-12)
    assert list(model.predict(rows)) == server.predictions
    np.testing.assert_allclose(proba.max(axis=1), server.probabilities, rtol=0, atol=1e-12)
    # the joint model's probabilities are the softmax of the scores, not one-vs-rest's
    z = X @ weights.T
    softmax = np.exp(z - z.max(axis=1, keepdims=True))
    np.testing.assert_allclose(proba, softmax / softmax.sum(axis=1, keepdims=True), atol=1e-12)


@pytest.mark.parametrize("classes", [CLASSES, CLASSES[:2]])
def test_to_sklearn_is_a_multinomial_logistic_regression_holding_the_weights(
    classes: list[str],
) -> None:
    from sklearn.linear_model import LogisticRegression

    _, weights, body = _released(3, 2.0)
    weights = weights[: len(classes)]
    body = {
        **body,
        "classes": classes,
        "coefficients": weights[:, :-1].tolist(),
        "intercept": weights[:, -1].tolist(),
    }
    model = Model.from_json(body)
    pipeline = model.to_sklearn()
    estimator = pipeline.named_steps["model"]
    assert isinstance(estimator, LogisticRegression)
    assert list(estimator.classes_) == classes
    if len(classes) > 2:
        np.testing.assert_array_equal(estimator.coef_, weights)
    rows = _records(np.random.default_rng(4), 50)
    import pandas as pd

    frame = pd.DataFrame(rows)
    np.testing.assert_allclose(
        pipeline.predict_proba(frame), model.predict_proba(rows), rtol=0, atol=1e-12
    )
    assert list(pipeline.predict(frame)) == list(model.predict(rows))


# --- private evaluation: the confusion matrix ----------------------------------------------------


def _evaluation(n: int, classes: int = 3) -> object:
    return plan_evaluation("multiclass", n, 1.0, 1e-5, None, classes)


def test_confusion_matrix_cells_and_noise_free_release() -> None:
    plan = _evaluation(6)
    predicted = np.array([0.0, 1.0, 2.0, 2.0, 0.0, 1.0])
    truth = np.array([0.0, 1.0, 1.0, 2.0, -1.0, 0.0])
    sums = metric_sums(plan, predicted, truth)
    assert sums[:2].tolist() == [3.0, 3.0]
    cells = sums[2:].reshape(4, 3)
    assert cells.tolist() == [[1, 1, 0], [0, 1, 1], [0, 0, 1], [1, 0, 0]]
    released = release_metrics(plan, sums, None)
    assert released["accuracy"] == pytest.approx(0.5)
    assert released["confusion_matrix"] == [[1, 1, 0], [0, 1, 1], [0, 0, 1]]
    assert released["undeclared_label_predictions"] == [1, 0, 0]


def test_confusion_matrix_sensitivity_is_two_attained_never_exceeded() -> None:
    """Every replacement of one row (its true class incl. none, and its prediction) moves u by
    at most Δ = 2, and correct → wrong within one true class reaches it."""
    plan = _evaluation(8, classes=3)
    assert plan.sensitivity == 2.0
    rng = np.random.default_rng(5)
    predicted = rng.integers(0, 3, size=8).astype(float)
    truth = rng.integers(-1, 3, size=8).astype(float)
    base = metric_sums(plan, predicted, truth)
    gaps = []
    for p_new in range(3):
        for t_new in range(-1, 3):
            p2, t2 = predicted.copy(), truth.copy()
            p2[0], t2[0] = p_new, t_new
            gaps.append(float(np.linalg.norm(metric_sums(plan, p2, t2) - base)))
    assert max(gaps) == pytest.approx(2.0) and max(gaps) <= 2.0 + 1e-12
    assert set(np.round(gaps, 9)) <= {0.0, round(math.sqrt(2.0), 9), 2.0}


def test_released_matrix_is_feasible_and_its_std_stated() -> None:
    plan = _evaluation(50, classes=3)
    noisy = np.concatenate([[30.0, 20.0], np.full(12, 50 / 12)]) + np.linspace(-9, 9, 14)
    released = feasible_metrics(plan, noisy)
    matrix = np.array(released["confusion_matrix"])
    rest = np.array(released["undeclared_label_predictions"])
    assert matrix.shape == (3, 3) and np.all(matrix >= 0) and np.all(rest >= 0)
    assert matrix.sum() + rest.sum() == pytest.approx(50.0)
    stds = metric_stds(plan)
    assert stds["confusion_matrix_std"] == pytest.approx(plan.noise_scale * math.sqrt(1 - 1 / 12))
    assert stds["accuracy_std"] == pytest.approx(plan.noise_scale / (math.sqrt(2) * 50))


def test_a_categorical_plan_stored_before_the_matrix_runs_as_charged() -> None:
    old = plan_evaluation("categorical", 10, 1.0, 1e-5, None)
    assert old.sensitivity == pytest.approx(math.sqrt(2.0)) and old.classes is None
    sums = metric_sums(old, np.array([0.0, 1.0, 1.0]), np.array([0.0, 1.0, 0.0]))
    assert sums.tolist() == [2.0, 1.0]
    assert set(release_metrics(old, sums, None)) == {"accuracy"}


def test_multinomial_loss_scores_agree_with_the_evaluations_argmax() -> None:
    encoder, weights, _ = _released(6, 3.0)
    X = encoder.encode_records(_records(np.random.default_rng(7), 40))
    loss = MultinomialLoss(classes=len(CLASSES))
    assert np.array_equal(loss.predict(weights.ravel(), X), np.argmax(X @ weights.T, axis=1))


@pytest.mark.parametrize("joint", [True, False])
def test_many_classes_score_by_row_blocks_as_one_block_would(joint: bool) -> None:
    """3,000 classes over 1,000 rows: ``/predict`` and the evaluation's argmax work through
    blocks of at most SCORE_BLOCK_ENTRIES (row, class) scores (349 rows here, the last block
    short), and give what one (1,000 × 3,000) block gives — classes, probabilities to 1e-12."""
    classes, n = 3000, 1000
    rng = np.random.default_rng(11)
    X = np.column_stack([rng.uniform(-0.5, 0.5, (n, 3)), np.full(n, 0.5)])
    weights = rng.normal(0.0, 3.0, (classes, 4))
    blocks = row_blocks(n, classes)
    assert len(blocks) == 3 and all(
        (b.stop - b.start) * classes <= SCORE_BLOCK_ENTRIES for b in blocks
    )
    assert row_blocks(5, 2 * SCORE_BLOCK_ENTRIES) == [slice(k, k + 1) for k in range(5)]
    spec = {"type": "multinomial_logistic_regression"} if joint else {"type": "logistic_regression"}
    loss = build_loss(parse_model_spec(spec), classes)
    label = LabelSpec(column="y", type="categorical", classes=[f"c{k}" for k in range(classes)])
    whole = class_probabilities(weights, loss, X)
    best = whole.argmax(axis=1)
    served = predict(weights, loss, label, X)
    assert served.predictions == [f"c{k}" for k in best]
    np.testing.assert_allclose(served.probabilities, whole[np.arange(n), best], rtol=0, atol=1e-12)
    model = SimpleNamespace(
        coefficients=weights[:, :-1].tolist(), intercept=weights[:, -1].tolist()
    )
    assert np.array_equal(model_scores(model, X), np.argmax(X @ weights.T, axis=1))
