"""What a hostile tenant found against a running server, each answered by a 422 naming the
field, never a 5xx and never a charge for a job that then fails:

1. parameters whose derived plan overflows (a radius, a drift threshold, an evaluation's stated
   noise of ``Infinity``: PostgreSQL refused the plan, SQLite stored it) — refused alike by the
   estimate and the submission;
2. a grant's ``epsilon_cap`` above what any budget holds or non-finite — refused; and whatever a
   stored cap holds (rows of older rules), pricing never fails;
3. free-form values nested deep (a prediction cell, an optimizer parameter, any body);
4. a private_selection ``score_share`` whose score noise overflows the exact sampler (it was
   charged, then failed in the worker);
5. consistency: NaN is "a finite number", the cursor's and Idempotency-Key's fields are
   ``query.cursor`` / ``header.Idempotency-Key``, the withdrawals list pages like every list.

In-process app on SQLite and PostgreSQL (tests/support/inprocess.py), the worker's own
``run_job`` where a model is needed.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
import uuid
from typing import Any

import pytest
from sqlalchemy import create_engine, select, update
from sqlalchemy.orm import Session

from service.db.models import Dataset, Grant
from service.domain.evaluation import PricedEvaluation
from service.domain.submission import (
    DatasetFacts,
    check_finite,
    estimate_job,
    price_job,
    submit_job,
)
from service.optimizers.kits.base import InfeasibleSpec
from service.schemas import JobCreate
from service.workers.runner import run_job
from tests.support.inprocess import InProcessServer
from tests.support.problems import problem
from tests.support.walkthrough import COPIES, PREDICT_ROWS, credit_dataset, logistic_job

MAX = sys.float_info.max  # 1.7976931348623157e308


@pytest.fixture
def world(app_server: InProcessServer, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """An owner, an analyst granted a binary (ε_B = 50) and a regression dataset."""
    monkeypatch.setenv("DPFIT_DATA_ROOTS", str(COPIES))  # the worker's roots (run_job)
    tag = uuid.uuid4().hex[:8]
    owner = app_server.client(app_server.key(f"owner-{tag}", "owner"))
    analyst_name = f"analyst-{tag}"
    analyst = app_server.client(app_server.key(analyst_name, "analyst"))
    binary = owner.post("/v1/datasets", json=credit_dataset(epsilon=50.0))
    assert binary.status_code == 201, binary.text
    numeric_body = credit_dataset(epsilon=50.0)
    numeric_body["label"] = {"column": "hours_per_week", "type": "numeric"}
    numeric_body["features"] = [
        f for f in numeric_body["features"] if f["name"] != "hours_per_week"
    ]
    numeric = owner.post("/v1/datasets", json=numeric_body)
    assert numeric.status_code == 201, numeric.text
    for dataset in (binary, numeric):
        path = f"/v1/datasets/{dataset.json()['id']}/grants"
        assert owner.post(path, json={"principal": analyst_name}).status_code == 201
    return {
        "server": app_server,
        "owner": owner,
        "analyst": analyst,
        "analyst_name": analyst_name,
        "binary": binary.json()["id"],
        "numeric": numeric.json()["id"],
    }


def charged(world: dict[str, Any], dataset_id: str) -> int:
    budget = world["owner"].get(f"/v1/datasets/{dataset_id}/budget")
    assert budget.status_code == 200, budget.text
    return int(budget.json()["jobs_charged"])


def job(dataset_id: str, model: dict[str, Any], optimizer: str, params: Any) -> dict[str, Any]:
    return {
        "dataset_id": dataset_id,
        "model": model,
        "optimizer": {"name": optimizer, "params": params},
        "privacy": {"epsilon": 1.0, "delta": 1e-6},
    }


def estimate_and_submit_refuse(
    world: dict[str, Any], body: dict[str, Any], field: str
) -> dict[str, Any]:
    """The estimate and the submission refuse ``body`` alike (same field, same detail) and
    nothing is charged."""
    analyst, dataset_id = world["analyst"], body["dataset_id"]
    before = charged(world, dataset_id)
    estimated = problem(analyst.post("/v1/jobs/estimate", json=body), 422, field)
    submitted = problem(analyst.post("/v1/jobs", json=body), 422, field)
    assert estimated["detail"] == submitted["detail"]
    assert charged(world, dataset_id) == before
    return submitted


def trained_model(world: dict[str, Any]) -> str:
    """The analyst's own released model on the binary dataset."""
    analyst, server = world["analyst"], world["server"]
    submitted = analyst.post("/v1/jobs", json=logistic_job(world["binary"]))
    assert submitted.status_code == 202, submitted.text
    assert run_job(submitted.json()["id"], 1, server.database_url) == "succeeded"
    return str(analyst.get(f"/v1/jobs/{submitted.json()['id']}").json()["model_id"])


