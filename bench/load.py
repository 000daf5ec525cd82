"""Load: 50 concurrent clients mixing reads and job submissions against a live server.

Starts a real `dpfit serve` (one LocalCluster worker) on SQLite and/or PostgreSQL, registers the
example data with a large budget, grants an analyst, submits a few jobs, then runs CLIENTS
concurrent clients (asyncio + httpx, one connection each) for DURATION seconds. Each client
loops over a fixed mix — GET budget, GET job status, GET /v1/jobs (a page of 20),
GET /v1/datasets, and now and then POST /v1/jobs (a one-step job) — and records the latency of
every request. Prints req/s (all, and reads only) and p50/p99 per route, and the errors (any
non-2xx answer or transport failure).

Measurements, not tests: nothing here asserts a time. The client runs on the same machine as the
server and takes part of its CPU; the figures are for the whole machine, as a user would see.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from bench.service_overhead import _database_url, _drop, percentile
from tests.conftest import DEFAULT_PG, EXAMPLES
from tests.live import LiveServer, start_server
from tests.walkthrough import credit_dataset, logistic_job

# (route label, weight); a job submission is one request in ~20.
MIX: list[tuple[str, int]] = [
    ("GET budget", 6),
    ("GET job", 6),
    ("GET jobs (page of 20)", 3),
    ("GET datasets", 3),
    ("POST job", 1),
]
READS = {"GET budget", "GET job", "GET jobs (page of 20)", "GET datasets"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of load")
    parser.add_argument("--database", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--postgres-url", default=DEFAULT_PG)
    parser.add_argument("--uvicorn-workers", type=int, default=None, help="DPFIT_API_WORKERS")
    parser.add_argument("--reads-only", action="store_true", help="no job submissions")
    parser.add_argument(
        "--profile",
        type=Path,
        default=None,
        help="sample the server with py-spy during the load; speedscope files go here",
    )
    parser.add_argument("--smoke", action="store_true", help="4 clients for 2 s")


@dataclass
class Tally:
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    error_samples: list[str] = field(default_factory=list)


def prepare(server: LiveServer) -> tuple[str, str, list[str]]:
    """An analyst key, a dataset it may use (budget large enough for every submission) and
    a few finished jobs to read."""
    owner = server.client(server.key("owner", "owner"))
    analyst_key = server.key("analyst", "analyst")
    dataset = owner.post("/v1/datasets", json=credit_dataset(epsilon=1000.0, delta=1e-5))
    dataset.raise_for_status()
    dataset_id = dataset.json()["id"]
    owner.post(f"/v1/datasets/{dataset_id}/grants", json={"principal": "analyst"})
    analyst = server.client(analyst_key)
    job_ids = []
    for _ in range(5):
        job = analyst.post("/v1/jobs", json=submission(dataset_id))
        job.raise_for_status()
        job_ids.append(job.json()["id"])
    return analyst_key, dataset_id, job_ids


def submission(dataset_id: str) -> dict[str, object]:
    return logistic_job(dataset_id, epsilon=0.001, delta=1e-12, iterations=1)


async def client_loop(
    http: httpx.AsyncClient,
    dataset_id: str,
    job_ids: list[str],
    stop_at: float,
    tally: Tally,
    rng: random.Random,
    mix: list[tuple[str, int]],
) -> None:
    labels = [label for label, _ in mix]
    weights = [weight for _, weight in mix]
    while time.perf_counter() < stop_at:
        label = rng.choices(labels, weights)[0]
        if label == "GET budget":
            request = http.build_request("GET", f"/v1/datasets/{dataset_id}/budget")
        elif label == "GET job":
            request = http.build_request("GET", f"/v1/jobs/{rng.choice(job_ids)}")
        elif label == "GET jobs (page of 20)":
            request = http.build_request("GET", "/v1/jobs", params={"limit": 20})
        elif label == "GET datasets":
            request = http.build_request("GET", "/v1/datasets")
        else:
            request = http.build_request("POST", "/v1/jobs", json=submission(dataset_id))
        start = time.perf_counter()
        try:
            response = await http.send(request)
            ok = 200 <= response.status_code < 300
            detail = f"{response.status_code} {response.text[:200]}"
        except httpx.HTTPError as exc:
            ok, detail = False, type(exc).__name__
            response = None
        tally.latencies[label].append(time.perf_counter() - start)
        if not ok:
            tally.errors[label] += 1
            if len(tally.error_samples) < 5:
                tally.error_samples.append(f"{label}: {detail}")
        elif label == "POST job" and response is not None and len(job_ids) < 200:
            job_ids.append(response.json()["id"])


async def load(
    server: LiveServer, clients: int, duration: float, mix: list[tuple[str, int]]
) -> tuple[Tally, float]:
    analyst_key, dataset_id, job_ids = prepare(server)
    tally = Tally()
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    headers = {"Authorization": f"Bearer {analyst_key}"}
    async with httpx.AsyncClient(
        base_url=server.base_url, headers=headers, limits=limits, timeout=60
    ) as http:
        start = time.perf_counter()
        stop_at = start + duration
        await asyncio.gather(
            *(
                client_loop(http, dataset_id, job_ids, stop_at, tally, random.Random(i), mix)
                for i in range(clients)
            )
        )
        elapsed = time.perf_counter() - start
    return tally, elapsed


def cpu_seconds(pid: int) -> float:
    """User + system CPU of one process (all its threads) so far, from /proc (Linux)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (the Dask nanny and worker processes of the server)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int(
                    (entry / "stat").read_text().rsplit(")", 1)[1].split()[1]
                )
            except (OSError, IndexError, ValueError):
                continue
    found, frontier = [], [pid]
    while frontier:
        current = frontier.pop()
        children = [p for p, parent in parents.items() if parent == current]
        found += children
        frontier += children
    return found


