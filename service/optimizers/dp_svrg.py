r"""DP-SVRG: noisy proximal SVRG for strongly convex objectives (Wang, Ye & Xu 2017, Alg. 1,
built on Prox-SVRG of Xiao & Zhang 2014), with a privacy analysis derived here.

The engine :func:`~service.optimizers.kits.svrg_common.noisy_svrg` and the accounting shared with
``dp_svrg_pp`` (Alg. 2, same analysis, doubling epochs) live in
:mod:`service.optimizers.kits.svrg_common`; the derivations are here.

Algorithm. ``w̃_0 = 0``; for epochs s = 1 … S, with m_s inner steps:

    g̃_s = ∇F(w̃_{s−1}; S) + ζ_s,                ζ_s ~ N(0, σ_s² I)     (noisy snapshot)
    w_0 = w̃_{s−1}           (DP-SVRG;  DP-SVRG++: w_0 = the last iterate of epoch s−1)
    for t = 1 … m_s:
        B_t: b distinct rows, uniformly without replacement, fresh each step
        v_t = ∇F_{B_t}(w_{t−1}) − ∇F_{B_t}(w̃_{s−1}) + g̃_s + u_t,   u_t ~ N(0, σ² I)
        w_t = prox_{η·l1‖·‖₁}(w_{t−1} − η v_t)
    w̃_s = (1/m_s) Σ_t w_t

and release w̃_S. (The paper uses b = 1 and adds one noise vector per inner step to the whole
v_t; here the snapshot gradient gets its own noise once per epoch, so that each released
quantity has a clean sensitivity — see below.)

Assumptions. Convex, L-Lipschitz, β-smooth per-example loss on rows with ‖x‖₂ ≤ 1; for
``dp_svrg`` l2 = μ > 0 (F μ-strongly convex — Prox-SVRG's linear rate needs it; without it use
``dp_svrg_pp``); l1 ≥ 0 through the proximal step; δ > 0. Privacy needs only the finite L.

Sensitivity (replace-one; S, S' differ in row j). Everything the algorithm computes is a
post-processing of two kinds of noisy releases; given the released past, the points w_{t−1}
and w̃_{s−1} are fixed and identical on S and S', and the batch positions are drawn identically.

1. Snapshot (once per epoch): q(S) = (1/n) Σ_i ∇ℓ(w̃; x_i, y_i) (μw̃ is data-free), with
   ‖q(S) − q(S')‖ = ‖∇ℓ_j(w̃) − ∇ℓ'_j(w̃)‖/n ≤ **2L/n** — a Gaussian mechanism, no sampling.
2. Inner step: h(B) = (1/b) Σ_{i∈B} (∇ℓ_i(w) − ∇ℓ_i(w̃)) (μ(w − w̃) is data-free) on the
   batch B. On neighbouring batches (j ∈ B)

       ‖h(B) − h(B')‖ = (1/b) ‖(∇ℓ_j(w) − ∇ℓ_j(w̃)) − (∇ℓ'_j(w) − ∇ℓ'_j(w̃))‖ ≤ **4L/b**,

   since each difference of two gradients of an L-Lipschitz loss has norm ≤ 2L. The bound is
   approached (for a convex linear-model loss ℓ = φ(w·x, y) whose φ' spans [−L, L], e.g. Huber
   or log-cosh regression) by two rows on either side of the hyperplane ⊥ (w − w̃), nearly
   parallel, with residuals of opposite signs at w and w̃ — which needs ‖w − w̃‖ ≫ 1/L. The
   smoothness bound 2β‖w − w̃‖/b would be smaller near convergence, but w − w̃ is not
   bounded by anything public before the run, so it cannot set the noise; we keep 4L/b.
   For the logistic loss φ' spans only (−1, 0), and the same argument gives 2L/b: the
   constant 4L/b is what a general L-Lipschitz loss needs.

Privacy (accounting). The inner step releases h(B_t) + u_t with u_t ~ N(0, σ²I) on a batch
sampled without replacement: ``SampledWithoutReplacementDpEvent(n, b, GaussianDpEvent(z))``
with z = σ/(4L/b). The snapshot releases q + ζ_s: ``GaussianDpEvent(z_s)`` with
z_s = σ_s/(2L/n). The run is the adaptive composition of all of them:

    ComposedDpEvent([snapshots…, SelfComposedDpEvent(SWOR(n, b, Gaussian(z)), Σ_s m_s)])

(snapshots as ``SelfComposedDpEvent(Gaussian(z_s), S)`` when all epochs have one length),
under REPLACE_ONE; one parameter z is calibrated numerically, with σ_s = κσ/√m_s.

Why σ_s = κσ/√m_s (κ = ``snapshot_noise_ratio``, default 1): ζ_s is reused for m_s steps, so its
effect on the epoch's iterates is like that of the m_s fresh inner noises summed
(η m_s ζ_s vs η √m_s u): equal std at σ_s = σ/√m_s. Its privacy cost per epoch,
m_s α (2L/n)²/(2κ²σ²) = m_s α b²/(8κ²n²z²), is then about 1/16 of the m_s inner steps'
cost (≈ 2q²α/z² per step for small q = b/n): at the defaults the snapshots carry 4–6 % of the
run's RDP (tested).

Defaults (``dp_svrg``; mini-batch Prox-SVRG, Xiao & Zhang 2014 Thm 3.1 with the variance
bound divided by b, Konečný et al. 2016): with a = 4β_F η/b, one epoch contracts the
expected optimality gap by

    ρ = (1/(μη) + a (m + 1)) / ((1 − a) m)          (:func:`svrg_contraction`),

plus a noise term. η = min(1/(2β_F), b/(16β_F)) (so a ≤ 1/4); m is the smallest length with
ρ ≤ 1/2, m = ⌈(1/(μη) + a)/((1 − a)/2 − a)⌉, capped at ``max_inner_steps``; S epochs bring
ρ^S·gap down to the noise floor, S = ⌈log(gap·μ·n²ε²/(d L² log(1/δ))) / log(1/ρ)⌉ (Wang et al.
Thm 4.2's T = O(log(n²ε²/(d log(1/δ))))), clamped to [1, ``max_epochs``] and to
S·m ≤ ``max_total_steps``; b = min(n, 64). (For small μ the m needed for ρ ≤ 1/2 grows like
1/(μη) and is capped, leaving no contraction guarantee — ``dp_svrg_pp`` is the method for
that regime.)
"""

