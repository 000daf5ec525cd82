r"""Bolt-on private permutation SGD (Wu, Li, Kumar, Chaudhuri, Jha & Naughton, SIGMOD 2017,
Alg. 1 and 2 with the §3.2.3 extensions), with an exact worst-case batch-form sensitivity.

Algorithm. Plain (non-private) permutation SGD is run as a black box and noise is added once:
``w_0 = 0``; for each of k passes draw a fresh uniformly random permutation and cut it into
m = ⌊n/b⌋ batches (sizes ⌊n/m⌋ or ⌈n/m⌉, all ≥ b_min = ⌊n/m⌋ ≥ b; see
:mod:`service.optimizers.kits.sgd_common`); step t = 1 … T = k·m on batch B_t:

    w_t = Π_R(w_{t−1} − η_t ∇F_{B_t}(w_{t−1})),   ∇F_B(w) = (1/|B|) Σ_{i∈B} ∇ℓ_i(w) + μ w,

with Π_R the projection onto ‖w‖ ≤ R (optional, R public). Output w_T, or the average
w̄ = (1/T) Σ_{t=1}^{T} w_t ("model averaging"); release it plus noise calibrated to the
sensitivity Δ below: density ∝ exp(−ε‖z‖/Δ) for δ = 0 (ε-DP, Wu et al. Thm 4/5) and the
analytic Gaussian (Balle & Wang 2018) for δ > 0 (Wu et al. Thm 6/7 use the classic σ).

Modes (step schedules).
- ``convex`` (Alg. 1): constant η ≤ 2/(β + 2μ) (= 2/β for μ = 0, Wu et al.'s condition).
- ``strongly_convex`` (Alg. 2, needs μ > 0): η_t = min(η₀, 1/(μt)) with η₀ = 1/(β + μ) = 1/β_F
  (β_F: smoothness of F), i.e. η_t = η₀ for t ≤ t₀ = ⌊1/(μη₀)⌋ and 1/(μt) afterwards.

Assumptions. ℓ(·; x, y) convex, L-Lipschitz, β-smooth for every admissible row (‖x‖ ≤ 1);
μ = l2 ≥ 0; l1 = 0 (no proximal step); every step η_t ≤ 2/(β + 2μ).

Sensitivity (replace-one; Wu et al. Lemma 5–8 and §3.2.3, in batch form, tightened). The
permutations are data independent, so it suffices to bound ‖A_r(S) − A_r(S′)‖ for every fixed
randomness r (Wu et al. Lemma 5: the released density is a mixture over r with the same weights
for S and S′). Fix r; S, S′ differ in row j only.

1. A step whose batch does not contain j applies the same map G(w) = Π_R((1 − ημ)w − η∇q_B(w))
   to both runs, q_B the batch's mean data loss (convex, β-smooth). It is (1 − ημ)-Lipschitz for
   η ≤ 2/(β + 2μ): (1−ημ)(w − a∇q_B(w)) with a = η/(1−ημ) ≤ 2/β, and w ↦ w − a∇q is
   non-expansive for a ≤ 2/β by co-coercivity; Π_R is non-expansive.
2. The batch containing j (one per pass, size |B| ≥ b_min) moves the runs apart by at most
   (η_t/|B|)‖∇ℓ_j(w) − ∇ℓ′_j(w′)‖ ≤ 2Lη_t/b_min on top of step 1's contraction.
3. So δ_t = ‖w_t − w′_t‖ obeys δ_t ≤ (1 − η_tμ) δ_{t−1} + [t = t_p] 2Lη_t/b_min, δ_0 = 0, with
   t_p the step of pass p that sees row j. Unrolling: δ_T ≤ (2L/b_min) Σ_p I(t_p) with the
   influence I(t) = η_t P(t, T), P(t, s) = Π_{u=t+1}^{s} (1 − η_uμ); for the average,
   ‖w̄ − w̄′‖ ≤ (1/T) Σ_s δ_s (a convex combination, Wu et al. Lemma 10), i.e. influence
   I(t) = (η_t/T) Σ_{s=t}^{T} P(t, s).
4. The adversary may place j anywhere in each pass, so Δ = (2L/b_min) Σ_p max_{t ∈ pass p} I(t).
   In closed form, with ρ = 1 − μη₀ and t₀ = ∞ for a constant step:
   P(t, s) = ρ^{max(0, min(s, t₀) − t)} · (max(t, t₀)/s if s > max(t, t₀) else 1), and
   Σ_{s>t₀} 1/s = H_T − H_{t₀} (harmonic numbers, via the digamma function). On each regime
   (t ≤ t₀, t > t₀) I(t) is monotone in t (last iterate: non-decreasing; average: affine in
   ρ^{−t} for t ≤ t₀, decreasing for t > t₀), so the maximum over a pass is attained at the
   pass's ends or at t₀, t₀ + 1 — :func:`bolt_on_sensitivity` evaluates exactly those. The
   bound is attained for a linear loss (tests/unit/test_bolt_on_psgd.py), so it cannot be lowered
   without further assumptions on ℓ.

Consequences (what the closed forms give):
- convex, constant η, μ = 0: Δ = 2kLη/b_min (Wu et al. Cor. 1 with the batch factor), and with
  averaging Δ = (k + 1)Lη/b_min — about half, tighter than Lemma 10's max_t Δ_t.
- constant η with μ > 0 (Wu et al. Lemma 7, batch form): Δ = (2Lη/b_min) Σ_p (1 − ημ)^{(k−p)m}.
- strongly convex, η_t = min(1/β_F, 1/(μt)): a hit at t > t₀ has influence exactly
  η_t·t/T = 1/(μT), and I(t) ≤ 1/(μT) for t ≤ t₀ because η₀t₀ ≤ 1/μ. Hence

      Δ ≤ (2L/b_min) · k/(μT) = 2L/(μ·m·b_min)  (= 2L/(μn) when b divides n),

  **independent of the number of passes**, and equal to it for the last iterate when every
  pass ends in the 1/(μt) regime (m > t₀; otherwise the passes that end before t₀ contribute
  less). Checking the batch form (docs/reference/optimizers.md#optimizers): the mini-batch
  does *not* divide this bound by b, contrary to Wu et al. §3.2.3's "factor b improvement for
  all our sensitivity bounds" —
  with t counting mini-batch updates the steps are b times larger per row, which cancels the
  1/b (the tests exhibit a pair at 2L/(μn) > 2L/(μnb)). With averaging, early (large) steps
  enter the average, so Δ grows by about (1 + ln(T/t₀)/k) — computed exactly, never assumed.
- Fresh permutations per pass, projection and averaging are covered above (Wu et al. §3.2.3).

Privacy. Releasing the output plus noise calibrated to Δ is ε-DP (δ = 0) or (ε, δ)-DP (δ > 0);
the event charged is that of one release (``calibrate_release``). Only the noised vector is
released; the permutations never are.

Defaults (public information only).
- ``batch_size`` b = min(50, n) (Wu et al. §4.3/§4.6 recommend 10–50 and use 50).
- ``mode`` (when not given): ``convex`` for μ = 0. For μ > 0 both algorithms apply; Alg. 2 is
  chosen unless the noise term of its bound alone, G·ν·Δ_sc, exceeds Alg. 1's whole bound at
  its defaults (below). Alg. 2's premise is that passes are free, so its optimisation error is
  taken as negligible; but Δ_sc ≈ 2L/(μn) is large for small μ (the model specs' default
  l2 = 1e-4 gives Δ_sc ≈ 1.3 at n = 5000, against 0.03 for Alg. 1's tuned step), and then
  Alg. 1 is the better choice. (A plain "l2 > 0 ⇒ Alg. 2" rule loses ~10 accuracy points there.)
- convex mode, with D = the public norm guess (``norm_guess``, capped by ``radius``), G = L + μD,
  and ν = E‖z‖/Δ of the noise (σ₁√d for the Gaussian with σ₁ its analytic σ at Δ = 1; d/ε for
  δ = 0): the excess risk of the average is at most D²/(2ηT) + ηG²/2 (Zinkevich's regret,
  Wu et al. Thm 8–9) plus G·E‖z‖ (Lemma 11) with E‖z‖ = ν c k 2Lη/b_min, c = (k+1)/(2k) with
  averaging and 1 without. Minimising over η gives η = D/√(T(G² + 4Gνc kL/b_min)) (capped at
  2/(β + 2μ)); the bound then decreases in k with the optimisation term below the noise term
  once k ≥ G b/(4νcL), so k = ⌈G b_min/(4νcL)⌉ clamped to [1, ``max_passes``]. Averaging on.
- strongly convex mode: η₀ = 1/β_F, averaging off (it would weigh the early, most sensitive
  iterates), k = ``max_passes``: more passes only improve the optimisation (Wu et al. Thm 12,
  Shamir 2016) while Δ ≤ 2L/(μ m b_min) whatever k. (For tiny μ, with T ≤ t₀ = ⌊β_F/μ⌋,
  all steps are constant and Δ grows with k up to that ceiling, as in the convex mode.)
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field
from scipy.special import digamma

from service.models.base import FloatArray, Loss
from service.optimizers.kits.base import (
    InfeasibleSpec,
    PrivacyTarget,
    ProgressCallback,
    ReleasePlan,
)
from service.optimizers.kits.config import PlanConfig, ShapeConfig
from service.optimizers.kits.inputs import checked_data
from service.optimizers.kits.limits import PASSES_CAP
from service.optimizers.kits.sgd_common import (
    Mode,
    StepSchedule,
    check_convex_loss,
    coerce_params,
    pass_layout,
    permutation_batches,
    resolve_batch_size,
    run_sgd,
    schedule_from_json,
)
from service.privacy.analytic_gaussian import analytic_gaussian_sigma
from service.privacy.output_perturbation import calibrate_release, release_with_noise
from service.privacy.secure_random import SecureRandom
from service.privacy.target import check_target

__all__ = [
    "BoltOnPSGD",
    "BoltOnPSGDParams",
    "bolt_on_sensitivity",
    "max_step_size",
    "permutation_sgd",
]


@dataclass(frozen=True)
class BoltOnConfig(ShapeConfig):
    """What ``fit`` reads from a stored plan (field names = stored keys)."""

    passes: int
    batch_size: int
    averaging: bool
    radius: float | None
    schedule: Any  # the step schedule's JSON (sgd_common.schedule_from_json)


def checked_plan(plan: ReleasePlan, loss: Loss) -> tuple[BoltOnConfig, StepSchedule]:
    """The plan checked against ``loss`` before any row is read (``ValueError``, public values):
    a bolt-on schedule, a convex loss, this loss's l2 and steps, a sensitivity that covers it."""
    config = BoltOnConfig.from_hyperparameters(plan.hyperparameters)
    schedule = schedule_from_json(config.schedule)
    if not isinstance(schedule, StepSchedule):
        raise ValueError("the plan's step schedule is not one of bolt_on_psgd's")
    check_convex_loss(loss, "bolt_on_psgd")
    if schedule.l2 != loss.l2:
        raise ValueError("the plan was made for a different l2")
    if schedule.initial > max_step_size(loss.smoothness, loss.l2):
        raise ValueError("the plan's step size is too large for this loss")
    needed = bolt_on_sensitivity(
        lipschitz=loss.lipschitz,
        n=config.n,
        batch_size=config.batch_size,
        passes=config.passes,
        schedule=schedule,
        averaging=config.averaging,
    )
    if plan.sensitivity < needed * (1.0 - 1e-12):
        raise ValueError("the plan's sensitivity does not cover this loss")
    return config, schedule


