"""SQL tables as dataset sources: ``sql://<connection>/<table>`` or ``.../<schema>.<table>``.

The operator names the databases in ``DPFIT_SQL_CONNECTIONS`` (name → SQLAlchemy URL); an owner
names a connection and a table. The table lives in the operator's database, not in the
service's own. Guarantees:

- **No credential travels.** A :class:`SqlSource` holds the connection *name*; the URL is looked
  up in the settings when a connection is made and never appears in a location, a message or a
  ``repr``. Database errors are replaced by generic :class:`SourceError` messages (their text can
  quote a host, a user or a value) and never chained.
- **No SQL is pasted.** Identifiers must match ``[A-Za-z_][A-Za-z0-9_$]*`` (at most
  ``schema.table``, each part at most 63 characters) and are quoted by SQLAlchemy
  (``sqlalchemy.table``/``column``); the table and the requested columns must exist (reflected
  with ``sqlalchemy.inspect``). Identifiers are case-sensitive as the database reports them
  (PostgreSQL folds unquoted names to lower case when a table is created).
- **A stable order.** Rows are read ``ORDER BY`` the primary key; a table without one is read
  ``ORDER BY`` all its columns, in table order (ties are then whole rows that are equal in every
  column, so their order cannot be told apart). The position of a row therefore depends on the
  rows' own values only, and every read gives the same order. A table whose columns cannot be
  ordered (e.g. PostgreSQL ``json``) and has no primary key is refused.
- **A content fingerprint.** ``sha256:`` of the table's header (every column's name and type, in
  table order) followed, in the stable order, by the SHA-256 of each row's text. On PostgreSQL
  the database computes each row's digest (``sha256(convert_to(row(c1, …, ck)::text,
  'UTF8'))``: the composite-value text, in which NULL and the empty string differ) and the
  service chains the 32-byte digests as they stream in, so the table is never held whole
  anywhere. On other dialects (SQLite) the service hashes a typed, length-prefixed encoding of
  each value. It covers every column and every row, so it changes when any cell, a column's type
  or the row count changes.
- **Streaming reads.** :meth:`SqlSource.iter_batches` uses a server-side cursor
  (``stream_results``/``yield_per``) and holds one block of rows at a time.
- **Total, row-local cells.** Each column is yielded with the natural Arrow type of its declared
  SQL type: integers → ``int64``, floating point → ``float64`` except PostgreSQL's ``real``
  (float4) → ``float32``, exact numerics (``numeric``) →
  ``float64`` (``float(Decimal)`` per cell: huge values become ±inf, ``NaN`` stays NaN), booleans →
  ``bool``, text → ``string``, binary → ``binary``, anything else is cast to text by the database
  → ``string``. NULL is null. A cell whose stored value is not of its column's declared type
  (possible only where the database does not enforce types, i.e. SQLite) is null. No cell can
  make a read fail.
- **A ``real`` is its float32.** A PostgreSQL ``real`` cell holds a float32; the Python float
  the driver hands over for it depends on the driver, the protocol and the session (measured
  with psycopg 3 on this reader's query: the widened 0.10000000149…; a text result parsed
  from the server's shortest output: 0.1; with ``extra_float_digits = 3``: "0.100000001").
  Every one of these rounds back to the same float32, so the column is yielded as
  ``float32`` and the reader converts it by the rule for every narrow float,
  :func:`service.data.cells.numeric_cells` — the float32's shortest text, 0.1 — exactly as it
  converts a Parquet float32 column. So a table and its Parquet export agree
  whatever the driver. (SQLite's ``REAL`` is 8 bytes: ``float64``.)
"""

from __future__ import annotations

import hashlib
import struct
import threading
from collections.abc import Callable, Iterator, Sequence
from decimal import Decimal
from typing import Any, Literal

import pyarrow as pa
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import NullPool

