"""Several API processes (``DPFIT_API_WORKERS=2``): one supervisor owns the Dask cluster and the
recovery; the API processes admit exactly what one process would, each job runs once, and a
kill -9 of the whole service loses nothing (service/supervisor.py)."""

from __future__ import annotations

import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.fixtures import EXAMPLES
from tests.support.live import LiveServer, start_server
from tests.support.walkthrough import credit_dataset, logistic_job, write_large_credit

TWO_API_PROCESSES = {"DPFIT_API_WORKERS": "2"}


def _database(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if backend == "postgres":
        return str(request.getfixturevalue("private_postgres_database"))
    return f"sqlite:///{tmp_path / 'dpfit.db'}"


def _wait(client: httpx.Client, job_id: str, timeout: float = 180) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = client.get(f"/v1/jobs/{job_id}").json()
        if job["status"] in ("succeeded", "failed", "cancelled"):
            return dict(job)
        time.sleep(0.1)
    raise AssertionError(f"job {job_id} did not finish: {job}")


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_two_api_processes_admit_exactly_the_budget_and_run_each_job_once(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = _database(backend, tmp_path, request)
    server = start_server(url, [EXAMPLES], tmp_path, extra_env=TWO_API_PROCESSES)
    try:
        owner = server.client(server.key("owner", "owner"))
        analyst_key = server.key("analyst", "analyst")
        # A pure budget of ε = 1 and jobs of ε = 0.25: basic composition admits exactly four.
        dataset = owner.post("/v1/datasets", json=credit_dataset(epsilon=1.0, delta=0.0))
        assert dataset.status_code == 201, dataset.text
        dataset_id = dataset.json()["id"]
        owner.post(f"/v1/datasets/{dataset_id}/grants", json={"principal": "analyst"})
        body = logistic_job(dataset_id, epsilon=0.25, delta=0.0, iterations=50)

        def submit(_: int) -> tuple[int, str]:
            with server.client(analyst_key) as client:
                response = client.post("/v1/jobs", json=body)
                return response.status_code, response.json().get("id", "")

        with ThreadPoolExecutor(12) as pool:
            answers = list(pool.map(submit, range(12)))
        assert sorted(code for code, _ in answers) == [202] * 4 + [409] * 8
        analyst = server.client(analyst_key)
        for job_id in [job_id for code, job_id in answers if code == 202]:
            assert _wait(analyst, job_id)["status"] == "succeeded"

        ledger = owner.get(f"/v1/datasets/{dataset_id}/ledger").json()
        assert [c["kind"] for c in ledger["charges"]] == ["charge"] * 4
        assert ledger["consistent"]

        # Both API processes answered: each gives request ids of its own random 4-hex prefix (two
        # processes draw the same one with probability 1/65536).
        def request_id(_: int) -> str:
            with server.client(analyst_key) as client:
                return str(client.get(f"/v1/datasets/{dataset_id}/budget").headers["x-request-id"])

        with ThreadPoolExecutor(16) as pool:
            prefixes = {rid[:4] for rid in pool.map(request_id, range(200))}
        assert len(prefixes) == 2, prefixes

        # /metrics counts the requests of BOTH processes, whichever one answers the scrape
        # (one process's own counters would show a part of the 200, differing between scrapes).
        admin_key = server.key("admin", "admin")
        counts = {_budget_requests_counted(server.client(admin_key)) for _ in range(6)}
        assert counts == {200}, counts
    finally:
        server.stop()


def _budget_requests_counted(admin: httpx.Client) -> float:
    """``GET /v1/datasets/{dataset_id}/budget`` answers counted by the scraped histogram."""
    with admin:
        text = admin.get("/metrics").text
    prefix = "dpfit_http_request_duration_seconds_count{"
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(prefix)
        and 'route="/v1/datasets/{dataset_id}/budget"' in line
        and 'method="GET"' in line
    )


def test_a_killed_service_with_two_api_processes_recovers_each_job_once(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = _database("postgres", tmp_path, request)
    roots = [EXAMPLES, tmp_path]
    server: LiveServer = start_server(url, roots, tmp_path, extra_env=TWO_API_PROCESSES)
    try:
        owner = server.client(server.key("owner", "owner"))
        analyst_key = server.key("analyst", "analyst")
        analyst = server.client(analyst_key)
        name = write_large_credit(tmp_path, 100_000)
        dataset_id = owner.post("/v1/datasets", json=credit_dataset(uri=name)).json()["id"]
        owner.post(f"/v1/datasets/{dataset_id}/grants", json={"principal": "analyst"})
        body = logistic_job(dataset_id, epsilon=0.5, iterations=800)
        jobs = [analyst.post("/v1/jobs", json=body).json() for _ in range(3)]
        deadline = time.monotonic() + 120
        while analyst.get(f"/v1/jobs/{jobs[0]['id']}").json()["status"] != "running":
            assert time.monotonic() < deadline
            time.sleep(0.1)

        assert server.process is not None
        os.killpg(server.process.pid, signal.SIGKILL)
        server.process.wait(timeout=30)
        time.sleep(0.5)

        server.start()
        analyst = server.client(analyst_key)
        done = [_wait(analyst, job["id"]) for job in jobs]
        assert [job["status"] for job in done] == ["succeeded"] * 3, [j["error"] for j in done]
        assert len({job["model_id"] for job in done}) == 3
        ledger = owner.get(f"/v1/datasets/{dataset_id}/ledger").json()
        assert [c["kind"] for c in ledger["charges"]] == ["charge"] * 3
        assert ledger["consistent"]
    finally:
        server.stop()
