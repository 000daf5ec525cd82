"""Partitions of a dataset for data-parallel jobs, and the memory a job's encoded rows need.

A partition is a window ``[start, stop)`` of rows in the source's stable row order (file order
for CSV and Parquet — a Parquet folder's files in sorted order —, the documented order for SQL
tables; :mod:`service.data.source`). Guarantees:

- **Public sizes.** :func:`split_rows` cuts ``n`` rows into ``parts`` windows whose sizes depend
  on ``n`` and ``parts`` only (they differ by at most one row). ``n`` is public (fixed at
  registration) and the number of partitions is the operator's cluster shape, so the row count of
  every partition is public. Which rows fall in a window is a function of the row order alone,
  which no cell can change (the sources' row rules); a window's boundaries never depend on data.
- **Bit-identical rows.** :class:`WindowSource` hands out exactly the rows of the window, in
  order, so :func:`service.data.reader.read_encoded` on it gives the corresponding slice of what
  it gives on the whole source, bit for bit (the reader is row-local).
- **Reading cost.** On a Parquet folder a window opens only the files it intersects (their row
  counts come from the footers: public metadata); inside a file, and for CSV and SQL sources,
  the rows before the window are streamed and dropped (memory stays one block).

The memory side (:func:`encoded_bytes`, :func:`choose_layout`) works from public facts only:
``n``, the encoded dimension and the label's shape.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import pyarrow as pa

from service.data.limits import ReadLimits, limits_of
from service.data.source import Source, SourceFormat

if TYPE_CHECKING:
    from service.settings import Settings

__all__ = [
    "DATA_FRACTION",
    "MACHINE_SHARE",
    "PAUSE_FRACTION",
    "TERMINATE_FRACTION",
    "READER_BLOCK_BYTES",
    "READER_BYTES",
    "READER_BYTES_PER_COLUMN",
    "STEP_BYTES_PER_ROW",
    "WORKER_PROCESS_BYTES",
    "Layout",
    "RowWindow",
    "WindowSource",
    "choose_layout",
    "default_worker_memory",
    "encoded_bytes",
    "reader_bytes",
    "split_rows",
    "spread_fits",
    "usable_bytes",
    "worker_memory_limit",
    "worker_overhead",
]

# What a worker needs beside a job's rows. Measured (bench/RESULTS.md, "The big folder job",
# 2026-11-26, 2 shared cores) on the 6e6 × 40 folder over 4 service workers, RSS sampled every
# 20 ms: 274 MiB per worker at rest, 481 MiB of rows each, peaks 824–826 MiB for the workers
# that only hold a partition and 830–831 MiB for the one that also drives the job.
#: The worker process: the interpreter, numpy, scipy, pyarrow, pandas, dp-accounting,
#: SQLAlchemy, psycopg, the service (the dispatcher imports the runner on every worker) and
#: Dask: 274 MiB RSS at rest; plus what the worker driving a job holds while it runs (its
#: database engine and ORM, its Dask client: its peak 4–6 MiB above the other workers' with
#: Dask's profiler off, ``cluster.WORKER_CONFIG``; 9–19 MiB, growing with the job, with it on).
#: 280 MiB, rounded up to keep 4 MiB above the largest peak measured.
WORKER_PROCESS_BYTES = 284 << 20
#: While a window is read, at least: a CSV or SQL source holds one block and its encoding.
READER_BYTES = 64 << 20
#: Arrow's Parquet reader per source column read: about one data page and one dictionary page
#: at Arrow's default 1 MiB pages (55.4 MiB for 41 columns: Arrow's pool at its peak, measured);
#: a source with many columns needs more than :data:`READER_BYTES` while it is read. Parquet
#: files with much larger pages need more: public metadata the owner controls
#: (docs/reference/cluster.md#growing-to-a-cluster-of-many-machines-data-parallel-jobs).
READER_BYTES_PER_COLUMN = 1384 << 10
#: Beside the page buffers while reading: one 2 MiB block (``data_parallel.PARTITION_BLOCK_BYTES``)
#: and what the allocator holds between two trims (``data_parallel.TRIM_EVERY_BLOCKS`` blocks'
#: freed arrays and temporaries), and what a worker keeps after a read (Arrow's and Python's
#: caches): 13–15 MiB measured at the read's end above the pages, rows and process; 16 planned.
READER_BLOCK_BYTES = 18 << 20
#: While steps run: a gradient's temporaries, about three float64 vectors per row held.
STEP_BYTES_PER_ROW = 24
#: The memory fraction a job's planned peak may reach (:func:`usable_bytes`): the process, the
#: reader or the steps' temporaries, and the rows, all from public sizes and measured constants
#: (the estimate is at or above every measured peak: 838 MiB planned for the 6e6 × 40 job's
#: workers, 824–831 measured). It sits :data:`PAUSE_FRACTION` − DATA_FRACTION (1.5 % of the
#: limit: 13.5 MiB of a 900 MiB worker) below the pause threshold and 4.5 % below the restart —
#: headroom for what the constants cannot see (another host's libraries and allocator: the same
#: job peaked 45 MiB lower on the previous session's host; run-to-run jitter, up to 8 MiB here).
#: Tighter than 5 % on purpose: the plan is at or above every measured peak, and a worker that
#: pauses anyway is back-pressure, never a failure (:data:`PAUSE_FRACTION`; a live test pauses
#: one mid-fit); at 0.9 the issue's 6e6 × 40 job on 4 × 900 MiB (planned 838 MiB, measured
#: ≤ 831) would be refused, at 0.935 it runs with 24 MiB below the pause by its largest peak.
DATA_FRACTION = 0.935
#: Dask's ``distributed.worker.memory.pause`` for the embedded cluster (cluster.py; external
#: workers set ``DASK_DISTRIBUTED__WORKER__MEMORY__PAUSE`` to it, docs/reference/cluster.md).
#: A paused worker starts no new task, but answers its actors' calls (a data-parallel job's
#: steps), so a pause is back-pressure: the driver waits (service/workers/data_parallel.py),
#: never fails.
PAUSE_FRACTION = 0.95
#: Dask's ``distributed.worker.memory.terminate``: the nanny restarts a worker above it (a lost
#: worker: the data-parallel fit restarts on the workers alive). Above the pause threshold.
TERMINATE_FRACTION = 0.98
#: A job runs in one process only if its rows take at most this share of what a worker can
#: hold: the single-process path copies the rows once — the optimizers' checked rows
#: (``optimizers.inputs.checked_data``: every row divided by max(‖x‖, 1)) or the full-gradient
#: loops' ``GradientRows``, whose dense and one-hot parts never take more bytes than the dense
#: cells they hold (``inputs.SPARSE_MIN_WIDTH``) — whatever the values.
SINGLE_PROCESS_SHARE = 0.5


#: Without ``DPFIT_WORKER_MEMORY`` the embedded cluster's workers share this fraction of the
#: machine's memory (its cgroup limit in a container), in equal limits: the rest is for the API
#: process, the scheduler, the nannies and the operating system. Issue 23: a worker without a
#: limit grew without bound on a hostile file.
MACHINE_SHARE = 0.75


def machine_memory() -> int:
    """The machine's memory in bytes, or its cgroup limit when lower (Dask's own figure)."""
    from distributed.system import MEMORY_LIMIT

    return int(MEMORY_LIMIT)


def default_worker_memory(workers: int, total: int | None = None) -> int:
    """Each of ``workers`` workers' share of :data:`MACHINE_SHARE` of ``total`` bytes (the
    machine's memory by default), rounded down to a MiB."""
    total = machine_memory() if total is None else total
    share = int(MACHINE_SHARE * total) // max(1, workers)
    return max(1 << 20, share >> 20 << 20)


