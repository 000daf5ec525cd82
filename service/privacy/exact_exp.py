"""Exact fixed-point brackets of e^{−γ} for rational γ ≥ 0, in integers only.

The samplers of :mod:`service.privacy.secure_random` decide [U < e^{−γ}] in floating point
where rigorous error bounds settle it and here otherwise: :func:`exp_bounds` brackets e^{−γ}
between two integers over 2^P, tight enough for the comparison at hand, by the alternating
series for e^{−f} (f ∈ [0, 1]) and square-and-multiply powers of e^{−1}, every rounding
directed to keep its bound on its side. Nothing here is approximate: the bounds are proved
bounds, checked against mpmath in ``tests/unit/test_secure_noise.py``.
"""

from __future__ import annotations

from fractions import Fraction
from functools import lru_cache

__all__ = ["exp_bounds", "fixed_exp_neg_frac"]


def fixed_exp_neg_frac(f: Fraction, bits: int) -> tuple[int, int]:
    """(lo, hi) with lo ≤ 2^bits·e^{−f} ≤ hi, hi − lo ≤ 2, for 0 ≤ f ≤ 1: the alternating series
    Σ (−f)^k/k! (terms decreasing in k, so consecutive partial sums bracket the limit).

    Exact integer arithmetic: with f = a/b the partial sum S_k is N_k/D_k over the common
    denominator D_k = b^k·k! (N_k = N_{k−1}·bk + (−a)^k), never reduced (a Fraction's gcd at
    every term cost more than the series); the first term ≤ 2^−(bits+2) ends it."""
    a, b = f.numerator, f.denominator
    num, den, power = 1, 1, 1  # S_0 = 1/1; power = a^k
    k = 0
    while True:
        k += 1
        power *= a
        prev_num, prev_den = num, den
        den *= b * k
        num = prev_num * (b * k) + (-power if k % 2 == 1 else power)
        if power << (bits + 2) <= den:  # the term a^k/D_k ≤ 2^−(bits+2)
            break
    # S_{k−1} and S_k bracket e^{−f}: S_k below when the k-th term was subtracted
    if k % 2 == 1:
        (lo_num, lo_den), (hi_num, hi_den) = (num, den), (prev_num, prev_den)
    else:
        (lo_num, lo_den), (hi_num, hi_den) = (prev_num, prev_den), (num, den)
    lo = (lo_num << bits) // lo_den
    hi = -((-hi_num << bits) // hi_den)
    return lo, hi


@lru_cache(maxsize=64)
def _inverse_e_bounds(bits: int) -> tuple[int, int]:
    """:func:`fixed_exp_neg_frac` at f = 1 (e^{−1}), which every exact comparison needs."""
    return fixed_exp_neg_frac(Fraction(1), bits)


def exp_bounds(gamma: Fraction, prec: int) -> tuple[int, int, int]:
    """(lo, hi, P) with lo/2^P ≤ e^{−γ} ≤ hi/2^P and (hi − lo)/2^P ≤ 2^-prec, γ ≥ 0 rational:
    e^{−γ} = (e^{−1})^n·e^{−f}, γ = n + f, with floor/ceiling fixed-point products (square and
    multiply), so every rounding keeps the bounds on their side."""
    n = gamma.numerator // gamma.denominator
    f = gamma - n
    bits = prec + 2 * max(n, 1).bit_length() + 16
    e1_lo, e1_hi = _inverse_e_bounds(bits)
    lo, hi = fixed_exp_neg_frac(f, bits)
    base_lo, base_hi = e1_lo, e1_hi
    while n:
        if n & 1:
            lo = (lo * base_lo) >> bits
            hi = -((-hi * base_hi) >> bits)
        n >>= 1
        if n:
            base_lo = (base_lo * base_lo) >> bits
            base_hi = -((-base_hi * base_hi) >> bits)
    return lo, hi, bits
