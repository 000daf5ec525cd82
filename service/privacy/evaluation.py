r"""Private evaluation of a released model: one Gaussian release of metric sums.

The evaluated model w is public (it was released); the evaluation dataset S holds n rows
(n public). Every metric is a sum over rows of a per-row statistic that depends on that row
only (and on the public w), so replacing one row changes each sum by a bounded amount.

Released vector (one Gaussian mechanism, N(0, σ² I) on every coordinate):

- **binary labels**: the confusion-matrix cells c = (TP, FN, FP, TN) (counts, positive class =
  the label spec's ``positive``; predicted positive iff the model's score w·x ≥ 0), and the sum
  of per-row log-losses clipped to [0, B], divided by B:  u = (c, Σ_i min(ℓ_i, B)/B).
  Replace-one moves one row from one cell to another (c changes by e_a − e_b: L1 ≤ 2,
  L2 ≤ √2) and changes the scaled loss sum by at most 1 (both rows' terms lie in [0, 1]).
  So ‖u(S) − u(S')‖₂ ≤ √(2 + 1) = √3 =: Δ.
- **categorical labels** (one-vs-rest models): u = (#correct, #wrong): one row moves between
  the two (Δ = √2). (No log-loss: one-vs-rest scores are not one probability model.)
- **numeric labels** (regression): u = (Σ_i min((w·x_i − y_i)², B)/B), Δ = 1.

Clip B (public, data-free). Rows satisfy ‖x‖₂ ≤ 1 (the loader enforces the declared bounds),
so |w·x| ≤ ‖w‖₂ for every possible row, and a logistic loss log(1 + e^{−y w·x}) never exceeds
B_max = log(1 + e^{‖w‖₂}); a squared error never exceeds B_max = (‖w‖₂ + b)² with b the
declared label bound |y| ≤ b. With the default B = B_max the clip never binds (the metric is
exact before noise); an analyst may declare a smaller B (``loss_clip``) to lower the noise on
that coordinate, at the price of a bias towards smaller losses that only affects rows whose
loss exceeds B. Either way B is chosen before any row is read.

Noise and accounting. σ = z·Δ with z the smallest noise multiplier of one Gaussian release at
(ε, δ) (exact analytic Gaussian, :func:`service.privacy.gdp.gaussian_steps_multiplier` with
one step), i.e. the release is exactly (1/z)-GDP, and the ledger charges
``GaussianDpEvent(z)`` under REPLACE_ONE (the noise multiplier is σ/Δ with Δ the replace-one
sensitivity computed here, as every dpfit plan hands it to the accountant).

Post-processing (free): the cells' sum is the public n, so the noised cells are projected on
{Σ c = n} (the least-squares projection, subtracting (Σ c̃ − n)/k from each of the k cells),
which divides the noise of any linear statistic of the cells by at most as much; accuracy =
(TP + TN)/n, mean loss = B·u_loss/n. Released values are not clamped further (a noised count
may be negative; clamping would hide the noise level, which is public anyway).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from dp_accounting import dp_event

from service.privacy.gdp import gaussian_steps_multiplier

__all__ = [
    "EvaluationKind",
    "accuracy_std",
    "EvaluationPlan",
    "loss_clip_bound",
    "metric_sums",
    "plan_evaluation",
    "release_metrics",
]

EvaluationKind = Literal["binary", "categorical", "regression"]

SENSITIVITY: dict[EvaluationKind, float] = {
    "binary": math.sqrt(3.0),
    "categorical": math.sqrt(2.0),
    "regression": 1.0,
}


@dataclass(frozen=True)
class EvaluationPlan:
    """Everything about an evaluation's release fixed before the data is read."""

    kind: EvaluationKind
    n: int
    loss_clip: float | None
    sensitivity: float
    noise_multiplier: float

    @property
    def noise_scale(self) -> float:
        """σ of each released coordinate (in the units of the vector ``u``)."""
        return self.noise_multiplier * self.sensitivity

    @property
    def event(self) -> dp_event.DpEvent:
        return dp_event.GaussianDpEvent(self.noise_multiplier)


def loss_clip_bound(kind: EvaluationKind, weight_norm: float, label_bound: float | None) -> float:
    """B_max of the module docstring: the largest per-row loss any row within the declared
    bounds can have under the released model (log(1 + e^{‖w‖}) or (‖w‖ + b)²)."""
    if kind == "binary":
        return float(np.logaddexp(0.0, weight_norm))
    if kind == "regression":
        if label_bound is None:
            raise ValueError("a regression evaluation needs the declared label bound")
        return (weight_norm + label_bound) ** 2
    raise ValueError(f"no loss clip for {kind} evaluations")


