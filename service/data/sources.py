"""File sources: a CSV file, a Parquet file or a Parquet folder on any filesystem.

:class:`FileSource` reads a file or folder through any ``pyarrow.fs.FileSystem`` (local:
:mod:`service.data.local_files`, which resolves locations against the allowed data roots; the
object store: :mod:`service.data.object_store`), and implements
:class:`~service.data.source.Source`. Opening a location goes through the source registry
(:mod:`service.data.backends`); this module imports no backend.

Errors are :class:`SourceError` with messages meant for users. They may quote what the user typed
(the URI, the requested column names — public schema) but never a cell value, a line number or
anything else computed from file contents: parser and Arrow errors are replaced by a generic
message and their original text (which can quote cells) is dropped, not chained.

The CSV row rule (row-local by construction; :mod:`service.data.csv_lines` implements it)
---------------------------------------------------------------------------------------------
- The first physical line is the header (the schema). Every later physical line — the bytes up to
  and including ``\\n``, a trailing ``\\r`` before it dropped — is exactly one row, *blank lines
  included* (all cells missing). The file's final line terminator does not start a row; a last
  line without a terminator is a row if it is not empty (an empty one is the same bytes as no
  line). So ``n`` is the number of line terminators after the header, plus one for a non-empty
  unterminated last line: no cell can change it.
- Within a line, fields are separated by ``,``; a field may be enclosed in ``"…"`` with ``""`` for
  a literal quote. Newlines never occur inside a value (a quote cannot reach into another line).
- A line with more fields than the header keeps its first ones; a line with fewer has the absent
  cells missing (empty).
- A line whose quoting is not of that form (an unbalanced quote, a quote inside an unquoted field,
  text after a closing quote) or that holds a carriage return other than its terminator's is
  *unparseable*: all its cells are missing — and it stays a row.
- A requested column that the header names more than once is refused (:class:`SourceError`
  naming it, before any row; Parquet files are held to the same rule).
- Cells are handed out as undecoded bytes (``pa.binary()``): decoding and conversion are per cell
  (:mod:`service.data.cells`).
"""

from __future__ import annotations

import csv
import hashlib
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import Any, Literal, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from service.data.confined_files import confined_filesystem
from service.data.csv_lines import iter_csv_tables, normalise_lines
from service.data.limits import DEFAULT_LIMITS, ENV_NAMES, ReadLimits

Format = Literal["csv", "parquet"]

CSV_SUFFIXES = frozenset({".csv"})
PARQUET_SUFFIXES = frozenset({".parquet", ".pq"})
_CHUNK_BYTES = 1 << 20
# Bytes of CSV text parsed at a time (cut at a line end): the text plus its cells in memory.
_CSV_READ_BYTES = 8 << 20
# A chunk holds at most this many bytes' worth of fields (lines × header width): a short line
# is padded to the header's width before Arrow parses it, so a wide header means fewer lines.
_CSV_PAD_BYTES = 8 << 20
_NEWLINE = ord("\n")
_READ_BUFFER_BYTES = 1 << 16
_SOURCE_CHANGED_WHILE_READING = "the source changed while it was being read"


class _Digest(Protocol):
    def update(self, data: bytes, /) -> None: ...


class SourceError(ValueError):
    """A dataset source cannot be used. The message never contains data from the file."""


class LimitExceeded(SourceError):
    """A source or schema exceeds a public read limit (:mod:`service.data.limits`). ``setting``
    names the environment variable; the message names the limit and its value, never a cell."""

    def __init__(self, setting: str, message: str) -> None:
        super().__init__(message)
        self.setting = setting


def exceeded(field: str, limits: ReadLimits, what: str) -> LimitExceeded:
    """The refusal for ``what`` exceeding ``limits.<field>``, naming the variable and value."""
    variable = ENV_NAMES[field]
    value = getattr(limits, field)
    return LimitExceeded(variable, f"{what} exceeds the limit of {value} ({variable})")


