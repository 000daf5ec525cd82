r"""``dp_agd_averaged``: DP-AGD's noisy accelerated descent, releasing the average of the second
half of its iterates (tail averaging), with twice DP-AGD's default number of steps.

Mechanism. Exactly :mod:`service.optimizers.dp_agd`'s: w_0 = v_1 = 0, s_1 = 1; for t = 1 … T

    g_t     = ∇F(v_t; S) + ζ_t,              ζ_t ~ N(0, σ² I_d)    (the only data access)
    w_t     = prox_{η·l1‖·‖₁}(v_t − η g_t)
    s_{t+1} = (1 + √(1 + 4 s_t²)) / 2,   v_{t+1} = w_t + ((s_t − 1)/s_{t+1}) (w_t − w_{t−1}),

and release  w̄ = (1/(T − ⌊T/2⌋)) Σ_{t = ⌊T/2⌋+1}^{T} w_t  instead of w_T.

Privacy. The T noisy gradients are the same adaptively composed Gaussian releases as DP-AGD's,
each of replace-one sensitivity 2L/n given the released past (DP-AGD's docstring), calibrated
and accounted by DP-AGD's own plan: ``SelfComposedDpEvent(GaussianDpEvent(z), T)``, exactly
√T/z-GDP (Dong, Roth & Su 2022), the μ the ledger charges. Every w_t is a function of the noisy
gradients g_1 … g_t and public constants, so w̄ is post-processing: the guarantee is DP-AGD's
word for word. A test checks that the query points and noise draws are identical to DP-AGD's
for the same generator (same mechanism), and that w̄ is the mean of the recorded iterates.

Why average (utility). With a constant step, noisy (accelerated) gradient descent does not
converge: its iterates fluctuate around the minimiser with a stationary spread set by σ, and the
last iterate carries all of it. Averaging the tail is Polyak–Ruppert averaging (Polyak &
Juditsky 1992): the average's fluctuation shrinks with the number of (weakly correlated)
iterates averaged, while the bias of starting the average at T/2 is that of w_{T/2}. With the
variance reduced, more steps pay: the default T is twice DP-AGD's balance point
T_agd = ⌈(β_F R n/(2√2 L z₁ √d))^{1/2}⌉ (dp_agd's docstring) — the noise per step grows by √2
(z = z₁√T), the averaged noise does not grow, the optimisation term falls 4×.

Measured (public data only, 6 seeds, δ = 1e-5, C = 1/2, test accuracy %; ``python -m bench auto
--explore``): on synthetic logistic data (n = 20,000, d = 21) the last iterate of DP-AGD lands
1–2 points below DP-GD's 1,000 steps at ε ∈ {0.5, 1, 2} (86.4 / 87.4 / 88.2 vs 88.1 / 88.8 /
89.0) and the tail average closes that gap (88.3 / 88.8 / 89.1); on Adult's TRAIN file split
2:1 the average is within ±0.1 of the last iterate at DP-AGD's T and better at 2T.

The default cap T ≤ ``max_iterations`` = 400 (``STEP_CAP``) is a compute budget, not an
accuracy optimum: one step costs two passes over the rows, and 400 steps on UCI Adult take
about as long as diffprivlib's whole ``LogisticRegression`` fit (``python -m bench auto``
prints the ratio). What it costs, measured on public data only (16 seeds, uniform second-half
average, C = 1/2, the auto rule's l2): on Adult's TRAIN file split 2:1 at ε = 2 (uncapped
T = 580) 84.23 ± 0.04 % at T = 400 vs 84.33 ± 0.05 (seeds 200–215; seeds 100–111: T = 435
84.24 vs T = 580 84.20), at ε = 1 (T = 328) nothing; on 20,000 synthetic rows at ε = 1 / 2
(T = 610 / 834) 88.81 / 89.10 at T = 400 vs 88.81 / 89.14 — noise-limited data lose nothing
(T = 250 is as good there). Jobs whose 2·T_agd is below 400 (ε ≤ 0.5 on Adult, every small
data set) are unchanged; an analyst who wants more steps sets ``iterations`` or
``max_iterations``.

Row map (logistic models). With ``row_map_share`` f > 0 — the default f = 0.1 for a logistic
model with an intercept and no l1 (binary, joint multinomial, or each class of one-vs-rest; 0
for every other loss) — the steps run on the rows centred at a private mean and scaled to unit
norm, a share f of μ² paid for the mean, and the released model is folded back to the encoded
rows:
``service/optimizers/kits/dp_agd_row_map.py`` has the mechanism, its privacy proof (one Gaussian
release of sensitivity 2/n, then these steps on rows still of norm ≤ 1, composed exactly) and
its measurements (digits at ε = 1: 48.6 → 71.8 % on a development split). The data-parallel
and in-database paths (``fit_oracle``) run the same mechanism where their rows live: their
oracles sum the rows for the mean and map them (``RowMappable``), so for a fixed generator they
release ``fit``'s model to summation rounding. An oracle that cannot map its rows gets the
plain steps at the plan's step noise, the mean's share left unspent (the ledger charged it;
privacy holds a fortiori).

Curvature step (joint multinomial model). With ``curvature_share`` c > 0 — the default
c = 0.02 for a joint multinomial model of K ≥ 3 classes whose row map runs, l2 > 0, rows of
width ≤ 256, and no analyst-set ``iterations`` or ``step_size`` — the top eigenvalue of the
mapped rows' Gram matrix is released once (sensitivity 1) and the steps take the step and the
number of steps it allows: η = 1/(β λ⁺ + l2) instead of 1/(β + l2), T' = ⌈T √(β̂/β_F)⌉ ≤ T at
the same total μ² (``service/optimizers/kits/curvature_step.py``: mechanism, proof,
safeguard). The public β assumes every row points the same way; real rows spread (λ_max
0.02–0.16 on the bench's multiclass sets), so the public step is 6–40 times shorter than the
data allow. On rows enough that the noise of the whole Gram matrix is below the rows' average
eigenvalue (public n, width and z_c: ``gram_step.gram_pays``), the same share releases the
whole matrix instead (``curvature_form`` "gram"), and min(T, 32) steps run preconditioned by
it (``service/optimizers/kits/gram_step.py``): each direction of the rows its own step.

Column scales. With ``column_scale_share`` > 0 — the default 0.02 wherever the Gram form runs —
the centred feature columns' mean absolute deviations are released once (sensitivity √2/n)
after the mean, and each column is multiplied by the common spread over its own before the
rows are scaled to unit norm (the model folded back through the same scales): a column that
spreads over a small part of its declared range no longer needs a weight the l2 term and the
noise hold back (``service/optimizers/kits/column_scales.py``: mechanism, proof, measurements).

Curvature refresh. With ``curvature_refresh_share`` > 0 — the default 0.05 wherever the Gram
form scales by the curvature at w = 0 (``gram_step.scales_at_zero``) — each class's Hessian
block in the Gram preconditioner's basis, Σ_i p_ik(1 − p_ik) r_i r_iᵀ with r_i = Qᵀφ_i, is
released once (Frobenius sensitivity √(8/27)) after step 6, and the remaining steps take one
preconditioner per class:
a class the model already separates takes the larger steps its flatter loss allows
(``service/optimizers/kits/curvature_refresh.py``: mechanism, proof, measurements). The
data-parallel and in-database oracles sum it where their rows live
(``CurvatureTermsOracle``); one without the capability keeps the one preconditioner.
Parameters and shares: ``service/optimizers/kits/averaged_plan.py``.

Assumptions, defaults and refusals: DP-AGD's (convex smooth loss, l2 > 0 or a public
``radius``, δ > 0), except the default T above (capped by ``max_iterations``); a row map needs
a model whose rows end with the intercept column (``optimizer.params.row_map_share``
otherwise).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import ClassVar

import numpy as np
from pydantic import BaseModel

from service.models.base import FloatArray, Loss, parameter_count
from service.optimizers.kits.accelerated_kit import (
    ACCELERATED_ASSUMPTIONS,
    STEP_CAP,
    STEP_FACTOR,
    Refresh,
    averaged_accelerated_descent,
    plan_averaged,
)
from service.optimizers.kits.averaged_plan import (
    DPAGDAveragedParams,
    resolved_column_scale_share,
    resolved_curvature_share,
    resolved_refresh_share,
    resolved_row_map_share,
    with_curvature_form,
    with_row_map,
)
from service.optimizers.kits.base import (
    PrivacyTarget,
    ProgressCallback,
    ReleasePlan,
)
from service.optimizers.kits.column_scales import (
    ColumnScalable,
    deviation_sum,
    scaled_map,
)
from service.optimizers.kits.config import GradientStepsConfig, PlanConfig
from service.optimizers.kits.curvature_refresh import (
    CurvatureRefresh,
    CurvatureTermsOracle,
    TermsOf,
    curvature_terms,
    refresh_preconditioners,
)
from service.optimizers.kits.curvature_step import (
    CurvatureSteps,
    GramOracle,
    curvature_steps,
    gram_of_rows,
    release_top_eigenvalue,
)
from service.optimizers.kits.dp_agd_row_map import (
    RowMapConfig,
    RowMappable,
    fold,
    mapped_rows,
    release_mean,
    release_mean_of_sum,
    row_map,
)
from service.optimizers.kits.full_gradient import GradientOracle, LocalGradient, fit_on_oracle
from service.optimizers.kits.gradient_kit import check_plan_covers, full_gradient_inputs
from service.optimizers.kits.gram_step import gram_steps, release_gram
from service.optimizers.kits.inputs import checked_data
from service.privacy.secure_random import SecureRandom

__all__ = [
    "DPAGDAveraged",
    "DPAGDAveragedParams",
    "STEP_CAP",
    "STEP_FACTOR",
    "averaged_accelerated_descent",
]


class DPAGDAveraged:
    """DP-AGD with a tail-averaged release (Polyak–Ruppert) and twice its default steps."""

    name: ClassVar[str] = "dp_agd_averaged"
    summary: ClassVar[str] = (
        "dp_agd's noisy accelerated full-gradient descent, releasing the average of the second "
        "half of its iterates (post-processing) with twice dp_agd's default number of steps; "
        "the same exact Gaussian-DP accounting."
    )
    assumptions: ClassVar[str] = ACCELERATED_ASSUMPTIONS
    guarantee: ClassVar[str] = (
        "(ε, δ)-DP, replace-one adjacency: dp_agd's T Gaussian steps of sensitivity 2L/n, "
        "accounted exactly (μ = √T/z GDP); the average is post-processing."
    )
    reference: ClassVar[str] = (
        "Beck & Teboulle (2009), FISTA; Polyak & Juditsky (1992), averaging; Wang, Ye & Xu "
        "(2017) Alg. 4 for the privacy analysis; Dong, Roth & Su (2022) for the accounting."
    )
    Params: ClassVar[type[BaseModel]] = DPAGDAveragedParams
    Config: ClassVar[type[PlanConfig]] = GradientStepsConfig

    def plan(
        self, params: BaseModel, loss: Loss, n: int, d: int, target: PrivacyTarget
    ) -> ReleasePlan:
        """DP-AGD's plan with T = ``iterations`` or STEP_FACTOR × DP-AGD's default T (capped);
        the same refusals (InfeasibleSpec) as DP-AGD."""
        p = (
            params
            if isinstance(params, DPAGDAveragedParams)
            else DPAGDAveragedParams.model_validate(params.model_dump(exclude_unset=True))
        )
        share = resolved_row_map_share(p, loss)
        curvature = resolved_curvature_share(p, loss, share, n, d, target)
        plan = plan_averaged(self.name, loss, n, d, target, p)
        planned = with_curvature_form(with_row_map(plan, share, target, curvature), p, loss)
        scales = resolved_column_scale_share(p, planned)
        refresh = resolved_refresh_share(p, planned, loss)
        if scales == 0.0 and refresh == 0.0:
            return planned
        # the curvature form depends on z_c alone, which the other shares leave unchanged
        form = {"curvature_form": planned.hyperparameters.get("curvature_form")}
        again = with_row_map(plan, share, target, curvature, scales, refresh)
        return with_curvature_form(again, p.model_copy(update=form), loss)

    def fit(
        self,
        plan: ReleasePlan,
        loss: Loss,
        X: FloatArray,
        y: FloatArray,
        rng: SecureRandom,
        progress: ProgressCallback,
    ) -> FloatArray:
        """Run the plan on the private rows; release the tail average (checks as DP-AGD),
        through the row map when the plan has one (module docstring)."""
        config = RowMapConfig.from_hyperparameters(plan.hyperparameters)
        if config.row_map_share == 0.0:
            rows, labels = full_gradient_inputs(plan, loss, X, y)
            return self._run(plan, loss, LocalGradient(loss, rows, labels), rng, progress)
        _check_row_map(config, loss)
        check_plan_covers(plan, loss)
        dense, labels = checked_data(loss, X, y, config.n, config.d)
        mapping = row_map(release_mean(dense, config.mean_noise_std, rng), config.mean_noise_std)
        if config.column_scale_share > 0.0:
            total = deviation_sum(dense, mapping.centre, mapping.intercept)
            std = config.column_scale_noise_std
            mapping = scaled_map(mapping, total, config.n, std, rng, config.one_hot_columns)
        rows = mapped_rows(dense, mapping)
        oracle = LocalGradient(loss, rows, labels)
        steps = self._steps(plan, config, loss, rows.shape[1], lambda: gram_of_rows(rows), rng)

        def terms(w: FloatArray, basis: FloatArray) -> np.ndarray:
            return curvature_terms(loss, w, rows, labels, basis)

        ran = self._run(plan, loss, oracle, rng, progress, steps, terms)
        return fold(ran, mapping, rows.shape[1])

    def fit_oracle(
        self,
        plan: ReleasePlan,
        loss: Loss,
        oracle: GradientOracle,
        rng: SecureRandom,
        progress: ProgressCallback,
    ) -> FloatArray:
        """:meth:`fit` with the gradients from ``oracle`` (partitions check their own rows).

        A plan with a row map on an oracle that can map its rows
        (:class:`~service.optimizers.kits.dp_agd_row_map.RowMappable`: the data-parallel
        partitions, the in-database sessions) runs :meth:`fit`'s mechanism in :meth:`fit`'s
        order of draws: the mean released from ``oracle.row_sum()`` (one draw per entry), then
        the steps on ``oracle.mapped(mapping)``, then the fold — for a fixed generator the same
        release as :meth:`fit` on the same rows, to summation rounding. An oracle without the
        capability gets the plain steps at the plan's step noise, the mean's share of μ²
        unspent (the ledger charged it; privacy holds a fortiori)."""
        check_plan_covers(plan, loss)
        config = RowMapConfig.from_hyperparameters(plan.hyperparameters)
        if config.row_map_share == 0.0 or not isinstance(oracle, RowMappable):
            return fit_on_oracle(
                plan, oracle, lambda checked: self._run(plan, loss, checked, rng, progress)
            )
        _check_row_map(config, loss)
        mappable = oracle

        def run(checked: GradientOracle) -> FloatArray:
            total = np.asarray(mappable.row_sum(), dtype=np.float64)
            width = int(total.shape[0]) if total.ndim == 1 else 0
            if width < 1 or parameter_count(loss, width) != checked.dimension:
                raise ValueError("the oracle's row sum does not match the plan's dimension")
            std = config.mean_noise_std
            mapping = row_map(release_mean_of_sum(total, checked.n, std, rng), std)
            if config.column_scale_share > 0.0 and isinstance(mappable, ColumnScalable):
                sums = mappable.deviation_sum(mapping.centre, mapping.intercept)
                scale_std = config.column_scale_noise_std
                one_hot = config.one_hot_columns
                mapping = scaled_map(mapping, sums, checked.n, scale_std, rng, one_hot)
            on_mapped = mappable.mapped(mapping)
            if (on_mapped.n, on_mapped.dimension) != (checked.n, checked.dimension):
                raise ValueError("the mapped oracle's shape differs from the plan's n and d")
            gram = on_mapped.gram if isinstance(on_mapped, GramOracle) else None
            steps = self._steps(plan, config, loss, width, gram, rng)
            refreshable = isinstance(on_mapped, CurvatureTermsOracle)
            terms = on_mapped.curvature_terms if refreshable else None
            ran = self._run(plan, loss, on_mapped, rng, progress, steps, terms)
            return fold(ran, mapping, width)

        return fit_on_oracle(plan, oracle, run)

    @staticmethod
    def _steps(
        plan: ReleasePlan,
        config: RowMapConfig,
        loss: Loss,
        width: int,
        gram: Callable[[], FloatArray] | None,
        rng: SecureRandom,
    ) -> CurvatureSteps | None:
        """The curvature step's (η, T', noise) when the plan has one and ``gram`` can sum the
        mapped rows' Gram matrix (curvature_step, steps 1–2: one draw, after the mean's);
        None: the plan's public step and T (an oracle without the capability: the share
        unspent)."""
        if config.curvature_share == 0.0 or gram is None:
            return None
        if not (config.curvature_noise_std > 0.0 and loss.l2 > 0.0):
            raise ValueError("the plan's curvature step has no noise or no l2 ball")
        if config.curvature_form == "gram":
            return gram_steps(
                release_gram(gram(), config.curvature_noise_std, rng),
                n=config.n,
                loss=loss,
                iterations=config.iterations,
                step_noise_std=plan.noise_scale,
                curvature_noise_std=config.curvature_noise_std,
            )
        released = release_top_eigenvalue(gram(), config.curvature_noise_std, rng)
        return curvature_steps(
            released,
            n=config.n,
            width=width,
            loss=loss,
            iterations=config.iterations,
            step_noise_std=plan.noise_scale,
            curvature_noise_std=config.curvature_noise_std,
            spread_iterations=config.spread_iterations,
        )

    @staticmethod
    def _run(
        plan: ReleasePlan,
        loss: Loss,
        oracle: GradientOracle,
        rng: SecureRandom,
        progress: ProgressCallback,
        steps: CurvatureSteps | None = None,
        terms: TermsOf | None = None,
    ) -> FloatArray:
        """The tail-averaged steps: the plan's public step, T and noise, or the curvature
        step's (``steps``), whose iterates stay in the ball ‖w‖ ≤ √(2·gap/l2); with the plan's
        curvature refresh where ``terms`` can sum c (``curvature_refresh``; None: the Gram
        form's one preconditioner throughout, the refresh's share unspent)."""
        config = RowMapConfig.from_hyperparameters(plan.hyperparameters)
        radius: float | None = None
        if steps is None:
            steps = CurvatureSteps(config.step_size, config.iterations, plan.noise_scale, 1.0)
        else:
            radius = math.sqrt(2.0 * config.objective_gap / loss.l2)
        return averaged_accelerated_descent(
            loss,
            oracle,
            step_size=steps.step_size,
            iterations=steps.iterations,
            noise_std=steps.noise_std,
            sensitivity=plan.sensitivity,
            rng=rng,
            progress=progress,
            radius=radius,
            preconditioner=steps.preconditioner,
            refresh=_refresh(config, loss, steps, terms, rng),
        )


def _refresh(
    config: RowMapConfig,
    loss: Loss,
    steps: CurvatureSteps,
    terms: TermsOf | None,
    rng: SecureRandom,
) -> Refresh | None:
    """The loop's (t_r, preconditioners of w_{t_r}) where the plan has a refresh, the Gram
    form ran and ``terms`` can sum c; None otherwise (public facts only)."""
    t_r = config.curvature_refresh_step
    if config.curvature_refresh_share == 0.0 or terms is None or steps.basis is None:
        return None
    if steps.curvature is None or not (0 < t_r < steps.iterations):
        return None
    if not config.curvature_refresh_noise_std > 0.0:
        raise ValueError("the plan's curvature refresh has no noise")
    spec = CurvatureRefresh(
        step=t_r,
        noise_std=config.curvature_refresh_noise_std,
        basis=steps.basis,
        gram_curvature=steps.curvature,
        n=config.n,
        l2=float(loss.l2),
    )
    return t_r, refresh_preconditioners(spec, terms, rng)


def _check_row_map(config: RowMapConfig, loss: Loss) -> None:
    """What a plan with a row map needs: rows whose last column is the intercept's constant,
    and noise on the mean row (the mechanism's step 1)."""
    if not getattr(loss, "fit_intercept", False):
        raise ValueError("the plan's row map needs rows whose last column is the intercept")
    if not config.mean_noise_std > 0.0:
        raise ValueError("the plan's row map has no noise on the mean row")


OPTIMIZER = DPAGDAveraged
