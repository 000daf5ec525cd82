"""Object-store files as dataset sources: ``s3://bucket/key`` under ``s3://`` data roots.

The operator lists ``s3://bucket/prefix`` roots in ``DPFIT_DATA_ROOTS``
(:attr:`Settings.object_store_roots`); an owner registers a CSV file, a Parquet file or a Parquet
folder (a key prefix) under one of them. The bytes are read by
:class:`~service.data.sources.FileSource` (the same reader, row rule and fingerprint as local
files) over fsspec's ``s3fs`` wrapped as a read-only ``pyarrow`` filesystem.

- **Where the store is.** ``s3fs`` with no explicit settings: the endpoint comes from the
  standard ``AWS_ENDPOINT_URL`` (unset: AWS itself), the credentials and region from the standard
  AWS environment (``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``, ``AWS_DEFAULT_REGION``,
  profiles, instance roles …). Nothing of it is stored with a dataset or shown.
- **Confinement.** A URI must be ``s3://bucket/key`` with no ``.``/``..``/empty segment, no
  ``?``/``#``/glob character and no control character, and its bucket and key must lie at or
  under a configured root, compared segment by segment (root ``s3://b/data`` admits
  ``s3://b/data/x.csv``, not ``s3://b/database.csv`` nor another bucket). Object stores resolve
  no ``..`` and no links, so the checked key is the key read; a folder's members are listed
  under its own prefix only. Workers re-check a stored location against the roots.
- **Folders.** A key prefix holding objects is a Parquet folder: its direct ``*.parquet``/
  ``*.pq`` members, sorted by name, hidden and ``_``-prefixed names skipped (as for local
  folders); nested prefixes are not read.
- **Fingerprint.** As for local files: the SHA-256 of a file's bytes; for a folder, in sorted
  order, each member's length-prefixed name, its size and its bytes.
- **Errors** are :class:`~service.data.sources.SourceError`; messages quote only the URI the
  owner typed. Every failure of the S3 client (including non-``OSError`` ones such as a refused
  connection or missing credentials) is turned into a generic ``OSError`` inside the
  filesystem, so the reader's guards replace it and no endpoint, credential or server message
  travels.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.fs as pafs

from service.data.limits import limits_of
from service.data.opening import Backend, register
from service.data.sources import (
    CSV_SUFFIXES,
    PARQUET_SUFFIXES,
    FileSource,
    Format,
    SourceError,
)
from service.settings import Settings

SCHEME = "s3://"
# Bytes fetched per S3 request while reading (s3fs' default, 50 MiB, would be held per file).
_BLOCK_BYTES = 8 << 20
_FORBIDDEN = re.compile(r"[\x00-\x1f\x7f?#*\[\]\\]")

T = TypeVar("T")


@dataclass(frozen=True)
class ObjectRef:
    """A validated ``s3://bucket/key`` (``key`` without leading or trailing ``/``)."""

    bucket: str
    key: str

    @property
    def uri(self) -> str:
        return f"{SCHEME}{self.bucket}/{self.key}" if self.key else f"{SCHEME}{self.bucket}"

    @property
    def path(self) -> str:
        """The filesystem path: ``bucket/key``."""
        return f"{self.bucket}/{self.key}" if self.key else self.bucket

    def within(self, root: ObjectRef) -> bool:
        if self.bucket != root.bucket:
            return False
        if not root.key:
            return True
        return self.key == root.key or self.key.startswith(root.key + "/")


def parse_s3_uri(uri: str) -> ObjectRef:
    """``s3://bucket/key`` checked for form; raises :class:`SourceError` quoting only ``uri``.

    One trailing ``/`` is allowed (a folder); ``.``, ``..`` and empty segments are not.
    """
    text = uri.strip()
    if not text.lower().startswith(SCHEME):
        raise SourceError(f"{uri!r} is not an s3://bucket/key URI")
    if _FORBIDDEN.search(text):
        raise SourceError(
            f"{uri!r} holds a character that is not allowed in a dataset location "
            "(control characters, '?', '#', '*', '[', ']', '\\')"
        )
    bucket, _, key = text[len(SCHEME) :].partition("/")
    key = key.removesuffix("/")
    segments = key.split("/") if key else []
    if not bucket or any(s in ("", ".", "..") for s in segments):
        raise SourceError(
            f"{uri!r} must be s3://bucket/key with no empty, '.' or '..' path segments"
        )
    return ObjectRef(bucket=bucket, key=key)


def _roots(settings: Settings) -> list[ObjectRef]:
    roots = [parse_s3_uri(root) for root in settings.object_store_roots]
    if not roots:
        raise SourceError("no s3:// data roots are configured; object-store datasets are off")
    return roots


def _confined(ref: ObjectRef, settings: Settings, uri: str) -> None:
    """Refuse ``ref`` outside the open roots, or in a root closed to the registrant: a root of
    ``settings.root_owners`` not among ``settings.object_store_roots`` (the deepest root holding
    the key decides), with the same answer, before the store is asked anything. The URI is
    parsed first, so ``S3://`` and ``s3://`` get the same answer."""
    outside = SourceError(f"{uri!r} lies outside the allowed data roots")
    roots = _roots(settings)
    if not any(ref.within(root) for root in roots):
        raise outside
    opened = set(settings.object_store_roots)
    closed = [
        parse_s3_uri(root)
        for root in (getattr(settings, "root_owners", None) or {})
        if root.lower().startswith(SCHEME) and root not in opened
    ]
    holding = [(root, False) for root in roots if ref.within(root)]
    holding += [(root, True) for root in closed if ref.within(root)]
    deepest = max(len(root.key.split("/")) if root.key else 0 for root, _ in holding)
    if any(shut and (len(r.key.split("/")) if r.key else 0) == deepest for r, shut in holding):
        raise outside


