"""The row map over a data-parallel job's partitions (service/workers/partition_row_map.py),
with the workers' own code (``PartitionHolder``'s methods on rows in this process's store)
and the actors' calls made in process:

- a fixed-seed ``fit_oracle`` over three partitions equals ``DPAGDAveraged.fit`` on the same
  rows (binary and joint: rows mapped in place; one-vs-rest: mapped on the fly per gradient,
  the rows kept for the next class), and the mean's share is spent (the rows are mapped);
- after an in-place map the plain oracle raises instead of answering on mapped rows, and a
  mapping is never applied twice;
- the on-the-fly gradient equals the gradient on ``mapped_rows`` across several blocks;
- the mapped oracle's Gram matrix (in place and on the fly, across blocks) equals
  ``gram_of_rows(mapped_rows(X))``; the plain oracle and a mismatched mapping raise;
- a default joint Gram-form plan with the curvature refresh (many narrow rows at ε = 1): the
  partitioned fit asks the partitions for c once, their sum equals the kit's
  ``curvature_terms`` on all the mapped rows, and the release equals ``fit``'s;
- the mapped oracle's curvature terms (in place and on the fly, across blocks, with rows of no
  declared class) equal the kit's on ``mapped_rows(X)``; the plain oracle, a one-vs-rest class,
  a mismatched mapping and a part of the wrong shape raise.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from service.models.logistic import LogisticLoss
from service.models.multinomial import MultinomialLoss
from service.models.registry import parse_model_spec
from service.optimizers.dp_agd_averaged import DPAGDAveraged
from service.optimizers.kits.base import PrivacyTarget
from service.optimizers.kits.curvature_refresh import CurvatureTermsOracle, curvature_terms
from service.optimizers.kits.curvature_step import GramOracle, gram_of_rows
from service.optimizers.kits.dp_agd_row_map import RowMappable, mapped_rows, row_map
from service.optimizers.kits.full_gradient import LocalGradient, PartitionMissing
from service.optimizers.kits.one_vs_rest import class_plan_of
from service.optimizers.kits.planning import plan_job
from service.workers import data_parallel, partition_row_map
from service.workers.data_parallel import PartitionHolder
from service.workers.partition_row_map import PartitionOracle, mapped_gradient_sum

K, WIDTH, N = 3, 6, 900
BOUNDS = (0, 310, 620, N)
TARGET = PrivacyTarget(1.0, 1e-6)


def _rows(rng: np.random.Generator, n: int = N) -> np.ndarray:
    X = rng.normal(size=(n, WIDTH - 1)) * 0.2 + 0.5
    X *= math.sqrt(1.0 - 1.0 / WIDTH) / np.linalg.norm(X, axis=1, keepdims=True).max()
    return np.column_stack([X, np.full(n, 1.0 / math.sqrt(WIDTH))])


@pytest.fixture
def holders() -> Iterator[list[PartitionHolder]]:
    made: list[PartitionHolder] = []
    yield made
    for holder in made:
        holder.release()


def _held(
    holders: list[PartitionHolder],
    loss: Any,
    X: np.ndarray,
    Y: np.ndarray,
    bounds: tuple[int, ...] = BOUNDS,
) -> Any:
    """The partitions of (X, Y) cut at ``bounds`` held in this process's store, and the actors'
    ``call``."""
    for holder in holders:
        holder.release()
    holders.clear()
    for p, (a, b) in enumerate(zip(bounds, bounds[1:], strict=False)):
        holder = object.__new__(PartitionHolder)
        holder._key, holder._loss, holder._rows, holder._mapped = f"t-p{p}", loss, b - a, None
        with data_parallel._STORE_LOCK:
            data_parallel._STORE[holder._key] = (X[a:b].copy(), Y[..., a:b].copy())
        holders.append(holder)

    def call(method: str, *args: Any) -> list[Any]:
        return [getattr(holder, method)(*args) for holder in holders]

    return call


def _quiet(_: int) -> None:
    return None


@pytest.mark.parametrize("kind", ["binary", "joint"])
def test_a_partitioned_fit_maps_in_place_and_equals_fit(
    holders: list[PartitionHolder], kind: str
) -> None:
    rng = np.random.default_rng(1)
    X = _rows(rng)
    if kind == "binary":
        loss: Any = LogisticLoss(l2=1e-3, fit_intercept=True)
        y = np.where(X[:, 0] + 0.05 * rng.normal(size=N) > X[:, 0].mean(), 1.0, -1.0)
        d = WIDTH
    else:
        loss = MultinomialLoss(l2=1e-3, classes=K, fit_intercept=True)
        y = np.argmax(X[:, :K] + 0.05 * rng.normal(size=(N, K)), axis=1).astype(float)
        d = K * WIDTH
    optimizer = DPAGDAveraged()
    plan = optimizer.plan(optimizer.Params(), loss, N, d, TARGET)
    assert plan.hyperparameters["row_map_share"] > 0.0
    local = optimizer.fit(plan, loss, X, y, np.random.default_rng(4), _quiet)
    call = _held(holders, loss, X, y)
    oracle = PartitionOracle(loss, N, WIDTH, 3, call, None)
    assert isinstance(oracle, RowMappable)
    split = optimizer.fit_oracle(plan, loss, oracle, np.random.default_rng(4), _quiet)
    np.testing.assert_allclose(split, local, rtol=1e-9, atol=1e-12)
    # the share was spent: every partition's rows were replaced by their mapped rows
    assert all(holder._mapped is not None for holder in holders)
    held = np.concatenate([data_parallel._STORE[h._key][0] for h in holders])
    np.testing.assert_allclose(held, mapped_rows(X, holders[0]._mapped), rtol=1e-14)
    with pytest.raises(ValueError):  # the plain oracle never answers on mapped rows
        oracle.gradient(np.zeros(d))
    with pytest.raises(ValueError):
        oracle.row_sum()
    with pytest.raises(ValueError):
        holders[0].map_rows(holders[0]._mapped)
    plain = optimizer.fit_oracle(
        plan, loss, LocalGradient(loss, X, y), np.random.default_rng(4), _quiet
    )
    assert not np.allclose(plain, local, rtol=1e-3)


def test_one_vs_rest_maps_on_the_fly_and_equals_fit(holders: list[PartitionHolder]) -> None:
    rng = np.random.default_rng(2)
    X = _rows(rng)
    labels = np.argmax(X[:, :K] + 0.05 * rng.normal(size=(N, K)), axis=1)
    Y = np.where(labels[None, :] == np.arange(K)[:, None], 1.0, -1.0)
    spec = {"type": "logistic_regression", "l2": 1e-3, "fit_intercept": True}
    planned = plan_job(
        parse_model_spec(spec), "dp_agd_averaged", {}, N, WIDTH - 1, TARGET, classes=K
    )
    class_plan, loss, optimizer = class_plan_of(planned.plan), planned.loss, planned.optimizer
    assert class_plan is not None and class_plan.hyperparameters["row_map_share"] > 0.0
    rng_local = np.random.default_rng(6)
    local = np.stack(
        [optimizer.fit(class_plan, loss, X, Y[k], rng_local, _quiet) for k in range(K)]
    )
    call = _held(holders, loss, X, Y)
    rng_split = np.random.default_rng(6)
    split = np.stack(
        [
            optimizer.fit_oracle(
                class_plan, loss, PartitionOracle(loss, N, WIDTH, 3, call, k), rng_split, _quiet
            )
            for k in range(K)
        ]
    )
    np.testing.assert_allclose(split, local, rtol=1e-9, atol=1e-12)
    assert all(holder._mapped is None for holder in holders)  # the encoded rows stay
    held = np.concatenate([data_parallel._STORE[h._key][0] for h in holders])
    np.testing.assert_array_equal(held, X)


def test_the_on_the_fly_gradient_spans_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(partition_row_map, "MAP_BLOCK_BYTES", 8 * WIDTH * 37)  # 37 rows a block
    rng = np.random.default_rng(3)
    X = _rows(rng)
    y = np.where(rng.random(N) < 0.5, 1.0, -1.0)
    loss = LogisticLoss(l2=1e-3, gradient_clip=0.5, fit_intercept=True)
    mapping = row_map(X.mean(axis=0) + rng.normal(size=WIDTH) * 0.01, 0.01)
    w = rng.normal(size=WIDTH)
    expected = (LocalGradient(loss, mapped_rows(X, mapping), y).gradient(w) - 1e-3 * w) * N
    got = mapped_gradient_sum(loss, w, X, y, mapping)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
    copy = X.copy()
    partition_row_map.map_in_place(copy, mapping)
    np.testing.assert_allclose(copy, mapped_rows(X, mapping), rtol=1e-15, atol=0)


def test_the_mapped_gram_matrix_equals_the_single_process_one(
    holders: list[PartitionHolder], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(partition_row_map, "MAP_BLOCK_BYTES", 8 * WIDTH * 37)  # 37 rows a block
    rng = np.random.default_rng(5)
    X = _rows(rng)
    y = np.where(rng.random(N) < 0.5, 1.0, -1.0)
    loss = LogisticLoss(l2=1e-3, fit_intercept=True)
    mapping = row_map(X.mean(axis=0) + rng.normal(size=WIDTH) * 0.05, 0.01)
    other = row_map(X.mean(axis=0), 0.0)
    expected = gram_of_rows(mapped_rows(X, mapping))
    for label_row in (0, None):  # on the fly (one-vs-rest's class 0), then in place
        call = _held(holders, loss, X, y[None, :])
        oracle = PartitionOracle(loss, N, WIDTH, 3, call, label_row)
        assert isinstance(oracle, GramOracle)
        with pytest.raises(ValueError):  # the encoded rows' Gram matrix is never answered
            oracle.gram()
        gram = oracle.mapped(mapping).gram()
        assert gram.shape == (WIDTH, WIDTH)
        np.testing.assert_allclose(gram, expected, rtol=1e-12)
        assert all((h._mapped is None) == (label_row is not None) for h in holders)
    with pytest.raises(ValueError):  # rows mapped in place by another mapping
        PartitionOracle(loss, N, WIDTH, 3, call, None, other).gram()


def _joint_labels(rng: np.random.Generator, X: np.ndarray) -> np.ndarray:
    """Class indices of X's rows, about 5 % with no declared class (−1: m_i = 0)."""
    y = np.argmax(X[:, :K] + 0.05 * rng.normal(size=(X.shape[0], K)), axis=1).astype(float)
    return np.where(rng.random(X.shape[0]) < 0.05, -1.0, y)


