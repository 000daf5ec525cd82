r"""DP-AccMD: accelerated mirror descent with noisy full gradients over an ℓ1 ball
(Wang, Ye & Xu, *Differentially Private ERM Revisited: Faster and More General*, NeurIPS 2017,
Alg. 3 and Thms 5.3–5.4; paper 002, whose formulas were lost in extraction — the algorithm is
re-derived below from the published method and the sources it builds on).

Problem. min_{w ∈ C} P(w), C = {‖w‖₁ ≤ R} (R = ``l1_radius``, public), with
P(w) = F(w) + l1‖w‖₁ and F(w) = (1/n)Σℓ(w; x_i, y_i) + (μ/2)‖w‖². For high-dimensional data
the ℓ1 geometry makes the error depend on log d instead of d (paper §5: the Gaussian width of
the ℓ1 ball is O(R√log d), Lemma 5.2).

Geometry (paper §5, Def. 5.1, Lemma 5.1). The Minkowski norm of C is ‖w‖_C = ‖w‖₁/R, its dual
is R‖g‖_∞. We parametrise C by the simplex Δ_{2d+1}: λ = (u, v, s) ↦ A λ = R(u − v) maps
Δ_{2d+1} onto C (the slack s is the weight of the vertex 0). The mirror map is the negative
entropy on Δ_{2d+1}, 1-strongly convex w.r.t. ‖·‖₁ (Pinsker), with Bregman radius
V = max_λ KL(λ ‖ uniform) = ln(2d + 1) from the uniform start (A λ_0 = 0). The objective in λ,
Ψ(λ) = F(Aλ) + l1·R·(Σu + Σv), has gradient ∇_λ = R·(g + l1, −g + l1, 0) with g = ∇F(Aλ);
its smooth part is L_C-smooth w.r.t. ‖·‖₁ → ‖·‖_∞ with
    ‖A^T(∇F(Aλ) − ∇F(Aλ'))‖_∞ = R‖∇F(x) − ∇F(x')‖_∞ ≤ R(β + μ)‖x − x'‖₂ ≤ R(β+μ)‖x − x'‖₁
                               ≤ R²(β + μ)‖λ − λ'‖₁,
so L_C = (β + μ)R² (the paper's Lemma 5.1: L‖C‖₂²). The L1 term is linear on the simplex and
Ψ ≥ P∘A with equality at every λ with u ⊙ v = 0, so min Ψ = min_C P and
P(Aλ) − min_C P ≤ Ψ(λ) − min Ψ: the L1 penalty costs nothing in smoothness.

Algorithm (accelerated mirror descent / linear coupling, Allen-Zhu & Orecchia 2017, in the
single-projection form of Tseng 2008 and Lan 2012's AC-SA, which is robust to unbiased
gradient noise). λ_1 = uniform, x^ag_1 = 0; for t = 1 … T, with τ_t = 2/(t + 1) and
γ_t = (t + 1)γ/2:

    x^md_t  = τ_t A λ_t + (1 − τ_t) x^ag_t                      (coupling)
    g̃_t     = ∇F(x^md_t; S) + ζ_t,   ζ_t ~ N(0, σ² I_d)           (the only data access)
    λ_{t+1} ∝ λ_t ⊙ exp(−γ_t R (g̃_t + l1, −g̃_t + l1, 0))        (mirror step)
    x^ag_{t+1} = τ_t A λ_{t+1} + (1 − τ_t) x^ag_t                (gradient-type step)

and release x^ag_{T+1} ∈ C. (The paper's Alg. 3 takes the gradient step as a separate
Minkowski-norm proximal step; the form above is the one-prox variant of the same coupling, with
the same privacy analysis since only g̃_t depends on the data.)

Privacy (replace-one). Step t releases g̃_t. The regulariser μ x^md_t is identical on
neighbours, so ‖∇F(x; S) − ∇F(x; S')‖₂ = (1/n)‖∇ℓ(x; z_j) − ∇ℓ(x; z'_j)‖₂ ≤ 2L/n =: Δ for every
x, with L the per-example ℓ2-Lipschitz constant. The noise is isotropic Gaussian, so the ℓ2
sensitivity is the relevant one even though the mirror geometry is ℓ1/ℓ∞ (the dual norm enters
only the utility, through E‖ζ‖²_∞ below). Each step is a Gaussian mechanism with noise
multiplier z = σ/Δ given the history (x^md_t is a function of earlier releases), so the run is
the adaptive composition ``SelfComposedDpEvent(GaussianDpEvent(z), T)``, exactly √T/z-GDP
(Dong, Roth & Su 2022); z is the smallest value with δ(ε; √T/z) ≤ δ (exact, privacy/gdp.py) —
replacing the paper's (9), σ² = c·G²T log(1/δ)/(n²ε²) with an unspecified constant c. The
released x^ag_{T+1} is post-processing.

Utility (Lan 2012, Cor. 1, for unbiased noise with E‖noise‖²_* ≤ σ_*², in λ-space):
with γ = min{1/(2L_C), (6V/(σ_*²(T+1)(T+2)²))^{1/2}},
    E[P(x^ag_{T+1})] − min_C P ≤ O(L_C V/T² + σ_* √(V/T)).
Here σ_* = R·(E‖ζ‖²_∞)^{1/2} and E‖ζ‖²_∞ ≤ σ²(4 ln d + 2 ln 2) (Jensen with the χ²₁ moment
generating function at 1/(4σ²): exp(E max ζ_i²/(4σ²)) ≤ Σ_i E exp(ζ_i²/(4σ²)) = d√2). Since
σ = z_T Δ and z_T = z_1 √T (z_1: the multiplier of a single (ε, δ) Gaussian release; exact under
RDP), σ_* = c√T with c = R·Δ·z_1·(4 ln d + 2 ln 2)^{1/2}, and the bound is
O(L_C V/T² + c√V): the noise term, O(R L √(log d · log(2d+1) · log(1/δ))/(nε)), no longer
depends on T, and it depends on d only logarithmically (the paper's Thm 5.4 point).

Defaults. T = ⌈(L_C √V / c)^{1/2}⌉, the T at which the optimisation term L_C V/T² has fallen to
the noise floor c√V (more iterations improve the bound by at most a factor 2 and cost a full
pass each); clamped to [1, ``max_iterations``]. This grows like √(nε), matching the paper's
gradient complexity O(n^{1.5} √ε) for T·n. The step γ follows Lan's rule above with the
calibrated σ.

Assumptions. ℓ convex, L-Lipschitz (ℓ2) and β-smooth per example on rows with ‖x‖₂ ≤ 1;
μ ≥ 0, l1 ≥ 0; δ > 0; R chosen without looking at the data.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from dp_accounting import dp_event
from pydantic import BaseModel, ConfigDict, Field

from service.models.base import FloatArray, Loss
from service.optimizers.kits.base import (
    InfeasibleSpec,
    PrivacyTarget,
    ProgressCallback,
    ReleasePlan,
)
from service.optimizers.kits.config import PlanConfig
from service.optimizers.kits.full_gradient import GradientOracle, LocalGradient, fit_on_oracle
from service.optimizers.kits.inputs import checked_data
from service.optimizers.kits.limits import FULL_GRADIENT_STEPS_CAP
from service.privacy.gdp import gaussian_steps_multiplier
from service.privacy.secure_random import SecureRandom, as_secure
from service.privacy.secure_release import reserve_gaussian, secure_gaussian
from service.privacy.target import check_target

__all__ = [
    "AccMDConfig",
    "AccMDStep",
    "DPAccMD",
    "DPAccMDParams",
    "accmd_run",
    "accmd_event",
    "dual_noise_factor",
    "simplex_to_weights",
]

#: Rows may exceed ‖x‖ = 1 by rounding only; beyond this the loader broke its contract.


class DPAccMDParams(BaseModel):
    """Hyper-parameters of ``dp_accmd``; omitted values get theory defaults."""

    model_config = ConfigDict(extra="forbid")

    l1_radius: float = Field(
        default=10.0,
        gt=0.0,
        le=1e6,
        allow_inf_nan=False,
        description=(
            "R: the fit is constrained to the ℓ1 ball ‖w‖₁ ≤ R. Public: choose it from domain "
            "knowledge, never from the data. The error bound grows linearly in R and the "
            "smoothness in the mirror geometry as R². Default 10."
        ),
    )
    iterations: int | None = Field(
        default=None,
        ge=1,
        le=FULL_GRADIENT_STEPS_CAP,
        description=(
            "Number of accelerated steps T (each reads all n rows, noise composed over T). "
            "Default: T = ⌈(L_C·√V/c)^(1/2)⌉ with L_C = (β+μ)R², V = ln(2d+1) and "
            "c = R·(2L/n)·z₁·√(4 ln d + 2 ln 2) (z₁: noise multiplier of one (ε, δ) Gaussian "
            "release), the point where the optimisation error meets the noise floor; clamped "
            "to [1, max_iterations]."
        ),
    )
    max_iterations: int = Field(
        default=500,
        ge=1,
        le=FULL_GRADIENT_STEPS_CAP,
        description="Cap on the default number of iterations (ignored if iterations is given).",
    )


# --- the math, as plain functions ------------------------------------------------------------


def dual_noise_factor(d: int) -> float:
    """4 ln d + 2 ln 2: E‖ζ‖²_∞ ≤ σ²·this for ζ ~ N(0, σ² I_d) (module docstring)."""
    return 4.0 * math.log(d) + 2.0 * math.log(2.0)


def accmd_event(noise_multiplier: float, iterations: int) -> dp_event.DpEvent:
    """T adaptive Gaussian releases of sensitivity Δ with σ = noise_multiplier·Δ."""
    return dp_event.SelfComposedDpEvent(
        dp_event.GaussianDpEvent(noise_multiplier=noise_multiplier), iterations
    )


def simplex_to_weights(lam: FloatArray, radius: float) -> FloatArray:
    """A λ = R(u − v) for λ = (u, v, s) on the (2d+1)-simplex."""
    d = (lam.shape[0] - 1) // 2
    out: FloatArray = radius * (lam[:d] - lam[d : 2 * d])
    return out


@dataclass(frozen=True)
class AccMDConfig(PlanConfig):
    """Every resolved value a run needs (``ReleasePlan.hyperparameters`` holds it as JSON)."""

    n: int
    d: int
    iterations: int
    l1_radius: float
    step_size: float  # γ; step t uses γ_t = (t + 1)γ/2
    gradient_sensitivity: float  # Δ = 2L/n
    noise_sigma: float  # σ = z·Δ
    l1: float


@dataclass
class AccMDStep:
    """One step of a run (for tests and audits; never released)."""

    point: FloatArray  # x^md_t, where the gradient is queried
    gradient: FloatArray  # ∇F(x^md_t; S), exact
    noisy: FloatArray  # g̃_t


def accmd_run(
    loss: Loss,
    X: FloatArray,
    y: FloatArray,
    config: AccMDConfig,
    rng: SecureRandom,
    progress: ProgressCallback | None = None,
    trace: list[AccMDStep] | None = None,
    noise_sigma: float | None = None,
) -> FloatArray:
    """Run the accelerated mirror descent of the module docstring; return x^ag_{T+1}.

    ``noise_sigma`` overrides σ (tests use 0; the generator is consumed identically).
    """
    return accmd_oracle_run(
        loss, LocalGradient(loss, X, y), config, rng, progress, trace, noise_sigma
    )


def accmd_oracle_run(
    loss: Loss,
    oracle: GradientOracle,
    config: AccMDConfig,
    rng: SecureRandom,
    progress: ProgressCallback | None = None,
    trace: list[AccMDStep] | None = None,
    noise_sigma: float | None = None,
) -> FloatArray:
    """:func:`accmd_run` with ∇F from ``oracle`` (local rows or partitions): the same steps
    and the same noise draws from ``rng``."""
    d = oracle.dimension
    sigma = config.noise_sigma if noise_sigma is None else noise_sigma
    source = as_secure(rng)
    radius, gamma, l1 = config.l1_radius, config.step_size, config.l1
    log_lam = np.zeros(2 * d + 1, dtype=np.float64)  # uniform start: A λ_1 = 0
    lam = np.full(2 * d + 1, 1.0 / (2 * d + 1))
    x_ag: FloatArray = np.zeros(d, dtype=np.float64)
    mirror_grad = np.zeros(2 * d + 1, dtype=np.float64)
    reserve_gaussian(d, sigma, config.gradient_sensitivity, config.iterations, source)
    for t in range(1, config.iterations + 1):
        tau = 2.0 / (t + 1)
        x_md = tau * simplex_to_weights(lam, radius) + (1.0 - tau) * x_ag
        exact = np.asarray(oracle.gradient(x_md), dtype=np.float64)
        noisy = (
            secure_gaussian(exact, sigma, config.gradient_sensitivity, source)
            if sigma > 0.0
            else exact.copy()
        )
        mirror_grad[:d] = radius * (noisy + l1)
        mirror_grad[d : 2 * d] = radius * (l1 - noisy)
        log_lam -= (0.5 * (t + 1) * gamma) * mirror_grad
        log_lam -= log_lam.max()
        lam = np.exp(log_lam)
        lam /= lam.sum()
        x_ag = tau * simplex_to_weights(lam, radius) + (1.0 - tau) * x_ag
        if trace is not None:
            trace.append(AccMDStep(point=x_md, gradient=exact, noisy=noisy))
        if progress is not None:
            progress(t)
    return x_ag


# --- the plug-in ------------------------------------------------------------------------------


class DPAccMD:
    """Wang, Ye & Xu (2017) Alg. 3: accelerated mirror descent over an ℓ1 ball, noisy gradients."""

    name: ClassVar[str] = "dp_accmd"
    summary: ClassVar[str] = (
        "Accelerated (linear-coupling) mirror descent over the ℓ1 ball ‖w‖₁ ≤ R with an "
        "entropic mirror map and Gaussian-noised full gradients; for high-dimensional data, "
        "error depends on d only through log d."
    )
    assumptions: ClassVar[str] = (
        "Convex, L-Lipschitz, β-smooth per-example loss on rows with ‖x‖₂ ≤ 1; l2 = μ ≥ 0; "
        "l1 ≥ 0 supported exactly; a public ℓ1 radius R (the model is constrained to "
        "‖w‖₁ ≤ R); δ > 0."
    )
    guarantee: ClassVar[str] = (
        "(ε, δ)-DP under replace-one adjacency: T adaptively composed Gaussian releases of the "
        "full gradient, each with L2 sensitivity 2L/n, noise multiplier calibrated exactly "
        "in Gaussian DP (μ = √T/z). Utility: E[P(w)] − min over the ℓ1 ball = O(L_C·ln(2d+1)/T² + "
        "R·L·√(log d·log(2d+1)·log(1/δ))/(nε)), L_C = (β+μ)R²."
    )
    reference: ClassVar[str] = (
        "Wang, Ye & Xu (2017), 'Differentially Private Empirical Risk Minimization Revisited: "
        "Faster and More General', Alg. 3, Thms 5.3–5.4; Allen-Zhu & Orecchia (2017) linear "
        "coupling; Lan (2012) AC-SA step sizes."
    )
    Params: ClassVar[type[BaseModel]] = DPAccMDParams
    Config: ClassVar[type[PlanConfig]] = AccMDConfig

    def plan(
        self, params: BaseModel, loss: Loss, n: int, d: int, target: PrivacyTarget
    ) -> ReleasePlan:
        """Resolve T and γ and calibrate the per-step noise, from public information only.

        Raises :class:`InfeasibleSpec` for a non-convex loss or one without finite constants
        ("model"), δ = 0 or δ ∉ (0, 1) ("privacy.delta"), ε ∉ (0, ∞) ("privacy.epsilon").
        """
        p = (
            params
            if isinstance(params, DPAccMDParams)
            else DPAccMDParams.model_validate(params.model_dump())
        )
        check_target(target, pure_allowed=False, optimizer=self.name)
        if n < 1 or d < 1:
            raise ValueError("n and d must be >= 1")
        if not loss.convex:
            raise InfeasibleSpec(
                "model",
                f"{self.name} needs a convex loss; {loss.name} is not convex — use "
                "dp_spiderboost for non-convex objectives",
            )
        lip, beta, mu = float(loss.lipschitz), float(loss.smoothness), float(loss.l2)
        l1 = float(getattr(loss, "l1", 0.0))
        if not (math.isfinite(lip) and lip > 0.0):
            raise InfeasibleSpec("model", f"{loss.name} has no finite Lipschitz constant")
        if not all(math.isfinite(v) and v >= 0.0 for v in (beta, mu, l1)):
            raise InfeasibleSpec("model", f"{loss.name} has no finite smoothness / l2 / l1")
        radius = float(p.l1_radius)
        eps, delta = target.epsilon, target.delta
        sensitivity = 2.0 * lip / n
        smooth_c = (beta + mu) * radius**2
        bregman = math.log(2 * d + 1)
        noise_factor = dual_noise_factor(d)

        if p.iterations is not None:
            iterations = int(p.iterations)
        else:
            z_single = gaussian_steps_multiplier(1, eps, delta)
            floor = radius * sensitivity * z_single * math.sqrt(noise_factor)
            t_star = math.sqrt(smooth_c * math.sqrt(bregman) / floor) if smooth_c > 0 else 1.0
            iterations = (
                int(p.max_iterations)
                if not t_star < p.max_iterations
                else max(1, math.ceil(t_star))
            )
        z = gaussian_steps_multiplier(iterations, eps, delta)  # exact GDP: μ = √T/z
        sigma = z * sensitivity
        dual_sigma_sq = radius**2 * sigma**2 * noise_factor
        noise_scale = dual_sigma_sq * (iterations + 1) * (iterations + 2) ** 2
        candidates = [math.sqrt(6.0 * bregman / noise_scale) if noise_scale > 0 else math.inf]
        if smooth_c > 0:
            candidates.append(1.0 / (2.0 * smooth_c))
        step = min(candidates)
        if not math.isfinite(step):
            raise InfeasibleSpec("model", f"{loss.name} has β + μ = 0: no finite step size")
        config = AccMDConfig(
            n=n,
            d=d,
            iterations=iterations,
            l1_radius=radius,
            step_size=step,
            gradient_sensitivity=sensitivity,
            noise_sigma=sigma,
            l1=l1,
        )
        hyperparameters: dict[str, Any] = config.to_hyperparameters()
        hyperparameters.update(
            {
                "noise_multiplier": z,
                "smoothness_l1": smooth_c,
                "lipschitz": lip,
                "smoothness": beta,
                "l2": mu,
            }
        )
        return ReleasePlan(
            mechanism="gaussian",
            sensitivity=sensitivity,
            noise_scale=sigma,
            event=accmd_event(z, iterations),
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
        """Run ``plan`` on the private rows and return x^ag_{T+1} (inside the ℓ1 ball).

        Checks (without revealing data values) that the rows match the plan's public n and d,
        ‖x‖₂ ≤ 1, admissible labels, and that the plan's sensitivity covers this loss.
        """
        config = _checked_config(plan, loss)
        X, y = checked_data(loss, X, y, config.n, config.d)
        return accmd_run(loss, X, y, config, rng, progress)

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
        config = _checked_config(plan, loss)
        return fit_on_oracle(
            plan, oracle, lambda checked: accmd_oracle_run(loss, checked, config, rng, progress)
        )


def _checked_config(plan: ReleasePlan, loss: Loss) -> AccMDConfig:
    """The run's configuration, after checking the plan suits this loss (``ValueError``)."""
    config = AccMDConfig.from_hyperparameters(plan.hyperparameters)
    if not loss.convex:
        raise ValueError("this optimizer needs a convex loss")
    if 2.0 * loss.lipschitz / config.n > config.gradient_sensitivity * (1 + 1e-12):
        raise ValueError("the plan's sensitivity does not cover this loss")
    if float(getattr(loss, "l1", 0.0)) != config.l1:
        raise ValueError("the plan was made for another l1")
    return config


OPTIMIZER = DPAccMD
