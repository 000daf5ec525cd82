"""Dataset loading, public encoding and bounds enforcement.

- :mod:`service.data.spec` — the public schema (pydantic models of the HTTP contract);
- :mod:`service.data.source` — the :class:`Source` protocol every dataset source implements;
- :mod:`service.data.sources` — CSV/Parquet file sources (:class:`FileSource`), fingerprints;
- :mod:`service.data.opening` — the source registry (the URI scheme names the backend), and
  :mod:`service.data.backends` — every backend registered: ``open_source``/``reopen_source``;
- :mod:`service.data.local_files` — local files: resolution against the data roots;
- :mod:`service.data.cells` — the per-cell conversion rules (the "How cells become numbers" table);
- :mod:`service.data.limits` — the readers' public byte and shape limits (``DPFIT_MAX_*``);
- :mod:`service.data.encoding` — mapping rows to vectors with ‖x‖₂ ≤ 1 using declared bounds only;
- :mod:`service.data.reader` — ``read_encoded`` (workers) and ``validate_source`` (registration).

The names below are re-exported lazily, so importing ``service.data.spec`` (the API contract) does
not pull in pandas and pyarrow.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from service.data.backends import open_source, reopen_source
    from service.data.encoding import Encoder, encode_labels, normalise_value
    from service.data.local_files import detect_format, resolve_source
    from service.data.reader import ValidationReport, read_encoded, validate_source
    from service.data.source import Source
    from service.data.sources import FileSource, SourceError

_EXPORTS = {
    "Encoder": "service.data.encoding",
    "encode_labels": "service.data.encoding",
    "normalise_value": "service.data.encoding",
    "ValidationReport": "service.data.reader",
    "read_encoded": "service.data.reader",
    "validate_source": "service.data.reader",
    "Source": "service.data.source",
    "FileSource": "service.data.sources",
    "SourceError": "service.data.sources",
    "detect_format": "service.data.local_files",
    "open_source": "service.data.backends",
    "reopen_source": "service.data.backends",
    "resolve_source": "service.data.local_files",
}

__all__ = [
    "Encoder",
    "FileSource",
    "Source",
    "SourceError",
    "ValidationReport",
    "detect_format",
    "encode_labels",
    "normalise_value",
    "open_source",
    "read_encoded",
    "reopen_source",
    "resolve_source",
    "validate_source",
]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(_EXPORTS[name]), name)
