"""Retrying the dispatcher's and the runner's database writes through a short outage.

A job's status lives in the database; a worker that cannot write it (PostgreSQL restarting,
connections terminated, SQLite locked) used to give up at once: the run failed, the failure
could not be written either, and the job stayed ``queued``/``running`` with its charge until
the service restarted (issue 23: 36 of 245 jobs after a 17.7 s stop). Each write is now one
retried unit: the whole transaction runs again after an exponential back-off (0.1 s doubling
to 5 s) on a *connection-level* error, for up to ``budget_s`` seconds (default 120).

Retrying a whole transaction is safe because every status write is a conditional UPDATE
(:mod:`service.db.job_status`): a transaction that did commit before its connection broke is
found already applied on the retry and changes nothing. Errors that are not about the
connection (an integrity error, a bug) are raised at once. Nothing about the data is in what
is retried or logged: the log line names the exception type only.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError

logger = logging.getLogger("dpfit.dispatch")

T = TypeVar("T")

DEFAULT_BUDGET_S = 120.0
FIRST_DELAY_S = 0.1
MAX_DELAY_S = 5.0


def is_transient(error: BaseException) -> bool:
    """A database error worth retrying: the connection failed, not the statement."""
    if isinstance(error, (OperationalError, InterfaceError)):
        return True
    return isinstance(error, DBAPIError) and bool(error.connection_invalidated)


def with_retry(
    work: Callable[[], T],
    *,
    budget_s: float = DEFAULT_BUDGET_S,
    what: str = "database write",
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """``work()``, run again after a back-off while it raises a transient database error and
    ``budget_s`` seconds have not passed; the last error is raised after that."""
    deadline = time.monotonic() + budget_s
    delay = FIRST_DELAY_S
    warned = False
    while True:
        try:
            return work()
        except Exception as error:
            if not is_transient(error) or time.monotonic() + delay > deadline:
                raise
            if not warned:
                logger.warning("%s failed (%s); retrying", what, type(error).__name__)
                warned = True
            sleep(delay)
            delay = min(MAX_DELAY_S, delay * 2)
