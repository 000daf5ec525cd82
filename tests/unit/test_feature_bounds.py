"""The numeric-feature bound rules of the spec model (service/data/spec.py) and of the
registration body (service/schemas/datasets.py): bounds are finite numbers everywhere; a new
spec's span max − min must be finite too, while a stored spec with an overflowing span (accepted
before the rule) still loads and encodes."""

from __future__ import annotations

import math

import numpy as np
import pytest
from pydantic import TypeAdapter, ValidationError

from service.data.encoding import Encoder
from service.data.spec import Feature, NumericFeature, span_is_finite
from service.schemas import DatasetCreate

FEATURES: TypeAdapter[list[Feature]] = TypeAdapter(list[Feature])


def body(low: float, high: float) -> dict[str, object]:
    return {
        "name": "x",
        "source": {"uri": "x.csv"},
        "label": {"column": "y", "positive": 1, "negative": 0},
        "features": [
            {"name": "c", "type": "categorical", "categories": ["a"]},
            {"name": "a", "type": "numeric", "min": low, "max": high},
        ],
        "budget": {"epsilon": 1.0, "delta": 1e-6},
    }


@pytest.mark.parametrize(
    ("low", "high", "field"),
    [
        (0.0, math.inf, "max"),
        (-math.inf, 0.0, "min"),
        (0.0, math.nan, "max"),
        (math.nan, 1.0, "min"),
    ],
)
def test_non_finite_bounds_are_refused_on_the_field(low: float, high: float, field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        NumericFeature(name="a", min=low, max=high)
    (error,) = caught.value.errors()
    assert error["loc"] == (field,)
    assert "finite number" in error["msg"]


def test_an_overflowing_span_is_refused_for_a_new_spec_on_max() -> None:
    with pytest.raises(ValidationError) as caught:
        DatasetCreate.model_validate(body(-1e308, 1e308))
    (error,) = caught.value.errors()
    assert error["loc"] == ("features", 1, "max")  # a path of the body
    assert "1e+308" not in error["msg"]
    assert DatasetCreate.model_validate(body(-8e307, 8e307)).features[1].max == 8e307


def test_a_stored_spec_with_an_overflowing_span_still_loads_and_encodes() -> None:
    stored = [{"name": "a", "type": "numeric", "min": -1e308, "max": 1e308}]
    (feature,) = FEATURES.validate_python(stored)
    assert isinstance(feature, NumericFeature) and not span_is_finite(feature)
    encoder = Encoder(stored, fit_intercept=False)
    encoded = encoder.encode_records([{"a": 0.0}, {"a": 5e307}, {"a": -1e308}])
    assert np.all(np.isfinite(encoded))
    assert encoded[:, 0].tolist() == [0.0, 0.5, -1.0]
