"""Dispatching jobs to Dask workers, and recovering unfinished jobs after a restart.

One job is one Dask task running numpy in-process on a worker
(docs/architecture.md#workers-and-dask: a task round trip is
~11 ms, far below a job's cost). The embedded default is a local cluster of worker
*processes* (:mod:`service.workers.cluster`); ``DPFIT_DASK_SCHEDULER`` points at an external
scheduler instead. Either way every Dask connection is mutual TLS
(:mod:`service.workers.security`).
"""

from __future__ import annotations

import logging
import threading
from typing import Protocol

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from service import job_status
from service.db.models import Job
from service.settings import Settings
from service.workers.engines import WorkerEngines
from service.workers.row_cache import RowCache

logger = logging.getLogger("dpfit.dispatch")

RECOVERY_FAILED = (
    "The job was interrupted too many times after a worker had read its data; its charge stands."
)
INTERRUPTED_UNREAD = (
    "The job's worker task failed before any data was read; its charge was refunded."
)


class Dispatcher(Protocol):
    def submit(self, job_id: str, attempt: int) -> None: ...

    def close(self) -> None: ...

    def describe(self) -> str: ...


class DaskDispatcher:
    """Submits ``run_job`` tasks to a Dask cluster and watches their futures."""

    def __init__(self, settings: Settings, sessions: sessionmaker[Session]) -> None:
        from distributed import Client

        from service.workers.cluster import start_cluster
        from service.workers.security import embedded_security, external_security

        self._settings = settings
        self._sessions = sessions
        self._cluster = None
        # Closed control plane (docs/architecture.md#the-closed-control-plane): mutual TLS on
        # every Dask connection, listeners on
        # settings.dask_host only, no scheduler or worker HTTP server.
        if settings.dask_scheduler:
            security = external_security(settings)
            self._client = Client(settings.dask_scheduler, security=security)
        else:
            security = embedded_security(settings)
            self._cluster = start_cluster(settings, security)
            self._client = Client(self._cluster, security=security)
        self._client.register_plugin(WorkerEngines())
        self._client.register_plugin(RowCache())
        self._client.run(_warm_up)
        self._futures: dict[str, object] = {}
        self._lock = threading.Lock()

    def describe(self) -> str:
        workers = len(self._client.scheduler_info().get("workers", {}))
        kind = "external scheduler" if self._cluster is None else "LocalCluster"
        return f"{kind} with {workers} worker(s)"

    def submit(self, job_id: str, attempt: int) -> None:
        from service.workers.runner import run_job

        future = self._client.submit(
            run_job,
            job_id,
            attempt,
            self._settings.database_url,
            key=f"dpfit-{job_id}-{attempt}",
            pure=False,
            retries=0,
        )
        with self._lock:
            self._futures[future.key] = future
        future.add_done_callback(self._done)

    def _done(self, future: object) -> None:
        key = getattr(future, "key", "")
        with self._lock:
            self._futures.pop(key, None)
        if getattr(future, "status", "") == "error":
            job_id, attempt = _parse_key(str(key))
            logger.error("job %s attempt %d: worker task error", job_id, attempt)
            try:
                mark_interrupted_failed(self._sessions, job_id, attempt)
            except Exception as exc:  # noqa: BLE001 - a callback must not raise
                logger.error("could not mark job %s failed: %s", job_id, type(exc).__name__)

    def close(self) -> None:
        try:
            self._client.close()
        finally:
            if self._cluster is not None:
                self._cluster.close()


def _warm_up() -> None:
    """Import the job code on every worker once, so the first job does not pay for it."""
    import service.workers.runner  # noqa: F401


def _parse_key(key: str) -> tuple[str, int]:
    body = key.removeprefix("dpfit-")
    job_id, _, attempt = body.rpartition("-")
    return job_id, int(attempt or 0)


def mark_interrupted_failed(sessions: sessionmaker[Session], job_id: str, attempt: int) -> None:
    """A task died outside the runner (e.g. its worker was killed): fail it, keep the charge
    unless no worker ever read the data (then refund). The job's error says which happened."""
    from service.ledger.admission import cancel_or_refund_unread

    with sessions.begin() as session:
        if cancel_or_refund_unread(session, job_id, "failed", INTERRUPTED_UNREAD):
            return
        job_status.end_run(session, job_id, attempt, "failed", RECOVERY_FAILED)


def recover_unfinished(
    sessions: sessionmaker[Session], dispatcher: Dispatcher, max_attempts: int
) -> list[str]:
    """Re-dispatch every accepted job that has not finished (after a restart).

    The retry limit counts runs (``jobs.runs``: claims by a worker), not dispatches: a job is
    re-dispatched however many restarts it waited through without running — a job no worker
    started cost nothing yet. A job that workers have started ``max_attempts`` times fails
    instead, and its charge stands (the data was read). Returns the re-dispatched job ids.
    """
    redispatched: list[tuple[str, int]] = []
    exhausted: list[tuple[str, int]] = []
    with sessions.begin() as session:
        jobs = session.scalars(
            select(Job).where(Job.status.in_(job_status.ACTIVE)).order_by(Job.created_at)
        ).all()
        for job in jobs:
            if job.runs >= max_attempts:
                exhausted.append((job.id, job.attempt))
                continue
            job.attempt += 1
            redispatched.append((job.id, job.attempt))
    for job_id, attempt in exhausted:
        mark_interrupted_failed(sessions, job_id, attempt)
    for job_id, attempt in redispatched:
        dispatcher.submit(job_id, attempt)
    return [job_id for job_id, _ in redispatched]