def worker_memory_limit(settings: Settings) -> int | None:
    """Each worker's memory limit as admission and the embedded cluster use it:
    ``DPFIT_WORKER_MEMORY`` when set; else, for the embedded cluster, the machine's default
    (:func:`default_worker_memory`); else (an external cluster whose limit the operator did not
    state) ``None``: admission cannot check and the runner checks the live workers' limits."""
    if settings.worker_memory:
        return settings.worker_memory
    if settings.dask_scheduler:
        return None
    return default_worker_memory(settings.workers)


@dataclass(frozen=True)
class RowWindow:
    """Rows ``start ≤ i < stop`` of a source's stable order."""

    start: int
    stop: int

    @property
    def rows(self) -> int:
        return self.stop - self.start


def split_rows(n: int, parts: int) -> list[RowWindow]:
    """``parts`` consecutive windows covering ``0 … n−1``; the first ``n % parts`` windows hold
    one row more. Sizes are a function of (n, parts) only."""
    if n < 0 or parts < 1:
        raise ValueError("n must be >= 0 and parts >= 1")
    base, extra = divmod(n, parts)
    windows, start = [], 0
    for index in range(parts):
        stop = start + base + (1 if index < extra else 0)
        windows.append(RowWindow(start, stop))
        start = stop
    return windows


def encoded_bytes(n: int, dimension: int, classes: int | None) -> int:
    """Bytes of a job's encoded rows in memory: ``X`` (n × dimension float64) and the labels
    (n float64, or K × n for a categorical label with K classes)."""
    return 8 * n * (dimension + max(1, classes or 1))


