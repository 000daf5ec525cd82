"""Calibrating a one-shot noisy release ("output perturbation") and its accounting event.

Shared by every optimizer that computes a vector with a known replace-one L2 sensitivity Δ and
adds noise once (Zhang et al. 2017 Alg. 1; Wu et al. 2017 Alg. 1–2):

- δ = 0 (pure ε-DP): the plan keeps the name "norm_gamma" and ``noise_scale = Δ/ε``; the draw is
  the exact discrete Laplace release of :func:`service.privacy.secure_release.secure_laplace`
  (exactly ε-DP; ‖noise‖₂ ≈ √2 times the norm-gamma density's). The ledger charges the tight
  RDP curve of an ε-DP mechanism, that of
  binary randomized response at ε (any ε-DP mechanism is a post-processing of it; Kairouz, Oh &
  Viswanath 2015; Steinke 2024): ``RandomizedResponseDpEvent(noise_parameter=2/(1+e^ε),
  num_buckets=2)`` (dp-accounting's RR answers uniformly at random with probability p, so it
  keeps the true bit with probability 1 − p/2 = e^ε/(1+e^ε)).
- δ > 0: isotropic Gaussian noise with the analytic calibration
  (:mod:`service.privacy.analytic_gaussian`), ``noise_scale = σ``, released exactly by
  :func:`service.privacy.secure_release.secure_gaussian` (μ ≤ Δ/σ). The event is
  ``GaussianDpEvent(noise_multiplier=σ/Δ)``: dp-accounting 0.6.0's RDP accountant charges it
  ``α/(2 (σ/Δ)²) = αΔ²/(2σ²)`` under REPLACE_ONE without doubling, which is exactly the RDP of a
  Gaussian release of sensitivity Δ (docs/ledger.md#the-z-convention; a test pins this).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from dp_accounting import dp_event
from scipy.special import expit

from service.models.base import FloatArray
from service.privacy.analytic_gaussian import analytic_gaussian_sigma
from service.privacy.secure_random import SecureRandom
from service.privacy.secure_release import laplace_release, secure_gaussian, secure_laplace

__all__ = [
    "MAX_PURE_EPSILON",
    "Mechanism",
    "NoiseCalibration",
    "calibrate_release",
    "gaussian_event",
    "noise_second_moment",
    "pure_dp_event",
    "release_with_noise",
]

Mechanism = Literal["gaussian", "norm_gamma"]

#: Above this ε the randomized-response parameter 2/(1+e^ε) underflows in double precision and
#: the accountant's curve becomes infinite, so pure-DP releases are limited to ε ≤ 700.
MAX_PURE_EPSILON = 700.0


@dataclass(frozen=True)
class NoiseCalibration:
    """The noise of a one-shot release and the event the ledger charges for it."""

    mechanism: Mechanism
    noise_scale: float
    event: dp_event.DpEvent


def pure_dp_event(epsilon: float) -> dp_event.RandomizedResponseDpEvent:
    """The event charged for a pure ε-DP release: binary randomized response at ε.

    ``noise_parameter = 2/(1+e^ε) = 2·expit(−ε)`` (computed without overflow).
    """
    if not (math.isfinite(epsilon) and 0.0 < epsilon <= MAX_PURE_EPSILON):
        raise ValueError(f"pure-DP epsilon must be in (0, {MAX_PURE_EPSILON:g}]")
    return dp_event.RandomizedResponseDpEvent(
        noise_parameter=float(2.0 * expit(-epsilon)), num_buckets=2
    )


def gaussian_event(sigma: float, sensitivity: float) -> dp_event.GaussianDpEvent:
    """The event of one Gaussian release N(0, σ²I) of a vector with replace-one sensitivity Δ."""
    if not (sigma > 0.0 and sensitivity > 0.0):
        raise ValueError("sigma and sensitivity must be > 0")
    return dp_event.GaussianDpEvent(noise_multiplier=sigma / sensitivity)


def calibrate_release(sensitivity: float, epsilon: float, delta: float) -> NoiseCalibration:
    """The least noise making a release of replace-one L2 sensitivity Δ (ε, δ)-DP.

    δ = 0 → "norm_gamma" with scale Δ/ε (exactly ε-DP). δ ∈ (0, 1) → "gaussian" with the
    analytic σ (exactly (ε, δ)-DP, Balle & Wang 2018 Thm 8). Raises ``ValueError`` otherwise.
    """
    if not (math.isfinite(sensitivity) and sensitivity > 0.0):
        raise ValueError("sensitivity must be a finite number > 0")
    if not (math.isfinite(epsilon) and epsilon > 0.0):
        raise ValueError("epsilon must be a finite number > 0")
    if not (math.isfinite(delta) and 0.0 <= delta < 1.0):
        raise ValueError("delta must be in [0, 1)")
    if delta == 0.0:
        return NoiseCalibration("norm_gamma", sensitivity / epsilon, pure_dp_event(epsilon))
    sigma = analytic_gaussian_sigma(epsilon, delta, sensitivity)
    return NoiseCalibration("gaussian", sigma, gaussian_event(sigma, sensitivity))


def pure_epsilon_of(noise_scale: float, sensitivity: float) -> float:
    """The ε of a "norm_gamma" plan: Δ/λ (its stored scale is λ = Δ/ε)."""
    return sensitivity / noise_scale


def release_with_noise(
    mechanism: str,
    value: FloatArray,
    noise_scale: float,
    sensitivity: float,
    rng: SecureRandom,
) -> FloatArray:
    """``value`` released by the named mechanism, exactly (:mod:`service.privacy.secure_release`):
    "gaussian" — grid + discrete Gaussian, μ ≤ Δ/σ with σ = ``noise_scale``; "norm_gamma" — grid
    + discrete Laplace at the ℓ1 sensitivity, exactly ε-DP with ε = Δ/``noise_scale`` (the stored
    plan's name and scale are kept; the draw is no longer norm-gamma)."""
    if mechanism == "gaussian":
        return secure_gaussian(value, noise_scale, sensitivity, rng)
    if mechanism == "norm_gamma":
        return secure_laplace(value, pure_epsilon_of(noise_scale, sensitivity), sensitivity, rng)
    raise ValueError(f"unknown noise mechanism {mechanism!r}")


def noise_second_moment(mechanism: str, d: int, scale: float) -> float:
    """E‖z‖² of one release's noise (public; for step-size theory): dσ² (Gaussian; the grid and
    kernel add a relative ~1e-6, ignored as before so that plans are unchanged) or, for
    "norm_gamma" (scale λ = Δ/ε), the discrete Laplace's 2d·b² with per-coordinate scale
    b ≈ √d·λ: ≈ 2d²λ², about 2d/(d+1) times norm-gamma's d(d+1)λ²."""
    if mechanism == "gaussian":
        return d * scale * scale
    if mechanism == "norm_gamma":
        b = laplace_release(d, 1.0, scale).noise_scale  # per-coordinate scale at Δ = λ, ε = 1
        return 2.0 * d * b * b * (1.0 + 2.0**-18)
    raise ValueError(f"unknown noise mechanism {mechanism!r}")
