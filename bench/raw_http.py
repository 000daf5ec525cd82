"""A minimal HTTP/1.1 keep-alive client on asyncio streams, for load generation only.

The load bench runs its clients on the same two cores as the server. httpx spent ~4.7 ms of CPU
per request there — more than the service itself — so the bench measured its own client. This
one writes the request bytes and reads the status line, the headers and a ``Content-Length``
body (all the service sends; chunked bodies are refused loudly), at a small fraction of that.
Not a general client: no redirects, no TLS, no chunked encoding, one request in flight per
connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass
from typing import Any


class RawHttpError(Exception):
    """The connection failed or the answer was not what this client reads."""


@dataclass(frozen=True)
class RawResponse:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class RawConnection:
    """One keep-alive connection to ``host:port``; reconnects when the server closed it."""

    def __init__(self, host: str, port: int, headers: dict[str, str]) -> None:
        self.host, self.port = host, port
        self.fixed = "".join(f"{k}: {v}\r\n" for k, v in {"Host": host, **headers}.items())
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def request(self, method: str, target: str, body: Any = None) -> RawResponse:
        try:
            return await self._exchange(method, target, body)
        except (ConnectionError, asyncio.IncompleteReadError):
            await self.close()  # a keep-alive connection the server closed: one retry
            return await self._exchange(method, target, body)

    async def _exchange(self, method: str, target: str, body: Any) -> RawResponse:
        if self._writer is None:
            self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
        assert self._reader is not None
        payload = b"" if body is None else json.dumps(body).encode()
        head = f"{method} {target} HTTP/1.1\r\n{self.fixed}"
        if body is not None:
            head += f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n"
        self._writer.write(head.encode("latin-1") + b"\r\n" + payload)
        status_line = await self._reader.readuntil(b"\r\n")
        status = int(status_line.split(b" ", 2)[1])
        headers: dict[str, str] = {}
        while (line := await self._reader.readuntil(b"\r\n")) != b"\r\n":
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        if "content-length" not in headers:
            raise RawHttpError(f"no Content-Length in a {status} answer")
        data = await self._reader.readexactly(int(headers["content-length"]))
        if headers.get("connection", "").lower() == "close":
            await self.close()
        return RawResponse(status, headers, data)

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            with contextlib.suppress(ConnectionError):
                await self._writer.wait_closed()
        self._reader = self._writer = None
