r"""``dp_agd_averaged``'s row map inside PostgreSQL (the in-database execution mode,
:mod:`service.workers.in_database`): the row sum for the mean's release and the mapped rows
φ(x) = P x / ‖P x‖ (:mod:`service.optimizers.kits.dp_agd_row_map`, steps 1 and 3) computed by
the database over the encoded rows ``pg_temp.dpfit_rows(x0 … x_{w−1}, y)`` of every session.

- :func:`row_sum_query`: ``SELECT sum(x0), …, sum(x_{w−1})`` — Σ_i x_i, the only input of the
  mean's release (the oracle adds the sessions' sums in session order, as a gradient's; the
  optimizer divides by the public n and adds the noise in the worker).
- :func:`mapped_statements`: per session, one pass building ``pg_temp.dpfit_mapped`` (same
  columns) from the public mapping, bound as values: the centre v (w − 1 entries and a 0 for
  the intercept column), the column scales d_j (``RowMap.scales``; 1 without them) and the
  intercept estimate ĉ. With a = x_{w−1}/ĉ, written with the operations of
  :func:`~service.optimizers.kits.dp_agd_row_map.mapped_rows` in its order:

      e_j = (x_j − v_j·a)·d_j;   r = √(Σ_j e_j·e_j)·(1 + NORM_MARGIN);
      φ_j = 0 where r = 0 or |e_j| < 2⁻⁸⁰·r,  e_j / r elsewhere.

  The gradient queries then read ``dpfit_mapped`` instead of ``dpfit_rows`` (the table name is
  a parameter of the queries), once per step; the map itself is one pass per fit.
- :func:`deviation_statement`: per session, Σ_i a(x_i) for the column scales' release
  (:mod:`service.optimizers.kits.column_scales`, step 1), with u_j = |x_j − v_j·a| (j < w − 1)
  and g = max(1, √(Σ_j u_j·u_j)): a_j = 0 where u_j < 2⁻⁸⁰·g, u_j / g elsewhere.
- :func:`gram_queries` and :func:`gram_matrix`: per session, G_k = Σ_i φ_i φ_iᵀ over its
  mapped rows — ``SELECT sum(x_i·x_j)`` for the w(w + 1)/2 pairs i ≤ j, at most
  :data:`GRAM_CHUNK_ENTRIES` sums a query (PostgreSQL allows 1,664 entries in a select list; the
  encoded width is at most 1,600 columns, so up to 1.28·10⁶ pairs: one scan of the mapped
  table per chunk, ≤ 2,000 operators a row — within ``statement_timeout_ms``'s 2 µs per
  encoded cell), assembled into the symmetric (w × w) matrix; the oracle adds the sessions'
  matrices in session order (the capability
  :class:`~service.optimizers.kits.curvature_step.GramOracle`). G itself is never
  released: it is only the input of ``release_top_eigenvalue`` (its top eigenvalue plus
  noise). The mapped entries are 0 or ≥ 2⁻⁸⁰ in magnitude and ≤ 1 (below), so every product
  is 0 or ≥ 2⁻¹⁶⁰: none underflows, none raises. It equals ``gram_of_rows`` of numpy's
  ``mapped_rows`` up to summation order and the 2⁻⁸⁰ flush.

Floating point (PostgreSQL's ``float8`` ``*`` and ``/`` raise where a non-zero result underflows
to 0 — a failure that would depend on the data; ``+``, ``−`` and ``sqrt`` never raise). Encoded
entries are 0 or ≥ 2⁻⁸⁰ in magnitude (``in_database_sgd``'s docstring). The centre's entries
below 2⁻⁸⁰ are sent as 0 (public values; :func:`flushed_centre`), and ĉ ∈ [1/√w, 1], so a is 0
or ≥ 2⁻⁸⁰ and every product v_j·a is 0 or ≥ 2⁻¹⁶⁰; x_j − v_j·a, a difference of two doubles that
are 0 or multiples of 2⁻²¹², is 0 or ≥ 2⁻²¹²; the scales d_j lie in [2⁻⁶, 16] (``column_scales``
makes them ≥ 1/√(w − 1) and ≤ its cap 10, and in-database rows are at most 1,598 wide,
``execution.MAX_TABLE_COLUMNS`` − 2; :func:`mapped_statements` refuses others), so e_j is 0 or ≥
2⁻²¹⁸; e_j·e_j is 0 or ≥ 2⁻⁴³⁶; r is 0 or ≥ 2⁻²¹⁸; 2⁻⁸⁰·r is exact (≥ 2⁻²⁹⁸); and e_j / r is
computed only where |e_j| ≥ 2⁻⁸⁰·r, so it is ≥ 2⁻⁸⁰ (the exact quotient is, and 2⁻⁸⁰ is a
double): the mapped entries are again 0 or ≥ 2⁻⁸⁰, which the gradient queries' own rules need
(:mod:`service.workers.in_database_multinomial`). No operation raises, whatever the rows. A row
with P x = 0 (r = 0) becomes the 0 row, as ``mapped_rows`` makes it. The deviations' sums
likewise: u_j is 0 or ≥ 2⁻²¹², g ≥ 1, and u_j / g is computed only where u_j ≥ 2⁻⁸⁰·g (a
row-local flush towards 0: a(x) stays ≥ 0 with norm ≤ 1, the premise of its sensitivity √2).

Privacy: both flushes are row-local and take entries towards 0. The centre's is a change of
the public map P (post-processing of the released mean: the mapped row is still P' x/‖P' x‖,
of norm < 1); the mapped entries' can only lower ‖φ(x)‖, so every row the steps see still has
‖φ(x)‖ ≤ 1 — the premise of the steps' sensitivity 2L/n (``dp_agd_row_map``'s docstring, (b)).
The proof is unchanged. The released model is folded with the unflushed P: W̄(P − P')x moves a
score by less than 2⁻⁸⁰·‖W̄‖·√w/ĉ, far below the rounding of the fit. Against ``mapped_rows``
each mapped entry differs by the row norm's summation order (PostgreSQL adds left to right,
numpy's ``einsum`` otherwise) or by less than 2⁻⁸⁰ (a flushed entry).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import sqlalchemy as sa

from service.data.sources import SourceError
from service.data.sql_encoding import FLOAT8
from service.optimizers.kits.dp_agd_row_map import NORM_MARGIN, RowMap

__all__ = [
    "ENTRY_FLUSH",
    "GRAM_CHUNK_ENTRIES",
    "MAPPED_TABLE",
    "deviation_statement",
    "flushed_centre",
    "gram_matrix",
    "gram_pairs",
    "gram_queries",
    "mapped_statements",
    "row_sum_query",
    "rows_table",
]

#: The temporary table of the mapped rows (one per session, replaced at every new mapping).
MAPPED_TABLE = "dpfit_mapped"
#: Centre entries and mapped entries below this magnitude are 0 (module docstring).
ENTRY_FLUSH = 2.0**-80
#: The most sums in one query of the Gram matrix (PostgreSQL's select list holds ≤ 1,664).
GRAM_CHUNK_ENTRIES = 1000


def _f(value: float) -> sa.ColumnElement[Any]:
    return sa.literal(float(value), FLOAT8)


def rows_table(name: str, width: int) -> sa.TableClause:
    """The temporary table ``name(x0 … x_{width−1}, y)`` (encoded or mapped rows)."""
    return sa.table(
        name, *(sa.column(f"x{j}", FLOAT8) for j in range(width)), sa.column("y", FLOAT8)
    )


def row_sum_query(table: str, width: int) -> sa.Select[Any]:
    """``SELECT sum(x0), …, sum(x_{width−1}) FROM table``: a session's Σ_i x_i (NULLs over no
    rows)."""
    rows = rows_table(table, width)
    return sa.select(*(sa.func.sum(rows.c[f"x{j}"]) for j in range(width)))


def flushed_centre(mapping: RowMap) -> np.ndarray:
    """The centre v with its entries below :data:`ENTRY_FLUSH` in magnitude set to 0 (public)."""
    centre = np.asarray(mapping.centre, dtype=np.float64)
    flushed: np.ndarray = np.where(np.abs(centre) < ENTRY_FLUSH, 0.0, centre)
    return flushed


def _centre_params(centre: np.ndarray, intercept: float, width: int) -> dict[str, float]:
    """The bound values ``v0 … v_{w−1}`` (the centre, flushed) and ``intercept`` of the
    statements that centre the rows; ``ValueError`` when the centre is not ``width`` long."""
    flushed = flushed_centre(RowMap(centre=np.asarray(centre, dtype=np.float64), intercept=1.0))
    if flushed.shape != (width,):
        raise ValueError("the row map's centre does not match the rows' width")
    params = {f"v{j}": float(v) for j, v in enumerate(flushed)}
    params["intercept"] = float(intercept)
    return params


def _fenced(columns: list[sa.ColumnElement[Any]], name: str) -> sa.Subquery:
    """``(SELECT columns OFFSET 0) AS name``: each expression evaluated once per row."""
    return sa.select(*columns).offset(0).subquery(name)


def _centred(source: str, width: int, scales: bool) -> tuple[sa.Subquery, list[str]]:
    """``(SELECT x_j − v_j·a [times d_j] …, y)``: the rows minus the centre, each column times
    its bound scale d_j with ``scales`` (module docstring)."""
    rows = rows_table(source, width)
    xs = [f"x{j}" for j in range(width)]
    intercept = sa.bindparam("intercept", type_=FLOAT8)
    scaled = _fenced(
        [*(rows.c[x] for x in xs), rows.c.y, (rows.c[xs[-1]] / intercept).label("a")], "scaled"
    )

    def entry(j: int, x: str) -> sa.ColumnElement[Any]:
        e = scaled.c[x] - sa.bindparam(f"v{j}", type_=FLOAT8) * scaled.c.a
        return (e * sa.bindparam(f"d{j}", type_=FLOAT8) if scales else e).label(x)

    centred = _fenced([*(entry(j, x) for j, x in enumerate(xs)), scaled.c.y], "centred")
    return centred, xs


def _mapped_select(source: str, width: int) -> sa.Select[Any]:
    centred, xs = _centred(source, width, scales=True)
    e = [centred.c[x] for x in xs]
    squares = sum((entry * entry for entry in e[1:]), e[0] * e[0])
    norm = (sa.func.sqrt(squares, type_=FLOAT8) * _f(1.0 + NORM_MARGIN)).label("r")
    normed = _fenced([*e, centred.c.y, norm], "normed")
    r = normed.c.r
    mapped = [
        sa.case(
            (r == _f(0.0), _f(0.0)),
            (sa.func.abs(normed.c[x], type_=FLOAT8) < r * _f(ENTRY_FLUSH), _f(0.0)),
            else_=normed.c[x] / r,
        ).label(x)
        for x in xs
    ]
    return sa.select(*mapped, normed.c.y)


def mapped_statements(
    source: str, width: int, mapping: RowMap
) -> tuple[list[str], sa.Insert, dict[str, float]]:
    """What one session runs to (re)build ``pg_temp.dpfit_mapped`` from ``source``: the DDL
    (drop, create), the ``INSERT … SELECT`` of φ(x) and its bound values (the flushed centre
    ``v0 … v_{w−1}`` and ``intercept``; module docstring)."""
    if source == MAPPED_TABLE:
        raise ValueError("the mapped rows are mapped from the encoded rows only")
    params = _centre_params(mapping.centre, mapping.intercept, width)
    columns = ", ".join(f"x{j} double precision" for j in range(width))
    ddl = [
        f"DROP TABLE IF EXISTS pg_temp.{MAPPED_TABLE}",
        f"CREATE TEMPORARY TABLE {MAPPED_TABLE} ({columns}, y double precision) "
        "ON COMMIT PRESERVE ROWS",
    ]
    targets = [*(f"x{j}" for j in range(width)), "y"]
    target = sa.table(MAPPED_TABLE, *(sa.column(c) for c in targets))
    insert = sa.insert(target).from_select(targets, _mapped_select(source, width))
    scales = np.ones(width) if mapping.scales is None else np.asarray(mapping.scales, dtype=float)
    if scales.shape != (width,) or not np.all((scales >= 2.0**-6) & (scales <= 16.0)):
        raise ValueError("the row map's scales must be w numbers in [2⁻⁶, 16]")
    params.update({f"d{j}": float(d) for j, d in enumerate(scales)})
    return ddl, insert, params


def deviation_statement(
    source: str, width: int, centre: np.ndarray, intercept: float
) -> tuple[sa.Select[Any], dict[str, float]]:
    """One session's Σ_i a(x_i) over ``source`` (``column_scales.deviation_sum``; module
    docstring) and its bound values (the flushed centre and ĉ): ``SELECT sum(a_0), …,
    sum(a_{w−2})`` (NULLs over no rows)."""
    if source == MAPPED_TABLE:
        raise ValueError("the deviations are of the encoded rows")
    if width < 2:
        raise ValueError("the deviations need a feature column beside the intercept")
    params = _centre_params(centre, intercept, width)
    centred, xs = _centred(source, width, scales=False)
    u = [sa.func.abs(centred.c[x], type_=FLOAT8) for x in xs[:-1]]
    squares = sum((entry * entry for entry in u[1:]), u[0] * u[0])
    norm = sa.func.greatest(sa.func.sqrt(squares, type_=FLOAT8), _f(1.0), type_=FLOAT8)
    normed = _fenced([*(v.label(x) for v, x in zip(u, xs[:-1], strict=True)), norm.label("g")], "u")
    g = normed.c.g
    sums = [
        sa.func.sum(sa.case((normed.c[x] < g * _f(ENTRY_FLUSH), _f(0.0)), else_=normed.c[x] / g))
        for x in xs[:-1]
    ]
    return sa.select(*sums), params


def gram_pairs(width: int) -> list[tuple[int, int]]:
    """The entries (i, j), i ≤ j, of a (``width`` × ``width``) Gram matrix's upper triangle, row
    by row: the order of :func:`gram_queries`' sums."""
    return [(i, j) for i in range(width) for j in range(i, width)]


