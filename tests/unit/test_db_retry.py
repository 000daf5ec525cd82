"""Run and dispatch database writes retried through an outage (service/workers/db_retry.py)."""

from __future__ import annotations

import pytest
from sqlalchemy.exc import IntegrityError, OperationalError

from service.workers.db_retry import with_retry


class Flaky:
    def __init__(self, failures: int, error: Exception) -> None:
        self.failures, self.error, self.calls = failures, error, 0

    def __call__(self) -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        return "done"


def connection_lost() -> OperationalError:
    return OperationalError("UPDATE jobs", {}, Exception("server closed the connection"))


def test_a_connection_error_is_retried_with_growing_back_off() -> None:
    sleeps: list[float] = []
    work = Flaky(5, connection_lost())
    assert with_retry(work, sleep=sleeps.append) == "done"
    assert work.calls == 6
    assert sleeps == [0.1, 0.2, 0.4, 0.8, 1.6]


def test_the_last_error_is_raised_when_the_budget_is_spent() -> None:
    work = Flaky(10**6, connection_lost())
    with pytest.raises(OperationalError):
        with_retry(work, budget_s=0.05, sleep=lambda _: None)
    assert work.calls >= 1


def test_other_errors_are_not_retried() -> None:
    work = Flaky(1, IntegrityError("INSERT", {}, Exception("unique")))
    with pytest.raises(IntegrityError):
        with_retry(work, sleep=lambda _: None)
    assert work.calls == 1
