"""The interface every dataset source implements: local files, object-store files, SQL tables.

A :class:`Source` hands out *raw cells*; turning cells into numbers is the row-local reader's job
(:mod:`service.data.reader`), never the source's. The contract that makes a row the unit of
privacy starts here:

- every data row is yielded exactly once, in a stable order that does not depend on any row's
  content (file order; for SQL tables the order documented by the SQL source);
- the cells of a row depend on that row's bytes/values only (a text source splits rows and fields
  by a rule that cannot let one row's content move a boundary of another row);
- text sources yield every requested column as ``pa.binary()`` (undecoded bytes; null where the
  row lacks the field); typed sources (Parquet, SQL) yield each column with its native Arrow type
  (Parquet string and binary columns as dictionary arrays of that type: a value repeated over
  many rows is held once; the conversion reads them through the dictionary);
- a requested column that the header or schema names more than once is refused before any row
  (which one is meant cannot be told);
- errors are :class:`~service.data.sources.SourceError` and never quote a cell.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Literal, Protocol

import pyarrow as pa

SourceFormat = Literal["csv", "parquet", "sql"]


class Source(Protocol):
    """A registered dataset's data, opened for reading."""

    @property
    def format(self) -> SourceFormat:
        """``"csv"``, ``"parquet"`` or ``"sql"``."""
        ...

    @property
    def location(self) -> str:
        """The canonical resolved location stored with the dataset (``Dataset.source_path``):
        an absolute local path, ``s3://bucket/key`` or ``sql://<connection>/<schema>.<table>``.
        Never holds a credential."""
        ...

    def columns(self) -> list[str]:
        """Column names from the header or schema, without reading any row."""
        ...

    def count_rows(self) -> int:
        """The number of data rows :meth:`iter_batches` yields (header excluded)."""
        ...

    def fingerprint(self) -> str:
        """``"sha256:<hex>"`` of the content: equal content gives an equal fingerprint wherever
        it lives (this is what "one budget per data" compares)."""
        ...

    def iter_batches(self, columns: Sequence[str], rows_per_block: int) -> Iterator[pa.RecordBatch]:
        """The raw cells of ``columns`` (in that order) as record batches of at most
        ``rows_per_block`` rows, streaming (one block in memory at a time)."""
        ...
