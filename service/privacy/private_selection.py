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
P[k] = Γ(k+η)/(Γ(η) k!) γ^η (1−γ)^k) conditioned on K ≥ 1 — that is how
:func:`sample_untruncated` draws it (rejection of K = 0, probability γ^η, never data-dependent;
only plans stored before the truncated schedule below use it). η = 1 is the geometric
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
RDP is exactly αμ_Q²/2), composed with the truncation's term (below). The ledger's RDP
accountant (dp-accounting 0.6.0) evaluates that event with the formula above on the ledger's
13 orders; it is *not* a Gaussian-family event
(:func:`service.privacy.gdp.event_mu` answers None), so the dataset filter admits it through its
Rényi test (ledger/filter.py). dp-accounting recovers γ from the mean by a bisection that
returns a γ_a ≤ γ (mean(γ_a) ≥ mean); since log(1/γ) and E[K] both decrease in γ, its curve is
≥ the curve at the γ the sampler uses — conservative, never optimistic. The tests compare the
two curves (they agree to the bisection's 1e-9), check the bound against the exact Rényi
divergence of a brute-forced repeat-and-select on randomized response, and check the sampler's
law.

Truncation: a public schedule of F slots (issue 22, item 6). Thm 2 needs K hidden, but a job
that runs K fits shows K through its duration and progress. So the job runs a PUBLIC number F
of repetition slots, always all of them, and only the slots k ≤ K compete for the release, with
K drawn from the truncated law D_{η,γ}^{≤F} = D_{η,γ} conditioned on K ≤ F (an exact inverse-CDF
draw on 128-bit CSPRNG integers, :func:`truncated_table`, :func:`sample_repetitions`). Every
observable of the job is then a function of F and public coins only. What the truncation costs:

Lemma (truncation, RDP). Let p be the law of K (pgf f), q any law on {1, …, F}, A_p and A_q the
repeat-and-select mechanisms with K ~ p and K ~ q (same Q, ties broken towards the first run).
Write τ = P_p[K > F], T = E_p[K·1{K > F}], r = T/p_1, U = max_{k≤F} q_k/p_k and
L = min_{k≤F} q_k/p_k. If r < 1 then for every neighbouring D, D′ and every order λ > 1

    D_λ(A_q(D) ‖ A_q(D′)) ≤ D_λ(A_p(D) ‖ A_p(D′)) + κ(λ),
    κ(λ) = λ/(λ − 1) · log U + log(1/L) + log(1/(1 − r)).

Proof. Fix D. For an output y with score s(y) let G(y) = P[s(Q(D)) ≤ s(y)] and
G⁻(y) = P[s(Q(D)) < s(y)]. Run i of k is released iff the runs before it score < s(y) and those
after it ≤ s(y), so P[best of k ∈ E] = ∫_E dQ_D(y) Σ_{i=1}^{k} G⁻^{i−1} G^{k−i}
= ∫_E dQ_D(y) ⟨k t^{k−1}⟩_{t∈[G⁻, G]} (the mean of k t^{k−1} over the interval; its value at
G when G⁻ = G). Averaging over K: A_p(D)(E) = ∫_E dQ_D(y) ⟨f_p′(t)⟩, A_q(D)(E) = ∫_E dQ_D(y)
⟨f_q′(t)⟩ (the density PS22's analysis starts from). For t ∈ [0, 1]:
f_q′(t) = Σ_{k≤F} k q_k t^{k−1} ≤ U Σ_{k≤F} k p_k t^{k−1} ≤ U f_p′(t), and
f_q′(t) ≥ L (f_p′(t) − Σ_{k>F} k p_k t^{k−1}) ≥ L (f_p′(t) − T) ≥ L (1 − r) f_p′(t), since
f_p′(t) ≥ p_1 (its k = 1 term). So the density h = dA_q(D)/dA_p(D) lies in [L(1 − r), U] for
every D, and ∫ (h dA_p(D))^λ (h′ dA_p(D′))^{1−λ} ≤ U^λ (L(1 − r))^{1−λ} ∫ dA_p(D)^λ dA_p(D′)^{1−λ}
(1 − λ < 0), which is the claim after taking log/(λ − 1). ∎

For q = p conditioned on K ≤ F, U = L = 1/(1 − τ) and κ(λ) = log(1/(1 − τ))/(λ − 1) +
log(1/(1 − r)): a multiplicative (not total-variation) closeness, so the truncated mechanism keeps
a Rényi curve — the ledger composes Rényi curves, and a total-variation argument ((ε, δ + (1 +
e^ε)τ) for the job alone) would not give one. :func:`truncation_overhead` evaluates κ for the
sampled table's exact law q (its U and L from the table's integers) with a margin of
:data:`FLOAT_MARGIN` per logarithm for the floating-point p_k. κ decreases in λ, so a Gaussian
term λμ_κ²/2 with μ_κ² = max_λ 2κ(λ)/λ over the ledger's orders dominates it at every order:
the plan declares ``ComposedDpEvent([RepeatAndSelectDpEvent(…), GaussianDpEvent(1/μ_κ)])``
(:func:`selection_event` with ``slots``), which the ledger evaluates as it stands — the
truncation is inside the charge, nowhere else.

F (:func:`repetition_slots`) is the smallest integer with κ(min order) ≤ :data:`KAPPA_MAX`
(10⁻⁶ nats), a public function of (η, γ). The tails: η = 1 (geometric) has τ = (1 − γ)^F and
T = (1 − γ)^F (F + 1/γ); η = 0 (logarithmic) decays like (1 − γ)^F/F with a smaller γ for the
same mean, hence needs a much larger F (see :mod:`service.optimizers.private_selection`, which
picks its default (η, E[K]) for a small F).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from dp_accounting import dp_event

from service.privacy.secure_random import SecureRandom, as_secure

__all__ = [
    "FLOAT_MARGIN",
    "KAPPA_MAX",
    "MAX_SLOTS",
    "TruncatedLaw",
    "overhead_mu",
    "repeat_and_select_rdp",
    "repetition_slots",
    "sample_repetitions",
    "sample_untruncated",
    "selection_event",
    "tnb_gamma",
    "tnb_mean",
    "tnb_pmf",
    "tnb_tail",
    "truncated_table",
    "truncation_overhead",
]

#: The truncation's Rényi overhead κ allowed at the smallest order (nats; module docstring).
KAPPA_MAX = 1e-6
#: A bound on |log(p̂_k/p_k)| for the floating-point pmf p̂_k (lgamma/exp/log1p of a few ulps,
#: relative ≤ 1e-14) and on every other float step of the overhead: paid once per logarithm.
FLOAT_MARGIN = 1e-12
#: The most slots a plan may schedule (each slot fits every candidate).
MAX_SLOTS = 400
#: Bits of the uniform integer the truncated draw inverts (module docstring).
_TABLE_BITS = 128


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


def tnb_tail(slots: int, gamma: float, shape: float) -> tuple[float, float]:
    """(τ, T) = (P[K > F], E[K·1{K > F}]) under D_{η,γ} for F = ``slots``, upper bounds: the
    terms k > F summed (math.fsum) until the remainder, bounded by the geometric series of
    ratio ρ_k = (1 − γ)(1 + η/k) ≥ p_{k+1}/p_k, (k+1)p_{k+1}/(k p_k) once ρ_k < 1, is below
    1e-20 of the sum; that bound is added (never optimistic)."""
    _check(gamma, shape)
    if slots < 0:
        raise ValueError("slots must be >= 0")
    probs: list[float] = []
    means: list[float] = []
    k = slots + 1
    while True:
        p = tnb_pmf(k, gamma, shape)
        probs.append(p)
        means.append(k * p)
        rho = (1.0 - gamma) * (1.0 + shape / k)
        if rho < 1.0:
            rest = k * p * rho / (1.0 - rho) + 1e-300  # covers both sums (k·p ≥ p)
            total = math.fsum(means)
            if rest <= 1e-20 * total or total == 0.0 or k > slots + 10_000_000:
                return math.fsum(probs) + rest, total + rest
        k += 1


@dataclass(frozen=True)
class TruncatedLaw:
    """D_{η,γ} conditioned on K ≤ F, as the exact integer thresholds the sampler inverts:
    P[K = k] = (thresholds[k−1] − thresholds[k−2]) / 2^128 exactly (thresholds[−1] := 0)."""

    slots: int
    gamma: float
    shape: float
    thresholds: tuple[int, ...]

    def probability(self, k: int) -> Fraction:
        """The exact probability the sampler gives K = k."""
        if not 1 <= k <= self.slots:
            return Fraction(0)
        low = self.thresholds[k - 2] if k >= 2 else 0
        return Fraction(self.thresholds[k - 1] - low, 1 << _TABLE_BITS)


def truncated_table(slots: int, gamma: float, shape: float) -> TruncatedLaw:
    """The sampler's table for F = ``slots``: cumulative sums of the float pmf p̂_1 … p̂_F in
    exact rationals, scaled to 2^128 and rounded down (the last is 2^128). Raises ValueError
    if a slot would get probability 0 (F far past the law's reach)."""
    _check(gamma, shape)
    if slots < 1:
        raise ValueError("slots must be >= 1")
    cumulative: list[Fraction] = []
    acc = Fraction(0)
    for k in range(1, slots + 1):
        acc += Fraction(tnb_pmf(k, gamma, shape))
        cumulative.append(acc)
    scale = 1 << _TABLE_BITS
    thresholds = [int(c * scale / acc) for c in cumulative]
    thresholds[-1] = scale
    previous = 0
    for t in thresholds:
        if t <= previous:
            raise ValueError("a slot of the truncated law would have probability 0")
        previous = t
    return TruncatedLaw(slots, float(gamma), float(shape), tuple(thresholds))


def sample_repetitions(rng: SecureRandom | np.random.Generator, law: TruncatedLaw) -> int:
    """One draw of K from the truncated law (never the data): U uniform on {0, …, 2^128 − 1}
    from the CSPRNG, K = 1 + #{k : thresholds[k−1] ≤ U}. Exact: P[K = k] is the table's."""
    u = as_secure(rng).integer(1 << _TABLE_BITS)
    k = 1
    for t in law.thresholds:  # F comparisons whatever U: the draw's time does not show K
        k += int(t <= u)
    return k


def truncation_overhead(law: TruncatedLaw, orders: Sequence[float]) -> list[float]:
    """κ(λ) of the truncation lemma (module docstring) on ``orders`` (all > 1) for the
    sampler's exact law q against D_{η,γ}: U, L from the table's rationals over the float pmf,
    r = T/p_1 from :func:`tnb_tail`, each logarithm plus :data:`FLOAT_MARGIN`. Raises
    ValueError when r ≥ 1 (F too small for the lemma)."""
    ratios = [
        float(law.probability(k) / Fraction(tnb_pmf(k, law.gamma, law.shape)))
        for k in range(1, law.slots + 1)
    ]
    log_u = math.log(max(ratios)) + FLOAT_MARGIN
    log_inv_l = -math.log(min(ratios)) + FLOAT_MARGIN
    _, tail_mean = tnb_tail(law.slots, law.gamma, law.shape)
    r = tail_mean / tnb_pmf(1, law.gamma, law.shape) * (1.0 + FLOAT_MARGIN)
    if not r < 1.0:
        raise ValueError("too few slots: the truncation lemma needs E[K; K > F] < P[K = 1]")
    log_r = -math.log1p(-r) + FLOAT_MARGIN
    out = []
    for lam in orders:
        if not lam > 1.0:
            raise ValueError("orders must be > 1")
        out.append(max(0.0, lam / (lam - 1.0) * max(log_u, 0.0) + max(log_inv_l, 0.0) + log_r))
    return out


def repetition_slots(
    gamma: float, shape: float, min_order: float, kappa_max: float = KAPPA_MAX
) -> int:
    """F: the smallest number of slots whose truncation overhead at ``min_order`` (the
    largest, κ decreases in λ) is ≤ ``kappa_max`` — public (η, γ) only. Raises ValueError
    beyond :data:`MAX_SLOTS`."""
    _check(gamma, shape)
    # A necessary condition first, in one pass: κ ≥ log(1/(1 − r)) ≥ r = E[K·1{K > F}]/p_1, so
    # no F whose r exceeds the allowance can do. E[K·1{K > F}] for every F ≤ MAX_SLOTS by
    # suffix sums (added from the smallest term: accurate however small the tail).
    _, beyond = tnb_tail(MAX_SLOTS, gamma, shape)
    terms = [k * tnb_pmf(k, gamma, shape) for k in range(1, MAX_SLOTS + 1)]
    p_1 = tnb_pmf(1, gamma, shape)
    suffix = [0.0] * (MAX_SLOTS + 1)  # suffix[F] = E[K·1{K > F}]
    acc = beyond
    for slots in range(MAX_SLOTS, 0, -1):
        suffix[slots] = acc
        acc += terms[slots - 1]
    first = next(
        (f for f in range(1, MAX_SLOTS + 1) if suffix[f] / p_1 <= kappa_max * (1.0 + 1e-9)),
        None,
    )
    if first is not None:
        # then the exact overhead of the sampler's table, from just below that point (the two
        # sums agree to rounding)
        for slots in range(max(1, first - 2), MAX_SLOTS + 1):
            try:
                kappa = truncation_overhead(truncated_table(slots, gamma, shape), [min_order])
            except ValueError:
                continue
            if kappa[0] <= kappa_max:
                return slots
    raise ValueError(f"the law of K needs more than {MAX_SLOTS} slots to truncate")


def overhead_mu(law: TruncatedLaw, orders: Sequence[float]) -> float:
    """μ_κ with λμ_κ²/2 ≥ κ(λ) at every order of ``orders`` (module docstring)."""
    kappa = truncation_overhead(law, orders)
    return math.sqrt(max(2.0 * k / lam for k, lam in zip(kappa, orders, strict=True)))


def sample_untruncated(rng: SecureRandom, gamma: float, shape: float) -> int:
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


def selection_event(
    base: dp_event.DpEvent, gamma: float, shape: float, truncation_mu: float | None = None
) -> dp_event.DpEvent:
    """The event a plan declares: ``RepeatAndSelectDpEvent(base, E[K], η)`` (dp-accounting
    evaluates Thm 2 for it, at a γ_a ≤ γ: conservative, module docstring), composed with
    ``GaussianDpEvent(1/μ_κ)`` for a truncated K (``truncation_mu`` = μ_κ, :func:`overhead_mu`),
    whose curve dominates the truncation's overhead κ at every order of the ledger."""
    select = dp_event.RepeatAndSelectDpEvent(base, tnb_mean(gamma, shape), float(shape))
    if truncation_mu is None:
        return select
    if not (math.isfinite(truncation_mu) and truncation_mu > 0.0):
        raise ValueError("truncation_mu must be a finite number > 0")
    return dp_event.ComposedDpEvent([select, dp_event.GaussianDpEvent(1.0 / truncation_mu)])
