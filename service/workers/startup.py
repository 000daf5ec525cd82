"""What one process of the service does before any request, and stops when it stops.

The single API process does it itself (:func:`service.api.app.create_app`'s lifespan); with
``DPFIT_API_WORKERS`` > 1 only the supervisor does (:mod:`service.supervisor`). Both call
:func:`start_once_per_service`, which lives here, with the dispatcher and reconciler it starts,
so that neither the API nor the supervisor imports the other.
"""

from __future__ import annotations

import logging

from sqlalchemy.orm import Session, sessionmaker

from service.domain.dispatching import Dispatcher
from service.domain.job_events import JobEventThread
from service.settings import Settings
from service.workers.dispatch import recover_unfinished
from service.workers.reconciler import Reconciler

__all__ = ["ServiceThreads", "start_once_per_service"]

logger = logging.getLogger("dpfit.supervisor")


class ServiceThreads:
    """The job-event log and (for a dispatcher that tracks its jobs) the reconciler."""

    def __init__(self, job_events: JobEventThread, reconciler: Reconciler | None) -> None:
        self.job_events = job_events
        self.reconciler = reconciler

    def stop(self) -> None:
        if self.reconciler is not None:
            self.reconciler.stop()
        self.job_events.stop()


def start_once_per_service(
    sessions: sessionmaker[Session],
    dispatcher: Dispatcher,
    max_attempts: int,
    settings: Settings | None = None,
    *,
    admits: bool = True,
) -> ServiceThreads:
    """What one process of the service does, before any request: re-dispatch the jobs a
    previous run left unfinished, then start the job-event log and the reconciler (returned;
    the caller stops them). The single API process does it itself; with several, only the
    supervisor (``admits=False``: it admits no job, so a queued job needs no grace).

    The reconciler runs when ``settings.reconcile_interval_s`` > 0 and the dispatcher tracks
    its jobs (``tracked``/``refresh``; test dispatchers that run nothing do not)."""
    recovered = recover_unfinished(sessions, dispatcher, max_attempts)
    if recovered:
        logger.warning("re-dispatched %d unfinished job(s)", len(recovered))
    job_events = JobEventThread(sessions)
    job_events.start()
    interval = (settings or Settings.from_env()).reconcile_interval_s
    reconciler = None
    if interval > 0 and hasattr(dispatcher, "tracked") and hasattr(dispatcher, "refresh"):
        reconciler = Reconciler(sessions, dispatcher, max_attempts, interval, grace=admits)  # type: ignore[arg-type]
        reconciler.start()
    return ServiceThreads(job_events, reconciler)
