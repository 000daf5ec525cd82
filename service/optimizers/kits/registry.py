"""The optimizer catalog (served by ``GET /v1/optimizers``).

To add an optimizer: implement :class:`service.optimizers.kits.base.Optimizer` in its own
module of :mod:`service.optimizers` (one algorithm per module; the shared parts live in
``kits/``, with this registry) and bind the class to a module-level ``OPTIMIZER``. Modules are
discovered in name order, so the catalog is deterministic. The discovery reads the algorithms'
folder and imports no package: the registry sits with the kits, below every algorithm.
Optimizers are stateless: each lookup returns a fresh instance.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

from service.optimizers.kits.base import Optimizer

__all__ = ["catalog", "get_optimizer", "optimizer_names"]

#: The package whose modules are the algorithms (this module's grandparent package).
_ALGORITHMS = __name__.rsplit(".", 2)[0]
_ALGORITHMS_DIR = Path(__file__).resolve().parent.parent


@cache
def _optimizers() -> Mapping[str, type[Optimizer]]:
    found: dict[str, type[Optimizer]] = {}
    for info in sorted(pkgutil.iter_modules([str(_ALGORITHMS_DIR)]), key=lambda m: m.name):
        if info.ispkg:  # kits/: the shared parts, no optimizer
            continue
        module = importlib.import_module(f"{_ALGORITHMS}.{info.name}")
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
