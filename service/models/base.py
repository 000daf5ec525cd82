r"""The interface every loss (a "model" in the API) implements, and shared building blocks.

A loss here is the regularised empirical risk

    P(w; S) = F(w; S) + l1 ‖w‖₁,    F(w; S) = (1/n) Σ_i ℓ(w; x_i, y_i) + (μ/2) ‖w‖²

over rows with ‖x_i‖₂ ≤ 1 (the loader enforces that bound). F is the *smooth part*; the
L1 term (elastic net when both μ > 0 and l1 > 0) is handled by a proximal step, never by a
gradient. The constants are those of the per-example *data* loss ℓ — the regularisers are
identical on neighbouring datasets, so they never enter a sensitivity bound except through the
strong convexity μ the L2 term provides:

- ``lipschitz`` L: ‖∇ℓ(w; x, y)‖ ≤ L for every w and every admissible row;
- ``smoothness`` β: ∇ℓ(·; x, y) is β-Lipschitz for every admissible row;
- ``l2`` μ: the L2 regulariser's weight; F is μ-strongly convex when ℓ is convex;
- ``l1``: the L1 weight (≥ 0). **Only proximal optimizers (e.g. ``dp_svrg``) support
  l1 > 0**; every other optimizer must reject it (``output_perturbation_gd`` raises
  ``InfeasibleSpec("model", …)``), because its sensitivity analysis assumes a smooth objective.
- ``convex``: ℓ(·; x, y) is convex for every admissible row;
- ``task``: ``"classification"`` (labels y ∈ {−1, +1}) or ``"regression"`` (real labels with a
  declared public bound |y| ≤ ``label_bound``, which the loader enforces by clipping).

The smoothness of F is therefore β + μ. ``value`` returns P (L1 term included); ``gradient``
returns ∇F (the smooth part only); ``prox(w, t)`` is the proximal map of t·l1‖·‖₁
(soft-thresholding by t·l1, the identity when l1 = 0), so a proximal-gradient step is
``prox(w − t ∇F(w), t)``.

The intercept, when fitted, is a constant feature inside the row-norm bound; it is regularised
(L2 and L1) like every other coefficient.

All losses of this package are *linear-model* losses, ℓ(w; x, y) = φ(w·x, y) for a scalar
φ; :class:`LinearModelLoss` implements everything from φ and ∂φ/∂z. For such a loss

    ∇ℓ = φ'(z, y) x,   ∇²ℓ = φ''(z, y) x xᵀ   (z = w·x),

so with ‖x‖ ≤ 1: L = sup |φ'| and β = sup |φ''| (both attained for ‖x‖ = 1 when the sup is),
and ℓ is convex iff φ'' ≥ 0. Each module derives its sup |φ'| and sup |φ''| in its docstring.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import numpy as np
from numpy.typing import NDArray
from pydantic import Field

FloatArray = NDArray[np.float64]
Task = Literal["classification", "regression"]

__all__ = [
    "FloatArray",
    "Task",
    "ClassificationLoss",
    "CoefficientAnchor",
    "LinearModelLoss",
    "Loss",
    "RegressionLoss",
    "check_positive",
    "coefficient_anchor",
    "check_weight",
    "curvature_at_zero",
    "fit_intercept_field",
    "fit_labels",
    "l1_field",
    "l2_field",
    "parameter_count",
    "soft_threshold",
]


class Loss(Protocol):
    """A regularised empirical risk over rows with ‖x‖₂ ≤ 1 (see the module docstring)."""

    name: str
    task: Task
    lipschitz: float
    smoothness: float
    l2: float
    l1: float
    convex: bool

    def value(self, w: FloatArray, X: FloatArray, y: FloatArray) -> float:
        """P(w; S): the mean data loss plus (μ/2)‖w‖² plus l1‖w‖₁."""
        ...

    def smooth_value(self, w: FloatArray, X: FloatArray, y: FloatArray) -> float:
        """F(w; S): the mean data loss plus (μ/2)‖w‖² (no L1 term); ``gradient`` is its gradient."""
        ...

    def gradient(self, w: FloatArray, X: FloatArray, y: FloatArray) -> FloatArray:
        """∇F(w; S): the mean data-loss gradient plus μ w (the L1 term is left to ``prox``)."""
        ...

    def example_gradients(self, w: FloatArray, X: FloatArray, y: FloatArray) -> FloatArray:
        """Per-row data-loss gradients ∇ℓ(w; x_i, y_i), shape (n, d), without regularisers."""
        ...

    def prox(self, w: FloatArray, step: float) -> FloatArray:
        """argmin_u l1‖u‖₁ + ‖u − w‖²/(2·step): soft-thresholding by step·l1 (a new array)."""
        ...

    def check_labels(self, y: FloatArray) -> None:
        """Raise ValueError (without data values) unless every label is admissible."""
        ...

    def predict(self, w: FloatArray, X: FloatArray) -> FloatArray:
        """Classification: the predicted label in {−1, +1}; regression: the prediction w·x."""
        ...


class ClassificationLoss(Loss, Protocol):
    """A loss for labels y ∈ {−1, +1} that also maps rows to a score in [0, 1]."""

    def predict_proba(self, w: FloatArray, X: FloatArray) -> FloatArray:
        """A score in [0, 1] for y = +1, ≥ 1/2 exactly when w·x ≥ 0 (see each loss for
        whether it is a calibrated probability)."""
        ...


@dataclass(frozen=True)
class CoefficientAnchor:
    """For a linear-model loss whose per-example gradient is c(w)·x: constants with
    |c(w) − scale·c(0)| ≤ half_width and |scale·c(0)| ≤ half_width for every w and every
    admissible row (derived per model; ``dp_agd_centred`` relies on exactly this)."""

    scale: float
    half_width: float


def coefficient_anchor(loss: Loss) -> CoefficientAnchor | None:
    """The loss's :class:`CoefficientAnchor` if its model derives one (``logistic_regression``),
    else None."""
    method = getattr(loss, "coefficient_anchor", None)
    if method is None:
        return None
    anchor: CoefficientAnchor = method()
    return anchor


def curvature_at_zero(loss: Loss) -> float:
    """The largest eigenvalue of one row's loss Hessian in its scores at w = 0, where every fit
    starts, if the model derives one (``multinomial_logistic_regression``: 1/K), else the
    smoothness β (the bound over every w). The Gram form of the curvature step scales its
    preconditioner by it (``service/optimizers/kits/gram_step.py``). Public: the model's own
    constants."""
    beta = float(loss.smoothness)
    method = getattr(loss, "curvature_at_zero", None)
    return beta if method is None else min(beta, float(method()))


def parameter_count(loss: Loss, width: int) -> int:
    """The length of the parameter vector w for rows of ``width`` encoded columns: ``width`` for
    a linear model of one weight vector, K·``width`` for a joint K-class model
    (``multinomial_logistic_regression``, its ``parameter_count``). Optimizers size w, their
    noise and their shape checks by this, never by the row width itself."""
    method = getattr(loss, "parameter_count", None)
    return int(width) if method is None else int(method(int(width)))


def fit_labels(loss: Loss, labels: FloatArray) -> FloatArray:
    """The labels ``loss`` takes from the reader's: unchanged, except for a joint multiclass
    loss, which turns the (K, n) one-vs-rest matrix of a categorical label into its own form
    (``labels_for_fit``; row-local)."""
    method = getattr(loss, "labels_for_fit", None)
    if method is None:
        return labels
    converted: FloatArray = method(labels)
    return converted


class RegressionLoss(Loss, Protocol):
    """A loss for real labels with the declared public bound |y| ≤ ``label_bound``."""

    label_bound: float


# --- shared helpers ---------------------------------------------------------------------------


def soft_threshold(w: FloatArray, threshold: float) -> FloatArray:
    """sign(w)·max(|w| − threshold, 0), elementwise (a new array): the prox of threshold·‖·‖₁."""
    if not (math.isfinite(threshold) and threshold >= 0.0):
        raise ValueError("the threshold must be a finite number >= 0")
    w = np.asarray(w, dtype=np.float64)
    out: FloatArray = np.sign(w) * np.maximum(np.abs(w) - threshold, 0.0)
    return out


def check_weight(name: str, value: float) -> None:
    if not (math.isfinite(value) and value >= 0.0):
        raise ValueError(f"{name} must be a finite number >= 0")


def check_positive(name: str, value: float) -> None:
    if not (math.isfinite(value) and value > 0.0):
        raise ValueError(f"{name} must be a finite number > 0")


def l2_field() -> float:
    """The ``l2`` field every model spec shares (μ; default 1e-4)."""
    result: float = Field(
        default=1e-4,
        ge=0.0,
        allow_inf_nan=False,
        description=(
            "L2 regularisation μ of the objective (1/n) Σ ℓ(w; x_i, y_i) + (μ/2)‖w‖² + l1‖w‖₁ "
            "(per-row-averaged; scikit-learn's C equals 1/(n·μ)). μ > 0 makes the objective "
            "strongly convex (for a convex loss), which bounds the sensitivity independently "
            "of the iteration count."
        ),
    )
    return result


def l1_field() -> float:
    """The ``l1`` field every model spec shares (default 0)."""
    result: float = Field(
        default=0.0,
        ge=0.0,
        allow_inf_nan=False,
        description=(
            "L1 regularisation weight of the term l1‖w‖₁ (elastic net together with l2). "
            "Non-smooth: only proximal optimizers (dp_svrg) accept l1 > 0; the others reject "
            "the job."
        ),
    )
    return result


def fit_intercept_field() -> bool:
    """The ``fit_intercept`` field every model spec shares (default true)."""
    result: bool = Field(
        default=True,
        description=(
            "Append a constant feature for the intercept. It lies inside the row-norm bound "
            "‖x‖₂ ≤ 1 and is regularised (l2 and l1) like the other coefficients."
        ),
    )
    return result


def objective_gap_bound(loss: Loss) -> float:
    """The default public bound on F(0) − min F: max(1, sup over admissible rows of ℓ(0; x, y)).

    At w = 0 every row's loss is φ(0, y), and the catalog's losses are non-negative (so is the
    l2 term), hence F(0) − min F ≤ F(0) ≤ sup_y φ(0, y) — the sup over the admissible labels:
    ±1 for classification, [−B, B] for regression (B = ``label_bound``), where φ(0, ·) is
    largest at an end (convex in y for Huber, increasing in |y| for Cauchy). Public: the loss,
    its constants and the declared bound only. The floor 1 is the earlier fixed default, which
    covers every classification loss (logistic log 2, sigmoid 1/2, Huber SVM ≤ 1) and keeps
    their plans as they were; for regression it scales with the labels (Huber: δB − δ²/2), where
    a gap of 1 made the default radius, and so T, far too small (labels in the hundreds gave
    models worse than a constant; bench/RESULTS.md, section 6). A loss without ``phi`` gets 1.
    """
    own = getattr(loss, "zero_loss_bound", None)
    if own is not None:  # a loss ≥ 0 that states sup ℓ(0; x, y) itself (multinomial: log K)
        return max(1.0, float(own()))
    phi = getattr(loss, "phi", None)
    if phi is None:
        return 1.0
    if getattr(loss, "task", "classification") == "classification":
        labels = np.array([-1.0, 1.0])
    else:
        bound = float(getattr(loss, "label_bound", 1.0))
        labels = np.array([-bound, bound])
    values = np.asarray(phi(np.zeros(2), labels), dtype=np.float64)
    worst = float(np.max(values))
    return max(1.0, worst) if math.isfinite(worst) else 1.0


def resolved_objective_gap(loss: Loss, params: Any) -> float:
    """``params.objective_gap`` if the analyst set it (pydantic's ``model_fields_set``), else
    :func:`objective_gap_bound` — which is the field's default 1 for every classification loss,
    so only regression plans differ from a plain default."""
    if "objective_gap" in getattr(params, "model_fields_set", ()):
        return float(params.objective_gap)
    return objective_gap_bound(loss)


# --- linear-model losses ----------------------------------------------------------------------


@dataclass
class LinearModelLoss:
    """Base of the losses ℓ(w; x, y) = φ(w·x, y): subclasses set the constants in
    ``__post_init__`` and implement :meth:`phi` and :meth:`dphi` (∂φ/∂z), both vectorised
    over rows. Everything else (value, gradient, prox, label checks, predictions) is here.
    """

    l2: float = 0.0
    l1: float = 0.0
    name: str = field(default="", init=False)
    task: Task = field(default="classification", init=False)
    lipschitz: float = field(default=math.nan, init=False)
    smoothness: float = field(default=math.nan, init=False)
    convex: bool = field(default=True, init=False)

    def __post_init__(self) -> None:
        check_weight("l2", self.l2)
        check_weight("l1", self.l1)

    # the scalar loss -----------------------------------------------------------------------

    def phi(self, z: FloatArray, y: FloatArray) -> FloatArray:
        """φ(z_i, y_i) per row (z = Xw)."""
        raise NotImplementedError

    def dphi(self, z: FloatArray, y: FloatArray) -> FloatArray:
        """∂φ/∂z (z_i, y_i) per row."""
        raise NotImplementedError

    # the Loss protocol ---------------------------------------------------------------------

    def smooth_value(self, w: FloatArray, X: FloatArray, y: FloatArray) -> float:
        data = float(np.mean(self.phi(X @ w, y)))
        return data + 0.5 * self.l2 * float(w @ w)

    def value(self, w: FloatArray, X: FloatArray, y: FloatArray) -> float:
        out = self.smooth_value(w, X, y)
        if self.l1:
            out += self.l1 * float(np.sum(np.abs(w)))
        return out

    def gradient(self, w: FloatArray, X: FloatArray, y: FloatArray) -> FloatArray:
        coef = self.dphi(X @ w, y)
        grad: FloatArray = X.T @ coef
        grad *= 1.0 / X.shape[0]
        if self.l2:
            grad += self.l2 * w
        return grad

    def example_gradients(self, w: FloatArray, X: FloatArray, y: FloatArray) -> FloatArray:
        out: FloatArray = self.dphi(X @ w, y)[:, None] * X
        return out

    def prox(self, w: FloatArray, step: float) -> FloatArray:
        check_weight("step", step)
        if self.l1 == 0.0:
            return np.array(w, dtype=np.float64, copy=True)
        return soft_threshold(w, step * self.l1)

    def check_labels(self, y: FloatArray) -> None:
        y = np.asarray(y)
        if self.task == "classification":
            if not bool(np.all((y == 1.0) | (y == -1.0))):
                raise ValueError("labels must be -1 or +1")
            return
        bound = float(getattr(self, "label_bound", math.inf))
        if not bool(np.all(np.isfinite(y))):
            raise ValueError("labels must be finite")
        if not bool(np.all(np.abs(y) <= bound)):
            raise ValueError(
                "labels must lie within the declared bound |y| <= label_bound "
                "(the loader clips them)"
            )

    def predict(self, w: FloatArray, X: FloatArray) -> FloatArray:
        z: FloatArray = X @ w
        if self.task == "classification":
            out: FloatArray = np.where(z >= 0.0, 1.0, -1.0)
            return out
        return z
