r"""Private hyper-parameter selection in one job with one charge (Chaudhuri, Monteleoni &
Sarwate 2011, Alg. 3; used by Wu et al. 2017 — paper 004 — §4.1).

Algorithm. The analyst names a base optimizer of the catalog and l ∈ [2, 16] candidates, each a
set of the base optimizer's parameters and optionally an ``l2`` replacing the model's.

1. Draw a uniformly random partition of the n row indices — from the job's generator, *never*
   from the data — into l training parts T_1 … T_l and one holdout part H. The part sizes are
   public functions of (n, l, ``holdout_fraction``): |H| = round(f·n) (clamped to [1, n − l]),
   the other n − |H| rows split as evenly as possible (sizes differ by at most one).
2. Train candidate i on T_i alone with the base optimizer at the job's FULL (ε, δ): its release
   plan is the base optimizer's ``plan`` for n_i = |T_i| rows, computed at admission time.
3. Score every released (noised) w_i on H: u_i = −e_i, e_i = the number of holdout rows it gets
   wrong — misclassified rows (sign(w·x) ≠ y) for classification losses, rows with
   |w·x − y| > ``regression_tolerance`` (public) for regression losses.
4. Select one candidate with the exponential mechanism at ε_sel = ε (capped at 700, see below):
   P(i) ∝ exp(ε_sel u_i / (2Δu)), Δu = 1, and release only w_î. The scores, the other
   candidates and the partition are never released. (The proof below covers releasing the
   pair (î, w_î), so reporting which candidate won would cost nothing more; the service
   currently reports only w_î, with candidate 0's sensitivity and noise scale.)

Sensitivity of the score. Under replace-one adjacency a changed holdout row changes each count
e_i by at most 1, so Δu = 1. The counts can move in opposite directions for different candidates
(one now right, another now wrong): u is not monotone, hence the factor 2 in the exponent
(McSherry & Talwar 2007): P_S(i)/P_S'(i) = e^{ε(u_i − u'_i)/2} · Z'/Z ≤ e^{ε/2} · e^{ε/2}.

Privacy (proof). Fix neighbouring S, S' (same n, differ in row r) and fix the partition π; π is
drawn independently of the data, so it is the same random variable under S and S'. Under π row r
lies in exactly one part.

- r ∈ T_j. The candidates' noise comes from independent generator streams (``rng.spawn``), so
  (w_1 … w_l) has the product law ⊗_i M_i(T_i); only the j-th factor differs between S and S',
  and H is the same. The output is a randomised function (post-processing) of
  (w_1 … w_l, H), so for every Rényi order α, D_α(out(S) ‖ out(S')) ≤ D_α(M_j(T_j) ‖ M_j(T'_j))
  ≤ ρ_j(α), the RDP curve of candidate j's base plan (data processing; the other factors are
  identical and cancel in the product). Likewise for (ε, δ): candidate j is (ε, δ)-DP.
- r ∈ H. All w_i have the same law under S and S'; conditionally on them the output is the
  exponential mechanism on H, which is ε_sel-DP, so (the w_i being a common public mixing
  variable) D_α ≤ ρ_RR(ε_sel)(α), the tight RDP curve of an ε_sel-DP mechanism (binary
  randomized response; ``pure_dp_event``), and ε_sel ≤ ε.

For each fixed π the pair is therefore bounded by max(ρ_1, …, ρ_l, ρ_sel) pointwise in α.
The released law is the mixture over π with the *same* public weights under S and S'; the Rényi
divergence (exp((α−1)D_α) is jointly convex) and the hockey-stick divergence are jointly convex,
so the mixture obeys the same bound (quasi-convexity). Hence the job is (ε, δ)-DP and its RDP
curve is ≤ the pointwise maximum of its parts' curves: the plan declares
``parallel_events = (distinct base events…, pure_dp_event(ε_sel))`` and the ledger charges that
maximum (:func:`service.ledger.accounting.charge_curve`); ``event`` is their plain composition,
a conservative upper bound kept for audit. The maximum is over every candidate's event (they
differ when the params, ``l2`` or n_i differ), which is valid because the changed row is in one
part, whichever. A base plan that itself declares a parallel composition contributes its own
parts (max of maxima). With δ = 0 every part is pure ε-DP (the base optimizer must support
δ = 0, else the job is refused on ``privacy.delta``) and the charge is exactly ε-DP.

What it costs. The job is (ε, δ)-DP like one untuned job, whatever l. On the RDP ledger its
curve is the maximum of one candidate's and ε-DP randomized response's; for δ > 0 the latter
dominates at low orders (RR(ε) ≈ αε²/2 for small ε against a calibrated Gaussian's smaller
slope), so the charge can exceed a plain Gaussian job's at those orders while staying far
below the l + 1-fold composition. (The exponential mechanism is also ε/2-bounded-range, hence
ε²/8-zCDP — a tighter curve dp-accounting has no event for; a possible refinement.) In utility
each candidate sees only n_i ≈ n/(l+1) rows, so its noise (sensitivity ∝ 1/n_i for output
perturbation) grows l+1 times. Tuning pays off when the best candidate's gain outweighs that,
typically for small l on large n.

Defaults (public information only). ``holdout_fraction`` = 1/(l+1): Chaudhuri et al. split the
data into l+1 equal parts. ``base_optimizer`` = ``output_perturbation_gd`` and the candidates a
log-spaced grid l2 ∈ {1e-4, 1e-3, 1e-2, 1e-1} with the base optimizer's own defaults (the
regularisation weight is the parameter Chaudhuri et al. and Wu et al. tune). For δ > 0 and ε > 700
the selection runs at ε_sel = 700 (the pure-DP accountant's range; still ≤ ε, and at that ε the
exponential mechanism is an argmin in all but name).

Sampling. The partition is an exactly uniform permutation and the selection an exact draw of the
exponential mechanism (rejection with exact Bernoulli(e^{−γ}) coins on rational γ,
:func:`select_candidate`), all from the OS CSPRNG (:mod:`service.privacy.secure_random`). Known
limit: the number of rejection rounds (≤ l expected, microseconds) depends on the scores.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np
from dp_accounting import dp_event
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from service.models.base import FloatArray, Loss
from service.optimizers.kits.base import (
    InfeasibleSpec,
    Optimizer,
    PrivacyTarget,
    ProgressCallback,
    ReleasePlan,
    as_mechanism,
)
from service.optimizers.kits.config import PlanConfig, ShapeConfig
from service.optimizers.kits.planning import plan_from_json, plan_to_json
from service.optimizers.kits.selection_kit import candidate_optimizer, spawn, with_l2
from service.privacy.output_perturbation import MAX_PURE_EPSILON, pure_dp_event
from service.privacy.secure_random import SecureRandom, as_secure
from service.privacy.target import check_target

__all__ = [
    "DEFAULT_BASE_OPTIMIZER",
    "DEFAULT_L2_GRID",
    "MAX_CANDIDATES",
    "Candidate",
    "PrivateTuning",
    "PrivateTuningParams",
    "TuningResult",
    "draw_partition",
    "holdout_errors",
    "part_sizes",
    "partition_for",
    "select_candidate",
    "selection_probabilities",
]

NAME = "private_tuning"
DEFAULT_BASE_OPTIMIZER = "output_perturbation_gd"
DEFAULT_L2_GRID: tuple[float, ...] = (1e-4, 1e-3, 1e-2, 1e-1)
MIN_CANDIDATES = 2
MAX_CANDIDATES = 16

IntArray = NDArray[np.int64]


@dataclass(frozen=True)
class TuningConfig(ShapeConfig):
    """What ``fit`` reads from a stored plan (field names = stored keys)."""

    base_optimizer: str
    part_sizes: tuple[int, ...]
    holdout_size: int
    candidates: Any  # [{"l2", "plan"}, ...] as stored
    selection_epsilon: float
    regression_tolerance: float | None = None


class Candidate(BaseModel):
    """One hyper-parameter setting to try."""

    model_config = ConfigDict(extra="forbid")

    params: dict[str, Any] = Field(
        default_factory=dict,
        description=(
            "Parameters of the base optimizer for this candidate (validated against the base "
            "optimizer's own parameter schema; omitted values get its theory defaults)."
        ),
    )
    l2: float | None = Field(
        default=None,
        ge=0.0,
        allow_inf_nan=False,
        description=(
            "L2 regularisation μ for this candidate, replacing the model's l2 (null: keep the "
            "model's)."
        ),
    )


def _default_candidates() -> list[Candidate]:
    return [Candidate(l2=mu) for mu in DEFAULT_L2_GRID]


class PrivateTuningParams(BaseModel):
    """Hyper-parameters of ``private_tuning``; omitted values get the documented defaults."""

    model_config = ConfigDict(extra="forbid")

    base_optimizer: str = Field(
        default=DEFAULT_BASE_OPTIMIZER,
        description=(
            "Name of the catalog optimizer that trains every candidate (any optimizer except "
            "private_tuning itself)."
        ),
    )
    candidates: list[Candidate] = Field(
        default_factory=_default_candidates,
        min_length=MIN_CANDIDATES,
        max_length=MAX_CANDIDATES,
        description=(
            "The l settings to choose from (2 ≤ l ≤ 16). Each is trained on its own 1/(l+1)-th "
            "of the rows at the job's full (ε, δ). Default: l2 ∈ {1e-4, 1e-3, 1e-2, 1e-1} with "
            "the base optimizer's defaults."
        ),
    )
    holdout_fraction: float | None = Field(
        default=None,
        gt=0.0,
        lt=1.0,
        allow_inf_nan=False,
        description=(
            "Fraction of the rows held out to score the candidates. Default: 1/(l+1), the equal "
            "split of Chaudhuri et al. (2011, Alg. 3)."
        ),
    )
    regression_tolerance: float | None = Field(
        default=None,
        gt=0.0,
        allow_inf_nan=False,
        description=(
            "Regression models only (required for them): a holdout row counts as an error when "
            "|w·x − y| exceeds this public tolerance. Classification models count "
            "misclassified rows."
        ),
    )


# --- the math, as plain functions ------------------------------------------------------------


def part_sizes(n: int, candidates: int, holdout_fraction: float) -> tuple[list[int], int]:
    """Public sizes (training parts, holdout): |H| = round(f·n) clamped to [1, n − l], the rest
    split evenly (the first (n − |H|) mod l parts get one extra row). Needs n ≥ l + 1."""
    if candidates < 1 or n < candidates + 1:
        raise ValueError("need at least one row per training part and one holdout row")
    holdout = min(max(1, round(holdout_fraction * n)), n - candidates)
    base, extra = divmod(n - holdout, candidates)
    return [base + (1 if i < extra else 0) for i in range(candidates)], holdout


def draw_partition(
    sizes: Sequence[int], holdout: int, rng: SecureRandom
) -> tuple[list[IntArray], IntArray]:
    """A uniformly random partition of range(n) (n = Σ sizes + holdout) into parts of the given
    sizes: (training index arrays, holdout indices). Uses ``rng`` only (never the data)."""
    n = int(sum(sizes)) + holdout
    order = as_secure(rng).permutation(n)
    bounds = np.cumsum([0, *sizes])
    parts = [order[bounds[i] : bounds[i + 1]] for i in range(len(sizes))]
    return parts, order[bounds[-1] :]


def holdout_errors(
    loss: Loss,
    weights: Sequence[FloatArray],
    X: FloatArray,
    y: FloatArray,
    regression_tolerance: float | None,
) -> IntArray:
    """e_i: holdout rows candidate i gets wrong (misclassified; or |w·x − y| > tolerance).

    Each count changes by at most 1 when one holdout row is replaced (sensitivity 1)."""
    errors = np.empty(len(weights), dtype=np.int64)
    for i, w in enumerate(weights):
        if loss.task == "classification":
            wrong = loss.predict(w, X) != y
        else:
            if regression_tolerance is None:
                raise ValueError("regression scoring needs a tolerance")
            wrong = ~(np.abs(X @ w - y) <= regression_tolerance)  # NaN counts as wrong
        errors[i] = int(np.count_nonzero(wrong))
    return errors


def selection_probabilities(errors: Sequence[int] | IntArray, epsilon: float) -> FloatArray:
    """The exponential mechanism's law: P(i) ∝ exp(−ε e_i / 2) (utility −e_i, Δu = 1)."""
    e = np.asarray(errors, dtype=np.float64)
    if e.ndim != 1 or e.size == 0:
        raise ValueError("errors must be a non-empty vector")
    if not (math.isfinite(epsilon) and epsilon > 0.0):
        raise ValueError("epsilon must be a finite number > 0")
    logits = -0.5 * epsilon * (e - e.min())  # ≤ 0, the best candidate at 0: no overflow
    p: FloatArray = np.exp(logits)
    p /= p.sum()
    return p


