"""scaling: job wall time vs n, the full-gradient pass against the memory-bandwidth bound, and the
service's own overhead through the API.

1. **Job time vs n** (d = 100, Bismarck-style synthetic logistic data written as Parquet; float64
   for n ≤ 1e6, float32 for n = 1e7): a job as a worker runs it — read the Parquet columns and
   encode them with the public bounds block by block into one float64 matrix (the worker's own
   ``read_encoded``; rows to ‖x‖ ≤ 1), with the process's peak RSS after each n, plan (noise
   calibration from public n, d, ε), fit — timed per stage, for one
   optimizer of each family at a fixed amount of work (stated in the table; the default T of the
   full-gradient methods grows like n^{2/3} up to 2,000 steps, far beyond this machine's budget at
   n ≥ 1e6, so their time per step is what to extrapolate from). Logistic, l2 = 1e-4,
   (ε = 1, δ = 1e-6).
2. **Gradient pass / X.sum()** at n = 1e6, d = 100, float64 and float32: the service's logistic
   gradient (what every full-gradient optimizer calls), and a chunked two-thread single-pass
   reference (``chunked_gradient``: 2,048-row blocks, each thread with single-threaded BLAS, so the
   block's second read hits cache), each divided by one ``X.sum()`` on the same array (one read of
   X: the memory-bandwidth bound). Best of 5.
3. **Service overhead** through the API (``bench/service_overhead.py``): a real ``dpfit serve``
   with one worker process, jobs submitted one at a time on the 4,000-row example (p50/p95 of
   submit → succeeded over ``--jobs`` jobs; minus the in-process fit time of the same job = the
   overhead), and whole jobs on UCI Adult (32,561 rows, registered as a CSV) end to end.
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from scipy.special import expit

from bench import scaling_parallel
from bench.data import (
    ADULT_COLUMNS,
    ADULT_FEATURES,
    SYNTHETIC_LABEL,
    fit,
    logistic_model,
    plan,
    pyplot,
    read_adult_frame,
    results_dir,
    save_json,
    seconds,
    synthetic_features,
    synthetic_rows,
    timed,
    write_synthetic_parquet,
)
from service.data.encoding import Encoder
from service.data.reader import read_encoded
from service.data.sources import local_source
from service.models.logistic import LogisticLoss

SIZES = [10_000, 100_000, 1_000_000, 10_000_000]
D = 100
EPS, DELTA, L2 = 1.0, 1e-6, 1e-4

# (optimizer, fixed work, description)
FAMILIES: list[tuple[str, dict[str, Any], str]] = [
    ("output_perturbation_gd", {"iterations": 20}, "full-batch GD, noise once: 20 steps"),
    ("dp_gd", {"iterations": 20}, "noisy full-batch GD: 20 steps"),
    ("bolt_on_psgd", {"passes": 1, "batch_size": 50}, "permutation SGD, noise once: 1 pass, b=50"),
    ("noisy_sgd_scs13", {"passes": 1, "batch_size": 50}, "noisy permutation SGD: 1 pass, b=50"),
    ("noisy_sgd_bst14", {"batch_size": 50}, "sampled noisy SGD: default T=min((n/b)², 10⁴), b=50"),
    ("dp_svrg", {"epochs": 2}, "variance-reduced: 2 epochs (full snapshot + default inner steps)"),
    ("dp_spiderboost", {}, "SpiderBoost + tree: defaults (single pass)"),
]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sizes", type=int, nargs="+", default=SIZES)
    parser.add_argument(
        "--fit-budget",
        type=float,
        default=150.0,
        help="skip a family at the next n when 10× its time at this n exceeds this (s)",
    )
    parser.add_argument("--jobs", type=int, default=50, help="sequential API jobs (overhead)")
    parser.add_argument("--adult-jobs", type=int, default=10, help="API jobs on Adult")
    parser.add_argument("--database", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--workdir", type=Path, default=None, help="where the Parquet files go")
    parser.add_argument("--skip-service", action="store_true")
    parser.add_argument(
        "--service-only",
        action="store_true",
        help=(
            "re-measure only the gradient ratio and the API part, merge them into the saved "
            "JSON, re-print everything"
        ),
    )
    parser.add_argument("--report-only", action="store_true", help="re-print from the saved JSON")
    parser.add_argument("--smoke", action="store_true", help="n = 2,000 only, 3 API jobs, SQLite")
    parser.add_argument(
        "--data-parallel",
        action="store_true",
        help="only the data-parallel path vs single process (bench/scaling_parallel.py)",
    )
    scaling_parallel.add_arguments(parser)


# --------------------------------------------------------------------------------------------
# 1. Job time vs n
# --------------------------------------------------------------------------------------------


def peak_rss_bytes() -> int:
    """This process's peak resident set size so far (Linux reports ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def mem_available() -> int:
    """MemAvailable from /proc/meminfo in bytes (0 if unknown)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def job_times(
    sizes: list[int], workdir: Path, fit_budget: float
) -> tuple[list[dict[str, Any]], list[str]]:
    rows: list[dict[str, Any]] = []
    notes: list[str] = []
    encoder = Encoder(features=synthetic_features(D), fit_intercept=True)
    skip: set[str] = set()
    last: dict[str, float] = {}
    for n in sizes:
        dtype = np.float32 if n >= 10_000_000 else np.float64
        need = n * D * 8 * 1.3  # float64 X + one block + the optimizer's temporaries
        if mem_available() and need > mem_available():
            notes.append(
                f"n = {n:.0e}: skipped — needs ~{need / 2**30:.0f} GiB, "
                f"{mem_available() / 2**30:.0f} GiB available"
            )
            continue
        path = workdir / f"synthetic_{n}_{np.dtype(dtype).name}.parquet"
        start = time.perf_counter()
        if not path.exists():
            write_synthetic_parquet(path, n, D, dtype=dtype, seed=1)
        write_time = time.perf_counter() - start
        start = time.perf_counter()
        X, y = read_encoded(local_source(path, "parquet"), encoder, SYNTHETIC_LABEL, None)
        read_time = time.perf_counter() - start
        encode_time = 0.0  # fused: the worker reads and encodes block by block
        gc.collect()
        base = {
            "n": n,
            "dtype": np.dtype(dtype).name,
            "file_MB": path.stat().st_size / 1e6,
            "write": write_time,
            "read": read_time,
            "encode": encode_time,
            "peak_rss_GB": peak_rss_bytes() / 1e9,
        }
        print(f"  n = {n:.0e}: read + encode {read_time:.2f} s", flush=True)
        for name, params, _ in FAMILIES:
            if name in skip:
                rows.append({**base, "optimizer": name, "skipped": True})
                continue
            start = time.perf_counter()
            job = plan(name, logistic_model(L2), n, X.shape[1], EPS, DELTA, params)
            plan_time = time.perf_counter() - start
            _, wall, cpu = fit(job, X, y, 0)
            steps = job.plan.total_steps
            rows.append(
                {
                    **base,
                    "optimizer": name,
                    "plan": plan_time,
                    "fit": wall,
                    "cpu": cpu,
                    "steps": steps,
                    "job": read_time + encode_time + plan_time + wall,
                }
            )
            last[name] = wall
            print(
                f"    {name}: plan {plan_time:.2f} s, fit {wall:.2f} s ({steps} steps)", flush=True
            )
            if 10 * wall > fit_budget:
                skip.add(name)
        # default T of output_perturbation_gd at this n, for extrapolation
        default = plan("output_perturbation_gd", logistic_model(L2), n, X.shape[1], EPS, DELTA)
        for row in rows:
            if row["n"] == n and row["optimizer"] == "output_perturbation_gd" and "fit" in row:
                row["default_T"] = default.plan.total_steps
                row["default_fit_estimate"] = row["fit"] / 20 * default.plan.total_steps
        del X, y
        gc.collect()
    for name in sorted(skip):
        largest = max(r["n"] for r in rows if r["optimizer"] == name and "fit" in r)
        if largest == max(sizes):
            continue  # nothing larger was asked for
        notes.append(
            f"`{name}` skipped beyond n = {largest:.0e}"
            f" (10× its last fit time {last[name]:.0f} s exceeds the {fit_budget:.0f} s budget)"
        )
    return rows, notes


# --------------------------------------------------------------------------------------------
# 2. Gradient pass vs one read of X
# --------------------------------------------------------------------------------------------


def chunked_gradient(
    X: np.ndarray, y: np.ndarray, w: np.ndarray, pool: ThreadPoolExecutor, block: int = 2048
) -> np.ndarray:
    """Σ_i −y_i σ(−y_i w·x_i) x_i in one pass: two threads over row halves, each walking blocks
    of ``block`` rows (z = X_b w, then X_bᵀ z while the block is still in cache). The caller limits
    BLAS to one thread (threadpoolctl) so the two threads do not oversubscribe the two cores."""

    def part(lo: int, hi: int) -> np.ndarray:
        g = np.zeros(X.shape[1], dtype=X.dtype)
        for s in range(lo, hi, block):
            xb, yb = X[s : min(hi, s + block)], y[s : min(hi, s + block)]
            z = xb @ w
            z *= -yb
            expit(z, out=z)
            z *= yb
            g -= xb.T @ z
        return g

    half = X.shape[0] // 2
    first, second = pool.map(lambda b: part(*b), [(0, half), (half, X.shape[0])])
    return (first + second) / X.shape[0]


def gradient_ratio(n: int, repeat: int = 5) -> list[dict[str, Any]]:
    from threadpoolctl import threadpool_limits

    X64, y64 = synthetic_rows(n, D, seed=2)
    loss = LogisticLoss(l2=0.0)
    w64 = np.random.default_rng(3).standard_normal(D) * 0.1
    out = []
    with ThreadPoolExecutor(2) as pool:
        for dtype in (np.float64, np.float32):
            X = X64 if dtype == np.float64 else X64.astype(np.float32)
            y, w = y64.astype(dtype), w64.astype(dtype)
            reference = loss.gradient(w64, X64, y64)
            with threadpool_limits(1):
                check = chunked_gradient(X, y, w, pool)
            assert np.allclose(check, reference, rtol=1e-3, atol=1e-5)
            t_sum = timed(lambda X=X: X.sum(), repeat)
            t_grad = timed(lambda X=X, y=y, w=w: loss.gradient(w, X, y), repeat)

            def chunked(X: np.ndarray = X, y: np.ndarray = y, w: np.ndarray = w) -> None:
                with threadpool_limits(1):
                    chunked_gradient(X, y, w, pool)

            t_chunk = timed(chunked, repeat)
            out.append(
                {
                    "dtype": np.dtype(dtype).name,
                    "n": n,
                    "sum": t_sum,
                    "service_gradient": t_grad,
                    "chunked_gradient": t_chunk,
                }
            )
            del X
    return out


# --------------------------------------------------------------------------------------------
# 3. Service overhead through the API
# --------------------------------------------------------------------------------------------


def adult_dataset_body(uri: str) -> dict[str, Any]:
    return {
        "name": "adult",
        "source": {"uri": uri},
        "label": {"column": "income", "positive": ">50K", "negative": "<=50K"},
        "features": [f.model_dump(mode="json") for f in ADULT_FEATURES],
        "budget": {"epsilon": 1000.0, "delta": 1e-5},
    }


def adult_in_process(path: Path, repeat: int = 3) -> dict[str, float]:
    """The same Adult job as the API runs, in this process: read the CSV and encode it with the
    worker's row-local reader (one fused stage, reported as "read"; "encode" is 0), plan, fit
    (median of ``repeat``)."""
    from service.data.spec import LabelSpec

    encoder = Encoder(features=ADULT_FEATURES, fit_intercept=True)
    label = LabelSpec(column="income", type="binary", positive=">50K", negative="<=50K")
    stages: dict[str, list[float]] = {"read": [], "encode": [], "plan": [], "fit": []}
    for seed in range(repeat):
        start = time.perf_counter()
        X, y = read_encoded(local_source(path, "csv"), encoder, label, None)
        stages["read"].append(time.perf_counter() - start)
        stages["encode"].append(0.0)
        start = time.perf_counter()
        job = plan("output_perturbation_gd", logistic_model(1e-4), len(y), X.shape[1], 1.0, 1e-6)
        stages["plan"].append(time.perf_counter() - start)
        stages["fit"].append(fit(job, X, y, seed)[1])
    return {k: statistics.median(v) for k, v in stages.items()}


def service_overhead(
    backends: list[str], jobs: int, adult_jobs: int, smoke: bool
) -> list[dict[str, Any]]:
    from bench import catalog
    from bench import service_overhead as so
    from tests.support.fixtures import DEFAULT_PG, EXAMPLES
    from tests.support.live import start_server
    from tests.support.walkthrough import logistic_job

    # in-process fit time of the very job the latency loop submits (example data, defaults)
    X, y, _, _, _ = catalog.load_example()
    example_fit = statistics.median(
        catalog.fit_once(
            "output_perturbation_gd", catalog.CONVEX_MODEL | {"l2": 0.01}, X, y, 1.0, 1e-6, s
        )[1]
        for s in range(5)
    )
    rows = []
    for backend in backends:
        with tempfile.TemporaryDirectory() as tmp:
            home = Path(tmp)
            roots = home / "data"
            roots.mkdir()
            frame = read_adult_frame("train")
            if smoke:
                frame = frame.head(2000)
            frame[ADULT_COLUMNS].to_csv(roots / "adult.csv", index=False)
            # measured before the server starts (its worker would compete for the two cores)
            in_process = adult_in_process(roots / "adult.csv")
            url = so._database_url(backend, home, DEFAULT_PG)
            server = start_server(url, data_roots=[EXAMPLES, roots], home=home)
            try:
                owner = server.client(server.key("owner", "owner"))
                analyst = server.client(server.key("analyst", "analyst"))
                response = owner.post("/v1/datasets", json=adult_dataset_body("adult.csv"))
                response.raise_for_status()
                dataset_id = response.json()["id"]
                owner.post(f"/v1/datasets/{dataset_id}/grants", json={"principal": "analyst"})
                body = logistic_job(dataset_id, epsilon=1.0, delta=1e-6, l2=1e-4)
                adult = []
                for _ in range(adult_jobs):
                    start = time.perf_counter()
                    job = analyst.post("/v1/jobs", json=body).json()
                    while True:
                        state = analyst.get(f"/v1/jobs/{job['id']}").json()
                        if state["status"] in ("succeeded", "failed", "cancelled"):
                            break
                        time.sleep(0.005)
                    if state["status"] != "succeeded":
                        raise RuntimeError(f"Adult job ended {state['status']}")
                    analyst.get(f"/v1/models/{state['model_id']}").raise_for_status()
                    adult.append(time.perf_counter() - start)
                # after the Adult jobs: measure()'s admission burst leaves ~200 jobs queued
                clients, per_client = (4, 2) if smoke else (40, 5)
                result = so.measure(server, jobs, clients, per_client)
                result["adult"] = adult
                result["adult_p50"] = statistics.median(adult)
                result["adult_p95"] = so.percentile(adult, 0.95)
                result["example_fit"] = example_fit
                result["adult_in_process"] = in_process
                rows.append({"backend": backend, **result})
            finally:
                server.stop()
                so._drop(backend, url, DEFAULT_PG)
    return rows


# --------------------------------------------------------------------------------------------
# The suite
# --------------------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> None:
    if args.data_parallel:
        scaling_parallel.run(args)
        return
    sizes = [2_000] if args.smoke else args.sizes
    ratio_n = 20_000 if args.smoke else 1_000_000
    jobs, adult_jobs = (3, 2) if args.smoke else (args.jobs, args.adult_jobs)
    backends = (
        ["sqlite"]
        if args.smoke
        else (["sqlite", "postgres"] if args.database == "both" else [args.database])
    )
    out = results_dir(args.smoke)
    saved = out / "scaling.json"
    if args.report_only or args.service_only:
        payload = json.loads(saved.read_text())
        if args.service_only:
            payload["gradient"] = gradient_ratio(ratio_n, repeat=2 if args.smoke else 5)
            payload["service"] = service_overhead(backends, jobs, adult_jobs, args.smoke)
            payload["service_jobs"] = [jobs, adult_jobs]
            save_json(saved, payload)
        report(payload, out)
        return
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        rows, notes = job_times(sizes, Path(tmp), args.fit_budget)
    ratios = gradient_ratio(ratio_n, repeat=2 if args.smoke else 5)
    service = [] if args.skip_service else service_overhead(backends, jobs, adult_jobs, args.smoke)
    payload = {
        "jobs": rows,
        "notes": notes,
        "gradient": ratios,
        "service": service,
        "service_jobs": [jobs, adult_jobs],
    }
    save_json(saved, payload)
    report(payload, out)


def _peak(row: dict[str, Any]) -> str:
    peak = row.get("peak_rss_GB")
    return "—" if peak is None else f"{peak:.1f} GB"


def report(payload: dict[str, Any], out: Path) -> None:
    """Print the tables and draw the plot from a saved payload."""
    rows, notes, ratios = payload["jobs"], payload["notes"], payload["gradient"]
    service = payload["service"]
    jobs, adult_jobs = payload.get("service_jobs", [50, 10])
    ratio_n = ratios[0]["n"] if ratios else 0

    print()
    print(f"### Job wall time vs n (d = {D}; logistic l2 = {L2:g}; ε = {EPS:g}, δ = {DELTA:g})")
    print()
    print(
        "| n | Parquet | read + encode | peak RSS so far | optimizer (work) | plan | fit "
        "| per step | job total |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    work = {name: text for name, _, text in FAMILIES}
    for row in rows:
        head = (
            f"| {row['n']:.0e} | {row['dtype']}, {row['file_MB']:.0f} MB | "
            f"{seconds(row['read'] + row['encode'])} | {_peak(row)} | `{row['optimizer']}` "
            f"({work[row['optimizer']]}) | "
        )
        if row.get("skipped"):
            print(head + "skipped | | | |")
            continue
        per_step = row["fit"] / max(1, row["steps"])
        print(
            head + f"{seconds(row['plan'])} | {seconds(row['fit'])} | {seconds(per_step)} | "
            f"{seconds(row['job'])} |"
        )
    print()
    for row in rows:
        if "default_T" in row:
            print(
                f"- n = {row['n']:.0e}: `output_perturbation_gd` at its defaults would run "
                f"T = {row['default_T']} steps → fit ≈ {seconds(row['default_fit_estimate'])} "
                "(20-step time scaled)."
            )
    for note in notes:
        print(f"- {note}")
    print()
    print(f"### One full-gradient pass ÷ one X.sum() (n = {ratio_n:.0e}, d = {D}, best of 5)")
    print()
    print("| dtype | X.sum() | service `loss.gradient` | ratio | chunked 2-thread pass | ratio |")
    print("|---|---|---|---|---|---|")
    for r in ratios:
        print(
            f"| {r['dtype']} | {seconds(r['sum'])} | {seconds(r['service_gradient'])} | "
            f"{r['service_gradient'] / r['sum']:.2f}× | {seconds(r['chunked_gradient'])} | "
            f"{r['chunked_gradient'] / r['sum']:.2f}× |"
        )
    if service:
        print()
        print(
            f"### Service overhead through the API ({jobs} sequential jobs on the 4,000-row "
            f"example; {adult_jobs} on Adult)"
        )
        print()
        print(
            "| database | example job p50 | p95 | in-process fit | overhead p50 | "
            "Adult job p50 | Adult p95 | admissions/s |"
        )
        print("|---|---|---|---|---|---|---|---|")
        for r in service:
            print(
                f"| {r['backend']} | {seconds(r['latency_p50'])} | {seconds(r['latency_p95'])} | "
                f"{seconds(r['example_fit'])} | "
                f"{seconds(r['latency_p50'] - r['example_fit'])} | {seconds(r['adult_p50'])} | "
                f"{seconds(r['adult_p95'])} | {r['admissions_per_s']:.1f} |"
            )
        print()
        print(
            "Latency = submit → status `succeeded` → model readable, polled every 5 ms, one "
            "LocalCluster worker process; overhead = p50 − the same job's in-process fit time."
        )
        for r in service:
            if "adult_in_process" in r:
                a = r["adult_in_process"]
                total = sum(a.values())
                first = seconds(r["adult"][0]) if r.get("adult") else "?"
                print(
                    f"- {r['backend']}, Adult (output_perturbation_gd defaults, l2 = 1e-4, "
                    f"ε = 1): first job {first}; the same job in-process: read CSV "
                    f"{seconds(a['read'])} + encode {seconds(a['encode'])} + plan "
                    f"{seconds(a['plan'])} + fit {seconds(a['fit'])} = {seconds(total)}, so "
                    f"the API adds ≈ {seconds(r['adult_p50'] - total)} at p50."
                )
    _plot(rows, out)
    print(f"\nplot: {out / 'scaling.png'}")


def _plot(rows: list[dict[str, Any]], out: Path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 5))
    for name, _, text in FAMILIES:
        pts = [(r["n"], r["job"]) for r in rows if r["optimizer"] == name and "job" in r]
        if pts:
            ax.plot(*zip(*pts, strict=True), marker="o", label=f"{name} ({text})")
    load = sorted({(r["n"], r["read"] + r["encode"]) for r in rows})
    if load:
        ax.plot(*zip(*load, strict=True), "k--", label="read + encode only")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("n (d = 100; float64, float32 at 1e7)")
    ax.set_ylabel("job wall time (s)")
    ax.set_title("Job wall time vs n (read + encode + plan + fit)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(out / "scaling.png", dpi=110)
    plt.close(fig)