from __future__ import annotations

import math
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from service.models.base import FloatArray, Loss, resolved_objective_gap
from service.optimizers.kits.base import (
    InfeasibleSpec,
    PrivacyTarget,
    ProgressCallback,
    ReleasePlan,
)
from service.optimizers.kits.config import PlanConfig
from service.optimizers.kits.svrg_common import (
    SvrgConfig,
    SvrgSchedule,
    batch_size_field,
    check_svrg_model,
    fit_svrg,
    plan_svrg,
    resolve_batch,
    snapshot_ratio_field,
    svrg_contraction,
)
from service.privacy.secure_random import SecureRandom
from service.privacy.target import check_target

__all__ = [
    "DPSVRG",
    "DPSVRGParams",
    "default_epochs",
    "default_inner_steps",
    "default_svrg_step",
]


# --- DP-SVRG ----------------------------------------------------------------------------------


class DPSVRGParams(BaseModel):
    """Hyper-parameters of ``dp_svrg``; omitted values get theory defaults."""

    model_config = ConfigDict(extra="forbid")

    epochs: int | None = Field(
        default=None,
        ge=1,
        le=1000,
        description=(
            "S: number of epochs (each: one noisy full-gradient snapshot, then m noisy inner "
            "steps). Default ⌈log(gap·μ·n²ε²/(d·L²·log(1/δ)))/log(1/ρ)⌉ (Wang et al. Thm 4.2), "
            "clamped to [1, max_epochs]."
        ),
    )
    inner_steps: int | None = Field(
        default=None,
        ge=1,
        le=100_000,
        description=(
            "m: inner steps per epoch. Default: the smallest m with mini-batch Prox-SVRG "
            "contraction ρ = (1/(μη) + a(m+1))/((1−a)m) ≤ 1/2, a = 4β_Fη/b, capped at "
            "max_inner_steps."
        ),
    )
    batch_size: int | None = batch_size_field()
    step_size: float | None = Field(
        default=None,
        gt=0.0,
        allow_inf_nan=False,
        description=(
            "Constant step η. Default min(1/(2β_F), b/(16β_F)), β_F = β + μ; the contraction "
            "needs 4β_Fη < b. Privacy does not depend on it."
        ),
    )
    snapshot_noise_ratio: float = snapshot_ratio_field()
    objective_gap: float = Field(
        default=1.0,
        gt=0.0,
        allow_inf_nan=False,
        description=(
            "The analyst's public bound on F(0) − min F, used only for the default number of "
            "epochs. Unset: max(1, the largest loss a row can have at w = 0): 1 for "
            "classification, δ·B − δ²/2 for Huber regression with label bound B."
        ),
    )
    max_epochs: int = Field(
        default=30, ge=1, le=1000, description="Cap on the default number of epochs."
    )
    max_inner_steps: int = Field(
        default=2000, ge=1, le=100_000, description="Cap on the default inner steps per epoch."
    )
    max_total_steps: int = Field(
        default=20_000,
        ge=1,
        le=1_000_000,
        description="Cap on epochs × inner steps of the default number of epochs.",
    )


def default_svrg_step(smoothness_f: float, batch: int) -> float:
    """min(1/(2β_F), b/(16β_F))."""
    return min(0.5, batch / 16.0) / smoothness_f


def default_inner_steps(mu: float, smoothness_f: float, step: float, batch: int, cap: int) -> int:
    """Smallest m with ρ ≤ 1/2 (needs a = 4β_Fη/b < 1/3), clamped to [1, cap]."""
    a = 4.0 * smoothness_f * step / batch
    denominator = 0.5 * (1.0 - a) - a
    if denominator <= 0.0:
        return cap
    m = (1.0 / (mu * step) + a) / denominator
    return cap if not m < cap else max(1, math.ceil(m))


