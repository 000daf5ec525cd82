"""From a job spec to a release plan, using public information only.

This is what the API calls before admission: it validates the optimizer's parameters, lets the
optimizer resolve its defaults and calibrate its noise for the public ``n`` and dimension, and
serialises the plan so a worker can run exactly what the ledger charged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from service.ledger.accounting import event_from_json, event_to_json
from service.models.base import Loss
from service.models.registry import ModelSpec, build_loss
from service.optimizers.base import (
    InfeasibleSpec,
    Optimizer,
    PrivacyTarget,
    ReleasePlan,
    as_mechanism,
)
from service.optimizers.one_vs_rest import plan_one_vs_rest
from service.optimizers.registry import get_optimizer

__all__ = ["JobPlan", "model_dimension", "plan_from_json", "plan_job", "plan_to_json"]


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
) -> JobPlan:
    """Resolve and calibrate a job; raises :class:`InfeasibleSpec` naming the field at fault.

    With ``classes`` (a categorical label) the job is one-vs-rest over that many classes, the
    budget composed across them (optimizers/one_vs_rest.py).
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
    loss = build_loss(model)
    dimension = model_dimension(model, n_features)
    if classes is None:
        plan = optimizer.plan(params, loss, n, dimension, target)
    else:
        plan, _ = plan_one_vs_rest(optimizer, params, loss, n, dimension, target, classes)
    return JobPlan(loss=loss, optimizer=optimizer, params=params, plan=plan, dimension=dimension)


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
