"""Multiclass classification by one-vs-rest, with the budget composed across the classes.

For K declared (public) classes, the job fits K binary problems on the same rows — class k
against the rest — each with the chosen optimizer, and releases the K noised weight vectors.

Privacy. Replacing one row replaces one row of *every* binary problem (its features, and its
±1 label in each), so each of the K releases is a mechanism on a replace-one neighbour with the
optimizer's own guarantee, and the job is their adaptive composition: its event is
``SelfComposedDpEvent(class_event, K)`` and the ledger charges K times the class curve.

Calibration. For δ = 0 each class gets ε/K (basic composition; the charge is the K-fold
randomized-response curve, never more than ε). For δ > 0 each class is planned at (ε_c, δ/K)
and ε_c is the largest value (bisection) for which the RDP accountant certifies the K-fold
composition at (ε, δ) — for Gaussian releases this is exactly one Gaussian with sensitivity
Δ·√K, the tightest possible, instead of the ε/K a naive split would give. Gaussian-family
classes (exact μ) are first planned directly at the ε_c whose μ_c = μ*/√K (μ* exact for
(ε, δ)), so K classes compose to exactly μ*; the check is then the exact GDP one, the same
accounting the ledger charges.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from dp_accounting import dp_event
from pydantic import BaseModel

from service.models.base import Loss
from service.models.multinomial import JOINT_OPTIMIZERS, NORM_CLIP_OPTIMIZERS
from service.models.registry import is_joint_multiclass
from service.optimizers.kits.base import InfeasibleSpec, Optimizer, PrivacyTarget, ReleasePlan
from service.privacy.calibration import event_epsilon
from service.privacy.gdp import event_mu, gdp_delta, gdp_epsilon, gdp_mu

__all__ = ["BISECTION_STEPS", "check_multiclass_model", "class_plan_of", "plan_one_vs_rest"]

BISECTION_STEPS = 12


def check_multiclass_model(loss: Loss, optimizer: str, classes: int | None) -> bool:
    """Whether the job is one joint multiclass fit (True) rather than one-vs-rest or a binary
    or regression fit (False). A joint model (``multinomial_logistic_regression``) needs a
    categorical label and one of the optimizers whose proof carries to it
    (``JOINT_OPTIMIZERS``; ``NORM_CLIP_OPTIMIZERS`` when its ``gradient_norm_clip`` binds);
    otherwise :class:`InfeasibleSpec` on ``model``. Public facts only."""
    if not is_joint_multiclass(loss):
        return False
    if classes is None:
        raise InfeasibleSpec(
            "model",
            f"{loss.name} needs a categorical label (its declared classes); this dataset's "
            "label is not categorical — use logistic_regression for a binary label",
        )
    if optimizer not in JOINT_OPTIMIZERS and optimizer != "auto":
        raise InfeasibleSpec(
            "model",
            f"{optimizer} does not support {loss.name} (its proof covers one weight vector); "
            f"use one of {', '.join(sorted(JOINT_OPTIMIZERS))}, or logistic_regression "
            "(one-vs-rest) with this optimizer",
        )
    exact = getattr(loss, "exact_gradient", True)
    if not exact and optimizer not in NORM_CLIP_OPTIMIZERS and optimizer != "auto":
        raise InfeasibleSpec(
            "model",
            f"{optimizer} needs the exact gradient of a convex loss, and a gradient_norm_clip "
            "below √2·gradient_clip makes the steps follow a clipped field; use one of "
            f"{', '.join(sorted(NORM_CLIP_OPTIMIZERS))}, or leave gradient_norm_clip unset",
        )
    return True


def plan_one_vs_rest(
    optimizer: Optimizer,
    params: BaseModel,
    loss: Loss,
    n: int,
    d: int,
    target: PrivacyTarget,
    classes: int,
) -> tuple[ReleasePlan, ReleasePlan]:
    """(job plan, per-class plan) for ``classes`` one-vs-rest problems at a total ``target``."""
    if classes < 2:
        raise InfeasibleSpec("label", "a categorical label needs at least two classes")
    try:
        if target.delta == 0.0:
            class_plan = optimizer.plan(
                params, loss, n, d, PrivacyTarget(target.epsilon / classes, 0.0)
            )
        else:
            class_plan = _largest_feasible(optimizer, params, loss, n, d, target, classes)
    except InfeasibleSpec as exc:
        # The optimizer saw one class's share of the budget: say so, or its message quotes an
        # ε the analyst never sent.
        raise InfeasibleSpec(
            exc.field,
            f"{exc.message} (one-vs-rest: each of the {classes} classes is planned at a "
            f"share of the job's ε = {target.epsilon:g}, δ = {target.delta:g})",
        ) from None
    if class_plan.parallel_events:
        raise InfeasibleSpec(
            "optimizer.name", "private tuning is not available for multiclass labels yet"
        )
    job_plan = replace(
        class_plan,
        event=dp_event.SelfComposedDpEvent(class_plan.event, classes),
        total_steps=classes * class_plan.total_steps,
        hyperparameters={
            "one_vs_rest": {"classes": classes, "class_total_steps": class_plan.total_steps},
            **class_plan.hyperparameters,
        },
    )
    return job_plan, class_plan


def _largest_feasible(
    optimizer: Optimizer,
    params: BaseModel,
    loss: Loss,
    n: int,
    d: int,
    target: PrivacyTarget,
    classes: int,
) -> ReleasePlan:
    delta_c = target.delta / classes

    def plan_at(eps_c: float) -> tuple[ReleasePlan, bool]:
        plan = optimizer.plan(params, loss, n, d, PrivacyTarget(eps_c, delta_c))
        composed = dp_event.SelfComposedDpEvent(plan.event, classes)
        mu = event_mu(composed)
        if mu is not None:  # Gaussian-family: exact, and the μ the ledger charges
            return plan, gdp_delta(target.epsilon, mu) <= target.delta
        return plan, event_epsilon(composed, target.delta) <= target.epsilon

    # Gaussian-family classes calibrated exactly: K classes of μ*/√K compose to exactly μ*.
    exact_c = gdp_epsilon(gdp_mu(target.epsilon, target.delta) / classes**0.5, delta_c)
    if exact_c > 0.0:
        plan, ok = plan_at(exact_c)
        if ok and event_mu(plan.event) is not None:
            return plan
    low, high = target.epsilon / classes, target.epsilon
    best, ok = plan_at(low)
    while not ok:
        low /= 2
        if low < 1e-6 * target.epsilon:
            raise InfeasibleSpec("privacy.epsilon", "no per-class budget meets the target")
        best, ok = plan_at(low)
    for _ in range(BISECTION_STEPS):
        mid = (low + high) / 2
        plan, ok = plan_at(mid)
        if ok:
            low, best = mid, plan
        else:
            high = mid
    return best


def class_plan_of(job_plan: ReleasePlan) -> ReleasePlan | None:
    """The per-class plan inside a one-vs-rest job plan (None for a binary job)."""
    ovr: dict[str, Any] | None = job_plan.hyperparameters.get("one_vs_rest")
    if not ovr:
        return None
    assert isinstance(job_plan.event, dp_event.SelfComposedDpEvent)
    hyper = {k: v for k, v in job_plan.hyperparameters.items() if k != "one_vs_rest"}
    return replace(
        job_plan,
        event=job_plan.event.event,
        total_steps=int(ovr["class_total_steps"]),
        hyperparameters=hyper,
    )
