"""The dataset budget as a privacy filter: exact for Gaussian jobs, Rényi for the rest (pure
arithmetic, no I/O).

**What a charge costs** (:class:`Cost`). Every job has a Rényi-DP curve ρ(α) on the grid Λ of
13 orders (ledger/accounting.py). A *Gaussian-family* job — its release is a composition of
Gaussian mechanisms with data-independent sensitivities — also has its exact GDP parameter μ
(privacy/gdp.py); its curve is then exactly ρ(α) = αμ²/2. A pure ε-DP job also has its ε.

**The admission rule (δ_B > 0).** Split δ_B = δ_G + δ_R with δ_G = 0.7·δ_B
(:data:`GAUSSIAN_DELTA_SHARE`) and δ_R = 0.3·δ_B. Let μ_B = ``gdp_mu(ε_B, δ_G)`` (the largest μ
that is (ε_B, δ_G)-DP, exact) and Λ_B = {α ∈ Λ : B_α > 0} with

    B_α = ε_B − log((α−1)/α) + (log(δ_R/|Λ_B|) + log α)/(α − 1)

(Λ_B is first taken with δ_R/|Λ| in B_α; the orders whose threshold is ≤ 0 can never admit a
job and are dropped before the union bound is paid, which only raises the other thresholds).
Λ_B and every threshold depend only on (ε_B, δ_B), fixed at registration. For a set L of
charges write I(L) for

    [every charge of L has a μ  and  Σ_L μ_i² ≤ μ_B²]   or   [∃α ∈ Λ_B: Σ_L ρ_i(α) ≤ B_α].

A job j is admitted iff I(L ∪ {j}), with L the dataset's *live* charges (charged, not
refunded). Both alternatives are downward closed (μ² ≥ 0, ρ ≥ 0), so a refund — which only
removes a charge — keeps I(L) true, and I holds for the final set of jobs that read data.

**Why this is (ε_B, δ_B)-DP under full adaptivity.** Order the jobs by the time they read the
data; job i's μ_i/ρ_i is public and fixed before it runs (predictable), a refunded job never
ran. Let A be the set of jobs that ran, a function of the public transcript (job specs, statuses
and refunds are public). Partition the transcripts into
P_G = {every job of A has a μ and Σ_A μ² ≤ μ_B²} and, outside P_G, P_α = {α is the first order
of Λ_B with Σ_A ρ(α) ≤ B_α}; since I(A) holds these parts cover every transcript. For each part
take the *stopped* interaction M_P in which a job is replaced by a null mechanism (releasing
"⊥") whenever running it would break that part's budget inequality for the ran-so-far set
(only μ-jobs with Σμ² ≤ μ_B² for M_G; Σρ(α) ≤ B_α for M_α):

* M_G runs only μ-jobs with Σ μ² ≤ μ_B² a.s.; by Smith & Thakurta (2022, Thm 3.1, fully
  adaptive composition of GDP) it is μ_B-GDP, hence (ε_B, δ_G)-DP (Dong, Roth & Su 2022,
  Cor. 2.13, exact conversion).
* M_α keeps Σ ρ(α) ≤ B_α a.s.; by Feldman & Zrnic (2021, "Individual Privacy Accounting via a
  Rényi Filter", Thm 3.1) it is (α, B_α)-RDP, hence (ε_B, δ_R/|Λ_B|)-DP by Canonne, Kamath &
  Steinke (2020, Prop. 12) — B_α is exactly that conversion solved for the RDP budget.

On a transcript of part P the real interaction never reaches a stop of M_P (the final A
satisfies P's inequality, and sums over a prefix are smaller), so both assign it the same
probability. Hence
for any set E of transcripts, with S, S′ neighbours,

    P[M(S) ∈ E] = Σ_P P[M_P(S) ∈ E ∩ P] ≤ Σ_P (e^ε_B P[M_P(S′) ∈ E ∩ P] + δ_P)
                = e^ε_B P[M(S′) ∈ E] + δ_G + |Λ_B|·δ_R/|Λ_B|  =  e^ε_B P[M(S′) ∈ E] + δ_B.

A refused job is the analyst choosing the null mechanism; refusals depend on public numbers
only. The |Λ_B| union bound is paid (PrivateKube and Lécuyer's code skip it without proof); the
split of δ_B is the price of letting the two accountants share one budget, and is where δ_B is
split — nowhere else. The naive "compose f-DP curves until the budget" filter is not valid in
general and is not built here: the Gaussian part relies on GDP's sum-of-squares filter only.

Measured at (ε_B, δ_B) = (3, 1e-5) with jobs of (0.5, 1e-6)
(docs/reference/privacy.md#the-privacy-model-in-plain-words, "The budget"): 32 of the 33 Gaussian
jobs exact composition allows (23 with the old 13-order RDP filter), 27 subsampled
jobs (28 before) and 24 alternating ones (25 before). The 0.7 share was chosen so that both
targets hold: 0.8 admits no more Gaussian jobs (32) and only 25/23 of the others, 0.9 admits
33 Gaussian but 23/21 of the others, 0.5 gives 31 Gaussian. Floating-point slack in the
comparisons is paid for by a margin taken off δ_G and δ_R (:func:`thresholds`), never added.

**Secure noise (the reservation H).** Every Gaussian release is drawn exactly from a discrete
Gaussian (privacy/secure_release.py) whose law is, pointwise, within e^{±η} of the ideal one that
the charges describe (η ≤ 3e-77 per coordinate: the Poisson-summation bound of the kernel lemma,
plus the composition's for very large scales); pure-DP releases, permutations and selections
are exact (η = 0). The transcript of everything run on a dataset is a product of at most 10^21
such coordinates (a generous public bound: 10^6 jobs × 10^15 coordinates each), so its pmf is
within e^{±H}, H = 10^21·η ≤ 1e-55 (:data:`SECURE_NOISE_H`), of the ideal interaction's. If the
ideal interaction is (ε, δ)-DP then for every event E
P[E] ≤ e^H P_ideal[E] ≤ e^H(e^ε Q_ideal[E] + δ) ≤ e^{ε+2H} Q[E] + e^H δ: the real one is
(ε + 2H, e^H δ)-DP. Admission therefore runs the rule below against (ε_B − 2H, δ_B e^{−H})
(:func:`admission_budget`). In floating point ε_B − 2H rounds to ε_B (2H = 2e-55); the shift is
covered by the margins already taken below: for a Rényi order a shift of ε by 2H is the factor
e^{−(α−1)·2H} ≥ 1 − 1e-52 on δ_R, far inside the e^{−(α_max−1)·10^-12·max(1, ε_B)} taken off;
for the Gaussian part |dδ(ε; μ)/dε| = e^ε Φ(−ε/μ − μ/2) ≤ 1, so the shift moves δ_G by at most
2H, inside the relative 1e-6 taken off δ_G whenever δ_B ≥ 3e-49.

**Per-analyst caps** are the same rule on the analyst's own live charges with ε_B replaced by
the cap; they only refuse more, so the dataset's guarantee is unchanged.

**Pure-DP datasets (δ_B = 0).** Only pure ε-DP jobs are admitted and composition is basic:
Σ ε_j ≤ ε_B (adaptive basic composition is a valid filter for pure DP, Rogers et al. 2016).

**``epsilon_spent``** is the ε at δ_B of the live charges' composition taken as it stands:
exactly ``gdp_epsilon(√Σμ², δ_B)`` when every live charge has a μ, otherwise the smallest
CKS conversion of Σρ(α) at δ_B over Λ (a fixed composition needs no union bound); Σ ε_j when
δ_B = 0. One job of (ε, δ_B) therefore reads exactly ε. Admission is stricter than
"epsilon_spent + ε_j ≤ ε_B": it pays for adaptivity (the δ split and the union bound), so
ask ``POST /v1/jobs/estimate`` whether a job fits.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from service.ledger.accounting import ORDERS
from service.privacy.gdp import gdp_epsilon, gdp_mu

#: Relative slack for floating-point sums; a job that fits up to rounding is admitted.
_TOLERANCE = 1e-12

#: δ_G / δ_B: the share of δ_B that the exact Gaussian part of the filter uses (see above).
GAUSSIAN_DELTA_SHARE = 0.7

#: H, the reservation for the exact samplers' e^{±η} (module docstring, "Secure noise").
#: η_max ≤ 3e-77 per coordinate (kernel t = 3: 2.8e-77; composition ≤ 1e-128), at most 10^21
#: coordinates ever drawn on one dataset: H = 10^21·η_max ≤ 1e-55.
SECURE_NOISE_H = 1e-55


def admission_budget(budget: Budget) -> tuple[float, float]:
    """(ε_B − 2H, δ_B·e^{−H}): the budget the admission rule is run against so that the real
    interaction, whose transcript is within e^{±H} of the ideal one, is (ε_B, δ_B)-DP."""
    h = SECURE_NOISE_H
    return budget.epsilon - 2.0 * h, budget.delta * math.exp(-h)


@dataclass(frozen=True)
class Budget:
    """A dataset's total budget (ε_B, δ_B)."""

    epsilon: float
    delta: float

    @property
    def pure(self) -> bool:
        return self.delta == 0.0


