r"""DP-GD: noisy (proximal) full-gradient descent (Wang, Ye & Xu 2017, Alg. 4), for smooth
losses that are non-convex, satisfy the Polyak–Łojasiewicz (PL) condition, or are convex.

The pieces the other gradient-perturbation optimizers share (the record of one noisy release,
the proximal step, the data checks, the plan of T Gaussian steps) live in
:mod:`service.optimizers.kits.gradient_kit`.

Algorithm (Alg. 4, with the L1 term handled by a proximal step). ``w_0 = 0``; for t = 1 … T:

    g_t = ∇F(w_{t−1}; S) + ζ_t,          ζ_t ~ N(0, σ² I_d)
    w_t = prox_{η·l1‖·‖₁}(w_{t−1} − η g_t)      (a plain gradient step when l1 = 0)

and release ``w_T``. F(w; S) = (1/n) Σ_i ℓ(w; x_i, y_i) + (μ/2)‖w‖² is the smooth part of the
objective (the loss's ``gradient``); the L1 term l1‖w‖₁ enters only through the prox.

Assumptions. Rows with ‖x‖₂ ≤ 1 (enforced by the loader, checked in ``fit``); the per-example
loss is L-Lipschitz (needed for privacy) and β-smooth (needed for the step size and utility
only). Convexity is *not* needed: the privacy proof holds for any loss with a finite L.

Sensitivity (replace-one). Given the released past, the iterate w_{t−1} is fixed and identical
on neighbouring datasets S ≃ S' (they differ in row j only); the regulariser μw and the prox
are data-free. The only private quantity released at step t is the mean data gradient
q_t(S) = (1/n) Σ_i ∇ℓ(w_{t−1}; x_i, y_i), and

    ‖q_t(S) − q_t(S')‖ = ‖∇ℓ(w; x_j, y_j) − ∇ℓ(w; x'_j, y'_j)‖ / n ≤ 2L/n =: Δ.

The bound is attained, e.g. by the sigmoid loss (ℓ = σ(−y w·x), L = 1/4) at a row with
w·x = 0 replaced by its opposite −x: the two gradients are −(1/4)y x and +(1/4)y x.

Privacy (accounting). Each step is a Gaussian mechanism with noise multiplier z = σ/Δ, i.e.
exactly 1/z-GDP; T adaptively composed steps are exactly √T/z-GDP (Dong, Roth & Su 2022,
Cor. 3.3), which is (ε, δ)-DP iff δ(ε; √T/z) ≤ δ (their Cor. 2.13). z is the smallest such
multiplier, z = √T/μ* with μ* the exact one-release μ (:func:`service.privacy.gdp.
gaussian_steps_multiplier`) — no RDP conversion, whose slack cost 8–10 % more noise. The event
``SelfComposedDpEvent(GaussianDpEvent(z), T)`` (REPLACE_ONE, z not doubled;
docs/ledger.md#the-z-convention) is what
the ledger charges: its exact μ = √T/z, and its Rényi curve Tα/(2z²) where the filter needs
one (ledger/filter.py). Every iterate, hence w_T, is
post-processing of the T noisy gradients. δ = 0 is impossible (a Gaussian mechanism is never
pure ε-DP).

Closed-form cross-check. The paper's Thm 6.1 sets σ² = c G² T log(1/δ)/(n² ε²) for an
unspecified constant c (G = L). An explicit valid version goes through zero-concentrated DP
(Bun & Steinke 2016, which the paper's proof uses): T Gaussian steps are ρ-zCDP with
ρ = TΔ²/(2σ²), and ρ-zCDP implies (ρ + 2√(ρ log(1/δ)), δ)-DP, so

    σ_zCDP = Δ √(T / (2ρ*)),   √ρ* = √(log(1/δ) + ε) − √(log(1/δ))   (:func:`zcdp_noise_std`).

Since √ρ* ≥ ε / (2√(log(1/δ) + ε)), σ_zCDP² ≤ 2TΔ²(log(1/δ) + ε)/ε² ≤ 16 T L² log(1/δ)/(n²ε²)
for ε ≤ log(1/δ): the paper's form holds with c = 16. Our σ is never larger than σ_zCDP: it
is the exact Gaussian calibration, and ρ-zCDP → (ε, δ) is only an upper bound on the same
Gaussian's privacy profile. Every ε > 0 can be met (no conversion floor).

Defaults (public information only), with β_F = β + μ the smoothness of F, z₁ the noise
multiplier a *single* Gaussian release would need for (ε, δ) (T-fold Gaussian composition is
exactly a Gaussian with multiplier z/√T in RDP, so z = √T z₁), and ``objective_gap`` the
analyst's public bound on F(0) − min F (1 covers logistic, log 2, and sigmoid, 1/2):

- step size η = 1/β_F (the descent lemma's step).
- PL case — a convex loss with μ > 0 (strong convexity implies PL with constant μ; with
  l1 > 0 the proximal-PL condition of Karimi, Nutini & Schmidt 2016): with η = 1/β_F,
  E[F(w_t) − F*] ≤ (1 − μ/β_F)^t gap + dσ²/(2μ) (descent lemma + PL), and σ² = T(2Lz₁/n)²,
  so the bound e^{−Tμ/β_F} gap + 2TdL²z₁²/(μn²) is minimised at

      T = (β_F/μ) · log(gap μ² n² / (2 β_F d L² z₁²)),

  the Θ((β_F/μ) log(n²ε²/(d log(1/δ)))) of Wang et al. Thm 6.2 with explicit constants.
- otherwise (non-convex, or μ = 0): the descent lemma gives (1/T) Σ_t E‖∇F(w_t)‖² ≤
  2β_F gap/T + dσ², minimised at

      T = (n / (2L z₁)) · √(2 β_F gap / d),

  the Θ(nε/√(d log(1/δ))) of Wang et al. Thm 6.3, with the rate
  O(L √(β_F gap d log(1/δ)) / (nε)).
- T is clamped to [1, ``max_iterations``].

``fit`` returns the last iterate w_T (the theorems bound the average over iterates of ‖∇F‖²;
noisy GD with η = 1/β_F is a descent method on average, and w_T is what users expect).
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from service.models.base import FloatArray, Loss, resolved_objective_gap
from service.optimizers.kits.base import PrivacyTarget, ProgressCallback, ReleasePlan
from service.optimizers.kits.config import GradientStepsConfig, PlanConfig
from service.optimizers.kits.full_gradient import (
    GradientOracle,
    LocalGradient,
    fit_on_oracle,
    noisy_descent,
)
from service.optimizers.kits.gradient_kit import (
    QueryRecord,
    check_full_gradient_job,
    check_plan_covers,
    full_gradient_inputs,
    gaussian_steps_plan,
    proximal_step,
    single_release_multiplier,
)
from service.optimizers.kits.inputs import Rows
from service.optimizers.kits.limits import FULL_GRADIENT_STEPS_CAP
from service.privacy.secure_random import SecureRandom
from service.privacy.secure_release import reserve_gaussian, secure_gaussian

__all__ = [
    "DPGD",
    "DPGDParams",
    "default_iterations",
    "noisy_gradient_descent",
    "oracle_gradient_descent",
]


class DPGDParams(BaseModel):
    """Hyper-parameters of ``dp_gd``; omitted values get theory defaults."""

    model_config = ConfigDict(extra="forbid")

    iterations: int | None = Field(
        default=None,
        ge=1,
        le=FULL_GRADIENT_STEPS_CAP,
        description=(
            "Number of noisy full-gradient steps T. Default (Wang, Ye & Xu 2017, Thm 6.2–6.3 "
            "with explicit constants): T = (β_F/μ)·log(gap·μ²n²/(2β_F·d·L²·z₁²)) for a convex "
            "loss with l2 = μ > 0 (PL case), else T = (n/(2L·z₁))·√(2β_F·gap/d), where "
            "β_F = β + μ and z₁ is the noise multiplier of one Gaussian release at (ε, δ); "
            "clamped to [1, max_iterations]. More steps mean more noise per step."
        ),
    )
    step_size: float | None = Field(
        default=None,
        gt=0.0,
        allow_inf_nan=False,
        description=(
            "Constant step size η. Default 1/β_F = 1/(β + μ). Privacy does not depend on it; "
            "the utility guarantees need η ≤ 1/β_F."
        ),
    )
    objective_gap: float = Field(
        default=1.0,
        gt=0.0,
        allow_inf_nan=False,
        description=(
            "The analyst's public bound on F(0) − min F, used only to choose the default T. "
            "Unset: max(1, the largest loss a row can have at w = 0): 1 for classification, "
            "δ·B − δ²/2 for Huber regression with label bound B."
        ),
    )
    max_iterations: int = Field(
        default=1000,
        ge=1,
        le=FULL_GRADIENT_STEPS_CAP,
        description="Cap on the default number of iterations (ignored if iterations is given).",
    )


def default_iterations(
    loss: Loss, n: int, d: int, z1: float, objective_gap: float, max_iterations: int
) -> int:
    """The module docstring's T (PL or non-convex), clamped to [1, max_iterations]."""
    lip, mu = loss.lipschitz, loss.l2
    beta_f = loss.smoothness + mu
    if beta_f == 0.0:
        return max_iterations
    if loss.convex and mu > 0.0:
        log_arg = (
            math.log(objective_gap)
            + 2.0 * (math.log(mu) + math.log(n) - math.log(lip) - math.log(z1))
            - math.log(2.0 * beta_f * d)
        )
        t = (beta_f / mu) * max(1.0, log_arg)
    else:
        log_t = (
            math.log(n)
            - math.log(2.0 * lip * z1)
            + 0.5 * (math.log(2.0 * beta_f * objective_gap) - math.log(d))
        )
        t = math.exp(min(log_t, 700.0))
    if not t < max_iterations:
        return max_iterations
    return max(1, math.ceil(t))


