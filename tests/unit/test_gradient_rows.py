"""The rows' representation under the schema's public layout changes speed, never results."""

from __future__ import annotations

import numpy as np
import pytest

from service.models.logistic import LogisticLoss
from service.optimizers.dp_agd import DPAGD, DPAGDParams
from service.optimizers.dp_gd import DPGD, DPGDParams, noisy_gradient_descent
from service.optimizers.kits.accelerated_kit import noisy_accelerated_descent
from service.optimizers.kits.base import PrivacyTarget
from service.optimizers.kits.inputs import (
    ColumnLayout,
    GradientRows,
    checked_rows,
    gradient_rows,
    laid_out,
)
from service.optimizers.output_perturbation_gd import (
    OutputPerturbationGD,
    OutputPerturbationGDParams,
    gradient_descent,
)
from service.privacy.output_perturbation import release_with_noise
from service.privacy.secure_release import gaussian_release

#: Three categorical features of 6 categories, a numeric feature, an intercept.
LAYOUT = ColumnLayout.of_schema([6, 6, 6, None], fit_intercept=True)


def _one_hot_rows(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Three one-hot blocks of 6 categories, a numeric column and an intercept, ‖x‖ ≤ 1, carrying
    their public layout as the worker's rows do."""
    blocks = [np.eye(6)[rng.integers(6, size=n)] for _ in range(3)]
    X = np.hstack([*blocks, rng.uniform(0, 1, size=(n, 1)), np.ones((n, 1))]) / np.sqrt(5)
    y = np.where(X[:, 0] + X[:, 7] - X[:, 18] + 0.2 * rng.normal(size=n) > 0.1, 1.0, -1.0)
    return laid_out(X, LAYOUT), y


def test_one_hot_blocks_become_csr_with_one_entry_per_row() -> None:
    rng = np.random.default_rng(0)
    X, _ = _one_hot_rows(rng, 200)
    rows = gradient_rows(X, LAYOUT)
    assert isinstance(rows, GradientRows) and rows.shape == X.shape and rows.T.shape == X.T.shape
    np.testing.assert_array_equal(rows.toarray(), X)
    # the numeric column and the intercept are dense, the one-hot blocks sparse: three stored
    # entries in every row
    assert rows.dense_columns.tolist() == [18, 19]
    assert rows.sparse_columns.tolist() == list(range(18))
    assert np.diff(rows.one_hot.indptr).tolist() == [3] * 200
    c = rng.normal(size=200)
    w0 = rng.normal(size=X.shape[1])
    np.testing.assert_allclose(rows @ w0, X @ w0, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(rows.T @ c, X.T @ c, rtol=1e-13, atol=1e-13)
    # without a layout every column is dense
    dense = rng.normal(size=(50, 4))
    plain = gradient_rows(dense)
    assert plain.dense_columns.tolist() == [0, 1, 2, 3] and plain.one_hot.shape == (50, 0)
    np.testing.assert_array_equal(plain.toarray(), dense)
    np.testing.assert_allclose(plain @ w0[:4], dense @ w0[:4], rtol=1e-13, atol=1e-15)
    loss = LogisticLoss(l2=0.01)
    w = rng.normal(size=X.shape[1])
    y = rng.choice([-1.0, 1.0], size=200)
    np.testing.assert_allclose(
        loss.gradient(w, gradient_rows(X, LAYOUT), y),
        loss.gradient(w, np.asarray(X), y),
        rtol=1e-13,
        atol=1e-16,
    )


def test_rows_outside_the_layout_are_refused() -> None:
    """Two non-zeros in one one-hot block cannot come from the encoder: refused, no values."""
    rng = np.random.default_rng(4)
    X, y = _one_hot_rows(rng, 20)
    broken = np.array(X)
    broken[3, :2] = 0.1
    with pytest.raises(ValueError, match="one-hot layout"):
        gradient_rows(broken, LAYOUT)
    with pytest.raises(ValueError, match="width"):
        gradient_rows(np.asarray(X)[:, :5], LAYOUT)


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


def test_missing_categories_are_explicit_zeros_and_rows_stay_local() -> None:
    """Rows with MISSING categories (an all-zero block) keep one stored entry per block (an
    explicit zero): the same nnz in every row; both products equal the dense ones, rows above
    the norm bound by rounding are divided exactly, and each output entry is its own row's."""
    rng = np.random.default_rng(2)
    n = 500
    X, y = _one_hot_rows(rng, n)
    X = np.array(X)
    X[rng.random(n) < 0.3, 0:6] = 0.0
    X[::11, 6:18] = 0.0
    X[5] *= 1.0 + 1e-9  # above the bound by rounding only
    rows, labels = checked_rows(LogisticLoss(l2=0.01), laid_out(X, LAYOUT), y, n, 20)
    assert np.diff(rows.one_hot.indptr).tolist() == [3] * n and rows.one_hot.nnz == 3 * n
    expected = X / np.maximum(np.linalg.norm(X, axis=1), 1.0)[:, None]
    np.testing.assert_allclose(rows.toarray(), expected, rtol=1e-15, atol=0)
    assert np.linalg.norm(rows.toarray()[5]) <= 1.0 + 1e-15
    w = rng.normal(size=20)
    c = rng.normal(size=n)
    np.testing.assert_allclose(rows @ w, expected @ w, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(rows.T @ c, expected.T @ c, rtol=1e-13, atol=1e-13)
    # row i of X @ w depends on row i only: change one row, only that entry moves
    X2 = X.copy()
    X2[7, :6] = 0.0
    X2[7, 2] = X[0, 19]
    moved = np.flatnonzero(gradient_rows(X2, LAYOUT) @ w != gradient_rows(X, LAYOUT) @ w)
    assert moved.tolist() == [7]


def test_averaged_fit_on_sparse_rows_equals_the_dense_algorithm() -> None:
    """``dp_agd_averaged`` (the default's method) on the sparse path equals its loop on the
    dense array with the same noise draws."""
    from service.optimizers.dp_agd_averaged import (
        DPAGDAveraged,
        DPAGDAveragedParams,
        averaged_accelerated_descent,
    )
    from service.optimizers.kits.full_gradient import LocalGradient

    rng = np.random.default_rng(3)
    n = 300
    X, y = _one_hot_rows(rng, n)
    X = laid_out(np.array(X), LAYOUT)
    X[::7, :6] = 0.0  # a missing category (an explicit zero in the sparse rows)
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
