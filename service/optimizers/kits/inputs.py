"""The checks every optimizer's ``fit`` makes on the rows before using them, and the one form
the full-gradient loops take the rows in.

The privacy proofs assume the rows the plan was made for: n rows of dimension d (public), finite
values, ‖x‖₂ ≤ 1 and labels admissible for the loss. The loader guarantees all of it; these
checks make a broken contract fail loudly instead of silently voiding the sensitivity analysis.
Messages never contain data values.

One code path for every dataset of a schema (docs/privacy-model.md, "One code path per
schema"). Everything here that shapes the computation — the rows' representation (which columns
are dense, which sparse), the row order, the row blocks of the BLAS products, whether a row is
rescaled — is a function of n, d and the declared schema's :class:`ColumnLayout` only, never of
the values: the worker passes the layout down with the rows (:func:`laid_out`), and no branch
here looks at a value except to refuse rows that break the loader's contract.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy import sparse

from service.models.base import FloatArray, Loss, parameter_count

__all__ = [
    "BLAS_BLOCK",
    "ROW_NORM_SLACK",
    "SPARSE_MIN_WIDTH",
    "ColumnLayout",
    "GradientRows",
    "LaidOutRows",
    "Rows",
    "checked_data",
    "checked_rows",
    "encoder_layout",
    "gradient_rows",
    "laid_out",
    "layout_of",
    "row_blocks",
    "row_divisors",
]

#: Rows may exceed ‖x‖ = 1 by floating-point rounding only; beyond this the loader broke its
#: contract.
ROW_NORM_SLACK = 1e-6


def _checked_shapes(loss: Loss, X: Any, y: Any, n: int, d: int) -> tuple[FloatArray, FloatArray]:
    """Shapes, finiteness and labels as the plan assumes, or ``ValueError`` (no data values):
    (n, width) / (n,) with ``d`` the parameter count — the row width for a linear model
    (:func:`~service.models.base.parameter_count`) — and admissible labels
    (``loss.check_labels`` when available)."""
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] != n or parameter_count(loss, X.shape[1]) != d:
        raise ValueError("the data's shape differs from the plan's public n and d")
    if y.shape != (n,):
        raise ValueError("labels must be a vector of n values")
    if not (bool(np.all(np.isfinite(X))) and bool(np.all(np.isfinite(y)))):
        raise ValueError("rows and labels must be finite")
    check_labels = getattr(loss, "check_labels", None)
    if check_labels is not None:
        check_labels(y)
    elif not bool(np.all((y == 1.0) | (y == -1.0))):
        raise ValueError("labels must be -1 or +1")
    return X, y


def row_divisors(X: FloatArray) -> FloatArray:
    """max(‖x‖₂, 1) for every row: what each row is divided by so that ‖x‖₂ ≤ 1 holds exactly
    (1.0 — an exact no-op — for every row already within the bound, which is every row the
    encoder writes). ``ValueError`` if a row exceeds the bound by more than rounding
    (:data:`ROW_NORM_SLACK`). Every row is divided, so no branch depends on a value."""
    norms = np.sqrt(np.einsum("ij,ij->i", X, X))
    if not bool(np.all(norms <= 1.0 + ROW_NORM_SLACK)):
        raise ValueError("rows must satisfy ‖x‖₂ ≤ 1 (the loader enforces the bound)")
    return np.maximum(norms, 1.0)


def checked_data(
    loss: Loss, X: FloatArray, y: FloatArray, n: int, d: int
) -> tuple[FloatArray, FloatArray]:
    """The rows and labels the privacy proof assumes, or ``ValueError`` (no data values).

    Shape (n, d) / (n,) as planned, finite, ‖x‖₂ ≤ 1 (every row is divided by
    :func:`row_divisors` — by 1.0 unless rounding put it above the bound — so the work is the
    same whatever the values; the result is a new array) and admissible labels
    (``loss.check_labels`` when available)."""
    X, y = _checked_shapes(loss, X, y, n, d)
    out: FloatArray = X / row_divisors(X)[:, None]
    return out, y


def checked_rows(
    loss: Loss, X: FloatArray, y: FloatArray, n: int, d: int
) -> tuple[GradientRows, FloatArray]:
    """:func:`checked_data` for the full-gradient loops: the checked rows as
    :class:`GradientRows` under the layout ``X`` carries (:func:`layout_of`; every column
    dense without one), built in one pass without a dense copy of ``X``."""
    layout = layout_of(X)
    X, y = _checked_shapes(loss, X, y, n, d)
    return gradient_rows(X, layout, row_divisors(X)), y


#: Categorical blocks at least this wide are stored sparse (one entry per row); narrower ones
#: join the dense block. A function of the declared schema only. Below it a sparse entry (value
#: and index) costs more than the block's dense cells, so with it the sparse copy of any block
#: takes at most the bytes of its dense cells: the rows' representation never needs more memory
#: than one dense copy of X (what ``partitions.SINGLE_PROCESS_SHARE`` plans for).
SPARSE_MIN_WIDTH = 3

#: The dense block's products run on row blocks of at most this many entries: OpenBLAS (numpy's
#: BLAS) starts threads for a matrix-vector product above ≈ 4.6e5 entries (0.3.31), and on a
#: busy machine those threads spin for a core another process holds — measured here under load,
#: a whole fit 2–6× slower than single-threaded. Blocks this size stay on one thread, and in
#: cache.
BLAS_BLOCK = 1 << 16


@dataclass(frozen=True)
class ColumnLayout:
    """The public layout of an encoded matrix, from the declared schema alone
    (:class:`service.data.encoding.Encoder`: features in declared order — a numeric feature one
    column, a categorical feature its one-hot block of ``len(categories)`` columns — then the
    intercept). ``one_hot`` lists the (start, width) of the categorical blocks stored sparse
    (width ≥ :data:`SPARSE_MIN_WIDTH`); every other column is dense. Never computed from
    values."""

    dimension: int
    one_hot: tuple[tuple[int, int], ...] = ()

    def __post_init__(self) -> None:
        end = 0
        for start, width in self.one_hot:
            if start < end or width < 1:
                raise ValueError("one-hot blocks must be disjoint and in column order")
            end = start + width
        if end > self.dimension:
            raise ValueError("a one-hot block lies beyond the layout's dimension")

    @staticmethod
    def of_schema(widths: Sequence[int | None], fit_intercept: bool) -> ColumnLayout:
        """The layout of features of the given one-hot ``widths`` in declared order (``None``:
        a numeric feature), plus the intercept column when fitted."""
        blocks: list[tuple[int, int]] = []
        column = 0
        for width in widths:
            if width is None:
                column += 1
                continue
            if width >= SPARSE_MIN_WIDTH:
                blocks.append((column, int(width)))
            column += int(width)
        return ColumnLayout(column + int(bool(fit_intercept)), tuple(blocks))

    @property
    def dense_columns(self) -> npt.NDArray[np.intp]:
        """The columns stored dense (numeric features, narrow one-hot blocks, the intercept)."""
        dense = np.ones(self.dimension, dtype=bool)
        for start, width in self.one_hot:
            dense[start : start + width] = False
        return np.flatnonzero(dense)

    @property
    def sparse_columns(self) -> npt.NDArray[np.intp]:
        """The columns of the sparse one-hot blocks, in column order."""
        if not self.one_hot:
            return np.zeros(0, dtype=np.intp)
        return np.concatenate([np.arange(s, s + w, dtype=np.intp) for s, w in self.one_hot])


def encoder_layout(encoder: Any) -> ColumnLayout:
    """The :class:`ColumnLayout` of an :class:`~service.data.encoding.Encoder`'s output, from its
    declared features (a feature with ``categories`` is one-hot) and ``fit_intercept``."""
    widths = [
        None if getattr(f, "categories", None) is None else len(f.categories)
        for f in encoder.features
    ]
    layout = ColumnLayout.of_schema(widths, encoder.fit_intercept)
    if layout.dimension != encoder.dimension:
        raise ValueError("the encoder's dimension differs from its declared features'")
    return layout


class LaidOutRows(np.ndarray):  # type: ignore[type-arg]
    """An encoded matrix carrying its public :class:`ColumnLayout` (``layout``) from the worker
    to the optimizers' ``fit`` (:func:`laid_out`). A view: no copy of the rows. Row selections
    (``X[a:b]``, ``X[rows]``) keep the layout; anything of another width drops it; every
    arithmetic result is a plain ``ndarray``. Only :func:`checked_rows` reads the layout."""

    layout: ColumnLayout | None

    def __array_finalize__(self, obj: Any) -> None:
        layout = getattr(obj, "layout", None)
        keeps = layout is not None and self.ndim == 2 and self.shape[1] == layout.dimension
        self.layout = layout if keeps else None

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        inputs = tuple(_plain(x) for x in inputs)
        if "out" in kwargs:
            kwargs["out"] = tuple(_plain(x) for x in kwargs["out"])
        return getattr(ufunc, method)(*inputs, **kwargs)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        return func(*(_plain(a) for a in args), **{k: _plain(v) for k, v in kwargs.items()})


def _plain(value: Any) -> Any:
    if isinstance(value, LaidOutRows):
        return value.view(np.ndarray)
    if isinstance(value, tuple | list):
        return type(value)(_plain(v) for v in value)
    return value


def laid_out(X: FloatArray, layout: ColumnLayout) -> FloatArray:
    """``X`` (n × layout.dimension) as a view carrying ``layout`` (:class:`LaidOutRows`)."""
    if X.ndim != 2 or X.shape[1] != layout.dimension:
        raise ValueError("the rows' width differs from the layout's dimension")
    view = X.view(LaidOutRows)
    view.layout = layout
    return view


def layout_of(X: Any) -> ColumnLayout | None:
    """The layout ``X`` carries (:func:`laid_out`), or ``None``."""
    return getattr(X, "layout", None)


class _Transposed:
    """Xᵀ of :class:`GradientRows`: ``Xᵀ @ c`` as the dense block's column products (by row
    block) plus a CSR product with the one-hot part's transpose (its rows are the sparse
    columns: their number and the total of stored entries, n·C, are public)."""

    def __init__(self, rows: GradientRows) -> None:
        self._rows = rows

    @property
    def shape(self) -> tuple[int, int]:
        n, d = self._rows.shape
        return d, n

    def __matmul__(self, other: FloatArray) -> FloatArray:
        r = self._rows
        out: FloatArray = np.empty(r.shape[1], dtype=np.float64)
        acc: FloatArray = np.zeros(r.dense_columns.size, dtype=np.float64)
        for block in r.blocks:
            acc += r.dense[block].T @ other[block]
        out[r.dense_columns] = acc
        out[r.sparse_columns] = r.one_hot_transposed @ other
        return out


@dataclass(frozen=True)
class GradientRows:
    """The rows as every full-gradient loop takes them, shaped by the public layout only.

    - ``dense``: the dense columns (numeric features, narrow one-hot blocks, the intercept; all
      columns without a layout), column-major; both products run over the fixed row
      ``blocks`` (:data:`BLAS_BLOCK` entries each: one BLAS thread, in cache).
    - ``one_hot``: the sparse one-hot blocks as CSR with **exactly one stored entry per block
      per row** (an explicit 0 where the cell is MISSING or undeclared), so every row has the
      same number of entries C = number of sparse blocks and the rows keep their order. ``X @ w``
      is a CSR product (C multiply-adds per row); ``Xᵀ @ c`` a CSR product with the stored
      transpose ``one_hot_transposed`` (n·C multiply-adds; a CSC product, what ``csr.T`` gives,
      is ≈ 1.5× slower and ``.T`` costs a conversion per call).

    What the data decides is only *which* column of a block holds a row's entry and the values;
    the representation's type, its array shapes, its block boundaries, the number and sizes of
    kernel calls are functions of (n, layout) — the same on every dataset of a schema. Every
    product sums exactly the non-zero terms of the dense one, in another order, so results
    agree up to floating-point rounding and each output entry of ``X @ w`` depends on its own
    row only. Supports what the losses' ``gradient`` and ``value`` use: ``shape``, ``@`` and
    ``.T``; :meth:`toarray` for tests."""

    n_rows: int
    dense_columns: npt.NDArray[np.intp]
    dense: FloatArray
    sparse_columns: npt.NDArray[np.intp]
    one_hot: sparse.csr_array
    one_hot_transposed: sparse.csr_array
    blocks: tuple[slice, ...]

    @property
    def shape(self) -> tuple[int, int]:
        return self.n_rows, int(self.dense_columns.size + self.sparse_columns.size)

    @property
    def T(self) -> _Transposed:  # noqa: N802 - numpy's name for the transpose
        return _Transposed(self)

    def __matmul__(self, other: FloatArray) -> FloatArray:
        w = np.asarray(other, dtype=np.float64)
        out: FloatArray = self.one_hot @ w[self.sparse_columns]
        w_dense = w[self.dense_columns]
        for block in self.blocks:
            out[block] += self.dense[block] @ w_dense
        return out

    def toarray(self) -> FloatArray:
        """The rows as one dense array (tests)."""
        X: FloatArray = np.zeros(self.shape, dtype=np.float64)
        X[:, self.dense_columns] = self.dense
        X[:, self.sparse_columns] = self.one_hot.toarray()
        return X


#: Rows as the full-gradient loops take them: :class:`GradientRows` (from :func:`checked_rows`),
#: or a plain array (the optimizers' own loops, tests).
Rows = FloatArray | GradientRows


def row_blocks(n: int, dense_columns: int) -> tuple[slice, ...]:
    """The row blocks of the dense products: :data:`BLAS_BLOCK` entries each (n and the number of
    dense columns only)."""
    step = max(1, BLAS_BLOCK // max(1, dense_columns))
    return tuple(slice(start, start + step) for start in range(0, n, step))


def gradient_rows(
    X: FloatArray, layout: ColumnLayout | None = None, divisors: FloatArray | None = None
) -> GradientRows:
    """:class:`GradientRows` of ``X`` (n × d) under ``layout`` (``None``: every column dense),
    each row divided by ``divisors`` (:func:`row_divisors`; ``None``: by 1). The same work
    whatever the values: one pass over every column, no branch on a value.

    Raises ``ValueError`` (no data values) if ``X``'s width is not the layout's, or if a row has
    more than one non-zero in a one-hot block — impossible for the encoder's rows, whose
    one-hot blocks hold at most one 1 (times the public scale)."""
    X = np.asarray(X, dtype=np.float64)
    n, d = X.shape
    if layout is None:
        layout = ColumnLayout(d)
    if layout.dimension != d:
        raise ValueError("the rows' width differs from the layout's dimension")
    if divisors is None:
        divisors = np.ones(n, dtype=np.float64)
    dense_columns = layout.dense_columns
    dense = np.empty((n, dense_columns.size), dtype=np.float64, order="F")
    for k, column in enumerate(dense_columns.tolist()):  # column by column: no temporary copy
        np.divide(X[:, column], divisors, out=dense[:, k])
    blocks = len(layout.one_hot)
    # int32 indices when the sizes allow (public: n, the number of blocks and the width)
    small = max(n * blocks, d) < np.iinfo(np.int32).max
    index_type = np.int32 if small else np.int64
    indices = np.empty((n, blocks), dtype=index_type)
    values = np.empty((n, blocks), dtype=np.float64)
    everyone = np.arange(n)
    offset = 0
    for j, (start, width) in enumerate(layout.one_hot):
        cells = X[:, start : start + width]
        stored = cells != 0.0
        if not bool(np.all(stored.sum(axis=1) <= 1)):
            raise ValueError("the rows do not match the declared one-hot layout")
        position = np.argmax(stored, axis=1)  # the row's category, or 0 (an explicit zero)
        indices[:, j] = position + offset
        values[:, j] = cells[everyone, position] / divisors
        offset += width
    if blocks:
        indptr = np.arange(0, n * blocks + 1, blocks, dtype=index_type)
    else:
        indptr = np.zeros(n + 1, dtype=index_type)
    one_hot = sparse.csr_array(
        (values.ravel(), indices.ravel(), indptr), shape=(n, offset), copy=False
    )
    return GradientRows(
        n_rows=n,
        dense_columns=dense_columns,
        dense=dense,
        sparse_columns=layout.sparse_columns,
        one_hot=one_hot,
        one_hot_transposed=sparse.csr_array(one_hot.T.tocsr()),
        blocks=row_blocks(n, dense_columns.size),
    )
