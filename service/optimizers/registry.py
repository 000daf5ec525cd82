"""The optimizer catalog (served by ``GET /v1/optimizers``).

To add an optimizer: implement :class:`service.optimizers.base.Optimizer` in its own module and
add its class to ``_OPTIMIZERS`` below. Optimizers are stateless, so each lookup returns a fresh
instance.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from service.optimizers.base import Optimizer
from service.optimizers.output_perturbation_gd import OutputPerturbationGD

__all__ = ["catalog", "get_optimizer", "optimizer_names"]

_OPTIMIZERS: Mapping[str, type[Optimizer]] = MappingProxyType(
    {cls.name: cls for cls in (OutputPerturbationGD,)}
)


def get_optimizer(name: str) -> Optimizer:
    """The optimizer registered under ``name``; raises ``KeyError`` for an unknown name."""
    try:
        cls = _OPTIMIZERS[name]
    except KeyError:
        raise KeyError(f"unknown optimizer {name!r}") from None
    return cls()


def optimizer_names() -> list[str]:
    """Registered optimizer names, sorted."""
    return sorted(_OPTIMIZERS)


def catalog() -> list[dict[str, Any]]:
    """One JSON-able entry per optimizer: its declarations and its parameters' JSON schema."""
    return [
        {
            "name": cls.name,
            "summary": cls.summary,
            "assumptions": cls.assumptions,
            "guarantee": cls.guarantee,
            "reference": cls.reference,
            "params": cls.Params.model_json_schema(),
        }
        for cls in (_OPTIMIZERS[name] for name in optimizer_names())
    ]
