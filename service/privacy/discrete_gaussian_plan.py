r"""The plan of an exact discrete Gaussian sampler for any σ² (used by
:class:`service.privacy.secure_random.SecureRandom`): one CKS sampler up to
:data:`BASE_MAX_SIGMA2`, a composition above it.

Large σ (the composition). With σ² above :data:`BASE_MAX_SIGMA2` = 2^60 (σ > 2^30) the
proposal's integers approach the range where int64 and the float error budget stop being
comfortable, so Z = m·A + B with A ~ N_Z(0, σ_A²), B ~ N_Z(0, σ_B²), m = :data:`COMPOSE_M` = 2^26,
σ_B = 2^28 (σ_B/m = 4) and σ_A² = ⌈(σ² − σ_B²)/m²⌉ (A itself drawn the same way if σ_A² is still
large). Its law is within e^{±η} of N_Z(0, S²),
S² = m²σ_A² + σ_B² ≥ σ² (the plan records the realised S² and η):

    P[Z = k] = Σ_a e^{−a²/(2σ_A²)} e^{−(k − ma)²/(2σ_B²)} / (Z_A Z_B).

Completing the square in a: a²/σ_A² + (k − ma)²/σ_B² = k²/S² + (a − μ_k)²/v with
1/v = 1/σ_A² + m²/σ_B² (v = σ_A²σ_B²/S²) and μ_k = kmv/σ_B². Hence
P[Z = k] = e^{−k²/(2S²)} θ_v(μ_k)/(Z_A Z_B) with θ_v(μ) = Σ_a e^{−(a − μ)²/(2v)}, and by Poisson
summation θ_v(μ) = √(2πv)(1 + 2 Σ_{j≥1} e^{−2π²vj²} cos(2πjμ)) ∈ √(2πv)[1 − τ, 1 + τ],
τ = 2 Σ_{j≥1} e^{−2π²vj²}. So P[Z = k] = C·e^{−k²/(2S²)}·(1 + ξ_k), |ξ_k| ≤ τ, for one constant C;
both P and N_Z(0, S²) sum to one, so the constant ratio lies in [1/(1 + τ), 1/(1 − τ)] and
P[Z = k]/N_Z(0, S²)(k) ∈ [(1 − τ)/(1 + τ), (1 + τ)/(1 − τ)] = e^{±η}, η = log((1 + τ)/(1 − τ)).
With σ_A² ≥ 240 (σ² > 2^60), v = (σ_B/m)²·σ_A²/(σ_A² + (σ_B/m)²) ≥ 15 and η ≤ 1e-128; if A is
itself within e^{±η_A} of its target, Z is within e^{±(η_A + η)} (a mixture of pointwise bounds).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

__all__ = [
    "BASE_MAX_SIGMA2",
    "COMPOSE_M",
    "COMPOSE_SIGMA_B2",
    "DiscreteGaussianPlan",
    "plan_discrete_gaussian",
    "theta_tau",
]

#: Largest σ² drawn by one CKS Alg. 3 sampler (σ ≤ 2^30); above it the composition is used.
BASE_MAX_SIGMA2 = 1 << 60
#: The composition's multiplier m and its B-part variance σ_B² (σ_B/m = 4).
COMPOSE_M = 1 << 26
COMPOSE_SIGMA_B2 = 1 << 56


def theta_tau(v: float) -> float:
    """τ = 2 Σ_{j≥1} e^{−2π²vj²}, bounded above by 2e^{−2π²v}/(1 − e^{−6π²v}) (the tail is
    dominated by a geometric series since j² ≥ 1 + 3(j − 1)); used for v ≥ 1."""
    if v < 1.0:
        raise ValueError("theta_tau is only used for v >= 1")
    a = 2.0 * math.pi**2 * v
    return 2.0 * math.exp(-a) / (1.0 - math.exp(-3.0 * a))


def _eta(tau: float) -> float:
    return math.log1p(tau) - math.log1p(-tau)


@dataclass(frozen=True)
class DiscreteGaussianPlan:
    """How N_Z(0, σ²) is drawn: ``levels`` (m, σ_B²) from the outside in, then one base CKS
    sampler of variance ``base`` (a Fraction). ``variance`` is the realised S² (≥ the request)
    and ``eta`` the bound: the law is within e^{±η} of N_Z(0, S²) (0 when exact)."""

    levels: tuple[tuple[int, int], ...]
    base: Fraction
    variance: Fraction
    eta: float


def plan_discrete_gaussian(sigma2: Fraction | int) -> DiscreteGaussianPlan:
    """The exact sampler for N_Z(0, S²) with S² ≥ ``sigma2`` (module docstring, "Large σ").

    ``sigma2`` ≤ 2^60 is drawn by one CKS sampler exactly (S² = σ², η = 0). Larger:
    S² = m²σ_A² + σ_B² with σ_A² = ⌈(σ² − σ_B²)/m²⌉, recursively."""
    s2 = Fraction(sigma2)
    if s2 <= 0:
        raise ValueError("sigma2 must be > 0")
    if s2 < Fraction(1, 16):
        raise ValueError("sigma2 must be >= 1/16 (the lazy comparison's error bound uses σ ≥ 1/4)")
    if s2 <= BASE_MAX_SIGMA2:
        return DiscreteGaussianPlan((), s2, s2, 0.0)
    m, sb2 = COMPOSE_M, COMPOSE_SIGMA_B2
    inner = plan_discrete_gaussian(math.ceil((s2 - sb2) / (m * m)))
    sa2 = inner.variance
    v = float(sa2 * sb2 / (m * m * sa2 + sb2))
    eta = inner.eta + _eta(theta_tau(v))
    return DiscreteGaussianPlan(((m, sb2), *inner.levels), inner.base, m * m * sa2 + sb2, eta)
