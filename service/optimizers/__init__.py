"""Private optimizers: what a notebook user imports.

    from service.optimizers import PrivacyTarget, get_optimizer, plan_job, optimizer_names

    optimizer = get_optimizer("dp_gd")
    params = optimizer.Params.model_validate({"iterations": 200})
    plan = optimizer.plan(params, loss, n, d, PrivacyTarget(1.0, 1e-6))  # public inputs only
    w = optimizer.fit(plan, loss, X, y, SecureRandom(), lambda step: None)  # OS CSPRNG bits

(``SecureRandom`` from :mod:`service.privacy.secure_random`; every release is exact.)

Everything in ``__all__`` is the supported surface; the algorithm modules (``dp_gd``, …) and the
kits they share (``gradient_kit``, ``accelerated_kit``, ``svrg_common``, ``sgd_common``,
``full_gradient``, ``limits``) are importable for tests and research but may change between
releases. A plan's JSON (:func:`plan_to_json`) is stored and re-run by later releases under the
compatibility rules of docs/adding-an-optimizer.md.
"""

from __future__ import annotations

from service.optimizers.kits.base import (
    MECHANISMS,
    InfeasibleSpec,
    JobCancelled,
    Mechanism,
    Optimizer,
    PrivacyTarget,
    ProgressCallback,
    ReleasePlan,
)
from service.optimizers.kits.limits import FULL_GRADIENT_STEPS_CAP, PASSES_CAP, SAMPLED_STEPS_CAP
from service.optimizers.kits.planning import JobPlan, plan_from_json, plan_job, plan_to_json
from service.optimizers.kits.registry import catalog, get_optimizer, optimizer_names

__all__ = [
    "FULL_GRADIENT_STEPS_CAP",
    "MECHANISMS",
    "PASSES_CAP",
    "SAMPLED_STEPS_CAP",
    "InfeasibleSpec",
    "JobCancelled",
    "JobPlan",
    "Mechanism",
    "Optimizer",
    "PrivacyTarget",
    "ProgressCallback",
    "ReleasePlan",
    "catalog",
    "get_optimizer",
    "optimizer_names",
    "plan_from_json",
    "plan_job",
    "plan_to_json",
]
