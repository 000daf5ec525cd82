"""The worker's row cache (service/workers/row_cache.py): one source at a time, only what a
fresh read gave, read-only, bounded."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from service.workers.row_cache import MAX_SHARE, RowCache, Rows, row_key

MIB = 1 << 20


def _cache(memory_limit: int) -> RowCache:
    cache = RowCache()
    cache.setup(SimpleNamespace(memory_manager=SimpleNamespace(memory_limit=memory_limit)))
    return cache


class Reads:
    """A source stand-in that counts its reads."""

    def __init__(self, rows: int = 100, d: int = 5) -> None:
        self.count = 0
        self.shape = (rows, d)

    def __call__(self) -> Rows:
        self.count += 1
        return np.ones(self.shape), np.ones(self.shape[0])


def test_the_key_changes_with_every_fact_the_encoding_depends_on() -> None:
    base = ("sha256:a", "/d/x.csv", {"features": [1]}, {"column": "y"}, None)
    key = row_key(*base)
    assert key == row_key(*base)
    for i, other in enumerate(("sha256:b", "/d/y.csv", {"features": [2]}, {"column": "z"}, 1.0)):
        changed = list(base)
        changed[i] = other
        assert row_key(*changed) != key


def test_a_second_job_on_the_same_key_reads_nothing_and_gets_read_only_rows() -> None:
    cache, reads = _cache(1024 * MIB), Reads()
    X, Y = cache.rows("k", reads)
    X2, Y2 = cache.rows("k", reads)
    assert reads.count == 1 and X2 is X and Y2 is Y
    with pytest.raises(ValueError, match="read-only"):
        X2[0, 0] = 5.0


def test_another_source_drops_the_kept_rows_before_it_is_read() -> None:
    cache, first, second = _cache(1024 * MIB), Reads(), Reads()
    cache.rows("a", first)

    def read_b() -> Rows:
        assert cache._entry is None  # never two sources' rows at once
        return second()

    cache.rows("b", read_b)
    cache.rows("a", first)
    assert first.count == 2 and second.count == 1


def test_a_failed_read_keeps_nothing_and_rows_over_the_share_are_not_kept() -> None:
    cache = _cache(1024 * MIB)

    def broken() -> Rows:
        raise OSError("gone")

    with pytest.raises(OSError):
        cache.rows("k", broken)
    assert cache._entry is None
    small = _cache(10 * MIB)  # keeps at most MAX_SHARE of 10 MiB
    big = Reads(rows=int(MAX_SHARE * 10 * MIB / 8 / 5) + 1, d=5)
    small.rows("k", big)
    small.rows("k", big)
    assert big.count == 2


def test_a_partition_read_drops_the_kept_rows_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """A data-parallel job's plan counts its partition's rows, not a previous job's cached
    source (up to MAX_SHARE of the limit: 90 MiB of a 900 MiB worker). The worker drops them
    before it opens its window."""
    from service.workers import data_parallel, row_cache
    from service.workers.data_parallel import PartitionRead, load_partition

    cache = _cache(1024 * MIB)
    cache.rows("a", Reads())
    monkeypatch.setattr(row_cache, "current_plugin", lambda name, kind: cache)

    class Opened(Exception):
        pass

    def reopen(*args: object) -> None:
        assert cache._entry is None  # never the cached rows beside the partition
        raise Opened

    monkeypatch.setattr(data_parallel, "reopen_source", reopen)
    read = PartitionRead("parquet", "/d", {}, {}, None, n=10, dimension=2)
    window = data_parallel.RowWindow(0, 10)
    with pytest.raises(Opened):
        load_partition("job-r1-p0", "job", read, window, loss=None)  # type: ignore[arg-type]
