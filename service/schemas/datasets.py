"""Datasets: registration, validation report, grants, budget, history and ledger."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    Field,
    ValidationError,
    field_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from service.data.spec import (
    CategoricalFeature,
    Feature,
    LabelSpec,
    NumericFeature,
    span_is_finite,
)
from service.schemas.common import (
    MIN_EPSILON,
    MIN_POSITIVE_DELTA,
    PrivacyOut,
    Strict,
    strictly,
    zero_or_large_enough,
)


class PrivacyBudget(Strict):
    epsilon: float = Field(
        ge=MIN_EPSILON, le=1000, allow_inf_nan=False, description="Total ε_B of the dataset."
    )
    delta: float = Field(
        ge=0,
        lt=1,
        allow_inf_nan=False,
        description="Total δ_B. 0 makes the dataset pure ε-DP (basic composition); otherwise "
        f"at least {MIN_POSITIVE_DELTA:g}.",
    )

    _delta_bound = field_validator("delta")(zero_or_large_enough)


class DatasetSource(Strict):
    uri: str = Field(
        min_length=1,
        description="A path relative to an allowed data root, a file:// URI inside one, "
        "s3://bucket/key under an s3:// data root, or sql://<connection>/[<schema>.]<table> of "
        "an operator-configured connection.",
    )
    format: Literal["csv", "parquet"] | None = Field(
        default=None,
        description="Detected from the suffix when omitted (a folder is Parquet); ignored for "
        "s3:// and sql:// sources.",
    )


class DatasetSourceOut(BaseModel):
    uri: str = Field(description="The URI the owner registered.")
    format: Literal["csv", "parquet", "sql"]


def _bound(value: Any) -> float | None:
    """A JSON number as the strict schema takes it (not a boolean), if finite; else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:  # an integer beyond float64
        return None
    return number if math.isfinite(number) else None


def ordered_bounds(features: Any) -> Any:
    """Before the features are parsed: a numeric feature whose finite bounds are not ordered
    (``max`` ≤ ``min``) is refused on ``features.<i>.max``, the field at fault, quoting no value
    (:class:`~service.data.spec.NumericFeature` states the same rule as a whole-object error,
    which would name only ``features.<i>``). Anything else is left to the schema."""
    if not isinstance(features, list):
        return features
    errors = [
        InitErrorDetails(
            type=PydanticCustomError("bounds_order", "max must be greater than min"),
            loc=(i, "max"),
            input="",  # never echo the bounds
        )
        for i, feature in enumerate(features)
        if isinstance(feature, dict)
        and feature.get("type") == "numeric"
        and (low := _bound(feature.get("min"))) is not None
        and (high := _bound(feature.get("max"))) is not None
        and not high > low
    ]
    if errors:
        raise ValidationError.from_exception_data("DatasetCreate", errors)
    return features


def finite_spans(features: list[Any]) -> list[Any]:
    """A new feature spec's numeric spans ``max − min`` must be finite (the encoder divides
    by them); refused on ``features.<i>.max``, quoting no value. Stored specs are not
    re-checked (:class:`~service.data.spec.NumericFeature`)."""
    errors = [
        InitErrorDetails(
            type=PydanticCustomError(
                "finite_span",
                "max − min must be a finite number (the span of these bounds overflows)",
            ),
            loc=(i, "max"),
            input="",  # never echo the bounds
        )
        for i, feature in enumerate(features)
        if isinstance(feature, NumericFeature) and not span_is_finite(feature)
    ]
    if errors:
        raise ValidationError.from_exception_data("DatasetCreate", errors)
    return features


def _not_finite(value: Any) -> bool:
    return isinstance(value, float) and not math.isfinite(value)


def _value_error(loc: tuple[int | str, ...]) -> InitErrorDetails:
    return InitErrorDetails(
        type=PydanticCustomError(
            "finite_value", "a number here must be finite (NaN and ±Infinity are refused)"
        ),
        loc=loc,
        input="",
    )


def finite_feature_values(features: list[Any]) -> list[Any]:
    """A new spec's declared categories are strings, booleans or finite numbers: NaN and
    ±Infinity (JSON's 1e400) are refused on ``features.<i>.categories.<j>`` (NaN compares
    unequal to itself and cannot be stored as JSON on every backend)."""
    errors = [
        _value_error((i, "categories", j))
        for i, feature in enumerate(features)
        if isinstance(feature, CategoricalFeature)
        for j, value in enumerate(feature.categories)
        if _not_finite(value)
    ]
    if errors:
        raise ValidationError.from_exception_data("DatasetCreate", errors)
    return features


