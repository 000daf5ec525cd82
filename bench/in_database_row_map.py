"""in-database ``auto`` with and without ``dp_agd_averaged``'s row map (public data only).

``python -m bench.in_database_row_map [--seeds S] [--eps 0.5,1,2]`` (needs the local
PostgreSQL server): scikit-learn's digits (10 classes, 64 pixel columns in [0, 16]) and
breast_cancer (binary, 30 columns, bounds from the public feature ranges rounded out), each
split 70/30 by seed 2026; the training part is a PostgreSQL table in a fresh database, fitted
inside the database by ``auto``'s choice for the job (``service.optimizers.auto.resolve``:
``dp_agd_averaged`` on the joint multinomial / binary logistic model), for each seed:

- **after**: ``fit_oracle`` on :class:`InDatabaseGradient` — the row map run in the database
  (the mean released, the rows mapped into ``pg_temp.dpfit_mapped``);
- **before**: the same plan, seed and oracle behind a wrapper without the row-map capability
  — what the in-database path did before (the plain steps at the plan's step noise, the mean's
  share unspent).

Prints the test accuracy (mean ± standard error over seeds, %) per data set and ε. Not a test.
"""

from __future__ import annotations

import argparse
import math
import os
import secrets
from typing import Any

import numpy as np
import sqlalchemy as sa

from bench.in_database import open_table
from service.data.encoding import Encoder
from service.data.reader import read_encoded
from service.data.spec import LabelSpec, NumericFeature
from service.models.registry import parse_model_spec
from service.optimizers.auto import resolve
from service.optimizers.kits.base import PrivacyTarget
from service.optimizers.kits.one_vs_rest import class_plan_of
from service.optimizers.kits.planning import plan_job
from service.workers.in_database import InDatabaseGradient, encoded_rows

