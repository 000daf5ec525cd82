"""The public encoding compiled to PostgreSQL: the rows of a table encoded *inside* the database.

For the in-database execution mode (paper 004, Wu et al. 2017, §5: Bismarck's in-RDBMS
analytics) the worker never reads a row: it asks the database for d-sized aggregates over the
encoded rows. This module turns the declared schema — the same :class:`~service.data.encoding.
Encoder` and :class:`~service.data.spec.LabelSpec` the reader uses — into SQLAlchemy Core
expressions over one table, so that the database computes, for every row, exactly the vector the
reader would have produced.

What is compiled (each rule is the reader's, :mod:`service.data.cells`; column types are the
SQL source's families, :mod:`service.data.sql_source`):

========================  =======================================================================
cell                      SQL
========================  =======================================================================
numeric, integer          ``CAST(c AS float8)`` (nearest; NULL → MISSING)
numeric, float            NULL, NaN, ±Infinity → MISSING; else the value (a ``real``: by its
                          shortest text, ``CAST(CAST(c AS text) AS float8)``, like the reader)
numeric, numeric(p, s)    NaN → MISSING; |c| ≥ 2¹⁰²⁴ − 2⁹⁷⁰ (rounds to ±inf) → MISSING;
                          |c| ≤ 2⁻¹⁰⁷⁵ (rounds to ±0) → 0; else ``CAST(c AS float8)`` (PostgreSQL
                          converts through the shortest decimal text and ``strtod``: correctly
                          rounded, like Python's ``float(Decimal)``)
numeric, boolean          1 / 0
numeric, text             the ASCII grammar ``[+-]digits[.digits][e[+-]d]`` (surrounding ASCII
                          whitespace allowed) as a regular expression; a match with at most 40
                          characters and a two-digit exponent is cast directly (its magnitude is
                          within 10^±140, so ``float8in`` neither overflows nor underflows);
                          any other match goes through :data:`PARSE_FUNCTION`, a PL/pgSQL
                          function created in ``pg_temp`` that normalises the digits to
                          ``0.<digits>e<E>`` and decides overflow (→ ∞, MISSING) and underflow
                          (→ ±0) exactly before casting
categorical / label key   booleans → "1"/"0"; integers → their digits; floats and decimals by
                          value (a declared key matches the one float whose key it is); text:
                          stripped of Python's ``str.isspace`` characters, "true"/"false" in
                          any ASCII case → "1"/"0", integer text by its digits (``+003`` → "3"),
                          decimal text by its float value, other text as itself
========================  =======================================================================

Then, as :class:`Encoder.encode_into`: numeric values are clipped into [min, max] and mapped onto
[−1, 1] with the same floating-point operations in the same order (MISSING → 0), one-hot blocks
over the declared categories, the intercept 1, every entry times the public ``1/√k``, and a row
whose squared norm exceeds 1 (rounding only) scaled by ``(1 − 4ε)/‖x‖``. Every expression reads
one row's own cells: the encoding is row-local by construction, like the reader's.

The label, as :func:`~service.data.encoding.encode_labels` / ``encode_one_vs_rest``: binary,
+1 where the cell's key is ``positive``'s and −1 elsewhere; categorical, the index k of the
class whose key the cell has (the reader's lookup, :func:`class_lookup`) and −1 for none
(MISSING, undeclared, over-long text) — the class index the multinomial loss takes, from which
one-vs-rest's ±1 labels of class k are ``y = k``; numeric, the number (MISSING → 0) clipped to
the public bound.

Agreement with the reader: IEEE double arithmetic in PostgreSQL and numpy is the same for
``+ − × ÷`` and comparisons, and the casts are correctly rounded on both sides, so an encoded
entry agrees bit for bit; the row norm is summed in another order, so a row at the norm-1
boundary can be scaled by a factor one ulp apart (tests/live/test_in_database.py compares the two
on adversarial tables).

Identifiers are quoted by SQLAlchemy (``sa.table``/``sa.column``) and every value — bounds,
categories, patterns — is a bound parameter. Binary and other column types are refused for this
mode (the reader decodes them in Python; there is no row-local SQL equivalent worth trusting).
"""

from __future__ import annotations

import decimal
import math
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from service.data.cells import normalise_value
from service.data.encoding import Encoder
from service.data.spec import CategoricalFeature, LabelSpec, NumericFeature