# --- 1. a plan holding a non-finite number ----------------------------------------------------


@pytest.mark.parametrize(
    ("dataset", "model", "optimizer", "params", "field"),
    [
        (
            "binary",
            {"type": "logistic_regression"},
            "dp_agd_centred",
            {"objective_gap": MAX},
            "optimizer.params.objective_gap",
        ),
        (
            "numeric",
            {"type": "huber_regression", "label_bound": 100.0},
            "dp_agd",
            {"objective_gap": MAX},
            "optimizer.params.objective_gap",
        ),
        (
            "binary",
            {"type": "logistic_regression", "l2": 1.0},
            "dp_spiderboost",
            {"initial_gap": MAX},
            "optimizer.params.initial_gap",
        ),
    ],
)
def test_a_plan_that_overflows_is_refused_by_estimate_and_submission_alike(
    world: dict[str, Any],
    dataset: str,
    model: dict[str, Any],
    optimizer: str,
    params: dict[str, Any],
    field: str,
) -> None:
    """Was: the estimate answered 200 (the plan's ``Infinity`` shown as null), the submission
    500 on PostgreSQL (``"radius": Infinity`` refused) or stored ``Infinity`` on SQLite."""
    body = job(world[dataset], model, optimizer, params)
    refused = estimate_and_submit_refuse(world, body, field)
    assert "not a finite number" in refused["detail"]
    # an ordinary value of the same parameter plans, and its plan is all finite numbers
    ordinary = job(world[dataset], model, optimizer, {next(iter(params)): 1.0})
    estimated = world["analyst"].post("/v1/jobs/estimate", json=ordinary)
    assert estimated.status_code == 200, estimated.text
    assert "Infinity" not in estimated.text and "NaN" not in estimated.text


def test_no_plan_with_a_non_finite_number_is_ever_answered_or_stored(
    world: dict[str, Any],
) -> None:
    """The one guard behind every pricing (service/domain/submission.py ``check_finite``): a
    priced job whose plan, spec or event holds a non-finite number — whatever produced it — is
    refused by the estimate and by the submission before anything is written or charged, on
    ``optimizer.params`` (``loss_clip`` for an evaluation)."""
    dataset_id, analyst = world["binary"], world["analyst_name"]
    sessions = world["server"].app_client.app.state.sessions
    body = JobCreate.model_validate(logistic_job(dataset_id))
    with sessions() as session:
        priced = price_job(DatasetFacts.of(session.get(Dataset, dataset_id)), body)
    hyper = {**priced.plan_json["hyperparameters"], "radius": math.inf}
    poisoned = [
        dataclasses.replace(priced, plan_json={**priced.plan_json, "hyperparameters": hyper}),
        dataclasses.replace(priced, spec={**priced.spec, "privacy": {"epsilon": math.nan}}),
    ]
    before = charged(world, dataset_id)
    for bad in poisoned:
        with sessions() as session, pytest.raises(InfeasibleSpec) as estimated:
            estimate_job(session, session.get(Dataset, dataset_id), analyst, bad)
        assert estimated.value.field == "optimizer.params"
        with pytest.raises(InfeasibleSpec) as submitted, sessions.begin() as session:
            submit_job(
                session, dataset_id, analyst, bad, idempotency_key=None, body_hash="poisoned"
            )
        assert submitted.value.field == "optimizer.params"
    assert charged(world, dataset_id) == before
    evaluation = PricedEvaluation(
        plan=None,  # type: ignore[arg-type]  # not read by the guard
        charge=priced.charge,
        spec={"kind": "evaluation"},
        plan_json={"hyperparameters": {"log_loss_std": math.inf}},
    )
    with pytest.raises(InfeasibleSpec) as refused:
        check_finite(evaluation)
    assert refused.value.field == "loss_clip"


