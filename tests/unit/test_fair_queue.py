"""The dispatcher's fair queue (service/workers/fair_queue.py): one principal's long jobs leave a
slot to the others, the least-running principal goes first, and settings' defaults."""

from __future__ import annotations

import pytest

from service.settings import Settings, SettingsError
from service.workers.fair_queue import FairQueue, Ticket


def ids(tickets: list[Ticket]) -> list[str]:
    return [t.job_id for t in tickets]


def test_issue_23_alice_starts_while_bobs_long_jobs_run() -> None:
    """Issue 23: three long jobs of bob on two workers, then alice's small job. Before, Dask
    ran bob's first two and alice waited for one of them to end (≈ 30 min)."""
    queue = FairQueue(slots=2, per_principal=_settings().running_per_principal(2))
    released = [*queue.add(Ticket("b1", 1, "bob")), *queue.add(Ticket("b2", 1, "bob"))]
    released += queue.add(Ticket("b3", 1, "bob"))
    assert ids(released) == ["b1"]  # one slot stays open to the others
    assert ids(queue.add(Ticket("a1", 1, "alice"))) == ["a1"]  # at once, not after b1
    assert queue.waiting() == 2
    assert queue.done("a1", 1) == []  # bob holds his one slot: the free one stays open
    assert ids(queue.done("b1", 1)) == ["b2"]
    assert queue.running_by_principal() == {"bob": 1}


def _settings(**overrides: object) -> Settings:
    base = Settings(database_url="sqlite://", data_roots=(), workers=2, dask_scheduler=None)
    return Settings(**{**base.__dict__, **overrides})  # type: ignore[arg-type]


def test_least_running_principal_goes_first_then_oldest() -> None:
    queue = FairQueue(slots=3, per_principal=3)
    first = [queue.add(Ticket(f"b{i}", 1, "bob")) for i in range(3)]
    assert [ids(r) for r in first] == [["b0"], ["b1"], ["b2"]]  # alone: bob may use every slot
    for i in range(3):
        queue.add(Ticket(f"b{i + 3}", 1, "bob"))
    queue.add(Ticket("c0", 1, "carol"))
    queue.add(Ticket("a0", 1, "alice"))
    queue.add(Ticket("a1", 1, "alice"))
    # A slot frees: carol and alice hold none and were never served; carol's job is older.
    assert ids(queue.done("b0", 1)) == ["c0"]
    assert ids(queue.done("b1", 1)) == ["a0"]  # alice holds none
    assert ids(queue.done("b2", 1)) == ["b3"]  # bob now holds none: his turn
    # alice and bob hold one each: alice was served less recently (before b3).
    assert ids(queue.done("c0", 1)) == ["a1"]
    assert ids(queue.done("b3", 1)) == ["b4"]  # bob 0, alice 2


def test_a_newer_attempt_replaces_the_waiting_one_and_tracked_lists_both_states() -> None:
    queue = FairQueue(slots=1, per_principal=1)
    queue.add(Ticket("j1", 1, "bob"))
    queue.add(Ticket("j2", 1, "bob"))
    queue.add(Ticket("j2", 2, "bob"))
    assert queue.waiting() == 1 and queue.tracked() == {"j1", "j2"}
    released = queue.done("j1", 1)
    assert released == [Ticket("j2", 2, "bob")]
    assert queue.done("j2", 1) == [] and queue.tracked() == {"j2"}  # a stale end frees nothing
    assert queue.done("j2", 2) == [] and queue.tracked() == set()


def test_resize_releases_waiting_jobs() -> None:
    queue = FairQueue(slots=1, per_principal=1)
    queue.add(Ticket("b1", 1, "bob"))
    queue.add(Ticket("a1", 1, "alice"))
    assert ids(queue.resize(2, 1)) == ["a1"]


def test_settings_defaults_and_parsing() -> None:
    defaults = Settings.from_env({"DPFIT_DATABASE_URL": "sqlite://"})
    assert defaults.max_running_per_principal is None
    assert defaults.running_per_principal(2) == 1
    assert defaults.running_per_principal(8) == 7
    assert defaults.running_per_principal(1) == 1
    assert defaults.max_active_per_principal == 50
    assert defaults.job_time_limit_s == 3600.0
    assert defaults.reconcile_interval_s == 2.0
    set_ = Settings.from_env(
        {
            "DPFIT_DATABASE_URL": "sqlite://",
            "DPFIT_MAX_RUNNING_PER_PRINCIPAL": "2",
            "DPFIT_MAX_ACTIVE_PER_PRINCIPAL": "5",
            "DPFIT_JOB_TIME_LIMIT": "90.5",
            "DPFIT_RECONCILE_INTERVAL": "0",
        }
    )
    assert set_.running_per_principal(8) == 2
    assert (set_.max_active_per_principal, set_.job_time_limit_s) == (5, 90.5)
    assert set_.reconcile_interval_s == 0.0
    for name, bad in [
        ("DPFIT_MAX_RUNNING_PER_PRINCIPAL", "0"),
        ("DPFIT_MAX_ACTIVE_PER_PRINCIPAL", "x"),
        ("DPFIT_JOB_TIME_LIMIT", "0"),
        ("DPFIT_JOB_TIME_LIMIT", "nan"),
        ("DPFIT_RECONCILE_INTERVAL", "-1"),
    ]:
        with pytest.raises(SettingsError, match=name):
            Settings.from_env({"DPFIT_DATABASE_URL": "sqlite://", name: bad})
