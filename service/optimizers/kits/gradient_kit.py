"""The gradient-perturbation kit: what the optimizers that add Gaussian noise to gradient
queries share (``dp_gd``, ``dp_agd``, ``dp_agd_averaged``, ``rrpsgd``, ``dp_svrg``,
``dp_svrg_pp``, ``auto``).

- the record of one noisy release (:class:`QueryRecord`, tests and audits only);
- the per-step query and its replace-one sensitivity: the mean of ``rows`` per-example
  gradients of an L-Lipschitz loss moves by at most 2L/rows when one row is replaced
  (:func:`gradient_sensitivity`; derivation in ``dp_gd``'s module docstring);
- the proximal step for the L1 term (data-free), batch sampling without replacement (what
  ``SampledWithoutReplacementDpEvent`` assumes);
- the planning checks of a full-gradient job and the plan of T Gaussian full-gradient steps
  (:func:`gaussian_steps_plan`: exact Gaussian-DP calibration, Dong, Roth & Su 2022, Cor. 3.3
  and 2.13; the event ``SelfComposed(Gaussian(z), T)``);
- the data-side checks a ``fit`` makes against its plan (:func:`full_gradient_inputs`,
  :func:`check_plan_covers`).

Nothing here reads private data except the query functions, which are called by ``fit`` only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from dp_accounting import dp_event
from numpy.typing import NDArray

from service.models.base import FloatArray, Loss
from service.optimizers.kits.base import InfeasibleSpec, PrivacyTarget, ReleasePlan
from service.optimizers.kits.config import ShapeConfig
from service.optimizers.kits.inputs import Rows, checked_rows
from service.optimizers.kits.limits import SAFE_MAGNITUDE
from service.privacy.gdp import gaussian_steps_multiplier
from service.privacy.secure_random import SecureRandom, as_secure
from service.privacy.target import check_target

__all__ = [
    "IntArray",
    "QueryRecord",
    "check_full_gradient_job",
    "check_lipschitz",
    "check_plan_covers",
    "check_step_size",
    "exact_gradient_needed",
    "full_gradient_inputs",
    "full_gradient_query",
    "gaussian_steps_event",
    "gaussian_steps_plan",
    "gradient_sensitivity",
    "proximal_step",
    "sample_batch",
    "single_release_multiplier",
    "zcdp_noise_std",
]

IntArray = NDArray[np.int64]


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


def sample_batch(rng: SecureRandom, n: int, b: int) -> IntArray:
    """b distinct row indices drawn uniformly without replacement (exactly what the
    ``SampledWithoutReplacementDpEvent`` accounting assumes), from the OS CSPRNG by an exact
    sampler (:meth:`~service.privacy.secure_random.SecureRandom.sample`)."""
    return as_secure(rng).sample(n, b)


def check_lipschitz(loss: Loss) -> None:
    """The privacy proof needs a finite Lipschitz constant L > 0 and finite β, μ ≥ 0."""
    if not (math.isfinite(loss.lipschitz) and loss.lipschitz > 0.0):
        raise InfeasibleSpec("model", f"{loss.name} has no finite Lipschitz constant")
    beta, mu = loss.smoothness, loss.l2
    if not (math.isfinite(beta) and beta >= 0.0 and math.isfinite(mu) and mu >= 0.0):
        raise InfeasibleSpec("model", f"{loss.name} has no finite smoothness / l2")


def exact_gradient_needed(loss: Loss, optimizer: str) -> None:
    """For the methods whose sensitivity is a growth recursion of exact gradient steps (output
    perturbation, bolt-on): :class:`InfeasibleSpec` on ``model`` when the loss's gradient is a
    clipped field (``exact_gradient`` False: ``service/models/multinomial.py``, "Per-row norm
    clip"), whatever path planned the job."""
    if not getattr(loss, "exact_gradient", True):
        raise InfeasibleSpec(
            "model",
            f"{optimizer} needs the exact gradient of a convex loss; {loss.name} with a binding "
            "gradient_norm_clip steps along a clipped field — leave gradient_norm_clip unset",
        )


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


def check_step_size(
    step: float,
    loss: Loss,
    field: str = "optimizer.params.step_size",
    *,
    projected_gradient_bound: float | None = None,
) -> float:
    """The step-size rule every optimizer that takes gradient steps of a given size shares.
    Public: the loss's constants, the step and a public gradient bound only. Returns η.

    - η must be a finite number > 0.
    - Unprojected steps on F (full-gradient and SVRG steps; ``projected_gradient_bound``
      None): when F is β_F-smooth with β_F = β + μ > 0, η ≤ 2/β_F. Beyond it even noiseless
      gradient descent diverges (on a quadratic of curvature β_F the error is multiplied by
      |1 − ηβ_F| > 1 every step), so the iterates grow until they overflow and the model is
      NaN; no step count or noise level makes such a step converge.
    - Steps projected onto a public ball (the noisy-SGD baselines' c/√t: any c converges, the
      projection bounds the iterates): one step's move η·G, with G a public bound on the noisy
      gradient's norm, must stay within
      :data:`~service.optimizers.kits.limits.SAFE_MAGNITUDE`, else it overflows before the
      projection.

    Optimizers whose own analysis needs a smaller step (``output_perturbation_gd`` and
    ``bolt_on_psgd``: η ≤ 2/(β + 2μ); ``rrpsgd``: η < 2/β_F) check theirs first, with their
    own message. Raises :class:`InfeasibleSpec` on ``field``."""
    step = float(step)
    if not (math.isfinite(step) and step > 0.0):
        raise InfeasibleSpec(field, "the step size must be a finite number > 0")
    if projected_gradient_bound is not None:
        if not step * projected_gradient_bound <= SAFE_MAGNITUDE:
            raise InfeasibleSpec(
                field,
                f"step_size is too large: one step could move the model by more than "
                f"{SAFE_MAGNITUDE:g} and overflow",
            )
        return step
    beta_f = loss.smoothness + loss.l2
    if beta_f > 0.0 and step > 2.0 / beta_f:
        raise InfeasibleSpec(
            field,
            f"step_size must be at most 2/(β + μ) = {2.0 / beta_f:.6g} for {loss.name} "
            f"(β = {loss.smoothness:g}, μ = l2 = {loss.l2:g}): beyond it even noiseless gradient "
            "descent diverges and the model would not be finite",
        )
    return step


def check_full_gradient_job(
    name: str, loss: Loss, n: int, d: int, target: PrivacyTarget, step_size: float | None
) -> float:
    """The checks every noisy full-gradient optimizer makes at planning, and its step size:
    ``step_size`` if given, else 1/β_F = 1/(β + μ) (the descent lemma's step).

    Raises :class:`InfeasibleSpec` for δ = 0 or an invalid (ε, δ), a loss without finite
    constants ("model"), β + μ = 0 and no step size, or a step size beyond 2/(β + μ)
    (:func:`check_step_size`; "optimizer.params.step_size")."""
    check_target(target, pure_allowed=False, optimizer=name)
    if n < 1 or d < 1:
        raise ValueError("n and d must be >= 1")
    check_lipschitz(loss)
    if step_size is not None:
        return check_step_size(step_size, loss)
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
        event=gaussian_steps_event(multiplier, iterations),
        total_steps=iterations,
        hyperparameters=hyperparameters,
    )


