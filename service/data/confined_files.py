"""Local files opened only inside the data roots, checked at the moment each one is opened.

Registration resolves a location to its real path and checks it against the roots open to the
owner (:func:`service.data.local_files.resolve_source`), but every later read used to look the
path up again by name. A tenant who can write in an open root could then swap one of the
path's directories for a symlink into a root scoped to another owner between the check and a
read (a race won about once in 300–500 tries): ``/v1/datasets/validate`` answered exact counts
of the other owner's rows, a registration fingerprinted their file, and a job fitted on it.

:class:`ConfinedFiles` is the pyarrow filesystem every local
:class:`~service.data.sources.FileSource` reads through. Each open

1. takes the path's real location *now* (``os.path.realpath``: symlinks of the path itself
   and of a folder member followed) and checks it against the roots — inside an open root, and
   not inside a root closed to the reader (the deepest root holding it decides, as
   ``resolve_source`` decides);
2. opens that real path one component at a time from ``/`` with ``O_NOFOLLOW``: no symlink is
   followed after the check, so what is opened is the object at the checked path, or the open
   fails (``ELOOP``/``ENOTDIR``) — a swap between 1 and 2 can only make the read fail, never
   reach elsewhere. The last component is opened ``O_NONBLOCK`` and must be a regular file (or
   a directory where one is listed): a FIFO swapped in cannot block a reader.

pyarrow then reads the file already open (on Linux through its ``/proc/self/fd`` entry, which
names the open file, not a path; elsewhere through a Python file object). A refusal is a
:class:`~service.data.sources.SourceError` with the message of a location outside the roots,
whatever lies at the path. Reads only: every writing method raises ``PermissionError``.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs

__all__ = ["ConfinedFiles", "confined_filesystem", "deepest_root_closed", "open_no_follow"]

_PROC_FD = Path("/proc/self/fd")
#: How the directories on the way are opened: ``O_PATH`` where there is one (Linux) — a handle
#: to walk through, which like a path lookup needs only search (x) permission on a directory, so
#: a root under a ``drwx--x--x`` home still reads; ``O_RDONLY`` elsewhere.
_WALK = getattr(os, "O_PATH", os.O_RDONLY)
_NATIVE = pafs.LocalFileSystem()


class OutsideRoots(OSError):
    """A path whose real location is not inside the reader's open roots."""


def open_no_follow(real: Path, *, directory: bool = False) -> int:
    """A file descriptor of the absolute ``real`` path, opened one component at a time with
    ``O_NOFOLLOW`` (a symlink anywhere on the path: ``OSError``). The last component is opened
    non-blocking, as a directory when ``directory``."""
    if not real.is_absolute():
        raise OutsideRoots("not an absolute path")
    common = os.O_CLOEXEC | os.O_NOFOLLOW
    fd = os.open("/", _WALK | os.O_CLOEXEC | os.O_DIRECTORY)
    try:
        parts = real.parts[1:]
        for k, part in enumerate(parts):
            last = k == len(parts) - 1
            flags = common | (os.O_RDONLY | os.O_NONBLOCK if last else _WALK | os.O_DIRECTORY)
            if last and directory:
                flags |= os.O_DIRECTORY
            following = os.open(part, flags, dir_fd=fd)
            os.close(fd)
            fd = following
        return fd
    except BaseException:
        os.close(fd)
        raise


def deepest_root_closed(path: Path, roots: Sequence[Path], closed: Sequence[Path]) -> bool | None:
    """Whether the deepest root holding ``path`` is a closed one (an open and a closed root at
    the same place: open); None when no root holds it."""
    best, shut = -1, None
    for root, is_closed in [*((r, False) for r in roots), *((c, True) for c in closed)]:
        if path == root or path.is_relative_to(root):
            depth = len(root.parts)
            if depth > best or (depth == best and not is_closed):
                best, shut = depth, is_closed
    return shut