def reader_bytes(columns: int | None) -> int:
    """What reading needs for ``columns`` source columns (declared features and the label; a
    public fact of the dataset): at least :data:`READER_BYTES`; for Parquet, the page buffers
    of every column read (:data:`READER_BYTES_PER_COLUMN`) and :data:`READER_BLOCK_BYTES`
    (73.4 MiB for 41 columns; 72–73 MiB measured above the process and the rows)."""
    if not columns:
        return READER_BYTES
    return max(READER_BYTES, READER_BYTES_PER_COLUMN * columns + READER_BLOCK_BYTES)


def worker_overhead(rows: int, columns: int | None = None) -> int:
    """Bytes a worker needs beside ``rows`` encoded rows: the process, and the larger of the two
    phases that follow each other — reading (:func:`reader_bytes`, freed before the first step)
    and stepping (:data:`STEP_BYTES_PER_ROW` per row)."""
    return WORKER_PROCESS_BYTES + max(reader_bytes(columns), STEP_BYTES_PER_ROW * rows)


def usable_bytes(memory_limit: int, rows: int, columns: int | None = None) -> int:
    """Bytes of job data a worker with ``memory_limit`` may hold when that data is ``rows`` rows
    read from ``columns`` source columns: up to :data:`DATA_FRACTION` of the limit (with
    headroom below Dask's pause threshold, :data:`PAUSE_FRACTION`), beside
    :func:`worker_overhead`. Public sizes only: never a cell's content."""
    return max(0, int(DATA_FRACTION * memory_limit) - worker_overhead(rows, columns))


@dataclass(frozen=True)
class Layout:
    """Where a job's rows live: ``single`` (one worker reads them all) or ``partitioned``
    (``parts`` windows, one per worker), or ``infeasible`` with the bytes it would need."""

    kind: Literal["single", "partitioned", "infeasible"]
    needed_bytes: int
    parts: int = 1
    reason: str = ""


def choose_layout(
    n: int,
    dimension: int,
    classes: int | None,
    worker_memory: Sequence[int | None],
    *,
    data_parallel: bool,
    min_rows: int | None,
    columns: int | None = None,
) -> Layout:
    """The layout of a job from public facts and the cluster's per-worker memory limits
    (``None`` or 0 = unlimited).

    - Partitioned when the optimizer supports it (``data_parallel``) and either ``n`` reaches
      the operator's ``min_rows`` (with at least two workers) or the rows do not fit
      comfortably in one worker (more than :data:`SINGLE_PROCESS_SHARE` of what it can hold).
      Every worker then gets one window (equal sizes), so the smallest worker bounds the job.
    - Single otherwise, if one worker can hold the rows.
    - Infeasible when no layout fits: ``reason`` says how much memory the job needs.
    """
    needed = encoded_bytes(n, dimension, classes)
    workers = len(worker_memory)
    if workers == 0:
        return Layout("infeasible", needed, reason="the cluster has no worker")
    limits = [int(m) for m in worker_memory if m]
    unlimited = len(limits) < workers
    largest = math.inf if unlimited else max(usable_bytes(m, n, columns) for m in limits)
    fits_one = needed <= SINGLE_PROCESS_SHARE * largest
    part_rows = math.ceil(n / workers)
    per_part = encoded_bytes(part_rows, dimension, classes)
    smallest = min((usable_bytes(m, part_rows, columns) for m in limits), default=math.inf)
    fits_spread = per_part <= smallest
    wants_parallel = (min_rows is not None and n >= min_rows and workers > 1) or not fits_one
    if data_parallel and wants_parallel and fits_spread and (workers > 1 or not fits_one):
        return Layout("partitioned", needed, parts=workers)
    if fits_one:
        return Layout("single", needed)
    if not data_parallel:
        where = "in one worker (this optimizer reads every row in one process)"
        rows, limit = n, max(limits)
    else:
        where = f"in each of the cluster's {workers} worker(s) (the rows spread over all)"
        rows, limit = part_rows, min(limits)
    rows_bytes = encoded_bytes(rows, dimension, classes)
    overhead = worker_overhead(rows, columns)
    reason = (
        f"this job needs about {_mib(rows_bytes + overhead)} MiB {where} at its peak: "
        f"{_mib(rows_bytes)} MiB of encoded rows beside {_mib(overhead)} MiB for the worker "
        f"process and reading, more than the {DATA_FRACTION:.1%} of a worker's "
        f"{_mib(limit)} MiB limit a job may plan for"
    )
    return Layout("infeasible", needed, reason=reason)


