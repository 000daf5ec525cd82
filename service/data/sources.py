"""Dataset sources registered by reference: a CSV file, a Parquet file or a Parquet folder.

Local locations are resolved against a fixed list of allowed data roots; nothing outside them is
ever opened (symlinks and ``..`` are resolved before the check, also for every file of a folder).
:class:`FileSource` reads a file or folder through any ``pyarrow.fs.FileSystem`` (local here; the
object-store source reuses it with another filesystem), and implements
:class:`~service.data.source.Source`.

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
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, Literal, Protocol
from urllib.parse import unquote, urlsplit

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from service.data.csv_lines import iter_csv_tables, normalise_lines

if TYPE_CHECKING:
    from service.data.source import Source

Format = Literal["csv", "parquet"]

CSV_SUFFIXES = frozenset({".csv"})
PARQUET_SUFFIXES = frozenset({".parquet", ".pq"})
_CHUNK_BYTES = 1 << 20
# Bytes of CSV text parsed at a time (cut at a line end): the text plus its cells in memory.
_CSV_READ_BYTES = 8 << 20
_READ_BUFFER_BYTES = 1 << 16
_URI_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_SOURCE_CHANGED_WHILE_READING = "the source changed while it was being read"


class _Digest(Protocol):
    def update(self, data: bytes, /) -> None: ...


class SourceError(ValueError):
    """A dataset source cannot be used. The message never contains data from the file."""


# --------------------------------------------------------------------------------------------
# Opening a source from a URI (registration) or from a dataset row (worker)
# --------------------------------------------------------------------------------------------


def open_source(uri: str, settings: Any, format: Format | None = None) -> Source:
    """The source a registration names: a path relative to a local data root or a ``file://``
    URI (here), ``s3://`` (:mod:`service.data.object_store`) or ``sql://``
    (:mod:`service.data.sql_source`). ``format`` overrides the suffix-based detection of files.
    Raises :class:`SourceError` (never quoting file contents)."""
    scheme = _scheme(uri)
    if scheme == "s3":
        from service.data.object_store import open_object_store_source

        return open_object_store_source(uri, settings)
    if scheme == "sql":
        from service.data.sql_source import open_sql_source

        return open_sql_source(uri, settings)
    path = resolve_source(uri, settings.data_roots)
    return local_source(path, format or detect_format(path))


def reopen_source(format: str, location: str, settings: Any) -> Source:
    """The source of a registered dataset, from what its row stores (``source_format``,
    ``source_path``): a worker's way in. A local path is re-checked against the data roots."""
    scheme = _scheme(location)
    if scheme == "s3":
        from service.data.object_store import reopen_object_store_source

        return reopen_object_store_source(location, format, settings)
    if scheme == "sql" or format == "sql":
        from service.data.sql_source import reopen_sql_source

        return reopen_sql_source(location, settings)
    if format not in ("csv", "parquet"):
        raise SourceError(f"unknown source format {format!r}")
    path = Path(location)
    roots = _real_roots(settings.data_roots)
    if not path.is_absolute() or not _inside(path.resolve(), roots):
        raise SourceError("the dataset's location lies outside the allowed data roots")
    return local_source(path.resolve(), format)  # type: ignore[arg-type]


def local_source(path: Path, format: Format) -> FileSource:
    """A :class:`FileSource` on the local filesystem for an already resolved ``path``."""
    return FileSource(pafs.LocalFileSystem(), str(path), format, location=str(path))


def _scheme(uri: str) -> str | None:
    match = _URI_SCHEME.match(uri.strip())
    return match.group(1).lower() if match else None


# --------------------------------------------------------------------------------------------
# Resolution of local paths
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


def _is_parquet_member(name: str) -> bool:
    suffix = PurePosixPath(name).suffix.lower()
    return suffix in PARQUET_SUFFIXES and not name.startswith((".", "_"))


def parquet_members(folder: Path) -> list[Path]:
    """The data files of a Parquet folder: its top-level ``*.parquet``/``*.pq`` files, sorted.

    Hidden and ``_``-prefixed files (``_SUCCESS``, ``.crc`` …) are skipped, as Arrow does; nested
    (Hive-partitioned) folders are not read.
    """
    return sorted(p for p in folder.iterdir() if _is_parquet_member(p.name) and p.is_file())


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
    """

    def __init__(
        self,
        filesystem: pafs.FileSystem,
        path: str,
        format: Format,
        *,
        location: str | None = None,
    ) -> None:
        if format not in ("csv", "parquet"):
            raise SourceError(f"unknown file format {format!r}")
        self._fs = filesystem
        self._path = path
        self._format: Format = format
        self._location = location if location is not None else path

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
            out.append((FileSource(self._fs, file, "parquet", location=self._location), rows))
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
        with _guarded("CSV header"), self._fs.open_input_stream(self._path) as stream:
            head = b""
            while b"\n" not in head and (chunk := stream.read(_CHUNK_BYTES)):
                head += chunk
        line = head.split(b"\n", 1)[0].removesuffix(b"\r").removeprefix(b"\xef\xbb\xbf")
        try:
            text = line.decode("utf-8")
            names = next(csv.reader([text], strict=True), [])
        except (UnicodeDecodeError, csv.Error):
            raise SourceError("the CSV header line is not valid UTF-8 CSV") from None
        if not names or names == [""]:
            raise SourceError("the CSV file has no header line")
        return names

    def _csv_batches(
        self, header: list[str], wanted: list[str], rows_per_block: int
    ) -> Iterator[pa.RecordBatch]:
        indices = [header.index(c) for c in wanted]  # the first column of that name
        with _guarded("CSV file"):
            stream = self._fs.open_input_stream(self._path)
        with stream:
            chunks = _csv_chunks(stream)
            while True:
                with _guarded("CSV file"):
                    chunk = next(chunks, None)
                    if chunk is None:
                        return
                    lines = normalise_lines(chunk, len(header))
                    tables = list(iter_csv_tables(lines, len(header), indices))
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
        return files

    def _parquet_file(self, file: str, **options: Any) -> pq.ParquetFile:
        return pq.ParquetFile(self._fs.open_input_file(file), **options)

    def _parquet_batches(
        self, file: str, wanted: list[str], rows_per_block: int
    ) -> Iterator[pa.RecordBatch]:
        with _guarded("Parquet data"):
            # No pre-buffering (it loads the whole file's column chunks up front) and buffered
            # page reads: Arrow then holds about a page per column, not a row group.
            reader = self._parquet_file(file, pre_buffer=False, buffer_size=_READ_BUFFER_BYTES)
            unique = list(dict.fromkeys(wanted))
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


def _csv_chunks(stream: Any) -> Iterator[bytes]:
    """The data lines (header dropped) in chunks of about :data:`_CSV_READ_BYTES`, each cut
    after a ``\\n``; the last chunk ends with ``\\n`` too (one is added if the file lacks it)."""
    carry = b""
    header_done = False
    while True:
        block = stream.read(_CSV_READ_BYTES)
        if not block:
            break
        if not header_done:
            carry += block
            newline = carry.find(b"\n")
            if newline < 0:
                continue
            header_done, block, carry = True, carry[newline + 1 :], b""
        cut = block.rfind(b"\n")
        if cut < 0:
            carry += block  # one line longer than a read: keep gathering it
            continue
        yield carry + block[: cut + 1] if carry else block[: cut + 1]
        carry = block[cut + 1 :]
    if header_done and carry:
        yield carry + b"\n"


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
