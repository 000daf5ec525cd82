r"""The curvature refresh's terms inside PostgreSQL (the in-database execution mode,
:mod:`service.workers.in_database`; the mechanism:
:mod:`service.optimizers.kits.curvature_refresh`).

What is summed. Per session, over its rows of the mapped table ``pg_temp.dpfit_mapped(x0 …
x_{w−1}, y)`` (φ_i and the class index, −1 for a row of no declared class), the K·w(w+1)/2
sums (each class's symmetric block, its upper triangle)

    (B_k)_ab = Σ_i m_i p_ik (1 − p_ik) r_ia r_ib  (a ≤ b),   r_ij = q_jᵀ φ_i = Σ_l Q_lj φ_il,
    p_i = softmax(W φ_i),   m_i = 1 where y_i ≥ 0, 0 otherwise (that row's term is 0)

at the flat joint weights bound as ``w0 … w_{K·w−1}`` (W = w.reshape(K, w), class-major) and
the basis bound as ``q0 … q_{w²−1}`` (``q{l·w + j}`` = Q_lj, column j = q_j), returned as one
array, k-major, each block's upper triangle row by row (an element is NULL over no rows;
:func:`curvature_blocks` unpacks it). The oracle adds the sessions' arrays in session order.
B is never released: it is only the input of ``release_curvature`` (B plus noise, in the
worker). Per row: s_k = Σ_l φ_l W_kl; top = max_k s_k; e_k = exp(s_k − top);
p_k = e_k / Σ_k e_k (the model's softmax, which the kit's
:func:`~service.optimizers.kits.curvature_refresh.curvature_terms` takes from
``MultinomialLoss.predict_proba``: the same value to rounding); weight_k = p_k·(1 − p_k)·m;
(B_k)_ab += weight_k·(r_a·r_b), the product r_a·r_b formed inside each sum (so no level of the
query is wider than K + w + 1 columns: the joint model's admission bound,
``service.domain.execution.check_in_database``). Every row runs the same operations (a row of
no class too, times m = 0), as the kit's (c) has it.
PostgreSQL only, as the whole in-database path
(``encoded_rows`` refuses other dialects; the sums travel as one ``ARRAY``, up to 20 × 528 =
10,560 at K = 20 and w = 32); the Gram form's rows are at most 32 wide, so the K·w + w² bound
values stay far below the protocol's 65,535.

Row-local. Every intermediate is a function of one row and the bound public values (fenced
subqueries, ``OFFSET 0``, evaluate each once per row; no window, join or ordering): a row's
term is the kit's v(φ_i) of that row alone, the premise of the replace-one sensitivity (the
kit's (a)); a session's sums are those of its own rows and the P sessions' sums add to the
sums over all rows in any split; and a flush at one row changes nothing at another.

Floating point (PostgreSQL's ``float8`` ``*``, ``/`` and ``exp`` raise where a non-zero result
underflows to 0, a failure that would depend on the data; ``+``, ``−`` never raise). Mapped
entries are 0 or ≥ 2⁻⁸⁰ in magnitude and ≤ 1 (:mod:`service.workers.in_database_row_map`).
Four kinds of value are flushed to 0:

- entries of w and of Q below :data:`PARAMETER_FLUSH` = 2⁻⁵⁰⁰ (as the gradient's iterate), so
  every product φ_l·W_kl and Q_lj·φ_l is 0 or ≥ 2⁻⁵⁸⁰; the sums s_k and r_j never raise;
- e_k where s_k − top < −200·ln 2 (:data:`~service.workers.in_database_multinomial.EXP_FLUSH`,
  as the gradient's: the kit's e_k < 2⁻²⁰⁰), so e_k is 0 or ≥ 2⁻²⁰⁰, Σe ∈ [1, K] and p_k is 0
  or ≥ 2⁻²⁰⁰/K; 1 − p_k is 0 or ≥ 2⁻⁵³ (p_k ≤ 1), so weight_k is 0 or ≥ 2⁻²⁵³/K;
- r_j itself where |r_j| < 2⁻²⁰⁰ (:data:`~service.workers.in_database_multinomial.SQUARE_FLUSH`:
  r_j, a sum of terms ≥ 2⁻⁵⁸⁰, can be as small as 2⁻⁶³²), so every product r_a·r_b is 0 or
  ≥ 2⁻⁴⁰⁰ in magnitude and weight_k·r_a·r_b is 0 or ≥ 2⁻⁶⁵³/K (m = 0 makes a 0, which never
  raises). No operation underflows to zero; none overflows (every exponent is ≤ 0,
  |r_j| ≤ ‖Q‖·‖φ‖).

Against the kit's numpy sums each row's term differs by summation order or by less than
2⁻²⁰⁰ (a flushed e_k moves p by less than K·2⁻²⁰⁰; a flushed r_j a product by 2⁻²⁰⁰).

Privacy (the kit's (a)): every flush takes a value towards 0. The flushed w is another public
iterate (the bound holds for every W); the flushed e gives p′, still a probability vector (a
softmax over the classes not flushed), and Σ_k (p′_k(1 − p′_k))² ≤ 4/27 holds on all of the
simplex; a flushed r_j gives r′ with ‖r′‖ ≤ ‖r‖; the flushed Q moves ‖Qᵀφ‖ by at most
w·2⁻⁵⁰⁰, far below the rounding the kit's (d) already accounts for. The kit's bound needs only
a probability vector and ‖r‖ ≤ 1 per row: ‖v‖_F² = Σ_k h_k² ‖r′‖⁴ ≤ 4/27 and, for two rows,
⟨v, v'⟩ = Σ_k h_k h'_k (r′ᵀr″)² ≥ 0, so the sensitivity √(8/27) holds.

Cost per row: K·w products for the scores, w² for the projections and K·w(w+1)/2 weighted
sums of products — K/2 + 1 times a gradient's K·w sums at w ≤ 32 and
run once per fit (K = 20, w = 32: ≈ 0.14 µs a sum, 35 gradients' time; K = 10, w = 8: 4).
The session's time limit covers it: :func:`curvature_timeout_ms`, 1 µs a row and sum.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from service.data.sql_encoding import FLOAT8
from service.models.base import FloatArray
from service.optimizers.kits.gram_step import GRAM_MAX_WIDTH
from service.workers.in_database_multinomial import EXP_FLUSH, SQUARE_FLUSH
from service.workers.in_database_row_map import gram_pairs, rows_table

__all__ = [
    "PARAMETER_FLUSH",
    "curvature_blocks",
    "curvature_params",
    "curvature_query",
    "curvature_timeout_ms",
]

#: Entries of w and Q below this magnitude are sent as 0 (module docstring).
PARAMETER_FLUSH = 2.0**-500
#: The time limit's allowance per row and weighted sum (µs): measured 0.07–0.14 here
#: (``python -m bench in-database --parts refresh``: K = 20, w = 32, 20,000 rows in one
#: session 29 s, 35 gradients' time), more on a few thousand rows (the plan's fixed cost).
SUM_ALLOWANCE_US = 1.0


def curvature_timeout_ms(n: int, classes: int, width: int) -> int:
    """A session's statement time limit that covers :func:`curvature_query` over n rows: 60 s
    plus :data:`SUM_ALLOWANCE_US` per row and sum (K·w(w+1)/2 of them); 0 without classes or
    for rows wider than the Gram form's (``GRAM_MAX_WIDTH``: no refresh runs there, and the
    limit stays the gradient's). Public sizes only, as ``statement_timeout_ms``."""
    if classes < 2 or width > GRAM_MAX_WIDTH:
        return 0
    sums = n * classes * (width * (width + 1) // 2)
    return 60_000 + int(SUM_ALLOWANCE_US * sums / 1000)


def _f(value: float) -> sa.ColumnElement[Any]:
    return sa.literal(float(value), FLOAT8)


def _fenced(columns: list[sa.ColumnElement[Any]], name: str) -> sa.Subquery:
    """``(SELECT columns OFFSET 0) AS name``: each expression evaluated once per row."""
    return sa.select(*columns).offset(0).subquery(name)


def curvature_query(table: str, classes: int, width: int) -> sa.Select[Any]:
    """``SELECT ARRAY[sum(h_0·r_0·r_0), sum(h_0·r_0·r_1), …, sum(h_{K−1}·r_{w−1}·r_{w−1})]``
    over every row of ``table`` (module docstring): one array of the K·w(w+1)/2 sums
    (B_k)_lm, l ≤ m, k-major (:func:`curvature_blocks` unpacks it; names from the public K and
    w; the values are bound: :func:`curvature_params`)."""
    rows = rows_table(table, width)
    phi = [rows.c[f"x{i}"] for i in range(width)]

    def bound(name: str) -> sa.ColumnElement[Any]:
        return sa.bindparam(name, type_=FLOAT8)

    # s_k = Σ_i φ_i·W_ki and r_j = Σ_i φ_i·Q_ij, left to right; m = [y ≥ 0]
    scores = [
        sum((x * bound(f"w{k * width + i}") for i, x in enumerate(phi)), _f(0.0)).label(f"s{k}")
        for k in range(classes)
    ]
    projections = [
        sum((x * bound(f"q{i * width + j}") for i, x in enumerate(phi)), _f(0.0)).label(f"r{j}")
        for j in range(width)
    ]
    known = sa.case((rows.c.y >= _f(0.0), _f(1.0)), else_=_f(0.0)).label("m")
    level = _fenced([*scores, *projections, known], "scores")
    s = [level.c[f"s{k}"] for k in range(classes)]
    r = [level.c[f"r{j}"] for j in range(width)]
    top = sa.func.greatest(*s, type_=FLOAT8) if classes > 1 else s[0]
    topped = _fenced([*s, *r, level.c.m, top.label("top")], "top")
    exps = [
        sa.case(
            (topped.c[f"s{k}"] - topped.c.top < _f(-EXP_FLUSH), _f(0.0)),
            else_=sa.func.exp(topped.c[f"s{k}"] - topped.c.top, type_=FLOAT8),
        ).label(f"e{k}")
        for k in range(classes)
    ]
    flushed = [
        sa.case(
            (sa.func.abs(topped.c[f"r{j}"], type_=FLOAT8) < _f(SQUARE_FLUSH), _f(0.0)),
            else_=topped.c[f"r{j}"],
        ).label(f"r{j}")
        for j in range(width)
    ]
    shifted = _fenced([*exps, *flushed, topped.c.m], "exps")
    e = [shifted.c[f"e{k}"] for k in range(classes)]
    kept = [*(shifted.c[f"r{j}"] for j in range(width)), shifted.c.m]
    summed = _fenced([*e, *kept, sum(e[1:], e[0]).label("total")], "summed")
    probabilities = [(summed.c[f"e{k}"] / summed.c.total).label(f"p{k}") for k in range(classes)]
    kept = [*(summed.c[f"r{j}"] for j in range(width)), summed.c.m]
    probs = _fenced([*probabilities, *kept], "probs")
    p = [probs.c[f"p{k}"] for k in range(classes)]
    # (p_k·(1 − p_k))·m, the kit's order: a row of no declared class adds 0 (m = 0)
    curvatures = [(pk * (_f(1.0) - pk) * probs.c.m).label(f"h{k}") for k, pk in enumerate(p)]
    weights = _fenced([*curvatures, *(probs.c[f"r{j}"] for j in range(width))], "weights")
    h = [weights.c[f"h{k}"] for k in range(classes)]
    r = [weights.c[f"r{j}"] for j in range(width)]
    # h_k·(r_a·r_b) inside each sum: the levels stay K + w + 1 wide (the admission's select-list
    # bound, ``check_in_database``), at one more product per sum; one array, not K·w(w+1)/2
    # columns (a select list holds at most 1,664 entries)
    pairs = gram_pairs(width)  # the Gram queries' upper triangle, row by row
    sums = [sa.func.sum(h[k] * (r[a] * r[b])) for k in range(classes) for a, b in pairs]
    return sa.select(postgresql.array(sums, type_=FLOAT8).label("sums"))


def curvature_blocks(values: FloatArray, classes: int, width: int) -> FloatArray:
    """The K symmetric w × w blocks B_k from :func:`curvature_query`'s array (k-major, each
    block's upper triangle row by row, the diagonal included); ``ValueError`` on another
    length."""
    packed = np.asarray(values, dtype=np.float64)
    size = width * (width + 1) // 2
    if packed.shape != (classes * size,):
        raise ValueError("the curvature sums' length is not K·w(w+1)/2")
    rows, columns = np.array(gram_pairs(width)).T  # the order of :func:`curvature_query`
    blocks: FloatArray = np.zeros((classes, width, width), dtype=np.float64)
    blocks[:, rows, columns] = packed.reshape(classes, size)
    blocks[:, columns, rows] = packed.reshape(classes, size)
    return blocks


def curvature_params(
    w: FloatArray, basis: FloatArray, classes: int, width: int
) -> dict[str, float]:
    """The bound values of :func:`curvature_query`: ``w0 … w_{K·w−1}`` (the flat joint
    weights) and ``q0 … q_{w²−1}`` (Q row-major), entries below :data:`PARAMETER_FLUSH` in
    magnitude sent as 0; ``ValueError`` on other shapes or non-finite values."""
    weights = np.asarray(w, dtype=np.float64)
    Q = np.asarray(basis, dtype=np.float64)
    if weights.shape != (classes * width,) or Q.shape != (width, width):
        raise ValueError("the curvature terms need K·w weights and a w × w basis")
    if not (np.all(np.isfinite(weights)) and np.all(np.isfinite(Q))):
        raise ValueError("the curvature terms need finite weights and basis")
    params = {f"w{i}": float(v) for i, v in enumerate(_flushed(weights))}
    params.update({f"q{i}": float(v) for i, v in enumerate(_flushed(Q).reshape(-1))})
    return params


def _flushed(values: np.ndarray) -> np.ndarray:
    out: np.ndarray = np.where(np.abs(values) < PARAMETER_FLUSH, 0.0, values)
    return out
