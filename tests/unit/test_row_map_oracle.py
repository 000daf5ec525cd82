"""``DPAGDAveraged.fit_oracle`` runs the row map through an oracle that can map its rows
(``RowMappable``: ``row_sum`` and ``mapped``), as the data-parallel and in-database oracles do.

(a) For a fixed generator it releases ``fit``'s model on the same rows (binary and the joint
    multinomial model), within summation rounding: the same mean release (one draw per entry,
    first), the same steps on the mapped rows, the same fold.
(b) The mean's share is spent: the oracle's rows are summed once and mapped once, and the model
    differs from the plain steps' (an oracle without the capability).
(c) Refusals: a row sum of the wrong width, a mapped oracle of the wrong shape, a plan without
    noise on the mean.
(d) The curvature step (the joint model's default here): the mapped oracle's ``gram()``
    (``GramOracle``, summed part by part) gives ``fit``'s release and its shorter run; a mapped
    oracle without it gets the plan's public steps (the curvature's share unspent).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import pytest

from service.models.base import FloatArray, Loss
from service.models.logistic import LogisticLoss
from service.models.multinomial import MultinomialLoss
from service.optimizers.dp_agd_averaged import DPAGDAveraged, DPAGDAveragedParams
from service.optimizers.kits.base import PrivacyTarget, ReleasePlan
from service.optimizers.kits.curvature_refresh import curvature_terms
from service.optimizers.kits.curvature_step import GramOracle, gram_of_rows
from service.optimizers.kits.dp_agd_row_map import RowMap, RowMappable, mapped_rows
from service.optimizers.kits.full_gradient import GradientOracle, LocalGradient, SummedGradient
from service.optimizers.kits.full_gradient import partial_gradient_sum as part_sum

K, WIDTH, N = 4, 6, 400
TARGET = PrivacyTarget(1.0, 1e-5)


class MappableSplit:
    """The oracle of rows split in three parts (gradients summed part by part, in order) that
    sums and maps its rows part by part: what the partitioned and in-database oracles do."""

    def __init__(
        self,
        loss: Loss,
        X: np.ndarray,
        y: np.ndarray,
        bounds: tuple[int, ...],
        gram: bool = True,
        terms: bool = True,
    ) -> None:
        self._loss, self._X, self._y, self._gram, self._terms = loss, X, y, gram, terms
        self._parts = list(zip((0, *bounds), (*bounds, X.shape[0]), strict=True))
        self.summed = 0
        self.mappings: list[RowMap] = []
        self._inner = self._summed(X)

    def _summed(self, X: np.ndarray) -> SummedGradient:
        def sums(w: FloatArray) -> list[FloatArray]:
            return [part_sum(self._loss, w, X[a:b], self._y[a:b]) for a, b in self._parts]

        dimension = LocalGradient(self._loss, X, self._y).dimension
        return SummedGradient(self._loss, X.shape[0], dimension, len(self._parts), sums)

    @property
    def n(self) -> int:
        return self._inner.n

    @property
    def dimension(self) -> int:
        return self._inner.dimension

    def gradient(self, w: FloatArray) -> FloatArray:
        return self._inner.gradient(w)

    def row_sum(self) -> np.ndarray:
        self.summed += 1
        total = np.zeros(self._X.shape[1])
        for a, b in self._parts:
            total += self._X[a:b].sum(axis=0)
        return total

    def mapped(self, mapping: RowMap) -> GradientOracle:
        self.mappings.append(mapping)
        rows = np.concatenate([mapped_rows(self._X[a:b], mapping) for a, b in self._parts])
        summed = self._summed(rows)
        if not self._gram:
            return summed
        parts = self._parts

        loss, labels = self._loss, self._y

        class WithGram(SummedGradient):
            def gram(self) -> np.ndarray:
                return sum((gram_of_rows(rows[a:b]) for a, b in parts), np.zeros((WIDTH, WIDTH)))

            def curvature_terms(self, w: FloatArray, basis: FloatArray) -> np.ndarray:
                terms = [curvature_terms(loss, w, rows[a:b], labels[a:b], basis) for a, b in parts]
                return sum(terms[1:], terms[0])

        class GramOnly(SummedGradient):
            gram = WithGram.gram

        summed.__class__ = WithGram if self._terms else GramOnly
        return summed


def _rows(rng: np.random.Generator, n: int) -> np.ndarray:
    """Rows of norm ≤ 1 far from the origin (a common offset the centre removes), the last
    column the intercept's constant 1/√WIDTH."""
    X = rng.normal(size=(n, WIDTH - 1)) * 0.2 + 0.6
    X *= math.sqrt(1.0 - 1.0 / WIDTH) / np.linalg.norm(X, axis=1, keepdims=True).max()
    return np.column_stack([X, np.full(n, 1.0 / math.sqrt(WIDTH))])