def noisy_gradient_descent(
    loss: Loss,
    X: Rows,
    y: FloatArray,
    *,
    step_size: float,
    iterations: int,
    noise_std: float,
    rng: SecureRandom,
    sensitivity: float = 0.0,
    progress: ProgressCallback | None = None,
    trace: list[QueryRecord] | None = None,
) -> FloatArray:
    """Alg. 4 from w_0 = 0: T steps ``w ← prox(w − η(∇F(w) + ζ))``, ζ ~ N(0, σ²I); returns w_T.
    ∇F(w) + ζ is the exact release :func:`~service.privacy.secure_release.secure_gaussian` at
    the per-step ``sensitivity`` Δ (μ ≤ Δ/σ per step, as planned).

    ``noise_std = 0`` switches the noise off (no draws from ``rng``): the noiseless algorithm
    the sensitivity tests run. ``trace`` (tests only) receives one :class:`QueryRecord` per step.
    """
    return oracle_gradient_descent(
        loss,
        LocalGradient(loss, X, y),
        step_size=step_size,
        iterations=iterations,
        noise_std=noise_std,
        rng=rng,
        sensitivity=sensitivity,
        progress=progress,
        trace=trace,
    )


def oracle_gradient_descent(
    loss: Loss,
    oracle: GradientOracle,
    *,
    step_size: float,
    iterations: int,
    noise_std: float,
    rng: SecureRandom,
    sensitivity: float = 0.0,
    progress: ProgressCallback | None = None,
    trace: list[QueryRecord] | None = None,
) -> FloatArray:
    """:func:`noisy_gradient_descent` with ∇F(w) from ``oracle`` (local rows or partitions):
    the same steps and the same noise draws from ``rng``."""
    d = oracle.dimension
    w: FloatArray = np.zeros(d, dtype=np.float64)
    reserve_gaussian(d, noise_std, sensitivity, iterations, rng)
    for t in range(1, iterations + 1):
        g = oracle.gradient(w)
        released = secure_gaussian(g, noise_std, sensitivity, rng) if noise_std > 0.0 else g
        if trace is not None:
            trace.append(QueryRecord("full_gradient", w.copy(), released - g))
        w = proximal_step(loss, w - step_size * released, step_size)
        if progress is not None:
            progress(t)
    return w


