"""Data-parallel full-gradient jobs on the Dask cluster: rows stay on the workers that read them.

How a partitioned job runs (the driver is the job's own ``run_job`` task, on one worker, in a
seceded thread — never the API process):

1. The driver cuts the public ``n`` into one row window per live worker
   (:func:`service.data.partitions.split_rows`: sizes depend on ``n`` and the number of workers
   only) and creates one :class:`PartitionHolder` Dask *actor* pinned to each worker
   (``workers=[address]``, ``allow_other_workers=False``). Each reopens the source, reads *its*
   window with the row-local reader (bit-identical to the same rows of a whole read), checks its
   rows as a single-process fit would (finite, ‖x‖₂ ≤ 1, admissible labels) and keeps ``X``,
   ``Y`` in its own process memory (:data:`_STORE`, keyed by job, attempt, round and partition)
   — outside Dask's managed memory, so Dask never spills, moves or replicates the rows. Only the
   row count (public) comes back.
2. Every step, the optimizer asks its :class:`~service.optimizers.kits.full_gradient.SummedGradient`
   oracle for ∇F(w); the driver calls ``partial_gradient(w)`` on every actor (a direct call to
   its worker: w in, one d-vector out), waits for *all* answers and reduces them in partition
   order; the optimizer adds the noise once and steps. Only d-vectors travel. For
   ``dp_agd_averaged``'s row map the oracle also sums each partition's rows (one w-vector per
   worker, for the mean's release) and has each worker map its rows from the public map —
   in place for a binary or joint job, on the fly for one-vs-rest
   (:mod:`service.workers.partition_row_map`, which says why: no copy, memory as planned) —
   and sums the mapped rows' Gram matrix (one w × w matrix per worker, for the curvature
   step's eigenvalue release) and, for a joint model's curvature refresh, their curvature terms
   (K symmetric w × w blocks per worker).
3. At the end (success or not) the driver drops the rows on every worker
   (:func:`release_partitions`) and releases the actors.

Faults. A missing answer never becomes a partial sum: every partition's future must finish, and
an error in any of them fails the step. A *paused* worker (Dask's memory pause,
``partitions.PAUSE_FRACTION``) is back-pressure, never a failure: it still answers its actors'
calls, and the driver waits for it. If a worker holding a partition leaves the cluster
(killed, out of memory), the driver notices within :data:`POLL_S` and starts the fit again from
the start on the workers then alive (new windows, reloaded rows, fresh noise from the same
generator), at most ``max_rounds`` times; then the job fails. Only the final run's output is ever
released; the job's charge stands in every case (its data was read).

Memory. The placement gives every worker one equal window; admission refused the job before any
charge, and the runner before any read, if the smallest worker's share does not fit with its
planned peak at ``partitions.DATA_FRACTION`` of the limit — below Dask's pause threshold
(``partitions.choose_layout``; public sizes only).
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from service.data.backends import reopen_source
from service.data.encoding import Encoder
from service.data.partitions import RowWindow, WindowSource, split_rows
from service.data.reader import read_encoded
from service.data.sources import SourceError
from service.data.spec import LabelSpec
from service.domain.roots import owner_settings
from service.models.base import FloatArray, Loss, fit_labels
from service.optimizers.kits.dp_agd_row_map import RowMap
from service.optimizers.kits.full_gradient import (
    GradientOracle,
    PartitionMissing,
    partial_gradient_sum,
)
from service.optimizers.kits.inputs import row_divisors
from service.settings import Settings
from service.workers.partition_row_map import (
    PartitionOracle,
    column_sums,
    map_in_place,
    mapped_gradient_sum,
    partition_curvature_terms,
    partition_deviation_sum,
    partition_gram,
    same_mapping,
)
from service.workers.row_cache import drop_cached_rows
from service.workers.scheduler_workers import scheduler_workers

__all__ = [
    "POLL_S",
    "PartitionHolder",
    "PartitionRead",
    "WorkerLost",
    "WorkerPaused",
    "cluster_memory",
    "fit_partitioned",
    "held_partitions",
    "load_partition",
    "partial_gradient",
    "release_partitions",
]

logger = logging.getLogger("dpfit.worker")

#: How often the driver checks that the workers holding its partitions are alive while waiting.
POLL_S = 1.0
#: How long the driver waits for the release of a job's rows before returning (a paused worker
#: runs the release task when it resumes; the actors' release calls are answered at once).
RELEASE_WAIT_S = 30.0
#: Bytes of float64 cells per block when a worker reads its window (the single-process reader
#: uses 16 MiB). A block's cost is paid several times over at the read's peak — Arrow's decoded
#: batch and the encoder's temporaries, on top of the rows already read — and a worker holding a
#: partition runs close to its memory limit. Reading a 1.5e6 × 41 window of the 6e6 × 40 folder,
#: Arrow's pool peaked at 55 MiB with these blocks against 92 MiB with 16 MiB blocks.
PARTITION_BLOCK_BYTES = 2 << 20
#: Rows per step of the row checks (finite, norms) on a partition: their temporaries stay a few
#: MiB instead of a boolean copy of the whole partition.
CHECK_BLOCK_ROWS = 1 << 15
#: While a worker reads its window, the allocator's free memory goes back to the operating
#: system every this many blocks (:class:`_Trimmed`; ≈ 8 MiB of cells at 2 MiB blocks).
TRIM_EVERY_BLOCKS = 4

#: Rows held by this worker process for running jobs: key → (X, Y). Per process, never pickled.
_STORE: dict[str, tuple[FloatArray, FloatArray]] = {}
_STORE_LOCK = threading.Lock()
#: Partitions this process has loaded since it started (a public count, for tests and benches).
_LOADED = [0]


class WorkerLost(RuntimeError):
    """A worker holding a partition of the job left the cluster."""


class WorkerPaused(RuntimeError):
    """Kept for callers that caught it: a paused worker no longer fails a job (it is waited for,
    :func:`_check_alive`)."""


@dataclass(frozen=True)
class PartitionRead:
    """What a worker needs to read its window: all public (the dataset row and the job spec)."""

    source_format: str
    location: str
    encoder: dict[str, Any]
    label: dict[str, Any]
    label_bound: float | None
    n: int
    dimension: int
    # A Parquet folder's registered per-file fingerprints: each worker checks, after reading,
    # the files its window read (instead of the driver hashing the whole folder again).
    file_fingerprints: dict[str, str] | None = None
    columns: int | None = None  # source columns read (declared features + label)
    owner: str = ""  # the dataset's owner: the window is read within the roots open to them
    owner_is_admin: bool = False


# --------------------------------------------------------------------------------------------
# Worker side
# --------------------------------------------------------------------------------------------


def load_partition(
    key: str, job_prefix: str, read: PartitionRead, window: RowWindow, loss: Loss
) -> int:
    """Read, encode and check rows ``window`` of the source and keep them under ``key`` in
    this worker; drop rows of other rounds of the same job (``job_prefix``). Returns the row
    count (public). Raises ``SourceError``/``ValueError`` without data values."""
    release_partitions(job_prefix)
    drop_cached_rows()  # a cached source's rows are not in the plan: never beside a partition
    mine = owner_settings(Settings.from_env(), read.owner, read.owner_is_admin)
    source = reopen_source(read.source_format, read.location, mine)
    encoder = Encoder.from_dict(read.encoder)
    label = LabelSpec.model_validate(read.label)
    columns = len(encoder.columns) + 1
    block = max(1, PARTITION_BLOCK_BYTES // (8 * max(columns, encoder.dimension)))
    windowed = WindowSource(source, window)
    X, Y = read_encoded(_Trimmed(windowed), encoder, label, read.label_bound, block)
    if read.file_fingerprints and not windowed.files_unchanged(read.file_fingerprints):
        raise SourceError("source changed while the job was reading it")
    _return_free_memory()
    Y = fit_labels(loss, Y)  # a joint multiclass loss takes class indices (row-local)
    _check_rows(loss, X, Y, window.rows, read.dimension)
    with _STORE_LOCK:
        _STORE[key] = (X, Y)
        _LOADED[0] += 1
    return int(X.shape[0])


class _Trimmed:
    """``source`` whose :meth:`iter_batches` hands the allocator's free memory back to the
    operating system every :data:`TRIM_EVERY_BLOCKS` blocks (:func:`_return_free_memory`).

    The blocks' Arrow arrays and the encoder's temporaries are freed block after block, but
    glibc keeps the freed pages of its heaps for reuse; without a trim they accumulate during the
    read, and the read's end — every row held, Arrow's page buffers still open — is a partition
    worker's peak. Reading window 2 of 4 of the 6e6 × 40 folder in a service worker: peak RSS
    842–845 MiB without, 825–827 MiB with a trim every 4 blocks (every block: 825; every 16:
    831). What is read, and in which order, is unchanged: only when freed memory is returned,
    after every :data:`TRIM_EVERY_BLOCKS`-th block — a function of the window's public size,
    never of a cell."""

    def __init__(self, source: WindowSource) -> None:
        self._source = source

    def __getattr__(self, name: str) -> Any:
        return getattr(self._source, name)

    def iter_batches(self, columns: Sequence[str], rows_per_block: int) -> Iterator[Any]:
        for index, batch in enumerate(self._source.iter_batches(columns, rows_per_block), 1):
            yield batch
            if index % TRIM_EVERY_BLOCKS == 0:
                _return_free_memory()


def _check_rows(loss: Loss, X: FloatArray, Y: FloatArray, rows: int, dimension: int) -> None:
    """The checks of ``optimizers.inputs.checked_data`` on one partition, in place: shape,
    finite, ‖x‖₂ ≤ 1 (every row divided by max(‖x‖, 1): rows above the bound by rounding only
    are rescaled to ≤ 1), admissible labels."""
    if X.shape != (rows, dimension) or Y.shape[-1] != rows:
        raise ValueError("the data's shape differs from the plan's public n and d")
    if not bool(np.all(np.isfinite(Y))):
        raise ValueError("rows and labels must be finite")
    for start in range(0, rows, CHECK_BLOCK_ROWS):
        block = X[start : start + CHECK_BLOCK_ROWS]
        if not bool(np.all(np.isfinite(block))):
            raise ValueError("rows and labels must be finite")
        # every row divided by max(‖x‖, 1) — 1.0 unless rounding put it above the bound — so the
        # work never depends on a value (optimizers.inputs.row_divisors)
        block /= row_divisors(block)[:, None]
    check_labels = getattr(loss, "check_labels", None)
    for labels in np.atleast_2d(Y):
        if check_labels is not None:
            check_labels(labels)
        elif not bool(np.all((labels == 1.0) | (labels == -1.0))):
            raise ValueError("labels must be -1 or +1")


def _return_free_memory() -> None:
    """Hand the reader's freed buffers back to the operating system (best effort): Arrow's pool
    and glibc's malloc keep freed blocks for reuse, which a worker about to hold a partition for
    the whole job cannot afford (≈ 150 MiB kept after a 1.5e6 × 41 read, measured)."""
    import pyarrow as pa

    pa.default_memory_pool().release_unused()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, looked up once (``find_library`` runs ``ldconfig``: ≈ 5 ms a
    call, paid at every trim before); ``None`` when the C library is not glibc."""
    import ctypes
    import ctypes.util

    libc = ctypes.util.find_library("c")
    if not libc:
        return None
    try:
        return cast(Callable[[int], int], ctypes.CDLL(libc).malloc_trim)
    except (OSError, AttributeError):  # not glibc: nothing to trim
        return None


