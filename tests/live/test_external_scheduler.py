"""DPFIT_DASK_SCHEDULER: the service dispatches to an external Dask scheduler and its workers
(here started as separate `dask scheduler` / `dask worker` processes on loopback), exactly as the
docs/reference/cluster.md#security-of-the-worker-cluster says: mutual TLS with a set made by
`python -m service.workers.security DIR`, `--preload service.workers.cluster` (no HTTP server)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from distributed import Client
from distributed.security import Security

from service.workers.security import TlsSet
from tests.support.dask_net import LOOPBACK, listeners, tls_args
from tests.support.fixtures import EXAMPLES
from tests.support.live import free_port, start_server
from tests.support.walkthrough import COPIES, credit_dataset, logistic_job

BIN = Path(sys.executable).parent


@dataclass(frozen=True)
class ExternalCluster:
    address: str
    pids: tuple[int, ...]


@pytest.fixture
def dask_cluster(tmp_path: Path) -> Iterator[ExternalCluster]:
    made = subprocess.run(
        [sys.executable, "-m", "service.workers.security", str(tmp_path / "dask-tls")],
        check=True,
        capture_output=True,
        text=True,
    )
    assert "--tls-cert" in made.stdout
    tls = TlsSet(tmp_path / "dask-tls")
    port = free_port()
    address = f"tls://127.0.0.1:{port}"
    log = open(tmp_path / "dask.log", "ab")  # noqa: SIM115
    # Workers read the sources themselves: they need the service's data roots.
    roots = os.pathsep.join(str(p) for p in (EXAMPLES, COPIES))
    common = {
        "stdout": log,
        "stderr": subprocess.STDOUT,
        "start_new_session": True,
        "cwd": tmp_path,
        "env": dict(os.environ, DPFIT_DATA_ROOTS=roots),
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
            "--dashboard-address",
            "127.0.0.1:0",
            "--preload",
            "service.workers.cluster",
            *tls_args(tls, "scheduler"),
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
            "--dashboard-address",
            "127.0.0.1:0",
            "--host",
            "127.0.0.1",
            "--preload",
            "service.workers.cluster",
            *tls_args(tls, "worker"),
        ],
        **common,
    )
    try:
        yield ExternalCluster(address, (scheduler.pid, worker.pid))
    finally:
        for process in (worker, scheduler):
            os.killpg(process.pid, signal.SIGTERM)
        for process in (worker, scheduler):
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)


def test_jobs_run_on_an_external_scheduler(dask_cluster: ExternalCluster, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'dpfit.db'}"
    # start_server points DPFIT_DASK_TLS_DIR at tmp_path/dask-tls: the set the cluster uses.
    server = start_server(url, data_roots=[EXAMPLES], home=tmp_path, scheduler=dask_cluster.address)
    try:
        # The external cluster is closed too: loopback only, TLS only, no HTTP page.
        ports = [s.port for pid in dask_cluster.pids for s in listeners(pid) if s.kind == "tcp"]
        assert len(ports) == 3, ports  # scheduler, nanny, worker: their HTTP servers are shut
        for pid in dask_cluster.pids:
            assert all(s.ip in LOOPBACK for s in listeners(pid)), listeners(pid)
        for port in ports:
            for page in ("/health", "/json/identity.json", "/metrics"):
                with pytest.raises(httpx.HTTPError):
                    httpx.get(f"http://127.0.0.1:{port}{page}", timeout=5)
        foreign = Security.temporary()  # a certificate of another CA
        with (
            pytest.raises(OSError),
            Client(dask_cluster.address, security=foreign, timeout="3s") as client,
        ):
            client.run_on_scheduler(os.getpid)
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
