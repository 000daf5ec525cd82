"""Shim (no tests here; they are in tests/live/test_external_scheduler.py): ``_tls_args`` for
tests/test_data_parallel.py until it moves into its layer and imports tests.support.dask_net."""

from tests.support.dask_net import tls_args as _tls_args

__all__ = ["_tls_args"]
