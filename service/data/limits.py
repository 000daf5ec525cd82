"""Public byte and shape limits of every reader: what a row, a file or a schema may cost.

The readers' memory must not depend on what a hostile or unlucky file holds — neither on one
row's content (a 200 MB cell would otherwise decide whether a job's worker survives: a failure
bit a row controls) nor on a file's shape (a 10⁶-column header, a header without a newline, a
folder of a million files). Every limit here is public: a default below, configurable by the
operator (:class:`~service.settings.Settings`, ``DPFIT_MAX_*``), the same at registration and in
every worker. Two kinds of limit, with two behaviours:

Per row (never a failure; the row keeps its place):

- ``max_cell_bytes`` — a declared cell whose bytes (text/binary; the UTF-8 bytes of a string)
  exceed it is MISSING, whatever the source (CSV, Parquet, SQL, object). The validation report
  counts such cells per column (``oversize``).
- ``max_line_bytes`` — a CSV line (terminator excluded) longer than this is a row whose cells
  are all MISSING. It is skipped while streaming, never held in memory: the reader's peak is a
  read block plus one line of at most this length. The report counts such lines
  (``oversize_lines``).

Per source or schema (a refusal, before any row is read; registration answers 422 naming the
limit, a worker fails the job — but a registered source passed the same checks):

- ``max_columns`` — the header's width (CSV) or a Parquet file's number of leaf columns;
- ``max_line_bytes`` also bounds the CSV header line;
- ``max_folder_files`` — data files of a Parquet folder (local or ``s3://`` prefix);
- ``max_parquet_footer_bytes`` — a Parquet file's footer (its metadata) is read whole, so its
  length is checked from the file's last 8 bytes first;
- ``max_column_chunk_bytes`` — the uncompressed size of one declared column in one Parquet
  row group (Arrow decodes a page — at most that — to hand out any of its cells);
- ``max_categories`` — declared categories of one categorical feature, or classes of a label
  (the encoded dimension, and so the job's memory, grows with it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

KiB = 1 << 10
MiB = 1 << 20

#: Bytes of text cells the SQL reader fetches at a time: a block has at most
#: ``TEXT_BLOCK_BYTES // Σ max_cell_bytes`` rows over the declared text columns (cells arrive
#: cut to the limit). Parquet is bounded by ``max_column_chunk_bytes`` instead.
TEXT_BLOCK_BYTES = 64 * MiB


@dataclass(frozen=True)
class ReadLimits:
    """The readers' public limits (see the module docstring); every value is at least 1."""

    max_cell_bytes: int = 4 * KiB
    max_line_bytes: int = 1 * MiB
    max_columns: int = 4096
    max_categories: int = 10_000
    max_folder_files: int = 10_000
    max_parquet_footer_bytes: int = 16 * MiB
    max_column_chunk_bytes: int = 256 * MiB

    def __post_init__(self) -> None:
        for name, value in self.__dict__.items():
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"read limit {name} must be a positive integer")

    @staticmethod
    def from_env(env: dict[str, str]) -> ReadLimits:
        """The limits from ``DPFIT_MAX_CELL_BYTES``, ``DPFIT_MAX_LINE_BYTES``,
        ``DPFIT_MAX_COLUMNS``, ``DPFIT_MAX_CATEGORIES``, ``DPFIT_MAX_FOLDER_FILES``,
        ``DPFIT_MAX_PARQUET_FOOTER_BYTES`` and ``DPFIT_MAX_COLUMN_CHUNK_BYTES`` (unset or empty:
        the default)."""
        values: dict[str, int] = {}
        for name, variable in ENV_NAMES.items():
            raw = (env.get(variable) or "").strip()
            if raw:
                try:
                    values[name] = int(raw)
                except ValueError:
                    raise ValueError(f"{variable} must be a positive integer") from None
                if values[name] < 1:
                    raise ValueError(f"{variable} must be a positive integer")
        return ReadLimits(**values)


#: Field → environment variable.
ENV_NAMES = {
    "max_cell_bytes": "DPFIT_MAX_CELL_BYTES",
    "max_line_bytes": "DPFIT_MAX_LINE_BYTES",
    "max_columns": "DPFIT_MAX_COLUMNS",
    "max_categories": "DPFIT_MAX_CATEGORIES",
    "max_folder_files": "DPFIT_MAX_FOLDER_FILES",
    "max_parquet_footer_bytes": "DPFIT_MAX_PARQUET_FOOTER_BYTES",
    "max_column_chunk_bytes": "DPFIT_MAX_COLUMN_CHUNK_BYTES",
}

DEFAULT_LIMITS = ReadLimits()


def limits_of(holder: Any) -> ReadLimits:
    """The limits a settings object or a source carries (``read_limits`` / ``limits``), else
    the defaults."""
    for name in ("read_limits", "limits"):
        value = getattr(holder, name, None)
        if isinstance(value, ReadLimits):
            return value
    return DEFAULT_LIMITS


def text_block_rows(text_columns: int, limits: ReadLimits, cap: int) -> int:
    """Rows per block for the SQL reader holding ``text_columns`` declared text columns: at most
    ``cap``, and at most :data:`TEXT_BLOCK_BYTES` of cells of the maximal size."""
    if text_columns <= 0:
        return cap
    return max(1, min(cap, TEXT_BLOCK_BYTES // (text_columns * (limits.max_cell_bytes + 64))))
