"""Outages and restarts (issue 9): a database that disappears, comes back empty or is deleted
answers 503 with Retry-After on every endpoint, /healthz checks the schema revision, the logs
hold one line per failure and no secret; the retry limit after restarts counts runs.

Live `dpfit serve` processes on their own PostgreSQL database / SQLite file (they are broken on
purpose), plus the recovery functions on a real database in-process.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import create_engine, select, text, update
from sqlalchemy.engine import make_url

from service.db.models import Charge, Job, utcnow
from service.workers.dispatch import (
    INTERRUPTED_UNREAD,
    RECOVERY_FAILED,
    mark_interrupted_failed,
    recover_unfinished,
)
from tests.support.fixtures import EXAMPLES, _postgres_admin_url
from tests.support.inprocess import QueueOnly, bearer, in_process_app
from tests.support.live import BIN, LiveServer, start_server
from tests.support.walkthrough import COPIES, credit_dataset, logistic_job

PASSWORD = "s3cret-Pa55word"


def unavailable(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 503, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    assert int(response.headers["retry-after"]) > 0
    assert response.headers["x-request-id"]
    body = response.json()
    assert body["status"] == 503 and body["title"] and body["detail"]
    return body


def hit_every_kind_of_endpoint(server: LiveServer, key: str) -> list[httpx.Response]:
    client = server.client(key)
    return [
        client.get("/v1/jobs"),
        client.get("/v1/jobs/job_x"),
        client.post("/v1/jobs/job_x/cancel"),
        client.post("/v1/jobs", json=logistic_job("ds_x")),
        client.get("/v1/datasets"),
        client.get("/v1/datasets/ds_x/budget"),
        client.post("/v1/datasets", json=credit_dataset()),
        client.get("/v1/models/mdl_x"),
        client.get("/v1/keys"),
        server.client().get("/healthz"),
    ]


def server_log(server: LiveServer) -> str:
    return "".join(p.read_text(errors="replace") for p in server.home.glob("server-*.log"))


def assert_quiet_log(server: LiveServer, failures: int) -> None:
    log = server_log(server)
    assert "Traceback" not in log
    assert PASSWORD not in log
    assert "[parameters:" not in log and "SELECT" not in log
    lines = [line for line in log.splitlines() if "database unavailable" in line]
    # One line per failed request (healthz's schema check is an answer, not a failure).
    assert failures <= len(lines) <= failures + 2, lines
    assert all(re.search(r"failed: \w+ \(request [0-9a-f]{16}\)", line) for line in lines)


@pytest.mark.postgres
def test_postgres_dropped_and_recreated_empty(
    private_postgres_database: str, tmp_path: Path
) -> None:
    url = make_url(private_postgres_database).set(password=PASSWORD)
    url_text = url.render_as_string(hide_password=False)
    name = url.database
    server = start_server(url_text, data_roots=[EXAMPLES], home=tmp_path)
    admin_engine = create_engine(_postgres_admin_url(), isolation_level="AUTOCOMMIT")
    try:
        key = server.key("admin", "admin")
        assert server.client(key).get("/v1/jobs").status_code == 200
        assert server.client().get("/healthz").status_code == 200
        banner = server_log(server)
        assert "database: postgresql+psycopg://postgres:***@" in banner
        assert PASSWORD not in banner

        with admin_engine.connect() as conn:
            conn.execute(
                text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = :name AND pid <> pg_backend_pid()"
                ),
                {"name": name},
            )
            conn.execute(text(f'DROP DATABASE "{name}"'))
        gone = hit_every_kind_of_endpoint(server, key)
        for response in gone:
            unavailable(response)

        with admin_engine.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        empty = hit_every_kind_of_endpoint(server, key)
        for response in empty:
            unavailable(response)
        assert "schema" in empty[-1].json()["detail"]  # healthz names the cause

        subprocess.run(
            [str(BIN / "dpfit"), "migrate"], env=server.env, check=True, capture_output=True
        )
        assert server.client().get("/healthz").status_code == 200
        assert_quiet_log(server, failures=len(gone) + len(empty) - 1)
    finally:
        server.stop()
        admin_engine.dispose()


def test_sqlite_file_deleted_under_the_server(tmp_path: Path) -> None:
    database = tmp_path / "dpfit.db"
    server = start_server(f"sqlite:///{database}", data_roots=[EXAMPLES], home=tmp_path)
    try:
        key = server.key("admin", "admin")
        assert server.client(key).get("/v1/jobs").status_code == 200
        for suffix in ("", "-wal", "-shm"):
            Path(f"{database}{suffix}").unlink(missing_ok=True)
        responses = hit_every_kind_of_endpoint(server, key)
        for response in responses:
            unavailable(response)
        assert not database.exists()  # the server never recreates an empty file
        assert_quiet_log(server, failures=len(responses))
    finally:
        server.stop()


# --- the retry limit counts runs ---------------------------------------------------------------


@pytest.fixture
def queued_jobs(tmp_path: Path) -> Any:
    """An in-process app on a migrated SQLite file whose dispatcher runs nothing: three jobs
    stay queued. Yields (client, analyst key, sessions, job ids)."""
    with in_process_app(f"sqlite:///{tmp_path / 'dpfit.db'}", COPIES) as (client, admin_key):
        admin = bearer(admin_key)
        owner = client.post("/v1/keys", json={"name": "o", "role": "owner"}, headers=admin)
        analyst = client.post("/v1/keys", json={"name": "a", "role": "analyst"}, headers=admin)
        owner_h, analyst_h = bearer(owner.json()["key"]), bearer(analyst.json()["key"])
        dataset = client.post("/v1/datasets", json=credit_dataset(), headers=owner_h)
        assert dataset.status_code == 201, dataset.text
        dataset_id = dataset.json()["id"]
        client.post(f"/v1/datasets/{dataset_id}/grants", json={"principal": "a"}, headers=owner_h)
        jobs = [
            client.post("/v1/jobs", json=logistic_job(dataset_id, epsilon=0.1), headers=analyst_h)
            for _ in range(3)
        ]
        assert all(j.status_code == 202 for j in jobs), [j.text for j in jobs]
        yield client, analyst_h, client.app.state.sessions, [j.json()["id"] for j in jobs]


def _claimed(sessions: Any, job_id: str) -> None:
    """What the runner's claim does when a worker starts the job (one more run)."""
    with sessions.begin() as session:
        session.execute(
            update(Job)
            .where(Job.id == job_id)
            .values(status="running", runs=Job.runs + 1, data_read_at=utcnow(), started_at=utcnow())
        )


