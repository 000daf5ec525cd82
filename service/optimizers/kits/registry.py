"""The optimizer catalog (served by ``GET /v1/optimizers``).

To add an optimizer: implement :class:`service.optimizers.base.Optimizer` in its own module of
this package and bind the class to a module-level ``OPTIMIZER``. Modules are discovered in name
order, so the catalog is deterministic. Optimizers are stateless: each lookup returns a fresh
instance.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Mapping
from functools import cache
from types import MappingProxyType
from typing import Any

import service.optimizers as package
from service.optimizers.base import Optimizer

__all__ = ["catalog", "get_optimizer", "optimizer_names"]


@cache
def _optimizers() -> Mapping[str, type[Optimizer]]:
    found: dict[str, type[Optimizer]] = {}
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        cls = getattr(module, "OPTIMIZER", None)
        if cls is not None:
            if cls.name in found:
                raise RuntimeError(f"two optimizers are named {cls.name!r}")
            found[cls.name] = cls
    return MappingProxyType(found)


def get_optimizer(name: str) -> Optimizer:
    """The optimizer registered under ``name``; raises ``KeyError`` for an unknown name."""
    try:
        cls = _optimizers()[name]
    except KeyError:
        raise KeyError(f"unknown optimizer {name!r}") from None
    return cls()


def optimizer_names() -> list[str]:
    """Registered optimizer names, sorted."""
    return sorted(_optimizers())


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
        for cls in (_optimizers()[name] for name in optimizer_names())
    ]
