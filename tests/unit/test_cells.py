"""The per-cell conversion rules (service.data.cells) and the owner's validation report."""

from __future__ import annotations

import math
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.data.cells import (
    BOOLEAN_WORDS,
    MISSING,
    OK,
    UNPARSEABLE,
    category_cells,
    category_key,
    numeric_cells,
    numeric_cells_with_status,
    numeric_value,
)
from service.data.encoding import Encoder, normalise_value
from service.data.reader import ValidationReport, read_encoded, validate_source
from service.data.sources import local_source
from service.data.spec import CategoricalFeature, LabelSpec, NumericFeature

NUMBER_ALPHABET = "0123456789.eE+- \t\x0bxinfaINFAd_١５\r"


def _bits(values: np.ndarray) -> list[int]:
    return values.astype(np.float64).view(np.uint64).tolist()


@settings(max_examples=400, deadline=None)
@given(st.lists(st.text(NUMBER_ALPHABET, max_size=12) | st.binary(max_size=4), max_size=12))
def test_text_tiers_agree_with_the_scalar_rule_cell_by_cell(cells: list[str | bytes]) -> None:
    """Whichever Arrow tier converts a block (the plain cast accepts only clean cells), every
    cell gets the value the one-cell rule gives it, alone or among any other cells."""
    raw = [c.encode("utf-8") if isinstance(c, str) else c for c in cells]
    together = numeric_cells(pa.array(raw, pa.binary()))
    alone = [numeric_cells(pa.array([c], pa.binary()))[0] for c in raw]
    scalar = [numeric_value(c)[0] for c in raw]
    assert _bits(together) == _bits(np.array(alone)) == _bits(np.array(scalar))
    strings = [c.decode("utf-8") for c in raw if _decodes(c)]
    as_text = numeric_cells(pa.array(strings, pa.string()))
    assert _bits(as_text) == _bits(np.array([numeric_value(s)[0] for s in strings]))


def _decodes(cell: bytes) -> bool:
    try:
        cell.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


@pytest.mark.parametrize(
    ("cell", "value", "status"),
    [
        (b"0.5", 0.5, OK),
        (b" 5 ", 5.0, OK),
        (b"\t-3e2\t", -300.0, OK),
        (b"+.5", 0.5, OK),
        (b"5.", 5.0, OK),
        (b"007", 7.0, OK),
        (b"1e-400", 0.0, OK),
        (b"", math.nan, MISSING),
        (b"   ", math.nan, MISSING),
        (None, math.nan, MISSING),
        (b"1,000", math.nan, UNPARSEABLE),
        (b"1e309", math.nan, UNPARSEABLE),
        (b"-inf", math.nan, UNPARSEABLE),
        (b"NaN", math.nan, UNPARSEABLE),
        (b"True", 1.0, OK),  # a boolean word, as a boolean cell converts
        (b" FALSE\t", 0.0, OK),
        (b"tRuE", 1.0, OK),
        (b"t", math.nan, UNPARSEABLE),
        (b"yes", math.nan, UNPARSEABLE),
        (b"true true", math.nan, UNPARSEABLE),
        (b"n/a", math.nan, UNPARSEABLE),
        (b"0x10", math.nan, UNPARSEABLE),
        ("١٢٣".encode(), math.nan, UNPARSEABLE),
        (b"\xff\xfe", math.nan, UNPARSEABLE),
        (b'"5"', math.nan, UNPARSEABLE),  # a quote that is part of the cell's text
    ],
)
def test_numeric_text_rule_table(cell: bytes | None, value: float, status: int) -> None:
    values, statuses = numeric_cells_with_status(pa.array([cell, b"1"], pa.binary()))
    assert _bits(values[:1]) == _bits(np.array([value]))
    assert statuses.tolist() == [status, OK]
    assert numeric_value(cell)[1] == status


def test_typed_numeric_cells() -> None:
    cases = [
        (pa.array([True, False, None]), [1.0, 0.0, math.nan], [OK, OK, MISSING]),
        (pa.array([2**63 - 1, -5, None], pa.int64()), [2.0**63, -5.0, math.nan], [OK, OK, MISSING]),
        (
            pa.array([1.5, math.inf, math.nan, None]),
            [1.5, math.nan, math.nan, math.nan],
            [OK, UNPARSEABLE, MISSING, MISSING],
        ),
        (pa.array([[1], None], pa.list_(pa.int64())), [math.nan] * 2, [UNPARSEABLE, MISSING]),
        (pa.array(["a", "b"]).dictionary_encode(), [math.nan] * 2, [UNPARSEABLE] * 2),
        (pa.array([" 2 ", "x"]).dictionary_encode(), [2.0, math.nan], [OK, UNPARSEABLE]),
    ]
    for array, values, statuses in cases:
        got, status = numeric_cells_with_status(array)
        assert _bits(got) == _bits(np.array(values))
        assert status.tolist() == statuses


