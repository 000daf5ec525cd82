"""Per-principal limits on the expensive routes: a rate, a concurrency and a bounded queue.

The expensive routes (pricing a job — ``POST /v1/jobs``, ``POST /v1/jobs/estimate``, the
private-evaluation pair — and ``POST /v1/models/{id}/predict``) take a *compute slot* before
their work starts, in an ``async`` dependency, so a request waiting for a slot waits on the
event loop and holds no API thread. A slot is granted when

1. the principal's token bucket has a token (``DPFIT_PRINCIPAL_RATE`` per second, bursts of
   ``DPFIT_PRINCIPAL_BURST``), else **429** with ``Retry-After`` (seconds until a token);
2. fewer than ``DPFIT_PRINCIPAL_CONCURRENCY`` of the principal's expensive requests run, else
   the request waits in the principal's queue — at most ``DPFIT_PRINCIPAL_QUEUE`` waiting, a
   further one is **429** at once; a wait longer than ``DPFIT_COMPUTE_WAIT`` seconds is 429 too;
3. fewer than ``DPFIT_COMPUTE_SLOTS`` expensive requests of ALL principals run (half the API's
   threads by default), else it waits for one (the same deadline).

So one principal's flood occupies at most its concurrency in threads and compute processes;
every other principal's reads keep the rest of the API's threads, and their own expensive
requests queue behind at most ``DPFIT_PRINCIPAL_CONCURRENCY`` of the flood's per principal.
Defaults and their rationale: docs/operations.md ("Limits on the API"). The limits are per API
process (``DPFIT_API_WORKERS`` processes each apply them).

Nothing here is data-dependent: the limits see a principal's name and counts of its requests.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

__all__ = ["ComputeLimiter", "Limits", "TooManyRequests"]


class TooManyRequests(Exception):
    """The principal is over one of its limits: 429 with ``Retry-After`` (api/errors.py)."""

    def __init__(self, retry_after: int, detail: str) -> None:
        super().__init__(detail)
        self.retry_after = max(1, retry_after)
        self.detail = detail


@dataclass(frozen=True)
class Limits:
    """The limits, as configured (service/settings.py)."""

    rate: float = 50.0
    burst: int = 100
    concurrency: int = 2
    queue: int = 64
    wait_seconds: float = 30.0
    slots: int = 8


@dataclass
class _PrincipalState:
    tokens: float
    refilled_at: float
    running: asyncio.Semaphore
    waiting: int = 0
    holders: int = 0


class ComputeLimiter:
    """The slots of one API process. Use :meth:`slot` as an async context manager around the
    expensive part of a request; bound to the event loop it is first used on."""

    #: Idle principals' states are forgotten beyond this many (a forgotten one starts afresh,
    #: with a full bucket: an idle principal would have refilled it anyway).
    MAX_TRACKED = 10_000

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self._states: dict[str, _PrincipalState] = {}
        self._global: asyncio.Semaphore | None = None
        self.refused = 0

    def reset(self) -> None:
        """Forget every state (the app's start: its semaphores belong to one event loop)."""
        self._states.clear()
        self._global = None

    def _state(self, principal: str, now: float) -> _PrincipalState:
        state = self._states.get(principal)
        if state is None:
            if len(self._states) >= self.MAX_TRACKED:
                self._forget_idle()
            state = _PrincipalState(
                tokens=float(self.limits.burst),
                refilled_at=now,
                running=asyncio.Semaphore(max(1, self.limits.concurrency)),
            )
            self._states[principal] = state
        return state

    def _forget_idle(self) -> None:
        for name in [n for n, s in self._states.items() if s.holders == 0 and s.waiting == 0]:
            del self._states[name]

    def _take_token(self, state: _PrincipalState, now: float) -> None:
        rate, burst = self.limits.rate, self.limits.burst
        if rate <= 0:
            return  # no rate limit configured
        state.tokens = min(float(burst), state.tokens + (now - state.refilled_at) * rate)
        state.refilled_at = now
        if state.tokens < 1.0:
            self.refused += 1
            wait = math.ceil((1.0 - state.tokens) / rate)
            raise TooManyRequests(
                wait,
                f"Too many expensive requests: at most {rate:g} per second with bursts of "
                f"{burst} per principal; retry after {max(1, wait)} s.",
            )
        state.tokens -= 1.0

    @asynccontextmanager
    async def slot(self, principal: str) -> AsyncIterator[None]:
        """Hold one of ``principal``'s compute slots (and a global one) for the block."""
        limits = self.limits
        now = time.monotonic()
        state = self._state(principal, now)
        self._take_token(state, now)
        if state.waiting >= limits.queue and state.running.locked():
            self.refused += 1
            raise TooManyRequests(
                1,
                f"Too many expensive requests in flight: at most {limits.concurrency} run and "
                f"{limits.queue} wait per principal; retry after 1 s.",
            )
        if self._global is None:
            self._global = asyncio.Semaphore(max(1, limits.slots))
        state.waiting += 1
        deadline = now + limits.wait_seconds
        acquired_own = acquired_global = False
        try:
            await self._acquire(state.running, deadline)
            acquired_own = True
            await self._acquire(self._global, deadline)
            acquired_global = True
        except TimeoutError:
            self.refused += 1
            raise TooManyRequests(
                int(limits.wait_seconds) or 1,
                f"No compute slot within {limits.wait_seconds:g} s (this principal's or the "
                "service's expensive requests are all busy); retry later.",
            ) from None
        finally:
            state.waiting -= 1
            if not acquired_global and acquired_own:
                state.running.release()
        state.holders += 1
        try:
            yield
        finally:
            state.holders -= 1
            self._global.release()
            state.running.release()

    @staticmethod
    async def _acquire(semaphore: asyncio.Semaphore, deadline: float) -> None:
        remaining = deadline - time.monotonic()
        if remaining <= 0 and semaphore.locked():
            raise TimeoutError
        await asyncio.wait_for(semaphore.acquire(), timeout=max(remaining, 0.001))
