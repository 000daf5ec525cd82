"""Crash safety with a real process kill: accepted jobs finish after a restart, once.

The whole `dpfit serve` process group (API + LocalCluster workers) is SIGKILLed mid-job, as a
crashed machine would be; a new server on the same database re-dispatches the unfinished jobs.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.fixtures import EXAMPLES
from tests.support.live import LiveServer, start_server
from tests.support.walkthrough import credit_dataset, logistic_job, write_large_credit


def wait(client: Any, job_id: str, pred: Any, timeout: float = 180) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = client.get(f"/v1/jobs/{job_id}").json()
        if pred(job):
            return job
        time.sleep(0.1)
    raise AssertionError(f"job {job_id} timed out: {job}")


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_jobs_survive_a_killed_server(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if backend == "postgres":
        url = request.getfixturevalue("private_postgres_database")
    else:
        url = f"sqlite:///{tmp_path / 'dpfit.db'}"
    server: LiveServer = start_server(url, data_roots=[EXAMPLES, tmp_path], home=tmp_path)
    try:
        owner = server.client(server.key("owner", "owner"))
        analyst_key = server.key("analyst", "analyst")
        analyst = server.client(analyst_key)
        name = write_large_credit(tmp_path, 100_000)
        dataset_id = owner.post("/v1/datasets", json=credit_dataset(uri=name)).json()["id"]
        owner.post(f"/v1/datasets/{dataset_id}/grants", json={"principal": "analyst"})
        body = logistic_job(dataset_id, epsilon=0.5, iterations=800)
        running = analyst.post("/v1/jobs", json=body).json()
        queued = analyst.post("/v1/jobs", json=body).json()
        wait(
            analyst, running["id"], lambda j: j["status"] == "running" and j["progress"]["step"] > 0
        )

        assert server.process is not None
        os.killpg(server.process.pid, signal.SIGKILL)
        server.process.wait(timeout=30)
        time.sleep(0.5)

        server.start()
        analyst = server.client(analyst_key)
        for job in (running, queued):
            done = wait(analyst, job["id"], lambda j: j["status"] in ("succeeded", "failed"))
            assert done["status"] == "succeeded", done["error"]
            model = analyst.get(f"/v1/models/{done['model_id']}")
            assert model.status_code == 200
        ledger = owner.get(f"/v1/datasets/{dataset_id}/ledger").json()
        assert [c["kind"] for c in ledger["charges"]] == ["charge", "charge"]
        assert ledger["consistent"]
        models = {analyst.get(f"/v1/jobs/{j['id']}").json()["model_id"] for j in (running, queued)}
        assert len(models) == 2
    finally:
        server.stop()
