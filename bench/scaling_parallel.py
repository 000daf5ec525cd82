"""scaling --data-parallel (options --dp-*): data-parallel full-gradient jobs vs single process.

Everything runs as the service runs it: worker *processes* of a Dask cluster with the service's
mutual TLS (``embedded_security``), one thread each, the service's ``memory_limit`` and pause
fraction; a job's rows read with the row-local reader (``read_encoded``, on row windows for the
partitioned path); the optimizers' own ``fit`` / ``fit_oracle`` with their plans.

1. **Per-step ratio** (d = 100, n = 1e6 and 4e6 unless ``--sizes``): one job's DP-GD steps, timed
   between the first and the last progress call (so reading and checks are excluded), single
   process (one worker task holding all rows) vs partitioned over the workers (default 2 — the
   cores of this machine). Reported: seconds per step and the ratio partitioned / single.
2. **Big folder job**: a Parquet folder of ``--big-rows`` × ``--big-d`` (default 6e6 × 40, 12
   files) fitted by ``dp_agd`` (``--big-steps`` steps) over ``--big-workers`` workers of
   ``--big-memory`` each: wall time (load + fit), and the peak RSS of every process (each worker,
   the bench process holding the scheduler and the nannies).
3. **Growth**: step time and per-worker peak RSS vs n at 2 workers, and vs workers at n = 1e6.

No timing here is a test; the load average of the machine is recorded with every run.
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.data import SYNTHETIC_LABEL, results_dir, save_json, synthetic_features
from service.data.encoding import Encoder
from service.data.reader import read_encoded
from service.data.sources import local_source
from service.models.logistic import LogisticLoss
from service.optimizers.dp_agd import DPAGD, DPAGDParams
from service.optimizers.dp_gd import DPGD, DPGDParams
from service.optimizers.kits.base import PrivacyTarget
from service.workers.data_parallel import PartitionRead, fit_partitioned
from service.workers.scheduler_workers import scheduler_workers

MIB = 1 << 20
L2 = 1e-4
TARGET = PrivacyTarget(1.0, 1e-6)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dp-sizes", type=int, nargs="+", default=[1_000_000, 4_000_000])
    parser.add_argument("--dp-steps", type=int, default=20)
    parser.add_argument("--dp-workers", type=int, default=2)
    parser.add_argument("--dp-growth-n", type=int, nargs="+", default=[250_000, 500_000, 1_000_000])
    parser.add_argument("--dp-growth-workers", type=int, nargs="+", default=[1, 2, 3, 4])
    parser.add_argument("--dp-big-rows", type=int, default=6_000_000)
    parser.add_argument("--dp-big-d", type=int, default=40)
    parser.add_argument("--dp-big-files", type=int, default=12)
    parser.add_argument("--dp-big-workers", type=int, default=4)
    parser.add_argument("--dp-big-memory", default="900MiB")
    parser.add_argument("--dp-big-steps", type=int, default=50)
    parser.add_argument(
        "--dp-big-folder",
        type=Path,
        default=None,
        help="reuse this folder (written by an earlier run; kept) instead of writing one",
    )
    parser.add_argument("--dp-skip-big", action="store_true")
    parser.add_argument(
        "--dp-big-service",
        action="store_true",
        help="run the big job through a live service (DPFIT_WORKERS x DPFIT_WORKER_MEMORY, "
        "SQLite): registration, admission by the planner, the runner's own partitioned path",
    )
    parser.add_argument("--dp-only-big", action="store_true", help="only the big folder job")
    parser.add_argument("--dp-skip-growth", action="store_true")
    parser.add_argument("--dp-skip-ratio", action="store_true")


# --------------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------------


def write_folder(folder: Path, n: int, d: int, files: int, seed: int = 0) -> Path:
    """A Parquet folder of ``files`` files (x0 … x{d−1} uniform in [−1, 1], label ±1 from a
    random hyperplane with 10 % flips), written block by block."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    w_star = rng.standard_normal(d)
    names = [f"x{j}" for j in range(d)]
    base, extra = divmod(n, files)
    for index in range(files):
        rows = base + (1 if index < extra else 0)
        path = folder / f"part-{index:04d}.parquet"
        schema = pa.schema([(c, pa.float64()) for c in names] + [("label", pa.int8())])
        with pq.ParquetWriter(path, schema, compression="none") as writer:
            for start in range(0, rows, 1 << 18):
                m = min(rows, start + (1 << 18)) - start
                x = rng.uniform(-1.0, 1.0, size=(m, d))
                y = np.where(x @ w_star >= 0, 1, -1).astype(np.int8)
                y[rng.random(m) < 0.1] *= -1
                arrays = [pa.array(x[:, j]) for j in range(d)] + [pa.array(y)]
                writer.write_table(pa.Table.from_arrays(arrays, schema=schema))
    return folder


