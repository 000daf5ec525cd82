"""Pure ε-DP noise for a vector release: density ∝ exp(−‖z‖₂/λ) with λ = Δ/ε.

Zhang et al. (2017), Alg. 1 line 6 (``P(z) ∝ exp(−ε‖z‖₂/Δ)``); Wu et al. (2017), Thm 1;
Chaudhuri, Monteleoni & Sarwate (2011), Alg. 1.

Privacy (why the density ratio is at most e^ε). The released vector is ``w + Z`` with
``p(z) = exp(−‖z‖/λ)/C_d(λ)``. For neighbouring datasets with noiseless outputs w, w' and
``‖w − w'‖ ≤ Δ``, at every output o

    p(o − w) / p(o − w') = exp((‖o − w'‖ − ‖o − w‖)/λ) ≤ exp(‖w − w'‖/λ) ≤ exp(Δ/λ) = e^ε

by the triangle inequality, so every event's probability changes by a factor ≤ e^ε: ε-DP with
δ = 0. The bound is attained on the ray ``o = w + t(w − w')``, t ≥ 0.

**No longer sampled.** Stored plans keep the mechanism name "norm_gamma" and its scale λ = Δ/ε,
but the draw is now exact: the value on a public grid plus independent discrete Laplace noise
calibrated to the integer query's ℓ1 sensitivity (:func:`service.privacy.secure_release.
secure_laplace`, exactly ε-DP). Its ‖noise‖₂ is about √2 times norm-gamma's E‖z‖ = dλ. What
follows describes the density the plans were calibrated with (kept for the tests and the docs).

Density. In polar coordinates ``z = r u`` the density factorises as
``r^{d−1} e^{−r/λ} dr · dσ(u)``: the direction u is uniform on the sphere S^{d−1} and the norm is
``Gamma(shape=d, scale=λ)``. The normalising constant is
``C_d(λ) = |S^{d−1}| Γ(d) λ^d`` with ``|S^{d−1}| = 2π^{d/2}/Γ(d/2)``.
Moments: ``E‖Z‖ = dλ``, ``E‖Z‖² = d(d+1)λ²``.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import gammaln

from service.models.base import FloatArray

__all__ = ["norm_gamma_log_density"]


def _check(d: int, scale: float) -> None:
    if d < 1:
        raise ValueError("d must be >= 1")
    if not (math.isfinite(scale) and scale >= 0.0):
        raise ValueError("scale must be a finite number >= 0")


def norm_gamma_log_density(z: FloatArray, scale: float) -> FloatArray:
    """log p(z) for p(z) = exp(−‖z‖/λ)/C_d(λ), C_d(λ) = (2π^{d/2}/Γ(d/2)) Γ(d) λ^d.

    ``z`` is one point (shape (d,)) or a batch (shape (m, d)); returns shape () or (m,).
    """
    z = np.asarray(z, dtype=np.float64)
    d = int(z.shape[-1])
    _check(d, scale)
    if scale == 0.0:
        raise ValueError("the density is degenerate for scale = 0")
    log_c = (
        math.log(2.0)
        + 0.5 * d * math.log(math.pi)
        - float(gammaln(0.5 * d))
        + float(gammaln(d))
        + d * math.log(scale)
    )
    out: FloatArray = -np.linalg.norm(z, axis=-1) / scale - log_c
    return out
