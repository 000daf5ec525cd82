"""Load: 50 concurrent clients mixing reads and job submissions against a live server.

Starts a real `dpfit serve` (one LocalCluster worker) on SQLite and/or PostgreSQL, registers the
example data with a large budget, grants an analyst, submits a few jobs, then runs CLIENTS
concurrent clients (asyncio, one keep-alive connection each, bench/raw_http.py: httpx cost more
CPU per request than the service) for DURATION seconds. Each client
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

from bench.raw_http import RawConnection, RawHttpError, RawResponse
from bench.service_overhead import _database_url, _drop, percentile
from tests.support.fixtures import DEFAULT_PG, EXAMPLES
from tests.support.live import LiveServer, start_server
from tests.support.walkthrough import credit_dataset, logistic_job

# (route label, weight); a job submission is one request in ~20.
MIX: list[tuple[str, int]] = [
    ("GET budget", 6),
    ("GET job", 6),
    ("GET jobs (page of 20)", 3),
    ("GET datasets", 3),
    ("POST job", 1),
]
READS = {"GET budget", "GET job", "GET jobs (page of 20)", "GET datasets"}
#: With --job-rate: the clients that submit jobs, besides the reading clients.
JOB_CLIENTS = 5


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of load")
    parser.add_argument("--database", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--postgres-url", default=DEFAULT_PG)
    parser.add_argument(
        "--api-workers", type=int, default=None, help="DPFIT_API_WORKERS: API processes"
    )
    parser.add_argument("--reads-only", action="store_true", help="no job submissions")
    parser.add_argument(
        "--jobs-only", action="store_true", help="job submissions only (the per-job service cost)"
    )
    parser.add_argument(
        "--profile",
        type=Path,
        default=None,
        help="sample every process of the service with py-spy; speedscope files go here",
    )
    parser.add_argument(
        "--rate",
        type=float,
        default=None,
        help="open loop: requests per second offered by all clients together (default: closed "
        "loop, each client sends when its last request answered)",
    )
    parser.add_argument(
        "--job-rate",
        type=float,
        default=None,
        help="with --rate: the clients offer only reads at --rate, and 5 more clients offer "
        "this many job submissions per second",
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
    connection: RawConnection,
    dataset_id: str,
    job_ids: list[str],
    stop_at: float,
    tally: Tally,
    rng: random.Random,
    mix: list[tuple[str, int]],
    interval: float = 0.0,
) -> None:
    labels = [label for label, _ in mix]
    weights = [weight for _, weight in mix]
    scheduled = time.perf_counter() + (rng.random() * interval if interval else 0.0)
    while time.perf_counter() < stop_at:
        if interval:
            # Open loop: send at the scheduled instant, or at once when behind; the latency
            # counts from the schedule, so a stalled server is not hidden (no coordinated
            # omission).
            await asyncio.sleep(max(0.0, scheduled - time.perf_counter()))
        label = rng.choices(labels, weights)[0]
        body = None
        if label == "GET budget":
            method, target = "GET", f"/v1/datasets/{dataset_id}/budget"
        elif label == "GET job":
            method, target = "GET", f"/v1/jobs/{rng.choice(job_ids)}"
        elif label == "GET jobs (page of 20)":
            method, target = "GET", "/v1/jobs?limit=20"
        elif label == "GET datasets":
            method, target = "GET", "/v1/datasets"
        else:
            method, target, body = "POST", "/v1/jobs", submission(dataset_id)
        start = scheduled if interval else time.perf_counter()
        scheduled += interval
        response: RawResponse | None = None
        try:
            response = await connection.request(method, target, body)
            ok = 200 <= response.status < 300
            detail = f"{response.status} {response.body[:200]!r}"
        except (OSError, asyncio.IncompleteReadError, RawHttpError) as exc:
            ok, detail = False, type(exc).__name__
        tally.latencies[label].append(time.perf_counter() - start)
        if not ok:
            tally.errors[label] += 1
            if len(tally.error_samples) < 5:
                tally.error_samples.append(f"{label}: {detail}")
        elif label == "POST job" and response is not None and len(job_ids) < 200:
            job_ids.append(response.json()["id"])


async def load(
    server: LiveServer,
    clients: int,
    duration: float,
    mix: list[tuple[str, int]],
    rate: float | None = None,
    job_rate: float | None = None,
) -> tuple[Tally, float]:
    """Closed loop (each client sends its next request when the last one answered), or with
    ``rate`` an open loop: the clients together offer ``rate`` requests per second. With
    ``job_rate`` too, the clients send only reads (at ``rate``) and :data:`JOB_CLIENTS` more
    clients offer ``job_rate`` submissions per second."""
    analyst_key, dataset_id, job_ids = prepare(server)
    tally = Tally()
    headers = {"Authorization": f"Bearer {analyst_key}"}
    connections = [RawConnection("127.0.0.1", server.port, headers) for _ in range(clients)]
    interval = clients / rate if rate else 0.0
    if job_rate:
        mix = [(label, w) for label, w in mix if label in READS]
        submitters = [RawConnection("127.0.0.1", server.port, headers) for _ in range(JOB_CLIENTS)]
        connections += submitters
    start = time.perf_counter()
    stop_at = start + duration
    loops = [
        client_loop(c, dataset_id, job_ids, stop_at, tally, random.Random(i), mix, interval)
        for i, c in enumerate(connections[:clients])
    ]
    if job_rate:
        loops += [
            client_loop(
                c,
                dataset_id,
                job_ids,
                stop_at,
                tally,
                random.Random(clients + i),
                [("POST job", 1)],
                JOB_CLIENTS / job_rate,
            )
            for i, c in enumerate(connections[clients:])
        ]
    try:
        await asyncio.gather(*loops)
    finally:
        await asyncio.gather(*(c.close() for c in connections))
    return tally, time.perf_counter() - start


def cpu_seconds(pid: int) -> float:
    """User + system CPU of one process (all its threads) so far, from /proc (Linux)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def service_cpu(pid: int) -> float:
    """CPU of the whole service: the server process and every process below it (API
    processes, Dask nannies and workers)."""
    return cpu_seconds(pid) + sum(cpu_seconds(p) for p in descendants(pid))


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


