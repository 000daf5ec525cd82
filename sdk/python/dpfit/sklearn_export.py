"""A released model as a fitted scikit-learn estimator (``Model.to_sklearn()``).

The pipeline is ``[("encode", PublicEncodingTransformer), ("model", estimator)]``. The
transformer applies the model's public encoding (intercept column included, so the estimators
have ``intercept_ = 0`` and ``coef_`` = the released weights); the estimator is

- binary ``logistic_regression`` / ``sigmoid_classifier``: ``LogisticRegression``;
- binary ``huber_svm``: ``LinearSVC`` (no ``predict_proba`` in scikit-learn; ``Model`` has one);
- ``multinomial_logistic_regression`` (categorical labels, fitted jointly): a multinomial
  ``LogisticRegression`` whose ``coef_`` is the K × d weight matrix (scikit-learn scores it by
  the softmax of the K decision values, as the service does); with two classes, scikit-learn's
  binary form ``coef_ = w_1 − w_0`` (σ(z_1 − z_0) is the two-class softmax);
- other models on categorical labels: :class:`OneVsRestLinear` over one binary estimator per class, whose
  ``predict_proba`` normalises the per-class scores and ``predict`` takes the best — as the
  service does (scikit-learn's ``OneVsRestClassifier`` predicts from the raw decision values);
- ``huber_regression``: ``HuberRegressor``; ``cauchy_regression``: ``LinearRegression`` (the
  prediction of every regression is ``w·x``).

Nothing is fitted here: the estimators only carry the released coefficients, so predictions
equal :meth:`dpfit.Model.predict` (up to the rounding of a matrix product, ~1e-16).
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, TransformerMixin
from sklearn.linear_model import HuberRegressor, LinearRegression, LogisticRegression
from sklearn.pipeline import Pipeline
from sklearn.svm import LinearSVC

from dpfit.encoding import PublicEncoding, to_records
from dpfit.errors import warn_about_rows
from dpfit.kinds import JOINT_MULTICLASS_MODELS

__all__ = ["OneVsRestLinear", "PublicEncodingTransformer", "ReleasedModel", "to_sklearn"]


class ReleasedModel(Protocol):
    """What :func:`to_sklearn` reads of a :class:`dpfit.Model` (this module does not import
    the model: ``Model.to_sklearn`` imports this one)."""

    @property
    def type(self) -> str: ...

    @property
    def is_regression(self) -> bool: ...

    @property
    def is_multiclass(self) -> bool: ...

    @property
    def classes(self) -> list[Any] | None: ...

    @property
    def encoding(self) -> PublicEncoding: ...

    def weights(self) -> np.ndarray: ...


class PublicEncodingTransformer(TransformerMixin, BaseEstimator):  # type: ignore[misc]
    """Stateless transformer: rows (DataFrame or records) → the model's encoded matrix."""

    def __init__(self, encoding: dict[str, Any] | None = None) -> None:
        self.encoding = encoding

    def fit(self, X: Any, y: Any = None) -> PublicEncodingTransformer:
        return self

    def transform(self, X: Any) -> np.ndarray:
        """The encoded matrix; values the encoding changes (undeclared categories, numbers
        outside the bounds, missing values) issue one :class:`dpfit.PredictionWarning`, as
        :meth:`dpfit.Model.predict` does."""
        encoding = PublicEncoding(self.encoding or {})
        rows = to_records(X)
        encoded = encoding.encode_records(rows)
        warn_about_rows(encoding.warnings(rows))
        return encoded

    def get_feature_names_out(self, input_features: Any = None) -> np.ndarray:
        encoding = PublicEncoding(self.encoding or {})
        names = encoding.feature_names + (["intercept"] if encoding.fit_intercept else [])
        return np.asarray(names, dtype=object)

    def __sklearn_is_fitted__(self) -> bool:
        return True


