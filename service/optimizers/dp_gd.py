r"""DP-GD: noisy (proximal) full-gradient descent (Wang, Ye & Xu 2017, Alg. 4), for smooth
losses that are non-convex, satisfy the Polyak–Łojasiewicz (PL) condition, or are convex.

This module also holds the pieces the other gradient-perturbation optimizers share
(``rrpsgd``, ``dp_svrg``, ``dp_svrg_pp``): the record of one noisy release
(:class:`QueryRecord`), the proximal step, the data checks and the noise-multiplier calibration
(calibration lives in :mod:`service.privacy.calibration`).

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
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from dp_accounting import dp_event
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, Field

from service.models.base import FloatArray, Loss
from service.optimizers.base import (
    InfeasibleSpec,
    PrivacyTarget,
    ProgressCallback,
    ReleasePlan,
)
from service.optimizers.full_gradient import (
    GradientOracle,
    LocalGradient,
    fit_on_oracle,
    noisy_descent,
)
from service.optimizers.inputs import Rows, checked_data, gradient_rows
from service.privacy.analytic_gaussian import sample_gaussian
from service.privacy.gdp import gaussian_steps_multiplier

__all__ = [
    "ITERATION_HARD_CAP",
    "DPGD",
    "DPGDParams",
    "QueryRecord",
    "check_full_gradient_job",
    "check_gaussian_target",
    "check_lipschitz",
    "default_iterations",
    "full_gradient_inputs",
    "full_gradient_query",
    "gaussian_steps_plan",
    "gradient_sensitivity",
    "check_plan_covers",
    "noisy_gradient_descent",
    "oracle_gradient_descent",
    "proximal_step",
    "sample_batch",
    "single_release_multiplier",
    "zcdp_noise_std",
]

#: Upper limit on T accepted from a job spec (compute guard; each step reads all n rows).
ITERATION_HARD_CAP = 100_000

#: Rows may exceed ‖x‖ = 1 by rounding only; beyond this the loader broke its contract.

IntArray = NDArray[np.int64]


# --- shared pieces of the gradient-perturbation optimizers ------------------------------------


@dataclass(frozen=True)
class QueryRecord:
    """One noisy release of a run, recorded for tests and audits (never in production).

    ``kind`` is "full_gradient" (∇F(point) over all rows), "batch_gradient" (∇F(point) over the
    rows ``rows``), "snapshot" (∇F(point) over all rows, at an SVRG snapshot) or
    "batch_difference" (∇F(point) − ∇F(anchor) over ``rows``); ``noise`` is what was added.
    """

    kind: str
    point: FloatArray
    noise: FloatArray
    anchor: FloatArray | None = None
    rows: IntArray | None = None


def full_gradient_query(loss: Loss, w: FloatArray, X: Rows, y: FloatArray) -> FloatArray:
    """The per-step query of DP-GD: ∇F(w; S). Its data part has replace-one sensitivity 2L/n
    (μw is identical on neighbours)."""
    return loss.gradient(w, X, y)


def gradient_sensitivity(lipschitz: float, rows: int) -> float:
    """Replace-one L2 sensitivity of a mean of ``rows`` per-example gradients: 2L/rows."""
    return 2.0 * lipschitz / rows


def proximal_step(loss: Loss, w: FloatArray, step: float) -> FloatArray:
    """prox of step·l1‖·‖₁ at w (``loss.prox`` if the loss has one, else soft-thresholding);
    ``w`` itself when l1 = 0."""
    l1 = float(getattr(loss, "l1", 0.0))
    if l1 == 0.0:
        return w
    prox = getattr(loss, "prox", None)
    if prox is not None:
        out: FloatArray = prox(w, step)
        return out
    return np.sign(w) * np.maximum(np.abs(w) - step * l1, 0.0)


def sample_batch(rng: np.random.Generator, n: int, b: int) -> IntArray:
    """b distinct row indices drawn uniformly without replacement (exactly what the
    ``SampledWithoutReplacementDpEvent`` accounting assumes); two exact samplers, the faster
    one for the size."""
    if n <= 1000:
        return rng.permutation(n)[:b]
    return rng.choice(n, size=b, replace=False, shuffle=False)


def check_gaussian_target(target: PrivacyTarget, name: str) -> None:
    """(ε, δ) must be finite with ε > 0 and 0 < δ < 1: Gaussian noise is never pure ε-DP."""
    eps, delta = target.epsilon, target.delta
    if not (math.isfinite(eps) and eps > 0.0):
        raise InfeasibleSpec("privacy.epsilon", "epsilon must be a finite number > 0")
    if not (math.isfinite(delta) and 0.0 <= delta < 1.0):
        raise InfeasibleSpec("privacy.delta", "delta must be in (0, 1)")
    if delta == 0.0:
        raise InfeasibleSpec(
            "privacy.delta",
            f"{name} adds Gaussian noise at every step, which cannot give pure ε-DP: use "
            "delta > 0 (e.g. 1e-6, well below 1/n), or output_perturbation_gd for pure ε-DP "
            "with a convex loss",
        )


def check_lipschitz(loss: Loss) -> None:
    """The privacy proof needs a finite Lipschitz constant L > 0 and finite β, μ ≥ 0."""
    if not (math.isfinite(loss.lipschitz) and loss.lipschitz > 0.0):
        raise InfeasibleSpec("model", f"{loss.name} has no finite Lipschitz constant")
    beta, mu = loss.smoothness, loss.l2
    if not (math.isfinite(beta) and beta >= 0.0 and math.isfinite(mu) and mu >= 0.0):
        raise InfeasibleSpec("model", f"{loss.name} has no finite smoothness / l2")


def single_release_multiplier(epsilon: float, delta: float) -> float:
    """z₁: the noise multiplier one Gaussian release needs for (ε, δ), exactly (analytic
    Gaussian, i.e. z₁ = 1/μ* with δ(ε; μ*) = δ; privacy/gdp.py)."""
    return gaussian_steps_multiplier(1, epsilon, delta)


def zcdp_noise_std(
    lipschitz: float, n: int, iterations: int, epsilon: float, delta: float
) -> float:
    """The closed-form σ of T Gaussian steps of sensitivity 2L/n via zCDP (module docstring):
    Δ √(T/(2ρ*)) with √ρ* = √(log(1/δ) + ε) − √(log(1/δ))."""
    a = math.log(1.0 / delta)
    sqrt_rho = epsilon / (math.sqrt(a + epsilon) + math.sqrt(a))  # = √(a+ε) − √a, stably
    return gradient_sensitivity(lipschitz, n) * math.sqrt(iterations / 2.0) / sqrt_rho


def check_full_gradient_job(
    name: str, loss: Loss, n: int, d: int, target: PrivacyTarget, step_size: float | None
) -> float:
    """The checks every noisy full-gradient optimizer makes at planning, and its step size:
    ``step_size`` if given, else 1/β_F = 1/(β + μ) (the descent lemma's step).

    Raises :class:`InfeasibleSpec` for δ = 0 or an invalid (ε, δ), a loss without finite
    constants ("model"), or β + μ = 0 and no step size ("optimizer.params.step_size")."""
    check_gaussian_target(target, name)
    if n < 1 or d < 1:
        raise ValueError("n and d must be >= 1")
    check_lipschitz(loss)
    if step_size is not None:
        return float(step_size)
    beta_f = loss.smoothness + loss.l2
    if beta_f > 0.0:
        return 1.0 / beta_f
    raise InfeasibleSpec(
        "optimizer.params.step_size",
        f"{loss.name} with l2 = 0 has smoothness 0, so there is no default step size; "
        "give step_size",
    )


def gaussian_steps_plan(
    loss: Loss,
    n: int,
    d: int,
    target: PrivacyTarget,
    iterations: int,
    step: float,
    z1: float,
    extra: dict[str, Any],
) -> ReleasePlan:
    """The plan of T adaptively composed Gaussian full-gradient releases of sensitivity 2L/n:
    the smallest multiplier z for which ``SelfComposed(Gaussian(z), T)`` meets (ε, δ) exactly,
    i.e. is √T/z-GDP with δ(ε; √T/z) ≤ δ (Gaussian DP composes exactly; privacy/gdp.py), and
    σ = z·2L/n. The ledger charges the same μ = √T/z. ``extra`` joins the public
    hyperparameters; ``z1`` (the one-release multiplier) is no longer needed for the search."""
    sensitivity = gradient_sensitivity(loss.lipschitz, n)
    multiplier = gaussian_steps_multiplier(iterations, target.epsilon, target.delta)
    hyperparameters: dict[str, Any] = {
        "iterations": iterations,
        "step_size": step,
        "noise_multiplier": multiplier,
        **extra,
        "n": n,
        "d": d,
    }
    return ReleasePlan(
        mechanism="gaussian_per_step",
        sensitivity=sensitivity,
        noise_scale=multiplier * sensitivity,
        event=_gd_event(multiplier, iterations),
        total_steps=iterations,
        hyperparameters=hyperparameters,
    )


def full_gradient_inputs(
    plan: ReleasePlan, loss: Loss, X: FloatArray, y: FloatArray
) -> tuple[Rows, FloatArray]:
    """The rows (sparse where that is cheaper) and float labels a full-gradient ``fit`` runs on,
    after checking them against the plan's public n, d, the row-norm / label assumptions, and
    that the plan's per-step sensitivity covers this loss (``ValueError``, no data values)."""
    n, d = int(plan.hyperparameters["n"]), int(plan.hyperparameters["d"])
    check_plan_covers(plan, loss)
    X, y = checked_data(loss, X, y, n, d)
    return gradient_rows(X), np.asarray(y, dtype=np.float64)


def check_plan_covers(plan: ReleasePlan, loss: Loss) -> None:
    """The plan's per-step sensitivity covers this loss: Δ ≥ 2L/n (``ValueError`` otherwise).
    The public half of :func:`full_gradient_inputs`; with an oracle,
    :func:`~service.optimizers.full_gradient.fit_on_oracle` checks n and d and the rows' own
    checks (norms, labels) are the oracle's."""
    n = int(plan.hyperparameters["n"])
    if plan.sensitivity < gradient_sensitivity(loss.lipschitz, n) * (1.0 - 1e-12):
        raise ValueError("the plan's sensitivity does not cover this loss")


# --- DP-GD ------------------------------------------------------------------------------------


class DPGDParams(BaseModel):
    """Hyper-parameters of ``dp_gd``; omitted values get theory defaults."""

    model_config = ConfigDict(extra="forbid")

    iterations: int | None = Field(
        default=None,
        ge=1,
        le=ITERATION_HARD_CAP,
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
            "The analyst's public bound on F(0) − min F, used only to choose the default T "
            "(for a non-negative loss F(0) suffices: log 2 for logistic, 1/2 for sigmoid)."
        ),
    )
    max_iterations: int = Field(
        default=1000,
        ge=1,
        le=ITERATION_HARD_CAP,
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
    rng: np.random.Generator,
    progress: ProgressCallback | None = None,
    trace: list[QueryRecord] | None = None,
) -> FloatArray:
    """Alg. 4 from w_0 = 0: T steps ``w ← prox(w − η(∇F(w) + ζ))``, ζ ~ N(0, σ²I); returns w_T.

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
    rng: np.random.Generator,
    progress: ProgressCallback | None = None,
    trace: list[QueryRecord] | None = None,
) -> FloatArray:
    """:func:`noisy_gradient_descent` with ∇F(w) from ``oracle`` (local rows or partitions):
    the same steps and the same noise draws from ``rng``."""
    d = oracle.dimension
    w: FloatArray = np.zeros(d, dtype=np.float64)
    zeros: FloatArray = np.zeros(d, dtype=np.float64)
    for t in range(1, iterations + 1):
        g = oracle.gradient(w)
        noise = sample_gaussian(d, noise_std, rng) if noise_std > 0.0 else zeros
        if trace is not None:
            trace.append(QueryRecord("full_gradient", w.copy(), noise))
        w = proximal_step(loss, w - step_size * (g + noise), step_size)
        if progress is not None:
            progress(t)
    return w


def _gd_event(multiplier: float, iterations: int) -> dp_event.DpEvent:
    return dp_event.SelfComposedDpEvent(dp_event.GaussianDpEvent(multiplier), iterations)


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
            else DPGDParams.model_validate(params.model_dump())
        )
        step = check_full_gradient_job(self.name, loss, n, d, target, p.step_size)
        z1 = single_release_multiplier(target.epsilon, target.delta)
        if p.iterations is not None:
            iterations = int(p.iterations)
        else:
            iterations = default_iterations(loss, n, d, z1, p.objective_gap, p.max_iterations)
        return gaussian_steps_plan(
            loss, n, d, target, iterations, step, z1, {"objective_gap": p.objective_gap}
        )

    def fit(
        self,
        plan: ReleasePlan,
        loss: Loss,
        X: FloatArray,
        y: FloatArray,
        rng: np.random.Generator,
        progress: ProgressCallback,
    ) -> FloatArray:
        """Run ``plan`` on the private rows and return the noisy last iterate w_T.

        Checks the data against the plan's public n, d and the row-norm / label assumptions,
        and that the plan's per-step sensitivity covers this loss (without data values).
        """
        rows, labels = full_gradient_inputs(plan, loss, X, y)
        hp = plan.hyperparameters
        return noisy_gradient_descent(
            loss,
            rows,
            labels,
            step_size=float(hp["step_size"]),
            iterations=int(hp["iterations"]),
            noise_std=plan.noise_scale,
            rng=rng,
            progress=progress,
        )

    def fit_oracle(
        self,
        plan: ReleasePlan,
        loss: Loss,
        oracle: GradientOracle,
        rng: np.random.Generator,
        progress: ProgressCallback,
    ) -> FloatArray:
        """:meth:`fit` with the gradients from ``oracle`` (e.g. partitions on Dask workers,
        which check their own rows); the same steps, noise and accounting."""
        check_plan_covers(plan, loss)
        run = noisy_descent(oracle_gradient_descent, plan, loss, rng, progress)
        return fit_on_oracle(plan, oracle, run)


OPTIMIZER = DPGD
