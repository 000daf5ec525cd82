"""Gradient oracles: where the full-gradient optimizers get ∇F(w; S) from.

The full-gradient family (``dp_gd``, ``dp_agd``, ``output_perturbation_gd``, ``dp_accmd``) only
ever asks the data one question per step: the gradient of the smooth objective

    ∇F(w; S) = (1/n) Σ_i ∇ℓ(w; x_i, y_i) + μ w

at a point w the optimizer chose from public information and earlier (noised) answers. A
:class:`GradientOracle` answers it; the optimizer adds the noise and steps. So the maths and the
accounting of an optimizer are the same whoever computes the sum:

- :class:`LocalGradient`: the rows are in this process; ``loss.gradient(w, X, y)`` exactly (what
  the optimizers always did, bit for bit).
- :class:`SummedGradient`: the rows live elsewhere in partitions; ``partial_sums(w)`` returns one
  d-vector Σ_{i ∈ p} ∇ℓ(w; x_i, y_i) per partition (e.g. computed by Dask workers,
  :mod:`service.workers.data_parallel`), and the oracle reduces them in partition order, divides
  by the public n and adds μw. Equal to the local answer up to floating-point summation order.

Guarantees an oracle must keep: every partition's sum is included exactly once — a missing
partition raises (never a partial sum); the answer depends on the rows only through the sum.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

import numpy as np

from service.models.base import FloatArray, Loss, parameter_count
from service.optimizers.kits.base import ProgressCallback, ReleasePlan
from service.optimizers.kits.config import GradientStepsConfig, ShapeConfig
from service.optimizers.kits.inputs import Rows
from service.privacy.secure_random import SecureRandom

__all__ = [
    "GradientOracle",
    "LocalGradient",
    "NoisyDescent",
    "PartitionMissing",
    "SummedGradient",
    "fit_on_oracle",
    "noisy_descent",
    "partial_gradient_sum",
    "sum_in_order",
]


class PartitionMissing(RuntimeError):
    """A partition's partial sum is missing: the step cannot be computed (never skipped)."""


class GradientOracle(Protocol):
    """Answers ∇F(w; S) over a fixed dataset of public size ``n`` and dimension ``dimension``."""

    @property
    def n(self) -> int: ...

    @property
    def dimension(self) -> int: ...

    def gradient(self, w: FloatArray) -> FloatArray:
        """∇F(w; S): the mean per-example gradient plus the L2 term ``loss.l2 · w``."""
        ...


class LocalGradient:
    """The oracle over rows held in this process: ``loss.gradient(w, X, y)``."""

    def __init__(self, loss: Loss, X: Rows, y: FloatArray) -> None:
        self._loss = loss
        self._X = X
        self._y = y

    @property
    def n(self) -> int:
        return int(self._X.shape[0])

    @property
    def dimension(self) -> int:
        return parameter_count(self._loss, int(self._X.shape[1]))

    def gradient(self, w: FloatArray) -> FloatArray:
        return self._loss.gradient(w, self._X, self._y)


class SummedGradient:
    """The oracle over partitioned rows: Σ_p partial_sums(w)[p] / n + l2·w.

    ``partial_sums(w)`` must return exactly ``parts`` d-vectors (one per partition, in
    partition order) or raise; anything else raises :class:`PartitionMissing`.
    """

    def __init__(
        self,
        loss: Loss,
        n: int,
        dimension: int,
        parts: int,
        partial_sums: Callable[[FloatArray], Sequence[FloatArray]],
    ) -> None:
        if n < 1 or dimension < 1 or parts < 1:
            raise ValueError("n, dimension and parts must be >= 1")
        self._l2 = float(loss.l2)
        self._n = n
        self._d = dimension
        self._parts = parts
        self._partial_sums = partial_sums

    @property
    def n(self) -> int:
        return self._n

    @property
    def dimension(self) -> int:
        return self._d

    def gradient(self, w: FloatArray) -> FloatArray:
        sums = self._partial_sums(np.asarray(w, dtype=np.float64))
        total = sum_in_order(sums, self._parts, self._d, "partial gradient")
        total *= 1.0 / self._n
        if self._l2:
            total += self._l2 * w
        return total