class ConfinedFiles(pafs.FileSystemHandler):
    """A read-only pyarrow filesystem handler over the local files inside ``roots`` and not
    inside ``closed`` (both real, absolute paths; module docstring)."""

    def __init__(self, roots: Sequence[Path], closed: Sequence[Path] = ()) -> None:
        self.roots = tuple(Path(r) for r in roots)
        self.closed = tuple(Path(c) for c in closed)

    def __reduce__(self) -> tuple[Any, ...]:
        return (ConfinedFiles, (self.roots, self.closed))

    # ---- the checked open ------------------------------------------------------------------

    def allows(self, real: Path) -> bool:
        """Whether the real path lies in an open root and the deepest root holding it is not
        a closed one."""
        return deepest_root_closed(real, self.roots, self.closed) is False

    def open_fd(self, path: str, *, directory: bool = False) -> int:
        real = Path(os.path.realpath(path))
        if not self.allows(real):
            raise OutsideRoots("the location lies outside the allowed data roots")
        return open_no_follow(real, directory=directory)

    def _native(self, path: str) -> pa.NativeFile:
        fd = self.open_fd(path)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OutsideRoots("not a regular file")
            if _PROC_FD.is_dir():
                return _NATIVE.open_input_file(f"{_PROC_FD}/{fd}")
            return pa.PythonFile(os.fdopen(os.dup(fd), "rb"), mode="r")
        finally:
            os.close(fd)

    # ---- pyarrow's FileSystemHandler ---------------------------------------------------------

    def get_type_name(self) -> str:
        return "dpfit-confined-local"

    def equals(self, other: Any) -> bool:
        return (
            isinstance(other, ConfinedFiles)
            and other.roots == self.roots
            and other.closed == self.closed
        )

    def normalize_path(self, path: str) -> str:
        return path

    def get_file_info(self, paths: list[str]) -> list[pafs.FileInfo]:
        return [self._info(path) for path in paths]

    def _info(self, path: str) -> pafs.FileInfo:
        try:
            fd = self.open_fd(path)
        except FileNotFoundError:
            return pafs.FileInfo(path, pafs.FileType.NotFound)
        try:
            mode = os.fstat(fd)
        finally:
            os.close(fd)
        if stat.S_ISDIR(mode.st_mode):
            return pafs.FileInfo(path, pafs.FileType.Directory)
        if stat.S_ISREG(mode.st_mode):
            return pafs.FileInfo(path, pafs.FileType.File, size=mode.st_size)
        return pafs.FileInfo(path, pafs.FileType.Unknown)

    def get_file_info_selector(self, selector: pafs.FileSelector) -> list[pafs.FileInfo]:
        """The folder's direct entries, listed through its checked descriptor; each entry's
        type is its target's (a member symlink is checked again when it is opened)."""
        base = selector.base_dir.rstrip("/") or "/"
        fd = self.open_fd(base, directory=True)
        try:
            infos = []
            with os.scandir(fd) as entries:
                for entry in entries:
                    path = f"{base}/{entry.name}"
                    if entry.is_symlink() and not self.allows(Path(os.path.realpath(path))):
                        # as resolve_source: a member reaching out refuses the whole folder,
                        # before its target is looked at
                        raise OutsideRoots("a folder member lies outside the allowed data roots")
                    try:
                        kind = os.stat(entry.name, dir_fd=fd)
                    except OSError:
                        infos.append(pafs.FileInfo(path, pafs.FileType.NotFound))
                        continue
                    if stat.S_ISREG(kind.st_mode):
                        infos.append(pafs.FileInfo(path, pafs.FileType.File, size=kind.st_size))
                    elif stat.S_ISDIR(kind.st_mode):
                        infos.append(pafs.FileInfo(path, pafs.FileType.Directory))
                    else:
                        infos.append(pafs.FileInfo(path, pafs.FileType.Unknown))
            return infos
        finally:
            os.close(fd)

    def open_input_stream(self, path: str) -> pa.NativeFile:
        return self._native(path)

    def open_input_file(self, path: str) -> pa.NativeFile:
        return self._native(path)

    def _read_only(self, *_: Any, **__: Any) -> Any:
        raise PermissionError("data sources are read-only")

    create_dir = delete_dir = delete_dir_contents = delete_root_dir_contents = _read_only
    delete_file = move = copy_file = open_output_stream = open_append_stream = _read_only


def confined_filesystem(roots: Sequence[Path], closed: Sequence[Path] = ()) -> pafs.FileSystem:
    """A pyarrow filesystem reading only inside ``roots`` and outside ``closed``."""
    return pafs.PyFileSystem(ConfinedFiles(roots, closed))
