"""Block-wise reading and encoding equals the whole-frame path, bit for bit.

The worker encodes a Parquet source one Arrow record batch at a time into a preallocated matrix
(``read_encoded``); these tests compare it with reading the whole frame (``read_columns``) and
encoding it (``Encoder.encode``, ``encode_labels``, ``encode_one_vs_rest``), as the worker did
before, with ``np.testing.assert_array_equal``. No timing or memory is asserted here.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.data.encoding import (
    Encoder,
    encode_labels,
    encode_one_vs_rest,
    labels_row_by_row,
    normalise_value,
)
from service.data.sources import (
    SourceError,
    block_dtypes,
    iter_column_blocks,
    read_columns,
)
from service.data.spec import CategoricalFeature, LabelSpec, NumericFeature
from service.workers.runner import read_encoded

SECRET = "SECRET-VALUE-123"
BIG = 2**53 + 1  # not a float64: int64 and float64 readings of it differ
BLOCK_SIZES = [1, 7, 13, 61, 62, 1000]  # n = 61 rows: none but 61 and beyond divide it
# pandas ≥ 3 reads Arrow strings as a string dtype; pandas 2 as objects, which are encoded whole.
STRING_DTYPE = isinstance(pa.array(["a"]).to_pandas().dtype, pd.StringDtype)

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


def _whole(
    path: Path, fmt: str, encoder: Encoder, label: LabelSpec, bound: float | None
) -> tuple[np.ndarray, np.ndarray]:
    """The worker's former path: the whole frame, then encode it."""
    frame = read_columns(path, fmt, [*encoder.columns, label.column])  # type: ignore[arg-type]
    X = encoder.encode(frame)
    if label.type == "categorical":
        return X, encode_one_vs_rest(frame[label.column], label)
    return X, encoder.encode_labels(frame[label.column], label, bound)


def _assert_same(got: tuple[np.ndarray, np.ndarray], want: tuple[np.ndarray, np.ndarray]) -> None:
    for a, b in zip(got, want, strict=True):
        assert a.dtype == b.dtype == np.float64
        assert a.shape == b.shape
        assert a.flags.c_contiguous
        np.testing.assert_array_equal(a, b)


# ---------------------------------------------------------------------------------------------
# Equality with the whole-frame path
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("label_name", sorted(LABELS))
def test_block_wise_equals_whole_frame(folder: Path, label_name: str, fit_intercept: bool) -> None:
    encoder = Encoder(FEATURES, fit_intercept)
    label = LABELS[label_name]
    bound = 2.0 if label.type == "numeric" else None
    columns = [*encoder.columns, label.column]
    # The block-wise path is really taken (otherwise this test would compare the whole path
    # with itself).
    dtypes = block_dtypes(folder, "parquet", columns)
    assert dtypes is not None
    assert encoder.encodes_row_by_row(dtypes) or not STRING_DTYPE
    assert labels_row_by_row(label, dtypes[label.column]) or not STRING_DTYPE
    want = _whole(folder, "parquet", encoder, label, bound)
    assert want[0].shape == (sum(SIZES), encoder.dimension)
    for rows in BLOCK_SIZES:
        _assert_same(read_encoded(folder, "parquet", encoder, label, bound, rows), want)
    _assert_same(read_encoded(folder, "parquet", encoder, label, bound), want)
    # The clipping path was exercised: some rows needed it.
    assert np.any(np.einsum("ij,ij->i", want[0], want[0]) > 1.0 - 1e-12)


def test_blocks_concatenate_to_read_columns(folder: Path) -> None:
    columns = ["zone", "age", "city", "count", "flag", "score", "species", "klass"]
    whole = read_columns(folder, "parquet", columns)
    # Integer columns with a null in one file are float64 in every block, as in the whole read.
    assert whole["age"].dtype == whole["zone"].dtype == whole["count"].dtype == np.float64
    assert whole["klass"].dtype == np.float64
    dtypes = block_dtypes(folder, "parquet", columns)
    assert dtypes == dict(whole.dtypes)
    for rows in BLOCK_SIZES:
        blocks = list(iter_column_blocks(folder, "parquet", columns, rows))
        assert all(0 < len(b) <= rows for b in blocks)
        assert all(isinstance(b.index, pd.RangeIndex) and b.index.start == 0 for b in blocks)
        assert all(dict(b.dtypes) == dtypes for b in blocks)
        pd.testing.assert_frame_equal(pd.concat(blocks, ignore_index=True), whole, check_exact=True)


