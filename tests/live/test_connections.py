"""Connections a hostile client holds or floods (issue 23, item 7), on a live `dpfit serve`.

- a connection that sends nothing, or half a request head, is closed after the head deadline;
- a body that stops arriving is answered 408 after the body deadline;
- a request head over the 16 KiB limit is a 400, whether it arrives in one write or in pieces;
- a repeated Authorization header is a 400;
- past the connection cap a request is answered 503 at once;
- a flood of requests without a key writes a bounded number of log bytes and no traceback.

The deadlines are shortened through the environment (the same settings `dpfit serve` and the
Docker image read); no assertion is on a duration — a socket timeout far above the deadline
only keeps a failing test from hanging.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.live import LiveServer, start_server
from tests.support.walkthrough import EXAMPLES

SHORT = {
    "DPFIT_HEADER_TIMEOUT_SECONDS": "2",
    "DPFIT_BODY_TIMEOUT_SECONDS": "2",
    "DPFIT_MAX_CONNECTIONS": "40",
}
#: Far above the deadlines: only a connection that is never closed reaches it.
HANG = 60.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    home = tmp_path_factory.mktemp("connections")
    live = start_server(f"sqlite:///{home / 'dpfit.db'}", [EXAMPLES], home, extra_env=SHORT)
    try:
        yield live
    finally:
        live.stop()


def _connect(server: LiveServer) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=HANG)
    return sock


def _read_all(sock: socket.socket) -> bytes:
    """Everything until the server closes the connection (socket.timeout if it never does)."""
    chunks = []
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def test_a_connection_that_sends_nothing_is_closed(server: LiveServer) -> None:
    with _connect(server) as sock:
        assert _read_all(sock) == b""  # closed by the server, nothing answered


def test_a_half_sent_request_head_is_closed(server: LiveServer) -> None:
    with _connect(server) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        assert _read_all(sock) == b""


def test_an_idle_connection_after_a_response_is_closed_by_the_head_deadline(
    server: LiveServer,
) -> None:
    """After a response the head deadline runs again (the 75 s keep-alive would be longer)."""
    with _connect(server) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        answered = _read_all(sock)
        assert answered.startswith(b"HTTP/1.1 200")


def test_a_body_that_stops_arriving_is_408(server: LiveServer) -> None:
    with _connect(server) as sock:
        sock.sendall(
            b"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b'Authorization: Bearer nope\r\nContent-Length: 100\r\n\r\n{"a": '
        )
        answered = _read_all(sock)
    assert answered.startswith(b"HTTP/1.1 408"), answered[:200]
    assert b"application/problem+json" in answered


def _head(padding: int) -> bytes:
    return (
        b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Pad: "
        + b"x" * padding
        + b"\r\n\r\n"
    )


def _answer_to(server: LiveServer, head: bytes, pieces: int) -> bytes:
    with _connect(server) as sock:
        size = -(-len(head) // pieces)
        for start in range(0, len(head), size):
            sock.sendall(head[start : start + size])
            if pieces > 1:
                time.sleep(0.02)  # separate reads on the server
        return _read_all(sock)


@pytest.mark.parametrize("pieces", [1, 20])
def test_a_request_head_over_the_limit_is_400_however_it_arrives(
    server: LiveServer, pieces: int
) -> None:
    """The limit is DPFIT_MAX_HEADER_BYTES (16 KiB). uvicorn hands it to h11, which applies it
    only to a head still incomplete in its buffer: before the API's own check a 17,000-byte
    head was served, sent in one write or in 20."""
    over = _answer_to(server, _head(17_000), pieces)
    assert over.startswith(b"HTTP/1.1 400"), over[:200]
    assert _answer_to(server, _head(15_000), pieces).startswith(b"HTTP/1.1 200")


def test_a_repeated_authorization_header_is_400_on_the_wire(server: LiveServer) -> None:
    """h11 hands every header line to the app; the first of two Authorization lines used to
    authenticate the request. Now the head is refused, whichever key comes first."""
    key = server.key("connections-analyst", "analyst")
    for first, second in ((key, "not-a-key"), ("not-a-key", key), (key, key)):
        head = (
            b"GET /v1/me HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
            + f"Authorization: Bearer {first}\r\nAuthorization: Bearer {second}\r\n\r\n".encode()
        )
        answer = _answer_to(server, head, 1)
        assert answer.startswith(b"HTTP/1.1 400"), answer[:200]
        assert b"header.Authorization" in answer
    single = b"GET /v1/me HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + (
        f"Authorization: Bearer {key}\r\n\r\n".encode()
    )
    assert _answer_to(server, single, 1).startswith(b"HTTP/1.1 200")


def test_past_the_connection_cap_a_request_is_503(server: LiveServer) -> None:
    held = [_connect(server) for _ in range(45)]
    try:
        with _connect(server) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            answered = sock.recv(65536)
        assert answered.startswith(b"HTTP/1.1 503"), answered[:200]
    finally:
        for sock in held:
            sock.close()


def _log_bytes(server: LiveServer) -> int:
    return sum(p.stat().st_size for p in Path(server.home).glob("server-*.log"))


def _log_text(server: LiveServer) -> str:
    return "".join(p.read_text(errors="replace") for p in Path(server.home).glob("server-*.log"))


def test_a_flood_without_a_key_logs_bounded_bytes_and_no_traceback(server: LiveServer) -> None:
    """3,000 requests without a key (15 connections × 200, pipelined; under the cap of 40
    connections and running requests): each is a 401, and the log grows by the bounded repeats
    of one access line, not one line (or traceback) each."""
    before = _log_bytes(server)
    request = b"GET /v1/datasets HTTP/1.1\r\nHost: x\r\n\r\n"
    sockets = [_connect(server) for _ in range(15)]
    try:
        for sock in sockets:
            sock.sendall(
                request * 199 + b"GET /v1/datasets HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
            )
        answers = [_read_all(sock) for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()
    assert sum(a.count(b"HTTP/1.1 401") for a in answers) == 3000
    grown = _log_bytes(server) - before
    # 3,000 access lines would be ≈ 600 kB; bounded repeats are tens of lines.
    assert grown < 20_000, grown
    assert "Traceback" not in _log_text(server)
