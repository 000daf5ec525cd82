"""A paused worker is back-pressure for a data-parallel job, never a failure (issue 23 item 6).

Dask pauses a worker over its memory pause threshold: it starts no new task, but still answers
its actors' calls — a data-parallel job's steps (``distributed.Worker.actor_execute`` does not
look at the worker's status). Before, the driver failed the job with ``WorkerPaused`` (its charge
standing) as soon as a worker holding a partition was paused; now it waits for it, and releases
the job's rows through the actors (which a paused worker answers) before the release tasks.
"""

from __future__ import annotations

from typing import Any

import pytest

from service.workers import data_parallel
from service.workers.data_parallel import WorkerLost, _actor_results, _check_alive
from service.workers.scheduler_workers import scheduler_workers


class _Scheduler:
    """A synchronous client and its scheduler (``scheduler_workers`` asks it each time)."""

    def __init__(self, statuses: dict[str, str]) -> None:
        self.statuses = statuses
        self.submitted: list[str] = []
        self.scheduler = self

    def sync(self, function: Any, *args: Any, **kwargs: Any) -> Any:
        return function(*args, **kwargs)

    def identity(self, n_workers: int = 0) -> dict[str, Any]:
        assert n_workers == -1  # every worker's entry, not the totals only
        return {"workers": {a: {"status": s} for a, s in self.statuses.items()}}

    def submit(self, function: Any, prefix: str, **kwargs: Any) -> str:
        self.submitted.append(kwargs["workers"][0])
        return f"release-{kwargs['workers'][0]}"


class _SlowCall:
    """An actor call that answers after ``polls`` timeouts (a step on a paused worker)."""

    def __init__(self, polls: int, value: Any) -> None:
        self.polls, self.value = polls, value

    def result(self, timeout: float) -> Any:
        if self.polls:
            self.polls -= 1
            raise TimeoutError
        return self.value


def test_a_paused_worker_is_waited_for() -> None:
    client = _Scheduler({"w1": "running", "w2": "paused"})
    _check_alive(client, ["w1", "w2"])  # before: WorkerPaused
    results = _actor_results(client, [_SlowCall(0, 1.0), _SlowCall(3, 2.0)], ["w1", "w2"])
    assert results == [1.0, 2.0]


def test_a_lost_worker_still_restarts_the_fit() -> None:
    client = _Scheduler({"w1": "running"})
    with pytest.raises(WorkerLost):
        _check_alive(client, ["w1", "w2"])


class _Actor:
    def __init__(self, log: list[str], name: str) -> None:
        self.log, self.name = log, name

    def release(self) -> _SlowCall:
        self.log.append(self.name)
        return _SlowCall(0, 1)


def test_rows_are_released_through_the_actors_first(monkeypatch: pytest.MonkeyPatch) -> None:
    waited: list[Any] = []

    def wait(futures: Any, timeout: float) -> None:
        waited.append((list(futures), timeout))
        raise TimeoutError  # a paused worker has not run its release task yet

    import distributed

    monkeypatch.setattr(distributed, "wait", wait)
    client = _Scheduler({"w1": "running", "w2": "paused"})
    released: list[str] = []
    actors = [_Actor(released, "p0"), _Actor(released, "p1")]
    data_parallel._release_everywhere(client, ["w1", "w2"], "job-1", actors)
    assert released == ["p0", "p1"]
    assert client.submitted == ["w1", "w2"]
    assert waited and waited[0][1] == data_parallel.RELEASE_WAIT_S  # bounded, never forever


def test_the_workers_come_from_the_scheduler_not_the_clients_cache() -> None:
    client = _Scheduler({"w1": "running", "w2": "paused"})
    client.scheduler_info = lambda: {"workers": {}}  # type: ignore[attr-defined]  # a refreshed cache
    assert scheduler_workers(client) == {"w1": {"status": "running"}, "w2": {"status": "paused"}}
    _check_alive(client, ["w1", "w2"])  # not "left the cluster"
