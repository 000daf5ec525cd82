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
from pathlib import Path
from typing import Literal, Protocol
from urllib.parse import unquote, urlsplit

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
    present = set(available_columns(path, fmt))
    missing = [c for c in wanted if c not in present]
    if missing:
        names = ", ".join(repr(c) for c in missing)
        raise SourceError(f"column(s) not found in the source: {names}")
    frame = _read_csv(path, wanted) if fmt == "csv" else _read_parquet(path, wanted)
    return frame[wanted].reset_index(drop=True)


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
