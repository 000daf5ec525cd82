"""Noise samplers and their calibration (analytic Gaussian, pure-DP norm-gamma)."""

from service.privacy.analytic_gaussian import (
    analytic_gaussian_sigma,
    classic_gaussian_sigma,
    gaussian_delta,
    sample_gaussian,
)
from service.privacy.norm_gamma import norm_gamma_log_density, sample_norm_gamma
from service.privacy.output_perturbation import (
    NoiseCalibration,
    calibrate_release,
    gaussian_event,
    pure_dp_event,
    sample_release_noise,
)

__all__ = [
    "NoiseCalibration",
    "analytic_gaussian_sigma",
    "calibrate_release",
    "classic_gaussian_sigma",
    "gaussian_delta",
    "gaussian_event",
    "norm_gamma_log_density",
    "pure_dp_event",
    "sample_gaussian",
    "sample_norm_gamma",
    "sample_release_noise",
]
