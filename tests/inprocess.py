"""Shim: the helpers moved to tests/support/inprocess.py. Kept for tests/test_auto.py until it
moves into its layer; new code imports tests.support.inprocess."""

from tests.support.inprocess import QueueOnly, bearer, in_process_app

__all__ = ["QueueOnly", "bearer", "in_process_app"]