def report(
    backend: str, tally: Tally, elapsed: float, clients: int, cpu: tuple[float, float]
) -> list[str]:
    total = sum(len(v) for v in tally.latencies.values())
    reads = sum(len(v) for k, v in tally.latencies.items() if k in READS)
    errors = sum(tally.errors.values())
    read_latencies = [x for k, v in tally.latencies.items() if k in READS for x in v]
    lines = [
        f"### {backend}: {clients} clients, {elapsed:.0f} s — {total / elapsed:.1f} req/s "
        f"({reads / elapsed:.1f} reads/s), reads p99 "
        f"{1000 * percentile(read_latencies, 0.99):.0f} ms, {errors} errors",
        "",
        f"CPU: API process {1000 * cpu[0] / max(total, 1):.1f} ms per request "
        f"({100 * cpu[0] / elapsed:.0f}% of a core); Dask workers {cpu[1]:.1f} s in all "
        f"({100 * cpu[1] / elapsed:.0f}% of a core). Machine load average at the end: "
        f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores.",
        "",
        "| route | requests | req/s | p50 (ms) | p99 (ms) | errors |",
        "|---|---|---|---|---|---|",
    ]
    for label, _ in MIX:
        values = tally.latencies.get(label, [])
        if not values:
            continue
        lines.append(
            f"| {label} | {len(values)} | {len(values) / elapsed:.1f} | "
            f"{1000 * percentile(values, 0.5):.1f} | {1000 * percentile(values, 0.99):.1f} | "
            f"{tally.errors.get(label, 0)} |"
        )
    if tally.error_samples:
        lines += ["", "First errors:", *(f"- {s}" for s in tally.error_samples)]
    return lines


def profile_server(server: LiveServer, target: Path, duration: float) -> subprocess.Popen[bytes]:
    """py-spy sampling this server's process (only it: never another process) for the load."""
    assert server.process is not None
    spy = Path(sys.executable).parent / "py-spy"
    return subprocess.Popen(
        [str(spy), "record", "-p", str(server.process.pid), "-d", str(int(duration)), "-r", "100"]
        + ["-f", "speedscope", "-o", str(target), "--nonblocking"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def summarize_profile(path: Path, top: int = 25) -> list[str]:
    """Where the server's samples went: the frames most often on the stack (inclusive) and
    at its top (self), as shares of all samples."""
    if not path.exists():
        return [f"(no profile written to {path})"]
    data = json.loads(path.read_text())
    frames = data["shared"]["frames"]
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    total = 0.0

    def name(index: int) -> str:
        frame = frames[index]
        where = str(frame.get("file", "")).split("site-packages/")[-1].split("/work/main/")[-1]
        return f"{frame['name']} ({where}:{frame.get('line')})"

    for profile in data["profiles"]:
        for sample, weight in zip(profile["samples"], profile["weights"], strict=True):
            if not sample:
                continue
            total += weight
            for label in {name(i) for i in sample}:
                inclusive[label] += weight
            own[name(sample[-1])] += weight
    lines = [f"Profile {path.name}: {total:.1f} sample-seconds", "", "| inclusive | frame |"]
    lines.append("|---|---|")
    lines += [f"| {100 * v / total:.1f}% | `{k}` |" for k, v in inclusive.most_common(top)]
    lines += ["", "| self | frame |", "|---|---|"]
    lines += [f"| {100 * v / total:.1f}% | `{k}` |" for k, v in own.most_common(top)]
    return lines


def run(args: argparse.Namespace) -> None:
    clients, duration = (4, 2.0) if args.smoke else (args.clients, args.duration)
    backends = ["sqlite", "postgres"] if args.database == "both" else [args.database]
    if args.uvicorn_workers is not None:
        os.environ["DPFIT_API_WORKERS"] = str(args.uvicorn_workers)
    mix = [(label, w) for label, w in MIX if not (args.reads_only and label not in READS)]
    out: list[str] = []
    for backend in backends:
        with tempfile.TemporaryDirectory() as tmp:
            home = Path(tmp)
            url = _database_url(backend, home, args.postgres_url)
            server = start_server(url, data_roots=[EXAMPLES], home=home)
            try:
                spy = None
                if args.profile is not None:
                    args.profile.mkdir(parents=True, exist_ok=True)
                    spy = profile_server(server, args.profile / f"load-{backend}.json", duration)
                assert server.process is not None
                pid = server.process.pid
                before = cpu_seconds(pid), sum(cpu_seconds(p) for p in descendants(pid))
                tally, elapsed = asyncio.run(load(server, clients, duration, mix))
                cpu = (
                    cpu_seconds(pid) - before[0],
                    sum(cpu_seconds(p) for p in descendants(pid)) - before[1],
                )
                out += report(backend, tally, elapsed, clients, cpu) + [""]
                if spy is not None:
                    spy.wait(timeout=120)
                    out += summarize_profile(args.profile / f"load-{backend}.json") + [""]
            finally:
                server.stop()
                _drop(backend, url, args.postgres_url)
    print("\n".join(out))
    print(
        f"Mix per client: {', '.join(f'{label} ×{w}' for label, w in mix)} (weights); "
        "one LocalCluster worker; client and server share the machine."
    )