def test_category_keys() -> None:
    lookup = {"3": 0, "1": 1, "a b": 2, "2.5": 3}
    array = pa.array([b"003", b" a b ", b"TRUE", b"2.50", b"", b"\xff", b"z", None], pa.binary())
    codes, status = category_cells(array, lookup)
    assert codes.tolist() == [0, 2, 1, 3, -1, -1, -1, -1]
    assert status.tolist() == [OK, OK, OK, OK, MISSING, UNPARSEABLE, OK, MISSING]
    assert category_key(3.0) == ("3", OK)
    assert category_key(True) == ("1", OK)
    assert category_key("١") == ("١", OK)  # non-ASCII digits are text, not the number 1
    assert category_key(b"-" + b"0" * 4 + b"9" * 5000) == ("-" + "9" * 5000, OK)  # no int() limit
    assert category_key(b"+007") == ("7", OK) and category_key(b"-000") == ("0", OK)
    typed = category_cells(pa.array([3, None, 1], pa.int8()), lookup)[0]
    assert typed.tolist() == [0, -1, 1]
    nested = category_cells(pa.array([[1], None, None], pa.list_(pa.int8())), lookup)
    assert nested[0].tolist() == [-1, -1, -1]
    assert nested[1].tolist() == [UNPARSEABLE, MISSING, MISSING]
    structs = category_cells(pa.array([{"a": 1}]), lookup)
    assert structs[0].tolist() == [-1] and structs[1].tolist() == [UNPARSEABLE]


def test_prediction_records_follow_the_same_rules() -> None:
    encoder = Encoder(
        (
            NumericFeature(name="x", min=0, max=1),
            CategoricalFeature(name="c", categories=["a", 1]),
        ),
        fit_intercept=False,
    )
    rows = encoder.encode_records(
        [{"x": True, "c": 1}, {"x": "True", "c": "1.0"}, {"x": " 1 ", "c": None}]
    )
    scale = encoder.scale
    np.testing.assert_allclose(
        rows / scale, [[1.0, 0.0, 1.0], [1.0, 0.0, 1.0], [1.0, 0.0, 0.0]], atol=1e-12
    )


def test_validation_report_counts(tmp_path: Path) -> None:
    path = tmp_path / "data.csv"
    path.write_text(
        "age,colour,y\n"
        "30,red,yes\n"
        ",blue,no\n"  # age missing
        "n/a,purple,maybe\n"  # age unparseable, colour unknown, label outside
        "200,,\n"  # age out of bounds, colour missing, label missing
        '"unbalanced,red,yes\n'  # unparseable line: every cell missing
        "-5,red,Yes\n"  # out of bounds; "Yes" is not "yes": outside the declared set
    )
    features = [
        NumericFeature(name="age", min=0, max=100),
        CategoricalFeature(name="colour", categories=["red", "blue"]),
    ]
    label = LabelSpec(column="y", positive="yes", negative="no")
    report = validate_source(local_source(path, "csv"), features, label)
    assert report.to_json() == {
        "rows": 6,
        "oversize_lines": 0,
        "features": {
            "age": {
                "missing": 2,
                "unparseable": 1,
                "out_of_bounds": 2,
                "unknown_category": 0,
                "oversize": 0,
            },
            "colour": {
                "missing": 2,
                "unparseable": 0,
                "out_of_bounds": 0,
                "unknown_category": 1,
                "oversize": 0,
            },
        },
        "label": {
            "column": "y",
            "missing": 2,
            "outside_declared": 2,
            "unparseable": 0,
            "oversize": 0,
        },
    }
    assert ValidationReport.from_json(report.to_json()) == report
    numeric = validate_source(
        local_source(path, "csv"), features[:1], LabelSpec(column="age", type="numeric")
    )
    assert numeric.label.unparseable == 1 and numeric.label.missing == 2


# ----------------------------------------------------------------------------------------------
# A cell converts by its logical value, not its column's physical type (issue 22, item 5)
# ----------------------------------------------------------------------------------------------

_TYPED = {
    "bool": pa.bool_(),
    "int": pa.int64(),
    "decimal": pa.decimal128(12, 3),
    "float": pa.float64(),
    "float32": pa.float32(),
}
_TEXT = {
    "string": pa.string(),
    "large_string": pa.large_string(),
    "dictionary": pa.dictionary(pa.int32(), pa.string()),
}


