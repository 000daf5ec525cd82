"""Binary logistic regression: ℓ(w; x, y) = log(1 + exp(−y w·x)), y ∈ {−1, +1}, ‖x‖₂ ≤ 1.

Objective (per-row-averaged convention, the one every optimizer's sensitivity uses)

    F(w; S) = (1/n) Σ_i log(1 + exp(−y_i w·x_i)) + (l2/2) ‖w‖²,

which equals scikit-learn's ``LogisticRegression(C=1/(n·l2), fit_intercept=False)`` objective
divided by ``n·C``. The intercept, when fitted, is a constant feature the loader appends *inside*
the row-norm bound, so it is regularised like every other coefficient.

Constants of the per-example loss (derivation). Write m = y w·x and σ(t) = 1/(1+e^{−t}).

- Gradient: ∇ℓ = −y σ(−m) x. Since 0 < σ < 1, |y| = 1 and ‖x‖ ≤ 1: ‖∇ℓ‖ ≤ ‖x‖ ≤ 1,
  so **L = 1** (approached as m → −∞ with ‖x‖ = 1).
- Hessian: ∇²ℓ = σ(m) σ(−m) x xᵀ ⪯ (1/4) ‖x‖² I because σ(m)(1 − σ(m)) ≤ 1/4 (maximised at
  m = 0). So ∇ℓ is **β = 1/4**-Lipschitz (attained at w·x = 0 with ‖x‖ = 1), and ℓ is
  **convex** (the Hessian is positive semidefinite).
- With the regulariser, F is μ = l2 strongly convex and (1/4 + l2)-smooth; an L1 term l1‖w‖₁
  (elastic net) is left to proximal optimizers (see :mod:`service.models.base`).

``predict_proba`` is σ(w·x), the model's probability P(y = +1 | x) — calibrated only as far as
the (regularised, noised) fit is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from scipy.special import expit

from service.models.base import (
    FloatArray,
    LinearModelLoss,
    Task,
    fit_intercept_field,
    l1_field,
    l2_field,
)

__all__ = ["LogisticLoss", "LogisticRegressionSpec"]


class LogisticRegressionSpec(BaseModel):
    """Binary logistic regression (labels mapped to −1/+1 by the dataset's label spec)."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["logistic_regression"] = Field(
        description="Model family: binary logistic regression, loss log(1 + exp(−y w·x))."
    )
    l2: float = l2_field()
    l1: float = l1_field()
    fit_intercept: bool = fit_intercept_field()


@dataclass
class LogisticLoss(LinearModelLoss):
    """The regularised logistic risk; implements :class:`service.models.base.Loss`.

    Assumes rows with ‖x‖₂ ≤ 1 and labels in {−1, +1}; guarantees L = 1, β = 1/4 for the
    per-example loss and μ = ``l2`` strong convexity of F (see the module docstring).
    """

    name: str = field(default="logistic_regression", init=False)
    task: Task = field(default="classification", init=False)
    lipschitz: float = field(default=1.0, init=False)
    smoothness: float = field(default=0.25, init=False)
    convex: bool = field(default=True, init=False)

    def phi(self, z: FloatArray, y: FloatArray) -> FloatArray:
        """log(1 + exp(−y z)), overflow-free."""
        out: FloatArray = np.logaddexp(0.0, -y * z)
        return out

    def dphi(self, z: FloatArray, y: FloatArray) -> FloatArray:
        """−y σ(−y z)."""
        out: FloatArray = -y * expit(-y * z)
        return out

    def smooth_value(self, w: FloatArray, X: FloatArray, y: FloatArray) -> float:
        """F(w) = mean(log(1 + exp(−y Xw))) + (l2/2)‖w‖², overflow-free via logaddexp."""
        margins = X @ w
        margins *= -y
        data = float(np.mean(np.logaddexp(0.0, margins)))
        return data + 0.5 * self.l2 * float(w @ w)

    def gradient(self, w: FloatArray, X: FloatArray, y: FloatArray) -> FloatArray:
        """∇F(w) = −(1/n) Xᵀ (y ⊙ σ(−y ⊙ Xw)) + l2·w (σ = scipy's expit, overflow-free)."""
        n = X.shape[0]
        coef = X @ w
        coef *= -y
        expit(coef, out=coef)
        coef *= y
        grad: FloatArray = X.T @ coef
        grad *= -1.0 / n
        if self.l2:
            grad += self.l2 * w
        return grad

    def predict_proba(self, w: FloatArray, X: FloatArray) -> FloatArray:
        """P(y = +1 | x) = σ(w·x) for each row."""
        out: FloatArray = expit(X @ w)
        return out


SPEC = LogisticRegressionSpec


def build(spec: LogisticRegressionSpec) -> LogisticLoss:
    return LogisticLoss(l2=spec.l2, l1=spec.l1)
