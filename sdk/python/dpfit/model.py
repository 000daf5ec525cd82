"""A released model: its noised coefficients, privacy accounting and local prediction.

Prediction here uses only the released model and the caller's rows — no privacy cost, no
request — and answers what ``POST /v1/models/{id}/predict`` answers (tested against a live
service): the scores of each model type are

=====================  ==================================  ==========================
model type             score of a row (z = w·x)            prediction
=====================  ==================================  ==========================
logistic_regression,   σ(z) (the logistic function)        positive iff score ≥ 1/2
sigmoid_classifier
huber_svm              clip((1 + z)/2, 0, 1) (not a        positive iff score ≥ 1/2
                       calibrated probability)
regressions            —                                   z
=====================  ==================================  ==========================

A categorical label has one coefficient row per class. ``multinomial_logistic_regression``
(the joint softmax model) scores softmax(z) over the classes' z = w_k·x; every other model is
one-vs-rest, its per-class scores (as above) normalised to sum to 1. The prediction is the class
of the largest.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from dpfit.encoding import PublicEncoding, Rows, to_records
from dpfit.errors import warn_about_rows
from dpfit.kinds import JOINT_MULTICLASS_MODELS, REGRESSION_MODELS

__all__ = ["JOINT_MULTICLASS_MODELS", "REGRESSION_MODELS", "Model", "ModelClient"]

FloatArray = NDArray[np.float64]

_HINGE_SCORES = frozenset({"huber_svm"})


class ModelClient(Protocol):
    """What a :class:`Model` needs of the client that fetched it: pricing and running a
    private evaluation (:class:`dpfit.Client` has both; the model never imports the client)."""

    def estimate_evaluation(
        self,
        model_id: str,
        dataset_id: str,
        *,
        epsilon: float,
        delta: float,
        loss_clip: float | None = None,
    ) -> Any: ...

    def evaluate(
        self,
        model_id: str,
        dataset_id: str,
        *,
        epsilon: float,
        delta: float,
        loss_clip: float | None = None,
        wait: bool = True,
        timeout: float | None = None,
    ) -> Any: ...


def _softmax(z: FloatArray) -> FloatArray:
    """Row-wise softmax, overflow-free (the service: exp of scipy's log_softmax; ~1 ulp apart)."""
    shifted = z - z.max(axis=1, keepdims=True)
    e = np.exp(shifted)
    out: FloatArray = e / e.sum(axis=1, keepdims=True)
    return out


try:  # the service scores with scipy's expit; the numpy formula agrees to ~1 ulp
    from scipy.special import expit as _expit
except ImportError:  # pragma: no cover - scipy comes with the `sklearn` extra

    def _expit(z: FloatArray) -> FloatArray:
        out = np.empty_like(z)
        negative = z < 0
        e = np.exp(z[negative])
        out[negative] = e / (1.0 + e)
        out[~negative] = 1.0 / (1.0 + np.exp(-z[~negative]))
        return out


@dataclass(frozen=True)
class Model:
    """A released model, as ``GET /v1/models/{id}`` describes it.

    ``coefficients`` is a 1-d array (one weight per encoded feature) or, for a categorical
    label, a ``(classes, features)`` array; ``intercept`` a float, an array (one per class) or
    ``None``. ``classes`` lists the label values in the order of :meth:`predict_proba`'s columns
    (binary: ``[negative, positive]``; regression: ``None``). ``client``: the
    :class:`~dpfit.Client` that fetched it (``Client.model``; any :class:`ModelClient`), used by
    :meth:`evaluate`; it is not pickled.
    """

    id: str
    job_id: str
    dataset_id: str
    spec: dict[str, Any]
    coefficients: FloatArray
    intercept: float | FloatArray | None
    classes: list[Any] | None
    feature_names: list[str]
    encoding: PublicEncoding
    privacy: dict[str, Any]
    created_at: datetime | None
    raw: dict[str, Any] = field(repr=False)
    client: ModelClient | None = field(default=None, repr=False, compare=False)

    @classmethod
    def from_json(
        cls,
        body: Mapping[str, Any],
        label: Mapping[str, Any] | None = None,
        client: ModelClient | None = None,
    ) -> Model:
        """Build from the JSON of ``GET /v1/models/{id}``; ``label`` is the dataset's public
        label spec (needed for a binary label's two values, which the model does not carry)."""
        spec = dict(body["model"])
        classes: list[Any] | None
        if spec.get("type") in REGRESSION_MODELS:
            classes = None
        elif body.get("classes") is not None:
            classes = list(body["classes"])
        else:
            label = label or {}
            classes = [label.get("negative"), label.get("positive")]
        intercept = body.get("intercept")
        if isinstance(intercept, list):
            intercept = np.asarray(intercept, dtype=np.float64)
        created = body.get("created_at")
        return cls(
            id=str(body["id"]),
            job_id=str(body["job_id"]),
            dataset_id=str(body["dataset_id"]),
            spec=spec,
            coefficients=np.asarray(body["coefficients"], dtype=np.float64),
            intercept=float(intercept) if isinstance(intercept, int | float) else intercept,
            classes=classes,
            feature_names=list(body["feature_names"]),
            encoding=PublicEncoding(body["encoding"]),
            privacy=dict(body["privacy"]),
            created_at=datetime.fromisoformat(created) if isinstance(created, str) else None,
            raw=dict(body),
            client=client,
        )

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without its client (a live HTTP session)."""
        return {**self.__dict__, "client": None}

    # --- what the model is --------------------------------------------------------------------

    @property
    def type(self) -> str:
        """The model type (``logistic_regression``, ``huber_svm``, ``huber_regression`` …)."""
        return str(self.spec["type"])

    @property
    def is_regression(self) -> bool:
        return self.type in REGRESSION_MODELS

    @property
    def is_multiclass(self) -> bool:
        return self.coefficients.ndim == 2

    def weights(self) -> FloatArray:
        """The full weight matrix ``(rows, dimension)`` applied to encoded rows: coefficients
        with the intercept as the last column (one row per class; one row otherwise)."""
        weights = np.atleast_2d(self.coefficients)
        if self.intercept is not None:
            weights = np.column_stack([weights, np.atleast_1d(np.asarray(self.intercept, float))])
        return weights

    # --- prediction ---------------------------------------------------------------------------

    def encode(self, rows: Rows) -> FloatArray:
        """The rows through the model's public encoding (what the coefficients apply to).

        A value the encoding changes — not a declared category, outside the declared bounds,
        missing — issues one :class:`dpfit.PredictionWarning` (as the service's ``warnings``);
        :meth:`prediction_warnings` lists them without scoring."""
        as_records = to_records(rows)
        X = self.encoding.encode_records(as_records)
        warn_about_rows(self.encoding.warnings(as_records))
        return X

    def prediction_warnings(self, rows: Rows) -> list[dict[str, Any]]:
        """What ``POST /v1/models/{id}/predict`` would list as ``warnings`` for ``rows``:
        ``{"row", "column", "kind", "message"}`` per cell whose encoding changes its meaning."""
        return self.encoding.warnings(to_records(rows))

    def decision_function(self, rows: Rows) -> FloatArray:
        """``w·x`` per row (``(n,)``), or per row and class (``(n, classes)``) for multiclass."""
        X = self.encode(rows)
        weights = self.weights()
        if self.is_multiclass:
            return np.column_stack([X @ w for w in weights])
        return X @ weights[0]

    def _scores(self, z: FloatArray) -> FloatArray:
        if self.type in _HINGE_SCORES:
            return np.clip(0.5 * (1.0 + z), 0.0, 1.0)
        return _expit(z)

    def predict_proba(self, rows: Rows) -> FloatArray:
        """Class scores, ``(n, len(classes))`` in the order of :attr:`classes` (scikit-learn's
        shape). The service's ``probabilities`` are column 1 for a binary label and the row
        maximum for a categorical one. Regression models raise ``TypeError``."""
        if self.is_regression:
            raise TypeError(f"{self.type} is a regression model: it has no predict_proba")
        X = self.encode(rows)
        weights = self.weights()
        if self.is_multiclass and self.type in JOINT_MULTICLASS_MODELS:
            return _softmax(X @ weights.T)
        if self.is_multiclass:
            scores = np.column_stack([self._scores(X @ w) for w in weights])
            return scores / np.maximum(scores.sum(axis=1, keepdims=True), 1e-300)
        positive = self._scores(X @ weights[0])
        return np.column_stack([1.0 - positive, positive])

    def predict(self, rows: Rows) -> NDArray[Any]:
        """Predictions: label values for classifiers, ``w·x`` (float64) for regressions."""
        if self.is_regression:
            return self.decision_function(rows)
        assert self.classes is not None
        proba = self.predict_proba(rows)
        # binary: the positive class (column 1) when its score is ≥ 1/2, as the service does
        best = proba.argmax(axis=1) if self.is_multiclass else (proba[:, 1] >= 0.5).astype(np.intp)
        labels = np.empty(len(self.classes), dtype=object)
        labels[:] = self.classes
        return labels[best]

    def to_sklearn(self) -> Any:
        """A fitted scikit-learn ``Pipeline``: this model's public encoding as a transformer,
        then a linear estimator holding the released coefficients (needs scikit-learn: the
        ``sklearn`` extra; an ``ImportError`` saying how to install it otherwise)."""
        try:
            import sklearn  # noqa: F401
        except ImportError:
            raise ImportError(
                "to_sklearn() needs scikit-learn: pip install 'dpfit-client[sklearn]' "
                "(from a clone of the service: pip install './sdk/python[sklearn]')"
            ) from None
        from dpfit.sklearn_export import to_sklearn

        return to_sklearn(self)

    # --- private evaluation -------------------------------------------------------------------

    def _bound(self) -> ModelClient:
        if self.client is None:
            from dpfit.errors import DpfitError

            raise DpfitError(
                f"model {self.id} is not bound to a client: use Client.model(id), or client.evaluate(model.id, …)"
            )
        return self.client

    def estimate_evaluation(
        self,
        dataset_id: str,
        *,
        epsilon: float,
        delta: float,
        loss_clip: float | None = None,
    ) -> Any:
        """Price :meth:`evaluate` without charging: a :class:`dpfit.Estimate` (see
        :meth:`Client.estimate_evaluation`)."""
        return self._bound().estimate_evaluation(self.id, dataset_id, epsilon=epsilon, delta=delta, loss_clip=loss_clip)

    def evaluate(
        self,
        dataset_id: str,
        *,
        epsilon: float,
        delta: float,
        loss_clip: float | None = None,
        wait: bool = True,
        timeout: float | None = None,
    ) -> Any:
        """Evaluate this model privately on ``dataset_id``, charged (ε, δ) on that dataset's
        ledger: a :class:`dpfit.Evaluation`; with ``wait`` (default), returns once the noised
        metrics are there (see :meth:`Client.evaluate`)."""
        return self._bound().evaluate(
            self.id,
            dataset_id,
            epsilon=epsilon,
            delta=delta,
            loss_clip=loss_clip,
            wait=wait,
            timeout=timeout,
        )

    def to_json(self) -> dict[str, Any]:
        """The model as the service describes it (``GET /v1/models/{id}``)."""
        return dict(self.raw)

    def __repr__(self) -> str:
        eps, delta = self.privacy.get("epsilon"), self.privacy.get("delta")
        return f"<dpfit.Model {self.id} {self.type} (ε={eps}, δ={delta})>"


def records(rows: Rows) -> list[dict[str, Any]]:
    """The rows as JSON records for ``POST /v1/models/{id}/predict``."""
    return to_records(rows)
