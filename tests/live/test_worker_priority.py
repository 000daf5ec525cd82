"""Worker processes yield the CPU to the API (service/workers/priority.py).

Against a real ``dpfit serve``: every thread of the embedded cluster's worker processes runs at
``DPFIT_WORKER_NICE`` (here 7, so the default cannot pass by accident) while the API process
keeps its own priority, and a job still runs. Without a server: :func:`lower_priority` reaches
threads started before and after the call, and never raises a thread's priority.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from service.workers.priority import thread_nice_values
from tests.support.fixtures import EXAMPLES
from tests.support.live import LiveServer, run_walkthrough_job, start_server

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/task").is_dir(), reason="per-thread nice values are read from /proc"
)


@pytest.fixture(scope="module")
def niced_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    home = tmp_path_factory.mktemp("niced-server")
    server = start_server(
        f"sqlite:///{home / 'dpfit.db'}",
        data_roots=[EXAMPLES],
        home=home,
        extra_env={"DPFIT_WORKER_NICE": "7"},
    )
    try:
        yield server
    finally:
        server.stop()


def worker_processes(root: psutil.Process) -> list[psutil.Process]:
    """The Dask worker processes below the (single-process) server: its multiprocessing
    children, the resource tracker excepted."""
    return [
        p
        for p in root.children(recursive=True)
        if any("spawn_main" in part for part in p.cmdline())
    ]


def test_worker_threads_run_at_the_configured_nice_value(niced_server: LiveServer) -> None:
    assert niced_server.process is not None
    root = psutil.Process(niced_server.process.pid)
    workers = worker_processes(root)
    assert len(workers) == 1  # DPFIT_WORKERS=1
    state = run_walkthrough_job(niced_server)
    assert state["status"] == "succeeded", state["error"]
    # After a job: the executor thread that ran the fit exists and inherited the value.
    worker_threads = thread_nice_values(workers[0].pid)
    assert len(worker_threads) >= 2
    assert set(worker_threads.values()) == {7}
    assert set(thread_nice_values(root.pid).values()) == {0}


PROBE = textwrap.dedent(
    """
    import threading, time
    from service.workers.priority import lower_priority, thread_nice_values
    stop = threading.Event()
    before = threading.Thread(target=stop.wait); before.start()
    lower_priority({nice})
    after = threading.Thread(target=stop.wait); after.start()
    print(sorted(thread_nice_values().values()))
    stop.set(); before.join(); after.join()
    """
)


@pytest.mark.parametrize(("start", "nice", "expected"), [(0, 5, [5, 5, 5]), (9, 5, [9, 9, 9])])
def test_lower_priority_reaches_every_thread_and_never_raises_priority(
    start: int, nice: int, expected: list[int]
) -> None:
    out = subprocess.run(
        ["nice", "-n", str(start), sys.executable, "-c", PROBE.format(nice=nice)],
        check=True,
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    ).stdout
    assert out.strip() == str(expected)