def test_single_file_and_block_of_int_columns_without_nulls(tmp_path: Path) -> None:
    path = tmp_path / "one.parquet"
    pq.write_table(pa.table({"a": [BIG, 3, 40, -2], "y": [1, 0, 1, 1]}), path)
    encoder = Encoder((CategoricalFeature(name="a", categories=[BIG, 3]),), True)
    label = LabelSpec(column="y", type="binary", positive=1, negative=0)
    assert block_dtypes(path, "parquet", ["a", "y"]) == {"a": np.int64, "y": np.int64}
    want = _whole(path, "parquet", encoder, label, None)
    assert want[0][0, 0] > 0  # BIG matched as an integer
    for rows in (1, 3, 5):
        _assert_same(read_encoded(path, "parquet", encoder, label, None, rows), want)


def test_empty_parquet_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.parquet"
    pq.write_table(
        pa.table({"x": pa.array([], pa.float64()), "y": pa.array([], pa.string())}), path
    )
    encoder = Encoder((NumericFeature(name="x", min=0, max=1),), True)
    label = LabelSpec(column="y", type="categorical", classes=["a", "b"])
    X, Y = read_encoded(path, "parquet", encoder, label, None, 4)
    assert X.shape == (0, 2) and Y.shape == (2, 0)


# ---------------------------------------------------------------------------------------------
# Cases read whole, on purpose (and still equal, through the same functions)
# ---------------------------------------------------------------------------------------------


def _encoder_and_label() -> tuple[Encoder, LabelSpec]:
    encoder = Encoder(
        (NumericFeature(name="a", min=0, max=10), CategoricalFeature(name="b", categories=["x"])),
        True,
    )
    return encoder, LabelSpec(column="y", type="binary", positive="p", negative="n")


def _check_read_whole(path: Path, fmt: str, encoder: Encoder, label: LabelSpec) -> None:
    columns = [*encoder.columns, label.column]
    dtypes = block_dtypes(path, fmt, columns)  # type: ignore[arg-type]
    assert (
        dtypes is None
        or not encoder.encodes_row_by_row(dtypes)
        or not labels_row_by_row(label, dtypes[label.column])
    )
    blocks = list(iter_column_blocks(path, fmt, columns, 2))  # type: ignore[arg-type]
    if dtypes is None:
        assert len(blocks) == 1
    want = _whole(path, fmt, encoder, label, None)
    for rows in (1, 2, None):
        _assert_same(read_encoded(path, fmt, encoder, label, None, rows), want)


def test_promotion_across_files_is_read_whole(tmp_path: Path) -> None:
    encoder, label = _encoder_and_label()
    path = tmp_path / "mixed"
    path.mkdir()
    pq.write_table(
        pa.table({"a": [1, 2, 3], "b": ["x", "y", "x"], "y": ["p", "n", "p"]}), path / "0.pq"
    )
    pq.write_table(pa.table({"a": [1.5, 2.5], "b": ["x", None], "y": ["p", "n"]}), path / "1.pq")
    assert block_dtypes(path, "parquet", ["a", "b", "y"]) is None
    _check_read_whole(path, "parquet", encoder, label)


def test_booleans_with_nulls_and_unsupported_types_are_read_whole(tmp_path: Path) -> None:
    encoder, label = _encoder_and_label()
    path = tmp_path / "bools.parquet"
    pq.write_table(pa.table({"a": [True, None, False], "b": ["x"] * 3, "y": ["p"] * 3}), path)
    assert block_dtypes(path, "parquet", ["a", "b", "y"]) is None
    _check_read_whole(path, "parquet", encoder, label)
    for values in (
        pa.array(["x", "y", "x"]).dictionary_encode(),
        pa.array([1, 2, 3], pa.decimal128(5, 0)),
        pa.array([[1], [2], []]),
    ):
        other = tmp_path / "other.parquet"
        pq.write_table(pa.table({"a": [1, 2, 3], "b": values, "y": ["p", "n", "p"]}), other)
        assert block_dtypes(other, "parquet", ["a", "b", "y"]) is None
        assert block_dtypes(other, "parquet", ["a", "y"]) is not None


def test_integer_nulls_without_footer_counts_are_read_whole(tmp_path: Path) -> None:
    encoder, label = _encoder_and_label()
    path = tmp_path / "nostats"
    path.mkdir()
    table = pa.table({"a": [1, 2, 3], "b": ["x", "z", None], "y": ["p", "n", "p"]})
    pq.write_table(table, path / "0.parquet", write_statistics=False)
    pq.write_table(
        pa.table({"a": [None, 5], "b": ["x", "x"], "y": ["n", "p"]}, schema=table.schema),
        path / "1.parquet",
        write_statistics=False,
    )
    assert block_dtypes(path, "parquet", ["a", "b", "y"]) is None
    # Float and string columns do not depend on null counts.
    assert block_dtypes(path, "parquet", ["b", "y"]) is not None
    _check_read_whole(path, "parquet", encoder, label)