def full_gradient_inputs(
    plan: ReleasePlan, loss: Loss, X: FloatArray, y: FloatArray
) -> tuple[Rows, FloatArray]:
    """The rows and float labels a full-gradient ``fit`` runs on, after checking them against
    the plan's public n, d, the row-norm / label assumptions, and that the plan's per-step
    sensitivity covers this loss (``ValueError``, no data values). The rows are
    :class:`~service.optimizers.kits.inputs.GradientRows` under the public layout ``X`` carries
    (:func:`~service.optimizers.kits.inputs.checked_rows`): the same representation and the same
    kernel calls for every dataset of the schema."""
    shape = ShapeConfig.from_hyperparameters(plan.hyperparameters)
    check_plan_covers(plan, loss)
    return checked_rows(loss, X, y, shape.n, shape.d)


def check_plan_covers(plan: ReleasePlan, loss: Loss) -> None:
    """The plan's per-step sensitivity covers this loss: Δ ≥ 2L/n (``ValueError`` otherwise).
    The public half of :func:`full_gradient_inputs`; with an oracle,
    :func:`~service.optimizers.kits.full_gradient.fit_on_oracle` checks n and d and the rows' own
    checks (norms, labels) are the oracle's."""
    n = ShapeConfig.from_hyperparameters(plan.hyperparameters).n
    if plan.sensitivity < gradient_sensitivity(loss.lipschitz, n) * (1.0 - 1e-12):
        raise ValueError("the plan's sensitivity does not cover this loss")


def gaussian_steps_event(multiplier: float, iterations: int) -> dp_event.DpEvent:
    """T adaptively composed Gaussian releases of noise multiplier z (REPLACE_ONE, z not
    doubled; docs/ledger.md#the-z-convention): exactly √T/z-GDP."""
    return dp_event.SelfComposedDpEvent(dp_event.GaussianDpEvent(multiplier), iterations)
