"""What the service's Dask worker plugins share: per-process state behind a lock, and finding
the plugin of the worker that runs the current task.

A plugin object is pickled on the client and sent to every worker, so it holds nothing
unpicklable until ``setup`` runs there; the lock is therefore made on first use.
"""

from __future__ import annotations

import threading
from typing import TypeVar

from distributed import WorkerPlugin


class LockedPlugin(WorkerPlugin):
    """A worker plugin whose state is guarded by one lock, created lazily on the worker."""

    _lock: threading.Lock | None = None

    def _locked(self) -> threading.Lock:
        if self._lock is None:
            self._lock = threading.Lock()
        return self._lock


P = TypeVar("P", bound=WorkerPlugin)


def current_plugin(name: str, kind: type[P]) -> P | None:
    """The plugin ``name`` of the Dask worker running this task, if it is a ``kind``; None
    outside a Dask worker (tests calling a task function directly) or when not registered."""
    from distributed import get_worker

    try:
        worker = get_worker()
    except ValueError:
        return None
    plugin = worker.plugins.get(name)
    return plugin if isinstance(plugin, kind) else None
