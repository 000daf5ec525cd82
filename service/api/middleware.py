"""Pure ASGI middlewares: request ids and failure logging, the head's size and single-valued
fields, the body limit, safe paths and queries.

Order (outermost first, see app.py): :class:`RequestContext` → :class:`HeadLimit` →
:class:`SingleHeaders` → :class:`BodyLimit` → :class:`SafeTarget` → the routes. They are plain
ASGI (no ``BaseHTTPMiddleware``), so a request costs a few function calls and bodies are
streamed, not buffered.
"""

from __future__ import annotations

import logging
import random
import re
import secrets
import time
from typing import Any
from urllib.parse import parse_qsl

import anyio
from fastapi import HTTPException
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service import safe_text
from service.api.errors import problem_response
from service.api.health import database_corrupt
from service.db.session import database_unavailable

logger = logging.getLogger("dpfit.api")
access_logger = logging.getLogger("dpfit.access")

REQUEST_ID_HEADER = "x-request-id"
RETRY_AFTER_SECONDS = 5
_CLIENT_ID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")


def request_id_of(scope: Scope) -> str:
    """The id :class:`RequestContext` gave this request ("-" outside one)."""
    return str(scope.get("state", {}).get("request_id", "-"))


class RequestContext:
    """Gives every request an id, echoes it as ``X-Request-ID``, and turns any exception that
    escaped the routes into one problem+json answer and ONE log line.

    - The id is the client's ``X-Request-ID`` when it is short and plain (``[A-Za-z0-9._:-]``,
      at most 64 characters), otherwise a fresh random one.
    - Database unreachable or its schema missing (:func:`database_unavailable`), or its SQLite
      file corrupt (service/api/health.py) → 503 with ``Retry-After``; anything else → 500.
      The log line names the method, the route path template when known, the exception type
      and the request id — never the exception's message or a traceback (SQLAlchemy messages
      carry SQL parameters, i.e. request data).
    - Every request also gets one access line on ``dpfit.access`` (fields: ``event=request``,
      method, route TEMPLATE, status, duration_ms, request_id — never the raw path, the query or
      a header) and its latency in the app's ``/metrics`` registry when there is one.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        # Ids are for correlation, not secrets: a random per-process prefix (16 bits) and 48
        # bits from a generator seeded from the OS (os.urandom per request was a measurable
        # share of a GET under load). Not a counter: an id must not tell how busy the service is.
        prefix, draws = secrets.token_hex(2), random.Random(secrets.randbits(128))
        self._next_id = lambda: f"{prefix}{draws.getrandbits(48):012x}"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = _client_request_id(scope) or self._next_id()
        scope.setdefault("state", {})["request_id"] = request_id
        header = (REQUEST_ID_HEADER.encode(), request_id.encode())
        started = False
        began = time.perf_counter()
        answer = {"status": 500, "replayed": False}
        root_path = str(scope.get("root_path", ""))

        async def send_with_id(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                answer["status"] = message["status"]
                answer["replayed"] = any(
                    name.lower() == b"idempotent-replayed" for name, _ in message.get("headers", [])
                )
                message["headers"] = [*message.get("headers", []), header]
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        except Exception as error:  # noqa: BLE001 - the last line of defence, by design
            unavailable = database_unavailable(error) or database_corrupt(error)
            _log_failure(scope, error, request_id, unavailable)
            if started:
                return  # the status line is out; the server closes the connection
            await _failure_response(unavailable, request_id)(scope, receive, send_with_id)
        finally:
            status, replayed = int(answer["status"]), bool(answer["replayed"])
            _record(scope, request_id, status, replayed, began, _route_of(scope, root_path))


def _log_failure(scope: Scope, error: Exception, request_id: str, unavailable: bool) -> None:
    """ONE line for an exception that escaped the routes: method, route template, exception
    type and request id — never its message or a traceback (they can carry request data)."""
    route = getattr(scope.get("route"), "path", None) or "(unrouted)"
    logger.error(
        "%s %s failed: %s (request %s)%s",
        scope.get("method", "?"),
        route,
        type(error).__name__,
        request_id,
        " — database unavailable, answered 503" if unavailable else "",
        extra={
            "fields": {
                "event": "request_failed",
                "exception": type(error).__name__,
                "request_id": request_id,
            }
        },
    )


def _failure_response(unavailable: bool, request_id: str) -> JSONResponse:
    """503 with ``Retry-After`` when the database is unavailable, else 500."""
    if unavailable:
        response = problem_response(
            503,
            "Service unavailable",
            "The database is unreachable or its schema is missing; retry later.",
            request_id=request_id,
        )
        response.headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response
    return problem_response(
        500,
        "Internal error",
        "The server failed; nothing was charged twice.",
        request_id=request_id,
    )


def _route_of(scope: Scope, root_path: str) -> str:
    """The route TEMPLATE that served the request: the route's path, a mount's prefix (a Mount
    extends ``root_path``), else ``(unrouted)`` — never the raw path."""
    route = getattr(scope.get("route"), "path", None)
    if route:
        return str(route)
    mounted = str(scope.get("root_path", ""))
    if mounted != root_path and mounted.startswith(root_path):
        return mounted[len(root_path) :]
    return "(unrouted)"


def _record(
    scope: Scope, request_id: str, status: int, replayed: bool, began: float, route: str
) -> None:
    """The request's access line and its latency in the app's metrics (service/api/metrics.py)."""
    seconds = time.perf_counter() - began
    method = str(scope.get("method", "?"))
    access_logger.info(
        "%s %s %d",
        method,
        route,
        status,
        extra={
            "fields": {
                "event": "request",
                "method": method,
                "route": route,
                "status": status,
                "duration_ms": round(seconds * 1000, 2),
                "request_id": request_id,
            }
        },
    )
    metrics = getattr(getattr(scope.get("app"), "state", None), "metrics", None)
    if metrics is not None:
        metrics.observe_request(method, route, status, seconds, replayed)


def _client_request_id(scope: Scope) -> str | None:
    for name, value in scope.get("headers", ()):
        if name == b"x-request-id":
            text = value.decode("latin-1")
            return text if _CLIENT_ID.match(text) else None
    return None


class BodyTooLarge(HTTPException):
    """Raised from ``receive`` once a streamed body passes the limit (FastAPI re-raises
    HTTPExceptions met while reading a body, so it becomes the 413 problem)."""

    title = "Content too large"

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"The request body is larger than the limit of {limit} bytes.")


class BodyTimeout(HTTPException):
    """Raised from ``receive`` when a body is not complete by its deadline: 408 (a slow client
    holds a connection and a request's memory no longer than that)."""

    title = "Request timeout"

    def __init__(self, seconds: float) -> None:
        super().__init__(408, f"The request body did not arrive within {seconds:g} s.")


class HeadLimit:
    """Refuses a request whose head (request line and header fields) is larger than
    ``max_bytes``: 400, before any route or authentication runs.

    uvicorn passes the same bound to h11 (``h11_max_incomplete_event_size``), but h11 applies it
    only to a head still incomplete in its buffer: a larger head that arrived in one read was
    parsed whole and served. The size here is the head's bytes on the wire as h11 counts them
    (request line, ``name: value`` lines, CRLFs), so where the head arrives in pieces the
    parser's 400 and this one draw the same line.
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and head_bytes(scope) > self.max_bytes:
            response = problem_response(
                400,
                "Request head too large",
                f"The request line and header fields are larger than the limit of "
                f"{self.max_bytes} bytes.",
            )
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


#: Header fields a request may carry once: each has one meaning, and a repeated one could mean
#: one thing to a proxy or log in front of the service (which read the first, say) and another
#: here. h11 itself refuses only Content-Length fields that disagree (equal ones it merges).
SINGLE_HEADERS = {
    b"authorization": "Authorization",
    b"content-length": "Content-Length",
    b"content-type": "Content-Type",
    b"host": "Host",
    b"idempotency-key": "Idempotency-Key",
    b"x-request-id": "X-Request-ID",
}


class SingleHeaders:
    """Refuses a request that repeats a header field of :data:`SINGLE_HEADERS`: 400
    problem+json on ``header.<Name>``, before any route or authentication runs (a repeated
    ``Authorization`` was served with its first value)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            repeated = repeated_single_header(scope)
            if repeated is not None:
                field = f"header.{repeated}"
                response = problem_response(
                    400,
                    "Repeated header field",
                    f"{field}: the request carries this header field more than once.",
                    field,
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def repeated_single_header(scope: Scope) -> str | None:
    """The name of the first header of :data:`SINGLE_HEADERS` the request carries twice."""
    seen: set[bytes] = set()
    for name, _ in scope.get("headers", ()):
        lowered = name.lower()
        if lowered in SINGLE_HEADERS:
            if lowered in seen:
                return SINGLE_HEADERS[lowered]
            seen.add(lowered)
    return None


def head_bytes(scope: Scope) -> int:
    """The size of a request's head on the wire: ``METHOD target HTTP/x.y`` CRLF, each header
    ``name: value`` CRLF, and the blank line's CRLF."""
    target = len(scope.get("raw_path") or scope.get("path", "").encode("utf-8"))
    query = scope.get("query_string", b"")
    line = len(scope.get("method", "")) + 1 + target + (len(query) + 1 if query else 0) + 11
    fields = sum(len(name) + 2 + len(value) + 2 for name, value in scope.get("headers", ()))
    return line + fields + 2


class BodyLimit:
    """Refuses request bodies larger than ``max_bytes`` before anything parses them: 413; and
    bodies not complete ``deadline`` seconds after the request's head: 408.

    A declared ``Content-Length`` over the limit is answered at once (the body is never read);
    otherwise the bytes are counted as they stream in and reading stops at the limit. Once the
    body is complete, ``receive`` is passed through untouched (waiting for a disconnect is not
    bounded by the body's deadline).
    """

    def __init__(self, app: ASGIApp, max_bytes: int, deadline: float | None = None) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.deadline = deadline

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            response = problem_response(
                413,
                "Content too large",
                f"The request body is larger than the limit of {self.max_bytes} bytes.",
            )
            await response(scope, receive, send)
            return
        seen = 0
        complete = False
        deadline = None if self.deadline is None else time.monotonic() + self.deadline

        async def counted() -> Message:
            nonlocal seen, complete
            if complete or deadline is None:
                message = await receive()
            else:
                try:
                    with anyio.fail_after(max(0.0, deadline - time.monotonic())):
                        message = await receive()
                except TimeoutError:
                    raise BodyTimeout(self.deadline or 0.0) from None
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise BodyTooLarge(self.max_bytes)
                complete = not message.get("more_body", False)
            return message

        await self.app(scope, counted, send)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


class SafeTarget:
    """Paths and query strings with control characters never reach a route (or a database).

    A path segment with one → 404 (no id or name can contain it, so nothing is there); a query
    parameter with one, or given twice, → 422 naming ``query.<name>``. Uses
    service/safe_text.py, the rule that request bodies follow too.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            problem = _target_problem(scope)
            if problem is not None:
                await problem(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _target_problem(scope: Scope) -> Any:
    if not safe_text.is_safe(scope.get("path", "")):
        return problem_response(
            404, "Not found", "Nothing exists at a path containing control characters."
        )
    query = scope.get("query_string", b"")
    if query:
        pairs = parse_qsl(query.decode("latin-1"), keep_blank_values=True)  # as Starlette does
        seen: set[str] = set()
        for name, value in pairs:
            if not (safe_text.is_safe(name) and safe_text.is_safe(value)):
                field = f"query.{name}" if safe_text.is_safe(name) and name else "query"
                return problem_response(
                    422, "Invalid request", f"{field} {safe_text.MESSAGE}", field
                )
            if name in seen:  # one value a parameter: no list parameters, and "the last wins"
                field = f"query.{name}"  # would read otherwise than a proxy reading the first
                return problem_response(
                    422, "Invalid request", f"{field}: given more than once", field
                )
            seen.add(name)
    return None
