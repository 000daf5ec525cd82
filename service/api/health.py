"""Whether the database is intact, for ``/healthz`` and for the answer to a failed request.

A corrupted SQLite file (a bad page, a file overwritten) kept ``/healthz`` at 200 while every
read answered 500 (issue 23, item 8). Two checks close that:

- :func:`database_corrupt` recognises SQLite's "database disk image is malformed"
  (``SQLITE_CORRUPT``) and "file is not a database" (``SQLITE_NOTADB``) — by the DBAPI error's
  code, never its message — so the request middleware answers 503 with ``Retry-After`` (an
  operator must restore the file; nothing the client sent is at fault) instead of 500;
- :class:`IntegrityCheck` runs SQLite's ``PRAGMA quick_check`` (every page's structure, no
  index-content comparison: O(pages), milliseconds for a service's ledger) at most once per
  ``interval`` seconds and remembers the verdict, so ``/healthz`` turns 503 within that
  interval of a corruption. Other databases check their own storage: nothing to do there.
"""

from __future__ import annotations

import sqlite3
import threading
import time

from sqlalchemy import exc, text
from sqlalchemy.orm import Session

__all__ = ["IntegrityCheck", "database_corrupt"]

_SQLITE_CORRUPT, _SQLITE_NOTADB = 11, 26


def database_corrupt(error: BaseException) -> bool:
    """Whether ``error`` says the SQLite file is corrupt or not a database."""
    original = error.orig if isinstance(error, exc.DBAPIError) else error
    if not isinstance(original, sqlite3.DatabaseError):
        return False
    return getattr(original, "sqlite_errorcode", None) in (_SQLITE_CORRUPT, _SQLITE_NOTADB)


class IntegrityCheck:
    """``PRAGMA quick_check`` of a SQLite database, at most once per ``interval`` seconds."""

    def __init__(self, interval: float = 30.0) -> None:
        self.interval = interval
        self._lock = threading.Lock()
        self._checked_at: float | None = None
        self._intact = True

    def intact(self, session: Session) -> bool:
        if session.get_bind().dialect.name != "sqlite":
            return True
        now = time.monotonic()
        with self._lock:
            if self._checked_at is not None and now - self._checked_at < self.interval:
                return self._intact
            try:
                verdict = session.execute(text("PRAGMA quick_check")).scalar()
                intact = verdict == "ok"
            except exc.DBAPIError as error:
                if not database_corrupt(error):
                    raise
                intact = False
            self._checked_at, self._intact = now, intact
            return intact
