r"""Multinomial (softmax) logistic regression over K declared classes, fitted *jointly*.

Parameters: a K × d matrix W (one row w_k per class, intercept last in each row when fitted),
flattened row-major into the vector w of length K·d the optimizers work on
(``w[k·d + j] = W[k, j]``; :meth:`MultinomialLoss.parameter_count`). Rows have ‖x‖₂ ≤ 1.

Objective (per-row-averaged, as every loss here)

    F(w; S) = (1/n) Σ_i ℓ(W; x_i, t_i) + (l2/2) ‖W‖²_F,
    ℓ(W; x, t) = logsumexp(Wx) − t·Wx = − Σ_k t_k log p_k(W; x),   p(W; x) = softmax(Wx),

the cross-entropy against t = e_y for a row of class y. A row whose label is none of the
declared classes (the reader gives it no class) has ℓ ≡ 0: it teaches nothing about the
declared classes, and n stays the public row count. The label vector ``y`` the loss takes
holds the class index k ∈ {0, …, K−1}, or −1 for no declared class (:func:`class_indices`
turns the reader's (K, n) one-vs-rest matrix into it). Every bound below holds for such a row
too (its gradient is 0). ``l2 = 1/(n·C)`` is scikit-learn's
``LogisticRegression(multi_class="multinomial", C)`` objective divided by n·C (its intercept is
not regularised; here it is a feature inside the norm bound, like every model of the catalog).

Parametrisation: **full** (K rows), not reference-class (K − 1 rows, w_K ≡ 0). The softmax is
invariant under adding one vector to every row, so the data term alone has a flat direction;
the l2 term removes it: F is l2-strongly convex and its minimiser satisfies Σ_k w_k = 0 (the
data gradient Σ_k (p_k − t_k) x = 0 because p and t both sum to 1, and the l2 gradient keeps
the sum at 0). With a reference class the penalty ‖W‖² and the isotropic noise of every
optimizer would treat one arbitrary class differently from the others (its scores are exactly
0, noise-free; every other class carries the noise of a difference), so the released model
would depend on the order the owner declared the classes in. The full form is symmetric in the
classes; it costs d more parameters, whose noise the released model's predictions ignore only
in the direction Σ_k w_k (a common shift), so the noise in d of K·d coordinates is harmless.

Constants (derivation). Write z = Wx, g = p − t (a K-vector, Σ_k g_k = 0).

- **Gradient**: ∇_W ℓ = g xᵀ, so ‖∇ℓ‖_F = ‖g‖₂ ‖x‖₂, and ‖p − e_y‖² = (1 − p_y)² +
  Σ_{k≠y} p_k² ≤ 2(1 − p_y)² ≤ 2: **L = √2**, approached when p → e_j (j ≠ y) and ‖x‖ = 1,
  whatever K. (One-vs-rest has K gradients of norm ≤ 1 each, i.e. √K jointly: that is why it
  must split the budget K ways.)
- **Hessian**: ∇²ℓ = (diag(p) − ppᵀ) ⊗ xxᵀ. Böhning (1992), "Multinomial logistic regression
  algorithm", Ann. Inst. Statist. Math. 44, Lemma: diag(p) − ppᵀ ⪯ ½ (I − 𝟙𝟙ᵀ/K) for every p on
  the simplex, whose largest eigenvalue is ½. With xxᵀ ⪯ ‖x‖² I, ∇²ℓ ⪯ ½ I: **β = ½** in the
  Frobenius norm of W (the ℓ2 norm of the flattened w), attained: p = (½, ½, 0, …) gives
  diag(p) − ppᵀ the eigenvalue ½ on (e_1 − e_2)/√2. (A direct check without the lemma: for a
  unit v, vᵀ(diag p − ppᵀ)v = Var_{k∼p}(v_k) ≤ (max v − min v)²/4 ≤ (2·(1/√2))²/4 = ½, by
  Popoviciu's inequality and max − min ≤ √2 ‖v‖.)
- **Convexity**: diag(p) − ppᵀ is a covariance matrix, PSD, so ℓ is convex in W; F is
  **μ = l2** strongly convex and (½ + l2)-smooth.
- **Range**: ℓ ≥ 0 (z_y ≤ max_k z_k ≤ logsumexp(z)), and ℓ(0) ≤ log K for every row, so
  F(0) − min F ≤ log K (:meth:`MultinomialLoss.zero_loss_bound`; the optimizers' default
  objective gap is max(1, log K)).

Centred split (for ``dp_agd_centred``). The per-row gradient is c(W)·xᵀ with the *vector*
coefficient c(W) = p(W) − t; its anchor is c(0) = u − t, u = 𝟙/K. With scale κ = 1,

    c(W) − κ c(0) = p(W) − u,        κ c(0) = u − t,

and both have ‖·‖₂ ≤ r = √(1 − 1/K) for every W and every row: ‖p − u‖ is convex in p, so its
sup over the simplex is at a vertex, ‖e_j − u‖² = (1 − 1/K)² + (K − 1)/K² = 1 − 1/K; and
‖u − e_y‖ is that same value (a row of no declared class has c ≡ 0). κ = 1 is the minimax choice:
with q = (1 − κ)t + κu the centred sup is max_j ‖e_j − q‖, which at κ = 1 equals the label
term's κ√(1 − 1/K) and has derivative −2/K < 0 in κ there (squared), while the label term grows
with κ. So replacing one row moves the centred sum (1/n) Σ (p_i(W) − u) x_iᵀ by at most 2r/n in
Frobenius norm for every W, and the label term (1/n) Σ (u − t_i) x_iᵀ by at most 2r/n — exactly
the two bounds ``dp_agd_centred``'s proof uses, in the ℓ2 norm of the flattened vector
(:meth:`MultinomialLoss.coefficient_anchor`, probed by a test). 2r/n = 2√(1 − 1/K)/n against
the whole gradient's 2√2/n: 0.50 of it for K = 2, 0.67 for K = 10.

Clipped slope (``gradient_clip`` = C ∈ (0, 1), as the binary model's). Write the soft-min
margin of a row of class y, M(z) = z_y − logsumexp_{k≠y}(z_k) (concave in z: a linear term minus
a log-sum-exp), so that ℓ = log(1 + e^{−M}) = h(M), the binary logistic loss of M (indeed
e^{−M} = Σ_{k≠y} e^{z_k − z_y} and 1 + e^{−M} = 1/p_y). The clipped loss is ℓ_C = h_C(M) with
the binary clipped-slope h_C of ``service/models/logistic.py`` (the logistic loss for
M ≥ m_C = log((1 − C)/C), its tangent below; :func:`~service.models.logistic.clip_margin`).

- Convex: h_C is convex and non-increasing, M is concave, so h_C ∘ M is convex.
- Gradient: ∇_z ℓ_C = h_C'(M) ∇M with ∇M = e_y − s, s = softmax of z over k ≠ y (0 at y), so
  ‖∇M‖² = 1 + ‖s‖² ≤ 2 and |h_C'| = min(σ(−M), C) ≤ C: **L = √2·C** (attained for M ≤ m_C,
  s a vertex, ‖x‖ = 1). For C = 1/2, L = 0.71 — against one-vs-rest's clipped classes, which
  compose to C·√K = 0.87 at K = 3 and 1.58 at K = 10 (K releases at μ/√K are one release of
  sensitivity C√K).
- Smoothness: ∇²_z ℓ_C = h_C''(M) ∇M∇Mᵀ + |h_C'(M)| (diag(s) − ssᵀ) (a.e.; the second term is
  −h_C' times −∇²M, the Hessian of logsumexp_{k≠y}, whose eigenvalues are ≤ 1/2 as above). With
  h_C'' ≤ c(1 − c), c = min(C, 1/2) (``clipped_smoothness``) and ‖∇M‖² ≤ 2:
  **β = 2c(1 − c) + C/2** (3/4 at C = 1/2), times ‖x‖² ≤ 1 in the Frobenius norm of W. h_C' is
  Lipschitz and M smooth, so the gradient is Lipschitz with the sup of this a.e. bound. Looser
  than the unclipped ½ (the two terms need not peak together), but sound.
- No anchor: the clipped coefficient's label-fixed interval is not derived here, so
  ``dp_agd_centred`` refuses a clipped multinomial model (``model``).
- ℓ_C ≥ 0 and ℓ_C(0) ≤ h(−log(K − 1)) = log K, as above.

Per-row norm clip (``gradient_norm_clip`` = B > 0). Each row's coefficient vector c = ∂ℓ/∂z
(p − e_y, or the clipped slope's h_C'(M)·(s − e_y)) is scaled to c̃ = c·min(1, B/‖c‖) before
its gradient c̃ xᵀ enters a sum: per-example clipping as in DP-SGD (Abadi et al. 2016, "Deep
learning with differential privacy", §3.1), applied to the K-vector because ‖c xᵀ‖_F = ‖c‖‖x‖.

- Sensitivity: ‖c̃ xᵀ‖_F ≤ B for ‖x‖ ≤ 1, so **L = min(B, √2·C)** (√2 unclipped); replacing one
  row moves a sum of row gradients by at most 2L.
- At W = 0 the clipped coefficient is c(0) = C·(s − e_y) with s uniform over k ≠ y (the slope
  σ(log(K − 1)) = (K − 1)/K is ≥ C for C ≤ 1/2), so ‖c(0)‖ = C·√(K/(K − 1)) for every row of a
  class: B = C·√(K/(K − 1)) never clips the first step, and 2B is attained there (rows x and −x
  of one class, ‖x‖ = 1). Against √2·C it is √(K/(2(K − 1))) of the noise: 0.87 at K = 3,
  0.82 at K = 4, 0.75 at K = 10 (what ``auto`` sets for K ≥ 3: ``kits/joint_rule.py``).
- What it is not: c̃ is no loss's gradient (a radial projection of a gradient field is not a
  gradient field). :meth:`MultinomialLoss.value` stays ℓ's; :meth:`MultinomialLoss.gradient` is
  the clipped field's, and ``exact_gradient`` is False. Output perturbation and bolt-on (their
  sensitivity is a growth recursion of exact gradient steps of a convex smooth loss) and
  ``dp_agd_centred`` (its anchor bound) refuse it (``model``); the gradient-perturbation
  methods (:data:`NORM_CLIP_OPTIMIZERS`) need only the per-row bound — every step's noise is
  calibrated to 2L/n — and accept it. The projection onto a ball is 1-Lipschitz, so the field
  is as Lipschitz in W as ∇ℓ (β above) and the public step sizes keep their meaning; the steps
  head for a fixed point of the clipped field (F's minimiser where no row is clipped), as
  DP-SGD's do.
- Floating point: rows are scaled to B/(1 + :data:`NORM_CLIP_MARGIN`), so a computed ‖c̃‖
  stays ≤ B after rounding. Every row takes the same arithmetic whether it is clipped or not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from scipy.special import expit, log_softmax

from service.models.base import (
    CoefficientAnchor,
    FloatArray,
    Task,
    check_weight,
    fit_intercept_field,
    l1_field,
    l2_field,
    soft_threshold,
)
from service.models.logistic import clip_margin, clipped_smoothness

__all__ = [
    "JOINT_OPTIMIZERS",
    "MULTINOMIAL",
    "MIN_NORM_CLIP",
    "NORM_CLIP_MARGIN",
    "NORM_CLIP_OPTIMIZERS",
    "MultinomialLogisticSpec",
    "MultinomialLoss",
    "class_indices",
    "softmax_rows",
]

MULTINOMIAL = "multinomial_logistic_regression"

#: Dense products run on row blocks of at most this many entries: above it OpenBLAS starts
#: threads that spin for a core another process holds (the same measurement as the optimizers'
#: ``BLAS_BLOCK``); on 14,000 × 21 rows and K = 5 a whole X Wᵀ took 12 ms here, blocked 0.8.
BLOCK_ENTRIES = 1 << 16
#: … and the gradient's two products W Xᵀ and Gᵀ X on blocks of at most this many
#: multiply-adds (K · rows · width): OpenBLAS runs a product single-threaded up to 4 · 65,536 of
#: them (its GEMM_MULTITHREAD_THRESHOLD × SMP_THRESHOLD_MIN) and above that starts the threads
#: that spin on this shared machine — measured here on digits' 1,008-row blocks (K = 10,
#: width 65: 655,360) 0.50 ms per W Xᵀ, 0.04 ms limited to one thread.
PRODUCT_ENTRIES = 1 << 18
#: The gradient's per-row work runs on blocks of at most this many (class, row) entries (2 MiB
#: a temporary whatever n), its products on sub-blocks of :data:`PRODUCT_ENTRIES` (10–25 % per
#: gradient against blocks of the products' size: bench/RESULTS.md, issue 24 turn 27).
ELEMENTWISE_ENTRIES = 1 << 18

#: The optimizers whose privacy proof carries to a K·d-parameter loss known only through its
#: constants (L, β, μ, convexity) and its gradient — full-gradient and permutation-SGD methods —
#: plus dp_agd_centred through the vector anchor above. Every other optimizer refuses the model
#: (``model``): their code or their proofs assume a linear model of one weight vector (dp_accmd's
#: ℓ1 ball over d coordinates, the SVRG and SpiderBoost kits, the noisy-SGD baselines and
#: rrpsgd have not been checked for it) — refusing is the safe default until each is.
JOINT_OPTIMIZERS = frozenset(
    {
        "dp_gd",
        "dp_agd",
        "dp_agd_averaged",
        "dp_agd_centred",
        "output_perturbation_gd",
        "bolt_on_psgd",
    }
)

#: The joint optimizers whose proof needs only each row's gradient bound (every step's noise is
#: calibrated to 2L/n): the ones that accept a binding ``gradient_norm_clip`` (module docstring).
NORM_CLIP_OPTIMIZERS = frozenset({"dp_gd", "dp_agd", "dp_agd_averaged"})
#: A clipped coefficient is scaled to B / (1 + NORM_CLIP_MARGIN): ≤ B after rounding.
NORM_CLIP_MARGIN = 1e-12
#: The smallest B: its scale factor ≥ 1e-6/√2 keeps every in-database product clear of
#: PostgreSQL's underflow (``service/workers/in_database_multinomial.py``).
MIN_NORM_CLIP = 1e-6


class MultinomialLogisticSpec(BaseModel):
    """Multinomial (softmax) logistic regression over a categorical label's declared classes."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["multinomial_logistic_regression"] = Field(
        description=(
            "Model family: multinomial (softmax) logistic regression over the categorical "
            "label's K declared classes, fitted jointly (K weight rows, one release): "
            "cross-entropy loss, L = √2 and β = 1/2 whatever K, so its noise does not grow with "
            "the number of classes as one-vs-rest's does. Categorical labels only."
        )
    )
    l2: float = l2_field()
    l1: float = l1_field()
    fit_intercept: bool = fit_intercept_field()
    gradient_clip: float | None = Field(
        default=None,
        gt=0.0,
        le=1.0,
        allow_inf_nan=False,
        description=(
            "C in (0, 1]: the binary model's clipped slope applied to each row's soft-min "
            "margin z_y − logsumexp_{k≠y} z_k (a convex loss: the cross-entropy where the margin "
            "is above log((1 − C)/C), its tangent below). Lipschitz constant √2·C (√2 without "
            "clipping), so the noise scales by C; smoothness 2c(1 − c) + C/2, c = min(C, 1/2). "
            "Probabilities are then scores whose argmax is calibrated. Default: no clipping."
        ),
    )
    gradient_norm_clip: float | None = Field(
        default=None,
        ge=MIN_NORM_CLIP,
        le=1e6,
        allow_inf_nan=False,
        description=(
            "B in [1e-6, 1e6]: each row's gradient is scaled to norm at most B (per-example "
            "clipping, as DP-SGD; its coefficient vector ∂ℓ/∂z is scaled, and rows have norm "
            "≤ 1), so the Lipschitz constant, and the noise, become min(B, √2·C). Below √2·C "
            "the steps follow "
            "a clipped field that is no loss's gradient: only dp_gd, dp_agd and dp_agd_averaged "
            "accept it. auto sets C·√(K/(K − 1)) for K ≥ 3 classes (the norm every row has at "
            "w = 0). Default: none."
        ),
    )


