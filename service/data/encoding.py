"""Public, data-independent encoding of raw rows into feature vectors with ‖x‖₂ ≤ 1.

Guarantee
---------
For *any* input — huge, negative, NaN, ±inf, wrongly typed or unknown values — every row that
:meth:`Encoder.encode` returns has Euclidean norm at most 1. The optimizers' sensitivity analyses
(DESIGN §3) rely on exactly this bound, so it is enforced here rather than assumed of the file.

How the bound is reached, using only the owner's declared public schema
------------------------------------------------------------------------
1. Each numeric feature is clipped into its declared ``[min, max]`` and mapped affinely onto
   ``[−1, 1]``; a missing or non-numeric value becomes 0 (the midpoint).
2. Each categorical feature is one-hot encoded over its declared categories, so its block has
   at most one 1 (an unknown or missing value gives all zeros).
3. An intercept, if fitted, is one more constant column equal to 1.
4. With ``k = n_numeric + n_categorical + [fit_intercept]`` raw features, each contributes at most
   1 to ‖x‖₂², hence ‖x‖₂² ≤ k. Multiplying by ``scale = 1/√k`` gives ‖x‖₂ ≤ 1 by construction.
   ``k`` depends only on the schema, never on the rows, so the scale is public and costs no privacy.
5. Finally rows are clipped to norm 1, which only guards against floating-point rounding; how many
   rows that touches is never computed into any output.

Categorical and label values are matched by a normalised string form (:func:`normalise_value`) so
that the same data read from CSV or Parquet, or sent as JSON, matches the same categories.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray
from pydantic import TypeAdapter

from service.data.spec import CategoricalFeature, Feature, LabelSpec, NumericFeature

FloatArray = NDArray[np.float64]
AnyFeature = NumericFeature | CategoricalFeature

ENCODING_VERSION = 1

_FEATURE_ADAPTER: TypeAdapter[AnyFeature] = TypeAdapter(Feature)
_INTEGER = re.compile(r"[+-]?\d+")
_DECIMAL = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_BOOL_WORDS = {"true": "1", "false": "0"}
# Clipping a row to norm 1 by dividing by its norm can land one or two ulps above 1; shrinking by
# a few ulps more makes the bound hold exactly in float64.
_SHRINK = 1.0 - 4.0 * np.finfo(np.float64).eps
_MAX_NORM_PASSES = 4
# Up to numpy's iterator buffer (8192 elements) np.einsum sums each row of a C-contiguous matrix
# in one inner loop, whatever the number of rows; beyond it a row's sum is split where the buffer
# ends, which depends on the row's position. Half of it, for margin: row by row up to here.
_ROW_BY_ROW_MAX_DIMENSION = 4096


# --------------------------------------------------------------------------------------------
# Value normalisation (categories and labels)
# --------------------------------------------------------------------------------------------


def normalise_value(value: Any) -> str | None:
    """The canonical string key of a categorical or label value; ``None`` means "missing".

    Rules (applied to declared categories and to data alike):

    - missing (None, NaN, pd.NA, NaT) → ``None``, which matches nothing;
    - booleans and the strings "true"/"false" (any case) → "1" / "0", like Python's ``True == 1``;
    - integral numbers (``3``, ``3.0``, ``"3"``, ``" 3.0 "``, ``"003"``) → their integer digits "3";
    - other finite reals → the shortest round-tripping repr ("2.5"); ±inf → "inf" / "-inf";
    - other strings → stripped of surrounding whitespace.
    """
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, bool | np.bool_):
        return "1" if value else "0"
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        return _real_key(value)
    if isinstance(value, bytes):
        value = value.decode("utf-8", errors="replace")
    if isinstance(value, str):
        return _string_key(value)
    return str(value).strip()


def _real_key(value: numbers.Real) -> str | None:
    as_float = float(value)
    if math.isnan(as_float):
        return None
    if math.isinf(as_float):
        return "inf" if as_float > 0 else "-inf"
    if as_float.is_integer():
        return str(int(as_float))
    # str() of a numpy float32 is its own shortest repr ("0.1"), not the widened float64 one.
    return str(value) if isinstance(value, np.floating) else repr(as_float)


def _string_key(value: str) -> str:
    text = value.strip()
    if text.lower() in _BOOL_WORDS:
        return _BOOL_WORDS[text.lower()]
    if _INTEGER.fullmatch(text):
        return str(int(text))
    if _DECIMAL.fullmatch(text):
        return _real_key(float(text)) or text  # never None: the pattern excludes NaN
    return text


def _value_codes(values: pd.Series, lookup: Mapping[str, int]) -> NDArray[np.intp]:
    """Index into ``lookup`` of every value's normalised key, −1 where missing or unknown.

    Vectorised: ``pd.factorize`` hashes the column in C; Python only visits distinct values.
    """
    try:
        codes, uniques = pd.factorize(values, use_na_sentinel=True)
    except TypeError:  # unhashable cells (e.g. lists from a Parquet list column)
        codes, uniques = pd.factorize(values.map(_hashable), use_na_sentinel=True)
    per_unique = [
        lookup.get(key, -1) if (key := normalise_value(u)) is not None else -1 for u in uniques
    ]
    # A trailing −1 makes factorize's NA sentinel (code −1) map to "unknown".
    table = np.array([*per_unique, -1], dtype=np.intp)
    return table[codes]


def _hashable(value: Any) -> Hashable:
    return value if isinstance(value, Hashable) else repr(value)


# --------------------------------------------------------------------------------------------
# Numeric coercion
# --------------------------------------------------------------------------------------------


def _to_float(values: pd.Series) -> FloatArray:
    """Values as float64; anything non-numeric becomes NaN. Never raises on cell contents."""
    if values.dtype.kind in "biuf":
        return values.to_numpy(dtype=np.float64, na_value=np.nan)
    try:
        converted = pd.to_numeric(values, errors="coerce")
    except (OverflowError, TypeError, ValueError):
        return _to_float_by_unique(values)
    if converted.dtype.kind not in "biuf":
        return _to_float_by_unique(values)
    return converted.to_numpy(dtype=np.float64, na_value=np.nan)


def _to_float_by_unique(values: pd.Series) -> FloatArray:
    """Slow-path coercion (integers beyond float range, odd objects), once per distinct value."""
    try:
        codes, uniques = pd.factorize(values, use_na_sentinel=True)
    except TypeError:
        codes, uniques = pd.factorize(values.map(_hashable), use_na_sentinel=True)
    table = np.array([*(_scalar_to_float(u) for u in uniques), np.nan], dtype=np.float64)
    return table[codes]


def _scalar_to_float(value: Any) -> float:
    if isinstance(value, bool | np.bool_):
        return float(value)
    if isinstance(value, numbers.Integral):
        try:
            return float(value)
        except OverflowError:
            return math.inf if value > 0 else -math.inf
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return math.nan
    return math.nan


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
    entries in [−1, 1].
    """
    for _ in range(_MAX_NORM_PASSES):
        squared = np.einsum("ij,ij->i", matrix, matrix)
        over = squared > 1.0
        if not over.any():
            break
        matrix[over] *= (_SHRINK / np.sqrt(squared[over]))[:, None]
    return matrix


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

    def encode(self, frame: pd.DataFrame) -> FloatArray:
        """Encode a DataFrame holding (at least) :attr:`columns`.

        Returns a C-contiguous float64 array of shape ``(len(frame), dimension)`` whose rows all
        have ‖x‖₂ ≤ 1, whatever the cells contain. Column order: features in declared order
        (each categorical as its one-hot block), then the intercept.
        Raises ``ValueError`` naming missing columns (names only, never values).
        """
        self._check_frame(frame)
        out = np.empty((len(frame), self.dimension), dtype=np.float64)
        return np.ascontiguousarray(self.encode_into(frame, out))

    def encode_into(self, frame: pd.DataFrame, out: FloatArray) -> FloatArray:
        """:meth:`encode` written into ``out`` (all of it is overwritten); returns ``out``.

        ``out`` must be a C-contiguous float64 array of shape ``(len(frame), dimension)``, e.g.
        the rows ``X[start:stop]`` of a preallocated matrix, so that a large source can be
        encoded one block of rows at a time. Whether that equals encoding all rows at once, bit
        for bit, depends on the column dtypes: see :meth:`encodes_row_by_row`.
        """
        self._check_frame(frame)
        if (
            not isinstance(out, np.ndarray)
            or out.dtype != np.float64
            or out.shape != (len(frame), self.dimension)
            or not out.flags.c_contiguous
            or not out.flags.writeable
        ):
            raise ValueError("out must be a writeable C-contiguous float64 (rows, dimension) array")
        out.fill(0.0)
        self._fill(frame, out)
        out *= self.scale
        return clip_rows_to_unit_norm(out)

    def encodes_row_by_row(self, dtypes: Mapping[str, Any]) -> bool:
        """Whether every encoded row depends on that row's cells alone, for feature columns of
        the given pandas ``dtypes`` — so that encoding blocks of rows and stacking them gives
        exactly :meth:`encode` of all the rows.

        True when each numeric feature's column is numeric or boolean (object or string columns
        are coerced with whole-column type inference), each categorical feature's column is
        numeric, boolean or a pandas string dtype (in an object column, values of different
        types that compare equal could share one category key), and :attr:`dimension` is at most
        4096 (beyond, the row norms of :func:`clip_rows_to_unit_norm` may be summed differently
        in a block). A column absent from ``dtypes`` counts as not row by row.
        """
        if self.dimension > _ROW_BY_ROW_MAX_DIMENSION:
            return False
        for feature in self.features:
            dtype = dtypes.get(feature.name)
            if dtype is None:
                return False
            row_by_row = (
                _numbers_row_by_row(dtype)
                if isinstance(feature, NumericFeature)
                else _codes_row_by_row(dtype)
            )
            if not row_by_row:
                return False
        return True

    def _check_frame(self, frame: pd.DataFrame) -> None:
        missing = [c for c in self.columns if c not in frame.columns]
        if missing:
            raise ValueError(f"missing feature column(s): {_quoted(missing)}")
        repeated = [c for c in self.columns if isinstance(frame[c], pd.DataFrame)]
        if repeated:
            raise ValueError(f"feature column(s) appear more than once: {_quoted(repeated)}")

    def encode_records(self, records: Sequence[Mapping[str, Any]]) -> FloatArray:
        """Encode prediction rows given as dicts in the raw schema (the analyst's own inputs).

        Extra keys are ignored. A record lacking a feature column raises ``ValueError`` naming the
        record index and the column; a record that is not a mapping raises ``TypeError``.
        """
        for index, record in enumerate(records):
            if not isinstance(record, Mapping):
                raise TypeError(f"record {index} is not an object")
            missing = [c for c in self.columns if c not in record]
            if missing:
                raise ValueError(f"record {index} is missing feature column(s): {_quoted(missing)}")
        frame = pd.DataFrame(
            {c: pd.Series([r[c] for r in records], dtype=object) for c in self.columns},
            index=pd.RangeIndex(len(records)),
        )
        return self.encode(frame)

    def _fill(self, frame: pd.DataFrame, out: FloatArray) -> None:
        lookups = iter(self._lookups)
        position = 0
        for feature in self.features:
            values = frame[feature.name]
            if isinstance(feature, NumericFeature):
                out[:, position] = _unit_interval(_to_float(values), feature.min, feature.max)
                position += 1
            else:
                codes = _value_codes(values, next(lookups))
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


