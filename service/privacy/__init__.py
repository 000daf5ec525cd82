"""Noise calibration and the exact releases (secure_random, secure_release)."""

from service.privacy.analytic_gaussian import (
    analytic_gaussian_sigma,
    classic_gaussian_sigma,
    gaussian_delta,
)
from service.privacy.norm_gamma import norm_gamma_log_density
from service.privacy.output_perturbation import (
    NoiseCalibration,
    calibrate_release,
    gaussian_event,
    pure_dp_event,
    release_with_noise,
)
from service.privacy.secure_random import SecureRandom, as_secure
from service.privacy.secure_release import secure_gaussian, secure_laplace

__all__ = [
    "NoiseCalibration",
    "analytic_gaussian_sigma",
    "calibrate_release",
    "classic_gaussian_sigma",
    "gaussian_delta",
    "gaussian_event",
    "norm_gamma_log_density",
    "SecureRandom",
    "as_secure",
    "pure_dp_event",
    "release_with_noise",
    "secure_gaussian",
    "secure_laplace",
]
