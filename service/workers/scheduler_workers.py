"""The Dask scheduler's workers, fetched from the scheduler at each call.

``Client.scheduler_info()`` fetches every worker's entry, stores the answer in the client's
cache and returns the cache; Dask's own periodic refresh (``distributed.client.
scheduler-info-interval``) writes that cache too, with cluster totals only and an empty
``"workers"`` (distributed 2026.8: ``_update_scheduler_info(n_workers=0)``). When the refresh
lands between the fetch and the return, the caller sees no workers at all: a data-parallel
driver took that for "a worker holding a partition left the cluster" and restarted the job
(seen on a loaded 2-core host: 2 of 6 runs of ``tests/live/test_data_parallel.py``'s pause
test), and the dispatcher would size its slots from zero threads. :func:`scheduler_workers`
returns the scheduler's answer itself, never the cache.
"""

from __future__ import annotations

from typing import Any

__all__ = ["scheduler_workers"]


def scheduler_workers(client: Any) -> dict[str, dict[str, Any]]:
    """The scheduler's current workers (address → its entry: ``status``, ``nthreads``,
    ``memory_limit`` …) through the synchronous ``client``, asked for now."""
    identity = client.sync(client.scheduler.identity, n_workers=-1)
    return dict(identity.get("workers") or {})
