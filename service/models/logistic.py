r"""Binary logistic regression: ℓ(w; x, y) = log(1 + exp(−y w·x)), y ∈ {−1, +1}, ‖x‖₂ ≤ 1,
optionally with the *clipped-slope* logistic loss (``gradient_clip`` C, 0 < C ≤ 1).

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

Clipped-slope logistic loss (``gradient_clip`` = C ∈ (0, 1]). The per-example loss becomes
ℓ_C(w; x, y) = h_C(y w·x) with

    h_C(m) = log(1 + e^{−m})                        for m ≥ m_C,
             −log(1 − C) − C (m − m_C)              for m < m_C,      m_C = log((1 − C)/C),

i.e. the logistic loss for m ≥ m_C and its tangent line at m_C below: m_C is the margin where
the logistic slope σ(−m) equals C (σ(−m_C) = 1/(1 + (1 − C)/C) = C), and
log(1 + e^{−m_C}) = log(1 + C/(1 − C)) = −log(1 − C). For C = 1, m_C = −∞: no clipping, exactly
the plain logistic loss (the code takes the plain path, bit for bit).

- Derivative: h_C'(m) = −σ(−m) on m ≥ m_C and −C on m < m_C. Since σ(−m) is decreasing in m,
  σ(−m) ≤ C exactly when m ≥ m_C, so h_C'(m) = −min(σ(−m), C) — continuous (both pieces give
  −C at m_C), so h_C is C¹. The per-example gradient is ∇ℓ_C = −y min(σ(−m), C) x: per-example
  clipping of the logistic coefficient at C, as DP-SGD clips per-example gradients (identical
  to clipping ‖∇ℓ‖ at C for unit-norm rows; for shorter rows the coefficient, not the norm, is
  clipped — which is what keeps ℓ_C a fixed loss of the margin). Because it *is* a loss, every
  optimizer's sensitivity analysis, which only uses the constants below, applies unchanged.
- Convex: h_C'(m) = max(−σ(−m), −C) is the maximum of a non-decreasing function (−σ(−m)) and
  a constant, hence non-decreasing; so h_C is convex, ℓ_C = h_C(y w·x) is convex in w (a convex
  function of a linear map), and F is μ = l2 strongly convex as before.
- **L = C**: ‖∇ℓ_C‖ = min(σ(−m), C) ‖x‖ ≤ C, with equality for every m ≤ m_C and ‖x‖ = 1
  (attained, not just approached, when C < 1).
- **β = c(1 − c) with c = min(C, 1/2)**, i.e. β = 1/4 for C ≥ 1/2 and β = C(1 − C) for
  C < 1/2. h_C' is continuous and piecewise C¹ with h_C'' = σ(m)σ(−m) on m > m_C and 0 on
  m < m_C, so its Lipschitz constant is sup_{m > m_C} σ(m)σ(−m). The function σ(m)σ(−m) peaks
  at m = 0 (value 1/4) and decreases in |m|. For C ≥ 1/2, m_C ≤ 0, the peak m = 0 lies in the
  logistic piece and β = 1/4 (attained at w·x = 0, ‖x‖ = 1, as without clipping). For C < 1/2,
  m_C > 0, and on m > m_C the maximum is at m ↓ m_C: σ(m_C)σ(−m_C) = (1 − C)·C < 1/4 (the
  right-hand second derivative at the kink). As before ‖∇ℓ_C(w) − ∇ℓ_C(w')‖ =
  |h_C'(m) − h_C'(m')| ‖x‖ ≤ β |x·(w − w')| ‖x‖ ≤ β ‖w − w'‖.
- Classification-calibrated: h_C is convex, differentiable at 0 and h_C'(0) = −min(1/2, C) < 0,
  so by Bartlett, Jordan & McAuliffe (2006), "Convexity, classification, and risk bounds",
  JASA 101, Theorem 6, minimising its risk still targets the sign of the Bayes classifier.
- 0 ≤ h_C ≤ log(1 + e^{−m}) (a tangent of a convex function lies below it, and h_C is
  decreasing and positive), so h_C(0) ≤ log 2 still bounds F(0) − inf F for the optimizers
  that ask for such a bound.

Why C = 1/2: it is the logistic loss's own slope at the decision boundary (σ(0) = 1/2, so
m_C = 0). Correctly classified rows (m ≥ 0) keep the exact logistic loss; misclassified rows get
its tangent at margin 0, log 2 − m/2 — a hinge-like linear penalty, so outliers pull half as hard.
The smoothness stays β = 1/4 while L halves (1/2 instead of 1): every optimizer's sensitivity,
which is proportional to L, halves, and so does the noise (for the same hyperparameters).

Centred coefficients (used by ``dp_agd_centred``). Every per-example gradient is c(w)·x with a
scalar coefficient c(w) = −y·min(σ(−y w·x), C) (C = 1 without clipping) that lies in an
interval fixed by the label: c(w) ∈ −y·[0, C]. Its midpoint −y·C/2 does not depend on w, and
it is a fixed multiple of the coefficient at w = 0, c(0) = −y·min(1/2, C):
−y·C/2 = κ·c(0) with **κ = C / (2·min(1/2, C))** (κ = 1/2 for C ≤ 1/2, C for C ≥ 1/2). Hence,
for every w and every admissible row,

    |c(w) − κ·c(0)| ≤ r  and  |κ·c(0)| = r,   with **r = C/2**,

so ∇F(w) − μw = (1/n) Σ (c_i(w) − κ c_i(0)) x_i + κ·(1/n) Σ c_i(0) x_i: a sum whose replace-one
sensitivity is 2r/n = C/n (half of the 2L/n = 2C/n of the whole gradient) plus κ times the
data gradient at 0, which does not depend on w at all and has the same sensitivity 2r/n.
:meth:`LogisticLoss.coefficient_anchor` returns (κ, r); a test probes both bounds.

``predict_proba`` is σ(w·x), the model's probability P(y = +1 | x) — calibrated only as far as
the (regularised, noised) fit is. With ``gradient_clip`` the fit minimises the clipped loss, not
the log-likelihood, so σ(w·x) is no longer the maximum-likelihood probability: only its sign
(≥ 1/2 or not) is calibrated; as a probability it is a score (in the population limit it is
overconfident outside [1 − C, C]).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from scipy.special import expit

from service.models.base import (
    CoefficientAnchor,
    FloatArray,
    LinearModelLoss,
    Task,
    fit_intercept_field,
    l1_field,
    l2_field,
)

__all__ = ["LogisticLoss", "LogisticRegressionSpec", "clip_margin", "clipped_smoothness"]


class LogisticRegressionSpec(BaseModel):
    """Binary logistic regression (labels mapped to −1/+1 by the dataset's label spec)."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["logistic_regression"] = Field(
        description=(
            "Model family: binary logistic regression, loss log(1 + exp(−y w·x)) "
            "(with a clipped slope when gradient_clip is set)."
        )
    )
    l2: float = l2_field()
    l1: float = l1_field()
    fit_intercept: bool = fit_intercept_field()
    gradient_clip: float | None = Field(
        default=None,
        gt=0.0,
        le=1.0,
        allow_inf_nan=False,
        description=(
            "C in (0, 1]: clip each row's logistic gradient coefficient σ(−y w·x) at C, as "
            "DP-SGD clips per-example gradients, expressed as a convex loss (the logistic loss "
            "for margins y w·x ≥ log((1 − C)/C), its tangent line below). The Lipschitz "
            "constant becomes L = C, so the optimizers' sensitivities, and the noise calibrated "
            "to them, scale by C; smoothness β = C(1 − C) for C < 1/2, else 1/4. C = 0.5 keeps "
            "the exact logistic loss on correctly classified rows and halves the noise. The "
            "sign of w·x stays calibrated; predicted probabilities are no longer "
            "maximum-likelihood ones. Default: no clipping (same as 1)."
        ),
    )


