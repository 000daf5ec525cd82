"""Input hygiene (issue 9): strict JSON types, no control characters anywhere, the
Idempotency-Key race, lower bounds on ε/δ, the body limit and request ids.

Here the refusals that need no real process, through the in-process app on SQLite and
PostgreSQL (tests/support/inprocess.py); every refusal is a problem+json naming the field, never a
5xx, and costs nothing. What needs a real server (paths as uvicorn parses them, the concurrent
Idempotency-Key race, jobs that run, the body limit, request ids, the server log) is in
tests/live/test_input_hygiene.py.
"""

from __future__ import annotations

import json
import math
import uuid
from typing import Any

import httpx
import pytest

from service.models.registry import parse_model_spec
from service.optimizers.kits.base import InfeasibleSpec, PrivacyTarget
from service.optimizers.kits.planning import plan_job
from service.optimizers.kits.registry import optimizer_names
from service.schemas import MIN_EPSILON, MIN_POSITIVE_DELTA
from tests.support.inprocess import InProcessServer
from tests.support.walkthrough import credit_dataset, logistic_job


def problem(response: httpx.Response, status: int, field: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body = response.json()
    assert body["status"] == status and body["title"] and body["detail"]
    if field is not None:
        assert body["field"] == field, body
    return body


@pytest.fixture
def actors(app_server: InProcessServer) -> dict[str, Any]:
    tag = uuid.uuid4().hex[:8]
    owner = app_server.client(app_server.key(f"owner-{tag}", "owner"))
    analyst = app_server.client(app_server.key(f"analyst-{tag}", "analyst"))
    datasets = []
    for _ in range(2):
        created = owner.post("/v1/datasets", json=credit_dataset(epsilon=50.0))
        assert created.status_code == 201, created.text
        dataset_id = created.json()["id"]
        granted = owner.post(
            f"/v1/datasets/{dataset_id}/grants", json={"principal": f"analyst-{tag}"}
        )
        assert granted.status_code == 201, granted.text
        datasets.append(dataset_id)
    return {"owner": owner, "analyst": analyst, "datasets": datasets, "tag": tag}


def charged(actors: dict[str, Any], dataset_id: str) -> int:
    budget = actors["analyst"].get(f"/v1/datasets/{dataset_id}/budget")
    assert budget.status_code == 200, budget.text
    return int(budget.json()["jobs_charged"])


# --- strict types ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda b: b["privacy"].update(epsilon=True), "privacy.epsilon"),
        (lambda b: b["privacy"].update(epsilon="0.5"), "privacy.epsilon"),
        (lambda b: b["privacy"].update(delta="1e-6"), "privacy.delta"),
        (lambda b: b["model"].update(l2=True), "model.l2"),
        (lambda b: b["model"].update(l2="0.01"), "model.l2"),
        (lambda b: b["model"].update(fit_intercept=1), "model.fit_intercept"),
        (lambda b: b["optimizer"]["params"].update(iterations="5"), "optimizer.params.iterations"),
        (lambda b: b["optimizer"]["params"].update(iterations=5.0), "optimizer.params.iterations"),
        (lambda b: b.update(dataset_id=7), "dataset_id"),
    ],
)
def test_job_fields_are_not_coerced(actors: dict[str, Any], mutate: Any, field: str) -> None:
    body = logistic_job(actors["datasets"][0])
    mutate(body)
    problem(actors["analyst"].post("/v1/jobs", json=body), 422, field)
    assert charged(actors, actors["datasets"][0]) == 0


def test_json_integers_are_valid_floats(actors: dict[str, Any]) -> None:
    body = logistic_job(actors["datasets"][0], epsilon=1, l2=1)  # JSON 1, not 1.0
    accepted = actors["analyst"].post("/v1/jobs", json=body)
    assert accepted.status_code == 202, accepted.text
    assert accepted.json()["privacy"]["epsilon"] == 1.0


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda b: b["budget"].update(epsilon=True), "budget.epsilon"),
        (lambda b: b["budget"].update(epsilon="3"), "budget.epsilon"),
        (lambda b: b["features"][0].update(min="18"), "features.0.min"),
        (lambda b: b["features"][1].update(max=True), "features.1.max"),
        (lambda b: b["budget"].update(delta=False), "budget.delta"),
    ],
)
def test_dataset_fields_are_not_coerced(
    actors: dict[str, Any], app_server: InProcessServer, mutate: Any, field: str
) -> None:
    body = credit_dataset()
    mutate(body)
    problem(actors["owner"].post("/v1/datasets", json=body), 422, field)


