r"""Noisy permutation SGD — the SCS13 baseline (Song, Chaudhuri & Sarwate, "Stochastic gradient
descent with differentially private updates", GlobalSIP 2013), extended to several passes as in
Wu et al. (SIGMOD 2017) §4.1.

Algorithm. ``w_0 = 0``; for each of k passes draw a fresh uniformly random permutation and cut
it into m = ⌊n/b⌋ batches (sizes ⌊n/m⌋ or ⌈n/m⌉, all ≥ b_min = ⌊n/m⌋ ≥ b; see
:mod:`service.optimizers.kits.sgd_common`); step t = 1 … T = k·m on batch B_t:

    g̃_t = ∇F_{B_t}(w_{t−1}) + z_t,   w_t = Π_R(w_{t−1} − η_t g̃_t),

with ∇F_B(w) = (1/|B|) Σ_{i∈B} ∇ℓ_i(w) + μw, fresh noise z_t at every step and Π_R the
projection onto the public ball ‖w‖ ≤ R (Wu et al. §4.1 run SCS13 with a projection, as SCS13
did). Release w_T. Steps (:func:`service.optimizers.kits.sgd_common.baseline_steps`): η_t = c/√t
(convex) or 1/(μt) (strongly convex).

Assumptions. ℓ(·; x, y) convex and L-Lipschitz for every admissible row (‖x‖ ≤ 1); l1 = 0.
(Privacy needs only the L-Lipschitz bound; convexity is what the step sizes and the baseline's
utility rest on, so non-convex losses are rejected like in the other SGD methods.)

Privacy (replace-one; S, S′ differ in row j). The permutations are drawn independently of the
data, and the released w_T is a function of the transcript (g̃_1, …, g̃_T). For a fixed
sequence of permutations π:

1. The transcript is an adaptive composition of T mechanisms, M_t(S; g̃_{<t}) =
   ∇F_{B_t}(w_{t−1}) + z_t with w_{t−1} determined by the earlier outputs.
2. If j ∉ B_t, M_t(S; ·) and M_t(S′; ·) are the same distribution: that step has zero privacy
   loss (a post-processing of the earlier outputs).
3. If j ∈ B_t, M_t is a Gaussian of replace-one sensitivity
   (1/|B_t|)‖∇ℓ_j(w) − ∇ℓ′_j(w)‖ ≤ 2L/|B_t| ≤ 2L/b_min =: Δ, so with σ = zΔ its RDP is α/(2z²).
4. Each pass is a permutation, so row j lies in exactly one batch per pass: exactly k of the
   T steps are of kind 3, at positions fixed by π. By adaptive RDP composition (Mironov 2017,
   Prop. 1) the transcript is (α, kα/(2z²))-RDP for every α — the RDP curve of
   ``SelfComposedDpEvent(GaussianDpEvent(z), k)``, which is the event charged. (The same
   argument with ε/k-DP steps gives ε-DP: the transcript's density ratio is the product of the
   k non-trivial steps' ratios.)
5. Averaging over π: the output laws on S and S′ are mixtures over π with the same weights;
   Rényi divergence is jointly quasi-convex (van Erven & Harremoës 2014, Thm 13), and a pure-DP
   density-ratio bound survives mixing, so the bounds of 4 hold for the released w_T.

No amplification by sampling is claimed (the batches are a shuffle, not a random sample), and
the per-pass structure is used only through "one step per pass touches row j".

Noise. δ > 0: z_t ~ N(0, σ²I) with σ = zΔ, z the smallest noise multiplier for which the event
(k Gaussians, exactly √k/z-GDP, REPLACE_ONE, z = σ/Δ — docs/ledger.md#the-z-convention) is
(ε, δ)-DP, in closed
form by :func:`service.privacy.gdp.gaussian_steps_multiplier`; the ledger charges that μ.
δ = 0: SCS13's ε-DP
variant, density ∝ exp(−‖z_t‖/s) with s = kΔ/ε (each of the k steps touching a row is
ε/k-DP); the ledger charges ``pure_dp_event(ε)``.
``plan.sensitivity`` is the per-step Δ and ``plan.noise_scale`` the per-step σ (or s).

Defaults. b = min(50, n) (Wu et al. §4.3; SCS13 found mini-batches essential); k = 1 pass
(SCS13's original; with the noise dominating, E‖g̃‖² grows like k and T like k, so the
Shamir–Zhang bounds no longer improve with k — more passes cost compute, not accuracy);
mode, R and c per :func:`service.optimizers.kits.sgd_common.baseline_steps`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from dp_accounting import dp_event
from pydantic import BaseModel, ConfigDict, Field

from service.models.base import FloatArray, Loss
from service.optimizers.kits.base import PrivacyTarget, ProgressCallback, ReleasePlan
from service.optimizers.kits.config import PlanConfig, ShapeConfig
from service.optimizers.kits.inputs import checked_data
from service.optimizers.kits.limits import PASSES_CAP
from service.optimizers.kits.sgd_common import (
    IntArray,
    InverseSqrtSchedule,
    Mode,
    StepSchedule,
    baseline_batch_size_field,
    baseline_mode_field,
    baseline_radius_field,
    baseline_step_size_field,
    baseline_steps,
    check_convex_loss,
    coerce_params,
    noise_second_moment,
    noisy_release,
    pass_layout,
    permutation_batches,
    resolve_batch_size,
    run_sgd,
    schedule_from_json,
)
from service.privacy.gdp import gaussian_steps_multiplier
from service.privacy.output_perturbation import pure_dp_event
from service.privacy.secure_random import SecureRandom
from service.privacy.target import check_target

__all__ = [
    "NoisySGDSCS13",
    "NoisySGDSCS13Params",
    "noisy_permutation_sgd",
    "scs13_event",
    "scs13_step_sensitivity",
]


@dataclass(frozen=True)
class SCS13Config(ShapeConfig):
    """What ``fit`` reads from a stored plan (field names = stored keys)."""

    batch_size: int
    passes: int
    schedule: Any  # the step schedule's JSON (sgd_common.schedule_from_json)
    radius: float


class NoisySGDSCS13Params(BaseModel):
    """Hyper-parameters of ``noisy_sgd_scs13``; omitted values get defaults."""

    model_config = ConfigDict(extra="forbid")

    mode: Mode | None = baseline_mode_field()
    passes: int = Field(
        default=1,
        ge=1,
        le=PASSES_CAP,
        description=(
            "k: passes over fresh random permutations. Each pass touches every row once, so "
            "the privacy cost is that of k Gaussian steps: the noise grows like √k."
        ),
    )
    batch_size: int | None = baseline_batch_size_field()
    radius: float | None = baseline_radius_field()
    step_size: float | None = baseline_step_size_field()


# --- the math, as plain functions ------------------------------------------------------------


def scs13_step_sensitivity(lipschitz: float, n: int, batch_size: int) -> float:
    """Δ = 2L/b_min: replace-one L2 sensitivity of one batch-mean gradient (docstring, 3)."""
    _, b_min = pass_layout(n, batch_size)
    return 2.0 * lipschitz / b_min


def scs13_event(noise_multiplier: float, passes: int) -> dp_event.DpEvent:
    """k-fold composition of a Gaussian with noise multiplier z = σ/Δ (docstring, 4)."""
    return dp_event.SelfComposedDpEvent(dp_event.GaussianDpEvent(noise_multiplier), passes)


def noisy_permutation_sgd(
    loss: Loss,
    X: FloatArray,
    y: FloatArray,
    *,
    passes: int,
    batch_size: int,
    schedule: StepSchedule | InverseSqrtSchedule,
    radius: float | None,
    mechanism: str,
    noise_scale: float,
    rng: SecureRandom,
    noise: bool = True,
    sensitivity: float = 0.0,
    progress: ProgressCallback | None = None,
    observe: Callable[[int, FloatArray, IntArray], None] | None = None,
) -> FloatArray:
    """SCS13 on the rows: permutations (one per pass) and per-step noise drawn from ``rng``.
    ``noise=False`` runs the same batches without noise (for sensitivity tests); with noise,
    each step's gradient is released exactly at the per-step ``sensitivity`` Δ
    (:func:`~service.optimizers.kits.sgd_common.noisy_release`)."""
    n, d = X.shape
    m, _ = pass_layout(n, batch_size)
    return run_sgd(
        loss,
        X,
        y,
        permutation_batches(n, m, passes, rng),
        schedule,
        radius=radius,
        noise=noisy_release(mechanism, noise_scale, sensitivity, rng) if noise else None,
        progress=progress,
        observe=observe,
    )


# --- the plug-in ------------------------------------------------------------------------------


class NoisySGDSCS13:
    """SCS13 (multi-pass, Wu et al. §4.1): noise on every mini-batch gradient."""

    name: ClassVar[str] = "noisy_sgd_scs13"
    summary: ClassVar[str] = (
        "Baseline: projected mini-batch SGD over k random permutations with fresh noise on "
        "every batch gradient (Song, Chaudhuri & Sarwate 2013, multi-pass as in Wu et al. "
        "2017). Kept for benchmarks; bolt_on_psgd is usually more accurate."
    )
    assumptions: ClassVar[str] = (
        "Convex, L-Lipschitz per-example loss on rows with ‖x‖₂ ≤ 1, l1 = 0, l2 = μ ≥ 0 "
        "(strongly convex mode needs μ > 0)."
    )
    guarantee: ClassVar[str] = (
        "(ε, δ)-DP for δ > 0: each row is in one batch per pass, so the run costs k Gaussian "
        "steps of sensitivity 2L/b (exact Gaussian DP, replace-one); ε-DP for δ = 0 with noise "
        "density ∝ exp(−ε‖z‖/(2kL/b)) per step."
    )
    reference: ClassVar[str] = (
        "Song, Chaudhuri & Sarwate (2013), 'Stochastic gradient descent with differentially "
        "private updates', GlobalSIP; multi-pass extension: Wu et al. (2017), SIGMOD, §4.1; "
        "steps: Shamir & Zhang (2013)."
    )
    Params: ClassVar[type[BaseModel]] = NoisySGDSCS13Params
    Config: ClassVar[type[PlanConfig]] = SCS13Config

    def plan(
        self, params: BaseModel, loss: Loss, n: int, d: int, target: PrivacyTarget
    ) -> ReleasePlan:
        """Resolve the batches and steps and calibrate the per-step noise (public information
        only). Raises :class:`InfeasibleSpec` naming the field at fault."""
        p = coerce_params(params, NoisySGDSCS13Params)
        check_target(target, pure_allowed=True, optimizer=self.name)
        if n < 1 or d < 1:
            raise ValueError("n and d must be >= 1")
        check_convex_loss(loss, self.name)
        batch_size = resolve_batch_size(p.batch_size, n)
        m, b_min = pass_layout(n, batch_size)
        sensitivity = scs13_step_sensitivity(loss.lipschitz, n, batch_size)
        if target.delta > 0.0:
            # k Gaussian passes are exactly √k/z-GDP: the exact calibration, the μ charged
            z = gaussian_steps_multiplier(p.passes, target.epsilon, target.delta)
            mechanism, scale = "gaussian", z * sensitivity
            event: dp_event.DpEvent = scs13_event(z, p.passes)
        else:
            z = math.nan
            mechanism, scale = "norm_gamma", p.passes * sensitivity / target.epsilon
            event = pure_dp_event(target.epsilon)
        steps = baseline_steps(
            mode=p.mode,
            loss=loss,
            radius=p.radius,
            step_size=p.step_size,
            second_moment=noise_second_moment(mechanism, d, scale),
            steps=p.passes * m,
        )
        hyperparameters: dict[str, Any] = {
            "mode": steps.mode,
            "passes": p.passes,
            "batch_size": batch_size,
            "batches_per_pass": m,
            "min_batch_size": b_min,
            "schedule": steps.schedule.to_json(),
            "radius": steps.radius,
            "noise_multiplier": None if math.isnan(z) else z,
            "n": n,
            "d": d,
        }
        return ReleasePlan(
            mechanism=mechanism,
            sensitivity=sensitivity,
            noise_scale=scale,
            event=event,
            total_steps=p.passes * m,
            hyperparameters=hyperparameters,
        )

    def fit(
        self,
        plan: ReleasePlan,
        loss: Loss,
        X: FloatArray,
        y: FloatArray,
        rng: SecureRandom,
        progress: ProgressCallback,
    ) -> FloatArray:
        """Run ``plan`` on the private rows and return w_T (noisy at every step).

        Re-checks (without revealing data values) the loss, that the plan's per-step
        sensitivity covers it, and the data (shape, ‖x‖ ≤ 1, labels).
        """
        config = SCS13Config.from_hyperparameters(plan.hyperparameters)
        n, d, batch_size = config.n, config.d, config.batch_size
        check_convex_loss(loss, self.name)
        if plan.sensitivity < scs13_step_sensitivity(loss.lipschitz, n, batch_size) * (1.0 - 1e-12):
            raise ValueError("the plan's sensitivity does not cover this loss")
        X, y = checked_data(loss, X, y, n, d)
        return noisy_permutation_sgd(
            loss,
            X,
            y,
            passes=config.passes,
            batch_size=batch_size,
            schedule=schedule_from_json(config.schedule),
            radius=config.radius,
            mechanism=plan.mechanism,
            noise_scale=plan.noise_scale,
            sensitivity=plan.sensitivity,
            rng=rng,
            progress=progress,
        )


OPTIMIZER = NoisySGDSCS13
