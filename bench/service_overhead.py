"""Service overhead: job latency (submit → succeeded) and admission throughput, per database.

Starts a real `dpfit serve` (one LocalCluster worker) on SQLite and/or PostgreSQL, registers
the bundled example, then
- latency: submits jobs one at a time and polls until each succeeds (p50/p95 of submit →
  succeeded, and of submit → model readable), on the 4,000-row example;
- admission: CLIENTS threads POST jobs at once against a budget that admits all of them, and
  reports accepted jobs per second (the ledger transaction under contention).
Measurements, not tests: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from pathlib import Path

from tests.support.fixtures import DEFAULT_PG, EXAMPLES
from tests.support.live import LiveServer, start_server
from tests.support.walkthrough import credit_dataset, logistic_job


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--jobs", type=int, default=50, help="sequential jobs for latency")
    parser.add_argument("--clients", type=int, default=40, help="concurrent admission clients")
    parser.add_argument("--per-client", type=int, default=5, help="jobs each client submits")
    parser.add_argument("--database", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--postgres-url", default=DEFAULT_PG)
    parser.add_argument("--smoke", action="store_true", help="tiny run (CI keeps it from rotting)")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def measure(server: LiveServer, jobs: int, clients: int, per_client: int) -> dict[str, float]:
    owner = server.client(server.key("owner", "owner"))
    analyst_key = server.key("analyst", "analyst")
    analyst = server.client(analyst_key)
    big_budget = credit_dataset(epsilon=1000.0, delta=1e-5)
    dataset_id = owner.post("/v1/datasets", json=big_budget).json()["id"]
    owner.post(f"/v1/datasets/{dataset_id}/grants", json={"principal": "analyst"})
    body = logistic_job(dataset_id, epsilon=1.0, delta=1e-6)

    latencies, model_latencies = [], []
    for _ in range(jobs):
        start = time.perf_counter()
        job = analyst.post("/v1/jobs", json=body).json()
        while True:
            state = analyst.get(f"/v1/jobs/{job['id']}").json()
            if state["status"] in ("succeeded", "failed", "cancelled"):
                break
            time.sleep(0.005)
        latencies.append(time.perf_counter() - start)
        analyst.get(f"/v1/models/{state['model_id']}").raise_for_status()
        model_latencies.append(time.perf_counter() - start)

    admission_body = logistic_job(dataset_id, epsilon=0.001, delta=1e-9, iterations=1)
    barrier = threading.Barrier(clients + 1)
    accepted = [0] * clients

    def client(i: int) -> None:
        with server.client(analyst_key) as http:
            barrier.wait()
            for _ in range(per_client):
                if http.post("/v1/jobs", json=admission_body).status_code == 202:
                    accepted[i] += 1

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    barrier.wait()
    start = time.perf_counter()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    return {
        "latency_p50": statistics.median(latencies),
        "latency_p95": percentile(latencies, 0.95),
        "model_p50": statistics.median(model_latencies),
        "admitted": sum(accepted),
        "admissions_per_s": sum(accepted) / elapsed,
    }


def run(args: argparse.Namespace) -> None:
    jobs, clients, per_client = (
        (3, 4, 2) if args.smoke else (args.jobs, args.clients, args.per_client)
    )
    backends = ["sqlite", "postgres"] if args.database == "both" else [args.database]
    rows = []
    for backend in backends:
        with tempfile.TemporaryDirectory() as tmp:
            home = Path(tmp)
            url = _database_url(backend, home, args.postgres_url)
            server = start_server(url, data_roots=[EXAMPLES], home=home)
            try:
                rows.append((backend, measure(server, jobs, clients, per_client)))
            finally:
                server.stop()
                _drop(backend, url, args.postgres_url)
    print(
        f"| database | job latency p50 (s) | p95 (s) | → model readable p50 (s) | "
        f"admitted | admissions/s ({clients} clients) |"
    )
    print("|---|---|---|---|---|---|")
    for backend, r in rows:
        print(
            f"| {backend} | {r['latency_p50']:.3f} | {r['latency_p95']:.3f} | "
            f"{r['model_p50']:.3f} | {int(r['admitted'])} | {r['admissions_per_s']:.1f} |"
        )
    print(
        f"\n{jobs} sequential jobs (4,000-row example, default output_perturbation_gd), "
        f"{clients}×{per_client} concurrent submissions."
    )


def _database_url(backend: str, home: Path, admin_url: str) -> str:
    if backend == "sqlite":
        return f"sqlite:///{home / 'bench.db'}"
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    engine = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    name = f"dpfit_bench_{int(time.time() * 1000)}"
    with engine.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    engine.dispose()
    return make_url(admin_url).set(database=name).render_as_string(hide_password=False)


def _drop(backend: str, url: str, admin_url: str) -> None:
    if backend != "postgres":
        return
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    name = make_url(url).database
    engine = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    engine.dispose()