@dataclass(frozen=True)
class Cost:
    """What one charge costs: its RDP curve on :data:`ORDERS` (+∞ allowed), its exact μ if it
    is a Gaussian-family job, its ε if it is pure ε-DP. ``delta`` is the δ the job asked for;
    only refusal messages read it (to state a room at the job's own δ), admission never does."""

    rdp: tuple[float, ...]
    mu: float | None = None
    pure_epsilon: float | None = None
    delta: float | None = None


@dataclass(frozen=True)
class Spent:
    """The sum of a set of live charges. Built only by adding costs, never by subtracting one
    (a refund recomputes the sum without the refunded charge, so +∞ never meets −∞)."""

    rdp: tuple[float, ...]
    mu_squared: float
    all_gaussian: bool
    pure_epsilon: float

    @staticmethod
    def nothing() -> Spent:
        return Spent(
            rdp=tuple(0.0 for _ in ORDERS), mu_squared=0.0, all_gaussian=True, pure_epsilon=0.0
        )

    @staticmethod
    def of(costs: Iterable[Cost]) -> Spent:
        spent = Spent.nothing()
        for cost in costs:
            spent = spent.plus(cost)
        return spent

    def plus(self, cost: Cost) -> Spent:
        """The sum with one more charge."""
        return Spent(
            rdp=tuple(a + b for a, b in zip(self.rdp, cost.rdp, strict=True)),
            mu_squared=self.mu_squared + (cost.mu * cost.mu if cost.mu is not None else 0.0),
            all_gaussian=self.all_gaussian and cost.mu is not None,
            pure_epsilon=self.pure_epsilon + (cost.pure_epsilon or 0.0),
        )


