"""Engines and sessions for SQLite (embedded default) and PostgreSQL.

SQLite: WAL journal, a busy timeout, foreign keys on, and every transaction opened with
``BEGIN IMMEDIATE`` — SQLite's only way to take the write lock up front, which is what makes the
ledger's read-check-insert admission atomic across processes
(docs/ledger.md#admission-is-one-transaction). PostgreSQL: the
admission transaction locks the dataset row with ``SELECT … FOR UPDATE`` (ledger/admission.py).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event, exc
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

SQLITE_BUSY_TIMEOUT_MS = 60_000
# Threads serving sync routes in one API process (service/api/app.py); the pools are sized to it.
API_THREADS = 16


def make_engine(url: str, must_exist: bool = False, pre_ping: bool = True) -> Engine:
    """An engine for ``url`` with the settings the ledger's atomicity relies on.

    ``must_exist`` (the API server): a SQLite file is opened read-write but never created, and a
    pooled connection whose file was deleted is discarded at checkout — so a deleted database
    answers "unable to open database file" (a 503, see :func:`database_unavailable`) instead of
    silently writing into an unlinked file or a new empty one.

    ``pre_ping=False`` (the API server) skips PostgreSQL's liveness round trip at every checkout:
    a connection found dead then fails its request with a disconnect error (a 503, see
    :func:`database_unavailable`) and SQLAlchemy replaces the whole pool. Workers keep the ping
    (a job's writes should not fail on a connection that died while idle).
    """
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        timeout = SQLITE_BUSY_TIMEOUT_MS / 1000
        path = parsed.database
        if must_exist and path and path != ":memory:" and not path.startswith("file:"):
            file = Path(path).resolve()

            def connect() -> sqlite3.Connection:
                return sqlite3.connect(
                    f"{file.as_uri()}?mode=rw", uri=True, timeout=timeout, check_same_thread=False
                )

            engine = create_engine(
                url, creator=connect, pool_size=API_THREADS, max_overflow=API_THREADS // 2
            )
            _discard_if_deleted(engine, file)
        else:
            engine = create_engine(
                url, connect_args={"timeout": timeout, "check_same_thread": False}
            )
        _configure_sqlite(engine)
        return engine
    # One connection per API thread stays open (connecting is a process fork on the server; an
    # overflow connection is closed when it returns, so a pool smaller than the concurrency
    # churns), a few more for the job-event thread and dispatcher callbacks.
    return create_engine(
        url, pool_pre_ping=pre_ping, pool_size=API_THREADS, max_overflow=API_THREADS // 2
    )


def database_unavailable(error: BaseException) -> bool:
    """Whether ``error`` means the database is unreachable or its schema is missing.

    True for connection failures and disconnects (``OperationalError``, ``InterfaceError``, a
    DBAPI error that invalidated its connection), a full connection pool, SQLite's "no such
    table" / "unable to open database file" (both ``OperationalError``) and PostgreSQL's
    undefined table/column (a database recreated empty or not migrated). The API answers these
    with 503 and ``Retry-After``; everything else stays a 500.
    """
    if isinstance(error, exc.TimeoutError | exc.OperationalError | exc.InterfaceError):
        return True
    if isinstance(error, exc.DBAPIError) and error.connection_invalidated:
        return True
    if isinstance(error, exc.ProgrammingError):
        return getattr(error.orig, "sqlstate", None) in ("42P01", "42703")
    return False


def _discard_if_deleted(engine: Engine, file: Path) -> None:
    @event.listens_for(engine, "checkout")
    def _on_checkout(*_: Any) -> None:
        if not os.path.exists(file):
            raise exc.DisconnectionError("the SQLite database file was deleted")


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
        if connection.get_execution_options().get(READ_ONLY_OPTION):
            connection.exec_driver_sql("BEGIN")  # deferred: a reader never takes the write lock
        else:
            connection.exec_driver_sql("BEGIN IMMEDIATE")


READ_ONLY_OPTION = "dpfit_read_only"


def session_factory(engine: Engine) -> sessionmaker[Session]:
    """Sessions whose every transaction may write (SQLite: ``BEGIN IMMEDIATE``)."""
    return sessionmaker(bind=engine, expire_on_commit=False)


class ApiSessions(sessionmaker[Session]):
    """The API's sessions: ``sessions()`` reads, ``sessions.begin()`` writes.

    On SQLite a read session begins a *deferred* transaction (a WAL snapshot, no lock), so reads
    never queue behind the write lock — before, every GET began ``BEGIN IMMEDIATE`` and all
    requests were serialised with each other and with the workers' progress writes. Write
    transactions (``begin()``) still take the lock up front, which the ledger's admission relies
    on. A read session must not write (the API's never do; workers use :func:`session_factory`).
    On PostgreSQL a read session comes from a pool of autocommit connections: no
    ``BEGIN``/``ROLLBACK`` round trips (four of a GET's round trips before).
    """

    def __init__(self, engine: Engine) -> None:
        super().__init__(bind=engine, expire_on_commit=False)
        self._reader_engine: Engine | None = None
        if is_sqlite(engine):
            readers = engine.execution_options(**{READ_ONLY_OPTION: True})
        else:
            # Autocommit connections in a pool of their own: switching a pooled connection's
            # mode at every checkout would cost more than the round trips it saves.
            # (PostgreSQL's READ COMMITTED already gave every statement its own snapshot.)
            readers = self._reader_engine = create_engine(
                engine.url,
                isolation_level="AUTOCOMMIT",
                pool_size=API_THREADS,
                max_overflow=API_THREADS // 2,
            )
        self._readers = sessionmaker(bind=readers, expire_on_commit=False)

    @contextmanager
    def snapshot(self) -> Iterator[Session]:
        """A read session whose statements all see ONE snapshot (an audit comparing two reads).
        SQLite: the read session's deferred transaction already is one, from its first read;
        PostgreSQL: a REPEATABLE READ transaction (the autocommit readers give one per
        statement)."""
        if self._reader_engine is None:
            with self._readers() as session:
                yield session
            return
        engine = self.kw["bind"].execution_options(isolation_level="REPEATABLE READ")
        with Session(bind=engine, expire_on_commit=False) as session:
            yield session

    def dispose(self) -> None:
        """Close the readers' own pool, if they have one (the write engine is the caller's)."""
        if self._reader_engine is not None:
            self._reader_engine.dispose()

    def __call__(self, **kw: Any) -> Session:
        return self._readers(**kw)

    @contextmanager
    def begin(self) -> Iterator[Session]:  # type: ignore[override]
        with super().__call__() as session, session.begin():
            yield session


def is_sqlite(engine: Engine) -> bool:
    return engine.dialect.name == "sqlite"


ALEMBIC_DIR = Path(__file__).resolve().parents[2] / "alembic"


def expected_schema_revision() -> str | None:
    """The Alembic head this code expects (None when the migrations are not shipped)."""
    if not (ALEMBIC_DIR / "versions").is_dir():
        return None
    from alembic.script import ScriptDirectory

    return ScriptDirectory(str(ALEMBIC_DIR)).get_current_head()


def schema_revision(session: Session) -> str | None:
    """The database's Alembic revision, or None when it has no ``alembic_version`` table (a
    database created empty). Connection errors propagate."""
    from sqlalchemy import inspect, text

    connection = session.connection()
    if not inspect(connection).has_table("alembic_version"):
        return None
    return connection.execute(text("SELECT version_num FROM alembic_version")).scalar()
