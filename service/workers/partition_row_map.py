r"""``dp_agd_averaged``'s row map over a data-parallel job's partitions
(:mod:`service.workers.data_parallel`; the mechanism and its proof:
:mod:`service.optimizers.kits.dp_agd_row_map`).

Driver side, :class:`PartitionOracle`: the summed-gradient oracle of the partitions, with the
capability :class:`~service.optimizers.kits.dp_agd_row_map.RowMappable`:

- ``row_sum()``: every partition's column sums Σ_{i ∈ p} x_i (:func:`column_sums`, on its
  worker), added in partition order — a w-vector per worker, never a row; the optimizer divides
  by the public n and adds the noise in the driver.
- ``deviation_sum(centre, intercept)`` (the capability
  :class:`~service.optimizers.kits.column_scales.ColumnScalable`): every partition's
  Σ_{i ∈ p} a(x_i) (:func:`partition_deviation_sum`, on its worker, block by block), added in
  partition order — a (w − 1)-vector per worker, never a row; the noise is added in the driver.
- ``mapped(mapping)``: the oracle over φ(x_i) = P x_i/‖P x_i‖ (``mapped_rows``, computed on
  each worker from the public mapping, row by row: the same values as the single-process fit's
  up to the row norm's summation order).
- ``gram()`` (on the mapped oracle only; the capability
  :class:`~service.optimizers.kits.curvature_step.GramOracle`): every partition's
  G_p = Σ_{i ∈ p} φ_i φ_iᵀ (:func:`partition_gram`, on its worker), added in partition order —
  a (w × w) matrix per worker, never a row. It is never released: it is only the input of
  ``release_top_eigenvalue`` (its top eigenvalue plus noise, in the driver). Equal to
  ``gram_of_rows(mapped_rows(X, mapping))`` on the whole rows up to summation order.
- ``curvature_terms(w, basis)`` (on the joint model's mapped oracle only; the capability
  :class:`~service.optimizers.kits.curvature_refresh.CurvatureTermsOracle`): every partition's
  B_p = Σ_{i ∈ p} m_i p_ik (1 − p_ik) r_i r_iᵀ, r_i = Qᵀφ_i (:func:`partition_curvature_terms`,
  on its worker, with its class-index labels), added in partition order — K symmetric w × w
  blocks per worker,
  never a row. It is never released: it is only the input of ``release_curvature``. Equal to
  ``curvature_terms(loss, w, mapped_rows(X, mapping), labels, basis)`` up to summation order.

Worker memory. A partition is planned as its encoded rows plus the steps' temporaries
(``partitions.encoded_bytes``, ``worker_overhead``: the reader's allowance, ≥ 64 MiB, is free
again while steps run); a mapped copy beside the rows would double the partition, which the
plan does not hold. So no copy is ever made:

- a binary or joint multinomial job (``label_row`` None: the job's one fit) **replaces its rows
  in place** by φ(x) (:func:`map_in_place`, block by block), once, before its steps: after the
  mean's release nothing reads the encoded rows again, and a restarted round reloads them. The
  partition then answers only the mapped oracle (the plain one raises, never a wrong sum);
- one-vs-rest (``label_row`` k) runs K fits, each with its own mean and map, on the same
  encoded rows, so the rows stay and each gradient maps them on the fly, block by block
  (:func:`mapped_gradient_sum`): about twice a step's arithmetic, no memory beyond a block.
  The Gram matrix and the curvature terms follow the same two states: over the rows mapped in
  place, else over each block's mapped rows (:func:`mapped_gram`).

Blocks of :data:`MAP_BLOCK_BYTES` keep the temporaries (the block, its map and norms) a few
MiB — well inside the steps' allowance.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from service.models.base import FloatArray, Loss, parameter_count
from service.optimizers.kits.column_scales import deviation_sum
from service.optimizers.kits.curvature_refresh import curvature_terms
from service.optimizers.kits.curvature_step import gram_of_rows
from service.optimizers.kits.dp_agd_row_map import RowMap, mapped_rows
from service.optimizers.kits.full_gradient import (
    GradientOracle,
    PartitionMissing,
    SummedGradient,
    partial_gradient_sum,
    sum_in_order,
)

__all__ = [
    "MAP_BLOCK_BYTES",
    "PartitionOracle",
    "column_sums",
    "map_in_place",
    "mapped_gradient_sum",
    "mapped_gram",
    "partition_curvature_terms",
    "partition_deviation_sum",
    "partition_gram",
    "same_mapping",
]

#: Bytes of a block of rows mapped at once on a worker (its temporaries are about twice this).
MAP_BLOCK_BYTES = 2 << 20


def _blocks(X: FloatArray) -> list[slice]:
    """Row blocks of at most :data:`MAP_BLOCK_BYTES` (sizes from the public shape only)."""
    rows = max(1, MAP_BLOCK_BYTES // (8 * max(1, int(X.shape[1]))))
    return [slice(start, start + rows) for start in range(0, int(X.shape[0]), rows)]


def column_sums(X: FloatArray) -> FloatArray:
    """Σ_i x_i over a partition's rows (the row map's mean, step 1)."""
    total: FloatArray = np.asarray(X.sum(axis=0), dtype=np.float64)
    return total


def partition_deviation_sum(X: FloatArray, centre: FloatArray, intercept: float) -> FloatArray:
    """Σ_i a(x_i) over a partition's encoded rows (``column_scales.deviation_sum``), block by
    block."""
    total = np.zeros(int(X.shape[1]) - 1, dtype=np.float64)
    for block in _blocks(X):
        total += deviation_sum(X[block], centre, intercept)
    return total


def map_in_place(X: FloatArray, mapping: RowMap) -> None:
    """Replace every row x of ``X`` by φ(x) (``mapped_rows``), block by block."""
    for block in _blocks(X):
        X[block] = mapped_rows(X[block], mapping)


def mapped_gradient_sum(
    loss: Loss, w: FloatArray, X: FloatArray, y: FloatArray, mapping: RowMap
) -> FloatArray:
    """Σ_i ∇ℓ(w; φ(x_i), y_i) with φ applied block by block (``X`` unchanged)."""
    total = np.zeros(parameter_count(loss, int(X.shape[1])), dtype=np.float64)
    for block in _blocks(X):
        total += partial_gradient_sum(loss, w, mapped_rows(X[block], mapping), y[block])
    return total


def mapped_gram(X: FloatArray, mapping: RowMap) -> FloatArray:
    """Σ_i φ(x_i) φ(x_i)ᵀ (w × w) with φ applied block by block (``X`` unchanged)."""
    width = int(X.shape[1])
    total: FloatArray = np.zeros((width, width), dtype=np.float64)
    for block in _blocks(X):
        total += gram_of_rows(mapped_rows(X[block], mapping))
    return total


def partition_gram(X: FloatArray, mapping: RowMap, in_place: RowMap | None) -> FloatArray:
    """A partition's Σ_i φ_i φ_iᵀ under ``mapping``: ``gram_of_rows(X)`` when its rows were
    mapped in place by that mapping (``in_place``), else :func:`mapped_gram`. ``ValueError`` if
    they were mapped in place by another mapping."""
    if in_place is not None:
        if not same_mapping(mapping, in_place):
            raise ValueError("this partition's rows were mapped for another oracle")
        return gram_of_rows(X)
    return mapped_gram(X, mapping)


def partition_curvature_terms(
    loss: Loss,
    X: FloatArray,
    labels: FloatArray,
    mapping: RowMap,
    in_place: RowMap | None,
    w: FloatArray,
    basis: FloatArray,
) -> FloatArray:
    """A partition's B_p = Σ_i m_i p_ik (1 − p_ik) r_i r_iᵀ (K × w × w; ``curvature_terms``, the
    joint ``loss``'s class indices ``labels``) under ``mapping``, at the flat weights ``w`` and
    the basis Q: over ``X`` when its rows were mapped in place by that mapping (``in_place``),
    else over each block's mapped rows (``X`` unchanged). ``ValueError`` if they were mapped in
    place by another mapping."""
    if in_place is not None:
        if not same_mapping(mapping, in_place):
            raise ValueError("this partition's rows were mapped for another oracle")
        return curvature_terms(loss, w, X, labels, basis)
    total = curvature_terms(loss, w, X[:0], labels[:0], basis)  # zeros, the checked shape
    for block in _blocks(X):
        total += curvature_terms(loss, w, mapped_rows(X[block], mapping), labels[block], basis)
    return total


def same_mapping(a: RowMap, b: RowMap) -> bool:
    """Whether two public mappings are the same map (P and the column scales)."""
    same_scales = (a.scales is None and b.scales is None) or (
        a.scales is not None and b.scales is not None and np.array_equal(a.scales, b.scales)
    )
    return a.intercept == b.intercept and np.array_equal(a.centre, b.centre) and same_scales


class PartitionOracle(SummedGradient):
    """The partitions' summed-gradient oracle (``label_row``: one-vs-rest's class, or None),
    over the encoded rows or, with ``mapping``, over their mapped rows (module docstring).

    ``call(method, *args)`` calls ``method`` on every partition's actor and returns the answers
    in partition order (raising when a worker is lost); the actors answer ``row_sum()``,
    ``deviation_sum(centre, intercept)``, ``map_rows(mapping)``,
    ``partial_gradient(w, label_row, mapping)``, ``mapped_gram(mapping)`` and
    ``mapped_curvature_terms(mapping, w, basis)``. Every instance has :meth:`gram` and
    :meth:`curvature_terms`, but only a mapped one answers them (the plain one raises, as the
    mapped one's :meth:`row_sum` does: never a wrong sum)."""

    def __init__(
        self,
        loss: Loss,
        n: int,
        width: int,
        parts: int,
        call: Callable[..., Sequence[Any]],
        label_row: int | None,
        mapping: RowMap | None = None,
    ) -> None:
        def sums(w: FloatArray) -> Sequence[FloatArray]:
            return call("partial_gradient", w, label_row, mapping)

        super().__init__(loss, n, parameter_count(loss, width), parts, sums)
        self._loss_of = loss
        self._width = width
        self._count = parts
        self._call = call
        self._label_row = label_row
        self._mapping = mapping

    def row_sum(self) -> FloatArray:
        """Σ_i x_i: the partitions' column sums added in partition order."""
        if self._mapping is not None:
            raise ValueError("the row sum is of the encoded rows")
        return sum_in_order(self._call("row_sum"), self._count, self._width, "row sum")

    def deviation_sum(self, centre: FloatArray, intercept: float) -> FloatArray:
        """Σ_i a(x_i) over the encoded rows (the column scales' step 1): the partitions' sums
        added in partition order."""
        if self._mapping is not None:
            raise ValueError("the deviation sum is of the encoded rows")
        answers = self._call("deviation_sum", centre, intercept)
        return sum_in_order(answers, self._count, self._width - 1, "deviation sum")

    def gram(self) -> FloatArray:
        """G = Σ_i φ_i φ_iᵀ over the mapped rows (w × w): the partitions' Gram matrices
        (:func:`partition_gram`, on their workers) added in partition order. Never released:
        only the input of ``release_top_eigenvalue``. ``ValueError`` on the encoded rows."""
        if self._mapping is None:
            raise ValueError("the Gram matrix is of the mapped rows")
        width = self._width
        parts = [np.asarray(g, dtype=np.float64) for g in self._call("mapped_gram", self._mapping)]
        if any(part.shape != (width, width) for part in parts):
            raise PartitionMissing("a partition's Gram matrix has the wrong shape")
        flat = [part.reshape(-1) for part in parts]
        total = sum_in_order(flat, self._count, width * width, "Gram matrix")
        return total.reshape(width, width)

    def curvature_terms(self, w: FloatArray, basis: FloatArray) -> np.ndarray:
        """B = Σ_i m_i p_ik (1 − p_ik) r_i r_iᵀ over the mapped rows (K × w × w) at the flat joint
        weights ``w`` and the basis Q: the partitions' B_p (:func:`partition_curvature_terms`,
        on their workers) added in partition order. Never released: only the input of
        ``release_curvature``. ``ValueError`` on the encoded rows or a one-vs-rest class."""
        if self._mapping is None:
            raise ValueError("the curvature terms are of the mapped rows")
        if self._label_row is not None:
            raise ValueError("the curvature terms are of the joint model's rows")
        shape = (parameter_count(self._loss_of, 1), self._width, self._width)
        answers = self._call("mapped_curvature_terms", self._mapping, w, basis)
        parts = [np.asarray(c, dtype=np.float64) for c in answers]
        if any(part.shape != shape for part in parts):
            raise PartitionMissing("a partition's curvature terms have the wrong shape")
        flat = [part.reshape(-1) for part in parts]
        total = sum_in_order(flat, self._count, int(np.prod(shape)), "curvature terms")
        return total.reshape(shape)

    def mapped(self, mapping: RowMap) -> GradientOracle:
        """The oracle over the mapped rows: mapped in place now for the job's one fit
        (``label_row`` None), on the fly at every gradient for a one-vs-rest class."""
        if self._mapping is not None:
            raise ValueError("the mapped rows are mapped from the encoded rows only")
        if self._label_row is None:  # the job's one fit: the rows replaced in place, once
            mapped = self._call("map_rows", mapping)
            if len(mapped) != self._count:
                raise PartitionMissing("a partition was not mapped")
        return PartitionOracle(
            self._loss_of, self.n, self._width, self._count, self._call, self._label_row, mapping
        )
