"""Serving with several API processes: one supervisor, N uvicorn workers, one Dask cluster.

One API process is bound by Python's GIL to about one core. With ``DPFIT_API_WORKERS=N``
(N > 1) ``dpfit serve`` runs:

- **the supervisor** (this process): it starts the embedded Dask cluster (or connects to
  ``DPFIT_DASK_SCHEDULER``), re-dispatches the jobs a previous run left unfinished, and keeps the
  job-event log — each exactly once, before any API process accepts a request. Recovery in every
  API process would dispatch the same queued job N times;
- **N API processes** (uvicorn's workers, sharing one listening socket): each serves HTTP and
  admits jobs, and skips recovery and the event log (``DPFIT_SUPERVISED=1`` in their
  environment). They dispatch nothing themselves
  (:class:`service.workers.dispatch.SupervisorDispatches`): the supervisor's reconciler is the
  one dispatcher of the service, so its fair queue and per-principal limits see every job
  (a job waits at most ``DPFIT_RECONCILE_INTERVAL`` before the supervisor sees it).

What holds across processes is what held within one: admission is one database transaction
(the dataset row lock on PostgreSQL, ``BEGIN IMMEDIATE`` on SQLite), so N processes admit
exactly what one would; a job runs once because its worker task claims it in the database.

A job whose Dask task errors outside the runner is marked failed by the done callback of the
dispatching process; if that write fails too, the reconciler re-dispatches the job
(service/workers/reconciler.py) without a restart.

``/metrics`` is whole whichever process answers a scrape: the supervisor gives the API
processes a fresh directory for prometheus-client's multiprocess mode (removed when it stops),
in which each records its request series, and a scrape sums them (service/api/metrics.py);
the database series are read from the database.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from dataclasses import replace

from service.settings import MULTIPROCESS_DIR_ENV, SUPERVISED_ENV, Settings
from service.workers.startup import start_once_per_service

logger = logging.getLogger("dpfit.supervisor")


def serve_with_workers(settings: Settings, host: str, port: int) -> None:
    """Run the supervisor and ``settings.api_workers`` uvicorn API processes until stopped."""
    import uvicorn

    from service.api.server import uvicorn_options
    from service.db.session import make_engine, session_factory
    from service.workers.dispatch import DaskDispatcher

    cluster = None
    address = settings.dask_scheduler
    if address is None:
        from service.workers.cluster import start_cluster
        from service.workers.security import embedded_security

        cluster = start_cluster(settings, embedded_security(settings))
        address = str(cluster.scheduler_address)
    # From here on the cluster is "external" to everyone, this process included.
    clients = replace(settings, dask_scheduler=address)
    engine = make_engine(settings.database_url, must_exist=True)
    sessions = session_factory(engine)
    dispatcher = DaskDispatcher(clients, sessions)
    job_events = None
    metrics_dir = tempfile.mkdtemp(prefix="dpfit-metrics-")
    try:
        job_events = start_once_per_service(
            sessions, dispatcher, settings.max_attempts, settings, admits=False
        )
        os.environ["DPFIT_DASK_SCHEDULER"] = address
        os.environ[SUPERVISED_ENV] = "1"
        os.environ[MULTIPROCESS_DIR_ENV] = metrics_dir
        uvicorn.run(
            "service.api.app:create_app",
            factory=True,
            host=host,
            port=port,
            workers=settings.api_workers,
            **uvicorn_options(settings),
        )
    finally:
        if job_events is not None:
            job_events.stop()
        dispatcher.close()
        if cluster is not None:
            cluster.close()
        engine.dispose()
        shutil.rmtree(metrics_dir, ignore_errors=True)
