"""The sparse representation of one-hot rows changes speed, never results."""

from __future__ import annotations

import numpy as np
import pytest

from service.models.logistic import LogisticLoss
from service.optimizers.accelerated_kit import noisy_accelerated_descent
from service.optimizers.base import PrivacyTarget
from service.optimizers.dp_agd import DPAGD, DPAGDParams
from service.optimizers.dp_gd import DPGD, DPGDParams, noisy_gradient_descent
from service.optimizers.inputs import SparseRows, gradient_rows
from service.optimizers.output_perturbation_gd import (
    OutputPerturbationGD,
    OutputPerturbationGDParams,
    gradient_descent,
)
from service.privacy.output_perturbation import sample_release_noise


def _one_hot_rows(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Three one-hot blocks of 6 categories, a numeric column and an intercept, ‖x‖ ≤ 1."""
    blocks = [np.eye(6)[rng.integers(6, size=n)] for _ in range(3)]
    X = np.hstack([*blocks, rng.uniform(0, 1, size=(n, 1)), np.ones((n, 1))]) / np.sqrt(5)
    y = np.where(X[:, 0] + X[:, 7] - X[:, 18] + 0.2 * rng.normal(size=n) > 0.1, 1.0, -1.0)
    return X, y


def test_one_hot_rows_become_csr_and_dense_rows_stay() -> None:
    rng = np.random.default_rng(0)
    X, _ = _one_hot_rows(rng, 200)
    rows = gradient_rows(X)
    assert isinstance(rows, SparseRows) and rows.shape == X.shape
    np.testing.assert_array_equal(rows.rows.toarray(), X)
    np.testing.assert_array_equal(rows.T.toarray(), X.T)
    dense = rng.normal(size=(50, 4))
    assert gradient_rows(dense) is dense
    loss = LogisticLoss(l2=0.01)
    w = rng.normal(size=X.shape[1])
    y = rng.choice([-1.0, 1.0], size=200)
    np.testing.assert_allclose(
        loss.gradient(w, gradient_rows(X), y), loss.gradient(w, X, y), rtol=1e-13, atol=1e-16
    )


@pytest.mark.parametrize("name", ["dp_gd", "dp_agd", "output_perturbation_gd"])
def test_fit_on_sparse_rows_equals_the_dense_algorithm(name: str) -> None:
    """``fit`` takes the CSR path on one-hot data; the same algorithm on the dense array, with
    the same noise draws, gives the same model."""
    rng = np.random.default_rng(1)
    n = 300
    X, y = _one_hot_rows(rng, n)
    d = X.shape[1]
    loss = LogisticLoss(l2=0.01)
    target = PrivacyTarget(1.0, 1e-5)
    if name == "output_perturbation_gd":
        opt = OutputPerturbationGD()
        plan = opt.plan(OutputPerturbationGDParams(iterations=30), loss, n, d, target)
        hp = plan.hyperparameters
        dense = gradient_descent(loss, X, y, hp["step_size"], hp["iterations"])
        fitted = opt.fit(plan, loss, X, y, np.random.default_rng(5), lambda _: None)
        noise = sample_release_noise(plan.mechanism, d, plan.noise_scale, np.random.default_rng(5))
        np.testing.assert_allclose(fitted, dense + noise, rtol=1e-11, atol=1e-13)
        return
    if name == "dp_gd":
        opt, loop = DPGD(), noisy_gradient_descent
        plan = opt.plan(DPGDParams(iterations=40), loss, n, d, target)
    else:
        opt, loop = DPAGD(), noisy_accelerated_descent
        plan = opt.plan(DPAGDParams(iterations=40), loss, n, d, target)
    fitted = opt.fit(plan, loss, X, y, np.random.default_rng(5), lambda _: None)
    dense = loop(
        loss,
        X,
        y,
        step_size=plan.hyperparameters["step_size"],
        iterations=plan.total_steps,
        noise_std=plan.noise_scale,
        rng=np.random.default_rng(5),
    )
    np.testing.assert_allclose(fitted, dense, rtol=1e-11, atol=1e-13)