@dataclass(frozen=True)
class Thresholds:
    """The public constants of one budget's admission rule (module docstring)."""

    mu: float
    orders: tuple[tuple[int, float], ...]  # (index into ORDERS, B_α) for α in Λ_B


def _cks_threshold(alpha: float, epsilon: float, log_delta: float) -> float:
    """The RDP budget at order α that converts to (ε, e^log_delta)-DP (CKS 2020, Prop. 12)."""
    return epsilon - math.log((alpha - 1.0) / alpha) + (log_delta + math.log(alpha)) / (alpha - 1.0)


@lru_cache(maxsize=1024)
def thresholds(budget: Budget) -> Thresholds:
    """μ_B and the orders Λ_B with their B_α for an approximate-DP budget."""
    if budget.pure:
        raise ValueError("a pure budget has no Gaussian or Rényi thresholds")
    epsilon_b, delta_b = admission_budget(budget)
    delta_g = GAUSSIAN_DELTA_SHARE * delta_b
    delta_r = delta_b - delta_g
    # The rounding slack that `fits` allows is paid for here, never taken from δ_B: a sum over
    # B_α by s·max(1, ε_B) multiplies the order's δ by at most e^{(α−1)s·max(1, ε_B)}, and a
    # relative 1e-12 on Σμ² moves δ(ε_B; μ) by far less than the 1e-6 taken off δ_G.
    delta_g *= 1.0 - 1e-6
    delta_r *= math.exp(-(max(ORDERS) - 1.0) * _TOLERANCE * max(1.0, epsilon_b))
    first = math.log(delta_r / len(ORDERS))
    useful = [i for i, a in enumerate(ORDERS) if _cks_threshold(a, epsilon_b, first) > 0.0]
    log_delta = math.log(delta_r / max(1, len(useful)))
    return Thresholds(
        mu=gdp_mu(epsilon_b, delta_g),
        orders=tuple((i, _cks_threshold(ORDERS[i], epsilon_b, log_delta)) for i in useful),
    )


