"""Fair sharing of the worker slots between principals: who runs next when a slot frees.

Dask runs the tasks it is given roughly in submission order, so one principal who submits many
long jobs holds every worker and everyone else waits for them (issue 23: three 4·10⁶-step jobs
of one analyst kept a 1-step job of another queued for ≈ 30 min). The dispatcher therefore
hands Dask only as many jobs as there are worker slots, and chooses which ones with this queue.

The rule (compute, not privacy budget — PrivateKube's Dominant Private-block Fairness shares
*budget* blocks among pipelines by their dominant share; here the one resource is a worker
slot, so the dominant share is simply the number of slots a principal holds):

1. at most ``slots`` jobs are released (running on Dask) at once;
2. a principal never holds more than ``per_principal`` released jobs
   (``DPFIT_MAX_RUNNING_PER_PRINCIPAL``, default ``slots − 1``): one slot stays open to the
   others while one principal's jobs run;
3. when a slot is free, the next job is the oldest waiting job of the principal holding the
   *fewest* slots; among principals holding as many, the one served least recently (then the
   one whose oldest job waited longest) — least-running-first, round-robin among equals.

Guarantee: while some principal holds fewer than ``per_principal`` slots and has a job
waiting, no other principal's job is released before it once it is the least-running one; a
principal alone on the service uses up to ``per_principal`` slots. Without pre-emption a job
that started keeps its slot until it ends — the wall-clock limit (``DPFIT_JOB_TIME_LIMIT``)
bounds that. The queue decides from public facts only (who submitted, when, how many run).

A job is keyed by ``(job_id, attempt)``; adding a newer attempt of a waiting job replaces it.
The queue holds no lock: its owner (:class:`service.workers.dispatch.DaskDispatcher`) calls it
under its own.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

__all__ = ["FairQueue", "Ticket"]


@dataclass(frozen=True)
class Ticket:
    """One dispatch of a job: released to Dask when the queue says so."""

    job_id: str
    attempt: int
    principal: str


@dataclass
class FairQueue:
    slots: int
    per_principal: int
    _waiting: dict[str, tuple[int, Ticket]] = field(default_factory=dict)  # job id → (seq, t)
    _running: dict[tuple[str, int], Ticket] = field(default_factory=dict)
    _seq: itertools.count[int] = field(default_factory=itertools.count)
    _served: dict[str, int] = field(default_factory=dict)  # principal → seq of last release

    def add(self, ticket: Ticket) -> list[Ticket]:
        """Queue ``ticket`` (replacing a waiting older attempt of its job); returns the tickets
        to release now."""
        self._waiting[ticket.job_id] = (next(self._seq), ticket)
        return self.release()

    def done(self, job_id: str, attempt: int) -> list[Ticket]:
        """A released dispatch ended (its task finished, failed or was lost); returns the
        tickets to release now."""
        self._running.pop((job_id, attempt), None)
        return self.release()

    def resize(self, slots: int, per_principal: int) -> list[Ticket]:
        """The cluster changed size; returns the tickets to release now."""
        self.slots, self.per_principal = max(1, slots), max(1, per_principal)
        return self.release()

    def release(self) -> list[Ticket]:
        released: list[Ticket] = []
        while len(self._running) < self.slots:
            ticket = self._next()
            if ticket is None:
                break
            del self._waiting[ticket.job_id]
            self._served[ticket.principal] = next(self._seq)
            self._running[(ticket.job_id, ticket.attempt)] = ticket
            released.append(ticket)
        return released

    def _next(self) -> Ticket | None:
        held = self.running_by_principal()
        oldest: dict[str, tuple[int, Ticket]] = {}
        for seq, ticket in self._waiting.values():
            current = oldest.get(ticket.principal)
            if current is None or seq < current[0]:
                oldest[ticket.principal] = (seq, ticket)
        eligible = [
            (held.get(principal, 0), self._served.get(principal, -1), seq, ticket)
            for principal, (seq, ticket) in oldest.items()
            if held.get(principal, 0) < self.per_principal
        ]
        return min(eligible, key=lambda e: e[:3])[3] if eligible else None

    def running_by_principal(self) -> dict[str, int]:
        held: dict[str, int] = {}
        for ticket in self._running.values():
            held[ticket.principal] = held.get(ticket.principal, 0) + 1
        return held

    def tracked(self) -> set[str]:
        """Ids of the jobs this queue holds (waiting or released)."""
        return set(self._waiting) | {job_id for job_id, _ in self._running}

    def waiting(self) -> int:
        return len(self._waiting)
