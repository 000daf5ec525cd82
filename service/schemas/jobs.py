"""Jobs: submission, estimate, status and progress."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    Field,
    field_validator,
)

from service.models.registry import ModelSpec
from service.schemas.common import (
    MIN_EPSILON,
    MIN_POSITIVE_DELTA,
    FreeFormProblem,
    JobStatus,
    PrivacyOut,
    Strict,
    nested_too_deep,
    strictly,
    zero_or_large_enough,
)

#: How deep one optimizer parameter may nest arrays and objects. A parameter is a number, a
#: string or a boolean, or for private_selection / private_tuning a list of candidate objects
#: holding their own parameters (3 levels; 6 if a candidate's optimizer took candidates).
MAX_PARAM_NESTING = 8


class OptimizerChoice(Strict):
    name: str = Field(description="An optimizer from GET /v1/optimizers.")
    params: dict[str, Any] = Field(
        default_factory=dict,
        description="The optimizer's parameters (its `params` schema in GET /v1/optimizers): "
        "numbers, strings, booleans, and for private_selection and private_tuning a list of "
        f"candidate objects; at most {MAX_PARAM_NESTING} levels of arrays and objects deep.",
    )

    @classmethod
    def free_form_problem(cls, data: dict[str, Any]) -> FreeFormProblem | None:
        return params_problem(data.get("params"), ("params",))


def params_problem(params: Any, at: tuple[str | int, ...]) -> FreeFormProblem | None:
    """A parameter nested more than :data:`MAX_PARAM_NESTING` levels deep, reported on the
    parameter itself (``<at>.<name>``); the depth is checked without recursion."""
    if not isinstance(params, dict):
        return None  # not an object: the schema says so on the field itself
    for name, value in params.items():
        if nested_too_deep({name: value}, MAX_PARAM_NESTING) is not None:
            return (
                (*at, name),
                "too_deep",
                f"nested too deeply: an optimizer parameter holds at most {MAX_PARAM_NESTING} "
                "levels of arrays and objects (parameters are numbers, strings, booleans and, "
                "for private_selection and private_tuning, a list of candidate objects)",
            )
    return None


class JobPrivacy(Strict):
    # allow_inf_nan=False: NaN or ±Infinity is "a finite number" error, not a range's message
    epsilon: float = Field(ge=MIN_EPSILON, le=1000, allow_inf_nan=False)
    delta: float = Field(
        ge=0,
        lt=1,
        allow_inf_nan=False,
        description=f"0 asks for pure ε-DP; otherwise at least {MIN_POSITIVE_DELTA:g}.",
    )

    _delta_bound = field_validator("delta")(zero_or_large_enough)


class JobCreate(Strict):
    dataset_id: str
    model: Annotated[ModelSpec, strictly(ModelSpec)]
    optimizer: OptimizerChoice = Field(
        default_factory=lambda: OptimizerChoice(name="auto"),
        description="Default `auto`: the service picks the optimizer and its hyper-parameters "
        "from public facts (n, d, bounds, ε, δ, model) and records the choice in the plan.",
    )
    privacy: JobPrivacy

    @classmethod
    def free_form_problem(cls, data: dict[str, Any]) -> FreeFormProblem | None:
        # before the whole body's depth limit, so a deep parameter is named as itself
        optimizer = data.get("optimizer")
        if isinstance(optimizer, dict):
            return params_problem(optimizer.get("params"), ("optimizer", "params"))
        return None


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
    """What `POST /v1/jobs` would do with this body now; nothing is charged or written. The
    job's own (ε, δ) is `privacy`, the dataset's total budget `budget`; the top-level `epsilon`
    and `delta` are the budget's, deprecated (kept for existing clients)."""

    dataset_id: str
    admissible: bool = Field(description="Whether the budget (and your cap) admits the job now.")
    reason: str = Field(description="Why it fits, or why not and what remains.")
    privacy: PrivacyOut = Field(description="The job's own (ε, δ), as requested.")
    budget: PrivacyOut = Field(
        description="The dataset's total budget (ε_B, δ_B), not the job's: the `budget` of "
        "GET /v1/datasets/{id}. The ε figures below are at its δ_B."
    )
    epsilon: float = Field(
        deprecated=True,
        description="Deprecated: the dataset's total ε_B (= `budget.epsilon`), NOT the job's ε "
        "(that is `privacy.epsilon`).",
    )
    delta: float = Field(
        deprecated=True,
        description="Deprecated: the dataset's total δ_B (= `budget.delta`), NOT the job's δ "
        "(that is `privacy.delta`).",
    )
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
