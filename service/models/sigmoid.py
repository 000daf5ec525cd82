r"""Sigmoid loss (smooth, bounded, **non-convex**): a smooth surrogate of the 0–1 loss.

With the margin m = y w·x, y ∈ {−1, +1}, ‖x‖₂ ≤ 1 and σ(t) = 1/(1 + e^{−t}):

    ℓ(w; x, y) = σ(−m) = 1/(1 + exp(y w·x)) ∈ (0, 1),

and F(w) = (1/n) Σ σ(−y_i w·x_i) + (l2/2)‖w‖² (+ l1‖w‖₁ for proximal optimizers). Being
bounded, one mislabelled or outlying row moves the objective by at most 1/n — the robustness
that makes it popular with noisy labels — at the price of convexity.

Constants (derivation). Write s = σ(m) and φ(m) = σ(−m) = 1 − s; σ' = s(1 − s).

- φ'(m) = −s(1 − s), so |φ'| ≤ max_s s(1 − s) = 1/4 (at m = 0) and ∇ℓ = φ'(m) y x gives
  ‖∇ℓ‖ ≤ 1/4: **L = 1/4**, attained at w·x = 0 with ‖x‖ = 1.
- φ''(m) = −s(1 − s)(1 − 2s). With u = s − 1/2 ∈ (−1/2, 1/2): |φ''| = 2|u|(1/4 − u²), whose
  derivative 2(1/4 − 3u²) vanishes at u² = 1/12, giving max |φ''| = (1/√3)(1/4 − 1/12) =
  1/(6√3) ≈ 0.096225 at m = ±log((√3 + 1)/(√3 − 1)) = ±log(2 + √3) ≈ ±1.317. As
  ∇²ℓ = φ''(m) x xᵀ (y² = 1), ‖∇²ℓ‖ ≤ |φ''| ‖x‖² and **β = 1/(6√3)**, attained at those margins
  with ‖x‖ = 1.
- φ'' < 0 for m < 0 (s < 1/2), so ℓ is **not convex**: ``convex = False``, and optimizers that
  need convexity (e.g. ``output_perturbation_gd``) reject it. With l2 = μ > 0, F is
  (μ − 1/(6√3))-strongly convex only when μ > 1/(6√3); the flag stays False regardless.

``predict_proba`` returns σ(w·x): the loss is the probability of an error under the model
P(y | x) = σ(y w·x), but minimising it does not fit that model's likelihood, so the score is
monotone and ≥ 1/2 exactly when w·x ≥ 0, **not a calibrated probability**.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

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

__all__ = ["SIGMOID_SMOOTHNESS", "SigmoidLoss", "SigmoidClassifierSpec"]

#: max |d²/dm² σ(−m)| = 1/(6√3)
SIGMOID_SMOOTHNESS = 1.0 / (6.0 * math.sqrt(3.0))


class SigmoidClassifierSpec(BaseModel):
    """Linear classifier with the (non-convex) sigmoid loss σ(−y w·x)."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["sigmoid_classifier"] = Field(
        description=(
            "Model family: linear classifier with the bounded, non-convex sigmoid loss "
            "1/(1 + exp(y w·x)); L = 1/4, β = 1/(6√3). Needs an optimizer for non-convex "
            "objectives."
        )
    )
    l2: float = l2_field()
    l1: float = l1_field()
    fit_intercept: bool = fit_intercept_field()


@dataclass
class SigmoidLoss(LinearModelLoss):
    """The regularised sigmoid risk; L = 1/4, β = 1/(6√3), non-convex (module docstring)."""

    name: str = field(default="sigmoid_classifier", init=False)
    task: Task = field(default="classification", init=False)
    lipschitz: float = field(default=0.25, init=False)
    smoothness: float = field(default=SIGMOID_SMOOTHNESS, init=False)
    convex: bool = field(default=False, init=False)

    def phi(self, z: FloatArray, y: FloatArray) -> FloatArray:
        out: FloatArray = expit(-y * z)
        return out

    def dphi(self, z: FloatArray, y: FloatArray) -> FloatArray:
        m = y * z
        out: FloatArray = -y * expit(m) * expit(-m)
        return out

    def predict_proba(self, w: FloatArray, X: FloatArray) -> FloatArray:
        """Score σ(w·x) for y = +1 — monotone, **not** a calibrated probability."""
        out: FloatArray = expit(X @ w)
        return out


SPEC = SigmoidClassifierSpec


def build(spec: SigmoidClassifierSpec) -> SigmoidLoss:
    return SigmoidLoss(l2=spec.l2, l1=spec.l1)