class BoltOnPSGDParams(BaseModel):
    """Hyper-parameters of ``bolt_on_psgd``; omitted values get theory defaults."""

    model_config = ConfigDict(extra="forbid")

    mode: Mode | None = Field(
        default=None,
        description=(
            "'convex' (Wu et al. Alg. 1: constant step; Δ = 2kLη/b grows with the passes k) or "
            "'strongly_convex' (Alg. 2: η_t = min(1/(β+μ), 1/(μt)); needs l2 > 0; "
            "Δ ≤ 2L/(μ·⌊n/b⌋·b) ≈ 2L/(μn) whatever the number of passes). "
            "Default: convex for l2 = 0; for l2 > 0 "
            "strongly_convex unless its noise alone exceeds the convex mode's utility bound "
            "(small l2)."
        ),
    )
    passes: int | None = Field(
        default=None,
        ge=1,
        le=PASSES_CAP,
        description=(
            "k: passes over the data, each over a fresh random permutation. In strongly convex "
            "mode more passes do not add noise once k·n/b exceeds (β+μ)/μ steps, so pick as "
            "many as the compute allows. Default: convex — the theory-optimal k (see the "
            "catalog), strongly convex — max_passes."
        ),
    )
    max_passes: int = Field(
        default=10,
        ge=1,
        le=PASSES_CAP,
        description="Cap on the default number of passes (ignored if passes is given).",
    )
    batch_size: int | None = Field(
        default=None,
        ge=1,
        description=(
            "b: each pass is cut into ⌊n/b⌋ batches of at least b rows; the convex sensitivity "
            "is divided by b. Default: min(50, n)."
        ),
    )
    step_size: float | None = Field(
        default=None,
        gt=0.0,
        allow_inf_nan=False,
        description=(
            "Convex mode: the constant step η; strongly convex mode: the cap η₀ in "
            "η_t = min(η₀, 1/(μt)). Must be ≤ 2/(β + 2μ) (β: smoothness of the per-example "
            "loss, μ: l2). Default: convex — the η minimising the utility bound (catalog), "
            "strongly convex — 1/(β + μ)."
        ),
    )
    averaging: bool | None = Field(
        default=None,
        description=(
            "Release the average of all iterates instead of the last one (its sensitivity is "
            "computed exactly). Default: on in convex mode (about halves Δ), off in strongly "
            "convex mode (the early iterates are the most sensitive)."
        ),
    )
    radius: float | None = Field(
        default=None,
        gt=0.0,
        allow_inf_nan=False,
        description=(
            "R: project every iterate onto the public ball ‖w‖ ≤ R (non-expansive, so the "
            "sensitivity is unchanged). Default: no projection."
        ),
    )
    norm_guess: float = Field(
        default=10.0,
        gt=0.0,
        allow_inf_nan=False,
        description=(
            "D: the analyst's public guess of the optimum's norm, used only for the convex-mode "
            "default step size and passes (capped by radius)."
        ),
    )


