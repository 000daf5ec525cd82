r"""Exact random variates from the operating system's CSPRNG, vectorised over numpy arrays.

Why. A float sampler (``numpy.random.Generator.standard_normal() * σ``) returns values on a
lattice that depends on the draw, so ``fl(c + fl(σz))`` can be checked bit for bit against a
candidate centre c (Mironov 2012; Jin et al. 2022): the release then distinguishes neighbours
with certainty. Every mechanism of dpfit draws its randomness here instead: integers only, every
bit from ``os.urandom``, and every distribution exact (no floating-point step anywhere in a
sampler, so what is sampled is exactly the distribution stated, not an approximation of it).

Source. :class:`SecureRandom` reads ``os.urandom`` in chunks of :data:`CHUNK_WORDS` 64-bit words
and hands out 8-, 16-, 32- or 64-bit units (the narrowest that holds a draw), so a draw of 10⁶
variates costs a handful of system calls and few bytes per variate.
``SecureRandom.seeded(seed)`` replaces the source by a deterministic byte stream (numpy's PCG64)
for tests and the worker's explicit test mode only; nothing else may use it.

Primitives (all exact; every intermediate integer fits in int64, and the astronomically rare lanes
whose values would not are finished exactly in Python integers — never truncated, since a
truncation would change the distribution):

- :meth:`SecureRandom.below` — uniform on {0, …, b − 1} (b ≤ 2^63, per lane). Draw k-bit words
  with 2^k ≥ b (k from ``frexp(b − 1)``, which can only over-estimate the bit length) and reject
  values ≥ b: conditioned on acceptance the value is uniform on {0, …, b − 1}; each round accepts
  with probability b/2^k > 1/2.
- :meth:`SecureRandom.bernoulli` — Bernoulli(num/den) as ``below(den) < num``.
- :meth:`SecureRandom.bernoulli_exp` — Bernoulli(exp(−γ)) for γ = num/den ≥ 0 (Canonne, Kamath &
  Steinke 2020, "The Discrete Gaussian for Differential Privacy", Alg. 1). For γ ∈ [0, 1]: K ← 1;
  while Bernoulli(γ/K): K ← K + 1; return [K odd]. P[K > k] = γ^k/k!, so
  P[K odd] = Σ_{k≥0} (γ^{2k}/(2k)! − γ^{2k+1}/(2k+1)!) = e^{−γ}. For γ > 1:
  e^{−γ} = (e^{−1})^{⌊γ⌋} · e^{−(γ − ⌊γ⌋)}, i.e. ⌊γ⌋ independent Bernoulli(e^{−1}) draws and one
  Bernoulli(e^{−(γ−⌊γ⌋)}), all of which must succeed (a lane stops at its first failure).
- :meth:`SecureRandom.discrete_laplace` — P[Z = z] ∝ exp(−|z|·s/t) (CKS Alg. 2): U uniform on
  {0, …, t − 1} accepted with probability e^{−U/t}; V ~ Geometric (number of Bernoulli(e^{−1})
  successes before the first failure); X = U + tV has P[X = x] ∝ e^{−x/t}; Y = ⌊X/s⌋ has
  P[Y = y] ∝ e^{−ys/t}; a fair sign B, rejecting (B = 1, Y = 0) so zero is not counted twice.
- :meth:`SecureRandom.discrete_gaussian` — N_Z(0, σ²): P[Z = z] ∝ exp(−z²/(2σ²)) for σ² = p/q
  rational (CKS Alg. 3): with t = ⌊σ⌋ + 1, propose Y from the discrete Laplace of scale t and
  accept with probability exp(−(|Y| − σ²/t)²/(2σ²)) = exp(−(|Y|qt − p)²/(2pqt²)). Since
  z²/(2σ²) = (|z| − σ²/t)²/(2σ²) + |z|/t − σ²/(2t²), the accepted law is ∝ exp(−z²/(2σ²)).
  Large σ: see :func:`plan_discrete_gaussian` (an exact composition within e^{±η}).
- :meth:`SecureRandom.permutation` — argsort of n independent uniform 64-bit keys, all keys
  redrawn if two are equal. Conditioned on "all distinct" (an event symmetric in the n positions)
  the keys are exchangeable, so every order is equally likely: exactly uniform.
- :meth:`SecureRandom.sample` — k of n without replacement, uniform over ordered k-tuples of
  distinct indices: the first k distinct values of an i.i.d. uniform sequence on {0, …, n − 1}
  (the law of that tuple is invariant under every relabelling of {0, …, n − 1}, hence uniform), or
  the first k of a uniform permutation when k > n/4.

Lazy comparisons (how the samplers stay fast and exact). Bernoulli(e^{−γ}) is [U < e^{−γ}] for a
uniform real U, and the geometric X with P[X ≥ x] = e^{−xs/t} is max{x : U < e^{−xs/t}} (= ⌊−(t/s)
ln U⌋). U is generated lazily: its first 64 bits W give U ∈ [W, W + 1)/2^64. The comparison is
first made in floating point with rigorous error bounds and only decided there when the whole
interval of U lies on one side of the whole interval of e^{−γ}; otherwise (probability ≈ 2^-45·(1 +
γ)/(spacing), about 10^-5 of the lanes at σ = 2^30 and far fewer below) more bits of U are drawn
and e^{−γ} is bracketed exactly in integer fixed-point arithmetic (alternating series for e^{−f}, f
∈ [0, 1), times (e^{−1})^n with floor/ceiling roundings:
:func:`service.privacy.exact_exp.exp_bounds`) until the comparison is decided. The decision is
therefore always the exact [U < e^{−γ}]; floating point only chooses which lanes need the exact
path. Error budget of the float path: γ_f is within 2^-50(1 + γ) of γ (for the geometric: one
product of an exact integer and t/s, 2^-52γ; for the Gaussian acceptance: d = (|Y| − ⌊σ²/t⌋) −
frac(σ²/t) exact but for 2^-52(1 + |d|), and γ = d²/(2σ²) ≤ 2^-52(1 + γ)(3 + 1/σ) for σ ≥ 1/4);
numpy's float64 exp is accurate to a few ulps; so |e_f − e^{−γ}| ≤ 2^-48(1 + γ)e^{−γ} + 1e-300, and
the margins are 2^-46(1 + γ) relative and 1e-290 absolute. (CKS Alg. 1, the Bernoulli(e^{−γ}) by
Bernoulli(γ/k) coins, is kept as :meth:`SecureRandom.bernoulli_exp_cks`; the tests check both
against e^{−γ}.)

Large σ (σ² > :data:`~service.privacy.discrete_gaussian_plan.BASE_MAX_SIGMA2` = 2^60): an exact
composition of two discrete Gaussians, within e^{±η} of N_Z(0, S²) with η ≤ 1e-128 — the plan
and its derivation are in :mod:`service.privacy.discrete_gaussian_plan`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

from service.privacy.discrete_gaussian_plan import DiscreteGaussianPlan, plan_discrete_gaussian
from service.privacy.exact_exp import exp_bounds

__all__ = [
    "as_secure",
    "CHUNK_WORDS",
    "RESERVE_MAX",
    "SecureRandom",
]

IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]

#: 64-bit words read from the OS per refill (1 MiB).
CHUNK_WORDS = 1 << 17

_I64_MAX = (1 << 63) - 1
_POOL_MAX = 1 << 16
#: The most draws :meth:`SecureRandom.reserve_discrete_gaussian` holds at once (2 MiB of int64:
#: beyond that the refills' per-call cost is amortised anyway, and a worker's memory is planned).
RESERVE_MAX = 1 << 18
_TWO_M64 = 2.0**-64
#: Relative and absolute margins of the floating-point decision (module docstring, "Lazy
#: comparisons"): the float values of e^{−γ} are within 2^-48(1 + γ) relative and 1e-300
#: absolute of the exact ones, so these leave a factor 4 of slack.
_REL_MARGIN = 2.0**-46
_ABS_MARGIN = 1e-290
_UNIT = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}
_SQRT_I64 = 3_037_000_499  # ⌊√(2^63 − 1)⌋


def _pool_key(plan: DiscreteGaussianPlan) -> tuple[int, int, int]:
    """The pool a plan's draws share (plans of equal variance and levels draw the same law)."""
    return (plan.variance.numerator, plan.variance.denominator, len(plan.levels))


