"""Fair workers: another principal's small job's wait while one principal's long jobs run.

Issue 23, item 4: three long ``noisy_sgd_scs13`` jobs of bob (ε 0.05) held both workers and a
1-step job of alice stayed queued until one of them ended. Here, on a live ``dpfit serve``
with two Dask workers (SQLite), bob submits three long jobs; once his jobs run, alice submits a
1-step job and we measure her wait from submit to start (the server's ``started_at −
created_at``) and her job's latency to ``succeeded`` (client clock). Arms, side by side:

- ``one principal may hold every slot``: ``DPFIT_MAX_RUNNING_PER_PRINCIPAL=2`` — the fair
  queue without a reserved slot: bob's first two jobs take both workers, alice waits for one;
- ``default (slots − 1 per principal)``: the shipped defaults — one slot stays open to others;
- ``before (the given code tree)`` with ``--before-tree PATH``: the server runs the code of
  ``PATH`` (e.g. ``git archive`` of the commit before issue 23) with today's defaults.

Also printed: how long one of bob's jobs runs alone (his jobs are cancelled once alice's
finished, so the suite does not wait for them). Smoke: shorter jobs, one repetition.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from tests.support.fixtures import EXAMPLES
from tests.support.live import LiveServer, start_server
from tests.support.walkthrough import credit_dataset, logistic_job

FINAL = ("succeeded", "failed", "cancelled")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--smoke", action="store_true", help="tiny sizes (CI)")
    parser.add_argument("--passes", type=int, default=60, help="passes of bob's scs13 jobs")
    parser.add_argument("--repeats", type=int, default=3, help="alice's jobs per arm")
    parser.add_argument(
        "--before-tree", type=Path, default=None, help="also run the server from this code tree"
    )


def _long_job(dataset_id: str, passes: int) -> dict[str, Any]:
    return {
        "dataset_id": dataset_id,
        "model": {"type": "logistic_regression", "l2": 0.01, "fit_intercept": True},
        "optimizer": {"name": "noisy_sgd_scs13", "params": {"passes": passes, "batch_size": 1}},
        "privacy": {"epsilon": 0.05, "delta": 1e-6},
    }


def _wait_status(client: httpx.Client, job_id: str, wanted: tuple[str, ...], limit: float) -> Any:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        job = client.get(f"/v1/jobs/{job_id}").json()
        if job["status"] in wanted:
            return job
        time.sleep(0.05)
    raise TimeoutError(f"job {job_id} not {wanted} after {limit} s")


def _seconds(later: str, earlier: str) -> float:
    return (datetime.fromisoformat(later) - datetime.fromisoformat(earlier)).total_seconds()


def measure(server: LiveServer, passes: int, repeats: int) -> dict[str, float]:
    owner = server.client(server.key("owner", "owner"))
    bob = server.client(server.key("bob", "analyst"))
    alice = server.client(server.key("alice", "analyst"))
    dataset = owner.post("/v1/datasets", json=credit_dataset(epsilon=1000.0, delta=1e-5))
    dataset.raise_for_status()
    dataset_id = dataset.json()["id"]
    for name in ("bob", "alice"):
        owner.post(f"/v1/datasets/{dataset_id}/grants", json={"principal": name})

    # One of bob's jobs alone, for scale.
    alone = bob.post("/v1/jobs", json=_long_job(dataset_id, passes)).json()
    done = _wait_status(bob, alone["id"], FINAL, 3600)
    bob_alone = _seconds(done["finished_at"], done["started_at"])

    waits, latencies = [], []
    for _ in range(repeats):
        bobs = [bob.post("/v1/jobs", json=_long_job(dataset_id, passes)).json() for _ in range(3)]
        _wait_status(bob, bobs[0]["id"], ("running",), 600)
        time.sleep(1.0)  # bob's jobs hold what they can
        start = time.perf_counter()
        small = alice.post("/v1/jobs", json=logistic_job(dataset_id, epsilon=0.1, iterations=1))
        small.raise_for_status()
        finished = _wait_status(alice, small.json()["id"], FINAL, 3600)
        latencies.append(time.perf_counter() - start)
        waits.append(_seconds(finished["started_at"], finished["created_at"]))
        for job in bobs:
            bob.post(f"/v1/jobs/{job['id']}/cancel")
        for job in bobs:
            _wait_status(bob, job["id"], FINAL, 3600)
    return {
        "bob_alone": bob_alone,
        "wait_median": statistics.median(waits),
        "wait_max": max(waits),
        "latency_median": statistics.median(latencies),
    }


def run(args: argparse.Namespace) -> None:
    passes, repeats = (3, 1) if args.smoke else (args.passes, args.repeats)
    arms: list[tuple[str, dict[str, str]]] = [
        ("one principal may hold every slot", {"DPFIT_MAX_RUNNING_PER_PRINCIPAL": "2"}),
        ("default (slots − 1 per principal)", {}),
    ]
    if args.before_tree is not None:
        tree = args.before_tree.resolve()
        arms.insert(0, ("before (given tree)", {"PYTHONPATH": f"{tree}:{tree / 'sdk/python'}"}))
    rows = []
    for label, env in arms:
        with tempfile.TemporaryDirectory() as tmp:
            home = Path(tmp)
            server = start_server(
                f"sqlite:///{home / 'bench.db'}",
                data_roots=[EXAMPLES],
                home=home,
                workers=2,
                extra_env=env,
            )
            try:
                rows.append((label, measure(server, passes, repeats)))
            finally:
                server.stop()
    print(
        "| arm | bob's job alone (s) | alice's wait to start, median (s) | max (s) | "
        "alice's submit → succeeded, median (s) |"
    )
    print("|---|---|---|---|---|")
    for label, r in rows:
        print(
            f"| {label} | {r['bob_alone']:.1f} | {r['wait_median']:.2f} | {r['wait_max']:.2f} | "
            f"{r['latency_median']:.2f} |"
        )
    print(
        f"\n2 Dask workers, SQLite; bob: 3 × noisy_sgd_scs13 (ε 0.05, {passes} passes of "
        f"batch 1 over 4,000 rows) running; alice: 1-step output_perturbation_gd; "
        f"{repeats} repetition(s) per arm."
    )
