"""The Gaussian mechanism, calibrated exactly (Balle & Wang 2018, "Improving the Gaussian
Mechanism for Differential Privacy", Thm 8 and Alg. 1).

Setting. A deterministic vector ``q(S) ∈ R^d`` with replace-one L2 sensitivity
``Δ = sup_{S≃S'} ‖q(S) − q(S')‖₂`` is released as ``q(S) + Z`` with ``Z ~ N(0, σ² I_d)``.

Why the condition below is *exact* (necessary and sufficient), not a bound:

1. (ε, δ)-DP of a pair of output distributions (P, Q) is equivalent to the hockey-stick
   divergence ``sup_E P(E) − e^ε Q(E) ≤ δ`` in both directions; the sup is attained on the
   event ``E = {log(dP/dQ) > ε}``.
2. For ``P = N(a, σ²I)``, ``Q = N(b, σ²I)`` the log-likelihood ratio depends on the output only
   through its projection on ``u = (a − b)/‖a − b‖`` (isotropy), so the problem is
   one-dimensional with mean gap ``D = ‖a − b‖``. The privacy-loss variable is
   ``L = log(dP/dQ)(Y)``, ``L ~ N(D²/(2σ²), D²/σ²)`` under ``Y ~ P`` and
   ``L ~ N(−D²/(2σ²), D²/σ²)`` under ``Y ~ Q``. Hence

       δ(D) = P[L > ε] − e^ε Q[L > ε] = Φ(D/(2σ) − εσ/D) − e^ε Φ(−D/(2σ) − εσ/D),

   symmetric in (P, Q).
3. ``δ(D)`` is increasing in D (Balle & Wang, Lemma 7), so the worst neighbouring pair is one
   at distance exactly Δ and the mechanism is (ε, δ)-DP **iff**

       Φ(Δ/(2σ) − εσ/Δ) − e^ε Φ(−Δ/(2σ) − εσ/Δ) ≤ δ.              (Balle & Wang, Thm 8)

The left side depends on (Δ, σ) only through ``s = Δ/σ`` and increases with ``s``, so the
smallest admissible σ is ``Δ / s*`` with ``s*`` the root of ``δ(s) = δ``. We solve it by
bracketing and Brent's method on ``log s``, evaluating ``log δ(s)`` in log space
(``log Φ`` via ``scipy.special.log_ndtr`` and ``log(1 − e^x)`` computed stably), which keeps
full relative precision for ε up to ~1e3 (and beyond) and δ down to 1e-12 and below. The
returned σ is then nudged up by a few ulps if needed so that the condition holds in floating
point, i.e. the result is never below the exact calibration by more than rounding.

Sampling is not here: every Gaussian release goes through
:func:`service.privacy.secure_release.secure_gaussian` (a public grid and exact discrete
Gaussian noise; floating-point Gaussian draws leak, Mironov 2012).

Unlike the classic ``σ = sqrt(2 ln(1.25/δ)) Δ/ε`` (Dwork & Roth 2014, Thm A.1), which is valid
only for ε < 1 and is loose, the analytic σ is valid for every ε > 0 and is the smallest
possible σ for an isotropic Gaussian.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import brentq
from scipy.special import log_ndtr

__all__ = [
    "analytic_gaussian_sigma",
    "classic_gaussian_sigma",
    "gaussian_delta",
]

_LN2 = math.log(2.0)


def _log1mexp(x: float) -> float:
    """log(1 − e^x) for x < 0, accurate for x near 0 and for x very negative (Mächler 2012)."""
    if x >= 0.0:
        return -math.inf
    if x > -_LN2:
        return math.log(-math.expm1(x))
    return math.log1p(-math.exp(x))


def _log_delta(s: float, epsilon: float) -> float:
    """log δ(s) with δ(s) = Φ(s/2 − ε/s) − e^ε Φ(−s/2 − ε/s) and s = Δ/σ > 0.

    Written as ``log Φ(a) + log(1 − exp(ε + log Φ(b) − log Φ(a)))`` with ``a = s/2 − ε/s`` and
    ``b = a − s``; the second term is ≤ 0 because the hockey-stick divergence is ≥ 0.
    """
    a = 0.5 * s - epsilon / s
    b = a - s
    log_pa = float(log_ndtr(a))
    x = epsilon + float(log_ndtr(b)) - log_pa
    return log_pa + _log1mexp(x)


def _check_epsilon(epsilon: float) -> None:
    if not (math.isfinite(epsilon) and epsilon > 0.0):
        raise ValueError("epsilon must be a finite number > 0")


def _check_sensitivity(sensitivity: float) -> None:
    if not (math.isfinite(sensitivity) and sensitivity >= 0.0):
        raise ValueError("sensitivity must be a finite number >= 0")


def gaussian_delta(sigma: float, epsilon: float, sensitivity: float) -> float:
    """The exact δ of the Gaussian mechanism N(0, σ²I) at ε for L2 sensitivity Δ.

    ``δ = Φ(Δ/(2σ) − εσ/Δ) − e^ε Φ(−Δ/(2σ) − εσ/Δ)`` (Balle & Wang 2018, Thm 8): the smallest δ
    for which the mechanism is (ε, δ)-DP. Returns 0 for Δ = 0 and 1 for σ = 0 < Δ.
    """
    _check_epsilon(epsilon)
    _check_sensitivity(sensitivity)
    if not (math.isfinite(sigma) and sigma >= 0.0):
        raise ValueError("sigma must be a finite number >= 0")
    if sensitivity == 0.0:
        return 0.0
    if sigma == 0.0:
        return 1.0
    return math.exp(_log_delta(sensitivity / sigma, epsilon))


def analytic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float) -> float:
    """The smallest σ for which ``x ↦ q(x) + N(0, σ²I)`` is (ε, δ)-DP, for L2 sensitivity Δ.

    Assumptions: ε > 0, 0 < δ < 1, Δ ≥ 0 is the L2 sensitivity of q under the adjacency at
    hand (replace-one in dpfit). Guarantee: ``gaussian_delta(σ, ε, Δ) ≤ δ`` holds for the
    returned σ (to floating-point rounding it holds with equality), and no smaller σ satisfies
    it (Balle & Wang 2018, Thm 8; our Alg. 1 analogue is a root find on s = Δ/σ in log space).
    """
    _check_epsilon(epsilon)
    _check_sensitivity(sensitivity)
    if not (math.isfinite(delta) and 0.0 < delta < 1.0):
        raise ValueError("delta must be in (0, 1) for the Gaussian mechanism")
    if sensitivity == 0.0:
        return 0.0
    log_target = math.log(delta)

    def excess(u: float) -> float:  # increasing in u = log s
        return _log_delta(math.exp(u), epsilon) - log_target

    # Start from the classic calibration's s and expand geometrically to a sign change.
    u_lo = u_hi = math.log(epsilon / math.sqrt(2.0 * math.log(1.25 / delta)))
    step = math.log(2.0)
    for _ in range(2000):
        if excess(u_lo) < 0.0:
            break
        u_lo -= step
    else:  # pragma: no cover - δ(s) → 0 as s → 0, so this cannot happen
        raise ArithmeticError("could not bracket the analytic Gaussian calibration")
    for _ in range(2000):
        if excess(u_hi) > 0.0:
            break
        u_hi += step
    else:  # pragma: no cover - δ(s) → 1 as s → ∞, so this cannot happen
        raise ArithmeticError("could not bracket the analytic Gaussian calibration")
    u_star = brentq(excess, u_lo, u_hi, xtol=1e-15, rtol=4 * np.finfo(float).eps, maxiter=500)
    sigma = sensitivity / math.exp(u_star)
    # Round towards safety: the condition must hold for the σ we return.
    while gaussian_delta(sigma, epsilon, sensitivity) > delta:
        sigma = math.nextafter(sigma, math.inf) * (1.0 + 1e-15)
    return sigma


def classic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float) -> float:
    """``sqrt(2 ln(1.25/δ)) Δ/ε`` (Dwork & Roth 2014, Thm A.1), valid only for ε < 1.

    Kept for comparison only (it is the calibration of Zhang et al. Lemma 1); dpfit releases
    use :func:`analytic_gaussian_sigma`.
    """
    _check_epsilon(epsilon)
    _check_sensitivity(sensitivity)
    if not (0.0 < delta < 1.0):
        raise ValueError("delta must be in (0, 1)")
    return math.sqrt(2.0 * math.log(1.25 / delta)) * sensitivity / epsilon
