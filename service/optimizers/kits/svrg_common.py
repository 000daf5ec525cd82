"""The SVRG kit shared by ``dp_svrg`` (Wang, Ye & Xu 2017, Alg. 1) and ``dp_svrg_pp``
(Alg. 2): the engine :func:`noisy_svrg`, the queries and their sensitivities, the composed
event, and the planning both variants run.

The derivations (replace-one sensitivities 2L/n of a snapshot and 4L/b of a
variance-reduced batch difference, the subsampled-Gaussian accounting of the inner steps, the
snapshot noise σ_s = κσ/√m_s) are in ``dp_svrg``'s module docstring; this module only holds
the code both variants share. Steps are capped by
:data:`service.optimizers.kits.limits.SAMPLED_STEPS_CAP` (total inner steps over all epochs).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from dp_accounting import dp_event
from pydantic import Field

from service.models.base import FloatArray, Loss
from service.optimizers.kits.base import (
    InfeasibleSpec,
    Mechanism,
    PrivacyTarget,
    ProgressCallback,
    ReleasePlan,
)
from service.optimizers.kits.config import ShapeConfig
from service.optimizers.kits.gradient_kit import (
    QueryRecord,
    check_lipschitz,
    check_step_size,
    full_gradient_query,
    gradient_sensitivity,
    proximal_step,
    sample_batch,
)
from service.optimizers.kits.inputs import checked_data
from service.optimizers.kits.limits import SAMPLED_STEPS_CAP
from service.privacy.calibration import calibrate_noise_multiplier
from service.privacy.secure_random import SecureRandom, as_secure
from service.privacy.secure_release import secure_gaussian

__all__ = [
    "SvrgConfig",
    "SvrgSchedule",
    "batch_difference_query",
    "batch_size_field",
    "check_svrg_model",
    "difference_sensitivity",
    "fit_svrg",
    "noisy_svrg",
    "plan_svrg",
    "resolve_batch",
    "snapshot_noise_stds",
    "snapshot_ratio_field",
    "svrg_contraction",
    "svrg_event",
]


# --- queries, sensitivities, accounting -------------------------------------------------------


def batch_difference_query(
    loss: Loss, w: FloatArray, anchor: FloatArray, X: FloatArray, y: FloatArray
) -> FloatArray:
    """∇F_B(w) − ∇F_B(w̃) on the batch rows (X, y): the inner step's private part (plus the
    data-free μ(w − w̃)); replace-one sensitivity 4L/b."""
    return loss.gradient(w, X, y) - loss.gradient(anchor, X, y)


def difference_sensitivity(lipschitz: float, batch_size: int) -> float:
    """4L/b: replace-one L2 sensitivity of :func:`batch_difference_query` on a size-b batch."""
    return 4.0 * lipschitz / batch_size


def snapshot_noise_stds(
    noise_std: float, epoch_lengths: Sequence[int], snapshot_noise_ratio: float
) -> list[float]:
    """σ_s = κσ/√m_s for each epoch."""
    return [snapshot_noise_ratio * noise_std / math.sqrt(m) for m in epoch_lengths]


def svrg_event(
    n: int,
    batch_size: int,
    multiplier: float,
    epoch_lengths: Sequence[int],
    snapshot_noise_ratio: float,
) -> dp_event.DpEvent:
    """The composed event of a (DP-SVRG or DP-SVRG++) run, as a function of the inner noise
    multiplier z = σ/(4L/b); the snapshot multipliers are z_s = κ z (2n/b)/√m_s (their
    σ_s = κσ/√m_s over the snapshot sensitivity 2L/n)."""
    snap = [
        snapshot_noise_ratio * multiplier * 2.0 * n / (batch_size * math.sqrt(m))
        for m in epoch_lengths
    ]
    if len(set(snap)) == 1:
        snapshots: dp_event.DpEvent = dp_event.SelfComposedDpEvent(
            dp_event.GaussianDpEvent(snap[0]), len(snap)
        )
    else:
        snapshots = dp_event.ComposedDpEvent([dp_event.GaussianDpEvent(z) for z in snap])
    inner = dp_event.SelfComposedDpEvent(
        dp_event.SampledWithoutReplacementDpEvent(
            source_dataset_size=n,
            sample_size=batch_size,
            event=dp_event.GaussianDpEvent(multiplier),
        ),
        int(sum(epoch_lengths)),
    )
    return dp_event.ComposedDpEvent([snapshots, inner])


def svrg_contraction(mu: float, smoothness_f: float, step: float, inner: int, batch: int) -> float:
    """Mini-batch Prox-SVRG's per-epoch contraction ρ = (1/(μη) + a(m+1))/((1−a)m), a =
    4β_Fη/b (∞ when a ≥ 1 or μ = 0: no guarantee)."""
    a = 4.0 * smoothness_f * step / batch
    if a >= 1.0 or mu <= 0.0:
        return math.inf
    return (1.0 / (mu * step) + a * (inner + 1)) / ((1.0 - a) * inner)


# --- the engine -------------------------------------------------------------------------------


def noisy_svrg(
    loss: Loss,
    X: FloatArray,
    y: FloatArray,
    *,
    epoch_lengths: Sequence[int],
    batch_size: int,
    step_size: float,
    noise_std: float,
    snapshot_stds: Sequence[float],
    continue_from_last: bool,
    rng: SecureRandom,
    sensitivity: float = 0.0,
    snapshot_sensitivity: float = 0.0,
    progress: ProgressCallback | None = None,
    trace: list[QueryRecord] | None = None,
) -> FloatArray:
    """The module docstring's algorithm from w̃_0 = 0; returns w̃_S.

    ``continue_from_last`` False: DP-SVRG (each epoch restarts at the snapshot); True:
    DP-SVRG++ (each epoch continues from the previous epoch's last iterate). ``noise_std = 0``
    and zero ``snapshot_stds`` switch the noise off (no draws, so the batches depend on the
    seed only). ``progress(k)`` after the k-th inner step overall; ``trace``: tests only.
    """
    n, d = X.shape
    source = as_secure(rng)
    snapshot: FloatArray = np.zeros(d, dtype=np.float64)
    w: FloatArray = np.zeros(d, dtype=np.float64)
    done = 0
    for length, snapshot_std in zip(epoch_lengths, snapshot_stds, strict=True):
        exact_snapshot = full_gradient_query(loss, snapshot, X, y)
        g_snapshot = (
            secure_gaussian(exact_snapshot, snapshot_std, snapshot_sensitivity, source)
            if snapshot_std > 0.0
            else exact_snapshot
        )
        if trace is not None:
            trace.append(QueryRecord("snapshot", snapshot.copy(), g_snapshot - exact_snapshot))
        if not continue_from_last:
            w = snapshot.copy()
        total: FloatArray = np.zeros(d, dtype=np.float64)
        for _ in range(length):
            rows = sample_batch(source, n, batch_size)
            h = batch_difference_query(loss, w, snapshot, X[rows], y[rows])
            released = secure_gaussian(h, noise_std, sensitivity, source) if noise_std > 0.0 else h
            if trace is not None:
                trace.append(
                    QueryRecord("batch_difference", w.copy(), released - h, snapshot.copy(), rows)
                )
            w = proximal_step(loss, w - step_size * (released + g_snapshot), step_size)
            total += w
            done += 1
            if progress is not None:
                progress(done)
        snapshot = total / length
    return snapshot


# --- planning shared by dp_svrg and dp_svrg_pp -------------------------------------------------


def check_svrg_model(loss: Loss, name: str) -> None:
    """Both variants need a convex loss with finite constants."""
    check_lipschitz(loss)
    if not loss.convex:
        raise InfeasibleSpec(
            "model",
            f"{name} needs a convex loss; {loss.name} is not convex — use dp_gd or rrpsgd, "
            "which handle non-convex smooth losses",
        )


def resolve_batch(batch_size: int | None, n: int) -> int:
    """b = min(n, 64) by default; InfeasibleSpec("optimizer.params.batch_size") if b > n."""
    batch = min(n, 64) if batch_size is None else int(batch_size)
    if batch > n:
        raise InfeasibleSpec(
            "optimizer.params.batch_size", f"batch_size must be at most the number of rows n = {n}"
        )
    return batch


@dataclass(frozen=True)
class SvrgConfig(ShapeConfig):
    """What ``fit`` reads from a stored plan of either variant (field names = stored keys)."""

    batch_size: int
    step_size: float
    epoch_lengths: tuple[int, ...]
    snapshot_sensitivity: float
    snapshot_noise_scales: tuple[float, ...]


@dataclass(frozen=True)
class SvrgSchedule:
    """The resolved public schedule of a run: epoch lengths m_s, batch b, step η, κ."""

    epoch_lengths: list[int]
    batch: int
    step: float
    snapshot_ratio: float


def plan_svrg(
    mechanism: Mechanism,
    schedule: SvrgSchedule,
    loss: Loss,
    n: int,
    d: int,
    target: PrivacyTarget,
    extra: dict[str, Any],
) -> ReleasePlan:
    """Calibrate z for the schedule's composed event and build the plan (both variants).
    The step passes the shared rule η ≤ 2/β_F (:func:`check_step_size`)."""
    check_step_size(schedule.step, loss)
    lengths, batch, ratio = schedule.epoch_lengths, schedule.batch, schedule.snapshot_ratio
    if sum(lengths) > SAMPLED_STEPS_CAP:
        raise InfeasibleSpec(
            "optimizer.params.epochs",
            f"the schedule has {sum(lengths)} inner steps; at most {SAMPLED_STEPS_CAP} are "
            "accepted (fewer epochs or shorter epochs)",
        )
    multiplier = calibrate_noise_multiplier(
        lambda z: svrg_event(n, batch, z, lengths, ratio),
        target.epsilon,
        target.delta,
        subsampled=True,
    )
    sensitivity = difference_sensitivity(loss.lipschitz, batch)
    sigma = multiplier * sensitivity
    hyperparameters: dict[str, Any] = {
        "epoch_lengths": list(lengths),
        "batch_size": batch,
        "step_size": schedule.step,
        "snapshot_noise_ratio": ratio,
        "noise_multiplier": multiplier,
        "snapshot_sensitivity": gradient_sensitivity(loss.lipschitz, n),
        "snapshot_noise_scales": snapshot_noise_stds(sigma, lengths, ratio),
        "n": n,
        "d": d,
        **extra,
    }
    return ReleasePlan(
        mechanism=mechanism,
        sensitivity=sensitivity,
        noise_scale=sigma,
        event=svrg_event(n, batch, multiplier, lengths, ratio),
        total_steps=int(sum(lengths)),
        hyperparameters=hyperparameters,
    )


def fit_svrg(
    plan: ReleasePlan,
    loss: Loss,
    X: FloatArray,
    y: FloatArray,
    rng: SecureRandom,
    progress: ProgressCallback,
    continue_from_last: bool,
) -> FloatArray:
    """Run a plan of either variant (checks as in ``dp_gd``)."""
    config = SvrgConfig.from_hyperparameters(plan.hyperparameters)
    n, d, batch = config.n, config.d, config.batch_size
    if plan.sensitivity < difference_sensitivity(loss.lipschitz, batch) * (1.0 - 1e-12):
        raise ValueError("the plan's sensitivity does not cover this loss")
    if config.snapshot_sensitivity < gradient_sensitivity(loss.lipschitz, n) * (1.0 - 1e-12):
        raise ValueError("the plan's snapshot sensitivity does not cover this loss")
    y = np.asarray(y, dtype=np.float64)
    X, y = checked_data(loss, X, y, n, d)
    return noisy_svrg(
        loss,
        X,
        y,
        epoch_lengths=list(config.epoch_lengths),
        batch_size=batch,
        step_size=config.step_size,
        noise_std=plan.noise_scale,
        sensitivity=plan.sensitivity,
        snapshot_stds=list(config.snapshot_noise_scales),
        snapshot_sensitivity=config.snapshot_sensitivity,
        continue_from_last=continue_from_last,
        rng=rng,
        progress=progress,
    )


def snapshot_ratio_field() -> float:
    """The ``snapshot_noise_ratio`` field both variants share."""
    result: float = Field(
        default=1.0,
        gt=0.0,
        le=1e3,
        allow_inf_nan=False,
        description=(
            "κ: the snapshot gradient of an epoch of m steps gets noise σ_s = κσ/√m (σ: the "
            "inner steps' noise). Smaller κ spends more of the budget on the snapshots."
        ),
    )
    return result


def batch_size_field() -> int | None:
    """The ``batch_size`` field both variants share."""
    result: int | None = Field(
        default=None,
        ge=1,
        description=(
            "b: rows per inner step, drawn uniformly without replacement, fresh each step "
            "(privacy amplification by sampling). Must be ≤ n. Default min(n, 64)."
        ),
    )
    return result