def partial_gradient(
    key: str,
    loss: Loss,
    w: FloatArray,
    label_row: int | None,
    mapping: RowMap | None = None,
    in_place: RowMap | None = None,
) -> FloatArray:
    """Σ over this worker's partition ``key`` of the per-example gradients at ``w`` (labels of
    class ``label_row`` for one-vs-rest), on the rows mapped by ``mapping`` when given
    (:mod:`service.workers.partition_row_map`: already in place when ``in_place`` is that
    mapping, else block by block). ``KeyError`` if the partition is not here; ``ValueError``
    if its rows were mapped in place by another mapping (or none was asked for)."""
    with _STORE_LOCK:
        X, Y = _STORE[key]
    y = Y if label_row is None else Y[label_row]
    if in_place is not None:
        if mapping is None or not same_mapping(mapping, in_place):
            raise ValueError("this partition's rows were mapped for another oracle")
        return partial_gradient_sum(loss, w, X, y)
    if mapping is not None:
        return mapped_gradient_sum(loss, w, X, y, mapping)
    return partial_gradient_sum(loss, w, X, y)


class PartitionHolder:
    """A Dask actor owning one partition on its worker: created with
    ``client.submit(PartitionHolder, …, actor=True, workers=[address])``, it loads the rows
    (:func:`load_partition`) and answers :meth:`partial_gradient` by a direct call to its
    worker — no scheduler hop per step (≈ 7 ms per step on this machine against ≈ 100 ms for a
    submitted task under load) and no task queue: a worker busy with another job's task still
    answers. :meth:`row_sum`, :meth:`deviation_sum`, :meth:`map_rows`, :meth:`mapped_gram` and
    :meth:`mapped_curvature_terms` are the row map's (:mod:`service.workers.partition_row_map`)."""

    def __init__(
        self, key: str, job_prefix: str, read: PartitionRead, window: RowWindow, loss: Loss
    ) -> None:
        self._key = key
        self._loss = loss
        self._rows = load_partition(key, job_prefix, read, window, loss)
        self._mapped: RowMap | None = None  # the mapping applied in place, if any

    def rows(self) -> int:
        """The partition's row count (public)."""
        return self._rows

    def row_sum(self) -> FloatArray:
        """Σ_i x_i over the partition's encoded rows."""
        if self._mapped is not None:
            raise ValueError("this partition's rows were mapped")
        with _STORE_LOCK:
            X, _ = _STORE[self._key]
        return column_sums(X)

    def map_rows(self, mapping: RowMap) -> int:
        """Replace the partition's rows by their mapped rows, once (the job's one fit)."""
        if self._mapped is not None:
            raise ValueError("this partition's rows were mapped")
        with _STORE_LOCK:
            X, _ = _STORE[self._key]
        map_in_place(X, mapping)
        self._mapped = mapping
        return self._rows

    def deviation_sum(self, centre: FloatArray, intercept: float) -> FloatArray:
        """Σ_i a(x_i) over the partition's encoded rows (the column scales' step 1)."""
        if self._mapped is not None:
            raise ValueError("this partition's rows were mapped")
        with _STORE_LOCK:
            X, _ = _STORE[self._key]
        return partition_deviation_sum(X, centre, intercept)

    def partial_gradient(
        self, w: FloatArray, label_row: int | None, mapping: RowMap | None = None
    ) -> FloatArray:
        """:func:`partial_gradient` of this partition at ``w``."""
        return partial_gradient(self._key, self._loss, w, label_row, mapping, self._mapped)

    def mapped_gram(self, mapping: RowMap) -> FloatArray:
        """Σ_i φ_i φ_iᵀ over this partition's rows mapped by ``mapping`` (w × w; the rows as
        mapped in place, else mapped block by block: :func:`partition_gram`, no copy)."""
        with _STORE_LOCK:
            X, _ = _STORE[self._key]
        return partition_gram(X, mapping, self._mapped)

    def mapped_curvature_terms(
        self, mapping: RowMap, w: FloatArray, basis: FloatArray
    ) -> FloatArray:
        """B_p = Σ_i m_i p_ik (1 − p_ik) r_i r_iᵀ (r_i = Qᵀφ_i) over this partition's rows mapped
        by ``mapping`` (K × w × w; the joint fit's class-index labels; the rows as mapped in place,
        else mapped block by block: :func:`partition_curvature_terms`, no copy)."""
        with _STORE_LOCK:
            X, Y = _STORE[self._key]
        return partition_curvature_terms(self._loss, X, Y, mapping, self._mapped, w, basis)

    def release(self) -> int:
        """Drop the partition's rows from this worker."""
        return release_partitions(self._key)


