r"""The row map of ``dp_agd_averaged`` on a logistic model (joint multinomial or binary) with an
intercept: rows centred at a private mean and scaled to unit norm before the noisy steps; the
released model folded back.

Why. Every step's sensitivity is 2L/n because the encoder guarantees ‖x‖ ≤ 1: the noise is set
by that bound, the signal by how far the rows actually spread. The public encoding maps each
declared range onto [−1, 1] and divides by √k (k raw features + the intercept), so a row whose
features sit near one end of their ranges — the pixels of a digit, mostly 0, i.e. −1 — has a
norm near 1 made mostly of a part common to every row (on scikit-learn's digits ‖mean‖² = 0.42
of a mean ‖x‖² of 0.72), which the intercept could carry, and a small spread that tells the
classes apart. Each row's gradient (p − e_y)xᵀ then spends its norm budget on the common part.
Centring the rows at their mean and scaling each to norm 1 puts every row's whole norm budget
on what distinguishes it; the noise is unchanged.

Mechanism (rows x ∈ ℝ^w with ‖x‖ ≤ 1 whose last column is the intercept's public constant
c > 0, i.e. ``fit_intercept``; a share f of the job's μ² for step 1, the rest for the steps):

1. One Gaussian release of the mean row m = (1/n) Σ_i x_i: m̃ = m + ξ, ξ ~ N(0, σ₀² I_w),
   σ₀ = z₀ · 2/n (``release_mean``).
2. From m̃ and public constants only (:func:`row_map`): ĉ = clamp(m̃_w, 1/√w, 1) (the
   intercept's constant c = 1/√k lies in that interval: 1 ≤ k ≤ w); v = m̃ with its last entry
   set to 0, shrunk towards 0 by the positive-part James–Stein factor
   max(0, 1 − (w − 1)σ₀²/‖v‖²) (Stein 1961: the noise ξ has E‖ξ_{1..w−1}‖² = (w − 1)σ₀², so a
   mean below its noise is not used: on a small set the centre would be mostly noise); the
   linear map P = I − (v/ĉ) e_wᵀ, i.e. P x = x − v·x_w/ĉ = x − v·c/ĉ (the rows minus the
   shrunk centre, the intercept column kept).
3. The rows the steps see (:func:`mapped_rows`): φ(x) = P x / ‖P x‖ (0 when P x = 0), so
   ‖φ(x)‖ ≤ 1 for every x whatever m̃ is. With column scales (``column_scales``: one more
   release, of the centred columns' mean absolute deviations, between steps 2 and 3, its own
   share of μ²), φ(x) = D P x / ‖D P x‖ and step 5 releases W̄ D P.
4. ``dp_agd_averaged``'s T noisy steps on (φ(x_i), y_i): W̄ (K × w).
5. Release W̄ P: each class row w̄_k ↦ w̄_k P, which changes only its last entry,
   w̄_k,w − (w̄_k · v)/ĉ (:func:`fold`).

Where the rows live. ``DPAGDAveraged.fit`` maps rows held in its process; ``fit_oracle`` runs
the same steps 1–5 through an oracle with the :class:`RowMappable` capability — the
data-parallel partitions (``service/workers/partition_row_map.py``) and the in-database sessions
(``service/workers/in_database_row_map.py``) sum their rows for step 1 (the noise is added by
:func:`release_mean_of_sum`, in the same draw order as ``fit``) and compute φ where the rows
are for step 3. PostgreSQL flushes entries below 2⁻⁸⁰ to 0 (row-local, towards 0: ‖φ(x)‖ ≤ 1
still), so (b) holds on every path.

Privacy (replace-one, exact GDP composition; Dong, Roth & Su 2022, Cor. 3.3, adaptive).

(a) Step 1: replacing row x by x' moves m by (x − x')/n, of norm ≤ 2/n (‖x‖, ‖x'‖ ≤ 1),
    attained at x' = −x with ‖x‖ = 1: a Gaussian release of sensitivity 2/n and multiplier z₀,
    1/z₀-GDP.
(b) Steps 2–3 are post-processing of m̃: given m̃, φ is a fixed row-local map into the unit
    ball. Neighbouring datasets S, S' map to neighbouring datasets φ(S), φ(S') (the one
    replaced row is replaced), and every bound of the steps' proof holds for rows of norm ≤ 1,
    so each step is a Gaussian release of sensitivity 2L/n on φ(S) — exactly the steps of
    ``dp_agd_averaged`` (its docstring), √T/z-GDP, run adaptively after (a).
(c) The whole run is μ-GDP with μ² = 1/z₀² + T/z²; the plan sets z₀ = 1/(μ_max √f) and
    z = √(T/(1 − f))/μ_max with μ_max = μ(ε, δ) (``privacy/gdp.py``), rounded up until the
    composed event's exact δ(ε) ≤ δ; the event is
    ``Composed([Gaussian(z₀), SelfComposed(Gaussian(z), T)])`` and the ledger charges its μ.
(d) Step 5 and the tail average are post-processing.

Prediction. For every row, the fitted scores are W̄ φ(x) = (W̄ P x)/‖P x‖: a positive multiple
of the released model's scores W̄P x. So the released linear model predicts the same class as
the fitted one on every row (argmax; the sign of a binary score); its probabilities are the
softmax of the unscaled scores (the calibration of a score multiplied by ‖P x‖).

Measured (public data only: a 70/30 development split of each set's TRAINING part, never the
test split; ``python -m bench multiclass --explore`` re-measures it; 16–60 seeds, δ = 1e-5,
C = 1/2, the auto rule's l2 and T; test accuracy % on the development part). Digits (880
rows, K = 10) at ε = 0.5 / 1 / 2 / 5: 33.5 / 48.6 / 73.4 / 88.3 without the map, 44.6 / 71.8 /
87.0 / 92.2 with it (f = 0.1); normalising without centring 33.5 / 58.2 / 79.1 / 91.0 (digits
needs the centre). Wine (86 rows, 60 seeds) at ε = 0.5 / 1 / 2 / 5: 45.7 / 59.7 / 73.3 / 88.6
without, 47.2 / 64.9 / 81.0 / 91.0 with; iris (73 rows, 60 seeds) 44.7 / 56.8 / 71.8 / 86.1
without, 50.6 / 64.2 / 81.7 / 90.9 with; synthetic (9,800 rows, K = 5) at ε = 0.5 / 1 / 2: 76.6
/ 80.4 / 81.2 without, 79.3 / 81.2 / 81.4 with. f ∈ {0.05, 0.1, 0.2}: within noise of each other
at ε ≥ 1 on digits (0.05 lost 1.8 at ε = 0.5); a plain James–Stein factor against 2× and 4× its
threshold: equal on wine and iris, 3–9 points better on digits at ε ≤ 1. Unscaled rows clipped
at 1 after scaling by s = τ/(typical centred norm) (a second released moment): τ ≥ 1 equals the
normalisation above, τ = 0.5–0.8 lost 1–6 points, so every row is normalised and no second
moment is released.

Binary labels (``logistic_regression``, the same map; ``python -m bench multiclass
--small-binary``, 20 seeds, test accuracy %, with ``auto``'s l2 ceiling 1e-2 for these jobs):
breast_cancer (398 rows) 91.3 / 93.6 / 95.6 at ε = 0.5 / 1 / 2 against 86.1 / 89.9 / 91.7
without the map (l2 ≤ 1e-3); four synthetic 700-row sets (d = 10–30, two imbalanced 70/30
with little signal) +0.8 to +4.7 points in 11 of 12 cells (−0.4 in the twelfth). On the
development split the map alone gave breast_cancer 90.3 / 95.1 / 96.2 vs 79.3 / 87.9 / 93.8
and the synthetic sets +0.1 to +3.1; the larger l2 ceiling added up to +5 on the weakest set
(its bias pulls a noisy model towards the intercept-only one: the majority class).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple, Protocol, runtime_checkable

import numpy as np
from dp_accounting import dp_event

from service.optimizers.kits.base import PrivacyTarget
from service.optimizers.kits.config import GradientStepsConfig
from service.optimizers.kits.full_gradient import GradientOracle
from service.privacy.gdp import event_mu, gdp_delta, gdp_mu
from service.privacy.secure_random import SecureRandom
from service.privacy.secure_release import secure_gaussian

__all__ = [
    "ROW_MAP_SHARE",
    "RowMap",
    "RowMapConfig",
    "RowMapMultipliers",
    "RowMappable",
    "fold",
    "mapped_rows",
    "mean_sensitivity",
    "mean_then_steps",
    "release_mean",
    "release_mean_of_sum",
    "row_map",
]

#: Default share f of the job's μ² spent on the mean row (module docstring, "Measured").
ROW_MAP_SHARE = 0.1
#: φ(x) = P x / (‖P x‖ · (1 + NORM_MARGIN)): strictly inside the unit ball after rounding.
NORM_MARGIN = 1e-12


@dataclass(frozen=True)
class RowMapConfig(GradientStepsConfig):
    """What ``fit`` reads from a stored plan with a row map: the steps' config plus the mean's
    release (share 0: no row map, the plain steps)."""

    row_map_share: float = 0.0
    mean_noise_std: float = 0.0
    #: The curvature step's share of μ² and its release's noise std (``curvature_step``; 0: none).
    curvature_share: float = 0.0
    curvature_noise_std: float = 0.0
    #: "eigenvalue" (``curvature_step``) or "gram" (``gram_step``); plans before it: eigenvalue.
    curvature_form: str = "eigenvalue"
    #: The column scales' share of μ² and the std of their release (``column_scales``; 0: none).
    column_scale_share: float = 0.0
    column_scale_noise_std: float = 0.0
    #: The feature columns that hold one-hot blocks (the schema's; the column scales never
    #: amplify them). Plans before it: none.
    one_hot_columns: tuple[int, ...] = ()
    #: The curvature refresh's share, its release's noise std and t_r (``curvature_refresh``;
    #: share 0: none).
    curvature_refresh_share: float = 0.0
    curvature_refresh_noise_std: float = 0.0
    curvature_refresh_step: int = 0
    #: T_s: the eigenvalue form's steps for spread rows (``curvature_step``, step 2; 0: none).
    spread_iterations: int = 0
    objective_gap: float = 1.0


@dataclass(frozen=True)
class RowMap:
    """The public linear map P = I − (v/ĉ) e_wᵀ of the module docstring (``centre`` = v,
    ``intercept`` = ĉ), after which each column j is multiplied by ``scales[j]`` (the column
    scales D of :mod:`~service.optimizers.kits.column_scales`; None: D = I)."""

    centre: np.ndarray
    intercept: float
    scales: np.ndarray | None = None

    def scaled(self, scales: np.ndarray) -> RowMap:
        """The same P followed by the column scales D = diag(``scales``)."""
        d = np.asarray(scales, dtype=np.float64)
        if d.shape != self.centre.shape or not np.all(np.isfinite(d) & (d > 0.0)):
            raise ValueError("the column scales must be w positive finite numbers")
        return RowMap(centre=self.centre, intercept=self.intercept, scales=d)


@runtime_checkable
class RowMappable(Protocol):
    """An oracle's optional capability to run the row map where its rows live (the data-parallel
    partitions, the in-database sessions): what ``DPAGDAveraged.fit_oracle`` needs to do
    exactly what ``fit`` does.

    - ``row_sum()``: Σ_i x_i over the oracle's encoded rows (each checked, ‖x_i‖ ≤ 1), a
      float64 vector of the row width w — the only input of step 1; it is never released
      itself, only through :func:`release_mean_of_sum`.
    - ``mapped(mapping)``: an oracle over (φ(x_i), y_i) for the public ``mapping`` — the same
      n, labels and loss, rows φ(x) with ‖φ(x)‖ ≤ 1 (step 3, computed row by row where the
      rows live). An implementation may change φ by row-local rounding only (e.g. flushing
      entries below 2⁻⁸⁰ to 0 in PostgreSQL); a row of norm ≤ 1 stays one, so (b) holds."""

    def row_sum(self) -> np.ndarray: ...

    def mapped(self, mapping: RowMap) -> GradientOracle: ...


def mean_sensitivity(n: int) -> float:
    """2/n: the replace-one ℓ2 sensitivity of the mean of n rows of norm ≤ 1 (docstring (a))."""
    return 2.0 / n


class RowMapMultipliers(NamedTuple):
    """The noise multipliers of a row-map plan's releases and their composed event
    (:func:`mean_then_steps`); inf: no such release."""

    steps: float
    mean: float
    curvature: float
    scales: float
    event: dp_event.DpEvent
    refresh: float = math.inf


def mean_then_steps(
    iterations: int,
    share: float,
    target: PrivacyTarget,
    curvature_share: float = 0.0,
    scale_share: float = 0.0,
    refresh_share: float = 0.0,
) -> RowMapMultipliers:
    """The steps', the mean's, the curvature release's, the column scales' and the curvature
    refresh's noise multipliers with 1/z₀² + 1/z_s² + 1/z_c² + 1/z_r² + T/z² = μ(ε, δ)² (docstring
    (c); z_c = inf and no curvature release when ``curvature_share`` is 0, ``curvature_step``'s
    (b) otherwise; z_s likewise with ``scale_share``, ``column_scales``' (c); z_r with
    ``refresh_share``, ``curvature_refresh``'s (b)), rounded up until the composed event's exact
    δ(ε) never exceeds δ in floating point. The event lists the releases in the order a fit
    draws them — the mean, the scales, the curvature, the steps — except the refresh, listed
    after the curvature though drawn after step t_r (composition does not depend on order)."""
    if not 0.0 < share < 1.0:
        raise ValueError("the mean's share must lie in (0, 1)")
    if not (curvature_share >= 0.0 and scale_share >= 0.0 and refresh_share >= 0.0):
        raise ValueError("a share must not be negative")
    spent = share + curvature_share + scale_share + refresh_share
    if not spent < 1.0:
        raise ValueError("the shares must leave the steps a share of μ²")
    mu = gdp_mu(target.epsilon, target.delta)

    def multiplier(part: float) -> float:
        return 1.0 / (mu * math.sqrt(part)) if part > 0.0 else math.inf

    z_steps = math.sqrt(iterations / (1.0 - spent)) / mu
    zs = [
        z_steps,
        multiplier(share),
        multiplier(curvature_share),
        multiplier(scale_share),
        multiplier(refresh_share),
    ]

    def event_of(z: float, z0: float, zc: float, z_scale: float, zr: float) -> dp_event.DpEvent:
        parts: list[dp_event.DpEvent] = [dp_event.GaussianDpEvent(z0)]
        parts += [dp_event.GaussianDpEvent(m) for m in (z_scale, zc, zr) if math.isfinite(m)]
        parts.append(dp_event.SelfComposedDpEvent(dp_event.GaussianDpEvent(z), iterations))
        return dp_event.ComposedDpEvent(parts)

    event = event_of(*zs)
    while gdp_delta(target.epsilon, event_mu(event) or math.inf) > target.delta:
        zs = [z * (1.0 + 1e-12) for z in zs]
        event = event_of(*zs)
    return RowMapMultipliers(zs[0], zs[1], zs[2], zs[3], event, zs[4])


def release_mean(X: np.ndarray, noise_std: float, rng: SecureRandom) -> np.ndarray:
    """m̃: the mean row of ``X`` (rows of norm ≤ 1) with Gaussian noise of std ``noise_std``
    (:func:`release_mean_of_sum` of its column sums; ``noise_std = 0``: the exact mean, the
    tests' noise-off run)."""
    return release_mean_of_sum(X.sum(axis=0), X.shape[0], noise_std, rng)


def release_mean_of_sum(
    total: np.ndarray, n: int, noise_std: float, rng: SecureRandom
) -> np.ndarray:
    """m̃ = total/n + ξ, ξ ~ N(0, noise_std² I): the mean of n rows of norm ≤ 1 from their sum
    ``total`` = Σ_i x_i, released through
    :func:`~service.privacy.secure_release.secure_gaussian` at sensitivity 2/n (docstring (a));
    one draw per entry, the same draws whoever summed the rows."""
    mean = np.asarray(total, dtype=np.float64) / n
    return secure_gaussian(mean, noise_std, mean_sensitivity(n), rng)


def row_map(released: np.ndarray, noise_std: float) -> RowMap:
    """Step 2: P from the released mean row and its public noise std only."""
    m = np.asarray(released, dtype=np.float64)
    width = m.shape[0]
    intercept = min(max(float(m[-1]), 1.0 / math.sqrt(width)), 1.0)
    centre = m.copy()
    centre[-1] = 0.0
    size = float(np.dot(centre, centre))
    noise = (width - 1) * noise_std * noise_std
    shrink = max(0.0, 1.0 - noise / size) if size > 0.0 else 0.0
    return RowMap(centre=centre * shrink, intercept=intercept)


def mapped_rows(X: np.ndarray, mapping: RowMap) -> np.ndarray:
    """Step 3: φ(x) = P x / ‖P x‖ for every row (0 where P x = 0), D P x / ‖D P x‖ with column
    scales (``column_scales``' step 4); a new array, ‖φ(x)‖ < 1.
    Every row takes the same arithmetic whatever its values."""
    rows = np.asarray(X, dtype=np.float64)
    out: np.ndarray = np.multiply.outer(rows[:, -1] / mapping.intercept, mapping.centre)
    np.subtract(rows, out, out=out)  # x − a v, in the outer product's buffer (one n × w array)
    if mapping.scales is not None:
        out *= mapping.scales
    norms = np.sqrt(np.einsum("ij,ij->i", out, out)) * (1.0 + NORM_MARGIN)
    out /= np.maximum(norms, np.finfo(np.float64).tiny)[:, None]
    return out


def fold(w: np.ndarray, mapping: RowMap, width: int) -> np.ndarray:
    """Step 5: W̄ P for a flat vector of K·``width`` (or ``width``) parameters: each class row
    w_k's last entry becomes w_k,w − (w_k · v)/ĉ; with column scales W̄ D P (w_k first
    multiplied by D entrywise)."""
    W = np.array(w, dtype=np.float64).reshape(-1, width)
    if mapping.scales is not None:
        W *= mapping.scales
    W[:, -1] -= (W @ mapping.centre) / mapping.intercept
    out: np.ndarray = W.reshape(-1)
    return out
