"""The accelerated-descent kit shared by ``dp_agd``, ``dp_agd_averaged`` and ``dp_agd_centred``:
FISTA from 0 with Gaussian noise on every full gradient (Beck & Teboulle 2009, eq. (4.1)–(4.3)),
its tail-averaged variant (Polyak–Ruppert, ``dp_agd_averaged``'s docstring), its default T, and
its plan.

The privacy analysis is DP-GD's (``dp_gd`` module docstring; Wang, Ye & Xu 2017, Alg. 4): the
T noisy gradients are queried at points that are post-processing of earlier releases, each of
replace-one sensitivity 2L/n, so the plan is :func:`~service.optimizers.kits.gradient_kit.
gaussian_steps_plan`'s. The default T is derived in ``dp_agd``'s module docstring.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from service.models.base import FloatArray, Loss, resolved_objective_gap
from service.optimizers.kits.base import (
    InfeasibleSpec,
    PrivacyTarget,
    ProgressCallback,
    ReleasePlan,
)
from service.optimizers.kits.config import GradientStepsConfig
from service.optimizers.kits.curvature_refresh import per_class_step
from service.optimizers.kits.full_gradient import GradientOracle, LocalGradient
from service.optimizers.kits.gradient_kit import (
    QueryRecord,
    check_full_gradient_job,
    gaussian_steps_plan,
    proximal_step,
    single_release_multiplier,
)
from service.optimizers.kits.inputs import Rows
from service.optimizers.kits.limits import FULL_GRADIENT_STEPS_CAP
from service.optimizers.kits.sgd_common import project_to_ball
from service.privacy.secure_random import SecureRandom
from service.privacy.secure_release import reserve_gaussian, secure_gaussian

__all__ = [
    "ACCELERATED_ASSUMPTIONS",
    "STEP_CAP",
    "STEP_FACTOR",
    "AveragedStepsParams",
    "Refresh",
    "plan_averaged",
    "accelerated_iterations",
    "averaged_accelerated_descent",
    "noisy_accelerated_descent",
    "oracle_accelerated_descent",
    "plan_accelerated",
]

#: (t_r, f): after step t_r the preconditioner becomes f(w_{t_r}) (``curvature_refresh``).
Refresh = tuple[int, Callable[[FloatArray], FloatArray]]

#: What both accelerated optimizers assume (their catalog entries).
ACCELERATED_ASSUMPTIONS = (
    "Convex, L-Lipschitz, β-smooth per-example loss on rows with ‖x‖₂ ≤ 1; l1 ≥ 0 via a "
    "proximal step; delta > 0; l2 > 0 or a public radius for the default T."
)


def accelerated_iterations(
    loss: Loss, n: int, d: int, z1: float, radius: float, max_iterations: int
) -> int:
    """The module docstring's T = ⌈(β_F R n / (2√2 L z₁ √d))^{1/2}⌉, clamped to
    [1, max_iterations]."""
    beta_f = loss.smoothness + loss.l2
    log_t = 0.5 * (
        math.log(beta_f)
        + math.log(radius)
        + math.log(n)
        - math.log(2.0 * math.sqrt(2.0) * loss.lipschitz * z1 * math.sqrt(d))
    )
    t = math.exp(min(log_t, 700.0))
    if not t < max_iterations:
        return max_iterations
    return max(1, math.ceil(t))


def noisy_accelerated_descent(
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
    """FISTA from 0 with noisy gradients (module docstring); returns w_T.

    ``noise_std = 0`` switches the noise off without drawing from ``rng`` (the sensitivity
    tests' noiseless run). ``trace`` (tests only) receives one :class:`QueryRecord` per step,
    recorded at the point v_t where the gradient is taken.
    """
    return oracle_accelerated_descent(
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


def oracle_accelerated_descent(
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
    on_iterate: Callable[[int, FloatArray], None] | None = None,
    radius: float | None = None,
    preconditioner: FloatArray | None = None,
    refresh: Refresh | None = None,
) -> FloatArray:
    """:func:`noisy_accelerated_descent` with ∇F from ``oracle`` (local rows or partitions):
    the same steps and the same noise draws from ``rng``. ``on_iterate(t, w_t)`` sees every
    iterate (post-processing of the noisy gradients, e.g. ``dp_agd_averaged``'s tail sum).
    ``radius``: every iterate w_t projected onto the public ball ‖w‖ ≤ radius (the curvature
    step's safeguard, ``curvature_step``'s step 3); None: no projection. ``preconditioner``:
    a symmetric w × w matrix M (``gram_step``'s P⁻¹); the step then moves by η g̃ M, g̃ taken
    as d/w rows of w (post-processing of g̃; l1 = 0 only: the l1 prox is the plain metric's).
    ``refresh`` (t_r, f): after step t_r, the preconditioner becomes f(w_{t_r}) — K × w × w, one
    per class row (``curvature_refresh``: its release draws from ``rng`` there)."""
    d = oracle.dimension
    if preconditioner is not None:
        width = int(preconditioner.shape[0])
        if preconditioner.shape != (width, width) or width < 1 or d % width:
            raise ValueError("the preconditioner must be square and divide the dimension")
        if float(getattr(loss, "l1", 0.0)) != 0.0:
            raise ValueError("a preconditioned step needs l1 = 0")
    w_prev: FloatArray = np.zeros(d, dtype=np.float64)
    v: FloatArray = w_prev.copy()
    s = 1.0
    reserve_gaussian(d, noise_std, sensitivity, iterations, rng)
    for t in range(1, iterations + 1):
        g = oracle.gradient(v)
        released = secure_gaussian(g, noise_std, sensitivity, rng) if noise_std > 0.0 else g
        if trace is not None:
            trace.append(QueryRecord("full_gradient", v.copy(), released - g))
        if preconditioner is not None:
            released = per_class_step(released, preconditioner)
        w = proximal_step(loss, v - step_size * released, step_size)
        project_to_ball(w, radius)  # in place; None: no projection
        if on_iterate is not None:
            on_iterate(t, w)
        if refresh is not None and t == refresh[0] and preconditioner is not None:
            preconditioner = refresh[1](w)
        s_next = 0.5 * (1.0 + math.sqrt(1.0 + 4.0 * s * s))
        v = w + ((s - 1.0) / s_next) * (w - w_prev)
        w_prev, s = w, s_next
        if progress is not None:
            progress(t)
    return w_prev


def averaged_accelerated_descent(
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
    iterates: list[FloatArray] | None = None,
    radius: float | None = None,
    preconditioner: FloatArray | None = None,
    refresh: Refresh | None = None,
) -> FloatArray:
    """DP-AGD's loop (same draws from ``rng``, same query points), returning the mean of
    w_{⌊T/2⌋+1} … w_T. ``trace``/``iterates``: tests only (each step's query, each w_t);
    ``radius``, ``preconditioner`` and ``refresh`` as :func:`oracle_accelerated_descent`'s."""
    total: FloatArray = np.zeros(oracle.dimension, dtype=np.float64)
    start = iterations // 2

    def keep(t: int, w: FloatArray) -> None:
        if iterates is not None:
            iterates.append(w.copy())
        if t > start:
            total[:] += w

    oracle_accelerated_descent(
        loss,
        oracle,
        step_size=step_size,
        iterations=iterations,
        noise_std=noise_std,
        rng=rng,
        sensitivity=sensitivity,
        progress=progress,
        trace=trace,
        on_iterate=keep,
        radius=radius,
        preconditioner=preconditioner,
        refresh=refresh,
    )
    out: FloatArray = total / (iterations - start)
    return out


#: ``dp_agd_averaged``'s (and ``dp_agd_centred``'s) default T: this multiple of DP-AGD's default T
#: (``dp_agd_averaged``'s docstring) …
STEP_FACTOR = 2
#: … capped at the default ``max_iterations``, a compute budget (same docstring).
STEP_CAP = 400


class AveragedStepsParams(BaseModel):
    """The step parameters of the tail-averaged optimizers (``dp_agd_averaged``,
    ``dp_agd_centred``); omitted values get the defaults."""

    model_config = ConfigDict(extra="forbid")

    iterations: int | None = Field(
        default=None,
        ge=1,
        le=FULL_GRADIENT_STEPS_CAP,
        description="Number of noisy full-gradient steps T. Default: twice dp_agd's default "
        "(its accelerated balance point), capped at max_iterations.",
    )
    step_size: float | None = Field(
        default=None, gt=0.0, allow_inf_nan=False, description="As dp_agd (default 1/β_F)."
    )
    radius: float | None = Field(
        default=None,
        gt=0.0,
        allow_inf_nan=False,
        description="As dp_agd: public guess of ‖w*‖ for the default T (default √(2·gap/l2)).",
    )
    objective_gap: float = Field(
        default=1.0,
        gt=0.0,
        allow_inf_nan=False,
        description="As dp_agd (unset: max(1, the largest loss a row can have at w = 0)).",
    )
    max_iterations: int = Field(
        default=STEP_CAP,
        ge=1,
        le=FULL_GRADIENT_STEPS_CAP,
        description="Cap on the default number of iterations (ignored if iterations is given); "
        "the default 400 is a compute budget (about diffprivlib's fit time on UCI Adult).",
    )


def plan_averaged(
    name: str, loss: Loss, n: int, d: int, target: PrivacyTarget, params: AveragedStepsParams
) -> ReleasePlan:
    """:func:`plan_accelerated` with T = ``iterations`` or STEP_FACTOR × DP-AGD's default T,
    capped at ``max_iterations``, and ``averaged_from`` = ⌊T/2⌋ + 1 recorded (the same
    refusals as DP-AGD)."""

    def accelerated(iterations: int | None) -> ReleasePlan:
        return plan_accelerated(
            name,
            loss,
            n,
            d,
            target,
            iterations=iterations,
            step_size=params.step_size,
            radius=params.radius,
            objective_gap=resolved_objective_gap(loss, params),
            max_iterations=params.max_iterations,
        )

    steps = params.iterations
    if steps is None:
        default = GradientStepsConfig.from_hyperparameters(
            accelerated(None).hyperparameters
        ).iterations
        steps = max(1, min(STEP_FACTOR * default, params.max_iterations))
    plan = accelerated(steps)
    plan.hyperparameters["averaged_from"] = steps // 2 + 1
    return plan


def plan_accelerated(
    name: str,
    loss: Loss,
    n: int,
    d: int,
    target: PrivacyTarget,
    *,
    iterations: int | None,
    step_size: float | None,
    radius: float | None,
    objective_gap: float,
    max_iterations: int,
) -> ReleasePlan:
    """The plan of T noisy accelerated full-gradient steps from public information only:
    η = ``step_size`` or 1/β_F, R = ``radius`` or √(2·gap/μ) (gap = ``objective_gap``, resolved
    by the caller with :func:`~service.models.base.resolved_objective_gap`), T = ``iterations`` or
    :func:`accelerated_iterations`; the noise is :func:`gaussian_steps_plan`'s (exact
    Gaussian DP for T steps of sensitivity 2L/n).

    Raises :class:`InfeasibleSpec` for δ = 0 or an invalid (ε, δ), a non-convex loss or one
    without finite constants ("model"), β + μ = 0 without a step size, or l2 = 0 without a
    radius or iterations ("optimizer.params.…"). ``name`` is the optimizer the messages name.
    """
    step = check_full_gradient_job(name, loss, n, d, target, step_size)
    if not loss.convex:
        raise InfeasibleSpec(
            "model",
            f"{name} needs a convex loss (acceleration has no guarantee otherwise); "
            f"{loss.name} is not convex — use dp_gd or rrpsgd",
        )
    z1 = single_release_multiplier(target.epsilon, target.delta)
    if radius is None and loss.l2 > 0.0:
        radius = math.sqrt(2.0 * objective_gap / loss.l2)
    if iterations is not None:
        steps = int(iterations)
    elif radius is not None:
        steps = accelerated_iterations(loss, n, d, z1, radius, max_iterations)
    else:
        raise InfeasibleSpec(
            "optimizer.params.radius",
            "with l2 = 0 the default number of iterations needs a public guess of ‖w*‖: "
            "give radius (or iterations), or use l2 > 0",
        )
    extra = {"radius": radius, "objective_gap": objective_gap}
    return gaussian_steps_plan(loss, n, d, target, steps, step, z1, extra)
