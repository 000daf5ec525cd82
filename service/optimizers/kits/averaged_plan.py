r"""``dp_agd_averaged``'s parameters and the shares of μ² its plan gives each release: the row
map's mean, the column scales, the curvature step (its form: eigenvalue or Gram) and the
curvature refresh — each an analyst's value or a default from public facts only (the model, n,
d, ε, δ), each refused with the field at fault where its mechanism cannot run. The mechanisms
and their proofs live in their own kits (``dp_agd_row_map``, ``column_scales``,
``curvature_step``, ``gram_step``, ``curvature_refresh``); this module only prices them.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

from pydantic import Field, field_validator

from service.models.base import Loss, parameter_count
from service.models.multinomial import MULTINOMIAL
from service.optimizers.kits.accelerated_kit import AveragedStepsParams
from service.optimizers.kits.base import InfeasibleSpec, PrivacyTarget, ReleasePlan
from service.optimizers.kits.column_scales import COLUMN_SCALE_SHARE, deviation_sensitivity
from service.optimizers.kits.config import GradientStepsConfig
from service.optimizers.kits.curvature_refresh import (
    REFRESH_SENSITIVITY,
    REFRESH_SHARE,
    REFRESH_STEP,
)
from service.optimizers.kits.curvature_step import (
    CURVATURE_MAX_WIDTH,
    CURVATURE_SHARE,
    IN_DATABASE_CURVATURE_WIDTH,
    MIN_CURVATURE_CLASSES,
    SPREAD_CONCENTRATION,
    curvature_pays,
)
from service.optimizers.kits.dp_agd_row_map import (
    ROW_MAP_SHARE,
    mean_sensitivity,
    mean_then_steps,
)
from service.optimizers.kits.gram_step import GRAM_STEPS, gram_pays, scales_at_zero
from service.optimizers.kits.limits import FULL_GRADIENT_STEPS_CAP

__all__ = [
    "MIN_SHARE",
    "DPAGDAveragedParams",
    "resolved_column_scale_share",
    "resolved_curvature_share",
    "resolved_refresh_share",
    "resolved_row_map_share",
    "with_curvature_form",
    "with_row_map",
]

#: The smallest non-zero share of μ² a release of the row map or the curvature step may take.
MIN_SHARE = 1e-6


class DPAGDAveragedParams(AveragedStepsParams):
    """Hyper-parameters of ``dp_agd_averaged``; omitted values get the defaults."""

    row_map_share: float | None = Field(
        default=None,
        ge=0.0,
        lt=1.0,
        allow_inf_nan=False,
        description="Share f of the job's μ² spent on a private mean row; the steps then run "
        "on the rows centred at it and scaled to unit norm, and the released model is folded "
        "back (0: no row map). Default: 0.1 for a logistic model (multinomial or binary) with "
        "an intercept and no l1, 0 otherwise (service/optimizers/kits/dp_agd_row_map.py).",
    )
    curvature_share: float | None = Field(
        default=None,
        ge=0.0,
        lt=0.5,
        allow_inf_nan=False,
        description="Share c of the job's μ² spent on a private top eigenvalue of the mapped "
        "rows' second moment, from which the steps take a larger step and fewer steps at the "
        "same total noise (0: the public step and T). Needs the row map and l2 > 0. Default: "
        f"{CURVATURE_SHARE} for a joint multinomial model of 3 or more classes with the row "
        "map, l2 > 0, rows of "
        f"width ≤ {CURVATURE_MAX_WIDTH} (≤ {IN_DATABASE_CURVATURE_WIDTH} on a dataset fitted "
        "in its database) and neither iterations nor step_size set; 0 otherwise "
        "(service/optimizers/kits/curvature_step.py).",
    )
    curvature_form: Literal["eigenvalue", "gram"] | None = Field(
        default=None,
        description="What the curvature share releases: 'eigenvalue' (the top eigenvalue: one "
        "step size, fewer steps) or 'gram' (the whole Gram matrix of the mapped rows: a "
        "preconditioner and min(T, 32) steps; needs l1 = 0 and rows of width ≤ "
        f"{CURVATURE_MAX_WIDTH}). Default: 'gram' where the noise's spectral edge over n is at "
        "most 1/width (many rows) and rows are at most 32 wide, 'eigenvalue' otherwise "
        "(service/optimizers/kits/gram_step.py).",
    )
    spread_iterations: int | None = Field(
        default=None,
        ge=1,
        le=FULL_GRADIENT_STEPS_CAP,
        description="Steps T_s to run instead of T when the curvature step's released top "
        "eigenvalue shows the mapped rows spread evenly over their width (λ⁺·width ≤ "
        f"{SPREAD_CONCENTRATION:g}); T_s is then scaled by the curvature as T is. Used by the "
        "'eigenvalue' form only (the 'gram' form runs min(T, 32) steps) and only when below "
        "T. Default: none; auto sets it to the T of the joint l2 before its many-rows ceiling "
        '(service/optimizers/kits/joint_rule.py, "Spread rows").',
    )

    column_scale_share: float | None = Field(
        default=None,
        ge=0.0,
        lt=0.5,
        allow_inf_nan=False,
        description="Share of the job's μ² spent on the centred columns' private mean absolute "
        "deviations; each column is then brought to their common spread before the rows are "
        "scaled to unit norm, and the model folded back (0: no column scales). Needs the row "
        f"map. Default: {COLUMN_SCALE_SHARE} where the curvature step runs in the Gram form, 0 "
        "otherwise (service/optimizers/kits/column_scales.py).",
    )

    curvature_refresh_share: float | None = Field(
        default=None,
        ge=0.0,
        lt=0.5,
        allow_inf_nan=False,
        description="Share of the job's μ² spent, after step "
        f"{REFRESH_STEP} of the Gram form's steps, on each class's private Hessian block in the "
        "preconditioner's basis; the remaining steps then take one preconditioner per "
        "class (0: none). Needs curvature_form 'gram' and more than "
        f"{REFRESH_STEP} steps. Default: {REFRESH_SHARE} where the Gram form scales by the "
        "curvature at w = 0 (its noise's spectral edge at most a third of the rows' average "
        "eigenvalue), 0 otherwise (service/optimizers/kits/curvature_refresh.py).",
    )

    @field_validator(
        "row_map_share", "curvature_share", "column_scale_share", "curvature_refresh_share"
    )
    @classmethod
    def _share_is_zero_or_usable(cls, value: float | None) -> float | None:
        """A share is 0 or at least MIN_SHARE: below it the release's noise multiplier
        1/(μ√share) exceeds 1000/μ (useless) and, at ε near its floor, the secure sampler's
        integer variance no longer fits a float — a job that would fail after its charge."""
        if value is not None and 0.0 < value < MIN_SHARE:
            raise ValueError(f"a share must be 0 or at least {MIN_SHARE:g}")
        return value


def resolved_row_map_share(params: DPAGDAveragedParams, loss: Loss) -> float:
    """The row map's share: the analyst's, else ROW_MAP_SHARE for a logistic model (joint
    multinomial or binary) with an intercept and 0 otherwise (public: the model only).
    InfeasibleSpec on ``optimizer.params.row_map_share`` for a share > 0 on rows without an
    intercept column."""
    has_intercept = bool(getattr(loss, "fit_intercept", False))
    if params.row_map_share is None:
        return ROW_MAP_SHARE if has_intercept and loss.l1 == 0.0 else 0.0
    if params.row_map_share > 0.0 and not has_intercept:
        raise InfeasibleSpec(
            "optimizer.params.row_map_share",
            "the row map centres rows on their intercept column: it needs a logistic model "
            "with fit_intercept (use row_map_share = 0)",
        )
    return float(params.row_map_share)


def resolved_curvature_share(
    params: DPAGDAveragedParams,
    loss: Loss,
    row_map_share: float,
    n: int,
    d: int,
    target: PrivacyTarget,
) -> float:
    """The curvature step's share: the analyst's, else CURVATURE_SHARE for a joint multinomial
    model of K ≥ MIN_CURVATURE_CLASSES classes with the row map (``row_map_share`` > 0),
    l2 > 0, rows of width d/K ≤ CURVATURE_MAX_WIDTH, neither ``iterations`` nor ``step_size``
    set, and n large enough that the release can shorten the steps at all
    (:func:`~service.optimizers.kits.curvature_step.curvature_pays`); 0 otherwise (public facts
    only). InfeasibleSpec on ``optimizer.params.curvature_share`` for a share > 0 without the
    row map or with l2 = 0 (the projection's ball needs it)."""
    if params.curvature_share is None:
        classes = int(getattr(loss, "classes", 0))
        joint = getattr(loss, "name", "") == MULTINOMIAL and classes >= MIN_CURVATURE_CLASSES
        default = (
            joint
            and row_map_share > 0.0
            and loss.l2 > 0.0
            and d // classes <= CURVATURE_MAX_WIDTH
            and params.iterations is None
            and params.step_size is None
            and curvature_pays(n, CURVATURE_SHARE, target)
        )
        return CURVATURE_SHARE if default else 0.0
    share = float(params.curvature_share)
    if share > 0.0 and (row_map_share == 0.0 or not loss.l2 > 0.0):
        raise InfeasibleSpec(
            "optimizer.params.curvature_share",
            "the curvature step runs on the row map's rows and projects onto the ball l2 > 0 "
            "bounds: it needs row_map_share > 0 and l2 > 0 (use curvature_share = 0)",
        )
    if share > 0.0 and share + row_map_share >= 1.0:
        raise InfeasibleSpec(
            "optimizer.params.curvature_share",
            "row_map_share + curvature_share must be below 1: the steps need a share of μ²",
        )
    return share


def with_curvature_form(plan: ReleasePlan, params: DPAGDAveragedParams, loss: Loss) -> ReleasePlan:
    """The plan with ``curvature_form``: the analyst's, else "gram" where
    :func:`~service.optimizers.kits.gram_step.gram_pays` holds (public n, row width and z_c),
    l1 = 0 and the width is at most CURVATURE_MAX_WIDTH, "eigenvalue" otherwise; a Gram-form
    plan's ``total_steps`` is the min(T, GRAM_STEPS) steps it runs (its event keeps T at z:
    the same RDP curve, gram_step's (b)). InfeasibleSpec
    on ``optimizer.params.curvature_form`` for a form without a curvature share, and for "gram"
    with l1 > 0 or wider rows."""
    hyper = dict(plan.hyperparameters)
    field = "optimizer.params.curvature_form"
    if float(hyper.get("curvature_share", 0.0)) == 0.0:
        if params.curvature_form is not None:
            raise InfeasibleSpec(field, "a curvature form needs a curvature_share > 0")
        return plan
    n, z_c = int(hyper["n"]), float(hyper["curvature_noise_std"])
    width = int(hyper["d"]) // parameter_count(loss, 1)
    fits = loss.l1 == 0.0 and width <= CURVATURE_MAX_WIDTH
    if params.curvature_form == "gram" and not fits:
        raise InfeasibleSpec(
            field,
            f"the Gram form needs l1 = 0 and rows of width ≤ {CURVATURE_MAX_WIDTH} "
            "(use curvature_form = 'eigenvalue')",
        )
    form = params.curvature_form or ("gram" if fits and gram_pays(n, width, z_c) else "eigenvalue")
    hyper["curvature_form"] = form
    if form == "eigenvalue":  # T' ≤ T follows from a release: progress counts out of T
        spread = params.spread_iterations
        if spread is not None and spread < int(hyper["iterations"]):
            hyper["spread_iterations"] = int(spread)
        return replace(plan, hyperparameters=hyper)
    # the Gram form's count is public: the job's progress (and its estimate) count its steps
    return replace(plan, hyperparameters=hyper, total_steps=min(plan.total_steps, GRAM_STEPS))


def resolved_column_scale_share(params: DPAGDAveragedParams, planned: ReleasePlan) -> float:
    """The column scales' share: the analyst's, else COLUMN_SCALE_SHARE where ``planned`` (the
    plan without them) has the row map and its curvature step runs in the Gram form, 0
    otherwise (public facts only: the plan's). InfeasibleSpec on
    ``optimizer.params.column_scale_share`` for a share > 0 without the row map or one that
    leaves the steps no share of μ²."""
    hyper = planned.hyperparameters
    row_map_share = float(hyper.get("row_map_share", 0.0))
    if params.column_scale_share is None:
        gram = hyper.get("curvature_form") == "gram"
        return COLUMN_SCALE_SHARE if gram and row_map_share > 0.0 else 0.0
    share = float(params.column_scale_share)
    field = "optimizer.params.column_scale_share"
    if share > 0.0 and row_map_share == 0.0:
        raise InfeasibleSpec(field, "column scales scale the row map's rows: they need it")
    if share > 0.0 and share + row_map_share + float(hyper.get("curvature_share", 0.0)) >= 1.0:
        raise InfeasibleSpec(
            field,
            "row_map_share + curvature_share + column_scale_share must be below 1: the steps "
            "need a share of μ²",
        )
    return share


def resolved_refresh_share(params: DPAGDAveragedParams, planned: ReleasePlan, loss: Loss) -> float:
    """The curvature refresh's share: the analyst's, else REFRESH_SHARE where ``planned`` (the
    plan without it) runs a joint multinomial model's Gram form scaled by the curvature at w = 0
    (:func:`~service.optimizers.kits.gram_step.scales_at_zero`: public n, width and z_c) with
    more than REFRESH_STEP steps, 0 otherwise. InfeasibleSpec on
    ``optimizer.params.curvature_refresh_share`` for a share > 0 without the Gram form or its
    steps past t_r or for another model, or one that leaves the steps no share of μ²."""
    hyper = planned.hyperparameters
    joint = getattr(loss, "name", "") == MULTINOMIAL
    gram = joint and hyper.get("curvature_form") == "gram"
    long_enough = planned.total_steps > REFRESH_STEP
    if params.curvature_refresh_share is None:
        if not (gram and long_enough):
            return 0.0
        n, z_c = int(hyper["n"]), float(hyper["curvature_noise_std"])
        width = int(hyper["d"]) // parameter_count(loss, 1)
        return REFRESH_SHARE if scales_at_zero(n, width, z_c) else 0.0
    share = float(params.curvature_refresh_share)
    field = "optimizer.params.curvature_refresh_share"
    if share > 0.0 and not (gram and long_enough):
        raise InfeasibleSpec(
            field,
            "the curvature refresh preconditions a multinomial model's Gram-form steps after "
            f"step {REFRESH_STEP}: it needs curvature_form 'gram' and more than "
            f"{REFRESH_STEP} steps (use curvature_refresh_share = 0)",
        )
    spent = sum(
        float(hyper.get(key, 0.0))
        for key in ("row_map_share", "curvature_share", "column_scale_share")
    )
    if share > 0.0 and share + spent >= 1.0:
        raise InfeasibleSpec(
            field, "the shares of μ² must add up to below 1: the steps need a share of μ²"
        )
    return share


def with_row_map(
    plan: ReleasePlan,
    share: float,
    target: PrivacyTarget,
    curvature_share: float = 0.0,
    scale_share: float = 0.0,
    refresh_share: float = 0.0,
) -> ReleasePlan:
    """The plan with a share of μ² moved to the mean row's release (dp_agd_row_map, (c)), with
    ``curvature_share`` > 0 another to the curvature release (curvature_step, (b)), with
    ``scale_share`` > 0 another to the column scales' (column_scales, (c)) and with
    ``refresh_share`` > 0 another to the curvature refresh (curvature_refresh, (b))."""
    if share == 0.0:
        return plan
    config = GradientStepsConfig.from_hyperparameters(plan.hyperparameters)
    z = mean_then_steps(
        config.iterations, share, target, curvature_share, scale_share, refresh_share
    )
    hyper = dict(plan.hyperparameters)
    hyper.update(
        {
            "noise_multiplier": z.steps,
            "row_map_share": share,
            "mean_noise_multiplier": z.mean,
            "mean_noise_std": z.mean * mean_sensitivity(config.n),
        }
    )
    if curvature_share > 0.0:
        hyper.update({"curvature_share": curvature_share, "curvature_noise_std": z.curvature})
    if scale_share > 0.0:
        hyper.update(
            {
                "column_scale_share": scale_share,
                "column_scale_noise_std": z.scales * deviation_sensitivity(config.n),
            }
        )
    if refresh_share > 0.0:
        hyper.update(
            {
                "curvature_refresh_share": refresh_share,
                "curvature_refresh_noise_std": z.refresh * REFRESH_SENSITIVITY,
                "curvature_refresh_step": REFRESH_STEP,
            }
        )
    return ReleasePlan(
        mechanism=plan.mechanism,
        sensitivity=plan.sensitivity,
        noise_scale=z.steps * plan.sensitivity,
        event=z.event,
        total_steps=plan.total_steps,
        hyperparameters=hyper,
    )
