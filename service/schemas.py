"""Pydantic request/response models: the HTTP contract (openapi.yaml is generated from these)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from service.data.spec import CategoricalFeature, Feature, LabelSpec, LabelValue, NumericFeature
from service.models.registry import ModelSpec

__all__ = [
    "CategoricalFeature",
    "Feature",
    "LabelSpec",
    "NumericFeature",
]

Role = Literal["admin", "owner", "analyst"]
JobStatus = Literal["queued", "running", "succeeded", "failed", "cancelled"]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# --- keys -----------------------------------------------------------------------------------


class KeyCreate(Strict):
    name: str = Field(
        min_length=1,
        max_length=200,
        pattern=r"^[A-Za-z0-9_.@-]+$",
        description="The principal this key authenticates (used in dataset grants).",
    )
    role: Role


class KeyOut(BaseModel):
    id: str
    name: str
    role: Role
    created_at: datetime
    revoked_at: datetime | None


class KeyCreated(BaseModel):
    id: str
    name: str
    role: Role
    key: str = Field(description="The API key. Shown once; only its hash is stored.")
    created_at: datetime


# --- datasets ---------------------------------------------------------------------------------


class PrivacyBudget(Strict):
    epsilon: float = Field(gt=0, le=1000, description="Total ε_B of the dataset.")
    delta: float = Field(
        ge=0, lt=1, description="Total δ_B. 0 makes the dataset pure ε-DP (basic composition)."
    )


class DatasetSource(Strict):
    uri: str = Field(
        min_length=1,
        description="A path relative to an allowed data root, or a file:// URI inside one.",
    )
    format: Literal["csv", "parquet"] | None = Field(
        default=None, description="Detected from the suffix when omitted."
    )


class DatasetCreate(Strict):
    name: str = Field(min_length=1, max_length=200)
    source: DatasetSource
    label: LabelSpec
    features: list[Feature] = Field(min_length=1)
    budget: PrivacyBudget


class DatasetOut(BaseModel):
    id: str
    name: str
    owner: str
    n_rows: int
    n_features: int
    label: LabelSpec
    features: list[Feature]
    budget: PrivacyBudget
    fingerprint: str | None = Field(default=None, description="Shown to the owner only.")
    source: DatasetSource | None = Field(default=None, description="Shown to the owner only.")
    created_at: datetime


class GrantCreate(Strict):
    principal: str = Field(min_length=1, max_length=200)
    epsilon_cap: float | None = Field(
        default=None,
        gt=0,
        description="Optional cap on what this principal's jobs may spend (ε at δ_B). "
        "Granting again updates it.",
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
        description="ε spent at δ_B (RDP filter; basic composition if δ_B = 0)."
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
    event: dict[str, Any]
    created_at: datetime


class LedgerOut(BaseModel):
    dataset_id: str
    orders: list[float]
    charges: list[ChargeOut]
    cached_rdp: list[float | None] = Field(description="The dataset's cached total.")
    recomputed_rdp: list[float | None] = Field(description="The total recomputed from the rows.")
    cached_pure_epsilon: float
    recomputed_pure_epsilon: float
    consistent: bool


# --- jobs --------------------------------------------------------------------------------------


class OptimizerChoice(Strict):
    name: str = Field(description="An optimizer from GET /v1/optimizers.")
    params: dict[str, Any] = Field(default_factory=dict)


class JobPrivacy(Strict):
    epsilon: float = Field(gt=0, le=1000)
    delta: float = Field(ge=0, lt=1, description="0 asks for pure ε-DP.")


class JobCreate(Strict):
    dataset_id: str
    model: ModelSpec
    optimizer: OptimizerChoice
    privacy: JobPrivacy


class Progress(BaseModel):
    step: int
    total: int


class JobOut(BaseModel):
    id: str
    dataset_id: str
    status: JobStatus
    progress: Progress
    model: dict[str, Any]
    optimizer: OptimizerChoice
    privacy: JobPrivacy
    plan: dict[str, Any] = Field(
        description="Public, data-independent release plan: mechanism, noise, sensitivity, steps."
    )
    model_id: str | None = None
    error: str | None = None
    refunded: bool = False
    created_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None


# --- models ------------------------------------------------------------------------------------


class ModelPrivacy(BaseModel):
    epsilon: float
    delta: float
    mechanism: str
    noise_scale: float
    sensitivity: float


class ModelOut(BaseModel):
    id: str
    job_id: str
    dataset_id: str
    model: dict[str, Any]
    coefficients: list[float] | list[list[float]] = Field(
        description="One weight per encoded feature; for a categorical label, one row per class."
    )
    intercept: float | list[float] | None
    classes: list[LabelValue] | None = Field(
        default=None, description="Categorical labels: the class of each coefficient row."
    )
    feature_names: list[str]
    encoding: dict[str, Any] = Field(description="The public encoding the coefficients apply to.")
    privacy: ModelPrivacy
    created_at: datetime


class PredictRequest(Strict):
    rows: list[dict[str, Any]] = Field(min_length=1, max_length=100_000)


class PredictResponse(BaseModel):
    predictions: list[LabelValue] = Field(
        description="Classification: the dataset's label values; regression: w·x."
    )
    probabilities: list[float] | None = Field(
        description="Binary: the model's score for the positive class; multiclass: the "
        "normalised one-vs-rest score of the predicted class; regression: null."
    )


# --- catalog -----------------------------------------------------------------------------------


class OptimizerInfo(BaseModel):
    name: str
    summary: str
    assumptions: str
    guarantee: str
    reference: str
    params: dict[str, Any] = Field(description="JSON schema of the optimizer's parameters.")


class Health(BaseModel):
    status: Literal["ok"]
    database: str
    workers: str


# --- errors ------------------------------------------------------------------------------------


class FieldProblem(BaseModel):
    field: str
    message: str


class Problem(BaseModel):
    """RFC 9457 problem details, with the field at fault."""

    type: str = "about:blank"
    title: str
    status: int
    detail: str
    field: str | None = None
    errors: list[FieldProblem] | None = None
    epsilon_remaining: float | None = Field(
        default=None, description="On 409: the dataset's remaining ε at δ_B."
    )
