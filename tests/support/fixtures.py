"""Shared fixtures: PostgreSQL databases, live `dpfit serve` processes and in-process apps.

PostgreSQL tests use ``DPFIT_TEST_POSTGRES_URL`` (default: the local server, trust auth, db
``test``); each test session creates its own database and drops it afterwards. When the server
is unreachable the tests skip — except under ``CI=true``, where they fail.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from tests.support.inprocess import InProcessServer, in_process_server
from tests.support.live import LiveServer, start_server

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
DEFAULT_PG = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


def _postgres_admin_url() -> str:
    return os.environ.get("DPFIT_TEST_POSTGRES_URL", DEFAULT_PG)


def _require_postgres() -> None:
    url = _postgres_admin_url()
    try:
        engine = create_engine(url)
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
        engine.dispose()
    except Exception as exc:  # noqa: BLE001
        message = (
            f"PostgreSQL unreachable at {make_url(url).render_as_string()}: {type(exc).__name__}"
        )
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message + " (CI=true: PostgreSQL tests must run)")
        pytest.skip(message)


@pytest.fixture(scope="session")
def postgres_database() -> Iterator[str]:
    """A fresh PostgreSQL database for this test session; yields its SQLAlchemy URL."""
    yield from _fresh_postgres_database()


@pytest.fixture
def private_postgres_database() -> Iterator[str]:
    """A fresh PostgreSQL database for one test (e.g. one that restarts its own server)."""
    yield from _fresh_postgres_database()


def _fresh_postgres_database() -> Iterator[str]:
    _require_postgres()
    admin_url = make_url(_postgres_admin_url())
    name = f"dpfit_test_{os.getpid()}_{secrets.token_hex(3)}"
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = admin_url.set(database=name).render_as_string(hide_password=False)
    try:
        yield url
    finally:
        with admin.connect() as conn:
            conn.execute(
                text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = :name AND pid <> pg_backend_pid()"
                ),
                {"name": name},
            )
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}"'))
        admin.dispose()


@pytest.fixture(scope="session")
def sqlite_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """A live `dpfit serve` on its embedded default (SQLite file + LocalCluster)."""
    home = tmp_path_factory.mktemp("sqlite-server")
    url = f"sqlite:///{home / 'dpfit.db'}"
    server = start_server(url, data_roots=[EXAMPLES, home], home=home)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def pg_server(
    postgres_database: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    """A live `dpfit serve` on PostgreSQL."""
    home = tmp_path_factory.mktemp("pg-server")
    server = start_server(postgres_database, data_roots=[EXAMPLES, home], home=home)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(params=["sqlite", "postgres"])
def server(request: pytest.FixtureRequest) -> LiveServer:
    """Each test using this runs against both live servers."""
    if request.param == "postgres":
        return request.getfixturevalue("pg_server")
    return request.getfixturevalue("sqlite_server")


@pytest.fixture(scope="session")
def sqlite_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessServer]:
    """The in-process app (tests/support/inprocess.py) on an SQLite file, for the session."""
    home = tmp_path_factory.mktemp("sqlite-app")
    with in_process_server(f"sqlite:///{home / 'dpfit.db'}", EXAMPLES) as app:
        yield app


@pytest.fixture(scope="session")
def pg_app() -> Iterator[InProcessServer]:
    """The in-process app on a fresh PostgreSQL database of its own, for the session."""
    for url in _fresh_postgres_database():
        with in_process_server(url, EXAMPLES) as app:
            yield app


@pytest.fixture(params=["sqlite", "postgres"])
def app_server(request: pytest.FixtureRequest) -> InProcessServer:
    """Each test using this runs against the in-process app on both databases."""
    if request.param == "postgres":
        return request.getfixturevalue("pg_app")
    return request.getfixturevalue("sqlite_app")
