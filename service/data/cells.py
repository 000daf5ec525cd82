"""Per-cell conversion: how one cell becomes a number, a category, or MISSING.

Every rule here is a function of *one cell* and the declared public schema: never of other rows,
of a column's inferred type, of the file's length or of an encoding guess. Arrays are converted
with Arrow compute/numpy (vectorised), but each output element depends on its own input element
only; where a block's distinct values are visited in Python (categories), each distinct value is
mapped on its own. A typed source's column type (Parquet, SQL) is part of the schema: the cell
converts by its value and that type.

How cells become numbers
------------------------

==========================  =================================================  ===================
declared type / cell        converts to                                        MISSING when
==========================  =================================================  ===================
numeric, text or bytes      the ASCII decimal ``[+-]digits[.digits][e[+-]d]``  empty/absent, not
                            (``.5``, ``5.`` too), surrounding ASCII            that grammar
                            whitespace ignored, as the nearest float64;        (``1,000``, ``0x1``,
                            ``true``/``false`` (any ASCII case) → 1 / 0        ``١٢٣``, ``yes``,
                                                                               ``n/a``, ``NaN``,
                                                                               ``inf``), overflow
                                                                               (``1e309``),
                                                                               undecodable bytes
numeric, integer            its value as float64 (nearest)                     null
numeric, decimal            its value's text, by the text rule (the nearest    null
                            float64 of the exact decimal)
numeric, float              its value (float16/32: the value of its shortest   null, NaN, ±inf
                            text, ``0.1`` for float32 0.1)
numeric, boolean            1 (true) / 0 (false)                               null
numeric, other types        —                                                  always
categorical / label value   the canonical key: ``true``/``false`` (any case)   null, empty or
                            → 1/0; integral numbers and integer text           blank text, NaN,
                            (``3``, ``3.0``, ``"003"``) → ``3``; other         undecodable bytes
                            decimals → shortest repr (``2.5``); other text
                            → itself, stripped; matched against the
                            declared categories/classes
==========================  =================================================  ===================

MISSING has one public encoding per declared type:

========================  ====================================================================
declared type             encoding of MISSING (and of what is not declared)
========================  ====================================================================
numeric feature           the midpoint of [min, max] (0 after the map onto [−1, 1])
categorical feature       the all-zero block (as a category outside the declared list)
binary label              negative (−1): every label that is not ``positive`` is negative
categorical label         no class (−1 for every one-vs-rest problem)
numeric label             0 (then clipped to the model's declared ``label_bound``)
========================  ====================================================================

A cell converts by its *logical* value, not by the physical type a writer gave its column: a
boolean and its word (``True`` / ``"true"``), an integer and its text (``3`` / ``"3"`` /
``"3.0"``), a decimal and its text (``Decimal("2.50")`` / ``"2.50"``), a float and its shortest
text (``0.1`` / ``"0.1"``) give the same number or category key under every declared type, in
every source (CSV, Parquet of any physical type — dictionary, ``large_string`` and
``decimal128`` included —, SQL typed columns). So a writer that re-types a whole column because
one row holds ``"n/a"`` (pandas turns a bool column into text) moves that row's cell only.

A finite numeric value outside the declared [min, max] is clipped into it (never MISSING). The
validation report counts, per column, cells that were MISSING because they were empty or absent
(``missing``) or because they did not convert (``unparseable``), values clipped
(``out_of_bounds``) and category values outside the declared list (``unknown_category``).
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]
CodeArray = NDArray[np.intp]
StatusArray = NDArray[np.uint8]

#: Cell status codes (for the validation report).
OK, MISSING, UNPARSEABLE = 0, 1, 2

_WS = r"[ \t\n\r\f\v]"
_NUMBER = rf"{_WS}*[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?{_WS}*"
_NUMBER_ARROW = f"^{_NUMBER}$"
_BLANK_ARROW = f"^{_WS}*$"
_NUMBER_TEXT = re.compile(_NUMBER, re.ASCII)
_NUMBER_BYTES = re.compile(_NUMBER.encode(), re.ASCII)
_INTEGER_TEXT = re.compile(r"[+-]?[0-9]+", re.ASCII)
_DECIMAL_TEXT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", re.ASCII)
#: The one spelling of a boolean written as text, for every declared type: ``true`` / ``false``
#: in any mix of ASCII upper and lower case (``True``, ``FALSE``, ``tRuE``), surrounded by
#: whitespace as the declared type's other text may be (ASCII whitespace for numbers, any for
#: category keys). Nothing else is a boolean word (``t``, ``yes``, ``1`` are what they are:
#: ``1`` is the number 1 anyway). A boolean cell and its word convert alike: 1 / 0.
BOOLEAN_WORDS: Mapping[str, int] = {"true": 1, "false": 0}
_BOOL_WORDS = {word: str(value) for word, value in BOOLEAN_WORDS.items()}
_TRUE_ARROW = f"^{_WS}*true{_WS}*$"
_FALSE_ARROW = f"^{_WS}*false{_WS}*$"


def boolean_word(text: str) -> int | None:
    """1 / 0 for a :data:`BOOLEAN_WORDS` spelling (``text`` already stripped), else ``None``."""
    return BOOLEAN_WORDS.get(text.lower()) if text.isascii() else None


def is_text_type(kind: pa.DataType) -> bool:
    """String or binary columns of any Arrow layout (large, view): cells read as text."""
    return (
        pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
        or pa.types.is_binary(kind)
        or pa.types.is_large_binary(kind)
        or pa.types.is_string_view(kind)
        or pa.types.is_binary_view(kind)
    )


def _contiguous(array: pa.Array | pa.ChunkedArray) -> pa.Array:
    """One contiguous array (a cell's value does not depend on the chunking)."""
    if isinstance(array, pa.ChunkedArray):
        if pa.types.is_dictionary(array.type) and array.num_chunks != 1:
            array = array.unify_dictionaries()
        array = array.combine_chunks() if array.num_chunks != 1 else array.chunk(0)
    return array


def _plain(array: pa.Array | pa.ChunkedArray) -> pa.Array:
    """One contiguous array, dictionary-decoded (a cell's value does not depend on either)."""
    array = _contiguous(array)
    if pa.types.is_dictionary(array.type):
        array = array.dictionary_decode()
    return array


def _positions(array: pa.DictionaryArray) -> NDArray[np.intp]:
    """A dictionary array's indices, ``len(dictionary)`` where null (one past the values)."""
    filled = pc.fill_null(array.indices, len(array.dictionary))
    return np.asarray(filled.to_numpy(zero_copy_only=False), dtype=np.intp)


# --------------------------------------------------------------------------------------------
# Numeric cells
# --------------------------------------------------------------------------------------------


def numeric_cells(array: pa.Array | pa.ChunkedArray) -> FloatArray:
    """float64 per cell, NaN where MISSING (see the module table)."""
    return numeric_cells_with_status(array)[0]


def numeric_cells_with_status(array: pa.Array | pa.ChunkedArray) -> tuple[FloatArray, StatusArray]:
    """:func:`numeric_cells` and each cell's status (OK, MISSING = empty/absent, UNPARSEABLE).

    A dictionary array is converted through its dictionary — each distinct value once, then
    looked up per cell — never decoded (a few long values repeated over many rows stay small)."""
    contiguous = _contiguous(array)
    if pa.types.is_dictionary(contiguous.type):
        values, status = numeric_cells_with_status(contiguous.dictionary)
        positions = _positions(contiguous)
        values = np.append(values, np.nan)[positions]
        return values, np.append(status, np.uint8(MISSING))[positions]
    values, missing = _numeric(contiguous, with_missing=True)
    status = np.where(np.isnan(values), UNPARSEABLE, OK).astype(np.uint8)
    status[missing] = MISSING
    return values, status


def _numeric(array: pa.Array, with_missing: bool = False) -> tuple[FloatArray, NDArray[np.bool_]]:
    kind = array.type
    nulls = _null_mask(array) if with_missing else np.zeros(0, dtype=bool)
    if is_text_type(kind):
        values = _numeric_text(array)
        if with_missing:
            blank = pc.fill_null(pc.match_substring_regex(array, _BLANK_ARROW), True)
            nulls = blank.to_numpy(zero_copy_only=False)
        return values, nulls
    if pa.types.is_decimal(kind):
        # By its text: Arrow's decimal → float cast is not always the nearest float64, the text
        # rule is — so a decimal column and the same column written as text agree bit for bit.
        values = _numeric_text(pc.cast(array, pa.string()))
    elif pa.types.is_boolean(kind) or pa.types.is_integer(kind):
        values = _to_numpy(pc.cast(array, pa.float64(), safe=False))
    elif pa.types.is_floating(kind):
        values = _to_numpy(pc.cast(array, pa.float64()))
        if with_missing:
            nulls = nulls | np.isnan(values)
        if kind.bit_width < 64:
            # A narrow float's logical value is its shortest text ("0.1" for float32 0.1, not
            # 0.10000000149…): what a writer re-typing the column as text writes.
            if kind.bit_width == 32:
                text = pc.cast(array, pa.string())
            else:  # float16: numpy's shortest repr (Arrow casts no float16 to text)
                halves = array.to_numpy(zero_copy_only=False)
                valid = np.asarray(array.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
                text = pa.array([str(h) if v else None for h, v in zip(halves, valid, strict=True)])
            values = _numeric_text(text)
    elif pa.types.is_null(kind):
        return np.full(len(array), np.nan), np.ones(len(array), dtype=bool)
    else:
        return np.full(len(array), np.nan), nulls
    values[~np.isfinite(values)] = np.nan
    return values, nulls


def _numeric_text(array: pa.Array) -> FloatArray:
    """The text rule, in three tiers that give the same value for every cell (a tier that Arrow
    refuses as a whole falls through to the next; only speed differs):

    1. Arrow's cast of the raw cells. It accepts exactly the grammar without surrounding
       whitespace, plus spellings of ±inf/NaN (which become MISSING below); anything else makes
       the whole cast fail. ``tests/unit/test_cells.py`` checks this equivalence.
    2. Cells outside the grammar set to null first, then the cast (fails on padded cells).
    3. Cells outside the grammar set to null, surrounding ASCII whitespace trimmed, then the cast.
    """
    try:
        values = _to_numpy(pc.cast(array, pa.float64()))
    except (pa.ArrowException, ValueError):
        matches = pc.fill_null(pc.match_substring_regex(array, _NUMBER_ARROW), False)
        kept = pc.if_else(matches, array, pa.scalar(None, array.type))
        try:
            values = _to_numpy(pc.cast(kept, pa.float64()))
        except (pa.ArrowException, ValueError):
            text = kept if pa.types.is_string(kept.type) else pc.cast(kept, pa.string())
            try:
                values = _to_numpy(pc.cast(pc.ascii_trim_whitespace(text), pa.float64()))
            except (pa.ArrowException, ValueError):
                # Arrow refused a cell the grammar admits: one by one (the same rule).
                values = np.array([_parse_number(t) for t in text.to_pylist()], dtype=np.float64)
    values[~np.isfinite(values)] = np.nan
    # Boolean words, among the cells that are no number (like the tiers above, the work grows
    # with the block's non-numeric cells; each cell's value depends on that cell only).
    others = np.flatnonzero(np.isnan(values))
    if others.size:
        subset = array.take(pa.array(others))
        for pattern, number in ((_TRUE_ARROW, 1.0), (_FALSE_ARROW, 0.0)):
            words = pc.match_substring_regex(subset, pattern, ignore_case=True)
            found = np.asarray(pc.fill_null(words, False).to_numpy(zero_copy_only=False), bool)
            values[others[found]] = number
    return values


def _to_numpy(array: pa.Array) -> FloatArray:
    values = np.asarray(array.to_numpy(zero_copy_only=False), dtype=np.float64)
    return values if values.flags.writeable else values.copy()


def _null_mask(array: pa.Array) -> NDArray[np.bool_]:
    if array.null_count == 0:
        return np.zeros(len(array), dtype=bool)
    return np.asarray(array.is_null().to_numpy(zero_copy_only=False), dtype=bool)


def _parse_number(text: str | None) -> float:
    if text is None:
        return math.nan
    word = boolean_word(text.strip(" \t\n\r\f\v"))
    if word is not None:
        return float(word)
    if not _NUMBER_TEXT.fullmatch(text):
        return math.nan
    value = float(text)
    return value if math.isfinite(value) else math.nan


def numeric_value(value: Any) -> tuple[float, int]:
    """One cell given as a Python value (a JSON prediction input, an object column): its float
    (NaN when MISSING) and status, by the same rules as the typed and text arrays."""
    if value is None or value is pa.NULL:
        return math.nan, MISSING
    if isinstance(value, bool | np.bool_):
        return float(value), OK
    if isinstance(value, numbers.Integral):
        try:
            result = float(value)
        except OverflowError:
            return math.nan, UNPARSEABLE
        return result, OK
    if isinstance(value, Decimal):
        if value.is_nan():
            return math.nan, MISSING
        value = str(value)  # its text, by the text rule (as a decimal column converts)
    elif isinstance(value, numbers.Real):
        result = float(value)
        if math.isnan(result):
            return math.nan, MISSING
        return (result, OK) if math.isfinite(result) else (math.nan, UNPARSEABLE)
    if isinstance(value, bytes):
        if not value.strip(b" \t\n\r\f\v"):
            return math.nan, MISSING
        if not _NUMBER_BYTES.fullmatch(value):
            word = boolean_word(value.strip(b" \t\n\r\f\v").decode("latin-1"))
            return (float(word), OK) if word is not None else (math.nan, UNPARSEABLE)
        value = value.decode("ascii")
    if isinstance(value, str):
        if not value.strip(" \t\n\r\f\v"):
            return math.nan, MISSING
        parsed = _parse_number(value)
        return parsed, OK if not math.isnan(parsed) else UNPARSEABLE
    return math.nan, UNPARSEABLE


def numeric_values(values: Sequence[Any]) -> tuple[FloatArray, StatusArray]:
    """:func:`numeric_value` of each value."""
    pairs = [numeric_value(v) for v in values]
    return (
        np.array([p[0] for p in pairs], dtype=np.float64),
        np.array([p[1] for p in pairs], dtype=np.uint8),
    )


# --------------------------------------------------------------------------------------------
# Categorical and label cells
# --------------------------------------------------------------------------------------------


def category_key(value: Any) -> tuple[str | None, int]:
    """The canonical key of one categorical/label cell and its status (``None`` when MISSING or
    UNPARSEABLE). Declared categories use the same keys (:func:`normalise_value`)."""
    if isinstance(value, bytes):
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError:
            return None, UNPARSEABLE
    try:
        key = normalise_value(value)
    except (ValueError, OverflowError):  # e.g. a Python int too long to print: not a value
        return None, UNPARSEABLE
    return key, (OK if key is not None else MISSING)


def normalise_value(value: Any) -> str | None:
    """The canonical string key of a categorical or label value; ``None`` means "missing".

    - missing (None, NaN, pd.NA, NaT, empty or blank text) → ``None``, which matches nothing;
    - booleans and the strings "true"/"false" (any case) → "1" / "0", like Python's ``True == 1``;
    - integral numbers (``3``, ``3.0``, ``"3"``, ``" 3.0 "``, ``"003"``; ASCII digits) → "3";
    - other finite reals → the shortest round-tripping repr ("2.5"); ±inf → "inf" / "-inf";
    - other strings → stripped of surrounding whitespace; bytes are decoded as UTF-8 (invalid
      sequences replaced — :func:`category_key` treats them as unparseable instead).
    """
    if value is None or value is pa.NULL or _is_pandas_missing(value):
        return None
    if isinstance(value, bool | np.bool_):
        return "1" if value else "0"
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        return _real_key(value)
    if isinstance(value, Decimal):
        # By its text, as the same column written as text converts (Decimal is no numbers.Real).
        if value.is_nan():
            return None
        if value.is_infinite():
            return "-inf" if value < 0 else "inf"
        return _string_key(str(value))
    if isinstance(value, bytes):
        value = value.decode("utf-8", errors="replace")
    if isinstance(value, str):
        return _string_key(value)
    return str(value).strip() or None


def _is_pandas_missing(value: Any) -> bool:
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - pandas is a dependency
        return False
    return value is pd.NA or value is pd.NaT


def _real_key(value: numbers.Real) -> str | None:
    as_float = float(value)
    if math.isnan(as_float):
        return None
    if math.isinf(as_float):
        return "inf" if as_float > 0 else "-inf"
    if isinstance(value, np.floating) and value.dtype.itemsize < 8:
        # A narrow float is its shortest text (float32 81993888 is "81993890.0"), as written.
        return _string_key(str(value))
    if as_float.is_integer():
        return str(int(as_float))
    # str() of a numpy float32 is its own shortest repr ("0.1"), not the widened float64 one.
    return str(value) if isinstance(value, np.floating) else repr(as_float)


def _string_key(value: str) -> str | None:
    text = value.strip()
    if not text:
        return None
    word = boolean_word(text)
    if word is not None:
        return str(word)
    if _INTEGER_TEXT.fullmatch(text):
        # What str(int(text)) gives, without int()'s limit on the number of digits.
        digits = text.lstrip("+-").lstrip("0") or "0"
        return "-" + digits if text.startswith("-") and digits != "0" else digits
    if _DECIMAL_TEXT.fullmatch(text):
        return _real_key(float(text)) or text  # never None: the pattern excludes NaN
    return text


def category_cells(
    array: pa.Array | pa.ChunkedArray, lookup: Mapping[str, int]
) -> tuple[CodeArray, StatusArray]:
    """Per cell: the index of its key in ``lookup`` (−1 when MISSING, UNPARSEABLE or not
    declared) and its status. Distinct values of the block are mapped one at a time in Python;
    each mapping depends on that value alone. A dictionary array is mapped through its
    dictionary, never decoded."""
    contiguous = _contiguous(array)
    if pa.types.is_dictionary(contiguous.type):
        codes, status = category_cells(contiguous.dictionary, lookup)
        positions = _positions(contiguous)
        return (
            np.append(codes, -1).astype(np.intp)[positions],
            np.append(status, np.uint8(MISSING))[positions],
        )
    plain = contiguous
    n = len(plain)
    if pa.types.is_null(plain.type):
        return np.full(n, -1, dtype=np.intp), np.full(n, MISSING, dtype=np.uint8)
    if pa.types.is_nested(plain.type):  # lists, structs, maps: no category is such a value
        status = np.where(_null_mask(plain), MISSING, UNPARSEABLE).astype(np.uint8)
        return np.full(n, -1, dtype=np.intp), status
    encoded = pc.dictionary_encode(plain, null_encoding="mask")
    dictionary = encoded.dictionary
    # Floats as numpy scalars: a float32's key is its own shortest text ("0.1"), as written.
    distinct = (
        dictionary.to_numpy(zero_copy_only=False)
        if pa.types.is_floating(dictionary.type)
        else dictionary.to_pylist()
    )
    keys = [category_key(v) for v in distinct]
    code_table = np.array(
        [*(lookup.get(k, -1) if k is not None else -1 for k, _ in keys), -1], dtype=np.intp
    )
    status_table = np.array([*(s for _, s in keys), MISSING], dtype=np.uint8)
    indices = encoded.indices
    positions = np.asarray(
        pc.fill_null(indices, len(keys)).to_numpy(zero_copy_only=False), dtype=np.intp
    )
    return code_table[positions], status_table[positions]


def category_values(
    values: Sequence[Any], lookup: Mapping[str, int]
) -> tuple[CodeArray, StatusArray]:
    """:func:`category_cells` for Python values (JSON inputs, object columns), one by one."""
    keys = [category_key(v) for v in values]
    codes = np.array([lookup.get(k, -1) if k is not None else -1 for k, _ in keys], dtype=np.intp)
    return codes, np.array([s for _, s in keys], dtype=np.uint8)
