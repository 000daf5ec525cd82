"""in-database, categorical label: one gradient in the database vs the worker path (part
``multiclass`` of ``python -m bench in-database``).

A table of N rows with ``columns`` numeric columns (as the binary table) and a label of K
classes ("c0" … "c{K−1}": the argmax of K fixed linear scores plus Gumbel noise, generated
inside PostgreSQL; about 1 % of the rows NULL — no declared class). Measured, interleaved
round by round (best and median of the rounds): one gradient of

- the joint multinomial model (clipped at C = 1/2, as ``auto`` fits it) — one aggregate of K·d
  sums (:mod:`service.workers.in_database_multinomial`) in one session and over the default
  sessions, against ``MultinomialLoss.gradient`` in numpy on the read-out rows;
- one-vs-rest (``logistic_regression`` clipped at 1/2): the K class gradients, one aggregate
  each, against K numpy gradients —

and the two models' agreement (max relative difference of the gradients, database vs numpy).

Part ``refresh`` (:func:`refresh_cost`): the curvature refresh's one aggregate of K·w(w+1)/2
sums over the mapped rows (:mod:`service.workers.in_database_curvature`) against one joint
gradient over the same rows, in one session, at three shapes (K, w) up to the Gram form's
widest (w = 32) and K = 20; interleaved round by round, medians, and the time per row and sum.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any

import numpy as np
import sqlalchemy as sa

from service.data.encoding import Encoder
from service.data.reader import read_encoded
from service.data.spec import LabelSpec, NumericFeature
from service.data.sql_source import SqlSource
from service.models.logistic import LogisticLoss
from service.models.multinomial import MultinomialLoss, class_indices
from service.optimizers.kits.full_gradient import LocalGradient
from service.workers.in_database import InDatabaseGradient, encoded_rows

CLASSES = 5
TABLE = "multiclass"
#: Rows of the refresh's cost (its widest shape sums 10,560 products a row).
REFRESH_ROWS = 20_000
#: (K, numeric columns) of the refresh's cost: w = columns + 1 (the intercept).
REFRESH_SHAPES = ((10, 7), (5, 21), (20, 31))


def schema(columns: int, classes: int) -> tuple[Encoder, LabelSpec]:
    encoder = Encoder(
        [NumericFeature(name=f"x{j}", min=-3, max=3) for j in range(1, columns + 1)],
        fit_intercept=True,
    )
    label = LabelSpec(column="y", type="categorical", classes=[f"c{k}" for k in range(classes)])
    return encoder, label


def make_table(url: str, name: str, rows: int, columns: int, classes: int) -> None:
    """N rows generated inside PostgreSQL: x_j uniform on [−3, 3]; the label c_k for the k of
    largest θ_k·x + Gumbel noise, θ_{k,j} = cos(1 + k + 2j)/√j; NULL for ≈ 1 % of the rows."""
    xs = ", ".join(f"random() * 6 - 3 AS x{j}" for j in range(1, columns + 1))
    scores = [
        " + ".join(
            f"({math.cos(1 + k + 2 * j) / math.sqrt(j)!r}) * x{j}" for j in range(1, columns + 1)
        )
        + " - ln(-ln(greatest(random(), 1e-12)))"
        for k in range(classes)
    ]
    array = "ARRAY[" + ", ".join(f"({s})" for s in scores) + "]"
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql("SELECT setseed(0.5)")
        conn.exec_driver_sql(
            f"CREATE TABLE {name} AS SELECT i AS id, "
            + ", ".join(f"x{j}" for j in range(1, columns + 1))
            + ", CASE WHEN u < 0.01 THEN NULL ELSE 'c' || (SELECT k - 1 FROM unnest(s) "
            "WITH ORDINALITY AS t(v, k) ORDER BY v DESC LIMIT 1) END AS y FROM ("
            f"SELECT i, {', '.join(f'x{j}' for j in range(1, columns + 1))}, u, {array} AS s "
            f"FROM (SELECT i, {xs}, random() AS u FROM generate_series(1, {int(rows)}) AS i) "
            "AS r) AS s"
        )
        conn.exec_driver_sql(f"ALTER TABLE {name} ADD PRIMARY KEY (id)")
        conn.exec_driver_sql(f"ANALYZE {name}")
    engine.dispose()


def _timed(action: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    out = action()
    return time.perf_counter() - start, out


def multiclass_gradient(
    url: str, open_table: Callable[[str, str], SqlSource], rows: int, columns: int, rounds: int
) -> dict[str, Any]:
    """One gradient of each arm, ``rounds`` interleaved rounds (module docstring)."""
    make_table(url, TABLE, rows, columns, CLASSES)
    source = open_table(url, TABLE)
    encoder, label = schema(columns, CLASSES)
    d = encoder.dimension
    joint = MultinomialLoss(l2=1e-4, classes=CLASSES, gradient_clip=0.5, fit_intercept=True)
    binary = LogisticLoss(l2=1e-4, gradient_clip=0.5)
    start = time.perf_counter()
    X, Y = read_encoded(source, encoder, label, None)
    read_s = time.perf_counter() - start
    y = class_indices(Y)
    arms: dict[str, Callable[[np.ndarray], np.ndarray]] = {}
    fingerprint = source.fingerprint()
    times: dict[str, list[float]] = {}
    differences: dict[str, float] = {}
    with ExitStack() as stack:
        one = stack.enter_context(
            encoded_rows(source, encoder, label, None, n=rows, fingerprint=fingerprint, sessions=1)
        )
        default = stack.enter_context(
            encoded_rows(source, encoder, label, None, n=rows, fingerprint=fingerprint)
        )
        sessions = InDatabaseGradient(default, joint, rows, d).sessions
        local_joint = LocalGradient(joint, X, y)
        local_ovr = [LocalGradient(binary, X, Y[k]) for k in range(CLASSES)]

        def ovr(oracles: list[Any]) -> Callable[[np.ndarray], np.ndarray]:
            return lambda w: np.stack([o.gradient(w[k]) for k, o in enumerate(oracles)])

        arms = {
            "joint, database, 1 session": InDatabaseGradient(one, joint, rows, d).gradient,
            f"joint, database, {sessions} sessions": InDatabaseGradient(
                default, joint, rows, d
            ).gradient,
            "joint, worker (numpy)": local_joint.gradient,
            "one-vs-rest, database, 1 session": ovr(
                [InDatabaseGradient(one, binary, rows, d, label_class=k) for k in range(CLASSES)]
            ),
            f"one-vs-rest, database, {sessions} sessions": ovr(
                [
                    InDatabaseGradient(default, binary, rows, d, label_class=k)
                    for k in range(CLASSES)
                ]
            ),
            "one-vs-rest, worker (numpy)": ovr(local_ovr),
        }
        rng = np.random.default_rng(3)
        times = {name: [] for name in arms}
        for _ in range(rounds):
            w_joint = rng.normal(size=CLASSES * d)
            w_ovr = rng.normal(size=(CLASSES, d))
            reference: dict[str, np.ndarray] = {}
            for name, gradient in arms.items():
                w = w_joint if name.startswith("joint") else w_ovr
                seconds, g = _timed(lambda gradient=gradient, w=w: gradient(w))
                times[name].append(seconds)
                family = name.split(",")[0]
                if "worker" in name:
                    reference[family] = np.asarray(g)
                else:
                    reference.setdefault(family + " db", np.asarray(g))
            for family in ("joint", "one-vs-rest"):
                db, numpy = reference[family + " db"], reference[family]
                gap = float(np.max(np.abs(db - numpy)) / max(np.max(np.abs(numpy)), 1e-300))
                differences[family] = max(differences.get(family, 0.0), gap)
    return {
        "rows": rows,
        "columns": columns,
        "classes": CLASSES,
        "d": d,
        "sessions": sessions,
        "read_s": read_s,
        "arms": [
            {"arm": name, "min_s": min(values), "median_s": float(np.median(values))}
            for name, values in times.items()
        ],
        "max_relative_difference": differences,
    }


def print_multiclass(results: dict[str, Any], seconds: Callable[[float], str]) -> None:
    m = results["multiclass"]
    print(
        f"\n### one gradient, categorical label (K = {m['classes']}): {m['rows']:,} rows × "
        f"{m['columns']} columns (d = {m['d']}, K·d = {m['classes'] * m['d']}), "
        f"{len(m['arms'])} arms interleaved\n"
    )
    print("| arm | min | median | median / worker's |")
    print("|---|---|---|---|")
    worker = {
        family: next(
            a["median_s"] for a in m["arms"] if a["arm"].startswith(family) and "worker" in a["arm"]
        )
        for family in ("joint", "one-vs-rest")
    }
    for a in m["arms"]:
        family = a["arm"].split(",")[0]
        print(
            f"| {a['arm']} | {seconds(a['min_s'])} | {seconds(a['median_s'])} "
            f"| {a['median_s'] / worker[family]:.1f} |"
        )
    gaps = m["max_relative_difference"]
    print(
        f"\nmax relative difference of the gradients, database vs numpy: joint "
        f"{gaps['joint']:.1e}, one-vs-rest {gaps['one-vs-rest']:.1e}; the worker path's read-out "
        f"of the rows took {seconds(m['read_s'])}"
    )
    sys.stdout.flush()


def refresh_cost(
    url: str, open_table: Callable[[str, str], SqlSource], rows: int, rounds: int
) -> list[dict[str, Any]]:
    """Per shape of :data:`REFRESH_SHAPES`: the median of one curvature-terms aggregate and of
    one joint gradient over ``rows`` mapped rows in one session (module docstring)."""
    from service.optimizers.kits.dp_agd_row_map import RowMap

    out = []
    for classes, columns in REFRESH_SHAPES:
        name = f"refresh_{classes}_{columns}"
        make_table(url, name, rows, columns, classes)
        source = open_table(url, name)
        encoder, label = schema(columns, classes)
        d = encoder.dimension
        loss = MultinomialLoss(l2=1e-4, classes=classes, gradient_clip=0.5, fit_intercept=True)
        mapping = RowMap(centre=np.zeros(d), intercept=1.0)
        rng = np.random.default_rng(5)
        times: dict[str, list[float]] = {"gradient": [], "refresh": []}
        fingerprint = source.fingerprint()
        with encoded_rows(
            source, encoder, label, None, n=rows, fingerprint=fingerprint, sessions=1
        ) as conn:
            mapped = InDatabaseGradient(conn, loss, rows, d).mapped(mapping)
            gradient_of, terms_of = mapped.gradient, mapped.curvature_terms  # type: ignore[attr-defined]
            for _ in range(rounds):
                w = rng.normal(size=classes * d) * 0.3
                basis = np.linalg.qr(rng.normal(size=(d, d)))[0]
                times["gradient"].append(_timed(lambda w=w, g=gradient_of: g(w))[0])
                seconds, _ = _timed(lambda w=w, q=basis, f=terms_of: f(w, q))
                times["refresh"].append(seconds)
        gradient, refresh = (float(np.median(times[k])) for k in ("gradient", "refresh"))
        sums = classes * d * (d + 1) // 2
        out.append(
            {
                "rows": rows,
                "classes": classes,
                "width": d,
                "sums": sums,
                "gradient_s": gradient,
                "refresh_s": refresh,
                "us_per_row_and_sum": refresh / (rows * sums) * 1e6,
            }
        )
    return out


def print_refresh(results: dict[str, Any], seconds: Callable[[float], str]) -> None:
    rows = results["refresh"]
    print(
        f"\n### the curvature refresh's aggregate vs one joint gradient, {rows[0]['rows']:,} "
        "mapped rows, one session (medians)\n"
    )
    print("| K | w | sums a row | gradient | refresh | refresh / gradient | µs a row and sum |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['classes']} | {r['width']} | {r['sums']:,} | {seconds(r['gradient_s'])} "
            f"| {seconds(r['refresh_s'])} | {r['refresh_s'] / r['gradient_s']:.1f} "
            f"| {r['us_per_row_and_sum']:.3f} |"
        )
    sys.stdout.flush()