def test_an_evaluation_whose_stated_noise_overflows_is_refused(world: dict[str, Any]) -> None:
    """loss_clip = max double: ``log_loss_std`` = B·σ/n overflowed to ``Infinity``."""
    model_id = trained_model(world)
    analyst, dataset_id = world["analyst"], world["binary"]
    body = {"dataset_id": dataset_id, "privacy": {"epsilon": 1.0, "delta": 1e-6}}
    before = charged(world, dataset_id)
    for path in (f"/v1/models/{model_id}/evaluate/estimate", f"/v1/models/{model_id}/evaluate"):
        refused = problem(analyst.post(path, json={**body, "loss_clip": MAX}), 422, "loss_clip")
        assert "log_loss_std" in refused["detail"]
    assert charged(world, dataset_id) == before
    fine = analyst.post(f"/v1/models/{model_id}/evaluate/estimate", json={**body, "loss_clip": 5.0})
    assert fine.status_code == 200, fine.text


# --- 2. grant caps ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cap", "says"),
    [
        ("1e12", "less than or equal to 1000"),
        ("60", "above this dataset's budget"),  # ε_B = 50: it would cap nothing
        ("Infinity", "finite number"),
        ("1e309", "finite number"),  # parsed as +∞
        ("NaN", "finite number"),
        ("0", "greater than or equal to 0.000001"),
        ("1e-300", "greater than or equal to 0.000001"),
    ],
)
def test_a_cap_that_caps_nothing_or_is_not_a_number_is_refused(
    world: dict[str, Any], cap: str, says: str
) -> None:
    """Was: 1e12 stored (then every estimate and submission of the analyst a 500), Infinity and
    1e309 stored and shown as null (uncapped)."""
    raw = f'{{"principal": "{world["analyst_name"]}", "epsilon_cap": {cap}}}'
    path = f"/v1/datasets/{world['binary']}/grants"
    refused = problem(
        world["owner"].post(path, content=raw, headers={"content-type": "application/json"}),
        422,
        "epsilon_cap",
    )
    assert says in refused["detail"]
    listed = world["owner"].get(path).json()
    assert [g["epsilon_cap"] for g in listed if g["principal"] == world["analyst_name"]] == [None]
    # the dataset's own ε_B and anything below it are caps
    for fine in (50.0, 1e-6):
        granted = world["owner"].post(
            path, json={"principal": world["analyst_name"], "epsilon_cap": fine}
        )
        assert granted.status_code == 201 and granted.json()["epsilon_cap"] == fine


@pytest.mark.parametrize(
    ("stored", "admits"),
    [(1e12, True), (float("inf"), True), (50.0, True), (float("nan"), False), (1e-300, False)],
)
def test_pricing_never_fails_whatever_cap_a_grant_holds(
    world: dict[str, Any], stored: float, admits: bool
) -> None:
    """Rows stored under older rules (a cap of 1e12 or +∞ made the ledger's Gaussian
    calibration fail: a 500 on every estimate, submission and evaluation estimate): a cap of at
    least ε_B is what the dataset's budget already guarantees; one the filter cannot price (NaN,
    below 2·10⁻⁵⁵) admits nothing — answered 409, nothing charged."""
    model_id = trained_model(world)  # before the cap: its training job is charged
    dataset_id, analyst = world["binary"], world["analyst"]
    engine = create_engine(world["server"].database_url)
    with Session(engine) as session, session.begin():
        session.execute(
            update(Grant)
            .where(Grant.dataset_id == dataset_id, Grant.principal == world["analyst_name"])
            .values(epsilon_cap=stored)
        )
    with Session(engine) as session:  # SQLite stores NaN as NULL: no cap at all
        read_back = session.scalar(
            select(Grant.epsilon_cap).where(
                Grant.dataset_id == dataset_id, Grant.principal == world["analyst_name"]
            )
        )
    engine.dispose()
    admits = admits or read_back is None
    before = charged(world, dataset_id)
    evaluation = {"dataset_id": dataset_id, "privacy": {"epsilon": 1.0, "delta": 1e-6}}
    estimates = [
        analyst.post("/v1/jobs/estimate", json=logistic_job(dataset_id)),
        analyst.post(f"/v1/models/{model_id}/evaluate/estimate", json=evaluation),
    ]
    for estimate in estimates:
        assert estimate.status_code == 200, estimate.text
        assert estimate.json()["admissible"] is admits, estimate.json()["reason"]
    submitted = analyst.post("/v1/jobs", json=logistic_job(dataset_id))
    if admits:
        assert submitted.status_code == 202, submitted.text
        assert charged(world, dataset_id) == before + 1
    else:
        assert "admits no job" in problem(submitted, 409, "privacy.epsilon")["detail"]
        assert charged(world, dataset_id) == before
    assert analyst.get(f"/v1/datasets/{dataset_id}/budget").status_code == 200


# --- 3. deep nesting in free-form values ------------------------------------------------------


