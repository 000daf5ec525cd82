"""Gaussian differential privacy (Dong, Roth & Su 2022): exact accounting of Gaussian releases.

A mechanism is μ-GDP when, for every neighbouring pair, distinguishing its outputs is no easier
than distinguishing N(0, 1) from N(μ, 1). Facts used by dpfit (replace-one adjacency throughout):

1. A Gaussian release of L2 sensitivity Δ with noise N(0, σ²I) is exactly μ-GDP with μ = Δ/σ
   = 1/z (z the noise multiplier σ/Δ, docs/ledger.md#the-z-convention) — the isotropy argument of
   :mod:`service.privacy.analytic_gaussian`.
2. Composition, adaptive included, is exact: μ_1-GDP then (adaptively) μ_2-GDP is
   √(μ_1² + μ_2²)-GDP (Dong, Roth & Su, Cor. 3.3), so T Gaussian steps of multiplier z are
   exactly √T/z-GDP. Parallel parts on a data-independent partition are max_i μ_i-GDP (a
   neighbouring pair changes the input of one part only).
3. μ-GDP ⇔ (ε, δ(ε; μ))-DP for every ε ≥ 0 with
   δ(ε; μ) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) (Dong, Roth & Su, Cor. 2.13) — Balle & Wang's
   Thm 8 with Δ/σ = μ, so :func:`gdp_delta` reuses the analytic Gaussian's stable formula.
4. Fully adaptive composition (Smith & Thakurta 2022, "Fully adaptive composition for Gaussian
   differential privacy", Thm 1.1/3.1): admitting μ_i-GDP mechanisms, each μ_i chosen from the
   past, while Σ μ_i² ≤ μ_B², is μ_B-GDP. The ledger's filter builds on it (ledger/filter.py).

Everything here is pure arithmetic on public numbers.
"""

from __future__ import annotations

import math

from dp_accounting import dp_event

from service.privacy.analytic_gaussian import analytic_gaussian_sigma, gaussian_delta

__all__ = [
    "event_mu",
    "gaussian_steps_multiplier",
    "gdp_delta",
    "gdp_epsilon",
    "gdp_mu",
    "parallel_mu",
]


def gdp_delta(epsilon: float, mu: float) -> float:
    """δ(ε; μ): the smallest δ with which a μ-GDP mechanism is (ε, δ)-DP (exact)."""
    if not (math.isfinite(mu) and mu >= 0.0):
        raise ValueError("mu must be a finite number >= 0")
    return gaussian_delta(1.0, epsilon, mu)


def gdp_mu(epsilon: float, delta: float) -> float:
    """The largest μ whose μ-GDP mechanisms are (ε, δ)-DP: 1/σ of the analytic Gaussian with
    Δ = 1; rounded down so that ``gdp_delta(ε, μ) ≤ δ`` holds in floating point."""
    mu = 1.0 / analytic_gaussian_sigma(epsilon, delta, 1.0)
    while gdp_delta(epsilon, mu) > delta:
        mu = math.nextafter(mu, 0.0) * (1.0 - 1e-15)
    return mu


def gdp_epsilon(mu: float, delta: float) -> float:
    """The smallest ε ≥ 0 with δ(ε; μ) ≤ δ (0 when μ = 0); ε is rounded up (never optimistic).

    δ(ε; μ) decreases in ε, so a bracketing bisection on ε converges; 200 halvings of the
    bracket reach the floating-point resolution of ε.
    """
    if not (0.0 < delta < 1.0):
        raise ValueError("delta must be in (0, 1)")
    if not (mu >= 0.0):
        raise ValueError("mu must be >= 0")
    if mu == 0.0:
        return 0.0
    if math.isinf(mu):
        return math.inf
    if gaussian_delta(1.0, 1e-300, mu) <= delta:
        return 0.0
    lo, hi = 0.0, max(1.0, mu * mu)
    while gdp_delta(hi, mu) > delta:
        lo, hi = hi, 2.0 * hi
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        if gdp_delta(mid, mu) > delta:
            lo = mid
        else:
            hi = mid
    return hi


def gaussian_steps_multiplier(steps: int, epsilon: float, delta: float) -> float:
    """The smallest noise multiplier z such that ``steps`` adaptively composed Gaussian releases,
    each of multiplier z, are (ε, δ)-DP: exactly z = √T / μ* with μ* = :func:`gdp_mu` (fact 2),
    rounded up so that ``gdp_delta(ε, √T/z) ≤ δ`` holds in floating point."""
    if steps < 1:
        raise ValueError("steps must be >= 1")
    mu_star = gdp_mu(epsilon, delta)
    root = math.sqrt(steps)
    z = root / mu_star
    while gdp_delta(epsilon, root / z) > delta:
        z = math.nextafter(z, math.inf) * (1.0 + 1e-15)
    return z


def event_mu(event: dp_event.DpEvent) -> float | None:
    """The exact μ of ``event`` when it is a composition of Gaussian releases, else None.

    Gaussian(z) is 1/z-GDP (fact 1; z = 0 is ∞-GDP), NoOp 0-GDP; (self-)composition adds μ²
    (fact 2). Any other event (subsampling, Laplace, randomized response, …) answers None and
    is accounted by its Rényi curve instead. Follows dpfit's convention that a
    ``GaussianDpEvent`` names a Gaussian release with multiplier σ/Δ, Δ the replace-one L2
    sensitivity (docs/ledger.md#the-z-convention).
    """
    squared = _mu_squared(event)
    return None if squared is None else math.sqrt(squared)


def _mu_squared(event: dp_event.DpEvent) -> float | None:
    if isinstance(event, dp_event.NoOpDpEvent):
        return 0.0
    if isinstance(event, dp_event.GaussianDpEvent):
        z = float(event.noise_multiplier)
        return math.inf if z <= 0.0 else 1.0 / (z * z)
    if isinstance(event, dp_event.SelfComposedDpEvent):
        inner = _mu_squared(event.event)
        return None if inner is None else int(event.count) * inner
    if isinstance(event, dp_event.ComposedDpEvent):
        total = 0.0
        for child in event.events:
            part = _mu_squared(child)
            if part is None:
                return None
            total += part
        return total
    return None


def parallel_mu(
    event: dp_event.DpEvent, parallel_events: tuple[dp_event.DpEvent, ...] = ()
) -> float | None:
    """μ of a plan: ``event_mu(event)``, or for a declared parallel composition the largest μ
    of its parts (fact 2); None when any part is not a composition of Gaussians."""
    if not parallel_events:
        return event_mu(event)
    parts = [event_mu(e) for e in parallel_events]
    if any(p is None for p in parts):
        return None
    return max(p for p in parts if p is not None)
