"""``auto`` (issue 13): the default optimizer, resolved from public facts into an ordinary job
of the optimizer it picks, with the choice recorded in the plan."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from service.domain.submission import DatasetFacts, price_job
from service.models.registry import parse_model_spec
from service.optimizers.auto import AVERAGING_N_EPSILON, RULE, resolve, rule_l2
from service.optimizers.kits.base import InfeasibleSpec, PrivacyTarget
from service.optimizers.kits.planning import plan_job
from service.privacy.gdp import gdp_mu
from service.schemas import JobCreate
from service.workers.runner import run_job
from tests.support.inprocess import bearer, in_process_app
from tests.support.walkthrough import COPIES, credit_dataset

FACTS = DatasetFacts(
    id="ds_x",
    n_rows=32561,
    n_features=104,
    delta=1e-5,
    label_type="binary",
    classes=None,
    retired=False,
)


def body(
    model: dict[str, Any], epsilon: float = 0.5, delta: float = 1e-6, **extra: Any
) -> JobCreate:
    return JobCreate.model_validate(
        {"dataset_id": "ds_x", "model": model, "privacy": {"epsilon": epsilon, "delta": delta}}
        | extra
    )


LOGISTIC = {"type": "logistic_regression", "fit_intercept": True}


@pytest.mark.parametrize(
    ("model", "delta", "optimizer", "clip"),
    [
        (LOGISTIC, 1e-6, "dp_agd_centred", 0.5),
        ({**LOGISTIC, "gradient_clip": 1.0}, 1e-6, "dp_agd_centred", 1.0),  # analyst's choice
        ({**LOGISTIC, "l1": 1e-4}, 1e-6, "dp_agd_averaged", 0.5),  # centred has no prox step
        (LOGISTIC, 0.0, "output_perturbation_gd", 0.5),
        ({"type": "sigmoid_classifier"}, 1e-6, "dp_gd", None),  # non-convex
        ({**LOGISTIC, "l2": 0.0}, 1e-6, "dp_gd", 0.5),  # dp_agd needs a radius without l2
        ({"type": "huber_svm"}, 1e-6, "dp_agd_averaged", None),
    ],
)
def test_the_rule_picks_from_public_facts(
    model: dict[str, Any], delta: float, optimizer: str, clip: float | None
) -> None:
    facts = DatasetFacts(**{**FACTS.__dict__, "delta": 0.0}) if delta == 0 else FACTS
    priced = price_job(facts, body(model, delta=delta))
    assert priced.spec["optimizer"]["name"] == optimizer
    assert priced.spec["model"].get("gradient_clip") == clip
    record = priced.plan_json["auto"]
    assert record["chosen_by"] == "auto" and record["optimizer"] == optimizer
    assert record["rule"] == RULE
    assert record["facts"]["n"] == FACTS.n_rows  # public facts only


@pytest.mark.parametrize("epsilon", [0.1, 0.5, 1.0, 2.0])
def test_an_auto_job_is_the_chosen_optimizers_ordinary_job(epsilon: float) -> None:
    """Same plan and same charge as submitting the resolved spec by hand: accounting and
    charging are the chosen optimizer's (the plan only gains the public ``auto`` record)."""
    auto = price_job(FACTS, body(LOGISTIC, epsilon=epsilon))
    explicit = price_job(
        FACTS,
        body(
            auto.spec["model"],
            epsilon=epsilon,
            optimizer={"name": auto.spec["optimizer"]["name"]},
        ),
    )
    plan = dict(auto.plan_json)
    filled = dict(plan.pop("auto")["filled"])
    assert filled.pop("model.gradient_clip") == 0.5
    if FACTS.n_rows * epsilon >= AVERAGING_N_EPSILON:
        assert auto.spec["optimizer"]["name"] == "dp_agd_centred"
        assert filled == {"model.l2": auto.spec["model"]["l2"]}
        assert 1e-5 <= filled["model.l2"] <= 1e-3
    else:
        assert auto.spec["optimizer"]["name"] == "dp_agd" and filled == {}
    assert plan == explicit.plan_json
    assert auto.charge == explicit.charge
    assert auto.spec == explicit.spec
    # omitting the optimizer is the same as naming auto
    named = price_job(FACTS, body(LOGISTIC, epsilon=epsilon, optimizer={"name": "auto"}))
    assert named.plan_json == auto.plan_json