def release_partitions(job_prefix: str) -> int:
    """Drop every partition of this worker whose key starts with ``job_prefix``; returns how
    many were dropped."""
    with _STORE_LOCK:
        keys = [k for k in _STORE if k.startswith(job_prefix)]
        for k in keys:
            del _STORE[k]
    return len(keys)


def held_partitions() -> tuple[int, int]:
    """(partitions held now, partitions loaded since the process started) — counts only, for
    tests and benchmarks."""
    with _STORE_LOCK:
        return len(_STORE), _LOADED[0]


# --------------------------------------------------------------------------------------------
# Driver side
# --------------------------------------------------------------------------------------------


def own_memory() -> int | None:
    """The memory limit of the Dask worker running this task (0 = unlimited), or ``None`` when
    not running inside a Dask worker. Local: no round trip to the scheduler."""
    from distributed import get_worker

    try:
        worker = get_worker()
    except ValueError:
        return None
    return int(getattr(worker.memory_manager, "memory_limit", 0) or 0)


def cluster_memory() -> list[int | None] | None:
    """Per-worker memory limits of the cluster this task runs on (``None`` = unlimited), or
    ``None`` when not running inside a Dask worker."""
    from distributed import get_client, get_worker

    try:
        get_worker()
    except ValueError:
        return None
    workers = scheduler_workers(get_client())
    return [int(info.get("memory_limit") or 0) or None for info in workers.values()]