def _read(folder: Path, n: int, d: int) -> PartitionRead:
    encoder = Encoder(features=synthetic_features(d), fit_intercept=True)
    return PartitionRead(
        source_format="parquet",
        location=str(folder.resolve()),
        encoder=encoder.to_dict(),
        label=SYNTHETIC_LABEL.model_dump(mode="json"),
        label_bound=None,
        n=n,
        dimension=encoder.dimension,
    )


# --------------------------------------------------------------------------------------------
# Tasks run on the workers
# --------------------------------------------------------------------------------------------


class _StepClock:
    def __init__(self) -> None:
        self.first = self.last = 0.0
        self.count = 0

    def __call__(self, step: int) -> None:
        now = time.perf_counter()
        if self.count == 0:
            self.first = now
        self.last, self.count = now, self.count + 1

    def per_step(self) -> float:
        return (self.last - self.first) / max(1, self.count - 1)


def _peak_rss() -> int:
    """This process's peak RSS: ``VmHWM`` (the high-water mark of its own address space). Not
    ``ru_maxrss``: a spawned worker inherits in it the RSS its parent had when it forked (Linux
    keeps the pre-exec mm's high-water mark), so workers forked by a big bench process would
    all report that process's size."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def single_job(read: PartitionRead, name: str, steps: int) -> dict[str, float]:
    """A single-process job on this worker: read every row, fit, time the steps."""
    start = time.perf_counter()
    encoder = Encoder.from_dict(read.encoder)
    X, Y = read_encoded(
        local_source(Path(read.location), "parquet"), encoder, SYNTHETIC_LABEL, None
    )
    loaded = time.perf_counter()
    optimizer, plan, loss = _planned(name, read, steps)
    clock = _StepClock()
    optimizer.fit(plan, loss, X, Y, np.random.default_rng(), clock)
    return {
        "load_s": loaded - start,
        "step_s": clock.per_step(),
        "wall_s": time.perf_counter() - start,
        "driver_peak_rss": _peak_rss(),
    }


def partitioned_job(read: PartitionRead, name: str, steps: int, key: str) -> dict[str, float]:
    """A partitioned job driven from this worker (as the runner drives one)."""
    start = time.perf_counter()
    optimizer, plan, loss = _planned(name, read, steps)
    clock = _StepClock()
    marks: dict[str, float] = {}

    def fit(oracle_for: Any) -> np.ndarray:
        marks["loaded"] = time.perf_counter()
        out: np.ndarray = optimizer.fit_oracle(
            plan, loss, oracle_for(None), np.random.default_rng(), clock
        )
        return out

    fit_partitioned(key, read, loss, fit, after_load=lambda: None, max_rounds=1)
    return {
        "load_s": marks["loaded"] - start,
        "step_s": clock.per_step(),
        "wall_s": time.perf_counter() - start,
        "driver_peak_rss": _peak_rss(),
    }


def _planned(name: str, read: PartitionRead, steps: int) -> tuple[Any, Any, LogisticLoss]:
    loss = LogisticLoss(l2=L2)
    optimizer: Any
    if name == "dp_agd":
        optimizer, params = DPAGD(), DPAGDParams(iterations=steps)
    else:
        optimizer, params = DPGD(), DPGDParams(iterations=steps)
    return optimizer, optimizer.plan(params, loss, read.n, read.dimension, TARGET), loss


# --------------------------------------------------------------------------------------------
# Clusters
# --------------------------------------------------------------------------------------------


class Cluster:
    """The service's embedded cluster (TLS, one thread per worker, memory limit) with a client."""

    def __init__(self, workers: int, memory: str | None, tls_dir: Path) -> None:
        from distributed import Client

        from service.settings import Settings
        from service.workers.cluster import start_cluster
        from service.workers.security import embedded_security

        env = dict(os.environ, DPFIT_WORKERS=str(workers), DPFIT_DASK_TLS_DIR=str(tls_dir))
        if memory:
            env["DPFIT_WORKER_MEMORY"] = memory
        settings = Settings.from_env(env)
        security = embedded_security(settings)
        self.cluster = start_cluster(settings, security)
        self.client = Client(self.cluster, security=security)
        self.client.wait_for_workers(workers, timeout=120)

    def worker_peaks(self) -> list[int]:
        return sorted(self.client.run(_peak_rss).values())

    def close(self) -> None:
        self.client.close()
        self.cluster.close()


