"""The public encoding of a released model, applied locally to the analyst's own rows.

A model's ``encoding`` (``GET /v1/models/{id}``) describes, from the dataset's public schema
only, how a raw row becomes the vector ``x`` its coefficients apply to. This module applies it
exactly as the service does (its ``service/data/encoding.py`` and ``service/data/cells.py``,
reimplemented here so that an analyst needs only this package):

- each cell converts by its own value and declared type: a numeric feature takes numbers,
  booleans (1/0) and ASCII decimal text (``" 42 "``, ``".5"``); anything else — empty text,
  ``None``, NaN, ±inf, ``"n/a"``, ``"1,000"`` — is MISSING and encodes as the midpoint;
  a categorical feature matches the value's canonical key (``true``/``false`` → 1/0, integral
  numbers and integer text → the integer, other numbers → shortest repr, text → stripped) against
  the declared categories; MISSING or undeclared values give the all-zero block;
- numbers are clipped into the declared ``[min, max]`` and mapped onto ``[−1, 1]``;
- the intercept (if fitted) is a constant 1; the row is scaled by ``1/√k`` (``k`` = raw
  features + intercept), then clipped to norm ≤ 1 (a guard against rounding only).

Rows go through :func:`to_records` first (native Python values, NaN → ``None``): the same
records the service's ``POST /v1/models/{id}/predict`` receives as JSON, so a local encoding and
the service's are computed from the same values. Equality is tested against a live service.
"""

from __future__ import annotations

import difflib
import math
import numbers
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]

ENCODING_VERSION = 1
_WS = r"[ \t\n\r\f\v]"
_NUMBER = rf"{_WS}*[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?{_WS}*"
_NUMBER_TEXT = re.compile(_NUMBER, re.ASCII)
_NUMBER_BYTES = re.compile(_NUMBER.encode(), re.ASCII)
_INTEGER_TEXT = re.compile(r"[+-]?[0-9]+", re.ASCII)
_DECIMAL_TEXT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", re.ASCII)
_BOOL_WORDS = {"true": "1", "false": "0"}
_SHRINK = 1.0 - 4.0 * np.finfo(np.float64).eps
_MAX_NORM_PASSES = 4
_ROW_BY_ROW_MAX_DIMENSION = 4096

Rows = Any  # a pandas DataFrame, a mapping of column → values, or a sequence of row mappings


# --- rows as records -------------------------------------------------------------------------


def _native(value: Any) -> Any:
    """A JSON-able Python value: numpy scalars unboxed, NaN/±inf and pandas' NA → ``None``."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is not None and type(value).__name__ in ("NAType", "NaTType"):
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return value


def to_records(rows: Rows) -> list[dict[str, Any]]:
    """``rows`` (a DataFrame, a mapping column → values, or a sequence of row mappings) as a
    list of plain dicts of JSON-able values — what is sent to, or encoded like, the service."""
    if hasattr(rows, "to_dict") and hasattr(rows, "columns"):  # a pandas DataFrame
        raw: Iterable[Mapping[str, Any]] = rows.to_dict(orient="records")
    elif isinstance(rows, Mapping):
        columns = {str(k): list(v) for k, v in rows.items()}
        lengths = {len(v) for v in columns.values()}
        if len(lengths) > 1:
            raise ValueError("columns of different lengths")
        n = lengths.pop() if lengths else 0
        raw = [{k: v[i] for k, v in columns.items()} for i in range(n)]
    else:
        raw = rows
    records = []
    for index, record in enumerate(raw):
        if not isinstance(record, Mapping):
            raise TypeError(f"row {index} is not a mapping of column → value")
        records.append({str(k): _native(v) for k, v in record.items()})
    return records


# --- one cell --------------------------------------------------------------------------------


def numeric_value(value: Any) -> float:
    """A numeric feature's cell as a float; NaN when MISSING."""
    if value is None:
        return math.nan
    if isinstance(value, bool | np.bool_):
        return float(value)
    if isinstance(value, numbers.Integral):
        try:
            return float(value)
        except OverflowError:
            return math.nan
    if isinstance(value, numbers.Real):
        result = float(value)
        return result if math.isfinite(result) else math.nan
    if isinstance(value, bytes):
        if not _NUMBER_BYTES.fullmatch(value):
            return math.nan
        value = value.decode("ascii")
    if isinstance(value, str):
        if not _NUMBER_TEXT.fullmatch(value):
            return math.nan
        result = float(value)
        return result if math.isfinite(result) else math.nan
    return math.nan


