"""Structured logs: one JSON line per request (route template, status, duration, request id) and
one per job lifecycle event (accepted, started, succeeded/failed/cancelled, refunded), never a
key, a raw path, a query string or a dataset location; ``DPFIT_LOG_FORMAT=text`` as the
alternative.

The request and job lines are read from a live `dpfit serve`'s log; the refund event from an
in-process app (its dispatcher runs nothing, so a cancel refunds deterministically).
"""

from __future__ import annotations

import io
import json
import logging
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.orm import sessionmaker

from service.db import job_status
from service.db.session import make_engine
from service.domain.job_events import JobEventLog
from service.logging_setup import JsonFormatter, configure_logging
from service.settings import Settings, SettingsError
from tests.support.inprocess import bearer, in_process_app
from tests.support.live import LiveServer, start_server
from tests.support.walkthrough import EXAMPLES, credit_dataset, logistic_job


def json_lines(server: LiveServer) -> list[dict[str, Any]]:
    lines = []
    for path in Path(server.home).glob("server-*.log"):
        for line in path.read_text(errors="replace").splitlines():
            if line.startswith("{"):
                lines.append(json.loads(line))
    return lines


def raw_log(server: LiveServer) -> str:
    return "".join(p.read_text(errors="replace") for p in Path(server.home).glob("server-*.log"))


def wait_for_lines(server: LiveServer, predicate: Any, timeout: float = 30.0) -> list[Any]:
    deadline = time.monotonic() + timeout
    while True:
        found = [line for line in json_lines(server) if predicate(line)]
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.3)


def test_json_and_text_formats() -> None:
    stream = io.StringIO()
    handler = configure_logging("json", stream=stream)
    try:
        logger = logging.getLogger("dpfit.test")
        try:
            raise ValueError("secret cell value 42")
        except ValueError:
            logger.exception("it failed", extra={"fields": {"event": "x", "job_id": "job_1"}})
        line = json.loads(stream.getvalue().strip())
        assert line["message"] == "it failed" and line["level"] == "error"
        assert line["event"] == "x" and line["job_id"] == "job_1"
        assert line["exception"] == "ValueError"
        assert "secret" not in stream.getvalue() and "Traceback" not in stream.getvalue()

        stream.truncate(0)
        stream.seek(0)
        configure_logging("text", stream=stream)
        logger.info("GET /healthz 200", extra={"fields": {"event": "request", "status": 200}})
        assert stream.getvalue() == "INFO dpfit.test: GET /healthz 200 event=request status=200\n"
        handlers = logging.getLogger("dpfit").handlers
        ours = [h for h in handlers if h.get_name() == handler.get_name()]
        assert len(ours) == 1  # replaced, not added (pytest's capture handlers may sit beside it)
    finally:
        logging.getLogger("dpfit").removeHandler(handler)
        configure_logging("json")


def test_log_format_setting() -> None:
    base = {"DPFIT_DATABASE_URL": "sqlite://"}
    assert Settings.from_env(base).log_format == "json"
    assert Settings.from_env({**base, "DPFIT_LOG_FORMAT": "TEXT"}).log_format == "text"
    with pytest.raises(SettingsError, match="DPFIT_LOG_FORMAT"):
        Settings.from_env({**base, "DPFIT_LOG_FORMAT": "xml"})
    assert JsonFormatter().format(logging.makeLogRecord({"msg": "ok"})).startswith("{")


def test_one_line_per_request_with_the_route_template(sqlite_server: LiveServer) -> None:
    key = sqlite_server.key("log-ann", "analyst")
    with sqlite_server.client(key) as client:
        missing = client.get("/v1/jobs/job_logmarker0123", headers={"X-Request-ID": "log-req-1"})
        assert missing.status_code == 404
        listed = client.get("/v1/jobs?status=queued&limit=7&cursor=", params={})
        assert listed.status_code in (200, 422)
    lines = wait_for_lines(sqlite_server, lambda x: x.get("request_id") == "log-req-1")
    assert len(lines) == 1, lines
    line = lines[0]
    assert line["event"] == "request" and line["logger"] == "dpfit.access"
    assert (line["method"], line["route"], line["status"]) == ("GET", "/v1/jobs/{job_id}", 404)
    assert isinstance(line["duration_ms"], float)
    log = raw_log(sqlite_server)
    assert "logmarker0123" not in log  # the raw path is never logged
    assert "limit=7" not in log  # nor the query string
    assert key not in log