# --- the math, as plain functions ------------------------------------------------------------


def bolt_on_sensitivity(
    *,
    lipschitz: float,
    n: int,
    batch_size: int,
    passes: int,
    schedule: StepSchedule,
    averaging: bool,
) -> float:
    """Worst-case replace-one L2 sensitivity of permutation SGD's output (module docstring §4):
    (2L/b_min) Σ_p max_{t ∈ pass p} I(t), evaluated at the candidate steps of each pass.

    The contraction uses ``schedule.l2`` = μ (the loss's l2); valid when every η_t ≤ 2/(β + 2μ).
    """
    m, b_min = pass_layout(n, batch_size)
    total = passes * m
    influence = _Influence(schedule, total, averaging)
    t0 = schedule.decay_start
    worst = 0.0
    for p in range(1, passes + 1):
        start, end = (p - 1) * m + 1, p * m
        candidates = {start, end}
        if t0 is not None:
            candidates.update(t for t in (t0, t0 + 1) if start <= t <= end)
        worst += max(influence(t) for t in candidates)
    return 2.0 * lipschitz * worst / b_min


class _Influence:
    """I(t): the weight of a unit gap opened at step t in the output (module docstring §3–4)."""

    def __init__(self, schedule: StepSchedule, total: int, averaging: bool) -> None:
        self.schedule = schedule
        self.total = total
        self.averaging = averaging
        self.mu_eta = schedule.l2 * schedule.initial  # 1 − ρ
        # t₀ = T for a constant step: the decreasing regime is never reached
        self.t0 = total if schedule.decay_start is None else min(schedule.decay_start, total)

    def _rho_pow(self, k: int) -> float:
        if k == 0:
            return 1.0
        if self.mu_eta >= 1.0:
            return 0.0
        return math.exp(k * math.log1p(-self.mu_eta))

    def _geometric(self, count: int) -> float:
        """Σ_{j<count} ρ^j."""
        if self.mu_eta == 0.0:
            return float(count)
        if self.mu_eta >= 1.0:
            return 1.0
        return -math.expm1(count * math.log1p(-self.mu_eta)) / self.mu_eta

    def _harmonic_diff(self, upper: int, lower: int) -> float:
        """H_upper − H_lower."""
        return float(digamma(upper + 1) - digamma(lower + 1))

    def __call__(self, t: int) -> float:
        total, t0, eta = self.total, self.t0, self.schedule(t)
        if not self.averaging:
            if t <= t0:
                tail = t0 / total  # Π over the decreasing regime s ∈ (t₀, T]
                return eta * self._rho_pow(t0 - t) * tail
            return eta * t / total
        if t <= t0:
            total_weight = self._geometric(t0 - t + 1)
            if total > t0:
                total_weight += self._rho_pow(t0 - t) * t0 * self._harmonic_diff(total, t0)
        else:
            total_weight = t * self._harmonic_diff(total, t - 1)
        return eta * total_weight / total


