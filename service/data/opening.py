"""The source registry: which backend opens a dataset location.

A location's URI scheme names its backend: ``s3://`` (:mod:`service.data.object_store`),
``sql://`` (:mod:`service.data.sql_source`, also for a stored ``sql`` format), anything else a
local path or ``file://`` URI (:mod:`service.data.local_files`, the default). Each backend
registers itself here when it is imported (:func:`register`, :func:`register_default`); this
module imports none of them, so no backend and the registry import each other.
:mod:`service.data.backends` imports every backend the service ships: open sources through it.

Errors are :class:`~service.data.sources.SourceError` with messages meant for users (never
quoting file contents).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from service.data.source import Source

__all__ = ["Backend", "open_source", "register", "register_default", "reopen_source", "scheme_of"]

_URI_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")

#: ``open(uri, settings, format)``: the source a registration names.
Opener = Callable[[str, Any, Any], "Source"]
#: ``reopen(format, location, settings)``: the source of a registered dataset (a worker's way in).
Reopener = Callable[[str, str, Any], "Source"]


@dataclass(frozen=True)
class Backend:
    open: Opener
    reopen: Reopener


_BY_SCHEME: dict[str | None, Backend] = {}
_BY_FORMAT: dict[str, Backend] = {}


def register(scheme: str, backend: Backend, *, formats: tuple[str, ...] = ()) -> None:
    """Route locations with ``scheme://`` (and stored ``formats``) to ``backend``."""
    _BY_SCHEME[scheme] = backend
    for name in formats:
        _BY_FORMAT[name] = backend


def register_default(open: Opener, reopen: Reopener) -> None:
    """The backend of every location no registered scheme claims (local files)."""
    _BY_SCHEME[None] = Backend(open, reopen)


def scheme_of(uri: str) -> str | None:
    """The lower-cased URI scheme of ``uri`` (``None`` for a plain path)."""
    match = _URI_SCHEME.match(uri.strip())
    return match.group(1).lower() if match else None


def _default() -> Backend:
    try:
        return _BY_SCHEME[None]
    except KeyError:
        raise RuntimeError("no local backend registered (import service.data.backends)") from None


def open_source(uri: str, settings: Any, format: Any = None) -> Source:
    """The source a registration names: a path relative to a local data root or a ``file://``
    URI, ``s3://`` or ``sql://``. ``format`` overrides the suffix-based detection of files.
    ``settings.data_roots`` are the roots open to the registrant; roots of
    ``settings.root_owners`` that are not among them are closed to it (see
    :func:`service.data.local_files.resolve_source`). The source reads within
    ``settings.read_limits``. Raises :class:`~service.data.sources.SourceError` (never quoting
    file contents)."""
    scheme = scheme_of(uri)
    backend = _BY_SCHEME.get(scheme) if scheme is not None else None
    return (backend or _default()).open(uri, settings, format)


def reopen_source(format: str, location: str, settings: Any) -> Source:
    """The source of a registered dataset, from what its row stores (``source_format``,
    ``source_path``): a worker's way in. A local path — and every member of a folder — is
    re-checked against the data roots."""
    scheme = scheme_of(location)
    backend = _BY_SCHEME.get(scheme) if scheme is not None else None
    backend = backend or _BY_FORMAT.get(format) or _default()
    return backend.reopen(format, location, settings)
