"""Hostile mix: one principal floods the expensive routes while another reads its budget.

Starts a real `dpfit serve` (one LocalCluster worker) on SQLite and/or PostgreSQL, registers the
example data, grants two analysts: the *victim* and *mallory*. Two phases of DURATION seconds:

1. **at rest** — the victim alone, one keep-alive connection in a closed loop of
   ``GET /v1/datasets/{id}/budget``;
2. **under attack** — the same victim loop, while mallory runs ATTACKERS (16) connections in a
   closed loop of ``POST /v1/jobs/estimate`` of the issue's heavy spec: ``private_tuning`` over
   16 ``noisy_sgd_bst14`` candidates of 10⁶ iterations, batch sizes 1–16 — each request with a
   fresh ε, so no cache helps — and, one request in four, ``POST /v1/jobs`` of the same spec at
   an ε her dataset's budget refuses (priced, then refused: a 409 that charges nothing).
   Mallory ignores ``Retry-After``: a 429 is followed at once by the next request.

Prints the victim's p50/p99/max at rest and under attack, their ratio (target: p99 under attack
≤ 2× at rest), and mallory's answers by status. Measurements, not tests: nothing here asserts
a time; the client shares the machine with the server.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench.load import prepare
from bench.raw_http import RawConnection, RawHttpError
from bench.service_overhead import _database_url, _drop, percentile
from tests.support.fixtures import DEFAULT_PG, EXAMPLES
from tests.support.live import LiveServer, start_server
from tests.support.walkthrough import credit_dataset, logistic_job

ATTACKERS = 16


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--duration", type=float, default=30.0, help="seconds per phase")
    parser.add_argument("--attackers", type=int, default=ATTACKERS)
    parser.add_argument("--database", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--postgres-url", default=DEFAULT_PG)
    parser.add_argument("--smoke", action="store_true", help="2 attackers, 2 s per phase")


def heavy_spec(dataset_id: str, epsilon: float) -> dict[str, Any]:
    """The issue's 16-candidate private_tuning spec (5–21 s of API CPU each before)."""
    body = logistic_job(dataset_id, epsilon=epsilon, delta=1e-8)
    body["optimizer"] = {
        "name": "private_tuning",
        "params": {
            "base_optimizer": "noisy_sgd_bst14",
            "candidates": [
                {"params": {"iterations": 1_000_000, "batch_size": b}} for b in range(1, 17)
            ],
        },
    }
    return body


async def victim(
    connection: RawConnection, dataset_id: str, stop_at: float, latencies: list[float]
) -> Counter[int]:
    statuses: Counter[int] = Counter()
    while time.perf_counter() < stop_at:
        began = time.perf_counter()
        try:
            response = await connection.request("GET", f"/v1/datasets/{dataset_id}/budget")
            statuses[response.status] += 1
        except RawHttpError:
            statuses[0] += 1
        latencies.append(time.perf_counter() - began)
    return statuses


async def attacker(
    connection: RawConnection, dataset_id: str, stop_at: float, rng: random.Random
) -> Counter[int]:
    statuses: Counter[int] = Counter()
    while time.perf_counter() < stop_at:
        submit = rng.random() < 0.25
        # A fresh ε per request (no cache hit); a submission asks more than the budget holds.
        epsilon = rng.uniform(2.0, 3.0) if submit else rng.uniform(0.1, 1.0)
        target = "/v1/jobs" if submit else "/v1/jobs/estimate"
        try:
            response = await connection.request("POST", target, heavy_spec(dataset_id, epsilon))
            statuses[response.status] += 1
        except RawHttpError:
            statuses[0] += 1
            await asyncio.sleep(0.05)
    return statuses


async def phase(
    server: LiveServer,
    reading: tuple[str, str],
    flooding: tuple[str, str],
    duration: float,
    attackers: int,
) -> tuple[list[float], Counter[int], Counter[int]]:
    """One phase: the victim's (key, dataset) reading, mallory's (key, dataset) flooding."""
    (victim_key, dataset_id), (mallory_key, mallory_dataset) = reading, flooding
    reader = RawConnection("127.0.0.1", server.port, {"Authorization": f"Bearer {victim_key}"})
    floods = [
        RawConnection("127.0.0.1", server.port, {"Authorization": f"Bearer {mallory_key}"})
        for _ in range(attackers)
    ]
    latencies: list[float] = []
    stop_at = time.perf_counter() + duration
    try:
        results = await asyncio.gather(
            victim(reader, dataset_id, stop_at, latencies),
            *(
                attacker(c, mallory_dataset, stop_at, random.Random(i))
                for i, c in enumerate(floods)
            ),
        )
    finally:
        await asyncio.gather(reader.close(), *(c.close() for c in floods))
    mallory: Counter[int] = Counter()
    for counts in results[1:]:
        mallory.update(counts)
    return latencies, results[0], mallory


def run(args: argparse.Namespace) -> None:
    duration, attackers = (2.0, 2) if args.smoke else (args.duration, args.attackers)
    backends = ["sqlite", "postgres"] if args.database == "both" else [args.database]
    lines = [
        "| database | phase | victim requests | p50 (ms) | p99 (ms) | max (ms) | "
        "victim statuses | mallory statuses |",
        "|---|---|---|---|---|---|---|---|",
    ]
    ratios: list[str] = []
    for backend in backends:
        with tempfile.TemporaryDirectory() as tmp:
            home = Path(tmp)
            url = _database_url(backend, home, args.postgres_url)
            server = start_server(url, data_roots=[EXAMPLES], home=home)
            try:
                victim_key, dataset_id, _ = prepare(server)
                mallory_key = server.key("mallory", "analyst")
                owner = server.client(server.key("owner", "owner"))
                # Mallory's own dataset (ε_B = 1: her submissions of ε ≥ 2 are all refused).
                target = owner.post("/v1/datasets", json=credit_dataset(epsilon=1.0, delta=1e-5))
                target.raise_for_status()
                mallory_dataset = target.json()["id"]
                owner.post(f"/v1/datasets/{mallory_dataset}/grants", json={"principal": "mallory"})
                p99 = {}
                for name, flood in (("at rest", 0), (f"{attackers} attackers", attackers)):
                    latencies, mine, theirs = asyncio.run(
                        phase(
                            server,
                            (victim_key, dataset_id),
                            (mallory_key, mallory_dataset),
                            duration,
                            flood,
                        )
                    )
                    p99[name] = percentile(latencies, 0.99)
                    lines.append(
                        f"| {backend} | {name} | {len(latencies)} | "
                        f"{1000 * percentile(latencies, 0.5):.1f} | {1000 * p99[name]:.1f} | "
                        f"{1000 * max(latencies):.1f} | {_statuses(mine)} | "
                        f"{_statuses(theirs) or '-'} |"
                    )
                at_rest, attacked = p99["at rest"], p99[f"{attackers} attackers"]
                ratios.append(f"{backend}: p99 under attack / at rest = {attacked / at_rest:.2f}")
            finally:
                server.stop()
                _drop(backend, url, args.postgres_url)
    print("\n".join(lines))
    print()
    print("; ".join(ratios) + " (target ≤ 2).")
    print(
        f"{duration:g} s per phase; one victim connection (GET budget, closed loop); mallory's "
        f"{attackers} connections send the 16-candidate private_tuning estimate (3 in 4) or "
        "submission over budget (1 in 4), ignoring Retry-After; client and server share the "
        "machine."
    )


def _statuses(counts: Counter[int]) -> str:
    return ", ".join(f"{n}×{status}" for status, n in sorted(counts.items()))
