"""Closed control plane vs the former open one: Dask task round trip and cluster start.

`python -m bench.dask_tls [--tasks N] [--rounds R]` starts, alternately, the cluster `dpfit
serve` used before issue 9 (``LocalCluster``, plain TCP, HTTP server on) and today's
(:func:`service.workers.cluster.start_cluster`: mutual TLS, no HTTP server), one worker process
each, and times N sequential ``submit(...).result()`` round trips of a trivial task in each
round. A job is one such task (its payload is the job id; the worker reads data itself), so the
difference here is the difference TLS makes to a job's round trip. Measurements, not tests.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any


def _noop(i: int) -> int:
    return i


def _open_cluster() -> Any:
    from distributed import LocalCluster

    return LocalCluster(
        n_workers=1,
        threads_per_worker=1,
        processes=True,
        dashboard_address=":0",
        scheduler_kwargs={"dashboard": False},
        memory_limit=0,
    )


def _closed_cluster(home: Path) -> tuple[Any, Any]:
    from service.settings import Settings
    from service.workers.cluster import start_cluster
    from service.workers.security import embedded_security

    settings = Settings(
        database_url=f"sqlite:///{home / 'dpfit.db'}", data_roots=(), workers=1, dask_scheduler=None
    )
    security = embedded_security(settings)
    return start_cluster(settings, security), security


def _round(mode: str, home: Path, tasks: int) -> tuple[float, list[float]]:
    from distributed import Client

    start = time.perf_counter()
    if mode == "open (tcp, before)":
        cluster, security = _open_cluster(), None
    else:
        cluster, security = _closed_cluster(home)
    client = Client(cluster, security=security)
    client.submit(_noop, -1, pure=False).result()  # connections established
    started = time.perf_counter() - start
    latencies = []
    try:
        for i in range(tasks):
            t0 = time.perf_counter()
            client.submit(_noop, i, pure=False).result()
            latencies.append(time.perf_counter() - t0)
    finally:
        client.close()
        cluster.close()
    return started, latencies


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.dask_tls", description=__doc__)
    parser.add_argument("--tasks", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    modes = ("open (tcp, before)", "closed (mutual TLS, now)")
    starts: dict[str, list[float]] = {m: [] for m in modes}
    trips: dict[str, list[float]] = {m: [] for m in modes}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.rounds):
            for mode in modes:
                started, latencies = _round(mode, Path(tmp), args.tasks)
                starts[mode].append(started)
                trips[mode].extend(latencies)
    print(f"{args.rounds} alternating rounds x {args.tasks} sequential tasks, one worker process")
    print()
    print("| cluster | start (median) | round trip p50 | p95 | mean |")
    print("|---|---|---|---|---|")
    for mode in modes:
        values = sorted(trips[mode])
        p95 = values[min(len(values) - 1, round(0.95 * (len(values) - 1)))]
        print(
            f"| {mode} | {statistics.median(starts[mode]):.2f} s "
            f"| {statistics.median(values) * 1e3:.2f} ms | {p95 * 1e3:.2f} ms "
            f"| {statistics.fmean(values) * 1e3:.2f} ms |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