def _load() -> float:
    return os.getloadavg()[0]


def step_ratio(sizes: list[int], steps: int, workers: int, work: Path, tls: Path) -> list[dict]:
    rows = []
    for n in sizes:
        folder = write_folder(work / f"ratio-{n}", n, 100, max(workers, 4))
        read = _read(folder, n, 100)
        cluster = Cluster(workers, None, tls)
        try:
            one = next(iter(scheduler_workers(cluster.client)))
            load0 = _load()
            single = cluster.client.submit(
                single_job, read, "dp_gd", steps, workers=[one], pure=False
            ).result()
        finally:
            cluster.close()
        cluster = Cluster(workers, None, tls)
        try:
            parallel = cluster.client.submit(
                partitioned_job, read, "dp_gd", steps, f"bench-{n}", pure=False
            ).result()
            peaks = cluster.worker_peaks()
        finally:
            cluster.close()
        row = {
            "n": n,
            "d": 100,
            "workers": workers,
            "single": single,
            "partitioned": parallel,
            "ratio": parallel["step_s"] / single["step_s"],
            "partitioned_worker_peak_rss": peaks,
            "load_average": [load0, _load()],
        }
        print(
            f"n={n:.0e}: step single {single['step_s'] * 1e3:.1f} ms, partitioned "
            f"{parallel['step_s'] * 1e3:.1f} ms over {workers} workers, ratio {row['ratio']:.2f} "
            f"(load {load0:.1f})",
            flush=True,
        )
        rows.append(row)
        _remove(folder)
    return rows


def growth(ns: list[int], worker_counts: list[int], steps: int, work: Path, tls: Path) -> dict:
    out: dict[str, list[dict]] = {"by_n": [], "by_workers": []}
    for n in ns:
        folder = write_folder(work / f"g-{n}", n, 100, 4)
        out["by_n"].append(_one_partitioned(folder, n, 2, steps, tls))
        _remove(folder)
    n = max(ns)
    folder = write_folder(work / f"g-{n}", n, 100, 4)
    for workers in worker_counts:
        out["by_workers"].append(_one_partitioned(folder, n, workers, steps, tls))
    _remove(folder)
    return out


def _one_partitioned(folder: Path, n: int, workers: int, steps: int, tls: Path) -> dict:
    cluster = Cluster(workers, None, tls)
    try:
        load0 = _load()
        result = cluster.client.submit(
            partitioned_job, _read(folder, n, 100), "dp_gd", steps, f"g-{n}-{workers}", pure=False
        ).result()
        peaks = cluster.worker_peaks()
    finally:
        cluster.close()
    print(
        f"n={n:.0e} workers={workers}: step {result['step_s'] * 1e3:.1f} ms, load "
        f"{result['load_s']:.1f} s, worker peak RSS {max(peaks) / MIB:.0f} MiB (load {load0:.1f})",
        flush=True,
    )
    return {"n": n, "workers": workers, **result, "worker_peak_rss": peaks, "load_average": load0}


