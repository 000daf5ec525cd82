"""An in-process dpfit app for API tests: real database (SQLite file or PostgreSQL), real routes
and auth, FastAPI's TestClient, and a dispatcher that leaves jobs queued (tests run a job
explicitly with the worker's own ``run_job`` when they need its model)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from service.api.app import create_app
from service.cli import create_key_cli, migrate
from service.settings import Settings
from tests.support.walkthrough import COPIES


class QueueOnly:
    """A dispatcher that records submissions and runs nothing: jobs stay ``queued``."""

    def __init__(self, settings: Settings, sessions: sessionmaker[Session]) -> None:
        self.submitted: list[tuple[str, int]] = []

    def submit(self, job_id: str, attempt: int) -> None:
        self.submitted.append((job_id, attempt))

    def close(self) -> None:
        pass

    def describe(self) -> str:
        return "none (in-process test)"


def bearer(key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"} if key else {}


@contextmanager
def in_process_app(
    database_url: str, data_root: Path, compute_processes: int | None = None
) -> Iterator[tuple[TestClient, str]]:
    """A migrated database, the app on it, and a first admin key made as `dpfit keys create`
    makes it. Yields the client (no key) and the admin key. The data roots are ``data_root``
    and the folder of ``credit_dataset()``'s fresh copies. ``compute_processes=0`` prices in
    the request's thread (a test that patches this process's functions needs it)."""
    migrate(database_url)
    settings = Settings(
        database_url=database_url,
        data_roots=(data_root, COPIES),
        workers=1,
        dask_scheduler=None,
        compute_processes=compute_processes,
    )
    admin_key = create_key_cli(database_url, "admin", "admin")
    app = create_app(settings, dispatcher_factory=QueueOnly)
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client, admin_key


class InProcessServer:
    """The in-process app behind the interface of :class:`tests.support.live.LiveServer`
    (``key(name, role)``, ``client(key)``), so an HTTP-behaviour test runs unchanged on it.

    Keys are made as on a live server: the first admin key as ``dpfit keys create`` makes it,
    every other one through POST /v1/keys. Jobs stay ``queued`` (:class:`QueueOnly`)."""

    def __init__(self, client: TestClient, admin_key: str, database_url: str) -> None:
        self.app_client = client
        self.database_url = database_url
        self.keys: dict[str, str] = {"admin": admin_key}
        self.roles: dict[str, str] = {"admin": "admin"}

    def key(self, name: str, role: str) -> str:
        if name in self.keys:
            if self.roles[name] != role:
                raise ValueError(f"principal {name!r} is a {self.roles[name]}, not a {role}")
            return self.keys[name]
        response = self.client(self.keys["admin"]).post(
            "/v1/keys", json={"name": name, "role": role}
        )
        response.raise_for_status()
        self.keys[name], self.roles[name] = response.json()["key"], role
        return self.keys[name]

    def client(self, key: str | None = None) -> TestClient:
        """A client of the running app (its lifespan is held by ``app_client``)."""
        return TestClient(self.app_client.app, raise_server_exceptions=False, headers=bearer(key))


@contextmanager
def in_process_server(database_url: str, data_root: Path) -> Iterator[InProcessServer]:
    """:func:`in_process_app` as an :class:`InProcessServer`."""
    with in_process_app(database_url, data_root) as (client, admin_key):
        yield InProcessServer(client, admin_key, database_url)