@dataclass
class _Partitions:
    """The loaded partitions of one round: (worker address, actor) in partition order."""

    client: Any
    placed: list[tuple[str, Any]]
    n: int
    dimension: int
    loss: Loss

    def oracle(self, label_row: int | None = None) -> GradientOracle:
        def call(method: str, *args: Any) -> list[Any]:
            try:
                calls = [getattr(actor, method)(*args) for _, actor in self.placed]
            except RuntimeError:  # Dask: "Worker holding Actor was lost"
                raise WorkerLost("a worker holding a partition was lost") from None
            return _actor_results(self.client, calls, [a for a, _ in self.placed])

        return PartitionOracle(self.loss, self.n, self.dimension, len(self.placed), call, label_row)


def _check_alive(client: Any, addresses: Sequence[str]) -> None:
    """:class:`WorkerLost` if a worker in ``addresses`` left the cluster. A *paused* worker (over
    Dask's pause threshold, ``partitions.PAUSE_FRACTION``) is not an error: it still answers its
    actors' calls — the steps — and runs queued tasks once its memory falls below the threshold,
    so the driver keeps waiting (back-pressure; logged, counts only). Jobs are planned with
    headroom below the threshold (``partitions.DATA_FRACTION``), so a pause is rare."""
    workers = scheduler_workers(client)
    if not set(addresses) <= set(workers):
        raise WorkerLost("a worker holding a partition left the cluster")
    paused = sum(1 for a in addresses if workers[a].get("status") == "paused")
    if paused:
        logger.info("%d worker(s) of a data-parallel job paused: waiting", paused)