def select_candidate(errors: Sequence[int] | IntArray, epsilon: float, rng: SecureRandom) -> int:
    """One exact draw of the exponential mechanism P(i) ∝ exp(−ε(e_i − e_min)/2).

    The float ε is an exact dyadic rational, so γ_i = ε(e_i − e_min)/2 is an exact rational
    (the counts are integers). Rejection: propose i uniformly, accept with probability
    exp(−γ_i) (:meth:`SecureRandom.bernoulli_exp_fraction`, exact). One round accepts i with
    probability exp(−γ_i)/l, so the accepted index has law exp(−γ_i)/Σ_j exp(−γ_j) exactly; the
    best candidate (γ = 0) is always accepted, so a round succeeds with probability ≥ 1/l."""
    e = [int(v) for v in np.asarray(errors).reshape(-1)]
    if not e:
        raise ValueError("errors must be a non-empty vector")
    if not (math.isfinite(epsilon) and epsilon > 0.0):
        raise ValueError("epsilon must be a finite number > 0")
    best = min(e)
    half_eps = Fraction(epsilon) / 2
    source = as_secure(rng)
    while True:
        i = source.integer(len(e))
        if source.bernoulli_exp_fraction(half_eps * (e[i] - best)):
            return i


@dataclass(frozen=True)
class TuningResult:
    """Everything one tuning run computed. Only ``weights[selected]`` may ever be released:
    the other candidates, the errors and the partition are data-dependent and private."""

    parts: list[IntArray]
    holdout: IntArray
    weights: list[FloatArray]
    errors: IntArray
    selected: int