def _mib(size: float) -> int:
    return math.ceil(size / (1 << 20))


def single_here(
    n: int,
    dimension: int,
    classes: int | None,
    own_memory: int | None,
    *,
    min_rows: int | None,
    columns: int | None = None,
) -> bool:
    """True when the worker running the job (memory limit ``own_memory``, ``None``/0 =
    unlimited) settles the layout alone: the rows fit comfortably in it and ``n`` is below the
    operator's ``min_rows``. Then :func:`choose_layout` answers "single" for *every* cluster
    that contains this worker (its largest worker holds at least as much, and nothing asks for
    partitions), so the cluster's memory need not be asked for."""
    if min_rows is not None and n >= min_rows:
        return False
    room = usable_bytes(own_memory, n, columns) if own_memory else math.inf
    return encoded_bytes(n, dimension, classes) <= SINGLE_PROCESS_SHARE * room


def spread_fits(
    n: int,
    dimension: int,
    classes: int | None,
    worker_memory: Sequence[int | None],
    columns: int | None = None,
) -> bool:
    """True if one equal window per worker fits every worker (``None``/0 = unlimited)."""
    if not worker_memory:
        return False
    part_rows = math.ceil(n / len(worker_memory))
    per_part = encoded_bytes(part_rows, dimension, classes)
    return all(not m or per_part <= usable_bytes(int(m), part_rows, columns) for m in worker_memory)


class WindowSource:
    """The rows of ``window`` of ``source``, itself a :class:`~service.data.source.Source`.

    ``count_rows`` is the window's size (public), ``fingerprint`` the whole source's (the
    registered one). ``iter_batches`` yields exactly the window's rows in order, and raises
    nothing content-dependent: a source shorter than the window's end yields fewer rows, which
    :func:`~service.data.reader.read_encoded` reports as a source that changed.
    """

    def __init__(self, source: Source, window: RowWindow) -> None:
        if window.start < 0 or window.stop < window.start:
            raise ValueError("invalid row window")
        self._source = source
        self._window = window

    @property
    def format(self) -> SourceFormat:
        return self._source.format

    @property
    def location(self) -> str:
        return self._source.location

    def columns(self) -> list[str]:
        return self._source.columns()

    @property
    def limits(self) -> ReadLimits:
        """The wrapped source's public read limits (a window reads by the same rules)."""
        return limits_of(self._source)

    def count_rows(self) -> int:
        return self._window.rows

    def fingerprint(self) -> str:
        return self._source.fingerprint()

    def files_unchanged(self, registered: dict[str, str]) -> bool:
        """Whether the folder still holds exactly the registered files and every member file
        this window reads still has its registered fingerprint (a Parquet folder registered with
        per-file fingerprints); hashes only those files. A source without members is not
        unchanged."""
        members = getattr(self._source, "members", None)
        parts = members() if callable(members) else None
        if not parts:
            return False
        if {getattr(m, "file_name", None) for m, _ in parts} != set(registered):
            return False
        offset = 0
        for member, rows in parts:
            start, offset = offset, offset + rows
            if offset <= self._window.start or start >= self._window.stop:
                continue
            name = getattr(member, "file_name", None)
            if name is None or registered.get(name) != member.fingerprint():
                return False
        return True

    def iter_batches(self, columns: Sequence[str], rows_per_block: int) -> Iterator[pa.RecordBatch]:
        """The window's rows of ``columns`` in blocks of at most ``rows_per_block``."""
        if self._window.rows == 0:
            return
        members = getattr(self._source, "members", None)
        parts = members() if callable(members) else None
        if not parts:
            yield from _slice(self._source, columns, rows_per_block, self._window)
            return
        offset = 0
        for member, rows in parts:
            window = RowWindow(
                max(self._window.start - offset, 0), min(self._window.stop - offset, rows)
            )
            offset += rows
            if window.stop <= 0 or window.start >= rows:
                continue
            yield from _slice(member, columns, rows_per_block, window)
            if offset >= self._window.stop:
                return


def _slice(
    source: Source, columns: Sequence[str], rows_per_block: int, window: RowWindow
) -> Iterator[pa.RecordBatch]:
    """Rows ``window`` of ``source`` by streaming it and dropping what lies outside."""
    position = 0
    for batch in source.iter_batches(columns, rows_per_block):
        end = position + batch.num_rows
        if end > window.start:
            lo = max(window.start - position, 0)
            hi = min(window.stop - position, batch.num_rows)
            if hi > lo:
                yield batch.slice(lo, hi - lo)
        position = end
        if position >= window.stop:
            return
