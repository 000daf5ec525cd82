"""Public, data-independent encoding of raw rows into feature vectors with ‖x‖₂ ≤ 1.

Guarantee
---------
For *any* input — huge, negative, NaN, ±inf, wrongly typed or unknown values — every row that
:meth:`Encoder.encode` returns has Euclidean norm at most 1. The optimizers' sensitivity analyses
(docs/data-path.md#the-public-encoding) rely on exactly this bound, so it is enforced here rather
than assumed of the file.

How the bound is reached, using only the owner's declared public schema
------------------------------------------------------------------------
1. Each numeric feature is clipped into its declared ``[min, max]`` and mapped affinely onto
   ``[−1, 1]``; a MISSING cell (:mod:`service.data.cells`) becomes 0 (the midpoint).
2. Each categorical feature is one-hot encoded over its declared categories, so its block has
   at most one 1 (an unknown or missing value gives all zeros).
3. An intercept, if fitted, is one more constant column equal to 1.
4. With ``k = n_numeric + n_categorical + [fit_intercept]`` raw features, each contributes at most
   1 to ‖x‖₂², hence ‖x‖₂² ≤ k. Multiplying by ``scale = 1/√k`` gives ‖x‖₂ ≤ 1 by construction.
   ``k`` depends only on the schema, never on the rows, so the scale is public and costs no privacy.
5. Finally rows are clipped to norm 1, which only guards against floating-point rounding; how many
   rows that touches is never computed into any output.

Row-locality
------------
Cells are converted one by one by the rules of :mod:`service.data.cells` (which depend on the cell
and the declared schema only), and every step above works row by row, so each encoded row depends
on its own cells alone: encoding a source block by block gives, bit for bit, the encoding of all
rows at once. Categorical and label values are matched by a normalised string form
(:func:`normalise_value`) so that the same data read from CSV or Parquet, or sent as JSON, matches
the same categories.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from numpy.typing import NDArray
from pydantic import TypeAdapter

from service.data.cells import (
    category_cells,
    category_values,
    normalise_value,
    numeric_cells,
    numeric_values,
)
from service.data.spec import CategoricalFeature, Feature, LabelSpec, NumericFeature

FloatArray = NDArray[np.float64]
AnyFeature = NumericFeature | CategoricalFeature

ENCODING_VERSION = 1

_FEATURE_ADAPTER: TypeAdapter[AnyFeature] = TypeAdapter(Feature)
# Clipping a row to norm 1 by dividing by its norm can land one or two ulps above 1; shrinking by
# a few ulps more makes the bound hold exactly in float64.
_SHRINK = 1.0 - 4.0 * np.finfo(np.float64).eps
_MAX_NORM_PASSES = 4
# Up to numpy's iterator buffer (8192 elements) np.einsum sums each row of a C-contiguous matrix
# in one inner loop, whatever the number of rows; half of it, for margin.
_ROW_BY_ROW_MAX_DIMENSION = 4096
__all__ = [
    "Encoder",
    "clip_rows_to_unit_norm",
    "encode_labels",
    "encode_one_vs_rest",
    "normalise_value",
]

#: What the encoder reads: a DataFrame, an Arrow record batch or table, or a mapping of column
#: name → Arrow array / pandas Series / sequence of Python values.
Cells = pd.DataFrame | pa.RecordBatch | pa.Table | Mapping[str, Any]


# --------------------------------------------------------------------------------------------
# Per-column conversion (each cell by the rules of service.data.cells)
# --------------------------------------------------------------------------------------------


def _column(data: Cells, name: str) -> Any:
    if isinstance(data, pa.RecordBatch | pa.Table):
        return data.column(name)
    column = data[name]
    if isinstance(column, pd.DataFrame):
        raise ValueError(f"column {name!r} appears more than once")
    return column


def _has_column(data: Cells, name: str) -> bool:
    if isinstance(data, pa.RecordBatch | pa.Table):
        return name in data.schema.names
    if isinstance(data, pd.DataFrame):
        return name in data.columns
    return name in data


def _rows(data: Cells) -> int:
    if isinstance(data, pa.RecordBatch | pa.Table | pd.DataFrame):
        return len(data)
    lengths = {len(column) for column in data.values()}
    if len(lengths) > 1:
        raise ValueError("columns of different lengths")
    return lengths.pop() if lengths else 0


def _as_arrow(column: Any) -> pa.Array | pa.ChunkedArray | None:
    """An Arrow view of a column whose cells keep their values, or ``None`` (convert each
    Python value on its own: object columns may mix types)."""
    if isinstance(column, pa.Array | pa.ChunkedArray):
        return column
    if isinstance(column, pd.Series) and column.dtype != object:
        return pa.array(column, from_pandas=True)
    return None


def column_numbers(column: Any) -> FloatArray:
    """A column's cells as float64, NaN where MISSING (:mod:`service.data.cells`)."""
    arrow = _as_arrow(column)
    if arrow is not None:
        return numeric_cells(arrow)
    return numeric_values(list(column))[0]


