r"""DP-SVRG++: noisy proximal SVRG++ with doubling epochs for convex, not necessarily strongly
convex objectives (Wang, Ye & Xu 2017, Alg. 2, built on SVRG++ of Allen-Zhu & Yuan 2016).

Algorithm. As ``dp_svrg`` (see :mod:`service.optimizers.dp_svrg` for the full statement) with
the two SVRG++ changes: epoch s = 1 … S has m_s = 2^s m_0 inner steps, and it starts from the
*last* iterate of the previous epoch (not from the snapshot); the snapshot w̃_s is still the
average of epoch s's iterates, and the output is w̃_S. ``w̃_0 = w_0 = 0``.

Assumptions. Convex, L-Lipschitz, β-smooth per-example loss on rows with ‖x‖₂ ≤ 1; l2 = μ ≥ 0;
l1 ≥ 0 through the proximal step; δ > 0.

Sensitivity and privacy: exactly ``dp_svrg``'s analysis, with epochs of different lengths.
Per epoch a Gaussian snapshot release of sensitivity 2L/n with noise σ_s = κσ/√m_s, and m_s
inner steps, each the Gaussian mechanism (sensitivity 4L/b, noise σ) on a batch of b rows
sampled without replacement. Charged event, under REPLACE_ONE:

    ComposedDpEvent([ComposedDpEvent([GaussianDpEvent(z_s) for s]),
                     SelfComposedDpEvent(SampledWithoutReplacementDpEvent(n, b,
                                                                          GaussianDpEvent(z)),
                                         Σ_s m_s)]),

z = σ/(4L/b), z_s = σ_s/(2L/n), z calibrated numerically.

Defaults (public information only; β_F = β + μ, D = ``radius`` the analyst's public guess of
the optimum's norm).
- b = min(n, 64); η = min(1/(2β_F), b/(7β_F)) — Allen-Zhu & Yuan's η = 1/(7L) for b = 1, whose
  variance bound improves by the factor b for batches.
- m_0 = ⌈n/(4b)⌉ (Allen-Zhu & Yuan's m_0 = n/4 for b = 1: the first epoch reads about n/4 rows).
- Number of epochs from a noise/optimisation balance: for K noisy steps with per-step noise σ,
  averaged convex SGD has error ≈ D²/(2ηK) + ηdσ²/2, and the accountant needs σ² ≈
  16L²K log(1/δ)/(n²ε²) (Wang et al. Thm 4.3's σ² = cG²K log(1/δ)/(n²ε²) with the inner
  sensitivity 4L/b and small sampling rates), so the error is minimised at
  K* = D n ε / (4 η L √(d log(1/δ))) — Thm 4.4's S = O(log(nε/√(d log(1/δ)))) epochs. S is
  the smallest number of epochs with Σ_s m_s = m_0 (2^{S+1} − 2) ≥ K*, clamped to
  [1, ``max_epochs``] and reduced until Σ_s m_s ≤ ``max_total_steps``.
"""

from __future__ import annotations

import math
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from service.models.base import FloatArray, Loss
from service.optimizers.kits.base import (
    InfeasibleSpec,
    PrivacyTarget,
    ProgressCallback,
    ReleasePlan,
)
from service.optimizers.kits.config import PlanConfig
from service.optimizers.kits.svrg_common import (
    SvrgConfig,
    SvrgSchedule,
    batch_size_field,
    check_svrg_model,
    fit_svrg,
    plan_svrg,
    resolve_batch,
    snapshot_ratio_field,
)
from service.privacy.secure_random import SecureRandom
from service.privacy.target import check_target

__all__ = ["DPSVRGPlusPlus", "DPSVRGPlusPlusParams", "default_schedule", "doubling_lengths"]


class DPSVRGPlusPlusParams(BaseModel):
    """Hyper-parameters of ``dp_svrg_pp``; omitted values get theory defaults."""

    model_config = ConfigDict(extra="forbid")

    epochs: int | None = Field(
        default=None,
        ge=1,
        le=30,
        description=(
            "S: number of epochs; epoch s has m_s = 2^s·m_0 inner steps. Default: the smallest "
            "S with m_0(2^(S+1) − 2) ≥ K* = radius·n·ε/(4ηL√(d·log(1/δ))), clamped to "
            "[1, max_epochs] and to max_total_steps."
        ),
    )
    initial_epoch_length: int | None = Field(
        default=None,
        ge=1,
        le=100_000,
        description="m_0: epoch s has 2^s·m_0 inner steps. Default ⌈n/(4b)⌉.",
    )
    batch_size: int | None = batch_size_field()
    step_size: float | None = Field(
        default=None,
        gt=0.0,
        allow_inf_nan=False,
        description=(
            "Constant step η. Default min(1/(2β_F), b/(7β_F)), β_F = β + μ (Allen-Zhu & Yuan's "
            "1/(7L) for b = 1). Privacy does not depend on it."
        ),
    )
    snapshot_noise_ratio: float = snapshot_ratio_field()
    radius: float = Field(
        default=10.0,
        gt=0.0,
        allow_inf_nan=False,
        description=(
            "D: the analyst's public guess of the norm of the non-private optimum, used only "
            "for the default number of epochs."
        ),
    )
    max_epochs: int = Field(
        default=12, ge=1, le=30, description="Cap on the default number of epochs."
    )
    max_total_steps: int = Field(
        default=20_000,
        ge=2,
        le=1_000_000,
        description="Cap on the total number of inner steps of the default schedule.",
    )