def softmax_rows(scores: FloatArray) -> FloatArray:
    """Row-wise softmax of an (n, K) score matrix, overflow-free (exp of the log-softmax)."""
    out: FloatArray = np.exp(log_softmax(scores, axis=1))
    return out


def class_indices(one_vs_rest: FloatArray) -> FloatArray:
    """The (n,) class-index labels of the reader's (K, n) ±1 one-vs-rest matrix: the k whose
    row holds +1, or −1 where no row does (a label none of the declared classes). Row-local."""
    Y = np.asarray(one_vs_rest, dtype=np.float64)
    positive = Y > 0.0
    out: FloatArray = np.where(positive.any(axis=0), positive.argmax(axis=0), -1).astype(np.float64)
    return out


@dataclass
class MultinomialLoss:
    """The regularised softmax cross-entropy over ``classes`` = K classes; implements
    :class:`service.models.base.Loss` on the flattened K·d parameter vector.

    Assumes rows with ‖x‖₂ ≤ 1 and labels in {−1, 0, …, K−1} (−1: no declared class, ℓ ≡ 0);
    guarantees L = √2, β = 1/2 and μ = ``l2`` — with ``gradient_clip`` C < 1, L = √2·C and
    β = 2c(1 − c) + C/2 (module docstring). ``classes`` is the label's public class count,
    bound when a job is planned (:meth:`with_classes`).
    """

    l2: float = 0.0
    l1: float = 0.0
    classes: int = 2
    gradient_clip: float | None = None
    #: B: each row's coefficient vector scaled to norm ≤ B (module docstring, "Per-row norm clip").
    gradient_norm_clip: float | None = None
    #: The rows' last column is the intercept's constant (the spec's ``fit_intercept``): what
    #: ``dp_agd_averaged``'s row map needs (``service/optimizers/kits/dp_agd_row_map.py``).
    fit_intercept: bool = False
    name: str = field(default=MULTINOMIAL, init=False)
    task: Task = field(default="classification", init=False)
    lipschitz: float = field(default=math.sqrt(2.0), init=False)
    smoothness: float = field(default=0.5, init=False)
    convex: bool = field(default=True, init=False)
    #: Whether :meth:`gradient` is ∇F (False when ``gradient_norm_clip`` binds: a clipped field).
    exact_gradient: bool = field(default=True, init=False)

    def __post_init__(self) -> None:
        check_weight("l2", self.l2)
        check_weight("l1", self.l1)
        if not (isinstance(self.classes, int) and self.classes >= 2):
            raise ValueError("a multinomial model needs at least two classes")
        clip = self._clip
        if self.gradient_clip is not None and not (
            math.isfinite(self.gradient_clip) and 0.0 < self.gradient_clip <= 1.0
        ):
            raise ValueError("gradient_clip must be a number in (0, 1]")
        if clip is not None:
            self.lipschitz = math.sqrt(2.0) * clip
            self.smoothness = 2.0 * clipped_smoothness(clip) + clip / 2.0
        bound = self.gradient_norm_clip
        if bound is not None and not (math.isfinite(bound) and bound >= MIN_NORM_CLIP):
            raise ValueError(f"gradient_norm_clip must be a number of at least {MIN_NORM_CLIP:g}")
        if self.norm_clip is not None:
            self.lipschitz = float(self.norm_clip)
            self.exact_gradient = False

    @property
    def _clip(self) -> float | None:
        """C when it actually clips (C < 1); None for the plain cross-entropy."""
        c = self.gradient_clip
        return None if c is None or c >= 1.0 else float(c)

    @property
    def norm_clip(self) -> float | None:
        """B when it can bind (B below the slope's bound √2·C, or √2); None otherwise."""
        bound = self.gradient_norm_clip
        slope = math.sqrt(2.0) * (self._clip if self._clip is not None else 1.0)
        return None if bound is None or bound >= slope else float(bound)

    def _clip_norms(self, coef: FloatArray) -> None:
        """Scale each column of the class-major (K, rows) coefficients to norm ≤ B, in place
        (module docstring, "Per-row norm clip"); nothing when no norm clip binds."""
        bound = self.norm_clip
        if bound is None:
            return
        target = bound / (1.0 + NORM_CLIP_MARGIN)
        norms = np.sqrt(np.einsum("kn,kn->n", coef, coef))
        coef *= target / np.maximum(norms, target)

    # --- what planning and the runner ask of a joint multiclass loss ------------------------

    def with_classes(self, classes: int) -> MultinomialLoss:
        """The same loss over ``classes`` declared classes."""
        return MultinomialLoss(
            l2=self.l2,
            l1=self.l1,
            classes=int(classes),
            gradient_clip=self.gradient_clip,
            gradient_norm_clip=self.gradient_norm_clip,
            fit_intercept=self.fit_intercept,
        )

    def parameter_count(self, width: int) -> int:
        """K·width: the length of w for rows of ``width`` encoded columns."""
        return self.classes * int(width)

    def labels_for_fit(self, Y: FloatArray) -> FloatArray:
        """The labels this loss takes from the reader's (K, n) one-vs-rest matrix."""
        return class_indices(Y)

    def zero_loss_bound(self) -> float:
        """sup over rows of ℓ(0; x, y) = log K, a bound on F(0) − min F (ℓ ≥ 0)."""
        return math.log(self.classes)

    def curvature_at_zero(self) -> float:
        """1/K, clipped or not (derived in ``kits/gram_step.py``, "The curvature scale")."""
        return 1.0 / self.classes

    def coefficient_anchor(self) -> CoefficientAnchor | None:
        """κ = 1, r = √(1 − 1/K): ‖(p(W) − e_y) − κ(u − e_y)‖ ≤ r and ‖κ(u − e_y)‖ ≤ r for
        every W and every row (module docstring, "Centred split"); None when clipped (slope or
        norm)."""
        if self._clip is not None or self.norm_clip is not None:
            return None
        return CoefficientAnchor(scale=1.0, half_width=math.sqrt(1.0 - 1.0 / self.classes))

    # --- helpers ------------------------------------------------------------------------------

    def _matrix(self, w: FloatArray, width: int) -> FloatArray:
        w = np.asarray(w, dtype=np.float64)
        if w.shape != (self.classes * width,):
            raise ValueError("the parameter vector's length is not K times the row width")
        return w.reshape(self.classes, width)

    # The per-row work runs class-major, on (K, n) arrays: a reduction over the K classes is K − 1
    # passes over rows, not n short ones (14,000 × 5: a row-wise max 5.7 ms, class-major 0.02).

    @staticmethod
    def _scores(W: FloatArray, X: Any) -> FloatArray:
        """Zᵀ = W Xᵀ, (K, n). Dense rows: products on row blocks (:data:`BLOCK_ENTRIES`);
        other row types (the optimizers' sparse rows support matrix-vector products only): one
        product per class."""
        if not isinstance(X, np.ndarray):
            return np.vstack([X @ row for row in W])
        n, width = X.shape
        Wt = np.ascontiguousarray(W.T)  # X·Wᵀ with both C-contiguous (W Xᵀ took 11 ms here)
        out: FloatArray = np.empty((W.shape[0], n), dtype=np.float64)
        step = max(1, BLOCK_ENTRIES // max(1, width))
        for start in range(0, n, step):
            out[:, start : start + step] = (X[start : start + step] @ Wt).T
        return out

    @staticmethod
    def _back(X: Any, G: FloatArray) -> FloatArray:
        """G X for class-major G (K, n): Σ_i G[k, i] x_i per class, (K, d), by row blocks."""
        if not isinstance(X, np.ndarray):
            return np.vstack([X.T @ np.ascontiguousarray(row) for row in G])
        n, width = X.shape
        out: FloatArray = np.zeros((G.shape[0], width), dtype=np.float64)
        step = max(1, BLOCK_ENTRIES // max(1, width))
        for start in range(0, n, step):
            out += G[:, start : start + step] @ X[start : start + step]
        return out

    def _onehot(self, y: FloatArray) -> tuple[FloatArray, FloatArray]:
        """Class-major (K, n) one-hot targets (a zero column for −1) and the (n,) 0/1 mask of
        rows with a declared class."""
        idx = np.asarray(y, dtype=np.float64).astype(np.int64)
        known = idx >= 0
        T: FloatArray = np.zeros((self.classes, idx.shape[0]), dtype=np.float64)
        rows = np.flatnonzero(known)
        T[idx[rows], rows] = 1.0
        return T, known.astype(np.float64)

    def _losses_and_coefficients(
        self, Z: FloatArray, y: FloatArray, with_losses: bool = True
    ) -> tuple[FloatArray, FloatArray]:
        """Per-row ℓ (n,) and class-major ∂ℓ/∂z (K, n) at class-major scores Z (module
        docstring). Overflow-free: every exponent is of a score minus its row's maximum.
        ``with_losses`` False: the losses are not computed (an empty array; the gradient's
        call, whose elementwise work the losses' log-add-exp otherwise dominates)."""
        T, known = self._onehot(y)
        z_y = np.einsum("kn,kn->n", T, Z)
        clip = self._clip
        if clip is None:
            top = Z.max(axis=0)
            e = np.exp(Z - top)
            total = e.sum(axis=0)
            losses = (top + np.log(total) - z_y) * known
            coef = e / total
            coef -= T
            coef *= known
            self._clip_norms(coef)
            return losses, coef
        # soft-min margin M = z_y − logsumexp_{k≠y} z_k; rows without a class: ℓ = 0, ∂ℓ = 0
        others = np.where(T > 0.0, -np.inf, Z)
        top = others.max(axis=0)
        e = np.exp(others - top)
        total = e.sum(axis=0)
        neg_margin = top + np.log(total) - z_y  # −M
        if with_losses:
            m_c = clip_margin(clip)
            line = clip * (neg_margin + m_c) - math.log1p(-clip)
            losses = np.where(neg_margin > -m_c, line, np.logaddexp(0.0, neg_margin)) * known
        else:
            losses = np.empty(0)
        slope = np.minimum(expit(neg_margin), clip) * known  # |h_C'(M)|, 0 without a class
        coef = e / total  # softmax over k ≠ y (0 at y) …
        coef -= T  # … minus e_y: −∇M
        coef *= slope
        self._clip_norms(coef)
        return losses, coef

    # --- the Loss protocol ----------------------------------------------------------------------

    def _row_blocks(self, X: Any) -> list[slice]:
        """Row blocks of dense rows small enough that the per-row work's (K, rows) temporaries
        stay within a few :data:`BLOCK_ENTRIES` whatever n (public sizes only: the memory a
        gradient needs does not grow with n beyond the rows themselves); one block for other
        row types, whose products are per class over all rows."""
        n, width = X.shape
        if not isinstance(X, np.ndarray):
            return [slice(0, n)]
        step = max(1, BLOCK_ENTRIES // max(1, width, self.classes))
        return [slice(start, start + step) for start in range(0, n, step)]

    def smooth_value(self, w: FloatArray, X: Any, y: FloatArray) -> float:
        W = self._matrix(w, X.shape[1])
        y = np.asarray(y, dtype=np.float64)
        total = 0.0
        for rows in self._row_blocks(X):
            block = X[rows] if isinstance(X, np.ndarray) else X
            losses, _ = self._losses_and_coefficients(self._scores(W, block), y[rows])
            total += float(np.sum(losses))
        return total / X.shape[0] + 0.5 * self.l2 * float(np.dot(w, w))

    def value(self, w: FloatArray, X: Any, y: FloatArray) -> float:
        out = self.smooth_value(w, X, y)
        if self.l1:
            out += self.l1 * float(np.sum(np.abs(w)))
        return out

    def gradient(self, w: FloatArray, X: Any, y: FloatArray) -> FloatArray:
        """∇F = (1/n) Gᵀ X flattened (G = ∂ℓ/∂z per row: p − e_y unclipped; each row's scaled
        to norm ≤ B under ``gradient_norm_clip``, then the clipped field's, not ∇F), plus l2·w.
        Dense rows: :meth:`_dense_coefficient_products` (the optimizers' hot loop); other row
        types: :meth:`_losses_and_coefficients` per class product. The two differ only in
        floating-point rounding (a test holds them to 1e-13)."""
        n, width = X.shape
        W = self._matrix(w, width)
        y = np.asarray(y, dtype=np.float64)
        if isinstance(X, np.ndarray):
            total = self._dense_coefficient_products(W, X, y)
        else:
            _, coef = self._losses_and_coefficients(self._scores(W, X), y, False)
            total = self._back(X, coef)
        grad: FloatArray = total.ravel()
        grad *= 1.0 / n
        if self.l2:
            grad += self.l2 * np.asarray(w, dtype=np.float64)
        return grad

    def _dense_coefficient_products(
        self, W: FloatArray, X: FloatArray, y: FloatArray
    ) -> FloatArray:
        """Σ_i ∂ℓ/∂z_i x_iᵀ, (K, width), for dense rows: the gradient's data sum, computed in
        place on one class-major (K, rows) buffer reused across row blocks (public sizes: at
        most :data:`ELEMENTWISE_ENTRIES` entries a block, :data:`PRODUCT_ENTRIES` multiply-adds a
        product). Per block: Zᵀ = W Xᵀ into the buffer, the label's entries gathered and
        scattered by flat index (no one-hot array), the softmax's exp in place, and Gᵀ X.

        The same coefficients as :meth:`_losses_and_coefficients`, rearranged (module
        docstring): unclipped, e_k/Σe (each row scaled by 1/Σe, 0 without a class) minus 1 at
        the label; clipped, the softmax over k ≠ y times the slope min(σ(−M), C), minus the
        slope at the label, where, with e = exp(z − max_k z_k) over every class (no exponent
        above 0, none at −∞: numpy's exp of −∞ takes a slower path), S = Σ_k e_k and
        O = S − e_y = Σ_{k≠y} e_k, σ(−M) = O/S — the same value as expit(−M) to an absolute
        rounding of about 1e-16 (O's cancellation where the label dominates, where σ(−M) is
        itself below that) — so each k ≠ y gets e_k · min(1/S, C/O) and the label
        −O · min(1/S, C/O) = −min(σ(−M), C). A row of no declared class gets slope / scale 0
        (its flat index points at class 0, whose entry is then multiplied by 0). Under
        ``gradient_norm_clip`` each row's coefficients are then scaled to norm ≤ B
        (:meth:`_clip_norms`)."""
        K = self.classes
        n, width = X.shape
        step = max(1, min(n, ELEMENTWISE_ENTRIES // K))
        sub = max(1, PRODUCT_ENTRIES // (K * width))
        buffer: FloatArray = np.empty(K * step, dtype=np.float64)
        positions = np.arange(step, dtype=np.int64)
        total: FloatArray = np.zeros((K, width), dtype=np.float64)
        clip = self._clip
        for start in range(0, n, step):
            block = X[start : start + step]
            m = block.shape[0]
            flat_scores = buffer[: K * m]
            Z = flat_scores.reshape(K, m)
            for part in range(0, m, sub):
                Z[:, part : part + sub] = W @ block[part : part + sub].T
            idx = y[start : start + m].astype(np.int64)
            known = (idx >= 0).astype(np.float64)
            flat = np.maximum(idx, 0) * m + positions[:m]
            top = Z.max(axis=0)
            Z -= top
            np.exp(Z, out=Z)
            if clip is None:
                Z *= known / Z.sum(axis=0)
                flat_scores[flat] -= known
            else:
                sums = Z.sum(axis=0)
                others = sums - flat_scores[flat]
                np.maximum(others, 0.0, out=others)  # Σ_{k≠y} e_k (a rounding below 0: 0)
                with np.errstate(divide="ignore"):
                    scale = np.minimum(1.0 / sums, clip / others)  # others = 0: 1/S
                slope = others * scale  # min(σ(−M), C)
                scale *= known
                slope *= known
                Z *= scale
                flat_scores[flat] = -slope
            self._clip_norms(Z)
            for part in range(0, m, sub):
                total += Z[:, part : part + sub] @ block[part : part + sub]
        return total

    def example_gradients(self, w: FloatArray, X: FloatArray, y: FloatArray) -> FloatArray:
        """(n, K·d): row i is ∂ℓ/∂z_i ⊗ x_i flattened like w."""
        X = np.asarray(X, dtype=np.float64)
        n, width = X.shape
        _, G = self._losses_and_coefficients(self._scores(self._matrix(w, width), X), y)
        out: FloatArray = (G.T[:, :, None] * X[:, None, :]).reshape(n, self.classes * width)
        return out

    def prox(self, w: FloatArray, step: float) -> FloatArray:
        check_weight("step", step)
        if self.l1 == 0.0:
            return np.array(w, dtype=np.float64, copy=True)
        return soft_threshold(w, step * self.l1)

    def check_labels(self, y: FloatArray) -> None:
        y = np.asarray(y, dtype=np.float64)
        if not bool(np.all((y == np.round(y)) & (y >= -1.0) & (y < self.classes))):
            raise ValueError("labels must be class indices 0 … K−1 (or −1 for no class)")

    def predict_proba(self, w: FloatArray, X: Any) -> FloatArray:
        """(n, K): softmax(Wx) per row, the model's P(class k | x) (a score when clipped)."""
        return softmax_rows(self._scores(self._matrix(w, X.shape[1]), X).T)

    def predict(self, w: FloatArray, X: Any) -> FloatArray:
        """The class index of highest score per row (ties: the lowest index)."""
        scores = self._scores(self._matrix(w, X.shape[1]), X)
        out: FloatArray = np.argmax(scores, axis=0).astype(np.float64)
        return out


SPEC = MultinomialLogisticSpec


def build(spec: MultinomialLogisticSpec) -> MultinomialLoss:
    return MultinomialLoss(
        l2=spec.l2,
        l1=spec.l1,
        gradient_clip=spec.gradient_clip,
        gradient_norm_clip=spec.gradient_norm_clip,
        fit_intercept=spec.fit_intercept,
    )