def column_codes(column: Any, lookup: Mapping[str, int]) -> NDArray[np.intp]:
    """A column's cells as indices into ``lookup`` (−1 where MISSING or not declared)."""
    arrow = _as_arrow(column)
    if arrow is not None:
        return category_cells(arrow, lookup)[0]
    return category_values(list(column), lookup)[0]


def _unit_interval(raw: FloatArray, low: float, high: float) -> FloatArray:
    """Clip into [low, high] and map affinely onto [−1, 1]; NaN → 0.

    Written to avoid overflow for bounds near ±1.8e308 (where ``high − low`` is infinite).
    """
    clipped = np.clip(raw, low, high)
    width = high - low
    with np.errstate(invalid="ignore", over="ignore"):
        if math.isfinite(width):
            mapped = ((clipped - low) / width) * 2.0 - 1.0
        else:
            centre, half = low / 2.0 + high / 2.0, high / 2.0 - low / 2.0
            mapped = (clipped - centre) / half
    mapped = np.clip(mapped, -1.0, 1.0)
    return np.where(np.isnan(mapped), 0.0, mapped)


def clip_rows_to_unit_norm(matrix: FloatArray) -> FloatArray:
    """Scale every row with ‖x‖₂ > 1 down to norm ≤ 1, in place; returns ``matrix``.

    After this, ``np.einsum("ij,ij->i", m, m) <= 1`` holds exactly in float64. Assumes finite
    entries whose squares do not overflow (|x| < 1e154); :meth:`Encoder.encode` only passes
    entries in [−1, 1]. A row's result depends on that row only, wherever it sits in ``matrix``.
    """
    for _ in range(_MAX_NORM_PASSES):
        squared = _row_squares(matrix)
        over = squared > 1.0
        if not over.any():
            break
        matrix[over] *= (_SHRINK / np.sqrt(squared[over]))[:, None]
    return matrix


def _row_squares(matrix: FloatArray) -> FloatArray:
    if matrix.shape[1] <= _ROW_BY_ROW_MAX_DIMENSION:
        return np.einsum("ij,ij->i", matrix, matrix)
    # Wider rows: np.einsum over the matrix may split a row's sum where its iterator buffer
    # ends, which depends on the row's position; summing each row on its own does not.
    return np.array([np.einsum("j,j->", row, row) for row in matrix], dtype=np.float64)


