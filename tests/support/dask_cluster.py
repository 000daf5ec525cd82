"""A real multi-process Dask cluster for the data-parallel tests: three single-threaded
worker processes that reopen sources under one data root."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from distributed import Client, LocalCluster

__all__ = ["three_worker_cluster"]


@contextmanager
def three_worker_cluster(data_root: Path) -> Iterator[Client]:
    """A client of a LocalCluster of 3 worker processes (1 thread each, no dashboard) whose
    workers resolve sources under ``data_root`` (``DPFIT_DATA_ROOTS``, set before they start)."""
    os.environ["DPFIT_DATA_ROOTS"] = str(data_root)  # the workers reopen the source
    with (
        LocalCluster(
            n_workers=3, threads_per_worker=1, processes=True, dashboard_address=None
        ) as local,
        Client(local) as client,
    ):
        yield client