# --- control characters ------------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["a\x00b", "a\x1fb", "tab\there", "a\x7fb", "a\x85b"])
def test_control_characters_in_bodies_are_422(
    actors: dict[str, Any], app_server: InProcessServer, bad: str
) -> None:
    owner, analyst = actors["owner"], actors["analyst"]
    dataset_id = actors["datasets"][0]
    body = credit_dataset()
    body["name"] = bad
    problem(owner.post("/v1/datasets", json=body), 422, "name")
    body = credit_dataset()
    body["features"][0]["name"] = bad
    problem(owner.post("/v1/datasets", json=body), 422, "features.0.name")
    body = credit_dataset(uri=bad)
    problem(owner.post("/v1/datasets", json=body), 422, "source.uri")
    problem(
        owner.post(f"/v1/datasets/{dataset_id}/grants", json={"principal": bad}), 422, "principal"
    )
    problem(analyst.post("/v1/jobs", json=logistic_job(bad)), 422, "dataset_id")
    job = logistic_job(dataset_id)
    job["optimizer"]["params"] = {"x": [1, bad]}
    problem(analyst.post("/v1/jobs", json=job), 422, "optimizer.params.x.1")
    admin = app_server.client(app_server.key("admin", "admin"))
    problem(admin.post("/v1/keys", json={"name": bad, "role": "analyst"}), 422, "name")
    assert charged(actors, dataset_id) == 0


def test_lone_surrogates_are_422(actors: dict[str, Any]) -> None:
    # JSON may spell a lone UTF-16 surrogate; no database can store it as UTF-8.
    raw = (
        b'{"dataset_id": "ds_\\ud800", "model": {"type": "logistic_regression"}, '
        b'"optimizer": {"name": "dp_gd"}, "privacy": {"epsilon": 1, "delta": 1e-6}}'
    )
    response = actors["analyst"].post(
        "/v1/jobs", content=raw, headers={"content-type": "application/json"}
    )
    problem(response, 422, "dataset_id")


def test_control_characters_in_queries_are_422(actors: dict[str, Any]) -> None:
    problem(actors["analyst"].get("/v1/jobs?cursor=%00"), 422, "query.cursor")
    problem(actors["analyst"].get("/v1/jobs?status=queued%0A"), 422, "query.status")
    problem(actors["analyst"].get("/v1/datasets?limit=1%00"), 422, "query.limit")


def test_a_query_parameter_given_twice_is_422(actors: dict[str, Any]) -> None:
    """No parameter takes a list; Starlette keeps the last value where a proxy may check the
    first (``?limit=5&limit=1000``)."""
    problem(actors["analyst"].get("/v1/jobs?limit=5&limit=1000"), 422, "query.limit")
    problem(actors["analyst"].get("/v1/jobs?status=queued&status=running"), 422, "query.status")
    problem(actors["analyst"].get("/v1/datasets?cursor=&cursor="), 422, "query.cursor")
    assert actors["analyst"].get("/v1/jobs?limit=5&status=queued").status_code == 200


def test_idempotency_key_must_be_printable(actors: dict[str, Any]) -> None:
    body = logistic_job(actors["datasets"][0])
    for key in ("two words", "é", "x" * 201):
        response = actors["analyst"].post(
            "/v1/jobs", json=body, headers={"Idempotency-Key": key.encode()}
        )
        problem(response, 422, "header.Idempotency-Key")
    assert charged(actors, actors["datasets"][0]) == 0


# --- one meaning per request: repeated headers and repeated JSON keys --------------------------


