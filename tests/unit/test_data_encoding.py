"""Tests of the public encoding: the ‖x‖₂ ≤ 1 guarantee, exact values, matching, persistence."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.data.encoding import Encoder, clip_rows_to_unit_norm, encode_labels, normalise_value
from service.data.spec import CategoricalFeature, LabelSpec, NumericFeature

NORM_TOLERANCE = 1e-12

# ---------------------------------------------------------------------------------------------
# Property: the norm bound holds whatever the cells contain
# ---------------------------------------------------------------------------------------------

_cells = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(10**400), max_value=10**400),
    st.text(max_size=6),
    st.sampled_from(["3", " 3.0 ", "true", "nan", "-inf", "1e999", "SECRET"]),
    st.booleans(),
    st.none(),
)
_categories = st.lists(
    st.one_of(
        st.integers(-5, 5),
        st.sampled_from(["a", "b", " c", "3", "x y"]),
        st.booleans(),
        st.floats(-3, 3, allow_nan=False).map(lambda v: round(v, 1)),
    ),
    min_size=1,
    max_size=5,
    unique_by=normalise_value,
)


@st.composite
def _numeric_features(draw: st.DrawFn, name: str) -> NumericFeature:
    low = draw(st.floats(-1e308, 1e308, allow_nan=False))
    high = draw(st.floats(-1e308, 1e308, allow_nan=False).filter(lambda h: h > low))
    return NumericFeature(name=name, min=low, max=high)


@st.composite
def _schemas(draw: st.DrawFn) -> tuple[list[NumericFeature | CategoricalFeature], bool]:
    kinds = draw(st.lists(st.sampled_from(["numeric", "categorical"]), max_size=5))
    features: list[NumericFeature | CategoricalFeature] = []
    for i, kind in enumerate(kinds):
        name = f"f{i}"
        if kind == "numeric":
            features.append(draw(_numeric_features(name)))
        else:
            features.append(CategoricalFeature(name=name, categories=draw(_categories)))
    fit_intercept = draw(st.booleans()) or not features
    return features, fit_intercept


@st.composite
def _frames(draw: st.DrawFn) -> tuple[Encoder, pd.DataFrame]:
    features, fit_intercept = draw(_schemas())
    encoder = Encoder(tuple(features), fit_intercept)
    n = draw(st.integers(0, 12))
    columns = {}
    for feature in features:
        typed = draw(st.booleans())
        if typed:  # a homogeneous float column, as a Parquet file would give
            values = draw(
                st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=n, max_size=n)
            )
            columns[feature.name] = pd.Series(values, dtype=np.float64)
        else:  # a mixed object column, as JSON or a messy CSV would give
            values = draw(st.lists(_cells, min_size=n, max_size=n))
            columns[feature.name] = pd.Series(values, dtype=object)
    return encoder, pd.DataFrame(columns, index=pd.RangeIndex(n))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_frames())
def test_every_encoded_row_has_norm_at_most_one(case: tuple[Encoder, pd.DataFrame]) -> None:
    encoder, frame = case
    matrix = encoder.encode(frame)
    assert matrix.dtype == np.float64
    assert matrix.shape == (len(frame), encoder.dimension)
    assert matrix.flags.c_contiguous
    assert np.all(np.isfinite(matrix))
    assert np.all(np.linalg.norm(matrix, axis=1) <= 1.0 + NORM_TOLERANCE)
    if encoder.fit_intercept and len(frame):
        np.testing.assert_allclose(matrix[:, -1], encoder.scale, rtol=1e-12)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.floats(-1e3, 1e3), min_size=3, max_size=3), min_size=1, max_size=20))
def test_clip_rows_enforces_the_bound_exactly(rows: list[list[float]]) -> None:
    original = np.array(rows, dtype=np.float64)
    matrix = clip_rows_to_unit_norm(original.copy())
    assert np.all(np.einsum("ij,ij->i", matrix, matrix) <= 1.0)
    norms = np.linalg.norm(original, axis=1)
    inside = norms <= 1.0
    np.testing.assert_array_equal(matrix[inside], original[inside])
    # Clipped rows keep their direction and land on the unit sphere (up to a few ulps).
    np.testing.assert_allclose(
        matrix[~inside] * norms[~inside, None], original[~inside], rtol=1e-12, atol=1e-12
    )


def test_extreme_bounds_do_not_overflow() -> None:
    encoder = Encoder((NumericFeature(name="x", min=-1.7e308, max=1.7e308),), False)
    matrix = encoder.encode(pd.DataFrame({"x": [-np.inf, 0.0, 1.7e308, np.nan]}))
    # ±inf and NaN do not convert (service.data.cells): MISSING, the midpoint.
    np.testing.assert_allclose(matrix[:, 0], [0.0, 0.0, 1.0, 0.0], atol=1e-12)


# ---------------------------------------------------------------------------------------------
# Exact values on a hand-written example
# ---------------------------------------------------------------------------------------------


def _example_encoder(fit_intercept: bool = True) -> Encoder:
    return Encoder(
        (
            NumericFeature(name="age", min=20, max=60),
            CategoricalFeature(name="colour", categories=["red", "green", "blue"]),
            NumericFeature(name="temp", min=-10, max=10),
        ),
        fit_intercept,
    )


def test_numeric_mapping_and_one_hot_by_hand() -> None:
    encoder = _example_encoder()
    frame = pd.DataFrame(
        {
            "age": [20, 40, 50, 100, -5, None],
            "colour": ["red", "blue", " green ", "purple", None, "green"],
            "temp": [0.0, 10.0, -2.5, np.inf, -np.inf, "warm"],
        }
    )
    # Raw features: age, colour, temp, intercept -> k = 4, scale = 1/2.
    # age:  2 (a - 20)/40 - 1   temp: 2 (t + 10)/20 - 1; out-of-range values clip first.
    expected_unscaled = np.array(
        [
            # age   red green blue  temp  1
            [-1.0, 1, 0, 0, 0.0, 1],  # age 20 -> -1;  temp 0 -> 0
            [0.0, 0, 0, 1, 1.0, 1],  # age 40 -> 0;   temp 10 -> 1
            [0.5, 0, 1, 0, -0.25, 1],  # age 50 -> .5; " green " stripped; temp -2.5 -> -.25
            [1.0, 0, 0, 0, 0.0, 1],  # age 100 clips to 60 -> 1; unknown colour; +inf missing
            [-1.0, 0, 0, 0, 0.0, 1],  # age -5 clips to 20 -> -1; missing colour; -inf missing
            [0.0, 0, 1, 0, 0.0, 1],  # missing age -> 0; non-numeric temp -> 0
        ]
    )
    assert encoder.scale == 0.5
    np.testing.assert_allclose(encoder.encode(frame), expected_unscaled * 0.5, atol=1e-15)


def test_public_description_properties() -> None:
    encoder = _example_encoder()
    assert encoder.feature_names == ["age", "colour=red", "colour=green", "colour=blue", "temp"]
    assert encoder.n_features == 5
    assert encoder.dimension == 6
    assert encoder.columns == ["age", "colour", "temp"]
    assert encoder.scale == pytest.approx(1 / math.sqrt(4))
    without = _example_encoder(fit_intercept=False)
    assert without.dimension == 5
    assert without.scale == pytest.approx(1 / math.sqrt(3))


def test_intercept_only_encoder() -> None:
    encoder = Encoder((), True)
    matrix = encoder.encode(pd.DataFrame(index=pd.RangeIndex(3)))
    np.testing.assert_array_equal(matrix, np.ones((3, 1)))


def test_norm_reaches_one_for_extreme_row() -> None:
    encoder = _example_encoder()
    matrix = encoder.encode(pd.DataFrame({"age": [60], "colour": ["red"], "temp": [10]}))
    assert np.linalg.norm(matrix[0]) == pytest.approx(1.0, abs=1e-12)


# ---------------------------------------------------------------------------------------------
# Normalised matching
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("declared", ["3", 3, 3.0, " 3 "])
@pytest.mark.parametrize(
    "column",
    [
        pd.Series([3, 4], dtype=np.int64),
        pd.Series([3.0, np.nan], dtype=np.float64),
        pd.Series(["3", "x"], dtype=object),
        pd.Series([" 3.0", None], dtype="str"),
        pd.Series([3, None], dtype="Int64"),
    ],
)
def test_int_float_and_string_forms_match(declared: object, column: pd.Series) -> None:
    encoder = Encoder((CategoricalFeature(name="c", categories=[declared, "other"]),), False)
    matrix = encoder.encode(pd.DataFrame({"c": column}))
    np.testing.assert_array_equal(matrix, [[1.0, 0.0], [0.0, 0.0]])


def test_normalise_value_rules() -> None:
    assert normalise_value(3) == normalise_value(3.0) == normalise_value(" 3 ") == "3"
    assert normalise_value(np.int64(3)) == normalise_value(np.float32(3.0)) == "3"
    assert normalise_value(2.5) == normalise_value("2.50") == "2.5"
    assert normalise_value(np.float32(0.1)) == "0.1"
    assert normalise_value(True) == normalise_value("TRUE") == normalise_value(1) == "1"
    assert normalise_value("  red ") == "red"
    assert normalise_value(None) is None
    assert normalise_value(float("nan")) is None
    assert normalise_value(pd.NA) is None


def test_categorical_column_and_bool_column() -> None:
    encoder = Encoder(
        (
            CategoricalFeature(name="flag", categories=["True", "False"]),
            CategoricalFeature(name="kind", categories=["a", "b"]),
        ),
        False,
    )
    frame = pd.DataFrame({"flag": [True, False, True], "kind": pd.Categorical(["b", "a", None])})
    scale = 1 / math.sqrt(2)
    expected = np.array([[1, 0, 0, 1], [0, 1, 1, 0], [1, 0, 0, 0]]) * scale
    np.testing.assert_allclose(encoder.encode(frame), expected)


def test_labels_plus_minus_one() -> None:
    label = LabelSpec(column="y", positive=1, negative=0)
    frame = pd.DataFrame({"y": pd.Series([1, 0, 1.0, "1", None, 7, "yes"], dtype=object)})
    np.testing.assert_array_equal(encode_labels(frame, label), [1, -1, 1, 1, -1, -1, -1])
    as_strings = LabelSpec(column="y", positive="spam", negative="ham")
    series = pd.Series(["spam", " spam", "ham", None])
    labels = Encoder.encode_labels(series, as_strings)
    assert labels.dtype == np.float64
    np.testing.assert_array_equal(labels, [1, 1, -1, -1])


def test_missing_label_column_is_named() -> None:
    with pytest.raises(ValueError, match="'y'"):
        encode_labels(pd.DataFrame({"z": [1]}), LabelSpec(column="y", positive=1, negative=0))


# ---------------------------------------------------------------------------------------------
# Prediction records and persistence
# ---------------------------------------------------------------------------------------------


def test_encode_records_matches_encode() -> None:
    encoder = _example_encoder()
    records = [
        {"age": 50, "colour": "green", "temp": -2.5, "ignored": "x"},
        {"age": "40", "colour": "blue", "temp": None},
    ]
    frame = pd.DataFrame({"age": [50, 40], "colour": ["green", "blue"], "temp": [-2.5, np.nan]})
    np.testing.assert_array_equal(encoder.encode_records(records), encoder.encode(frame))
    assert encoder.encode_records([]).shape == (0, encoder.dimension)


def test_encode_records_names_missing_column_and_record() -> None:
    encoder = _example_encoder()
    records = [{"age": 1, "colour": "red", "temp": 0}, {"age": 1, "colour": "red"}]
    with pytest.raises(ValueError, match=r"record 1 .*'temp'"):
        encoder.encode_records(records)


def test_encode_names_missing_columns() -> None:
    with pytest.raises(ValueError, match="'colour'"):
        _example_encoder().encode(pd.DataFrame({"age": [1], "temp": [1]}))


def test_encode_ignores_index_and_extra_columns() -> None:
    encoder = _example_encoder()
    frame = pd.DataFrame({"temp": [0, 5], "colour": ["red", "blue"], "age": [20, 60], "z": [1, 2]})
    shuffled = frame.set_axis([17, 3])
    np.testing.assert_array_equal(encoder.encode(shuffled), encoder.encode(frame))
    repeated = pd.concat([frame, frame[["age"]]], axis=1)
    with pytest.raises(ValueError, match="more than once"):
        encoder.encode(repeated)


def test_to_dict_round_trip_through_json() -> None:
    encoder = Encoder(
        (
            NumericFeature(name="x", min=-1.5, max=2),
            CategoricalFeature(name="c", categories=[True, 2, 2.5, "z"]),
        ),
        True,
    )
    description = json.loads(json.dumps(encoder.to_dict()))
    assert description["feature_names"] == ["x", "c=True", "c=2", "c=2.5", "c=z"]
    assert description["scale"] == pytest.approx(1 / math.sqrt(3))
    rebuilt = Encoder.from_dict(description)
    assert rebuilt == encoder
    frame = pd.DataFrame({"x": [0.3, 9], "c": [2.5, "z"]})
    np.testing.assert_array_equal(rebuilt.encode(frame), encoder.encode(frame))


def test_from_dict_rejects_inconsistent_description() -> None:
    description = _example_encoder().to_dict()
    with pytest.raises(ValueError, match="scale"):
        Encoder.from_dict({**description, "scale": 0.3})
    with pytest.raises(ValueError, match="feature_names"):
        Encoder.from_dict({**description, "feature_names": ["a"]})


def test_encoder_is_frozen() -> None:
    encoder = _example_encoder()
    with pytest.raises(AttributeError):
        encoder.fit_intercept = False  # type: ignore[misc]


# ---------------------------------------------------------------------------------------------
# Schema validation (public metadata only)
# ---------------------------------------------------------------------------------------------


def test_rejects_empty_schema_without_intercept() -> None:
    with pytest.raises(ValueError, match="at least one"):
        Encoder((), False)


def test_rejects_duplicate_columns() -> None:
    with pytest.raises(ValueError, match="more than once"):
        Encoder((NumericFeature(name="a", min=0, max=1), NumericFeature(name="a", min=0, max=2)))


def test_rejects_categories_equal_after_normalisation() -> None:
    with pytest.raises(ValueError, match="same value"):
        Encoder((CategoricalFeature(name="c", categories=["3", 3.0]),))


def test_rejects_infinite_bounds() -> None:
    with pytest.raises(ValueError, match="finite"):
        Encoder((NumericFeature(name="a", min=-math.inf, max=0),))


def test_accepts_feature_dicts() -> None:
    encoder = Encoder(({"name": "a", "type": "numeric", "min": 0, "max": 1},), False)
    assert encoder.features == (NumericFeature(name="a", min=0, max=1),)


def test_numeric_labels_are_read_as_numbers_and_clipped_to_the_public_bound() -> None:
    label = LabelSpec(column="y", type="numeric")
    frame = pd.DataFrame({"y": [1.5, -300.0, None, "abc", 7]})
    assert encode_labels(frame, label).tolist() == [1.5, -300.0, 0.0, 0.0, 7.0]
    assert encode_labels(frame, label, bound=5.0).tolist() == [1.5, -5.0, 0.0, 0.0, 5.0]


def test_label_spec_requires_values_only_for_binary() -> None:
    import pydantic

    with pytest.raises(pydantic.ValidationError):
        LabelSpec(column="y")
    with pytest.raises(pydantic.ValidationError):
        LabelSpec(column="y", type="numeric", positive=1)


def test_one_hot_columns_are_the_categorical_blocks_from_the_schema_alone() -> None:
    """The encoded feature columns of each categorical feature's block (intercept excluded), in
    order — what the column scales never amplify (``kits/column_scales.py``)."""
    encoder = Encoder(
        [
            NumericFeature(name="a", min=0, max=1),
            CategoricalFeature(name="b", categories=["x", "y", "z"]),
            NumericFeature(name="c", min=0, max=1),
            CategoricalFeature(name="d", categories=["p", "q"]),
        ]
    )
    assert encoder.one_hot_columns == (1, 2, 3, 5, 6)
    names = encoder.feature_names
    assert [j for j, name in enumerate(names) if "=" in name] == list(encoder.one_hot_columns)
    assert Encoder([NumericFeature(name="a", min=0, max=1)]).one_hot_columns == ()
