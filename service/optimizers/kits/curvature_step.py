r"""The curvature step of ``dp_agd_averaged``'s row map: a private estimate of how curved the
objective really is on the mapped rows, and the larger step and fewer steps it allows.

Why. Every full-gradient step plan uses η = 1/β_F with β_F = β + l2, β the loss's smoothness for
rows of norm ≤ 1. For the models the row map serves (logistic, binary or joint multinomial:
generalised linear models) the Hessian of a row is H(z) ⊗ x xᵀ with ‖H(z)‖ ≤ β, so the
objective's true smoothness is

    β_S = β · λ_max((1/n) Σ_i x_i x_iᵀ) + l2,

and λ_max of the rows' second moment lies anywhere in [1/w, 1] for unit-norm rows of width w
(its trace is 1). The public β assumes λ_max = 1: every row pointing the same way. The mapped
rows of a real data set spread over many directions — measured on the development splits of
the multiclass bench sets, λ_max = 0.16 (digits), 0.02–0.10 (the synthetic sets) — so the public
step is 6–40 times shorter than the data allow, and the accelerated rate's T (∝ √β_F,
``dp_agd``'s docstring) correspondingly longer. Measured (``python -m bench multiclass
--dev-curvature``, development splits only; bench/RESULTS.md, "Fit time, turn 12"): the rule
below takes 0.26–0.64 of the public step's fit time on digits and four synthetic sets with
K = 3–10, accuracy −0.2 to +4.1 points; that is what a release of one number buys.

Mechanism (after the row map's steps 1–3, on the mapped rows φ_i with ‖φ_i‖ ≤ 1; a share c of
the job's μ², taken from the steps' share):

1. Release λ̃ = λ_max(G) + ξ, G = Σ_i φ_i φ_iᵀ (w × w), ξ ~ N(0, σ_c²), σ_c = z_c · 1
   (:func:`release_top_eigenvalue`).
2. From λ̃ and public facts only (:func:`curvature_steps`): the upper estimate
   λ⁺ = clamp((λ̃ + κ σ_c)/n, 1/w, 1) with κ = :data:`CURVATURE_MARGIN` (λ⁺ ≥ λ_max(G)/n
   with probability Φ(κ) = 0.977 over the noise); β̂ = β λ⁺ + l2; the step η = 1/β̂; the
   number of steps T' = clamp(⌈T √(β̂/β_F)⌉, 1, T) — the plan's T scaled as the accelerated
   rate's T scales with the smoothness; the steps' noise multiplier z' = z √(T'/T). Where the
   plan names a shorter T_s for spread rows (``spread_iterations``) and λ⁺·w ≤
   :data:`SPREAD_CONCENTRATION` — the rows' second moment within that factor of its floor 1/w,
   spread evenly over their width — T_s stands in for T in T' (still z' = z √(T'/T)).
   Why (``auto`` sets T_s where the joint l2's many-rows ceiling lengthened T, ``kits/
   joint_rule.py``, "Spread rows"): the plan's T counts the noise of all d coordinates; rows
   concentrated on a few directions (images: λ⁺·w = 120–230) leave most of that noise where no
   row reaches, and gain from the longer T, but on rows spread over every direction
   (softmax-teacher sets of uniform features: 2.9–11.1) every coordinate's noise counts, and
   the longer T lost up to 2.7 points at ε = 0.5.
3. ``dp_agd_averaged``'s T' noisy steps at η, each iterate projected onto the public ball
   ‖w‖ ≤ R = √(2·gap/l2) (the optimum lies inside it: l2/2 ‖w*‖² ≤ F(0) − F(w*) ≤ gap), so an
   underestimate of λ_max (probability ≤ 0.023) can slow the steps but never make them
   overflow: the model is finite whatever the data.

Privacy (replace-one; exact GDP composition, Dong, Roth & Su 2022, Thm 3.2 / Cor. 3.3 for
adaptively chosen mechanisms).

(a) Sensitivity of λ_max(G) is 1. Replacing φ by φ' changes G by E = φφᵀ − φ'φ'ᵀ, and
    −I ⪯ −φ'φ'ᵀ ⪯ E ⪯ φφᵀ ⪯ I (‖φ‖, ‖φ'‖ ≤ 1), so ‖E‖₂ ≤ 1; by Weyl's inequality
    |λ_max(G + E) − λ_max(G)| ≤ ‖E‖₂ ≤ 1. Attained: n copies of a unit φ give λ_max = n; replacing
    one by an orthogonal unit vector gives n − 1. Step 1 is a Gaussian release of sensitivity
    1 with multiplier z_c: 1/z_c-GDP. The mapped rows are a neighbouring data set of the
    encoded rows' neighbours (the row map's (b)), so this holds after step 1 of the row map.
(b) Step 2 is post-processing of λ̃. Given λ̃, the T' steps are T' Gaussian releases of
    sensitivity 2L/n with multiplier z' = z √(T'/T): √T'/z' = √T/z-GDP — the same for every
    value of λ̃, which is what adaptive composition needs. So the run is μ-GDP with
    μ² = 1/z₀² + 1/z_c² + T/z², the plan's event
    ``Composed([Gaussian(z₀), Gaussian(z_c), SelfComposed(Gaussian(z), T)])``, whose RDP
    curve is exactly that of the run's ``SelfComposed(Gaussian(z'), T')`` in place of the last
    part (α/(2z'²)·T' = α/(2z²)·T). The ledger charges the plan's event before the job runs.
(c) Timing. The run's length is T' gradients: a function of λ̃, a released value, so it tells
    nothing beyond λ̃ (post-processing). The Gram matrix and its eigenvalues take the same
    arithmetic for every data set of the same public n and w, up to LAPACK's iteration count on
    a w × w matrix (microseconds against the steps).
(d) Floating point: LAPACK's λ_max (``eigvalsh``) is within about w·ε_mach·‖G‖ of the exact
    value (about 3·10⁻⁷ of Δ = 1 at w = 256 and n = 10⁷), the same order as the floating-point
    sums behind every other release here; the analysis, like theirs, is of the exact value,
    and the release itself is ``secure_gaussian``'s (grid rounding accounted, exact noise).

Where the rows live. ``fit`` builds G from the mapped rows in its process
(:func:`gram_of_rows`); ``fit_oracle`` asks the mapped oracle for it (:class:`GramOracle`:
the data-parallel partitions and the in-database sessions sum their own rows' G). An oracle
without the capability gets the plan's public step and T, the curvature's share unspent (the
ledger charged it; privacy holds a fortiori).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from service.models.base import FloatArray, Loss
from service.optimizers.kits.base import PrivacyTarget
from service.privacy.gdp import gdp_mu
from service.privacy.secure_random import SecureRandom
from service.privacy.secure_release import secure_gaussian

__all__ = [
    "CURVATURE_MARGIN",
    "CURVATURE_MAX_WIDTH",
    "CURVATURE_SHARE",
    "IN_DATABASE_CURVATURE_WIDTH",
    "MIN_CURVATURE_CLASSES",
    "SPREAD_CONCENTRATION",
    "CurvatureSteps",
    "GramOracle",
    "checked_gram",
    "curvature_multiplier",
    "curvature_pays",
    "curvature_steps",
    "gram_of_rows",
    "release_top_eigenvalue",
    "top_eigenvalue",
]

#: The default share of the job's μ² spent on λ̃ (``dp_agd_averaged``'s rule; its docstring).
CURVATURE_SHARE = 0.02
#: The curvature step's default needs K ≥ 3 classes: on five two-class sets (a categorical label
#: of two classes, 278–489 development rows, 200 seeds) it gained nothing and lost up to 1.4
#: points where the features carry little signal (bench/RESULTS.md, "Fit time, turn 12"); a
#: two-class joint fit keeps the public step, as the binary model does.
MIN_CURVATURE_CLASSES = 3
#: κ: λ⁺ is κ noise standard deviations above the released λ̃.
CURVATURE_MARGIN = 2.0
#: The default spends the share only for rows of at most this width (public): G costs n·w²
#: multiply-adds (compute-bound BLAS products) and its eigenvalues w³, against a gradient's
#: 2·n·w·K (memory-bound products), and it is w² floats (8 MiB at 1,024). Measured on
#: development splits of five sets 301–785 wide (MNIST-like images, uniform features with
#: K = 3–10, a 400-category one-hot column; 4–12 seeds, ε = 0.5 / 1 / 2; bench/RESULTS.md,
#: issue 24 turn 27): against the public step, accuracy −1.2 to +2.3 points (within about two
#: standard errors but the +2.3) and the fit 1.1–7 times faster; the earlier cap, 256, had
#: no measurement above it.
CURVATURE_MAX_WIDTH = 1024
#: Above this row width, ``dp_agd_averaged``'s default keeps the public step in the database.
#: Its curvature step sums the w × w Gram matrix: n·w²/2 aggregate transitions in PostgreSQL's
#: executor, the work of w/(2K) joint gradients (n·K·w each), where numpy's compute-bound
#: products make it cheap on the workers (CURVATURE_MAX_WIDTH). At 256 and K ≥ 3 it is at most
#: 43 gradients' work; at 1,024 and K = 3, 171, more than most jobs' T. Applied at pricing
#: (``service/domain/execution.py:in_database_params``), where the execution is known.
IN_DATABASE_CURVATURE_WIDTH = 256
#: The default spends the share only where the margin alone, κ σ_c / n, is at most this: λ⁺ can
#: then fall to a quarter of the public bound (a step ≥ 4× the public one) on spread rows; on
#: fewer rows the release would cost its share and change nothing (:func:`curvature_pays`).
CURVATURE_MARGIN_CAP = 0.25
#: T' = ⌈T (β̂/β_F)^p⌉ with p = CURVATURE_STEPS_POWER (½: the accelerated rate's √β scaling).
CURVATURE_STEPS_POWER = 0.5
#: Rows whose λ⁺·w is at most this are spread evenly over their width: the plan's
#: ``spread_iterations`` then stands in for T (step 2). Measured λ⁺·w on development splits:
#: 2.9–11.1 on every softmax-teacher set of uniform features (K = 3–26, 11–601 wide; the top at
#: ε = 0.5 on 601 columns, where the release's margin lifts λ⁺), 120–230 on the MNIST-like
#: images; the real tables in ``kits/joint_rule.py``, "Spread rows".
SPREAD_CONCENTRATION = 16.0
#: Multiply-adds per block product when summing G (below OpenBLAS's threading threshold, as
#: the models' ``PRODUCT_ENTRIES``) …
GRAM_BLOCK_ENTRIES = 1 << 18
#: … but at least this many rows a block: a product of 64 rows has w²·64 multiply-adds, above
#: that threshold from w = 64 anyway, and each block adds a w × w temporary into G, so wide rows
#: paid more for the additions than for the products (21,000 × 785 rows, one BLAS thread:
#: 733 ms in blocks of 64 rows, 277 ms in blocks of 1,024; 14,000 × 300: 60 → 37 ms).
GRAM_BLOCK_ROWS = 1024


def curvature_multiplier(share: float, target: PrivacyTarget) -> float:
    """σ_c = 1/(μ(ε, δ) √share): the curvature release's noise multiplier before the plan rounds
    it up for the exact δ; ∞ where the share or μ is 0 (public facts: ε, δ and the share)."""
    mu = gdp_mu(target.epsilon, target.delta)
    return 1.0 / (mu * math.sqrt(share)) if share > 0.0 and mu > 0.0 else math.inf


def curvature_pays(n: int, share: float, target: PrivacyTarget) -> bool:
    """Whether the margin κ σ_c/n (σ_c: :func:`curvature_multiplier`) is at most
    :data:`CURVATURE_MARGIN_CAP` (public facts: n, ε, δ and the share)."""
    if n < 1:
        return False
    return CURVATURE_MARGIN * curvature_multiplier(share, target) / n <= CURVATURE_MARGIN_CAP


@runtime_checkable
class GramOracle(Protocol):
    """An oracle over mapped rows that can sum their Gram matrix where the rows live.

    ``gram()``: G = Σ_i φ_i φ_iᵀ over every row of the oracle, a float64 (w × w) array
    (symmetric up to summation rounding), never released itself — only through
    :func:`release_top_eigenvalue`."""

    def gram(self) -> np.ndarray: ...


def gram_of_rows(X: FloatArray) -> FloatArray:
    """Σ_i x_i x_iᵀ over the rows of ``X`` (n × w), summed block by block (blocks from the
    public shape only: :data:`GRAM_BLOCK_ENTRIES` multiply-adds, at least
    :data:`GRAM_BLOCK_ROWS` rows)."""
    rows = np.asarray(X, dtype=np.float64)
    w = int(rows.shape[1])
    step = max(GRAM_BLOCK_ROWS, GRAM_BLOCK_ENTRIES // max(1, w * w))
    total: FloatArray = np.zeros((w, w), dtype=np.float64)
    for start in range(0, int(rows.shape[0]), step):
        block = rows[start : start + step]
        total += block.T @ block
    return total


def checked_gram(gram: FloatArray) -> FloatArray:
    """``gram`` as a float64 array, or ``ValueError`` unless it is square (w ≥ 1) and finite
    (the checks every use of a Gram matrix, summed or released, starts with)."""
    G: FloatArray = np.asarray(gram, dtype=np.float64)
    if G.ndim != 2 or G.shape[0] != G.shape[1] or G.shape[0] < 1:
        raise ValueError("the Gram matrix must be square")
    if not np.all(np.isfinite(G)):
        raise ValueError("the Gram matrix is not finite")
    return G


def top_eigenvalue(gram: FloatArray) -> float:
    """λ_max of the symmetric part of ``gram`` (LAPACK's ``syevd`` through ``eigvalsh``)."""
    G = checked_gram(gram)
    return float(np.linalg.eigvalsh(0.5 * (G + G.T))[-1])


def release_top_eigenvalue(gram: FloatArray, noise_std: float, rng: SecureRandom) -> float:
    """Step 1: λ̃ = λ_max(G) + ξ through the secure Gaussian release at sensitivity 1 (docstring
    (a)); one draw. ``noise_std = 0``: the exact value (the tests' noise-off run)."""
    value = np.array([top_eigenvalue(gram)], dtype=np.float64)
    return float(secure_gaussian(value, noise_std, 1.0, rng)[0])


@dataclass(frozen=True)
class CurvatureSteps:
    """Step 2's outcome: the step η, the number of steps T', the steps' noise std and λ⁺; and,
    for the Gram form (``gram_step``), the preconditioner P⁻¹ (w × w; None: the plain step), its
    eigenvectors Q (``basis``, w × w) and the curvature h λ⁺_j along each (``curvature``, w):
    what a curvature refresh (``curvature_refresh``) starts from."""

    step_size: float
    iterations: int
    noise_std: float
    upper: float
    preconditioner: FloatArray | None = None
    basis: FloatArray | None = None
    curvature: FloatArray | None = None


def curvature_steps(
    released: float,
    *,
    n: int,
    width: int,
    loss: Loss,
    iterations: int,
    step_noise_std: float,
    curvature_noise_std: float,
    spread_iterations: int = 0,
) -> CurvatureSteps:
    """Step 2 of the module docstring, from λ̃ (``released``) and public facts only: n, the row
    width w, the loss's β and l2, the plan's T and its steps' noise std (z·2L/n), and the
    plan's T_s for spread rows (``spread_iterations``; 0 or ≥ T: none)."""
    if n < 1 or width < 1 or iterations < 1:
        raise ValueError("n, width and iterations must be >= 1")
    beta, l2 = float(loss.smoothness), float(loss.l2)
    if not (beta > 0.0 and math.isfinite(beta) and l2 >= 0.0):
        raise ValueError("the curvature step needs a finite smoothness β > 0")
    raw = (float(released) + CURVATURE_MARGIN * curvature_noise_std) / n
    upper = min(1.0, max(1.0 / width, raw if math.isfinite(raw) else 1.0))
    estimated = beta * upper + l2
    ratio = estimated / (beta + l2)
    base = iterations
    if 0 < spread_iterations < iterations and upper * width <= SPREAD_CONCENTRATION:
        base = int(spread_iterations)
    scaled = base * ratio**CURVATURE_STEPS_POWER
    steps = max(1, min(base, math.ceil(scaled - 1e-12)))
    return CurvatureSteps(
        step_size=1.0 / estimated,
        iterations=steps,
        noise_std=step_noise_std * math.sqrt(steps / iterations),
        upper=upper,
    )
