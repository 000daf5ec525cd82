"""A released model's parameters: packed for storage, unpacked for use, and scored.

The optimizer's output is one noised vector ``w`` (intercept last when the model fits one), or
one row per class: K stacked binary fits for one-vs-rest, or the joint multinomial model's
K·d' vector reshaped to its K × d' matrix (:func:`released_weights`) — the same storage, told
apart by the job's model spec when scored. Stored and shown (``GET /v1/models/{id}``), it is
split into ``coefficients`` (a list, or a list of lists) and ``intercept`` (a number, a list, or
None). Everything that uses a stored model — ``/predict``, private evaluation — rebuilds the same
matrix with :func:`weight_matrix`; this is the one home of both directions, so they cannot
drift apart. Nothing here reads private data: it is the released model and the caller's rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from service.data.spec import LabelSpec
from service.models.base import Loss
from service.models.multinomial import softmax_rows
from service.models.registry import is_joint_multiclass

#: Most (row, class) scores one block of rows holds while a categorical model scores rows
#: (:func:`row_blocks`): 2²⁰ entries, 8 MB a temporary, whatever the rows and K — 100,000 rows
#: of a 10,000-class model at once would be 8 GB each.
SCORE_BLOCK_ENTRIES = 1 << 20


def row_blocks(n: int, classes: int) -> list[slice]:
    """Slices of ``n`` rows whose (rows, ``classes``) scores hold at most
    :data:`SCORE_BLOCK_ENTRIES` entries (at least one row a block; public sizes only)."""
    step = max(1, SCORE_BLOCK_ENTRIES // max(1, classes))
    return [slice(start, start + step) for start in range(0, n, step)]


def released_weights(loss: Loss, w: np.ndarray) -> np.ndarray:
    """The optimizer's output as stored: a joint multiclass model's flat K·d' vector as its
    K × d' matrix (row k = class k, intercept last, as :func:`pack` expects); any other output
    unchanged."""
    if is_joint_multiclass(loss) and w.ndim == 1:
        classes = int(getattr(loss, "classes"))  # noqa: B009 - the joint loss's public K
        return w.reshape(classes, w.shape[0] // classes)
    return w


def class_probabilities(weights: np.ndarray, loss: Loss, X: np.ndarray) -> np.ndarray:
    """(n, K) class probabilities of a categorical model: softmax(X Wᵀ) for the joint
    multinomial model; for one-vs-rest, each class's binary score normalised to sum to 1."""
    if is_joint_multiclass(loss):
        return softmax_rows(X @ weights.T)
    scores = np.column_stack([loss.predict_proba(w, X) for w in weights])  # type: ignore[attr-defined]
    normalised: np.ndarray = scores / np.maximum(scores.sum(axis=1, keepdims=True), 1e-300)
    return normalised


def pack(w: np.ndarray, fit_intercept: bool) -> tuple[Any, Any]:
    """``(coefficients, intercept)`` of the optimizer's output ``w`` (a vector, or a K × d'
    matrix for one-vs-rest), as stored and shown."""
    matrix = np.atleast_2d(w)
    weights = matrix[:, :-1] if fit_intercept else matrix
    intercepts = [float(v) for v in matrix[:, -1]] if fit_intercept else None
    coefficients: list[Any] = weights.tolist()
    if w.ndim == 1:
        return coefficients[0], (intercepts[0] if intercepts is not None else None)
    return coefficients, intercepts


def weight_matrix(coefficients: Any, intercept: Any) -> np.ndarray:
    """The K × d' matrix (K = 1 unless one-vs-rest) :func:`pack` was given, intercept last."""
    weights = np.atleast_2d(np.asarray(coefficients, dtype=float))
    if intercept is None:
        return weights
    return np.column_stack([weights, np.atleast_1d(np.asarray(intercept, dtype=float))])


@dataclass(frozen=True)
class Predictions:
    predictions: list[Any]
    probabilities: list[float] | None


def predict(weights: np.ndarray, loss: Loss, label: LabelSpec, X: np.ndarray) -> Predictions:
    """Predictions for encoded rows ``X``: the class of highest probability (categorical:
    :func:`class_probabilities`, by :func:`row_blocks`), the positive/negative label at
    probability 0.5 (binary), or the value (regression)."""
    if label.type == "categorical":
        classes = label.classes or []
        predictions: list[Any] = []
        probabilities: list[float] = []
        for rows in row_blocks(X.shape[0], weights.shape[0]):
            scores = class_probabilities(weights, loss, X[rows])
            best = scores.argmax(axis=1)
            predictions += [classes[k] for k in best]
            probabilities += scores[np.arange(best.size), best].tolist()
        return Predictions(predictions, probabilities)
    w = weights[0]
    if loss.task == "regression":
        return Predictions([float(v) for v in loss.predict(w, X)], None)
    probabilities = loss.predict_proba(w, X)  # type: ignore[attr-defined]
    labels = [label.positive if p >= 0.5 else label.negative for p in probabilities]
    return Predictions(labels, [float(p) for p in probabilities])
