"""The typed plan→fit contract: a frozen config per optimizer over ``ReleasePlan.hyperparameters``.

A plan's hyper-parameters are stored as JSON (jobs table) and a queued job is re-run from that
JSON, possibly by a later release. ``fit`` therefore never reads the dict by string keys: it
reads a frozen dataclass, :class:`PlanConfig` subclass, built by
:meth:`PlanConfig.from_hyperparameters`. A field's name IS the stored key; its annotation is
the type the value is converted to (``int``, ``float``, ``bool``, ``str``, ``tuple[int, ...]``,
``tuple[float, ...]``, optional ``X | None``, or ``Any`` for nested JSON kept as is).

Compatibility rules (docs/adding-an-optimizer.md, "Stored plans"): never remove or rename a
field, add only fields with a default (old plans lack them), never change what a value means.
A stored plan missing a required field raises ``ValueError`` naming it (never a ``KeyError``).
:meth:`PlanConfig.to_hyperparameters` gives back the keys the config reads, with the JSON types
(lists for tuples), equal to the stored values.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from functools import cache
from typing import Any, Self

__all__ = ["GradientStepsConfig", "PlanConfig", "ShapeConfig"]


def _convert(kind: Any, value: Any) -> Any:
    origin = typing.get_origin(kind)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(kind) if a is not type(None)]
        return None if value is None else _convert(options[0], value)
    if origin is tuple:
        item = typing.get_args(kind)[0]
        return tuple(_convert(item, v) for v in value)
    if kind in (int, float, str, bool):
        return kind(value)
    return value


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


@dataclasses.dataclass(frozen=True)
class PlanConfig:
    """Base of every optimizer's config (see the module docstring)."""

    @classmethod
    def from_hyperparameters(cls, hp: Mapping[str, Any]) -> Self:
        hints = _hints(cls)
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            if f.name in hp:
                values[f.name] = _convert(hints[f.name], hp[f.name])
            elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise ValueError(f"the stored plan has no {f.name!r}")
        return cls(**values)

    def to_hyperparameters(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            out[f.name] = list(value) if isinstance(value, tuple) else value
        return out


@dataclasses.dataclass(frozen=True)
class ShapeConfig(PlanConfig):
    """The public row count and encoded dimension every plan stores."""

    n: int
    d: int


@dataclasses.dataclass(frozen=True)
class GradientStepsConfig(ShapeConfig):
    """T steps of constant size η (``dp_gd``, ``dp_agd``, ``dp_agd_averaged``,
    ``output_perturbation_gd``)."""

    iterations: int
    step_size: float