def category_key(value: Any) -> str | None:
    """The canonical key of a categorical value (``None`` when MISSING)."""
    if isinstance(value, bytes):
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError:
            return None
    return normalise_value(value)


def normalise_value(value: Any) -> str | None:
    """The canonical string key of a categorical or label value (the service's rule)."""
    if value is None or type(value).__name__ in ("NAType", "NaTType"):
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
    return str(value).strip() or None


def _real_key(value: numbers.Real) -> str | None:
    as_float = float(value)
    if math.isnan(as_float):
        return None
    if math.isinf(as_float):
        return "inf" if as_float > 0 else "-inf"
    if as_float.is_integer():
        return str(int(as_float))
    return str(value) if isinstance(value, np.floating) else repr(as_float)


def _string_key(value: str) -> str | None:
    text = value.strip()
    if not text:
        return None
    if text.lower() in _BOOL_WORDS:
        return _BOOL_WORDS[text.lower()]
    if _INTEGER_TEXT.fullmatch(text):
        return str(int(text))
    if _DECIMAL_TEXT.fullmatch(text):
        return _real_key(float(text)) or text
    return text


# --- the encoder -----------------------------------------------------------------------------


class PublicEncoding:
    """A model's public encoding (the ``encoding`` object of ``GET /v1/models/{id}``).

    :meth:`encode` maps rows to the ``(n, dimension)`` float64 matrix the coefficients apply
    to: features in declared order (a categorical feature as its one-hot block), then the
    intercept column. Raises ``ValueError`` for an encoding version this package does not know
    and for rows that lack a feature column (names only, never values).
    """

    def __init__(self, description: Mapping[str, Any]) -> None:
        version = description.get("version", ENCODING_VERSION)
        if version != ENCODING_VERSION:
            raise ValueError(f"encoding version {version!r} is newer than this dpfit package; upgrade it")
        self.description = dict(description)
        self.features: list[dict[str, Any]] = [dict(f) for f in description["features"]]
        self.fit_intercept = bool(description["fit_intercept"])
        self._lookups: dict[str, dict[str, int]] = {}
        for feature in self.features:
            if feature.get("type") == "categorical":
                lookup: dict[str, int] = {}
                for index, category in enumerate(feature["categories"]):
                    key = normalise_value(category)
                    if key is not None:
                        lookup.setdefault(key, index)
                self._lookups[feature["name"]] = lookup
        if self.dimension != int(description.get("dimension", self.dimension)):
            raise ValueError("the stored dimension does not match the features")

    @property
    def columns(self) -> list[str]:
        """The raw columns the encoding reads, in declared order."""
        return [f["name"] for f in self.features]

    @property
    def feature_names(self) -> list[str]:
        """Encoded column names, intercept excluded: ``name`` or ``name=category``."""
        names: list[str] = []
        for f in self.features:
            if f.get("type") == "categorical":
                names.extend(f"{f['name']}={c}" for c in f["categories"])
            else:
                names.append(f["name"])
        return names

    @property
    def dimension(self) -> int:
        """Columns of the encoded matrix, intercept included."""
        return len(self.feature_names) + int(self.fit_intercept)

    @property
    def scale(self) -> float:
        """``1/√k`` with ``k`` raw features (+1 for the intercept)."""
        return 1.0 / math.sqrt(len(self.features) + int(self.fit_intercept))

    def encode(self, rows: Rows) -> FloatArray:
        """The encoded matrix of ``rows`` (see the class docstring); each row's norm is ≤ 1."""
        return self.encode_records(to_records(rows))

    def encode_records(self, records: Sequence[Mapping[str, Any]]) -> FloatArray:
        """:meth:`encode` of rows already given as :func:`to_records` dicts."""
        for index, record in enumerate(records):
            missing = [c for c in self.columns if c not in record]
            if missing:
                names = ", ".join(repr(c) for c in missing)
                raise ValueError(f"record {index} is missing feature column(s): {names}")
        out = np.zeros((len(records), self.dimension), dtype=np.float64)
        position = 0
        for feature in self.features:
            values = [r[feature["name"]] for r in records]
            if feature.get("type") == "categorical":
                lookup = self._lookups[feature["name"]]
                keys = [category_key(v) for v in values]
                codes = np.array([lookup.get(k, -1) if k is not None else -1 for k in keys], dtype=np.intp)
                rows = np.flatnonzero(codes >= 0)
                out[rows, position + codes[rows]] = 1.0
                position += len(feature["categories"])
            else:
                raw = np.array([numeric_value(v) for v in values], dtype=np.float64)
                out[:, position] = _unit_interval(raw, float(feature["min"]), float(feature["max"]))
                position += 1
        if self.fit_intercept:
            out[:, position] = 1.0
        out *= self.scale
        return _clip_rows_to_unit_norm(out)

    def warnings(self, records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """The cells of ``records`` whose encoding changes their meaning — what the service's
        ``POST /v1/models/{id}/predict`` lists as ``warnings`` (its ``service/
        prediction_warnings.py``): ``{"row", "column", "kind", "message"}`` with ``kind`` one of
        ``unknown_category`` (not a declared category: scored as none of them),
        ``out_of_bounds`` (outside the declared ``[min, max]``: clipped) and ``missing`` (no
        value or one that does not convert). In row order, then declared feature order."""
        found: list[dict[str, Any]] = []
        for feature in self.features:
            name = feature["name"]
            for row, record in enumerate(records):
                value = record.get(name)
                if feature.get("type") == "categorical":
                    message = self._category_warning(feature, value)
                else:
                    message = _number_warning(feature, value)
                if message is not None:
                    kind, text = message
                    found.append({"row": row, "column": name, "kind": kind, "message": text})
        found.sort(key=lambda w: int(w["row"]))
        return found

    def _category_warning(self, feature: Mapping[str, Any], value: Any) -> tuple[str, str] | None:
        key = category_key(value)
        if key is None:
            what = "null" if value is None else repr(value)
            return "missing", f"{what}: scored as missing (none of the declared categories)"
        if key in self._lookups[feature["name"]]:
            return None
        message = f"{value!r} is not a declared category: scored as none of them"
        hint = _closest(str(value), [str(c) for c in feature["categories"]])
        if hint is not None:
            message += f" (did you mean {hint!r}?)"
        return "unknown_category", message


def _number_warning(feature: Mapping[str, Any], value: Any) -> tuple[str, str] | None:
    low, high = float(feature["min"]), float(feature["max"])
    number = numeric_value(value)
    if math.isnan(number):
        what = "null" if value is None else f"{_shown(value)} is not a number"
        return "missing", f"{what}: scored as missing (the midpoint of [{low:g}, {high:g}])"
    if number < low:
        return "out_of_bounds", f"{_shown(value)} is below the declared min {low:g}: clipped to {low:g}"
    if number > high:
        return "out_of_bounds", f"{_shown(value)} is above the declared max {high:g}: clipped to {high:g}"
    return None


def _shown(value: Any) -> str:
    """A cell as the caller sent it, as the service spells it: a boolean in JSON's words (a
    numeric column reads it as 1 or 0), anything else by its repr."""
    if isinstance(value, bool):
        return f"{'true' if value else 'false'} (read as {int(value)})"
    return repr(value)


def _closest(value: str, categories: list[str]) -> str | None:
    """The declared category ``value`` most likely meant (same text up to case and space, else
    the closest by difflib), as the service's hint."""
    folded = value.strip().casefold()
    for category in categories:
        if category.strip().casefold() == folded:
            return category
    matches = difflib.get_close_matches(value, categories, n=1, cutoff=0.75)
    return matches[0] if matches else None


def _unit_interval(raw: FloatArray, low: float, high: float) -> FloatArray:
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


def _clip_rows_to_unit_norm(matrix: FloatArray) -> FloatArray:
    for _ in range(_MAX_NORM_PASSES):
        if matrix.shape[1] <= _ROW_BY_ROW_MAX_DIMENSION:
            squared = np.einsum("ij,ij->i", matrix, matrix)
        else:
            squared = np.array([np.einsum("j,j->", row, row) for row in matrix], dtype=np.float64)
        over = squared > 1.0
        if not over.any():
            break
        matrix[over] *= (_SHRINK / np.sqrt(squared[over]))[:, None]
    return matrix