#: What `dpfit serve` prints on stdout when it starts (for people, not a log shipper).
BANNER = (
    "dpfit listening",
    "database:",
    "data roots:",
    "SQL connections:",
    "workers:",
    "first key:",
)


def test_every_log_line_is_json_uvicorn_and_dask_included(sqlite_server: LiveServer) -> None:
    """Not only dpfit's own lines: uvicorn's startup lines and Dask's in the API process were
    plain text ("INFO:     Started server process", "… - distributed.… - WARNING - …")."""
    with sqlite_server.client(sqlite_server.key("log-json", "analyst")) as client:
        assert client.get("/healthz").status_code == 200
    wait_for_lines(sqlite_server, lambda x: x.get("route") == "/healthz")
    lines = [line for line in raw_log(sqlite_server).splitlines() if line.strip()]
    plain = [line for line in lines if not line.startswith(("{", *BANNER))]
    assert plain == []
    loggers = {json.loads(line)["logger"] for line in lines if line.startswith("{")}
    assert "uvicorn.error" in loggers and "dpfit.access" in loggers


def test_a_worker_process_writes_its_lines_in_the_same_format(tmp_path: Path) -> None:
    """A worker process's own lines (here its job passing DPFIT_JOB_TIME_LIMIT: the runner's
    warning is written in the worker, not the API process) were plain text beside the API
    process's JSON; every line of the log is JSON now."""
    server = start_server(
        f"sqlite:///{tmp_path / 'dpfit.db'}",
        [EXAMPLES],
        tmp_path,
        extra_env={"DPFIT_JOB_TIME_LIMIT": "0.000001"},
    )
    try:
        owner, analyst = server.key("log-wo", "owner"), server.key("log-wa", "analyst")
        with server.client(owner) as client:
            dataset_id = client.post("/v1/datasets", json=credit_dataset()).json()["id"]
            client.post(f"/v1/datasets/{dataset_id}/grants", json={"principal": "log-wa"})
        with server.client(analyst) as client:
            job_id = client.post("/v1/jobs", json=logistic_job(dataset_id)).json()["id"]
        found = wait_for_lines(
            server,
            lambda x: x.get("logger") == "dpfit.worker" and job_id in x.get("message", ""),
            timeout=120,
        )
        assert found and "wall-clock limit" in found[0]["message"]
        lines = [line for line in raw_log(server).splitlines() if line.strip()]
        assert [line for line in lines if not line.startswith(("{", *BANNER))] == []
    finally:
        server.stop()


def test_job_lifecycle_events(sqlite_server: LiveServer) -> None:
    owner = sqlite_server.key("log-olivia", "owner")
    analyst = sqlite_server.key("log-ann", "analyst")
    body = credit_dataset()
    with sqlite_server.client(owner) as client:
        dataset_id = client.post("/v1/datasets", json=body).json()["id"]
        client.post(f"/v1/datasets/{dataset_id}/grants", json={"principal": "log-ann"})
    with sqlite_server.client(analyst) as client:
        job_id = client.post("/v1/jobs", json=logistic_job(dataset_id)).json()["id"]

    def events() -> list[str]:
        lines = [x for x in json_lines(sqlite_server) if x.get("job_id") == job_id]
        return [x["event"] for x in lines]

    deadline = time.monotonic() + 120
    while "job.succeeded" not in events() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert events() == ["job.accepted", "job.started", "job.succeeded"]
    finished = [x for x in json_lines(sqlite_server) if x.get("event") == "job.succeeded"]
    line = next(x for x in finished if x["job_id"] == job_id)
    assert line["dataset_id"] == dataset_id and line["principal"] == "log-ann"
    assert line["optimizer"] == "output_perturbation_gd"
    assert line["model"] == "logistic_regression"
    assert line["duration_s"] >= 0
    log = raw_log(sqlite_server)
    assert body["source"]["uri"] not in log  # never the dataset's location
    assert owner not in log and analyst not in log