def sum_in_order(parts: Iterable[Any], count: int, size: int, what: str) -> FloatArray:
    """The ``count`` partitions' ``size``-vectors added in partition order;
    :class:`PartitionMissing` (naming ``what``) if one is missing or has the wrong shape."""
    vectors = [np.asarray(part, dtype=np.float64) for part in parts]
    if len(vectors) != count:
        raise PartitionMissing(f"a partition's {what} is missing")
    total = np.zeros(size, dtype=np.float64)
    for vector in vectors:
        if vector.shape != (size,):
            raise PartitionMissing(f"a partition's {what} has the wrong shape")
        total += vector
    return total


def partial_gradient_sum(loss: Loss, w: FloatArray, X: Rows, y: FloatArray) -> FloatArray:
    """Σ_i ∇ℓ(w; x_i, y_i) over the rows given (the data part of ∇F times their count):
    ``(loss.gradient(w, X, y) − l2·w) · rows``. Zero for no rows."""
    rows = int(X.shape[0])
    if rows == 0:
        return np.zeros(parameter_count(loss, int(X.shape[1])), dtype=np.float64)
    grad = np.array(loss.gradient(w, X, y), dtype=np.float64)
    if loss.l2:
        grad -= loss.l2 * w
    grad *= rows
    return grad


# --- the shared body of the optimizers' ``fit_oracle`` ------------------------------------------


def fit_on_oracle(
    plan: ReleasePlan, oracle: GradientOracle, run: Callable[[GradientOracle], FloatArray]
) -> FloatArray:
    """What every full-gradient optimizer's ``fit_oracle`` does once its own plan-vs-loss checks
    passed: check that ``oracle`` answers over the plan's public ``n`` and ``d`` (its
    :class:`~service.optimizers.kits.config.ShapeConfig`; ``ValueError`` without data values
    otherwise) and return ``run(oracle)``. The rows' own checks (finite, ‖x‖₂ ≤ 1, admissible
    labels) are the oracle's: :class:`LocalGradient` gets checked rows, each partition of a
    :class:`SummedGradient` checks its own (``service.workers.data_parallel``)."""
    shape = ShapeConfig.from_hyperparameters(plan.hyperparameters)
    if (oracle.n, oracle.dimension) != (shape.n, shape.d):
        raise ValueError("the data's shape differs from the plan's public n and d")
    return run(oracle)


class NoisyDescent(Protocol):
    """A noisy first-order method over an oracle (``dp_gd.oracle_gradient_descent``,
    ``accelerated_kit.oracle_accelerated_descent``): T steps, one Gaussian draw of std ``noise_std``
    from ``rng`` per gradient query."""

    def __call__(
        self,
        loss: Loss,
        oracle: GradientOracle,
        *,
        step_size: float,
        iterations: int,
        noise_std: float,
        rng: SecureRandom,
        sensitivity: float = 0.0,
        progress: ProgressCallback | None = None,
    ) -> FloatArray: ...


def noisy_descent(
    descent: NoisyDescent,
    plan: ReleasePlan,
    loss: Loss,
    rng: SecureRandom,
    progress: ProgressCallback,
) -> Callable[[GradientOracle], FloatArray]:
    """``descent`` bound to the plan's public step size η and T (its
    :class:`~service.optimizers.kits.config.GradientStepsConfig`) and noise std σ
    (``plan.noise_scale``): the ``run`` of :func:`fit_on_oracle` for the optimizers that add
    Gaussian noise to every gradient."""
    config = GradientStepsConfig.from_hyperparameters(plan.hyperparameters)
    step_size, iterations = config.step_size, config.iterations

    def run(oracle: GradientOracle) -> FloatArray:
        return descent(
            loss,
            oracle,
            step_size=step_size,
            iterations=iterations,
            noise_std=plan.noise_scale,
            sensitivity=plan.sensitivity,
            rng=rng,
            progress=progress,
        )

    return run