def permutation_sgd(
    loss: Loss,
    X: FloatArray,
    y: FloatArray,
    *,
    passes: int,
    batch_size: int,
    schedule: StepSchedule,
    averaging: bool,
    radius: float | None,
    rng: SecureRandom,
    progress: ProgressCallback | None = None,
) -> FloatArray:
    """The noise-free black box: k passes of mini-batch SGD over fresh permutations drawn from
    ``rng`` (see the module docstring); returns w_T or the average of w_1 … w_T."""
    n = X.shape[0]
    m, _ = pass_layout(n, batch_size)
    batches: Iterator[Any] = permutation_batches(n, m, passes, rng)
    return run_sgd(
        loss, X, y, batches, schedule, radius=radius, averaging=averaging, progress=progress
    )


def max_step_size(smoothness: float, l2: float) -> float:
    """2/(β + 2μ): the largest step for which every step is (1 − ημ)-contractive."""
    denominator = smoothness + 2.0 * l2
    return math.inf if denominator == 0.0 else 2.0 / denominator


def noise_norm_factor(d: int, target: PrivacyTarget) -> float:
    """ν = E‖z‖/Δ of the release noise: ≈ σ₁√d (Gaussian, σ₁ the analytic σ at Δ = 1) or d/ε."""
    if target.delta == 0.0:
        return d / target.epsilon
    return analytic_gaussian_sigma(target.epsilon, target.delta, 1.0) * math.sqrt(d)


