"""Test-only losses and audit helpers for the gradient-perturbation optimizers' tests.

Local on purpose (independent of ``service.models``): each loss implements the ``Loss``
protocol of ``service.models.base`` for linear models ℓ(w; x, y) = φ(w·x, y) with ‖x‖ ≤ 1, so
∇ℓ = φ'(w·x, y) x, L = sup|φ'|, β = sup|φ''|.

- :class:`SigmoidLoss` — φ = σ(−y z), **non-convex**, L = 1/4, β = 1/(6√3). It attains the
  per-example gradient-difference bound 2L at a row with w·x = 0 against its opposite.
- :class:`LogCoshLoss` — φ = log cosh(z − y), convex regression loss, L = 1, β = 1; φ' = tanh
  spans (−1, 1), so a *difference* of two gradients of one row approaches 2L, which makes the
  SVRG inner bound 4L/b reachable (the logistic loss's φ' spans only (−1, 0)).
- :class:`LinearLoss` — φ = −y z, convex, L = 1, β = 0: constant gradients, so the noise-free
  trajectory shift between neighbours is exactly computable; used by the audits.

Plus :func:`epsilon_lower_bound`, the Clopper–Pearson threshold audit, and the two pieces the
one-noisy-step audits share (:func:`projected_releases`, :func:`centred_threshold_bound`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import stats
from scipy.special import expit

from service.models.base import FloatArray
from service.optimizers.kits.gradient_kit import QueryRecord
from service.optimizers.kits.svrg_common import batch_difference_query

SIGMOID_BETA = 1.0 / (6.0 * math.sqrt(3.0))


@dataclass
class _LinearModel:
    l2: float = 0.0
    l1: float = 0.0
    name: str = field(default="", init=False)
    task: str = field(default="classification", init=False)
    lipschitz: float = field(default=1.0, init=False)
    smoothness: float = field(default=1.0, init=False)
    convex: bool = field(default=True, init=False)

    def phi(self, z: FloatArray, y: FloatArray) -> FloatArray:
        raise NotImplementedError

    def dphi(self, z: FloatArray, y: FloatArray) -> FloatArray:
        raise NotImplementedError

    def smooth_value(self, w: FloatArray, X: FloatArray, y: FloatArray) -> float:
        return float(np.mean(self.phi(X @ w, y))) + 0.5 * self.l2 * float(w @ w)

    def value(self, w: FloatArray, X: FloatArray, y: FloatArray) -> float:
        return self.smooth_value(w, X, y) + self.l1 * float(np.sum(np.abs(w)))

    def gradient(self, w: FloatArray, X: FloatArray, y: FloatArray) -> FloatArray:
        grad: FloatArray = X.T @ self.dphi(X @ w, y) / X.shape[0]
        if self.l2:
            grad = grad + self.l2 * w
        return grad

    def example_gradients(self, w: FloatArray, X: FloatArray, y: FloatArray) -> FloatArray:
        out: FloatArray = self.dphi(X @ w, y)[:, None] * X
        return out

    def prox(self, w: FloatArray, step: float) -> FloatArray:
        out: FloatArray = np.sign(w) * np.maximum(np.abs(w) - step * self.l1, 0.0)
        return out

    def check_labels(self, y: FloatArray) -> None:
        if self.task == "classification" and not bool(np.all((y == 1.0) | (y == -1.0))):
            raise ValueError("labels must be -1 or +1")

    def predict(self, w: FloatArray, X: FloatArray) -> FloatArray:
        z: FloatArray = X @ w
        return np.where(z >= 0.0, 1.0, -1.0) if self.task == "classification" else z

    def predict_proba(self, w: FloatArray, X: FloatArray) -> FloatArray:
        out: FloatArray = expit(X @ w)
        return out


@dataclass
class SigmoidLoss(_LinearModel):
    """ℓ = 1/(1 + exp(y w·x)): non-convex, L = 1/4, β = 1/(6√3)."""

    def __post_init__(self) -> None:
        self.name, self.lipschitz, self.smoothness, self.convex = (
            "sigmoid_test",
            0.25,
            SIGMOID_BETA,
            False,
        )

    def phi(self, z: FloatArray, y: FloatArray) -> FloatArray:
        out: FloatArray = expit(-y * z)
        return out

    def dphi(self, z: FloatArray, y: FloatArray) -> FloatArray:
        s = expit(y * z)
        out: FloatArray = -y * s * (1.0 - s)
        return out


@dataclass
class LogCoshLoss(_LinearModel):
    """ℓ = log cosh(w·x − y): convex regression loss, L = 1, β = 1."""

    def __post_init__(self) -> None:
        self.name, self.task = "logcosh_test", "regression"

    def phi(self, z: FloatArray, y: FloatArray) -> FloatArray:
        r = z - y
        out: FloatArray = np.logaddexp(r, -r) - math.log(2.0)
        return out

    def dphi(self, z: FloatArray, y: FloatArray) -> FloatArray:
        out: FloatArray = np.tanh(z - y)
        return out


@dataclass
class LinearLoss(_LinearModel):
    """ℓ = −y w·x: convex, L = 1, β = 0 (constant gradient −y x)."""

    def __post_init__(self) -> None:
        self.name, self.smoothness = "linear_test", 0.0

    def phi(self, z: FloatArray, y: FloatArray) -> FloatArray:
        out: FloatArray = -y * z
        return out

    def dphi(self, z: FloatArray, y: FloatArray) -> FloatArray:
        out: FloatArray = -y + 0.0 * z
        return out


# --- replaying recorded queries on a neighbour -------------------------------------------------


def replay(loss: object, record: QueryRecord, X: FloatArray, y: FloatArray) -> FloatArray:
    """The noiseless query of ``record`` evaluated on (X, y) at the recorded point(s)/rows."""
    if record.kind in ("full_gradient", "snapshot"):
        out: FloatArray = loss.gradient(record.point, X, y)  # type: ignore[attr-defined]
        return out
    assert record.rows is not None
    Xb, yb = X[record.rows], y[record.rows]
    if record.kind == "batch_gradient":
        out = loss.gradient(record.point, Xb, yb)  # type: ignore[attr-defined]
        return out
    assert record.kind == "batch_difference" and record.anchor is not None
    return batch_difference_query(loss, record.point, record.anchor, Xb, yb)  # type: ignore[arg-type]


def query_gaps(
    loss: object,
    trace: list[QueryRecord],
    X: FloatArray,
    y: FloatArray,
    X2: FloatArray,
    y2: FloatArray,
) -> dict[str, list[float]]:
    """‖q(S) − q(S')‖ for every recorded query, at S's recorded iterate, grouped by kind."""
    gaps: dict[str, list[float]] = {}
    for record in trace:
        gap = float(np.linalg.norm(replay(loss, record, X, y) - replay(loss, record, X2, y2)))
        gaps.setdefault(record.kind, []).append(gap)
    return gaps


# --- auditing ---------------------------------------------------------------------------------


def clopper_pearson(k: int, trials: int, alpha: float) -> tuple[float, float]:
    lo = 0.0 if k == 0 else float(stats.beta.ppf(alpha, k, trials - k + 1))
    hi = 1.0 if k == trials else float(stats.beta.ppf(1 - alpha, k + 1, trials - k))
    return lo, hi


def epsilon_lower_bound(
    outputs_s: FloatArray, outputs_s2: FloatArray, thresholds: list[float], delta: float
) -> float:
    """A 95% lower bound on ε from threshold tests "output > t" (thresholds fixed in advance,
    Bonferroni over them and over the two directions); ``outputs_s2`` should be the
    stochastically larger sample (the test guesses S' when the output exceeds t)."""
    runs = len(outputs_s)
    alpha = 0.05 / (2 * len(thresholds))
    best = 0.0
    for t in thresholds:
        fp, tp = int(np.sum(outputs_s > t)), int(np.sum(outputs_s2 > t))
        _, fpr_hi = clopper_pearson(fp, runs, alpha)
        tpr_lo, _ = clopper_pearson(tp, runs, alpha)
        if tpr_lo - delta > 0 and fpr_hi > 0:
            best = max(best, math.log((tpr_lo - delta) / fpr_hi))
        if (1 - fpr_hi) - delta > 0 and (1 - tpr_lo) > 0:
            best = max(best, math.log(((1 - fpr_hi) - delta) / (1 - tpr_lo)))
    return best


def projected_releases(
    optimizer: Any, plan: Any, loss: Any, rows: FloatArray, y: FloatArray,
    direction: FloatArray, runs: int, seed: int,
) -> FloatArray:  # fmt: skip
    """``runs`` releases of ``optimizer.fit`` under ``plan`` on (rows, y), each projected on
    ``direction`` (one generator seeded ``seed`` for all of them)."""
    rng = np.random.default_rng(seed)
    return np.array(
        [optimizer.fit(plan, loss, rows, y, rng, lambda _: None) @ direction for _ in range(runs)]
    )


def centred_threshold_bound(low: FloatArray, high: FloatArray, delta: float) -> float:
    """:func:`epsilon_lower_bound` at thresholds at the two samples' common centre plus
    {−1, −½, 0, ½, 1} times their mean std, the samples ordered so the second is the larger."""
    if low.mean() > high.mean():
        low, high = high, low
    centre, std = 0.5 * (low.mean() + high.mean()), 0.5 * (low.std() + high.std())
    thresholds = [centre + k * std for k in (-1.0, -0.5, 0.0, 0.5, 1.0)]
    return epsilon_lower_bound(low, high, thresholds, delta)


def audit_pair(n: int) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Neighbours for :class:`LinearLoss` audits: n − 1 shared rows ±e2 with balanced labels
    (their gradients cancel along e1), and the differing row e1 (S) or −e1 (S'), label +1.
    Every noisy release then shifts by the full sensitivity along e1 whenever it reads row 0."""
    assert n % 2 == 1
    X = np.zeros((n, 2))
    X[1:, 1] = 1.0
    y = np.ones(n)
    y[1::2] = -1.0
    X[0] = (1.0, 0.0)
    X2 = X.copy()
    X2[0] = (-1.0, 0.0)
    return X, X2, y
