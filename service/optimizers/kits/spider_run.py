"""The run of DP-SpiderBoost (:mod:`service.optimizers.dp_spiderboost`), split out of the
algorithm's module for size: its typed config (the stored plan's keys), the per-step batch
sizes, the stream elements O1 / O2 and their replace-one sensitivities, and the loop that
releases them through the tree mechanism. The derivations are in the algorithm's module
docstring (Wang, Ye, Xu, Liu 2019, Alg. 1 / Lemma 3.9–3.11); the plan there fixes every
value this run reads, from public facts only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from service.models.base import FloatArray, Loss
from service.optimizers.kits.base import (
    ProgressCallback,
)
from service.optimizers.kits.config import PlanConfig
from service.privacy.secure_random import SecureRandom, as_secure
from service.privacy.tree_aggregation import (
    TreeAggregator,
)

__all__ = [
    "SpiderConfig",
    "StreamRecord",
    "difference_batch_size",
    "difference_sensitivity",
    "first_sensitivity",
    "spiderboost_run",
    "stream_element",
]


def first_sensitivity(lipschitz: float, batch: int) -> float:
    """Replace-one L2 sensitivity of O1 on a batch of b rows: 2G/b."""
    return 2.0 * lipschitz / batch


def difference_sensitivity(
    lipschitz: float, smoothness: float, factor: float, step_norm: float, batch: int
) -> float:
    """Replace-one L2 sensitivity of O2 on b_t rows: min(c·β·D, 4G)/b_t (c = 1 convex, 2 not)."""
    return min(factor * smoothness * step_norm, 4.0 * lipschitz) / batch


@dataclass(frozen=True)
class SpiderConfig(PlanConfig):
    """Every resolved value a run needs (``ReleasePlan.hyperparameters`` holds it as JSON;
    the field names are the stored keys, service/optimizers/kits/config.py)."""

    n: int
    d: int
    iterations: int
    step_size: float
    alpha: float
    first_batch: int
    element_sensitivity: float
    node_sigma: float
    drift_threshold: float
    lipschitz: float
    smoothness: float
    difference_factor: float
    escape_threshold: float
    escape_noise: float
    escape_interval: int
    l2: float


def difference_batch_size(config: SpiderConfig, step_norm: float) -> int:
    """b_t = max(⌈min(cβD, 4G)/s⌉, ⌈κMD/α²⌉, 1), with the first term rounded up until the
    element's sensitivity is ≤ s in floating point too."""
    raw = min(config.difference_factor * config.smoothness * step_norm, 4.0 * config.lipschitz)
    s = config.element_sensitivity
    privacy = max(1, math.ceil(raw / s))
    while raw / privacy > s:
        privacy += 1
    smoothness_f = 1.0 / config.step_size
    variance = math.ceil(
        min(config.drift_threshold * smoothness_f * step_norm / config.alpha**2, 1e15)
    )
    return max(privacy, variance, 1)


def stream_element(
    loss: Loss,
    w: FloatArray,
    w_prev: FloatArray | None,
    X: FloatArray,
    y: FloatArray,
) -> FloatArray:
    """O1(w) = mean batch gradient (w_prev is None) or O2(w, w_prev) = the mean batch gradient
    difference ∇F_B(w) − ∇F_B(w_prev) (Alg. 3)."""
    value = loss.gradient(w, X, y)
    if w_prev is not None:
        value = value - loss.gradient(w_prev, X, y)
    return np.asarray(value, dtype=np.float64)


@dataclass
class StreamRecord:
    """One stream element of a run (for tests and audits; never released)."""

    kind: str  # "first" (O1, starts a tree) or "difference" (O2)
    segment: int
    position: int  # 1-based position in its tree
    rows: NDArray[np.int64]
    w: FloatArray
    w_prev: FloatArray | None
    value: FloatArray
    bound: float  # the sensitivity bound of this element (≤ config.element_sensitivity)
    exact: FloatArray  # running exact sum ∇_t
    noisy: FloatArray  # ∇̃_t before the escape perturbation
    escape: FloatArray | None = field(default=None)