from service.data.limits import DEFAULT_LIMITS, ReadLimits, limits_of, text_block_rows
from service.data.opening import Backend, register
from service.data.source import SourceFormat
from service.data.sources import SourceError, exceeded
from service.data.sql_uri import TableRef, parse_sql_uri
from service.settings import Settings

_FINGERPRINT_ROWS = 10_000
# Rows fetched (as Python objects, ~10x their Arrow size) and converted at a time: batches are
# at most this long whatever the caller's block, so the peak stays a few tens of MiB.
_FETCH_ROWS = 16_384

Family = Literal["int", "float", "decimal", "bool", "text", "binary", "other"]

_ARROW_TYPES: dict[Family, pa.DataType] = {
    "int": pa.int64(),
    "float": pa.float64(),
    "decimal": pa.float64(),
    "bool": pa.bool_(),
    "text": pa.string(),
    "binary": pa.binary(),
    "other": pa.string(),
}
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
# Families whose cells can be of any length (cut by the database: SqlSource._selected).
_VARIABLE: frozenset[Family] = frozenset({"text", "binary", "other"})


def open_sql_source(uri: str, settings: Settings) -> SqlSource:
    """The table an owner registers: validated, looked up and reflected.

    Raises :class:`SourceError` for an invalid URI, a connection the operator did not configure,
    an unreachable database, a missing table, or a table without a usable stable order.
    """
    return _open(parse_sql_uri(uri), settings, uri)


def reopen_sql_source(location: str, settings: Settings) -> SqlSource:
    """The table of a registered dataset, from its stored location (on a worker)."""
    ref = parse_sql_uri(location)
    if ref.schema is None:
        raise SourceError("the stored SQL location is not schema-qualified")
    return _open(ref, settings, location)


def _open(ref: TableRef, settings: Settings, uri: str) -> SqlSource:
    url = settings.sql_connections.get(ref.connection)
    if url is None:
        raise SourceError(
            f"{uri!r}: connection {ref.connection!r} is not configured by the operator "
            "(DPFIT_SQL_CONNECTIONS)"
        )
    engine = _engine(url)
    with _guarded(ref, "reflect the table"):
        inspector = sa.inspect(engine)
        schema = ref.schema or inspector.default_schema_name
        not_found = SourceError(f"{uri!r}: table not found in connection {ref.connection!r}")
        if schema is None or not inspector.has_table(ref.table, schema=schema):
            raise not_found
        if not _readable(engine, ref.table, schema):
            # The catalogue lists tables and columns the role cannot read: such a table gets
            # the answer of one that does not exist, before any column name is looked at.
            raise not_found
        reflected = inspector.get_columns(ref.table, schema=schema)
        primary_key = inspector.get_pk_constraint(ref.table, schema=schema)
    columns = [str(c["name"]) for c in reflected]
    types = {str(c["name"]): c["type"] for c in reflected}
    if not columns:
        raise SourceError(f"{uri!r}: the table has no columns")
    limits = limits_of(settings)
    if len(columns) > limits.max_columns:
        raise exceeded("max_columns", limits, "the table's number of columns")
    order = [str(c) for c in (primary_key or {}).get("constrained_columns") or []] or columns
    source = SqlSource(
        ref=TableRef(ref.connection, schema, ref.table),
        engine=engine,
        column_names=columns,
        families={name: _family(types[name]) for name in columns},
        type_names={name: _type_name(types[name], engine) for name in columns},
        narrow={name for name in columns if _is_float4(types[name], engine.dialect.name)},
        order=order,
        limits=limits,
    )
    source.check_order()
    return source


# --------------------------------------------------------------------------------------------
# Engines and errors
# --------------------------------------------------------------------------------------------

_ENGINES: dict[str, Engine] = {}
_ENGINES_LOCK = threading.Lock()


def _engine(url: str) -> Engine:
    """One engine per configured URL in this process. ``NullPool``: no idle connection to the
    operator's database is kept between reads."""
    with _ENGINES_LOCK:
        engine = _ENGINES.get(url)
        if engine is None:
            try:
                engine = sa.create_engine(url, poolclass=NullPool)
            except (SQLAlchemyError, ImportError, ValueError, TypeError):
                raise SourceError("the configured SQL connection cannot be used") from None
            _ENGINES[url] = engine
        return engine


