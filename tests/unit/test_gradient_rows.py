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
from service.privacy.output_perturbation import release_with_noise
from service.privacy.secure_release import gaussian_release


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
    assert isinstance(rows, SparseRows) and rows.shape == X.shape and rows.T.shape == X.T.shape
    np.testing.assert_array_equal(rows.toarray(), X)
    # the intercept and the numeric column are dense, the one-hot blocks sparse
    assert rows.dense_columns.tolist() == [18, 19]
    assert rows.sparse_columns.tolist() == list(range(18))
    c = rng.normal(size=200)
    w0 = rng.normal(size=X.shape[1])
    np.testing.assert_allclose(rows @ w0, X @ w0, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(rows.T @ c, X.T @ c, rtol=1e-13, atol=1e-13)
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
        released = release_with_noise(
            plan.mechanism, dense, plan.noise_scale, plan.sensitivity, np.random.default_rng(5)
        )
        grid = gaussian_release(d, plan.noise_scale, plan.sensitivity).grid
        # the same draws; the grid rounding of w may differ by one grid step across kernels
        np.testing.assert_allclose(fitted, released, rtol=0, atol=1.01 * grid)
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
        sensitivity=plan.sensitivity,
        rng=np.random.default_rng(5),
    )
    np.testing.assert_allclose(fitted, dense, rtol=1e-11, atol=1e-13)


def test_rows_of_uneven_length_and_every_column_density() -> None:
    """Rows with 0 … 7 non-zeros (grouped by count inside) and columns from empty to full:
    both products equal the dense ones and each output entry is its own row's."""
    rng = np.random.default_rng(2)
    n, d = 500, 12
    X = np.zeros((n, d))
    X[:, 0] = 0.3  # full (dense block)
    X[rng.random(n) < 0.6, 1] = -0.2  # dense block
    X[rng.random(n) < 0.3, 2] = 0.25  # just above DENSE_COLUMN: dense block
    for j in range(3, d - 1):  # sparse columns, uneven row lengths
        X[rng.random(n) < 0.02 * j, j] = rng.uniform(-0.3, 0.3)
    X /= max(1.0, float(np.linalg.norm(X, axis=1).max()))  # column d - 1 stays empty
    rows = gradient_rows(X)
    assert isinstance(rows, SparseRows)
    assert rows.dense_columns.tolist() == [0, 1, 2]
    assert len(set(np.count_nonzero(X[:, 3:], axis=1).tolist())) > 3
    np.testing.assert_array_equal(rows.toarray(), X)
    w = rng.normal(size=d)
    c = rng.normal(size=n)
    np.testing.assert_allclose(rows @ w, X @ w, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(rows.T @ c, X.T @ c, rtol=1e-13, atol=1e-13)
    # row i of X @ w depends on row i only: change one row, only that entry moves
    X2 = X.copy()
    X2[7] = 0.0
    X2[7, 5] = 0.5
    moved = np.flatnonzero(gradient_rows(X2) @ w != rows @ w)
    assert moved.tolist() == [7]


def test_averaged_fit_on_sparse_rows_equals_the_dense_algorithm() -> None:
    """``dp_agd_averaged`` (the default's method) on the sparse path equals its loop on the
    dense array with the same noise draws."""
    from service.optimizers.dp_agd_averaged import (
        DPAGDAveraged,
        DPAGDAveragedParams,
        averaged_accelerated_descent,
    )
    from service.optimizers.full_gradient import LocalGradient

    rng = np.random.default_rng(3)
    n = 300
    X, y = _one_hot_rows(rng, n)
    X[::7, :6] = 0.0  # a missing category: uneven row lengths
    loss = LogisticLoss(l2=0.01, gradient_clip=0.5)
    opt = DPAGDAveraged()
    plan = opt.plan(
        DPAGDAveragedParams(iterations=40), loss, n, X.shape[1], PrivacyTarget(1.0, 1e-5)
    )
    fitted = opt.fit(plan, loss, X, y, np.random.default_rng(5), lambda _: None)
    dense = averaged_accelerated_descent(
        loss,
        LocalGradient(loss, X, y),
        step_size=plan.hyperparameters["step_size"],
        iterations=plan.total_steps,
        noise_std=plan.noise_scale,
        sensitivity=plan.sensitivity,
        rng=np.random.default_rng(5),
    )
    np.testing.assert_allclose(fitted, dense, rtol=1e-11, atol=1e-13)
