"""What the two optimizers that fit several candidates and release one share
(``private_selection``, ``private_tuning``): resolving a candidate's optimizer, a candidate's
loss with its own l2, and independent random streams per candidate.

All of it is public-side plumbing: nothing here reads rows. The privacy of the selection
itself is each module's own (their docstrings).
"""

from __future__ import annotations

import dataclasses

from service.models.base import Loss
from service.optimizers.kits.base import InfeasibleSpec, Optimizer
from service.optimizers.kits.registry import get_optimizer
from service.privacy.secure_random import SecureRandom, as_secure

__all__ = ["candidate_optimizer", "spawn", "with_l2"]


def candidate_optimizer(name: str, field: str, *, itself: str, refusal: str) -> Optimizer:
    """The registered optimizer ``name`` that fits candidates for the optimizer ``itself``.

    Raises :class:`InfeasibleSpec` on ``field`` with ``refusal`` if ``name`` is ``itself`` (a
    selection over its own runs is not what its accounting covers), or for an unknown name.
    """
    if name == itself:
        raise InfeasibleSpec(field, refusal)
    try:
        return get_optimizer(name)
    except KeyError:
        raise InfeasibleSpec(
            field, f"unknown optimizer {name!r}; GET /v1/optimizers lists the catalog"
        ) from None


def with_l2(loss: Loss, l2: float | None) -> Loss:
    """``loss`` with the candidate's L2 weight (``loss`` itself when ``l2`` is None or equal);
    InfeasibleSpec("model") for a loss that cannot take another l2."""
    if l2 is None or l2 == loss.l2:
        return loss
    if not dataclasses.is_dataclass(loss):
        raise InfeasibleSpec("model", f"{loss.name} does not support a per-candidate l2")
    replaced: Loss = dataclasses.replace(loss, l2=float(l2))  # type: ignore[type-var]
    return replaced


def spawn(rng: SecureRandom, count: int) -> list[SecureRandom]:
    """``count`` independent child streams of ``rng`` (data-independent; fresh OS streams)."""
    return as_secure(rng).spawn(count)
