"""GET /metrics: Prometheus text with jobs by status and optimizer, queue depth, job durations,
submissions by outcome, HTTP latency by route TEMPLATE, and ε spent per dataset only where an
admin key is needed to read it (DPFIT_METRICS).

In-process app (TestClient, a dispatcher that runs nothing; a job is run with the worker's own
``run_job`` when a finished job is needed) on a SQLite file.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from service.api.app import create_app
from service.cli import create_key_cli, migrate
from service.settings import Settings
from service.workers.runner import run_job
from tests.support.inprocess import QueueOnly, bearer
from tests.support.walkthrough import COPIES, credit_dataset, logistic_job


@contextmanager
def app_with(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, metrics_access: str = "admin"
) -> Iterator[tuple[TestClient, dict[str, str], str]]:
    """A migrated SQLite database, an admin, an owner and an analyst (granted nothing yet)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    url = f"sqlite:///{tmp_path / 'dpfit.db'}"
    migrate(url)
    monkeypatch.setenv("DPFIT_DATA_ROOTS", str(COPIES))  # what a worker reads
    settings = Settings(database_url=url, data_roots=(COPIES,), workers=1, dask_scheduler=None)
    settings = dataclasses.replace(settings, metrics_access=metrics_access)
    keys = {"admin": create_key_cli(url, "admin", "admin")}
    with TestClient(create_app(settings, dispatcher_factory=QueueOnly)) as client:
        for name, role in (("olivia", "owner"), ("ann", "analyst")):
            response = client.post(
                "/v1/keys", json={"name": name, "role": role}, headers=bearer(keys["admin"])
            )
            keys[name] = response.json()["key"]
        yield client, keys, url


def scrape(client: TestClient, key: str | None) -> dict[str, list[Any]]:
    """name → samples of every family (``dpfit_…`` only)."""
    response = client.get("/metrics", headers=bearer(key))
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    return {
        f.name: f.samples
        for f in text_string_to_metric_families(response.text)
        if f.name.startswith("dpfit_")
    }


def value(families: dict[str, list[Any]], sample: str, **labels: str) -> float | None:
    family = families.get(sample.removesuffix("_total").removesuffix("_count"), [])
    for s in family:
        if s.name == sample and all(s.labels.get(k) == v for k, v in labels.items()):
            return float(s.value)
    return None


def test_metrics_need_an_admin_key_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with app_with(tmp_path, monkeypatch) as (client, keys, _):
        assert client.get("/metrics").status_code == 401
        forbidden = client.get("/metrics", headers=bearer(keys["olivia"]))
        assert forbidden.status_code == 403
        assert forbidden.headers["content-type"] == "application/problem+json"
        assert client.get("/metrics", headers=bearer(keys["admin"])).status_code == 200


def test_jobs_submissions_durations_and_epsilon_per_dataset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with app_with(tmp_path, monkeypatch) as (client, keys, url):
        owner, analyst, admin = bearer(keys["olivia"]), bearer(keys["ann"]), keys["admin"]
        dataset = client.post("/v1/datasets", json=credit_dataset(epsilon=1.0), headers=owner)
        dataset_id = dataset.json()["id"]
        client.post(f"/v1/datasets/{dataset_id}/grants", json={"principal": "ann"}, headers=owner)

        first = client.post("/v1/jobs", json=logistic_job(dataset_id, epsilon=0.8), headers=analyst)
        assert first.status_code == 202
        replay_headers = {**analyst, "Idempotency-Key": "metrics-1"}
        second = logistic_job(dataset_id, epsilon=0.2)
        assert client.post("/v1/jobs", json=second, headers=replay_headers).status_code == 202
        replay = client.post("/v1/jobs", json=second, headers=replay_headers)
        assert replay.headers.get("Idempotent-Replayed") == "true"
        refused = client.post(
            "/v1/jobs", json=logistic_job(dataset_id, epsilon=0.8), headers=analyst
        )
        assert refused.status_code == 409
        bad = logistic_job(dataset_id)
        bad["privacy"]["epsilon"] = -1
        assert client.post("/v1/jobs", json=bad, headers=analyst).status_code == 422

        before = scrape(client, admin)
        assert value(before, "dpfit_job_submissions_total", outcome="admitted") == 2
        assert value(before, "dpfit_job_submissions_total", outcome="replayed") == 1
        assert value(before, "dpfit_job_submissions_total", outcome="refused") == 1
        assert value(before, "dpfit_job_submissions_total", outcome="invalid") == 1
        assert value(before, "dpfit_job_queue_depth") == 2
        optimizer = {"optimizer": "output_perturbation_gd"}
        assert value(before, "dpfit_jobs", status="queued", **optimizer) == 2
        assert value(before, "dpfit_ledger_rows", kind="charge") == 2

        assert run_job(first.json()["id"], 1, url) == "succeeded"
        client.get(f"/v1/jobs/{first.json()['id']}", headers=analyst)
        after = scrape(client, admin)
        assert value(after, "dpfit_jobs", status="succeeded", **optimizer) == 1
        assert value(after, "dpfit_job_queue_depth") == 1
        assert value(after, "dpfit_job_duration_seconds_count", **optimizer) == 1
        budget = client.get(f"/v1/datasets/{dataset_id}/budget", headers=owner).json()
        spent = value(after, "dpfit_dataset_epsilon_spent", dataset_id=dataset_id)
        assert spent == pytest.approx(budget["epsilon_spent"])
        assert value(after, "dpfit_dataset_epsilon_budget", dataset_id=dataset_id) == 1.0

        # Latency by route template: the job's id is a path parameter, never a label.
        latency = "dpfit_http_request_duration_seconds_count"
        assert value(after, latency, method="GET", route="/v1/jobs/{job_id}", status="200") == 1
        text = client.get("/metrics", headers=bearer(admin)).text
        assert first.json()["id"] not in text


def test_public_metrics_carry_no_per_dataset_figures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with app_with(tmp_path, monkeypatch, metrics_access="public") as (client, keys, _):
        owner = bearer(keys["olivia"])
        dataset_id = client.post("/v1/datasets", json=credit_dataset(), headers=owner).json()["id"]
        families = scrape(client, None)
        assert "dpfit_dataset_epsilon_spent" not in families
        assert dataset_id not in client.get("/metrics").text
        assert value(families, "dpfit_job_queue_depth") == 0


def test_each_app_has_its_own_registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with app_with(tmp_path / "a", monkeypatch) as (one, keys_one, _):
        for _ in range(3):
            one.get("/healthz")
        with app_with(tmp_path / "b", monkeypatch) as (two, keys_two, _):
            first = scrape(one, keys_one["admin"])
            second = scrape(two, keys_two["admin"])
    latency = "dpfit_http_request_duration_seconds_count"
    assert value(first, latency, method="GET", route="/healthz", status="200") == 3
    assert value(second, latency, method="GET", route="/healthz", status="200") is None