def test_multiclass_and_regression_resolve() -> None:
    categorical = DatasetFacts(**{**FACTS.__dict__, "label_type": "categorical", "classes": 3})
    priced = price_job(categorical, body(LOGISTIC))  # the K classes fitted jointly
    assert priced.spec["model"]["type"] == "multinomial_logistic_regression"
    assert priced.spec["optimizer"]["name"] == "dp_agd_averaged"  # clipped: no anchor
    assert priced.plan_json["auto"]["multiclass"] == "joint"
    binary_loss = price_job(categorical, body({**LOGISTIC, "gradient_clip": 0.5}))
    assert binary_loss.spec["optimizer"]["name"] == "dp_agd_centred"  # one-vs-rest, as before
    assert binary_loss.plan_json["auto"]["multiclass"] == "one_vs_rest"
    numeric = DatasetFacts(**{**FACTS.__dict__, "label_type": "numeric"})
    priced = price_job(numeric, body({"type": "huber_regression", "label_bound": 2.0}))
    assert priced.spec["optimizer"]["name"] == "dp_agd_averaged"
    small_eps = price_job(numeric, body({"type": "huber_regression", "label_bound": 2.0}, 0.1))
    assert small_eps.spec["optimizer"]["name"] == "dp_agd"


@pytest.mark.parametrize("epsilon", [1.0, 2.0])
def test_regression_gets_a_huber_threshold_relative_to_the_label_bound(epsilon: float) -> None:
    """huber_delta unset → 0.03·B (recorded in ``filled``); the l2 rule at L = 1 (the label-
    normalised scale), not at L = δ; an analyst-set huber_delta is kept."""
    numeric = DatasetFacts(**{**FACTS.__dict__, "n_rows": 4200, "n_features": 8})
    numeric = DatasetFacts(**{**numeric.__dict__, "label_type": "numeric"})
    model = {"type": "huber_regression", "label_bound": 500.0}
    priced = price_job(numeric, body(model, epsilon=epsilon))
    assert priced.spec["model"]["huber_delta"] == pytest.approx(15.0)
    filled = priced.plan_json["auto"]["filled"]
    assert filled["model.huber_delta"] == pytest.approx(15.0)
    assert priced.spec["optimizer"]["name"] == "dp_agd_averaged"
    target = PrivacyTarget(epsilon, 1e-6)
    assert filled["model.l2"] == pytest.approx(rule_l2(1.0, 4200, 9, target))
    assert filled["model.l2"] != pytest.approx(rule_l2(15.0, 4200, 9, target))
    kept = price_job(numeric, body({**model, "huber_delta": 2.0}, epsilon=epsilon))
    assert kept.spec["model"]["huber_delta"] == 2.0
    assert "model.huber_delta" not in kept.plan_json["auto"]["filled"]


def test_the_recorded_spec_replans_the_same_job() -> None:
    """Re-sending a job's stored model and optimizer (here an auto regression job, whose
    objective_gap is derived from the label bound) prices the very same plan and charge."""
    numeric = DatasetFacts(**{**FACTS.__dict__, "label_type": "numeric"})
    auto = price_job(numeric, body({"type": "huber_regression", "label_bound": 350.0}, 2.0))
    gap = auto.plan_json["hyperparameters"]["objective_gap"]
    assert gap > 1.0 and auto.spec["optimizer"]["params"]["objective_gap"] == gap
    again = price_job(
        numeric,
        body(auto.spec["model"], 2.0, optimizer=auto.spec["optimizer"]),
    )
    plan = dict(auto.plan_json)
    plan.pop("auto")
    assert again.plan_json == plan and again.charge == auto.charge