def test_numeric_feature_on_a_string_column_is_encoded_whole(tmp_path: Path) -> None:
    # pd.to_numeric's result type depends on the whole column: not row by row.
    encoder, label = _encoder_and_label()
    path = tmp_path / "strings.parquet"
    values = ["1", "9007199254740993", "abc", None, "2.5", "-3"]
    pq.write_table(pa.table({"a": values, "b": ["x"] * 6, "y": ["p", "n"] * 3}), path)
    dtypes = block_dtypes(path, "parquet", ["a", "b", "y"])
    assert dtypes is not None and not encoder.encodes_row_by_row(dtypes)
    _check_read_whole(path, "parquet", encoder, label)


def test_csv_is_read_whole(tmp_path: Path) -> None:
    encoder, label = _encoder_and_label()
    path = tmp_path / "data.csv"
    path.write_text("a,b,y\n1,x,p\n,x,n\n3.5,z,p\n")
    assert block_dtypes(path, "csv", ["a", "b", "y"]) is None
    _check_read_whole(path, "csv", encoder, label)


def test_large_dimension_is_not_row_by_row() -> None:
    wide = Encoder((CategoricalFeature(name="c", categories=list(range(5000))),), True)
    assert not wide.encodes_row_by_row({"c": np.dtype(np.int64)})
    narrow = Encoder((CategoricalFeature(name="c", categories=list(range(100))),), True)
    assert narrow.encodes_row_by_row({"c": np.dtype(np.int64)})
    assert not narrow.encodes_row_by_row({"c": np.dtype(object)})
    assert not narrow.encodes_row_by_row({})


# ---------------------------------------------------------------------------------------------
# Errors are the whole path's
# ---------------------------------------------------------------------------------------------


def test_missing_column_error_is_the_same(folder: Path, tmp_path: Path) -> None:
    csv = tmp_path / "data.csv"
    csv.write_text("age,city\n1,x\n")
    encoder = Encoder((NumericFeature(name="age", min=0, max=1),), True)
    label = LabelSpec(column="height", type="numeric")
    wanted = ["age", "height", "weight"]
    for path, fmt in ((folder, "parquet"), (csv, "csv")):
        with pytest.raises(SourceError) as reference:
            read_columns(path, fmt, wanted)  # type: ignore[arg-type]
        expected = str(reference.value)
        assert expected == "column(s) not found in the source: 'height', 'weight'"
        with pytest.raises(SourceError) as error:
            block_dtypes(path, fmt, wanted)  # type: ignore[arg-type]
        assert str(error.value) == expected
        with pytest.raises(SourceError) as error:
            list(iter_column_blocks(path, fmt, wanted, 5))  # type: ignore[arg-type]
        assert str(error.value) == expected
        assert error.value.__cause__ is None
        with pytest.raises(SourceError) as error:
            read_encoded(path, fmt, encoder, label, None, 5)
        assert str(error.value) == "column(s) not found in the source: 'height'"


def test_corrupt_part_error_is_generic(folder: Path) -> None:
    # A footer that parses but data pages that do not: the whole path's generic message.
    part = folder / "part-1.parquet"
    data = bytearray(part.read_bytes())
    data[8:400] = SECRET.encode() * (392 // len(SECRET)) + b"x" * (392 % len(SECRET))
    part.write_bytes(bytes(data))
    encoder = Encoder(FEATURES[:2], True)
    label = LABELS["numeric"]
    with pytest.raises(SourceError) as reference:
        _whole(folder, "parquet", encoder, label, None)
    with pytest.raises(SourceError) as error:
        read_encoded(folder, "parquet", encoder, label, None, 7)
    assert str(error.value) == str(reference.value)
    assert SECRET not in str(error.value)
    assert error.value.__cause__ is None


# ---------------------------------------------------------------------------------------------
# encode_into and the row-by-row rules, on in-memory frames
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


_typed_columns = st.sampled_from(["float", "int", "bool", "str", "float32"])


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
            else st.sampled_from(["float", "int", "bool", "float32"])
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
    dtypes = dict(frame.dtypes)
    assert encoder.encodes_row_by_row(dtypes)
    want_x = encoder.encode(frame)
    out = np.empty_like(want_x)
    for start in range(0, len(frame), rows):
        block = frame.iloc[start : start + rows].reset_index(drop=True)
        encoder.encode_into(block, out[start : start + rows])
    np.testing.assert_array_equal(out, want_x)
    if not labels_row_by_row(label, dtypes[label.column]):
        return
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
