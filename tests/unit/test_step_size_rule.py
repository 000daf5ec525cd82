"""The shared step-size rule (service/optimizers/gradient_kit.check_step_size): a step beyond
2/β_F — where even noiseless gradient descent diverges — is refused at planning on
``optimizer.params.step_size`` by every optimizer that takes an analyst's step, through the one
check; the optimizers whose papers need a smaller step keep their own message; projected SGD
baselines refuse only steps whose move would overflow (any c converges under projection)."""

from __future__ import annotations

import numpy as np
import pytest

from service.models.registry import parse_model_spec
from service.optimizers.kits.base import InfeasibleSpec, PrivacyTarget
from service.optimizers.kits.planning import plan_job
from service.optimizers.kits.sgd_common import project_to_ball

LOGISTIC = {"type": "logistic_regression", "l2": 0.01}  # β_F = 0.25 + 0.01, 2/β_F ≈ 7.69
TARGET = PrivacyTarget(1.0, 1e-6)
SHARED = ["dp_gd", "dp_agd", "dp_agd_averaged", "dp_svrg", "dp_svrg_pp"]
OWN = {
    "output_perturbation_gd": "2/(β + 2μ)",
    "bolt_on_psgd": "2/(β + 2μ)",
    "rrpsgd": "below 2/(β + μ)",
}


def plan(optimizer: str, params: dict[str, object], model: dict[str, object] = LOGISTIC) -> None:
    plan_job(parse_model_spec(model), optimizer, params, 1000, 5, TARGET)


@pytest.mark.parametrize("optimizer", SHARED)
@pytest.mark.parametrize("step", [1e308, 1e6, 7.7])
def test_a_step_beyond_two_over_beta_is_refused(optimizer: str, step: float) -> None:
    with pytest.raises(InfeasibleSpec) as caught:
        plan(optimizer, {"step_size": step})
    assert caught.value.field == "optimizer.params.step_size"
    assert "2/(β + μ) = 7.69231" in caught.value.message


@pytest.mark.parametrize("optimizer", SHARED)
def test_a_step_within_two_over_beta_is_accepted(optimizer: str) -> None:
    plan(optimizer, {"step_size": 7.6})


@pytest.mark.parametrize(("optimizer", "own"), sorted(OWN.items()))
def test_optimizers_with_a_stricter_bound_keep_their_message(optimizer: str, own: str) -> None:
    with pytest.raises(InfeasibleSpec) as caught:
        plan(optimizer, {"step_size": 1e308})
    assert caught.value.field == "optimizer.params.step_size"
    assert own in caught.value.message


def test_private_tuning_candidates_pass_the_same_rule() -> None:
    params = {
        "base_optimizer": "dp_gd",
        "candidates": [{"l2": 0.01, "params": {"step_size": 1e308}}, {"l2": 0.1}],
    }
    with pytest.raises(InfeasibleSpec) as caught:
        plan("private_tuning", params)
    assert caught.value.field.endswith("params.step_size")


@pytest.mark.parametrize("optimizer", ["noisy_sgd_bst14", "noisy_sgd_scs13"])
def test_projected_baselines_refuse_only_overflowing_steps(optimizer: str) -> None:
    plan(optimizer, {"step_size": 1e6})  # projected: a large c converges
    with pytest.raises(InfeasibleSpec) as caught:
        plan(optimizer, {"step_size": 1e308})
    assert caught.value.field == "optimizer.params.step_size"


def test_projection_of_a_huge_iterate_keeps_its_direction() -> None:
    w = np.array([3e200, -4e200])
    project_to_ball(w, 10.0)
    assert np.allclose(w, [6.0, -8.0])