def spiderboost_run(
    loss: Loss,
    X: FloatArray,
    y: FloatArray,
    config: SpiderConfig,
    rng: SecureRandom,
    progress: ProgressCallback | None = None,
    trace: list[StreamRecord] | None = None,
    node_sigma: float | None = None,
) -> FloatArray:
    """Run Alg. 2 with the oracles of Alg. 3 on (X, y); return the last iterate.

    ``node_sigma`` overrides the tree noise (tests use 0: noise off, same generator use).
    ``trace`` (if given) receives one :class:`StreamRecord` per step. ``progress(t)`` is called
    for t = 1 … T, also after an early stop (rows exhausted), so its calls reveal nothing.
    """
    n, d = X.shape
    sigma = config.node_sigma if node_sigma is None else node_sigma
    eta = config.step_size
    rng = as_secure(rng)
    order = rng.permutation(n)
    cursor = 0
    w: FloatArray = np.zeros(d, dtype=np.float64)
    w_prev: FloatArray | None = None
    tree: TreeAggregator | None = None
    segment = -1
    drift = 0.0
    frozen = 1  # paper: frozen_{-1} = 1, so no escape at t = 0
    previous_noisy_norm = math.inf
    finished = 0
    for t in range(config.iterations):
        use_first = tree is None or drift >= config.drift_threshold or w_prev is None
        step_norm = 0.0
        batch = config.first_batch
        if not use_first:
            assert w_prev is not None
            step_norm = float(np.linalg.norm(w - w_prev))
            needed = difference_batch_size(config, step_norm)
            if needed >= config.first_batch:
                use_first = True
            else:
                batch = needed
        if cursor + batch > n:
            break  # not enough unused rows: stop (public decision)
        rows = order[cursor : cursor + batch]
        cursor += batch
        if use_first:
            tree = TreeAggregator(d, sigma, config.iterations, rng, config.element_sensitivity)
            segment += 1
            drift = 0.0
            value = stream_element(loss, w, None, X[rows], y[rows])
            bound = first_sensitivity(config.lipschitz, batch)
        else:
            assert tree is not None and w_prev is not None
            value = stream_element(loss, w, w_prev, X[rows], y[rows])
            bound = difference_sensitivity(
                config.lipschitz, config.smoothness, config.difference_factor, step_norm, batch
            )
        if bound > config.element_sensitivity * (1.0 + 1e-12):  # pragma: no cover - by design
            raise AssertionError("a stream element exceeded the planned sensitivity")
        noisy = tree.add(value)
        escape: FloatArray | None = None
        if previous_noisy_norm <= config.escape_threshold and frozen <= 0:
            frozen = config.escape_interval
            # post-processing of released values (no privacy proof uses its law)
            escape = (config.escape_noise / math.sqrt(d)) * rng.normal(d)
        else:
            frozen -= 1
        direction = noisy if escape is None else noisy + escape
        if trace is not None:
            trace.append(
                StreamRecord(
                    kind="first" if use_first else "difference",
                    segment=segment,
                    position=tree.length,
                    rows=rows.copy(),
                    w=w.copy(),
                    w_prev=None if use_first else (None if w_prev is None else w_prev.copy()),
                    value=value,
                    bound=bound,
                    exact=tree.exact_sum,
                    noisy=noisy.copy(),
                    escape=escape,
                )
            )
        w_prev = w
        w = w - eta * direction
        norm = float(np.linalg.norm(direction))
        drift += norm
        previous_noisy_norm = norm
        finished = t + 1
        if progress is not None:
            progress(finished)
    if progress is not None:
        for step in range(finished + 1, config.iterations + 1):
            progress(step)
    return w


# --- the plug-in ------------------------------------------------------------------------------
