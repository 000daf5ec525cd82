"""How many CPUs this process may use: the default number of embedded Dask workers.

``os.cpu_count()`` is the machine's cores, not what a container is given: ``docker run
--cpus 2`` on a 64-core host still reports 64, and 64 worker processes then share two CPUs of
quota (each throttled, each holding its own copy of a job's rows). The CPUs a process may use
are the smallest of

- its CPU affinity (``os.sched_getaffinity(0)``: ``docker run --cpuset-cpus``, ``taskset``);
- its cgroup's CPU bandwidth quota, ``quota / period`` CPUs — cgroup v2's ``cpu.max``
  (``"200000 100000"``, or ``"max 100000"`` for none) in its own cgroup and every ancestor
  (a parent's limit binds its children), or cgroup v1's ``cpu.cfs_quota_us`` /
  ``cpu.cfs_period_us`` (−1 for none).

A fractional quota is rounded down, at least 1 (1.5 CPUs → 1 worker: a second worker would be
throttled, not faster; the convention of Go's automaxprocs). Everything is read from files
given as arguments, so it is tested on sample cgroup trees; a file that is absent or unreadable
means "no limit there".
"""

from __future__ import annotations

import math
import os
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
PROC_SELF_CGROUP = Path("/proc/self/cgroup")


def available_cpus(
    cgroup_root: Path = CGROUP_ROOT,
    proc_self_cgroup: Path = PROC_SELF_CGROUP,
    affinity: int | None = None,
) -> int:
    """The CPUs this process may use (see the module docstring); at least 1.

    ``affinity`` defaults to ``len(os.sched_getaffinity(0))`` where the platform has it, else
    ``os.cpu_count()``."""
    if affinity is None:
        affinity = _affinity()
    quota = cgroup_cpu_limit(cgroup_root, proc_self_cgroup)
    limit = affinity if quota is None else min(affinity, math.floor(quota))
    return max(1, limit)


def cgroup_cpu_limit(cgroup_root: Path, proc_self_cgroup: Path) -> float | None:
    """The tightest CPU bandwidth quota (in CPUs) on this process's cgroup and its ancestors,
    cgroup v2 or v1; ``None`` when there is none."""
    memberships = _memberships(proc_self_cgroup)
    limits: list[float] = []
    unified = memberships.get("")
    if unified is not None:
        for folder in _self_and_ancestors(cgroup_root, unified):
            limit = _v2_limit(folder / "cpu.max")
            if limit is not None:
                limits.append(limit)
    cpu_path = memberships.get("cpu")
    if cpu_path is not None:
        for mount in _v1_cpu_mounts(cgroup_root):
            for folder in _self_and_ancestors(mount, cpu_path):
                limit = _v1_limit(folder / "cpu.cfs_quota_us", folder / "cpu.cfs_period_us")
                if limit is not None:
                    limits.append(limit)
    return min(limits) if limits else None


def _affinity() -> int:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _memberships(proc_self_cgroup: Path) -> dict[str, str]:
    """Controller → cgroup path from ``/proc/self/cgroup`` (``"0::/path"`` is cgroup v2, whose
    controller list is empty: key ``""``; ``"4:cpu,cpuacct:/path"`` gives ``cpu`` and
    ``cpuacct``)."""
    found: dict[str, str] = {}
    for line in _read(proc_self_cgroup).splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "":
            found[""] = path
        for controller in controllers.split(","):
            if controller:
                found[controller] = path
    return found


def _self_and_ancestors(mount: Path, path: str) -> list[Path]:
    """The cgroup's folder under ``mount`` and every ancestor up to ``mount`` itself. Inside a
    container's cgroup namespace the path is ``/`` and the mount is the container's own
    cgroup; a path not under the mount (another namespace) reads the mount only."""
    folders = [mount]
    current = mount
    for part in [p for p in path.split("/") if p and p != ".."]:
        current = current / part
        folders.append(current)
    return folders


def _v1_cpu_mounts(cgroup_root: Path) -> list[Path]:
    return [
        cgroup_root / name
        for name in ("cpu", "cpu,cpuacct", "cpuacct,cpu")
        if (cgroup_root / name).is_dir()
    ]


def _v2_limit(cpu_max: Path) -> float | None:
    fields = _read(cpu_max).split()
    if len(fields) != 2 or fields[0] == "max":
        return None
    return _ratio(fields[0], fields[1])


def _v1_limit(quota_file: Path, period_file: Path) -> float | None:
    return _ratio(_read(quota_file).strip(), _read(period_file).strip())


def _ratio(quota: str, period: str) -> float | None:
    try:
        q, p = int(quota), int(period)
    except ValueError:
        return None
    return q / p if q > 0 and p > 0 else None


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""
