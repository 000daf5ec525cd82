"""The planning layer's numeric guard (service/optimizers/kits/planning.py): a spec whose plan would
have a non-finite or absurd quantity (Lipschitz constant, label bound, sensitivity, noise scale,
step) is refused by ``plan_job`` with InfeasibleSpec naming the field at fault — for every
optimizer of the catalog, never an OverflowError (a 500 at estimate) and never a plan whose
fit fails for certain or releases NaN."""

from __future__ import annotations

import math
import sys
from typing import Any, get_args

import pytest

from service.domain.submission import DatasetFacts, price_job
from service.models.registry import parse_model_spec
from service.optimizers.kits.base import InfeasibleSpec, PrivacyTarget
from service.optimizers.kits.limits import SAFE_MAGNITUDE, WEIGHTS_CAP, first_non_finite
from service.optimizers.kits.planning import plan_job
from service.optimizers.kits.registry import get_optimizer, optimizer_names
from service.schemas import JobCreate

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


# --- no plan holds a non-finite number (a stored plan is JSON: PostgreSQL refuses Infinity) ----

MAX = sys.float_info.max
FACTS = DatasetFacts(
    id="ds", n_rows=4000, n_features=9, delta=1e-5, label_type="binary", classes=None, retired=False
)
NUMERIC = DatasetFacts(**{**FACTS.__dict__, "label_type": "numeric"})


def float_params(optimizer: str) -> list[str]:
    """The optimizer's parameters that take a float (``float`` or ``float | None``)."""
    fields = get_optimizer(optimizer).Params.model_fields
    return [
        name
        for name, field in fields.items()
        if field.annotation is float or float in get_args(field.annotation)
    ]


SWEEP = [(o, p) for o in optimizer_names() if o != "auto" for p in float_params(o)]


def priced(facts: DatasetFacts, model: dict[str, Any], optimizer: str, params: Any) -> Any:
    body = JobCreate.model_validate(
        {
            "dataset_id": "ds",
            "model": model,
            "optimizer": {"name": optimizer, "params": params},
            "privacy": {"epsilon": 1.0, "delta": 1e-6},
        }
    )
    return price_job(facts, body)


@pytest.mark.parametrize(("optimizer", "param"), SWEEP)
def test_a_parameter_at_the_float_maximum_never_makes_a_plan_with_a_non_finite_number(
    optimizer: str, param: str
) -> None:
    """Every float parameter of every optimizer at float64's maximum (a model with l2 = 1, where
    products with β + μ overflow): pricing either refuses it on that parameter (the only
    unusual number of the spec, also when the plan's arithmetic raised) or answers a plan whose
    every number — hyperparameters, events, candidates' plans — is finite, so the estimate
    shows and the submission stores exactly what the worker runs."""
    model = {"type": "logistic_regression", "l2": 1.0, "fit_intercept": True}
    try:
        job = priced(FACTS, model, optimizer, {param: MAX})
    except InfeasibleSpec as refused:
        assert refused.field == f"optimizer.params.{param}", refused.message
        return
    assert first_non_finite(job.plan_json) is None, job.plan_json
    assert first_non_finite(job.spec) is None and first_non_finite(job.charge.event) is None


@pytest.mark.parametrize(
    ("facts", "model", "optimizer", "param"),
    [
        (FACTS, {"type": "logistic_regression"}, "dp_agd_centred", "objective_gap"),
        (
            NUMERIC,
            {"type": "huber_regression", "label_bound": 100.0},
            "dp_agd",
            "objective_gap",
        ),
        (FACTS, {"type": "logistic_regression", "l2": 1.0}, "dp_spiderboost", "initial_gap"),
    ],
)
def test_a_plan_that_overflows_is_refused_on_the_parameter_that_caused_it(
    facts: DatasetFacts, model: dict[str, Any], optimizer: str, param: str
) -> None:
    """The reported plans (a default radius √(2·gap/μ) and a drift threshold (B·G·M)^(1/3) that
    overflowed to ``Infinity``) are refused at pricing, on the parameter given."""
    with pytest.raises(InfeasibleSpec) as caught:
        priced(facts, model, optimizer, {param: MAX})
    assert caught.value.field == f"optimizer.params.{param}"
    assert "not a finite number" in caught.value.message
    assert first_non_finite(priced(facts, model, optimizer, {param: 1.0}).plan_json) is None


def test_first_non_finite_finds_the_path_at_any_depth() -> None:
    deep: Any = math.inf
    for _ in range(5000):  # deeper than any recursion limit
        deep = {"a": [deep]}
    assert first_non_finite({"x": 1.0, "y": [0, {"z": math.nan}]}) == ("y", 1, "z")
    assert first_non_finite({"x": [1.0, -2, "inf", None, True]}) is None
    path = first_non_finite({"deep": deep})
    assert path is not None and len(path) == 1 + 2 * 5000