__all__ = [
    "PARSE_FUNCTION",
    "PARSE_FUNCTION_SQL",
    "SESSION_SETTINGS",
    "EncodedColumns",
    "InDatabaseUnsupported",
    "check_span",
    "class_index",
    "class_lookup",
    "compile_rows",
    "norm_clipped",
    "squared_norm",
]

FLOAT8 = postgresql.DOUBLE_PRECISION()

#: Smallest magnitude that rounds to ±inf in float64 (the midpoint between DBL_MAX and 2¹⁰²⁴;
#: a tie rounds to even, i.e. to 2¹⁰²⁴).
_OVERFLOW = str(2**1024 - 2**970)
#: Largest magnitude that rounds to ±0 (half the smallest subnormal, 2⁻¹⁰⁷⁵; a tie rounds to 0).
with decimal.localcontext() as _exact:
    _exact.prec = 2000
    _UNDERFLOW = str(decimal.Decimal(math.ldexp(1.0, -1074)) / 2)
_ASCII_WS = " \t\n\r\f\v"
#: Python's ``str.strip()`` removes exactly the characters whose ``isspace()`` is true.
_PYTHON_WS = "".join(chr(i) for i in range(sys.maxunicode + 1) if chr(i).isspace())
_NUMBER_RE = r"^[ \t\n\r\f\v]*[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?[ \t\n\r\f\v]*$"
_DECIMAL_RE = r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$"
_INTEGER_RE = r"^[+-]?[0-9]+$"
_DECIMAL_KEY = re.compile(_DECIMAL_RE[1:-1], re.ASCII)
# A matched number this short with an exponent of at most two digits lies within 10^±140.
_FAST_RE = r"^[^eE]{1,40}$|^[^eE]{1,36}[eE][+-]?0*[0-9]{0,2}$"

#: The PL/pgSQL function (created in ``pg_temp`` for the session that encodes) for the rare
#: numbers the direct cast cannot take: it returns the float64 nearest to ``text`` (which must
#: match the number grammar, ASCII whitespace already stripped), ±Infinity on overflow and ±0
#: on underflow, exactly as Python's ``float(text)``.
PARSE_FUNCTION = "pg_temp.dpfit_parse_number"
PARSE_FUNCTION_SQL = f"""
CREATE OR REPLACE FUNCTION {PARSE_FUNCTION}(t text) RETURNS double precision
LANGUAGE plpgsql IMMUTABLE STRICT AS $fn$
DECLARE
    parts text[];
    sign text;
    digits text;
    point integer;
    exponent numeric;
    magnitude numeric;
    normal text;
BEGIN
    parts := regexp_match(t, '^([+-]?)([0-9]*)\\.?([0-9]*)(?:[eE]([+-]?[0-9]+))?$');
    sign := CASE WHEN parts[1] = '-' THEN '-' ELSE '' END;
    digits := parts[2] || parts[3];
    point := length(parts[2]);
    exponent := coalesce(parts[4]::numeric, 0);
    -- leading zeros do not count; the value is 0.<digits> × 10^(point + exponent)
    point := point - (length(digits) - length(ltrim(digits, '0')));
    digits := rtrim(ltrim(digits, '0'), '0');
    IF length(digits) > 800 THEN
        -- 800 significant digits and a sticky 1 round like all of them (float64 needs < 770)
        digits := left(digits, 800) || '1';
    END IF;
    IF digits = '' THEN
        RETURN (sign || '0')::double precision;
    END IF;
    exponent := exponent + point;
    IF exponent > 310 THEN
        RETURN (sign || 'Infinity')::double precision;
    END IF;
    IF exponent < -330 THEN
        RETURN (sign || '0')::double precision;
    END IF;
    normal := '0.' || digits || 'e' || exponent::text;
    magnitude := normal::numeric;
    IF magnitude >= {_OVERFLOW}::numeric THEN
        RETURN (sign || 'Infinity')::double precision;
    END IF;
    IF magnitude <= {_UNDERFLOW}::numeric THEN
        RETURN (sign || '0')::double precision;
    END IF;
    RETURN (sign || normal)::double precision;
END
$fn$;
"""


