r"""The tree mechanism (binary / dyadic tree aggregation) for private prefix sums of a stream.

Dwork, Naor, Pitassi & Rothblum (2010); Chan, Shi & Song (2011); used as Alg. 1 of Liu &
Talwar, *Adaptive Batch Size for Privately Finding Second-Order Stationary Points* (paper 003),
and by Kairouz et al. (2021, DP-FTRL).

Stream and nodes. A stream v_1, v_2, … of vectors in R^d (at most ``capacity`` elements) is
summarised by the dyadic intervals ("nodes") ``(ℓ, j) = [j·2^ℓ + 1, (j+1)·2^ℓ]`` of levels
ℓ = 0, 1, …. The prefix [1, t] is the disjoint union of the nodes ``(ℓ, (t >> ℓ) − 1)`` for the
set bits ℓ of t (the binary expansion of t). Each node is released once, as its exact sum plus
fresh noise ``N(0, σ² I_d)`` (made exactly: grid + discrete Gaussian, :class:`TreeAggregator`),
and reused by every prefix that contains it; the noisy prefix sum
at t is the sum of the popcount(t) ≤ m noisy nodes of its expansion:

    Ŝ_t = Σ_{k ≤ t} v_k + TREE(t),   TREE(t) = Σ_{ℓ: bit ℓ of t set} ζ_(ℓ, (t>>ℓ)−1),
    Var(TREE(t)_i) = popcount(t) σ².

Only nodes with ``(t >> ℓ)`` odd are ever used ("left children"); a node beyond the stream's
actual length is never released. (Paper 003's Alg. 1 lists the same dyadic decomposition; its
loop stops at size-1 nodes with ⌈log Σ⌉ levels and, as printed, misses the last element of
t = Σ = 2^h; we use the standard binary expansion above, which is exact for every t.)

Tree depth. With T = ``capacity``, ``m = tree_depth(T) = ⌊log₂ T⌋ + 1 = ⌈log₂(T + 1)⌉``
(dp-accounting's ``max_depth`` for ``SingleEpochTreeAggregationDpEvent``).

Sensitivity (replace-one). Let the stream elements be computed by adaptive algorithms
``v_k = M_k(history, Z_k)`` on disjoint parts Z_k of the data (Liu & Talwar, Thm 2.2), with
``‖M_k(h, Z_k) − M_k(h, Z'_k)‖₂ ≤ s`` for every history h. Replacing one row changes at most one
part Z_k, hence at most the one element v_k given the same history. Element k lies in exactly
one node per level, and a used node at level ℓ contains k only if bit ℓ of (k − 1) is 0 and the
node ends at or before T; so k lies in at most m released nodes, and exactly m for k = 1 when
the stream runs to length 2^{m−1} or more. Every one of those node sums moves by v_k − v'_k,
so the vector of all node sums has L2 sensitivity

    Δ_tree = s · √m.

With the same noise σ on every node, the release of all nodes is (by adaptive composition of
Gaussian mechanisms with history-dependent per-node sensitivities c_node ∈ {0, ≤ s} whose
squares sum to at most m s² on every path: Rényi-DP of order α at most α Σ c²/(2σ²) ≤
α m s²/(2σ²); Feldman & Zrnic 2021, Thm 3.1 for the adaptive sum) exactly as private as one
Gaussian release of sensitivity Δ_tree with noise σ. The event is therefore

    GaussianDpEvent(noise_multiplier = σ / Δ_tree)                                   (★)

under dpfit's convention (docs/ledger.md#the-z-convention: Δ is the replace-one sensitivity
computed here; the RDP
accountant charges α/(2z²) and does not double it). Everything computed from the noisy prefix
sums (iterates, batch sizes, …) is post-processing. Several trees (restarts) on disjoint rows
compose in parallel: a row is in at most one element of one tree, so (★) with the largest
capacity covers a whole run of restarted trees.

dp-accounting's ``SingleEpochTreeAggregationDpEvent`` has the same per-record depth count
(⌈log₂(steps+1)⌉ = m) but is defined only for the ``REPLACE_SPECIAL`` relation (a record is
replaced by a special zero-contribution record, sensitivity s rather than our 2-row replacement
bound), and its RDP accountant refuses it under REPLACE_ONE — which the ledger uses. We therefore
charge the plain Gaussian event (★) with our own replace-one Δ_tree; a test pins the two
depth formulas against each other.

Calibration. The run is a single Gaussian event, so the noise multiplier z = σ/Δ_tree is the
smallest z for which ``GaussianDpEvent(z)`` is (ε, δ)-DP according to the RDP accountant
(:func:`service.privacy.calibration.calibrate_noise_multiplier`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from dp_accounting import dp_event

from service.models.base import FloatArray
from service.privacy.secure_random import SecureRandom, as_secure
from service.privacy.secure_release import secure_gaussian

__all__ = [
    "Node",
    "TreeAggregator",
    "element_nodes",
    "node_sums",
    "prefix_nodes",
    "tree_depth",
    "tree_event",
    "tree_sensitivity",
]

#: A dyadic node (level ℓ, index j): the stream positions j·2^ℓ + 1 … (j+1)·2^ℓ (1-based).
Node = tuple[int, int]


def tree_depth(capacity: int) -> int:
    """m = ⌊log₂ T⌋ + 1: the most released nodes any element of a stream of ≤ T elements is in."""
    if capacity < 1:
        raise ValueError("capacity must be >= 1")
    return int(capacity).bit_length()


def prefix_nodes(t: int) -> list[Node]:
    """The nodes whose disjoint union is [1, t]: one per set bit ℓ of t, index (t >> ℓ) − 1."""
    if t < 1:
        raise ValueError("t must be >= 1")
    return [(level, (t >> level) - 1) for level in range(t.bit_length()) if (t >> level) & 1]


def element_nodes(k: int, length: int) -> list[Node]:
    """The released nodes of a stream of ``length`` elements that contain element k (1-based).

    Node (ℓ, j) with j = (k − 1) >> ℓ is used by some prefix iff j is even (it is the left part
    of a set bit) and it ends within the stream, (j + 1)·2^ℓ ≤ length.
    """
    if not 1 <= k <= length:
        raise ValueError("need 1 <= k <= length")
    out: list[Node] = []
    for level in range(length.bit_length()):
        j = (k - 1) >> level
        if j % 2 == 0 and (j + 1) << level <= length:
            out.append((level, j))
    return out


def node_sums(stream: FloatArray) -> dict[Node, FloatArray]:
    """The exact sums of every node released for a stream (rows = elements v_1 … v_t).

    These are the quantities the tree mechanism perturbs; used by the sensitivity tests.
    """
    values = np.asarray(stream, dtype=np.float64)
    if values.ndim != 2:
        raise ValueError("stream must be a 2-d array (elements × dimension)")
    length = values.shape[0]
    cumulative = np.vstack([np.zeros((1, values.shape[1])), np.cumsum(values, axis=0)])
    out: dict[Node, FloatArray] = {}
    for level in range(max(length, 1).bit_length()):
        size = 1 << level
        for j in range(0, length // size, 2):
            out[(level, j)] = cumulative[(j + 1) * size] - cumulative[j * size]
    return out


def tree_sensitivity(element_sensitivity: float, capacity: int) -> float:
    """Δ_tree = s·√m: replace-one L2 sensitivity of all node sums (module docstring)."""
    if not (math.isfinite(element_sensitivity) and element_sensitivity > 0.0):
        raise ValueError("element_sensitivity must be a finite number > 0")
    return element_sensitivity * math.sqrt(tree_depth(capacity))


def tree_event(noise_multiplier: float) -> dp_event.GaussianDpEvent:
    """The event (★) of a tree release with σ = noise_multiplier · Δ_tree."""
    if not (math.isfinite(noise_multiplier) and noise_multiplier > 0.0):
        raise ValueError("noise_multiplier must be a finite number > 0")
    return dp_event.GaussianDpEvent(noise_multiplier=noise_multiplier)


@dataclass
class TreeAggregator:
    """Noisy prefix sums of a stream by the tree mechanism (one tree).

    ``add(v)`` appends the next element and returns the noisy prefix sum Ŝ_t = Σ of the released
    nodes of t's binary expansion. Each used node is released once, when it completes, as the
    exact release :func:`~service.privacy.secure_release.secure_gaussian` of its exact sum at
    the element sensitivity s = ``sensitivity`` with noise σ (grid + discrete Gaussian, μ ≤ s/σ
    for the ≤ m nodes a replaced row touches, μ = 0 for the others: their sums are equal, so
    they round to the same integers — the module docstring's composition holds as stated), and
    reused by every later prefix containing it (only the current node of each level is kept).
    Exact node sums are kept as one running sum per level. ``σ = 0`` releases the exact sums
    (noise off, tests; no draws).
    """

    dim: int
    sigma: float
    capacity: int
    rng: SecureRandom
    sensitivity: float = 0.0
    length: int = field(default=0, init=False)
    _total: FloatArray = field(init=False, repr=False)
    _running: list[FloatArray] = field(default_factory=list, init=False, repr=False)
    _current: dict[int, tuple[int, FloatArray]] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        if self.dim < 1 or self.capacity < 1:
            raise ValueError("dim and capacity must be >= 1")
        if not (math.isfinite(self.sigma) and self.sigma >= 0.0):
            raise ValueError("sigma must be a finite number >= 0")
        if self.sigma > 0.0 and not (math.isfinite(self.sensitivity) and self.sensitivity > 0.0):
            raise ValueError("a noisy tree needs its element sensitivity > 0")
        self._total = np.zeros(self.dim, dtype=np.float64)
        levels = tree_depth(self.capacity)
        self._running = [np.zeros(self.dim, dtype=np.float64) for _ in range(levels)]
        self.rng = as_secure(self.rng)

    def add(self, value: FloatArray) -> FloatArray:
        """Append v_t and return the noisy prefix sum at t (a new array)."""
        if self.length >= self.capacity:
            raise ValueError("the tree is full: the stream is longer than its capacity")
        self.length += 1
        t = self.length
        self._total += value
        for level, running in enumerate(self._running):
            running += value
            if t % (1 << level) == 0:  # node (level, t/2^level − 1) is complete
                if (t >> level) & 1:  # used by the prefixes (a left child): release it once
                    self._current[level] = ((t >> level) - 1, self._release(running))
                running[:] = 0.0
        out = np.zeros(self.dim, dtype=np.float64)
        for level, index in prefix_nodes(t):
            cached = self._current[level]
            if cached[0] != index:  # pragma: no cover - the dyadic bookkeeping above
                raise AssertionError("tree node bookkeeping out of step")
            out += cached[1]
        return out

    def _release(self, node_sum: FloatArray) -> FloatArray:
        if self.sigma == 0.0:
            return node_sum.copy()
        return secure_gaussian(node_sum, self.sigma, self.sensitivity, self.rng)

    @property
    def exact_sum(self) -> FloatArray:
        """Σ_{k≤t} v_k without noise (never released; for tests)."""
        return self._total.copy()
