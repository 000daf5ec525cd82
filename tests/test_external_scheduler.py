"""DPFIT_DASK_SCHEDULER: the service dispatches to an external Dask scheduler and its workers
(here started as separate `dask scheduler` / `dask worker` processes on loopback)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import EXAMPLES
from tests.live import free_port, start_server
from tests.walkthrough import credit_dataset, logistic_job

BIN = Path(sys.executable).parent


@pytest.fixture
def dask_cluster(tmp_path: Path) -> Iterator[str]:
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    log = open(tmp_path / "dask.log", "ab")  # noqa: SIM115
    common = {
        "stdout": log,
        "stderr": subprocess.STDOUT,
        "start_new_session": True,
        "cwd": tmp_path,
    }
    scheduler = subprocess.Popen(
        [
            str(BIN / "dask"),
            "scheduler",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--no-dashboard",
        ],
        **common,
    )
    worker = subprocess.Popen(
        [
            str(BIN / "dask"),
            "worker",
            address,
            "--nworkers",
            "1",
            "--nthreads",
            "1",
            "--no-dashboard",
            "--host",
            "127.0.0.1",
        ],
        **common,
    )
    try:
        yield address
    finally:
        for process in (worker, scheduler):
            os.killpg(process.pid, signal.SIGTERM)
        for process in (worker, scheduler):
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)


def test_jobs_run_on_an_external_scheduler(dask_cluster: str, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'dpfit.db'}"
    server = start_server(url, data_roots=[EXAMPLES], home=tmp_path, scheduler=dask_cluster)
    try:
        health = httpx.get(f"{server.base_url}/healthz").json()
        assert health["workers"].startswith("external scheduler")
        owner = server.client(server.key("owner", "owner"))
        analyst = server.client(server.key("analyst", "analyst"))
        dataset_id = owner.post("/v1/datasets", json=credit_dataset()).json()["id"]
        owner.post(f"/v1/datasets/{dataset_id}/grants", json={"principal": "analyst"})
        job = analyst.post("/v1/jobs", json=logistic_job(dataset_id)).json()
        deadline = time.monotonic() + 120
        while (state := analyst.get(f"/v1/jobs/{job['id']}").json())["status"] in (
            "queued",
            "running",
        ):
            assert time.monotonic() < deadline
            time.sleep(0.1)
        assert state["status"] == "succeeded", state["error"]
    finally:
        server.stop()
