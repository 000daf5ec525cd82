"""The local backend: CSV and Parquet files under the operator's data roots.

A registration names a path relative to a data root or a ``file://`` URI; nothing outside the
allowed roots is ever opened (symlinks and ``..`` are resolved before the check, also for every
file of a folder), and roots scoped to other owners are closed without revealing what they hold
(:func:`resolve_source`). A worker reopens a registered dataset from its stored absolute path,
re-checked against its own roots (:func:`reopen_local`). The source itself is a
:class:`~service.data.sources.FileSource` reading through
:class:`~service.data.confined_files.ConfinedFiles`, which checks every open again when it
happens and follows no symlink after the check (a swap between check and read cannot reach
another root).

This backend registers with the source registry (:mod:`service.data.opening`) as the default:
every location without a registered scheme is a local one.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from service.data.confined_files import deepest_root_closed
from service.data.limits import DEFAULT_LIMITS, ReadLimits, limits_of
from service.data.opening import register_default
from service.data.sources import (
    CSV_SUFFIXES,
    PARQUET_SUFFIXES,
    FileSource,
    Format,
    LimitExceeded,
    SourceError,
    _is_parquet_member,
    exceeded,
    local_source,
)

__all__ = [
    "closed_roots",
    "detect_format",
    "open_local",
    "parquet_members",
    "reopen_local",
    "resolve_source",
]

_URI_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


def open_local(uri: str, settings: Any, format: Format | None = None) -> FileSource:
    """The local file or folder a registration names (see :func:`resolve_source`), read within
    ``settings.read_limits``; ``format`` overrides the suffix-based detection."""
    closed = closed_roots(settings)
    path = resolve_source(uri, settings.data_roots, closed, limits_of(settings))
    return local_source(
        path,
        format or detect_format(path),
        limits_of(settings),
        roots=_real_roots(settings.data_roots),
        closed=closed,
    )


def reopen_local(format: str, location: str, settings: Any) -> FileSource:
    """A registered local dataset from its stored absolute path; the path — and every member
    of a folder — is re-checked against the data roots."""
    if format not in ("csv", "parquet"):
        raise SourceError(f"unknown source format {format!r}")
    path = Path(location)
    roots = _real_roots(settings.data_roots)
    outside = SourceError("the dataset's location lies outside the allowed data roots")
    if not path.is_absolute() or not _inside(path.resolve(), roots):
        raise outside
    resolved = path.resolve()
    if resolved.is_dir():
        try:
            _check_members(resolved, str(resolved), roots, [], limits_of(settings))
        except LimitExceeded:
            raise
        except SourceError:
            raise outside from None
    return local_source(
        resolved,
        format,  # type: ignore[arg-type]
        limits_of(settings),
        roots=roots,
        closed=closed_roots(settings),
    )


def closed_roots(settings: Any) -> list[Path]:
    """The local roots scoped to owners (``settings.root_owners``, whose keys Settings holds
    resolved) that are not among ``settings.data_roots`` — closed to whoever ``settings`` was
    narrowed for (``roots.settings_for``: registration, and workers reopening an owner's
    dataset). Empty for the full settings (admins)."""
    opened = {str(Path(root).resolve()) for root in settings.data_roots}
    owners = getattr(settings, "root_owners", None) or {}
    return [Path(r) for r in owners if "://" not in r and str(Path(r)) not in opened]


# --------------------------------------------------------------------------------------------
# Resolution of local paths
# --------------------------------------------------------------------------------------------


def resolve_source(
    uri: str,
    roots: Sequence[Path | str],
    closed: Sequence[Path | str] = (),
    limits: ReadLimits = DEFAULT_LIMITS,
) -> Path:
    """The real path of ``uri`` inside one of the allowed ``roots``.

    ``uri`` is a path relative to a root (roots are tried in order; the first that holds an
    existing file or folder wins) or a ``file://`` URI with an absolute path inside a root.
    Symlinks and ``..`` are resolved before checking containment — for a folder, for every
    member too, a dangling symlink included. The result is a ``.csv``, ``.parquet`` or ``.pq``
    file, or a folder of ``*.parquet``/``*.pq`` files.

    ``closed`` are roots open to other owners only (possibly nested in an open root; the
    deepest root holding a path decides). The path is resolved one component and one symlink
    hop at a time, and as soon as a step lands in a closed root the answer is the one a path
    that does not exist gets — decided before anything inside that root is looked at, so
    whether a file, folder or link exists there is never observable. A folder member that
    resolves into a closed root refuses the folder, whether its target exists or not.
    Raises :class:`SourceError` otherwise, with a distinct message for each reason.
    """
    real_roots = _real_roots(roots)
    shut = [Path(c) for c in closed]
    text = uri.strip()
    if not text or "\x00" in text:
        raise SourceError("the dataset location is empty or invalid")
    try:
        if _is_file_uri(text):
            path = _resolve_file_uri(text, uri, real_roots, shut)
        else:
            path = _resolve_relative(text, uri, real_roots, shut)
        _check_kind(path, uri, real_roots, shut, limits)
    except SourceError:
        raise
    except PermissionError:
        raise SourceError(f"the service is not permitted to access {uri!r}") from None
    except (OSError, RuntimeError, ValueError):  # e.g. symlink loops, over-long names
        # The original message may spell out resolved paths outside the roots: drop it.
        raise SourceError(f"{uri!r} cannot be resolved") from None
    return path


class _Closed(Exception):
    """A resolution step landed in a root closed to the registrant."""


_MAX_LINK_HOPS = 40  # as Linux's path resolution


def _is_closed(path: Path, roots: list[Path], closed: list[Path]) -> bool:
    """Whether the deepest root holding ``path`` (open or closed) is a closed one."""
    return deepest_root_closed(path, roots, closed) is True


def _real_path(path: Path, roots: list[Path], closed: list[Path]) -> Path:
    """``os.path.realpath`` of the absolute ``path`` (non-strict: missing components kept),
    walked one component and one symlink hop at a time; raises :class:`_Closed` the moment a
    step lands in a closed root, before that path is inspected."""
    if not closed:
        return path.resolve()
    pending = list(reversed(path.parts[1:]))
    current = Path(path.anchor)
    hops = 0
    while pending:
        part = pending.pop()
        if part in ("", "."):
            continue
        candidate = current.parent if part == ".." else current / part
        if _is_closed(candidate, roots, closed):
            if not any(root.is_relative_to(candidate) for root in roots):
                raise _Closed
            # An ancestor of an open root nested in the closed one: a real directory (roots are
            # resolved), so it is passed through without looking at anything inside it.
            current = candidate
            continue
        if part != ".." and candidate.is_symlink():
            hops += 1
            if hops > _MAX_LINK_HOPS:
                raise OSError("too many levels of symbolic links")
            target = Path(os.readlink(candidate))
            if target.is_absolute():
                current = Path(target.anchor)
                pending.extend(reversed(target.parts[1:]))
            else:
                pending.extend(reversed(target.parts))
            continue
        current = candidate
    return current


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


def _resolve_file_uri(text: str, uri: str, roots: list[Path], closed: list[Path]) -> Path:
    parts = urlsplit(text)
    if parts.netloc not in ("", "localhost"):
        raise SourceError(f"file URI {uri!r} names a remote host; only local files are supported")
    if parts.query or parts.fragment:
        raise SourceError(f"file URI {uri!r} must not have a query or fragment")
    raw = Path(unquote(parts.path))
    if not raw.is_absolute():
        raise SourceError(f"file URI {uri!r} must hold an absolute path (file:///...)")
    try:
        path = _real_path(raw, roots, closed)
    except _Closed:
        raise SourceError(f"{uri!r} lies outside the allowed data roots") from None
    if not _inside(path, roots):
        raise SourceError(f"{uri!r} lies outside the allowed data roots")
    if not path.exists():
        raise SourceError(f"{uri!r} does not exist")
    return path


def _resolve_relative(text: str, uri: str, roots: list[Path], closed: list[Path]) -> Path:
    if Path(text).is_absolute() or text.startswith("~"):
        raise SourceError(
            f"absolute path {uri!r} is not accepted; give a path relative to a data root "
            "or a file:// URI"
        )
    for root in roots:
        try:
            candidate = _real_path(root / text, roots, closed)
        except _Closed:
            continue  # as if it did not exist there
        if not _inside(candidate, roots):
            raise SourceError(f"{uri!r} resolves outside the allowed data roots")
        if candidate.exists():
            return candidate
    raise SourceError(f"{uri!r} was not found under any data root")


def _inside(path: Path, roots: list[Path]) -> bool:
    return any(path == root or path.is_relative_to(root) for root in roots)


def _check_kind(
    path: Path, uri: str, roots: list[Path], closed: list[Path], limits: ReadLimits
) -> None:
    if path.is_dir():
        _check_members(path, uri, roots, closed, limits)
        return
    if not path.is_file():
        raise SourceError(f"{uri!r} is not a regular file or folder")
    if path.suffix.lower() not in CSV_SUFFIXES | PARQUET_SUFFIXES:
        raise SourceError(f"{uri!r} is not a .csv, .parquet or .pq file")


def _check_members(
    folder: Path, uri: str, roots: list[Path], closed: list[Path], limits: ReadLimits | None
) -> None:
    """Every entry of ``folder`` named like a data file — a dangling symlink too, so that a
    link's target existing or not makes no difference — must resolve inside an open root."""
    limits = limits or DEFAULT_LIMITS
    names = _member_names(folder, limits)
    if not names:
        raise SourceError(f"folder {uri!r} holds no .parquet files")
    outside = SourceError(f"a file in folder {uri!r} resolves outside the allowed data roots")
    for name in names:
        try:
            real = _real_path(folder / name, roots, closed)
        except _Closed:
            raise outside from None
        if not _inside(real, roots):
            raise outside
    if not any((folder / name).is_file() for name in names):
        raise SourceError(f"folder {uri!r} holds no .parquet files")


def _member_names(folder: Path, limits: ReadLimits) -> list[str]:
    """The names of ``folder``'s entries that look like data files, sorted; at most
    ``limits.max_folder_files`` of them (more: :class:`LimitExceeded`, counted while listing,
    so a huge folder is never listed whole)."""
    names: list[str] = []
    with os.scandir(folder) as entries:
        for entry in entries:
            if _is_parquet_member(entry.name):
                names.append(entry.name)
                if len(names) > limits.max_folder_files:
                    raise exceeded("max_folder_files", limits, "the number of files in the folder")
    return sorted(names)


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


register_default(open_local, reopen_local)
