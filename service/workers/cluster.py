"""The embedded Dask cluster with a closed control plane: TLS only, one interface, no HTTP.

Dask's ``Scheduler`` and ``Worker`` always start a Tornado HTTP server (``start_http_server`` is
called unconditionally; ``dashboard=False`` only drops the Bokeh pages, and the scheduler's
``/info``, ``/json``, ``/eventstream``, ``/metrics`` and ``/health`` routes stay). With
``LocalCluster(dashboard_address=":0")`` that server listened on 0.0.0.0 and its pages named
every job (issue 9). Here the server classes simply never start it: :class:`ClosedScheduler` and
:class:`ClosedWorker` override ``start_http_server`` with a no-op, so no HTTP socket exists at all.
Nothing else in ``distributed`` needs that server unless the dashboard, Jupyter or the ``ws://``
protocol is enabled, which we never do. Nannies have no HTTP server.

Every listener (scheduler, nannies, workers) binds to ``settings.dask_host`` (default
``127.0.0.1``) and speaks TLS with mutual authentication (:mod:`service.workers.security`).

For an external cluster, ``dask scheduler``/``dask worker`` take ``--preload
service.workers.cluster``: :func:`dask_setup` closes the HTTP server those commands started
(docs/reference/cluster.md#security-of-the-worker-cluster).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from distributed import Nanny, Scheduler, SpecCluster, Worker

from service.data.partitions import PAUSE_FRACTION, TERMINATE_FRACTION, worker_memory_limit
from service.logging_setup import use_log_format
from service.workers.priority import lower_priority

if TYPE_CHECKING:
    from distributed.security import Security

    from service.settings import Settings

logger = logging.getLogger("dpfit.dispatch")


#: Dask settings of every embedded worker beside the memory thresholds. The statistical
#: profiler is off: it samples the stacks of running tasks every 10 ms and keeps one tree per
#: second for ``distributed.admin.low-level-log-length`` (1,000) seconds, for the dashboard,
#: which no worker here serves. A job's driver is a task that runs for the whole job: a
#: worker polling in one grew 6 MiB in 90 s with the profiler and 0 without (measured), and the
#: service's driver of the 6e6 × 40 job peaked 9–19 MiB above the workers that only hold rows.
#: External workers: ``DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED=False``
#: (docs/reference/cluster.md).
WORKER_CONFIG: dict[str, object] = {"distributed.worker.profile.enabled": False}


class ClosedScheduler(Scheduler):
    """A Dask scheduler without an HTTP server (no dashboard, no info/json/metrics pages)."""

    def start_http_server(self, *args: Any, **kwargs: Any) -> None:
        """Start nothing: the scheduler serves Dask's TLS protocol only."""


class ClosedWorker(Worker):
    """A Dask worker without an HTTP server (no /metrics, /health or dashboard), running at the
    nice value ``nice`` (service/workers/priority.py; 0: unchanged). Given ``log_format``
    (``DPFIT_LOG_FORMAT``), the worker process writes its lines — dpfit's (a job's failure, its
    time limit) and Dask's own (memory warnings) — in the API process's format, so one log holds
    one format (docs/reference/configuration.md, "Metrics and logs")."""

    def __init__(
        self, *args: Any, nice: int = 0, log_format: str | None = None, **kwargs: Any
    ) -> None:
        lower_priority(nice)
        if log_format is not None:
            use_log_format(log_format)
        super().__init__(*args, **kwargs)

    def start_http_server(self, *args: Any, **kwargs: Any) -> None:
        """Start nothing: the worker serves Dask's TLS protocol only."""


class ThresholdNanny(Nanny):
    """A nanny that restarts its worker above ``partitions.TERMINATE_FRACTION`` of its memory
    limit. The nanny reads ``distributed.worker.memory.terminate`` from *its own* process's
    configuration (the API process; Dask's default 0.95), not from the ``config`` it passes to
    its worker — at 0.95 it would restart a worker at the very threshold where it pauses."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.memory_manager.memory_terminate_fraction = TERMINATE_FRACTION


def start_cluster(settings: Settings, security: Security) -> SpecCluster:
    """A ``SpecCluster`` shaped like ``LocalCluster(processes=True, threads_per_worker=1)``:
    one ``ClosedScheduler`` in this process, ``settings.workers`` nannies (in this process) each
    running one ``ClosedWorker`` process at nice ``settings.worker_nice``, every listener
    ``tls://`` on ``settings.dask_host``. Each worker's memory limit is
    :func:`worker_memory_limit` (``DPFIT_WORKER_MEMORY``, else the machine's share), with Dask's
    pause and terminate thresholds at ``partitions.PAUSE_FRACTION`` / ``TERMINATE_FRACTION``."""
    host = settings.dask_host
    scheduler = {
        "cls": ClosedScheduler,
        "options": {
            "host": host,
            "port": 0,
            "protocol": "tls://",
            "security": security,
            "dashboard": False,
            "dashboard_address": None,
        },
    }
    worker = {
        "cls": ThresholdNanny,
        "options": {
            "worker_class": ClosedWorker,
            "host": host,
            "protocol": "tls://",
            "security": security,
            "nthreads": 1,
            "nice": settings.worker_nice,
            "log_format": settings.log_format,
            "memory_limit": worker_memory_limit(settings) or 0,
            # Rows of data-parallel jobs live outside Dask's managed memory. Jobs are planned to
            # peak at partitions.DATA_FRACTION of the limit, below the pause; a paused
            # worker still answers its actors (the steps), and the driver waits for it.
            "config": {
                "distributed.worker.memory.pause": PAUSE_FRACTION,
                "distributed.worker.memory.terminate": TERMINATE_FRACTION,
                **WORKER_CONFIG,
            },
            # Arrow on malloc, which Dask's MALLOC_TRIM_THRESHOLD_ makes hand freed memory back:
            # a worker that read a partition keeps ≈ 25 MiB less (bench/RESULTS.md, section 5).
            "env": {"ARROW_DEFAULT_MEMORY_POOL": "system"},
            "dashboard": False,
            "dashboard_address": None,
            "silence_logs": logging.WARN,
        },
    }
    return SpecCluster(
        scheduler=scheduler,
        workers={i: worker for i in range(settings.workers)},
        worker=worker,
        security=security,
        silence_logs=logging.WARN,
    )


def dask_setup(server: object) -> None:
    """``--preload service.workers.cluster`` for ``dask scheduler``/``dask worker``: close the
    HTTP server the command started, so no page answers (Dask runs preloads after it started)."""
    http_server = getattr(server, "http_server", None)
    if http_server is None:
        return
    http_server.stop()
    services = getattr(server, "services", {})
    if services.get("dashboard") is http_server:
        del services["dashboard"]
    logger.info("closed the Dask HTTP server of %s", type(server).__name__)