class DPGD:
    """Wang, Ye & Xu (2017) Alg. 4: gradient descent with Gaussian noise at every step."""

    name: ClassVar[str] = "dp_gd"
    summary: ClassVar[str] = (
        "Full-batch (proximal) gradient descent from 0 with Gaussian noise added to every "
        "gradient; the noise is calibrated exactly in Gaussian DP (μ = √T/z) for the T noisy steps."
    )
    assumptions: ClassVar[str] = (
        "L-Lipschitz, β-smooth per-example loss on rows with ‖x‖₂ ≤ 1; convexity NOT required "
        "(utility: PL objectives — e.g. convex with l2 > 0 — and non-convex smooth ones); "
        "l1 ≥ 0 handled by a proximal step; delta > 0."
    )
    guarantee: ClassVar[str] = (
        "(ε, δ)-DP, replace-one adjacency: T Gaussian steps of per-step sensitivity 2L/n, "
        "accounted exactly as SelfComposed(Gaussian(σ/(2L/n)), T), i.e. μ = √T·(2L/n)/σ "
        "Gaussian DP (Dong, Roth & Su 2022); charged that μ."
    )
    reference: ClassVar[str] = (
        "Wang, Ye & Xu (2017), 'Differentially Private Empirical Risk Minimization Revisited: "
        "Faster and More General', Alg. 4, Thm 6.1–6.3; RDP of the Gaussian mechanism, "
        "Mironov (2017)."
    )
    Params: ClassVar[type[BaseModel]] = DPGDParams
    Config: ClassVar[type[PlanConfig]] = GradientStepsConfig

    def plan(
        self, params: BaseModel, loss: Loss, n: int, d: int, target: PrivacyTarget
    ) -> ReleasePlan:
        """Resolve η and T, and calibrate σ, from public information only.

        Raises :class:`InfeasibleSpec` for δ = 0 or an invalid (ε, δ) ("privacy.delta" /
        "privacy.epsilon"), a loss without finite constants ("model"), or a loss with
        β + μ = 0 and no step size given ("optimizer.params.step_size").
        """
        p = (
            params
            if isinstance(params, DPGDParams)
            else DPGDParams.model_validate(params.model_dump(exclude_unset=True))
        )
        step = check_full_gradient_job(self.name, loss, n, d, target, p.step_size)
        z1 = single_release_multiplier(target.epsilon, target.delta)
        gap = resolved_objective_gap(loss, p)
        if p.iterations is not None:
            iterations = int(p.iterations)
        else:
            iterations = default_iterations(loss, n, d, z1, gap, p.max_iterations)
        return gaussian_steps_plan(loss, n, d, target, iterations, step, z1, {"objective_gap": gap})

    def fit(
        self,
        plan: ReleasePlan,
        loss: Loss,
        X: FloatArray,
        y: FloatArray,
        rng: SecureRandom,
        progress: ProgressCallback,
    ) -> FloatArray:
        """Run ``plan`` on the private rows and return the noisy last iterate w_T.

        Checks the data against the plan's public n, d and the row-norm / label assumptions,
        and that the plan's per-step sensitivity covers this loss (without data values).
        """
        rows, labels = full_gradient_inputs(plan, loss, X, y)
        config = GradientStepsConfig.from_hyperparameters(plan.hyperparameters)
        return noisy_gradient_descent(
            loss,
            rows,
            labels,
            step_size=config.step_size,
            iterations=config.iterations,
            noise_std=plan.noise_scale,
            sensitivity=plan.sensitivity,
            rng=rng,
            progress=progress,
        )

    def fit_oracle(
        self,
        plan: ReleasePlan,
        loss: Loss,
        oracle: GradientOracle,
        rng: SecureRandom,
        progress: ProgressCallback,
    ) -> FloatArray:
        """:meth:`fit` with the gradients from ``oracle`` (e.g. partitions on Dask workers,
        which check their own rows); the same steps, noise and accounting."""
        check_plan_covers(plan, loss)
        run = noisy_descent(oracle_gradient_descent, plan, loss, rng, progress)
        return fit_on_oracle(plan, oracle, run)


OPTIMIZER = DPGD