def test_a_partitioned_refresh_sums_the_curvature_terms_and_equals_fit(
    holders: list[PartitionHolder],
) -> None:
    n = 20_000
    rng = np.random.default_rng(8)
    X = _rows(rng, n)
    y = _joint_labels(rng, X)
    loss = MultinomialLoss(l2=1e-3, classes=K, fit_intercept=True)
    optimizer = DPAGDAveraged()
    plan = optimizer.plan(optimizer.Params(), loss, n, K * WIDTH, TARGET)
    hyper = plan.hyperparameters
    assert hyper["curvature_form"] == "gram" and hyper["curvature_refresh_share"] > 0.0
    local = optimizer.fit(plan, loss, X, y, np.random.default_rng(4), _quiet)
    held = _held(holders, loss, X, y, (0, 6_000, 13_001, n))
    asked: list[tuple[Any, ...]] = []

    def call(method: str, *args: Any) -> list[Any]:
        answers = held(method, *args)
        if method == "mapped_curvature_terms":
            asked.append((*args, answers))
        return answers

    oracle = PartitionOracle(loss, n, WIDTH, 3, call, None)
    split = optimizer.fit_oracle(plan, loss, oracle, np.random.default_rng(4), _quiet)
    assert len(asked) == 1  # the refresh ran, once, on the partitions
    mapping, w, basis, answers = asked[0]
    assert all(holder._mapped is mapping for holder in holders)  # c over the rows mapped in place
    summed = answers[0] + answers[1] + answers[2]
    expected = curvature_terms(loss, w, mapped_rows(X, mapping), y, basis)
    assert summed.shape == (K, WIDTH, WIDTH)
    assert np.all(np.diagonal(expected, axis1=1, axis2=2) > 0.0)
    np.testing.assert_allclose(summed, expected, rtol=1e-10)
    np.testing.assert_allclose(split, local, rtol=1e-9, atol=1e-12)