def test_a_repeated_single_valued_header_is_400_before_anything_runs(
    app_server: InProcessServer, actors: dict[str, Any]
) -> None:
    """A proxy that checked the first Authorization (or Idempotency-Key) and this service must
    not read two different requests: a repeated one is refused whatever the values."""
    dataset_id = actors["datasets"][0]
    analyst = app_server.keys[f"analyst-{actors['tag']}"]
    owner = app_server.keys[f"owner-{actors['tag']}"]
    anonymous = app_server.client(None)
    for first, second in ((analyst, owner), (analyst, analyst), (owner, "not-a-key")):
        response = anonymous.get(
            f"/v1/datasets/{dataset_id}/budget",
            headers=[("Authorization", f"Bearer {first}"), ("authorization", f"Bearer {second}")],
        )
        problem(response, 400, "header.Authorization")
    body = logistic_job(dataset_id)
    response = actors["analyst"].post(
        "/v1/jobs", json=body, headers=[("Idempotency-Key", "a-1"), ("Idempotency-Key", "a-2")]
    )
    problem(response, 400, "header.Idempotency-Key")
    response = actors["analyst"].post(
        "/v1/jobs/estimate",
        content=json.dumps(body).encode(),
        headers=[("Content-Type", "application/json"), ("Content-Type", "text/plain")],
    )
    problem(response, 400, "header.Content-Type")
    assert charged(actors, dataset_id) == 0
    # one of each is served as before
    single = actors["analyst"].get(f"/v1/datasets/{dataset_id}/budget")
    assert single.status_code == 200, single.text


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ('{{"dataset_id": "{id}", "dataset_id": "{id}", {rest}', "dataset_id"),
        ('{{"dataset_id": "{id}", "privacy": {{"epsilon": 0.1, "epsilon": 5, '
         '"delta": 1e-6}}, {rest}', "epsilon"),
        ('{{"dataset_id": "{id}", "optimizer": {{"name": "dp_gd", "params": '
         '{{"iterations": 5, "iterations": 50}}}}, {rest}', "iterations"),
    ],
)  # fmt: skip
def test_a_json_body_naming_a_key_twice_is_422_and_charges_nothing(
    actors: dict[str, Any], raw: str, key: str
) -> None:
    """RFC 8259 leaves a repeated name undefined (Python keeps the last value, other parsers the
    first): the body is refused on ``body`` at estimate and at submission, the key quoted."""
    dataset_id = actors["datasets"][0]
    rest = json.dumps({"model": {"type": "logistic_regression"}})[1:]
    content = raw.format(id=dataset_id, rest=rest).encode()
    for path in ("/v1/jobs/estimate", "/v1/jobs"):
        response = actors["analyst"].post(
            path, content=content, headers={"Content-Type": "application/json"}
        )
        body = problem(response, 422, "body")
        assert f'names the same key twice ("{key}")' in body["detail"], body
    assert charged(actors, dataset_id) == 0
    registered = actors["owner"].post(
        "/v1/datasets",
        content=b'{"name": "a", "name": "b"}',
        headers={"Content-Type": "application/json"},
    )
    problem(registered, 422, "body")


# --- lower bounds ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("privacy", "field", "bound"),
    [
        ({"epsilon": 5e-324, "delta": 1e-6}, "privacy.epsilon", "0.000001"),
        ({"epsilon": 5e-324, "delta": 0.0}, "privacy.epsilon", "0.000001"),
        ({"epsilon": 1e-7, "delta": 0.0}, "privacy.epsilon", "0.000001"),
        ({"epsilon": 1.0, "delta": 5e-324}, "privacy.delta", "1e-100"),
        ({"epsilon": 1.0, "delta": 1e-101}, "privacy.delta", "1e-100"),
    ],
)
def test_tiny_privacy_targets_are_refused_with_the_bound(
    actors: dict[str, Any], privacy: dict[str, float], field: str, bound: str
) -> None:
    body = logistic_job(actors["datasets"][0])
    body["privacy"] = privacy
    got = problem(actors["analyst"].post("/v1/jobs", json=body), 422, field)
    assert bound in got["detail"] and "math" not in got["detail"]
    assert charged(actors, actors["datasets"][0]) == 0


