r"""Noisy SGD with sampling — the BST14 baseline (Bassily, Smith & Thakurta, "Private empirical
risk minimization: efficient algorithms and tight error bounds", FOCS 2014, Alg. 1 and its
strongly convex variant), with mini-batches and a free number of iterations as in Wu et al.
(SIGMOD 2017) §4.1 and Zhang et al. (2017) §4, accounted with numerical RDP.

Algorithm. ``w_0 = 0``; for t = 1 … T: draw a batch B_t of exactly b distinct rows uniformly
at random, independently of the other steps
(:func:`service.optimizers.kits.sgd_common.sampled_batches`);

    g̃_t = ∇F_{B_t}(w_{t−1}) + z_t,  z_t ~ N(0, σ²I),   w_t = Π_R(w_{t−1} − η_t g̃_t),

with ∇F_B(w) = (1/b) Σ_{i∈B} ∇ℓ_i(w) + μw and Π_R the projection onto the public ball
‖w‖ ≤ R. Release w_T. Steps (:func:`service.optimizers.kits.sgd_common.baseline_steps`, BST14 via
Shamir & Zhang 2013): η_t = c/√t with c = 2R/G (convex), 1/(μt) (strongly convex).

Assumptions. ℓ(·; x, y) convex and L-Lipschitz for every admissible row (‖x‖ ≤ 1); l1 = 0;
δ > 0 (Gaussian noise cannot give pure ε-DP; δ = 0 is rejected on ``privacy.delta``).

Privacy (replace-one; S, S′ differ in row j).

1. Step t, given the earlier outputs (which fix w_{t−1}), is the mechanism "sample a size-b
   subset B uniformly without replacement, release f(S_B) + N(0, σ²I)" with
   f(S_B) = (1/b) Σ_{i∈B} ∇ℓ_i(w_{t−1}) + μ w_{t−1}. On two size-b subsets differing in one row,
   ‖f(S_B) − f(S′_B)‖ = (1/b)‖∇ℓ_j(w) − ∇ℓ′_j(w)‖ ≤ 2L/b =: Δ, so the Gaussian base mechanism is
   (α, α/(2z²))-RDP with respect to replace-one neighbours of the subsample, z = σ/Δ.
2. Subsampling without replacement amplifies this (Wang, Balle & Kasiviswanathan 2019,
   Thm 27, replace-one, n public): dp-accounting's ``SampledWithoutReplacementDpEvent(
   source_dataset_size=n, sample_size=b, event=GaussianDpEvent(z))`` computes exactly that bound
   from the inner Gaussian's α/(2z²) — the inner event is the Gaussian on the *batch*, and the
   accountant does not double z (docs/ledger.md#the-z-convention), so we pass z = σ/(2L/b).
3. Adaptive RDP composition over the T steps: ``SelfComposedDpEvent(…, T)`` is the event
   charged; z is the smallest value whose event is (ε, δ)-DP under the RDP accountant
   (:func:`service.privacy.calibration.calibrate_noise_multiplier`).

The sampling is exactly what the accountant assumes: fixed-size batches, without replacement,
fresh and independent at every step — never Poisson sampling (unsupported under REPLACE_ONE) nor
shuffling. ``plan.sensitivity`` is the per-step Δ = 2L/b and ``plan.noise_scale`` the per-step σ.

Defaults. b = min(50, n) (Zhang et al. §4 and Wu et al. §4.3 run BST14 with batches of 50).
T = (n/b)², clamped to [1, ``max_iterations``]: BST14 take T = n² for b = 1, the point where the
amplified noise multiplier z ≈ q√(T log(1/δ))/ε (q = b/n) is of order one and the noise
per step stops growing with n; with batches the same balance is at T = (n/b)². Mode, R and c
per :func:`service.optimizers.kits.sgd_common.baseline_steps`.
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
from service.optimizers.kits.limits import SAMPLED_STEPS_CAP
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
    resolve_batch_size,
    run_sgd,
    sampled_batches,
    schedule_from_json,
)
from service.privacy.calibration import calibrate_noise_multiplier
from service.privacy.secure_random import SecureRandom
from service.privacy.target import check_target

__all__ = [
    "NoisySGDBST14",
    "NoisySGDBST14Params",
    "bst14_event",
    "bst14_step_sensitivity",
    "default_iterations",
    "sampled_noisy_sgd",
]


@dataclass(frozen=True)
class BST14Config(ShapeConfig):
    """What ``fit`` reads from a stored plan (field names = stored keys)."""

    batch_size: int
    iterations: int
    schedule: Any  # the step schedule's JSON (sgd_common.schedule_from_json)
    radius: float


class NoisySGDBST14Params(BaseModel):
    """Hyper-parameters of ``noisy_sgd_bst14``; omitted values get defaults."""

    model_config = ConfigDict(extra="forbid")

    mode: Mode | None = baseline_mode_field()
    iterations: int | None = Field(
        default=None,
        ge=1,
        le=SAMPLED_STEPS_CAP,
        description=(
            "T: noisy steps, each on a fresh batch of b rows sampled without replacement. "
            "Default: (n/b)² (BST14's n² steps for b = 1), clamped to max_iterations."
        ),
    )
    max_iterations: int = Field(
        default=10_000,
        ge=1,
        le=SAMPLED_STEPS_CAP,
        description="Cap on the default number of iterations (ignored if iterations is given).",
    )
    batch_size: int | None = baseline_batch_size_field()
    radius: float | None = baseline_radius_field()
    step_size: float | None = baseline_step_size_field()


# --- the math, as plain functions ------------------------------------------------------------


def bst14_step_sensitivity(lipschitz: float, batch_size: int) -> float:
    """Δ = 2L/b: replace-one sensitivity of the batch-mean gradient on the sample (docstring, 1)."""
    return 2.0 * lipschitz / batch_size


def bst14_event(
    noise_multiplier: float, n: int, batch_size: int, iterations: int
) -> dp_event.DpEvent:
    """T-fold composition of the WOR-sampled Gaussian with z = σ/Δ (docstring, 2–3)."""
    return dp_event.SelfComposedDpEvent(
        dp_event.SampledWithoutReplacementDpEvent(
            source_dataset_size=n,
            sample_size=batch_size,
            event=dp_event.GaussianDpEvent(noise_multiplier),
        ),
        iterations,
    )


def default_iterations(n: int, batch_size: int, max_iterations: int) -> int:
    """⌈(n/b)²⌉ clamped to [1, max_iterations]."""
    return max(1, min(max_iterations, math.ceil((n / batch_size) ** 2)))


def sampled_noisy_sgd(
    loss: Loss,
    X: FloatArray,
    y: FloatArray,
    *,
    iterations: int,
    batch_size: int,
    schedule: StepSchedule | InverseSqrtSchedule,
    radius: float | None,
    noise_scale: float,
    rng: SecureRandom,
    noise: bool = True,
    sensitivity: float = 0.0,
    progress: ProgressCallback | None = None,
    observe: Callable[[int, FloatArray, IntArray], None] | None = None,
) -> FloatArray:
    """BST14 on the rows: batches and Gaussian noise drawn from ``rng`` at every step.
    ``noise=False`` runs the same batches without noise (for sensitivity tests); with noise,
    each step's gradient is released exactly at the per-step ``sensitivity`` Δ
    (:func:`~service.optimizers.kits.sgd_common.noisy_release`)."""
    n, d = X.shape
    return run_sgd(
        loss,
        X,
        y,
        sampled_batches(n, batch_size, iterations, rng),
        schedule,
        radius=radius,
        noise=noisy_release("gaussian", noise_scale, sensitivity, rng) if noise else None,
        progress=progress,
        observe=observe,
    )


# --- the plug-in ------------------------------------------------------------------------------


class NoisySGDBST14:
    """BST14 with mini-batches: sampled noisy SGD accounted with RDP amplification."""

    name: ClassVar[str] = "noisy_sgd_bst14"
    summary: ClassVar[str] = (
        "Baseline: projected noisy SGD where every step samples a fresh batch of b rows "
        "without replacement (Bassily, Smith & Thakurta 2014, mini-batch version), with "
        "privacy amplification by sampling in the RDP accountant. Kept for benchmarks."
    )
    assumptions: ClassVar[str] = (
        "Convex, L-Lipschitz per-example loss on rows with ‖x‖₂ ≤ 1, l1 = 0, l2 = μ ≥ 0 "
        "(strongly convex mode needs μ > 0); δ > 0."
    )
    guarantee: ClassVar[str] = (
        "(ε, δ)-DP (replace-one): T compositions of a Gaussian of sensitivity 2L/b on a batch "
        "sampled without replacement, by dp-accounting's RDP accountant (Wang, Balle & "
        "Kasiviswanathan 2019 amplification). No pure ε-DP."
    )
    reference: ClassVar[str] = (
        "Bassily, Smith & Thakurta (2014), 'Private Empirical Risk Minimization: Efficient "
        "Algorithms and Tight Error Bounds', FOCS, Alg. 1; mini-batch/iteration extensions: "
        "Wu et al. (2017) §4.1, Zhang et al. (2017) §4; amplification: Wang, Balle & "
        "Kasiviswanathan (2019), Thm 27; steps: Shamir & Zhang (2013)."
    )
    Params: ClassVar[type[BaseModel]] = NoisySGDBST14Params
    Config: ClassVar[type[PlanConfig]] = BST14Config

    def plan(
        self, params: BaseModel, loss: Loss, n: int, d: int, target: PrivacyTarget
    ) -> ReleasePlan:
        """Resolve T, b and the steps and calibrate z (public information only). Raises
        :class:`InfeasibleSpec` naming the field at fault (δ = 0 on ``privacy.delta``)."""
        p = coerce_params(params, NoisySGDBST14Params)
        check_target(target, pure_allowed=False, optimizer=self.name)
        if n < 1 or d < 1:
            raise ValueError("n and d must be >= 1")
        check_convex_loss(loss, self.name)
        batch_size = resolve_batch_size(p.batch_size, n)
        iterations = (
            default_iterations(n, batch_size, p.max_iterations)
            if p.iterations is None
            else p.iterations
        )
        sensitivity = bst14_step_sensitivity(loss.lipschitz, batch_size)
        eps, delta = target.epsilon, target.delta
        guess = (batch_size / n) * math.sqrt(8.0 * iterations * math.log(1.0 / delta)) / eps
        z = calibrate_noise_multiplier(
            lambda v: bst14_event(v, n, batch_size, iterations),
            eps,
            delta,
            subsampled=True,
            initial_guess=max(guess, 0.3),
        )
        sigma = z * sensitivity
        steps = baseline_steps(
            mode=p.mode,
            loss=loss,
            radius=p.radius,
            step_size=p.step_size,
            second_moment=noise_second_moment("gaussian", d, sigma),
            steps=iterations,
        )
        hyperparameters: dict[str, Any] = {
            "mode": steps.mode,
            "iterations": iterations,
            "batch_size": batch_size,
            "schedule": steps.schedule.to_json(),
            "radius": steps.radius,
            "noise_multiplier": z,
            "n": n,
            "d": d,
        }
        return ReleasePlan(
            mechanism="gaussian",
            sensitivity=sensitivity,
            noise_scale=sigma,
            event=bst14_event(z, n, batch_size, iterations),
            total_steps=iterations,
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
        config = BST14Config.from_hyperparameters(plan.hyperparameters)
        n, d, batch_size = config.n, config.d, config.batch_size
        check_convex_loss(loss, self.name)
        if plan.mechanism != "gaussian":
            raise ValueError("noisy_sgd_bst14 plans use Gaussian noise")
        if plan.sensitivity < bst14_step_sensitivity(loss.lipschitz, batch_size) * (1.0 - 1e-12):
            raise ValueError("the plan's sensitivity does not cover this loss")
        X, y = checked_data(loss, X, y, n, d)
        return sampled_noisy_sgd(
            loss,
            X,
            y,
            iterations=config.iterations,
            batch_size=batch_size,
            schedule=schedule_from_json(config.schedule),
            radius=config.radius,
            noise_scale=plan.noise_scale,
            sensitivity=plan.sensitivity,
            rng=rng,
            progress=progress,
        )


OPTIMIZER = NoisySGDBST14