def test_queued_jobs_survive_any_number_of_restarts(queued_jobs: Any) -> None:
    client, analyst, sessions, job_ids = queued_jobs
    ran_once, ran_thrice = job_ids[0], job_ids[1]
    _claimed(sessions, ran_once)
    for _ in range(3):
        _claimed(sessions, ran_thrice)
    for _ in range(6):  # six restarts, max_attempts = 3: dispatches are not runs
        recover_unfinished(sessions, QueueOnly(None, sessions), 3)  # type: ignore[arg-type]
    never_started = [client.get(f"/v1/jobs/{i}", headers=analyst).json() for i in job_ids[2:]]
    assert never_started and all(
        j["status"] == "queued" and j["error"] is None for j in never_started
    )
    once = client.get(f"/v1/jobs/{ran_once}", headers=analyst).json()
    # One run < 3: re-dispatched — queued again, waiting for a worker (job_status.redispatch).
    assert once["status"] == "queued" and once["error"] is None
    thrice = client.get(f"/v1/jobs/{ran_thrice}", headers=analyst).json()
    assert thrice["status"] == "failed" and thrice["error"] == RECOVERY_FAILED
    assert thrice["refunded"] is False  # the data was read: the charge stands, as it says


def test_a_task_lost_before_reading_is_refunded_and_says_so(queued_jobs: Any) -> None:
    client, analyst, sessions, job_ids = queued_jobs
    mark_interrupted_failed(sessions, job_ids[1], 1)
    job = client.get(f"/v1/jobs/{job_ids[1]}", headers=analyst).json()
    assert job["status"] == "failed" and job["error"] == INTERRUPTED_UNREAD
    assert job["refunded"] is True and "refunded" in job["error"]
    with sessions() as session:
        kinds = session.scalars(select(Charge.kind).where(Charge.job_id == job_ids[1])).all()
    assert sorted(kinds) == ["charge", "refund"]


