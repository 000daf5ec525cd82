"""The model catalog: the job spec's ``model`` field and how each spec becomes a :class:`Loss`.

To add a model: in its own module of this package, write its spec (a pydantic model with a
unique ``type`` literal) and its loss, and bind ``SPEC = <spec class>`` and
``build(spec) -> Loss`` at module level. Modules are discovered in name order, so ``ModelSpec``
(a discriminated union on ``type``) and the OpenAPI document are deterministic.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from typing import Annotated, Any, Union, get_args

from pydantic import BaseModel, Field, TypeAdapter

import service.models as package
from service.models.base import Loss

__all__ = ["ModelSpec", "build_loss", "is_joint_multiclass", "model_names", "parse_model_spec"]


def _discover() -> dict[type[BaseModel], Callable[[Any], Loss]]:
    found: dict[type[BaseModel], Callable[[Any], Loss]] = {}
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        spec = getattr(module, "SPEC", None)
        if spec is not None:
            found[spec] = module.build
    return found


_BUILDERS = _discover()

ModelSpec = Annotated[
    Union[tuple(_BUILDERS)],  # type: ignore[valid-type]  # noqa: UP007 - built from discovery
    Field(discriminator="type"),
]


def parse_model_spec(payload: Any) -> BaseModel:
    """Validate a JSON-like ``model`` object into its spec (raises pydantic ValidationError)."""
    result: BaseModel = TypeAdapter(ModelSpec).validate_python(payload)
    return result


def build_loss(spec: BaseModel, classes: int | None = None) -> Loss:
    """The loss (with its constants L, β, μ) that ``spec`` describes; ``classes``: the label's
    public class count, which a joint multiclass loss (one with ``with_classes``) is bound to."""
    try:
        builder = _BUILDERS[type(spec)]
    except KeyError:
        raise KeyError(f"no loss registered for model spec {type(spec).__name__}") from None
    loss = builder(spec)
    bind = getattr(loss, "with_classes", None)
    if bind is not None and classes is not None:
        bound: Loss = bind(classes)
        return bound
    return loss


def is_joint_multiclass(loss: Loss) -> bool:
    """Whether ``loss`` fits all classes of a categorical label at once (one parameter vector
    of K·d entries, one release) rather than one binary problem per class."""
    return hasattr(loss, "with_classes")


def model_names() -> list[str]:
    """The ``type`` values of every registered model."""
    return [str(get_args(cls.model_fields["type"].annotation)[0]) for cls in _BUILDERS]
