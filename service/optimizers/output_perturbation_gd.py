r"""Output-perturbation full-batch gradient descent (Zhang et al. 2017, Alg. 1), with a tighter
sensitivity than the paper's Lemmas 2–3.

Algorithm. ``w_0 = 0``; for t = 0 … T−1: ``w_{t+1} = w_t − η ∇F(w_t; S)`` with
``F(w; S) = (1/n) Σ_i ℓ(w; x_i, y_i) + (μ/2)‖w‖²``; release ``w_T + z`` with z drawn once:
density ∝ exp(−ε‖z‖/Δ_T) for δ = 0 (Alg. 1 line 6), N(0, σ²I) with the analytic σ of Balle &
Wang (2018) for δ > 0 (instead of line 8's loose constant).

Assumptions. ℓ(·; x, y) convex, L-Lipschitz and β-smooth for every admissible row (‖x‖ ≤ 1),
μ ≥ 0, constant step ``0 < η ≤ 2/(β + 2μ)`` (= 2/(β_F + μ) with β_F = β + μ the smoothness of F),
no L1 term (``loss.l1 = 0``; the non-smooth term needs a proximal optimizer such as dp_svrg).
Nothing else about the loss is used: any convex model of :mod:`service.models` (classification
or regression) runs unchanged with its own L, β, μ.

Sensitivity (Hardt, Recht & Singer 2016, growth recursion; replace-one adjacency).
Let S, S' differ only in row j and write F_S = H + (1/n)ℓ_j, F_{S'} = H + (1/n)ℓ'_j with the
shared part ``H(w) = (1/n) Σ_{i≠j} ℓ_i(w) + (μ/2)‖w‖² = q(w) + (μ/2)‖w‖²``; q is convex and
β_q-smooth with β_q = (n−1)β/n ≤ β.

1. The shared step ``G(w) = w − η∇H(w) = (1 − ημ)·(w − η/(1−ημ) ∇q(w))`` is (1 − ημ)-Lipschitz:
   for a convex β_q-smooth q, the map ``w ↦ w − a∇q(w)`` is non-expansive whenever a ≤ 2/β_q
   (co-coercivity: ⟨∇q(u)−∇q(v), u−v⟩ ≥ ‖∇q(u)−∇q(v)‖²/β_q), and
   ``a = η/(1−ημ) ≤ 2/β`` ⟺ ``η ≤ 2/(β + 2μ)``. (That bound also forces ημ ≤ 1.)
2. The differing row moves the two updates apart by at most
   ``(η/n)‖∇ℓ_j(w_t) − ∇ℓ'_j(w'_t)‖ ≤ 2ηL/n``.
3. Hence ``δ_{t+1} ≤ (1 − ημ) δ_t + 2ηL/n`` with δ_0 = 0 (both runs start at w_0 = 0), so

       Δ_T = (2ηL/n) Σ_{k<T} (1−ημ)^k = 2L (1 − (1−ημ)^T) / (nμ)    (μ > 0),
       Δ_T = 2ηLT/n                                                 (μ = 0, the limit μ → 0).

Comparison with the paper. Δ_T ≤ 2ηLT/n always, below Lemma 2's 3ηLT/n (which also needs the
smaller range η ≤ 1/β); and Δ_T < 2L/(nμ) ≤ (2/5)·5L(μ+β)/(nμβ), below Lemma 3's bound (which
needs η ≤ 1/(β+μ)). Neither the worst-case rows nor the trajectory enter Δ_T: it depends on
public quantities only (L, β, μ, n, η, T), so it is fixed before the data is read.

Privacy. Releasing ``w_T + z`` with the noise calibrated to Δ_T is ε-DP (δ = 0, density ratio
≤ e^{ε‖w_T − w'_T‖/Δ_T} ≤ e^ε) or (ε, δ)-DP (δ > 0, Balle & Wang Thm 8); Zhang et al. Thm 1.

Defaults (from public information only).
- Step size: 1/β for μ = 0 (the classical choice with f(w_T) − f* ≤ ‖w*‖²/(2ηT); since
  Δ_T ∝ ηT only the product matters and larger η buys nothing); 2/(β + 2μ) = 2/(β_F + μ) for
  μ > 0, the step with the best worst-case contraction ‖w_t − ŵ‖ ≤ ((β_F−μ)/(β_F+μ))^t ‖ŵ‖
  (Nesterov 2004, Thm 2.1.15), at no privacy cost since Δ_T < 2L/(nμ) whatever η.
- Iterations, with D the analyst's public guess of ‖ŵ‖ (``radius``) and
  c = d·log(1/δ) for δ > 0, c = d² for δ = 0:
  convex (Thm 3): ``T = ⌈(β² n² ε² D² / (L² c))^{1/3}⌉``;
  strongly convex (Thm 2): ``T = ⌈((μ² + β_F²)/(μ β_F)) · log max(e, μ² n² ε² D² / (L² c))⌉``
  (the paper's β is the smoothness of the whole objective, β_F = β + μ here);
  both clamped to [1, ``max_iterations``].
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from service.models.base import FloatArray, Loss
from service.optimizers.kits.base import (
    InfeasibleSpec,
    PrivacyTarget,
    ProgressCallback,
    ReleasePlan,
)
from service.optimizers.kits.config import GradientStepsConfig, PlanConfig
from service.optimizers.kits.full_gradient import GradientOracle, LocalGradient, fit_on_oracle
from service.optimizers.kits.gradient_kit import exact_gradient_needed
from service.optimizers.kits.inputs import Rows, checked_rows
from service.optimizers.kits.limits import FULL_GRADIENT_STEPS_CAP
from service.privacy.output_perturbation import (
    calibrate_release,
    release_with_noise,
)
from service.privacy.secure_random import SecureRandom
from service.privacy.target import check_target

__all__ = [
    "OutputPerturbationGD",
    "OutputPerturbationGDParams",
    "default_iterations",
    "default_step_size",
    "gd_sensitivity",
    "gradient_descent",
    "max_step_size",
    "oracle_descent",
]

#: Rows may exceed ‖x‖ = 1 by rounding only; beyond this the loader broke its contract.


class OutputPerturbationGDParams(BaseModel):
    """Hyper-parameters of ``output_perturbation_gd``; omitted values get theory defaults."""

    model_config = ConfigDict(extra="forbid")

    iterations: int | None = Field(
        default=None,
        ge=1,
        le=FULL_GRADIENT_STEPS_CAP,
        description=(
            "Number of full-batch gradient steps T. Default: Zhang et al. Thm 3 (convex, "
            "T = (β²n²ε²D²/(L²·d·log(1/δ)))^(1/3)) or Thm 2 (strongly convex, "
            "T = ((μ²+β²)/(μβ))·log(μ²n²ε²D²/(L²·d·log(1/δ)))), with d² instead of "
            "d·log(1/δ) for δ = 0, clamped to [1, max_iterations]. The sensitivity grows with T "
            "when l2 = 0."
        ),
    )
    step_size: float | None = Field(
        default=None,
        gt=0.0,
        allow_inf_nan=False,
        description=(
            "Constant step size η; must satisfy η ≤ 2/(β + 2μ) (β: smoothness of the "
            "per-example loss, μ: l2), e.g. 8 for logistic regression with l2 = 0. Default: "
            "1/β when l2 = 0, 2/(β + 2μ) when l2 > 0."
        ),
    )
    radius: float = Field(
        default=10.0,
        gt=0.0,
        allow_inf_nan=False,
        description=(
            "D: the analyst's public guess of the norm of the non-private optimum, used only "
            "to choose the default number of iterations."
        ),
    )
    max_iterations: int = Field(
        default=2000,
        ge=1,
        le=FULL_GRADIENT_STEPS_CAP,
        description="Cap on the default number of iterations (ignored if iterations is given).",
    )


# --- the math, as plain functions ------------------------------------------------------------


def max_step_size(smoothness: float, l2: float) -> float:
    """The largest η for which Δ_T holds: 2/(β + 2μ) (∞ if β = μ = 0)."""
    denominator = smoothness + 2.0 * l2
    return math.inf if denominator == 0.0 else 2.0 / denominator


def default_step_size(smoothness: float, l2: float) -> float:
    """1/β for μ = 0; 2/(β + 2μ) for μ > 0 (see the module docstring)."""
    if l2 > 0.0:
        return 2.0 / (smoothness + 2.0 * l2)
    if smoothness > 0.0:
        return 1.0 / smoothness
    raise ValueError("a loss with β = μ = 0 has no default step size")


def gd_sensitivity(lipschitz: float, n: int, step_size: float, iterations: int, l2: float) -> float:
    """Replace-one L2 sensitivity of w_T: 2L(1 − (1−ημ)^T)/(nμ), or 2ηLT/n for μ = 0.

    Valid for 0 < η ≤ 2/(β + 2μ) (module docstring). Evaluated with log1p/expm1 so that it is
    accurate for tiny ημ and equals 2L/(nμ) when ημ = 1.
    """
    if l2 == 0.0:
        return 2.0 * step_size * lipschitz * iterations / n
    contraction = step_size * l2
    # 1 − (1 − ημ)^T; for ημ = 1 it is 1 (and η ≤ 2/(β+2μ) rules out ημ > 1)
    geometric = 1.0 if contraction >= 1.0 else -math.expm1(iterations * math.log1p(-contraction))
    return 2.0 * lipschitz * geometric / (n * l2)


def default_iterations(
    loss: Loss, n: int, d: int, target: PrivacyTarget, radius: float, max_iterations: int
) -> int:
    """Zhang et al. Thm 3 iteration count, or for μ > 0 the smaller of Thm 2's and Thm 3's,
    clamped to [1, cap].

    Computed in log space so that huge ε or n cannot overflow.
    """
    eps, delta = target.epsilon, target.delta
    mu, beta, lip = loss.l2, loss.smoothness, loss.lipschitz
    log_c = math.log(d) + math.log(math.log(1.0 / delta)) if delta > 0.0 else 2.0 * math.log(d)
    log_scale = 2.0 * (math.log(n) + math.log(eps) + math.log(radius) - math.log(lip)) - log_c
    if beta == 0.0:
        return 1
    t = math.exp(min((2.0 * math.log(beta) + log_scale) / 3.0, 700.0))
    if mu > 0.0:
        # F is also merely convex and Δ_T ≤ 2ηLT/n still holds, so Thm 3's prescription is valid
        # too; take the smaller one (Thm 2's count explodes as μ → 0, Thm 3's does not).
        beta_f = beta + mu
        factor = (mu * mu + beta_f * beta_f) / (mu * beta_f)
        t = min(t, factor * max(1.0, 2.0 * math.log(mu) + log_scale))
    if not t < max_iterations:
        return max_iterations
    return max(1, math.ceil(t))


def gradient_descent(
    loss: Loss,
    X: Rows,
    y: FloatArray,
    step_size: float,
    iterations: int,
    progress: ProgressCallback | None = None,
) -> FloatArray:
    """Noise-free full-batch GD from w_0 = 0: T steps ``w ← w − η∇F(w)``; returns w_T.

    ``progress(t)`` is called after step t (t = 1 … T) and may raise to stop the run.
    """
    return oracle_descent(LocalGradient(loss, X, y), step_size, iterations, progress)


def oracle_descent(
    oracle: GradientOracle,
    step_size: float,
    iterations: int,
    progress: ProgressCallback | None = None,
) -> FloatArray:
    """:func:`gradient_descent` with ∇F from ``oracle`` (local rows or partitions)."""
    if iterations < 0:
        raise ValueError("iterations must be >= 0")
    w: FloatArray = np.zeros(oracle.dimension, dtype=np.float64)
    for t in range(1, iterations + 1):
        w -= step_size * oracle.gradient(w)
        if progress is not None:
            progress(t)
    return w


# --- the plug-in ------------------------------------------------------------------------------


class OutputPerturbationGD:
    """Zhang et al. (2017) Alg. 1: full-batch GD for T steps, then noise once."""

    name: ClassVar[str] = "output_perturbation_gd"
    summary: ClassVar[str] = (
        "Full-batch gradient descent from 0 for T steps with a constant step, then one draw of "
        "noise calibrated to the replace-one sensitivity of the last iterate."
    )
    assumptions: ClassVar[str] = (
        "Convex, L-Lipschitz, β-smooth per-example loss on rows with ‖x‖₂ ≤ 1; l2 = μ ≥ 0 "
        "(μ > 0: strongly convex, sensitivity bounded independently of T); l1 = 0 (no "
        "non-smooth regulariser); step size η ≤ 2/(β + 2μ)."
    )
    guarantee: ClassVar[str] = (
        "ε-DP for δ = 0 (noise density ∝ exp(−ε‖z‖/Δ)); (ε, δ)-DP for δ > 0 (analytic "
        "Gaussian mechanism). Replace-one adjacency with Δ = 2L(1 − (1−ημ)^T)/(nμ) "
        "(2ηLT/n for μ = 0)."
    )
    reference: ClassVar[str] = (
        "Zhang, Zheng, Mou & Wang (2017), 'Efficient Private ERM for Smooth Objectives', "
        "Alg. 1, Thm 2–3; sensitivity via Hardt, Recht & Singer (2016); Gaussian calibration "
        "Balle & Wang (2018), Thm 8."
    )
    Params: ClassVar[type[BaseModel]] = OutputPerturbationGDParams
    Config: ClassVar[type[PlanConfig]] = GradientStepsConfig

    def plan(
        self, params: BaseModel, loss: Loss, n: int, d: int, target: PrivacyTarget
    ) -> ReleasePlan:
        """Resolve T and η, compute Δ_T and calibrate the noise, from public information only.

        Raises :class:`InfeasibleSpec` for a non-convex loss or l1 > 0 ("model"), a step size
        above 2/(β + 2μ) ("optimizer.params.step_size"), or ε ∉ (0, ∞) / δ ∉ [0, 1)
        ("privacy.epsilon" / "privacy.delta").
        """
        p = (
            params
            if isinstance(params, OutputPerturbationGDParams)
            else OutputPerturbationGDParams.model_validate(params.model_dump())
        )
        check_target(target, pure_allowed=True, optimizer=self.name)
        if n < 1 or d < 1:
            raise ValueError("n and d must be >= 1")
        if not loss.convex:
            raise InfeasibleSpec(
                "model",
                f"{self.name} needs a convex loss; {loss.name} is not convex — choose an "
                "optimizer for non-convex objectives",
            )
        exact_gradient_needed(loss, self.name)
        if loss.l1 != 0.0:
            raise InfeasibleSpec(
                "model",
                f"{self.name} needs a smooth objective; {loss.name} with l1 = {loss.l1:g} adds "
                "the non-smooth term l1‖w‖₁ — use dp_svrg (proximal) or set l1 = 0",
            )
        if not (math.isfinite(loss.lipschitz) and loss.lipschitz > 0.0):
            raise InfeasibleSpec("model", f"{loss.name} has no finite Lipschitz constant")
        beta, mu = loss.smoothness, loss.l2
        if not (math.isfinite(beta) and beta >= 0.0 and math.isfinite(mu) and mu >= 0.0):
            raise InfeasibleSpec("model", f"{loss.name} has no finite smoothness / l2")
        bound = max_step_size(beta, mu)
        if p.step_size is None:
            if beta + mu == 0.0:
                raise InfeasibleSpec(
                    "optimizer.params.step_size", "this loss has no default step size; give one"
                )
            step = default_step_size(beta, mu)
        else:
            step = float(p.step_size)
            if step > bound:
                raise InfeasibleSpec(
                    "optimizer.params.step_size",
                    f"step_size must be at most 2/(β + 2μ) = {bound:.6g} for {loss.name} with "
                    f"l2 = {mu:g} (β = {beta:g}); above it gradient descent is no longer "
                    "contractive and the sensitivity bound does not hold",
                )
        if p.iterations is not None:
            iterations = int(p.iterations)
        else:
            iterations = default_iterations(loss, n, d, target, p.radius, p.max_iterations)
        sensitivity = gd_sensitivity(loss.lipschitz, n, step, iterations, mu)
        calibration = calibrate_release(sensitivity, target.epsilon, target.delta)
        hyperparameters: dict[str, Any] = {
            "iterations": iterations,
            "step_size": step,
            "radius": p.radius,
            "n": n,
            "d": d,
        }
        return ReleasePlan(
            mechanism=calibration.mechanism,
            sensitivity=sensitivity,
            noise_scale=calibration.noise_scale,
            event=calibration.event,
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
        """Run ``plan`` on the private rows and return the noised ``w_T + z``.

        Checks (without revealing data values) that the rows match the plan's public n and d,
        that ‖x‖₂ ≤ 1 (up to rounding, rescaled exactly to ≤ 1), that the labels are admissible
        for the loss (``loss.check_labels``), that l1 = 0, and that the plan's sensitivity covers
        this loss — the assumptions the privacy proof rests on.
        """
        step, iterations, n, d = _checked_plan(plan, loss)
        rows, y = checked_rows(loss, X, y, n, d)
        w = gradient_descent(loss, rows, y, step, iterations, progress)
        return release_with_noise(plan.mechanism, w, plan.noise_scale, plan.sensitivity, rng)

    def fit_oracle(
        self,
        plan: ReleasePlan,
        loss: Loss,
        oracle: GradientOracle,
        rng: SecureRandom,
        progress: ProgressCallback,
    ) -> FloatArray:
        """:meth:`fit` with the gradients from ``oracle`` (e.g. partitions on Dask workers,
        which check their own rows): the same T steps, then the same one noise draw."""
        step, iterations, _, d = _checked_plan(plan, loss)
        w = fit_on_oracle(
            plan, oracle, lambda checked: oracle_descent(checked, step, iterations, progress)
        )
        return release_with_noise(plan.mechanism, w, plan.noise_scale, plan.sensitivity, rng)


def _checked_plan(plan: ReleasePlan, loss: Loss) -> tuple[float, int, int, int]:
    """(η, T, n, d) of the plan, after checking it suits this loss (``ValueError``)."""
    config = GradientStepsConfig.from_hyperparameters(plan.hyperparameters)
    step, iterations, n, d = config.step_size, config.iterations, config.n, config.d
    if step > max_step_size(loss.smoothness, loss.l2):
        raise ValueError("the plan's step size is too large for this loss")
    needed = gd_sensitivity(loss.lipschitz, n, step, iterations, loss.l2)
    if plan.sensitivity < needed * (1.0 - 1e-12):
        raise ValueError("the plan's sensitivity does not cover this loss")
    if loss.l1 != 0.0:
        raise ValueError("this optimizer does not support l1 > 0")
    return step, iterations, n, d


OPTIMIZER = OutputPerturbationGD
