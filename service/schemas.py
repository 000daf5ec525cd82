"""Pydantic request/response models: the HTTP contract (openapi.yaml is generated from these)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from service import job_status, safe_text
from service.data.spec import CategoricalFeature, Feature, LabelSpec, LabelValue, NumericFeature
from service.models.registry import ModelSpec

__all__ = [
    "CategoricalFeature",
    "Feature",
    "LabelSpec",
    "NumericFeature",
]

Role = Literal["admin", "owner", "analyst"]
JobStatus = job_status.JobStatus


# Smallest accepted ε and smallest positive δ (jobs and budgets): below them the calibrations
# under/overflow (ε = 5e-324 made `math.log` fail, or a pure-DP noise scale infinite). Every
# optimizer's plan is checked at these bounds in tests/test_input_hygiene.py.
MIN_EPSILON = 1e-6
MIN_POSITIVE_DELTA = 1e-100


class Strict(BaseModel):
    """A request body (or part of one), validated at the HTTP edge.

    - unknown fields are refused (``extra="forbid"``);
    - JSON types are taken as sent (``strict=True``): ``true`` or ``"0.5"`` is not a number,
      ``1.0`` is not an integer; a JSON integer is a valid float;
    - no string anywhere inside (values and object keys, at any depth) holds a control
      character or a lone surrogate (service/safe_text.py), reported at its own field.

    Fields whose type is a model defined elsewhere (label, features, the model spec) are
    declared with :func:`strictly` so that they are validated strictly too.
    """

    model_config = ConfigDict(extra="forbid", strict=True)

    @model_validator(mode="wrap")
    @classmethod
    def _safe_text(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        path = safe_text.first_unsafe_path(data) if isinstance(data, dict) else None
        if path is not None:
            error = InitErrorDetails(
                type=PydanticCustomError("control_character", safe_text.MESSAGE),
                loc=path,
                input="",  # never echo the offending value
            )
            raise ValidationError.from_exception_data(cls.__name__, [error])
        return handler(data)


def strictly(kind: Any) -> BeforeValidator:
    """Validate a field of type ``kind`` (a model defined outside this module) strictly, as
    :class:`Strict` validates its own fields; errors keep their field paths."""
    adapter: TypeAdapter[Any] = TypeAdapter(kind)
    return BeforeValidator(lambda value: adapter.validate_python(value, strict=True))


def _zero_or_large_enough(value: float, info: ValidationInfo) -> float:
    if 0 < value < MIN_POSITIVE_DELTA:
        raise ValueError(f"must be 0 or at least {MIN_POSITIVE_DELTA:g}")
    return value


# --- keys -----------------------------------------------------------------------------------


class KeyCreate(Strict):
    name: str = Field(
        min_length=1,
        max_length=200,
        pattern=r"^[A-Za-z0-9_.@-]+$",
        description="The principal this key authenticates (used in dataset grants). A new name "
        "creates the principal; an existing name with the same role gets another key "
        "(rotation); an existing name with another role is refused (409).",
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
    epsilon: float = Field(ge=MIN_EPSILON, le=1000, description="Total ε_B of the dataset.")
    delta: float = Field(
        ge=0,
        lt=1,
        description="Total δ_B. 0 makes the dataset pure ε-DP (basic composition); otherwise "
        f"at least {MIN_POSITIVE_DELTA:g}.",
    )

    _delta_bound = field_validator("delta")(_zero_or_large_enough)


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


class DatasetCreate(Strict):
    name: str = Field(min_length=1, max_length=200)
    source: DatasetSource
    label: Annotated[LabelSpec, strictly(LabelSpec)]
    features: Annotated[list[Feature], strictly(list[Feature])] = Field(min_length=1)
    budget: PrivacyBudget
    strict: bool = Field(
        default=False,
        description="Refuse the source (422, naming the field) when label values lie outside "
        "the declared set or a numeric feature has non-empty cells that are not numbers. "
        "Without it the source is registered and the counts are in `validation`.",
    )


class FeatureValidation(BaseModel):
    """Counts over one declared feature column, from parsing the whole source at registration."""

    name: str
    missing: int = Field(description="Empty or absent cells (encoded as missing).")
    unparseable: int = Field(
        description="Non-empty cells that do not convert to the declared type (encoded as "
        "missing)."
    )
    out_of_bounds: int = Field(description="Numeric cells outside [min, max] (clipped).")
    unknown_category: int = Field(
        description="Categorical cells outside the declared categories (all-zero block)."
    )


class LabelValidation(BaseModel):
    """Counts over the label column."""

    column: str
    missing: int = Field(description="Empty or absent label cells.")
    outside_declared: int = Field(
        description="Binary/categorical labels: values outside the declared set."
    )
    unparseable: int = Field(description="Numeric labels: non-empty cells that are not numbers.")


class ValidationOut(BaseModel):
    """The owner's validation report: how the service's reader sees the source. Shown to the
    dataset's owner and to admins only, never to analysts."""

    rows: int
    features: list[FeatureValidation]
    label: LabelValidation