def test_the_mapped_curvature_terms_equal_the_single_process_ones(
    holders: list[PartitionHolder], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(partition_row_map, "MAP_BLOCK_BYTES", 8 * WIDTH * 37)  # 37 rows a block
    rng = np.random.default_rng(9)
    X = _rows(rng)
    y = _joint_labels(rng, X)
    loss = MultinomialLoss(l2=1e-3, classes=K, fit_intercept=True)
    mapping = row_map(X.mean(axis=0) + rng.normal(size=WIDTH) * 0.05, 0.01)
    other = row_map(X.mean(axis=0), 0.0)
    w = rng.normal(size=K * WIDTH)
    basis = np.linalg.qr(rng.normal(size=(WIDTH, WIDTH)))[0]
    expected = curvature_terms(loss, w, mapped_rows(X, mapping), y, basis)
    call = _held(holders, loss, X, y)
    plain = PartitionOracle(loss, N, WIDTH, 3, call, None)
    assert isinstance(plain, CurvatureTermsOracle)
    with pytest.raises(ValueError):  # the encoded rows' terms are never answered
        plain.curvature_terms(w, basis)
    with pytest.raises(ValueError):  # nor a one-vs-rest class's
        PartitionOracle(loss, N, WIDTH, 3, call, 0, mapping).curvature_terms(w, basis)
    # on the fly (the rows not mapped in place), then in place
    fly = PartitionOracle(loss, N, WIDTH, 3, call, None, mapping).curvature_terms(w, basis)
    assert all(holder._mapped is None for holder in holders)
    np.testing.assert_allclose(fly, expected, rtol=1e-10)
    terms = plain.mapped(mapping).curvature_terms(w, basis)
    assert all(holder._mapped is not None for holder in holders)
    assert terms.shape == (K, WIDTH, WIDTH)
    np.testing.assert_allclose(terms, expected, rtol=1e-10)
    with pytest.raises(ValueError):  # rows mapped in place by another mapping
        PartitionOracle(loss, N, WIDTH, 3, call, None, other).curvature_terms(w, basis)

    def wrong_shape(method: str, *args: Any) -> list[Any]:
        return [np.zeros((K, WIDTH)), np.zeros((K, WIDTH)), np.zeros((WIDTH, K))]

    with pytest.raises(PartitionMissing):
        PartitionOracle(loss, N, WIDTH, 3, wrong_shape, None, mapping).curvature_terms(w, basis)