def nested(depth: int, leaf: Any = 1, key: str | None = None) -> Any:
    value = leaf
    for _ in range(depth):
        value = [value] if key is None else {key: value}
    return value


def test_a_prediction_cell_is_one_value(world: dict[str, Any]) -> None:
    """Was: a cell nested ~500 levels deep a RecursionError (500) in the compute process; a
    shallow one a "warning" quoting the array back."""
    model_id = trained_model(world)
    path = f"/v1/models/{model_id}/predict"
    for cell, column in [
        (nested(500), "age"),
        (nested(900), "age"),
        ([45], "age"),
        ({"value": 45}, "education"),
        (nested(3, key="a"), "comment"),  # an extra key: ignored by the encoder, still a cell
    ]:
        rows = [PREDICT_ROWS[1], {**PREDICT_ROWS[0], column: cell}]
        refused = problem(world["analyst"].post(path, json={"rows": rows}), 422, f"rows.1.{column}")
        assert "one value" in refused["detail"] and "[" not in refused["detail"]
    scalars = [{**PREDICT_ROWS[0], "age": None, "comment": "fine", "flag": True}]
    ok = world["analyst"].post(path, json={"rows": [*PREDICT_ROWS, *scalars]})
    assert ok.status_code == 200, ok.text


@pytest.mark.parametrize("depth", [9, 255, 300, 900])
def test_an_optimizer_parameter_nested_deep_is_refused_on_itself(
    world: dict[str, Any], depth: int
) -> None:
    """Was a 500 from 255 levels (pydantic's serialisation depth limit, at the request hash)."""
    body = job(
        world["binary"], {"type": "logistic_regression"}, "dp_gd", {"x": nested(depth, key="a")}
    )
    refused = estimate_and_submit_refuse(world, body, "optimizer.params.x")
    assert "nested too deeply" in refused["detail"]


def test_legitimately_nested_parameters_still_plan(world: dict[str, Any]) -> None:
    """private_selection's candidates hold their own parameters: 3 levels, well inside."""
    params = {
        "candidates": [
            {"optimizer": "dp_gd", "params": {"iterations": 20}},
            {"optimizer": "dp_agd", "params": {"max_iterations": 50}},
        ]
    }
    body = job(world["binary"], {"type": "logistic_regression"}, "private_selection", params)
    estimated = world["analyst"].post("/v1/jobs/estimate", json=body)
    assert estimated.status_code == 200, estimated.text


def test_any_body_nested_deep_is_a_422(world: dict[str, Any]) -> None:
    """Not only free-form values: the text check walks every body before validation."""
    body = credit_dataset(epsilon=5.0)
    body["source"] = {"uri": nested(900)}
    refused = problem(world["owner"].post("/v1/datasets", json=body), 422)
    assert refused["field"].startswith("source.uri") and "nested too deeply" in refused["detail"]


# --- 4. private_selection's score share -------------------------------------------------------


@pytest.mark.parametrize("share", [1e-300, 5e-324])
def test_a_score_share_the_sampler_cannot_draw_is_refused_before_any_charge(
    world: dict[str, Any], share: float
) -> None:
    """Was: 202 (charged), then OverflowError in the worker, "its charge stands"."""
    body = job(
        world["binary"],
        {"type": "logistic_regression"},
        "private_selection",
        {"score_share": share},
    )
    refused = estimate_and_submit_refuse(world, body, "optimizer.params.score_share")
    assert "score_share ≥" in refused["detail"]
    body["optimizer"]["params"]["score_share"] = 1e-200
    assert world["analyst"].post("/v1/jobs/estimate", json=body).status_code == 200


# --- 5. consistency ---------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "1e309"])
@pytest.mark.parametrize("name", ["epsilon", "delta"])
def test_a_non_finite_epsilon_or_delta_is_not_a_finite_number(
    world: dict[str, Any], name: str, value: str
) -> None:
    """Was: NaN answered "Input should be less than or equal to 1000"."""
    body = logistic_job(world["binary"])
    body["privacy"][name] = "PLACEHOLDER"
    raw = json.dumps(body).replace('"PLACEHOLDER"', value)
    headers = {"content-type": "application/json"}
    for path in ("/v1/jobs/estimate", "/v1/jobs"):
        sent = world["analyst"].post(path, content=raw, headers=headers)
        assert "finite number" in problem(sent, 422, f"privacy.{name}")["detail"]
    budget = credit_dataset()
    budget["budget"][name] = "PLACEHOLDER"
    raw = json.dumps(budget).replace('"PLACEHOLDER"', value)
    sent = world["owner"].post("/v1/datasets", content=raw, headers=headers)
    assert "finite number" in problem(sent, 422, f"budget.{name}")["detail"]


