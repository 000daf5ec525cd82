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
   leaves the database;
3. adds the noise in the worker, from the service's sampler, exactly as the worker path does:
   the optimizer is the same ``fit_oracle`` (the data-parallel path's entry point), with the same
   stored plan, so plans, charges and the ledger are unchanged.

Every statement has a ``statement_timeout`` fixed from public sizes (:func:`statement_timeout_ms`);
identifiers are quoted by SQLAlchemy and every value is bound. Errors from the database are
replaced by generic messages (their text can quote values).

Which models: the per-row coefficient is compiled for the logistic loss (with or without a
clipped slope) — the model every ``auto`` classification job uses; other losses are refused at
pricing with 422 naming ``model`` (:func:`service.domain.execution.check_in_database`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.exc import SQLAlchemyError

from service.data.encoding import Encoder
from service.data.sources import SourceError
from service.data.spec import LabelSpec
from service.data.sql_encoding import (
    FLOAT8,
    PARSE_FUNCTION_SQL,
    InDatabaseUnsupported,
    compile_rows,
    norm_clipped,
    squared_norm,
)
from service.data.sql_source import SqlSource
from service.models.base import FloatArray, Loss
from service.models.logistic import LogisticLoss

__all__ = [
    "InDatabaseGradient",
    "encoded_rows",
    "encoded_select",
    "statement_timeout_ms",
]

_TEMP_TABLE = "dpfit_rows"
_READ_FAILED = "the in-database job could not read the table"
_FLUSH = 2.0**-500


def statement_timeout_ms(n: int, dimension: int) -> int:
    """A statement's time limit from public sizes: 60 s plus 2 µs per encoded cell (a scan of
    the encoded rows runs at ≈ 0.05–0.2 µs per cell here), so a healthy query never meets it and
    a stalled one cannot hold the session for ever."""
    return int(60_000 + 0.002 * n * max(1, dimension))


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
) -> Iterator[Connection]:
    """A session holding ``pg_temp.dpfit_rows(x0 … x_{d−1}, y)``: the table's encoded rows,
    checked against the registered ``fingerprint`` and the public ``n`` in one snapshot.

    With ``positions``, a column ``pos bigint`` holds each row's 0-based position in the source's
    stable order (the reader's row index), which bolt-on PSGD's passes join their permutation
    to (:mod:`service.workers.in_database_sgd`).

    Raises :class:`SourceError` (no data in its message) when the table changed, its row count
    is not ``n`` or the database fails; the temporary table is dropped on the way out."""
    if source.dialect != "postgresql":
        raise SourceError("in-database execution needs a PostgreSQL table")
    select, names = encoded_select(source, encoder, label, label_bound, numbered=positions)
    conn = source.connect().execution_options(isolation_level="REPEATABLE READ")
    try:
        timeout = statement_timeout_ms(n, len(names))
        conn.exec_driver_sql(f"SET statement_timeout = {int(timeout)}")
        conn.exec_driver_sql(PARSE_FUNCTION_SQL)
        if source.fingerprint_on(conn) != fingerprint:
            raise SourceError("the table changed since it was registered")
        column_list = ", ".join(f"{name} double precision" for name in names)
        position_column = ", pos bigint" if positions else ""
        conn.exec_driver_sql(
            f"CREATE TEMPORARY TABLE {_TEMP_TABLE} ({column_list}, y double precision"
            f"{position_column}) ON COMMIT PRESERVE ROWS"
        )
        targets = [*names, "y", *(["pos"] if positions else [])]
        target = sa.table(_TEMP_TABLE, *(sa.column(c) for c in targets))
        conn.execute(sa.insert(target).from_select(targets, select))
        count = conn.execute(sa.select(sa.func.count()).select_from(target)).scalar_one()
        if int(count) != n:
            raise SourceError("the table changed since it was registered")
        conn.commit()
        yield conn
    except SQLAlchemyError:
        raise SourceError(_READ_FAILED) from None
    finally:
        try:
            conn.rollback()
            conn.exec_driver_sql(f"DROP TABLE IF EXISTS pg_temp.{_TEMP_TABLE}")
            conn.commit()
        except SQLAlchemyError:
            pass
        conn.close()


def encoded_select(
    source: SqlSource,
    encoder: Encoder,
    label: LabelSpec,
    label_bound: float | None,
    *,
    ordered: bool = False,
    numbered: bool = False,
) -> tuple[sa.Select[Any], list[str]]:
    """``SELECT x0 … x_{d−1}, y FROM <table>``: the encoded rows and their column names (in the
    source's stable order when ``ordered``, e.g. to compare with the reader; with ``numbered``
    a last column ``pos``, the row's 0-based position in that order); needs
    :data:`~service.data.sql_encoding.PARSE_FUNCTION` in the session."""
    columns = compile_rows(
        source.table,
        source.families(),
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
    inner = scaled.select_from(source.table).offset(0).subquery("encoded")
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


class InDatabaseGradient:
    """The gradient oracle over ``pg_temp.dpfit_rows`` (a
    :class:`~service.optimizers.kits.full_gradient.GradientOracle`): ∇F(w) = −(1/n)·Σ_i c_i x_i + l2·w
    with c_i = y_i·min(σ(−y_i w·x_i), C), the logistic loss's coefficient written with the same
    operations as :meth:`LogisticLoss.gradient` (σ(t) = (1 + tanh(t/2))/2); the sum is the
    database's, in its own order (agrees with numpy to summation rounding)."""

    def __init__(self, conn: Connection, loss: Loss, n: int, dimension: int) -> None:
        if not isinstance(loss, LogisticLoss):
            raise InDatabaseUnsupported("model", "in-database execution runs logistic regression")
        self._conn = conn
        self._loss = loss
        self._n = n
        self._d = dimension
        self._query = _gradient_query(loss, dimension)

    @property
    def n(self) -> int:
        return self._n

    @property
    def dimension(self) -> int:
        return self._d

    def gradient(self, w: FloatArray) -> FloatArray:
        # PostgreSQL raises where a product underflows to zero; an entry below 2⁻⁵⁰⁰ moves a
        # margin (a sum of O(1e-3)… terms, or 0.5 exactly through σ when all are that small) by
        # nothing a double can hold, so it is sent as 0.
        flushed = np.where(np.abs(w) < _FLUSH, 0.0, np.asarray(w, dtype=np.float64))
        params = {f"w{j}": float(v) for j, v in enumerate(flushed)}
        try:
            row = self._conn.execute(self._query, params).one()
        except SQLAlchemyError:
            raise SourceError(_READ_FAILED) from None
        sums = np.array([0.0 if v is None else float(v) for v in row], dtype=np.float64)
        grad: FloatArray = sums * (-1.0 / self._n)
        if self._loss.l2:
            grad += self._loss.l2 * np.asarray(w, dtype=np.float64)
        return grad


def _gradient_query(loss: LogisticLoss, d: int) -> sa.TextClause | sa.Select[Any]:
    rows = sa.table(
        _TEMP_TABLE, *(sa.column(f"x{j}", FLOAT8) for j in range(d)), sa.column("y", FLOAT8)
    )
    margin = sum(
        (rows.c[f"x{j}"] * sa.bindparam(f"w{j}", type_=FLOAT8) for j in range(d)),
        sa.literal(0.0, FLOAT8),
    )
    y = rows.c.y
    slope = (
        sa.literal(1.0, FLOAT8) + sa.func.tanh(margin * y * sa.literal(-0.5, FLOAT8))
    ) * sa.literal(0.5, FLOAT8)
    clip = loss.gradient_clip
    if clip is not None and clip < 1.0:
        slope = sa.func.least(slope, sa.literal(float(clip), FLOAT8))
    coefficient = (slope * y).label("c")
    # OFFSET 0: the coefficient is computed once per row, not once per sum (PostgreSQL would
    # otherwise flatten the subquery and evaluate c — d products and a tanh — d times)
    per_row = (
        sa.select(*(rows.c[f"x{j}"] for j in range(d)), coefficient).offset(0).subquery("per_row")
    )
    return sa.select(*(sa.func.sum(per_row.c.c * per_row.c[f"x{j}"]) for j in range(d)))