def as_secure(rng: SecureRandom | np.random.Generator) -> SecureRandom:
    """``rng`` itself, or — for unit tests that still pass ``np.random.default_rng(seed)`` — a
    deterministic :class:`SecureRandom` reading that generator's bytes (exact samplers, but the
    bits are not secret: the worker never passes a Generator, runner.py builds a SecureRandom)."""
    if isinstance(rng, SecureRandom):
        return rng
    if isinstance(rng, np.random.Generator):
        return SecureRandom(rng.bytes, chunk_bytes=0)  # reads only what it uses
    raise TypeError("rng must be a SecureRandom")


class SecureRandom:
    """Random variates whose every bit comes from ``os.urandom`` (module docstring).

    Not thread-safe: one instance per job (``spawn`` gives independent children)."""

    def __init__(
        self, source: Callable[[int], bytes] | None = None, chunk_bytes: int = 8 * CHUNK_WORDS
    ) -> None:
        self._source: Callable[[int], bytes] = os.urandom if source is None else source
        self._chunk = chunk_bytes
        self._next_refill = min(4096, chunk_bytes)
        self._seeded = source is not None
        self._buffer: NDArray[np.uint8] = np.empty(0, dtype=np.uint8)
        self._pos = 0
        self._pools: dict[tuple[int, int, int], tuple[np.ndarray, int, int]] = {}

    # --- construction -------------------------------------------------------------------------

    @classmethod
    def seeded(cls, seed: int | None) -> SecureRandom:
        """A DETERMINISTIC instance (numpy PCG64 bytes) for tests and the worker's explicit
        test mode only: its bits are not secret."""
        bits = np.random.Generator(np.random.PCG64(seed))
        return cls(bits.bytes)

    def spawn(self, count: int) -> list[SecureRandom]:
        """``count`` independent children (fresh OS streams; seeded children of a seeded
        instance, so tests stay reproducible)."""
        if not self._seeded:
            return [SecureRandom() for _ in range(count)]
        seeds = self.words(count)
        return [SecureRandom.seeded(int(s)) for s in seeds]

    # --- raw bits -------------------------------------------------------------------------------

    def _take(self, nbytes: int) -> NDArray[np.uint8]:
        """The next ``nbytes`` bytes of the stream (refilling in chunks), 8-byte aligned."""
        pos = (self._pos + 7) & ~7
        if pos + nbytes > self._buffer.size:
            rest = self._buffer[pos:]
            # refills grow from 4 KiB to the chunk size: a job drawing a few hundred variates
            # does not pay for a 1 MiB read
            fresh = max(nbytes - rest.size, min(self._chunk, self._next_refill))
            self._next_refill = min(2 * self._next_refill, self._chunk)
            new = np.frombuffer(self._source(fresh), dtype=np.uint8)
            self._buffer = np.concatenate([rest, new]) if rest.size else new
            pos = 0
        out = self._buffer[pos : pos + nbytes]
        self._pos = pos + nbytes
        return out

    def _units(self, n: int, width: int) -> NDArray[np.unsignedinteger]:
        """``n`` uniform unsigned integers of ``width`` ∈ {8, 16, 32, 64} bits."""
        dtype = _UNIT[width]
        return self._take(n * (width // 8)).view(dtype)

    def words(self, n: int) -> NDArray[np.uint64]:
        """``n`` independent uniform 64-bit words."""
        if n <= 0:
            return np.empty(0, dtype=np.uint64)
        out: NDArray[np.uint64] = self._units(n, 64)
        return out

    def _below_int(self, bound: int) -> int:
        """Uniform on {0, …, bound − 1} for a Python int of any size (rejection)."""
        if bound < 1:
            raise ValueError("bound must be >= 1")
        k = (bound - 1).bit_length()
        if k == 0:
            return 0
        nwords = (k + 63) // 64
        while True:
            x = 0
            for w in self.words(nwords):
                x = (x << 64) | int(w)
            x >>= 64 * nwords - k
            if x < bound:
                return x

    # --- uniform integers and Bernoulli ----------------------------------------------------------

    def below(self, bound: IntArray | int, size: int | None = None) -> IntArray:
        """Uniform integers on {0, …, b − 1} per lane (1 ≤ b ≤ 2^63 − 1), exactly."""
        b = np.asarray(bound, dtype=np.int64)
        if size is not None:
            b = np.broadcast_to(b, (size,))
        b = np.ascontiguousarray(b).reshape(-1)
        if b.size and int(b.min()) < 1:
            raise ValueError("bounds must be >= 1")
        out = np.zeros(b.size, dtype=np.int64)
        # k bits with 2^k ≥ b (frexp can only over-estimate the bit length: still exact), drawn
        # as the top k bits of the narrowest unit (8 … 64 bits) holding every lane's k.
        _, exp = np.frexp((b - 1).astype(np.float64))
        active = np.flatnonzero(b > 1)
        if not active.size:
            return out
        width = 8
        kmax = int(exp.max())
        while width < kmax:
            width *= 2
        shift = (width - exp).astype(_UNIT[width])
        while active.size:
            x = (self._units(active.size, width) >> shift[active]).astype(np.int64)
            ok = x < b[active]
            out[active[ok]] = x[ok]
            active = active[~ok]
        return out

    def bernoulli(self, num: IntArray | int, den: IntArray | int) -> BoolArray:
        """Bernoulli(num/den) per lane (0 ≤ num ≤ den, 1 ≤ den < 2^63)."""
        num_a, den_a = np.broadcast_arrays(
            np.asarray(num, dtype=np.int64), np.asarray(den, dtype=np.int64)
        )
        result: BoolArray = self.below(den_a.reshape(-1)) < num_a.reshape(-1)
        return result

    def bits(self, n: int) -> BoolArray:
        """``n`` fair coins: the bits of ⌈n/8⌉ uniform bytes (each bit of a uniform byte is an
        independent fair coin), one byte per 8 coins instead of a word per coin."""
        if n <= 0:
            return np.zeros(0, dtype=bool)
        coins: BoolArray = np.unpackbits(self._take((n + 7) // 8), count=n).astype(bool)
        return coins

    def _exp_unit(self, num: IntArray, den: IntArray) -> BoolArray:
        """Bernoulli(exp(−num/den)) for 0 ≤ num ≤ den (CKS Alg. 1), vectorised; lanes where
        den·K would leave int64 are finished in Python integers."""
        size = num.size
        k = np.ones(size, dtype=np.int64)
        active = np.arange(size)
        while active.size:
            kk = k[active]
            dd = den[active]
            big = dd > _I64_MAX // (kk + 1)
            if big.any():
                for lane in active[big]:
                    k[lane] = self._exp_unit_scalar(int(num[lane]), int(den[lane]), int(k[lane]))
                active, kk, dd = active[~big], kk[~big], dd[~big]
                if not active.size:
                    break
            go = self.bernoulli(num[active], dd * kk)
            k[active[go]] += 1
            active = active[go]
        odd: BoolArray = (k & 1) == 1
        return odd

    def _exp_unit_scalar(self, num: int, den: int, k: int) -> int:
        """CKS Alg. 1 continued from state K = k in Python integers; returns the final K."""
        while self._below_int(den * k) < num:
            k += 1
        return k

    def _exp_scalar(self, num: int, den: int) -> bool:
        """Bernoulli(exp(−num/den)) in Python integers (any size)."""
        whole, rest = divmod(num, den)
        for _ in range(whole):
            if self._exp_unit_scalar(1, 1, 1) % 2 == 0:
                return False
        return self._exp_unit_scalar(rest, den, 1) % 2 == 1

    def bernoulli_exp_cks(self, num: IntArray | int, den: IntArray | int) -> BoolArray:
        """Bernoulli(exp(−num/den)) per lane (num ≥ 0, den ≥ 1; int64) by CKS Alg. 1 with the ⌊γ⌋
        split (module docstring): the reference the faster :meth:`bernoulli_exp` is tested
        against (the two are the same law)."""
        num_a, den_a = np.broadcast_arrays(
            np.asarray(num, dtype=np.int64), np.asarray(den, dtype=np.int64)
        )
        num_a, den_a = num_a.reshape(-1), den_a.reshape(-1)
        if num_a.size and (int(num_a.min()) < 0 or int(den_a.min()) < 1):
            raise ValueError("need num >= 0 and den >= 1")
        whole = num_a // den_a
        rest = num_a - whole * den_a
        result = np.ones(num_a.size, dtype=bool)
        done = np.zeros(num_a.size, dtype=np.int64)
        active = np.flatnonzero(whole > 0)
        while active.size:
            one = np.ones(active.size, dtype=np.int64)
            ok = self._exp_unit(one, one)
            result[active[~ok]] = False
            done[active] += 1
            active = active[ok & (done[active] < whole[active])]
        live = np.flatnonzero(result)
        if live.size:
            result[live] = self._exp_unit(rest[live], den_a[live])
        return result

    # --- exact comparisons of a uniform with e^{−γ} (lazy bits) ---------------------------------

    def _less_than_exp(self, u: list[int], gamma: Fraction) -> bool:
        """Decide U < e^{−γ} exactly for the uniform U whose known leading bits are
        ``u = [prefix, nbits]`` (U ∈ [prefix/2^nbits, (prefix + 1)/2^nbits)); more bits are
        appended to ``u`` as needed, so later comparisons see the same U."""
        while True:
            prec = u[1] + 64
            lo, hi, scale = exp_bounds(gamma, prec)
            # U ∈ [prefix, prefix + 1)/2^nbits against e^{−γ} ∈ [lo, hi]/2^scale
            if (u[0] + 1) << scale <= lo << u[1]:
                return True
            if u[0] << scale >= hi << u[1]:
                return False
            u[0] = (u[0] << 64) | int(self.words(1)[0])
            u[1] += 64

    def _lazy_less_than_exp(
        self,
        words: NDArray[np.uint64],
        gamma: NDArray[np.float64],
        exact: Callable[[int], Fraction],
    ) -> BoolArray:
        """[U_i < e^{−γ_i}] per lane, U_i's leading 64 bits ``words[i]``; ``gamma`` is a float
        value of γ_i with |γ_f − γ| ≤ 2^-48(1 + γ) (module docstring, "Lazy comparisons"),
        ``exact(i)`` the exact γ_i for the undecided lanes."""
        gamma = np.minimum(gamma, 1e300)  # e^{−γ} is 0 in float from γ ≈ 745 on: bound unchanged
        e = np.exp(-gamma)
        rel = _REL_MARGIN * (1.0 + gamma)
        p_lo = e * (1.0 - rel) - _ABS_MARGIN
        p_hi = e * (1.0 + rel) + _ABS_MARGIN
        a = words.astype(np.float64) * _TWO_M64  # ≥ (1 − 2^-52)·W/2^64 and ≤ (1 + 2^-52)·W/2^64
        u_lo = a * (1.0 - 2.0**-51)
        u_hi = a * (1.0 + 2.0**-51) + _TWO_M64
        yes = u_hi <= p_lo
        no = u_lo >= p_hi
        out: BoolArray = yes
        for i in np.flatnonzero(~(yes | no)):
            out[i] = self._less_than_exp([int(words[i]), 64], exact(int(i)))
        return out

    def bernoulli_exp(self, num: IntArray | int, den: IntArray | int) -> BoolArray:
        """Bernoulli(exp(−num/den)) per lane (num ≥ 0, den ≥ 1; int64), exactly: [U < e^{−γ}]
        decided from U's first 64 bits where floating point settles it, else exactly
        (module docstring, "Lazy comparisons"). Same law as :meth:`bernoulli_exp_cks`."""
        num_a, den_a = np.broadcast_arrays(
            np.asarray(num, dtype=np.int64), np.asarray(den, dtype=np.int64)
        )
        num_a, den_a = num_a.reshape(-1), den_a.reshape(-1)
        if num_a.size and (int(num_a.min()) < 0 or int(den_a.min()) < 1):
            raise ValueError("need num >= 0 and den >= 1")
        gamma = num_a.astype(np.float64) / den_a.astype(np.float64)
        return self._lazy_less_than_exp(
            self.words(num_a.size), gamma, lambda i: Fraction(int(num_a[i]), int(den_a[i]))
        )

    def bernoulli_exp_fraction(self, gamma: Fraction) -> bool:
        """One Bernoulli(exp(−γ)) for an exact rational γ ≥ 0 of any size (lazy comparison;
        float(γ) is correctly rounded, within the float path's error budget)."""
        if gamma < 0:
            raise ValueError("gamma must be >= 0")
        g = np.array([float(gamma)])
        return bool(self._lazy_less_than_exp(self.words(1), g, lambda i: gamma)[0])

    # --- discrete Laplace and Gaussian -----------------------------------------------------------

    def _geometric(self, s: int, t: int, size: int) -> NDArray[np.int64] | NDArray[np.object_]:
        """X with P[X ≥ x] = e^{−xs/t} (x = 0, 1, …): X = max{x : U < e^{−xs/t}} for one uniform
        U, i.e. ⌊−(t/s) ln U⌋, decided exactly (module docstring). int64 unless a lane exceeds
        2^62 (probability e^{−2^62 s/t}), then Python ints (dtype object)."""
        w = self.words(size)
        a = w.astype(np.float64) * _TWO_M64
        ratio = t / s
        with np.errstate(divide="ignore"):
            x = np.floor(-ratio * np.log(a))
        safe = (w >= np.uint64(1 << 12)) & (x < 2.0**52)
        xs = np.where(safe, x, 0.0)
        g1 = xs * (s / t)  # γ(x) and γ(x + 1): relative error ≤ 3·2^-53
        g2 = (xs + 1.0) * (s / t)
        e1, e2 = np.exp(-g1), np.exp(-g2)
        u_lo = a * (1.0 - 2.0**-51)
        u_hi = a * (1.0 + 2.0**-51) + _TWO_M64
        ok = (
            safe
            & (u_hi <= e1 * (1.0 - _REL_MARGIN * (1.0 + g1)) - _ABS_MARGIN)
            & (u_lo >= e2 * (1.0 + _REL_MARGIN * (1.0 + g2)) + _ABS_MARGIN)
        )
        out = xs.astype(np.int64)
        slow = np.flatnonzero(~ok)
        if slow.size:
            exact: list[int] = []
            for i in slow:
                u = [int(w[i]), 64]
                while u[0] == 0:
                    u[0] = int(self.words(1)[0])
                    u[1] += 64
                guess = int(-(t / s) * (math.log(u[0]) - u[1] * math.log(2.0)))
                xi = max(guess, 0)
                while not self._less_than_exp(u, Fraction(xi * s, t)):
                    xi -= 1
                while self._less_than_exp(u, Fraction((xi + 1) * s, t)):
                    xi += 1
                exact.append(xi)
            if max(exact) > _I64_MAX >> 1:
                obj = out.astype(object)
                obj[slow] = exact
                return obj
            out[slow] = exact
        return out

    def discrete_laplace(self, t: int, size: int, s: int = 1) -> IntArray:
        """``size`` draws with P[Z = z] ∝ exp(−|z|·s/t) (scale t/s), exactly (CKS Alg. 2's law:
        |Z| from :meth:`_geometric`, a fair sign, (−, 0) rejected). 1 ≤ t, s; t/s ≤ 2^50 (so a
        lane leaves int64 with probability < e^{−4096}; it is then returned as a Python int in an
        object array, never truncated)."""
        if not (t >= 1 and s >= 1 and t <= (s << 50)):
            raise ValueError("need integers t, s >= 1 with t/s <= 2^50")
        out: NDArray[np.int64] | NDArray[np.object_] = np.zeros(size, dtype=np.int64)
        pending = np.arange(size)
        while pending.size:
            x = self._geometric(s, t, pending.size)
            neg = self.bits(pending.size)
            good = ~(neg & (x == 0))
            if x.dtype == object and out.dtype != object:
                out = out.astype(object)
            out[pending[good]] = np.where(neg[good], -x[good], x[good])
            pending = pending[~good]
        return out  # type: ignore[return-value]

    def discrete_gaussian(self, sigma2: Fraction | int, size: int) -> IntArray:
        """``size`` draws from N_Z(0, S²) with S² = ``plan_discrete_gaussian(sigma2).variance``
        (= σ² for σ² ≤ 2^60; otherwise the composition, within e^{±η}; module docstring)."""
        return self.discrete_gaussian_planned(plan_discrete_gaussian(sigma2), size)

    def discrete_gaussian_planned(self, plan: DiscreteGaussianPlan, size: int) -> IntArray:
        """Draws by a precomputed :func:`plan_discrete_gaussian` (hot loops reuse the plan)."""
        out = self._discrete_gaussian_base(plan.base, size)
        for m, sb2 in reversed(plan.levels):
            b = self._discrete_gaussian_base(Fraction(sb2), size)
            if out.dtype != object and np.abs(out).max(initial=0) <= (_I64_MAX >> 1) // m:
                out = m * out + b
            else:
                out = out.astype(object) * m + b.astype(object)
        return out

    def discrete_gaussian_pooled(self, plan: DiscreteGaussianPlan, size: int) -> IntArray:
        """``size`` draws by ``plan`` taken from a pool refilled in growing batches (the first
        refill is ``size``, later ones double up to 2^16 draws): per-step releases of a few
        coordinates pay the vectorised cost, not the per-call one. The draws are i.i.d.
        whichever call consumes them, so pooling does not change any law."""
        key = _pool_key(plan)
        pool = self._pools.get(key)
        if pool is None or pool[1] + size > pool[0].size:
            batch = size if pool is None else max(size, min(2 * pool[2], _POOL_MAX))
            pool = self._refill(plan, pool, batch, batch)
        out = pool[0][pool[1] : pool[1] + size]
        self._pools[key] = (pool[0], pool[1] + size, pool[2])
        return out

    def reserve_discrete_gaussian(self, plan: DiscreteGaussianPlan, size: int) -> None:
        """Make the pool of ``plan`` hold at least min(``size``, :data:`RESERVE_MAX`) draws, the
        missing ones drawn in one batch: a loop that knows its public number of draws (T steps ×
        d coordinates) pays the vectorised cost once, without the doubling refills' surplus (up
        to 1.7× the draws used). The same i.i.d. draws as :meth:`discrete_gaussian_pooled`, so
        no law changes; the batch size is public (``size`` and what the pool holds)."""
        key = _pool_key(plan)
        pool = self._pools.get(key)
        need = min(size, RESERVE_MAX) - (0 if pool is None else pool[0].size - pool[1])
        if need > 0:
            self._pools[key] = self._refill(plan, pool, need, max(need, pool[2] if pool else 0))

    def _refill(
        self,
        plan: DiscreteGaussianPlan,
        pool: tuple[np.ndarray, int, int] | None,
        count: int,
        batch: int,
    ) -> tuple[np.ndarray, int, int]:
        """The pool's unused draws followed by ``count`` fresh ones; ``batch`` is the size the
        next doubling refill grows from."""
        fresh = self.discrete_gaussian_planned(plan, count)
        rest = pool[0][pool[1] :] if pool is not None else fresh[:0]
        if rest.dtype != fresh.dtype:
            rest, fresh = rest.astype(object), fresh.astype(object)
        return (np.concatenate([rest, fresh]), 0, batch)

    def _discrete_gaussian_base(self, sigma2: Fraction, size: int) -> IntArray:
        """CKS Alg. 3 for σ² = p/q ≤ 2^60: Y ~ discrete Laplace of scale t = ⌊σ⌋ + 1, accepted
        with probability exp(−(|Y| − σ²/t)²/(2σ²)) by an exact lazy comparison."""
        p, q = sigma2.numerator, sigma2.denominator
        t = math.isqrt(p // q) + 1  # ⌊σ⌋ + 1
        qt = q * t
        c_int, c_rem = divmod(p, qt)  # σ²/t = c_int + c_rem/qt
        c_frac = c_rem / qt
        two_s2 = 2.0 * (p / q)
        out: NDArray[np.int64] | NDArray[np.object_] = np.zeros(size, dtype=np.int64)
        pending = np.arange(size)
        while pending.size:
            y = self.discrete_laplace(t, pending.size)
            if y.dtype == object:  # |Y| beyond int64: exact Python path for this round
                accept = np.array(
                    [
                        self._less_than_exp(
                            [int(self.words(1)[0]), 64],
                            Fraction((abs(int(v)) * qt - p) ** 2, 2 * p * qt * t),
                        )
                        for v in y
                    ],
                    dtype=bool,
                )
            else:
                a = np.abs(y)
                d = (a - c_int).astype(np.float64) - c_frac  # |Y| − σ²/t, error ≤ 2^-52(1 + |d|)
                gamma = d * d / two_s2
                accept = self._lazy_less_than_exp(
                    self.words(a.size),
                    gamma,
                    lambda i, a=a: Fraction((int(a[i]) * qt - p) ** 2, 2 * p * qt * t),
                )
            if y.dtype == object and out.dtype != object:
                out = out.astype(object)
            out[pending[accept]] = y[accept]
            pending = pending[~accept]
        return out  # type: ignore[return-value]

    # --- permutations, samples, uniforms ---------------------------------------------------------

    def permutation(self, n: int) -> IntArray:
        """A uniformly random permutation of {0, …, n − 1} (argsort of distinct random keys)."""
        if n < 0:
            raise ValueError("n must be >= 0")
        while True:
            keys = self.words(n).copy()
            order = np.argsort(keys, kind="stable")
            ranked = keys[order]
            if n < 2 or bool(np.all(ranked[1:] != ranked[:-1])):
                return order.astype(np.int64)

    def sample(self, n: int, k: int) -> IntArray:
        """k distinct indices of {0, …, n − 1}, uniform over ordered k-tuples (module docstring)."""
        if not (0 <= k <= n):
            raise ValueError("need 0 <= k <= n")
        if 4 * k > n:
            return self.permutation(n)[:k]
        seq = np.empty(0, dtype=np.int64)
        while True:
            seq = np.concatenate([seq, self.below(n, k + k // 4 + 8)])
            values, first = np.unique(seq, return_index=True)
            if values.size >= k:
                return seq[np.sort(first)[:k]]

    def integer(self, bound: int) -> int:
        """One uniform integer on {0, …, bound − 1} (any size)."""
        return self._below_int(bound)

    def normal(self, size: int) -> NDArray[np.float64]:
        """Float standard normals by Box–Muller from :meth:`uniform`: ONLY for perturbations of
        already-released values (post-processing; no privacy proof uses their law)."""
        u1 = 1.0 - self.uniform(size)  # (0, 1]
        u2 = self.uniform(size)
        out: NDArray[np.float64] = np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * np.pi * u2)
        return out

    def uniform(self, size: int) -> NDArray[np.float64]:
        """Floats k·2^{−53}, k uniform on {0, …, 2^53 − 1}: ONLY for public-coin choices whose
        exact law no privacy proof uses (e.g. a utility-theory random stopping round)."""
        return (self.words(size) >> np.uint64(11)).astype(np.float64) * 2.0**-53