def gram_queries(table: str, width: int) -> list[sa.Select[Any]]:
    """``SELECT sum(x_i * x_j), … FROM table`` over :func:`gram_pairs`, at most
    :data:`GRAM_CHUNK_ENTRIES` sums a query (names from the public width; no value bound)."""
    rows = rows_table(table, width)
    sums = [sa.func.sum(rows.c[f"x{i}"] * rows.c[f"x{j}"]) for i, j in gram_pairs(width)]
    return [
        sa.select(*sums[start : start + GRAM_CHUNK_ENTRIES])
        for start in range(0, len(sums), GRAM_CHUNK_ENTRIES)
    ]


def gram_matrix(answers: Sequence[Sequence[Any]], width: int) -> np.ndarray:
    """One session's answers to :func:`gram_queries`, in order, as the symmetric
    (``width`` × ``width``) float64 matrix (NULL, a sum over no rows, is 0); ``SourceError``
    when an answer is missing."""
    values = [0.0 if v is None else float(v) for answer in answers for v in answer]
    pairs = gram_pairs(width)
    if len(values) != len(pairs):
        raise SourceError("the in-database job could not read the table")
    out = np.zeros((width, width), dtype=np.float64)
    for (i, j), value in zip(pairs, values, strict=True):
        out[i, j] = out[j, i] = value
    return out
