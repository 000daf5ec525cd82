"""What a job asks for and how a request can be impossible: neutral types of the math core.

``privacy``, ``ledger`` and ``optimizers`` all use these; they live here, below all three, so
that the math core has no import cycle (``optimizers.base`` re-exports them for optimizer
authors), with the one check of a requested (ε, δ) every optimizer makes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from service.privacy.output_perturbation import MAX_PURE_EPSILON


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


#: Where an analyst who asked a Gaussian method for δ = 0 is pointed.
PURE_DP_OPTIMIZERS = "bolt_on_psgd, noisy_sgd_scs13 or output_perturbation_gd"


def check_target(target: PrivacyTarget, *, pure_allowed: bool, optimizer: str) -> None:
    """The one check of a job's (ε, δ) before any planning (every optimizer calls it).

    Accepts: ε finite and > 0; δ finite in [0, 1) when ``pure_allowed`` (the method has a pure
    ε-DP mode at δ = 0, which supports ε ≤ ``MAX_PURE_EPSILON``), else δ in (0, 1) — a Gaussian
    mechanism is never pure ε-DP. Raises :class:`InfeasibleSpec` on ``privacy.epsilon`` or
    ``privacy.delta`` with the same advice whichever optimizer asks; the message names only the
    optimizer and public constants.
    """
    eps, delta = target.epsilon, target.delta
    if not (math.isfinite(eps) and eps > 0.0):
        raise InfeasibleSpec("privacy.epsilon", "epsilon must be a finite number > 0")
    if not (math.isfinite(delta) and 0.0 <= delta < 1.0):
        interval = "[0, 1)" if pure_allowed else "(0, 1)"
        raise InfeasibleSpec("privacy.delta", f"delta must be in {interval}")
    if delta == 0.0 and not pure_allowed:
        raise InfeasibleSpec(
            "privacy.delta",
            f"{optimizer} adds Gaussian noise, which is (ε, δ)-DP only for δ > 0: give "
            "delta > 0 (e.g. 1e-6, well below 1/n), or use "
            f"{PURE_DP_OPTIMIZERS} for pure ε-DP (delta = 0)",
        )
    if delta == 0.0 and eps > MAX_PURE_EPSILON:
        raise InfeasibleSpec(
            "privacy.epsilon",
            f"pure ε-DP (delta = 0) supports epsilon ≤ {MAX_PURE_EPSILON:g}; "
            "use a smaller epsilon or delta > 0",
        )
