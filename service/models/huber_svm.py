r"""Huber SVM: the hinge loss smoothed over a band of width 2h — the "Huber loss" of the SVM
application in Chaudhuri, Monteleoni & Sarwate (2011), "Differentially private empirical risk
minimization", JMLR 12.

With the margin z = y w·x, y ∈ {−1, +1}, ‖x‖₂ ≤ 1 and width h > 0:

    φ(z) = 0                        if z > 1 + h,
           (1 + h − z)² / (4h)      if |1 − z| ≤ h,
           1 − z                    if z < 1 − h,

a C¹ piecewise quadratic that tends to the hinge max(0, 1 − z) as h → 0. Objective (per-row
averaged, as for every loss here): F(w) = (1/n) Σ φ(y_i w·x_i) + (l2/2)‖w‖² (+ l1‖w‖₁ for
proximal optimizers).

Constants (derivation). φ'(z) = −clip((1 + h − z)/(2h), 0, 1) ∈ [−1, 0] (continuous: −1 at
z = 1 − h, 0 at z = 1 + h) and φ''(z) = 1/(2h) on the band |1 − z| < h, 0 outside.

- ∇ℓ = φ'(z) y x, so ‖∇ℓ‖ ≤ |φ'| ‖x‖ ≤ 1: **L = 1**, attained for every z ≤ 1 − h with
  ‖x‖ = 1 (e.g. at w = 0 when h ≤ 1).
- φ' is (1/(2h))-Lipschitz (piecewise linear with slopes 0, 1/(2h), 0), so
  ‖∇ℓ(w) − ∇ℓ(w')‖ = |φ'(z) − φ'(z')| ‖x‖ ≤ (1/(2h)) |x·(w − w')| ‖x‖ ≤ (1/(2h)) ‖w − w'‖:
  **β = 1/(2h)**, attained inside the band with w − w' ∥ x and ‖x‖ = 1. Default h = 0.5 gives
  β = 1, as in Chaudhuri et al.'s experiments.
- φ is convex (φ'' ≥ 0, φ' non-decreasing), hence ℓ is **convex**, and F is μ = l2 strongly
  convex.

``predict_proba`` returns the score clip((1 + w·x)/2, 0, 1): the margin mapped linearly from
[−1, 1] onto [0, 1] (0 and 1 where the hinge would be fully "sure"), ≥ 1/2 exactly when
w·x ≥ 0. It is monotone in the margin but **not a calibrated probability** — the SVM loss does
not model P(y | x).
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

__all__ = ["HuberSVMLoss", "HuberSVMSpec"]


class HuberSVMSpec(BaseModel):
    """Linear SVM with the Huber-smoothed hinge loss (labels mapped to −1/+1)."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["huber_svm"] = Field(
        description=(
            "Model family: linear SVM with the Huber (smoothed) hinge loss of Chaudhuri, "
            "Monteleoni & Sarwate (2011); L = 1, β = 1/(2·huber_width), convex."
        )
    )
    l2: float = l2_field()
    l1: float = l1_field()
    fit_intercept: bool = fit_intercept_field()
    huber_width: float = Field(
        default=0.5,
        gt=0.0,
        allow_inf_nan=False,
        description=(
            "h: the hinge is replaced by a quadratic on margins within h of 1. Smaller h is "
            "closer to the hinge but less smooth (β = 1/(2h)), which forces smaller steps."
        ),
    )


@dataclass
class HuberSVMLoss(LinearModelLoss):
    """The regularised Huber-SVM risk; L = 1, β = 1/(2h), convex (see the module docstring)."""

    width: float = 0.5
    name: str = field(default="huber_svm", init=False)
    task: Task = field(default="classification", init=False)
    lipschitz: float = field(default=1.0, init=False)
    convex: bool = field(default=True, init=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive("huber_width", self.width)
        self.smoothness = 1.0 / (2.0 * self.width)

    def phi(self, z: FloatArray, y: FloatArray) -> FloatArray:
        h = self.width
        m = y * z
        # u = 1 + h − m, the distance below the top of the band: φ = u²/(4h) on 0 ≤ u ≤ 2h
        u = (1.0 + h) - m
        out: FloatArray = np.where(
            u <= 0.0, 0.0, np.where(u >= 2.0 * h, 1.0 - m, u * u / (4.0 * h))
        )
        return out

    def dphi(self, z: FloatArray, y: FloatArray) -> FloatArray:
        h = self.width
        slope = np.clip(((1.0 + h) - y * z) / (2.0 * h), 0.0, 1.0)
        out: FloatArray = -y * slope
        return out

    def predict_proba(self, w: FloatArray, X: FloatArray) -> FloatArray:
        """Score clip((1 + w·x)/2, 0, 1) for y = +1 — monotone, **not** a calibrated
        probability (see the module docstring)."""
        out: FloatArray = np.clip(0.5 * (1.0 + X @ w), 0.0, 1.0)
        return out


SPEC = HuberSVMSpec


def build(spec: HuberSVMSpec) -> HuberSVMLoss:
    return HuberSVMLoss(l2=spec.l2, l1=spec.l1, width=spec.huber_width)