def _actor_results(client: Any, calls: Sequence[Any], addresses: Sequence[str]) -> list[Any]:
    """The results of actor calls in order; :class:`WorkerLost` if a worker in ``addresses``
    leaves the cluster or its connection breaks; the first call's error re-raised otherwise."""
    results = []
    for call in calls:
        while True:
            try:
                results.append(call.result(timeout=POLL_S))
                break
            except TimeoutError:
                _check_alive(client, addresses)
            except OSError:  # CommClosedError and refused connections: the worker is gone
                raise WorkerLost("a worker holding a partition is unreachable") from None
    return results


def _wait_all(client: Any, futures: Sequence[Any], addresses: Sequence[str]) -> list[Any]:
    """The results of all ``futures`` in order; :class:`WorkerLost` if a worker in
    ``addresses`` leaves the cluster meanwhile; the first task error re-raised otherwise."""
    from distributed import wait

    while True:
        try:
            wait(futures, timeout=POLL_S)
            break
        except TimeoutError:
            try:
                _check_alive(client, addresses)
            except RuntimeError:
                client.cancel(list(futures))
                raise
    results = client.gather(list(futures))
    if len(results) != len(futures):
        raise PartitionMissing("a partition's answer is missing")
    return list(results)


def fit_partitioned(
    job_prefix: str,
    read: PartitionRead,
    loss: Loss,
    fit: Callable[[Callable[[int | None], GradientOracle]], FloatArray],
    *,
    after_load: Callable[[], None],
    max_rounds: int,
    min_free_bytes: Callable[[int, list[int | None]], bool] | None = None,
) -> FloatArray:
    """Load the job's rows over the live workers and run ``fit(oracle_for)`` on them, where
    ``oracle_for(label_row)`` gives the summed-gradient oracle (for one class of a one-vs-rest
    job, or ``None``). ``after_load`` runs once all partitions are loaded (the fingerprint
    re-check). ``min_free_bytes(parts, limits)`` may refuse a placement (``False`` →
    :class:`WorkerLost`). A lost worker restarts the whole fit (module docstring), at most
    ``max_rounds`` rounds. Must run inside a Dask worker task."""
    from distributed import worker_client

    with worker_client() as client:
        for round_ in range(1, max(1, max_rounds) + 1):
            workers = scheduler_workers(client)
            addresses = sorted(workers)
            limits = [int(workers[a].get("memory_limit") or 0) or None for a in addresses]
            if not addresses or (min_free_bytes and not min_free_bytes(len(addresses), limits)):
                raise WorkerLost("the cluster cannot hold the job's partitions now")
            windows = split_rows(read.n, len(addresses))
            prefix = f"{job_prefix}-r{round_}-"
            holders: list[Any] = []
            actors: list[Any] = []
            try:
                holders = [
                    client.submit(
                        PartitionHolder,
                        f"{prefix}p{i}",
                        job_prefix,
                        read,
                        window,
                        loss,
                        actor=True,
                        workers=[address],
                        allow_other_workers=False,
                        pure=False,
                        retries=0,
                    )
                    for i, (address, window) in enumerate(zip(addresses, windows, strict=True))
                ]
                actors = _wait_all(client, holders, addresses)
                try:
                    calls = [a.rows() for a in actors]
                except RuntimeError:  # Dask: "Worker holding Actor was lost"
                    raise WorkerLost("a worker holding a partition was lost") from None
                counts = _actor_results(client, calls, addresses)
                if counts != [w.rows for w in windows]:
                    raise PartitionMissing("a partition was not loaded whole")
                after_load()
                parts = _Partitions(
                    client, list(zip(addresses, actors, strict=True)), read.n, read.dimension, loss
                )
                return fit(parts.oracle)
            except WorkerLost as lost:  # a fixed message, no data
                logger.warning("%s: round %d: %s; restarting", job_prefix, round_, lost)
            finally:
                _release_everywhere(client, addresses, job_prefix, actors)
                client.cancel(holders)
    raise WorkerLost("workers were lost in every round of the job")


