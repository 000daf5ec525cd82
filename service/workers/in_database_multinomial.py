r"""The gradient of the joint multinomial model as one aggregate over the encoded rows in
PostgreSQL (the in-database execution mode, :mod:`service.workers.in_database`).

Rows are ``pg_temp.dpfit_rows(x0 … x_{w−1}, y)`` with y the class index k ∈ {0, …, K−1}, or −1
for a row of no declared class (:func:`service.data.sql_encoding.class_index`). The parameters
are the flattened K × w matrix, ``w[k·w + j] = W[k, j]``
(:class:`~service.models.multinomial.MultinomialLoss`), bound as K·w parameters. One query
returns the K·w sums Σ_i c_{i,k} x_{i,j} (k-major, like w), where c_i = ∂ℓ/∂z_i is the row's
coefficient vector; the oracle scales them by 1/n and adds l2·w, as
``MultinomialLoss.gradient``. The coefficient is written with the same operations, in the same
order, as ``MultinomialLoss._dense_coefficient_products`` (the worker path's dense gradient):

unclipped (p − e_y)
    s_k = Σ_j x_j W[k, j];  top = max_k s_k;  e_k = exp(s_k − top);  q = known / Σ_k e_k;
    c_k = e_k·q − [k = y]·known   (known = 1 for a row of a declared class, 0 otherwise)

clipped slope (``gradient_clip`` C < 1: the soft-min margin's slope, module docstring of
:mod:`service.models.multinomial`)
    ŷ = max(y, 0);  top = max_{k≠ŷ} s_k;  e_k = exp(s_k − top) for k ≠ ŷ, 0 at ŷ;
    S = Σ_k e_k;  slope = min(S / (S + exp(s_ŷ − top)), C)·known;
    c_k = e_k·(slope / S) for k ≠ ŷ,  c_ŷ = −slope

(a row of no class uses class 0 as ŷ and gets slope 0, so c = 0, as the worker's flat index
does). Every exponent is of a score minus a maximum (≤ 0), the worker's max-shift.

PostgreSQL's ``float8`` raises where ``exp`` overflows or a product or ``exp`` underflows to 0
(numpy returns ∞ / 0): a failure that would depend on the data. So three values are flushed,
each where the worker's value is below K·2⁻²⁰⁰ (≈ 6e-61·K: below the rounding of every
gradient entry that is not itself of that size):

- e_k = 0 where s_k − top < −200·ln 2 (the worker's e_k < 2⁻²⁰⁰; with Σe ≥ 1, p_k is as small);
- clipped: σ = S/(S + exp(s_ŷ − top)) is taken as 0 where s_ŷ − top > 200·ln 2 (the worker's
  σ < K·2⁻²⁰⁰ there) and as 1 where s_ŷ − top < −200·ln 2 (exactly the worker's value:
  S ≥ 1, so S + e^{…} rounds to S);
- clipped: slope = min(σ, C)·known is taken as 0 below 2⁻⁴⁰⁰ (only where the public C itself
  is below it: an absurd clip whose gradient is ≈ 0 on both paths).

Then every non-zero factor is ≥ 2⁻⁴⁰⁰/K in magnitude (e_k ≥ 2⁻²⁰⁰, q ≥ 1/K unclipped;
slope/S ≥ 2⁻⁴⁰⁰/K clipped), so c_k is 0 or ≥ 2⁻⁶⁰⁰/K, and c_k·x_j is 0 or ≥ 2⁻⁶⁸⁰/K (encoded
entries are 0 or ≥ 2⁻⁸⁰); the iterate's entries below 2⁻⁵⁰⁰ are sent as 0 by the oracle, so a
score's products are 0 or ≥ 2⁻⁵⁸⁰. No operation underflows to zero or overflows.

Per-row norm clip (``gradient_norm_clip`` = B, where it binds): c ← c · t / max(‖c‖, t),
t = B/(1 + 10⁻¹²), as the worker's ``_clip_norms``. A square c_k² with |c_k| < 2⁻²⁰⁰ adds 0 to
‖c‖² (it would underflow; its share of ‖c‖² is below 2⁻⁴⁰⁰·K, far inside the 10⁻¹² margin).
The factor is ≥ 10⁻⁶/√2 (B ≥ 10⁻⁶, ‖c‖ ≤ √2), so the products stay ≥ 2⁻⁷⁰⁰/K.

Privacy: the optimizers' noise is calibrated to the per-row bounds of
:mod:`service.models.multinomial` (‖c‖ ≤ √2, or √2·C clipped; the centred anchor's
‖c − (u − e_y)‖ ≤ √(1 − 1/K)), and the flushed coefficients keep them: unclipped, e/Σe with
some e_k set to 0 is still a probability vector p′ (a softmax over the classes not flushed), so
c = p′ − e_y; clipped, slope ∈ [0, C] and the weights e_k/S over k ≠ ŷ still sum to 1 (or are
multiplied by slope 0). Every bound is over all of the simplex, so it holds for p′ as for p.

Cost per row: K·w products and K·w additions for the scores, K·w products and K·w aggregate
transitions for the sums (≈ 4·K·w operators), plus O(K) for the softmax; each intermediate is
computed once per row in a fenced subquery (``OFFSET 0`` keeps PostgreSQL from inlining an
expression into every later reference, which would evaluate the scores K times over).
"""

