"""Dispatching jobs to Dask workers, and recovering unfinished jobs after a restart.

One job is one Dask task running numpy in-process on a worker
(docs/architecture.md#workers-and-dask: a task round trip is
~11 ms, far below a job's cost). The embedded default is a local cluster of worker
*processes* (:mod:`service.workers.cluster`); ``DPFIT_DASK_SCHEDULER`` points at an external
scheduler instead. Either way every Dask connection is mutual TLS
(:mod:`service.workers.security`).

The dispatcher hands Dask no more jobs than the cluster has worker slots, chosen fairly across
principals (:mod:`service.workers.fair_queue`); the others wait in this process, ``queued``.
With several API processes only the supervisor dispatches (:class:`SupervisorDispatches`).
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime
from typing import Protocol

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from service.db import job_status
from service.db.models import Job
from service.domain.dispatching import Dispatcher
from service.settings import Settings
from service.workers.db_retry import with_retry
from service.workers.engines import WorkerEngines
from service.workers.fair_queue import FairQueue, Ticket
from service.workers.row_cache import RowCache
from service.workers.scheduler_workers import scheduler_workers

logger = logging.getLogger("dpfit.dispatch")

RECOVERY_FAILED = (
    "The job was interrupted too many times after a worker had read its data; its charge stands."
)
INTERRUPTED_UNREAD = (
    "The job's worker task failed before any data was read; its charge was refunded."
)


class Tracking(Protocol):
    """A dispatcher that knows which jobs it holds: the reconciler re-dispatches the others
    (service/workers/reconciler.py). A dispatcher without ``tracked`` gets no reconciler."""

    def tracked(self) -> set[str]: ...

    def refresh(self) -> None: ...


class SupervisorDispatches:
    """The dispatcher of an API process under the supervisor (``DPFIT_API_WORKERS`` > 1): it
    submits nothing. The admitted job stays ``queued`` in the database and the supervisor's
    reconciler, the one dispatcher of the service, releases it through its fair queue within
    ``DPFIT_RECONCILE_INTERVAL`` — so the per-principal limits hold across all API processes."""

    def __init__(self, settings: Settings, sessions: sessionmaker[Session]) -> None:
        self._settings = settings

    def submit(self, job_id: str, attempt: int) -> None:
        """Nothing: the supervisor dispatches queued jobs."""

    def close(self) -> None:
        pass

    def describe(self) -> str:
        return "external scheduler (the supervisor's cluster; the supervisor dispatches)"


class DaskDispatcher:
    """Submits ``run_job`` tasks to a Dask cluster, as many as it has worker slots, fairly
    across principals (:class:`~service.workers.fair_queue.FairQueue`), and watches their
    futures: a finished task frees its slot for the next job."""

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
        slots = self._slots()
        self._queue = FairQueue(slots, settings.running_per_principal(slots))

    def _slots(self) -> int:
        """Worker threads of the cluster (at least 1)."""
        try:
            workers = scheduler_workers(self._client)
            return max(1, sum(int(w.get("nthreads", 1)) for w in workers.values()))
        except Exception:  # noqa: BLE001 - the scheduler is momentarily unreachable
            return max(1, self._settings.workers)

    def refresh(self) -> None:
        """Re-read the cluster's size (workers may come and go on an external scheduler)."""
        slots = self._slots()
        with self._lock:
            released = self._queue.resize(slots, self._settings.running_per_principal(slots))
        self._release(released)

    def tracked(self) -> set[str]:
        with self._lock:
            return self._queue.tracked()

    def describe(self) -> str:
        workers = len(scheduler_workers(self._client))
        kind = "external scheduler" if self._cluster is None else "LocalCluster"
        return f"{kind} with {workers} worker(s)"

    def submit(self, job_id: str, attempt: int) -> None:
        """Queue the job's ``attempt``; it goes to Dask when the fair queue releases it."""
        # A short retry: this runs in the admitting request; past it the reconciler dispatches.
        principal = with_retry(
            lambda: _principal_of(self._sessions, job_id), budget_s=5, what="dispatch lookup"
        )
        if principal is None:
            return
        with self._lock:
            released = self._queue.add(Ticket(job_id, attempt, principal))
        self._release(released)

    def _release(self, tickets: list[Ticket]) -> None:
        from service.workers.runner import run_job

        for ticket in tickets:
            try:
                future = self._client.submit(
                    run_job,
                    ticket.job_id,
                    ticket.attempt,
                    self._settings.database_url,
                    key=f"dpfit-{ticket.job_id}-{ticket.attempt}",
                    pure=False,
                    retries=0,
                )
            except Exception as exc:  # noqa: BLE001 - the reconciler dispatches it again
                logger.error("dispatch of %s failed: %s", ticket.job_id, type(exc).__name__)
                with self._lock:
                    later = self._queue.done(ticket.job_id, ticket.attempt)
                self._release(later)
                continue
            with self._lock:
                self._futures[future.key] = future
            future.add_done_callback(self._done)

    def _done(self, future: object) -> None:
        key = getattr(future, "key", "")
        job_id, attempt = _parse_key(str(key))
        with self._lock:
            self._futures.pop(key, None)
            released = self._queue.done(job_id, attempt)
        self._release(released)
        if getattr(future, "status", "") == "error":
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


