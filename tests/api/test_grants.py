"""Grants are visible and revocable (issue 12): `GET /v1/datasets/{id}/grants` and
`POST /v1/datasets/{id}/grants/{principal}/revoke` (service/domain/grants.py).

In-process app (real routes and auth, a dispatcher that runs nothing, the worker's own
``run_job`` when a job must run) on a SQLite file and on PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from service.db.models import Dataset
from service.domain.submission import DatasetFacts, price_job, request_hash, submit_job
from service.errors import DatasetNotFound
from service.schemas import JobCreate
from service.workers.runner import run_job
from tests.support.inprocess import bearer, in_process_app
from tests.support.walkthrough import COPIES, credit_dataset, logistic_job


@dataclass
class Team:
    client: TestClient
    url: str
    keys: dict[str, str]
    dataset_id: str = ""

    def call(self, who: str, method: str, path: str, **kwargs: Any) -> httpx.Response:
        return self.client.request(method, path, headers=bearer(self.keys[who]), **kwargs)

    def ok(self, who: str, method: str, path: str, **kwargs: Any) -> Any:
        response = self.call(who, method, path, **kwargs)
        assert response.status_code < 300, (method, path, response.text)
        return response.json()

    def grants(self, who: str = "owner", **params: Any) -> list[dict[str, Any]]:
        return list(self.ok(who, "GET", f"/v1/datasets/{self.dataset_id}/grants", params=params))

    def submit(self, who: str, epsilon: float) -> httpx.Response:
        return self.call(who, "POST", "/v1/jobs", json=logistic_job(self.dataset_id, epsilon))


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def team(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Team]:
    if request.param == "postgres":
        url = str(request.getfixturevalue("private_postgres_database"))
    else:
        url = f"sqlite:///{tmp_path / 'dpfit.db'}"
    data_root = tmp_path / "data"
    data_root.mkdir()
    # A worker takes its data roots from the environment, as under `dpfit serve`.
    monkeypatch.setenv("DPFIT_DATA_ROOTS", f"{data_root}:{COPIES}")
    with in_process_app(url, data_root) as (client, admin):
        t = Team(client=client, url=url, keys={"admin": admin})
        for who, role in [
            ("owner", "owner"),
            ("other_owner", "owner"),
            ("ann", "analyst"),
            ("bob", "analyst"),
            ("cat", "analyst"),
        ]:
            t.keys[who] = t.ok("admin", "POST", "/v1/keys", json={"name": who, "role": role})["key"]
        t.dataset_id = t.ok("owner", "POST", "/v1/datasets", json=credit_dataset(epsilon=10.0))[
            "id"
        ]
        yield t


def grant(team: Team, principal: str, cap: float | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"principal": principal}
    if cap is not None:
        body["epsilon_cap"] = cap
    return dict(team.ok("owner", "POST", f"/v1/datasets/{team.dataset_id}/grants", json=body))


def test_grants_are_listed_oldest_first_with_cap_and_spend(team: Team) -> None:
    assert team.grants() == []
    grant(team, "ann", cap=2.0)
    grant(team, "bob")
    grant(team, "cat", cap=1.0)
    assert team.submit("ann", 0.5).status_code == 202
    assert team.submit("ann", 0.25).status_code == 202
    assert team.submit("bob", 0.5).status_code == 202

    listed = team.grants()
    assert [g["principal"] for g in listed] == ["ann", "bob", "cat"]
    assert [g["epsilon_cap"] for g in listed] == [2.0, None, 1.0]
    assert all(g["dataset_id"] == team.dataset_id for g in listed)
    # Each grantee's spend is what the budget endpoint tells that grantee about itself.
    for g in listed:
        budget = team.ok(g["principal"], "GET", f"/v1/datasets/{team.dataset_id}/budget")
        assert g["epsilon_spent"] == pytest.approx(budget["your_epsilon_spent"], rel=1e-12)
    spent = {g["principal"]: g["epsilon_spent"] for g in listed}
    assert spent["cat"] == 0.0
    assert spent["ann"] > spent["bob"] > 0.0  # two jobs compose to more than one of the same ε

    # Admins see the same list; the page of one grant follows the cursor through all three.
    assert team.grants("admin") == listed
    first = team.call("owner", "GET", f"/v1/datasets/{team.dataset_id}/grants?limit=1")
    seen, response = [], first
    while True:
        assert response.status_code == 200, response.text
        seen += response.json()
        cursor = response.headers.get("x-next-cursor")
        if cursor is None:
            break
        response = team.call(
            "owner", "GET", f"/v1/datasets/{team.dataset_id}/grants?limit=1&cursor={cursor}"
        )
    assert seen == listed


def test_a_refunded_job_does_not_count_in_the_grantee_spend(team: Team) -> None:
    grant(team, "ann")
    job = team.submit("ann", 0.5).json()
    assert team.grants()[0]["epsilon_spent"] > 0.0
    cancelled = team.ok("ann", "POST", f"/v1/jobs/{job['id']}/cancel")
    assert cancelled["refunded"] is True
    assert team.grants()[0]["epsilon_spent"] == 0.0


def test_revoking_stops_new_jobs_and_keeps_the_accounting(team: Team) -> None:
    grant(team, "ann", cap=3.0)
    grant(team, "bob")
    path = f"/v1/datasets/{team.dataset_id}"
    queued = team.submit("ann", 0.5)
    assert queued.status_code == 202, queued.text
    job_id = queued.json()["id"]
    before_budget = team.ok("owner", "GET", f"{path}/budget")
    before_ledger = team.ok("owner", "GET", f"{path}/ledger")
    ann_spent = team.grants()[0]["epsilon_spent"]

    revoked = team.ok("owner", "POST", f"{path}/grants/ann/revoke")
    assert revoked["principal"] == "ann" and revoked["epsilon_cap"] == 3.0
    assert revoked["revoked_at"] >= revoked["created_at"]
    assert [g["principal"] for g in team.grants()] == ["bob"]

    # New work on the dataset stops: the dataset is invisible to ann, as if never granted.
    refused = team.submit("ann", 0.5)
    assert refused.status_code == 404 and refused.json()["field"] == "dataset_id"
    estimate = team.call("ann", "POST", "/v1/jobs/estimate", json=logistic_job(team.dataset_id))
    assert estimate.status_code == 404
    assert team.call("ann", "GET", path).status_code == 404
    assert team.ok("ann", "GET", "/v1/datasets") == []
    # Bob's grant is untouched.
    assert team.submit("bob", 0.25).status_code == 202

    # The accounting is unchanged: the queued job keeps its charge, the ledger keeps its rows.
    ledger = team.ok("owner", "GET", f"{path}/ledger")
    ann_rows = [c for c in ledger["charges"] if c["principal"] == "ann"]
    assert ann_rows == [c for c in before_ledger["charges"] if c["principal"] == "ann"]
    assert ledger["consistent"] is True
    budget = team.ok("owner", "GET", f"{path}/budget")
    assert budget["epsilon_spent"] > before_budget["epsilon_spent"]  # bob's new job only
    assert budget["jobs_charged"] == before_budget["jobs_charged"] + 1
    # ... and the already-admitted job still runs, and ann still sees it and its model.
    assert team.ok("ann", "GET", f"/v1/jobs/{job_id}")["status"] == "queued"
    status = run_job(job_id, 1, team.url)
    assert status == "succeeded", team.ok("ann", "GET", f"/v1/jobs/{job_id}")["error"]
    job = team.ok("ann", "GET", f"/v1/jobs/{job_id}")
    assert job["status"] == "succeeded" and job["refunded"] is False
    assert team.ok("ann", "GET", f"/v1/models/{job['model_id']}")["id"] == job["model_id"]

    # A second revocation finds nothing; granting again is a new grant and earlier charges
    # still count (against the cap given now).
    again = team.call("owner", "POST", f"{path}/grants/ann/revoke")
    assert again.status_code == 404, again.text
    regranted = grant(team, "ann", cap=1.0)
    assert regranted["created_at"] > revoked["created_at"]
    ann = next(g for g in team.grants() if g["principal"] == "ann")
    assert ann["epsilon_cap"] == 1.0
    assert ann["epsilon_spent"] == pytest.approx(ann_spent, rel=1e-12)
    assert team.submit("ann", 0.25).status_code == 202


def test_who_may_list_and_revoke(team: Team) -> None:
    grant(team, "ann")
    path = f"/v1/datasets/{team.dataset_id}/grants"
    for who, status in [("ann", 403), ("bob", 403), ("other_owner", 404)]:
        for method, url in [("GET", path), ("POST", f"{path}/ann/revoke")]:
            response = team.call(who, method, url)
            assert response.status_code == status, (who, method, response.text)
            assert response.headers["content-type"].startswith("application/problem+json")
    assert [g["principal"] for g in team.grants()] == ["ann"]  # nothing was revoked
    missing = team.call("owner", "POST", f"{path}/nobody/revoke")
    assert missing.status_code == 404
    assert team.call("owner", "GET", "/v1/datasets/ds_missing/grants").status_code == 404
    bad = team.call("owner", "GET", path, params={"cursor": "abc"})
    assert bad.status_code == 422 and bad.json()["field"] == "query.cursor"
    # Admins may revoke too.
    assert team.call("admin", "POST", f"{path}/ann/revoke").status_code == 200
    assert team.grants() == []


def test_a_submission_checked_before_a_revocation_is_refused_under_the_lock(team: Team) -> None:
    """The route's visibility check ran, then the revocation committed, then admission took the
    dataset lock: admission checks the grant again and refuses, charging nothing."""
    grant(team, "ann")
    sessions = team.client.app.state.sessions  # type: ignore[attr-defined]
    body = JobCreate.model_validate(logistic_job(team.dataset_id, 0.5))
    with sessions() as session:  # what the route read before the revocation
        priced = price_job(DatasetFacts.of(session.get(Dataset, team.dataset_id)), body)
    team.ok("owner", "POST", f"/v1/datasets/{team.dataset_id}/grants/ann/revoke")
    before = team.ok("owner", "GET", f"/v1/datasets/{team.dataset_id}/ledger")["charges"]
    with pytest.raises(DatasetNotFound), sessions.begin() as session:
        submit_job(
            session,
            team.dataset_id,
            "ann",
            priced,
            idempotency_key=None,
            body_hash=request_hash(body),
            needs_grant=True,
        )
    after = team.ok("owner", "GET", f"/v1/datasets/{team.dataset_id}/ledger")["charges"]
    assert after == before
