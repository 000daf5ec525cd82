"""Worker processes keep one pooled engine per database across jobs."""

from __future__ import annotations

from pathlib import Path

from distributed import Client, LocalCluster
from sqlalchemy import event

from service.workers.engines import WorkerEngines, job_engine


def _engine_identity(url: str) -> int:
    with job_engine(url) as engine:
        return id(engine)


def test_outside_a_worker_each_job_gets_a_temporary_engine(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'a.db'}"
    disposed: list[bool] = []
    with job_engine(url) as engine:
        event.listen(engine, "engine_disposed", lambda _: disposed.append(True))
        assert not disposed
    assert disposed == [True]


def test_inside_a_worker_jobs_share_the_plugins_engine(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'b.db'}"
    with (
        LocalCluster(
            n_workers=1,
            processes=True,
            dashboard_address=":0",
            scheduler_kwargs={"dashboard": False},
        ) as cluster,
        Client(cluster) as client,
    ):
        client.register_plugin(WorkerEngines())
        first = client.submit(_engine_identity, url, pure=False).result()
        second = client.submit(_engine_identity, url, pure=False).result()
        other = client.submit(_engine_identity, url + "x", pure=False).result()
    assert first == second
    assert other != first


def test_the_embedded_cluster_serves_no_dashboard(tmp_path: Path) -> None:
    """``dpfit serve``'s cluster exposes no unauthenticated Dask dashboard."""
    from service.db.session import make_engine, session_factory
    from service.settings import Settings
    from service.workers.dispatch import DaskDispatcher

    url = f"sqlite:///{tmp_path / 'c.db'}"
    engine = make_engine(url)
    settings = Settings(database_url=url, data_roots=(), workers=1, dask_scheduler=None)
    dispatcher = DaskDispatcher(settings, session_factory(engine))
    try:
        cluster = dispatcher._cluster
        assert cluster is not None
        # No HTTP server at all (tests/live/test_dask_security.py probes every port of a live one).
        assert not hasattr(cluster.scheduler, "http_server")
        assert "dashboard" not in cluster.scheduler.services
        assert dispatcher._client.scheduler_info()["services"] == {}
    finally:
        dispatcher.close()
        engine.dispose()