def open_object_store_source(uri: str, settings: Settings) -> FileSource:
    """The object an owner registers: a ``.csv``, ``.parquet``/``.pq`` object or a prefix holding
    ``*.parquet`` objects, under a configured ``s3://`` root. Raises :class:`SourceError`."""
    ref = parse_s3_uri(uri)
    _confined(ref, settings, uri)
    filesystem = s3_filesystem()
    kind = _call(lambda: filesystem.get_file_info(ref.path).type, uri)
    if kind == pafs.FileType.Directory:
        fmt: Format = "parquet"
    elif kind == pafs.FileType.File:
        fmt = _file_format(ref, uri)
    else:
        raise SourceError(f"{uri!r} was not found")
    source = FileSource(filesystem, ref.path, fmt, location=ref.uri, limits=limits_of(settings))
    if kind == pafs.FileType.Directory:
        source.columns()  # raises SourceError if the prefix holds no .parquet members
    return source


def reopen_object_store_source(location: str, format: str, settings: Settings) -> FileSource:
    """The source of a registered dataset from its stored location (on a worker): re-checked
    against the roots configured there."""
    ref = parse_s3_uri(location)
    _confined(ref, settings, location)
    if format not in ("csv", "parquet"):
        raise SourceError(f"unknown source format {format!r}")
    return FileSource(
        s3_filesystem(),
        ref.path,
        format,  # type: ignore[arg-type]
        location=ref.uri,
        limits=limits_of(settings),
    )


def _file_format(ref: ObjectRef, uri: str) -> Format:
    suffix = PurePosixPath(ref.key).suffix.lower()
    if suffix in CSV_SUFFIXES:
        return "csv"
    if suffix in PARQUET_SUFFIXES:
        return "parquet"
    raise SourceError(f"{uri!r} is not a .csv, .parquet or .pq object")


def _call(action: Callable[[], T], uri: str) -> T:
    try:
        return action()
    except SourceError:
        raise
    except PermissionError:
        raise SourceError(f"the service is not permitted to access {uri!r}") from None
    except (OSError, ValueError, pa.ArrowException):
        raise SourceError(f"{uri!r} could not be reached in the object store") from None


# --------------------------------------------------------------------------------------------
# The filesystem: s3fs, read-only, with every client failure an OSError
# --------------------------------------------------------------------------------------------


def s3_filesystem() -> pafs.FileSystem:
    """A read-only ``pyarrow`` filesystem over ``s3fs``, configured by the AWS environment.

    Listings are never cached (a folder listed again after a job sees a new member, so the
    fingerprint check notices it).
    """
    import s3fs

    filesystem = s3fs.S3FileSystem(
        use_listings_cache=False,
        skip_instance_cache=True,
        default_block_size=_BLOCK_BYTES,
    )
    return pafs.PyFileSystem(_ReadOnlyHandler(filesystem))


class _ReadOnlyHandler(pafs.FSSpecHandler):
    """``FSSpecHandler`` that only reads, and raises ``OSError`` (with a generic message, the
    original dropped) for every failure of the client, also while a file is read."""

    def get_file_info(self, paths: Any) -> Any:
        return _os_errors(lambda: super(_ReadOnlyHandler, self).get_file_info(paths))

    def get_file_info_selector(self, selector: Any) -> Any:
        return _os_errors(lambda: super(_ReadOnlyHandler, self).get_file_info_selector(selector))

    def open_input_stream(self, path: str) -> Any:
        return self._open(path)

    def open_input_file(self, path: str) -> Any:
        return self._open(path)

    def _open(self, path: str) -> Any:
        handle = _os_errors(lambda: self.fs.open(path, mode="rb"))
        return pa.PythonFile(_GuardedFile(handle), mode="r")

    def _refuse(self, *_: Any) -> Any:
        raise PermissionError("dataset sources are read-only")

    create_dir = delete_dir = delete_dir_contents = delete_root_dir_contents = _refuse
    delete_file = move = copy_file = open_output_stream = open_append_stream = _refuse


class _GuardedFile:
    """An fsspec file whose method failures are generic ``OSError``s."""

    def __init__(self, raw: Any) -> None:
        self._raw = raw

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._raw, name)
        if not callable(value):
            return value

        def call(*args: Any, **kwargs: Any) -> Any:
            return _os_errors(lambda: value(*args, **kwargs))

        return call


def _os_errors(action: Callable[[], T]) -> T:
    try:
        return action()
    except FileNotFoundError:
        raise FileNotFoundError("object not found") from None
    except PermissionError:
        raise PermissionError("access denied by the object store") from None
    except Exception:  # noqa: BLE001 - botocore/aiohttp errors are not OSErrors; none may escape
        raise OSError("the object store request failed") from None


register(
    "s3",
    Backend(
        open=lambda uri, settings, format: open_object_store_source(uri, settings),
        reopen=lambda format, location, settings: reopen_object_store_source(
            location, format, settings
        ),
    ),
)
