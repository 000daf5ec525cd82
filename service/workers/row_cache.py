"""Encoded rows a worker keeps between jobs on the same data.

Analysts send many jobs to one dataset (other ε, other models, repeated fits); each used to read,
parse and encode the whole source again — for a 4,000-row CSV most of a one-step job's cost. A
worker now keeps the encoded rows of the **last** source it read, for the next job on it:

- **Exactly what a fresh read gives.** The key holds everything the encoding depends on — the
  registered fingerprint, the stored location, the encoder (features with their declared
  bounds, the intercept), the label spec and the loss's label bound — and rows are stored only
  after a read whose bytes were checked against that fingerprint (the runner's post-read
  check). A job still checks the source's fingerprint before its claim; a changed source never
  reaches the cache (its fingerprint differs from the registered one, so the job fails with a
  refund as before). Encoding is deterministic, so a cached ``X, Y`` is the fresh read's.
- **Read-only.** The arrays are stored with ``writeable = False``: an optimizer that wrote into
  its input would fail loudly instead of corrupting the next job's rows
  (``tests/unit/test_conformance.py`` fits every optimizer on read-only rows).
- **Bounded memory.** One entry per worker; it is dropped *before* a job reads another source
  and before a worker reads a data-parallel job's partition (:func:`drop_cached_rows`), so a
  worker never holds two sources' rows at once: a job's peak memory is what it was without the
  cache; and only rows of at most :data:`MAX_SHARE` of the worker's memory limit
  (:data:`UNLIMITED_CAP` bytes when the worker has none) are kept.
- **Private.** The rows stay in the worker process that read them, as they did during the job;
  nothing here is logged or leaves the process. Per-worker state lives in a Dask worker plugin
  (created in ``setup``), never in a module global; outside a Dask worker nothing is cached.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from service.workers.plugins import LockedPlugin, current_plugin

PLUGIN_NAME = "dpfit-row-cache"
#: The largest share of a worker's memory limit one cached source may take.
MAX_SHARE = 0.1
#: The cap when the worker has no memory limit.
UNLIMITED_CAP = 256 << 20

Rows = tuple[NDArray[np.float64], NDArray[np.float64]]


def row_key(
    fingerprint: str,
    location: str,
    encoder: dict[str, Any],
    label: dict[str, Any],
    label_bound: float | None,
) -> str:
    """The cache key of one encoding of one registered source (a SHA-256 of its facts)."""
    facts = [fingerprint, location, encoder, label, label_bound]
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()


@dataclass
class _Entry:
    key: str
    rows: Rows


class RowCache(LockedPlugin):
    """The last source's encoded rows of one worker process."""

    name = PLUGIN_NAME

    def __init__(self) -> None:
        # Nothing unpicklable here: the plugin travels to the workers; ``setup`` runs there.
        self._entry: _Entry | None = None
        self._limit = 0

    def setup(self, worker: Any) -> None:
        self._entry = None
        self._lock = threading.Lock()
        memory = int(getattr(worker.memory_manager, "memory_limit", 0) or 0)
        self._limit = int(MAX_SHARE * memory) if memory else UNLIMITED_CAP

    def teardown(self, worker: Any) -> None:
        self._entry = None

    def drop(self) -> None:
        """Forget the cached rows (their memory goes when no running job holds them)."""
        with self._locked():
            self._entry = None

    def rows(self, key: str, read: Callable[[], Rows]) -> Rows:
        """The rows of ``key``: kept ones, or ``read()`` (after dropping any other source's),
        kept if small enough. ``read`` must return rows already checked against the key's
        fingerprint; its exceptions propagate and leave nothing cached."""
        with self._locked():
            entry = self._entry
            if entry is not None and entry.key == key:
                return entry.rows
            self._entry = None  # never two sources' rows at once
        X, Y = read()
        X.flags.writeable = False
        Y.flags.writeable = False
        if X.nbytes + Y.nbytes <= self._limit:
            with self._locked():
                self._entry = _Entry(key, (X, Y))
        return X, Y


def drop_cached_rows() -> None:
    """Drop this worker's cached rows, if any (nothing outside a Dask worker). A data-parallel
    job calls it before a worker reads its partition: the plan of that job
    (``service.data.partitions.worker_overhead``) counts the partition's rows, not a previous
    job's cached source — up to :data:`MAX_SHARE` of the limit (90 MiB of a 900 MiB worker)."""
    plugin = current_plugin(PLUGIN_NAME, RowCache)
    if plugin is not None:
        plugin.drop()


def cached_rows(key: str, read: Callable[[], Rows]) -> Rows:
    """The worker's cached rows for ``key`` or a fresh ``read()``; outside a Dask worker
    always ``read()`` (made read-only all the same, so tests see what workers see)."""
    plugin = current_plugin(PLUGIN_NAME, RowCache)
    if plugin is not None:
        return plugin.rows(key, read)
    X, Y = read()
    X.flags.writeable = False
    Y.flags.writeable = False
    return X, Y