class _guarded:
    """Database failures become a generic :class:`SourceError`; the original message (which can
    quote a host, a user or a value) is dropped, not chained."""

    def __init__(self, ref: TableRef, action: str) -> None:
        self._ref = ref
        self._action = action

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, _: Any) -> bool:
        if exc is None or isinstance(exc, SourceError):
            return False
        if isinstance(exc, SQLAlchemyError | OSError | ValueError | TypeError | pa.ArrowException):
            raise SourceError(
                f"could not {self._action} in connection {self._ref.connection!r}"
            ) from None
        return False


def _readable(engine: Engine, table: str, schema: str) -> bool:
    """Whether the connection's role may read every column of the table (``SELECT *`` with
    ``LIMIT 0``: the database checks the privileges, no row is read)."""
    query = sa.select(sa.text("*")).select_from(sa.table(table, schema=schema)).limit(0)
    try:
        with engine.connect() as conn:
            conn.execute(query).all()
    except SQLAlchemyError:
        return False
    return True


def _family(sql_type: Any) -> Family:
    # Float is a Numeric subclass and Boolean is not an Integer: order matters.
    if isinstance(sql_type, sa.Boolean):
        return "bool"
    if isinstance(sql_type, sa.Integer):
        return "int"
    if isinstance(sql_type, sa.Float):
        return "float"
    if isinstance(sql_type, sa.Numeric):
        return "decimal"
    if isinstance(sql_type, sa.Enum):  # read as text (cut like text: substr needs text)
        return "other"
    if isinstance(sql_type, sa.String):  # Text, Unicode, CHAR, VARCHAR …
        return "text"
    if isinstance(sql_type, sa.LargeBinary):
        return "binary"
    return "other"


def _is_float4(sql_type: Any, dialect: str) -> bool:
    """A PostgreSQL ``real`` (``float4``; also ``float(p)`` with p ≤ 24, which PostgreSQL stores
    as ``real``): read as float32 (module docstring). Other dialects: never (SQLite's REAL is
    a double)."""
    if dialect != "postgresql" or not isinstance(sql_type, sa.Float):
        return False
    if isinstance(sql_type, sa.REAL):
        return True
    precision = getattr(sql_type, "precision", None)
    return isinstance(precision, int) and precision <= 24 and not isinstance(sql_type, sa.Double)


def _type_name(sql_type: Any, engine: Engine) -> str:
    try:
        return str(sql_type.compile(dialect=engine.dialect))
    except Exception:  # noqa: BLE001 - a type without DDL text: its class name
        return type(sql_type).__name__


# --------------------------------------------------------------------------------------------
# The source
# --------------------------------------------------------------------------------------------


