"""The exact samplers and releases (service.privacy.secure_random, service.privacy.secure_release).

Distribution tests draw ≥ 10⁶ variates from a seeded byte stream (deterministic, so they never
flake) and compare with the exact pmf by a chi-square test at false-alarm rate 1e-6 (p-value
threshold; with the ~15 such tests here a correct sampler would fail one with probability
< 2e-5 for a random seed). Frequencies of Bernoulli draws use a z-test at |z| < 5.5 (two-sided
false-alarm rate 4e-8).
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from scipy import stats

import service.privacy.exact_exp as exact_exp
import service.privacy.secure_random as sr
from service.models.logistic import LogisticLoss
from service.optimizers.kits.base import PrivacyTarget
from service.optimizers.output_perturbation_gd import (
    OutputPerturbationGD,
    OutputPerturbationGDParams,
)
from service.privacy.discrete_gaussian_plan import plan_discrete_gaussian
from service.privacy.secure_random import SecureRandom
from service.privacy.secure_release import (
    gaussian_release,
    kernel_eta,
    laplace_release,
    reserve_gaussian,
    secure_gaussian,
    secure_laplace,
)

P_FALSE_ALARM = 1e-6
Z_LIMIT = 5.5


def _chi_square_p(observed: np.ndarray, expected: np.ndarray) -> float:
    """p-value of a chi-square goodness of fit; bins with expected < 5 are merged."""
    order_obs, order_exp = [], []
    acc_o = acc_e = 0.0
    for o, e in zip(observed, expected, strict=True):
        acc_o += o
        acc_e += e
        if acc_e >= 5.0:
            order_obs.append(acc_o)
            order_exp.append(acc_e)
            acc_o = acc_e = 0.0
    if acc_e > 0.0:
        order_obs[-1] += acc_o
        order_exp[-1] += acc_e
    obs, exp = np.array(order_obs), np.array(order_exp)
    exp *= obs.sum() / exp.sum()
    chi2 = float(((obs - exp) ** 2 / exp).sum())
    return float(stats.chi2.sf(chi2, obs.size - 1))


def _discrete_gaussian_pmf(sigma2: float, support: np.ndarray) -> np.ndarray:
    w = np.exp(-(support.astype(float) ** 2) / (2.0 * sigma2))
    return w / w.sum()


# --- discrete Gaussian ------------------------------------------------------------------------


@pytest.mark.parametrize("sigma2", [Fraction(9, 4), Fraction(1, 2), 30, 5000])
def test_discrete_gaussian_small_scales_match_the_pmf(sigma2: Fraction | int) -> None:
    """Per-integer chi-square against exp(−k²/2σ²)/Σ (10⁶ draws)."""
    rng = SecureRandom.seeded(11)
    draws = rng.discrete_gaussian(sigma2, 1_000_000)
    s = math.sqrt(float(sigma2))
    half = int(12 * s) + 2
    support = np.arange(-half, half + 1)
    assert np.abs(draws).max() <= half
    counts = np.bincount(draws + half, minlength=support.size)
    p = _chi_square_p(counts, _discrete_gaussian_pmf(float(sigma2), support) * draws.size)
    assert p > P_FALSE_ALARM
    # power: the same counts against a 3 % wider Gaussian are rejected
    wrong = _discrete_gaussian_pmf(float(sigma2) * 1.06, support) * draws.size
    assert _chi_square_p(counts, wrong) < P_FALSE_ALARM


@pytest.mark.parametrize("exponent", [40, 59, 62, 80])
def test_discrete_gaussian_large_scales_match_the_normal(exponent: int) -> None:
    """σ² = 2^40 … 2^80 (2^62 and 2^80 through the composition m·A + B): binned chi-square
    with bins [a − ½, b − ½) of integers against the normal CDF (for σ ≥ 2^20 the discrete
    bin masses equal the continuous ones to ≪ 1e-9, Euler–Maclaurin / Poisson summation)."""
    plan = plan_discrete_gaussian(2**exponent)
    assert (len(plan.levels) > 0) == (exponent > 60)
    assert plan.variance >= 2**exponent and plan.eta < 1e-100
    rng = SecureRandom.seeded(exponent)
    draws = rng.discrete_gaussian(2**exponent, 1_000_000).astype(np.float64)
    s = math.sqrt(float(plan.variance))
    edges = np.concatenate([[-np.inf], np.linspace(-5.0, 5.0, 101), [np.inf]])
    counts = np.histogram(draws / s, bins=edges)[0]
    expected = np.diff(stats.norm.cdf(edges)) * draws.size
    assert _chi_square_p(counts, expected) > P_FALSE_ALARM
    wrong = np.diff(stats.norm.cdf(edges / 1.01)) * draws.size  # 1 % wider: rejected
    assert _chi_square_p(counts, wrong) < P_FALSE_ALARM


def test_composition_eta_is_the_theta_bound() -> None:
    """η of one composition level = log((1+τ)/(1−τ)) with τ from v = σ_A²σ_B²/S² (docstring)."""
    plan = plan_discrete_gaussian(2**70)
    ((m, sb2),) = plan.levels
    sa2 = plan.base
    v = float(sa2 * sb2 / (m * m * sa2 + sb2))
    tau = 2.0 * sum(math.exp(-2.0 * math.pi**2 * v * j * j) for j in range(1, 5))
    assert plan.eta == pytest.approx(math.log((1 + tau) / (1 - tau)), rel=1e-9)
    assert plan.variance == m * m * sa2 + sb2


# --- Bernoulli(e^{−γ}) and discrete Laplace ----------------------------------------------------


@pytest.mark.parametrize("method", ["bernoulli_exp", "bernoulli_exp_cks"])
def test_bernoulli_exp_frequencies(method: str) -> None:
    rng = SecureRandom.seeded(5)
    for num, den in [(0, 1), (3, 10), (1, 1), (5, 2), (7, 1), (1_234_567, 1_000_000_007)]:
        n = 1_000_000 if method == "bernoulli_exp" else 200_000
        hits = getattr(rng, method)(np.full(n, num), np.full(n, den))
        p = math.exp(-num / den)
        z = (hits.sum() - n * p) / math.sqrt(n * p * (1 - p)) if 0 < p < 1 else 0.0
        assert abs(z) < Z_LIMIT, (num, den, hits.mean(), p)
        if p == 1.0:
            assert hits.all()


def test_exact_path_decides_the_same_law(monkeypatch: pytest.MonkeyPatch) -> None:
    """With a huge float margin most lanes go through the exact (rational) comparison: the law
    is unchanged (this exercises the fallback that real runs reach ~1e-5 of the time)."""
    monkeypatch.setattr(sr, "_REL_MARGIN", 0.05)
    rng = SecureRandom.seeded(9)
    n = 20_000
    hits = rng.bernoulli_exp(np.full(n, 7), np.full(n, 10))
    p = math.exp(-0.7)
    assert abs((hits.sum() - n * p) / math.sqrt(n * p * (1 - p))) < Z_LIMIT
    x = rng.discrete_laplace(3, 20_000, 2)  # geometric path through the exact comparisons
    _check_laplace(x, 3, 2)


def test_exp_bounds_bracket_the_exponential() -> None:
    with mpmath.workdps(80):
        for gamma in [
            Fraction(0),
            Fraction(1, 3),
            Fraction(1),
            Fraction(22, 7),
            Fraction(1001, 10),
        ]:
            lo, hi, scale = exact_exp.exp_bounds(gamma, 200)
            exact = mpmath.exp(-mpmath.mpf(gamma.numerator) / gamma.denominator)
            assert mpmath.mpf(lo) / 2**scale <= exact <= mpmath.mpf(hi) / 2**scale
            assert (hi - lo) < 2 ** (scale - 190)


def test_fixed_point_series_brackets_e_to_the_minus_f_within_two_units() -> None:
    """The integer series (no Fraction reduction) on fractions as the samplers make them:
    small, huge (2^120-sized) and awkward denominators, f = 0 and f = 1, at several widths."""
    rng = np.random.default_rng(11)
    cases = [Fraction(0), Fraction(1), Fraction(1, 2), Fraction(2**120 - 1, 2**120)]
    for den in (7, 3**50, 2**120 + 3, 10**40 + 1):
        cases += [Fraction(int(rng.integers(0, 2**62)) * den // 2**62, den) for _ in range(6)]
    with mpmath.workdps(150):
        for f, bits in itertools.product(cases, (8, 64, 200, 333)):
            lo, hi = exact_exp.fixed_exp_neg_frac(f, bits)
            exact = mpmath.exp(-mpmath.mpf(f.numerator) / f.denominator) * mpmath.mpf(2) ** bits
            assert lo <= exact <= hi and hi - lo <= 2, (f, bits)


def test_reserved_noise_is_one_batch_handed_out_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """``reserve_gaussian`` draws T·d values at once and the T releases take them in order:
    the same values as one batch from the same stream, nothing drawn in between; above
    RESERVE_MAX the reservation is capped and the pool refills as before."""
    release = gaussian_release(7, 2.0, 1.0)
    batch = SecureRandom.seeded(3).discrete_gaussian_planned(release.plan, 5 * 7)
    rng = SecureRandom.seeded(3)
    reserve_gaussian(7, 2.0, 1.0, 5, rng)
    zero = np.zeros(7)
    taken = [np.rint(secure_gaussian(zero, 2.0, 1.0, rng) / release.grid) for _ in range(5)]
    np.testing.assert_array_equal(np.concatenate(taken).astype(np.int64), batch)
    monkeypatch.setattr(sr, "RESERVE_MAX", 10)
    capped = SecureRandom.seeded(4)
    reserve_gaussian(7, 2.0, 1.0, 5, capped)
    (pool,) = capped._pools.values()
    assert pool[0].size == 10 and pool[1] == 0
    assert np.concatenate([secure_gaussian(zero, 2.0, 1.0, capped) for _ in range(5)]).size == 35


def test_bits_are_fair_independent_coins_in_every_bit_position() -> None:
    """Eight coins per byte: each position of the byte fair, and consecutive coins (within and
    across bytes) uniform on their four outcomes — a sampler that reused or biased a bit
    position fails."""
    coins = SecureRandom.seeded(21).bits(80_003)
    assert coins.size == 80_003 and coins.dtype == bool
    by_position = coins[:80_000].reshape(-1, 8).sum(axis=0)
    n = 10_000
    assert np.all(np.abs(by_position - n / 2) / math.sqrt(n / 4) < Z_LIMIT), by_position
    pairs = np.bincount(2 * coins[:-1].astype(int) + coins[1:], minlength=4)
    assert _chi_square_p(pairs, np.full(4, pairs.sum() / 4)) > P_FALSE_ALARM
    assert SecureRandom.seeded(1).bits(0).size == 0


def _check_laplace(x: np.ndarray, t: int, s: int) -> None:
    b = t / s
    half = int(30 * b) + 2
    support = np.arange(-half, half + 1)
    assert np.abs(x).max() <= half
    pmf = np.exp(-np.abs(support) / b)
    counts = np.bincount(x + half, minlength=support.size)
    assert _chi_square_p(counts, pmf / pmf.sum() * x.size) > P_FALSE_ALARM


@pytest.mark.parametrize(("t", "s"), [(1, 1), (3, 2), (1000, 1), (7, 3)])
def test_discrete_laplace_matches_the_pmf(t: int, s: int) -> None:
    x = SecureRandom.seeded(t * 31 + s).discrete_laplace(t, 1_000_000, s)
    _check_laplace(x, t, s)


# --- permutations and samples -----------------------------------------------------------------


def test_permutations_are_uniform() -> None:
    rng = SecureRandom.seeded(4)
    index = {p: i for i, p in enumerate(itertools.permutations(range(4)))}
    counts = np.zeros(24)
    for _ in range(48_000):
        counts[index[tuple(int(v) for v in rng.permutation(4))]] += 1
    assert _chi_square_p(counts, np.full(24, 2000.0)) > P_FALSE_ALARM


@pytest.mark.parametrize(("n", "k"), [(10, 2), (5, 3)])
def test_samples_are_uniform_ordered_tuples(n: int, k: int) -> None:
    rng = SecureRandom.seeded(n + k)
    tuples = list(itertools.permutations(range(n), k))
    index = {p: i for i, p in enumerate(tuples)}
    counts = np.zeros(len(tuples))
    draws = 200 * len(tuples)
    for _ in range(draws):
        out = rng.sample(n, k)
        assert len(set(out.tolist())) == k
        counts[index[tuple(int(v) for v in out)]] += 1
    assert _chi_square_p(counts, np.full(len(tuples), 200.0)) > P_FALSE_ALARM


def test_below_is_uniform_for_awkward_bounds() -> None:
    rng = SecureRandom.seeded(2)
    for b in [3, 129, 2**40 + 7]:
        x = rng.below(b, 600_000)
        assert x.min() >= 0 and x.max() < b
        counts = np.histogram(x, bins=np.linspace(0, b, 61))[0] if b > 200 else np.bincount(x)
        assert _chi_square_p(counts, np.full(counts.size, x.size / counts.size)) > 1e-9


# --- the releases -----------------------------------------------------------------------------


def test_gaussian_release_parameters_meet_the_plan() -> None:
    """μ of the ideal integer release ≤ Δ/σ (the plan's), the noise exceeds σ by < 1e-5."""
    for d, sigma, sens in [(1, 1.0, 1.0), (6, 0.37, 0.01), (100, 50.0, 0.002), (10_000, 3.0, 1e-6)]:
        rel = gaussian_release(d, sigma, sens)
        assert rel.grid <= sens / (math.sqrt(d) * 2**20)
        assert math.log2(rel.grid) == int(math.log2(rel.grid))
        assert rel.mu <= sens / sigma
        assert sigma <= rel.noise_std <= sigma * (1 + 1e-5)
    assert kernel_eta() < 1e-76


def test_secure_gaussian_is_on_the_grid_with_the_planned_spread() -> None:
    rng = SecureRandom.seeded(21)
    value = np.linspace(-3.0, 3.0, 50)
    rel = gaussian_release(50, 0.2, 0.05)
    out = np.array([secure_gaussian(value, 0.2, 0.05, rng) for _ in range(20_000)])
    ratio = out / rel.grid
    assert np.all(ratio == np.rint(ratio))  # every output on gZ^d
    noise = out - value
    assert noise.std() == pytest.approx(0.2, rel=0.01)
    assert abs(noise.mean()) < 5 * 0.2 / math.sqrt(noise.size)


def test_secure_laplace_is_exactly_calibrated_and_sqrt2_norm_gamma() -> None:
    rng = SecureRandom.seeded(8)
    d, eps, sens = 20, 0.8, 0.3
    rel = laplace_release(d, eps, sens)
    assert Fraction(rel.t, rel.s) >= rel.l1_sensitivity / Fraction(eps)
    k = np.array([secure_laplace(np.zeros(d), eps, sens, rng) for _ in range(5000)]) / rel.grid
    assert np.all(k == np.rint(k))
    b = rel.t / rel.s
    mean_abs = 2 * math.exp(-1 / b) / (1 - math.exp(-2 / b))  # E|K| of the discrete Laplace
    assert np.abs(k).mean() == pytest.approx(mean_abs, rel=0.02)
    norms = np.linalg.norm(k * rel.grid, axis=1)
    assert norms.mean() == pytest.approx(math.sqrt(2) * d * sens / eps, rel=0.05)


# --- the lattice attack (issue 22, item 1) ----------------------------------------------------


def _attack_setup() -> tuple:
    gen = np.random.default_rng(2022)
    n, d = 200, 6
    X = gen.normal(size=(n, d))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
    y = np.where(gen.random(n) < 0.5, -1.0, 1.0)
    y2 = y.copy()
    y2[0] = -y2[0]  # the neighbour: one flipped label
    loss = LogisticLoss(l2=0.1)
    opt = OutputPerturbationGD()
    plan = opt.plan(OutputPerturbationGDParams(), loss, n, d, PrivacyTarget(1.0, 1e-5))
    return opt, plan, loss, X, y, y2


def test_lattice_attack_rules_out_no_neighbour() -> None:
    """Mironov/Jin: the adversary knows the code, recomputes the unnoised weights of both
    neighbours and checks whether each released vector is in the support of the release under
    each. Old release fl(w + fl(σz)): ruled out the wrong neighbour in 66–70 % of releases.
    New release g·(rint(w/g) + K): the support under either neighbour is the whole lattice gZ^d,
    so the check rules out the neighbour in 0 of 1000 releases."""
    opt, plan, loss, X, y, y2 = _attack_setup()
    assert plan.mechanism == "gaussian"
    silent = lambda step: None  # noqa: E731
    # the adversary's centres: the noiseless fits (σ = 0 release = the exact weights)
    quiet = type(plan)(**{**plan.__dict__, "noise_scale": 0.0})
    centre = opt.fit(quiet, loss, X, y, SecureRandom.seeded(0), silent)
    centre2 = opt.fit(quiet, loss, X, y2, SecureRandom.seeded(0), silent)
    assert not np.array_equal(centre, centre2)
    g = gaussian_release(X.shape[1], plan.noise_scale, plan.sensitivity).grid
    rng = SecureRandom.seeded(3)
    ruled_out = 0
    releases = 1000
    for r in range(releases):
        out = opt.fit(plan, loss, X, y, rng, silent) if r < 20 else None
        if out is None:  # the fit's last step, without re-running the deterministic descent
            from service.privacy.output_perturbation import release_with_noise

            out = release_with_noise(
                plan.mechanism, centre, plan.noise_scale, plan.sensitivity, rng
            )
        k = out / g
        on_lattice = bool(np.all(k == np.rint(k)))
        assert on_lattice  # fails for the old float release: not on any public grid
        # support under each neighbour: q(c) + Z^d with q(c) = rint(c/g) integer, i.e. gZ^d:
        implied = [k - np.rint(c / g) for c in (centre, centre2)]
        consistent = [bool(np.all(v == np.rint(v))) for v in implied]
        if consistent != [True, True]:
            ruled_out += 1
    assert ruled_out == 0
    # the check has power: the old float release fl(w + fl(σz)) is not on the public lattice
    old = centre + plan.noise_scale * np.random.default_rng(0).standard_normal(centre.size)
    assert not np.all(old / g == np.rint(old / g))


# --- the ledger's reservation -----------------------------------------------------------------


def test_ledger_reserves_h_for_the_samplers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Admission runs against (ε_B − 2H, δ_B e^{−H}); with a visible H (0.05) the thresholds
    move and a pure job of exactly ε_B no longer fits; with the real H (1e-55 ≥ 10^21·η_max)
    nothing a float can see changes."""
    from service.ledger import filter as ledger_filter

    assert 1e21 * (kernel_eta() + plan_discrete_gaussian(2**90).eta) <= ledger_filter.SECURE_NOISE_H
    budget = ledger_filter.Budget(1.0, 0.0)
    job = ledger_filter.Cost(rdp=tuple(0.0 for _ in range(13)), pure_epsilon=1.0)
    spent = ledger_filter.Spent.nothing()
    assert ledger_filter.admit(budget, spent, job).admitted
    approx = ledger_filter.Budget(3.0, 1e-5)
    before = ledger_filter.thresholds(approx)
    monkeypatch.setattr(ledger_filter, "SECURE_NOISE_H", 0.05)
    ledger_filter.thresholds.cache_clear()
    try:
        assert not ledger_filter.admit(budget, spent, job).admitted
        after = ledger_filter.thresholds(approx)
        assert after.mu < before.mu
        assert all(b < a for (_, a), (_, b) in zip(before.orders, after.orders, strict=False))
    finally:
        ledger_filter.thresholds.cache_clear()


def test_exponential_mechanism_is_drawn_exactly() -> None:
    """private_tuning's selection: the frequencies of the exact rejection sampler match
    exp(−ε(e_i − e_min)/2)/Σ (chi-square, 60,000 draws)."""
    from service.optimizers.private_tuning import select_candidate, selection_probabilities

    errors, eps = [3, 5, 4, 9], 1.3
    rng = SecureRandom.seeded(12)
    draws = 60_000
    counts = np.bincount([select_candidate(errors, eps, rng) for _ in range(draws)], minlength=4)
    expected = selection_probabilities(errors, eps) * draws
    assert _chi_square_p(counts.astype(float), expected) > P_FALSE_ALARM
    wrong = selection_probabilities(errors, 1.1 * eps) * draws  # power: a 10 % other ε
    assert _chi_square_p(counts.astype(float), wrong) < P_FALSE_ALARM
