"""Released models, prediction and private evaluation."""

from __future__ import annotations

import sys
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from service.data.spec import LabelValue
from service.privacy.evaluation import MAX_CONFUSION_CLASSES
from service.schemas.common import (
    FreeFormProblem,
    JobStatus,
    PrivacyOut,
    Strict,
)
from service.schemas.jobs import JobPrivacy


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
    rows: list[dict[str, Any]] = Field(
        min_length=1,
        max_length=100_000,
        description="Your rows in the dataset's raw schema, one object each: every feature "
        "column present (null for a missing value), each cell one value — a number, a string, "
        "a boolean or null, never an array or object. Other keys are ignored.",
    )

    @classmethod
    def free_form_problem(cls, data: dict[str, Any]) -> FreeFormProblem | None:
        """The first cell that is an array or object, at ``rows.<i>.<column>``: one pass over
        the cells, none walked into."""
        rows = data.get("rows")
        if not isinstance(rows, list):
            return None
        for i, row in enumerate(rows):
            if not isinstance(row, dict):
                continue  # the schema refuses it on rows.<i>
            for column, cell in row.items():
                if isinstance(cell, dict | list):
                    return (("rows", i, column), "cell_type", CELL_MESSAGE)
        return None


CELL_MESSAGE = (
    "a prediction cell is one value: a number, a string, a boolean or null, not an array or object"
)


class PredictionWarningOut(BaseModel):
    row: int = Field(description="0-based index of the row in the request.")
    column: str = Field(description="The feature column.")
    kind: Literal["unknown_category", "out_of_bounds", "missing"]
    message: str = Field(description="What was done to the value.")


class PredictResponse(BaseModel):
    predictions: list[LabelValue] = Field(
        description="Classification: the dataset's label values; regression: w·x."
    )
    probabilities: list[float] | None = Field(
        description="Binary: the model's score for the positive class; multiclass: the "
        "predicted class's probability (the softmax of a joint model's K scores, the "
        "normalised scores of a one-vs-rest model); regression: null."
    )
    warnings: list[PredictionWarningOut] = Field(
        default_factory=list,
        description="Cells of your rows whose encoding changed their meaning, row by row: a "
        "value that is not a declared category (scored as none of them), a number outside the "
        "declared [min, max] (clipped), a missing or unconvertible value (scored as missing). "
        "Computed from your rows and the public schema only. At most 1000 are listed.",
    )
    warnings_total: int = Field(
        default=0, description="How many warnings there are (more than listed past 1000)."
    )


#: The smallest accepted ``loss_clip``: the smallest normal float64 (IEEE 754). A subnormal B
#: has fewer significant bits than every normal float, and the plan's public statement of the
#: noise, ``log_loss_std`` / ``mean_squared_error_std`` = B·σ/n, underflows (to exactly 0 for
#: the smallest subnormals): the plan would misstate the release.
MIN_LOSS_CLIP = sys.float_info.min


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
        description="Declared clip B of each row's loss (log-loss, or squared error); binary "
        "and numeric labels only (a categorical label's evaluation releases accuracy and a "
        "confusion matrix, no loss, and refuses loss_clip). A normal positive float64 (at "
        f"least {MIN_LOSS_CLIP:.1e}). "
        "Default: the largest loss any row within the declared bounds can have under this model "
        "(log(1 + e^‖w‖), or (‖w‖ + label bound)²), so nothing is clipped.",
    )

    @field_validator("loss_clip")
    @classmethod
    def _normal(cls, value: float | None) -> float | None:
        if value is not None and value < MIN_LOSS_CLIP:
            raise ValueError(
                f"must be at least {MIN_LOSS_CLIP:.1e} (the smallest normal float64): a "
                "subnormal clip would make the plan's stated noise underflow"
            )
        return value


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
        "accuracy, confusion_matrix (K × K: rows true class, columns predicted, in the label's "
        "declared order) and undeclared_label_predictions (categorical; accuracy alone above "
        f"{MAX_CONFUSION_CLASSES} declared classes, as the plan's warnings say) or "
        "mean_squared_error (regression).",
    )
    error: str | None = None
    refunded: bool = Field(
        default=False,
        description="Whether its charge was refunded (e.g. cancelled before a worker read the "
        "data), as GET /v1/jobs/{id} says.",
    )
    created_at: datetime
    finished_at: datetime | None = None