def _principal_of(sessions: sessionmaker[Session], job_id: str) -> str | None:
    with sessions() as session:
        return session.scalar(select(Job.principal).where(Job.id == job_id))


def mark_interrupted_failed(sessions: sessionmaker[Session], job_id: str, attempt: int) -> None:
    """A task died outside the runner (e.g. its worker was killed): fail it, keep the charge
    unless no worker ever read the data (then refund). The job's error says which happened.
    Retried through a database outage (:mod:`service.workers.db_retry`)."""
    from service.ledger.admission import cancel_or_refund_unread

    def write() -> None:
        with sessions.begin() as session:
            if cancel_or_refund_unread(session, job_id, "failed", INTERRUPTED_UNREAD):
                return
            job_status.end_run(session, job_id, attempt, "failed", RECOVERY_FAILED)

    with_retry(write, what="marking an interrupted job")


def recover_unfinished(
    sessions: sessionmaker[Session],
    dispatcher: Dispatcher,
    max_attempts: int,
    *,
    skip: set[str] | frozenset[str] = frozenset(),
    accepted_before: datetime | None = None,
) -> list[str]:
    """Re-dispatch every accepted job that has not finished (after a restart), except ``skip``.

    The one recovery path, for a start and for the reconciler
    (:mod:`service.workers.reconciler`), which passes the jobs its dispatcher still holds as
    ``skip`` and, as ``accepted_before``, a moment before which a job must have been admitted
    (so a job this process admitted and is about to dispatch is not taken for an orphan).

    The retry limit counts runs (``jobs.runs``: claims by a worker), not dispatches: a job is
    re-dispatched however many restarts it waited through without running — a job no worker
    started cost nothing yet. A job that workers have started ``max_attempts`` times fails
    instead, and its charge stands (the data was read). Returns the re-dispatched job ids.
    """
    redispatched: list[tuple[str, int]] = []
    exhausted: list[tuple[str, int]] = []
    query = select(Job).where(Job.status.in_(job_status.ACTIVE)).order_by(Job.created_at)
    if accepted_before is not None:
        query = query.where(Job.created_at < accepted_before)
    with sessions.begin() as session:
        for job in session.scalars(query).all():
            if job.id in skip:
                continue
            if job.runs >= max_attempts:
                exhausted.append((job.id, job.attempt))
                continue
            attempt = job_status.redispatch(session, job.id, job.attempt)
            if attempt is not None:
                redispatched.append((job.id, attempt))
    for job_id, attempt in exhausted:
        mark_interrupted_failed(sessions, job_id, attempt)
    for job_id, attempt in redispatched:
        dispatcher.submit(job_id, attempt)
    return [job_id for job_id, _ in redispatched]
