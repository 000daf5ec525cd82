"""Re-dispatching orphaned jobs while the service runs, not only at its next start.

After a database outage some accepted jobs are held by no worker task: a task could not read
its job and ended, a run's last status write failed after every retry, a dispatch lookup
failed. Before, only the next start's recovery dispatched them again (issue 23: 36 of 245 jobs
stayed ``queued``/``running``, charged, until a restart). The reconciler is that same recovery
(:func:`service.workers.dispatch.recover_unfinished`, one code path), run every
``DPFIT_RECONCILE_INTERVAL`` seconds by the one process that recovers at start (the single API
process, or the supervisor), for the jobs its dispatcher does not hold:

- a ``queued`` job not waiting in the dispatcher's fair queue and not running on Dask;
- a ``running`` job whose attempt's task is gone (its future ended without a final status).

Such a job gets the next attempt and is dispatched again; one whose runs reached
``DPFIT_MAX_ATTEMPTS`` fails with its charge standing, exactly as at a restart. A job admitted
less than one interval ago is left alone (the admitting request may not have handed it to the
dispatcher yet), except under the supervisor, which is the only dispatcher and admits nothing.

A pass that meets a database error ends quietly (one warning naming the exception type, at
most once a minute) and the next pass tries again: an outage delays recovery, it never stops it.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import timedelta
from typing import Protocol

from sqlalchemy.orm import Session, sessionmaker

from service.db.models import utcnow
from service.domain.dispatching import Dispatcher
from service.workers.dispatch import Tracking, recover_unfinished

logger = logging.getLogger("dpfit.dispatch")

__all__ = ["Reconciler", "TrackingDispatcher"]


class TrackingDispatcher(Dispatcher, Tracking, Protocol):
    pass


class Reconciler:
    """Runs :meth:`reconcile` every ``interval`` seconds in a daemon thread named
    :attr:`THREAD_NAME`."""

    THREAD_NAME = "dpfit-reconciler"

    def __init__(
        self,
        sessions: sessionmaker[Session],
        dispatcher: TrackingDispatcher,
        max_attempts: int,
        interval: float,
        *,
        grace: bool = True,
    ) -> None:
        self._sessions = sessions
        self._dispatcher = dispatcher
        self._max_attempts = max_attempts
        self.interval = interval
        self._grace = timedelta(seconds=interval) if grace else timedelta(0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=self.THREAD_NAME, daemon=True)
        self._warned_at = float("-inf")

    def reconcile(self) -> list[str]:
        """One pass; returns the re-dispatched job ids (empty after a database error)."""
        try:
            self._dispatcher.refresh()
            skip = self._dispatcher.tracked()
            found = recover_unfinished(
                self._sessions,
                self._dispatcher,
                self._max_attempts,
                skip=skip,
                accepted_before=utcnow() - self._grace,
            )
        except Exception as error:  # noqa: BLE001 - the next pass retries
            if time.monotonic() - self._warned_at > 60:
                self._warned_at = time.monotonic()
                logger.warning("reconciler pass failed: %s", type(error).__name__)
            return []
        if found:
            logger.warning("reconciler re-dispatched %d orphaned job(s)", len(found))
        return found

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.reconcile()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