def default_epochs(
    loss: Loss, n: int, d: int, target: PrivacyTarget, gap: float, rho: float, cap: int
) -> int:
    """⌈log(gap·μ·n²ε²/(d L² log(1/δ))) / log(1/ρ)⌉ (ρ ≥ 0.95 read as 0.95), in [1, cap]."""
    log_arg = (
        math.log(gap)
        + math.log(loss.l2)
        + 2.0 * (math.log(n) + math.log(target.epsilon) - math.log(loss.lipschitz))
        - math.log(d)
        - math.log(math.log(1.0 / target.delta))
    )
    rate = -math.log(min(max(rho, 1e-12), 0.95))
    s = max(1.0, log_arg) / rate
    return cap if not s < cap else max(1, math.ceil(s))


class DPSVRG:
    """Wang, Ye & Xu (2017) Alg. 1: noisy proximal SVRG for strongly convex objectives."""

    name: ClassVar[str] = "dp_svrg"
    summary: ClassVar[str] = (
        "Proximal SVRG with Gaussian noise: each epoch releases a noisy full-gradient "
        "snapshot, then takes noisy variance-reduced steps on batches sampled without "
        "replacement; L1/elastic net via the proximal step; RDP accounting of all releases."
    )
    assumptions: ClassVar[str] = (
        "Convex, L-Lipschitz, β-smooth per-example loss on rows with ‖x‖₂ ≤ 1; l2 = μ > 0 "
        "(strongly convex; otherwise use dp_svrg_pp); l1 ≥ 0 (proximal step); delta > 0."
    )
    guarantee: ClassVar[str] = (
        "(ε, δ)-DP, replace-one adjacency: per epoch a Gaussian snapshot (sensitivity 2L/n) "
        "and m sampled-without-replacement Gaussian inner steps (sensitivity 4L/b), composed "
        "and accounted by dp-accounting's RDP accountant."
    )
    reference: ClassVar[str] = (
        "Wang, Ye & Xu (2017), 'Differentially Private Empirical Risk Minimization Revisited: "
        "Faster and More General', Alg. 1, Thm 4.1–4.2; Prox-SVRG, Xiao & Zhang (2014); "
        "sampled-without-replacement RDP, Wang, Balle & Kasiviswanathan (2019)."
    )
    Params: ClassVar[type[BaseModel]] = DPSVRGParams
    Config: ClassVar[type[PlanConfig]] = SvrgConfig

    def plan(
        self, params: BaseModel, loss: Loss, n: int, d: int, target: PrivacyTarget
    ) -> ReleasePlan:
        """Resolve S, m, b, η and calibrate the noise, from public information only.

        Raises :class:`InfeasibleSpec` for δ = 0 / invalid (ε, δ) ("privacy.*"), a non-convex
        loss or l2 = 0 ("model"), b > n ("optimizer.params.batch_size").
        """
        p = (
            params
            if isinstance(params, DPSVRGParams)
            else DPSVRGParams.model_validate(params.model_dump(exclude_unset=True))
        )
        check_target(target, pure_allowed=False, optimizer=self.name)
        if n < 1 or d < 1:
            raise ValueError("n and d must be >= 1")
        check_svrg_model(loss, self.name)
        mu = loss.l2
        if mu <= 0.0:
            raise InfeasibleSpec(
                "model",
                f"{self.name} needs a strongly convex objective: set l2 > 0 in the model, or "
                "use dp_svrg_pp, which needs convexity only",
            )
        batch = resolve_batch(p.batch_size, n)
        beta_f = loss.smoothness + mu
        step = float(p.step_size) if p.step_size is not None else default_svrg_step(beta_f, batch)
        inner = (
            int(p.inner_steps)
            if p.inner_steps is not None
            else default_inner_steps(mu, beta_f, step, batch, p.max_inner_steps)
        )
        rho = svrg_contraction(mu, beta_f, step, inner, batch)
        gap = resolved_objective_gap(loss, p)
        epochs = (
            int(p.epochs)
            if p.epochs is not None
            else default_epochs(
                loss,
                n,
                d,
                target,
                gap,
                rho,
                min(p.max_epochs, max(1, p.max_total_steps // inner)),
            )
        )
        schedule = SvrgSchedule([inner] * epochs, batch, step, p.snapshot_noise_ratio)
        extra = {
            "epochs": epochs,
            "inner_steps": inner,
            "contraction": rho if math.isfinite(rho) else None,
            "objective_gap": gap,
        }
        return plan_svrg("svrg_gaussian_per_step", schedule, loss, n, d, target, extra)

    def fit(
        self,
        plan: ReleasePlan,
        loss: Loss,
        X: FloatArray,
        y: FloatArray,
        rng: SecureRandom,
        progress: ProgressCallback,
    ) -> FloatArray:
        """Run ``plan`` on the private rows and return the noisy w̃_S."""
        return fit_svrg(plan, loss, X, y, rng, progress, continue_from_last=False)


OPTIMIZER = DPSVRG