class InDatabaseUnsupported(ValueError):
    """The declared schema (or a column type) has no in-database encoding; ``field`` names the
    part of the registration at fault. The message quotes names, never values."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class EncodedColumns:
    """The encoded row as SQL expressions over one table: ``x[j]`` for the encoder's columns
    (intercept last) and ``y`` (±1 for a binary label, the class index k, or −1 for none, for a
    categorical one, the clipped number for a numeric one)."""

    x: tuple[sa.ColumnElement[Any], ...]
    y: sa.ColumnElement[Any]


# --------------------------------------------------------------------------------------------
# Numbers
# --------------------------------------------------------------------------------------------


def _regex(value: sa.ColumnElement[Any], pattern: str) -> sa.ColumnElement[bool]:
    return value.op("~")(sa.literal(pattern, sa.Text))


def _text_number(column: sa.ColumnElement[Any]) -> sa.ColumnElement[Any]:
    """float8 of a text cell by the number grammar (±inf kept), 1 / 0 for the boolean words
    (``true``/``false`` in any ASCII case, ASCII whitespace around), NULL otherwise."""
    stripped = sa.func.btrim(column, sa.literal(_ASCII_WS, sa.Text))
    fast = sa.cast(stripped, FLOAT8)
    slow = sa.func.pg_temp.dpfit_parse_number(stripped)  # PARSE_FUNCTION
    return sa.case(
        (
            _regex(column, _NUMBER_RE),
            sa.case((_regex(stripped, _FAST_RE), fast), else_=slow),
        ),
        (_ascii_word(stripped, "true"), sa.literal(1.0, FLOAT8)),
        (_ascii_word(stripped, "false"), sa.literal(0.0, FLOAT8)),
        else_=sa.null(),
    )


def _ascii_word(stripped: sa.ColumnElement[Any], word: str) -> sa.ColumnElement[bool]:
    """``stripped`` is ``word`` in any ASCII case (``service.data.cells.BOOLEAN_WORDS``)."""
    return sa.and_(_regex(stripped, "^[A-Za-z]+$"), sa.func.lower(stripped) == word)


def _decimal_number(column: sa.ColumnElement[Any]) -> sa.ColumnElement[Any]:
    """float8 of a numeric(p, s) cell, correctly rounded, ±inf / ±0 decided before the cast
    (PostgreSQL raises on overflow and on underflow to zero); NULL for NaN."""
    magnitude = sa.func.abs(column)
    signed_inf = sa.case(
        (column > 0, sa.literal("Infinity", sa.Text)), else_=sa.literal("-Infinity", sa.Text)
    )
    signed_zero = sa.case((column < 0, sa.literal("-0", sa.Text)), else_=sa.literal("0", sa.Text))
    return sa.case(
        (sa.cast(column, sa.Text) == "NaN", sa.null()),
        (
            magnitude >= sa.cast(sa.literal(_OVERFLOW, sa.Text), sa.Numeric),
            sa.cast(signed_inf, FLOAT8),
        ),
        (
            magnitude <= sa.cast(sa.literal(_UNDERFLOW, sa.Text), sa.Numeric),
            sa.cast(signed_zero, FLOAT8),
        ),
        else_=sa.cast(column, FLOAT8),
    )


#: Settings every in-database session makes before it encodes a row: ``real`` cells convert by
#: their shortest text (:func:`_float_value`), which ``extra_float_digits`` ≤ 0 would round.
SESSION_SETTINGS = ("SET extra_float_digits = 1",)


def _float_value(column: sa.ColumnElement[Any], family: str) -> sa.ColumnElement[Any]:
    """The cell's value as float8 with ±inf kept and NULL for MISSING/NaN (numbers only).

    A ``real`` (family ``float4``) converts by its shortest text, as the SQL reader and a
    Parquet float32 do (:func:`service.data.cells.numeric_cells_with_status`: 0.1 stays 0.1,
    not the widened 0.10000000149…): ``float4out`` prints the shortest text that reads back to
    the same float32 whenever ``extra_float_digits`` > 0 (PostgreSQL ≥ 12; every in-database
    session sets it to 1, :data:`SESSION_SETTINGS`), and ``float8in`` reads that text correctly
    rounded — Python's ``float(repr(float32))``."""
    if family == "int":
        return sa.cast(column, FLOAT8)
    if family in ("float", "float4"):
        source = sa.cast(column, sa.Text) if family == "float4" else column
        as_double = sa.cast(source, FLOAT8)
        return sa.case(
            (as_double == sa.cast(sa.literal("NaN", sa.Text), FLOAT8), sa.null()), else_=as_double
        )
    if family == "decimal":
        return _decimal_number(column)
    if family == "bool":
        return sa.case((column.is_(sa.true()), 1.0), (column.is_(sa.false()), 0.0), else_=sa.null())
    if family == "text":
        return _text_number(column)
    raise InDatabaseUnsupported("execution", "unsupported column type")