class SqlSource:
    """One table of an operator's database (see the module docstring for the guarantees)."""

    def __init__(
        self,
        *,
        ref: TableRef,
        engine: Engine,
        column_names: list[str],
        families: dict[str, Family],
        type_names: dict[str, str],
        order: list[str],
        limits: ReadLimits = DEFAULT_LIMITS,
        narrow: set[str] | frozenset[str] = frozenset(),
    ) -> None:
        self._limits = limits
        self._narrow = frozenset(narrow)  # float columns stored as float4 (read as float32)
        self._ref = ref
        self._engine = engine
        self._columns = column_names
        self._families = families
        self._type_names = type_names
        self._order = order
        self._table = sa.table(ref.table, *(sa.column(c) for c in column_names), schema=ref.schema)

    def __repr__(self) -> str:
        return f"SqlSource({self.location!r})"

    @property
    def format(self) -> SourceFormat:
        return "sql"

    @property
    def location(self) -> str:
        """``sql://<connection>/<schema>.<table>`` (always schema-qualified)."""
        return self._ref.location

    @property
    def order_by(self) -> list[str]:
        """The columns of the stable order: the primary key, else every column."""
        return list(self._order)

    def columns(self) -> list[str]:
        return list(self._columns)

    @property
    def limits(self) -> ReadLimits:
        """The public read limits this source applies."""
        return self._limits

    def arrow_type(self, column: str) -> pa.DataType:
        """The Arrow type :meth:`iter_batches` gives ``column``."""
        if column in self._narrow:
            return pa.float32()
        return _ARROW_TYPES[self._families[column]]

    @property
    def table(self) -> sa.TableClause:
        """The table as a quoted SQLAlchemy clause (for queries compiled elsewhere: the
        in-database encoding, :mod:`service.data.sql_encoding`)."""
        return self._table

    @property
    def dialect(self) -> str:
        """The database's dialect name (``postgresql``, ``sqlite`` …)."""
        return self._engine.dialect.name

    def families(self) -> dict[str, Family]:
        """Each column's SQL family (how its cells convert)."""
        return dict(self._families)

    def encoding_families(self) -> dict[str, str]:
        """:meth:`families` for the in-database encoding (:mod:`service.data.sql_encoding`):
        a PostgreSQL ``real`` is ``float4`` there, converted by its shortest text as
        :meth:`iter_batches` reads it."""
        return {
            name: "float4" if name in self._narrow else family
            for name, family in self._families.items()
        }

    def connect(self) -> Connection:
        """A new connection to the table's database (the caller closes it). Database errors
        while connecting become a generic :class:`SourceError`."""
        with _guarded(self._ref, "connect"):
            return self._engine.connect()

    def fingerprint_on(self, conn: Connection) -> str:
        """:meth:`fingerprint` read through ``conn`` (so it sees that connection's snapshot)."""
        digest = hashlib.sha256(self._header())
        with _guarded(self._ref, "fingerprint the table"):
            if conn.dialect.name == "postgresql":
                self._digest_postgresql(conn, digest)
            else:
                self._digest_generic(conn, digest)
        return f"sha256:{digest.hexdigest()}"

    def count_rows(self) -> int:
        query = sa.select(sa.func.count()).select_from(self._table)
        with _guarded(self._ref, "count the rows"), self._engine.connect() as conn:
            return int(conn.execute(query).scalar_one())

    def check_order(self) -> None:
        """Refuse a table without a primary key whose columns the database cannot all order
        (reads no row)."""
        if self._order != self._columns:
            return
        query = self._ordered(sa.select(sa.literal(1)).select_from(self._table)).limit(0)
        try:
            with self._engine.connect() as conn:
                conn.execute(query).all()
        except SQLAlchemyError:
            raise SourceError(
                f"{self._ref.location!r}: the table has no primary key and its columns cannot "
                "all be ordered; add a primary key"
            ) from None

    def fingerprint(self) -> str:
        digest = hashlib.sha256(self._header())
        with _guarded(self._ref, "fingerprint the table"), self._engine.connect() as conn:
            if conn.dialect.name == "postgresql":
                self._digest_postgresql(conn, digest)
            else:
                self._digest_generic(conn, digest)
        return f"sha256:{digest.hexdigest()}"

    def iter_batches(self, columns: Sequence[str], rows_per_block: int) -> Iterator[pa.RecordBatch]:
        """The cells of ``columns`` in the stable order, in batches of at most
        ``min(rows_per_block, 16384)`` rows (rows are Python objects until converted: the cap
        bounds the peak whatever block the caller asks for)."""
        if rows_per_block < 1:
            raise ValueError("rows_per_block must be at least 1")
        wanted = list(columns)
        self._check_present(wanted)
        if not wanted:
            yield from self._empty_batches(min(rows_per_block, _FETCH_ROWS))
            return
        selected = [self._selected(c) for c in wanted]
        query = self._ordered(sa.select(*selected).select_from(self._table))
        schema = pa.schema([pa.field(c, self.arrow_type(c)) for c in wanted])
        families = [self._families[c] for c in wanted]
        variable = sum(1 for f in families if f in _VARIABLE)
        # Text cells arrive cut to at most max_cell_bytes + 1 characters (up to 4 bytes each).
        block = text_block_rows(4 * variable, self._limits, min(rows_per_block, _FETCH_ROWS))
        with _guarded(self._ref, "read the table"), self._engine.connect() as conn:
            typed = conn.dialect.name == "postgresql"
            for rows in _stream_rows(conn, query, block):
                cells = list(zip(*rows, strict=True))
                arrays = [
                    _column_array(values, family, typed, kind)
                    for values, family, kind in zip(cells, families, schema.types, strict=True)
                ]
                yield pa.RecordBatch.from_arrays(arrays, schema=schema)

    # ----------------------------------------------------------------------------------------

    def _check_present(self, wanted: list[str]) -> None:
        missing = [c for c in dict.fromkeys(wanted) if c not in self._families]
        if missing:
            names = ", ".join(repr(c) for c in missing)
            raise SourceError(f"column(s) not found in the source: {names}")

    def _ordered(self, query: sa.Select[Any]) -> sa.Select[Any]:
        return query.order_by(*(self._table.c[c] for c in self._order))

    def _selected(self, name: str) -> sa.ColumnElement[Any]:
        """The column as read: text and binary cells cut by the database to
        ``max_cell_bytes + 1`` characters (bytes for binary), so that no cell larger than the
        limit ever leaves the database whole, yet one over it is still seen as over it (a cut
        text of more than the limit's bytes). The reader makes it MISSING."""
        column: sa.ColumnElement[Any] = self._table.c[name]
        family = self._families[name]
        if family == "other":
            column = sa.cast(column, sa.Text)
        if family in _VARIABLE:
            column = sa.func.substr(column, 1, self._limits.max_cell_bytes + 1, type_=column.type)
        return column

    def _header(self) -> bytes:
        lines = [f"{name}\t{self._type_names[name]}" for name in self._columns]
        return _framed("\n".join(lines).encode())

    def _digest_postgresql(self, conn: Connection, digest: Any) -> None:
        row_text = sa.cast(sa.func.row(*(self._table.c[c] for c in self._columns)), sa.Text)
        row_digest = sa.func.sha256(sa.func.convert_to(row_text, sa.literal_column("'UTF8'")))
        query = self._ordered(sa.select(row_digest).select_from(self._table))
        for rows in _stream_rows(conn, query, _FINGERPRINT_ROWS):
            digest.update(b"".join(bytes(row[0]) for row in rows))

    def _digest_generic(self, conn: Connection, digest: Any) -> None:
        query = self._ordered(
            sa.select(*(self._table.c[c] for c in self._columns)).select_from(self._table)
        )
        for rows in _stream_rows(conn, query, _FINGERPRINT_ROWS):
            for row in rows:
                digest.update(hashlib.sha256(b"".join(_encode_value(v) for v in row)).digest())

    def _empty_batches(self, rows_per_block: int) -> Iterator[pa.RecordBatch]:
        """No columns requested (an intercept-only model): batches with rows but no columns."""
        remaining = self.count_rows()
        while remaining > 0:
            size = min(rows_per_block, remaining)
            yield pa.RecordBatch.from_struct_array(pa.array([{}] * size, type=pa.struct([])))
            remaining -= size


