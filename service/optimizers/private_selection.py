r"""``private_selection``: choose among a few candidate (optimizer, parameters, l2) settings by
random repetition with noised scores (Papernot & Steinke 2022, Thm 2), in one job with one
charge. The mechanism's accounting: :mod:`service.privacy.private_selection`.

Algorithm. The plan fixes m candidates (2 ≤ m ≤ 8), each an optimizer of the catalog whose
release is a composition of Gaussian mechanisms (its plan has an exact GDP μ: ``dp_gd``,
``dp_agd``, …), with its parameters and optionally an ``l2`` replacing the model's. Then:

1. Draw K ~ D_{η,γ} (truncated negative binomial, public η, γ) from the job's generator.
2. K times, independently: pick j uniformly from the m candidates; fit candidate j on all n
   rows with its plan (calibrated at the base target below); score it with
   s = Σ_i 1[sign(w·x_i) = y_i] + N(0, σ_s²) — its noised number of correctly classified
   training rows.
3. Release the fitted w of the repetition with the highest noised score. Nothing else: not K,
   not which candidate won, not the scores.

Base mechanism Q = one repetition of step 2, output (j, w, s). Privacy of Q (replace-one):
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

Calibration (public only). μ_Q is the largest value (bisection) for which the event's RDP
curve on the ledger's 13 orders converts to (ε, δ) (CKS conversion, ``rdp_to_epsilon``);
μ_s² = ``score_share``·μ_Q² and μ_fit² = μ_Q² − μ_s². Each candidate is planned by its own
optimizer at the target (ε_fit, δ) with ε_fit = gdp_epsilon(μ_fit, δ), so its exact μ_j ≤ μ_fit
(verified; a candidate without an exact μ is refused on its ``optimizer`` field).

Cost. Relative to one job at (ε, δ), each repetition runs at μ_fit ≈ 0.6·μ* (E[K] = 3, η = 0,
ε ∈ [0.5, 2]; 0.7·μ* for E[K] = 1.5): selection pays only when the candidates differ by more
than that loss. Compute: E[K] fits on average. Small ε cannot be met usefully on the ledger's grid
of orders (its smallest order, 1.5, cannot convert small ε): a job whose μ_Q would fall below
``MIN_MU_RATIO`` = 1/4 of one job's μ* is refused (ε = 0.1 is; ε ≥ 0.2 is not).

Only classification models (binary labels) are supported: the score is the correct count.

Known limit (issue 22, item 6, open). Thm 2 needs K hidden, but the job's duration and progress
grow with K. Running a public maximum F of fits hides K only if F covers K's tail: for the
default E[K] = 3, η = 0 (γ ≈ 0.15), P[K > F] ≤ 1e-30 needs F ≈ 400 fits (≈ 170 for η = 1), and a
truncated K needs its own bound (Thm 2 is about the untruncated law); accounting with K public
gives finite Rényi bounds only at orders α ≲ 1.7 for μ_Q ≈ 0.5. The scores' noise and the
candidate draws are exact (:mod:`service.privacy.secure_release`).
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
from service.privacy.private_selection import (
    sample_repetitions,
    selection_event,
    tnb_gamma,
    tnb_mean,
)
from service.privacy.secure_random import SecureRandom
from service.privacy.secure_release import secure_gaussian
from service.privacy.target import check_target

__all__ = [
    "MAX_SELECTION_CANDIDATES",
    "PrivateSelection",
    "PrivateSelectionParams",
    "SelectionCandidate",
    "SelectionRun",
    "base_mu",
    "correct_count",
]

NAME = "private_selection"
MAX_SELECTION_CANDIDATES = 8
#: Refuse when a repetition's μ_Q would fall below this share of one job's μ at (ε, δ): below
#: ε ≈ 0.2 the ledger's smallest order (1.5) makes the CKS conversion collapse (μ_Q/μ* = 0.012
#: at ε = 0.1, 0.47 at 0.2, 0.58 at 0.5 for E[K] = 3, η = 0).
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
        description="The 2–8 settings to choose among (each repetition picks one uniformly). "
        "Default: dp_agd and dp_gd at their own defaults (the pair auto's rule is unsure about).",
    )
    mean_repetitions: float = Field(
        default=3.0,
        gt=1.0,
        le=10.0,
        allow_inf_nan=False,
        description="E[K], the mean number of repetitions (fits) of the truncated negative "
        "binomial K. More repetitions try more candidates but cost more privacy per fit.",
    )
    shape: float = Field(
        default=0.0,
        ge=0.0,
        le=10.0,
        allow_inf_nan=False,
        description="η of the truncated negative binomial: 0 logarithmic (the cheapest in "
        "privacy), 1 geometric.",
    )
    score_share: float = Field(
        default=0.05,
        gt=0.0,
        lt=1.0,
        allow_inf_nan=False,
        description="Share of each repetition's μ² spent on the noised score (the rest on "
        "the fit).",
    )


def base_mu(epsilon: float, delta: float, gamma: float, shape: float) -> float:
    """The largest μ_Q (bisection, 80 halvings, rounded down) for which
    RepeatAndSelect(Gaussian(1/μ_Q), E[K], η) converts to (ε, δ) on the ledger's orders;
    raises ``ValueError`` if none does (ε too small for the grid)."""
    from service.ledger.accounting import rdp_curve
    from service.ledger.filter import rdp_to_epsilon

    def fits(mu: float) -> bool:
        event = selection_event(dp_event.GaussianDpEvent(1.0 / mu), gamma, shape)
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


def correct_count(loss: Loss, w: FloatArray, X: FloatArray, y: FloatArray) -> int:
    """Σ_i 1[prediction_i = y_i]: each term depends on row i and w only (sensitivity 1)."""
    return int(np.count_nonzero(loss.predict(w, X) == y))


@dataclasses.dataclass(frozen=True)
class SelectionRun:
    """Everything one run computed (tests and audits only: only ``weights`` is released)."""

    repetitions: int
    picked: list[int]
    scores: list[float]
    best: int
    weights: FloatArray


class PrivateSelection:
    """Papernot & Steinke (2022): K ~ truncated negative binomial repetitions of (random
    candidate, fit, noised training accuracy); the best noised score's model is released."""

    name: ClassVar[str] = NAME
    summary: ClassVar[str] = (
        "Private choice among 2–8 candidate settings of Gaussian-noise optimizers: a random "
        "number K of repetitions (truncated negative binomial), each fitting a random candidate "
        "on all rows and scoring it by its noised training accuracy; the best is released. "
        "One job, one charge (Rényi DP of repeated selection)."
    )
    assumptions: ClassVar[str] = (
        "Classification model; every candidate's optimizer releases a composition of "
        "Gaussian mechanisms (an exact GDP μ); delta > 0; epsilon ≥ about 0.2 (the ledger's "
        "grid of Rényi orders)."
    )
    guarantee: ClassVar[str] = (
        "(ε, δ)-DP, replace-one: the RDP curve of Papernot & Steinke (2022) Thm 2 for a base "
        "repetition of GDP μ_Q (fit and noised score composed), converted to (ε, δ) on the "
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
        gamma = tnb_gamma(p.mean_repetitions, p.shape)
        try:
            mu_q = base_mu(target.epsilon, target.delta, gamma, p.shape)
            if mu_q < MIN_MU_RATIO * gdp_mu(target.epsilon, target.delta):
                raise ValueError("the grid's conversion leaves too little for the fits")
        except ValueError:
            raise InfeasibleSpec(
                "privacy.epsilon",
                f"epsilon = {target.epsilon:g} is too small for repeated selection on the "
                "ledger's Rényi orders; use epsilon ≥ 0.2 or name one optimizer",
            ) from None
        mu_score = mu_q * math.sqrt(p.score_share)
        # candidates may exceed μ_fit by the slack (gdp_epsilon rounds ε up), still ≤ μ_Q
        mu_fit = mu_q * math.sqrt(1.0 - p.score_share) / (1.0 + _MU_SLACK)
        fit_target = PrivacyTarget(gdp_epsilon(mu_fit, target.delta), target.delta)
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
        event = selection_event(dp_event.GaussianDpEvent(1.0 / mu_q), gamma, p.shape)
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
        }
        steps = max(cp.total_steps for cp in plans)
        return ReleasePlan(
            mechanism="repeat_and_select+gaussian",
            sensitivity=plans[0].sensitivity,
            noise_scale=plans[0].noise_scale,
            event=event,
            total_steps=max(1, math.ceil(p.mean_repetitions * steps)),
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
    ) -> SelectionRun:
        """Draw K, run the repetitions, keep the best noised score (audits/tests: everything
        here but ``weights`` is private)."""
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
        repetitions = sample_repetitions(control, config.gamma, config.shape)
        last = max(1, plan.total_steps - 1)
        done = 0
        picked: list[int] = []
        scores: list[float] = []
        best, best_score, best_w = -1, -math.inf, np.zeros(d)
        for k in range(repetitions):
            j = control.integer(len(candidates))
            offset = done

            def report(step: int, offset: int = offset) -> None:
                progress(min(offset + step, last))

            w = np.asarray(
                optimizers[j].fit(plans[j], losses[j], X, y, fits, report), dtype=np.float64
            )
            done += plans[j].total_steps
            count = np.array([float(correct_count(loss, w, X, y))])
            score = float(secure_gaussian(count, std, 1.0, control)[0])  # sensitivity 1
            picked.append(j)
            scores.append(score)
            if score > best_score:
                best, best_score, best_w = k, score, w
        progress(plan.total_steps)
        return SelectionRun(
            repetitions=repetitions, picked=picked, scores=scores, best=best, weights=best_w
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