@dataclass(frozen=True)
class Configuration:
    """A fully resolved run: what ``fit`` needs, plus its sensitivity."""

    mode: Mode
    passes: int
    schedule: StepSchedule
    averaging: bool
    sensitivity: float


def convex_configuration(
    *,
    loss: Loss,
    n: int,
    d: int,
    batch_size: int,
    target: PrivacyTarget,
    norm: float,
    averaging: bool,
    passes: int | None,
    step_size: float | None,
    max_passes: int,
) -> tuple[Configuration, float]:
    """Alg. 1 with the theory defaults (module docstring, Defaults) for the unset k and η, and
    the value of the utility bound D²/(2ηT) + ηG²/2 + G·E‖z‖ at the result."""
    m, b_min = pass_layout(n, batch_size)
    lip = loss.lipschitz
    grad_bound = lip + loss.l2 * norm
    nu = noise_norm_factor(d, target)
    if passes is None:
        c_limit = 0.5 if averaging else 1.0
        raw = grad_bound * b_min / (4.0 * nu * c_limit * lip)
        passes = max_passes if not raw < max_passes else max(1, math.ceil(raw))
    total = passes * m
    if step_size is None:
        c_avg = (passes + 1) / (2.0 * passes) if averaging else 1.0
        noise_slope = 4.0 * grad_bound * nu * c_avg * passes * lip / b_min
        step = norm / math.sqrt(total * (grad_bound**2 + noise_slope))
        step = min(step, max_step_size(loss.smoothness, loss.l2))
    else:
        step = step_size
    schedule = StepSchedule.constant(step, loss.l2)
    sensitivity = bolt_on_sensitivity(
        lipschitz=lip,
        n=n,
        batch_size=batch_size,
        passes=passes,
        schedule=schedule,
        averaging=averaging,
    )
    bound = norm**2 / (2.0 * step * total) + step * grad_bound**2 / 2.0
    bound += grad_bound * nu * sensitivity
    return Configuration("convex", passes, schedule, averaging, sensitivity), bound


