"""Block-wise reading and encoding equals the whole read, bit for bit, for every block size.

The worker encodes a source one record batch at a time into a preallocated matrix
(``read_encoded``). Every cell converts by itself (service.data.cells) and every encoding step
is per row, so any block size — including one block holding every row — gives the same bits.
These tests compare block sizes with each other and with encoding all the cells at once, with
``np.testing.assert_array_equal``. No timing or memory is asserted here.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.data.encoding import (
    Encoder,
    encode_labels,
    encode_one_vs_rest,
    normalise_value,
)
from service.data.reader import read_encoded
from service.data.sources import SourceError, local_source
from service.data.spec import CategoricalFeature, LabelSpec, NumericFeature

SECRET = "SECRET-VALUE-123"
BIG = 2**53 + 1  # not a float64: int64 and float64 readings of it differ
BLOCK_SIZES = [1, 7, 13, 61, 62, 1000]  # n = 61 rows: none but 61 and beyond divide it

# ---------------------------------------------------------------------------------------------
# A three-file Parquet folder with every kind of column the block-wise path accepts
# ---------------------------------------------------------------------------------------------

FEATURES = (
    NumericFeature(name="age", min=18, max=65),  # int64, nulls in part 1 only → float64 whole
    NumericFeature(name="income", min=0, max=200_000),  # float64: NaN, ±inf, far out of bounds
    NumericFeature(name="score", min=-1, max=1),  # float32
    NumericFeature(name="flag", min=0, max=1),  # bool, no nulls
    NumericFeature(name="count", min=0, max=2**64),  # uint64 with nulls in part 2
    CategoricalFeature(name="city", categories=["Paris", "Lyon", "Nice", "3"]),  # string
    CategoricalFeature(name="zone", categories=[1, 2, BIG, 2**53]),  # int64, nulls in part 1
    CategoricalFeature(name="grade", categories=[0.5, 1, "2.5"]),  # float64
)
LABELS = {
    "binary": LabelSpec(column="outcome", type="binary", positive="yes", negative="no"),
    "binary_int": LabelSpec(column="klass", type="binary", positive=1, negative=0),
    "binary_bool": LabelSpec(column="flag", type="binary", positive=True, negative=False),
    "numeric": LabelSpec(column="target", type="numeric"),
    "numeric_int": LabelSpec(column="age", type="numeric"),
    "categorical": LabelSpec(column="species", type="categorical", classes=["a", "b", 3, "d"]),
}
SIZES = [20, 24, 17]


def _part(rng: np.random.Generator, rows: int, index: int) -> pa.Table:
    ages = rng.integers(0, 120, rows).tolist()
    ages[0] = BIG  # far above the bound, and not a float64
    ages[1] = -(2**63)
    zones = rng.choice([1, 2, 5, BIG, 2**53, -7], rows).tolist()
    counts = [int(v) for v in rng.integers(0, 2**63, rows, dtype=np.uint64)]
    counts[2] = 2**64 - 1
    counts[3] = 2**63 + 2**11 + 1  # rounds differently if the cast is not round-to-nearest
    if index == 1:
        ages[5] = None
        zones[3] = None
    if index == 2:
        counts[4] = None
    income = rng.normal(50_000, 80_000, rows)
    income[[0, 1, 2, 3]] = [np.nan, np.inf, -np.inf, 1e300]
    cities = rng.choice(["Paris", "Lyon", "Nice", " Paris ", "3", "03", "Rome", ""], rows)
    cities = [None if i % 9 == 4 else str(c) for i, c in enumerate(cities)]
    cities[1] = SECRET
    grades = rng.choice([0.5, 1.0, 2.5, -0.0, 0.0, 7.25, np.nan], rows)
    outcome = [
        None if i % 11 == 3 else str(v)
        for i, v in enumerate(rng.choice(["yes", "no", " YES", "yes "], rows))
    ]
    species = [
        None if i % 8 == 6 else str(v)
        for i, v in enumerate(rng.choice(["a", "b", "3", "3.0", "d", "zz"], rows))
    ]
    klass = rng.choice([0, 1], rows).tolist()
    if index == 0:
        klass[2] = None
    target = rng.normal(0, 3, rows)
    target[[0, 1]] = [np.nan, 1e9]
    table = pa.table(
        {
            "age": pa.array(ages, pa.int64()),
            "income": pa.array(income, pa.float64()),
            "score": pa.array(rng.uniform(-2, 2, rows).astype(np.float32), pa.float32()),
            "flag": pa.array(rng.random(rows) < 0.5, pa.bool_()),
            "count": pa.array(counts, pa.uint64()),
            "city": pa.array(cities, pa.string()),
            "zone": pa.array(zones, pa.int64()),
            "grade": pa.array(grades, pa.float64()),
            "outcome": pa.array(outcome, pa.string()),
            "klass": pa.array(klass, pa.int8()),
            "target": pa.array(target, pa.float64()),
            "species": pa.array(species, pa.large_string()),
            "unused": pa.array([SECRET] * rows),
        }
    )
    # Rows that saturate every feature (norm on the unit sphere up to rounding: the clip path).
    saturated = {**table.slice(0, 1).to_pylist()[0]}
    saturated.update(
        age=10**6,
        income=1e12,
        score=5.0,
        flag=True,
        count=2**64 - 1,
        city="Nice",
        zone=2,
        grade=0.5,
    )
    rows_list = table.to_pylist()
    rows_list[-1] = saturated
    rows_list[-2] = {**saturated, "age": -5, "income": -1.0, "score": -3.0, "flag": False}
    return pa.Table.from_pylist(rows_list, schema=table.schema)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    rng = np.random.default_rng(7)
    path = tmp_path / "parts"
    path.mkdir()
    for index, rows in enumerate(SIZES):
        # Several row groups per file, so batches also end at row-group boundaries.
        pq.write_table(_part(rng, rows, index), path / f"part-{index}.parquet", row_group_size=6)
    (path / "_SUCCESS").write_text("")
    return path


def _all_at_once(
    tables: list[pa.Table], encoder: Encoder, label: LabelSpec, bound: float | None
) -> tuple[np.ndarray, np.ndarray]:
    """Every cell of every file encoded in one call (no blocks)."""
    table = pa.concat_tables(tables)
    X = encoder.encode(table)
    column = table.column(label.column)
    if label.type == "categorical":
        return X, encode_one_vs_rest(column, label)
    return X, encode_labels(column, label, bound)


def _tables(folder: Path) -> list[pa.Table]:
    return [pq.read_table(p) for p in sorted(folder.glob("part-*.parquet"))]


def _assert_same(got: tuple[np.ndarray, np.ndarray], want: tuple[np.ndarray, np.ndarray]) -> None:
    for a, b in zip(got, want, strict=True):
        assert a.dtype == b.dtype == np.float64
        assert a.shape == b.shape
        assert a.flags.c_contiguous
        np.testing.assert_array_equal(a, b)


# ---------------------------------------------------------------------------------------------
# Equality across block sizes
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("label_name", sorted(LABELS))
def test_parquet_folder_block_wise_equals_all_at_once(
    folder: Path, label_name: str, fit_intercept: bool
) -> None:
    label = LABELS[label_name]
    encoder = Encoder(FEATURES, fit_intercept)
    bound = 2.5 if label.type == "numeric" else None
    want = _all_at_once(_tables(folder), encoder, label, bound)
    source = local_source(folder, "parquet")
    for rows in BLOCK_SIZES:
        _assert_same(read_encoded(source, encoder, label, bound, rows), want)
    _assert_same(read_encoded(source, encoder, label, bound), want)  # the default block size


@pytest.mark.parametrize("label_name", ["binary", "numeric", "categorical"])
def test_csv_block_wise_equals_all_at_once(folder: Path, tmp_path: Path, label_name: str) -> None:
    """The same rows written as CSV text: every cell is bytes, converted by the text rules."""
    label = LABELS[label_name]
    encoder = Encoder(FEATURES, True)
    path = tmp_path / "data.csv"
    pcsv.write_csv(pa.concat_tables(_tables(folder)), path)
    source = local_source(path, "csv")
    cells = pa.Table.from_batches(list(source.iter_batches(source.columns(), 10_000)))
    want = _all_at_once([cells], encoder, label, 2.5)
    assert want[0].shape[0] == sum(SIZES)
    for rows in BLOCK_SIZES:
        _assert_same(read_encoded(source, encoder, label, 2.5, rows), want)


def test_parquet_and_csv_of_the_same_rows_agree_where_types_carry_over(
    folder: Path, tmp_path: Path
) -> None:
    """Integers, strings and categories read from text give what the typed file gives."""
    features = (FEATURES[0], FEATURES[5], FEATURES[6])
    encoder = Encoder(features, True)
    label = LABELS["binary"]
    path = tmp_path / "data.csv"
    pcsv.write_csv(pa.concat_tables(_tables(folder)), path)
    typed = read_encoded(local_source(folder, "parquet"), encoder, label, None, 9)
    text = read_encoded(local_source(path, "csv"), encoder, label, None, 9)
    _assert_same(text, typed)


def test_large_dimension_blocks_equal_all_at_once() -> None:
    """Beyond 4096 columns the row norms are summed row by row: blocks change nothing."""
    features = (CategoricalFeature(name="c", categories=list(range(5000))),)
    encoder = Encoder(features, True)
    cells = pa.table({"c": pa.array([str(i % 5000) for i in range(23)] + ["x"])})
    want = encoder.encode(cells)
    got = np.empty_like(want)
    for start in range(0, 24, 5):
        encoder.encode_into(cells.slice(start, 5), got[start : start + 5])
    np.testing.assert_array_equal(got, want)


def test_missing_column_error_names_only_columns(folder: Path, tmp_path: Path) -> None:
    csv = tmp_path / "data.csv"
    csv.write_text("age,city\n1,x\n")
    encoder = Encoder((NumericFeature(name="age", min=0, max=1),), True)
    label = LabelSpec(column="height", type="numeric")
    wanted = ["age", "height", "weight"]
    for path, fmt in ((folder, "parquet"), (csv, "csv")):
        source = local_source(path, fmt)  # type: ignore[arg-type]
        with pytest.raises(SourceError) as error:
            list(source.iter_batches(wanted, 5))
        assert str(error.value) == "column(s) not found in the source: 'height', 'weight'"
        assert error.value.__cause__ is None
        with pytest.raises(SourceError) as error:
            read_encoded(source, encoder, label, None, 5)
        assert str(error.value) == "column(s) not found in the source: 'height'"


def test_corrupt_part_error_is_generic(folder: Path) -> None:
    # A footer that parses but data pages that do not: the whole path's generic message.
    part = folder / "part-1.parquet"
    data = bytearray(part.read_bytes())
    data[8:400] = SECRET.encode() * (392 // len(SECRET)) + b"x" * (392 % len(SECRET))
    part.write_bytes(bytes(data))
    encoder = Encoder(FEATURES[:2], True)
    label = LABELS["numeric"]
    with pytest.raises(SourceError) as error:
        read_encoded(local_source(folder, "parquet"), encoder, label, None, 7)
    assert str(error.value).startswith("the Parquet data could not be read")
    assert SECRET not in str(error.value)
    assert error.value.__cause__ is None


# ---------------------------------------------------------------------------------------------
# encode_into on in-memory frames
# ---------------------------------------------------------------------------------------------


def test_encode_into_validates_out() -> None:
    encoder = Encoder((NumericFeature(name="x", min=0, max=1),), True)
    frame = pd.DataFrame({"x": [0.5, 2.0, np.nan]})
    out = np.full((3, 2), 7.0)
    assert encoder.encode_into(frame, out) is out
    np.testing.assert_array_equal(out, encoder.encode(frame))
    for bad in (
        np.empty((2, 2)),
        np.empty((3, 3)),
        np.empty((3, 2), np.float32),
        np.empty((2, 3)).T,
    ):
        with pytest.raises(ValueError, match="out must be"):
            encoder.encode_into(frame, bad)
    with pytest.raises(ValueError, match="missing feature column"):
        encoder.encode_into(pd.DataFrame({"y": [1.0]}), np.empty((1, 2)))


_typed_columns = st.sampled_from(["float", "int", "bool", "str", "float32", "object"])


@st.composite
def _typed_frames(draw: st.DrawFn) -> tuple[Encoder, pd.DataFrame, LabelSpec]:
    kinds = draw(st.lists(st.sampled_from(["numeric", "categorical"]), min_size=1, max_size=5))
    n = draw(st.integers(0, 30))
    features: list[NumericFeature | CategoricalFeature] = []
    columns: dict[str, pd.Series] = {}
    for i, kind in enumerate(kinds):
        name = f"f{i}"
        dtype = draw(
            _typed_columns
            if kind == "categorical"
            else st.sampled_from(["float", "int", "bool", "float32", "str", "object"])
        )
        if dtype in ("float", "float32"):
            values = draw(
                st.lists(
                    st.floats(
                        allow_nan=True, allow_infinity=True, width=32 if dtype == "float32" else 64
                    ),
                    min_size=n,
                    max_size=n,
                )
            )
            series = pd.Series(values, dtype=np.float32 if dtype == "float32" else np.float64)
        elif dtype == "int":
            series = pd.Series(
                draw(st.lists(st.integers(-(2**63), 2**63 - 1), min_size=n, max_size=n)),
                dtype=np.int64,
            )
        elif dtype == "bool":
            series = pd.Series(draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
        elif dtype == "object":  # mixed Python values, as JSON or pandas can hold them
            mixed = st.one_of(
                st.none(),
                st.booleans(),
                st.integers(-(2**70), 2**70),
                st.floats(),
                st.sampled_from(["a", " 1 ", "1.0", "true", "x", "", "1e309", "NaN"]),
                st.binary(max_size=3),
            )
            series = pd.Series(draw(st.lists(mixed, min_size=n, max_size=n)), dtype=object)
        else:
            values = draw(
                st.lists(
                    st.one_of(st.none(), st.sampled_from(["a", " a", "1", "1.0", "true", "x"])),
                    min_size=n,
                    max_size=n,
                )
            )
            series = pd.Series(values, dtype=pd.StringDtype())
        columns[name] = series
        if kind == "numeric":
            low = draw(st.floats(-1e6, 1e6, allow_nan=False))
            features.append(
                NumericFeature(name=name, min=low, max=low + draw(st.floats(1e-3, 1e6)))
            )
        else:
            categories = draw(
                st.lists(
                    st.sampled_from(["a", "1", "x", "true", 0, 2.5, -1]),
                    min_size=1,
                    max_size=4,
                    unique_by=normalise_value,
                )
            )
            features.append(CategoricalFeature(name=name, categories=categories))
    label_column = draw(st.sampled_from(sorted(columns)))
    label = draw(
        st.sampled_from(
            [
                LabelSpec(column=label_column, type="binary", positive="a", negative="x"),
                LabelSpec(column=label_column, type="numeric"),
                LabelSpec(column=label_column, type="categorical", classes=["a", 1, "x"]),
            ]
        )
    )
    return Encoder(tuple(features), draw(st.booleans())), pd.DataFrame(columns), label


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_typed_frames(), st.integers(1, 8))
def test_encode_into_blocks_equals_encode(
    case: tuple[Encoder, pd.DataFrame, LabelSpec], rows: int
) -> None:
    encoder, frame, label = case
    want_x = encoder.encode(frame)
    out = np.empty_like(want_x)
    for start in range(0, len(frame), rows):
        block = frame.iloc[start : start + rows].reset_index(drop=True)
        encoder.encode_into(block, out[start : start + rows])
    np.testing.assert_array_equal(out, want_x)
    encode = (
        encode_one_vs_rest
        if label.type == "categorical"
        else (lambda c, s: encode_labels(c, s, 1.5))
    )
    want_y = encode(frame[label.column], label)
    got_y = np.concatenate(
        [encode(frame[label.column].iloc[s : s + rows], label) for s in range(0, len(frame), rows)]
        or [want_y],
        axis=-1,
    )
    np.testing.assert_array_equal(got_y, want_y)
