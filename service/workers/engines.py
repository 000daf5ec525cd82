"""Database engines kept per worker process, so a job does not pay for a new connection.

A fresh SQLAlchemy engine costs its first connection (≈ 20–25 ms on PostgreSQL over TCP, with the
dialect's start-up queries) on every job; a pooled one costs ≈ 3 ms per transaction. The engines
live in a Dask worker plugin — state owned by the worker, created in ``setup`` and disposed in
``teardown`` — not in a module global. Outside a Dask worker (tests calling ``run_job``
directly) the caller gets a temporary engine that is disposed after the job.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from sqlalchemy import Engine

from service.db.session import make_engine
from service.workers.plugins import LockedPlugin, current_plugin

PLUGIN_NAME = "dpfit-engines"


class WorkerEngines(LockedPlugin):
    """One engine per database URL for the lifetime of a worker process."""

    name = PLUGIN_NAME

    def __init__(self) -> None:
        # Nothing unpicklable here: the plugin travels to the workers; ``setup`` runs there.
        self._engines: dict[str, Engine] = {}

    def setup(self, worker: Any) -> None:
        self._engines = {}
        self._lock = threading.Lock()

    def teardown(self, worker: Any) -> None:
        with self._locked():
            engines, self._engines = list(self._engines.values()), {}
        for engine in engines:
            engine.dispose()

    def engine(self, url: str) -> Engine:
        with self._locked():
            engine = self._engines.get(url)
            if engine is None:
                engine = self._engines[url] = make_engine(url)
            return engine


@contextlib.contextmanager
def job_engine(url: str) -> Iterator[Engine]:
    """The worker's pooled engine for ``url``, or a temporary one outside a worker."""
    plugin = current_plugin(PLUGIN_NAME, WorkerEngines)
    if plugin is not None:
        yield plugin.engine(url)
        return
    engine = make_engine(url)
    try:
        yield engine
    finally:
        engine.dispose()
