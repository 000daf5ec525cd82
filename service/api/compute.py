"""CPU-bound request work (planning, pricing, prediction) off the API's interpreter.

Pricing a job is pure Python and numpy over public facts: a 16-candidate ``private_tuning``
spec of 10⁶ ``noisy_sgd_bst14`` iterations takes seconds of CPU. Run in the API process — on the
event loop or in its thread pool alike — it holds the GIL, and every other principal's requests
wait behind it (issue 23: another principal's ``GET budget`` p50 went from 18 ms to 2.3 s under
16 such connections). So the routes hand that work to a :class:`ComputePool`:

- a bounded pool of worker PROCESSES (``DPFIT_COMPUTE_PROCESSES``, default one per two cores,
  at least 1), started with ``forkserver`` (never ``fork``: the API process holds threads and
  database connections), each at ``nice`` +10 so the API's own request handling keeps the CPU;
  ``DPFIT_COMPUTE_PROCESSES=0`` runs the work in the request's thread instead, bounded by a
  semaphore of one slot per core (the in-process tests use it);
- a bounded LRU :class:`PriceCache`: an identical request on the same dataset facts is priced
  once. Its key is the public dataset facts (n, d, δ_B, label kind, classes, retired) plus the
  canonical hash of the request body and the cluster's declared shape; its value is the priced
  plan. No data is in either: pricing reads only public facts (docs/privacy-model.md).

Domain refusals raised in a worker (:class:`InfeasibleSpec`, :class:`DatasetRetired`, a
``ProblemError``) come back as values and are re-raised in the request's thread, so the routes
answer exactly as they did when the work ran inline.
"""

from __future__ import annotations

import contextlib
import copy
import multiprocessing
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

from service.api.errors import ProblemError
from service.errors import DatasetRetired
from service.privacy.target import InfeasibleSpec

T = TypeVar("T")
#: Modules the compute processes import before forking (the work the routes send them).
PRELOAD = ("service.domain.submission", "service.api.models")

__all__ = ["ComputePool", "PriceCache", "default_processes"]