def finite_label_values(label: LabelSpec) -> LabelSpec:
    """The same rule for the label's ``positive``, ``negative`` and ``classes``."""
    errors = [
        _value_error((name,))
        for name in ("positive", "negative")
        if _not_finite(getattr(label, name))
    ] + [_value_error(("classes", j)) for j, c in enumerate(label.classes or []) if _not_finite(c)]
    if errors:
        raise ValidationError.from_exception_data("DatasetCreate", errors)
    return label


class DatasetCreate(Strict):
    name: str = Field(min_length=1, max_length=200)
    source: DatasetSource
    label: Annotated[LabelSpec, strictly(LabelSpec), AfterValidator(finite_label_values)]
    features: Annotated[
        list[Feature],
        strictly(list[Feature]),
        BeforeValidator(ordered_bounds),  # declared after `strictly`, so it runs before it
        AfterValidator(finite_spans),
        AfterValidator(finite_feature_values),
    ] = Field(min_length=1)
    budget: PrivacyBudget
    execution: Literal["workers", "in_database"] = Field(
        default="workers",
        description="Where jobs on this dataset compute. `workers` (the default): the service's "
        "workers read the rows. `in_database` (PostgreSQL tables only): the rows never leave "
        "the owner's database — each job encodes them there (the public encoding compiled to "
        "SQL) and only d-sized aggregates and iterates leave it; the noise is added by the "
        "worker. A governance choice of the owner that analysts cannot override; jobs are then "
        "limited to logistic regression (binary or one-vs-rest) and multinomial logistic "
        "regression with the full-gradient optimizers, and bolt_on_psgd on logistic regression.",
    )
    strict: bool | None = Field(
        default=None,
        description="How the validation report decides. Omitted (the default): refuse the "
        "source (422 naming the label field) when most labels are wrong — more than half of "
        "the non-empty label cells outside the declared values (for a numeric label: not "
        "numbers). true: refuse on any label outside the declared values and any non-empty "
        "cell that is not a number in a numeric feature or label. false: refuse nothing; the "
        "counts are in `validation`.",
    )


class FeatureValidation(BaseModel):
    """Counts over one declared feature column, from parsing the whole source at registration."""

    name: str
    missing: int = Field(description="Empty or absent cells (encoded as missing).")
    unparseable: int = Field(
        description="Non-empty cells that do not convert to the declared type (encoded as missing)."
    )
    out_of_bounds: int = Field(description="Numeric cells outside [min, max] (clipped).")
    unknown_category: int = Field(
        description="Categorical cells outside the declared categories (all-zero block)."
    )
    oversize: int = Field(
        default=0,
        description="Cells longer than DPFIT_MAX_CELL_BYTES (encoded as missing; not counted "
        "in `missing`).",
    )


class LabelValidation(BaseModel):
    """Counts over the label column."""

    column: str
    missing: int = Field(description="Empty or absent label cells.")
    outside_declared: int = Field(
        description="Binary/categorical labels: values outside the declared set."
    )
    unparseable: int = Field(description="Numeric labels: non-empty cells that are not numbers.")
    oversize: int = Field(
        default=0,
        description="Cells longer than DPFIT_MAX_CELL_BYTES (read as missing; not counted in "
        "`missing`).",
    )


class ValidationOut(BaseModel):
    """The owner's validation report: how the service's reader sees the source. Shown to the
    dataset's owner and to admins only, never to analysts."""

    rows: int
    features: list[FeatureValidation]
    label: LabelValidation


class DatasetOut(BaseModel):
    id: str
    name: str
    owner: str
    n_rows: int
    n_features: int
    label: LabelSpec
    features: list[Feature]
    budget: PrivacyOut = Field(description="Total ε_B and δ_B.")
    fingerprint: str | None = Field(default=None, description="Shown to the owner only.")
    source: DatasetSourceOut | None = Field(default=None, description="Shown to the owner only.")
    validation: ValidationOut | None = Field(
        default=None,
        description="The validation report of the registration. Shown to the owner and admins "
        "only (null for others, and for datasets registered before reports existed).",
    )
    execution: Literal["workers", "in_database"] = Field(
        default="workers",
        description="Where jobs compute: `workers` (the service reads the rows) or "
        "`in_database` (the rows never leave the owner's PostgreSQL database).",
    )
    created_at: datetime
    retired_at: datetime | None = Field(
        default=None, description="Set when an admin retired the dataset: no job is admitted."
    )
    duplicates: list[str] | None = Field(
        default=None,
        description="Admins only (null for everyone else): the ids of other datasets — of "
        "other owners — holding the same content (the whole source's or a member file's). "
        "Registration compares content only within one owner's datasets, so that it tells no "
        "owner anything about another's data; admins decide about such budgets (e.g. retire "
        "one).",
    )


