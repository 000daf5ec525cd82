"""How an in-database full-gradient job sizes its sessions: from public values only."""

from __future__ import annotations

import pytest

from service.workers.in_database import (
    MAX_SESSIONS,
    MIN_SHARD_ROWS,
    TEMP_BUFFERS_CAP_KIB,
    planned_sessions,
    temp_buffers_kib,
)


@pytest.mark.parametrize(
    "n, workers, expected",
    [
        (10, 2, 1),  # a small table: one session
        (MIN_SHARD_ROWS * 2 - 1, 2, 1),
        (MIN_SHARD_ROWS * 2, 2, 2),
        (10**6, 2, 3),  # 1 + max_parallel_workers_per_gather
        (10**6, 0, 1),  # the owner turned parallel query off
        (10**7, 64, MAX_SESSIONS),
        (10**7, -1, 1),
    ],
)
def test_planned_sessions(n: int, workers: int, expected: int) -> None:
    assert planned_sessions(n, workers) == expected


def test_temp_buffers_hold_the_rows_within_the_cap() -> None:
    # 12 float8 columns: 124-byte tuples, 65 a page (8,168 // 124)
    assert temp_buffers_kib(65 * 2000, 12) == 8 * 2000 + 1024
    assert temp_buffers_kib(65 * 2000 + 1, 12) == 8 * 2001 + 1024
    assert temp_buffers_kib(10, 12) == 8192  # never below PostgreSQL's default
    assert temp_buffers_kib(10**9, 12) == TEMP_BUFFERS_CAP_KIB
