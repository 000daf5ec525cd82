r"""Private selection with a random number of repetitions (Papernot & Steinke 2022,
"Hyperparameter tuning with Rényi differential privacy", ICLR 2022, Thm 2): the accounting and
the sampler of the number of runs. Pure arithmetic on public numbers, plus one sampler.

Mechanism A. Q is a base mechanism whose output carries a score (in dpfit: pick one of a public
list of candidates uniformly at random, fit it, and release its noised training accuracy,
:mod:`service.optimizers.private_selection`). Draw K from the truncated negative binomial
distribution D_{η,γ} (public η, γ; independent of the data), run Q K times independently on
the same data and release only the output with the highest score.

The distribution (PS22, §2, Def. "truncated negative binomial"): for η > 0 (or −1 < η < 0),
γ ∈ (0, 1),

    P[K = k] = (1 − γ)^k / (γ^{−η} − 1) · Π_{ℓ=0}^{k−1} (ℓ + η)/(ℓ + 1),      k = 1, 2, …

which is the negative binomial NB(η, γ) (failures before η successes of probability γ,
P[k] = Γ(k+η)/(Γ(η) k!) γ^η (1−γ)^k) conditioned on K ≥ 1 — that is how :func:`sample_repetitions`
draws it (rejection of K = 0, probability γ^η, never data-dependent). η = 1 is the geometric
distribution P[K = k] = γ(1 − γ)^{k−1}; η → 0 is the logarithmic distribution
P[K = k] = (1 − γ)^k / (k log(1/γ)) (drawn by ``Generator.logseries(1 − γ)``). Means:

    E[K] = η(1 − γ) / (γ(1 − γ^η))   (η ≠ 0),        E[K] = (1/γ − 1) / log(1/γ)   (η = 0).

Theorem (PS22, Thm 2). If Q is (λ, ε)-RDP and (λ̂, ε̂)-RDP with λ ∈ (1, ∞), λ̂ ∈ [1, ∞), then A
is (λ, ε′)-RDP with

    ε′ = ε + (1 + η)(1 − 1/λ̂) ε̂ + (1 + η) log(1/γ)/λ̂ + log(E[K]) / (λ − 1).

λ̂ is free: :func:`repeat_and_select_rdp` takes, for every order λ of the grid, the minimum over
λ̂ of the grid of the λ̂-dependent part (as dp-accounting's ``RepeatAndSelectDpEvent`` does), then
uses monotonicity of Rényi divergence in the order (ε′(λ) ≤ ε′(λ₂) for λ ≤ λ₂) to lower each
value to the smallest value at a larger order. The theorem needs nothing about *how* the score
is computed — only that the score is part of Q's output, so Q's RDP curve must cover it (the
fit and the noised score composed).

What the ledger charges. A plan of this mechanism declares the event
``RepeatAndSelectDpEvent(GaussianDpEvent(1/μ_Q), mean, η)`` where μ_Q is a GDP bound on Q (its
RDP is exactly αμ_Q²/2). The ledger's RDP accountant (dp-accounting 0.6.0) evaluates that event
with the formula above on the ledger's 13 orders; it is *not* a Gaussian-family event
(:func:`service.privacy.gdp.event_mu` answers None), so the dataset filter admits it through its
Rényi test (ledger/filter.py). dp-accounting recovers γ from the mean by a bisection that
returns a γ_a ≤ γ (mean(γ_a) ≥ mean); since log(1/γ) and E[K] both decrease in γ, its curve is
≥ the curve at the γ the sampler uses — conservative, never optimistic. The tests compare the
two curves (they agree to the bisection's 1e-9), check the bound against the exact Rényi
divergence of a brute-forced repeat-and-select on randomized response, and check the sampler's
law.

Compute guard. K has unbounded support; it is not truncated (truncating would change the law
the theorem is about). For the parameters used (E[K] ≤ 10) P[K > 200] < 1e-14.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from dp_accounting import dp_event

from service.privacy.secure_random import SecureRandom, as_secure

__all__ = [
    "repeat_and_select_rdp",
    "sample_repetitions",
    "selection_event",
    "tnb_gamma",
    "tnb_mean",
    "tnb_pmf",
]


def _check(gamma: float, shape: float) -> None:
    if not (math.isfinite(gamma) and 0.0 < gamma < 1.0):
        raise ValueError("gamma must be in (0, 1)")
    if not (math.isfinite(shape) and shape >= 0.0):
        raise ValueError("shape must be a finite number >= 0 (0: logarithmic, 1: geometric)")


def tnb_mean(gamma: float, shape: float) -> float:
    """E[K] under D_{η,γ} (module docstring), computed stably."""
    _check(gamma, shape)
    log_gamma = math.log(gamma)
    if shape == 0.0:
        return (1.0 / gamma - 1.0) / -log_gamma
    # η(1 − γ)/(γ(1 − γ^η)) with 1 − γ^η = −expm1(η log γ)
    return shape * (1.0 - gamma) / (gamma * -math.expm1(shape * log_gamma))


def tnb_gamma(mean: float, shape: float) -> float:
    """The γ with E[K] = ``mean`` under D_{η,γ} (E[K] decreases in γ; bisection to the float
    resolution). ``mean`` > 1."""
    if not (math.isfinite(mean) and mean > 1.0):
        raise ValueError("mean must be a finite number > 1")
    if shape == 1.0:
        return 1.0 / mean
    lo, hi = 1e-300, 1.0 - 1e-16
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        if tnb_mean(mid, shape) > mean:
            lo = mid
        else:
            hi = mid
    return hi


def tnb_pmf(k: int, gamma: float, shape: float) -> float:
    """P[K = k] under D_{η,γ} (0 for k < 1)."""
    _check(gamma, shape)
    if k < 1:
        return 0.0
    if shape == 0.0:
        return math.exp(k * math.log1p(-gamma) - math.log(k) - math.log(-math.log(gamma)))
    # log Π_{ℓ<k} (ℓ+η)/(ℓ+1) = lgamma(k+η) − lgamma(η) − lgamma(k+1)
    log_p = (
        k * math.log1p(-gamma)
        + math.lgamma(k + shape)
        - math.lgamma(shape)
        - math.lgamma(k + 1)
        - math.log(math.expm1(-shape * math.log(gamma)))
    )
    return math.exp(log_p)


def sample_repetitions(rng: SecureRandom, gamma: float, shape: float) -> int:
    """One draw of K ~ D_{η,γ} from ``rng`` alone (never the data): numpy's logseries /
    negative-binomial algorithms on a PCG64 stream seeded with 128 bits of the secure stream
    (their floating-point law is within rounding of D_{η,γ}; K is public-coin, independent of
    the data)."""
    _check(gamma, shape)
    source = as_secure(rng)
    words = source.words(2)
    gen = np.random.Generator(np.random.PCG64((int(words[0]) << 64) | int(words[1])))
    if shape == 0.0:
        return int(gen.logseries(1.0 - gamma))
    while True:
        k = int(gen.negative_binomial(shape, gamma))
        if k >= 1:
            return k


def repeat_and_select_rdp(
    orders: Sequence[float], base_rdp: Sequence[float], gamma: float, shape: float
) -> list[float]:
    """ε′(λ) of Thm 2 on ``orders`` for a base mechanism with RDP ``base_rdp`` on the same
    orders: min over λ̂ of the grid, then monotonicity in the order (module docstring).
    Orders ≤ 1 get +∞ (the theorem needs λ > 1)."""
    _check(gamma, shape)
    if len(orders) != len(base_rdp):
        raise ValueError("orders and base_rdp must have the same length")
    lams = [float(a) for a in orders]
    eps = [float(e) for e in base_rdp]
    if any(not (lam >= 1.0) for lam in lams) or any(not (e >= 0.0) for e in eps):
        raise ValueError("orders must be >= 1 and the base RDP >= 0")
    log_mean = math.log(tnb_mean(gamma, shape))
    log_inv_gamma = -math.log(gamma)
    hat = min((1.0 - 1.0 / lh) * eh + log_inv_gamma / lh for lh, eh in zip(lams, eps, strict=True))
    raw = [
        e + (1.0 + shape) * hat + log_mean / (lam - 1.0) if lam > 1.0 else math.inf
        for lam, e in zip(lams, eps, strict=True)
    ]
    return [min(r for lam2, r in zip(lams, raw, strict=True) if lam2 >= lam) for lam in lams]


def selection_event(base: dp_event.DpEvent, gamma: float, shape: float) -> dp_event.DpEvent:
    """The event a plan declares: ``RepeatAndSelectDpEvent(base, E[K], η)`` (dp-accounting
    evaluates Thm 2 for it, at a γ_a ≤ γ: conservative, module docstring)."""
    return dp_event.RepeatAndSelectDpEvent(base, tnb_mean(gamma, shape), float(shape))