def test_auto_takes_no_params() -> None:
    with pytest.raises(InfeasibleSpec) as info:
        price_job(FACTS, body(LOGISTIC, optimizer={"name": "auto", "params": {"iterations": 3}}))
    assert info.value.field == "optimizer.params"


def test_library_use_plans_and_fits_the_chosen_optimizer() -> None:
    """``plan_job(..., "auto", ...)`` as a notebook would call it: the chosen optimizer's plan
    with the record, and ``fit`` runs that optimizer."""
    model = parse_model_spec({**LOGISTIC, "gradient_clip": 0.5})
    job = plan_job(model, "auto", {}, 20000, 5, PrivacyTarget(1.0, 1e-6))
    assert job.plan.hyperparameters["auto"]["optimizer"] == "dp_agd_centred"
    direct = plan_job(model, "dp_agd_centred", {}, 20000, 5, PrivacyTarget(1.0, 1e-6))
    assert job.plan.noise_scale == direct.plan.noise_scale
    assert job.plan.total_steps == direct.plan.total_steps
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (20000, 6)) / np.sqrt(6)
    y = np.where(X[:, 0] > 0, 1.0, -1.0)
    w = job.optimizer.fit(job.plan, job.loss, X, y, np.random.default_rng(1), lambda s: None)
    same = direct.optimizer.fit(
        direct.plan, direct.loss, X, y, np.random.default_rng(1), lambda s: None
    )
    assert np.array_equal(w, same)
    chosen = resolve(model, 2000, 5, PrivacyTarget(1.0, 0.0))
    assert chosen.optimizer == "output_perturbation_gd"
    # from n = 10,000 rows with n·ε < 5,000: the last iterate of dp_agd (averaging cost
    # accuracy there); averaging everywhere else, small n included
    assert resolve(model, 10000, 5, PrivacyTarget(0.4, 1e-6)).optimizer == "dp_agd"
    assert resolve(model, 9999, 5, PrivacyTarget(0.4, 1e-6)).optimizer == "dp_agd_centred"
    assert resolve(model, 400, 5, PrivacyTarget(0.1, 1e-6)).optimizer == "dp_agd_averaged"
    # the centred split from n·ε/K = 2,500 (K classes one-vs-rest): below, averaging
    assert resolve(model, 5000, 5, PrivacyTarget(0.5, 1e-6)).optimizer == "dp_agd_centred"
    assert resolve(model, 4999, 5, PrivacyTarget(0.5, 1e-6)).optimizer == "dp_agd_averaged"
    three = resolve(model, 5000, 5, PrivacyTarget(1.5, 1e-6), classes=3)
    assert three.optimizer == "dp_agd_centred"
    assert resolve(model, 5000, 5, PrivacyTarget(1.0, 1e-6), classes=3).optimizer == (
        "dp_agd_averaged"
    )
    assert resolve(model, 40000, 5, PrivacyTarget(0.1, 1e-6)).optimizer == "dp_agd"
    # the analyst's l2 is kept; otherwise the rule's l2 falls with n·ε between its bounds
    fixed = parse_model_spec({**LOGISTIC, "l2": 3e-3})
    assert resolve(fixed, 40000, 5, PrivacyTarget(1.0, 1e-6)).model["l2"] == 3e-3