def _stream_rows(
    conn: Connection, query: sa.Select[Any], size: int
) -> Iterator[Sequence[Sequence[Any]]]:
    """The rows of ``query`` in blocks of at most ``size``, through a server-side cursor (one
    block in memory at a time).

    With psycopg (3), a named cursor in binary mode on the driver's connection (about twice as
    fast as through SQLAlchemy's result rows; the Python values are the same); elsewhere
    SQLAlchemy's ``stream_results``/``yield_per``. The SQL is SQLAlchemy's compilation of
    ``query`` either way (identifiers quoted, values bound).
    """
    if conn.dialect.driver == "psycopg":
        compiled = query.compile(dialect=conn.dialect)
        driver = conn.connection.driver_connection
        with driver.cursor(name="dpfit_source_read", binary=True) as cursor:  # type: ignore[union-attr]
            cursor.itersize = size
            cursor.execute(str(compiled), compiled.params or None)
            while rows := cursor.fetchmany(size):
                yield rows
        return
    result = conn.execution_options(stream_results=True, yield_per=size).execute(query)
    yield from result.partitions(size)


def _framed(data: bytes) -> bytes:
    return len(data).to_bytes(8, "big") + data


def _encode_value(value: Any) -> bytes:
    """A typed, length-prefixed encoding: no two different value sequences share bytes."""
    if value is None:
        return b"N"
    if isinstance(value, bool):
        return b"B1" if value else b"B0"
    if isinstance(value, int):
        return b"I" + _framed(str(value).encode())
    if isinstance(value, float):
        return b"F" + struct.pack(">d", value)
    if isinstance(value, bytes | bytearray | memoryview):
        return b"Y" + _framed(bytes(value))
    return b"S" + _framed(str(value).encode("utf-8", "surrogatepass"))


