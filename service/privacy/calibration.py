"""Calibrating an iterative mechanism's noise to a job's (ε, δ) by numerical RDP accounting.

For a composed event (Gaussian steps, sampled Gaussian steps, tree aggregation, …) whose noise
is set by one parameter z (the noise multiplier σ/Δ, with Δ the replace-one L2 sensitivity of
one released quantity — docs/ledger.md#the-z-convention), find the smallest z whose event is
(ε, δ)-DP
according to dp-accounting's RDP accountant under REPLACE_ONE adjacency. The ledger then
charges that event's RDP curve (service.ledger.accounting), so calibration and charge come
from the same accountant family and cannot disagree about the mechanism.

The calibration accountant uses a finer grid of orders than the ledger's 13 (the job's own ε is
then as tight as RDP allows); both read the same per-order RDP formulas, so a job never costs
the ledger less than what it really is. Every optimizer calibrates through this module.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
from dp_accounting import NeighboringRelation, dp_event
from dp_accounting.rdp import rdp_privacy_accountant
from scipy import optimize

from service.privacy.target import InfeasibleSpec

#: The per-job calibration grid: denser than the ledger's 13 orders where jobs' optima fall, but
#: small, because sampled-without-replacement RDP costs O(α²) per order.
CALIBRATION_ORDERS: tuple[float, ...] = (  # fmt: skip
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


def event_epsilon(event: dp_event.DpEvent, delta: float) -> float:
    """The ε at which ``event`` is (ε, δ)-DP per the RDP accountant (REPLACE_ONE)."""
    return event_epsilon_on(event, delta, CALIBRATION_ORDERS)[0]


#: Tiers of orders for sampled-without-replacement events, whose RDP dp-accounting computes
#: at a cost growing like α² per order: the search runs on the orders ≤ 32 first, then ≤ 64,
#: then on the whole grid, moving on only when the optimum sits at the top of a tier.
_ORDER_TIERS = (32.0, 64.0)
_Z_MIN, _Z_MAX = 1e-8, 1e8


def _accountant(orders: Sequence[float]) -> rdp_privacy_accountant.RdpAccountant:
    return rdp_privacy_accountant.RdpAccountant(list(orders), NeighboringRelation.REPLACE_ONE)


def event_epsilon_on(
    event: dp_event.DpEvent, delta: float, orders: Sequence[float]
) -> tuple[float, float]:
    """(ε, optimal order) of ``event`` at δ under REPLACE_ONE on the given orders.

    Converts the accountant's RDP vector itself with values clamped at 0 (dp-accounting reports
    ε = 0 when rounding makes an RDP value slightly negative, which happens for sampled events
    at huge noise multipliers) and NaN read as ∞, so the answer is never optimistic.
    """
    accountant = _accountant(orders)
    accountant.compose(event)
    rdp = np.asarray(accountant.rdp, dtype=np.float64)
    rdp = np.where(np.isnan(rdp), np.inf, np.maximum(rdp, 0.0))
    eps, order = rdp_privacy_accountant.compute_epsilon(list(orders), list(rdp), delta)
    eps = float(eps)
    return (eps if math.isfinite(eps) else math.inf), float(order)


def _smallest_multiplier(
    make_event: Callable[[float], dp_event.DpEvent],
    epsilon: float,
    delta: float,
    orders: Sequence[float],
    initial_guess: float,
    rtol: float,
) -> tuple[float, float] | None:
    """(z, optimal order at z): the smallest z in [1e-8, 1e8] (to relative ``rtol``, rounded up)
    with ε(make_event(z)) ≤ ε on ``orders``; None if even z = 1e8 does not suffice. Brackets
    the root by steps of growing width in log z from ``initial_guess``, then runs Brent's
    method on log z."""
    optimal_order: dict[float, float] = {}

    def gap(log_z: float) -> float:
        eps, order = event_epsilon_on(make_event(math.exp(log_z)), delta, orders)
        optimal_order[log_z] = order
        return eps - epsilon

    lo_limit, hi_limit = math.log(_Z_MIN), math.log(_Z_MAX)
    x = min(max(math.log(initial_guess), lo_limit), hi_limit)
    g = gap(x)
    width = math.log(2.0)
    if g > 0.0:  # too little noise: move up until it suffices
        lo = x
        while True:
            if x >= hi_limit:
                return None
            x = min(x + width, hi_limit)
            width *= 2.0
            g = gap(x)
            if g <= 0.0:
                hi = x
                break
            lo = x
    else:  # enough noise: move down until it no longer suffices
        hi = x
        while True:
            if x <= lo_limit:
                return _Z_MIN, optimal_order[x]
            x = max(x - width, lo_limit)
            width *= 2.0
            if gap(x) > 0.0:
                lo = x
                break
            hi = x
    root = optimize.brentq(gap, lo, hi, xtol=rtol / 4)
    log_z = max(root, lo)
    while gap(log_z) > 0.0:
        log_z += rtol
    return math.exp(log_z), optimal_order[log_z]


def _conversion_floor(orders: Sequence[float], delta: float) -> float:
    """The smallest ε the RDP→DP conversion can give on ``orders`` with RDP → 0 (other than
    through the degenerate ε = 0 route, which needs RDP ≲ δ²)."""
    return min(math.log1p(-1.0 / a) - math.log(delta * a) / (a - 1.0) for a in orders)


def calibrate_noise_multiplier(
    make_event: Callable[[float], dp_event.DpEvent],
    epsilon: float,
    delta: float,
    *,
    initial_guess: float = 1.0,
    subsampled: bool = False,
    rtol: float = 1e-4,
) -> float:
    """The smallest noise multiplier z (to relative ``rtol``, rounded up) such that
    ``make_event(z)`` is (ε, δ)-DP per dp-accounting's RDP accountant (REPLACE_ONE) on
    :data:`CALIBRATION_ORDERS`; the answer is verified before it is returned.

    Works for any ε (the search runs on log z over [1e-8, 1e8], bracketing by steps of growing
    width from ``initial_guess``, then Brent's method) and is fast for sampled events, whose
    dp-accounting RDP costs O(α²) per order: with ``subsampled=True`` it first
    searches on the orders ≤ 32 only — a subset of the grid, so the answer is valid for the
    full grid (ε is a minimum over orders) — then on the orders ≤ 64, then on the whole grid
    (the orders 128, 256 cost most), moving on only when the optimum sits at the top of the
    current subset or ε is below what it can certify (small ε). ``make_event`` must be monotone
    (more noise never costs more). Raises :class:`InfeasibleSpec` ("privacy.epsilon") when no
    multiplier up to 1e8 suffices.
    """
    if not (math.isfinite(epsilon) and epsilon > 0.0 and 0.0 < delta < 1.0):
        raise ValueError("calibration needs epsilon > 0 and 0 < delta < 1")
    full = list(CALIBRATION_ORDERS)
    candidates: list[float] = []
    tiers = _ORDER_TIERS if subsampled else ()
    for top in tiers:
        orders = [a for a in full if a <= top]
        if epsilon <= _conversion_floor(orders, delta):
            continue
        found = _smallest_multiplier(make_event, epsilon, delta, orders, initial_guess, rtol)
        if found is not None:
            z, order = found
            if order < top:
                return z
            candidates.append(z)
            initial_guess = z
    found = _smallest_multiplier(make_event, epsilon, delta, full, initial_guess, rtol)
    if found is not None:
        candidates.append(found[0])
    if not candidates:
        raise InfeasibleSpec(
            "privacy.epsilon",
            "epsilon is too small for this number of noisy steps to be accounted (no noise "
            "multiplier up to 1e8 suffices); use a larger epsilon or fewer steps",
        )
    return min(candidates)