# --- recovery without a restart (issue 23, item 5) --------------------------------------------


def _set_connections(admin_engine: Any, name: str, allowed: bool) -> None:
    """Open or close the database to new connections; closing also ends every open one."""
    with admin_engine.connect() as conn:
        conn.execute(text(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS {str(allowed).lower()}'))
        if not allowed:
            conn.execute(
                text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = :name AND pid <> pg_backend_pid()"
                ),
                {"name": name},
            )


@pytest.mark.postgres
def test_every_accepted_job_ends_after_an_outage_without_a_restart(
    private_postgres_database: str, tmp_path: Path
) -> None:
    """PostgreSQL refuses every connection of the service for 8 s while one job runs and the
    others wait: every accepted job still reaches a final state, each charged once, and the
    server was never restarted (before: the running job and those starting during the outage
    stayed running/queued, charged, until a restart)."""
    import time

    name = make_url(private_postgres_database).database
    assert name is not None
    server = start_server(
        private_postgres_database,
        data_roots=[EXAMPLES, tmp_path],
        home=tmp_path,
        extra_env={"DPFIT_RECONCILE_INTERVAL": "1"},
    )
    admin_engine = create_engine(_postgres_admin_url(), isolation_level="AUTOCOMMIT")
    try:
        owner = server.client(server.key("owner", "owner"))
        analyst = server.client(server.key("analyst", "analyst"))
        from tests.support.walkthrough import write_large_credit

        uri = write_large_credit(tmp_path, 100_000)
        dataset = owner.post("/v1/datasets", json=credit_dataset(epsilon=50.0, uri=uri))
        assert dataset.status_code == 201, dataset.text
        dataset_id = dataset.json()["id"]
        owner.post(f"/v1/datasets/{dataset_id}/grants", json={"principal": "analyst"})
        body = logistic_job(dataset_id, epsilon=0.5, iterations=300)
        accepted = [analyst.post("/v1/jobs", json=body) for _ in range(6)]
        assert all(r.status_code == 202 for r in accepted), [r.text for r in accepted]
        job_ids = [r.json()["id"] for r in accepted]
        deadline = time.monotonic() + 120
        while analyst.get(f"/v1/jobs/{job_ids[0]}").json()["status"] != "running":
            assert time.monotonic() < deadline, "the first job never started"
            time.sleep(0.05)

        _set_connections(admin_engine, name, allowed=False)
        time.sleep(8)
        _set_connections(admin_engine, name, allowed=True)

        deadline = time.monotonic() + 300
        statuses: dict[str, str] = {}
        while time.monotonic() < deadline:
            statuses = {i: analyst.get(f"/v1/jobs/{i}").json().get("status") for i in job_ids}
            if all(s in ("succeeded", "failed", "cancelled") for s in statuses.values()):
                break
            time.sleep(0.5)
        assert all(s in ("succeeded", "failed", "cancelled") for s in statuses.values()), statuses
        assert server.process is not None and server.process.poll() is None  # never restarted
        engine = create_engine(private_postgres_database)
        try:
            with engine.connect() as conn:
                kinds = conn.execute(select(Charge.job_id, Charge.kind)).all()
        finally:
            engine.dispose()
        charged = [job_id for job_id, kind in kinds if kind == "charge"]
        assert sorted(charged) == sorted(job_ids)  # each accepted job charged exactly once
    finally:
        server.stop()
        _set_connections(admin_engine, name, allowed=True)
        admin_engine.dispose()