# --------------------------------------------------------------------------------------------
# Per-cell conversion to the column's Arrow type: total, depending on the cell only
# --------------------------------------------------------------------------------------------


def _to_int(value: Any) -> int | None:
    if type(value) is int and _INT64_MIN <= value <= _INT64_MAX:
        return value
    return None


def _to_float(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, float):
        return value
    if isinstance(value, int | Decimal):
        try:
            return float(value)
        except (OverflowError, ValueError):
            return None
    return None


def _to_bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if type(value) is int and value in (0, 1):  # SQLite stores booleans as 0/1
        return bool(value)
    return None


def _to_text(value: Any) -> str | None:
    if isinstance(value, str):
        try:
            value.encode("utf-8")  # Arrow strings are UTF-8: lone surrogates cannot be stored
        except UnicodeEncodeError:
            return None
        return value
    return None


def _to_binary(value: Any) -> bytes | None:
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    return None


# Families whose values a type-enforcing database (PostgreSQL) returns exactly as Arrow takes
# them (int, float, bool, str, bytes or None): a block of such a column goes to Arrow whole.
_TRUSTED: frozenset[Family] = frozenset({"int", "float", "bool", "text", "binary", "other"})


def _column_array(
    values: Sequence[Any], family: Family, typed: bool, arrow_type: pa.DataType | None = None
) -> pa.Array:
    """One block of one column as an Arrow array, each cell by :data:`_CONVERTERS`.

    Where the database enforces column types (``typed``), the values of a trusted family are
    already what the per-cell conversion returns, so Arrow converts the block whole; should it
    refuse one, the block is converted cell by cell instead — the same result either way, so the
    path taken does not depend on the content. ``arrow_type``: the column's type when it is not
    the family's (``float32`` for a ``real``: each float rounds to the nearest float32, which is
    the stored one whatever text or width the driver gave it).
    """
    arrow_type = arrow_type or _ARROW_TYPES[family]
    if typed and family in _TRUSTED:
        try:
            return pa.array(values, type=arrow_type)
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            pass
    convert = _CONVERTERS[family]
    return pa.array([convert(v) for v in values], type=arrow_type)


_CONVERTERS: dict[Family, Callable[[Any], Any]] = {
    "int": _to_int,
    "float": _to_float,
    "decimal": _to_float,
    "bool": _to_bool,
    "text": _to_text,
    "binary": _to_binary,
    "other": _to_text,
}


register(
    "sql",
    Backend(
        open=lambda uri, settings, format: open_sql_source(uri, settings),
        reopen=lambda format, location, settings: reopen_sql_source(location, settings),
    ),
    formats=("sql",),
)