def encode_labels(
    data: pd.DataFrame | pd.Series, label: LabelSpec, bound: float | None = None
) -> FloatArray:
    """Binary: +1.0 where the label equals ``label.positive`` (normalised matching), −1.0
    elsewhere. Numeric: the value as a float (missing/non-numeric → 0), clipped to
    [−bound, bound] when a public ``bound`` is given.

    Missing or unexpected values count as negative, as :class:`LabelSpec` declares; nothing about
    which values occurred is reported. ``data`` is the label column or a frame holding it.
    """
    if isinstance(data, pd.DataFrame):
        if label.column not in data.columns:
            raise ValueError(f"missing label column: {_quoted([label.column])}")
        data = data[label.column]
    if label.type == "numeric":
        values = np.nan_to_num(_to_float(data), nan=0.0)
        if bound is not None:
            values = np.clip(values, -bound, bound)
        return np.ascontiguousarray(values, dtype=np.float64)
    positive = normalise_value(label.positive)
    codes = _value_codes(data, {positive: 0} if positive is not None else {})
    return np.ascontiguousarray(np.where(codes == 0, 1.0, -1.0), dtype=np.float64)


def labels_row_by_row(label: LabelSpec, dtype: Any) -> bool:
    """Whether :func:`encode_labels` (binary, numeric) and :func:`encode_one_vs_rest`
    (categorical) give every row a value that depends on that row's label alone, for a label
    column of pandas ``dtype`` — so that labels can be encoded block by block. Numeric labels
    need a numeric or boolean column, binary and categorical ones a numeric, boolean or pandas
    string column (the rules of :meth:`Encoder.encodes_row_by_row`)."""
    return _numbers_row_by_row(dtype) if label.type == "numeric" else _codes_row_by_row(dtype)


def _numbers_row_by_row(dtype: Any) -> bool:
    # _to_float converts these with to_numpy, value by value; other dtypes go through
    # pd.to_numeric, whose result type (int, float, object) depends on the whole column.
    return getattr(dtype, "kind", None) in ("b", "i", "u", "f")


def _codes_row_by_row(dtype: Any) -> bool:
    # _value_codes factorizes: equal values get one code, and for these dtypes equal values
    # always have the same normalised key (0.0 and −0.0 both give "0"); missing values get −1.
    return _numbers_row_by_row(dtype) or isinstance(dtype, pd.StringDtype)


def encode_one_vs_rest(data: pd.DataFrame | pd.Series, label: LabelSpec) -> FloatArray:
    """For a categorical label: a (K, n) matrix whose row k is +1 where the value is class k
    (normalised matching) and −1 elsewhere — the labels of the K one-vs-rest problems."""
    if isinstance(data, pd.DataFrame):
        data = data[label.column]
    classes = label.classes or []
    lookup = {normalise_value(c): k for k, c in enumerate(classes)}
    codes = _value_codes(data, {key: k for key, k in lookup.items() if key is not None})
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
