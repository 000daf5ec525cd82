r"""DP-AGD: Nesterov-accelerated (proximal) full-gradient descent with Gaussian noise on every
gradient, for smooth convex losses.

This is DP-GD (Wang, Ye & Xu 2017, Alg. 4; :mod:`service.optimizers.dp_gd`) with the gradient
step replaced by the accelerated proximal step of FISTA (Beck & Teboulle 2009, eq. (4.1)–(4.3)),
the Euclidean counterpart of paper 002's DP-AccMD. The privacy analysis is DP-GD's word for word:
only *where* the T noisy gradients are taken changes, and those points are post-processing of
earlier releases.

Algorithm. w_0 = v_1 = 0, s_1 = 1; for t = 1 … T:

    g_t     = ∇F(v_t; S) + ζ_t,              ζ_t ~ N(0, σ² I_d)    (the only data access)
    w_t     = prox_{η·l1‖·‖₁}(v_t − η g_t)
    s_{t+1} = (1 + √(1 + 4 s_t²)) / 2
    v_{t+1} = w_t + ((s_t − 1)/s_{t+1}) (w_t − w_{t−1})

and release w_T. F(w; S) = (1/n)Σ_i ℓ(w; x_i, y_i) + (μ/2)‖w‖² (the loss's ``gradient``); the
L1 term enters only through the prox.

Assumptions. Rows with ‖x‖₂ ≤ 1 (enforced by the loader, checked in ``fit``); per-example loss
L-Lipschitz (privacy) and β-smooth and convex (utility and the default T only).

Sensitivity (replace-one). Given the released past, v_t is fixed and identical on neighbouring
datasets S ≃ S' (they differ in row j only); μ v_t and the prox are data-free, so the private
part of the release at step t is the mean data gradient and

    ‖∇F(v_t; S) − ∇F(v_t; S')‖ = ‖∇ℓ(v_t; x_j, y_j) − ∇ℓ(v_t; x'_j, y'_j)‖ / n ≤ 2L/n =: Δ.

Privacy (accounting). Each step is a Gaussian mechanism with noise multiplier z = σ/Δ given the
history; T adaptively composed steps are ``SelfComposedDpEvent(GaussianDpEvent(z), T)`` under
REPLACE_ONE, exactly √T/z-GDP (Dong, Roth & Su 2022). z is the smallest multiplier with
δ(ε; √T/z) ≤ δ (exact; :func:`service.privacy.gdp.gaussian_steps_multiplier`), the μ charged.
w_T is post-processing of the T noisy gradients. δ = 0 is impossible (Gaussian noise).

Utility and defaults (public information only). η = 1/β_F with β_F = β + μ (FISTA's step). The
noise-free method satisfies F(w_T) − F* ≤ 2β_F R²/(T + 1)² with R = ‖w*‖ (Beck & Teboulle 2009,
Thm 4.4). For unbiased gradient noise with E‖ζ‖² = dσ², the accelerated stochastic method's
error has, besides that optimisation term, a noise term of order σ_* R / √T with
σ_*² = dσ² (Lan 2012, Cor. 1, Euclidean setup with Bregman radius V = R²/2 — the bound
:mod:`service.optimizers.dp_accmd` uses in the ℓ1 geometry). Since σ = z_T Δ and T Gaussian
steps at (ε, δ) need z_T = z₁√T exactly (GDP; z₁: the multiplier of one release), that
noise term equals c·R/√2 with c = Δ z₁ √d — a floor independent of T. The default T is where
the optimisation term β_F V/T² = β_F R²/(2T²) has fallen to that floor:

    T = ⌈ (β_F R / (√2 Δ z₁ √d))^{1/2} ⌉ = ⌈ (β_F R n / (2√2 L z₁ √d))^{1/2} ⌉,

clamped to [1, ``max_iterations``]; more steps only add noise without improving the bound. It
grows like √(nε), as DP-AccMD's does. Caveat, stated plainly: Lan's bound is for AC-SA's
noise-adapted step; we run FISTA's constant step 1/β_F (the same method with the largest step
the bound allows), whose noise term can be larger, so this T is a balancing rule taken from the
bound, not a guarantee for the constant step. Measured on UCI Adult (``python -m bench
head-to-head``) it lands within a factor 2 of the best fixed T at every ε in {0.1, 0.5, 1, 2}.
R is the analyst's public guess ``radius`` of ‖w*‖; with l2 = μ > 0 it defaults to the
data-free bound √(2·gap/μ) (μ-strong convexity gives (μ/2)‖w*‖² ≤ F(0) − F* ≤ gap),
gap = ``objective_gap`` (1 covers logistic, F(0) = log 2).

Privacy never depends on η, T's rule, R or the momentum: a user may set any of them.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from service.models.base import FloatArray, Loss, resolved_objective_gap
from service.optimizers.kits.accelerated_kit import (
    ACCELERATED_ASSUMPTIONS,
    noisy_accelerated_descent,
    oracle_accelerated_descent,
    plan_accelerated,
)
from service.optimizers.kits.base import PrivacyTarget, ProgressCallback, ReleasePlan
from service.optimizers.kits.config import GradientStepsConfig, PlanConfig
from service.optimizers.kits.full_gradient import GradientOracle, fit_on_oracle, noisy_descent
from service.optimizers.kits.gradient_kit import check_plan_covers, full_gradient_inputs
from service.optimizers.kits.limits import FULL_GRADIENT_STEPS_CAP
from service.privacy.secure_random import SecureRandom

__all__ = ["DPAGD", "DPAGDParams"]


class DPAGDParams(BaseModel):
    """Hyper-parameters of ``dp_agd``; omitted values get theory defaults."""

    model_config = ConfigDict(extra="forbid")

    iterations: int | None = Field(
        default=None,
        ge=1,
        le=FULL_GRADIENT_STEPS_CAP,
        description=(
            "Number of noisy full-gradient steps T. Default: T = ⌈(β_F·R·n/(2√2·L·z₁·√d))^½⌉, "
            "where the accelerated rate β_F·R²/(2T²) meets the noise floor (module docstring); "
            "β_F = β + l2, z₁ the noise multiplier of one Gaussian release at (ε, δ), "
            "R = radius; clamped to [1, max_iterations]."
        ),
    )
    step_size: float | None = Field(
        default=None,
        gt=0.0,
        allow_inf_nan=False,
        description=(
            "Constant step size η. Default 1/β_F = 1/(β + l2). Privacy does not depend on it."
        ),
    )
    radius: float | None = Field(
        default=None,
        gt=0.0,
        allow_inf_nan=False,
        description=(
            "The analyst's public guess of ‖w*‖, used only to choose the default T. Default "
            "√(2·objective_gap/l2) (strong convexity); required when l2 = 0 and iterations is "
            "not given."
        ),
    )
    objective_gap: float = Field(
        default=1.0,
        gt=0.0,
        allow_inf_nan=False,
        description=(
            "The analyst's public bound on F(0) − min F, used only for the default radius. "
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


class DPAGD:
    """Accelerated (FISTA) gradient descent with Gaussian noise on every full gradient."""

    name: ClassVar[str] = "dp_agd"
    summary: ClassVar[str] = (
        "Nesterov-accelerated (FISTA) full-batch gradient descent from 0 with Gaussian noise "
        "on every gradient; reaches DP-GD's accuracy in far fewer steps on ill-conditioned "
        "convex problems. Noise calibrated exactly in Gaussian DP (μ = √T/z) for the T noisy steps."
    )
    assumptions: ClassVar[str] = ACCELERATED_ASSUMPTIONS
    guarantee: ClassVar[str] = (
        "(ε, δ)-DP, replace-one adjacency: T Gaussian steps of per-step sensitivity 2L/n, "
        "accounted exactly as SelfComposed(Gaussian(σ/(2L/n)), T), i.e. μ = √T·(2L/n)/σ "
        "Gaussian DP (Dong, Roth & Su 2022); charged that μ (the same accounting as dp_gd)."
    )
    reference: ClassVar[str] = (
        "Beck & Teboulle (2009), FISTA, Thm 4.4; Wang, Ye & Xu (2017) Alg. 3–4 (DP-AccMD, "
        "DP-GD) for the privacy analysis; Lan (2012), Cor. 1, for the noise floor."
    )
    Params: ClassVar[type[BaseModel]] = DPAGDParams
    Config: ClassVar[type[PlanConfig]] = GradientStepsConfig

    def plan(
        self, params: BaseModel, loss: Loss, n: int, d: int, target: PrivacyTarget
    ) -> ReleasePlan:
        """Resolve η, R and T, and calibrate σ, from public information only.

        Raises :class:`InfeasibleSpec` for δ = 0 or an invalid (ε, δ), a non-convex loss or
        one without finite constants ("model"), β + μ = 0 without a step size, or l2 = 0
        without a radius or iterations ("optimizer.params.…").
        """
        p = (
            params
            if isinstance(params, DPAGDParams)
            else DPAGDParams.model_validate(params.model_dump(exclude_unset=True))
        )
        return plan_accelerated(
            self.name,
            loss,
            n,
            d,
            target,
            iterations=p.iterations,
            step_size=p.step_size,
            radius=p.radius,
            objective_gap=resolved_objective_gap(loss, p),
            max_iterations=p.max_iterations,
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
        """Run ``plan`` on the private rows and return the noisy last iterate w_T.

        Checks the data against the plan's public n, d and the row-norm / label assumptions,
        and that the plan's per-step sensitivity covers this loss (without data values).
        """
        rows, labels = full_gradient_inputs(plan, loss, X, y)
        config = GradientStepsConfig.from_hyperparameters(plan.hyperparameters)
        return noisy_accelerated_descent(
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
        run = noisy_descent(oracle_accelerated_descent, plan, loss, rng, progress)
        return fit_on_oracle(plan, oracle, run)


OPTIMIZER = DPAGD
