"""Starting and stopping real `dpfit serve` processes for integration tests."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.support.walkthrough import COPIES, credit_dataset, logistic_job

BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class LiveServer:
    """A running `dpfit serve` (its own process group) and the keys made for tests."""

    database_url: str
    port: int
    env: dict[str, str]
    home: Path
    process: subprocess.Popen[bytes] | None = None
    keys: dict[str, str] = field(default_factory=dict)
    roles: dict[str, str] = field(default_factory=dict)
    groups: list[int] = field(default_factory=list)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def key(self, name: str, role: str) -> str:
        """An API key for principal ``name``: the first admin key comes from the CLI (as for
        a newcomer), every other key from POST /v1/keys. A principal has one role, so asking
        for a known name with another role is a test bug (the service would answer 409)."""
        if name in self.keys:
            if self.roles.get(name, role) != role:
                raise ValueError(f"principal {name!r} is a {self.roles[name]}, not a {role}")
            return self.keys[name]
        if not self.keys:
            out = subprocess.run(
                [str(BIN / "dpfit"), "keys", "create", "--role", "admin", "--name", "admin"],
                env=self.env,
                check=True,
                capture_output=True,
                text=True,
            )
            self.keys["admin"] = out.stdout.strip().splitlines()[-1]
            self.roles["admin"] = "admin"
            if name == "admin":
                return self.key(name, role)
        if name not in self.keys:
            with self.client(self.keys["admin"]) as admin:
                response = admin.post("/v1/keys", json={"name": name, "role": role})
                response.raise_for_status()
                self.keys[name] = response.json()["key"]
                self.roles[name] = role
        return self.keys[name]

    def client(self, key: str | None = None, timeout: float = 60.0) -> httpx.Client:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout)

    def start(self, timeout: float = 90.0) -> None:
        log = open(self.home / f"server-{self.port}.log", "ab")  # noqa: SIM115
        self.process = subprocess.Popen(
            [str(BIN / "dpfit"), "serve", "--host", "127.0.0.1", "--port", str(self.port)],
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.groups.append(self.process.pid)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"dpfit serve exited early; see {log.name}")
            try:
                if httpx.get(f"{self.base_url}/healthz", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"dpfit serve did not become healthy; see {log.name}")

    def kill(self) -> None:
        """SIGKILL the server process only (its orphaned workers are reaped by ``stop``)."""
        assert self.process is not None
        self.process.kill()
        self.process.wait(timeout=30)

    def stop(self) -> None:
        """Stop the server gracefully, then kill whatever is left of every group it started."""
        if self.process is not None:
            try:
                os.killpg(self.process.pid, signal.SIGTERM)
                self.process.wait(timeout=30)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                pass
        for group in self.groups:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, signal.SIGKILL)
        self.process = None


def start_server(
    database_url: str,
    data_roots: list[Path],
    home: Path,
    workers: int = 1,
    scheduler: str | None = None,
    extra_env: dict[str, str] | None = None,
) -> LiveServer:
    env = dict(os.environ)
    env.update(
        DPFIT_DATABASE_URL=database_url,
        DPFIT_DATA_ROOTS=os.pathsep.join(str(p) for p in [*data_roots, COPIES]),
        DPFIT_WORKERS=str(workers),
        # The server's Dask TLS certificates live in its home (made at first start).
        DPFIT_DASK_TLS_DIR=str(home / "dask-tls"),
        PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}",
    )
    if scheduler:
        env["DPFIT_DASK_SCHEDULER"] = scheduler
    env.update(extra_env or {})
    server = LiveServer(database_url=database_url, port=free_port(), env=env, home=home)
    server.start()
    return server


def run_walkthrough_job(server: LiveServer, timeout: float = 120.0) -> dict[str, object]:
    """The walkthrough on ``server``: an owner registers a fresh copy of the example data and
    grants an analyst, who submits one job; returns the job once finished (asserting each step
    answered as documented)."""
    owner = server.client(server.key("owner", "owner"))
    analyst = server.client(server.key("analyst", "analyst"))
    created = owner.post("/v1/datasets", json=credit_dataset())
    assert created.status_code == 201, created.text
    dataset_id = created.json()["id"]
    granted = owner.post(f"/v1/datasets/{dataset_id}/grants", json={"principal": "analyst"})
    assert granted.status_code < 300, granted.text
    job = analyst.post("/v1/jobs", json=logistic_job(dataset_id))
    assert job.status_code == 202, job.text
    deadline = time.monotonic() + timeout
    while (state := analyst.get(f"/v1/jobs/{job.json()['id']}").json())["status"] in (
        "queued",
        "running",
    ):
        assert time.monotonic() < deadline, "job did not finish"
        time.sleep(0.1)
    return dict(state)
