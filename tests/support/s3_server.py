"""A real S3-compatible server on loopback for tests: moto's server in a subprocess.

Not a mock of the client: s3fs talks HTTP to it exactly as to any S3 endpoint. The test process
(and, through the environment, a live `dpfit serve` and its workers) finds it by the standard
AWS variables returned by :func:`aws_env`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.support.live import free_port

ACCESS_KEY = "test-access-key"
SECRET_KEY = "test-secret-key-never-shown"
REGION = "us-east-1"


@dataclass(frozen=True)
class S3Server:
    endpoint: str

    def env(self) -> dict[str, str]:
        """The standard AWS environment that points a client at this server."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_DEFAULT_REGION": REGION,
        }

    def client(self) -> Any:
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            region_name=REGION,
        )

    def put(self, bucket: str, key: str, body: bytes) -> None:
        client = self.client()
        with contextlib.suppress(client.exceptions.BucketAlreadyOwnedByYou):
            client.create_bucket(Bucket=bucket)
        client.put_object(Bucket=bucket, Key=key, Body=body)

    def delete(self, bucket: str, key: str) -> None:
        self.client().delete_object(Bucket=bucket, Key=key)


@contextlib.contextmanager
def running_s3_server(log_dir: Path, timeout: float = 60.0) -> Iterator[S3Server]:
    """Start ``python -m moto.server`` on a free loopback port; stop it (its process group)
    afterwards."""
    port = free_port()
    log = open(log_dir / f"moto-{port}.log", "ab")  # noqa: SIM115
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"moto server exited early; see {log.name}")
            try:
                httpx.get(endpoint, timeout=2)
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"moto server did not start; see {log.name}") from None
                time.sleep(0.2)
        yield S3Server(endpoint=endpoint)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
        log.close()


@contextlib.contextmanager
def pointed_at(server: S3Server) -> Iterator[S3Server]:
    """This process's standard AWS variables pointing at ``server``; restored afterwards."""
    saved = {k: os.environ.get(k) for k in server.env()}
    os.environ.update(server.env())
    try:
        yield server
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
