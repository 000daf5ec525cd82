"""The checks every optimizer's ``fit`` makes on the rows before using them.

The privacy proofs assume the rows the plan was made for: n rows of dimension d (public), finite
values, ‖x‖₂ ≤ 1 and labels admissible for the loss. The loader guarantees all of it; these
checks make a broken contract fail loudly instead of silently voiding the sensitivity analysis.
Messages never contain data values.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import sparse

from service.models.base import FloatArray, Loss, parameter_count

__all__ = [
    "ROW_NORM_SLACK",
    "BLAS_BLOCK",
    "DENSE_COLUMN",
    "SPARSE_DENSITY",
    "Rows",
    "SparseRows",
    "checked_data",
    "gradient_rows",
]

#: Rows may exceed ‖x‖ = 1 by floating-point rounding only; beyond this the loader broke its
#: contract.
ROW_NORM_SLACK = 1e-6


def checked_data(
    loss: Loss, X: FloatArray, y: FloatArray, n: int, d: int
) -> tuple[FloatArray, FloatArray]:
    """The rows and labels the privacy proof assumes, or ``ValueError`` (no data values).

    Shape (n, width) / (n,) as planned — ``d`` is the parameter count, the row width for a
    linear model (:func:`~service.models.base.parameter_count`) — finite, ‖x‖₂ ≤ 1 (rows above
    the bound by rounding only are rescaled exactly to ≤ 1) and admissible labels
    (``loss.check_labels`` when available).
    """
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] != n or parameter_count(loss, X.shape[1]) != d:
        raise ValueError("the data's shape differs from the plan's public n and d")
    if y.shape != (n,):
        raise ValueError("labels must be a vector of n values")
    if not (bool(np.all(np.isfinite(X))) and bool(np.all(np.isfinite(y)))):
        raise ValueError("rows and labels must be finite")
    norms = np.sqrt(np.einsum("ij,ij->i", X, X))
    if bool(np.any(norms > 1.0)):
        if bool(np.any(norms > 1.0 + ROW_NORM_SLACK)):
            raise ValueError("rows must satisfy ‖x‖₂ ≤ 1 (the loader enforces the bound)")
        X = X / np.maximum(norms, 1.0)[:, None]
    check_labels = getattr(loss, "check_labels", None)
    if check_labels is not None:
        check_labels(y)
    elif not bool(np.all((y == 1.0) | (y == -1.0))):
        raise ValueError("labels must be -1 or +1")
    return X, y


#: Below this fraction of non-zero entries, full-gradient passes run on sparse copies of the rows.
SPARSE_DENSITY = 0.25

#: In those sparse copies, a column with more than this fraction of non-zero entries (the
#: intercept, numeric features, frequent categories) is kept dense instead.
DENSE_COLUMN = 0.25

#: The dense block's products run on row blocks of at most this many entries: OpenBLAS (numpy's
#: BLAS) starts threads for a matrix-vector product above ≈ 4.6e5 entries (0.3.31), and on a
#: busy machine those threads spin for a core another process holds — measured here under load,
#: a whole fit 2–6× slower than single-threaded. Blocks this size stay on one thread, and in
#: cache.
BLAS_BLOCK = 1 << 16


class _Transposed:
    """Xᵀ of :class:`SparseRows`: ``Xᵀ @ c`` as dot products of the dense columns with ``c``
    plus a CSR product for the sparse ones (rows of Xᵀ = columns of X, in X's row order)."""

    def __init__(self, rows: SparseRows) -> None:
        self._rows = rows

    @property
    def shape(self) -> tuple[int, int]:
        n, d = self._rows.shape
        return d, n

    def __matmul__(self, other: FloatArray) -> FloatArray:
        r = self._rows
        out: FloatArray = np.empty(r.shape[1], dtype=np.float64)
        if r.dense_columns.size:
            acc: FloatArray = np.zeros(r.dense_columns.size, dtype=np.float64)
            for block in r.blocks:
                acc += r.dense[block].T @ other[block]
            out[r.dense_columns] = acc
        if r.sparse_columns.size:
            out[r.sparse_columns] = r.sparse_transposed @ other
        return out


@dataclass(frozen=True)
class SparseRows:
    """Mostly-zero rows in the form that makes both products of a gradient, ``X @ w`` and
    ``Xᵀ @ c``, cheap. The columns are split by density: those with more than
    ``DENSE_COLUMN`` non-zeros (``dense_columns``) are stored as one dense column-major block
    (``dense``; both products are then contiguous BLAS passes), the others as CSR twice — with the
    rows grouped by their number of non-zeros for ``X @ w`` (``sparse_sorted``, row i of it is row
    ``order[i]`` of X; an inner loop of constant length per group, which the CPU predicts) and as a
    CSR copy of the transpose for ``Xᵀ @ c`` (``sparse_transposed``; a CSC product, what
    ``csr.T`` gives, is about 1.7× slower). On UCI Adult (13 % non-zeros, 16 of 105 columns
    dense) a logistic gradient takes 0.34–0.35 ms instead of 0.53–0.54 ms with one plain CSR
    matrix and its transpose (same process, interleaved, loaded 2-core machine); float32 values
    with int32 indices gained < 7 % in the CSR products (they are not memory-bound at 7 MB), so
    the rows stay float64.

    Every product sums exactly the non-zero terms of the dense one, in another order, so the
    results agree up to floating-point rounding, and each output entry still depends on one row
    (``X @ w``) or on the column's entries (``Xᵀ @ c``) only. Supports what the losses'
    ``gradient`` and ``value`` use: ``shape``, ``@`` and ``.T``; :meth:`toarray` for tests."""

    n_rows: int
    dense_columns: npt.NDArray[np.intp]
    dense: FloatArray
    sparse_columns: npt.NDArray[np.intp]
    sparse_sorted: sparse.csr_array
    order: npt.NDArray[np.intp]
    inverse_order: npt.NDArray[np.intp]
    sparse_transposed: sparse.csr_array
    blocks: tuple[slice, ...]

    @property
    def shape(self) -> tuple[int, int]:
        return self.n_rows, int(self.dense_columns.size + self.sparse_columns.size)

    @property
    def T(self) -> _Transposed:  # noqa: N802 - numpy's name for the transpose
        return _Transposed(self)

    def __matmul__(self, other: FloatArray) -> FloatArray:
        w = np.asarray(other, dtype=np.float64)
        if self.sparse_columns.size:
            out: FloatArray = (self.sparse_sorted @ w[self.sparse_columns])[self.inverse_order]
        else:
            out = np.zeros(self.n_rows, dtype=np.float64)
        if self.dense_columns.size:
            w_dense = w[self.dense_columns]
            for block in self.blocks:
                out[block] += self.dense[block] @ w_dense
        return out

    def toarray(self) -> FloatArray:
        """The rows as one dense array (tests)."""
        X: FloatArray = np.zeros(self.shape, dtype=np.float64)
        X[:, self.dense_columns] = self.dense
        X[np.ix_(self.order, self.sparse_columns)] = self.sparse_sorted.toarray()
        return X


#: Rows as the full-gradient loops take them: dense, or sparse from :func:`gradient_rows`.
Rows = FloatArray | SparseRows


def gradient_rows(X: FloatArray) -> Rows:
    """The rows in the cheaper form for many full-gradient passes: :class:`SparseRows` when at
    most ``SPARSE_DENSITY`` of the entries are non-zero (one-hot encodings: Adult has 13 %),
    else ``X`` itself. A change of representation only — every product sums the same non-zero
    terms — so sensitivities and the released values are unaffected; it cuts the work of
    ``X @ w`` and ``Xᵀ c`` on such data. Expects ``X`` already checked."""
    if X.size == 0 or X.ndim != 2 or not X.flags.c_contiguous:
        return X
    per_row = np.count_nonzero(X, axis=1)
    if int(per_row.sum()) > SPARSE_DENSITY * X.size:
        return X
    n, d = X.shape
    # CSR straight from the flat non-zero positions (≈ 40 % faster than csr_array(X)'s COO path)
    flat = np.flatnonzero(X)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(per_row, out=indptr[1:])
    whole = sparse.csr_array((X.ravel()[flat], flat % d, indptr), shape=(n, d), copy=False)
    per_column = np.bincount(whole.indices, minlength=d)
    dense_columns = np.flatnonzero(per_column > DENSE_COLUMN * n)
    sparse_columns = np.flatnonzero(per_column <= DENSE_COLUMN * n)
    dense = np.asfortranarray(X[:, dense_columns])
    csr = sparse.csr_array(whole[:, sparse_columns])
    per_row = np.diff(csr.indptr)
    order = np.argsort(per_row, kind="stable")
    inverse_order = np.empty_like(order)
    inverse_order[order] = np.arange(n)
    step = max(1, BLAS_BLOCK // max(1, dense_columns.size))
    return SparseRows(
        n_rows=n,
        dense_columns=dense_columns,
        dense=dense,
        sparse_columns=sparse_columns,
        sparse_sorted=csr[order],
        order=order,
        inverse_order=inverse_order,
        sparse_transposed=csr.T.tocsr(),
        blocks=tuple(slice(start, start + step) for start in range(0, n, step)),
    )
