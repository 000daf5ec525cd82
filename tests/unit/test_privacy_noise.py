"""Calibration and sampler tests for service.privacy (docs/privacy-model.md#testing-privacy, 2)."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from dp_accounting import NeighboringRelation, dp_event
from dp_accounting.pld import privacy_loss_distribution
from dp_accounting.rdp import rdp_privacy_accountant
from scipy import stats

from service.privacy.analytic_gaussian import (
    analytic_gaussian_sigma,
    classic_gaussian_sigma,
    gaussian_delta,
)
from service.privacy.norm_gamma import norm_gamma_log_density
from service.privacy.output_perturbation import (
    calibrate_release,
    gaussian_event,
    pure_dp_event,
    release_with_noise,
)
from service.privacy.secure_random import SecureRandom
from service.privacy.secure_release import secure_gaussian

EPSILONS = [1e-3, 0.05, 0.5, 1.0, 3.0, 10.0, 100.0, 1000.0]
DELTAS = [0.1, 1e-5, 1e-9, 1e-12]
ORDERS = [1.5, 1.75, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 16.0, 32.0, 64.0, 1e6]


def _delta_mp(sigma: float, epsilon: float, sensitivity: float) -> float:
    """Balle & Wang Thm 8 in 50-digit arithmetic: an independent reference for gaussian_delta."""
    with mpmath.workdps(50):
        s, e, dd = mpmath.mpf(sigma), mpmath.mpf(epsilon), mpmath.mpf(sensitivity)
        val = mpmath.ncdf(dd / (2 * s) - e * s / dd) - mpmath.exp(e) * mpmath.ncdf(
            -dd / (2 * s) - e * s / dd
        )
        return float(val)


# --- analytic Gaussian ------------------------------------------------------------------------


@pytest.mark.parametrize("epsilon", EPSILONS)
@pytest.mark.parametrize("delta", DELTAS)
def test_analytic_sigma_meets_condition_with_equality(epsilon: float, delta: float) -> None:
    for sensitivity in (0.37, 1.0, 8.0):
        sigma = analytic_gaussian_sigma(epsilon, delta, sensitivity)
        achieved = gaussian_delta(sigma, epsilon, sensitivity)
        assert achieved <= delta
        assert achieved == pytest.approx(delta, rel=1e-6)
        # any smaller σ violates the condition: σ is the smallest admissible one
        assert gaussian_delta(sigma * (1 - 1e-6), epsilon, sensitivity) > delta


@pytest.mark.parametrize(
    ("epsilon", "delta"), [(0.05, 1e-5), (0.5, 1e-5), (1.0, 1e-9), (3.0, 1e-3), (10.0, 1e-12)]
)
def test_gaussian_delta_matches_high_precision_reference(epsilon: float, delta: float) -> None:
    sigma = analytic_gaussian_sigma(epsilon, delta, 1.0)
    for factor in (0.8, 1.0, 1.3):
        ref = _delta_mp(sigma * factor, epsilon, 1.0)
        assert gaussian_delta(sigma * factor, epsilon, 1.0) == pytest.approx(ref, rel=1e-8)
    assert _delta_mp(sigma, epsilon, 1.0) == pytest.approx(delta, rel=1e-6)


def test_analytic_sigma_matches_pld_accountant() -> None:
    """An independent numerical accountant (dp-accounting PLD, pessimistic) agrees."""
    epsilon, delta = 1.0, 1e-5
    sigma = analytic_gaussian_sigma(epsilon, delta, 1.0)
    pld = privacy_loss_distribution.from_gaussian_mechanism(
        standard_deviation=sigma, sensitivity=1.0, value_discretization_interval=1e-4
    )
    assert pld.get_delta_for_epsilon(epsilon) == pytest.approx(delta, rel=0.02)


@pytest.mark.parametrize("epsilon", [0.01, 0.1, 0.5, 0.9])
@pytest.mark.parametrize("delta", [1e-3, 1e-5, 1e-10])
def test_analytic_sigma_beats_classic_calibration(epsilon: float, delta: float) -> None:
    classic = classic_gaussian_sigma(epsilon, delta, 2.0)
    analytic = analytic_gaussian_sigma(epsilon, delta, 2.0)
    assert analytic < classic
    # the classic σ is valid for ε < 1, so it satisfies the exact condition
    assert gaussian_delta(classic, epsilon, 2.0) <= delta


def test_analytic_sigma_scales_and_is_monotone() -> None:
    base = analytic_gaussian_sigma(0.7, 1e-6, 1.0)
    assert analytic_gaussian_sigma(0.7, 1e-6, 3.5) == pytest.approx(3.5 * base, rel=1e-12)
    sig_eps = [analytic_gaussian_sigma(e, 1e-6, 1.0) for e in EPSILONS]
    assert all(a > b for a, b in zip(sig_eps, sig_eps[1:], strict=False))
    sig_delta = [analytic_gaussian_sigma(0.7, d, 1.0) for d in DELTAS]
    assert all(a < b for a, b in zip(sig_delta, sig_delta[1:], strict=False))
    assert analytic_gaussian_sigma(1.0, 1e-5, 0.0) == 0.0


def test_analytic_sigma_extreme_epsilon() -> None:
    # As ε → ∞ the Gaussian needs only σ ≈ Δ/sqrt(2ε) (then δ is governed by Φ(−ε/s)).
    sigma = analytic_gaussian_sigma(1e9, 1e-5, 1.0)
    assert math.isfinite(sigma) and 0.0 < sigma < 1e-4
    assert gaussian_delta(sigma, 1e9, 1.0) <= 1e-5


@pytest.mark.parametrize(
    ("epsilon", "delta", "sensitivity"),
    [
        (0.0, 1e-5, 1.0),
        (-1.0, 1e-5, 1.0),
        (math.inf, 1e-5, 1.0),
        (1.0, 0.0, 1.0),
        (1.0, 1.0, 1.0),
        (1.0, 1e-5, -1.0),
        (1.0, math.nan, 1.0),
    ],
)
def test_analytic_sigma_rejects_bad_inputs(
    epsilon: float, delta: float, sensitivity: float
) -> None:
    with pytest.raises(ValueError):
        analytic_gaussian_sigma(epsilon, delta, sensitivity)


# --- accounting events: pin dp-accounting's answers -------------------------------------------


@pytest.mark.parametrize(("sigma", "sensitivity"), [(3.0, 1.0), (0.8356, 0.224), (5.0, 2.0)])
def test_gaussian_event_rdp_is_replace_one_gaussian(sigma: float, sensitivity: float) -> None:
    """RDP accountant under REPLACE_ONE charges α Δ²/(2σ²) for noise_multiplier σ/Δ — no doubling.

    If an upstream release starts doubling the sensitivity (issue #378, PR #464), this fails and
    the convention in service.privacy.output_perturbation must be revisited.
    """
    acc = rdp_privacy_accountant.RdpAccountant(ORDERS, NeighboringRelation.REPLACE_ONE)
    acc.compose(gaussian_event(sigma, sensitivity))
    expected = np.array(ORDERS) * sensitivity**2 / (2.0 * sigma**2)
    np.testing.assert_allclose(acc.rdp, expected, rtol=1e-12)


@pytest.mark.parametrize("epsilon", [0.1, 1.0, 4.0, 50.0])
def test_pure_dp_event_rdp_is_binary_randomized_response(epsilon: float) -> None:
    """The pure-DP charge is binary RR's RDP curve at ε (tight for ε-DP), capped by ε."""
    acc = rdp_privacy_accountant.RdpAccountant(ORDERS, NeighboringRelation.REPLACE_ONE)
    event = pure_dp_event(epsilon)
    assert event.noise_parameter == pytest.approx(2.0 / (1.0 + math.exp(epsilon)), rel=1e-12)
    acc.compose(event)
    # P(keep the true bit) q = e^ε/(1+e^ε), in logs
    log_q, log_1mq = -math.log1p(math.exp(-epsilon)), -epsilon - math.log1p(math.exp(-epsilon))
    expected = []
    for a in ORDERS:
        terms = [a * log_q + (1 - a) * log_1mq, a * log_1mq + (1 - a) * log_q]
        expected.append(float(np.logaddexp(*terms)) / (a - 1))
    np.testing.assert_allclose(acc.rdp, expected, rtol=1e-6, atol=1e-9)
    assert np.all(acc.rdp <= epsilon * (1 + 1e-12))
    assert acc.rdp[-1] == pytest.approx(epsilon, rel=1e-4)  # α → ∞ recovers ε


def test_pure_dp_event_huge_epsilon() -> None:
    assert pure_dp_event(700.0).noise_parameter > 0.0
    with pytest.raises(ValueError):
        pure_dp_event(701.0)


def test_calibrate_release() -> None:
    pure = calibrate_release(0.5, 2.0, 0.0)
    assert pure.mechanism == "norm_gamma"
    assert pure.noise_scale == pytest.approx(0.25)
    assert isinstance(pure.event, dp_event.RandomizedResponseDpEvent)
    gauss = calibrate_release(0.5, 2.0, 1e-6)
    assert gauss.mechanism == "gaussian"
    assert gauss.noise_scale == analytic_gaussian_sigma(2.0, 1e-6, 0.5)
    assert isinstance(gauss.event, dp_event.GaussianDpEvent)
    assert gauss.event.noise_multiplier == pytest.approx(gauss.noise_scale / 0.5, rel=1e-15)
    for bad in [(0.0, 1.0, 0.0), (1.0, 0.0, 0.0), (1.0, 1.0, 1.0), (1.0, 1.0, -0.1)]:
        with pytest.raises(ValueError):
            calibrate_release(*bad)
    with pytest.raises(ValueError):
        release_with_noise("laplace", np.zeros(3), 1.0, 1.0, SecureRandom.seeded(0))


# --- samplers ---------------------------------------------------------------------------------


# The samplers themselves (exact discrete Gaussian / Laplace releases) are tested in
# tests/unit/test_secure_noise.py; the norm-gamma density below is what "norm_gamma" plans were
# calibrated with.


def test_norm_gamma_density_normalisation() -> None:
    lam = 0.8
    z1 = np.array([[0.3], [-2.0]])
    np.testing.assert_allclose(
        norm_gamma_log_density(z1, lam), stats.laplace(scale=lam).logpdf(z1[:, 0]), rtol=1e-12
    )
    z2 = np.array([[0.3, -0.4], [1.0, 2.0]])
    r = np.linalg.norm(z2, axis=1)
    np.testing.assert_allclose(
        norm_gamma_log_density(z2, lam), -r / lam - math.log(2 * math.pi * lam**2), rtol=1e-12
    )


@pytest.mark.parametrize("d", [1, 2, 5, 50])
def test_norm_gamma_density_ratio_bounded_by_e_eps(d: int) -> None:
    """p(o − w)/p(o − w') ≤ e^ε for ‖w − w'‖ ≤ Δ and scale = Δ/ε, attained on the ray."""
    rng = np.random.default_rng(d)
    sensitivity, epsilon = 0.6, 1.3
    scale = sensitivity / epsilon
    worst = -math.inf
    for _ in range(200):
        w = rng.normal(size=d)
        diff = rng.normal(size=d)
        diff *= sensitivity * rng.uniform(0.1, 1.0) / np.linalg.norm(diff)
        w2 = w + diff
        outputs = np.vstack(
            [w + rng.laplace(scale=scale * d, size=d) for _ in range(20)]
            + [w - t * diff / np.linalg.norm(diff) for t in (0.0, 1.0, 10.0)]
        )
        log_ratio = norm_gamma_log_density(outputs - w, scale) - norm_gamma_log_density(
            outputs - w2, scale
        )
        assert np.all(log_ratio <= epsilon * (1 + 1e-12))
        worst = max(worst, float(log_ratio.max() / (np.linalg.norm(diff) / scale)))
    assert worst == pytest.approx(1.0, rel=1e-9)  # the ray attains ‖w − w'‖/λ exactly


def test_releases_reject_bad_inputs() -> None:
    rng = SecureRandom.seeded(0)
    with pytest.raises(ValueError):
        secure_gaussian(np.zeros(3), math.nan, 1.0, rng)
    with pytest.raises(ValueError):
        secure_gaussian(np.zeros(3), 1.0, 0.0, rng)
    with pytest.raises(ValueError):
        release_with_noise("norm_gamma", np.zeros(3), 1.0, -1.0, rng)
    assert np.all(secure_gaussian(np.arange(4.0), 0.0, 1.0, rng) == np.arange(4.0))
