r"""RRPSGD: random-round private SGD for smooth, possibly non-convex losses (Zhang, Zheng, Mou &
Wang 2017, Alg. 2, Thm 4–6), with fixed-size mini-batches and numerical RDP accounting.

Algorithm. Public inputs: the cap T_max on rounds, the batch size b, a constant step η with
0 < η < 2/β_F (β_F = β + μ, the smoothness of F). ``w_0 = 0``;

1. draw the number of rounds R ∈ {1, …, T_max} with P(R = k) ∝ 2η_k − β_F η_k²
   (Thm 5; uniform for a constant step), from ``rng``, independently of the data;
2. for t = 1 … R: draw a batch B_t of b distinct rows uniformly without replacement,
   independently of the past, and set

       w_t = w_{t−1} − η (∇F_{B_t}(w_{t−1}) + ζ_t),    ζ_t ~ N(0, σ² I_d),

   where ∇F_B is the mean gradient over the batch plus μw;
3. release w_R.

The paper's Alg. 2 is the case b = 1 and T_max = n² (one uniformly sampled row per round).

Assumptions. Rows with ‖x‖₂ ≤ 1; per-example loss L-Lipschitz (privacy) and β-smooth (step and
utility). No convexity needed. l1 must be 0 (Alg. 2 and Thm 5 are for smooth F; use ``dp_gd``
or ``dp_svrg`` for an L1 term). δ > 0.

Sensitivity (replace-one). Given the released past, w_{t−1} is fixed; the batch indices are
drawn identically on S and S' (same positions), so the two batches differ in at most the one
row j, and only when j ∈ B_t. The private part of round t's query is the batch mean of data
gradients, and on neighbouring *batches*

    ‖(1/b)(∇ℓ(w; x_j, y_j) − ∇ℓ(w; x'_j, y'_j))‖ ≤ 2L/b =: Δ

(attained by the sigmoid loss at w·x = 0 with x' = −x, as for ``dp_gd``).

Privacy (accounting). One round is the Gaussian mechanism with multiplier z = σ/Δ applied to a
uniformly random size-b subset drawn without replacement — dp-accounting's
``SampledWithoutReplacementDpEvent(n, b, GaussianDpEvent(z))``, whose REPLACE_ONE RDP bound is
Wang, Balle & Kasiviswanathan (2019), Thm 9 (the sampler draws exactly that: fixed-size
batches, without replacement, fresh each round — never Poisson, never a shuffle). The charged
event is ``SelfComposedDpEvent(<that>, T_max)``, z calibrated numerically.

Why accounting for T_max is sound although only R ≤ T_max rounds run: consider the T_max-round
run that releases all T_max noisy gradients; it is an adaptive composition of T_max sampled
Gaussian mechanisms, hence (ε, δ)-DP by the accountant. R is drawn from a public distribution
independent of the data, and w_R is a deterministic function of (R, the first R released
gradients, the public η): for each fixed R it is a post-processing of that transcript, and a
data-independent mixture of post-processings of an (ε, δ)-DP transcript is (ε, δ)-DP. Stopping
early (not computing rounds R+1 … T_max) changes nothing in the output's distribution. The
progress callback and the run time reveal R, which is data-independent. (Charging R instead
would also be sound, but the ledger must charge before the data is read.)

Cross-checks against the paper. (i) Alg. 2 line 5 with Thm 4 (b = 1, T_max = n², ε ≤ 1):
σ² = 4L² log(3n/δ) log(2/δ)/ε² (:func:`paper_noise_std`). (ii) Thm 4's proof chain —
Gaussian mechanism per round, amplification by sampling (Lemma 9: (2qε₀, qδ₀) with q = b/n,
ε₀ ≤ 1), strong composition over T rounds (Lemma 10 with δ' = δ/2) — generalised to any b and
T (:func:`strong_composition_noise_std`). Our σ is never larger than either (tested).

Defaults (public information only).
- b = min(n, 64).
- T_max = min(⌈n²/b⌉, ``max_rounds_cap``): the paper's n² rounds for b = 1; with batches the
  sampling variance L²/(bT) falls to the paper's level L²/n² after n²/b rounds.
- η = min(1/β_F, D_F/(σ_G √T_max)) with D_F = √(2·gap/β_F) and σ_G² the variance of the noisy
  batch gradient, σ_G² = L²(n−b)/(b(n−1)) + dσ² (Thm 5's choice η = min{1/β, D_F/(σ n)} for
  T = n²; the sampling variance of a without-replacement batch mean is at most
  (L²/b)(n−b)/(n−1) since Var ≤ E‖∇ℓ‖² ≤ L² — tighter than the paper's 4L²).
- Thm 5 then gives E‖∇F(w_R)‖² ≤ β_F (D_F² + σ_G² T η²) / (T (2η − β_F η²))
  (:func:`gradient_norm_bound`), the expectation over R, the batches and the noise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from dp_accounting import dp_event
from pydantic import BaseModel, ConfigDict, Field
from scipy import optimize

from service.models.base import FloatArray, Loss, resolved_objective_gap
from service.optimizers.kits.base import (
    InfeasibleSpec,
    PrivacyTarget,
    ProgressCallback,
    ReleasePlan,
)
from service.optimizers.kits.config import PlanConfig, ShapeConfig
from service.optimizers.kits.gradient_kit import (
    QueryRecord,
    check_lipschitz,
    gradient_sensitivity,
    sample_batch,
)
from service.optimizers.kits.inputs import checked_data
from service.optimizers.kits.limits import SAMPLED_STEPS_CAP
from service.privacy.calibration import calibrate_noise_multiplier
from service.privacy.secure_random import SecureRandom, as_secure
from service.privacy.secure_release import secure_gaussian
from service.privacy.target import check_target

__all__ = [
    "RRPSGD",
    "RRPSGDParams",
    "batch_gradient_variance",
    "gradient_norm_bound",
    "paper_noise_std",
    "random_round_sgd",
    "round_distribution",
    "rrpsgd_event",
    "strong_composition_noise_std",
]


class RRPSGDParams(BaseModel):
    """Hyper-parameters of ``rrpsgd``; omitted values get theory defaults."""

    model_config = ConfigDict(extra="forbid")

    max_rounds: int | None = Field(
        default=None,
        ge=1,
        le=SAMPLED_STEPS_CAP,
        description=(
            "T_max: the cap on the random number of rounds R (R is drawn uniformly from "
            "1 … T_max for a constant step, Zhang et al. Thm 5). Privacy is accounted for "
            "T_max rounds. Default min(⌈n²/b⌉, max_rounds_cap) (the paper's n² for b = 1)."
        ),
    )
    batch_size: int | None = Field(
        default=None,
        ge=1,
        description=(
            "b: rows per round, drawn uniformly without replacement, fresh each round "
            "(privacy amplification by sampling). Must be ≤ n. Default min(n, 64)."
        ),
    )
    step_size: float | None = Field(
        default=None,
        gt=0.0,
        allow_inf_nan=False,
        description=(
            "Constant step η < 2/β_F (β_F = β + μ). Default min(1/β_F, D_F/(σ_G·√T_max)) with "
            "D_F = √(2·objective_gap/β_F) and σ_G² = L²(n−b)/(b(n−1)) + d·σ² (Thm 5). Privacy "
            "does not depend on it."
        ),
    )
    objective_gap: float = Field(
        default=1.0,
        gt=0.0,
        allow_inf_nan=False,
        description=(
            "The analyst's public bound on F(0) − min F, used only for the default step size. "
            "Unset: max(1, the largest loss a row can have at w = 0): 1 for classification, "
            "δ·B − δ²/2 for Huber regression with label bound B."
        ),
    )
    max_rounds_cap: int = Field(
        default=2000,
        ge=1,
        le=SAMPLED_STEPS_CAP,
        description="Cap on the default T_max (ignored if max_rounds is given).",
    )


@dataclass(frozen=True)
class RRPSGDConfig(ShapeConfig):
    """What ``fit`` reads from a stored plan (field names = stored keys)."""

    batch_size: int
    step_size: float
    max_rounds: int


# --- the math, as plain functions ------------------------------------------------------------


def rrpsgd_event(n: int, batch_size: int, multiplier: float, rounds: int) -> dp_event.DpEvent:
    """T_max rounds of the Gaussian mechanism on fixed-size batches sampled without
    replacement (REPLACE_ONE accounting)."""
    return dp_event.SelfComposedDpEvent(
        dp_event.SampledWithoutReplacementDpEvent(
            source_dataset_size=n,
            sample_size=batch_size,
            event=dp_event.GaussianDpEvent(multiplier),
        ),
        rounds,
    )


def round_distribution(step_sizes: FloatArray, smoothness: float) -> FloatArray:
    """P(R = k), k = 1 … T_max: (2η_k − β_F η_k²) / Σ_r (2η_r − β_F η_r²) (Thm 5)."""
    weights = 2.0 * step_sizes - smoothness * step_sizes**2
    if not bool(np.all(weights > 0.0)):
        raise ValueError("every step size must be in (0, 2/β_F)")
    out: FloatArray = weights / weights.sum()
    return out


def batch_gradient_variance(lipschitz: float, n: int, batch_size: int) -> float:
    """Upper bound on E‖∇F_B(w) − ∇F(w)‖² for a size-b batch drawn without replacement:
    (L²/b)(n − b)/(n − 1) (0 when b = n)."""
    if n <= 1 or batch_size >= n:
        return 0.0
    return lipschitz**2 * (n - batch_size) / (batch_size * (n - 1))


def gradient_norm_bound(
    smoothness_f: float,
    objective_gap: float,
    step_size: float,
    rounds: int,
    gradient_variance: float,
) -> float:
    """Thm 5 (Ghadimi & Lan 2013, Thm 2.1) for a constant step: E‖∇F(w_R)‖² ≤
    β_F (D_F² + σ_G² T η²) / (T (2η − β_F η²)), D_F² = 2·gap/β_F; σ_G² = ``gradient_variance``."""
    d_f2 = 2.0 * objective_gap / smoothness_f
    numerator = smoothness_f * (d_f2 + gradient_variance * rounds * step_size**2)
    return numerator / (rounds * (2.0 * step_size - smoothness_f * step_size**2))


def default_step_size(
    smoothness_f: float, objective_gap: float, rounds: int, gradient_variance: float
) -> float:
    """min(1/β_F, D_F/(σ_G √T)) (Thm 5's choice; 1/β_F when σ_G = 0)."""
    d_f = math.sqrt(2.0 * objective_gap / smoothness_f)
    if gradient_variance <= 0.0:
        return 1.0 / smoothness_f
    return min(1.0 / smoothness_f, d_f / math.sqrt(gradient_variance * rounds))


def paper_noise_std(lipschitz: float, n: int, epsilon: float, delta: float) -> float:
    """Alg. 2 line 5 (b = 1, T = n², ε ≤ 1): σ = 2L √(log(3n/δ) log(2/δ)) / ε."""
    return 2.0 * lipschitz * math.sqrt(math.log(3.0 * n / delta) * math.log(2.0 / delta)) / epsilon


def strong_composition_noise_std(
    lipschitz: float, n: int, batch_size: int, rounds: int, epsilon: float, delta: float
) -> float:
    """Thm 4's proof chain for batches of b rows and T rounds; ``nan`` where it is invalid.

    Strong composition (Dwork, Rothblum & Vadhan 2010; the paper's Lemma 10) with δ' = δ/2:
    each round must be (ε_s, δ/(2T))-DP with √(2T log(2/δ)) ε_s + T ε_s (e^{ε_s} − 1) = ε.
    Amplification by sampling a q = b/n fraction (Lemma 9): a (ε₀, δ₀)-DP round on the batch
    with ε₀ = ε_s/(2q) ≤ 1, δ₀ = δ_s/q. The classical Gaussian mechanism (valid for ε₀ ≤ 1)
    with sensitivity 2L/b: σ = (2L/b) √(2 log(1.25/δ₀)) / ε₀.
    """
    log_term = math.log(2.0 / delta)

    def excess(eps_s: float) -> float:
        return (
            math.sqrt(2.0 * rounds * log_term) * eps_s + rounds * eps_s * math.expm1(eps_s)
        ) - epsilon

    eps_s = optimize.brentq(excess, 0.0, max(epsilon, 1.0), xtol=1e-15, rtol=1e-12)
    q = batch_size / n
    eps_0 = eps_s / (2.0 * q)
    delta_0 = delta / (2.0 * rounds) / q
    if eps_0 > 1.0 or delta_0 >= 1.0:
        return math.nan
    return (
        gradient_sensitivity(lipschitz, batch_size)
        * math.sqrt(2.0 * math.log(1.25 / delta_0))
        / eps_0
    )


def random_round_sgd(
    loss: Loss,
    X: FloatArray,
    y: FloatArray,
    *,
    step_size: float,
    max_rounds: int,
    batch_size: int,
    noise_std: float,
    rng: SecureRandom,
    sensitivity: float = 0.0,
    progress: ProgressCallback | None = None,
    trace: list[QueryRecord] | None = None,
) -> tuple[FloatArray, int]:
    """Alg. 2 with batches: draw R, run R noisy SGD rounds from 0; returns (w_R, R).

    ``noise_std = 0`` switches the noise off (R and the batches are still drawn from ``rng``,
    so two runs with the same seed use the same R and batches). ``progress(t)`` after each
    round, then ``progress(max_rounds)`` if R < max_rounds. ``trace``: tests only.
    """
    n, d = X.shape
    beta_f = loss.smoothness + loss.l2
    probabilities = round_distribution(np.full(max_rounds, step_size), beta_f)
    source = as_secure(rng)
    # R is public-coin: no privacy proof uses its law (the charge covers max_rounds steps), only
    # the utility theory; a 53-bit uniform from the secure stream inverts its CDF.
    cdf = np.cumsum(probabilities)
    u = float(source.uniform(1)[0]) * float(cdf[-1])
    rounds = 1 + int(min(np.searchsorted(cdf, u, side="right"), max_rounds - 1))
    w: FloatArray = np.zeros(d, dtype=np.float64)
    for t in range(1, rounds + 1):
        rows = sample_batch(source, n, batch_size)
        g = loss.gradient(w, X[rows], y[rows])
        released = secure_gaussian(g, noise_std, sensitivity, source) if noise_std > 0.0 else g
        if trace is not None:
            trace.append(QueryRecord("batch_gradient", w.copy(), released - g, rows=rows))
        w = w - step_size * released
        if progress is not None:
            progress(t)
    if progress is not None and rounds < max_rounds:
        progress(max_rounds)
    return w, rounds


# --- the plug-in ------------------------------------------------------------------------------


class RRPSGD:
    """Zhang et al. (2017) Alg. 2: private SGD stopped after a random number of rounds."""

    name: ClassVar[str] = "rrpsgd"
    summary: ClassVar[str] = (
        "Noisy mini-batch SGD from 0 run for a random number of rounds R ≤ T_max (drawn "
        "independently of the data); batches are sampled without replacement each round and "
        "the noise is calibrated by RDP accounting of T_max sampled Gaussian rounds."
    )
    assumptions: ClassVar[str] = (
        "L-Lipschitz, β-smooth per-example loss on rows with ‖x‖₂ ≤ 1; convexity NOT required "
        "(utility: E‖∇F(w_R)‖² small, Thm 5); l1 = 0; step size η < 2/(β + μ); delta > 0."
    )
    guarantee: ClassVar[str] = (
        "(ε, δ)-DP, replace-one adjacency: T_max rounds of the Gaussian mechanism (per-round "
        "sensitivity 2L/b) on size-b batches sampled without replacement, accounted as "
        "SelfComposed(SampledWithoutReplacement(n, b, Gaussian(σ/(2L/b))), T_max) by "
        "dp-accounting's RDP accountant; stopping at R ≤ T_max is post-processing."
    )
    reference: ClassVar[str] = (
        "Zhang, Zheng, Mou & Wang (2017), 'Efficient Private ERM for Smooth Objectives', "
        "Alg. 2, Thm 4–6; Ghadimi & Lan (2013) Thm 2.1; sampled-without-replacement RDP, "
        "Wang, Balle & Kasiviswanathan (2019)."
    )
    Params: ClassVar[type[BaseModel]] = RRPSGDParams
    Config: ClassVar[type[PlanConfig]] = RRPSGDConfig

    def plan(
        self, params: BaseModel, loss: Loss, n: int, d: int, target: PrivacyTarget
    ) -> ReleasePlan:
        """Resolve b, T_max and η, and calibrate σ, from public information only.

        Raises :class:`InfeasibleSpec` for δ = 0 / invalid (ε, δ) ("privacy.*"), l1 > 0 or a
        loss without finite constants ("model"), b > n ("optimizer.params.batch_size"), a step
        size ≥ 2/β_F or no default step for β_F = 0 ("optimizer.params.step_size").
        """
        p = (
            params
            if isinstance(params, RRPSGDParams)
            else RRPSGDParams.model_validate(params.model_dump(exclude_unset=True))
        )
        check_target(target, pure_allowed=False, optimizer=self.name)
        if n < 1 or d < 1:
            raise ValueError("n and d must be >= 1")
        check_lipschitz(loss)
        if float(getattr(loss, "l1", 0.0)) > 0.0:
            raise InfeasibleSpec(
                "model",
                f"{self.name} needs a smooth objective (l1 = 0): its random-round guarantee is "
                "for smooth F; use dp_gd or dp_svrg (proximal steps) for an L1 penalty",
            )
        batch = min(n, 64) if p.batch_size is None else int(p.batch_size)
        if batch > n:
            raise InfeasibleSpec(
                "optimizer.params.batch_size",
                f"batch_size must be at most the number of rows n = {n}",
            )
        if p.max_rounds is not None:
            rounds = int(p.max_rounds)
        else:
            rounds = min(p.max_rounds_cap, math.ceil(n * n / batch))
        beta_f = loss.smoothness + loss.l2
        if p.step_size is not None and beta_f > 0.0 and not p.step_size < 2.0 / beta_f:
            raise InfeasibleSpec(
                "optimizer.params.step_size",
                f"step_size must be below 2/(β + μ) = {2.0 / beta_f:.6g} for {loss.name}: the "
                "random-round distribution P(R = k) ∝ 2η − (β + μ)η² needs it positive",
            )
        if p.step_size is None and beta_f == 0.0:
            raise InfeasibleSpec(
                "optimizer.params.step_size",
                f"{loss.name} with l2 = 0 has smoothness 0, so there is no default step size; "
                "give step_size",
            )
        sensitivity = gradient_sensitivity(loss.lipschitz, batch)
        multiplier = calibrate_noise_multiplier(
            lambda z: rrpsgd_event(n, batch, z, rounds),
            target.epsilon,
            target.delta,
            subsampled=True,
        )
        sigma = multiplier * sensitivity
        gap = resolved_objective_gap(loss, p)
        if p.step_size is not None:
            step = float(p.step_size)
        else:
            variance = batch_gradient_variance(loss.lipschitz, n, batch) + d * sigma**2
            step = default_step_size(beta_f, gap, rounds, variance)
        hyperparameters: dict[str, Any] = {
            "max_rounds": rounds,
            "batch_size": batch,
            "step_size": step,
            "noise_multiplier": multiplier,
            "objective_gap": gap,
            "n": n,
            "d": d,
        }
        return ReleasePlan(
            mechanism="sampled_gaussian_per_step",
            sensitivity=sensitivity,
            noise_scale=sigma,
            event=rrpsgd_event(n, batch, multiplier, rounds),
            total_steps=rounds,
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
        """Run ``plan`` on the private rows and return w_R (checks as in ``dp_gd``)."""
        config = RRPSGDConfig.from_hyperparameters(plan.hyperparameters)
        n, d, batch = config.n, config.d, config.batch_size
        if plan.sensitivity < gradient_sensitivity(loss.lipschitz, batch) * (1.0 - 1e-12):
            raise ValueError("the plan's sensitivity does not cover this loss")
        if float(getattr(loss, "l1", 0.0)) > 0.0:
            raise ValueError("rrpsgd needs l1 = 0")
        y = np.asarray(y, dtype=np.float64)
        X, y = checked_data(loss, X, y, n, d)
        w, _ = random_round_sgd(
            loss,
            X,
            y,
            step_size=config.step_size,
            max_rounds=config.max_rounds,
            batch_size=batch,
            noise_std=plan.noise_scale,
            sensitivity=plan.sensitivity,
            rng=rng,
            progress=progress,
        )
        return w


OPTIMIZER = RRPSGD
