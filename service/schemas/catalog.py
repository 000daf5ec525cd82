"""The catalog, health, and the problem+json error body."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    Field,
)


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