def _case(kind: str) -> tuple[Loss, ReleasePlan, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(11)
    X = _rows(rng, N)
    loss: Loss
    if kind == "binary":
        loss = LogisticLoss(l2=0.01, gradient_clip=0.5, fit_intercept=True)
        y = np.where(X[:, 0] + 0.1 * rng.normal(size=N) > X[:, 0].mean(), 1.0, -1.0)
        d = WIDTH
    else:
        loss = MultinomialLoss(l2=0.01, classes=K, gradient_clip=0.5, fit_intercept=True)
        y = np.argmax(X[:, :K] + 0.05 * rng.normal(size=(N, K)), axis=1).astype(float)
        d = K * WIDTH
    plan = DPAGDAveraged().plan(DPAGDAveragedParams(), loss, N, d, TARGET)
    assert plan.hyperparameters["row_map_share"] > 0.0
    return loss, plan, X, y


def _quiet(_: int) -> None:
    return None


@pytest.mark.parametrize("kind", ["binary", "joint"])
def test_fit_oracle_releases_fits_model_through_a_mappable_oracle(kind: str) -> None:
    loss, plan, X, y = _case(kind)
    optimizer = DPAGDAveraged()
    local = optimizer.fit(plan, loss, X, y, np.random.default_rng(5), _quiet)
    oracle = MappableSplit(loss, X, y, (97, 250))
    assert isinstance(oracle, RowMappable)
    steps: list[int] = []
    local_steps: list[int] = []
    optimizer.fit(plan, loss, X, y, np.random.default_rng(5), local_steps.append)
    split = optimizer.fit_oracle(plan, loss, oracle, np.random.default_rng(5), steps.append)
    assert steps == local_steps and steps[-1] <= plan.total_steps
    np.testing.assert_allclose(split, local, rtol=1e-9, atol=1e-12 * np.abs(local).max())
    # (b) the share is spent: the rows summed once, mapped once by a centre that is not 0
    assert oracle.summed == 1 and len(oracle.mappings) == 1
    assert np.linalg.norm(oracle.mappings[0].centre) > 0.1
    plain = optimizer.fit_oracle(
        plan, loss, LocalGradient(loss, X, y), np.random.default_rng(5), _quiet
    )
    assert not np.allclose(plain, local, rtol=1e-3)  # without the capability: the plain steps


def test_another_generator_state_gives_another_release() -> None:
    """The equality above is not vacuous: the mean's draw comes first, so shifting the
    generator by one draw changes the release."""
    loss, plan, X, y = _case("binary")
    optimizer = DPAGDAveraged()
    rng = np.random.default_rng(5)
    rng.normal()
    shifted = optimizer.fit_oracle(plan, loss, MappableSplit(loss, X, y, (50,)), rng, _quiet)
    local = optimizer.fit(plan, loss, X, y, np.random.default_rng(5), _quiet)
    assert not np.allclose(shifted, local, rtol=1e-6)


class _Wrong(MappableSplit):
    def __init__(self, *args: Any, width: int | None = None, shape: bool = False) -> None:
        super().__init__(*args)
        self._width, self._shape = width, shape

    def row_sum(self) -> np.ndarray:
        total = super().row_sum()
        return total if self._width is None else np.zeros(self._width)

    def mapped(self, mapping: RowMap) -> GradientOracle:
        if self._shape:
            return LocalGradient(self._loss, self._X[:-1], self._y[:-1])
        return super().mapped(mapping)


def test_fit_oracle_refuses_a_wrong_row_sum_or_mapped_shape_or_a_silent_mean() -> None:
    loss, plan, X, y = _case("joint")
    optimizer = DPAGDAveraged()
    for oracle in (
        _Wrong(loss, X, y, (10,), width=WIDTH - 1),
        _Wrong(loss, X, y, (10,), width=K * WIDTH),
        _Wrong(loss, X, y, (10,), shape=True),
    ):
        with pytest.raises(ValueError):
            optimizer.fit_oracle(plan, loss, oracle, np.random.default_rng(0), _quiet)
    silent = dataclasses.replace(
        plan, hyperparameters={**plan.hyperparameters, "mean_noise_std": 0.0}
    )
    with pytest.raises(ValueError):
        optimizer.fit_oracle(
            silent, loss, MappableSplit(loss, X, y, (10,)), np.random.default_rng(0), _quiet
        )


def test_the_curvature_step_needs_the_gram_capability_else_the_public_steps_run() -> None:
    """(d) The joint plan carries the curvature step; with ``gram()`` the run on rows spread
    over every direction (λ⁺ < 1) is shorter than the plan's T and equals ``fit``'s; without it
    the plan's T public steps run, a different release."""
    loss, plan, _, _ = _case("joint")
    assert plan.hyperparameters["curvature_share"] > 0.0
    rng = np.random.default_rng(3)
    spread = rng.normal(size=(N, WIDTH - 1))
    spread *= 0.95 / np.linalg.norm(spread, axis=1, keepdims=True).max()
    X = np.column_stack([spread, np.full(N, 0.3 / math.sqrt(WIDTH))])
    y = np.argmax(X[:, :K] + 0.05 * rng.normal(size=(N, K)), axis=1).astype(float)
    optimizer = DPAGDAveraged()
    oracle = MappableSplit(loss, X, y, (97, 250))
    assert isinstance(oracle.mapped(RowMap(np.zeros(WIDTH), 0.3 / math.sqrt(WIDTH))), GramOracle)
    counted: list[int] = []
    shorter = optimizer.fit_oracle(
        plan, loss, MappableSplit(loss, X, y, (97, 250)), np.random.default_rng(5), counted.append
    )
    local_steps: list[int] = []
    local = optimizer.fit(plan, loss, X, y, np.random.default_rng(5), local_steps.append)
    assert counted == local_steps and counted[-1] < plan.total_steps
    np.testing.assert_allclose(shorter, local, rtol=1e-9, atol=1e-12 * np.abs(local).max())
    public: list[int] = []
    plain = optimizer.fit_oracle(
        plan, loss, MappableSplit(loss, X, y, (97, 250), gram=False), np.random.default_rng(5),
        public.append,
    )  # fmt: skip
    assert public[-1] == plan.total_steps
    assert not np.allclose(plain, shorter, rtol=1e-3)