def _finite(value: sa.ColumnElement[Any]) -> sa.ColumnElement[Any]:
    """NULL for ±inf (a numeric cell that is not finite is MISSING)."""
    inf = sa.cast(sa.literal("Infinity", sa.Text), FLOAT8)
    return sa.case((sa.func.abs(value) == inf, sa.null()), else_=value)


#: Declared spans the in-database mode refuses: PostgreSQL raises on a product or quotient that
#: underflows to zero (numpy rounds it), so every operation below is kept away from underflow,
#: which needs max − min finite and not below 2⁻⁹⁰⁰ (absurd spans: ±1e308 bounds, 1e-271 wide).
SMALLEST_SPAN = 2.0**-900
_TINY_RATIO = 2.0**-60


def check_span(feature: NumericFeature) -> None:
    """Refuse a declared [min, max] whose span overflows or is below :data:`SMALLEST_SPAN`."""
    width = feature.max - feature.min
    if not (math.isfinite(width) and width >= SMALLEST_SPAN):
        raise InDatabaseUnsupported(
            "features",
            f"in-database execution needs max − min finite and at least 2^-900 for "
            f"{feature.name!r}",
        )


def _unit_interval(value: sa.ColumnElement[Any], low: float, high: float) -> sa.ColumnElement[Any]:
    """:func:`service.data.encoding._unit_interval` in SQL (finite span): clip, then
    ``((c − low)/width)·2 − 1``, then clip, NULL → 0 — the same operations in the same order.

    One guard keeps PostgreSQL from raising on an underflowing quotient: when
    ``c − low < width·2⁻⁶⁰`` the quotient t is below 2⁻⁶⁰, so numpy's ``t·2 − 1`` rounds to
    exactly −1 (the doubles next to −1 are 2⁻⁵³ apart); the guard returns that −1. Otherwise t ≥
    2⁻⁶⁰ and no operation underflows (|t·2 − 1| is 0 or ≥ 2⁻⁵³).
    """
    lo, hi = sa.literal(low, FLOAT8), sa.literal(high, FLOAT8)
    width = sa.literal(high - low, FLOAT8)
    # GREATEST/LEAST skip NULLs: MISSING is decided first (the outer CASE), not left to them.
    clipped = sa.func.least(sa.func.greatest(value, lo), hi)
    offset = clipped - lo
    mapped = sa.case(
        (offset < width * sa.literal(_TINY_RATIO, FLOAT8), sa.literal(-1.0, FLOAT8)),
        else_=(offset / width) * sa.literal(2.0, FLOAT8) - sa.literal(1.0, FLOAT8),
    )
    bounded = sa.func.least(
        sa.func.greatest(mapped, sa.literal(-1.0, FLOAT8)), sa.literal(1.0, FLOAT8)
    )
    return sa.case((value.is_(sa.null()), sa.literal(0.0, FLOAT8)), else_=bounded)


# --------------------------------------------------------------------------------------------
# Keys (categorical features and labels)
# --------------------------------------------------------------------------------------------


def _key_float(key: str) -> float | None:
    """The float64 whose canonical key is ``key``, or None when no float has that key."""
    if key in ("inf", "-inf"):
        return math.inf if key == "inf" else -math.inf
    try:
        value = float(key)
    except ValueError:
        return None
    if not math.isfinite(value):
        return None
    return value if normalise_value(value) == key else None


def _integer_pattern(key: str) -> str | None:
    """The integer texts whose key is ``key`` (a key of digits), as a regular expression."""
    negative = key.startswith("-")
    digits = key.lstrip("-")
    if not digits.isascii() or not digits.isdigit():
        return None
    if digits == "0":
        return r"^[+-]?0+$"
    return (r"^-0*" if negative else r"^\+?0*") + digits + "$"


