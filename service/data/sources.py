"""Dataset sources registered by reference: a CSV file, a Parquet file or a Parquet folder.

Locations are resolved against a fixed list of allowed data roots; nothing outside them is ever
opened (symlinks and ``..`` are resolved before the check, also for every file of a folder).

Errors are :class:`SourceError` with messages meant for users. They may quote what the user typed
(the URI, the requested column names — public schema) but never a cell value, a line number or
anything else computed from file contents: parser and Arrow errors are replaced by a generic
message and their original text (which can quote cells) is dropped, not chained.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol
from urllib.parse import unquote, urlsplit

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

Format = Literal["csv", "parquet"]

CSV_SUFFIXES = frozenset({".csv"})
PARQUET_SUFFIXES = frozenset({".parquet", ".pq"})
_CHUNK_BYTES = 1 << 20
_CSV_COUNT_CHUNK_ROWS = 1 << 18
_URI_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
# Only empty fields are missing: "NA" or "None" stay strings, as they would in a Parquet file.
_CSV_OPTIONS: dict[str, object] = {"keep_default_na": False, "na_values": [""]}


class _Digest(Protocol):
    def update(self, data: bytes, /) -> None: ...


class SourceError(ValueError):
    """A dataset source cannot be used. The message never contains data from the file."""


# --------------------------------------------------------------------------------------------
# Resolution
# --------------------------------------------------------------------------------------------


def resolve_source(uri: str, roots: Sequence[Path | str]) -> Path:
    """The real path of ``uri`` inside one of the allowed ``roots``.

    ``uri`` is a path relative to a root (roots are tried in order; the first that holds an
    existing file or folder wins) or a ``file://`` URI with an absolute path inside a root.
    Symlinks and ``..`` are resolved before checking containment. The result is a ``.csv``,
    ``.parquet`` or ``.pq`` file, or a folder of ``*.parquet``/``*.pq`` files.
    Raises :class:`SourceError` otherwise, with a distinct message for each reason.
    """
    real_roots = _real_roots(roots)
    text = uri.strip()
    if not text or "\x00" in text:
        raise SourceError("the dataset location is empty or invalid")
    try:
        if _is_file_uri(text):
            path = _resolve_file_uri(text, uri, real_roots)
        else:
            path = _resolve_relative(text, uri, real_roots)
        _check_kind(path, uri, real_roots)
    except SourceError:
        raise
    except PermissionError:
        raise SourceError(f"the service is not permitted to access {uri!r}") from None
    except (OSError, RuntimeError, ValueError):  # e.g. symlink loops, over-long names
        # The original message may spell out resolved paths outside the roots: drop it.
        raise SourceError(f"{uri!r} cannot be resolved") from None
    return path


def _real_roots(roots: Sequence[Path | str]) -> list[Path]:
    if not roots:
        raise SourceError("no data roots are configured; datasets cannot be registered")
    return [Path(root).resolve() for root in roots]


def _is_file_uri(text: str) -> bool:
    match = _URI_SCHEME.match(text)
    if match and match.group(1).lower() != "file":
        raise SourceError(
            f"unsupported URI scheme {match.group(1)!r} in {text!r}; use a path relative to a "
            "data root or a file:// URI"
        )
    return bool(match) or text.lower().startswith("file:")


def _resolve_file_uri(text: str, uri: str, roots: list[Path]) -> Path:
    parts = urlsplit(text)
    if parts.netloc not in ("", "localhost"):
        raise SourceError(f"file URI {uri!r} names a remote host; only local files are supported")
    if parts.query or parts.fragment:
        raise SourceError(f"file URI {uri!r} must not have a query or fragment")
    raw = Path(unquote(parts.path))
    if not raw.is_absolute():
        raise SourceError(f"file URI {uri!r} must hold an absolute path (file:///...)")
    path = raw.resolve()
    if not _inside(path, roots):
        raise SourceError(f"{uri!r} lies outside the allowed data roots")
    if not path.exists():
        raise SourceError(f"{uri!r} does not exist")
    return path


def _resolve_relative(text: str, uri: str, roots: list[Path]) -> Path:
    if Path(text).is_absolute() or text.startswith("~"):
        raise SourceError(
            f"absolute path {uri!r} is not accepted; give a path relative to a data root "
            "or a file:// URI"
        )
    for root in roots:
        candidate = (root / text).resolve()
        if not _inside(candidate, roots):
            raise SourceError(f"{uri!r} resolves outside the allowed data roots")
        if candidate.exists():
            return candidate
    raise SourceError(f"{uri!r} was not found under any data root")


def _inside(path: Path, roots: list[Path]) -> bool:
    return any(path == root or path.is_relative_to(root) for root in roots)


def _check_kind(path: Path, uri: str, roots: list[Path]) -> None:
    if path.is_dir():
        members = parquet_members(path)
        if not members:
            raise SourceError(f"folder {uri!r} holds no .parquet files")
        if not all(_inside(m.resolve(), roots) for m in members):
            raise SourceError(f"a file in folder {uri!r} resolves outside the allowed data roots")
        return
    if not path.is_file():
        raise SourceError(f"{uri!r} is not a regular file or folder")
    if path.suffix.lower() not in CSV_SUFFIXES | PARQUET_SUFFIXES:
        raise SourceError(f"{uri!r} is not a .csv, .parquet or .pq file")


def parquet_members(folder: Path) -> list[Path]:
    """The data files of a Parquet folder: its top-level ``*.parquet``/``*.pq`` files, sorted.

    Hidden and ``_``-prefixed files (``_SUCCESS``, ``.crc`` …) are skipped, as Arrow does; nested
    (Hive-partitioned) folders are not read.
    """
    return sorted(
        p
        for p in folder.iterdir()
        if p.suffix.lower() in PARQUET_SUFFIXES
        and p.is_file()
        and not p.name.startswith((".", "_"))
    )


def detect_format(path: Path) -> Format:
    """``"csv"`` or ``"parquet"`` from the file suffix; a folder is a Parquet folder."""
    if path.is_dir():
        return "parquet"
    suffix = path.suffix.lower()
    if suffix in CSV_SUFFIXES:
        return "csv"
    if suffix in PARQUET_SUFFIXES:
        return "parquet"
    raise SourceError(f"cannot tell the format of {path.name!r}; expected .csv, .parquet or .pq")


# --------------------------------------------------------------------------------------------
# Fingerprint
# --------------------------------------------------------------------------------------------


def fingerprint(path: Path) -> str:
    """``"sha256:<hex>"`` of the source, streamed in 1 MiB chunks.

    For a file this is the plain SHA-256 of its bytes (``sha256sum`` gives the same hex). For a
    Parquet folder it covers, in sorted order, each data file's relative name and bytes, each
    length-prefixed so that no two different folders share a byte stream.
    """
    digest = hashlib.sha256()
    with _guarded("source"):
        if path.is_dir():
            for member in parquet_members(path):
                name = member.relative_to(path).as_posix().encode()
                digest.update(len(name).to_bytes(8, "big") + name)
                digest.update(member.stat().st_size.to_bytes(8, "big"))
                _hash_file(member, digest)
        else:
            _hash_file(path, digest)
    return f"sha256:{digest.hexdigest()}"


def _hash_file(path: Path, digest: _Digest) -> None:
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK_BYTES):
            digest.update(chunk)


# --------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------


@contextmanager
def _guarded(what: str) -> Iterator[None]:
    """Turn reader failures into a generic :class:`SourceError` quoting nothing from the file."""
    try:
        yield
    except SourceError:
        raise
    except PermissionError:
        raise SourceError(f"the service is not permitted to read the {what}") from None
    except (OSError, ValueError, TypeError, UnicodeError, pa.ArrowException):
        # `from None`: the original message may quote a cell or a line; it must not travel on.
        raise SourceError(
            f"the {what} could not be read; check that it is a valid, well-formed file"
        ) from None


def available_columns(path: Path, fmt: Format) -> list[str]:
    """Column names from the header (CSV) or the schema (Parquet), without reading any rows.

    For a Parquet folder: the columns present in every file, in the first file's order.
    """
    if fmt == "csv":
        with _guarded("CSV header"):
            header = pd.read_csv(path, nrows=0, **_CSV_OPTIONS)  # type: ignore[call-overload]
        return [str(c) for c in header.columns]
    files = _parquet_files(path)
    with _guarded("Parquet schema"):
        names = [pq.read_schema(f).names for f in files]
    common = set(names[0]).intersection(*names[1:])
    return [n for n in names[0] if n in common]


def count_rows(path: Path, fmt: Format) -> int:
    """Number of data rows (header excluded).

    Parquet: read from the file footers only. CSV: a streaming pass with the same parser and
    options as :func:`read_columns`, so the count always equals the rows it returns.
    """
    if fmt == "parquet":
        with _guarded("Parquet metadata"):
            return sum(pq.ParquetFile(f).metadata.num_rows for f in _parquet_files(path))
    total = 0
    with (
        _guarded("CSV file"),
        pd.read_csv(  # type: ignore[call-overload]
            path, usecols=[0], dtype=str, chunksize=_CSV_COUNT_CHUNK_ROWS, **_CSV_OPTIONS
        ) as chunks,
    ):
        for chunk in chunks:
            total += len(chunk)
    return total


def read_columns(path: Path, fmt: Format, columns: Sequence[str]) -> pd.DataFrame:
    """Read only ``columns`` (in that order) into a DataFrame with a RangeIndex.

    Raises :class:`SourceError` naming requested columns that the source lacks. With no columns,
    returns a frame with no columns and :func:`count_rows` rows (an intercept-only model).
    CSV: pandas' C parser with whole-column type inference; only empty fields are missing values.
    As pandas does when reading a subset of columns, a row with extra trailing fields keeps its
    first ones and a short row has its absent fields missing; :func:`count_rows` agrees.
    Parquet: Arrow, reading only the requested column chunks.
    """
    wanted = list(dict.fromkeys(columns))
    if not wanted:
        return pd.DataFrame(index=pd.RangeIndex(count_rows(path, fmt)))
    _check_present(path, fmt, wanted)
    frame = _read_csv(path, wanted) if fmt == "csv" else _read_parquet(path, wanted)
    return frame[wanted].reset_index(drop=True)


def _check_present(path: Path, fmt: Format, wanted: list[str]) -> None:
    present = set(available_columns(path, fmt))
    missing = [c for c in wanted if c not in present]
    if missing:
        names = ", ".join(repr(c) for c in missing)
        raise SourceError(f"column(s) not found in the source: {names}")


def _read_csv(path: Path, columns: list[str]) -> pd.DataFrame:
    with _guarded("CSV file"):
        return pd.read_csv(  # type: ignore[call-overload, no-any-return]
            path, usecols=columns, low_memory=False, **_CSV_OPTIONS
        )


def _read_parquet(path: Path, columns: list[str]) -> pd.DataFrame:
    with _guarded("Parquet data"):
        tables = [pq.read_table(f, columns=columns) for f in _parquet_files(path)]
        table = (
            tables[0]
            if len(tables) == 1
            else pa.concat_tables(tables, promote_options="permissive")
        )
        return table.to_pandas()


def _parquet_files(path: Path) -> list[Path]:
    files = parquet_members(path) if path.is_dir() else [path]
    if not files:
        raise SourceError("the Parquet folder holds no .parquet files")
    return files


# --------------------------------------------------------------------------------------------
# Reading in blocks of rows
# --------------------------------------------------------------------------------------------

_SOURCE_CHANGED_WHILE_READING = "the source changed while it was being read"
_READ_BUFFER_BYTES = 1 << 16
# Arrow types whose conversion to pandas is value by value, so a block of rows converts to the
# same values as the whole table (nested, dictionary, temporal and decimal types are read whole).
_BLOCK_TYPES = (
    pa.types.is_integer,
    pa.types.is_floating,
    pa.types.is_boolean,
    pa.types.is_string,
    pa.types.is_large_string,
)


@dataclass(frozen=True)
class _BlockPlan:
    """How to convert one record batch exactly as :func:`_read_parquet` converts its rows."""

    files: list[Path]
    columns: list[str]
    types: dict[str, pa.DataType]
    metadata: dict[bytes, bytes] | None  # the schema metadata of the whole concatenated table
    dtypes: dict[str, Any]  # pandas dtype of every column in read_columns' frame
    widen: frozenset[str]  # integer columns with nulls somewhere: float64 in every block


def block_dtypes(path: Path, fmt: Format, columns: Sequence[str]) -> dict[str, Any] | None:
    """The pandas dtype of each of ``columns`` in every block :func:`iter_column_blocks` yields
    (the dtypes :func:`read_columns` gives), or ``None`` when the source is only read whole.

    Blocks are offered only where they provably give :func:`read_columns`' frame row for row:
    Parquet, with every requested column a top-level integer, floating-point, boolean or string
    column of the same Arrow type in every file (no type promotion across files). Where Arrow's
    conversion to pandas depends on whether a column holds nulls at all (integers become float64,
    booleans object), the file footers must record null counts: an integer column with nulls in
    any file is widened to float64 in every block, as the whole-table conversion does, and a
    boolean column with nulls is read whole. CSV is always read whole (its type inference looks
    at whole columns). Reads footers only; raises :class:`SourceError` for missing columns with
    :func:`read_columns`' message.
    """
    wanted = list(dict.fromkeys(columns))
    if wanted:
        _check_present(path, fmt, wanted)
    plan = _block_plan(path, wanted) if fmt == "parquet" else None
    return None if plan is None else dict(plan.dtypes)


def iter_column_blocks(
    path: Path, fmt: Format, columns: Sequence[str], rows_per_block: int
) -> Iterator[pd.DataFrame]:
    """:func:`read_columns`, as consecutive blocks of at most ``rows_per_block`` rows.

    Concatenated in order, the blocks hold exactly the rows, values and dtypes of
    ``read_columns(path, fmt, columns)``; each block has its own RangeIndex from 0. When
    :func:`block_dtypes` is not ``None``, the Parquet files are streamed in :func:`_read_parquet`'s
    order as Arrow record batches, so only one block is in memory at a time; otherwise the whole
    frame is read and yielded as a single block. Errors are :func:`read_columns`' (columns are
    checked before any row is read); a file that no longer matches its footer mid-read raises
    :class:`SourceError`.
    """
    if rows_per_block < 1:
        raise ValueError("rows_per_block must be at least 1")
    wanted = list(dict.fromkeys(columns))
    if wanted:
        _check_present(path, fmt, wanted)
    plan = _block_plan(path, wanted) if fmt == "parquet" else None
    if plan is None:
        yield read_columns(path, fmt, wanted)
        return
    for file in plan.files:
        yield from _file_blocks(file, plan, rows_per_block)


def _file_blocks(file: Path, plan: _BlockPlan, rows_per_block: int) -> Iterator[pd.DataFrame]:
    with _guarded("Parquet data"):
        # No pre-buffering (it loads the whole file's column chunks up front) and buffered page
        # reads: Arrow then holds about a page per column, not a row group (I/O only; the
        # decoded values are the same).
        reader = pq.ParquetFile(file, pre_buffer=False, buffer_size=_READ_BUFFER_BYTES)
    with reader:
        with _guarded("Parquet data"):
            batches = reader.iter_batches(batch_size=rows_per_block, columns=plan.columns)
        while True:
            # Only the reading is guarded: the consumer's own errors never pass through here.
            with _guarded("Parquet data"):
                batch = next(batches, None)
                if batch is None:
                    return
                frame = _block_frame(batch, plan)
            yield frame


def _block_frame(batch: pa.RecordBatch, plan: _BlockPlan) -> pd.DataFrame:
    if dict(zip(batch.schema.names, batch.schema.types, strict=True)) != plan.types:
        raise SourceError(_SOURCE_CHANGED_WHILE_READING)
    table = pa.Table.from_batches([batch]).replace_schema_metadata(plan.metadata)
    # split_blocks: one array per column (zero-copy where Arrow allows) instead of a consolidated
    # copy; it changes the frame's memory layout only, not a dtype or a value.
    frame = table.to_pandas(split_blocks=True)
    # Arrow makes an integer column float64 only when it holds a null; the whole table does so
    # for every row if any file has one. numpy's int→float64 cast is the C conversion Arrow uses.
    widen = {c: np.float64 for c in plan.widen if frame[c].dtype.kind in "iu"}
    if widen:
        frame = frame.astype(widen)
    if list(frame.columns) != plan.columns:
        frame = frame[plan.columns]
    index = frame.index
    if not (isinstance(index, pd.RangeIndex) and index.start == 0 and index.step == 1):
        frame = frame.reset_index(drop=True)
    if any(frame[c].dtype != plan.dtypes[c] for c in plan.columns):
        raise SourceError(_SOURCE_CHANGED_WHILE_READING)
    return frame


def _block_plan(path: Path, wanted: list[str]) -> _BlockPlan | None:
    if not wanted:
        return None
    files = _parquet_files(path)
    with _guarded("Parquet data"):
        footers = [_footer(f, wanted) for f in files]
    if any(footer is None for footer in footers):
        return None
    schemas = [footer[0] for footer in footers if footer is not None]
    nulls = [footer[1] for footer in footers if footer is not None]
    try:
        # The schema _read_parquet's table gets, metadata included (the first file's).
        unified = (
            schemas[0]
            if len(schemas) == 1
            else pa.concat_tables(
                [s.empty_table() for s in schemas], promote_options="permissive"
            ).schema
        )
        if any(s.types != unified.types for s in schemas):
            return None  # promotion across files: not proven value-for-value, read whole
        # What Arrow's to_pandas makes of each column without and with nulls.
        plain = unified.empty_table().to_pandas()
        with_nulls = pa.Table.from_arrays(
            [pa.nulls(1, t) for t in unified.types], schema=unified
        ).to_pandas()
        if list(plain.columns) != wanted or list(with_nulls.columns) != wanted:
            return None
        dtypes = {c: plain[c].dtype for c in wanted}
        null_dtypes = {c: with_nulls[c].dtype for c in wanted}
    except (pa.ArrowException, ValueError, TypeError, KeyError):
        return None
    widen: set[str] = set()
    for column in wanted:
        if dtypes[column] == null_dtypes[column]:
            continue
        has_nulls = [file_nulls[column] for file_nulls in nulls]
        if None in has_nulls:
            return None  # a footer does not say: read whole
        if not any(has_nulls):
            continue
        if not (
            isinstance(dtypes[column], np.dtype)
            and dtypes[column].kind in "iu"
            and null_dtypes[column] == np.float64
        ):
            return None  # e.g. booleans with nulls become objects: read whole
        dtypes[column] = null_dtypes[column]
        widen.add(column)
    return _BlockPlan(
        files=files,
        columns=wanted,
        types=dict(zip(unified.names, unified.types, strict=True)),
        metadata=unified.metadata,
        dtypes=dtypes,
        widen=frozenset(widen),
    )


def _footer(file: Path, wanted: list[str]) -> tuple[pa.Schema, dict[str, bool | None]] | None:
    """The schema ``pq.read_table(file, columns=wanted)`` has, and whether each column holds a
    null (``None`` when the footer lacks the count); ``None`` if a column is not block-readable."""
    with pq.ParquetFile(file) as reader:
        arrow = reader.schema_arrow
        metadata = reader.metadata
    names = arrow.names
    for column in wanted:
        # One top-level primitive field, and no nested field whose path could also match it.
        if names.count(column) != 1 or any(column.startswith(f"{n}.") for n in names):
            return None
        if not any(is_type(arrow.field(column).type) for is_type in _BLOCK_TYPES):
            return None
    leaves: dict[str, list[int]] = {}
    for index in range(metadata.num_columns):
        leaves.setdefault(metadata.schema.column(index).path, []).append(index)
    has_nulls: dict[str, bool | None] = {}
    for column in wanted:
        if len(leaves.get(column, [])) != 1:
            return None
        has_nulls[column] = _has_nulls(metadata, leaves[column][0])
    schema = pa.schema([arrow.field(c) for c in wanted], metadata=arrow.metadata)
    return schema, has_nulls


def _has_nulls(metadata: pq.FileMetaData, leaf: int) -> bool | None:
    for group in range(metadata.num_row_groups):
        statistics = metadata.row_group(group).column(leaf).statistics
        if statistics is None or not statistics.has_null_count:
            return None
        if statistics.null_count > 0:
            return True
    return False