def _olivia_grants_ann(client: Any, admin: str) -> tuple[dict[str, dict[str, str]], str]:
    """Keys for owner olivia and analyst ann (as headers), and olivia's credit dataset granted
    to ann."""
    keys = {}
    for name, role in (("olivia", "owner"), ("ann", "analyst")):
        response = client.post("/v1/keys", json={"name": name, "role": role}, headers=bearer(admin))
        keys[name] = bearer(response.json()["key"])
    dataset_id = client.post("/v1/datasets", json=credit_dataset(), headers=keys["olivia"]).json()[
        "id"
    ]
    client.post(
        f"/v1/datasets/{dataset_id}/grants", json={"principal": "ann"}, headers=keys["olivia"]
    )
    return keys, dataset_id


def test_cancel_before_the_data_is_read_logs_cancelled_and_refunded(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'dpfit.db'}"
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    with in_process_app(url, tmp_path) as (client, admin):
        keys, dataset_id = _olivia_grants_ann(client, admin)
        engine = make_engine(url, must_exist=True, pre_ping=False)
        watcher = JobEventLog(sessionmaker(engine))
        watcher.prime()
        logging.getLogger("dpfit.jobs").addHandler(handler)
        try:
            job = client.post("/v1/jobs", json=logistic_job(dataset_id), headers=keys["ann"])
            job_id = job.json()["id"]
            watcher.poll()
            cancelled = client.post(f"/v1/jobs/{job_id}/cancel", headers=keys["ann"])
            assert cancelled.json()["refunded"] is True
            watcher.poll()
            watcher.poll()  # nothing new: nothing logged twice
        finally:
            logging.getLogger("dpfit.jobs").removeHandler(handler)
            engine.dispose()
    mine = [r for r in records if getattr(r, "fields", {}).get("job_id") == job_id]
    # The app's own watcher thread logs too; take this watcher's lines (the first of each).
    seen: list[str] = []
    for record in mine:
        event = record.fields["event"]  # type: ignore[attr-defined]
        if event not in seen:
            seen.append(event)
    assert seen == ["job.accepted", "job.cancelled", "job.refunded"]
    refund = next(r for r in mine if r.fields["event"] == "job.refunded")  # type: ignore[attr-defined]
    assert refund.fields["dataset_id"] == dataset_id  # type: ignore[attr-defined]
    assert refund.fields["epsilon"] > 0  # type: ignore[attr-defined]


def test_a_running_job_cancelled_ends_at_its_cancel(tmp_path: Path) -> None:
    """A running job's cancel left ``finished_at`` empty for good (the worker's end finds the
    row cancelled and writes nothing): its ``job.cancelled`` line said ``"at": null``."""
    url = f"sqlite:///{tmp_path / 'dpfit.db'}"
    with in_process_app(url, tmp_path) as (client, admin):
        keys, dataset_id = _olivia_grants_ann(client, admin)
        job_id = client.post("/v1/jobs", json=logistic_job(dataset_id), headers=keys["ann"]).json()[
            "id"
        ]
        engine = make_engine(url, must_exist=True, pre_ping=False)
        try:
            with sessionmaker(engine).begin() as session:
                assert job_status.claim(session, job_id, 1) is not None  # a worker's claim
            assert client.post(f"/v1/jobs/{job_id}/cancel", headers=keys["ann"]).status_code == 200
            shown = client.get(f"/v1/jobs/{job_id}", headers=keys["ann"]).json()
        finally:
            engine.dispose()
    assert shown["status"] == "cancelled" and shown["finished_at"] is not None