def doubling_lengths(initial: int, epochs: int) -> list[int]:
    """m_s = 2^s m_0 for s = 1 … S."""
    return [initial * 2**s for s in range(1, epochs + 1)]


def default_schedule(
    n: int,
    d: int,
    lipschitz: float,
    step: float,
    batch: int,
    target: PrivacyTarget,
    radius: float,
    initial: int | None,
    max_epochs: int,
    max_total_steps: int,
) -> tuple[int, int]:
    """(m_0, S) per the module docstring."""
    m0 = max(1, math.ceil(n / (4 * batch))) if initial is None else initial
    if initial is None:
        m0 = min(m0, max(1, max_total_steps // 2))
    k_star = (
        radius
        * n
        * target.epsilon
        / (4.0 * step * lipschitz * math.sqrt(d * math.log(1.0 / target.delta)))
    )
    epochs = 1
    while epochs < max_epochs and m0 * (2 ** (epochs + 1) - 2) < k_star:
        epochs += 1
    while epochs > 1 and m0 * (2 ** (epochs + 1) - 2) > max_total_steps:
        epochs -= 1
    return m0, epochs


class DPSVRGPlusPlus:
    """Wang, Ye & Xu (2017) Alg. 2: noisy SVRG++ with doubling epochs for convex objectives."""

    name: ClassVar[str] = "dp_svrg_pp"
    summary: ClassVar[str] = (
        "SVRG++ with Gaussian noise: epochs of doubling length, each with a noisy full-gradient "
        "snapshot and noisy variance-reduced steps on batches sampled without replacement; "
        "L1/elastic net via the proximal step; RDP accounting of all releases."
    )
    assumptions: ClassVar[str] = (
        "Convex, L-Lipschitz, β-smooth per-example loss on rows with ‖x‖₂ ≤ 1; l2 ≥ 0 "
        "(strong convexity not needed); l1 ≥ 0 (proximal step); delta > 0."
    )
    guarantee: ClassVar[str] = (
        "(ε, δ)-DP, replace-one adjacency: per epoch a Gaussian snapshot (sensitivity 2L/n) "
        "and 2^s·m_0 sampled-without-replacement Gaussian inner steps (sensitivity 4L/b), "
        "composed and accounted by dp-accounting's RDP accountant."
    )
    reference: ClassVar[str] = (
        "Wang, Ye & Xu (2017), 'Differentially Private Empirical Risk Minimization Revisited: "
        "Faster and More General', Alg. 2, Thm 4.3–4.4; SVRG++, Allen-Zhu & Yuan (2016); "
        "sampled-without-replacement RDP, Wang, Balle & Kasiviswanathan (2019)."
    )
    Params: ClassVar[type[BaseModel]] = DPSVRGPlusPlusParams
    Config: ClassVar[type[PlanConfig]] = SvrgConfig

    def plan(
        self, params: BaseModel, loss: Loss, n: int, d: int, target: PrivacyTarget
    ) -> ReleasePlan:
        """Resolve S, m_0, b, η and calibrate the noise, from public information only.

        Raises :class:`InfeasibleSpec` for δ = 0 / invalid (ε, δ) ("privacy.*"), a non-convex
        loss ("model"), b > n ("optimizer.params.batch_size"), no default step when β + μ = 0
        ("optimizer.params.step_size").
        """
        p = (
            params
            if isinstance(params, DPSVRGPlusPlusParams)
            else DPSVRGPlusPlusParams.model_validate(params.model_dump())
        )
        check_target(target, pure_allowed=False, optimizer=self.name)
        if n < 1 or d < 1:
            raise ValueError("n and d must be >= 1")
        check_svrg_model(loss, self.name)
        batch = resolve_batch(p.batch_size, n)
        beta_f = loss.smoothness + loss.l2
        if p.step_size is not None:
            step = float(p.step_size)
        elif beta_f > 0.0:
            step = min(0.5, batch / 7.0) / beta_f
        else:
            raise InfeasibleSpec(
                "optimizer.params.step_size",
                f"{loss.name} with l2 = 0 has smoothness 0, so there is no default step size; "
                "give step_size",
            )
        m0, epochs = default_schedule(
            n,
            d,
            loss.lipschitz,
            step,
            batch,
            target,
            p.radius,
            p.initial_epoch_length,
            p.max_epochs,
            p.max_total_steps,
        )
        if p.epochs is not None:
            epochs = int(p.epochs)
        schedule = SvrgSchedule(doubling_lengths(m0, epochs), batch, step, p.snapshot_noise_ratio)
        extra = {"epochs": epochs, "initial_epoch_length": m0, "radius": p.radius}
        return plan_svrg("svrg_gaussian_per_step", schedule, loss, n, d, target, extra)

    def fit(
        self,
        plan: ReleasePlan,
        loss: Loss,
        X: FloatArray,
        y: FloatArray,
        rng: SecureRandom,
        progress: ProgressCallback,
    ) -> FloatArray:
        """Run ``plan`` on the private rows and return the noisy w̃_S."""
        return fit_svrg(plan, loss, X, y, rng, progress, continue_from_last=True)


OPTIMIZER = DPSVRGPlusPlus
