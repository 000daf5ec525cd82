"""in-database: paper 004's in-RDBMS comparison, and the in-database vs worker paths, on PostgreSQL.

`python -m bench in-database [--rows N] [--columns K] [--passes P]` (needs the local PostgreSQL
server): creates a table of N rows (default 10⁵; ``--rows 1000000`` for the full figure) with K
numeric columns (default 10) and a binary label in a fresh database, then, side by side in one
run (arms interleaved, best of ``--repeat``):

1. **SGD inside the database** (Wu et al. 2017, §5 / Fig. 8: Bismarck's SGD aggregate; the
   arms' order rotates from one repeat to the next): one aggregate query per pass
   (:mod:`service.workers.in_database_sgd`) for
   - noiseless permutation SGD (the black box alone),
   - **bolt-on PSGD** (the same passes, then one noise draw in the worker) — the paper measures
     ≈ 1.0× the noiseless time; the issue's target is ≤ 1.05×,
   (per-step-noise SGD is not measured in the database: its noise must be the secure release
   of each exact batch gradient — rounded to a grid in the worker — which cannot be added to a
   value that stays inside the database; docs/in-database.md),
   all with the same passes and batch size b = 50, and the worker path's bolt-on PSGD (numpy on
   the read-out rows) for reference;
2. **full-gradient job** (``dp_agd`` with its default iterations, one of ``auto``'s choices):
   in the database (``encoded_rows`` + :class:`InDatabaseGradient`, one aggregate per
   gradient and session, through the optimizer's ``fit_oracle``; the rows over the default
   number of sessions, and one session for the setup and one gradient) vs the worker path
   (fingerprint + ``read_encoded`` + ``fit`` in numpy): the setup, one gradient (epoch, best
   of 3) and the whole job;
3. **sessions**: one gradient with the rows over 1, 2 … P sessions (P the default),
   interleaved round by round;
4. **profile**: where one gradient's time goes in one session (the scan alone, the column
   sums, the margins, the gradient query with JIT off / without inlining / with inlining),
   wall and backend CPU time;
6. **a categorical label** (``multiclass``, :mod:`bench.in_database_multiclass`): one gradient
   of the joint multinomial model and of one-vs-rest (K = 5), in the database vs numpy; and
   (``refresh``) the curvature refresh's aggregate against one joint gradient at three shapes
   (:data:`~bench.in_database_multiclass.REFRESH_ROWS` rows);
5. **the worker's peak RSS** in the in-database mode (the dp_agd job with 20 gradients and
   the bolt-on job with one pass, each in a fresh process, at N/10 and N rows: flat in n for
   both — bolt-on streams its permutation's keys) next to the worker path's, with each
   probe's time.

Accuracies are training accuracies (the bench reads the rows out for them; the service does
not). Prints markdown tables; writes ``in-database.json``. Not a test: speed goes here.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import numpy as np
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from service.data.encoding import Encoder
from service.data.reader import read_encoded
from service.data.spec import LabelSpec, NumericFeature
from service.data.sql_source import SqlSource, open_sql_source
from service.models.logistic import LogisticLoss
from service.optimizers.bolt_on_psgd import BoltOnConfig, BoltOnPSGD, BoltOnPSGDParams
from service.optimizers.kits.base import PrivacyTarget
from service.optimizers.kits.full_gradient import LocalGradient
from service.optimizers.kits.registry import get_optimizer
from service.optimizers.kits.sgd_common import schedule_from_json
from service.settings import Settings
from service.workers.in_database import InDatabaseGradient, encoded_rows
from service.workers.in_database_logistic import logistic_gradient_query
from service.workers.in_database_row_map import rows_table
from service.workers.in_database_sgd import fit_bolt_on_in_database, in_database_permutation_sgd

# bench.data (plots, pandas …) and the test fixtures are imported in ``run`` only: the RSS
# probe imports this module in a fresh interpreter and must carry no more than a worker does.

ROWS = 100_000
COLUMNS = 10
BATCH = 50
TARGET = PrivacyTarget(1.0, 1e-6)
LOSS = LogisticLoss(l2=0.0)
#: dp_agd's default iterations need l2 > 0 (or a radius): the model specs' default l2.
GD_LOSS = LogisticLoss(l2=1e-4)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rows", type=int, default=ROWS)
    parser.add_argument("--columns", type=int, default=COLUMNS)
    parser.add_argument("--passes", type=int, default=2, help="SGD passes of every SGD arm")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--parts",
        default="sgd,gradient,default,sessions,profile,rss,multiclass,refresh",
        help="comma-separated: sgd, gradient, default, sessions, profile, rss, multiclass, refresh",
    )
    parser.add_argument("--smoke", action="store_true", help="2,000 rows, one pass, one repeat")


# --- the table -------------------------------------------------------------------------------


def schema(columns: int) -> tuple[Encoder, LabelSpec]:
    encoder = Encoder(
        [NumericFeature(name=f"x{j}", min=-3, max=3) for j in range(1, columns + 1)],
        fit_intercept=True,
    )
    return encoder, LabelSpec(column="y", type="binary", positive="true", negative="false")


def make_table(url: str, name: str, rows: int, columns: int) -> None:
    """N rows generated inside PostgreSQL (nothing passes through this process): x_j uniform on
    [−3, 3], y = [Σ_j θ_j x_j + logistic noise > 0] with θ_j = (−1)^j·(1/j)."""
    xs = ", ".join(f"random() * 6 - 3 AS x{j}" for j in range(1, columns + 1))
    logit = " + ".join(f"({(-1) ** j / j!r}) * x{j}" for j in range(1, columns + 1))
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql("SELECT setseed(0.25)")
        conn.exec_driver_sql(
            f"CREATE TABLE {name} AS SELECT i AS id, "
            + ", ".join(f"x{j}" for j in range(1, columns + 1))
            + f", ({logit} + ln(u / (1 - u))) > 0 AS y FROM ("
            f"SELECT i, {xs}, greatest(random(), 1e-12) AS u "
            f"FROM generate_series(1, {int(rows)}) AS i) AS s"
        )
        conn.exec_driver_sql(f"ALTER TABLE {name} ADD PRIMARY KEY (id)")
        conn.exec_driver_sql(f"ANALYZE {name}")
    engine.dispose()


def open_table(url: str, name: str) -> SqlSource:
    settings = Settings(
        database_url="sqlite://",
        data_roots=(),
        workers=1,
        dask_scheduler=None,
        sql_connections={"wh": url},
    )
    return open_sql_source(f"sql://wh/{name}", settings)


def accuracy(w: np.ndarray, X: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean(np.where(X @ w >= 0.0, 1.0, -1.0) == y))


@contextmanager
def session(
    source: SqlSource,
    encoder: Encoder,
    label: LabelSpec,
    n: int,
    *,
    positions: bool,
    sessions: int | None = None,
) -> Iterator[Any]:
    with encoded_rows(
        source,
        encoder,
        label,
        None,
        n=n,
        fingerprint=source.fingerprint(),
        positions=positions,
        sessions=sessions,
    ) as conn:
        yield conn


def timed(action: Callable[..., Any], *args: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    out = action(*args)
    return time.perf_counter() - start, out


def _ignore(_: int) -> None:
    """A progress callback that drops the count."""


# --- 1. SGD inside the database ----------------------------------------------------------------


def sgd_arms(
    source: SqlSource, n: int, columns: int, passes: int, repeat: int, X: np.ndarray, y: np.ndarray
) -> list[dict[str, Any]]:
    encoder, label = schema(columns)
    d = encoder.dimension
    bolt_on = BoltOnPSGD()
    plan = bolt_on.plan(BoltOnPSGDParams(passes=passes, batch_size=BATCH), LOSS, n, d, TARGET)
    config = BoltOnConfig.from_hyperparameters(plan.hyperparameters)
    schedule = schedule_from_json(config.schedule)

    def noiseless(conn: Any, seed: int) -> np.ndarray:
        return in_database_permutation_sgd(
            conn,
            LOSS,
            n=n,
            d=d,
            passes=config.passes,
            batch_size=config.batch_size,
            schedule=schedule,
            averaging=config.averaging,
            radius=config.radius,
            rng=np.random.default_rng(seed),
        )

    def bolt(conn: Any, seed: int) -> np.ndarray:
        return fit_bolt_on_in_database(
            conn, plan, LOSS, n, d, np.random.default_rng(seed), lambda t: None
        )

    arms: dict[str, Callable[[Any, int], np.ndarray]] = {
        "noiseless SGD (in database)": noiseless,
        "bolt-on PSGD (in database)": bolt,
    }
    best = {name: math.inf for name in arms}
    runs: dict[str, list[float]] = {name: [] for name in arms}
    models: dict[str, np.ndarray] = {}
    worker_best = math.inf
    with session(source, encoder, label, n, positions=True) as conn:
        names = list(arms)
        for r in range(repeat):
            # rotate the order of the arms from one repeat to the next (load hits all alike)
            for name in names[r % len(names) :] + names[: r % len(names)]:
                elapsed, models[name] = timed(arms[name], conn, 100 + r)
                best[name] = min(best[name], elapsed)
                runs[name].append(elapsed)
            elapsed, models["worker"] = timed(
                bolt_on.fit, plan, LOSS, X, y, np.random.default_rng(100 + r), _ignore
            )
            worker_best = min(worker_best, elapsed)
    base = best["noiseless SGD (in database)"]
    rows = [
        {
            "arm": name,
            "job_s": best[name],
            "pass_s": best[name] / passes,
            "ratio": best[name] / base,
            # the same repeat's runs side by side (adjacent in time), then the median
            "paired_ratio": float(
                np.median(np.array(runs[name]) / np.array(runs["noiseless SGD (in database)"]))
            ),
            "accuracy": accuracy(models[name], X, y),
        }
        for name in arms
    ]
    rows.append(
        {
            "arm": "bolt-on PSGD (worker path, numpy; rows already read)",
            "job_s": worker_best,
            "pass_s": worker_best / passes,
            "ratio": worker_best / base,
            "paired_ratio": math.nan,
            "accuracy": accuracy(models["worker"], X, y),
        }
    )
    return rows


# --- 2. full-gradient job: in the database vs the worker path ----------------------------------


def gradient_job(source: SqlSource, n: int, columns: int, repeat: int) -> dict[str, Any]:
    encoder, label = schema(columns)
    d = encoder.dimension
    optimizer: Any = get_optimizer("dp_agd")
    plan = optimizer.plan(optimizer.Params(), GD_LOSS, n, d, TARGET)
    iterations = int(plan.total_steps)
    out: dict[str, Any] = {"iterations": iterations}
    best: dict[str, float] = {}

    def keep(key: str, value: float) -> None:
        best[key] = min(best.get(key, math.inf), value)

    w0 = np.full(d, 0.1)
    for r in range(repeat):
        # one session (PostgreSQL scans a temporary table in one process): setup + 3 gradients
        start = time.perf_counter()
        with session(source, encoder, label, n, positions=False, sessions=1) as conn:
            keep("one_setup_s", time.perf_counter() - start)
            oracle = InDatabaseGradient(conn, GD_LOSS, n, d)
            for _ in range(3):
                keep("one_gradient_s", timed(oracle.gradient, w0)[0])
        # in the database (the default: the rows over P sessions): fingerprint + materialise,
        # then T aggregate queries
        start = time.perf_counter()
        with session(source, encoder, label, n, positions=False) as conn:
            keep("db_setup_s", time.perf_counter() - start)
            oracle = InDatabaseGradient(conn, GD_LOSS, n, d)
            out["sessions"] = oracle.sessions
            for _ in range(3):
                keep("db_gradient_s", timed(oracle.gradient, w0)[0])
            fit_s, w_db = timed(
                optimizer.fit_oracle, plan, GD_LOSS, oracle, np.random.default_rng(r), _ignore
            )
        keep("db_job_s", time.perf_counter() - start)
        keep("db_fit_s", fit_s)
        # the worker path: fingerprint + read out + encode, then numpy
        start = time.perf_counter()
        source.fingerprint()
        X, y = read_encoded(source, encoder, label, None)
        keep("worker_setup_s", time.perf_counter() - start)
        local = LocalGradient(GD_LOSS, X, y)
        for _ in range(3):
            keep("worker_gradient_s", timed(local.gradient, w0)[0])
        fit_s, w_worker = timed(
            optimizer.fit, plan, GD_LOSS, X, y, np.random.default_rng(r), _ignore
        )
        keep("worker_job_s", time.perf_counter() - start)
        keep("worker_fit_s", fit_s)
        out["db_accuracy"] = accuracy(w_db, X, y)
        out["worker_accuracy"] = accuracy(w_worker, X, y)
        # same seed, same plan: the same release up to summation order
        out["max_relative_difference"] = float(
            np.max(np.abs(w_db - w_worker)) / max(np.max(np.abs(w_worker)), 1e-300)
        )
        del X, y, local
    out.update(best)
    return out


def sessions_sweep(source: SqlSource, n: int, columns: int, rounds: int) -> list[dict[str, Any]]:
    """One gradient with the rows over 1, 2 … P sessions (P the default), interleaved round
    by round (the machine's load hits all alike): min and median of ``rounds`` gradients."""
    encoder, label = schema(columns)
    d = encoder.dimension
    fingerprint = source.fingerprint()
    with ExitStack() as stack:
        first = stack.enter_context(
            encoded_rows(source, encoder, label, None, n=n, fingerprint=fingerprint)
        )
        planned = InDatabaseGradient(first, GD_LOSS, n, d).sessions
        oracles = {planned: InDatabaseGradient(first, GD_LOSS, n, d)}
        for count in range(1, planned):
            conn = stack.enter_context(
                encoded_rows(
                    source, encoder, label, None, n=n, fingerprint=fingerprint, sessions=count
                )
            )
            oracles[count] = InDatabaseGradient(conn, GD_LOSS, n, d)
        times: dict[int, list[float]] = {count: [] for count in sorted(oracles)}
        for r in range(rounds):
            w = np.full(d, 0.1 * (r + 1))
            for count in times:
                times[count].append(timed(oracles[count].gradient, w)[0])
    base = float(np.median(times[1]))
    return [
        {
            "sessions": count,
            "min_s": min(values),
            "median_s": float(np.median(values)),
            "ratio": float(np.median(values)) / base,
        }
        for count, values in times.items()
    ]


def _backend_cpu_s(pid: int) -> float:
    """The CPU time (user + system) of a local PostgreSQL backend, from /proc (NaN when the
    server is not on this machine)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return math.nan
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def profile(source: SqlSource, n: int, columns: int, rounds: int) -> list[dict[str, Any]]:
    """Where one gradient's time goes, in one session: the scan alone, the column sums, the
    margins, the whole gradient query (JIT off, JIT without inlining, JIT with inlining and
    optimisation); wall and backend CPU time, min over ``rounds`` interleaved rounds."""
    encoder, label = schema(columns)
    d = encoder.dimension
    rows = "pg_temp.dpfit_rows"
    w = [0.1 * (-1) ** j / (j + 1) for j in range(d)]
    margin = " + ".join(f"x{j} * {w[j]!r}::float8" for j in range(d))
    gradient = str(
        logistic_gradient_query(GD_LOSS, rows_table("dpfit_rows", d), d)
        .params(**{f"w{j}": w[j] for j in range(d)})
        .compile(dialect=postgresql.dialect(), compile_kwargs={"literal_binds": True})
    ).replace("%%", "%")
    no_jit = ["jit = off"]
    jit = ["jit = on", "jit_above_cost = 0"]
    arms: dict[str, tuple[str, list[str]]] = {
        "count(*) (the scan alone)": (f"SELECT count(*) FROM {rows}", no_jit),
        "the d column sums": (
            "SELECT " + ", ".join(f"sum(x{j})" for j in range(d)) + f" FROM {rows}",
            no_jit,
        ),
        "the margins' sum": (f"SELECT sum({margin}) FROM {rows}", no_jit),
        "the gradient query, JIT off": (gradient, no_jit),
        "the gradient query, JIT without inlining": (
            gradient,
            [*jit, "jit_inline_above_cost = -1", "jit_optimize_above_cost = -1"],
        ),
        "the gradient query, JIT with inlining and optimisation": (
            gradient,
            [*jit, "jit_inline_above_cost = 0", "jit_optimize_above_cost = 0"],
        ),
    }
    wall = {name: math.inf for name in arms}
    cpu = {name: math.inf for name in arms}
    with session(source, encoder, label, n, positions=False, sessions=1) as conn:
        pid = int(conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one())
        for _ in range(rounds):
            for name, (sql, settings) in arms.items():
                for setting in settings:
                    conn.exec_driver_sql(f"SET {setting}")
                before = _backend_cpu_s(pid)
                elapsed = timed(lambda text=sql: conn.exec_driver_sql(text).all())[0]
                wall[name] = min(wall[name], elapsed)
                cpu[name] = min(cpu[name], _backend_cpu_s(pid) - before)
        conn.exec_driver_sql("RESET jit")
    return [{"query": name, "wall_s": wall[name], "cpu_s": cpu[name]} for name in arms]


# --- 3. the worker's peak RSS ---------------------------------------------------------------


def _status_mib(field: str) -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def reset_peak_rss() -> float:
    """Reset this process's peak RSS (VmHWM) to its current RSS and return that, in MiB."""
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")
    return _status_mib("VmRSS")


def _peak_rss(url: str, table: str, n: int, columns: int, job: str) -> dict[str, float]:
    """In a fresh process: RSS after the imports and opening the source, and the peak (VmHWM)
    after one job of the given kind."""
    source = open_table(url, table)
    encoder, label = schema(columns)
    d = encoder.dimension
    before = reset_peak_rss()
    start = time.perf_counter()
    # 20 iterations: the peak memory does not depend on the number of gradients
    if job == "dp_agd in database":
        optimizer: Any = get_optimizer("dp_agd")
        plan = optimizer.plan(optimizer.Params(iterations=20), GD_LOSS, n, d, TARGET)
        with session(source, encoder, label, n, positions=False) as conn:
            optimizer.fit_oracle(
                plan,
                GD_LOSS,
                InDatabaseGradient(conn, GD_LOSS, n, d),
                np.random.default_rng(0),
                lambda t: None,
            )
    elif job == "bolt-on PSGD in database":
        plan = BoltOnPSGD().plan(BoltOnPSGDParams(passes=1, batch_size=BATCH), LOSS, n, d, TARGET)
        with session(source, encoder, label, n, positions=True) as conn:
            fit_bolt_on_in_database(
                conn, plan, LOSS, n, d, np.random.default_rng(0), lambda t: None
            )
    else:  # the worker path
        optimizer = get_optimizer("dp_agd")
        plan = optimizer.plan(optimizer.Params(iterations=20), GD_LOSS, n, d, TARGET)
        source.fingerprint()
        X, y = read_encoded(source, encoder, label, None)
        optimizer.fit(plan, GD_LOSS, X, y, np.random.default_rng(0), lambda t: None)
    # the whole job: setup (fingerprint, materialise or read) + 20 gradients, or one pass
    return {
        "before_mib": before,
        "peak_mib": _status_mib("VmHWM"),
        "job_s": time.perf_counter() - start,
    }


def peak_rss(url: str, table: str, n: int, columns: int, job: str) -> dict[str, float]:
    """:func:`_peak_rss` in a fresh interpreter that imports this module only (not ``bench``'s
    other suites, as a spawned ``multiprocessing`` child of ``python -m bench`` would)."""
    code = (
        "import json, sys; from bench.in_database import _peak_rss; "
        "print(json.dumps(_peak_rss(*json.loads(sys.argv[1]))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, json.dumps([url, table, n, columns, job])],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the RSS probe failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


# --- the suite ---------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> None:
    from bench.data import results_dir, save_json, seconds
    from bench.in_database_default_job import default_job, print_default_job
    from bench.in_database_multiclass import (
        REFRESH_ROWS,
        multiclass_gradient,
        print_multiclass,
        print_refresh,
        refresh_cost,
    )
    from tests.support.fixtures import _fresh_postgres_database

    rows, passes, repeat = (2_000, 1, 1) if args.smoke else (args.rows, args.passes, args.repeat)
    columns = args.columns
    parts = set(args.parts.split(","))
    small = max(rows // 10, 2 * BATCH)
    results: dict[str, Any] = {"rows": rows, "columns": columns, "passes": passes}
    path = results_dir(args.smoke) / "in-database.json"
    # every section is printed and saved as soon as it is measured (before the fixture drops
    # the database, which can wait on other sessions of a shared server)
    for url in _fresh_postgres_database():
        make_table(url, "big", rows, columns)
        make_table(url, "small", small, columns)
        source = open_table(url, "big")
        encoder, label = schema(columns)
        if "sgd" in parts:
            X, y = read_encoded(source, encoder, label, None)
            results["sgd"] = sgd_arms(source, rows, columns, passes, repeat, X, y)
            del X, y
            print_sgd(results, seconds)
            save_json(path, results)
        if "gradient" in parts:
            results["gradient"] = gradient_job(source, rows, columns, repeat)
            print_gradient(results, seconds)
            save_json(path, results)
        if "sessions" in parts:
            results["sessions"] = sessions_sweep(source, rows, columns, rounds=max(3, 3 * repeat))
            print_sessions(results, seconds)
            save_json(path, results)
        if "profile" in parts:
            results["profile"] = profile(source, rows, columns, rounds=max(3, repeat))
            print_profile(results, seconds)
            save_json(path, results)
        if "multiclass" in parts:  # a categorical label (bench/in_database_multiclass.py)
            results["multiclass"] = multiclass_gradient(
                url, open_table, rows, columns, rounds=max(3, 3 * repeat)
            )
            print_multiclass(results, seconds)
            save_json(path, results)
        if "refresh" in parts:  # the curvature refresh's aggregate (the same module)
            refresh_rows = 2_000 if args.smoke else REFRESH_ROWS
            results["refresh"] = refresh_cost(url, open_table, refresh_rows, rounds=3)
            print_refresh(results, seconds)
            save_json(path, results)
        if "default" in parts:  # the default job, whole (bench/in_database_default_job.py)
            results["default"] = default_job(url, "big", rows, columns)
            print_default_job(results, seconds)
            save_json(path, results)
        if "rss" in parts:
            results["rss"] = [
                {"job": job, "rows": n, **peak_rss(url, table, n, columns, job)}
                for job in ("dp_agd in database", "bolt-on PSGD in database", "dp_agd, worker path")
                for table, n in (("small", small), ("big", rows))
            ]
            print_rss(results)
            save_json(path, results)


def print_sgd(results: dict[str, Any], seconds: Callable[[float], str]) -> None:
    rows, columns, passes = results["rows"], results["columns"], results["passes"]
    d = columns + 1
    print(
        f"\n### SGD inside PostgreSQL (paper 004 §5): {rows:,} rows × {columns} columns (d = {d}), "
        f"{passes} passes, b = {BATCH}, best of the repeats\n"
    )
    print(
        "| arm | job (best) | per pass | × noiseless (best / best) "
        "| × noiseless (median of same-repeat pairs) | training accuracy |"
    )
    print("|---|---|---|---|---|---|")
    for r in results["sgd"]:
        paired = "—" if math.isnan(r["paired_ratio"]) else f"{r['paired_ratio']:.3f}"
        print(
            f"| {r['arm']} | {seconds(r['job_s'])} | {seconds(r['pass_s'])} | {r['ratio']:.3f} "
            f"| {paired} | {r['accuracy']:.4f} |"
        )
    sys.stdout.flush()


def print_gradient(results: dict[str, Any], seconds: Callable[[float], str]) -> None:
    rows = results["rows"]
    g = results["gradient"]
    print(
        f"\n### dp_agd ({g['iterations']} gradients): in the database ({g['sessions']} "
        f"sessions, the default) vs the worker path, {rows:,} rows, best of the repeats\n"
    )
    print(
        "| path | setup (fingerprint + materialise / read) | one gradient (epoch) | optimizer "
        "| job | training accuracy |"
    )
    print("|---|---|---|---|---|---|")
    print(
        f"| in database, 1 session (setup and one gradient only) | {seconds(g['one_setup_s'])} "
        f"| {seconds(g['one_gradient_s'])} | — | — | — |"
    )
    print(
        f"| in database | {seconds(g['db_setup_s'])} "
        f"| {seconds(g['db_gradient_s'])} "
        f"| {seconds(g['db_fit_s'])} | {seconds(g['db_job_s'])} | {g['db_accuracy']:.4f} |"
    )
    print(
        f"| worker path | {seconds(g['worker_setup_s'])} | {seconds(g['worker_gradient_s'])} "
        f"| {seconds(g['worker_fit_s'])} | {seconds(g['worker_job_s'])} "
        f"| {g['worker_accuracy']:.4f} |"
    )
    print(
        f"| ratio (database, default / worker) | {g['db_setup_s'] / g['worker_setup_s']:.2f} "
        f"| {g['db_gradient_s'] / g['worker_gradient_s']:.2f} "
        f"| {g['db_fit_s'] / g['worker_fit_s']:.2f} "
        f"| {g['db_job_s'] / g['worker_job_s']:.2f} | max relative difference of the models "
        f"{g['max_relative_difference']:.1e} |"
    )
    sys.stdout.flush()


def print_sessions(results: dict[str, Any], seconds: Callable[[float], str]) -> None:
    print(
        f"\n### one gradient over {results['rows']:,} rows × {results['columns']} columns, "
        "the rows over P sessions (interleaved rounds)\n"
    )
    print("| sessions | min | median | median / 1 session |")
    print("|---|---|---|---|")
    for r in results["sessions"]:
        print(
            f"| {r['sessions']} | {seconds(r['min_s'])} | {seconds(r['median_s'])} "
            f"| {r['ratio']:.2f} |"
        )
    sys.stdout.flush()


def print_profile(results: dict[str, Any], seconds: Callable[[float], str]) -> None:
    print(
        f"\n### where one gradient's time goes: {results['rows']:,} rows × "
        f"{results['columns']} columns, one session (min over rounds)\n"
    )
    print("| query | wall | backend CPU (10 ms ticks) |")
    print("|---|---|---|")
    for r in results["profile"]:
        print(f"| {r['query']} | {seconds(r['wall_s'])} | {seconds(r['cpu_s'])} |")
    sys.stdout.flush()


def print_rss(results: dict[str, Any]) -> None:
    print("\n### the worker's peak RSS (fresh process each; MiB)\n")
    print("| job | rows | RSS before | peak | growth | time (setup + 20 gradients, or one pass) |")
    print("|---|---|---|---|---|---|")
    for r in results["rss"]:
        print(
            f"| {r['job']} | {r['rows']:,} | {r['before_mib']:.0f} | {r['peak_mib']:.0f} "
            f"| {r['peak_mib'] - r['before_mib']:.0f} | {r.get('job_s', math.nan):.1f} s |"
        )
    sys.stdout.flush()
