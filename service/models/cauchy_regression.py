r"""Cauchy (Lorentzian) robust regression: smooth, **non-convex**, redescending influence.

With the residual r = w·x − y, real labels under the declared public bound |y| ≤ B
(``label_bound``; the loader clips labels to [−B, B]), ‖x‖₂ ≤ 1 and scale c > 0
(``cauchy_scale``):

    ρ_c(r) = (c²/2) · log(1 + r²/c²),

≈ r²/2 for |r| ≪ c (least squares near the fit) and growing only logarithmically beyond, so
gross outliers have vanishing influence. F(w) = (1/n) Σ ρ_c(w·x_i − y_i) + (l2/2)‖w‖²
(+ l1‖w‖₁ for proximal optimizers).

Constants (derivation). With t = r²:

- ρ_c'(r) = r / (1 + r²/c²) = c² r / (c² + r²). Its derivative is zero at |r| = c, so
  max |ρ_c'| = c³/(2c²) = c/2, and ∇ℓ = ρ_c'(r) x gives **L = c/2**, attained at |r| = c
  with ‖x‖ = 1 (independent of B and w).
- ρ_c''(r) = c²(c² − r²)/(c² + r²)². As a function g(t) = c²(c² − t)/(c² + t)² of t ≥ 0:
  g(0) = 1 is the maximum, g decreases to its minimum at t = 3c² (g'(t) ∝ t − 3c²), where
  g = c²(−2c²)/(16c⁴) = −1/8, then rises to 0. So |ρ_c''| ≤ 1 and, as ∇²ℓ = ρ_c''(r) x xᵀ,
  **β = 1**, attained at r = 0 with ‖x‖ = 1 (independent of c).
- ρ_c'' < 0 for |r| > c: ℓ is **not convex** (``convex = False``); F is (μ − 1/8)-strongly
  convex only when μ = l2 > 1/8, and the flag stays False regardless.

``predict`` returns w·x unclipped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from service.models.base import (
    FloatArray,
    LinearModelLoss,
    Task,
    check_positive,
    fit_intercept_field,
    l1_field,
    l2_field,
)
from service.models.huber_regression import label_bound_field

__all__ = ["CauchyRegressionLoss", "CauchyRegressionSpec"]


class CauchyRegressionSpec(BaseModel):
    """Linear regression with the Cauchy loss (c²/2) log(1 + (w·x − y)²/c²)."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["cauchy_regression"] = Field(
        description=(
            "Model family: robust linear regression with the non-convex Cauchy loss "
            "(c²/2)·log(1 + (w·x − y)²/c²); L = c/2, β = 1. Needs an optimizer for "
            "non-convex objectives."
        )
    )
    l2: float = l2_field()
    l1: float = l1_field()
    fit_intercept: bool = fit_intercept_field()
    label_bound: float = label_bound_field()
    cauchy_scale: float = Field(
        default=1.0,
        gt=0.0,
        allow_inf_nan=False,
        description=(
            "c: residuals well below c are penalised like least squares, larger ones only "
            "logarithmically. It sets the Lipschitz constant L = c/2 (label units)."
        ),
    )


@dataclass
class CauchyRegressionLoss(LinearModelLoss):
    """The regularised Cauchy-regression risk; L = c/2, β = 1, non-convex (module docstring)."""

    scale: float = 1.0
    label_bound: float = 1.0
    name: str = field(default="cauchy_regression", init=False)
    task: Task = field(default="regression", init=False)
    smoothness: float = field(default=1.0, init=False)
    convex: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive("cauchy_scale", self.scale)
        check_positive("label_bound", self.label_bound)
        self.lipschitz = 0.5 * float(self.scale)

    def phi(self, z: FloatArray, y: FloatArray) -> FloatArray:
        c = self.scale
        q = (z - y) / c
        out: FloatArray = 0.5 * c * c * np.log1p(q * q)
        return out

    def dphi(self, z: FloatArray, y: FloatArray) -> FloatArray:
        c = self.scale
        q = (z - y) / c
        # c·q/(1 + q²), written as c/(q + 1/q) for |q| > 1 so that huge residuals cannot overflow
        big = np.abs(q) > 1.0
        safe = np.where(big, q, 1.0)
        out: FloatArray = np.where(big, c / (safe + 1.0 / safe), c * q / (1.0 + q * q))
        return out


SPEC = CauchyRegressionSpec


def build(spec: CauchyRegressionSpec) -> CauchyRegressionLoss:
    return CauchyRegressionLoss(
        l2=spec.l2, l1=spec.l1, scale=spec.cauchy_scale, label_bound=spec.label_bound
    )
