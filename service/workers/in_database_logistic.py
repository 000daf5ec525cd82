"""The binary logistic model's gradient as one aggregate over the encoded rows in PostgreSQL
(the in-database execution mode, :mod:`service.workers.in_database`).

Rows are ``pg_temp.dpfit_rows(x0 … x_{d−1}, y)`` with y = ±1 (or a categorical label's class
index, read as class k against the rest). Per row the coefficient is the loss's slope at the
margin m = y·x·w, σ(−m) = (1 + tanh(−m/2))/2 (``tanh`` never overflows), capped at the clip
C < 1 when the loss has one, times y; the query returns Σ_i c_i x_i — the worker scales it by
−1/n and adds l2·w, as ``LogisticLoss.gradient``. A clip below :data:`TINY_CLIP` is applied
as 0: c·x could underflow to 0, which PostgreSQL raises on (a failure that would depend on the
data); the gradient then differs from numpy's by less than C, an absurd public clip.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from service.data.sql_encoding import FLOAT8
from service.models.logistic import LogisticLoss

__all__ = ["TINY_CLIP", "logistic_gradient_query"]

#: A logistic gradient_clip below this is applied as 0 (module docstring).
TINY_CLIP = 2.0**-400


def logistic_gradient_query(
    loss: LogisticLoss, rows: sa.TableClause, d: int, label_class: int | None = None
) -> sa.Select[Any]:
    """``SELECT sum(c·x₀), …, sum(c·x_{d−1})`` over ``rows`` (module docstring), the iterate
    bound as ``w0 … w_{d−1}``; ``label_class`` k: class k against the rest."""
    margin = sum(
        (rows.c[f"x{j}"] * sa.bindparam(f"w{j}", type_=FLOAT8) for j in range(d)),
        sa.literal(0.0, FLOAT8),
    )
    y: sa.ColumnElement[Any] = rows.c.y
    if label_class is not None:  # one-vs-rest: class k against the rest, ±1 exactly
        y = sa.case(
            (rows.c.y == sa.literal(float(label_class), FLOAT8), sa.literal(1.0, FLOAT8)),
            else_=sa.literal(-1.0, FLOAT8),
        )
    slope = (
        sa.literal(1.0, FLOAT8) + sa.func.tanh(margin * y * sa.literal(-0.5, FLOAT8))
    ) * sa.literal(0.5, FLOAT8)
    clip = loss.gradient_clip
    if clip is not None and clip < TINY_CLIP:
        # |c| ≤ C < 2⁻⁴⁰⁰: taken as 0 (c·x could underflow to 0, which PostgreSQL raises on;
        # the gradient sum differs from numpy's by less than C — an absurd public clip)
        slope = sa.literal(0.0, FLOAT8)
    elif clip is not None and clip < 1.0:
        slope = sa.func.least(slope, sa.literal(float(clip), FLOAT8))
    coefficient = (slope * y).label("c")
    # OFFSET 0: the coefficient is computed once per row, not once per sum (PostgreSQL would
    # otherwise flatten the subquery and evaluate c — d products and a tanh — d times)
    per_row = (
        sa.select(*(rows.c[f"x{j}"] for j in range(d)), coefficient).offset(0).subquery("per_row")
    )
    return sa.select(*(sa.func.sum(per_row.c.c * per_row.c[f"x{j}"]) for j in range(d)))
