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
