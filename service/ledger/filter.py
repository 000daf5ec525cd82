"""The dataset budget as a Rényi-DP privacy filter (pure arithmetic, no I/O).

**Approximate-DP datasets (δ_B > 0).** Feldman & Zrnic (2021, "Individual Privacy Accounting
via a Rényi Filter", Thm 3.1) prove that for one order α fixed in advance, admitting adaptively
chosen mechanisms while Σ_i ρ_i(α) ≤ B keeps the whole interaction (α, B)-RDP. A refused job is
the analyst having chosen the null mechanism in that round (the refusal depends only on the
public curves), so "refuse and keep going" is such an interaction.

We let the order float over the fixed grid Λ (|Λ| = 13). That needs a union bound over the
orders, which we pay: admit iff some α ∈ Λ has

    Σ_i ρ_i(α) + ρ_new(α) ≤ B_α,   B_α = ε_B − log((α−1)/α) + (log(δ_B/|Λ|) + log α)/(α − 1),

i.e. the Canonne–Kamath–Steinke (2020, Prop. 12) conversion of (α, B_α)-RDP to
(ε_B, δ_B/|Λ|)-DP. Validity: at the end of any interaction, let G_α be the event "α is the first
order of Λ (in a fixed order) whose sum is within B_α". The G_α partition the transcripts and are
functions of the public transcript; on G_α the interaction coincides with the single-order
α-filter (sums only grow, so that filter never refused anything the real one admitted). For any
output set E, P[M(S) ∈ E] = Σ_α P[M_α(S) ∈ E ∩ G_α] ≤ Σ_α (e^ε_B P[M_α(S′) ∈ E ∩ G_α] + δ_B/|Λ|)
= e^ε_B P[M(S′) ∈ E] + δ_B. Deployed systems (PrivateKube, Lécuyer's code) drop the |Λ| factor
without proof; we do not.

**Pure-DP datasets (δ_B = 0).** Only pure ε-DP jobs are admitted and composition is basic:
Σ ε_j ≤ ε_B (adaptive basic composition is a valid filter for pure DP, Rogers et al. 2016).

``epsilon_spent`` is reported with the same conversion: the smallest ε at which the current
charges would still pass the admission rule, min_α [Σρ(α) + log((α−1)/α) − (log(δ_B/|Λ|) +
log α)/(α−1)], clamped at 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from service.ledger.accounting import ORDERS

#: Relative slack for floating-point sums; a job that fits up to rounding is admitted.
_TOLERANCE = 1e-12


@dataclass(frozen=True)
class Budget:
    """A dataset's total budget (ε_B, δ_B)."""

    epsilon: float
    delta: float

    @property
    def pure(self) -> bool:
        return self.delta == 0.0


@dataclass(frozen=True)
class Spent:
    """What a dataset's ledger has charged so far: the RDP curve sum and the pure-ε sum."""

    rdp: tuple[float, ...]
    pure_epsilon: float

    @staticmethod
    def nothing() -> Spent:
        return Spent(rdp=tuple(0.0 for _ in ORDERS), pure_epsilon=0.0)

    def plus(self, rdp: Sequence[float], pure_epsilon: float | None, sign: int = 1) -> Spent:
        """The ledger after one more charge (sign=+1) or refund (sign=−1)."""
        return Spent(
            rdp=tuple(a + sign * b for a, b in zip(self.rdp, rdp, strict=True)),
            pure_epsilon=self.pure_epsilon + sign * (pure_epsilon or 0.0),
        )


def order_threshold(alpha: float, budget: Budget) -> float:
    """B_α: the RDP budget at order α that converts to (ε_B, δ_B/|Λ|)-DP (CKS 2020, Prop. 12)."""
    log_delta = math.log(budget.delta / len(ORDERS))
    return (
        budget.epsilon
        - math.log((alpha - 1.0) / alpha)
        + (log_delta + math.log(alpha)) / (alpha - 1.0)
    )


def rdp_to_epsilon(rdp: Sequence[float], delta: float) -> float:
    """The smallest ε over Λ such that curve ``rdp`` is (ε, δ/|Λ|)-DP (CKS conversion)."""
    log_delta = math.log(delta / len(ORDERS))
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


def admit(
    budget: Budget, spent: Spent, rdp: Sequence[float], pure_epsilon: float | None
) -> Decision:
    """Whether a job with curve ``rdp`` (and, if pure, its ε) fits the remaining budget."""
    if budget.pure:
        if pure_epsilon is None:
            return Decision(
                False,
                "this dataset's budget has δ = 0, so it accepts only pure ε-DP jobs (δ = 0)",
            )
        total = spent.pure_epsilon + pure_epsilon
        if total <= budget.epsilon * (1 + _TOLERANCE):
            return Decision(True, "fits under basic composition")
        remaining = max(0.0, budget.epsilon - spent.pure_epsilon)
        return Decision(
            False,
            f"the job needs ε = {pure_epsilon:.6g} but only ε = {remaining:.6g} of "
            f"ε_B = {budget.epsilon:.6g} remains (basic composition, δ_B = 0)",
        )
    for alpha, used, new in zip(ORDERS, spent.rdp, rdp, strict=True):
        if used + new <= order_threshold(alpha, budget) + _TOLERANCE * max(1.0, budget.epsilon):
            return Decision(True, f"fits at Rényi order {alpha:g}")
    remaining = remaining_epsilon(budget, spent)
    needed = rdp_to_epsilon(rdp, budget.delta)
    return Decision(
        False,
        f"the job costs ε ≈ {needed:.6g} on its own at δ_B = {budget.delta:.3g}, but the "
        f"remaining budget is ε ≈ {remaining:.6g} of ε_B = {budget.epsilon:.6g} (RDP filter "
        "over 13 orders); ask for a smaller ε or a larger δ",
    )


def spent_epsilon(budget: Budget, spent: Spent) -> float:
    """ε spent so far at δ_B (basic composition when δ_B = 0)."""
    if budget.pure:
        return spent.pure_epsilon
    return rdp_to_epsilon(spent.rdp, budget.delta)


def remaining_epsilon(budget: Budget, spent: Spent) -> float:
    """ε_B minus :func:`spent_epsilon`, clamped at 0."""
    return max(0.0, budget.epsilon - spent_epsilon(budget, spent))