def order_threshold(alpha: float, budget: Budget) -> float | None:
    """B_α of ``budget`` at order α, or None when α is not in Λ_B."""
    for i, limit in thresholds(budget).orders:
        if ORDERS[i] == alpha:
            return limit
    return None


def rdp_to_epsilon(rdp: Sequence[float], delta: float) -> float:
    """The smallest ε over Λ such that the fixed composition with curve ``rdp`` is (ε, δ)-DP
    (CKS conversion; no union bound, so only for describing a composition, never admission)."""
    log_delta = math.log(delta)
    best = math.inf
    for alpha, rho in zip(ORDERS, rdp, strict=True):
        eps = rho + math.log((alpha - 1.0) / alpha) - (log_delta + math.log(alpha)) / (alpha - 1.0)
        best = min(best, eps)
    return max(0.0, best)


@dataclass(frozen=True)
class Decision:
    """The filter's answer to one admission request."""

    admitted: bool
    reason: str


def fits(budget: Budget, spent: Spent) -> str | None:
    """Why the live set summed in ``spent`` satisfies the admission invariant I, or None."""
    if budget.pure:
        if spent.pure_epsilon <= admission_budget(budget)[0] * (1 + _TOLERANCE):
            return "fits under basic composition"
        return None
    limits = thresholds(budget)
    slack = _TOLERANCE * max(1.0, budget.epsilon)
    if spent.all_gaussian and spent.mu_squared <= limits.mu * limits.mu * (1.0 + _TOLERANCE):
        return "fits exactly under Gaussian DP (Σμ² ≤ μ_B²)"
    for i, limit in limits.orders:
        if spent.rdp[i] <= limit + slack:
            return f"fits at Rényi order {ORDERS[i]:g}"
    return None


