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
def in_process_app(database_url: str, data_root: Path) -> Iterator[tuple[TestClient, str]]:
    """A migrated database, the app on it, and a first admin key made as `dpfit keys create`
    makes it. Yields the client (no key) and the admin key. The data roots are ``data_root``
    and the folder of ``credit_dataset()``'s fresh copies."""
    migrate(database_url)
    settings = Settings(
        database_url=database_url, data_roots=(data_root, COPIES), workers=1, dask_scheduler=None
    )
    admin_key = create_key_cli(database_url, "admin", "admin")
    app = create_app(settings, dispatcher_factory=QueueOnly)
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client, admin_key
