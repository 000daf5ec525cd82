"""Shim (no tests here; they are in tests/live/test_dask_security.py): ``listeners`` for
tests/test_data_parallel.py until it moves into its layer and imports tests.support.dask_net."""

from tests.support.dask_net import LOOPBACK, listeners

__all__ = ["LOOPBACK", "listeners"]
