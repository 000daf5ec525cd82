"""How the API is served: uvicorn's options, one connection protocol and bounded logs.

``dpfit serve``, its supervised API processes (service/supervisor.py) and the Docker image
(which runs ``dpfit serve``) all take their options from :func:`uvicorn_options`, so they share
one hardening (issue 23, item 7; defaults in docs/operations.md, "Limits on the API"):

- **Incomplete requests**: :class:`HardenedH11Protocol` closes a connection whose request head
  (request line and headers) is not complete ``DPFIT_HEADER_TIMEOUT_SECONDS`` (15 s) after the
  connection opened or the previous response ended — a half-open connection that never sends,
  or a slowloris dribbling headers, holds a socket for that long at most. Heads are capped at
  ``DPFIT_MAX_HEADER_BYTES`` (16 KiB; more is a 400: h11 bounds a head still incomplete in its
  buffer, service/api/middleware.py's ``HeadLimit`` every complete one).
- **Idle connections** between requests: closed after ``DPFIT_KEEP_ALIVE_SECONDS`` (75 s, as
  nginx: a shorter one closes busy clients' connections just as they send).
- **Slow bodies**: service/api/middleware.py's ``BodyLimit`` answers 408 when a body is not
  complete ``DPFIT_BODY_TIMEOUT_SECONDS`` (60 s) after its head.
- **Too many connections**: past ``DPFIT_MAX_CONNECTIONS`` (512) open connections (or running
  requests) uvicorn answers 503 at once and closes the connection.
- **Logs**: :class:`BoundedLog` — uvicorn's and asyncio's error lines carry the exception's
  type, never a traceback; a line that repeats (same logger, same template) is written at most
  ``burst`` times per window, then one line counting what was suppressed. Client errors'
  access lines (4xx) repeat under the same rule per route and status. An unauthenticated flood
  thus writes a bounded number of bytes (it wrote 91.6 MB of tracebacks in 30 s before).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import threading
import time
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from service.logging_setup import uvicorn_log_config
from service.settings import Settings, api_limits

__all__ = ["BoundedLog", "HardenedH11Protocol", "install_bounded_logs", "uvicorn_options"]


@functools.cache
def _header_timeout() -> float:
    """The head deadline of this process: from the environment (an API process started by the
    supervisor has the settings only there)."""
    return float(api_limits(dict(os.environ)).get("header_timeout_seconds", 15.0) or 15.0)


class HardenedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol, plus a deadline for every request head.

    uvicorn arms its keep-alive timer only after a response, and cancels it on the first byte
    received: a connection that sends nothing, or a head byte by byte, was never closed. Here a
    timer runs whenever the peer is between requests (h11 state ``IDLE``) — from the connection
    and from each response's end — and is cancelled once a complete head arrives.
    """

    header_timeout: float | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._head_timer: asyncio.TimerHandle | None = None
        self._arm_head_timer()

    def data_received(self, data: bytes) -> None:
        self._last_data = self.loop.time()
        super().data_received(data)
        if self.conn.their_state is h11.IDLE:
            if self._head_timer is None:
                self._arm_head_timer()
        else:
            self._cancel_head_timer()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.transport.is_closing():
            return
        if self.conn.their_state is h11.SEND_BODY and self._body_stalled():
            # Answered (408) while the body had stopped arriving: a client that stopped sending
            # would hold the connection forever. A body still arriving (a 413 answered early)
            # is left to uvicorn, so that the client reads its answer.
            self.transport.close()
        elif self.conn.their_state is h11.IDLE:
            self._arm_head_timer()

    def _body_stalled(self) -> bool:
        last = getattr(self, "_last_data", None)
        return last is None or self.loop.time() - last >= 1.0

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_timer()
        super().connection_lost(exc)

    def _arm_head_timer(self) -> None:
        self._cancel_head_timer()
        timeout = self.header_timeout or _header_timeout()
        self._head_timer = self.loop.call_later(timeout, self._head_timed_out)

    def _cancel_head_timer(self) -> None:
        timer = getattr(self, "_head_timer", None)
        if timer is not None:
            timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.transport.close()


def uvicorn_options(settings: Settings) -> dict[str, Any]:
    """The options every way of serving passes to ``uvicorn.run``."""
    return {
        "http": HardenedH11Protocol,
        "timeout_keep_alive": settings.keep_alive_seconds,
        "limit_concurrency": settings.max_connections,
        "h11_max_incomplete_event_size": settings.max_header_bytes,
        "server_header": False,
        "log_level": "info",
        "log_config": uvicorn_log_config(settings.log_format),
    }


class BoundedLog(logging.Filter):
    """At most ``burst`` records per key per ``window`` seconds, tracebacks reduced to the
    exception's type name. The key is the logger and the message template (for access lines:
    the route and the status). When a window with suppressed records ends, the next record of
    that key is prefixed with how many were suppressed."""

    def __init__(self, burst: int = 10, window: float = 10.0, only_client_errors: bool = False):
        super().__init__()
        self.burst = burst
        self.window = window
        self.only_client_errors = only_client_errors
        self._counts: dict[tuple[str, str], list[float | int]] = {}
        self._lock = threading.Lock()

    #: Set by :func:`install_bounded_logs`: the logger this filter bounds. A filter on a handler
    #: sees every record that handler writes (a shared handler carries other loggers' records):
    #: those pass untouched.
    scope: str | None = None

    def filter(self, record: logging.LogRecord) -> bool:
        if self.scope is not None and not (
            record.name == self.scope or record.name.startswith(self.scope + ".")
        ):
            return True
        if record.exc_info and record.exc_info[0] is not None:
            name = record.exc_info[0].__name__
            record.msg = f"{str(record.msg).rstrip()} ({name})"
            record.exc_info = None
            record.exc_text = None
        fields = getattr(record, "fields", None)
        if self.only_client_errors:
            status = fields.get("status") if isinstance(fields, dict) else None
            if not isinstance(status, int) or not 400 <= status < 500:
                return True
            key = (record.name, f"{fields.get('route')} {status}")  # type: ignore[union-attr]
        else:
            key = (record.name, str(record.msg))
        now = time.monotonic()
        with self._lock:
            if len(self._counts) > 10_000:
                self._counts.clear()
            began, written, suppressed = self._counts.get(key, [now, 0, 0])
            if now - began >= self.window:
                began, written = now, 0
                if suppressed:
                    record.msg = f"[{int(suppressed)} similar lines suppressed] {record.msg}"
                    suppressed = 0
            if written >= self.burst:
                self._counts[key] = [began, written, suppressed + 1]
                return False
            self._counts[key] = [began, written + 1, suppressed]
        return True


_BOUNDED = "dpfit-bounded-log"


def install_bounded_logs() -> None:
    """Put :class:`BoundedLog` on uvicorn's, asyncio's and Dask's (``distributed``) loggers and
    on the client errors of ``dpfit.access`` (idempotent: called by every app start)."""
    targets = {
        "uvicorn.error": BoundedLog(),
        "asyncio": BoundedLog(),
        "distributed": BoundedLog(),  # the embedded scheduler's and client's lines
        "dpfit.access": BoundedLog(only_client_errors=True),
    }
    for name, bounded in targets.items():
        logger = logging.getLogger(name)
        bounded.name = _BOUNDED
        bounded.scope = name
        # A logger's filters see only records logged on it; Dask logs on child loggers
        # (distributed.scheduler, .nanny, …) that reach the handlers of "distributed".
        for holder in [logger, *(logger.handlers if name == "distributed" else [])]:
            if not any(getattr(f, "name", "") == _BOUNDED for f in holder.filters):
                holder.addFilter(bounded)
