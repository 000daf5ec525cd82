"""The default worker count is the CPUs the process may use (issue 26 item 7): a container's
CPU quota (cgroup v2 ``cpu.max``, cgroup v1 ``cpu.cfs_quota_us``) and affinity, not the host's
cores. Sample cgroup trees in tmp folders, as the kernel lays them out."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.cpu_quota import available_cpus, cgroup_cpu_limit
from service.settings import Settings


def v2_tree(tmp_path: Path, membership: str, limits: dict[str, str]) -> tuple[Path, Path]:
    """A cgroup v2 mount with ``cpu.max`` files at the given relative folders ('' = the
    mount), and a /proc/self/cgroup naming ``membership``."""
    root = tmp_path / "cgroup"
    for folder, text in limits.items():
        (root / folder).mkdir(parents=True, exist_ok=True)
        (root / folder / "cpu.max").write_text(text)
    proc = tmp_path / "proc-self-cgroup"
    proc.write_text(f"0::{membership}\n")
    return root, proc


def test_a_container_with_two_cpus_of_quota_on_a_big_host(tmp_path: Path) -> None:
    """`docker run --cpus 2`: the container's namespace shows '/', its cpu.max is at the mount."""
    root, proc = v2_tree(tmp_path, "/", {"": "200000 100000\n"})
    assert cgroup_cpu_limit(root, proc) == 2.0
    assert available_cpus(root, proc, affinity=64) == 2


def test_no_quota_means_the_affinity(tmp_path: Path) -> None:
    root, proc = v2_tree(tmp_path, "/", {"": "max 100000\n"})
    assert cgroup_cpu_limit(root, proc) is None
    assert available_cpus(root, proc, affinity=6) == 6
    # no cgroup files at all (another OS, a sandbox): the affinity too
    assert available_cpus(tmp_path / "absent", tmp_path / "absent-proc", affinity=3) == 3


def test_fractions_round_down_but_never_to_zero(tmp_path: Path) -> None:
    root, proc = v2_tree(tmp_path, "/", {"": "150000 100000"})
    assert available_cpus(root, proc, affinity=8) == 1
    root, proc = v2_tree(tmp_path / "b", "/", {"": "50000 100000"})
    assert cgroup_cpu_limit(root, proc) == 0.5
    assert available_cpus(root, proc, affinity=8) == 1


def test_the_tightest_of_the_cgroup_and_its_ancestors(tmp_path: Path) -> None:
    """On a host, /proc/self/cgroup names a nested cgroup; a parent's limit binds it."""
    root, proc = v2_tree(
        tmp_path,
        "/system.slice/dpfit.service",
        {"": "max 100000", "system.slice": "300000 100000", "system.slice/dpfit.service": "max"},
    )
    assert cgroup_cpu_limit(root, proc) == 3.0
    assert available_cpus(root, proc, affinity=16) == 3
    assert available_cpus(root, proc, affinity=2) == 2  # a tighter affinity wins


def test_cgroup_v1_quota(tmp_path: Path) -> None:
    root = tmp_path / "cgroup"
    folder = root / "cpu,cpuacct" / "docker" / "abc"
    folder.mkdir(parents=True)
    (folder / "cpu.cfs_quota_us").write_text("400000\n")
    (folder / "cpu.cfs_period_us").write_text("100000\n")
    (root / "cpu,cpuacct" / "cpu.cfs_quota_us").write_text("-1\n")
    (root / "cpu,cpuacct" / "cpu.cfs_period_us").write_text("100000\n")
    proc = tmp_path / "proc-self-cgroup"
    proc.write_text("12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n0::/\n")
    assert cgroup_cpu_limit(root, proc) == 4.0
    assert available_cpus(root, proc, affinity=32) == 4


def test_garbage_in_the_files_is_no_limit(tmp_path: Path) -> None:
    root, proc = v2_tree(tmp_path, "/", {"": "lots 100000"})
    assert cgroup_cpu_limit(root, proc) is None
    root, proc = v2_tree(tmp_path / "b", "/", {"": "100000 0"})
    assert cgroup_cpu_limit(root, proc) is None


def test_settings_default_to_the_available_cpus(monkeypatch: pytest.MonkeyPatch) -> None:
    import service.settings as settings

    monkeypatch.setattr(settings, "available_cpus", lambda: 3)
    assert Settings.from_env({}).workers == 3
    assert Settings.from_env({"DPFIT_WORKERS": "5"}).workers == 5
