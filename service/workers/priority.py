"""Worker processes yield the CPU to the API: fits are batch work, requests are interactive.

On a machine where the API processes and the Dask workers share the cores, a fit that holds a
core delays every request queued behind it; under a read load with job submissions mixed in,
that was most of the API's tail latency (bench/RESULTS.md, section 7). The embedded cluster's
worker processes therefore run at a lower scheduling priority (``DPFIT_WORKER_NICE``, default
10): when nothing else wants the CPU they run as fast as before (nice only orders runnable
tasks), and when requests wait, the requests run first.

Linux keeps a nice value per thread, and a new thread inherits its creator's, so the worker sets
every thread that exists when it starts (``/proc/self/task``); the threads it starts later are
created by those. Elsewhere it falls back to :func:`os.nice` (the process's value on BSD and
macOS). A value the process is not allowed to set (raising priority without privilege) is left
as it is: the priority is a performance setting, never a condition for running a job.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

logger = logging.getLogger("dpfit.dispatch")

__all__ = ["lower_priority", "thread_nice_values"]

_TASKS = Path("/proc/self/task")


def thread_nice_values(pid: int | str = "self") -> dict[int, int]:
    """The nice value of each thread of process ``pid`` (Linux ``/proc``; empty elsewhere)."""
    values: dict[int, int] = {}
    tasks = Path(f"/proc/{pid}/task")
    if not tasks.is_dir():
        return values
    for task in tasks.iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        values[int(task.name)] = int(fields[16])
    return values


def lower_priority(nice: int) -> None:
    """Make every thread of this process run at nice value ``nice`` or lower priority (a thread
    already at a higher value keeps it). ``nice`` ≤ 0 does nothing."""
    if nice <= 0:
        return
    if not _TASKS.is_dir():
        try:
            os.nice(max(0, nice - os.nice(0)))
        except OSError:
            logger.warning("could not lower the worker's priority")
        return
    for tid, current in thread_nice_values().items():
        if current >= nice:
            continue
        try:
            os.setpriority(os.PRIO_PROCESS, tid, nice)
        except (ProcessLookupError, PermissionError, OSError):
            continue
