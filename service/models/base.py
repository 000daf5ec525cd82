"""The interface every loss (a "model" in the API) implements.

A loss here is the regularised empirical risk

    F(w; S) = (1/n) Σ_i ℓ(w; x_i, y_i) + (μ/2) ‖w‖²

over rows with ‖x_i‖₂ ≤ 1 (the loader enforces that bound). The constants are those of the
per-example *data* loss ℓ — the regulariser is identical on neighbouring datasets, so it never
enters a sensitivity bound except through the strong convexity μ it provides:

- ``lipschitz`` L: ‖∇ℓ(w; x, y)‖ ≤ L for every w and every admissible row;
- ``smoothness`` β: ∇ℓ(·; x, y) is β-Lipschitz for every admissible row;
- ``l2`` μ: the regulariser's weight; F is μ-strongly convex when ℓ is convex.

The smoothness of the whole objective F is therefore β + μ.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]


class Loss(Protocol):
    """A regularised empirical risk over rows with ‖x‖₂ ≤ 1 and labels in {−1, +1}."""

    name: str
    lipschitz: float
    smoothness: float
    l2: float
    convex: bool

    def value(self, w: FloatArray, X: FloatArray, y: FloatArray) -> float:
        """F(w; S): the mean data loss plus (μ/2)‖w‖²."""
        ...

    def gradient(self, w: FloatArray, X: FloatArray, y: FloatArray) -> FloatArray:
        """∇F(w; S): the mean data-loss gradient plus μ w."""
        ...

    def predict_proba(self, w: FloatArray, X: FloatArray) -> FloatArray:
        """P(y = +1 | x) for each row."""
        ...
