"""Dataset loading, public encoding and bounds enforcement.

- :mod:`service.data.spec` — the public schema (pydantic models of the HTTP contract);
- :mod:`service.data.sources` — resolving, fingerprinting, counting and reading CSV/Parquet sources;
- :mod:`service.data.encoding` — mapping rows to vectors with ‖x‖₂ ≤ 1 using declared bounds only.

The names below are re-exported lazily, so importing ``service.data.spec`` (the API contract) does
not pull in pandas and pyarrow.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from service.data.encoding import Encoder, encode_labels, normalise_value
    from service.data.sources import (
        SourceError,
        available_columns,
        count_rows,
        detect_format,
        fingerprint,
        read_columns,
        resolve_source,
    )

_EXPORTS = {
    "Encoder": "service.data.encoding",
    "encode_labels": "service.data.encoding",
    "normalise_value": "service.data.encoding",
    "SourceError": "service.data.sources",
    "available_columns": "service.data.sources",
    "count_rows": "service.data.sources",
    "detect_format": "service.data.sources",
    "fingerprint": "service.data.sources",
    "read_columns": "service.data.sources",
    "resolve_source": "service.data.sources",
}

__all__ = [
    "Encoder",
    "SourceError",
    "available_columns",
    "count_rows",
    "detect_format",
    "encode_labels",
    "fingerprint",
    "normalise_value",
    "read_columns",
    "resolve_source",
]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(_EXPORTS[name]), name)
