"""Engines and sessions for SQLite (embedded default) and PostgreSQL.

SQLite: WAL journal, a busy timeout, foreign keys on, and every transaction opened with
``BEGIN IMMEDIATE`` — SQLite's only way to take the write lock up front, which is what makes the
ledger's read-check-insert admission atomic across processes (DESIGN §2). PostgreSQL: the
admission transaction locks the dataset row with ``SELECT … FOR UPDATE`` (ledger/admission.py).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

SQLITE_BUSY_TIMEOUT_MS = 60_000


def make_engine(url: str) -> Engine:
    """An engine for ``url`` with the settings the ledger's atomicity relies on."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        engine = create_engine(
            url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000, "check_same_thread": False}
        )
        _configure_sqlite(engine)
        return engine
    return create_engine(url, pool_pre_ping=True, pool_size=10, max_overflow=20)


def _configure_sqlite(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Hand transaction control to SQLAlchemy's "begin" event below (pysqlite's own
        # implicit BEGIN is DEFERRED and would let two writers read the same budget).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")


def session_factory(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(bind=engine, expire_on_commit=False)


def is_sqlite(engine: Engine) -> bool:
    return engine.dialect.name == "sqlite"