def _key_matches(column: sa.ColumnElement[Any], family: str, key: str) -> sa.ColumnElement[bool]:
    """True exactly where the cell's canonical key (:func:`service.data.cells.category_key`)
    equals ``key``."""
    value = _key_float(key)
    if family == "bool":
        if key == "1":
            return column.is_(sa.true())
        if key == "0":
            return column.is_(sa.false())
        return sa.false()
    if family == "int":
        pattern = _integer_pattern(key)
        if pattern is None or not (-(2**63) <= int(key) < 2**63):
            return sa.false()
        return column == sa.literal(int(key), sa.BigInteger)
    if family in ("float", "float4", "decimal"):
        if value is None:
            return sa.false()
        return _float_value(column, family) == sa.literal(value, FLOAT8)
    if family != "text":
        raise InDatabaseUnsupported("execution", "unsupported column type")
    stripped = sa.func.btrim(column, sa.literal(_PYTHON_WS, sa.Text))
    conditions: list[sa.ColumnElement[bool]] = []
    word = {"1": "true", "0": "false"}.get(key)
    if word is not None:
        conditions.append(sa.and_(_regex(stripped, "^[A-Za-z]+$"), sa.func.lower(stripped) == word))
    pattern = _integer_pattern(key)
    if pattern is not None:
        conditions.append(_regex(stripped, pattern))
    if value is not None:
        decimal_only = sa.and_(
            _regex(stripped, _DECIMAL_RE), sa.not_(_regex(stripped, _INTEGER_RE))
        )
        conditions.append(
            sa.and_(decimal_only, _text_number(stripped) == sa.literal(value, FLOAT8))
        )
    plain = key.lower() not in ("true", "false") and pattern is None and _key_is_plain(key)
    if plain:
        conditions.append(stripped == sa.literal(key, sa.Text))
    if not conditions:
        return sa.false()
    return sa.func.coalesce(sa.or_(*conditions), sa.false())


def _key_is_plain(key: str) -> bool:
    """A key that only a text cell equal to it (stripped) can have: not of the integer or
    decimal grammar (those cells get numeric keys) — "inf" is plain too (its text is no
    decimal)."""
    return not _DECIMAL_KEY.fullmatch(key) and key == key.strip()


# --------------------------------------------------------------------------------------------
# The row
# --------------------------------------------------------------------------------------------


def compile_rows(
    table: sa.TableClause | sa.Subquery,
    families: dict[str, str],
    encoder: Encoder,
    label: LabelSpec,
    label_bound: float | None = None,
    *,
    max_cell_bytes: int | None = None,
) -> EncodedColumns:
    """The encoded row of ``table`` as SQL expressions (module docstring). ``families`` maps a
    column to its SQL family (:meth:`service.data.sql_source.SqlSource.families`); a text
    cell longer than ``max_cell_bytes`` bytes is MISSING, as in the reader
    (:func:`service.data.reader.bounded_cells`). Raises :class:`InDatabaseUnsupported` for a
    column type or label the mode does not compile."""
    raw: list[sa.ColumnElement[Any]] = []
    for feature in encoder.features:
        family = families.get(feature.name)
        if family not in _FAMILIES:
            raise InDatabaseUnsupported(
                "execution",
                f"in-database execution needs typed or text columns; {feature.name!r} is not",
            )
        column = _bounded(table.c[feature.name], family, max_cell_bytes)
        if isinstance(feature, NumericFeature):
            check_span(feature)
            value = _finite(_float_value(column, family))
            raw.append(_unit_interval(value, feature.min, feature.max))
        else:
            assert isinstance(feature, CategoricalFeature)
            for category in feature.categories:
                key = normalise_value(category)
                hit = _key_matches(column, family, key) if key is not None else sa.false()
                raw.append(sa.case((hit, sa.literal(1.0, FLOAT8)), else_=sa.literal(0.0, FLOAT8)))
    if encoder.fit_intercept:
        raw.append(sa.literal(1.0, FLOAT8))
    scale = sa.literal(encoder.scale, FLOAT8)
    scaled = [entry * scale for entry in raw]
    y = _label(table, families, label, label_bound, max_cell_bytes)
    return EncodedColumns(x=tuple(scaled), y=y)