class PrivacyOut(BaseModel):
    """An (ε, δ) as stored: responses carry no request bounds, so rows admitted under older,
    looser rules are still shown."""

    epsilon: float
    delta: float


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
    created_at: datetime
    retired_at: datetime | None = Field(
        default=None, description="Set when an admin retired the dataset: no job is admitted."
    )


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


# --- jobs --------------------------------------------------------------------------------------


class OptimizerChoice(Strict):
    name: str = Field(description="An optimizer from GET /v1/optimizers.")
    params: dict[str, Any] = Field(default_factory=dict)


class JobPrivacy(Strict):
    epsilon: float = Field(ge=MIN_EPSILON, le=1000)
    delta: float = Field(
        ge=0, lt=1, description=f"0 asks for pure ε-DP; otherwise at least {MIN_POSITIVE_DELTA:g}."
    )

    _delta_bound = field_validator("delta")(_zero_or_large_enough)


class JobCreate(Strict):
    dataset_id: str
    model: Annotated[ModelSpec, strictly(ModelSpec)]
    optimizer: OptimizerChoice = Field(
        default_factory=lambda: OptimizerChoice(name="auto"),
        description="Default `auto`: the service picks the optimizer and its hyper-parameters "
        "from public facts (n, d, bounds, ε, δ, model) and records the choice in the plan.",
    )
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
    privacy: PrivacyOut
    plan: dict[str, Any] = Field(
        description="Public, data-independent release plan: mechanism, noise, sensitivity, steps."
    )
    model_id: str | None = None
    error: str | None = None
    refunded: bool = False
    created_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None


class JobEstimateOut(BaseModel):
    """What `POST /v1/jobs` would do with this body now; nothing is charged or written."""

    dataset_id: str
    admissible: bool = Field(description="Whether the budget (and your cap) admits the job now.")
    reason: str = Field(description="Why it fits, or why not and what remains.")
    epsilon: float = Field(description="The dataset's ε_B.")
    delta: float = Field(description="The dataset's δ_B.")
    epsilon_spent: float = Field(description="ε spent at δ_B before the job.")
    epsilon_spent_after: float = Field(description="ε spent at δ_B if the job were charged.")
    epsilon_remaining_after: float = Field(description="ε_B − epsilon_spent_after, at least 0.")
    accounting: Literal["gaussian", "renyi", "pure"] = Field(
        description="How the ledger charges the job: exact Gaussian DP (μ), a Rényi curve, or "
        "pure ε (basic composition)."
    )
    gdp_mu: float | None = Field(description="The job's exact μ (Gaussian-family jobs).")
    mechanism: str
    noise_scale: float
    sensitivity: float
    steps: int
    plan: dict[str, Any] = Field(description="The release plan a submission would store.")


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


class EvaluationCreate(Strict):
    dataset_id: str = Field(
        description="A dataset you are granted with the model's schema: the training dataset "
        "or a holdout its owner registered. Its ledger pays for the evaluation."
    )
    privacy: JobPrivacy
    loss_clip: float | None = Field(
        default=None,
        gt=0,
        allow_inf_nan=False,
        description="Declared clip B of each row's loss (log-loss, or squared error). Default: "
        "the largest loss any row within the declared bounds can have under this model "
        "(log(1 + e^‖w‖), or (‖w‖ + label bound)²), so nothing is clipped.",
    )


class EvaluationOut(BaseModel):
    """A private evaluation: an ordinary job (charged on the dataset's ledger) whose result is
    noised metrics of the model on the dataset's rows."""

    id: str = Field(description="The evaluation job's id (also shown by GET /v1/jobs/{id}).")
    model_id: str
    dataset_id: str
    status: JobStatus
    privacy: PrivacyOut
    plan: dict[str, Any] = Field(
        description="Public release plan: Gaussian noise σ per released sum, sensitivity, clip."
    )
    metrics: dict[str, Any] | None = Field(
        default=None,
        description="When succeeded: noised accuracy, log_loss and confusion_matrix (binary), "
        "accuracy (categorical) or mean_squared_error (regression).",
    )
    error: str | None = None
    created_at: datetime
    finished_at: datetime | None = None


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
    dataset_id: str | None = Field(
        default=None,
        description="On 409 for a source that is already registered: the dataset it backs "
        "(given to that dataset's owner and to admins only).",
    )


# --- grants: list and revoke (issue 12) -------------------------------------------------------


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
