r"""Huber regression (Zhang, Zheng, Mou & Wang 2017, §4 experiments;
docs/adding-an-optimizer.md#losses-and-their-constants).

With the residual r = w·x − y, real labels under the declared public bound |y| ≤ B
(``label_bound``; the loader clips labels to [−B, B]), ‖x‖₂ ≤ 1 and threshold δ > 0
(``huber_delta``):

    h_δ(r) = r²/2             if |r| ≤ δ,
             δ|r| − δ²/2      otherwise,

and F(w) = (1/n) Σ h_δ(w·x_i − y_i) + (l2/2)‖w‖² (+ l1‖w‖₁ for proximal optimizers).

Constants (derivation). h_δ'(r) = clip(r, −δ, δ) and h_δ''(r) = 1 for |r| < δ, 0 outside.

- ∇ℓ = h_δ'(r) x, so ‖∇ℓ‖ ≤ δ ‖x‖ ≤ δ: **L = δ**, attained whenever |w·x − y| ≥ δ with
  ‖x‖ = 1. It does **not** depend on B nor on w: the Huber loss caps each row's pull at δ,
  whatever the label — unlike the squared loss, whose gradient (w·x − y)x grows with ‖w‖ and B
  and has no global Lipschitz constant.
- clip(·, −δ, δ) is 1-Lipschitz, so ‖∇ℓ(w) − ∇ℓ(w')‖ ≤ |x·(w − w')| ‖x‖ ≤ ‖w − w'‖:
  **β = 1**, attained with both residuals inside (−δ, δ), w − w' ∥ x and ‖x‖ = 1.
- h_δ is convex (h_δ' non-decreasing), so ℓ is **convex** and F is μ = l2 strongly convex.

B enters no constant; it is public metadata (the loader clips labels to it, and it scales the
natural guess of the optimum's norm). ``predict`` returns w·x unclipped.
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

__all__ = ["HuberRegressionLoss", "HuberRegressionSpec", "label_bound_field"]


def label_bound_field() -> float:
    """The required ``label_bound`` field of regression specs."""
    result: float = Field(
        gt=0.0,
        allow_inf_nan=False,
        description=(
            "B: the declared public bound on the label, |y| ≤ B. Required, because it is a "
            "public promise about the data: the loader clips every label to [−B, B] (how many "
            "were clipped is never released). Choose it from domain knowledge, not from the data."
        ),
    )
    return result


class HuberRegressionSpec(BaseModel):
    """Linear regression with the Huber loss h_δ(w·x − y) and a declared label bound."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["huber_regression"] = Field(
        description=(
            "Model family: linear regression with the Huber loss h_δ(w·x − y) "
            "(quadratic for |residual| ≤ δ, linear beyond); L = δ, β = 1, convex."
        )
    )
    l2: float = l2_field()
    l1: float = l1_field()
    fit_intercept: bool = fit_intercept_field()
    label_bound: float = label_bound_field()
    huber_delta: float = Field(
        default=1.0,
        gt=0.0,
        allow_inf_nan=False,
        description=(
            "δ: residuals up to δ are penalised quadratically, larger ones linearly. It is the "
            "Lipschitz constant L = δ, so the noise scales with δ; residuals are in label units."
        ),
    )


@dataclass
class HuberRegressionLoss(LinearModelLoss):
    """The regularised Huber-regression risk; L = δ, β = 1, convex (module docstring)."""

    delta: float = 1.0
    label_bound: float = 1.0
    name: str = field(default="huber_regression", init=False)
    task: Task = field(default="regression", init=False)
    smoothness: float = field(default=1.0, init=False)
    convex: bool = field(default=True, init=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive("huber_delta", self.delta)
        check_positive("label_bound", self.label_bound)
        self.lipschitz = float(self.delta)

    def phi(self, z: FloatArray, y: FloatArray) -> FloatArray:
        d = self.delta
        a = np.abs(z - y)
        out: FloatArray = np.where(a <= d, 0.5 * a * a, d * a - 0.5 * d * d)
        return out

    def dphi(self, z: FloatArray, y: FloatArray) -> FloatArray:
        out: FloatArray = np.clip(z - y, -self.delta, self.delta)
        return out


SPEC = HuberRegressionSpec


def build(spec: HuberRegressionSpec) -> HuberRegressionLoss:
    return HuberRegressionLoss(
        l2=spec.l2, l1=spec.l1, delta=spec.huber_delta, label_bound=spec.label_bound
    )
