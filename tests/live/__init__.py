"""Tests against real processes: `dpfit serve`, Dask clusters, PostgreSQL, Chromium, S3.

Shim: ``tests.live`` was the live-server helper module (now tests/support/live.py); these
re-exports keep tests/test_data_parallel.py working until it moves here and imports
tests.support.live itself. Then this becomes an empty package file again."""

from tests.support.live import LiveServer, free_port
from tests.support.walkthrough import COPIES

__all__ = ["COPIES", "LiveServer", "free_port"]
