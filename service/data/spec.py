"""The public schema of a registered dataset: label and feature columns with declared bounds.

These are pydantic models because they are part of the HTTP contract (the dataset registration
body) *and* the input of the loader. Everything here is public metadata chosen by the owner
before any data is read; nothing in it is ever derived from the rows.
"""

from __future__ import annotations

import math
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from service.data.limits import DEFAULT_LIMITS

LabelValue = str | int | float | bool

#: The default cap on declared categories of one categorical feature, and on a label's
#: classes (``DPFIT_MAX_CATEGORIES`` sets the operator's own, :mod:`service.data.limits`): the
#: encoded dimension — and so a job's memory — grows with them. Validation with a context
#: ``{"max_categories": k}`` applies ``k`` instead; registration also applies the operator's
#: setting (:func:`service.data.reader.check_category_limits`).
MAX_CATEGORIES = DEFAULT_LIMITS.max_categories


def _category_cap(values: list[LabelValue], info: ValidationInfo, what: str) -> None:
    context = info.context if isinstance(info.context, dict) else {}
    cap = int(context.get("max_categories", MAX_CATEGORIES))
    if len(values) > cap:
        raise ValueError(f"at most {cap} {what} may be declared (DPFIT_MAX_CATEGORIES)")


class NumericFeature(BaseModel):
    """A numeric column with declared public bounds; values are clipped into [min, max]."""

    # Both bounds are finite numbers (NaN and ±inf — JSON's 1e400 parses to inf — are refused on
    # the field) and max > min. A *new* spec must also have a finite span max − min
    # (span_is_finite, checked by the registration body): the affine map onto [−1, 1] divides
    # by it. The span rule is not part of this model, so specs stored before it (e.g.
    # [−1e308, 1e308], which the encoder maps through the midpoint) still load.

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, description="Column name in the source.")
    type: Literal["numeric"] = "numeric"
    min: float = Field(allow_inf_nan=False, description="Declared public lower bound.")
    max: float = Field(allow_inf_nan=False, description="Declared public upper bound (> min).")

    @model_validator(mode="after")
    def _bounds_ordered(self) -> NumericFeature:
        if not self.max > self.min:
            raise ValueError("max must be greater than min")
        return self


def span_is_finite(feature: NumericFeature) -> bool:
    """Whether ``max − min`` is a finite float64 (both bounds are finite by the model; their
    difference overflows for spans beyond ~1.8e308)."""
    return math.isfinite(feature.max - feature.min)


class CategoricalFeature(BaseModel):
    """A categorical column with its declared public category list (one-hot encoded).

    Values outside the list encode as all zeros.
    """

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, description="Column name in the source.")
    type: Literal["categorical"] = "categorical"
    categories: list[LabelValue] = Field(min_length=1, description="Declared public categories.")

    @field_validator("categories")
    @classmethod
    def _unique(cls, categories: list[LabelValue], info: ValidationInfo) -> list[LabelValue]:
        _category_cap(categories, info, "categories")
        if len({str(c) for c in categories}) != len(categories):
            raise ValueError("categories must be distinct")
        return categories


Feature = Annotated[NumericFeature | CategoricalFeature, Field(discriminator="type")]


class LabelSpec(BaseModel):
    """The label column: binary (which value is positive, which negative) or numeric.

    Binary labels map to ±1; rows whose label is not ``positive`` count as negative. Numeric
    labels (for regression models) are read as numbers, missing/non-numeric values as 0, and
    clipped to the model's declared public ``label_bound`` when a job reads them.
    """

    model_config = ConfigDict(extra="forbid")

    column: str = Field(min_length=1)
    type: Literal["binary", "categorical", "numeric"] = Field(
        default="binary",
        description="binary: classification; categorical: multiclass (a joint multinomial "
        "model, or one-vs-rest); numeric: regression.",
    )
    positive: LabelValue | None = Field(
        default=None, description="Binary labels: the value of the positive class."
    )
    negative: LabelValue | None = Field(
        default=None, description="Binary labels: the value of the negative class."
    )
    classes: list[LabelValue] | None = Field(
        default=None,
        description="Categorical labels: the declared public classes (rows with any other "
        "value belong to none of them).",
    )

    @field_validator("classes")
    @classmethod
    def _classes_capped(
        cls, classes: list[LabelValue] | None, info: ValidationInfo
    ) -> list[LabelValue] | None:
        if classes is not None:
            _category_cap(classes, info, "classes")
        return classes

    @model_validator(mode="after")
    def _consistent(self) -> LabelSpec:
        if self.type != "categorical" and self.classes is not None:
            raise ValueError("only a categorical label takes 'classes'")
        if self.type == "categorical":
            if self.positive is not None or self.negative is not None:
                raise ValueError("a categorical label takes 'classes', not positive/negative")
            if not self.classes or len(self.classes) < 2:
                raise ValueError("a categorical label needs at least two classes")
            if len({str(c) for c in self.classes}) != len(self.classes):
                raise ValueError("classes must be distinct")
        elif self.type == "binary":
            if self.positive is None or self.negative is None:
                raise ValueError("a binary label needs both 'positive' and 'negative'")
            if str(self.positive) == str(self.negative):
                raise ValueError("positive and negative must differ")
        elif self.positive is not None or self.negative is not None:
            raise ValueError("a numeric label takes no 'positive'/'negative' values")
        return self