def strongly_convex_configuration(
    *,
    loss: Loss,
    n: int,
    batch_size: int,
    averaging: bool,
    passes: int,
    step_size: float | None,
) -> Configuration:
    """Alg. 2: η_t = min(η₀, 1/(μt)) with η₀ = 1/(β + μ) unless given."""
    cap = 1.0 / (loss.smoothness + loss.l2) if step_size is None else step_size
    schedule = StepSchedule.capped_inverse_t(cap, loss.l2)
    sensitivity = bolt_on_sensitivity(
        lipschitz=loss.lipschitz,
        n=n,
        batch_size=batch_size,
        passes=passes,
        schedule=schedule,
        averaging=averaging,
    )
    return Configuration("strongly_convex", passes, schedule, averaging, sensitivity)


# --- the plug-in ------------------------------------------------------------------------------


class BoltOnPSGD:
    """Wu et al. (2017) Alg. 1–2: permutation SGD as a black box, then noise once."""

    name: ClassVar[str] = "bolt_on_psgd"
    summary: ClassVar[str] = (
        "Bolt-on private SGD: k passes of ordinary mini-batch SGD over fresh random "
        "permutations (optional iterate averaging and projection), then one draw of noise "
        "calibrated to the worst-case replace-one sensitivity of the output. In strongly "
        "convex mode the noise does not grow with the number of passes."
    )
    assumptions: ClassVar[str] = (
        "Convex, L-Lipschitz, β-smooth per-example loss on rows with ‖x‖₂ ≤ 1, l1 = 0, "
        "l2 = μ ≥ 0; every step η_t ≤ 2/(β + 2μ). Convex mode: constant step. Strongly convex "
        "mode (needs μ > 0): η_t = min(1/(β+μ), 1/(μt))."
    )
    guarantee: ClassVar[str] = (
        "ε-DP for δ = 0 (noise density ∝ exp(−ε‖z‖/Δ)); (ε, δ)-DP for δ > 0 (analytic "
        "Gaussian). Replace-one adjacency with Δ = (2L/b) Σ_passes max_t I(t), computed exactly "
        "for the schedule: 2kLη/b (convex, last iterate), (k+1)Lη/b (convex, averaged), "
        "≤ 2L/(μ·m·b_min) ≈ 2L/(μn) for every number of passes (strongly convex, last iterate; "
        "m = ⌊n/b⌋ batches of ≥ b_min rows)."
    )
    reference: ClassVar[str] = (
        "Wu, Li, Kumar, Chaudhuri, Jha & Naughton (2017), 'Bolt-on Differential Privacy for "
        "Scalable Stochastic Gradient Descent-based Analytics', SIGMOD, Alg. 1–2, Lemma 5–10; "
        "growth recursion of Hardt, Recht & Singer (2016); Balle & Wang (2018), Thm 8."
    )
    Params: ClassVar[type[BaseModel]] = BoltOnPSGDParams
    Config: ClassVar[type[PlanConfig]] = BoltOnConfig

    def plan(
        self, params: BaseModel, loss: Loss, n: int, d: int, target: PrivacyTarget
    ) -> ReleasePlan:
        """Resolve mode, passes, batches, steps; compute Δ and calibrate the noise (public
        information only). Raises :class:`InfeasibleSpec` naming the field at fault."""
        p = coerce_params(params, BoltOnPSGDParams)
        check_target(target, pure_allowed=True, optimizer=self.name)
        if n < 1 or d < 1:
            raise ValueError("n and d must be >= 1")
        check_convex_loss(loss, self.name)
        config = self._configure(p, loss, n, d, target)
        sensitivity = config.sensitivity
        calibration = calibrate_release(sensitivity, target.epsilon, target.delta)
        batch_size = resolve_batch_size(p.batch_size, n)
        m, b_min = pass_layout(n, batch_size)
        hyperparameters: dict[str, Any] = {
            "mode": config.mode,
            "passes": config.passes,
            "batch_size": batch_size,
            "batches_per_pass": m,
            "min_batch_size": b_min,
            "schedule": config.schedule.to_json(),
            "averaging": config.averaging,
            "radius": p.radius,
            "n": n,
            "d": d,
        }
        return ReleasePlan(
            mechanism=calibration.mechanism,
            sensitivity=sensitivity,
            noise_scale=calibration.noise_scale,
            event=calibration.event,
            total_steps=config.passes * m,
            hyperparameters=hyperparameters,
        )

    def _configure(
        self, p: BoltOnPSGDParams, loss: Loss, n: int, d: int, target: PrivacyTarget
    ) -> Configuration:
        """Resolve the mode and its defaults (module docstring, Defaults)."""
        mu, beta = loss.l2, loss.smoothness
        if p.mode == "strongly_convex" and not mu > 0.0:
            raise InfeasibleSpec(
                "model",
                "strongly convex mode needs l2 > 0 (the objective's strong convexity); "
                f"{loss.name} has l2 = 0 — set l2 > 0 or use mode 'convex'",
            )
        batch_size = resolve_batch_size(p.batch_size, n)
        bound = max_step_size(beta, mu)
        step = None if p.step_size is None else float(p.step_size)
        if step is not None and step > bound:
            raise InfeasibleSpec(
                "optimizer.params.step_size",
                f"step_size must be at most 2/(β + 2μ) = {bound:.6g} for {loss.name} with "
                f"l2 = {mu:g} (β = {beta:g}); above it a gradient step is no longer "
                "contractive and the sensitivity bound does not hold",
            )
        strongly = None
        if p.mode != "convex" and mu > 0.0:
            strongly = strongly_convex_configuration(
                loss=loss,
                n=n,
                batch_size=batch_size,
                averaging=False if p.averaging is None else p.averaging,
                passes=p.max_passes if p.passes is None else p.passes,
                step_size=step,
            )
            if p.mode == "strongly_convex":
                return strongly
        if step is None and beta + mu == 0.0:
            raise InfeasibleSpec(
                "optimizer.params.step_size", "this loss has no default step size; give one"
            )
        norm = p.norm_guess if p.radius is None else min(p.norm_guess, p.radius)
        convex, convex_bound = convex_configuration(
            loss=loss,
            n=n,
            d=d,
            batch_size=batch_size,
            target=target,
            norm=norm,
            averaging=True if p.averaging is None else p.averaging,
            passes=p.passes,
            step_size=step,
            max_passes=p.max_passes,
        )
        if strongly is None:
            return convex
        # mode left open with μ > 0: Alg. 2 unless its noise term alone exceeds Alg. 1's bound
        noise_term = (loss.lipschitz + mu * norm) * noise_norm_factor(d, target)
        return strongly if noise_term * strongly.sensitivity <= convex_bound else convex

    def fit(
        self,
        plan: ReleasePlan,
        loss: Loss,
        X: FloatArray,
        y: FloatArray,
        rng: SecureRandom,
        progress: ProgressCallback,
    ) -> FloatArray:
        """Run ``plan`` on the rows (checked: :func:`checked_plan`, then shape, ‖x‖ ≤ 1 and labels
        without revealing values); the permutations, then the noise, are drawn from ``rng``."""
        config, schedule = checked_plan(plan, loss)
        X, y = checked_data(loss, X, y, config.n, config.d)
        w = permutation_sgd(
            loss,
            X,
            y,
            passes=config.passes,
            batch_size=config.batch_size,
            schedule=schedule,
            averaging=config.averaging,
            radius=config.radius,
            rng=rng,
            progress=progress,
        )
        return release_with_noise(plan.mechanism, w, plan.noise_scale, plan.sensitivity, rng)


OPTIMIZER = BoltOnPSGD