ADMIN = os.environ.get(
    "DPFIT_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)


class Plain:
    """The oracle without the row-map capability (the path before the row map)."""

    def __init__(self, inner: InDatabaseGradient) -> None:
        self._inner = inner
        self.n, self.dimension = inner.n, inner.dimension

    def gradient(self, w: np.ndarray) -> np.ndarray:
        return self._inner.gradient(w)


def _data(name: str) -> tuple[np.ndarray, np.ndarray, list[tuple[float, float]], int | None]:
    from sklearn import datasets

    if name == "digits":
        X, y = datasets.load_digits(return_X_y=True)
        return X, y, [(0.0, 16.0)] * X.shape[1], 10
    X, y = datasets.load_breast_cancer(return_X_y=True)
    bounds = [
        (math.floor(lo * 0.9), math.ceil(hi * 1.1))
        for lo, hi in zip(X.min(0), X.max(0), strict=True)
    ]
    return X, y, bounds, None


def _write(url: str, table: str, X: np.ndarray, labels: list[str]) -> None:
    engine = sa.create_engine(url)
    columns = ", ".join(f"f{j} double precision" for j in range(X.shape[1]))
    with engine.begin() as conn:
        conn.exec_driver_sql(f"CREATE TABLE {table} (id integer PRIMARY KEY, {columns}, y text)")
        marks = ", ".join(["%s"] * (X.shape[1] + 2))
        rows = [(i, *map(float, X[i]), labels[i]) for i in range(X.shape[0])]
        conn.exec_driver_sql(f"INSERT INTO {table} VALUES ({marks})", rows)
    engine.dispose()


def _fit(
    conn: Any,
    planned: Any,
    n: int,
    width: int,
    classes: int | None,
    mappable: bool,
    generator: np.random.Generator,
) -> np.ndarray:
    """One fit through the database (the K class fits of one-vs-rest in order): K × width."""
    plan, loss, optimizer = planned.plan, planned.loss, planned.optimizer

    def oracle(k: int | None) -> Any:
        inner = InDatabaseGradient(conn, loss, n, width, label_class=k)
        return inner if mappable else Plain(inner)

    class_plan = class_plan_of(plan)
    if class_plan is None:
        w = optimizer.fit_oracle(plan, loss, oracle(None), generator, lambda _: None)
    else:
        fits = [
            optimizer.fit_oracle(class_plan, loss, oracle(k), generator, lambda _: None)
            for k in range(classes or 0)
        ]
        w = np.stack(fits)
    return np.asarray(w).reshape(-1, width)


def run(name: str, url: str, seeds: int, epsilons: list[float]) -> None:
    X, y, bounds, classes = _data(name)
    rng = np.random.default_rng(2026)
    order = rng.permutation(len(y))
    cut = int(0.7 * len(y))
    train, test = order[:cut], order[cut:]
    keys = [f"c{int(v)}" for v in y]
    _write(url, f"{name}_train", X[train], [keys[i] for i in train])
    _write(url, f"{name}_test", X[test], [keys[i] for i in test])
    encoder = Encoder(
        [NumericFeature(name=f"f{j}", min=lo, max=hi) for j, (lo, hi) in enumerate(bounds)],
        fit_intercept=True,
    )
    if classes:
        label = LabelSpec(column="y", type="categorical", classes=[f"c{k}" for k in range(10)])
    else:
        label = LabelSpec(column="y", type="binary", positive="c1", negative="c0")
    source = open_table(url, f"{name}_train")
    tests = open_table(url, f"{name}_test")
    Xt, Yt = read_encoded(tests, encoder, label, None)
    truth = np.argmax(Yt, axis=0) if classes else Yt
    n, d = len(train), X.shape[1]
    width = encoder.dimension
    for epsilon in epsilons:
        target = PrivacyTarget(epsilon, 1e-5)
        choice = resolve(parse_model_spec({"type": "logistic_regression"}), n, d, target, classes)
        planned = plan_job(
            parse_model_spec(choice.model),
            choice.optimizer,
            choice.params,
            n,
            d,
            target,
            classes=classes,
        )
        plan = planned.plan
        scores: dict[str, list[float]] = {"before": [], "after": []}
        fingerprint = source.fingerprint()
        with encoded_rows(source, encoder, label, None, n=n, fingerprint=fingerprint) as conn:
            for seed in range(seeds):
                for arm in ("before", "after"):
                    generator = np.random.default_rng(1000 + seed)
                    W = _fit(conn, planned, n, width, classes, arm == "after", generator)
                    if W.shape[0] == 1:
                        predicted = np.where(Xt @ W[0] >= 0.0, 1.0, -1.0)
                    else:
                        predicted = np.argmax(Xt @ W.T, axis=1)
                    scores[arm].append(100.0 * float(np.mean(predicted == truth)))
        share = (class_plan_of(plan) or plan).hyperparameters.get("row_map_share")
        cells = []
        for arm in ("before", "after"):
            values = np.array(scores[arm])
            cells.append(f"{values.mean():.1f} ± {values.std(ddof=1) / math.sqrt(len(values)):.1f}")
        print(
            f"| {name} | {n} | {epsilon:g} | {choice.optimizer} ({choice.model['type']}, "
            f"f = {share}) | {cells[0]} | {cells[1]} |",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--eps", default="0.5,1,2")
    parser.add_argument("--data", default="digits,breast_cancer")
    args = parser.parse_args()
    admin = sa.create_engine(ADMIN, isolation_level="AUTOCOMMIT")
    database = f"dpfit_bench_{secrets.token_hex(3)}"
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{database}"')
    url = sa.make_url(ADMIN).set(database=database).render_as_string(hide_password=False)
    print("| data | n (train) | ε | auto's choice | before: plain steps | after: row map |")
    print("|---|---|---|---|---|---|")
    try:
        for name in args.data.split(","):
            run(name, url, args.seeds, [float(e) for e in args.eps.split(",")])
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                f"WHERE datname = '{database}' AND pid <> pg_backend_pid()"
            )
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{database}"')
        admin.dispose()


if __name__ == "__main__":
    main()