def _is_parquet_member(name: str) -> bool:
    suffix = PurePosixPath(name).suffix.lower()
    return suffix in PARQUET_SUFFIXES and not name.startswith((".", "_"))


def local_source(
    path: Path,
    format: Format,
    limits: ReadLimits = DEFAULT_LIMITS,
    *,
    roots: Sequence[Path] | None = None,
    closed: Sequence[Path] = (),
) -> FileSource:
    """A :class:`FileSource` on the local filesystem for an already resolved ``path``, read
    through :class:`~service.data.confined_files.ConfinedFiles`: every open is checked, when
    it happens, to lie inside ``roots`` (real paths; default: ``path`` itself) and outside
    ``closed``, and follows no symlink after that check."""
    inside = roots if roots is not None else [Path(os.path.realpath(path))]
    filesystem = confined_filesystem(inside, closed)
    return FileSource(filesystem, str(path), format, location=str(path), limits=limits)


# --------------------------------------------------------------------------------------------
# Guarding reads
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


# --------------------------------------------------------------------------------------------
# File sources (CSV file, Parquet file, Parquet folder) on any pyarrow filesystem
# --------------------------------------------------------------------------------------------


class FileSource:
    """A CSV file, a Parquet file or a Parquet folder on a ``pyarrow.fs.FileSystem``.

    ``path`` is the filesystem's own path (for S3: ``bucket/key``); ``location`` is what the
    dataset row stores (defaults to ``path``). Confinement to allowed roots is the caller's job:
    this class opens what it is given. CSV sources yield every column as ``pa.binary()`` by the
    module's row rule; Parquet sources yield each column's stored Arrow type, file by file in
    sorted member order, without promoting types across files.

    Reads stay within ``limits`` (:mod:`service.data.limits`): a CSV header wider than
    ``max_columns`` or longer than ``max_line_bytes``, a Parquet file with more columns, a
    larger footer or a larger declared column chunk, a folder with more files are refused
    (:class:`LimitExceeded`); a CSV line longer than ``max_line_bytes`` is streamed past and
    handed out as a row of empty cells (counted in :attr:`oversize_lines` of the last read).
    """

    def __init__(
        self,
        filesystem: pafs.FileSystem,
        path: str,
        format: Format,
        *,
        location: str | None = None,
        limits: ReadLimits = DEFAULT_LIMITS,
    ) -> None:
        if format not in ("csv", "parquet"):
            raise SourceError(f"unknown file format {format!r}")
        self._fs = filesystem
        self._path = path
        self._format: Format = format
        self._location = location if location is not None else path
        self._limits = limits
        #: CSV lines over ``max_line_bytes`` met by the last (or current) ``iter_batches``.
        self.oversize_lines = 0

    @property
    def limits(self) -> ReadLimits:
        """The public read limits this source applies."""
        return self._limits

    # ---- the Source protocol -----------------------------------------------------------

    @property
    def format(self) -> Format:
        return self._format

    @property
    def location(self) -> str:
        return self._location

    @property
    def file_name(self) -> str:
        """The file's (or folder's) own name: a folder member's key in ``fingerprints()``."""
        return PurePosixPath(self._path).name

    def columns(self) -> list[str]:
        """Header names (CSV) or, for Parquet, the columns present in every file, in the first
        file's order."""
        return _common_columns(self._headers())

    def count_rows(self) -> int:
        """Parquet: from the footers. CSV: the line terminators after the header (plus a last
        unterminated line) — the module's row rule, which no cell can change."""
        if self._format == "parquet":
            with _guarded("Parquet metadata"):
                return sum(self._parquet_file(f).metadata.num_rows for f in self._files())
        with _guarded("CSV file"), self._fs.open_input_stream(self._path) as stream:
            total, last, header_done = 0, b"\n", False
            while chunk := stream.read(_CHUNK_BYTES):
                if not header_done:
                    newline = chunk.find(b"\n")
                    if newline < 0:
                        chunk = b""  # still inside the header line
                    else:
                        header_done, chunk = True, chunk[newline + 1 :]
                total += chunk.count(b"\n")
                if chunk:
                    last = chunk[-1:]
            return total + (1 if header_done and last != b"\n" else 0)

    def fingerprint(self) -> str:
        """``"sha256:<hex>"``: for a file the plain SHA-256 of its bytes (``sha256sum`` gives the
        same hex); for a Parquet folder, in sorted order, each data file's name and bytes, each
        length-prefixed so that no two different folders share a byte stream."""
        return self.fingerprints()[0]

    def fingerprints(self) -> tuple[str, dict[str, str] | None]:
        """:meth:`fingerprint` and, for a Parquet folder, each data file's own (the plain
        SHA-256 of its bytes, by file name) — one pass over the bytes. The per-file fingerprints
        let a data-parallel worker check just the files its row window reads."""
        digest = hashlib.sha256()
        members: dict[str, str] | None = None
        with _guarded("source"):
            if self._is_folder():
                members = {}
                for member in self._files():
                    name = PurePosixPath(member).name
                    encoded = name.encode()
                    digest.update(len(encoded).to_bytes(8, "big") + encoded)
                    size = self._fs.get_file_info(member).size
                    digest.update(int(size or 0).to_bytes(8, "big"))
                    own = hashlib.sha256()
                    self._hash_file(member, digest, own)
                    members[name] = f"sha256:{own.hexdigest()}"
            else:
                self._hash_file(self._path, digest)
        return f"sha256:{digest.hexdigest()}", members

    def iter_batches(self, columns: Sequence[str], rows_per_block: int) -> Iterator[pa.RecordBatch]:
        """The raw cells of ``columns`` in blocks of at most ``rows_per_block`` rows. Raises
        :class:`SourceError` naming requested columns the source lacks (before any row)."""
        if rows_per_block < 1:
            raise ValueError("rows_per_block must be at least 1")
        wanted = list(columns)
        headers = self._headers()
        present = _common_columns(headers)
        absent = [c for c in dict.fromkeys(wanted) if c not in present]
        if absent:
            names = ", ".join(repr(c) for c in absent)
            raise SourceError(f"column(s) not found in the source: {names}")
        check_unique_columns(headers, wanted)
        if self._format == "csv":
            yield from self._csv_batches(headers[0], wanted, rows_per_block)
        else:
            for file in self._files():
                yield from self._parquet_batches(file, wanted, rows_per_block)

    def members(self) -> list[tuple[FileSource, int]] | None:
        """For a Parquet folder, each data file as its own source with its row count (from the
        footer), in the order :meth:`iter_batches` reads them; ``None`` for a single file.
        Partitioned reading uses it to open only the files a row window intersects."""
        if self._format != "parquet" or not self._is_folder():
            return None
        out = []
        for file in self._files():
            with _guarded("Parquet metadata"):
                rows = self._parquet_file(file).metadata.num_rows
            member = FileSource(
                self._fs, file, "parquet", location=self._location, limits=self._limits
            )
            out.append((member, rows))
        return out

    def _headers(self) -> list[list[str]]:
        """Every header as stored, repeated names kept: the CSV header line, or each Parquet
        file's schema names (a folder: one list per data file, in reading order)."""
        if self._format == "csv":
            return [self._csv_header()]
        with _guarded("Parquet schema"):
            return [self._parquet_file(f).schema_arrow.names for f in self._files()]

    # ---- CSV ---------------------------------------------------------------------------

    def _csv_header(self) -> list[str]:
        limit = self._limits.max_line_bytes
        with _guarded("CSV header"), self._fs.open_input_stream(self._path) as stream:
            pieces: list[bytes] = []
            size = 0
            while chunk := stream.read(min(_CHUNK_BYTES, limit + 1)):
                newline = chunk.find(b"\n")
                pieces.append(chunk if newline < 0 else chunk[:newline])
                size += len(pieces[-1])
                if size > limit:
                    raise exceeded("max_line_bytes", self._limits, "the CSV header line")
                if newline >= 0:
                    break
        line = b"".join(pieces).removesuffix(b"\r").removeprefix(b"\xef\xbb\xbf")
        # Every name needs at least its separator: a cheap bound before parsing.
        if line.count(b",") >= self._limits.max_columns:
            raise exceeded("max_columns", self._limits, "the CSV header's number of columns")
        try:
            text = line.decode("utf-8")
            names = next(csv.reader([text], strict=True), [])
        except (UnicodeDecodeError, csv.Error):
            raise SourceError("the CSV header line is not valid UTF-8 CSV") from None
        if not names or names == [""]:
            raise SourceError("the CSV file has no header line")
        if len(names) > self._limits.max_columns:
            raise exceeded("max_columns", self._limits, "the CSV header's number of columns")
        return names

    def _csv_batches(
        self, header: list[str], wanted: list[str], rows_per_block: int
    ) -> Iterator[pa.RecordBatch]:
        indices = [header.index(c) for c in wanted]  # the first column of that name
        self.oversize_lines = 0
        with _guarded("CSV file"):
            stream = self._fs.open_input_stream(self._path)
        with stream:
            lines = _CsvLines(stream, self._limits, max(1, _CSV_PAD_BYTES // len(header)))
            chunks = iter(lines)
            while True:
                with _guarded("CSV file"):
                    chunk = next(chunks, None)
                    self.oversize_lines = lines.oversize
                    if chunk is None:
                        return
                    normalised = normalise_lines(chunk, len(header))
                    tables = list(iter_csv_tables(normalised, len(header), indices))
                for table in tables:
                    for batch in table.to_batches(max_chunksize=rows_per_block):
                        yield pa.RecordBatch.from_arrays(batch.columns, names=wanted)

    # ---- Parquet -----------------------------------------------------------------------

    def _is_folder(self) -> bool:
        return self._fs.get_file_info(self._path).type == pafs.FileType.Directory

    def _files(self) -> list[str]:
        with _guarded("Parquet folder"):
            if not self._is_folder():
                return [self._path]
            infos = self._fs.get_file_info(pafs.FileSelector(self._path, recursive=False))
        files = sorted(
            (
                info.path
                for info in infos
                if info.type == pafs.FileType.File and _is_parquet_member(info.base_name)
            ),
            key=lambda p: PurePosixPath(p).name,
        )
        if not files:
            raise SourceError("the Parquet folder holds no .parquet files")
        if len(files) > self._limits.max_folder_files:
            raise exceeded("max_folder_files", self._limits, "the number of files in the folder")
        return files

    def _parquet_file(self, file: str, **options: Any) -> pq.ParquetFile:
        """The opened file, after its footer's length (from the last 8 bytes) and its number of
        leaf columns were checked against the limits (the footer is parsed whole)."""
        handle = self._fs.open_input_file(file)
        size = handle.size()
        if size >= 12:
            handle.seek(size - 8)
            tail = handle.read(8)
            footer = int.from_bytes(tail[:4], "little")
            if footer > self._limits.max_parquet_footer_bytes:
                handle.close()
                raise exceeded("max_parquet_footer_bytes", self._limits, "a Parquet file's footer")
            handle.seek(0)
        parquet = pq.ParquetFile(handle, **options)
        if parquet.metadata.num_columns > self._limits.max_columns:
            parquet.close()
            raise exceeded("max_columns", self._limits, "a Parquet file's number of columns")
        return parquet

    def _parquet_batches(
        self, file: str, wanted: list[str], rows_per_block: int
    ) -> Iterator[pa.RecordBatch]:
        with _guarded("Parquet data"):
            # No pre-buffering (it loads the whole file's column chunks up front) and buffered
            # page reads: Arrow then holds about a page per column, not a row group.
            # Text and binary columns come as dictionary arrays (Arrow keeps a dictionary-encoded
            # column encoded): a value repeated over many rows is held once, so a batch's size is
            # bounded by the column chunks' sizes — decoding could multiply a tiny chunk.
            unique = list(dict.fromkeys(wanted))
            with self._parquet_file(file) as probe:
                schema = probe.schema_arrow
            text = [c for c in unique if _is_text_type(schema.field(c).type)]
            reader = self._parquet_file(
                file, pre_buffer=False, buffer_size=_READ_BUFFER_BYTES, read_dictionary=text
            )
            # The declared columns' row groups are bounded (public metadata): Arrow decodes at most
            # that much per column to hand out a batch, whatever the cells hold.
            _check_column_chunks(reader, unique, self._limits)
            batches = reader.iter_batches(batch_size=rows_per_block, columns=unique)
        with reader:
            while True:
                # Only the reading is guarded: the consumer's own errors never pass through here.
                with _guarded("Parquet data"):
                    batch = next(batches, None)
                    if batch is None:
                        return
                    if batch.schema.names != unique:
                        raise SourceError(_SOURCE_CHANGED_WHILE_READING)
                    arrays = [batch.column(unique.index(c)) for c in wanted]
                yield pa.RecordBatch.from_arrays(arrays, names=wanted)

    def _hash_file(self, file: str, *digests: _Digest) -> None:
        with self._fs.open_input_stream(file) as stream:
            while chunk := stream.read(_CHUNK_BYTES):
                for digest in digests:
                    digest.update(chunk)


def _common_columns(headers: list[list[str]]) -> list[str]:
    """The names present in every header, in the first one's order (repeats kept)."""
    common = set(headers[0]).intersection(*headers[1:])
    return [n for n in headers[0] if n in common]


def check_unique_columns(headers: Sequence[Sequence[str]], wanted: Sequence[str]) -> None:
    """Raise :class:`SourceError` naming each of ``wanted`` that some header names more than
    once (``age,age,label``): which of the two is meant cannot be told, so neither is read —
    for CSV the first one would be taken silently, for Parquet Arrow hands out both. Names are
    public schema (the header), so the message may quote them; no cell is read."""
    repeated = [c for c in dict.fromkeys(wanted) if any(list(h).count(c) > 1 for h in headers)]
    if repeated:
        names = ", ".join(repr(c) for c in repeated)
        raise SourceError(f"column(s) named more than once in the source's header: {names}")


def _is_text_type(kind: pa.DataType) -> bool:
    """Flat string or binary columns (which Arrow can hand out dictionary-encoded)."""
    return (
        pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
        or pa.types.is_binary(kind)
        or pa.types.is_large_binary(kind)
    )


def _check_column_chunks(
    parquet: pq.ParquetFile, columns: Sequence[str], limits: ReadLimits
) -> None:
    """Refuse a file in which one row group of a declared column (all its leaves) is larger,
    uncompressed, than ``limits.max_column_chunk_bytes``: Arrow decodes up to that much to hand
    out any of its cells. Footer metadata only."""
    metadata = parquet.metadata
    wanted = set(columns)
    for group in range(metadata.num_row_groups):
        row_group = metadata.row_group(group)
        sizes: dict[str, int] = {}
        for index in range(row_group.num_columns):
            chunk = row_group.column(index)
            top = chunk.path_in_schema.split(".", 1)[0]
            if top in wanted:
                sizes[top] = sizes.get(top, 0) + int(chunk.total_uncompressed_size)
        if any(size > limits.max_column_chunk_bytes for size in sizes.values()):
            raise exceeded(
                "max_column_chunk_bytes", limits, "a declared column's row group in a Parquet file"
            )


class _CsvLines:
    """The data lines of a CSV stream (header dropped) in chunks of whole lines, each ending
    with ``\\n`` (one is added after an unterminated last line), in order.

    - The stream is read :data:`_CSV_READ_BYTES` at a time; a chunk holds at most
      ``max_lines`` lines (so that padding short lines to the header's width stays bounded).
    - A line whose bytes before its ``\\n`` exceed ``limits.max_line_bytes`` is handed out as an
      empty line (a row whose cells are all empty: MISSING) and counted in :attr:`oversize`;
      its bytes are skipped as they stream by — the peak is one read plus one line of at most
      the limit, whatever the file holds.
    - A header line longer than the limit: :class:`LimitExceeded` (a header is the schema).
    """

    def __init__(self, stream: Any, limits: ReadLimits, max_lines: int) -> None:
        self._stream = stream
        self._limits = limits
        self._max_lines = max_lines
        self.oversize = 0

    def __iter__(self) -> Iterator[bytes]:
        limit = self._limits.max_line_bytes
        pending: list[bytes] = []  # the start of a line not yet terminated (≤ limit bytes)
        pending_bytes = 0
        skipping = False  # inside an over-long line, already handed out as an empty one
        header_bytes = 0
        header_done = False
        while block := self._stream.read(_CSV_READ_BYTES):
            if not header_done:
                newline = block.find(b"\n")
                header_bytes += len(block) if newline < 0 else newline
                if header_bytes > limit:
                    raise exceeded("max_line_bytes", self._limits, "the CSV header line")
                if newline < 0:
                    continue
                header_done, block = True, block[newline + 1 :]
            if skipping:
                newline = block.find(b"\n")
                if newline < 0:
                    continue
                skipping, block = False, block[newline + 1 :]
            cut = block.rfind(b"\n")
            if cut < 0:
                if pending_bytes + len(block) > limit:
                    self.oversize += 1
                    pending, pending_bytes, skipping = [], 0, True
                    yield b"\n"
                elif block:
                    pending.append(block)
                    pending_bytes += len(block)
                continue
            text = b"".join([*pending, block[: cut + 1]]) if pending else block[: cut + 1]
            rest = block[cut + 1 :]
            pending, pending_bytes = ([rest], len(rest)) if rest else ([], 0)
            yield from self._chunks(text)
            if pending_bytes > limit:
                self.oversize += 1
                pending, pending_bytes, skipping = [], 0, True
                yield b"\n"
        if header_done and pending:
            yield from self._chunks(b"".join(pending) + b"\n")

    def _chunks(self, text: bytes) -> Iterator[bytes]:
        """``text`` (whole lines) with over-long lines emptied, cut every ``max_lines`` lines."""
        buf = np.frombuffer(text, dtype=np.uint8)
        ends = np.flatnonzero(buf == _NEWLINE)
        starts = np.concatenate(([0], ends[:-1] + 1))
        over = np.flatnonzero(ends - starts > self._limits.max_line_bytes)
        if over.size:
            self.oversize += int(over.size)
            pieces: list[bytes] = []
            done = 0
            for i in over.tolist():
                pieces.append(text[done : int(starts[i])])
                done = int(ends[i])  # keep its terminator: the row keeps its place
            pieces.append(text[done:])
            text = b"".join(pieces)
            buf = np.frombuffer(text, dtype=np.uint8)
            ends = np.flatnonzero(buf == _NEWLINE)
        if ends.size <= self._max_lines:
            yield text
            return
        cuts = ends[self._max_lines - 1 :: self._max_lines] + 1
        previous = 0
        for cut in cuts.tolist():
            yield text[previous:cut]
            previous = cut
        if previous < len(text):
            yield text[previous:]


# --------------------------------------------------------------------------------------------
# Path-based helpers kept for callers that hold a resolved local path
# --------------------------------------------------------------------------------------------


def available_columns(path: Path, fmt: Format) -> list[str]:
    """:meth:`FileSource.columns` of a local path."""
    return local_source(path, fmt).columns()


def count_rows(path: Path, fmt: Format) -> int:
    """:meth:`FileSource.count_rows` of a local path."""
    return local_source(path, fmt).count_rows()


def fingerprint(path: Path) -> str:
    """:meth:`FileSource.fingerprint` of a local path (file or Parquet folder)."""
    fmt: Format = "parquet" if path.is_dir() or path.suffix.lower() in PARQUET_SUFFIXES else "csv"
    return local_source(path, fmt).fingerprint()
