"""What a job asks for and how a request can be impossible: neutral types of the math core.

``privacy``, ``ledger`` and ``optimizers`` all use these; they live here, below all three, so
that the math core has no import cycle (``optimizers.base`` re-exports them for optimizer
authors).
"""

from __future__ import annotations

from dataclasses import dataclass


class InfeasibleSpec(ValueError):
    """The requested combination cannot give the requested guarantee.

    ``field`` names the part of the job spec at fault (dotted path, e.g. ``optimizer.params.eta``)
    and the message explains why and what would work. Never contains data-derived values.
    """

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


@dataclass(frozen=True)
class PrivacyTarget:
    """The (ε, δ) an analyst asks one job to satisfy. δ = 0 asks for pure ε-DP."""

    epsilon: float
    delta: float