def test_tiny_budgets_are_refused_with_the_bound(
    actors: dict[str, Any], app_server: InProcessServer
) -> None:
    for budget, field in (
        ({"epsilon": 5e-324, "delta": 1e-5}, "budget.epsilon"),
        ({"epsilon": 1.0, "delta": 5e-324}, "budget.delta"),
    ):
        body = credit_dataset()
        body["budget"] = budget
        problem(actors["owner"].post("/v1/datasets", json=body), 422, field)


@pytest.mark.parametrize("name", optimizer_names())
@pytest.mark.parametrize("delta", [0.0, MIN_POSITIVE_DELTA, 1e-6])
def test_every_optimizer_plans_at_the_bounds(name: str, delta: float) -> None:
    """Planning at the smallest accepted ε and δ either works with finite noise or refuses with
    InfeasibleSpec naming a field — never a math error (which used to reach the client)."""
    model = parse_model_spec({"type": "logistic_regression", "l2": 0.01, "fit_intercept": True})
    for n in (2, 4000, 10**7):
        try:
            planned = plan_job(model, name, {}, n, 10, PrivacyTarget(MIN_EPSILON, delta))
        except InfeasibleSpec as exc:
            assert exc.field and exc.message
            continue
        assert math.isfinite(planned.plan.noise_scale) and planned.plan.noise_scale > 0


# --- the joint model's gradient_norm_clip -------------------------------------------------------


@pytest.mark.parametrize("bound", [1e-6, 0.3, 1e6, 1e-7, -1.0, 0.0, 1e7, "x", None])
@pytest.mark.parametrize(
    "optimizer",
    [None, "dp_gd", "dp_agd_averaged", "output_perturbation_gd", "bolt_on_psgd", "dp_agd_centred"],
)
def test_gradient_norm_clip_is_priced_or_refused_on_a_field(
    app_server: InProcessServer, optimizer: str | None, bound: Any
) -> None:
    """A categorical dataset, the joint model with every kind of ``gradient_norm_clip`` under
    the optimizers that take it and those that refuse it: an estimate (200) or a problem+json
    naming the field (422) on both databases, never a 5xx; a refusal charges nothing."""
    tag = uuid.uuid4().hex[:8]
    owner = app_server.client(app_server.key(f"owner-{tag}", "owner"))
    analyst = app_server.client(app_server.key(f"analyst-{tag}", "analyst"))
    body = credit_dataset(epsilon=50.0)
    body["features"] = [f for f in body["features"] if f["name"] != "education"]
    body["label"] = {
        "column": "education", "type": "categorical",
        "classes": ["HS", "Bachelors", "Masters", "PhD"],
    }  # fmt: skip
    created = owner.post("/v1/datasets", json=body)
    assert created.status_code == 201, created.text
    dataset_id = created.json()["id"]
    owner.post(f"/v1/datasets/{dataset_id}/grants", json={"principal": f"analyst-{tag}"})
    model: dict[str, Any] = {"type": "multinomial_logistic_regression", "l2": 1e-3}
    if bound is not None:
        model["gradient_norm_clip"] = bound
    job = {"dataset_id": dataset_id, "model": model, "privacy": {"epsilon": 1.0, "delta": 1e-6}}
    if optimizer:
        job["optimizer"] = {"name": optimizer, "params": {}}
    for path in ("/v1/jobs/estimate", "/v1/jobs"):
        response = analyst.post(path, json=job)
        assert response.status_code < 500, response.text
        if response.status_code >= 400:
            problem(response, 422)
            assert response.json()["field"].startswith(("model", "optimizer")), response.text
    binds = isinstance(bound, float) and 1e-6 <= bound < math.sqrt(2.0)  # no slope clip: √2
    if binds and optimizer in ("output_perturbation_gd", "bolt_on_psgd", "dp_agd_centred"):
        problem(analyst.post("/v1/jobs", json=job), 422, "model")
        assert int(analyst.get(f"/v1/datasets/{dataset_id}/budget").json()["jobs_charged"]) == 0
