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
- **categorical labels** (``multiclass``, K declared classes): u = (#correct, #wrong, c) with
  c the (K + 1) × K confusion matrix flattened — c[a, b] counts the rows of true class a
  predicted as b, and row K the rows whose label is none of the declared classes (never
  correct), so every row is in exactly one cell and Σ c = n. Replace-one moves one row from
  one cell to another (c changes by e_a − e_b or not at all: ‖·‖₂ ≤ √2) and at most from
  correct to wrong or back (the pair changes by ±(1, −1): ‖·‖₂ ≤ √2), so
  ‖u(S) − u(S')‖₂ ≤ √(2 + 2) = 2 =: Δ, attained by a row of class a predicted a replaced by a
  row of class a predicted b ≠ a. The pair is a function of c, but releasing it beside c is
  what keeps the accuracy sharp: from the pair its std is σ/(√2·n) = √2·z/n; from the
  diagonal of c alone it would be σ'·K/√(K + 1)/n with σ' = √2·z (Δ = √2 for c alone), i.e.
  z·√2·K/√(K + 1)/n — 1.5× worse at K = 3, 3× at K = 10. (No log-loss: one-vs-rest scores are
  not one probability model.)
- **categorical labels of many classes** (``categorical``, K > :data:`MAX_CONFUSION_CLASSES`):
  u = (#correct, #wrong) alone, Δ = √2 (the pair's move above), so the accuracy's std is
  σ/(√2·n) = z/n. The matrix's (K + 1)·K cells are each drawn, stored and served: at the
  label's cap of 10,000 classes that is 10⁸ noised cells (measured: a worker passed 8 GB and
  was killed twice, after the charge). K is public, so the choice is made at planning and the
  plan says so (:func:`confusion_warnings`). Plans stored before the multiclass kind existed
  were of this kind too, and are still run as they were charged.
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

Post-processing of the noised release ``ũ = u + N(0, σ² I)`` (:func:`feasible_metrics`). It
costs no privacy: it is a fixed, data-free function of ũ and of public facts only (n, B, the
kind), and any function of an (ε, δ)-DP output is (ε, δ)-DP. Two stages:

1. *Unconstrained least-squares estimates* (:func:`unconstrained_metrics`, unbiased, may be
   infeasible): the cells' sum is the public n, so the noised cells are projected on the
   hyperplane {Σ c = n} (subtracting (Σ c̃ − n)/k from each of the k cells); accuracy =
   (TP + TN)/n (binary) or correct/n (categorical), mean loss = B·ũ_loss/n.
2. *Feasible estimates* (what is released): the cells are projected (Euclidean) on the scaled
   simplex {c ≥ 0, Σ c = n} — the least-squares estimate among the confusion matrices that can
   exist (:func:`project_to_simplex`, sort-based, O(k log k)); it equals stage 1 whenever stage
   1 is already feasible, and accuracy = (TP + TN)/n of the projected cells lies in [0, 1]. The
   mean losses (log-loss, mean squared error) are clamped to [0, B], the interval every mean of
   per-row losses clipped to [0, B] lies in.

The feasible values are biased near the edges of the feasible set (a true accuracy of 1 is
never overestimated, so on average it is underestimated; a true mean loss near 0 is on average
overestimated). They are still the better estimate for a user: the projection on a convex set
that contains the truth is non-expansive, so the released cells are never farther (in L2) from
the true cells than the stage-1 cells, and a clamped loss is never farther from the true loss
than the unclamped one (so its root-mean-square error is at most the stated std); and a release
is never a value no dataset could have (a negative count, an accuracy above 1, a negative mean
squared error). Only the feasible values are released; aggregating many evaluations without
bias would need the stage-1 values, which dpfit does not release.

Stated standard deviations (:func:`metric_stds`, public, from the plan only; they go into the
plan's ``hyperparameters``): the noise std of each stage-1 estimate — the released value's
std wherever the projection or clamp does not bind (a metric many stds inside its range), and
an upper bound on a clamped loss's root-mean-square error everywhere. With σ = ``noise_scale``:

- ``accuracy_std`` = σ·‖a − (Σa/k)·1‖₂/n for the accuracy a·c/n of the hyperplane-projected
  cells: σ/n (binary, a = e_TP + e_TN; the projection halves the variance of TP + TN) and
  σ/(√2·n) (categorical, a = e_correct);
- ``confusion_matrix_std`` (binary, each cell): σ·√(1 − 1/4) = σ·√3/2; multiclass, each of
  the m = (K + 1)·K cells: σ·√(1 − 1/m);
- ``log_loss_std`` (binary) and ``mean_squared_error_std`` (regression): B·σ/n.

Warning (:func:`metric_warnings`, public facts only): a mean loss is useless when its noise is
wide compared with the losses worth telling apart. Any model worth evaluating has a mean loss
of at most the trivial predictor's (w = 0): log 2 for log-loss, and for squared error at most
b² (predicting 0 when |y| ≤ b; mean y² ≤ b²). With R = min(B, that reference), the plan warns
when the metric's std is at least R/4, i.e. when its ±2-std interval (≈ 95 %) is as wide as
the whole range [0, R]: it cannot tell a perfect model from a trivial one. For squared error
against b² the reference is loose — a declared bound is rarely filled (labels of spread 140
under b = 700 have mean y² ≈ b²/25), so the plan warns from b²/100 there: a newcomer's
released MSE 78,124 ± 76,923 (exact 114, label variance 2·10⁴, b = 700) passed the b²/4 rule
silently. The usual cause is the default B (the worst case over every row the bounds allow),
far above typical losses; the warning suggests declaring a smaller ``loss_clip`` (or spending
more ε).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final, Literal

import numpy as np
from dp_accounting import dp_event

from service.privacy.gdp import gaussian_steps_multiplier
from service.privacy.secure_random import SecureRandom, as_secure
from service.privacy.secure_release import secure_gaussian

__all__ = [
    "SENSITIVITY",
    "WITHOUT_LOSS",
    "EvaluationKind",
    "EvaluationPlan",
    "MAX_CONFUSION_CLASSES",
    "accuracy_std",
    "categorical_kind",
    "confusion_warnings",
    "feasible_metrics",
    "loss_clip_bound",
    "metric_stds",
    "metric_sums",
    "metric_warnings",
    "noised_sums",
    "plan_evaluation",
    "project_to_simplex",
    "release_metrics",
    "unconstrained_metrics",
]

EvaluationKind = Literal["binary", "categorical", "multiclass", "regression"]

SENSITIVITY: dict[EvaluationKind, float] = {
    "binary": math.sqrt(3.0),
    "categorical": math.sqrt(2.0),
    "multiclass": 2.0,
    "regression": 1.0,
}

#: Kinds whose release has no loss (and so no loss clip).
WITHOUT_LOSS = frozenset({"categorical", "multiclass"})

#: Most declared classes whose evaluation releases the confusion matrix ((K + 1)·K noised
#: cells: 65,792 at 256, about 1.4 MB of JSON); above it, accuracy alone (module docstring).
MAX_CONFUSION_CLASSES: Final = 256


def categorical_kind(classes: int) -> EvaluationKind:
    """The release for a categorical label of ``classes`` declared classes (public): accuracy
    and the confusion matrix up to :data:`MAX_CONFUSION_CLASSES`, accuracy alone above."""
    return "multiclass" if classes <= MAX_CONFUSION_CLASSES else "categorical"


def confusion_warnings(classes: int) -> list[str]:
    """The plan's public sentence when a categorical label's evaluation leaves the confusion
    matrix out (:func:`categorical_kind`); none otherwise."""
    if categorical_kind(classes) == "multiclass":
        return []
    cells = (classes + 1) * classes
    return [
        f"this label declares {classes} classes, more than {MAX_CONFUSION_CLASSES}: the "
        f"evaluation releases accuracy alone (a confusion matrix would be {cells:,} noised "
        "cells)."
    ]


@dataclass(frozen=True)
class EvaluationPlan:
    """Everything about an evaluation's release fixed before the data is read."""

    kind: EvaluationKind
    n: int
    loss_clip: float | None
    sensitivity: float
    noise_multiplier: float
    classes: int | None = None  # K, for a multiclass release (public: the declared classes)

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
    kind: EvaluationKind,
    n: int,
    epsilon: float,
    delta: float,
    loss_clip: float | None,
    classes: int | None = None,
) -> EvaluationPlan:
    """Calibrate the release for (ε, δ); δ must be positive (Gaussian noise). ``classes``: the
    declared K of a multiclass release."""
    if delta <= 0:
        raise ValueError("a private evaluation adds Gaussian noise and needs δ > 0")
    if kind not in WITHOUT_LOSS and not (loss_clip is not None and loss_clip > 0):
        raise ValueError("the loss clip must be positive")
    if kind == "multiclass" and not (classes is not None and classes >= 2):
        raise ValueError("a multiclass evaluation needs the label's declared classes")
    z = gaussian_steps_multiplier(1, epsilon, delta)
    return EvaluationPlan(
        kind=kind,
        n=n,
        loss_clip=None if kind in WITHOUT_LOSS else loss_clip,
        sensitivity=SENSITIVITY[kind],
        noise_multiplier=z,
        classes=classes if kind == "multiclass" else None,
    )


def metric_sums(plan: EvaluationPlan, scores: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The noiseless vector u of the module docstring.

    ``scores``: binary — the margins w·x (positive class iff ≥ 0), ``y`` in {−1, +1};
    categorical / multiclass — the predicted class index per row, ``y`` the true index (−1: none
    of the declared classes);
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
    if plan.kind == "multiclass":
        assert plan.classes is not None
        k = plan.classes
        truth = np.where(y >= 0, y, k).astype(np.int64)  # row K: no declared class
        cells = np.bincount(truth * k + scores.astype(np.int64), minlength=(k + 1) * k)
        correct = float(np.sum(scores == y))
        return np.concatenate([[correct, float(len(y)) - correct], cells.astype(float)])
    assert plan.loss_clip is not None
    errors = np.minimum((scores - y) ** 2, plan.loss_clip)
    return np.array([float(errors.sum()) / plan.loss_clip])


def noised_sums(plan: EvaluationPlan, sums: np.ndarray, rng: SecureRandom | None) -> np.ndarray:
    """ũ: ``sums`` plus N(0, σ²) on every coordinate (σ = ``plan.noise_scale``) — the one
    Gaussian release, made exactly (:func:`~service.privacy.secure_release.secure_gaussian`:
    grid + discrete Gaussian, μ ≤ Δ/σ). ``rng=None`` switches the noise off (tests only)."""
    noised = np.asarray(sums, dtype=float).copy()
    if rng is not None:
        noised = secure_gaussian(noised, plan.noise_scale, plan.sensitivity, as_secure(rng))
    return noised


def project_to_simplex(v: np.ndarray, total: float) -> np.ndarray:
    """The Euclidean projection of ``v`` on {c ≥ 0, Σ c = total} (``total`` > 0): c = max(v − τ,
    0) with the one τ making the sum ``total`` (sort-based: Held, Wolfe and Crowder 1974;
    Duchi et al. 2008). Equals the hyperplane projection v − (Σv − total)/k whenever that is
    already non-negative. Post-processing of public or released values only."""
    v = np.asarray(v, dtype=float)
    k = v.size
    shifted = v - (float(v.sum()) - total) / k  # the hyperplane projection
    if float(shifted.min()) >= 0.0:
        return shifted
    u = np.sort(v)[::-1]
    css = np.cumsum(u) - total
    j = np.arange(1, k + 1)
    rho = int(np.nonzero(u - css / j > 0)[0][-1]) + 1
    tau = float(css[rho - 1]) / rho
    projected = np.maximum(v - tau, 0.0)
    # the active cells sum to ``total`` up to rounding; put the rounding on the largest cell
    projected[int(np.argmax(projected))] += total - float(projected.sum())
    return projected


def unconstrained_metrics(plan: EvaluationPlan, noised: np.ndarray) -> dict[str, object]:
    """Stage 1 of the module docstring: the least-squares estimates from ũ (unbiased; may lie
    outside the feasible set — a negative count, an accuracy above 1). Not released."""
    n = float(plan.n)
    if plan.kind == "binary":
        c = noised[:4]
        tp, fn, fp, tn = (float(x) for x in c - (float(c.sum()) - n) / 4.0)
        assert plan.loss_clip is not None
        return _binary_metrics(
            (tp + tn) / n, plan.loss_clip * float(noised[4]) / n, (tp, fn, fp, tn)
        )
    if plan.kind in WITHOUT_LOSS:
        pair = noised[:2]
        out: dict[str, object] = {"accuracy": float(pair[0] - (float(pair.sum()) - n) / 2.0) / n}
        if plan.kind == "multiclass":
            cells = noised[2:]
            out.update(_matrix_metrics(plan, cells - (float(cells.sum()) - n) / cells.size))
        return out
    assert plan.loss_clip is not None
    return {"mean_squared_error": plan.loss_clip * float(noised[0]) / n}


def _matrix_metrics(plan: EvaluationPlan, cells: np.ndarray) -> dict[str, object]:
    """The released fields of a multiclass confusion matrix ((K + 1)·K cells, row K: rows of no
    declared class): ``confusion_matrix`` (K × K, rows true class, columns predicted, in the
    label's declared order) and ``undeclared_label_predictions`` (row K)."""
    assert plan.classes is not None
    matrix = np.asarray(cells, dtype=float).reshape(plan.classes + 1, plan.classes)
    return {
        "confusion_matrix": matrix[:-1].tolist(),
        "undeclared_label_predictions": matrix[-1].tolist(),
    }


def _binary_metrics(
    accuracy: float, log_loss: float, cells: tuple[float, float, float, float]
) -> dict[str, object]:
    """The released fields of a binary evaluation (cells: TP, FN, FP, TN)."""
    tp, fn, fp, tn = cells
    return {
        "accuracy": accuracy,
        "log_loss": log_loss,
        "confusion_matrix": {
            "true_positive": tp,
            "false_negative": fn,
            "false_positive": fp,
            "true_negative": tn,
        },
    }


def feasible_metrics(plan: EvaluationPlan, noised: np.ndarray) -> dict[str, object]:
    """Stage 2 of the module docstring — what is released: the cells projected on the scaled
    simplex {c ≥ 0, Σ c = n}, accuracy from them (in [0, 1]), mean losses clamped to [0, B].
    Free post-processing of ũ and public facts."""
    n = float(plan.n)
    if plan.kind == "binary":
        tp, fn, fp, tn = (float(x) for x in project_to_simplex(noised[:4], n))
        assert plan.loss_clip is not None
        loss = plan.loss_clip * float(noised[4]) / n
        return _binary_metrics(
            min(max((tp + tn) / n, 0.0), 1.0),  # rounding only
            min(max(loss, 0.0), plan.loss_clip),
            (tp, fn, fp, tn),
        )
    if plan.kind in WITHOUT_LOSS:
        correct = float(project_to_simplex(noised[:2], n)[0])
        out: dict[str, object] = {"accuracy": min(max(correct / n, 0.0), 1.0)}
        if plan.kind == "multiclass":
            out.update(_matrix_metrics(plan, project_to_simplex(noised[2:], n)))
        return out
    assert plan.loss_clip is not None
    error = plan.loss_clip * float(noised[0]) / n
    return {"mean_squared_error": min(max(error, 0.0), plan.loss_clip)}


def release_metrics(
    plan: EvaluationPlan, sums: np.ndarray, rng: SecureRandom | None
) -> dict[str, object]:
    """Noise ``sums`` once (σ = ``plan.noise_scale``; ``rng=None`` switches the noise off, for
    the tests only) and derive the released metrics by post-processing
    (:func:`feasible_metrics`)."""
    return feasible_metrics(plan, noised_sums(plan, sums, rng))


def accuracy_std(plan: EvaluationPlan) -> float:
    """The stage-1 accuracy's noise standard deviation (public, from the plan only): the
    accuracy is a·c̃/n for the projected cells, whose noise is σ·‖a − (Σa/k)·1‖/n (σ/n for
    binary labels: the projection halves the variance of TP + TN; σ/(√2 n) for categorical)."""
    if plan.kind == "regression":
        raise ValueError("regression evaluations release no accuracy")
    k = 4 if plan.kind == "binary" else 2  # categorical, multiclass: the (correct, wrong) pair
    # a = (e_TP + e_TN) for binary, e_correct for categorical; projected: a − (Σa/k)·1.
    a = np.zeros(k)
    if plan.kind == "binary":
        a[0] = a[3] = 1.0
    else:
        a[0] = 1.0
    projected = a - a.sum() / k
    return plan.noise_scale * float(np.linalg.norm(projected)) / plan.n


def metric_stds(plan: EvaluationPlan) -> dict[str, float]:
    """The noise standard deviation of every released metric's stage-1 estimate (module
    docstring), keyed ``<metric>_std``: accuracy σ/n or σ/(√2 n); each confusion-matrix cell
    σ·√3/2 (binary) or σ·√(1 − 1/m) (multiclass, m cells); log-loss and mean squared error
    B·σ/n. Public: from the plan only."""
    sigma, n = plan.noise_scale, float(plan.n)
    if plan.kind == "regression":
        assert plan.loss_clip is not None
        return {"mean_squared_error_std": plan.loss_clip * sigma / n}
    stds = {"accuracy_std": accuracy_std(plan)}
    if plan.kind == "binary":
        assert plan.loss_clip is not None
        stds["log_loss_std"] = plan.loss_clip * sigma / n
        stds["confusion_matrix_std"] = sigma * math.sqrt(3.0) / 2.0
    if plan.kind == "multiclass":
        assert plan.classes is not None
        cells = (plan.classes + 1) * plan.classes
        stds["confusion_matrix_std"] = sigma * math.sqrt(1.0 - 1.0 / cells)
    return stds


def metric_warnings(plan: EvaluationPlan, label_bound: float | None, epsilon: float) -> list[str]:
    """Public warnings about the plan (module docstring): a mean loss whose std is at least a
    quarter of R = min(B, the trivial model's loss bound: log 2, or b² for squared error) —
    its ±2-std interval spans [0, R] — or, against b², at least b²/100 (a declared label bound
    is rarely filled). Uses public facts only (B, b, n, σ, ε)."""
    if plan.kind in WITHOUT_LOSS:
        return []
    assert plan.loss_clip is not None
    clip = plan.loss_clip
    std = clip * plan.noise_scale / plan.n
    if plan.kind == "binary":
        name, losses = "log_loss", "log-losses"
        reference, why = math.log(2.0), "log 2, the log-loss of the model w = 0"
    else:
        name, losses = "mean_squared_error", "squared errors"
        reference = math.inf if label_bound is None else label_bound**2
        why = "label_bound², the squared error of predicting 0"
    fraction, share = 4.0, "a quarter"
    if reference < clip:
        useful = f"{reference:.4g} ({why}, which bounds the {name} of any model worth evaluating)"
        if plan.kind == "regression":
            fraction, share = 100.0, "1 %"
            useful += ", a bound labels rarely fill"
    else:
        reference, useful = clip, f"{clip:.4g} (the loss clip)"
    if std < reference / fraction:
        return []
    return [
        f"{name}_std = {std:.4g} (loss_clip·noise_scale/n = {clip:.4g}·{plan.noise_scale:.4g}/"
        f"{plan.n}) is at least {share} of {useful}: the released {name} may not tell a good "
        f"model from a trivial one. Declare a smaller loss_clip near the per-row {losses} "
        "you expect (the std scales with it; rows above it are clipped, biasing the metric "
        f"down), or a larger epsilon than {epsilon:.4g}."
    ]
