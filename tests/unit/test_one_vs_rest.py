"""One-vs-rest multiclass: the budget composes across classes, tightly for Gaussian releases."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from dp_accounting import dp_event

from service.data.encoding import encode_one_vs_rest
from service.data.spec import LabelSpec
from service.models.logistic import LogisticLoss
from service.optimizers.kits.base import PrivacyTarget
from service.optimizers.kits.one_vs_rest import class_plan_of, plan_one_vs_rest
from service.optimizers.kits.planning import plan_from_json, plan_to_json
from service.optimizers.output_perturbation_gd import OutputPerturbationGD
from service.privacy.analytic_gaussian import analytic_gaussian_sigma
from service.privacy.calibration import event_epsilon
from service.privacy.gdp import event_mu, gdp_delta, gdp_epsilon


def plan(target: PrivacyTarget, classes: int = 4):
    optimizer = OutputPerturbationGD()
    params = optimizer.Params(iterations=50)
    return plan_one_vs_rest(optimizer, params, LogisticLoss(l2=0.01), 2000, 10, target, classes)


def test_gaussian_classes_compose_to_the_target_and_beat_a_naive_split() -> None:
    target = PrivacyTarget(1.0, 1e-6)
    job, per_class = plan(target)
    assert isinstance(job.event, dp_event.SelfComposedDpEvent) and job.event.count == 4
    mu = event_mu(job.event)  # Gaussian classes: exact GDP, the μ the ledger charges
    assert mu is not None and gdp_delta(target.epsilon, mu) <= target.delta
    assert gdp_epsilon(mu, target.delta) == pytest.approx(target.epsilon, rel=1e-3)  # tight
    assert event_epsilon(job.event, target.delta) > target.epsilon  # RDP would overcharge it
    naive = analytic_gaussian_sigma(target.epsilon / 4, target.delta / 4, per_class.sensitivity)
    assert per_class.noise_scale < 0.8 * naive
    assert job.total_steps == 4 * per_class.total_steps


def test_pure_classes_split_epsilon_by_basic_composition() -> None:
    job, per_class = plan(PrivacyTarget(1.0, 0.0))
    assert per_class.mechanism == "norm_gamma"
    assert per_class.noise_scale == pytest.approx(per_class.sensitivity / 0.25)


def test_class_plan_survives_json() -> None:
    job, per_class = plan(PrivacyTarget(1.0, 1e-6), classes=3)
    rebuilt = class_plan_of(plan_from_json(plan_to_json(job)))
    assert rebuilt is not None
    assert rebuilt.event == per_class.event and rebuilt.total_steps == per_class.total_steps
    assert rebuilt.hyperparameters == per_class.hyperparameters
    assert class_plan_of(per_class) is None


def test_one_vs_rest_labels() -> None:
    label = LabelSpec(column="c", type="categorical", classes=["a", "b", 3])
    Y = encode_one_vs_rest(pd.DataFrame({"c": ["a", "b", "3", "zzz", None, 3.0]}), label)
    expected = np.array(
        [[1, -1, -1, -1, -1, -1], [-1, 1, -1, -1, -1, -1], [-1, -1, 1, -1, -1, 1]], dtype=float
    )
    assert np.array_equal(Y, expected)


def test_a_class_refusal_says_it_was_planned_at_a_share_of_the_job_budget() -> None:
    """private_selection refuses below ε ≈ 0.2; at a job ε of 0.1 over 3 classes its message
    quotes the per-class ε, so the refusal names the job's own (ε, δ) beside it."""
    from service.optimizers.kits.base import InfeasibleSpec
    from service.optimizers.private_selection import PrivateSelection

    optimizer = PrivateSelection()
    with pytest.raises(InfeasibleSpec) as refused:
        plan_one_vs_rest(
            optimizer,
            optimizer.Params(),
            LogisticLoss(l2=1e-4),
            1000,
            10,
            PrivacyTarget(0.1, 1e-5),
            3,
        )
    assert "each of the 3 classes is planned at a share of the job's ε = 0.1" in str(refused.value)