_FAMILIES = ("int", "float", "float4", "decimal", "bool", "text")


def _bounded(
    column: sa.ColumnElement[Any], family: str, max_cell_bytes: int | None
) -> sa.ColumnElement[Any]:
    """A text cell longer than ``max_cell_bytes`` bytes as NULL (MISSING); other cells as they
    are (their size is fixed)."""
    if family != "text" or max_cell_bytes is None:
        return column
    too_long = sa.func.octet_length(column) > sa.literal(int(max_cell_bytes), sa.Integer)
    return sa.case((too_long, sa.null()), else_=column)


def _label(
    table: sa.TableClause | sa.Subquery,
    families: dict[str, str],
    label: LabelSpec,
    bound: float | None,
    max_cell_bytes: int | None,
) -> sa.ColumnElement[Any]:
    family = families.get(label.column)
    if family not in _FAMILIES:
        raise InDatabaseUnsupported(
            "label.column", "in-database execution needs a typed or text label column"
        )
    column = _bounded(table.c[label.column], family, max_cell_bytes)
    if label.type == "numeric":
        value = sa.func.coalesce(_finite(_float_value(column, family)), sa.literal(0.0, FLOAT8))
        if bound is None:
            return value
        b = sa.literal(bound, FLOAT8)
        return sa.func.least(sa.func.greatest(value, -b), b)
    if label.type == "categorical":
        return class_index(column, family, label)
    if label.type != "binary":
        raise InDatabaseUnsupported(
            "label.type", "in-database execution supports binary, categorical and numeric labels"
        )
    key = normalise_value(label.positive)
    hit = _key_matches(column, family, key) if key is not None else sa.false()
    return sa.case((hit, sa.literal(1.0, FLOAT8)), else_=sa.literal(-1.0, FLOAT8))


def class_lookup(label: LabelSpec) -> dict[str, int]:
    """The reader's map from a class's canonical key to its index
    (:func:`service.data.encoding.encode_one_vs_rest`): declared classes in order, a class
    without a key (blank) left out, and of two classes with one key the later one kept."""
    lookup: dict[str, int] = {}
    for index, value in enumerate(label.classes or []):
        key = normalise_value(value)
        if key is not None:
            lookup[key] = index
    return lookup


def class_index(
    column: sa.ColumnElement[Any], family: str, label: LabelSpec
) -> sa.ColumnElement[Any]:
    """A categorical label cell's class index as float8: k where the cell's canonical key is
    class k's (:func:`class_lookup`), −1 where it is none (MISSING, unparseable, undeclared) —
    what :func:`service.models.multinomial.class_indices` makes of the reader's one-vs-rest
    matrix. The keys are distinct and a cell has one key, so at most one branch matches."""
    branches = [
        (_key_matches(column, family, key), sa.literal(float(index), FLOAT8))
        for key, index in class_lookup(label).items()
    ]
    if not branches:
        return sa.literal(-1.0, FLOAT8)
    return sa.case(*branches, else_=sa.literal(-1.0, FLOAT8))


def squared_norm(x: Sequence[sa.ColumnElement[Any]]) -> sa.ColumnElement[Any]:
    """Σ x_j² of one row of expressions, summed left to right."""
    return sum((entry * entry for entry in x), sa.literal(0.0, FLOAT8))


def norm_clipped(
    x: Sequence[sa.ColumnElement[Any]], squared: sa.ColumnElement[Any]
) -> list[sa.ColumnElement[Any]]:
    """:func:`service.data.encoding.clip_rows_to_unit_norm` on one row of expressions whose
    :func:`squared_norm` is ``squared`` (one pass: the entries are products of values in
    [−1, 1] and 1/√k, so one shrink by (1 − 4ε)/‖x‖ brings a row that rounding put above 1 back
    below it). ``x`` and ``squared`` should be columns of a fenced subquery (``OFFSET 0``):
    as expressions the planner would inline them d times into every entry."""
    shrink = sa.literal(1.0 - 4.0 * sys.float_info.epsilon, FLOAT8)
    root = sa.func.sqrt(squared, type_=FLOAT8)
    factor = sa.case(
        (squared > sa.literal(1.0, FLOAT8), shrink / root), else_=sa.literal(1.0, FLOAT8)
    )
    return [entry * factor for entry in x]