def default_processes() -> int:
    """One compute process per two cores, at least one."""
    return max(1, (os.cpu_count() or 1) // 2)


def _lower_priority() -> None:  # pragma: no cover - runs in the worker processes
    """Worker initializer: yield the CPU to the API process (nice +10, capped at 19)."""
    with contextlib.suppress(OSError):
        os.nice(10)


def _refusal_of(exc: BaseException) -> tuple[str, ...] | None:
    if isinstance(exc, InfeasibleSpec):
        return ("infeasible", exc.field, exc.message)
    if isinstance(exc, DatasetRetired):
        return ("retired", exc.dataset_id)
    if isinstance(exc, ProblemError):
        return ("problem", str(exc.status), exc.title, exc.detail, exc.field or "")
    return None


def _raise_refusal(refusal: tuple[str, ...]) -> None:
    kind = refusal[0]
    if kind == "infeasible":
        raise InfeasibleSpec(refusal[1], refusal[2])
    if kind == "retired":
        raise DatasetRetired(refusal[1])
    raise ProblemError(int(refusal[1]), refusal[2], refusal[3], refusal[4] or None)


def _call(fn: Callable[..., Any], args: tuple[Any, ...]) -> tuple[str, Any]:
    """Run ``fn(*args)`` and return ("ok", result) or ("refused", refusal): the domain errors
    do not all survive pickling, so they travel as plain tuples."""
    try:
        return "ok", fn(*args)
    except (InfeasibleSpec, DatasetRetired, ProblemError) as exc:
        refusal = _refusal_of(exc)
        assert refusal is not None
        return "refused", refusal


def _unwrap(outcome: tuple[str, Any]) -> Any:
    kind, value = outcome
    if kind == "refused":
        _raise_refusal(value)
    return value


class ComputePool:
    """Where the routes run CPU-bound work: ``run(fn, *args)`` blocks the calling (request)
    thread, never the event loop, until the result is there, and re-raises domain refusals.

    ``processes`` > 0: a process pool of that size (created at the first call, so an app that
    never prices starts no process); 0: inline in the calling thread, at most ``os.cpu_count()``
    at once. ``fn`` and its arguments must be picklable (module-level functions, frozen facts).
    """

    def __init__(self, processes: int) -> None:
        self.processes = max(0, processes)
        self._executor: ProcessPoolExecutor | None = None
        self._closed = False
        self._lock = threading.Lock()
        self._inline = threading.BoundedSemaphore(max(1, os.cpu_count() or 1))

    def _pool(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._closed:
                raise RuntimeError("the compute pool is closed (the app is shutting down)")
            if self._executor is None:
                context = multiprocessing.get_context("forkserver")
                # The fork server imports the pricing code once; workers fork from it ready.
                context.set_forkserver_preload(list(PRELOAD))
                self._executor = ProcessPoolExecutor(
                    max_workers=self.processes, mp_context=context, initializer=_lower_priority
                )
            return self._executor

    def warm(self) -> None:
        """Start the processes now, in the background (the first request does not pay it); the
        app's start calls it, and so re-opens a pool a previous shutdown closed."""
        with self._lock:
            self._closed = False
        if self.processes > 0:
            threading.Thread(target=self._warm, name="compute-warm", daemon=True).start()

    def _warm(self) -> None:
        with contextlib.suppress(Exception):  # a failed warm-up shows at the first request
            futures = [self._pool().submit(os.getpid) for _ in range(self.processes)]
            for future in futures:
                future.result()

    def submit(self, fn: Callable[..., T], *args: Any) -> Future[tuple[str, Any]]:
        """Start ``fn(*args)``; the future's result is an outcome for :func:`_unwrap`."""
        if self.processes == 0:
            future: Future[tuple[str, Any]] = Future()
            with self._inline:
                try:
                    future.set_result(_call(fn, args))
                except BaseException as exc:  # noqa: BLE001 - handed to the caller as is
                    future.set_exception(exc)
            return future
        try:
            return self._pool().submit(_call, fn, args)
        except BrokenProcessPool:  # a worker died (e.g. OOM-killed): start a fresh pool once
            self._replace_broken()
            return self._pool().submit(_call, fn, args)

    def run(self, fn: Callable[..., T], *args: Any) -> T:
        return _unwrap(self.submit(fn, *args).result())  # type: ignore[no-any-return]

    def _replace_broken(self) -> None:
        with self._lock:
            broken, self._executor = self._executor, None
        if broken is not None:
            broken.shutdown(wait=False, cancel_futures=True)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)


class PriceCache:
    """A bounded LRU of priced requests: ``key`` (public facts + request hash) → the future of
    its outcome, so identical concurrent requests share ONE computation, and later ones none.

    Refusals (an infeasible spec) are cached too — pricing is deterministic in the key. A
    failure that is not a domain refusal (a broken pool) is dropped from the cache so the next
    request computes afresh. Thread-safe; ``capacity`` 0 disables caching.
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = max(0, capacity)
        self._entries: OrderedDict[Hashable, Future[tuple[str, Any]]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get_or_compute(
        self,
        key: Hashable,
        pool: ComputePool,
        fn: Callable[..., T],
        *args: Any,
    ) -> T:
        if self.capacity == 0:
            return pool.run(fn, *args)
        with self._lock:
            future = self._entries.get(key)
            if future is not None:
                self._entries.move_to_end(key)
                self.hits += 1
            else:
                self.misses += 1
        if future is None:
            future = pool.submit(fn, *args)
            with self._lock:
                self._entries[key] = future
                self._entries.move_to_end(key)
                while len(self._entries) > self.capacity:
                    self._entries.popitem(last=False)
        try:
            # A copy: callers own what they get (a stored spec or plan may be amended).
            return copy.deepcopy(_unwrap(future.result()))  # type: ignore[no-any-return]
        except (InfeasibleSpec, DatasetRetired, ProblemError):
            raise
        except BaseException:
            with self._lock:
                if self._entries.get(key) is future:
                    del self._entries[key]
            raise
