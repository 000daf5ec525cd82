"""Calibrating an iterative mechanism's noise to a job's (ε, δ) by numerical RDP accounting.

For a composed event (Gaussian steps, sampled Gaussian steps, tree aggregation, …) whose noise
is set by one parameter z (the noise multiplier σ/Δ, with Δ the replace-one L2 sensitivity of
one released quantity — DESIGN §2's convention), find the smallest z whose event is (ε, δ)-DP
according to dp-accounting's RDP accountant under REPLACE_ONE adjacency. The ledger then
charges that event's RDP curve (service.ledger.accounting), so calibration and charge come
from the same accountant family and cannot disagree about the mechanism.

The calibration accountant uses a fine grid of orders (the job's own ε is then as tight as RDP
allows); the ledger's filter uses its own small fixed grid. Both read the same per-order RDP
formulas, so a job never costs the ledger less than what it really is.
"""

from __future__ import annotations

from collections.abc import Callable

import dp_accounting
from dp_accounting import NeighboringRelation, dp_event
from dp_accounting.rdp import rdp_privacy_accountant

#: The per-job calibration grid: denser than the ledger's 13 orders where jobs' optima fall, but
#: small, because sampled-without-replacement RDP costs O(α) terms per order.
CALIBRATION_ORDERS: tuple[float, ...] = (
    1.25,
    1.5,
    1.75,
    2.0,
    2.25,
    2.5,
    3.0,
    3.5,
    4.0,
    4.5,
    5.0,
    6.0,
    7.0,
    8.0,
    10.0,
    12.0,
    14.0,
    16.0,
    20.0,
    24.0,
    28.0,
    32.0,
    48.0,
    64.0,
    128.0,
    256.0,
)


def rdp_accountant() -> rdp_privacy_accountant.RdpAccountant:
    """A fresh RDP accountant with REPLACE_ONE adjacency and the calibration orders."""
    return rdp_privacy_accountant.RdpAccountant(
        list(CALIBRATION_ORDERS), NeighboringRelation.REPLACE_ONE
    )


def event_epsilon(event: dp_event.DpEvent, delta: float) -> float:
    """The ε at which ``event`` is (ε, δ)-DP per the RDP accountant (REPLACE_ONE)."""
    accountant = rdp_accountant()
    accountant.compose(event)
    return float(accountant.get_epsilon(delta))


def calibrate_noise_multiplier(
    make_event: Callable[[float], dp_event.DpEvent],
    epsilon: float,
    delta: float,
    initial_guess: float = 1.0,
) -> float:
    """The smallest noise multiplier z with ``make_event(z)`` (ε, δ)-DP (RDP, REPLACE_ONE).

    ``make_event`` must be monotone: more noise never costs more privacy. Requires δ > 0.
    The answer is verified (``event_epsilon(make_event(z), δ) ≤ ε``) before it is returned.
    """
    if not delta > 0.0:
        raise ValueError("numerical Gaussian calibration needs delta > 0")
    z = float(
        dp_accounting.calibrate_dp_mechanism(
            rdp_accountant,
            make_event,
            epsilon,
            delta,
            bracket_interval=dp_accounting.LowerEndpointAndGuess(
                lower_endpoint=1e-9, initial_guess=max(initial_guess, 2e-9)
            ),
            tol=1e-4,
        )
    )
    while event_epsilon(make_event(z), delta) > epsilon:
        z *= 1.0 + 1e-4
    return z
