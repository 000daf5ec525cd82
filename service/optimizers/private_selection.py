r"""``private_selection``: choose among a few candidate (optimizer, parameters, l2) settings by
random repetition with noised scores (Papernot & Steinke 2022, Thm 2), in one job with one
charge. The mechanism's accounting: :mod:`service.privacy.private_selection`.

Algorithm. The plan fixes m candidates (2 ≤ m ≤ 8), each an optimizer of the catalog whose
release is a composition of Gaussian mechanisms (its plan has an exact GDP μ: ``dp_gd``,
``dp_agd``, …), with its parameters and optionally an ``l2`` replacing the model's, and a PUBLIC
number F of repetition slots (:func:`~service.privacy.private_selection.repetition_slots`, from
η and γ only). Then:

1. Draw K ~ D_{η,γ} conditioned on K ≤ F (truncated negative binomial, public η, γ; an exact
   inverse-CDF draw on CSPRNG integers) and j_1 … j_F uniform on the m candidates.
2. For every slot k = 1 … F, the same work: fit EVERY candidate on all n rows with its plan
   (calibrated at the base target below) and compute its number of correctly classified
   training rows; noise the count of candidate j_k: s_k = Σ_i 1[sign(w·x_i) = y_i] +
   N_Z(0, σ_s²) (discrete Gaussian on the release grid). Slot k's outcome is (j_k, w_{j_k}, s_k).
3. Release the fitted w of the slot k ≤ K with the highest noised score (the first on ties).
   Nothing else: not K, not which candidate won, not the scores.

Why every candidate in every slot. A slot that fitted only its own j_k would last as long as
candidate j_k does, so the job's timing would show the sequence j_1 … j_F. The j's are public
coins, but Thm 2 is about IDENTICAL repetitions of Q (whose randomness includes j): given the
sequence, the repetitions are not identical and the theorem does not apply. Fitting all m in
every slot makes each slot's work, duration, memory and progress the same whatever K and the
j's (the unused fits are discarded). Compute: F·m fits, F·Σ_c T_c optimizer steps
(``hyperparameters.fits`` and ``fit_steps`` of the plan, which the estimate returns).

Progress: ``total_steps`` = F; during slot k the job reports k − 1 slots done (every fit's own
step callback reports that same number, which also checks cancellation and the time limit),
and k after it: the sequence of progress values is a function of F and the candidates' public
step counts only.

Base mechanism Q = one slot's outcome (j, w_j, s): its law is that of "pick j uniformly, fit
candidate j, noise its count" — the slot's other fits use other bits of the job's random stream
and are discarded, so they change neither this law nor the independence of the slots. Privacy of
Q (replace-one):
candidate j's fit is μ_j-GDP with μ_j ≤ μ_fit (its own plan's exact μ, checked at planning);
given w, the score's data part Σ_i 1[…] is a sum of per-row terms in {0, 1}, each a function of
its own row and w only, so replacing one row moves it by at most 1: a Gaussian release of
sensitivity 1 with σ_s = 1/μ_s is μ_s-GDP. Adaptive composition (Dong, Roth & Su 2022,
Cor. 3.3): (w, s) is √(μ_j² + μ_s²) ≤ μ_Q-GDP. The choice of j is public randomness: the law of
(j, w, s) is a mixture with the same weights 1/m under neighbours, and by joint convexity of
exp((α−1)D_α) its RDP is ≤ max_j of the candidates' curves ≤ αμ_Q²/2. Hence Q is
(α, αμ_Q²/2)-RDP at every order, and A (K repetitions, best score released) is bounded by
Papernot & Steinke's Thm 2 — the plan's event is ``RepeatAndSelectDpEvent(Gaussian(1/μ_Q),
E[K], η)``, which the ledger's RDP accountant evaluates (not a Gaussian-family charge: it goes
through the filter's Rényi test).

Calibration (public only). F is fixed first (η, γ only), then μ_Q is the largest value
(bisection) for which the plan's whole event — Thm 2's curve composed with the truncation's
Gaussian term (below) — on the ledger's 13 orders converts to (ε, δ) (CKS conversion,
``rdp_to_epsilon``), i.e. the very curve the ledger charges;
μ_s² = ``score_share``·μ_Q² and μ_fit² = μ_Q² − μ_s². Each candidate is planned by its own
optimizer at the target (ε_fit, δ) with ε_fit = gdp_epsilon(μ_fit, δ), so its exact μ_j ≤ μ_fit
(verified; a candidate without an exact μ is refused on its ``optimizer`` field).

Cost. Relative to one job at (ε, δ), each repetition runs at μ_fit ≈ 0.57–0.62·μ* (defaults
E[K] = 2, η = 1, ε ∈ [0.5, 2]): selection pays only when the candidates differ by more than that
loss. Compute: F·m fits whatever K (52 for the defaults with two candidates), against E[K] on
average if K were allowed to show. Small ε cannot be met usefully on the ledger's grid
of orders (its smallest order, 1.5, cannot convert small ε): a job whose μ_Q would fall below
``MIN_MU_RATIO`` = 1/4 of one job's μ* is refused (ε = 0.1 is; ε ≥ 0.2 is not).

Only classification models (binary labels) are supported: the score is the correct count.

K hidden (issue 22, item 6). Every observable of the job — its duration (up to run-to-run
noise), its progress values and their order, its status and attempts, what it logs (nothing of
K), the memory it holds (one copy of the rows, m weight vectors and the best one) — is a
function of the public plan (F and the candidates' plans) alone: every slot does the same work
whatever K and j_k, and the only K-dependent step is which of the F computed outcomes is kept
(one comparison per slot, made for every slot). The accounting of the truncated K is the
truncation lemma of :mod:`service.privacy.private_selection` (a multiplicative bound on the
released law, hence a Rényi curve): the charge is Thm 2's curve for the untruncated law plus
κ(λ) ≤ 1e-6 nats, dominated by a tiny Gaussian term composed into the plan's event
(``ComposedDpEvent([RepeatAndSelectDpEvent(Gaussian(1/μ_Q), E[K], η),
GaussianDpEvent(1/μ_κ)])``). μ_Q is calibrated against that composed curve, so the job is
(ε, δ)-DP as asked, with no δ set aside. The plan records F (``slots``), τ = P[K > F],
E[K·1{K > F}], κ at the smallest order and μ_κ (``truncation``). The defaults η = 1
(geometric), E[K] = 2 give F = 26 slots (τ = 2^{−26} ≈ 1.5e-8) at μ_Q ≈ 0.59·μ* for ε = 1;
η = 0, E[K] = 3 (the former default) would need F = 98 for 0.60·μ*, and η = 1, E[K] = 3 gives
F = 47 for 0.53·μ*. A plan stored before the schedule (no ``slots``) runs the untruncated law
it was charged for, K slots (it shows K, as it did when it was admitted). The scores' noise
and the candidate draws are exact (:mod:`service.privacy.secure_release`).
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any, ClassVar

import numpy as np
from dp_accounting import dp_event
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from service.models.base import FloatArray, Loss
from service.optimizers.kits.base import (
    InfeasibleSpec,
    Optimizer,
    PrivacyTarget,
    ProgressCallback,
    ReleasePlan,
)
from service.optimizers.kits.config import PlanConfig, ShapeConfig
from service.optimizers.kits.planning import plan_from_json, plan_to_json
from service.optimizers.kits.selection_kit import candidate_optimizer, spawn, with_l2
from service.privacy.gdp import event_mu, gdp_epsilon, gdp_mu
from service.privacy.private_selection import MAX_SLOTS as MAX_REPETITION_SLOTS
from service.privacy.private_selection import (
    overhead_mu,
    repetition_slots,
    sample_repetitions,
    sample_untruncated,
    selection_event,
    tnb_gamma,
    tnb_mean,
    tnb_tail,
    truncated_table,
    truncation_overhead,
)
from service.privacy.secure_random import SecureRandom
from service.privacy.secure_release import gaussian_release_fits, secure_gaussian
from service.privacy.target import check_target

__all__ = [
    "MAX_SELECTION_CANDIDATES",
    "PrivateSelection",
    "PrivateSelectionParams",
    "SelectionCandidate",
    "SelectionRun",
    "base_mu",
    "check_score_share",
    "correct_count",
]

NAME = "private_selection"
MAX_SELECTION_CANDIDATES = 8
MAX_SLOTS = MAX_REPETITION_SLOTS
#: Refuse when a repetition's μ_Q would fall below this share of one job's μ at (ε, δ): below
#: ε ≈ 0.2 the ledger's smallest order (1.5) makes the CKS conversion collapse (ε = 0.1 is
#: refused; μ_Q/μ* = 0.43 at ε = 0.2, 0.56 at 0.5, 0.59 at 1 for the defaults E[K] = 2, η = 1).
MIN_MU_RATIO = 0.25
#: Relative slack when checking a candidate's exact μ against μ_fit (floating point only).
_MU_SLACK = 1e-9


@dataclasses.dataclass(frozen=True)
class SelectionConfig(ShapeConfig):
    """What ``fit`` reads from a stored plan (field names = stored keys)."""

    candidates: Any  # [{"optimizer", "plan", "l2"?}, ...] as stored
    score_noise_std: float
    gamma: float
    shape: float
    #: F, the public number of slots; None in plans stored before the schedule (module docstring)
    slots: int | None = None

    def to_hyperparameters(self) -> dict[str, Any]:
        """The stored keys read (a plan stored before the schedule has no ``slots``)."""
        out = super().to_hyperparameters()
        if self.slots is None:
            del out["slots"]
        return out


class SelectionCandidate(BaseModel):
    """One setting to try."""

    model_config = ConfigDict(extra="forbid")

    optimizer: str = Field(
        description="A catalog optimizer whose release is a composition of Gaussian mechanisms."
    )
    params: dict[str, Any] = Field(
        default_factory=dict, description="That optimizer's parameters (its defaults if omitted)."
    )
    l2: float | None = Field(
        default=None,
        ge=0.0,
        allow_inf_nan=False,
        description="L2 regularisation for this candidate, replacing the model's (null: keep).",
    )


def _default_candidates() -> list[SelectionCandidate]:
    return [SelectionCandidate(optimizer="dp_agd"), SelectionCandidate(optimizer="dp_gd")]


class PrivateSelectionParams(BaseModel):
    """Hyper-parameters of ``private_selection``."""

    model_config = ConfigDict(extra="forbid")

    candidates: list[SelectionCandidate] = Field(
        default_factory=_default_candidates,
        min_length=2,
        max_length=MAX_SELECTION_CANDIDATES,
        description="The 2–8 settings to choose among (each repetition picks one uniformly; "
        "every slot of the public schedule fits all of them, so the job runs slots × "
        "candidates fits). "
        "Default: dp_agd and dp_gd at their own defaults (the pair auto's rule is unsure about).",
    )
    mean_repetitions: float = Field(
        default=2.0,
        gt=1.0,
        le=10.0,
        allow_inf_nan=False,
        description="E[K], the mean number of competing repetitions of the truncated negative "
        "binomial K. More repetitions try more candidates but cost more privacy per fit, and "
        "a heavier tail needs more slots F (the plan's hyperparameters.slots).",
    )
    shape: float = Field(
        default=1.0,
        ge=0.0,
        le=10.0,
        allow_inf_nan=False,
        description="η of the truncated negative binomial: 1 geometric (the default: a light "
        "tail, few slots), 0 logarithmic (slightly cheaper in privacy, about twice the slots).",
    )
    score_share: float = Field(
        default=0.05,
        gt=0.0,
        lt=1.0,
        allow_inf_nan=False,
        description="Share of each repetition's μ² spent on the noised score (the rest on "
        "the fit).",
    )


def base_mu(
    epsilon: float, delta: float, gamma: float, shape: float, truncation_mu: float | None = None
) -> float:
    """The largest μ_Q (bisection, 80 halvings, rounded down) for which
    RepeatAndSelect(Gaussian(1/μ_Q), E[K], η), composed with Gaussian(1/μ_κ) when
    ``truncation_mu`` = μ_κ is given, converts to (ε, δ) on the ledger's orders; raises
    ``ValueError`` if none does (ε too small for the grid)."""
    from service.ledger.accounting import rdp_curve
    from service.ledger.filter import rdp_to_epsilon

    def fits(mu: float) -> bool:
        event = selection_event(dp_event.GaussianDpEvent(1.0 / mu), gamma, shape, truncation_mu)
        return rdp_to_epsilon(rdp_curve(event), delta) <= epsilon

    lo, hi = 0.0, 20.0
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        if mid > 0.0 and fits(mid):
            lo = mid
        else:
            hi = mid
    if lo <= 1e-6 or not fits(lo):
        raise ValueError("this (ε, δ) cannot be met by repeated selection on the ledger's orders")
    return lo


def check_score_share(share: float, mu_q: float) -> None:
    """Refuse (``optimizer.params.score_share``) a share whose score noise the fit cannot draw.

    Each slot releases its candidate's correct count (sensitivity 1) with Gaussian noise
    σ_s = 1/μ_s = 1/(μ_Q·√share) (:func:`~service.privacy.secure_release.secure_gaussian`),
    whose exact sampler needs (Δ_int·σ_s)² — Δ_int ≈ 2^20 on the release grid — within float64:
    σ_s ≲ 1.3e148, i.e. share ≳ 6e-297/μ_Q². The test is the release's own
    (:func:`~service.privacy.secure_release.gaussian_release_fits`), so a plan is admitted
    exactly when no slot's score release can overflow; the message states the smallest share
    that fits (bisection on the same test)."""
    if gaussian_release_fits(1, 1.0 / (mu_q * math.sqrt(share)), 1.0):
        return

    def fits(s: float) -> bool:
        return gaussian_release_fits(1, 1.0 / (mu_q * math.sqrt(s)), 1.0)

    lo, hi = share, 1.0  # lo fails, hi fits (σ_s = 1/μ_Q at most: a small multiple of 1)
    for _ in range(64):
        mid = math.sqrt(lo) * math.sqrt(hi)  # geometric mean, without underflow
        lo, hi = (lo, mid) if fits(mid) else (mid, hi)
    unit = 10.0 ** (math.floor(math.log10(hi)) - 2)  # three significant digits, rounded up
    digits = math.ceil(hi / unit)
    while not fits(digits * unit):
        digits += 1
    raise InfeasibleSpec(
        "optimizer.params.score_share",
        f"score_share = {share!r} makes the score's noise σ = 1/(μ_Q·√score_share) = "
        f"{1.0 / (mu_q * math.sqrt(share)):.3g} too large for the exact noise sampler "
        f"(float64 overflows); use score_share ≥ {digits * unit:.3g}",
    )


def correct_count(loss: Loss, w: FloatArray, X: FloatArray, y: FloatArray) -> int:
    """Σ_i 1[prediction_i = y_i]: each term depends on row i and w only (sensitivity 1)."""
    return int(np.count_nonzero(loss.predict(w, X) == y))


@dataclasses.dataclass(frozen=True)
class SelectionRun:
    """Everything one run computed (tests and audits only: only ``weights`` is released).
    ``picked`` and ``scores`` cover every slot; only the first ``repetitions`` competed."""

    repetitions: int
    slots: int
    picked: list[int]
    scores: list[float]
    best: int
    weights: FloatArray
    fits: int


class PrivateSelection:
    """Papernot & Steinke (2022): a public schedule of F slots of (random candidate, fit,
    noised training accuracy), every candidate fitted in each; the best noised score among the
    first K slots (K ~ truncated negative binomial, K ≤ F, hidden) is released."""

    name: ClassVar[str] = NAME
    summary: ClassVar[str] = (
        "Private choice among 2–8 candidate settings of Gaussian-noise optimizers: a hidden "
        "random number K of repetitions (truncated negative binomial), each a random candidate "
        "fitted on all rows and scored by its noised training accuracy; the best is released. "
        "The job always runs a public schedule of F slots, every candidate fitted in each, so "
        "its duration and progress do not show K (F × candidates fits). One job, one charge "
        "(Rényi DP of repeated selection)."
    )
    assumptions: ClassVar[str] = (
        "Classification model; every candidate's optimizer releases a composition of "
        "Gaussian mechanisms (an exact GDP μ); delta > 0; epsilon ≥ about 0.2 (the ledger's "
        "grid of Rényi orders)."
    )
    guarantee: ClassVar[str] = (
        "(ε, δ)-DP, replace-one: the RDP curve of Papernot & Steinke (2022) Thm 2 for a base "
        "repetition of GDP μ_Q (fit and noised score composed), plus the truncation of K at F "
        "(a Rényi overhead ≤ 1e-6, composed into the event), converted to (ε, δ) on the "
        "ledger's orders and charged as that curve."
    )
    reference: ClassVar[str] = (
        "Papernot & Steinke (2022), 'Hyperparameter Tuning with Renyi Differential Privacy', "
        "ICLR, Thm 2; Liu & Talwar (2019), 'Private selection from private candidates', STOC."
    )
    Params: ClassVar[type[BaseModel]] = PrivateSelectionParams
    Config: ClassVar[type[PlanConfig]] = SelectionConfig

    def plan(
        self, params: BaseModel, loss: Loss, n: int, d: int, target: PrivacyTarget
    ) -> ReleasePlan:
        """Calibrate μ_Q, plan every candidate at (ε_fit, δ) and declare the selection event.

        Raises :class:`InfeasibleSpec` for a regression model ("model"), δ = 0 or an ε the
        grid cannot meet ("privacy.*"), an unknown, recursive or non-Gaussian candidate
        optimizer ("optimizer.params.candidates.<i>.optimizer") or a candidate's own refusal.
        """
        p = (
            params
            if isinstance(params, PrivateSelectionParams)
            else PrivateSelectionParams.model_validate(params.model_dump())
        )
        if loss.task != "classification":
            raise InfeasibleSpec(
                "model", f"{NAME} scores candidates by training accuracy: classification only"
            )
        check_target(target, pure_allowed=False, optimizer=NAME)
        from service.ledger.accounting import ORDERS

        gamma = tnb_gamma(p.mean_repetitions, p.shape)
        try:
            slots = repetition_slots(gamma, p.shape, min(ORDERS))
        except ValueError:
            raise InfeasibleSpec(
                "optimizer.params.mean_repetitions",
                f"the law of K with mean {p.mean_repetitions:g} and shape {p.shape:g} has too "
                "heavy a tail for a public schedule of at most "
                f"{MAX_SLOTS} slots; lower mean_repetitions or raise shape",
            ) from None
        law = truncated_table(slots, gamma, p.shape)
        kappa = truncation_overhead(law, ORDERS)
        mu_kappa = overhead_mu(law, ORDERS)
        tail_probability, tail_mean = tnb_tail(slots, gamma, p.shape)
        try:
            mu_q = base_mu(target.epsilon, target.delta, gamma, p.shape, mu_kappa)
            if mu_q < MIN_MU_RATIO * gdp_mu(target.epsilon, target.delta):
                raise ValueError("the grid's conversion leaves too little for the fits")
        except ValueError:
            raise InfeasibleSpec(
                "privacy.epsilon",
                f"epsilon = {target.epsilon:g} is too small for repeated selection on the "
                "ledger's Rényi orders; use epsilon ≥ 0.2 or name one optimizer",
            ) from None
        mu_score = mu_q * math.sqrt(p.score_share)
        check_score_share(p.score_share, mu_q)
        # candidates may exceed μ_fit by the slack (gdp_epsilon rounds ε up), still ≤ μ_Q
        mu_fit = mu_q * math.sqrt(1.0 - p.score_share) / (1.0 + _MU_SLACK)
        fit_target = PrivacyTarget(gdp_epsilon(mu_fit, target.delta), target.delta)
        if fit_target.epsilon <= 0.0:  # μ_fit ≈ 0: no candidate could be planned
            raise InfeasibleSpec(
                "optimizer.params.score_share",
                f"score_share = {p.score_share!r} leaves the fits μ_fit = {mu_fit:.3g}, which "
                f"is ε = 0 at δ = {target.delta:g}: no candidate can be fitted; use a smaller "
                "score_share",
            )
        candidates: list[dict[str, Any]] = []
        plans: list[ReleasePlan] = []
        for i, candidate in enumerate(p.candidates):
            prefix = f"optimizer.params.candidates.{i}"
            optimizer = _candidate(candidate.optimizer, f"{prefix}.optimizer")
            try:
                cparams = optimizer.Params.model_validate(candidate.params)
            except ValidationError as exc:
                first = exc.errors()[0]
                path = ".".join(str(part) for part in first.get("loc", ()))
                field = f"{prefix}.params" + (f".{path}" if path else "")
                raise InfeasibleSpec(field, f"{field}: {first.get('msg', 'invalid')}") from None
            try:
                cplan = optimizer.plan(cparams, with_l2(loss, candidate.l2), n, d, fit_target)
            except InfeasibleSpec as exc:
                raise InfeasibleSpec(exc.field, f"candidate {i}: {exc.message}") from None
            mu_j = None if cplan.parallel_events else event_mu(cplan.event)
            if mu_j is None or mu_j > mu_fit * (1.0 + _MU_SLACK):
                raise InfeasibleSpec(
                    f"{prefix}.optimizer",
                    f"candidate {i}: {optimizer.name} does not release a composition of "
                    "Gaussian mechanisms with an exact μ at the planned target",
                )
            plans.append(cplan)
            candidates.append(
                {
                    "optimizer": optimizer.name,
                    "params": cparams.model_dump(mode="json"),
                    "l2": candidate.l2,
                    "mu": mu_j,
                    "plan": json.loads(json.dumps(plan_to_json(cplan))),
                }
            )
        # √(μ_j² + μ_s²) ≤ √((μ_fit(1 + slack))² + μ_s²) = μ_Q for every candidate
        event = selection_event(dp_event.GaussianDpEvent(1.0 / mu_q), gamma, p.shape, mu_kappa)
        hyperparameters: dict[str, Any] = {
            "n": n,
            "d": d,
            "distribution": "truncated_negative_binomial",
            "shape": p.shape,
            "gamma": gamma,
            "mean_repetitions": tnb_mean(gamma, p.shape),
            "base_mu": mu_q,
            "fit_mu": mu_fit,
            "fit_epsilon": fit_target.epsilon,
            "score": "noised_correct_training_rows",
            "score_noise_std": 1.0 / mu_score,
            "candidates": candidates,
            # the public schedule (module docstring): what the job runs whatever K
            "slots": slots,
            "fits": slots * len(plans),
            "fit_steps": slots * sum(cp.total_steps for cp in plans),
            "truncation": {
                "law": "D_{eta,gamma} conditioned on K <= slots",
                "tail_probability": tail_probability,
                "tail_mean": tail_mean,
                "overhead_rdp_at_min_order": kappa[0],
                "overhead_mu": mu_kappa,
            },
        }
        return ReleasePlan(
            mechanism="repeat_and_select+gaussian",
            sensitivity=plans[0].sensitivity,
            noise_scale=plans[0].noise_scale,
            event=event,
            total_steps=slots,
            hyperparameters=hyperparameters,
        )

    def run(
        self,
        plan: ReleasePlan,
        loss: Loss,
        X: FloatArray,
        y: FloatArray,
        rng: SecureRandom,
        progress: ProgressCallback,
        *,
        force_repetitions: int | None = None,
    ) -> SelectionRun:
        """Draw K and the slots' candidates, run every slot, keep the best noised score among
        the first K (audits/tests: everything here but ``weights`` is private).

        ``force_repetitions`` is a TEST HOOK: K is still drawn (the random stream is consumed
        alike) and then replaced by this value (1 ≤ it ≤ F), so tests can compare the work at
        K = 1 and K = F. ``fit`` never passes it."""
        config = SelectionConfig.from_hyperparameters(plan.hyperparameters)
        n, d = config.n, config.d
        X = np.asanyarray(X, dtype=np.float64)  # keeps the rows' public layout (inputs.py)
        y = np.asarray(y, dtype=np.float64)
        if X.shape != (n, d) or y.shape != (n,):
            raise ValueError("the data's shape differs from the plan's public n and d")
        candidates = list(config.candidates)
        plans = [plan_from_json(c["plan"]) for c in candidates]
        optimizers = [_candidate(str(c["optimizer"]), "optimizer") for c in candidates]
        losses = [with_l2(loss, c.get("l2")) for c in candidates]
        std = config.score_noise_std
        control, fits = spawn(rng, 2)
        if config.slots is None:
            # a plan stored before the public schedule: charged for the untruncated law, it
            # runs that law (and shows K, as it did when it was admitted)
            repetitions = sample_untruncated(control, config.gamma, config.shape)
            slots = repetitions
        else:
            slots = config.slots
            repetitions = sample_repetitions(
                control, truncated_table(slots, config.gamma, config.shape)
            )
        if force_repetitions is not None:
            if not 1 <= force_repetitions <= slots:
                raise ValueError("force_repetitions must be in [1, slots]")
            repetitions = force_repetitions
        picked = [control.integer(len(candidates)) for _ in range(slots)]
        last = max(1, plan.total_steps - 1)
        scores: list[float] = []
        best, best_score, best_w = -1, -math.inf, np.zeros(d)
        fitted = 0
        for k in range(slots):
            done = min(k, last)

            def report(step: int, done: int = done) -> None:
                progress(done)  # slots done so far (also checks cancellation and the clock)

            # the same work in every slot: every candidate fitted and counted
            weights: list[FloatArray] = []
            counts: list[float] = []
            for j in range(len(candidates)):
                w = np.asarray(
                    optimizers[j].fit(plans[j], losses[j], X, y, fits, report), dtype=np.float64
                )
                fitted += 1
                weights.append(w)
                counts.append(float(correct_count(loss, w, X, y)))
            j = picked[k]
            score = float(secure_gaussian(np.array([counts[j]]), std, 1.0, control)[0])
            scores.append(score)
            # the one K-dependent step: whether this slot competes (a comparison per slot)
            competes = k < repetitions
            if competes and score > best_score:
                best, best_score, best_w = k, score, weights[j]
            if k + 1 < slots:
                progress(min(k + 1, last))
        progress(plan.total_steps)
        return SelectionRun(
            repetitions=repetitions,
            slots=slots,
            picked=picked,
            scores=scores,
            best=best,
            weights=best_w,
            fits=fitted,
        )

    def fit(
        self,
        plan: ReleasePlan,
        loss: Loss,
        X: FloatArray,
        y: FloatArray,
        rng: SecureRandom,
        progress: ProgressCallback,
    ) -> FloatArray:
        """Run the plan on the private rows and release the best repetition's noised w."""
        out: FloatArray = self.run(plan, loss, X, y, rng, progress).weights.copy()
        return out


def _candidate(name: str, field: str) -> Optimizer:
    return candidate_optimizer(
        name, field, itself=NAME, refusal=f"{NAME} cannot select among its own runs"
    )


OPTIMIZER = PrivateSelection