def plan_evaluation(
    kind: EvaluationKind, n: int, epsilon: float, delta: float, loss_clip: float | None
) -> EvaluationPlan:
    """Calibrate the release for (ε, δ); δ must be positive (Gaussian noise)."""
    if delta <= 0:
        raise ValueError("a private evaluation adds Gaussian noise and needs δ > 0")
    if kind != "categorical" and not (loss_clip is not None and loss_clip > 0):
        raise ValueError("the loss clip must be positive")
    z = gaussian_steps_multiplier(1, epsilon, delta)
    return EvaluationPlan(
        kind=kind,
        n=n,
        loss_clip=None if kind == "categorical" else loss_clip,
        sensitivity=SENSITIVITY[kind],
        noise_multiplier=z,
    )


def metric_sums(
    plan: EvaluationPlan, scores: np.ndarray, y: np.ndarray
) -> np.ndarray:
    """The noiseless vector u of the module docstring.

    ``scores``: binary — the margins w·x (positive class iff ≥ 0), ``y`` in {−1, +1};
    categorical — the predicted class index per row, ``y`` the true index;
    regression — the predictions w·x, ``y`` the (bounded) labels.
    Each row's contribution depends on that row only.
    """
    if plan.kind == "binary":
        predicted = scores >= 0.0
        actual = y > 0
        tp = float(np.sum(predicted & actual))
        fn = float(np.sum(~predicted & actual))
        fp = float(np.sum(predicted & ~actual))
        tn = float(np.sum(~predicted & ~actual))
        assert plan.loss_clip is not None
        losses = np.minimum(np.logaddexp(0.0, -y * scores), plan.loss_clip)
        return np.array([tp, fn, fp, tn, float(losses.sum()) / plan.loss_clip])
    if plan.kind == "categorical":
        correct = float(np.sum(scores == y))
        return np.array([correct, float(len(y)) - correct])
    assert plan.loss_clip is not None
    errors = np.minimum((scores - y) ** 2, plan.loss_clip)
    return np.array([float(errors.sum()) / plan.loss_clip])


def release_metrics(
    plan: EvaluationPlan, sums: np.ndarray, rng: np.random.Generator | None
) -> dict[str, object]:
    """Noise ``sums`` once (σ = ``plan.noise_scale``; ``rng=None`` switches the noise off, for
    the sensitivity tests only) and derive the released metrics by post-processing."""
    noised = np.asarray(sums, dtype=float).copy()
    if rng is not None:
        noised = noised + rng.normal(0.0, plan.noise_scale, size=noised.shape)
    n = float(plan.n)
    if plan.kind == "binary":
        cells = noised[:4] - (float(noised[:4].sum()) - n) / 4.0
        tp, fn, fp, tn = (float(c) for c in cells)
        assert plan.loss_clip is not None
        return {
            "accuracy": (tp + tn) / n,
            "log_loss": plan.loss_clip * float(noised[4]) / n,
            "confusion_matrix": {
                "true_positive": tp,
                "false_negative": fn,
                "false_positive": fp,
                "true_negative": tn,
            },
        }
    if plan.kind == "categorical":
        cells = noised - (float(noised.sum()) - n) / 2.0
        return {"accuracy": float(cells[0]) / n}
    assert plan.loss_clip is not None
    return {"mean_squared_error": plan.loss_clip * float(noised[0]) / n}


def accuracy_std(plan: EvaluationPlan) -> float:
    """The released accuracy's noise standard deviation (public, from the plan only): the
    accuracy is a·c̃/n for the projected cells, whose noise is σ·‖a − (Σa/k)·1‖/n (σ/n for
    binary labels: the projection halves the variance of TP + TN; σ/(√2 n) for categorical)."""
    if plan.kind == "regression":
        raise ValueError("regression evaluations release no accuracy")
    k = 4 if plan.kind == "binary" else 2
    # a = (e_TP + e_TN) for binary, e_correct for categorical; projected: a − (Σa/k)·1.
    a = np.zeros(k)
    if plan.kind == "binary":
        a[0] = a[3] = 1.0
    else:
        a[0] = 1.0
    projected = a - a.sum() / k
    return plan.noise_scale * float(np.linalg.norm(projected)) / plan.n