def clip_margin(clip: float) -> float:
    """m_C = log((1 − C)/C): the margin where the logistic slope σ(−m) equals C (−∞ at C = 1)."""
    if clip >= 1.0:
        return -math.inf
    return math.log1p(-clip) - math.log(clip)


def clipped_smoothness(clip: float) -> float:
    """β of the clipped-slope logistic loss: c(1 − c) with c = min(C, 1/2) (1/4 for C ≥ 1/2)."""
    c = min(clip, 0.5)
    return c * (1.0 - c)


def _check_clip(clip: float | None) -> None:
    if clip is not None and not (math.isfinite(clip) and 0.0 < clip <= 1.0):
        raise ValueError("gradient_clip must be a number in (0, 1]")


@dataclass
class LogisticLoss(LinearModelLoss):
    """The regularised logistic risk; implements :class:`service.models.base.Loss`.

    Assumes rows with ‖x‖₂ ≤ 1 and labels in {−1, +1}; guarantees L = 1, β = 1/4 for the
    per-example loss and μ = ``l2`` strong convexity of F (see the module docstring). With
    ``gradient_clip`` = C < 1 the per-example loss is the clipped-slope logistic loss:
    L = C, β = c(1 − c) with c = min(C, 1/2), still convex.
    """

    gradient_clip: float | None = None
    #: The rows' last column is the intercept's constant (the spec's ``fit_intercept``): what
    #: ``dp_agd_averaged``'s row map needs (``service/optimizers/kits/dp_agd_row_map.py``).
    fit_intercept: bool = False
    name: str = field(default="logistic_regression", init=False)
    task: Task = field(default="classification", init=False)
    lipschitz: float = field(default=1.0, init=False)
    smoothness: float = field(default=0.25, init=False)
    convex: bool = field(default=True, init=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_clip(self.gradient_clip)
        clip = 1.0 if self.gradient_clip is None else float(self.gradient_clip)
        self.lipschitz, self.smoothness = clip, clipped_smoothness(clip)

    @property
    def _clip(self) -> float | None:
        """C when it actually clips (C < 1); None for the plain logistic loss."""
        c = self.gradient_clip
        return None if c is None or c >= 1.0 else float(c)

    @staticmethod
    def _clipped_of_neg_margin(t: FloatArray, clip: float) -> FloatArray:
        """h_C(−t) for t = −m (overflow-free): logaddexp(0, t) for t ≤ −m_C, the tangent
        line −log(1 − C) + C (t + m_C) above."""
        m_c = clip_margin(clip)
        line = clip * (t + m_c)
        line -= math.log1p(-clip)
        out: FloatArray = np.where(t > -m_c, line, np.logaddexp(0.0, t))
        return out

    def phi(self, z: FloatArray, y: FloatArray) -> FloatArray:
        """log(1 + exp(−y z)), overflow-free; with C < 1, h_C(y z) (module docstring)."""
        clip = self._clip
        if clip is None:
            out: FloatArray = np.logaddexp(0.0, -y * z)
            return out
        return self._clipped_of_neg_margin(-y * z, clip)

    def dphi(self, z: FloatArray, y: FloatArray) -> FloatArray:
        """−y σ(−y z); with C < 1, −y min(σ(−y z), C)."""
        clip = self._clip
        slope = expit(-y * z)
        if clip is not None:
            np.minimum(slope, clip, out=slope)
        out: FloatArray = -y * slope
        return out

    def smooth_value(self, w: FloatArray, X: FloatArray, y: FloatArray) -> float:
        """F(w) = mean(log(1 + exp(−y Xw))) + (l2/2)‖w‖², overflow-free via logaddexp
        (mean(h_C(y Xw)) with C < 1)."""
        margins = X @ w
        margins *= -y
        clip = self._clip
        if clip is None:
            data = float(np.mean(np.logaddexp(0.0, margins)))
        else:
            data = float(np.mean(self._clipped_of_neg_margin(margins, clip)))
        return data + 0.5 * self.l2 * float(w @ w)

    def gradient(self, w: FloatArray, X: FloatArray, y: FloatArray) -> FloatArray:
        """∇F(w) = −(1/n) Xᵀ (y ⊙ σ(−y ⊙ Xw)) + l2·w; with C < 1 the coefficient is
        min(σ(−y ⊙ Xw), C). σ(t) = (1 + tanh(t/2))/2: overflow-free, within 2⁻⁵² of scipy's
        expit in absolute terms, and 3–4× faster (it runs once per full-gradient pass)."""
        n = X.shape[0]
        coef = X @ w
        np.multiply(coef, y, out=coef)  # y = ±1 and 0.5 scale exactly: no temporary for −y/2
        coef *= -0.5
        np.tanh(coef, out=coef)
        coef += 1.0
        coef *= 0.5
        clip = self._clip
        if clip is not None:
            np.minimum(coef, clip, out=coef)
        coef *= y
        grad: FloatArray = X.T @ coef
        grad *= -1.0 / n
        if self.l2:
            grad += self.l2 * w
        return grad

    def coefficient_anchor(self) -> CoefficientAnchor:
        """(κ, r) of the module docstring's "Centred coefficients": for every w and every row,
        |c(w) − κ·c(0)| ≤ r and |κ·c(0)| ≤ r, where ∇ℓ(w; x, y) = c(w)·x."""
        clip = 1.0 if self.gradient_clip is None else float(self.gradient_clip)
        return CoefficientAnchor(scale=clip / (2.0 * min(0.5, clip)), half_width=clip / 2.0)

    def predict_proba(self, w: FloatArray, X: FloatArray) -> FloatArray:
        """P(y = +1 | x) = σ(w·x) for each row. With ``gradient_clip`` this is a score whose
        sign (≥ 1/2 or not) is calibrated, not the maximum-likelihood probability."""
        out: FloatArray = expit(X @ w)
        return out


SPEC = LogisticRegressionSpec


def build(spec: LogisticRegressionSpec) -> LogisticLoss:
    return LogisticLoss(
        l2=spec.l2,
        l1=spec.l1,
        gradient_clip=spec.gradient_clip,
        fit_intercept=spec.fit_intercept,
    )