class RegistrationRefusalOut(BaseModel):
    """Why a registration of the body would be refused after validation (the label rule or
    strict mode): the field at fault and the message a registration would answer with 422."""

    field: str
    detail: str


class DatasetValidationOut(BaseModel):
    """A dry run of `POST /v1/datasets`: what registering the body would do, nothing created."""

    would_register: bool = Field(
        description="Whether `POST /v1/datasets` with this body would register now (201)."
    )
    refusal: RegistrationRefusalOut | None = Field(
        default=None, description="Why it would be refused (422), when it would."
    )
    n_rows: int
    n_features: int
    validation: ValidationOut


class DatasetWithdrawalOut(BaseModel):
    """A dataset withdrawn by its owner or an admin before anything was charged on it: the
    dataset is gone (its claims released: the source may be registered again); this record
    stays for admins."""

    dataset_id: str
    name: str
    owner: str
    source_uri: str
    n_rows: int
    budget: PrivacyOut = Field(description="The budget it was registered with (never used).")
    registered_at: datetime
    withdrawn_by: str
    withdrawn_at: datetime


class GrantCreate(Strict):
    principal: str = Field(min_length=1, max_length=200)
    epsilon_cap: float | None = Field(
        default=None,
        ge=MIN_EPSILON,
        le=1000,
        allow_inf_nan=False,
        description="Optional cap on what this principal's jobs may spend (ε at δ_B): a finite "
        f"number from {MIN_EPSILON:g} up to the dataset's own ε_B (a larger cap would cap "
        "nothing and is refused; omit it for no cap). Granting again updates it.",
    )


class GrantOut(BaseModel):
    dataset_id: str
    principal: str
    epsilon_cap: float | None
    created_at: datetime


class BudgetOut(BaseModel):
    dataset_id: str
    epsilon: float = Field(description="Total ε_B.")
    delta: float = Field(description="Total δ_B.")
    epsilon_spent: float = Field(
        description="ε at δ_B of the standing charges' composition (exact Gaussian DP when all "
        "are Gaussian-family, else Rényi; basic composition if δ_B = 0)."
    )
    epsilon_remaining: float
    jobs_charged: int = Field(description="Jobs whose charge stands (charges minus refunds).")
    accounting: str = Field(description="How the budget composes.")
    your_epsilon_cap: float | None = Field(
        default=None, description="The cap of the caller's grant, if any."
    )
    your_epsilon_spent: float = Field(
        default=0.0, description="ε (at δ_B) spent by the caller's own jobs on this dataset."
    )


class ChargeOut(BaseModel):
    id: int
    job_id: str
    principal: str
    kind: Literal["charge", "refund"]
    epsilon: float
    delta: float
    rdp: list[float | None] = Field(description="RDP curve at `orders` (null = infinite).")
    pure_epsilon: float | None
    gdp_mu: float | None = Field(
        default=None, description="Exact μ of a Gaussian-family job (null: Rényi curve only)."
    )
    event: dict[str, Any]
    created_at: datetime


class BudgetHistoryPoint(BaseModel):
    at: datetime = Field(description="When the charge or refund was written.")
    kind: Literal["charge", "refund"]
    job_id: str | None = Field(description="Null for other analysts' jobs (not yours to see).")
    epsilon_spent: float = Field(description="The dataset's ε spent at δ_B after this row.")
    your_epsilon_spent: float = Field(description="ε at δ_B of your own standing charges.")


class BudgetHistoryOut(BaseModel):
    dataset_id: str
    epsilon: float = Field(description="Total ε_B.")
    delta: float = Field(description="Total δ_B.")
    points: list[BudgetHistoryPoint] = Field(description="Oldest first, one per ledger row.")


class LedgerOut(BaseModel):
    dataset_id: str
    orders: list[float]
    charges: list[ChargeOut]
    cached_rdp: list[float | None] = Field(description="The dataset's cached total.")
    recomputed_rdp: list[float | None] = Field(description="The total recomputed from the rows.")
    cached_pure_epsilon: float
    recomputed_pure_epsilon: float
    consistent: bool


class GrantListItem(GrantOut):
    """A grant as its dataset's owner sees it in `GET /v1/datasets/{id}/grants`."""

    epsilon_spent: float = Field(
        description="ε at δ_B of this principal's standing charges on the dataset (charges "
        "without a refund), composed as the budget composes them."
    )


class GrantRevokedOut(GrantOut):
    """The grant as it was when revoked. Revocation stops new jobs; the ledger is unchanged and
    jobs already admitted keep running and keep their charge."""

    revoked_at: datetime