@pytest.mark.parametrize("cursor", ["zzz", "a" * 501, "eyJ4IjogMX0"])
def test_every_bad_cursor_is_a_422_on_query_cursor(world: dict[str, Any], cursor: str) -> None:
    """Was: "cursor" for a malformed cursor, "query.cursor" for an over-long one."""
    owner, dataset_id = world["owner"], world["binary"]
    admin = world["server"].client(world["server"].keys["admin"])
    for client, path in [
        (owner, "/v1/jobs"),
        (owner, "/v1/datasets"),
        (owner, f"/v1/datasets/{dataset_id}/grants"),
        (owner, f"/v1/datasets/{dataset_id}/ledger"),
        (owner, f"/v1/datasets/{dataset_id}/budget/history"),
        (admin, "/v1/keys"),
        (admin, "/v1/datasets/withdrawals"),
    ]:
        problem(client.get(path, params={"cursor": cursor}), 422, "query.cursor")


def test_a_malformed_idempotency_key_is_refused_readably(world: dict[str, Any]) -> None:
    """Was: "String should match pattern '^[\\x21-\\x7e]+$'"; the header is declared once
    (service/api/idempotency.py) for both routes that take it."""
    model_id = trained_model(world)
    analyst, dataset_id = world["analyst"], world["binary"]
    before = charged(world, dataset_id)
    evaluation = {"dataset_id": dataset_id, "privacy": {"epsilon": 1.0, "delta": 1e-6}}
    for key in ["a b", " ", "x" * 201, "clé", "tab\there"]:
        headers = {"Idempotency-Key": key.encode()}  # bytes: any octets reach the app
        for path, body in [
            ("/v1/jobs", logistic_job(dataset_id)),
            (f"/v1/models/{model_id}/evaluate", evaluation),
        ]:
            refused = problem(analyst.post(path, json=body, headers=headers), 422)
            assert refused["field"] == "header.Idempotency-Key", refused
            assert refused["detail"] == (
                "header.Idempotency-Key: must be 1–200 visible ASCII characters, no spaces"
            )
    assert charged(world, dataset_id) == before
    fine = analyst.post(
        "/v1/jobs", json=logistic_job(dataset_id), headers={"Idempotency-Key": "x" * 200}
    )
    assert fine.status_code == 202, fine.text


def test_a_reused_idempotency_key_is_refused_on_the_same_field(world: dict[str, Any]) -> None:
    analyst, dataset_id = world["analyst"], world["binary"]
    headers = {"Idempotency-Key": uuid.uuid4().hex}
    first = analyst.post("/v1/jobs", json=logistic_job(dataset_id, epsilon=0.2), headers=headers)
    assert first.status_code == 202, first.text
    again = analyst.post("/v1/jobs", json=logistic_job(dataset_id, epsilon=0.3), headers=headers)
    problem(again, 422, "header.Idempotency-Key")


def test_withdrawals_page_like_every_list(world: dict[str, Any]) -> None:
    """Was: limit and cursor ignored (even limit=-5 or 1e30 answered 200, everything)."""
    owner = world["owner"]
    admin = world["server"].client(world["server"].keys["admin"])
    mine = []
    for _ in range(3):
        created = owner.post("/v1/datasets", json=credit_dataset(epsilon=1.0))
        assert created.status_code == 201, created.text
        assert owner.delete(f"/v1/datasets/{created.json()['id']}").status_code == 200
        mine.append(created.json()["id"])
    for limit in ("-5", "0", "1001", "1e30", "x"):
        problem(admin.get("/v1/datasets/withdrawals", params={"limit": limit}), 422, "query.limit")
    seen: list[str] = []
    params: dict[str, Any] = {"limit": 2}
    while True:
        page = admin.get("/v1/datasets/withdrawals", params=params)
        assert page.status_code == 200, page.text
        assert len(page.json()) <= 2
        seen += [w["dataset_id"] for w in page.json()]
        cursor = page.headers.get("x-next-cursor")
        if cursor is None:
            break
        assert f"cursor={cursor}" in page.headers["link"]
        params = {"limit": 2, "cursor": cursor}
    assert len(seen) == len(set(seen))  # oldest first, none skipped, none repeated
    assert [d for d in seen if d in mine] == mine
    everything = admin.get("/v1/datasets/withdrawals", params={"limit": 1000}).json()
    assert [w["dataset_id"] for w in everything] == seen