def big_job(args: argparse.Namespace, work: Path, tls: Path) -> dict:
    n, d = args.dp_big_rows, args.dp_big_d
    started = time.perf_counter()
    given = args.dp_big_folder
    folder = given or write_folder(work / "big", n, d, args.dp_big_files)
    written = time.perf_counter() - started
    cluster = Cluster(args.dp_big_workers, args.dp_big_memory, tls)
    try:
        load0 = _load()
        result = cluster.client.submit(
            partitioned_job, _read(folder, n, d), "dp_agd", args.dp_big_steps, "big", pure=False
        ).result()
        peaks = cluster.worker_peaks()
        workers_alive = len(scheduler_workers(cluster.client))
    finally:
        cluster.close()
    row = {
        "n": n,
        "d": d,
        "files": args.dp_big_files,
        "workers": args.dp_big_workers,
        "memory_limit": args.dp_big_memory,
        "steps": args.dp_big_steps,
        **result,
        "worker_peak_rss": peaks,
        "bench_process_peak_rss": _peak_rss(),
        "workers_alive_after": workers_alive,
        "write_s": written,
        "load_average": [load0, _load()],
    }
    print(
        f"big {n:.0e} x {d} ({args.dp_big_files} files) on "
        f"{args.dp_big_workers} x {args.dp_big_memory}: "
        f"wall {result['wall_s']:.0f} s (load {result['load_s']:.0f} s, "
        f"{result['step_s'] * 1e3:.0f} ms/step x {args.dp_big_steps}), worker peak RSS "
        f"{[round(p / MIB) for p in peaks]} MiB, bench process {_peak_rss() / MIB:.0f} MiB",
        flush=True,
    )
    if given is None:
        _remove(folder)
    return row


