r"""The releases every mechanism uses: a value rounded to a public grid plus exact integer noise.

Why. ``value + σ·standard_normal()`` in floating point leaks: the float noise lives on a lattice
that depends on the draw, so ``fl(c + fl(σz))`` can be checked bit for bit against a candidate
centre c (Mironov 2012; Jin et al. 2022 for Gaussian noise). Here the released vector is
``g·(q + K)`` with q an integer vector, K integer noise from an exact sampler
(:mod:`service.privacy.secure_random`) and g a public power of two: a deterministic function of
the integer vector q + K, so the float multiplication is post-processing and leaks nothing.

Grid. g is the largest power of two with g ≤ Δ/(√d·2^20) (Δ the release's ℓ2 sensitivity, d its
length). q = rint(clip(value/g, ±2^61)) (clipping and rounding are coordinatewise; clipping is
1-Lipschitz; a NaN, which no bounded query produces, maps to 0). For neighbours with
‖v − v′‖₂ ≤ Δ, each coordinate's rounding moves it by at most 1/2, so
‖q − q′‖₂ ≤ ‖(v − v′)/g‖₂ + ‖(1, …, 1)‖₂ ≤ Δ/g + √d =: Δ_int, and
‖q − q′‖₁ ≤ √d·Δ/g + d =: Δ₁ (‖x‖₁ ≤ √d‖x‖₂). (For a pair at distance D < Δ the bound is
D/g + √d; unchanged coordinates round identically.)

**Gaussian releases** (:func:`secure_gaussian`). K ~ N_Z(0, s²)^d with the integer s² chosen so
that Δ_int/√(s² − t²) ≤ Δ/σ, t = :data:`KERNEL_T` = 3.

Lemma. Let Y ~ N(c, s′²) on R and, given Y = y, let W be discrete Gaussian centred at y with
parameter t: P[W = k | y] = e^{−(k−y)²/(2t²)}/θ_t(y), θ_t(y) = Σ_k e^{−(k−y)²/(2t²)}. Then the law
of W is within e^{±η} of N_Z(c, s′² + t²) pointwise, η = log((1 + τ)/(1 − τ)),
τ = 2Σ_{m≥1} e^{−2π²t²m²}.
Proof. Poisson summation: θ_t(y) = t√(2π)(1 + 2Σ_{m≥1} e^{−2π²t²m²} cos 2πmy), which lies
in t√(2π)[1 − τ, 1 + τ].
So P[W = k] = ∫ φ_{s′}(y − c) e^{−(k−y)²/(2t²)}/θ_t(y) dy lies in [1/(1+τ), 1/(1−τ)] times
∫ φ_{s′}(y − c) φ_t(k − y) dy = φ_S(k − c), S² = s′² + t² (convolution of Gaussians). Likewise
N_Z(c, S²)(k) = e^{−(k−c)²/(2S²)}/θ_S(c) with θ_S(c) ∈ S√(2π)[1 − τ_S, 1 + τ_S], τ_S ≤ τ as
S ≥ t, i.e. N_Z(c, S²)(k) ∈ φ_S(k − c)·[1/(1+τ), 1/(1−τ)]. The ratio of the two pmfs is in
[(1−τ)/(1+τ), (1+τ)/(1−τ)] = e^{±η}. ∎

Privacy. The release is q + K with K ~ N_Z(0, s²)^d, i.e. ⊗_i N_Z(q_i, s²). By the lemma (with
s′² = s² − t²) each coordinate's law is within e^{±η} of W_i = (discrete Gaussian kernel)(Y_i),
Y ~ N(q, s′²I): a post-processing of the continuous Gaussian mechanism on q with σ′ = s′, which
is exactly μ-GDP with μ = Δ_int/σ′ ≤ Δ/σ — the μ the plan charges (its RDP curve αμ²/2 too).
Large s use the composition of :mod:`service.privacy.secure_random` (within a further
e^{±η_c}, η_c ≤ 1e-128). So the release is, on every event, within a factor e^{±dη_max} of an
ideal release that is exactly as private as the plan says, η_max = η + η_c ≤ 3e-77 (t = 3:
τ ≈ 1.4e-77). The ledger accounts for all of these once (:data:`service.ledger.filter.
SECURE_NOISE_H`): over at most 10^21 coordinates ever drawn on a dataset the whole transcript is
within e^{±H}, H = 10^21·η_max ≤ 1e-55, of the ideal one.
Noise actually added: s·g ≥ σ(1 + g√d/Δ)·√(1 + t²/s′²) ≈ σ(1 + 2^-20 + t²/(2s²)) — the plan's σ
up to a relative ≈ 1e-6.

**Pure ε-DP releases** (:func:`secure_laplace`; the "norm_gamma" mechanism of stored plans). K has
independent discrete Laplace coordinates, P[K_i = k] ∝ exp(−|k|·ε′/Δ₁) with ε′ ≤ ε exactly
rational. For neighbours, the ratio of the pmfs of q + K at any point is
Π_i exp(ε′(|o_i − q′_i| − |o_i − q_i|)/Δ₁) ≤ exp(ε′‖q − q′‖₁/Δ₁) ≤ e^ε: exactly ε-DP (δ = 0), no η.
Its ℓ2 size: E‖gK‖₂² = d·g²·2e^{−1/b}/(1 − e^{−1/b})² ≈ 2d(gb)² with gb = g·Δ₁/ε ≈ √dΔ/ε, so
‖noise‖₂ ≈ √2·dΔ/ε — about √2 times norm-gamma's E‖z‖ = dΔ/ε (the price of exactness: the ℓ2
norm-ball density has no exact integer sampler here).
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache

import numpy as np

from service.models.base import FloatArray
from service.privacy.discrete_gaussian_plan import (
    DiscreteGaussianPlan,
    plan_discrete_gaussian,
    theta_tau,
)
from service.privacy.secure_random import SecureRandom, as_secure

__all__ = [
    "GRID_BITS",
    "KERNEL_T",
    "GaussianRelease",
    "LaplaceRelease",
    "gaussian_release",
    "gaussian_release_fits",
    "grid_for",
    "kernel_eta",
    "laplace_release",
    "reserve_gaussian",
    "secure_gaussian",
    "secure_laplace",
]

#: The grid is at least 2^GRID_BITS finer than Δ/√d.
GRID_BITS = 20
#: The discrete Gaussian kernel's parameter t of the lemma (η ≈ 3e-77 at t = 3).
KERNEL_T = 3
#: Largest integer |q|: q + K stays in int64 for any K below 2^61.
_Q_MAX = float(1 << 61)
#: Largest discrete Laplace scale the sampler takes (secure_random.discrete_laplace).
_LAPLACE_MAX_SCALE = 1 << 48


def kernel_eta(t: int = KERNEL_T) -> float:
    """η = log((1 + τ)/(1 − τ)), τ = 2Σ_{m≥1} e^{−2π²t²m²} (module docstring, lemma)."""
    tau = theta_tau(float(t * t))
    return math.log1p(tau) - math.log1p(-tau)


def _sqrt_upper(d: int) -> Fraction:
    """A rational upper bound on √d within 2^-30 (exact integer arithmetic)."""
    return Fraction(math.isqrt(d << 60) + 1, 1 << 30)


def grid_for(sensitivity: float, d: int, bits: int = GRID_BITS) -> float:
    """The largest power of two ≤ Δ/(√d·2^bits) (public: Δ, d are the plan's)."""
    if not (math.isfinite(sensitivity) and sensitivity > 0.0) or d < 1:
        raise ValueError("need a finite sensitivity > 0 and d >= 1")
    bound = sensitivity / (math.sqrt(d) * 2.0**bits)
    mantissa, exponent = math.frexp(bound)  # bound = mantissa·2^exponent, mantissa ∈ [1/2, 1)
    return math.ldexp(1.0, exponent - 1)


def _to_grid(value: FloatArray, g: float) -> np.ndarray:
    """rint(clip(value/g, ±2^61)) as int64 (g a power of two: the division is exact); NaN → 0."""
    scaled = np.multiply(value, 1.0 / g)
    np.clip(scaled, -_Q_MAX, _Q_MAX, out=scaled)
    np.rint(scaled, out=scaled)
    q = scaled.astype(np.int64)
    if np.isnan(scaled).any():
        q[np.isnan(scaled)] = 0
    return q


def _from_grid(q: np.ndarray, k: np.ndarray, g: float) -> FloatArray:
    """g·(q + K), computed from the exact integer sum (post-processing)."""
    if k.dtype != object and np.abs(k).max(initial=0) <= (1 << 61):
        total = q + k
    else:  # a noise value beyond 2^61: exact Python integers
        total = q.astype(object) + k.astype(object)
    out: FloatArray = total.astype(np.float64) * g
    return out


class GaussianRelease:
    """The public parameters of :func:`secure_gaussian` for (d, σ, Δ): grid g, the integer
    sensitivity bound Δ_int, the sampler's plan (realised variance s² ≥ the requirement) and
    the per-coordinate η."""

    def __init__(self, d: int, sigma: float, sensitivity: float) -> None:
        if d < 1:
            raise ValueError("d must be >= 1")
        if not (math.isfinite(sigma) and sigma > 0.0):
            raise ValueError("sigma must be a finite number > 0")
        self.grid = grid_for(sensitivity, d)
        self.integer_sensitivity = Fraction(sensitivity) / Fraction(self.grid) + _sqrt_upper(d)
        t2 = KERNEL_T * KERNEL_T
        required = (self.integer_sensitivity * Fraction(sigma) / Fraction(sensitivity)) ** 2 + t2
        self.plan: DiscreteGaussianPlan = plan_discrete_gaussian(math.ceil(required))
        self.eta = kernel_eta() + self.plan.eta
        #: σ′ = √(s² − t²) in grid units and the exact μ the ideal release is at most.
        self.sigma_prime = math.sqrt(float(self.plan.variance - t2))
        self.mu = float(self.integer_sensitivity) / self.sigma_prime
        self.noise_std = self.grid * math.sqrt(float(self.plan.variance))


@lru_cache(maxsize=256)
def gaussian_release(d: int, sigma: float, sensitivity: float) -> GaussianRelease:
    """Cached :class:`GaussianRelease` (per-step releases reuse it)."""
    return GaussianRelease(d, sigma, sensitivity)


def gaussian_release_fits(d: int, sigma: float, sensitivity: float) -> bool:
    """Whether :func:`secure_gaussian` can release a ``d``-vector of ℓ2 sensitivity Δ with
    noise σ. The sampler's variance S² ≥ (Δ_int·σ/Δ)² + t² is exact (an integer), but σ′ and
    the noise's std are computed from it in float64: when S² exceeds float64's largest value
    (σ/Δ beyond ≈ 1.3e148 for d = 1) building the release raises ``OverflowError``. This builds
    it from the same public values (nothing drawn, not cached), so a plan that calls it is
    feasible exactly when its fit's release cannot overflow."""
    try:
        GaussianRelease(d, sigma, sensitivity)
    except OverflowError:
        return False
    return True


def secure_gaussian(
    value: FloatArray, sigma: float, sensitivity: float, rng: SecureRandom
) -> FloatArray:
    """Release ``value`` (ℓ2 sensitivity Δ = ``sensitivity``) with Gaussian noise of at least
    ``sigma``: g·(rint(value/g) + K), K ~ N_Z(0, s²)^d exact (module docstring: μ ≤ Δ/σ, within
    e^{±dη} accounted in the ledger). ``sigma = 0``: the value unchanged (noise off, tests)."""
    v = np.asarray(value, dtype=np.float64)
    if sigma == 0.0:
        return v.copy()
    release = gaussian_release(int(v.size), float(sigma), float(sensitivity))
    q = _to_grid(v.reshape(-1), release.grid)
    k = as_secure(rng).discrete_gaussian_pooled(release.plan, q.size)
    return _from_grid(q, k, release.grid).reshape(v.shape)


def reserve_gaussian(
    d: int, sigma: float, sensitivity: float, releases: int, rng: SecureRandom
) -> None:
    """Draw the noise of ``releases`` coming :func:`secure_gaussian` calls of dimension ``d``
    (the same σ and Δ) in one batch (:meth:`SecureRandom.reserve_discrete_gaussian`): a loop of
    T public steps then pays the sampler's vectorised cost once. The draws and their law are
    those the calls would make; only how many are drawn at once changes, from public sizes.
    A numpy Generator (tests) is wrapped afresh by every call (:func:`as_secure`): nothing to
    reserve there."""
    if sigma == 0.0 or releases <= 0 or d <= 0 or not isinstance(rng, SecureRandom):
        return
    release = gaussian_release(int(d), float(sigma), float(sensitivity))
    rng.reserve_discrete_gaussian(release.plan, int(d) * int(releases))


class LaplaceRelease:
    """The public parameters of :func:`secure_laplace` for (d, ε, Δ): grid g, ℓ1 bound Δ₁ and
    the discrete Laplace scale t/s ≥ Δ₁/ε (exactly rational)."""

    def __init__(self, d: int, epsilon: Fraction, sensitivity: float) -> None:
        if d < 1 or epsilon <= 0:
            raise ValueError("need d >= 1 and epsilon > 0")
        bits = GRID_BITS
        while True:
            self.grid = grid_for(sensitivity, d, bits)
            self.l1_sensitivity = Fraction(sensitivity) / Fraction(self.grid) * _sqrt_upper(d) + d
            scale = self.l1_sensitivity / epsilon
            if scale <= _LAPLACE_MAX_SCALE or bits == 0:
                break
            bits -= 1  # a coarser grid keeps the sampler's scale in range (still exact ε-DP)
        if scale > _LAPLACE_MAX_SCALE:
            raise ValueError("epsilon too small for the discrete Laplace sampler's range")
        self.t, self.s = scale.numerator, scale.denominator
        self.noise_scale = self.grid * float(scale)


def laplace_release(d: int, epsilon: float, sensitivity: float) -> LaplaceRelease:
    """:class:`LaplaceRelease` at ε′ = ε·(1 − 2^-50) (so ε′ ≤ the ε the plan charges even when
    ε is recovered from a stored float noise scale as Δ/λ)."""
    eps = Fraction(epsilon) * (1 - Fraction(1, 1 << 50))
    return LaplaceRelease(d, eps, sensitivity)


def secure_laplace(
    value: FloatArray, epsilon: float, sensitivity: float, rng: SecureRandom
) -> FloatArray:
    """Release ``value`` (ℓ2 sensitivity Δ) exactly ε-DP: g·(rint(value/g) + K), K_i i.i.d.
    discrete Laplace with P[k] ∝ exp(−|k|ε′/Δ₁) (module docstring)."""
    v = np.asarray(value, dtype=np.float64)
    release = laplace_release(int(v.size), float(epsilon), float(sensitivity))
    q = _to_grid(v.reshape(-1), release.grid)
    k = as_secure(rng).discrete_laplace(release.t, q.size, release.s)
    return _from_grid(q, k, release.grid).reshape(v.shape)