def _release_everywhere(
    client: Any, addresses: Sequence[str], job_prefix: str, actors: Sequence[Any] = ()
) -> None:
    """Drop the job's rows on every worker that may hold them (best effort: a dead worker's
    memory is gone with it). First through the partitions' actors — a call a paused worker
    still answers, and the one that frees its memory —, then a release task on every live
    worker (rows of a round whose actors were never returned); a paused worker runs that task
    once it resumes, so it is waited for at most :data:`RELEASE_WAIT_S`, never indefinitely."""
    from distributed import wait

    try:
        calls = []
        for actor in actors:
            try:
                calls.append(actor.release())
            except RuntimeError:  # its worker was lost: nothing held there any more
                continue
        for call in calls:
            try:
                call.result(timeout=RELEASE_WAIT_S)
            except Exception:  # noqa: BLE001 - a lost or slow worker: the task below retries
                continue
        live = set(scheduler_workers(client))
        futures = [
            client.submit(
                release_partitions,
                job_prefix,
                workers=[a],
                allow_other_workers=False,
                pure=False,
            )
            for a in addresses
            if a in live
        ]
        try:
            wait(futures, timeout=RELEASE_WAIT_S)
        except TimeoutError:
            logger.info("%s: a release waits for a paused worker", job_prefix)
    except Exception as exc:  # noqa: BLE001 - cleanup must not mask the job's outcome
        logger.warning("%s: releasing partitions failed: %s", job_prefix, type(exc).__name__)