from __future__ import annotations

import math
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from service.data.sql_encoding import FLOAT8
from service.models.multinomial import NORM_CLIP_MARGIN, MultinomialLoss

__all__ = ["EXP_FLUSH", "SLOPE_FLUSH", "SQUARE_FLUSH", "multinomial_gradient_query"]

#: exp(t) is flushed to 0 below t = −EXP_FLUSH (2⁻²⁰⁰), and the clipped slope to 0 above it.
EXP_FLUSH = 200.0 * math.log(2.0)
#: The clipped slope below this is sent as 0 (module docstring).
SLOPE_FLUSH = 2.0**-400
#: A coefficient below this adds 0 to the norm's sum of squares (module docstring).
SQUARE_FLUSH = 2.0**-200


def _f(value: float) -> sa.ColumnElement[Any]:
    return sa.literal(float(value), FLOAT8)


def _fenced(columns: list[sa.ColumnElement[Any]], name: str) -> sa.Subquery:
    """``(SELECT columns OFFSET 0) AS name``: each expression evaluated once per row."""
    return sa.select(*columns).offset(0).subquery(name)


def multinomial_gradient_query(
    rows: sa.TableClause, loss: MultinomialLoss, width: int
) -> sa.Select[Any]:
    """``SELECT ARRAY[sum(c_0·x_0), …, sum(c_{K−1}·x_{w−1})]`` over ``rows`` (columns x0 …
    x_{w−1} and y) at the iterate bound as ``w0 … w_{K·w−1}`` (module docstring): one array of
    the K·w sums, k-major (an element is NULL over no rows)."""
    K = loss.classes
    xs = [f"x{j}" for j in range(width)]
    # 1. the scores s_k = Σ_j x_j W[k, j]
    scores = [
        sum(
            (rows.c[x] * sa.bindparam(f"w{k * width + j}", type_=FLOAT8) for j, x in enumerate(xs)),
            _f(0.0),
        ).label(f"s{k}")
        for k in range(K)
    ]
    y = rows.c.y
    known = sa.case((y >= _f(0.0), _f(1.0)), else_=_f(0.0)).label("known")
    hat = sa.case((y >= _f(0.0), y), else_=_f(0.0)).label("hat")  # ŷ = max(y, 0)
    level = _fenced([*(rows.c[x] for x in xs), y, known, hat, *scores], "scores")
    clip = loss.gradient_clip
    if clip is None or clip >= 1.0:
        coefficients = _softmax_coefficients(level, xs, K)
    else:
        coefficients = _clipped_coefficients(level, xs, K, float(clip))
    if loss.norm_clip is not None:
        coefficients = _norm_clipped(coefficients, xs, K, loss.norm_clip)
    # one array, not K·w columns: a select list holds at most 1,664 entries
    sums = [sa.func.sum(coefficients.c[f"c{k}"] * coefficients.c[x]) for k in range(K) for x in xs]
    return sa.select(postgresql.array(sums, type_=FLOAT8).label("sums"))


def _exp_flushed(shifted: sa.ColumnElement[Any]) -> sa.ColumnElement[Any]:
    """exp(t) for t ≤ 0, 0 below −:data:`EXP_FLUSH` (PostgreSQL raises on underflow)."""
    return sa.case((shifted < _f(-EXP_FLUSH), _f(0.0)), else_=sa.func.exp(shifted, type_=FLOAT8))


def _softmax_coefficients(level: sa.Subquery, xs: list[str], K: int) -> sa.Subquery:
    """c_k = e_k·(known/Σe) − [k = y]·known, as the worker's unclipped branch."""
    s = [level.c[f"s{k}"] for k in range(K)]
    top = sa.func.greatest(*s) if K > 1 else s[0]
    topped = _fenced(
        [*(level.c[x] for x in xs), level.c.y, level.c.known, *s, top.label("top")], "top"
    )
    exps = [_exp_flushed(topped.c[f"s{k}"] - topped.c.top).label(f"e{k}") for k in range(K)]
    shifted = _fenced([*(topped.c[x] for x in xs), topped.c.y, topped.c.known, *exps], "exps")
    e = [shifted.c[f"e{k}"] for k in range(K)]
    total = sum(e[1:], e[0])
    scaled = _fenced(
        [
            *(shifted.c[x] for x in xs),
            shifted.c.y,
            shifted.c.known,
            *e,
            (shifted.c.known / total).label("q"),
        ],
        "scaled",
    )
    coefficients = [
        (
            scaled.c[f"e{k}"] * scaled.c.q
            - sa.case((scaled.c.y == _f(float(k)), scaled.c.known), else_=_f(0.0))
        ).label(f"c{k}")
        for k in range(K)
    ]
    return _fenced([*(scaled.c[x] for x in xs), *coefficients], "coefficients")


