"""Fair workers (issue 23, item 4) on a live `dpfit serve` with two Dask workers: while one
principal's long jobs run, another principal's small job runs at once — not after theirs.

No clock is asserted: the test checks the order of events (alice's job finished while bob's
jobs are still unfinished, and bob never held both workers). Before, Dask ran bob's first two
jobs on both workers and alice's job only after one of them ended.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx

from tests.support.fixtures import EXAMPLES
from tests.support.live import start_server
from tests.support.walkthrough import credit_dataset, logistic_job

FINAL = ("succeeded", "failed", "cancelled")


def long_job(dataset_id: str) -> dict[str, Any]:
    return {
        "dataset_id": dataset_id,
        "model": {"type": "logistic_regression", "l2": 0.01, "fit_intercept": True},
        "optimizer": {"name": "noisy_sgd_scs13", "params": {"passes": 200, "batch_size": 1}},
        "privacy": {"epsilon": 0.05, "delta": 1e-6},
    }


def wait_for(client: httpx.Client, job_id: str, wanted: tuple[str, ...]) -> dict[str, Any]:
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        job: dict[str, Any] = client.get(f"/v1/jobs/{job_id}").json()
        if job["status"] in wanted:
            return job
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} never reached {wanted}")


def test_another_principals_job_runs_while_one_principals_long_jobs_hold_the_queue(
    tmp_path: Path,
) -> None:
    server = start_server(f"sqlite:///{tmp_path / 'dpfit.db'}", [EXAMPLES], tmp_path, workers=2)
    try:
        owner = server.client(server.key("owner", "owner"))
        bob = server.client(server.key("bob", "analyst"))
        alice = server.client(server.key("alice", "analyst"))
        dataset = owner.post("/v1/datasets", json=credit_dataset(epsilon=100.0))
        assert dataset.status_code == 201, dataset.text
        dataset_id = dataset.json()["id"]
        for name in ("bob", "alice"):
            owner.post(f"/v1/datasets/{dataset_id}/grants", json={"principal": name})
        bobs = [bob.post("/v1/jobs", json=long_job(dataset_id)).json()["id"] for _ in range(3)]
        wait_for(bob, bobs[0], ("running",))

        small = alice.post("/v1/jobs", json=logistic_job(dataset_id, epsilon=0.1, iterations=1))
        assert small.status_code == 202, small.text
        done = wait_for(alice, small.json()["id"], FINAL)
        statuses = [bob.get(f"/v1/jobs/{job_id}").json()["status"] for job_id in bobs]

        assert done["status"] == "succeeded", done
        assert statuses == ["running", "queued", "queued"], statuses  # one slot per principal
        for job_id in bobs:
            bob.post(f"/v1/jobs/{job_id}/cancel")
        for job_id in bobs:
            wait_for(bob, job_id, FINAL)
    finally:
        server.stop()