def job_outcomes(url: str, wait: float = 30.0) -> dict[str, int]:
    """The jobs' statuses once the queue has drained (or after ``wait`` seconds): a submission
    counts only if its job really ran, and a backlog left at the end is reported."""
    from sqlalchemy import create_engine, func, select

    from service.db.models import Job

    engine = create_engine(url)
    deadline = time.monotonic() + wait
    try:
        while True:
            with engine.connect() as conn:
                rows = conn.execute(select(Job.status, func.count()).group_by(Job.status)).all()
            counts = {status: int(n) for status, n in rows}
            if time.monotonic() > deadline or not (counts.keys() & {"queued", "running"}):
                return counts
            time.sleep(0.5)
    finally:
        engine.dispose()


def report(
    backend: str,
    tally: Tally,
    elapsed: float,
    clients: int,
    cpu: tuple[float, float],
    rate: float | None = None,
    jobs: dict[str, int] | None = None,
    job_rate: float | None = None,
) -> list[str]:
    total = sum(len(v) for v in tally.latencies.values())
    reads = sum(len(v) for k, v in tally.latencies.items() if k in READS)
    errors = sum(tally.errors.values())
    read_latencies = [x for k, v in tally.latencies.items() if k in READS for x in v]
    lines = [
        f"### {backend}: {clients} clients, "
        f"{'closed loop' if not rate else f'open loop offering {rate:g} req/s'}"
        f"{f' of reads + {job_rate:g} job submissions/s' if job_rate else ''}, "
        f"{elapsed:.0f} s — {total / elapsed:.1f} req/s "
        f"({reads / elapsed:.1f} reads/s), "
        + (f"reads p99 {1000 * percentile(read_latencies, 0.99):.0f} ms, " if reads else "")
        + f"{errors} errors",
        "",
        "CPU per request, counted until the job queue drained: the service (all its processes) "
        f"{1000 * cpu[0] / max(total, 1):.2f} ms ({100 * cpu[0] / elapsed:.0f}% of a core over "
        "the load's duration), this load client "
        f"{1000 * cpu[1] / max(total, 1):.2f} ms ({100 * cpu[1] / elapsed:.0f}% of a core). "
        f"Machine load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores.",
        "",
        *(
            [
                "Jobs (the few made before the load included), once the queue drained: "
                + ", ".join(f"{n} {status}" for status, n in sorted(jobs.items()))
                + ".",
                "",
            ]
            if jobs
            else []
        ),
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
        [str(spy), "record", "--subprocesses", "-p", str(server.process.pid)]
        + ["-d", str(int(duration)), "-r", "100"]
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
    if args.api_workers is not None:
        os.environ["DPFIT_API_WORKERS"] = str(args.api_workers)
    mix = [
        (label, w)
        for label, w in MIX
        if not (args.reads_only and label not in READS) and not (args.jobs_only and label in READS)
    ]
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
                before = service_cpu(pid), time.process_time()
                tally, elapsed = asyncio.run(
                    load(server, clients, duration, mix, args.rate, args.job_rate)
                )
                jobs = job_outcomes(url)  # the CPU then includes every submitted job's run
                cpu = (service_cpu(pid) - before[0], time.process_time() - before[1])
                out += report(
                    backend, tally, elapsed, clients, cpu, args.rate, jobs, args.job_rate
                ) + [""]
                if spy is not None:
                    spy.wait(timeout=120)
                    out += summarize_profile(args.profile / f"load-{backend}.json") + [""]
            finally:
                server.stop()
                _drop(backend, url, args.postgres_url)
    print("\n".join(out))
    print(
        f"Mix per client: {', '.join(f'{label} ×{w}' for label, w in mix)} (weights); "
        f"API processes: {os.environ.get('DPFIT_API_WORKERS', '1')}; one LocalCluster worker; "
        "client and server share the machine."
    )