def _streams(
    rng: SecureRandom, candidates: int
) -> tuple[SecureRandom, list[SecureRandom], SecureRandom]:
    """(partition stream, one stream per candidate, selection stream)."""
    children = spawn(rng, candidates + 2)
    return children[0], children[1:-1], children[-1]


# --- the plug-in ------------------------------------------------------------------------------


class PrivateTuning:
    """Chaudhuri et al. (2011) Alg. 3: one candidate per disjoint part, exponential-mechanism
    selection on a holdout part, one charge (the parallel composition's pointwise maximum)."""

    name: ClassVar[str] = NAME
    summary: ClassVar[str] = (
        "Private hyper-parameter selection: split the rows at random into l training parts and "
        "a holdout part, train one candidate setting of a base optimizer per part at the full "
        "(ε, δ), release the candidate picked by the exponential mechanism on its holdout "
        "errors. One job, one charge."
    )
    assumptions: ClassVar[str] = (
        "Those of the base optimizer, for every candidate and its part size n_i ≈ n/(l+1); "
        "2 ≤ l ≤ 16 candidates; n ≥ l + 1. Regression models need a public "
        "regression_tolerance to count holdout errors."
    )
    guarantee: ClassVar[str] = (
        "(ε, δ)-DP whenever the base optimizer is (ε, δ)-DP on each part (ε-DP for δ = 0 with a "
        "pure-DP base optimizer), replace-one adjacency. A changed row lies in one training "
        "part (only that candidate's input changes) or in the holdout (only the ε-DP "
        "exponential mechanism's input changes): charged the pointwise maximum of the "
        "candidates' and the selection's RDP curves, not their sum."
    )
    reference: ClassVar[str] = (
        "Chaudhuri, Monteleoni & Sarwate (2011), 'Differentially Private Empirical Risk "
        "Minimization', JMLR 12, Alg. 3 (private parameter tuning); Wu et al. (2017), "
        "'Bolt-on Differential Privacy for Scalable Stochastic Gradient Descent-based "
        "Analytics', §4.1; McSherry & Talwar (2007), exponential mechanism."
    )
    Params: ClassVar[type[BaseModel]] = PrivateTuningParams
    Config: ClassVar[type[PlanConfig]] = TuningConfig

    def plan(
        self, params: BaseModel, loss: Loss, n: int, d: int, target: PrivacyTarget
    ) -> ReleasePlan:
        """Plan every candidate on its public part size and declare the parallel composition.

        Raises :class:`InfeasibleSpec`: an unknown or recursive base optimizer
        ("optimizer.params.base_optimizer"); candidate parameters the base optimizer rejects
        ("optimizer.params.candidates.<i>.params.<field>"); a base plan's own refusal, with an
        optimizer-parameter field re-rooted under "optimizer.params.candidates.<i>.params" and
        "model" / "privacy.*" kept; too few rows ("optimizer.params.candidates" or
        "optimizer.params.holdout_fraction"); a missing or superfluous regression tolerance
        ("optimizer.params.regression_tolerance"); an invalid (ε, δ) ("privacy.*").
        """
        p = (
            params
            if isinstance(params, PrivateTuningParams)
            else PrivateTuningParams.model_validate(params.model_dump())
        )
        check_target(target, pure_allowed=True, optimizer=NAME)
        if n < 1 or d < 1:
            raise ValueError("n and d must be >= 1")
        base = _base_optimizer(p.base_optimizer)
        count = len(p.candidates)
        if loss.task == "regression":
            if p.regression_tolerance is None:
                raise InfeasibleSpec(
                    "optimizer.params.regression_tolerance",
                    f"{loss.name} is a regression model: give regression_tolerance, the public "
                    "residual |w·x − y| above which a holdout row counts as an error",
                )
        elif p.regression_tolerance is not None:
            raise InfeasibleSpec(
                "optimizer.params.regression_tolerance",
                "regression_tolerance applies to regression models only; classification "
                "candidates are scored by misclassified holdout rows",
            )
        fraction = 1.0 / (count + 1) if p.holdout_fraction is None else p.holdout_fraction
        if n < count + 1:
            raise InfeasibleSpec(
                "optimizer.params.candidates",
                f"{count} candidates need at least {count + 1} rows (one training part each "
                f"and a holdout part); this dataset has {n}",
            )
        sizes, holdout = part_sizes(n, count, fraction)
        if p.holdout_fraction is not None and holdout != round(fraction * n):
            raise InfeasibleSpec(
                "optimizer.params.holdout_fraction",
                f"holdout_fraction = {fraction:g} of {n} rows leaves "
                f"{'no holdout row' if round(fraction * n) < 1 else 'too few training rows'} "
                f"for {count} candidates; choose a fraction in [1/n, 1 − {count}/n]",
            )
        selection_epsilon = min(target.epsilon, MAX_PURE_EPSILON)

        candidates: list[dict[str, Any]] = []
        plans: list[ReleasePlan] = []
        for i, candidate in enumerate(p.candidates):
            prefix = f"optimizer.params.candidates.{i}"
            try:
                base_params = base.Params.model_validate(candidate.params)
            except ValidationError as exc:
                first = exc.errors()[0]
                path = ".".join(str(part) for part in first.get("loc", ()))
                field = f"{prefix}.params" + (f".{path}" if path else "")
                raise InfeasibleSpec(field, f"{field}: {first.get('msg', 'invalid')}") from None
            candidate_loss = with_l2(loss, candidate.l2)
            try:
                base_plan = base.plan(base_params, candidate_loss, sizes[i], d, target)
            except InfeasibleSpec as exc:
                raise _reroot(exc, i, candidate.l2) from None
            plans.append(base_plan)
            candidates.append(
                {
                    "params": base_params.model_dump(mode="json"),
                    "l2": candidate.l2,
                    "n": sizes[i],
                    # normalised through JSON so the plan equals its stored round trip
                    "plan": json.loads(json.dumps(plan_to_json(base_plan))),
                }
            )

        selection = pure_dp_event(selection_epsilon)
        parallel: list[dp_event.DpEvent] = []
        for base_plan in plans:
            for event in base_plan.parallel_events or (base_plan.event,):
                if event not in parallel:
                    parallel.append(event)
        if selection not in parallel:
            parallel.append(selection)
        composed = dp_event.ComposedDpEvent([*(bp.event for bp in plans), selection])
        hyperparameters: dict[str, Any] = {
            "base_optimizer": base.name,
            "n": n,
            "d": d,
            "holdout_fraction": fraction,
            "holdout_size": holdout,
            "part_sizes": sizes,
            "selection_epsilon": selection_epsilon,
            "score": (
                "misclassified_holdout_rows"
                if loss.task == "classification"
                else "holdout_rows_with_residual_above_tolerance"
            ),
            "regression_tolerance": p.regression_tolerance,
            "candidates": candidates,
        }
        first = plans[0]
        return ReleasePlan(
            mechanism=as_mechanism(f"tuning+{first.mechanism}"),
            sensitivity=first.sensitivity,
            noise_scale=first.noise_scale,
            event=composed,
            total_steps=sum(bp.total_steps for bp in plans),
            hyperparameters=hyperparameters,
            parallel_events=tuple(parallel),
        )

    def run(
        self,
        plan: ReleasePlan,
        loss: Loss,
        X: FloatArray,
        y: FloatArray,
        rng: SecureRandom,
        progress: ProgressCallback,
    ) -> TuningResult:
        """Partition, train every candidate, score and select — returns everything computed.

        For tests and audits only: everything but ``weights[selected]`` is private. ``fit``
        releases exactly ``weights[selected]``.
        """
        config = TuningConfig.from_hyperparameters(plan.hyperparameters)
        base = _base_optimizer(config.base_optimizer)
        n, d = config.n, config.d
        sizes = list(config.part_sizes)
        holdout_size = config.holdout_size
        candidates = list(config.candidates)
        if len(candidates) != len(sizes) or sum(sizes) + holdout_size != n:
            raise ValueError("the plan's part sizes are inconsistent")
        X = np.asanyarray(X, dtype=np.float64)  # keeps the rows' public layout (inputs.py)
        y = np.asarray(y, dtype=np.float64)
        if X.shape != (n, d) or y.shape != (n,):
            raise ValueError("the data's shape differs from the plan's public n and d")
        if not bool(np.all(np.isfinite(X))):
            raise ValueError("rows must be finite")
        loss.check_labels(y)
        tolerance = config.regression_tolerance
        if loss.task == "regression" and tolerance is None:
            raise ValueError("the plan has no regression tolerance for this regression loss")

        partition_rng, candidate_rngs, selection_rng = _streams(rng, len(sizes))
        parts, holdout = draw_partition(sizes, holdout_size, partition_rng)
        weights: list[FloatArray] = []
        offset = 0
        for i, candidate in enumerate(candidates):
            base_plan = plan_from_json(candidate["plan"])
            candidate_loss = with_l2(loss, candidate.get("l2"))
            w = base.fit(
                base_plan,
                candidate_loss,
                X[parts[i]],
                y[parts[i]],
                candidate_rngs[i],
                _offset_progress(progress, offset),
            )
            weights.append(np.asarray(w, dtype=np.float64))
            offset += base_plan.total_steps
        errors = holdout_errors(
            loss,
            weights,
            X[holdout],
            y[holdout],
            None if tolerance is None else float(tolerance),
        )
        selected = select_candidate(errors, config.selection_epsilon, selection_rng)
        return TuningResult(
            parts=parts, holdout=holdout, weights=weights, errors=errors, selected=selected
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
        """Run the plan on the private rows and return the selected candidate's noised w."""
        result = self.run(plan, loss, X, y, rng, progress)
        out: FloatArray = result.weights[result.selected].copy()
        return out


def partition_for(plan: ReleasePlan, rng: SecureRandom) -> tuple[list[IntArray], IntArray]:
    """The partition ``fit`` draws from a generator in the state of ``rng`` (public: it depends
    on the plan and the generator only). Spawns from ``rng`` like ``fit`` does."""
    config = TuningConfig.from_hyperparameters(plan.hyperparameters)
    sizes = list(config.part_sizes)
    partition_rng, _, _ = _streams(rng, len(sizes))
    return draw_partition(sizes, config.holdout_size, partition_rng)


# --- helpers ----------------------------------------------------------------------------------


def _base_optimizer(name: str) -> Optimizer:
    return candidate_optimizer(
        name,
        "optimizer.params.base_optimizer",
        itself=NAME,
        refusal="private_tuning cannot tune itself; name the optimizer that trains the "
        "candidates (e.g. output_perturbation_gd)",
    )


def _reroot(exc: InfeasibleSpec, index: int, l2: float | None) -> InfeasibleSpec:
    """A base plan's refusal, with its optimizer-parameter field moved under the candidate."""
    prefix = f"optimizer.params.candidates.{index}"
    field = exc.field
    if field == "optimizer.params" or field.startswith("optimizer.params."):
        field = f"{prefix}.params" + field[len("optimizer.params") :]
    where = f"candidate {index}" + (f" (l2 = {l2:g})" if l2 is not None else "")
    return InfeasibleSpec(field, f"{where}: {exc.message}")


def _offset_progress(progress: ProgressCallback, offset: int) -> ProgressCallback:
    def report(step: int) -> None:
        progress(offset + step)

    return report


OPTIMIZER = PrivateTuning