class OneVsRestLinear(ClassifierMixin, BaseEstimator):  # type: ignore[misc]
    """One-vs-rest over fitted binary linear estimators (one per class, in ``classes_`` order).

    ``link="logistic"`` scores σ(z); ``link="hinge"`` scores clip((1+z)/2, 0, 1); scores are
    normalised across classes and the prediction is the class with the largest. ``score(X, y)``
    is scikit-learn's mean accuracy (``ClassifierMixin.score``), as for every classifier.
    """

    def __init__(self, estimators: list[Any] | None = None, classes: Any = None, link: str = "logistic") -> None:
        self.estimators = estimators
        self.classes = classes
        self.link = link

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Unpickle; a pickle written before the ``link`` parameter (dpfit ≤ 0.2.0) named it
        ``score``, an instance attribute that hid the ``score`` method: it is read as ``link``."""
        state = dict(state)
        if isinstance(state.get("score"), str):
            state.setdefault("link", state.pop("score"))
        super().__setstate__(state)

    def fit(self, X: Any, y: Any = None) -> OneVsRestLinear:
        raise NotImplementedError("released models are fitted by the service, not here")

    @property
    def classes_(self) -> np.ndarray:
        out = np.empty(len(self.classes), dtype=object)
        out[:] = list(self.classes)
        return out

    def decision_function(self, X: Any) -> np.ndarray:
        return np.column_stack([e.decision_function(X) for e in self.estimators or []])

    def predict_proba(self, X: Any) -> np.ndarray:
        z = self.decision_function(X)
        if self.link == "hinge":
            scores = np.clip(0.5 * (1.0 + z), 0.0, 1.0)
        else:
            from scipy.special import expit

            scores = expit(z)
        return scores / np.maximum(scores.sum(axis=1, keepdims=True), 1e-300)

    def predict(self, X: Any) -> np.ndarray:
        return self.classes_[self.predict_proba(X).argmax(axis=1)]

    def __sklearn_is_fitted__(self) -> bool:
        return True


def _binary(kind: str, weights: np.ndarray, classes: list[Any]) -> Any:
    estimator = LinearSVC(fit_intercept=False) if kind == "huber_svm" else LogisticRegression(fit_intercept=False)
    estimator.coef_ = np.asarray(weights, dtype=np.float64).reshape(1, -1)
    estimator.intercept_ = np.zeros(1)
    labels = np.empty(len(classes), dtype=object)
    labels[:] = classes
    estimator.classes_ = labels
    estimator.n_features_in_ = estimator.coef_.shape[1]
    return estimator


def _multinomial(weights: np.ndarray, classes: list[Any]) -> LogisticRegression:
    """A multinomial ``LogisticRegression`` holding the released K × d matrix."""
    estimator = LogisticRegression(fit_intercept=False)
    matrix = np.asarray(weights, dtype=np.float64)
    estimator.coef_ = matrix if len(classes) > 2 else (matrix[1] - matrix[0]).reshape(1, -1)
    estimator.intercept_ = np.zeros(estimator.coef_.shape[0])
    labels = np.empty(len(classes), dtype=object)
    labels[:] = classes
    estimator.classes_ = labels
    estimator.n_features_in_ = matrix.shape[1]
    return estimator


def _regressor(kind: str, weights: np.ndarray) -> Any:
    estimator = (
        HuberRegressor(fit_intercept=False) if kind == "huber_regression" else LinearRegression(fit_intercept=False)
    )
    estimator.coef_ = np.asarray(weights, dtype=np.float64)
    estimator.intercept_ = 0.0
    estimator.n_features_in_ = estimator.coef_.shape[0]
    if isinstance(estimator, HuberRegressor):
        estimator.scale_ = 1.0
        estimator.outliers_ = np.zeros(0, dtype=bool)
    return estimator


def to_sklearn(model: ReleasedModel) -> Pipeline:
    """The fitted pipeline for ``model`` (see the module docstring)."""
    weights = model.weights()
    if model.is_regression:
        estimator: Any = _regressor(model.type, weights[0])
    elif model.is_multiclass and model.type in JOINT_MULTICLASS_MODELS:
        assert model.classes is not None
        estimator = _multinomial(weights, list(model.classes))
    elif model.is_multiclass:
        assert model.classes is not None
        estimator = OneVsRestLinear(
            estimators=[_binary(model.type, w, [0, 1]) for w in weights],
            classes=list(model.classes),
            link="hinge" if model.type == "huber_svm" else "logistic",
        )
    else:
        assert model.classes is not None
        estimator = _binary(model.type, weights[0], list(model.classes))
    return Pipeline([("encode", PublicEncodingTransformer(model.encoding.description)), ("model", estimator)])