def _logical_values(kind: str) -> st.SearchStrategy[list[Any]]:
    if kind == "bool":
        element: st.SearchStrategy[Any] = st.booleans()
    elif kind == "int":
        element = st.integers(-(2**62), 2**62) | st.integers(-5, 5)
    elif kind == "decimal":
        element = st.integers(-(10**11), 10**11).map(lambda i: Decimal(i).scaleb(-3))
    elif kind == "float32":
        element = st.floats(-(2.0**100), 2.0**100, width=32).map(np.float32) | st.sampled_from(
            [np.float32(0.1), np.float32(1) / np.float32(3)]
        )
    else:
        element = st.floats(-1e300, 1e300, allow_nan=False) | st.sampled_from([0.1, 2.5, -0.0])
    return st.lists(element, min_size=3, max_size=25)


def _as_text(value: Any) -> str:
    """What a writer that types a column by its values (pandas ``astype(str)``) writes."""
    if isinstance(value, np.floating):
        return str(value)  # numpy's shortest text of a float32, as pandas writes it
    return repr(value) if isinstance(value, float) else str(value)


@settings(max_examples=60, deadline=None)
@given(
    data=st.data(),
    kind=st.sampled_from(sorted(_TYPED)),
    text_type=st.sampled_from(sorted(_TEXT)),
)
def test_a_retyped_parquet_column_moves_only_the_changed_row(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject, kind: str, text_type: str
) -> None:
    """A column written with its typed values, and the same column written as text because one
    row now holds "n/a" (pandas turns such a column into strings): under every declared type
    (numeric, categorical, binary label) only that row's encoding changes. Before, a bool column
    re-typed as text moved every row of a numeric feature ("True" was MISSING, True was 1)."""
    values = data.draw(_logical_values(kind))
    changed = data.draw(st.integers(0, len(values) - 1))
    folder = tmp_path_factory.mktemp("retyped")
    typed = pa.table({"v": pa.array(values, _TYPED[kind]), "y": pa.array(values, _TYPED[kind])})
    text = [_as_text(v) for v in values]
    text[changed] = "n/a"
    retyped = pa.table(
        {
            "v": pa.array(text, pa.string()).cast(_TEXT[text_type]),
            "y": pa.array(text).cast(_TEXT[text_type]),
        }
    )
    pq.write_table(typed, folder / "typed.parquet")
    pq.write_table(retyped, folder / "text.parquet")
    declared = [str(v) if isinstance(v, Decimal | np.floating) else v for v in values[:3]]
    declared = list({str(normalise_value(v)): v for v in declared}.values())
    specs: list[tuple[list[Any], LabelSpec]] = [
        ([NumericFeature(name="v", min=-1e300, max=1e300)], LabelSpec(column="y", type="numeric")),
        ([CategoricalFeature(name="v", categories=declared)], _binary_label(declared)),
    ]
    for features, label in specs:
        encoder = Encoder(features, fit_intercept=True)
        X, Y = read_encoded(
            local_source(folder / "typed.parquet", "parquet"), encoder, label, 1e300
        )
        X2, Y2 = read_encoded(
            local_source(folder / "text.parquet", "parquet"), encoder, label, 1e300
        )
        moved = sorted(
            {int(i) for i in np.flatnonzero(np.any(X != X2, axis=1))}
            | {int(i) for i in np.flatnonzero(Y != Y2)}
        )
        assert moved in ([], [changed]), (kind, text_type, features[0], moved)


def _binary_label(declared: list[Any]) -> LabelSpec:
    if len(declared) >= 2:
        return LabelSpec(column="y", positive=declared[0], negative=declared[1])
    return LabelSpec(column="y", positive=declared[0], negative="__none__")


def test_boolean_words_are_defined_once() -> None:
    """The accepted spellings: true/false in any ASCII case, nothing else (case rules stated in
    cells.BOOLEAN_WORDS)."""
    assert dict(BOOLEAN_WORDS) == {"true": 1, "false": 0}
    for word, number in [("true", 1), ("TRUE", 1), ("False", 0), ("fAlSe", 0)]:
        assert numeric_value(word) == (float(number), OK)
        assert category_key(word) == (str(number), OK)
        assert category_key(bool(number)) == (str(number), OK)
    for other in ["t", "yes", "on", "truе"]:  # the last one's "е" is Cyrillic
        assert numeric_value(other)[1] == UNPARSEABLE
        assert category_key(other)[0] not in ("0", "1")