def admit(budget: Budget, spent: Spent, cost: Cost) -> Decision:
    """Whether a job of ``cost`` fits with the live charges summed in ``spent``."""
    if budget.pure:
        if cost.pure_epsilon is None:
            return Decision(
                False,
                "this dataset's budget has δ = 0, so it accepts only pure ε-DP jobs (δ = 0)",
            )
        total = spent.pure_epsilon + cost.pure_epsilon
        if total <= admission_budget(budget)[0] * (1 + _TOLERANCE):
            return Decision(True, "fits under basic composition")
        remaining = max(0.0, budget.epsilon - spent.pure_epsilon)
        return Decision(
            False,
            f"the job needs ε = {cost.pure_epsilon:.6g} but only ε = {remaining:.6g} of "
            f"ε_B = {budget.epsilon:.6g} remains (basic composition, δ_B = 0)",
        )
    reason = fits(budget, spent.plus(cost))
    if reason is not None:
        return Decision(True, reason)
    remaining = remaining_epsilon(budget, spent)
    needed = spent_epsilon(budget, Spent.nothing().plus(cost))
    return Decision(
        False,
        f"the job costs ε ≈ {needed:.6g} on its own at δ_B = {budget.delta:.3g}, but the "
        f"remaining budget is ε ≈ {remaining:.6g} of ε_B = {budget.epsilon:.6g} and the job "
        "does not fit (exact Gaussian composition, else a Rényi filter; POST "
        f"/v1/jobs/estimate prices a job){gaussian_room(budget, spent, cost)}; ask for a "
        "smaller ε or a larger δ",
    )


def gaussian_room(budget: Budget, spent: Spent, cost: Cost) -> str:
    """For a Gaussian job on a Gaussian ledger, the largest Gaussian job that fits now, as μ and
    as ε at δ_B (and at the job's own δ when it differs). Public numbers only (the budget and
    the live charges' μ). Empty otherwise.

    Every clause holds for the numbers it states: that room is compared with
    ``epsilon_remaining`` (ε_B − epsilon_spent, both at δ_B) and said to be less only when it
    is. It is less on a fresh ledger, because the exact part of the filter runs at
    δ_G = 0.7·δ_B (module docstring); it can be more once charges stand, because Gaussian
    charges compose by adding μ², so ε is sub-additive and ε_B − epsilon_spent understates the
    room."""
    if cost.mu is None or not spent.all_gaussian:
        return ""
    room = math.sqrt(max(0.0, thresholds(budget).mu ** 2 - spent.mu_squared))
    if room <= 0.0:
        return "; the exact Gaussian part of the filter has no room left"
    largest = gdp_epsilon(room, budget.delta)
    at_job_delta = ""
    if cost.delta is not None and 0.0 < cost.delta != budget.delta:
        at_job_delta = (
            f", which is ε ≤ {gdp_epsilon(room, cost.delta):.6g} at the job's own "
            f"δ = {cost.delta:.3g}"
        )
    remaining = remaining_epsilon(budget, spent)
    if largest < remaining:
        why = (
            f"less than epsilon_remaining = {remaining:.6g}, because admission keeps "
            f"{1 - GAUSSIAN_DELTA_SHARE:.0%} of δ_B for the Rényi part of its filter"
        )
    else:
        why = (
            f"{'more than' if largest > remaining else 'as much as'} epsilon_remaining = "
            f"{remaining:.6g}: epsilon_remaining is ε_B minus the ε of the live charges, but "
            "Gaussian charges compose by adding μ², not ε"
        )
    return (
        f"; under exact Gaussian composition a job fits now if its μ ≤ {room:.6g}, i.e. "
        f"ε ≤ {largest:.6g} at δ_B = {budget.delta:.3g} ({why}){at_job_delta}"
    )


def spent_epsilon(budget: Budget, spent: Spent) -> float:
    """ε at δ_B of the composition of the live charges (module docstring)."""
    if budget.pure:
        return spent.pure_epsilon
    if spent.all_gaussian:
        return gdp_epsilon(math.sqrt(spent.mu_squared), budget.delta)
    return rdp_to_epsilon(spent.rdp, budget.delta)


def remaining_epsilon(budget: Budget, spent: Spent) -> float:
    """ε_B minus :func:`spent_epsilon`, clamped at 0."""
    return spent_and_remaining(budget, spent)[1]


def spent_and_remaining(budget: Budget, spent: Spent) -> tuple[float, float]:
    """(:func:`spent_epsilon`, :func:`remaining_epsilon`) with one conversion."""
    used = spent_epsilon(budget, spent)
    return used, max(0.0, budget.epsilon - used)