def _vm_hwm(pid: int) -> int:
    """Peak RSS (``VmHWM``) of process ``pid``."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


class _RssSampler:
    """Samples the RSS of processes every 20 ms (``/proc/<pid>/statm``) in a thread: when each
    reached its peak, and where it was before and after (phases seen from outside)."""

    def __init__(self, pids: list[int]) -> None:
        import threading

        self._pids = pids
        self._page = os.sysconf("SC_PAGE_SIZE")
        self._start = time.perf_counter()
        self._first: dict[int, int] = {}
        self._peak: dict[int, tuple[int, float]] = {p: (0, 0.0) for p in pids}
        self._last: dict[int, int] = {}
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _rss(self, pid: int) -> int:
        try:
            with open(f"/proc/{pid}/statm") as statm:
                return int(statm.read().split()[1]) * self._page
        except OSError:
            return 0

    def _run(self) -> None:
        while not self._done.is_set():
            now = time.perf_counter() - self._start
            for pid in self._pids:
                rss = self._rss(pid)
                self._first.setdefault(pid, rss)
                self._last[pid] = rss
                if rss > self._peak[pid][0]:
                    self._peak[pid] = (rss, now)
            time.sleep(0.02)

    def start(self) -> None:
        self._start = time.perf_counter()
        self._thread.start()

    def stop(self) -> None:
        self._done.set()
        self._thread.join()

    def summary(self) -> list[dict[str, float]]:
        rows = [
            {
                "start_mib": self._first.get(p, 0) / MIB,
                "peak_mib": self._peak[p][0] / MIB,
                "peak_at_s": self._peak[p][1],
                "end_mib": self._last.get(p, 0) / MIB,
            }
            for p in self._pids
        ]
        return sorted(rows, key=lambda r: r["peak_mib"])


def big_service_job(args: argparse.Namespace, work: Path) -> dict:
    """The big folder job through ``dpfit serve``: the owner registers the folder, the analyst
    submits ``dp_agd``; admission and the runner choose the layout themselves. Peak RSS of the
    API process (scheduler and nannies included) and of every worker process, from ``VmHWM``."""
    import psutil

    from tests.support.live import start_server

    n, d = args.dp_big_rows, args.dp_big_d
    folder = args.dp_big_folder or write_folder(work / "big", n, d, args.dp_big_files)
    home = work / "service"
    home.mkdir(exist_ok=True)
    env = {"DPFIT_WORKER_MEMORY": args.dp_big_memory}
    server = start_server(
        f"sqlite:///{home / 'dpfit.db'}",
        [folder.parent],
        home,
        workers=args.dp_big_workers,
        extra_env=env,
    )
    try:
        owner = server.client(server.key("owner", "owner"), timeout=900)
        analyst = server.client(server.key("analyst", "analyst"), timeout=900)
        started = time.perf_counter()
        made = owner.post(
            "/v1/datasets",
            json={
                "name": "big",
                "source": {"uri": folder.name},
                "label": {"column": "label", "type": "binary", "positive": 1, "negative": -1},
                "features": [
                    {"name": f"x{j}", "type": "numeric", "min": -1.0, "max": 1.0} for j in range(d)
                ],
                "budget": {"epsilon": 5.0, "delta": 1e-5},
            },
        )
        made.raise_for_status()
        registered = time.perf_counter() - started
        dataset_id = made.json()["id"]
        owner.post(f"/v1/datasets/{dataset_id}/grants", json={"principal": "analyst"})
        assert server.process is not None
        api = psutil.Process(server.process.pid)
        workers = [p for p in api.children(recursive=True) if "spawn_main" in " ".join(p.cmdline())]
        sampler = _RssSampler([p.pid for p in workers])
        sampler.start()
        started = time.perf_counter()
        submitted = analyst.post(
            "/v1/jobs",
            json={
                "dataset_id": dataset_id,
                "model": {"type": "logistic_regression", "l2": L2, "fit_intercept": True},
                "optimizer": {"name": "dp_agd", "params": {"iterations": args.dp_big_steps}},
                "privacy": {"epsilon": TARGET.epsilon, "delta": TARGET.delta},
            },
        )
        if submitted.status_code != 202:
            state = {"status": f"refused {submitted.status_code}", "error": submitted.text}
        else:
            job_id = submitted.json()["id"]
            while (state := analyst.get(f"/v1/jobs/{job_id}").json())["status"] in (
                "queued",
                "running",
            ):
                time.sleep(0.5)
        wall = time.perf_counter() - started
        sampler.stop()
        row = {
            "n": n,
            "d": d,
            "workers": args.dp_big_workers,
            "memory_limit": args.dp_big_memory,
            "steps": args.dp_big_steps,
            "status": state["status"],
            "error": state.get("error"),
            "register_s": registered,
            "job_wall_s": wall,
            "api_process_peak_rss": _vm_hwm(api.pid),
            "worker_peak_rss": sorted(_vm_hwm(p.pid) for p in workers),
            # per worker (sorted by peak): sampled RSS at the submission, the sampled peak and
            # the seconds after the submission it was reached, and the RSS at the job's end
            "worker_rss_timeline": sampler.summary(),
            "load_average": _load(),
        }
    finally:
        server.stop()
    print(
        f"service: {n:.0e} x {d} on {args.dp_big_workers} x {args.dp_big_memory}: job "
        f"{row['status']} in {row['job_wall_s']:.0f} s (submit to done; registration "
        f"{registered:.0f} s), worker peak RSS {[round(p / MIB) for p in row['worker_peak_rss']]} "
        f"MiB, API process {row['api_process_peak_rss'] / MIB:.0f} MiB",
        flush=True,
    )
    for worker in row["worker_rss_timeline"]:
        print(
            "  worker RSS sampled every 20 ms: {start_mib:.0f} MiB at the submission, peak "
            "{peak_mib:.0f} MiB {peak_at_s:.1f} s after it, {end_mib:.0f} MiB at the end".format(
                **worker
            ),
            flush=True,
        )
    if args.dp_big_folder is None:
        _remove(folder)
    return row


def _remove(folder: Path) -> None:
    for file in folder.glob("*"):
        file.unlink()
    folder.rmdir()


def run(args: argparse.Namespace) -> None:
    out = results_dir(False)
    # --dp-only-big runs keep their own file: the full suite's figures stay in scaling_parallel.json
    name = "scaling_parallel_big.json" if args.dp_only_big else "scaling_parallel.json"
    payload: dict[str, Any] = {"cpu_count": os.cpu_count(), "load_average_start": _load()}
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        work = Path(tmp)
        roots = [str(work)] + ([str(args.dp_big_folder.parent)] if args.dp_big_folder else [])
        os.environ["DPFIT_DATA_ROOTS"] = os.pathsep.join(roots)  # the workers reopen the sources
        tls = work / "dask-tls"
        if args.dp_only_big:
            args.dp_sizes, args.dp_skip_growth = [], True
        if args.dp_skip_ratio:
            args.dp_sizes = []
        payload["ratio"] = step_ratio(args.dp_sizes, args.dp_steps, args.dp_workers, work, tls)
        save_json(out / name, payload)
        if not args.dp_skip_growth:
            payload["growth"] = growth(
                args.dp_growth_n, args.dp_growth_workers, args.dp_steps, work, tls
            )
        save_json(out / name, payload)
        if not args.dp_skip_big:
            payload["big"] = big_job(args, work, tls)
        if args.dp_big_service:
            payload["big_service"] = big_service_job(args, work)
    payload["load_average_end"] = _load()
    save_json(out / name, payload)
    print(f"saved {out / name}")
