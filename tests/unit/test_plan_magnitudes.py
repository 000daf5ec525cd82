"""The planning layer's numeric guard (service/optimizers/kits/planning.py): a spec whose plan would
have a non-finite or absurd quantity (Lipschitz constant, label bound, sensitivity, noise scale,
step) is refused by ``plan_job`` with InfeasibleSpec naming the field at fault — for every
optimizer of the catalog, never an OverflowError (a 500 at estimate) and never a plan whose
fit fails for certain or releases NaN."""

from __future__ import annotations

import math
from typing import Any

import pytest

from service.models.registry import parse_model_spec
from service.optimizers.kits.base import InfeasibleSpec, PrivacyTarget
from service.optimizers.kits.limits import SAFE_MAGNITUDE, WEIGHTS_CAP
from service.optimizers.kits.planning import plan_job
from service.optimizers.kits.registry import optimizer_names

TARGET = PrivacyTarget(0.1, 1e-5)


def plan(model: dict[str, Any], optimizer: str = "dp_gd", **params: Any) -> Any:
    return plan_job(parse_model_spec(model), optimizer, params, 353, 10, TARGET)


@pytest.mark.parametrize("optimizer", optimizer_names())
@pytest.mark.parametrize(
    ("model", "field"),
    [
        (
            {"type": "huber_regression", "label_bound": 350, "huber_delta": 1e308},
            "model.huber_regression.huber_delta",
        ),
        (
            {"type": "huber_regression", "label_bound": 1e300},
            "model.huber_regression.label_bound",
        ),
        (
            {"type": "cauchy_regression", "label_bound": 350, "cauchy_scale": 1e308},
            "model.cauchy_regression.cauchy_scale",
        ),
    ],
)
def test_overflowing_model_constants_are_refused_on_their_field(
    optimizer: str, model: dict[str, Any], field: str
) -> None:
    with pytest.raises(InfeasibleSpec) as caught:
        plan(model, optimizer)
    assert caught.value.field == field, caught.value.message


def test_a_noise_scale_beyond_the_safe_magnitude_is_refused() -> None:
    model = {"type": "huber_regression", "label_bound": 350, "huber_delta": SAFE_MAGNITUDE}
    with pytest.raises(InfeasibleSpec) as caught:
        plan(model)
    assert caught.value.field == "model.huber_regression.huber_delta"
    assert "noise scale" in caught.value.message


def test_ordinary_large_constants_still_plan() -> None:
    planned = plan({"type": "huber_regression", "label_bound": 350, "huber_delta": 1e6})
    assert math.isfinite(planned.plan.noise_scale) and planned.plan.sensitivity > 0


@pytest.mark.parametrize(
    ("model", "optimizer", "width", "classes"),
    [
        ({"type": "logistic_regression"}, "dp_gd", WEIGHTS_CAP, None),  # + the intercept
        ({"type": "multinomial_logistic_regression"}, "dp_agd_averaged", 1023, 1025),
        ({"type": "logistic_regression"}, "dp_agd", 1023, 1025),  # one-vs-rest: K models
        ({"type": "multinomial_logistic_regression"}, "dp_gd", 10_000, 10_000),
    ],
)
def test_a_model_of_more_weights_than_the_cap_is_refused_on_model(
    model: dict[str, Any], optimizer: str, width: int, classes: int | None
) -> None:
    """The released weights — encoded columns (with the intercept) times K for a categorical
    label, joint or one-vs-rest — above WEIGHTS_CAP: refused at planning on ``model``, the count
    in the message (the schema's caps allow 10⁸, which a fit cannot hold); one fewer column
    plans."""
    spec = parse_model_spec(model)
    with pytest.raises(InfeasibleSpec) as caught:
        plan_job(spec, optimizer, {}, 5_000, width, TARGET, classes=classes)
    assert caught.value.field == "model"
    assert f"{(width + 1) * (classes or 1):,} weights" in caught.value.message
    under = WEIGHTS_CAP // (classes or 1) - 1  # encoded columns whose model fits the cap
    assert (
        plan_job(spec, optimizer, {}, 5_000, under, TARGET, classes=classes).dimension == under + 1
    )
