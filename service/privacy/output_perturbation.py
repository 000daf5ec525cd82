"""Calibrating a one-shot noisy release ("output perturbation") and its accounting event.

Shared by every optimizer that computes a vector with a known replace-one L2 sensitivity Δ and
adds noise once (Zhang et al. 2017 Alg. 1; Wu et al. 2017 Alg. 1–2):

- δ = 0 (pure ε-DP): noise with density ∝ exp(−ε‖z‖/Δ) (:mod:`service.privacy.norm_gamma`),
  ``noise_scale = Δ/ε``. The ledger charges the tight RDP curve of an ε-DP mechanism, that of
  binary randomized response at ε (any ε-DP mechanism is a post-processing of it; Kairouz, Oh &
  Viswanath 2015; Steinke 2024): ``RandomizedResponseDpEvent(noise_parameter=2/(1+e^ε),
  num_buckets=2)`` (dp-accounting's RR answers uniformly at random with probability p, so it
  keeps the true bit with probability 1 − p/2 = e^ε/(1+e^ε)).
- δ > 0: isotropic Gaussian noise with the analytic calibration
  (:mod:`service.privacy.analytic_gaussian`), ``noise_scale = σ``. The event is
  ``GaussianDpEvent(noise_multiplier=σ/Δ)``: dp-accounting 0.6.0's RDP accountant charges it
  ``α/(2 (σ/Δ)²) = αΔ²/(2σ²)`` under REPLACE_ONE without doubling, which is exactly the RDP of a
  Gaussian release of sensitivity Δ (docs/ledger.md#the-z-convention; a test pins this).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from dp_accounting import dp_event
from scipy.special import expit

from service.models.base import FloatArray
from service.privacy.analytic_gaussian import analytic_gaussian_sigma, sample_gaussian
from service.privacy.norm_gamma import sample_norm_gamma

__all__ = [
    "MAX_PURE_EPSILON",
    "Mechanism",
    "NoiseCalibration",
    "calibrate_release",
    "gaussian_event",
    "pure_dp_event",
    "sample_release_noise",
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


def sample_release_noise(
    mechanism: str, d: int, noise_scale: float, rng: np.random.Generator
) -> FloatArray:
    """One noise vector of the named mechanism ("gaussian": σ = noise_scale; "norm_gamma":
    density ∝ exp(−‖z‖/noise_scale))."""
    if mechanism == "gaussian":
        return sample_gaussian(d, noise_scale, rng)
    if mechanism == "norm_gamma":
        return sample_norm_gamma(d, noise_scale, rng)
    raise ValueError(f"unknown noise mechanism {mechanism!r}")