def test_the_l2_rule_falls_with_the_noise_between_its_bounds() -> None:
    free = parse_model_spec(LOGISTIC)  # l2 not sent
    values = [
        resolve(free, 32561, 104, PrivacyTarget(eps, 1e-5)).model["l2"] for eps in (0.5, 1, 2)
    ]
    assert 1e-4 > values[0] > values[1] > 1e-5 == values[2]  # the floor at ε = 2
    below = resolve(free, 10000, 104, PrivacyTarget(0.5, 1e-5)).model["l2"]
    assert below == pytest.approx(4.7e-4, rel=0.02)  # 9·d·(2L·z₁/n)² below the ceiling
    # n·ε = 1,500: dp_agd_averaged, whose steps run on mapped rows (dp_agd_row_map) for a
    # binary logistic model with an intercept: the ceiling is 1e-2 there (1e-3 otherwise)
    mapped = resolve(free, 3000, 104, PrivacyTarget(0.5, 1e-5)).model["l2"]
    assert mapped == pytest.approx(5.2e-3, rel=0.02)  # 9·d·(2L·z₁/n)² below 1e-2
    assert resolve(free, 700, 104, PrivacyTarget(0.5, 1e-5)).model["l2"] == 1e-2
    plain = parse_model_spec({**LOGISTIC, "fit_intercept": False})
    assert resolve(plain, 3000, 104, PrivacyTarget(0.5, 1e-5)).model["l2"] == 1e-3
    assert rule_l2(0.5, 32561, 105, PrivacyTarget(1.0, 1e-5)) == pytest.approx(
        9 * 105 * (1.0 / (32561 * gdp_mu(1.0, 1e-5))) ** 2
    )
    assert (
        resolve(free, 32561, 104, PrivacyTarget(1.0, 1e-5)).record["filled"]["model.l2"]
        == (values[1])
    )


# --- through the API ----------------------------------------------------------------------------


@pytest.fixture
def api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    data_root = tmp_path / "data"
    data_root.mkdir()
    monkeypatch.setenv("DPFIT_DATA_ROOTS", f"{data_root}:{COPIES}")
    url = f"sqlite:///{tmp_path / 'dpfit.db'}"
    with in_process_app(url, data_root) as (client, admin):
        keys = {}
        for name, role in [("olivia", "owner"), ("ann", "analyst")]:
            made = client.post("/v1/keys", json={"name": name, "role": role}, headers=bearer(admin))
            keys[name] = made.json()["key"]
        yield {"client": client, "keys": keys, "url": url}


def test_a_job_without_optimizer_runs_auto(api: dict[str, Any]) -> None:
    client = api["client"]
    owner, analyst = bearer(api["keys"]["olivia"]), bearer(api["keys"]["ann"])
    dsid = client.post("/v1/datasets", json=credit_dataset(epsilon=10.0), headers=owner).json()[
        "id"
    ]
    client.post(f"/v1/datasets/{dsid}/grants", json={"principal": "ann"}, headers=owner)
    request = {
        "dataset_id": dsid,
        "model": {"type": "logistic_regression"},
        "privacy": {"epsilon": 0.5, "delta": 1e-6},
    }
    estimate = client.post("/v1/jobs/estimate", json=request, headers=analyst).json()
    accepted = client.post("/v1/jobs", json=request, headers=analyst)
    assert accepted.status_code == 202, accepted.text
    job = accepted.json()
    assert job["optimizer"]["name"] == "dp_agd_averaged"  # 4,000 rows, n·ε < 2,500
    assert job["model"]["gradient_clip"] == 0.5
    assert job["plan"]["auto"]["chosen_by"] == "auto"
    assert estimate["plan"] == job["plan"]
    assert run_job(job["id"], 1, api["url"]) == "succeeded"
    done = client.get(f"/v1/jobs/{job['id']}", headers=analyst).json()
    model = client.get(f"/v1/models/{done['model_id']}", headers=analyst).json()
    assert model["privacy"]["mechanism"] == job["plan"]["mechanism"]
    bad = dict(request, optimizer={"name": "auto", "params": {"iterations": 2}})
    refused = client.post("/v1/jobs", json=bad, headers=analyst)
    assert refused.status_code == 422 and refused.json()["field"] == "optimizer.params"


def test_a_model_whose_constants_overflow_names_its_field_not_the_optimizer() -> None:
    """Every candidate refuses such a model; auto names the model's field (it named
    ``optimizer`` with a message about a Lipschitz constant)."""
    huge = parse_model_spec({"type": "huber_regression", "label_bound": 350, "huber_delta": 1e300})
    with pytest.raises(InfeasibleSpec) as refused:
        resolve(huge, 2000, 5, PrivacyTarget(1.0, 1e-5))
    assert refused.value.field == "model.huber_regression.huber_delta"
