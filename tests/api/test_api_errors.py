"""Bad input gets a clear problem+json naming the field at fault, never a 500, and costs nothing.

Through the in-process app on SQLite and PostgreSQL (tests/support/inprocess.py: the real
routes, auth and databases; FastAPI's TestClient is an httpx client)."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

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
    tag = uuid.uuid4().hex[:6]
    owner = app_server.client(app_server.key(f"owner-{tag}", "owner"))
    analyst = app_server.client(app_server.key(f"analyst-{tag}", "analyst"))
    stranger = app_server.client(app_server.key(f"stranger-{tag}", "analyst"))
    dataset = owner.post("/v1/datasets", json=credit_dataset()).json()
    assert (
        owner.post(
            f"/v1/datasets/{dataset['id']}/grants", json={"principal": f"analyst-{tag}"}
        ).status_code
        == 201
    )
    pure = owner.post("/v1/datasets", json=credit_dataset(epsilon=1.0, delta=0.0)).json()
    owner.post(f"/v1/datasets/{pure['id']}/grants", json={"principal": f"analyst-{tag}"})
    return {
        "owner": owner,
        "analyst": analyst,
        "stranger": stranger,
        "dataset": dataset,
        "pure": pure,
        "analyst_name": f"analyst-{tag}",
    }


def test_authentication_and_roles(app_server: InProcessServer, actors: dict[str, Any]) -> None:
    anonymous = app_server.client()
    problem(anonymous.get("/v1/jobs"), 401)
    problem(app_server.client("dpf_not-a-key").get("/v1/jobs"), 401)
    problem(actors["analyst"].post("/v1/datasets", json=credit_dataset()), 403)
    problem(actors["analyst"].post("/v1/keys", json={"name": "x", "role": "admin"}), 403)
    problem(actors["analyst"].get(f"/v1/datasets/{actors['dataset']['id']}/ledger"), 403)
    # Analysts never see where a dataset lives.
    seen = actors["analyst"].get(f"/v1/datasets/{actors['dataset']['id']}").json()
    assert seen["source"] is None and seen["fingerprint"] is None
    problem(actors["stranger"].get(f"/v1/datasets/{actors['dataset']['id']}"), 404)
    problem(actors["stranger"].get(f"/v1/datasets/{actors['dataset']['id']}/budget"), 404)


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda b: b["source"].update(uri="../../etc/passwd"), "source.uri"),
        (lambda b: b["source"].update(uri="file:///etc/passwd"), "source.uri"),
        (lambda b: b["source"].update(uri="missing.csv"), "source.uri"),
        (lambda b: b["label"].update(column="salary"), "label.column"),
        (lambda b: b["features"][0].update(name="height"), "features.0.name"),
        (lambda b: b["features"][1].update(min=100), "features.1.max"),
        (lambda b: b["budget"].update(epsilon=-1), "budget.epsilon"),
        (lambda b: b["budget"].update(delta=1.5), "budget.delta"),
        (lambda b: b.update(extra=1), "extra"),
    ],
)
def test_dataset_registration_errors(
    app_server: InProcessServer, actors: dict[str, Any], mutate: Any, field: str
) -> None:
    body = credit_dataset()
    mutate(body)
    got = problem(actors["owner"].post("/v1/datasets", json=body), 422)
    assert got["field"].startswith(field), got


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda b: b["model"].update(l2=-1), "model.l2"),
        (lambda b: b["model"].update(type="svm"), "model"),
        (lambda b: b["optimizer"].update(name="nope"), "optimizer.name"),
        (lambda b: b["optimizer"]["params"].update(step_size=1e6), "optimizer.params.step_size"),
        (lambda b: b["optimizer"]["params"].update(iterations=0), "optimizer.params.iterations"),
        (lambda b: b["optimizer"]["params"].update(bogus=1), "optimizer.params.bogus"),
        (lambda b: b["privacy"].update(epsilon=0), "privacy.epsilon"),
        (lambda b: b["privacy"].update(delta=1), "privacy.delta"),
    ],
)
def test_job_spec_errors_name_the_field_and_charge_nothing(
    actors: dict[str, Any], mutate: Any, field: str
) -> None:
    body = logistic_job(actors["dataset"]["id"])
    mutate(body)
    got = problem(actors["analyst"].post("/v1/jobs", json=body), 422)
    assert got["field"].startswith(field), got
    budget = actors["analyst"].get(f"/v1/datasets/{actors['dataset']['id']}/budget").json()
    assert budget["jobs_charged"] == 0


def test_pure_dataset_accepts_only_pure_jobs(actors: dict[str, Any]) -> None:
    pure_id = actors["pure"]["id"]
    problem(
        actors["analyst"].post("/v1/jobs", json=logistic_job(pure_id, delta=1e-6)),
        422,
        "privacy.delta",
    )
    accepted = actors["analyst"].post(
        "/v1/jobs", json=logistic_job(pure_id, epsilon=0.6, delta=0.0)
    )
    assert accepted.status_code == 202
    assert accepted.json()["plan"]["mechanism"] == "norm_gamma"
    body = problem(
        actors["analyst"].post("/v1/jobs", json=logistic_job(pure_id, epsilon=0.6, delta=0.0)), 409
    )
    assert body["epsilon_remaining"] == pytest.approx(0.4)


def test_a_budget_refusal_states_true_numbers(actors: dict[str, Any]) -> None:
    """A newcomer read "ε ≤ 2.01 at δ = δ_B (…, so less than epsilon_remaining fits)" next to
    epsilon_remaining = 0.715. After a Gaussian charge the largest job that fits can exceed
    epsilon_remaining; the 409 must then not call it less, and must say at which δ each ε it
    states applies (δ_B, and the job's own δ)."""
    analyst, dataset_id = actors["analyst"], actors["dataset"]["id"]  # (ε_B, δ_B) = (3, 1e-5)
    spend = analyst.post("/v1/jobs", json=logistic_job(dataset_id, epsilon=2.2, delta=1e-5))
    assert spend.status_code == 202, spend.text
    refused = problem(
        analyst.post("/v1/jobs", json=logistic_job(dataset_id, epsilon=3.0, delta=1e-6)),
        409,
        "privacy.epsilon",
    )
    detail, remaining = refused["detail"], refused["epsilon_remaining"]
    stated = float(detail.split("i.e. ε ≤ ")[1].split(" at δ_B = 1e-05")[0])
    assert stated > remaining
    assert "less than epsilon_remaining" not in detail
    assert f"more than epsilon_remaining = {remaining:.6g}" in detail
    assert "at the job's own δ = 1e-06" in detail


def test_unknown_things_are_404(actors: dict[str, Any]) -> None:
    analyst = actors["analyst"]
    problem(analyst.get("/v1/jobs/job_nope"), 404)
    problem(analyst.get("/v1/models/mdl_nope"), 404)
    problem(analyst.post("/v1/jobs/job_nope/cancel"), 404)
    problem(analyst.post("/v1/jobs", json=logistic_job("ds_nope")), 404, "dataset_id")


def test_idempotency_key_reuse_with_another_body(actors: dict[str, Any]) -> None:
    analyst, dataset_id = actors["analyst"], actors["dataset"]["id"]
    headers = {"Idempotency-Key": uuid.uuid4().hex}
    assert (
        analyst.post(
            "/v1/jobs", json=logistic_job(dataset_id, epsilon=0.2), headers=headers
        ).status_code
        == 202
    )
    problem(
        analyst.post("/v1/jobs", json=logistic_job(dataset_id, epsilon=0.3), headers=headers),
        422,
        "header.Idempotency-Key",  # as a malformed key (one field for every refusal of it)
    )


@pytest.mark.parametrize("text", [b"{not json", b"[1,", b'{"a": 1'])
def test_malformed_json_is_422_on_the_body(actors: dict[str, Any], text: bytes) -> None:
    """Not "0: JSON decode error" (the offset FastAPI puts in its location): the field is the
    body, the message plain."""
    response = actors["analyst"].post(
        "/v1/jobs", content=text, headers={"content-type": "application/json"}
    )
    got = problem(response, 422, "body")
    assert got["errors"] == [{"field": "body", "message": "the request body is not valid JSON"}]


def resolves(body: Any, field: str) -> bool:
    """Whether ``field`` is a path into ``body`` (its last part may be a key the body lacks)."""
    node = body
    parts = field.split(".")
    for i, part in enumerate(parts):
        if isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        elif isinstance(node, dict) and part in node:
            node = node[part]
        else:
            return isinstance(node, dict) and i == len(parts) - 1
    return True


def _categorical_first(b: dict[str, Any]) -> None:
    b["features"].insert(0, {"name": "sector", "type": "categorical", "categories": []})


@pytest.mark.parametrize(
    ("path", "mutate", "field"),
    [
        ("/v1/jobs", lambda b: b["model"].update(l2=-1), "model.l2"),
        ("/v1/jobs", lambda b: b["model"].update(gradient_clip="1"), "model.gradient_clip"),
        ("/v1/jobs", lambda b: b["model"].update(bogus=1), "model.bogus"),
        ("/v1/jobs", lambda b: b["model"].pop("l2") and b["model"].update(l1=-1), "model.l1"),
        ("/v1/datasets", _categorical_first, "features.0.categories"),
        ("/v1/datasets", lambda b: b["features"][0].update(min=5, max=5), "features.0.max"),
        ("/v1/datasets", lambda b: b["features"][0].update(min=90, max=18), "features.0.max"),
        ("/v1/datasets", lambda b: b["features"][1].pop("max"), "features.1.max"),
        ("/v1/datasets", lambda b: b["label"].update(negative=[1]), "label.negative"),
        (
            "/v1/datasets",
            lambda b: b["features"][2]["categories"].append(b["features"][2]["categories"][0]),
            "features.2.categories",
        ),
        (
            "/v1/datasets",
            lambda b: b["features"][2]["categories"].append(None),
            "features.2.categories.4",
        ),
    ],
)
def test_422_fields_are_paths_of_the_body(
    actors: dict[str, Any], path: str, mutate: Any, field: str | None
) -> None:
    """Never pydantic's own location: not ``model.logistic_regression.l2`` (the tag of a
    discriminated union), ``features.0.categorical.categories``, ``features.0.numeric`` for
    ordered bounds, nor ``label.negative.str`` (the member of a plain union)."""
    if path == "/v1/jobs":
        body, client = logistic_job(actors["dataset"]["id"]), actors["analyst"]
    else:
        body, client = credit_dataset(), actors["owner"]
    mutate(body)
    got = problem(client.post(path, json=body), 422, field)
    assert got["errors"] and all(resolves(body, e["field"]) for e in got["errors"]), got
    assert got["detail"].startswith(f"{got['field']}: ")


def test_grant_cap_limits_one_analyst(actors: dict[str, Any], app_server: InProcessServer) -> None:
    owner, analyst, pure_id = actors["owner"], actors["analyst"], actors["pure"]["id"]
    name = actors["analyst_name"]
    grant = owner.post(
        f"/v1/datasets/{pure_id}/grants", json={"principal": name, "epsilon_cap": 0.5}
    )
    assert grant.status_code == 201 and grant.json()["epsilon_cap"] == 0.5
    assert (
        analyst.post("/v1/jobs", json=logistic_job(pure_id, epsilon=0.3, delta=0.0)).status_code
        == 202
    )
    refused = problem(
        analyst.post("/v1/jobs", json=logistic_job(pure_id, epsilon=0.3, delta=0.0)), 409
    )
    assert "capped" in refused["detail"]
    assert refused["epsilon_remaining"] == pytest.approx(0.2)
    budget = analyst.get(f"/v1/datasets/{pure_id}/budget").json()
    assert budget["your_epsilon_cap"] == 0.5
    assert budget["your_epsilon_spent"] == pytest.approx(0.3)
    assert budget["epsilon_remaining"] == pytest.approx(0.7)


def test_admin_lists_and_revokes_keys(app_server: InProcessServer) -> None:
    admin = app_server.client(app_server.key("admin", "admin"))
    name = f"temp-{uuid.uuid4().hex[:6]}"
    created = admin.post("/v1/keys", json={"name": name, "role": "analyst"}).json()
    temp = app_server.client(created["key"])
    assert temp.get("/v1/jobs").status_code == 200
    # Every page: the session's app holds more keys than one page (100) by the time this runs
    # in some orders, and the new key is the last one created.
    listed, cursor = [], None
    while True:
        page = admin.get(
            "/v1/keys", params={"limit": 1000, **({"cursor": cursor} if cursor else {})}
        )
        listed += page.json()
        cursor = page.headers.get("X-Next-Cursor")
        if not cursor:
            break
    mine = next(k for k in listed if k["id"] == created["id"])
    assert mine["name"] == name and mine["revoked_at"] is None and "key" not in mine
    revoked = admin.post(f"/v1/keys/{created['id']}/revoke").json()
    assert revoked["revoked_at"] is not None
    problem(temp.get("/v1/jobs"), 401)
    problem(temp.post(f"/v1/keys/{created['id']}/revoke"), 401)
    problem(admin.post("/v1/keys/key_nope/revoke"), 404)