def _clipped_coefficients(level: sa.Subquery, xs: list[str], K: int, clip: float) -> sa.Subquery:
    """c_k = e_k·(slope/S) for k ≠ ŷ, c_ŷ = −slope, as the worker's clipped branch."""
    s = [level.c[f"s{k}"] for k in range(K)]
    hat = level.c.hat
    on_label = [sa.case((hat == _f(float(k)), s[k]), else_=sa.null()) for k in range(K)]
    off_label = [sa.case((hat == _f(float(k)), sa.null()), else_=s[k]) for k in range(K)]
    z_label = sa.func.coalesce(*on_label)  # exactly one k is ŷ
    top = sa.func.greatest(*off_label)  # GREATEST skips NULLs: the max over k ≠ ŷ
    topped = _fenced(
        [
            *(level.c[x] for x in xs),
            hat,
            level.c.known,
            *s,
            z_label.label("z_label"),
            top.label("top"),
        ],
        "top",
    )
    exps = [
        sa.case(
            (topped.c.hat == _f(float(k)), _f(0.0)),
            else_=_exp_flushed(topped.c[f"s{k}"] - topped.c.top),
        ).label(f"e{k}")
        for k in range(K)
    ]
    shifted = _fenced(
        [
            *(topped.c[x] for x in xs),
            topped.c.hat,
            topped.c.known,
            *exps,
            (topped.c.z_label - topped.c.top).label("u"),
        ],
        "exps",
    )
    e = [shifted.c[f"e{k}"] for k in range(K)]
    others = sum(e[1:], e[0])
    u = shifted.c.u
    sigma = sa.case(
        (u < _f(-EXP_FLUSH), _f(1.0)),
        (u > _f(EXP_FLUSH), _f(0.0)),
        else_=others / (others + sa.func.exp(u, type_=FLOAT8)),
    )
    slope = sa.func.least(sigma, _f(clip)) * shifted.c.known
    sloped = _fenced(
        [
            *(shifted.c[x] for x in xs),
            shifted.c.hat,
            *e,
            others.label("others"),
            slope.label("slope"),
        ],
        "sloped",
    )
    small = sloped.c.slope < _f(SLOPE_FLUSH)
    scaled = _fenced(
        [
            *(sloped.c[x] for x in xs),
            sloped.c.hat,
            *(sloped.c[f"e{k}"] for k in range(K)),
            sa.case((small, _f(0.0)), else_=sloped.c.slope / sloped.c.others).label("q"),
            sa.case((small, _f(0.0)), else_=-sloped.c.slope).label("minus_slope"),
        ],
        "scaled",
    )
    coefficients = [
        sa.case(
            (scaled.c.hat == _f(float(k)), scaled.c.minus_slope),
            else_=scaled.c[f"e{k}"] * scaled.c.q,
        ).label(f"c{k}")
        for k in range(K)
    ]
    return _fenced([*(scaled.c[x] for x in xs), *coefficients], "coefficients")


def _norm_clipped(coefficients: sa.Subquery, xs: list[str], K: int, bound: float) -> sa.Subquery:
    """c_k · t / max(‖c‖, t) with t = B / (1 + NORM_CLIP_MARGIN), as the worker's
    ``_clip_norms``; a square of a coefficient below :data:`SQUARE_FLUSH` counts as 0."""
    c = [coefficients.c[f"c{k}"] for k in range(K)]
    squares = [sa.case((sa.func.abs(ck) < _f(SQUARE_FLUSH), _f(0.0)), else_=ck * ck) for ck in c]
    total = sum(squares[1:], squares[0])
    normed = _fenced(
        [*(coefficients.c[x] for x in xs), *c, sa.func.sqrt(total, type_=FLOAT8).label("norm")],
        "normed",
    )
    target = bound / (1.0 + NORM_CLIP_MARGIN)
    factor = _f(target) / sa.func.greatest(normed.c.norm, _f(target))
    clipped = [(normed.c[f"c{k}"] * factor).label(f"c{k}") for k in range(K)]
    return _fenced([*(normed.c[x] for x in xs), *clipped], "clipped")
