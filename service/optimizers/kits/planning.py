"""From a job spec to a release plan, using public information only.

This is what the API calls before admission: it validates the optimizer's parameters, lets the
optimizer resolve its defaults and calibrate its noise for the public ``n`` and dimension, and
serialises the plan so a worker can run exactly what the ledger charged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from service.ledger.accounting import event_from_json, event_to_json
from service.models.base import Loss, parameter_count
from service.models.registry import ModelSpec, build_loss
from service.optimizers.kits.base import (
    InfeasibleSpec,
    Optimizer,
    PrivacyTarget,
    ReleasePlan,
    as_mechanism,
)
from service.optimizers.kits.column_scales import with_one_hot_columns
from service.optimizers.kits.limits import SAFE_MAGNITUDE, WEIGHTS_CAP, first_non_finite
from service.optimizers.kits.one_vs_rest import check_multiclass_model, plan_one_vs_rest
from service.optimizers.kits.registry import get_optimizer

__all__ = [
    "JobPlan",
    "check_loss_magnitudes",
    "check_plan_finite",
    "check_plan_magnitudes",
    "check_weight_count",
    "field_at_fault",
    "model_dimension",
    "model_field_at_fault",
    "plan_from_json",
    "plan_job",
    "plan_to_json",
]


@dataclass(frozen=True)
class JobPlan:
    loss: Loss
    optimizer: Optimizer
    params: BaseModel
    plan: ReleasePlan
    dimension: int


def model_dimension(model: ModelSpec, n_features: int) -> int:
    """Columns of the encoded matrix: the features plus the intercept column if fitted."""
    return n_features + (1 if getattr(model, "fit_intercept", False) else 0)


def plan_job(
    model: ModelSpec,
    optimizer_name: str,
    raw_params: dict[str, Any],
    n: int,
    n_features: int,
    target: PrivacyTarget,
    classes: int | None = None,
    one_hot_columns: tuple[int, ...] = (),
) -> JobPlan:
    """Resolve and calibrate a job; raises :class:`InfeasibleSpec` naming the field at fault.

    With ``classes`` (a categorical label) the job is one-vs-rest over that many classes, the
    budget composed across them (optimizers/kits/one_vs_rest.py) — or, for a joint multiclass model,
    one plan over its K·d parameters (``check_multiclass_model``). ``one_hot_columns``: the
    schema's one-hot feature columns (public), recorded where the plan's column scales run
    (``kits/column_scales.py``, "One-hot columns").
    """
    try:
        optimizer = get_optimizer(optimizer_name)
    except KeyError:
        raise InfeasibleSpec(
            "optimizer.name",
            f"unknown optimizer {optimizer_name!r}; GET /v1/optimizers lists the catalog",
        ) from None
    try:
        params = optimizer.Params.model_validate(raw_params, strict=True)  # JSON types as sent
    except ValidationError as exc:
        first = exc.errors()[0]
        path = ".".join(str(p) for p in first.get("loc", ()))
        field = "optimizer.params" + (f".{path}" if path else "")
        raise InfeasibleSpec(field, f"{field}: {first.get('msg', 'invalid')}") from None
    loss = build_loss(model, classes)
    dimension = model_dimension(model, n_features)
    check_weight_count(dimension, classes)
    check_loss_magnitudes(model, loss)
    joint = check_multiclass_model(loss, optimizer.name, classes)
    try:
        if joint:  # one release of K·d parameters (service/models/multinomial.py)
            plan = optimizer.plan(params, loss, n, parameter_count(loss, dimension), target)
        elif classes is None:
            plan = optimizer.plan(params, loss, n, dimension, target)
        else:
            plan, _ = plan_one_vs_rest(optimizer, params, loss, n, dimension, target, classes)
    except ArithmeticError:  # OverflowError, ZeroDivisionError: never a 500, never a charge
        raise InfeasibleSpec(
            field_at_fault(model, params),
            "the plan's arithmetic overflows for these values; choose smaller model constants "
            "or optimizer parameters",
        ) from None
    check_plan_magnitudes(model, params, plan)
    plan = with_one_hot_columns(plan, one_hot_columns)
    check_plan_finite(model, params, plan)
    return JobPlan(loss=loss, optimizer=optimizer, params=params, plan=plan, dimension=dimension)


def check_weight_count(dimension: int, classes: int | None) -> None:
    """Refuse (422 on ``model``) a released model of more than :data:`WEIGHTS_CAP` weights:
    ``dimension`` encoded columns, times ``classes`` for a categorical label (public: the
    schema's)."""
    weights = dimension * (classes or 1)
    if weights > WEIGHTS_CAP:
        per_class = f"{classes:,} classes × " if classes else ""
        raise InfeasibleSpec(
            "model",
            f"this dataset's schema makes a model of {weights:,} weights ({per_class}"
            f"{dimension:,} encoded columns), more than the {WEIGHTS_CAP:,} one job may fit and "
            "release; register a narrower schema (fewer features or categories, or classes)",
        )


# --- the numeric guard: a plan whose fit cannot stay finite is refused at planning ------------
#
# Public and data-independent: the model spec, the loss's constants and the plan's quantities.
# Every quantity a fit multiplies, squares or sums — the Lipschitz constant L, the smoothness
# β + μ, the declared label bound B, the sensitivity, the noise scale and the step — must be a
# finite number within SAFE_MAGNITUDE (limits.py); sensitivity and noise scale must be > 0.
# So estimate and submission refuse such a spec (422 on the field at fault) before any charge,
# instead of a job that fails for certain with its charge standing, or releases NaN.


def model_field_at_fault(model: ModelSpec) -> str:
    """The model spec's number furthest from unit scale (non-zero floats, in orders of
    magnitude) as ``model.<type>.<field>`` — the one that makes a constant overflow — or
    ``model`` when the spec has none."""
    return _model_field(model, _worst_model_number(model)[1])


def _model_field(model: ModelSpec, name: str | None) -> str:
    kind = getattr(model, "type", None)
    return "model" if name is None or kind is None else f"model.{kind}.{name}"


def _orders(value: float) -> float:
    """Orders of magnitude of a non-zero number from 1 (∞ for a non-finite one)."""
    return math.inf if not math.isfinite(value) else abs(math.log10(abs(value)))


def _worst_model_number(model: ModelSpec) -> tuple[float, str | None]:
    """(orders of magnitude from 1, name) of the model spec's non-zero float furthest from
    unit scale; (-1, None) when it has none."""
    worst, field = -1.0, None
    for name, value in model:
        if isinstance(value, bool) or not isinstance(value, float) or value == 0.0:
            continue
        if _orders(value) > worst:
            worst, field = _orders(value), name
    return worst, field


def _within(value: float) -> bool:
    return math.isfinite(value) and abs(value) <= SAFE_MAGNITUDE


def check_loss_magnitudes(model: ModelSpec, loss: Loss) -> None:
    """L, β + μ and the label bound B (regression) are finite and within SAFE_MAGNITUDE, so
    sensitivities (2L/n), gradient steps and squared residuals (B², L²) cannot overflow."""
    constants = {
        "Lipschitz constant L": loss.lipschitz,
        "smoothness β + μ": loss.smoothness + loss.l2,
    }
    label_bound = getattr(loss, "label_bound", None)
    if getattr(loss, "task", None) == "regression" and label_bound is not None:
        constants["label bound B"] = float(label_bound)
    for what, value in constants.items():
        if not _within(value):
            raise InfeasibleSpec(
                model_field_at_fault(model),
                f"{loss.name}: the {what} of this spec is not a finite number within "
                f"{SAFE_MAGNITUDE:g}, so the fit's arithmetic would overflow; choose a smaller "
                "value",
            )


def check_plan_magnitudes(model: ModelSpec, params: BaseModel, plan: ReleasePlan) -> None:
    """The plan's sensitivity and noise scale are finite, > 0 and within SAFE_MAGNITUDE, and its
    step size (if it has one) is a finite number within it."""
    step = plan.hyperparameters.get("step_size")
    if isinstance(step, float | int) and not isinstance(step, bool) and not _within(float(step)):
        given = getattr(params, "step_size", None) is not None
        raise InfeasibleSpec(
            "optimizer.params.step_size" if given else model_field_at_fault(model),
            f"the plan's step size is not a finite number within {SAFE_MAGNITUDE:g}",
        )
    for what, value in (("sensitivity", plan.sensitivity), ("noise scale", plan.noise_scale)):
        if not (_within(value) and value > 0.0):
            raise InfeasibleSpec(
                model_field_at_fault(model),
                f"the plan's {what} is not a finite number in (0, {SAFE_MAGNITUDE:g}]: the "
                "model's constants are too large (or ε too small) for a finite fit",
            )


def check_plan_finite(model: ModelSpec, params: BaseModel, plan: ReleasePlan) -> None:
    """Every number of the plan as it will be stored (hyperparameters, events, nested
    candidates' plans) is finite: a quantity derived from the spec that overflowed (a default
    radius √(2·gap/μ) from an objective_gap near float64's maximum, a drift threshold from an
    initial_gap) is refused here, at pricing, on the parameter that caused it
    (:func:`field_at_fault`), never stored as ``Infinity`` nor charged."""
    path = first_non_finite(plan_to_json(plan))
    if path is None:
        return
    field = field_at_fault(model, params, path)
    if field == "model":  # no number given anywhere: the optimizer's own plan overflowed
        field = "optimizer.params"
    where = ".".join(str(p) for p in path)
    raise InfeasibleSpec(
        field,
        f"the plan derived from {field} overflows ({where} is not a finite number), so the "
        "job could not run; choose a smaller value",
    )


def field_at_fault(model: ModelSpec, params: BaseModel, path: tuple[str | int, ...] = ()) -> str:
    """The field of the spec that most likely made the plan overflow: the parameter the
    analyst gave that the plan's ``path`` names (``optimizer.params.candidates.<i>`` for a
    candidate's own plan), else the number furthest from unit scale (orders of magnitude)
    among the parameters given and the model spec's (:func:`model_field_at_fault`)."""
    given = set(getattr(params, "model_fields_set", ()) or ())
    head = path[1] if len(path) > 1 and path[0] == "hyperparameters" else None
    if isinstance(head, str) and head in given:
        index = path[2] if len(path) > 2 and isinstance(path[2], int) else None
        return f"optimizer.params.{head}" + (f".{index}" if index is not None else "")
    worst, worst_name = _worst_model_number(model)
    field = _model_field(model, worst_name)
    for name in sorted(given):
        value = getattr(params, name, None)
        if isinstance(value, bool) or not isinstance(value, int | float) or value == 0:
            continue
        if _orders(value) > worst:
            worst, field = _orders(value), f"optimizer.params.{name}"
    return field


def plan_to_json(plan: ReleasePlan) -> dict[str, Any]:
    return {
        "mechanism": plan.mechanism,
        "sensitivity": plan.sensitivity,
        "noise_scale": plan.noise_scale,
        "total_steps": plan.total_steps,
        "hyperparameters": dict(plan.hyperparameters),
        "event": event_to_json(plan.event),
        "parallel_events": [event_to_json(e) for e in plan.parallel_events],
    }


def plan_from_json(payload: dict[str, Any]) -> ReleasePlan:
    return ReleasePlan(
        mechanism=as_mechanism(str(payload["mechanism"])),
        sensitivity=float(payload["sensitivity"]),
        noise_scale=float(payload["noise_scale"]),
        event=event_from_json(payload["event"]),
        total_steps=int(payload["total_steps"]),
        hyperparameters=dict(payload.get("hyperparameters", {})),
        parallel_events=tuple(event_from_json(e) for e in payload.get("parallel_events", [])),
    )