# --------------------------------------------------------------------------------------------
# The encoder
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Encoder:
    """Maps raw rows in the declared schema to float64 vectors with ‖x‖₂ ≤ 1 (see module doc).

    Everything here — the column layout, the affine maps, ``scale`` — is a function of the public
    schema alone (feature list and ``fit_intercept``), never of the rows, so it can be published
    with a model and used to encode prediction requests the same way.

    ``features`` may be any sequence of spec models or of their dicts; they are validated and
    stored as a tuple of models.
    """

    features: Sequence[AnyFeature]
    fit_intercept: bool = True
    _lookups: tuple[dict[str, int], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        features = tuple(_FEATURE_ADAPTER.validate_python(f) for f in self.features)
        object.__setattr__(self, "features", features)
        object.__setattr__(self, "fit_intercept", bool(self.fit_intercept))
        _check_names(features)
        if not features and not self.fit_intercept:
            raise ValueError("an encoder needs at least one feature or an intercept")
        for feature in features:
            if isinstance(feature, NumericFeature):
                _check_finite_bounds(feature)
        lookups = tuple(_category_lookup(f) for f in self.categorical)
        object.__setattr__(self, "_lookups", lookups)

    # ---- public description ------------------------------------------------------------

    @property
    def numeric(self) -> tuple[NumericFeature, ...]:
        """Numeric features, in declared order."""
        return tuple(f for f in self.features if isinstance(f, NumericFeature))

    @property
    def categorical(self) -> tuple[CategoricalFeature, ...]:
        """Categorical features, in declared order."""
        return tuple(f for f in self.features if isinstance(f, CategoricalFeature))

    @property
    def columns(self) -> list[str]:
        """The raw source columns the encoder reads, in declared order."""
        return [f.name for f in self.features]

    @property
    def feature_names(self) -> list[str]:
        """Names of the encoded columns (intercept excluded): ``name`` or ``"name=category"``."""
        names: list[str] = []
        for feature in self.features:
            if isinstance(feature, NumericFeature):
                names.append(feature.name)
            else:
                names.extend(f"{feature.name}={c}" for c in feature.categories)
        return names

    @property
    def one_hot_columns(self) -> tuple[int, ...]:
        """Indices of the encoded columns (intercept excluded) that hold a categorical feature's
        one-hot block, in order: public, from the schema alone."""
        out: list[int] = []
        at = 0
        for feature in self.features:
            if isinstance(feature, NumericFeature):
                at += 1
                continue
            out.extend(range(at, at + len(feature.categories)))
            at += len(feature.categories)
        return tuple(out)

    @property
    def n_features(self) -> int:
        """Encoded columns excluding the intercept."""
        return sum(1 if isinstance(f, NumericFeature) else len(f.categories) for f in self.features)

    @property
    def dimension(self) -> int:
        """Columns of the encoded matrix, intercept included (the model's parameter count)."""
        return self.n_features + int(self.fit_intercept)

    @property
    def scale(self) -> float:
        """``1/√k`` with ``k`` raw features (+1 for the intercept): public, data-independent."""
        return 1.0 / math.sqrt(len(self.features) + int(self.fit_intercept))

    # ---- encoding ----------------------------------------------------------------------

    def encode(self, data: Cells) -> FloatArray:
        """Encode rows holding (at least) :attr:`columns`: a DataFrame, an Arrow record batch or
        table (e.g. a source's raw cells), or a mapping of column name → cells.

        Returns a C-contiguous float64 array of shape ``(rows, dimension)`` whose rows all have
        ‖x‖₂ ≤ 1, whatever the cells contain. Column order: features in declared order (each
        categorical as its one-hot block), then the intercept. Row ``i`` depends on row ``i``'s
        cells only. Raises ``ValueError`` naming missing columns (names only, never values).
        """
        self._check_columns(data)
        out = np.empty((_rows(data), self.dimension), dtype=np.float64)
        return self.encode_into(data, out)

    def encode_into(self, data: Cells, out: FloatArray) -> FloatArray:
        """:meth:`encode` written into ``out`` (all of it is overwritten); returns ``out``.

        ``out`` must be a C-contiguous float64 array of shape ``(rows, dimension)``, e.g. the rows
        ``X[start:stop]`` of a preallocated matrix: encoding a source block by block gives, bit
        for bit, :meth:`encode` of all its rows (every step is per row; the row norms are summed
        row by row, so a row's sum never depends on where a block starts).
        """
        self._check_columns(data)
        if (
            not isinstance(out, np.ndarray)
            or out.dtype != np.float64
            or out.shape != (_rows(data), self.dimension)
            or not out.flags.c_contiguous
            or not out.flags.writeable
        ):
            raise ValueError("out must be a writeable C-contiguous float64 (rows, dimension) array")
        out.fill(0.0)
        self._fill(data, out)
        out *= self.scale
        return clip_rows_to_unit_norm(out)

    def _check_columns(self, data: Cells) -> None:
        missing = [c for c in self.columns if not _has_column(data, c)]
        if missing:
            raise ValueError(f"missing feature column(s): {_quoted(missing)}")
        if isinstance(data, pd.DataFrame):
            repeated = [c for c in self.columns if isinstance(data[c], pd.DataFrame)]
            if repeated:
                raise ValueError(f"feature column(s) appear more than once: {_quoted(repeated)}")

    def encode_records(self, records: Sequence[Mapping[str, Any]]) -> FloatArray:
        """Encode prediction rows given as dicts in the raw schema (the analyst's own inputs),
        each value converted by the same per-cell rules as a source's cells (a JSON number is a
        typed number, a JSON string is text, ``true``/``false`` are booleans).

        Extra keys are ignored. A record lacking a feature column raises ``ValueError`` naming the
        record index and the column; a record that is not a mapping raises ``TypeError``.
        """
        for index, record in enumerate(records):
            if not isinstance(record, Mapping):
                raise TypeError(f"record {index} is not an object")
            missing = [c for c in self.columns if c not in record]
            if missing:
                raise ValueError(
                    f"record {index} is missing feature column(s): {_quoted(missing)} (send "
                    "null for a missing value: an absent key is refused so a misspelt column "
                    "is not silently read as missing)"
                )
        columns = {c: [r[c] for r in records] for c in self.columns}
        out = np.empty((len(records), self.dimension), dtype=np.float64)
        out.fill(0.0)
        self._fill(columns, out)
        out *= self.scale
        return clip_rows_to_unit_norm(out)

    def _fill(self, data: Cells, out: FloatArray) -> None:
        lookups = iter(self._lookups)
        position = 0
        for feature in self.features:
            values = _column(data, feature.name)
            if isinstance(feature, NumericFeature):
                out[:, position] = _unit_interval(column_numbers(values), feature.min, feature.max)
                position += 1
            else:
                codes = column_codes(values, next(lookups))
                rows = np.flatnonzero(codes >= 0)
                out[rows, position + codes[rows]] = 1.0
                position += len(feature.categories)
        if self.fit_intercept:
            out[:, position] = 1.0

    @staticmethod
    def encode_labels(
        data: pd.DataFrame | pd.Series, label: LabelSpec, bound: float | None = None
    ) -> FloatArray:
        """Same as the module-level :func:`encode_labels` (labels need no feature layout)."""
        return encode_labels(data, label, bound)

    # ---- persistence -------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able public description from which :meth:`from_dict` rebuilds this encoder."""
        return {
            "version": ENCODING_VERSION,
            "features": [f.model_dump(mode="json") for f in self.features],
            "fit_intercept": self.fit_intercept,
            "scale": self.scale,
            "dimension": self.dimension,
            "feature_names": self.feature_names,
        }

    @classmethod
    def from_dict(cls, description: Mapping[str, Any]) -> Encoder:
        """Rebuild an encoder from :meth:`to_dict` output.

        The derived fields (``scale``, ``dimension``, ``feature_names``) are recomputed and must
        agree with the stored ones, so a stored model is never applied to a different layout.
        """
        version = description.get("version", ENCODING_VERSION)
        if version != ENCODING_VERSION:
            raise ValueError(f"unsupported encoder version {version!r}")
        encoder = cls(tuple(description["features"]), bool(description["fit_intercept"]))
        _check_stored(encoder, description)
        return encoder


def _label_column(data: Any, label: LabelSpec) -> Any:
    if isinstance(data, pd.DataFrame | pa.RecordBatch | pa.Table | Mapping):
        if not _has_column(data, label.column):
            raise ValueError(f"missing label column: {_quoted([label.column])}")
        return _column(data, label.column)
    return data


def encode_labels(data: Any, label: LabelSpec, bound: float | None = None) -> FloatArray:
    """Binary: +1.0 where the label's key equals ``label.positive``'s, −1.0 elsewhere (MISSING
    and undeclared values included). Numeric: the cell's number (MISSING → 0), clipped to
    [−bound, bound] when a public ``bound`` is given. Per cell (:mod:`service.data.cells`).

    ``data`` is the label column (Arrow array, Series, sequence) or a frame/batch holding it.
    Nothing about which values occurred is reported.
    """
    column = _label_column(data, label)
    if label.type == "numeric":
        values = np.nan_to_num(column_numbers(column), nan=0.0)
        if bound is not None:
            values = np.clip(values, -bound, bound)
        return np.ascontiguousarray(values, dtype=np.float64)
    positive = normalise_value(label.positive)
    codes = column_codes(column, {positive: 0} if positive is not None else {})
    return np.ascontiguousarray(np.where(codes == 0, 1.0, -1.0), dtype=np.float64)


def encode_one_vs_rest(data: Any, label: LabelSpec) -> FloatArray:
    """For a categorical label: a (K, n) matrix whose row k is +1 where the cell's key is class
    k's and −1 elsewhere — the labels of the K one-vs-rest problems (MISSING: no class)."""
    column = _label_column(data, label)
    classes = label.classes or []
    lookup = {normalise_value(c): k for k, c in enumerate(classes)}
    codes = column_codes(column, {key: k for key, k in lookup.items() if key is not None})
    out = np.full((len(classes), len(codes)), -1.0)
    rows = np.flatnonzero(codes >= 0)
    out[codes[rows], rows] = 1.0
    return out


# --------------------------------------------------------------------------------------------
# Schema checks (all on public metadata)
# --------------------------------------------------------------------------------------------


def _check_names(features: Sequence[AnyFeature]) -> None:
    seen: set[str] = set()
    for feature in features:
        if feature.name in seen:
            raise ValueError(f"feature column {feature.name!r} is declared more than once")
        seen.add(feature.name)


def _check_finite_bounds(feature: NumericFeature) -> None:
    if not (math.isfinite(feature.min) and math.isfinite(feature.max)):
        raise ValueError(f"numeric feature {feature.name!r} needs finite min and max")


def _category_lookup(feature: CategoricalFeature) -> dict[str, int]:
    lookup: dict[str, int] = {}
    for index, category in enumerate(feature.categories):
        key = normalise_value(category)
        if key is None:
            raise ValueError(f"feature {feature.name!r}: category {category!r} is not a value")
        if key in lookup:
            other = feature.categories[lookup[key]]
            raise ValueError(
                f"feature {feature.name!r}: categories {other!r} and {category!r} denote the "
                "same value"
            )
        lookup[key] = index
    return lookup


def _check_stored(encoder: Encoder, description: Mapping[str, Any]) -> None:
    if "scale" in description and not math.isclose(
        float(description["scale"]), encoder.scale, rel_tol=1e-12
    ):
        raise ValueError("stored scale does not match the features")
    if "dimension" in description and int(description["dimension"]) != encoder.dimension:
        raise ValueError("stored dimension does not match the features")
    names = description.get("feature_names")
    if names is not None and list(names) != encoder.feature_names:
        raise ValueError("stored feature_names do not match the features")


def _quoted(names: Sequence[str]) -> str:
    return ", ".join(repr(n) for n in names)
