"""The model catalog: the job spec's ``model`` field and how each spec becomes a :class:`Loss`.

To add a model: write its spec (a pydantic model with a unique ``type`` literal) and its loss,
add the spec to the ``ModelSpec`` union and a builder to ``_BUILDERS``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Annotated, Any, Union, get_args

from pydantic import BaseModel, Field, TypeAdapter

from service.models.base import Loss
from service.models.logistic import LogisticLoss, LogisticRegressionSpec

__all__ = ["ModelSpec", "build_loss", "model_names", "parse_model_spec"]

# A discriminated union on "type"; add new specs as further members of the Union.
ModelSpec = Annotated[
    Union[LogisticRegressionSpec],  # noqa: UP007 - a one-member union that will grow
    Field(discriminator="type"),
]


def _logistic(spec: BaseModel) -> Loss:
    assert isinstance(spec, LogisticRegressionSpec)
    return LogisticLoss(l2=spec.l2)


_BUILDERS: Mapping[type[BaseModel], Callable[[BaseModel], Loss]] = MappingProxyType(
    {LogisticRegressionSpec: _logistic}
)


def parse_model_spec(payload: Any) -> BaseModel:
    """Validate a JSON-like ``model`` object into its spec (raises pydantic ValidationError)."""
    result: BaseModel = TypeAdapter(ModelSpec).validate_python(payload)
    return result


def build_loss(spec: BaseModel) -> Loss:
    """The loss (with its constants L, β, μ) that ``spec`` describes."""
    try:
        builder = _BUILDERS[type(spec)]
    except KeyError:
        raise KeyError(f"no loss registered for model spec {type(spec).__name__}") from None
    return builder(spec)


def model_names() -> list[str]:
    """The ``type`` values of every registered model."""
    return [str(get_args(cls.model_fields["type"].annotation)[0]) for cls in _BUILDERS]
