"""The row-local reader: a source's raw cells → encoded rows and labels, or an owner's report.

:func:`read_encoded` (the worker) and :func:`validate_source` (registration) read a
:class:`~service.data.source.Source` block by block and convert every cell by the same rules
(:mod:`service.data.cells`), so what registration reports is exactly what a job will use.

Guarantees
----------
- Row-local: row ``i`` of ``X`` and ``Y`` depends on row ``i``'s cells and the declared schema
  only; the block size changes nothing (bit for bit).
- Total on content: no cell value can make either function raise. What can raise is content-
  independent — a source that cannot be opened or read (I/O), a requested column absent from the
  schema, or a source that yields a different number of rows than it counted (it changed while
  being read): :class:`~service.data.sources.SourceError` (never quoting a cell).
- Streaming: the peak is ``X`` and ``Y`` plus one block (about :data:`BLOCK_BYTES` of float64).
- Bounded cells: a declared text or binary cell longer than the source's public
  ``max_cell_bytes`` (:mod:`service.data.limits`) is MISSING — in both functions, so the report
  (``oversize``) counts exactly what a job reads as MISSING. The sources keep such cells from
  being held whole (CSV lines are bounded, SQL cells are cut by the database, Parquet column
  chunks are bounded).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numpy.typing import NDArray
from pydantic import TypeAdapter

from service.data.cells import (
    MISSING,
    OK,
    UNPARSEABLE,
    category_cells,
    is_text_type,
    normalise_value,
    numeric_cells_with_status,
)
from service.data.encoding import Encoder, encode_labels, encode_one_vs_rest
from service.data.limits import ReadLimits, limits_of
from service.data.source import Source
from service.data.sources import SourceError, exceeded
from service.data.spec import CategoricalFeature, Feature, LabelSpec, NumericFeature

#: About this many bytes of float64 per block (the peak is X, Y and one block).
BLOCK_BYTES = 16 << 20
SOURCE_CHANGED_WHILE_READING = "the source changed while it was being read"

_FEATURES: TypeAdapter[list[NumericFeature | CategoricalFeature]] = TypeAdapter(list[Feature])


def default_rows_per_block(n_columns: int, dimension: int) -> int:
    """Rows per block so that a block's float64 cells take about :data:`BLOCK_BYTES`."""
    return max(1, BLOCK_BYTES // (8 * max(n_columns, dimension, 1)))


def read_encoded(
    source: Source,
    encoder: Encoder,
    label: LabelSpec,
    label_bound: float | None,
    rows_per_block: int | None = None,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The encoded rows ``X`` (n, dimension) and labels ``Y`` ((n,), or (K, n) for a categorical
    label) of ``source``, with ``n = source.count_rows()``, encoded block by block straight
    into preallocated arrays. Raises :class:`SourceError` only for content-independent reasons
    (see the module docstring); a row count that disagrees with ``n`` is reported as
    :data:`SOURCE_CHANGED_WHILE_READING`."""
    columns = [*encoder.columns, label.column]
    limits = limits_of(source)
    if rows_per_block is None:
        rows_per_block = default_rows_per_block(len(columns), encoder.dimension)
    n = source.count_rows()
    X = np.empty((n, encoder.dimension), dtype=np.float64)
    classes = len(label.classes or [])
    Y = np.empty((classes, n) if label.type == "categorical" else n, dtype=np.float64)
    start = 0
    for batch in source.iter_batches(columns, rows_per_block):
        stop = start + batch.num_rows
        if stop > n:
            raise SourceError(SOURCE_CHANGED_WHILE_READING)
        limit = limits.max_cell_bytes
        # By position: the label column may also be a feature column (a repeated name).
        features = {
            name: bounded_cells(batch.column(i), limit)[0] for i, name in enumerate(encoder.columns)
        }
        encoder.encode_into(features, X[start:stop])
        cells = bounded_cells(batch.column(len(columns) - 1), limit)[0]
        if label.type == "categorical":
            Y[:, start:stop] = encode_one_vs_rest(cells, label)
        else:
            Y[start:stop] = encode_labels(cells, label, label_bound)
        start = stop
    if start != n:
        raise SourceError(SOURCE_CHANGED_WHILE_READING)
    return X, Y


# --------------------------------------------------------------------------------------------
# The owner's validation report
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ColumnReport:
    """Counts over one declared feature column (each cell counted once).

    ``missing``: empty or absent cells; ``unparseable``: non-empty cells that do not convert
    (both encode as MISSING); ``out_of_bounds``: numeric values clipped into [min, max];
    ``unknown_category``: categorical values outside the declared list (all-zero block);
    ``oversize``: cells longer than ``max_cell_bytes`` (MISSING; counted here only)."""

    missing: int = 0
    unparseable: int = 0
    out_of_bounds: int = 0
    unknown_category: int = 0
    oversize: int = 0


@dataclass(frozen=True)
class LabelReport:
    """Counts over the label column: ``missing`` (empty/absent), ``outside_declared`` (binary or
    categorical values that are none of the declared ones, undecodable bytes included),
    ``unparseable`` (numeric label cells that are non-empty but not a number), ``oversize``
    (cells longer than ``max_cell_bytes``: MISSING, counted here only)."""

    column: str
    missing: int = 0
    outside_declared: int = 0
    unparseable: int = 0
    oversize: int = 0


@dataclass(frozen=True)
class ValidationReport:
    """What registration tells the owner (and admins) about a source — never an analyst: these
    counts are computed from the rows without noise. ``oversize_lines``: CSV lines longer than
    ``max_line_bytes``, read as rows whose cells are all MISSING (those cells are counted as
    ``missing`` in their columns)."""

    rows: int
    features: dict[str, ColumnReport] = field(default_factory=dict)
    label: LabelReport = field(default_factory=lambda: LabelReport(column=""))
    oversize_lines: int = 0

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict: ``{"rows", "oversize_lines", "features": {name: {...}},
        "label": {...}}``."""
        return {
            "rows": self.rows,
            "oversize_lines": self.oversize_lines,
            "features": {name: asdict(report) for name, report in self.features.items()},
            "label": asdict(self.label),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ValidationReport:
        """Inverse of :meth:`to_json`."""
        return cls(
            rows=int(data["rows"]),
            oversize_lines=int(data.get("oversize_lines", 0)),
            features={
                str(name): ColumnReport(**{k: int(v) for k, v in counts.items()})
                for name, counts in dict(data.get("features", {})).items()
            },
            label=LabelReport(
                column=str(data["label"]["column"]),
                **{k: int(v) for k, v in data["label"].items() if k != "column"},
            ),
        )


class _Counts:
    def __init__(self) -> None:
        self.missing = self.unparseable = self.out_of_bounds = self.unknown = self.oversize = 0

    def add_status(self, status: NDArray[np.uint8]) -> None:
        self.missing += int(np.count_nonzero(status == MISSING))
        self.unparseable += int(np.count_nonzero(status == UNPARSEABLE))


def validate_source(
    source: Source,
    features: Sequence[NumericFeature | CategoricalFeature | Mapping[str, Any]],
    label: LabelSpec,
    rows_per_block: int | None = None,
) -> ValidationReport:
    """Parse the whole source with the worker's conversion rules and count, per declared
    column, what became MISSING, what was clipped, and what lies outside the declared sets.

    Raises :class:`SourceError` for the content-independent reasons :func:`read_encoded` does.
    """
    specs = _FEATURES.validate_python(list(features))
    limits = limits_of(source)
    check_category_limits(specs, label, limits)
    encoder = Encoder(specs, fit_intercept=True)  # validates names, bounds and categories
    columns = [*encoder.columns, label.column]
    if rows_per_block is None:
        rows_per_block = default_rows_per_block(len(columns), 1)
    lookups = {f.name: _lookup(f.categories) for f in specs if isinstance(f, CategoricalFeature)}
    label_lookup = _label_lookup(label)
    counts = {f.name: _Counts() for f in specs}
    label_counts = _Counts()
    rows = 0
    for batch in source.iter_batches(columns, rows_per_block):
        rows += batch.num_rows
        for index, spec in enumerate(specs):
            column = counts[spec.name]
            cells, oversize = bounded_cells(batch.column(index), limits.max_cell_bytes)
            column.oversize += oversize
            column.missing -= oversize  # made null here: counted as oversize, not missing
            if isinstance(spec, NumericFeature):
                values, status = numeric_cells_with_status(cells)
                column.add_status(status)
                with np.errstate(invalid="ignore"):
                    column.out_of_bounds += int(
                        np.count_nonzero((values < spec.min) | (values > spec.max))
                    )
            else:
                codes, status = category_cells(cells, lookups[spec.name])
                column.add_status(status)
                column.unknown += int(np.count_nonzero((status == OK) & (codes < 0)))
        cells, oversize = bounded_cells(batch.column(len(columns) - 1), limits.max_cell_bytes)
        label_counts.oversize += oversize
        label_counts.missing -= oversize
        if label_lookup is None:
            _, status = numeric_cells_with_status(cells)
            label_counts.add_status(status)
        else:
            codes, status = category_cells(cells, label_lookup)
            label_counts.missing += int(np.count_nonzero(status == MISSING))
            label_counts.unknown += int(np.count_nonzero((status != MISSING) & (codes < 0)))
    expected = source.count_rows()
    if rows != expected:
        raise SourceError(SOURCE_CHANGED_WHILE_READING)
    return ValidationReport(
        rows=rows,
        features={
            name: ColumnReport(c.missing, c.unparseable, c.out_of_bounds, c.unknown, c.oversize)
            for name, c in counts.items()
        },
        label=LabelReport(
            column=label.column,
            missing=label_counts.missing,
            outside_declared=label_counts.unknown,
            unparseable=label_counts.unparseable,
            oversize=label_counts.oversize,
        ),
        oversize_lines=int(getattr(source, "oversize_lines", 0)),
    )


def bounded_cells(
    array: pa.Array | pa.ChunkedArray, max_cell_bytes: int
) -> tuple[pa.Array | pa.ChunkedArray, int]:
    """``array`` with every text/binary cell longer than ``max_cell_bytes`` bytes made null
    (MISSING), and how many were. Other types pass unchanged (their cells have a fixed size).
    Cell by cell: each output depends on its own input only."""
    kind = array.type
    if pa.types.is_dictionary(kind):
        # Through the dictionary, never decoded: cells pointing at an oversize value become null.
        if not is_text_type(kind.value_type):
            return array, 0
        if isinstance(array, pa.ChunkedArray):
            array = array.unify_dictionaries().combine_chunks()
        over = pc.greater(pc.binary_length(array.dictionary), max_cell_bytes)
        hit = pc.fill_null(pc.take(over, array.indices), False)
        count = int(pc.sum(hit).as_py() or 0)
        if count == 0:
            return array, 0
        indices = pc.if_else(hit, pa.scalar(None, array.indices.type), array.indices)
        return pa.DictionaryArray.from_arrays(indices, array.dictionary), count
    if not is_text_type(kind):
        return array, 0
    over = pc.fill_null(pc.greater(pc.binary_length(array), max_cell_bytes), False)
    count = int(pc.sum(over).as_py() or 0)
    if count == 0:
        return array, 0
    return pc.if_else(over, pa.scalar(None, kind), array), count


def check_category_limits(
    features: Sequence[NumericFeature | CategoricalFeature], label: LabelSpec, limits: ReadLimits
) -> None:
    """Refuse (:class:`~service.data.sources.LimitExceeded`) a categorical feature with more
    declared categories, or a label with more classes, than ``limits.max_categories`` — the
    operator's setting, applied where a source (and so the settings) is known; the schema's own
    check (:mod:`service.data.spec`) applies the default."""
    for feature in features:
        if (
            isinstance(feature, CategoricalFeature)
            and len(feature.categories) > limits.max_categories
        ):
            raise exceeded(
                "max_categories", limits, f"the number of categories of {feature.name!r}"
            )
    if len(label.classes or []) > limits.max_categories:
        raise exceeded("max_categories", limits, "the number of the label's classes")


def _lookup(values: Sequence[Any]) -> dict[str, int]:
    keys = (normalise_value(v) for v in values)
    return {key: index for index, key in enumerate(keys) if key is not None}


def _label_lookup(label: LabelSpec) -> dict[str, int] | None:
    """Declared label values → index; ``None`` for a numeric label (no declared set)."""
    if label.type == "numeric":
        return None
    if label.type == "categorical":
        return _lookup(label.classes or [])
    return _lookup([label.positive, label.negative])
