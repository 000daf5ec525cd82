"""Fitting inside PostgreSQL: rows that never leave the database (paper 004, Wu et al. 2017 §5).

A dataset registered with ``"execution": "in_database"`` is a PostgreSQL table whose rows the
worker never reads. For a job on it the worker opens one session to the owner's database and

1. in one ``REPEATABLE READ`` snapshot, checks the table's fingerprint against the registered one
   (the database streams 32-byte row digests, never rows), then materialises the *encoded* rows
   — the public encoding compiled to SQL (:mod:`service.data.sql_encoding`) — into a temporary
   table ``pg_temp.dpfit_rows`` (session-scoped: gone when the session ends; the connection's
   role needs no privilege beyond reading the table and creating temporary objects) and checks
   its row count against the public ``n``;
2. answers the optimizer's gradient queries with one aggregate each
   (:class:`InDatabaseGradient`): ``SELECT sum(c·x₀), …, sum(c·x_{d−1})`` where ``c`` is the
   loss's per-row coefficient at the iterate ``w`` (bound parameters) — only the d-sized sum
   leaves the database.

Sessions in parallel. PostgreSQL never scans a temporary table in parallel, and one backend
runs such an aggregate at ≈ 0.2–0.25 µs per row and column here (≈ 4 ns per SQL operator: the
floor of its expression interpreter; a large shard's queries are JIT-compiled without inlining,
:data:`JIT_MIN_CELLS`: with inlining the compilation costs more than it saves at 10⁶ rows),
3–4× numpy's time. So a full-gradient job
splits the rows over P sessions, as a parallel query splits a scan over its workers: the
first session exports its snapshot (``pg_export_snapshot``), the others adopt it (``SET
TRANSACTION SNAPSHOT``) before reading anything, so all read the one version of the table the
fingerprint was checked on; session k materialises the rows at positions p ≡ k (mod P) of
the source's stable order (exactly ⌈(n − k)/P⌉ rows, checked), and each gradient is the P
sessions' sums, queried concurrently and added in session order (the same gradient to
summation rounding). P = 1 + the database's ``max_parallel_workers_per_gather`` (as many
processes as one parallel query may use there: the owner's setting), at most
:data:`MAX_SESSIONS`, and one session per :data:`MIN_SHARD_ROWS` rows at least — public
values only. Each session's ``temp_buffers`` is sized to hold its rows (at most
:data:`TEMP_BUFFERS_CAP_KIB`), so a scan reads memory, not the temporary file. Bolt-on PSGD's
passes visit the rows in one order and run in one session.
   ``dp_agd_averaged``'s row map runs here too (:mod:`service.workers.in_database_row_map`):
   one aggregate ``SELECT sum(x0), …`` for the mean's release, then one pass per fit building
   ``pg_temp.dpfit_mapped`` (φ(x) of every row, in every session) from the public map, which
   the gradient queries then read instead of ``dpfit_rows``;
3. adds the noise in the worker, from the service's sampler, exactly as the worker path does:
   the optimizer is the same ``fit_oracle`` (the data-parallel path's entry point), with the same
   stored plan, so plans, charges and the ledger are unchanged.

Every statement has a ``statement_timeout`` fixed from public sizes (:func:`statement_timeout_ms`);
identifiers are quoted by SQLAlchemy and every value is bound. Errors from the database are
replaced by generic messages (their text can quote values).

Which models: the per-row coefficient is compiled for the logistic loss (with or without a
clipped slope; binary, or class k against the rest over a categorical label's class index) and
for the joint multinomial loss (:mod:`service.workers.in_database_multinomial`) — the models
``auto`` chooses for classification; other losses are refused at pricing with 422 naming
``model`` (:func:`service.domain.execution.check_in_database`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.exc import SQLAlchemyError

from service.data.encoding import Encoder
from service.data.sources import SourceError
from service.data.spec import LabelSpec
from service.data.sql_encoding import (
    PARSE_FUNCTION_SQL,
    SESSION_SETTINGS,
    InDatabaseUnsupported,
    compile_rows,
    norm_clipped,
    squared_norm,
)
from service.data.sql_source import SqlSource
from service.models.base import FloatArray, Loss, parameter_count
from service.models.logistic import LogisticLoss
from service.models.multinomial import MultinomialLoss
from service.optimizers.kits.dp_agd_row_map import RowMap
from service.workers import in_database_curvature as curvature
from service.workers.in_database_logistic import logistic_gradient_query
from service.workers.in_database_multinomial import multinomial_gradient_query
from service.workers.in_database_row_map import (
    MAPPED_TABLE,
    deviation_statement,
    gram_matrix,
    gram_queries,
    mapped_statements,
    row_sum_query,
    rows_table,
)

__all__ = [
    "MAX_SESSIONS",
    "MIN_SHARD_ROWS",
    "TEMP_BUFFERS_CAP_KIB",
    "InDatabaseGradient",
    "encoded_rows",
    "encoded_select",
    "planned_sessions",
    "statement_timeout_ms",
    "temp_buffers_kib",
]

_TEMP_TABLE = "dpfit_rows"
_READ_FAILED = "the in-database job could not read the table"
_FLUSH = 2.0**-500
#: The most sessions one full-gradient job opens on the owner's database.
MAX_SESSIONS = 4
#: No session for fewer rows than this (a small table is fitted by one session).
MIN_SHARD_ROWS = 50_000
#: The largest ``temp_buffers`` a session asks for (kB): 1 GiB of the database server's memory.
TEMP_BUFFERS_CAP_KIB = 1 << 20
#: A full-gradient job's sessions whose shard holds at least this many encoded cells (rows ×
#: columns: public sizes) run their queries with PostgreSQL's JIT — expressions and tuple
#: deforming compiled, no inlining and no optimisation (:data:`JIT_SETTINGS`): the same C
#: functions are called, so every value is the interpreter's. Smaller shards run interpreted
#: (:data:`NO_JIT_SETTINGS`), whatever the server's own JIT settings (whose defaults compile
#: with inlining and optimisation above a planner cost, ≈ 120–170 ms a query). At 10⁶ × 11 over
#: 3 sessions one gradient took 227 ms under the server's defaults and 175 ms so, the whole
#: default job 114 → 93 s (``python -m bench in-database --parts sessions,default``, a quiet
#: machine). Compiling the binary gradient query takes ≈ 7 ms (``EXPLAIN ANALYZE``'s JIT
#: timing, d = 11) against ≈ 0.07 µs a row saved, so below ≈ 10⁵ rows it costs more than it
#: saves. A server built without LLVM ignores the settings.
JIT_MIN_CELLS = 1_000_000
JIT_SETTINGS = (
    "SET jit = on",
    "SET jit_above_cost = 0",
    "SET jit_inline_above_cost = -1",
    "SET jit_optimize_above_cost = -1",
)
NO_JIT_SETTINGS = ("SET jit = off",)
_SHARDS = "dpfit_shards"
_SNAPSHOT_ID = re.compile(r"^[0-9A-Fa-f-]{1,64}$")
_T = TypeVar("_T")


def statement_timeout_ms(n: int, width: int, classes: int = 0) -> int:
    """A statement's time limit from public sizes: 60 s plus 2 µs per encoded cell (a scan of
    the encoded rows runs at ≈ 0.05–0.2 µs per cell here), so a healthy query never meets it and
    a stalled one cannot hold the session for ever. For K ``classes``, 2 µs per cell and class
    (the joint gradient's ≈ 0.04 µs per row and parameter, measured at K·d = 55), or the
    curvature refresh's limit if larger (:func:`curvature_timeout_ms`: K·d(d+1)/2 sums)."""
    gradient = int(60_000 + 0.002 * n * max(1, width * max(1, classes)))
    return max(gradient, curvature.curvature_timeout_ms(n, classes, width))


def planned_sessions(n: int, parallel_workers: int) -> int:
    """How many sessions share a full-gradient job's rows: 1 + the database's
    ``max_parallel_workers_per_gather`` (``parallel_workers``), at most :data:`MAX_SESSIONS`
    and at most one per :data:`MIN_SHARD_ROWS` rows, at least 1. Public values only."""
    return max(1, min(1 + max(0, parallel_workers), MAX_SESSIONS, n // MIN_SHARD_ROWS))


def temp_buffers_kib(rows: int, columns: int) -> int:
    """A ``temp_buffers`` (kB) that holds ``rows`` rows of ``columns`` ``float8``/``bigint``
    columns: a heap tuple is a 24-byte header, 8 bytes a column and a 4-byte line pointer, a
    page holds 8,168 bytes of them; plus 1 MiB. At least PostgreSQL's default (8 MB), at most
    :data:`TEMP_BUFFERS_CAP_KIB`. A session's local buffers are allocated as they are used,
    so this is what its rows take in the server's memory instead of its temporary file."""
    per_page = max(1, 8168 // (24 + 8 * columns + 4))
    pages = math.ceil(rows / per_page)
    return max(8192, min(8 * pages + 1024, TEMP_BUFFERS_CAP_KIB))


@dataclass(frozen=True)
class _Shards:
    """The sessions holding a job's rows (the first is the one :func:`encoded_rows` yields)
    and the threads that query the others concurrently."""

    sessions: tuple[Connection, ...]
    pool: ThreadPoolExecutor

    def on_all(self, action: Callable[[int, Connection], _T]) -> list[_T]:
        """``action(k, session_k)`` on every session at once (session 0 in this thread); every
        call has returned when this returns; the first failure is raised after that."""
        return _on_all(self.sessions, self.pool, action)


def _on_all(
    sessions: Sequence[Connection],
    pool: ThreadPoolExecutor | None,
    action: Callable[[int, Connection], _T],
) -> list[_T]:
    if pool is None or len(sessions) == 1:
        return [action(k, session) for k, session in enumerate(sessions)]
    futures: list[Future[_T]] = [
        pool.submit(action, k, session) for k, session in enumerate(sessions) if k > 0
    ]
    try:
        first = action(0, sessions[0])
    finally:
        done = [future.exception() for future in futures]  # waits for every session
    failed = next((error for error in done if error is not None), None)
    if failed is not None:
        raise failed
    return [first, *(future.result() for future in futures)]


@contextmanager
def encoded_rows(
    source: SqlSource,
    encoder: Encoder,
    label: LabelSpec,
    label_bound: float | None,
    *,
    n: int,
    fingerprint: str,
    positions: bool = False,
    sessions: int | None = None,
    row_map: bool = False,
) -> Iterator[Connection]:
    """A session holding ``pg_temp.dpfit_rows(x0 … x_{d−1}, y)``: the table's encoded rows,
    checked against the registered ``fingerprint`` and the public ``n`` in one snapshot.

    Without ``positions`` the rows are split over ``sessions`` sessions (default
    :func:`planned_sessions`; module docstring): the yielded session holds its share and
    :class:`InDatabaseGradient` on it queries all of them. With ``positions`` one session holds
    every row and a column ``pos bigint`` holds each row's 0-based position in the source's
    stable order (the reader's row index), which bolt-on PSGD's passes join their permutation
    to (:mod:`service.workers.in_database_sgd`). With ``row_map`` (public: the plan's) each
    session's ``temp_buffers`` holds the mapped rows too (``InDatabaseGradient.mapped``).

    Raises :class:`SourceError` (no data in its message) when the table changed, its row count
    is not ``n`` or the database fails; the temporary tables are dropped and the sessions
    closed on the way out (the source's engine pools nothing: every session is fresh)."""
    if source.dialect != "postgresql":
        raise SourceError("in-database execution needs a PostgreSQL table")
    conn = source.connect().execution_options(isolation_level="REPEATABLE READ")
    opened = [conn]
    pool: ThreadPoolExecutor | None = None
    try:
        _, names = encoded_select(source, encoder, label, label_bound)
        width = len(names) + 1 + (1 if positions else 0)
        timeout = statement_timeout_ms(n, len(names), len(label.classes or ()))
        if positions:
            count = 1
        elif sessions is not None:
            count = max(1, min(int(sessions), MAX_SESSIONS, n))
        else:
            workers = conn.exec_driver_sql("SHOW max_parallel_workers_per_gather").scalar_one()
            count = planned_sessions(n, int(workers))
        # with ``row_map`` the mapped rows (no wider) sit beside the rows: buffers for both
        buffers = temp_buffers_kib(math.ceil(n / count) * (2 if row_map else 1), width)
        _prepare(conn, timeout, buffers)
        if source.fingerprint_on(conn) != fingerprint:
            raise SourceError("the table changed since it was registered")
        if count > 1:
            snapshot = str(conn.exec_driver_sql("SELECT pg_export_snapshot()").scalar_one())
            if not _SNAPSHOT_ID.match(snapshot):
                raise SourceError(_READ_FAILED)
            for _ in range(count - 1):
                helper = source.connect().execution_options(isolation_level="REPEATABLE READ")
                opened.append(helper)
                _prepare(helper, timeout, buffers)
                helper.commit()
                # the first statement of the helper's transaction: it reads what conn reads
                helper.exec_driver_sql(f"SET TRANSACTION SNAPSHOT '{snapshot}'")
            pool = ThreadPoolExecutor(count - 1, thread_name_prefix="dpfit-in-database")

        def materialise(k: int, session: Connection) -> int:
            return _materialise(
                session, source, encoder, label, label_bound, positions, shard=(k, count)
            )

        counts = _on_all(opened, pool, materialise)
        if counts != [len(range(k, n, count)) for k in range(count)]:
            raise SourceError("the table changed since it was registered")
        compiled = not positions and math.ceil(n / count) * width >= JIT_MIN_CELLS
        for session in opened:
            session.commit()
            for setting in JIT_SETTINGS if compiled else NO_JIT_SETTINGS:
                session.exec_driver_sql(setting)
        if pool is not None:
            conn.info[_SHARDS] = _Shards(tuple(opened), pool)
        yield conn
    except SQLAlchemyError:
        raise SourceError(_READ_FAILED) from None
    finally:
        conn.info.pop(_SHARDS, None)
        for session in opened:
            try:
                session.rollback()
                session.exec_driver_sql(f"DROP TABLE IF EXISTS pg_temp.{_TEMP_TABLE}")
                session.exec_driver_sql(f"DROP TABLE IF EXISTS pg_temp.{MAPPED_TABLE}")
                session.commit()
            except SQLAlchemyError:
                pass
            session.close()
        if pool is not None:
            pool.shutdown(wait=True)


def _prepare(conn: Connection, timeout_ms: int, buffers_kib: int) -> None:
    """A fresh session's settings (before it touches any temporary table) and the parse
    function."""
    conn.exec_driver_sql(f"SET statement_timeout = {int(timeout_ms)}")
    conn.exec_driver_sql(f"SET temp_buffers = '{int(buffers_kib)}kB'")
    for setting in SESSION_SETTINGS:
        conn.exec_driver_sql(setting)
    conn.exec_driver_sql(PARSE_FUNCTION_SQL)


def _materialise(
    conn: Connection,
    source: SqlSource,
    encoder: Encoder,
    label: LabelSpec,
    label_bound: float | None,
    positions: bool,
    *,
    shard: tuple[int, int],
) -> int:
    """Shard ``k`` of ``count`` of the encoded rows into ``pg_temp.dpfit_rows``; its row count."""
    select, names = encoded_select(
        source, encoder, label, label_bound, numbered=positions, shard=shard
    )
    column_list = ", ".join(f"{name} double precision" for name in names)
    position_column = ", pos bigint" if positions else ""
    conn.exec_driver_sql(
        f"CREATE TEMPORARY TABLE {_TEMP_TABLE} ({column_list}, y double precision"
        f"{position_column}) ON COMMIT PRESERVE ROWS"
    )
    targets = [*names, "y", *(["pos"] if positions else [])]
    target = sa.table(_TEMP_TABLE, *(sa.column(c) for c in targets))
    conn.execute(sa.insert(target).from_select(targets, select))
    conn.exec_driver_sql(f"ANALYZE pg_temp.{_TEMP_TABLE}")
    return int(conn.execute(sa.select(sa.func.count()).select_from(target)).scalar_one())


def encoded_select(
    source: SqlSource,
    encoder: Encoder,
    label: LabelSpec,
    label_bound: float | None,
    *,
    ordered: bool = False,
    numbered: bool = False,
    shard: tuple[int, int] = (0, 1),
) -> tuple[sa.Select[Any], list[str]]:
    """``SELECT x0 … x_{d−1}, y FROM <table>``: the encoded rows and their column names (in the
    source's stable order when ``ordered``, e.g. to compare with the reader; with ``numbered``
    a last column ``pos``, the row's 0-based position in that order; with ``shard`` = (k, P),
    P > 1, only the rows at positions ≡ k mod P, selected before they are encoded); needs
    :data:`~service.data.sql_encoding.PARSE_FUNCTION` in the session."""
    k, count = shard
    table: sa.TableClause | sa.Subquery = source.table
    if count > 1:
        if ordered or numbered:
            raise ValueError("a shard is neither ordered nor numbered")
        used = [feature.name for feature in encoder.features] + [label.column]
        table = _shard_of(source, used, k, count)
    columns = compile_rows(
        table,
        source.encoding_families(),
        encoder,
        label,
        label_bound,
        max_cell_bytes=source.limits.max_cell_bytes,
    )
    d = len(columns.x)
    names = [f"x{j}" for j in range(d)]
    keyed = ordered or numbered
    keys = (
        [source.table.c[c].label(f"k{i}") for i, c in enumerate(source.order_by)] if keyed else []
    )
    # Two fenced levels (OFFSET 0 keeps PostgreSQL from inlining a subquery's expressions):
    # each encoded entry is computed once per row, then its squared norm once, then the clip.
    scaled = sa.select(
        *(e.label(f"e{j}") for j, e in enumerate(columns.x)), columns.y.label("y"), *keys
    )
    inner = scaled.select_from(table).offset(0).subquery("encoded")
    entries = [inner.c[f"e{j}"] for j in range(d)]
    normed = sa.select(*entries, inner.c.y, *(inner.c[k.name] for k in keys))
    middle = normed.add_columns(squared_norm(entries).label("sq")).offset(0).subquery("normed")
    clipped = norm_clipped([middle.c[f"e{j}"] for j in range(d)], middle.c.sq)
    labelled = (c.label(name) for c, name in zip(clipped, names, strict=True))
    select = sa.select(*labelled, middle.c.y)
    if numbered:
        order = [middle.c[f"k{i}"] for i in range(len(keys))]
        position = sa.func.row_number().over(order_by=order) - sa.literal(1, sa.BigInteger)
        select = select.add_columns(position.label("pos"))
    if ordered:
        select = select.order_by(*(middle.c[f"k{i}"] for i in range(len(keys))))
    return select, names


def _shard_of(source: SqlSource, used: Sequence[str], k: int, count: int) -> sa.Subquery:
    """The columns ``used`` of the table's rows at positions ≡ k (mod count) of its stable
    order (the position is the same ``row_number()`` as ``numbered``'s)."""
    table = source.table
    taken = {c.name for c in table.c}
    name = "dpfit_position"
    while name in taken:
        name += "_"
    keys = [table.c[c] for c in source.order_by]
    position = (sa.func.row_number().over(order_by=keys) - sa.literal(1, sa.BigInteger)).label(name)
    columns = [table.c[c] for c in dict.fromkeys(used)]
    numbered = sa.select(*columns, position).select_from(table).subquery("dpfit_numbered")
    chosen = numbered.c[name] % sa.literal(count, sa.BigInteger) == sa.literal(k, sa.BigInteger)
    return sa.select(*(numbered.c[c.name] for c in columns)).where(chosen).subquery("dpfit_shard")


class InDatabaseGradient:
    """The gradient oracle over ``pg_temp.dpfit_rows`` (a
    :class:`~service.optimizers.kits.full_gradient.GradientOracle`).

    Logistic loss: ∇F(w) = −(1/n)·Σ_i c_i x_i + l2·w with c_i = y_i·min(σ(−y_i w·x_i), C), the
    coefficient written with the same operations as :meth:`LogisticLoss.gradient`
    (σ(t) = (1 + tanh(t/2))/2). With ``label_class`` = k (one-vs-rest over a categorical
    label, whose rows hold the class index) the row's label is +1 where y = k and −1
    elsewhere — :func:`service.data.encoding.encode_one_vs_rest`'s row k.

    Multinomial loss (:mod:`service.workers.in_database_multinomial`): ∇F(w) =
    (1/n)·Σ_i c_i ⊗ x_i + l2·w over the K·w parameters, c_i = p_i − e_{y_i} (or its clipped
    slope) as ``MultinomialLoss.gradient``; ``dimension`` is the row width w and the oracle's
    :attr:`dimension` is K·w.

    The sums are the database's, in its own order (they agree with numpy's to summation
    rounding). ``table`` is the temporary table read (the encoded rows, or the mapped rows of
    :meth:`mapped`). The oracle can run ``dp_agd_averaged``'s row map
    (:class:`~service.optimizers.kits.dp_agd_row_map.RowMappable`: :meth:`row_sum`,
    :meth:`mapped`) and its column scales (:meth:`deviation_sum`, ``ColumnScalable``); the mapped
    one also sums the Gram matrix (:meth:`gram`, ``GramOracle``) and the curvature refresh's
    terms (:meth:`curvature_terms`, ``CurvatureTermsOracle``)."""

    def __init__(
        self,
        conn: Connection,
        loss: Loss,
        n: int,
        dimension: int,
        *,
        label_class: int | None = None,
        table: str = _TEMP_TABLE,
    ) -> None:
        rows = rows_table(table, dimension)
        if isinstance(loss, MultinomialLoss):
            if label_class is not None:
                raise ValueError("a joint multinomial model has no one-vs-rest class")
            self._query: sa.Select[Any] = multinomial_gradient_query(rows, loss, dimension)
            self._sign, self._array = 1.0, True
        elif isinstance(loss, LogisticLoss):
            self._query = logistic_gradient_query(loss, rows, dimension, label_class)
            self._sign, self._array = -1.0, False
        else:
            raise InDatabaseUnsupported(
                "model",
                "in-database execution runs logistic_regression and "
                "multinomial_logistic_regression",
            )
        self._conn = conn
        self._shards: _Shards | None = conn.info.get(_SHARDS)
        self._loss = loss
        self._n = n
        self._width = dimension
        self._label_class = label_class
        self._table = table
        self._d = parameter_count(loss, dimension)

    @property
    def sessions(self) -> int:
        """How many sessions answer each gradient (module docstring)."""
        return 1 if self._shards is None else len(self._shards.sessions)

    @property
    def n(self) -> int:
        return self._n

    @property
    def dimension(self) -> int:
        return self._d

    def _compiled(self, query: Any) -> str:
        """``query`` (no bound values: names from the public width only) as the dialect's SQL
        text, compiled once here: the sessions' threads then send text and never build
        SQLAlchemy's statement cache keys concurrently (a CI run crashed inside that code, in
        the threads of one wide Gram query)."""
        return str(query.compile(dialect=self._conn.dialect))

    def _on_sessions(self, action: Callable[[int, Connection], _T]) -> list[_T]:
        """``action`` on every session holding rows, in session order (SourceError without the
        database's message on a database error)."""
        try:
            if self._shards is None:
                return [action(0, self._conn)]
            return self._shards.on_all(action)
        except SQLAlchemyError:
            raise SourceError(_READ_FAILED) from None

    def _summed(self, send: Callable[[Connection], Any], size: int) -> FloatArray:
        """The sessions' one-row answers of ``size`` sums each (NULL, over no rows: 0), added
        in session order."""

        def shard_sum(k: int, session: Connection) -> FloatArray:
            values = send(session).one()
            if len(values) != size:
                raise SourceError(_READ_FAILED)
            return np.array([0.0 if v is None else float(v) for v in values], dtype=np.float64)

        return _in_order(self._on_sessions(shard_sum))

    def row_sum(self) -> FloatArray:
        """Σ_i x_i over the rows of every session (the row map's mean, ``RowMappable``)."""
        query = self._compiled(row_sum_query(self._table, self._width))
        return self._summed(lambda session: session.exec_driver_sql(query), self._width)

    def deviation_sum(self, centre: FloatArray, intercept: float) -> FloatArray:
        """Σ_i a(x_i) over the rows of every session (the column scales' step 1,
        ``ColumnScalable``; :func:`~service.workers.in_database_row_map.deviation_statement`)."""
        query, params = deviation_statement(self._table, self._width, centre, intercept)
        return self._summed(lambda session: session.execute(query, params), self._width - 1)

    def mapped(self, mapping: RowMap) -> InDatabaseGradient:
        """The oracle over φ(x_i) (same labels, class and sessions): every session builds
        ``pg_temp.dpfit_mapped`` from its rows in one pass
        (:mod:`service.workers.in_database_row_map`), replacing a previous mapping's."""
        ddl, insert, params = mapped_statements(self._table, self._width, mapping)

        def build(k: int, session: Connection) -> None:
            for statement in ddl:
                session.exec_driver_sql(statement)
            session.execute(insert, params)
            session.exec_driver_sql(f"ANALYZE pg_temp.{MAPPED_TABLE}")
            session.commit()

        self._on_sessions(build)
        return InDatabaseGradient(
            self._conn,
            self._loss,
            self._n,
            self._width,
            label_class=self._label_class,
            table=MAPPED_TABLE,
        )

    def gram(self) -> FloatArray:
        """Σ_i φ_i φ_iᵀ over the mapped rows (w × w; the sessions' sums added in session order,
        :mod:`service.workers.in_database_row_map`): never released, only the input of
        ``release_top_eigenvalue``. ``ValueError`` on the encoded rows (not a mapped oracle)."""
        if self._table != MAPPED_TABLE:
            raise ValueError("the Gram matrix is of the mapped rows")
        queries = [self._compiled(query) for query in gram_queries(self._table, self._width)]

        def shard_gram(k: int, session: Connection) -> FloatArray:
            return gram_matrix([session.exec_driver_sql(q).one() for q in queries], self._width)

        return _in_order(self._on_sessions(shard_gram))

    def curvature_terms(self, w: FloatArray, basis: FloatArray) -> np.ndarray:
        """The curvature refresh's B (K × w × w) over the mapped rows at the joint weights ``w``
        and the basis Q, the sessions' sums added in session order (never released; its
        module: :mod:`service.workers.in_database_curvature`). ``ValueError`` on the encoded
        rows or a model other than the joint multinomial one."""
        if self._table != MAPPED_TABLE or not isinstance(self._loss, MultinomialLoss):
            raise ValueError("the curvature terms are of a joint model's mapped rows")
        K, width = self._loss.classes, self._width
        query = curvature.curvature_query(self._table, K, width)
        compiled = query.compile(dialect=self._conn.dialect)  # literals, then w and Q
        params = {**compiled.params, **curvature.curvature_params(w, basis, K, width)}

        def shard_terms(k: int, session: Connection) -> FloatArray:
            values = session.exec_driver_sql(str(compiled), params).one()[0]
            if values is None or len(values) != K * width * (width + 1) // 2:
                raise SourceError(_READ_FAILED)
            return np.array([0.0 if v is None else float(v) for v in values], dtype=np.float64)

        return curvature.curvature_blocks(_in_order(self._on_sessions(shard_terms)), K, width)

    def gradient(self, w: FloatArray) -> FloatArray:
        # PostgreSQL raises where a product underflows to zero; an entry below 2⁻⁵⁰⁰ moves a
        # margin (a sum of O(1e-3)… terms, or 0.5 exactly through σ when all are that small) by
        # nothing a double can hold, so it is sent as 0.
        flushed = np.where(np.abs(w) < _FLUSH, 0.0, np.asarray(w, dtype=np.float64))
        params = {f"w{j}": float(v) for j, v in enumerate(flushed)}

        def shard_sums(k: int, session: Connection) -> FloatArray:
            row = session.execute(self._query, params).one()
            values = row[0] if self._array else row  # the joint query returns one array
            if values is None or len(values) != self._d:
                raise SourceError(_READ_FAILED)
            return np.array([0.0 if v is None else float(v) for v in values], dtype=np.float64)

        grad: FloatArray = _in_order(self._on_sessions(shard_sums)) * (self._sign / self._n)
        if self._loss.l2:
            grad += self._loss.l2 * np.asarray(w, dtype=np.float64)
        return grad


def _in_order(parts: Sequence[FloatArray]) -> FloatArray:
    """The sessions' sums added in session order (every session's share at once)."""
    total = np.array(parts[0], dtype=np.float64)
    for part in parts[1:]:
        total += part
    return total
