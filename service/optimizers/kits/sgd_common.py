r"""Shared pieces of the stochastic-gradient optimizers (``bolt_on_psgd``, ``noisy_sgd_scs13``,
``noisy_sgd_bst14``): spec checks, batching, step-size schedules, the SGD loop, and the RDP
calibration of sampled Gaussian steps.

Batching. Two ways of choosing mini-batches, each matched to the privacy analysis that uses it:

- **Permutation passes** (:func:`permutation_batches`): each pass draws a fresh uniformly random
  permutation of the n rows from ``rng`` and cuts it into m = ⌊n/b⌋ consecutive batches with
  ``np.array_split`` — sizes ⌊n/m⌋ or ⌈n/m⌉, so every row is used exactly once per pass and
  every batch has at least ``b_min = ⌊n/m⌋ ≥ b`` rows (no short last batch whose larger per-row
  weight 1/|B| would break a 1/b sensitivity). The replaced row lies in exactly one batch per
  pass. No privacy amplification is claimed for these batches.
- **Fixed-size sampling without replacement** (:func:`sampled_batches`): every step draws
  exactly b distinct rows uniformly, independently of the other steps — exactly the sampling
  scheme of dp-accounting's ``SampledWithoutReplacementDpEvent`` under REPLACE_ONE (never
  Poisson sampling, never shuffling).

Either way the randomness is data independent (Wu et al. 2017, Def. 7 "non-adaptive"), drawn
only from the ``rng`` the caller passes, so a noise-free run with a given seed uses the same
batches on neighbouring datasets — the setting of every sensitivity argument here.

Step-size schedules (:class:`StepSchedule`): η_t = η₀ for t ≤ t₀ and η_t = 1/(μt) for t > t₀.
This covers a constant step (t₀ = ∞), Wu et al.'s η_t = min(1/β_F, 1/(μt)) (η₀ = 1/β_F,
t₀ = ⌊1/(μη₀)⌋, so 1/(μt) < η₀ exactly when t > t₀) and BST14's 1/(μt) (η₀ = ∞, t₀ = 0).
The inverse-square-root schedule c/√t of the convex baselines is :class:`InverseSqrtSchedule`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, Field

from service.models.base import FloatArray, Loss, parameter_count
from service.optimizers.kits.base import InfeasibleSpec, ProgressCallback
from service.optimizers.kits.gradient_kit import check_step_size, exact_gradient_needed
from service.privacy.output_perturbation import noise_second_moment, release_with_noise
from service.privacy.secure_random import SecureRandom, as_secure

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "IntArray",
    "baseline_batch_size_field",
    "baseline_mode_field",
    "baseline_radius_field",
    "baseline_step_size_field",
    "resolve_batch_size",
    "DEFAULT_CONVEX_RADIUS",
    "BaselineSteps",
    "Mode",
    "baseline_steps",
    "noise_second_moment",
    "noisy_release",
    "InverseSqrtSchedule",
    "Schedule",
    "StepSchedule",
    "check_convex_loss",
    "coerce_params",
    "pass_layout",
    "permutation_batches",
    "project_to_ball",
    "run_sgd",
    "sampled_batches",
    "schedule_from_json",
]

IntArray = NDArray[np.int64]
_P = TypeVar("_P", bound=BaseModel)

#: Mini-batch size used when the analyst gives none: Wu et al. (2017, §4.3, §4.6) recommend
#: 10–50 and use 50; Zhang et al. (2017, §4) run BST14 with batches of 50 too.
DEFAULT_BATCH_SIZE = 50


# --- spec checks --------------------------------------------------------------------------------


def coerce_params(params: BaseModel, cls: type[_P]) -> _P:
    """``params`` as an instance of ``cls`` (re-validated when it is another model)."""
    if isinstance(params, cls):
        return params
    return cls.model_validate(params.model_dump())


def check_convex_loss(loss: Loss, optimizer: str) -> None:
    """Reject losses outside the analysis: non-convex, a gradient that is a clipped field
    (:func:`~service.optimizers.kits.gradient_kit.exact_gradient_needed`: bolt-on's growth
    recursion needs the exact one), L1-regularised, or without finite positive L / finite β,
    μ ≥ 0 (all on field ``model``)."""
    if not loss.convex:
        raise InfeasibleSpec(
            "model",
            f"{optimizer} needs a convex loss; {loss.name} is not convex — choose an optimizer "
            "for non-convex objectives (e.g. rrpsgd)",
        )
    exact_gradient_needed(loss, optimizer)
    if getattr(loss, "l1", 0.0) > 0.0:
        raise InfeasibleSpec(
            "model",
            f"{optimizer} takes plain gradient steps and its sensitivity analysis needs a smooth "
            "objective; set l1 = 0 (use l2 instead) or choose a proximal optimizer such as "
            "dp_svrg for L1 / elastic-net regularisation",
        )
    lip, beta, mu = loss.lipschitz, loss.smoothness, loss.l2
    if not (math.isfinite(lip) and lip > 0.0):
        raise InfeasibleSpec("model", f"{loss.name} has no finite Lipschitz constant")
    if not (math.isfinite(beta) and beta >= 0.0 and math.isfinite(mu) and mu >= 0.0):
        raise InfeasibleSpec("model", f"{loss.name} has no finite smoothness / l2")


# --- batching -----------------------------------------------------------------------------------


def pass_layout(n: int, batch_size: int) -> tuple[int, int]:
    """(m, b_min): a pass over n rows in m = ⌊n/b⌋ batches whose sizes are ⌊n/m⌋ or ⌈n/m⌉,
    so the smallest batch has b_min = ⌊n/m⌋ ≥ b rows. Requires 1 ≤ b ≤ n."""
    if not 1 <= batch_size <= n:
        raise ValueError("the batch size must be between 1 and n")
    m = n // batch_size
    return m, n // m


def permutation_batches(
    n: int, batches_per_pass: int, passes: int, rng: SecureRandom
) -> Iterator[IntArray]:
    """Index batches of ``passes`` passes, each over a fresh permutation drawn from ``rng`` at
    the start of the pass (exactly uniform, :meth:`SecureRandom.permutation`) and split into
    ``batches_per_pass`` near-equal consecutive parts."""
    source = as_secure(rng)
    for _ in range(passes):
        yield from np.array_split(source.permutation(n), batches_per_pass)


def sampled_batches(n: int, batch_size: int, steps: int, rng: SecureRandom) -> Iterator[IntArray]:
    """``steps`` batches of exactly ``batch_size`` distinct rows, each drawn uniformly without
    replacement, independently of the other steps (the scheme of
    ``SampledWithoutReplacementDpEvent``)."""
    source = as_secure(rng)
    for _ in range(steps):
        yield source.sample(n, batch_size)


# --- step sizes ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class StepSchedule:
    """η_t = η₀ for t ≤ t₀, η_t = 1/(μ t) for t > t₀ (t = 1, 2, …); ``decay_start`` t₀ is
    ``None`` for a constant step. See the module docstring for the three instances."""

    initial: float
    l2: float
    decay_start: int | None

    @classmethod
    def constant(cls, step_size: float, l2: float = 0.0) -> StepSchedule:
        return cls(step_size, l2, None)

    @classmethod
    def capped_inverse_t(cls, cap: float, l2: float) -> StepSchedule:
        """η_t = min(cap, 1/(μt)) (``cap`` may be ∞ for plain 1/(μt)); needs μ > 0."""
        if not l2 > 0.0:
            raise ValueError("a 1/(μt) schedule needs l2 > 0")
        if math.isinf(cap):
            return cls(cap, l2, 0)
        if not 1.0 / (l2 * cap) < 2.0**53:
            return cls(cap, l2, None)  # 1/(μt) < cap is never reached: a constant step
        # t₀ = ⌊1/(μ·cap)⌋, nudged so that exactly the t > t₀ satisfy 1/(μt) < cap
        t0 = math.floor(1.0 / (l2 * cap))
        while t0 > 0 and 1.0 / (l2 * t0) < cap:
            t0 -= 1
        while 1.0 / (l2 * (t0 + 1)) >= cap:
            t0 += 1
        return cls(cap, l2, t0)

    def __call__(self, t: int) -> float:
        if self.decay_start is None or t <= self.decay_start:
            return self.initial
        return 1.0 / (self.l2 * t)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": "capped_inverse_t" if self.decay_start is not None else "constant",
            "initial": None if math.isinf(self.initial) else self.initial,
            "l2": self.l2,
            "decay_start": self.decay_start,
        }


@dataclass(frozen=True)
class InverseSqrtSchedule:
    """η_t = c/√t."""

    scale: float

    def __call__(self, t: int) -> float:
        return self.scale / math.sqrt(t)

    def to_json(self) -> dict[str, Any]:
        return {"kind": "inverse_sqrt", "scale": self.scale}


class Schedule(Protocol):
    def __call__(self, t: int) -> float: ...

    def to_json(self) -> dict[str, Any]: ...


def schedule_from_json(payload: dict[str, Any]) -> StepSchedule | InverseSqrtSchedule:
    """Rebuild a schedule stored by its ``to_json``."""
    if payload["kind"] == "inverse_sqrt":
        return InverseSqrtSchedule(float(payload["scale"]))
    initial = math.inf if payload["initial"] is None else float(payload["initial"])
    decay_start = payload["decay_start"]
    return StepSchedule(
        initial, float(payload["l2"]), None if decay_start is None else int(decay_start)
    )


# --- the SGD loop -------------------------------------------------------------------------------


def project_to_ball(w: FloatArray, radius: float | None) -> None:
    """In place: w ← w · min(1, R/‖w‖), the Euclidean projection onto ‖w‖ ≤ R (non-expansive)."""
    if radius is None:
        return
    largest = float(np.max(np.abs(w))) if w.size else 0.0
    if not largest > 0.0:
        return
    scaled = w / largest  # ‖w‖ = largest·‖w/largest‖: w·w itself overflows beyond ~1e154
    norm = largest * math.sqrt(float(scaled @ scaled))
    if norm > radius:
        w *= radius / norm


def run_sgd(
    loss: Loss,
    X: FloatArray,
    y: FloatArray,
    batches: Iterator[IntArray],
    schedule: Schedule,
    *,
    radius: float | None = None,
    averaging: bool = False,
    noise: Callable[[FloatArray], FloatArray] | None = None,
    progress: ProgressCallback | None = None,
    observe: Callable[[int, FloatArray, IntArray], None] | None = None,
) -> FloatArray:
    """Mini-batch (projected, optionally noisy) SGD from w₀ = 0.

    Step t = 1, 2, … on batch B_t: ``w_t = Π_R(w_{t−1} − η_t (∇F_{B_t}(w_{t−1}) + z_t))`` with
    ∇F_B = mean data gradient over B plus μw (``loss.gradient`` on the batch), ∇F_B + z_t =
    ``noise(∇F_B)`` (the exact release of :func:`noisy_release`; or z_t = 0), Π_R the
    projection onto ‖w‖ ≤ R (none when ``radius`` is None). Returns w_T, or the
    uniform average (w_1 + … + w_T)/T when ``averaging``. ``progress(t)`` after every step;
    ``observe(t, w_{t−1}, B_t)`` before it (for tests of the per-step sensitivity).
    """
    d = parameter_count(loss, X.shape[1])
    w: FloatArray = np.zeros(d, dtype=np.float64)
    average: FloatArray = np.zeros(d, dtype=np.float64)
    t = 0
    for t, idx in enumerate(batches, start=1):
        if observe is not None:
            observe(t, w, idx)
        grad = loss.gradient(w, X[idx], y[idx])
        if noise is not None:
            grad = noise(grad)
        w = w - schedule(t) * grad
        project_to_ball(w, radius)
        if averaging:
            average += (w - average) / t
        if progress is not None:
            progress(t)
    if averaging and t > 0:
        return average
    return w


# --- the noisy-SGD baselines ------------------------------------------------------------------

Mode = Literal["convex", "strongly_convex"]

#: Projection radius of the baselines in convex mode when none is given: a public guess of the
#: optimum's norm (the same default guess as ``output_perturbation_gd``'s ``radius``).
DEFAULT_CONVEX_RADIUS = 10.0


def noisy_release(
    mechanism: str, scale: float, sensitivity: float, rng: SecureRandom
) -> Callable[[FloatArray], FloatArray]:
    """A callable releasing one step's gradient with fresh exact noise of the named mechanism
    (:func:`service.privacy.output_perturbation.release_with_noise`: σ = ``scale`` for
    "gaussian", ε = Δ/``scale`` for "norm_gamma"; Δ = ``sensitivity``, the step's)."""
    source = as_secure(rng)

    def release(value: FloatArray) -> FloatArray:
        return release_with_noise(mechanism, value, scale, sensitivity, source)

    return release


@dataclass(frozen=True)
class BaselineSteps:
    """The step schedule and projection radius of a noisy-SGD baseline."""

    mode: Mode
    schedule: StepSchedule | InverseSqrtSchedule
    radius: float
    bound: float


def baseline_steps(
    *,
    mode: Mode | None,
    loss: Loss,
    radius: float | None,
    step_size: float | None,
    second_moment: float,
    steps: int,
) -> BaselineSteps:
    """Steps of projected noisy SGD per BST14 (Bassily, Smith & Thakurta 2014, Alg. 1 and its
    strongly convex variant), whose guarantees are Shamir & Zhang (2013)'s last-iterate bounds
    with G² ≥ E‖g̃_t‖² = (L + μR)² + E‖z‖² (the noisy batch gradient's second moment on the
    ball ‖w‖ ≤ R):

    - convex: η_t = c/√t, c = D/G with D = 2R the ball's diameter (Thm 2:
      E F(w_T) − F* ≤ (D²/c + cG²)(2 + ln T)/√T); R defaults to :data:`DEFAULT_CONVEX_RADIUS`.
    - strongly convex (μ > 0): η_t = 1/(μt) (Thm 1: ≤ 17G²(1 + ln T)/(μT)); R defaults to L/μ,
      which contains every minimiser of F (μŵ = −mean ∇ℓ ⇒ ‖ŵ‖ ≤ L/μ).

    ``mode`` None: convex for μ = 0 (or when a step_size is given), else the mode with the
    smaller of the two bounds. The noise (hence ``second_moment``) does not depend on the mode.
    """
    mu, lip = loss.l2, loss.lipschitz
    log_t = math.log(steps)
    if mode == "strongly_convex" and not mu > 0.0:
        raise InfeasibleSpec(
            "model",
            "strongly convex mode needs l2 > 0 (the objective's strong convexity); "
            f"{loss.name} has l2 = 0 — set l2 > 0 or use mode 'convex'",
        )
    if mode == "strongly_convex" and step_size is not None:
        raise InfeasibleSpec(
            "optimizer.params.step_size",
            "strongly convex mode uses η_t = 1/(μt); step_size (the c of η_t = c/√t) applies "
            "to convex mode only — drop it or choose mode 'convex'",
        )
    convex_radius = DEFAULT_CONVEX_RADIUS if radius is None else radius
    g_convex = math.sqrt((lip + mu * convex_radius) ** 2 + second_moment)
    if step_size is not None:
        # ‖g̃‖ ≤ L + μR + ‖z‖ on the ball, and ‖z‖ ≤ 41·√E‖z‖² but with probability < e⁻⁸⁰⁰
        tail = lip + mu * convex_radius + 41.0 * math.sqrt(second_moment)
        check_step_size(step_size, loss, projected_gradient_bound=tail)
    scale = 2.0 * convex_radius / g_convex if step_size is None else step_size
    diameter = 2.0 * convex_radius
    convex = BaselineSteps(
        "convex",
        InverseSqrtSchedule(scale),
        convex_radius,
        (diameter**2 / scale + scale * g_convex**2) * (2.0 + log_t) / math.sqrt(steps),
    )
    if mode == "convex" or not mu > 0.0 or (mode is None and step_size is not None):
        return convex
    strong_radius = lip / mu if radius is None else radius
    g_strong_sq = (lip + mu * strong_radius) ** 2 + second_moment
    strong = BaselineSteps(
        "strongly_convex",
        StepSchedule.capped_inverse_t(math.inf, mu),
        strong_radius,
        17.0 * g_strong_sq * (1.0 + log_t) / (mu * steps),
    )
    if mode == "strongly_convex":
        return strong
    return strong if strong.bound < convex.bound else convex


def baseline_mode_field() -> Any:
    return Field(
        default=None,
        description=(
            "'convex' (η_t = c/√t, projection radius R default 10) or 'strongly_convex' "
            "(η_t = 1/(μt), needs l2 > 0, R default L/μ). Default: convex for l2 = 0, else the "
            "mode with the smaller Shamir–Zhang excess-risk bound."
        ),
    )


def baseline_batch_size_field() -> Any:
    return Field(
        default=None,
        ge=1,
        description=("b: rows per step; the per-step sensitivity is 2L/b. Default: min(50, n)."),
    )


def baseline_radius_field() -> Any:
    return Field(
        default=None,
        gt=0.0,
        allow_inf_nan=False,
        description=(
            "R: every iterate is projected onto the public ball ‖w‖ ≤ R. Default: L/μ in "
            "strongly convex mode (it contains the optimum), 10 in convex mode (a guess)."
        ),
    )


def baseline_step_size_field() -> Any:
    return Field(
        default=None,
        gt=0.0,
        allow_inf_nan=False,
        description=(
            "Convex mode only: c in η_t = c/√t. Default: 2R/G with G² = (L + μR)² + E‖z‖² "
            "(Shamir & Zhang 2013, Thm 2)."
        ),
    )


def resolve_batch_size(batch_size: int | None, n: int) -> int:
    """The analyst's b (at most n) or the default min(50, n)."""
    if batch_size is None:
        return min(DEFAULT_BATCH_SIZE, n)
    if batch_size > n:
        raise InfeasibleSpec(
            "optimizer.params.batch_size",
            f"batch_size must be at most the number of rows n = {n}",
        )
    return batch_size
