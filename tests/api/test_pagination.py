"""Pagination (issue 9): every list answers pages of `limit` items with an opaque cursor in
`X-Next-Cursor` / `Link`, filters jobs by status, and costs one query per page.

The in-process app on SQLite and PostgreSQL (jobs run by the worker's own ``run_job``), plus
one on a real SQLite file whose engine counts the SQL statements a list makes.
"""

from __future__ import annotations

import os
import re
import threading
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import event

from service.domain.job_events import JobEventThread
from service.workers.reconciler import Reconciler
from service.workers.runner import run_job
from tests.support.inprocess import InProcessServer, bearer, in_process_app
from tests.support.walkthrough import COPIES, EXAMPLES, credit_dataset, logistic_job

BACKGROUND_THREADS = {JobEventThread.THREAD_NAME, Reconciler.THREAD_NAME}


def problem(response: httpx.Response, status: int, field: str) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    assert response.json()["field"] == field, response.json()


def all_pages(client: httpx.Client, path: str, **params: Any) -> tuple[list[Any], int]:
    """Follow the `Link: rel="next"` headers; returns every item and the number of pages."""
    response = client.get(path, params=params)
    items, pages = [], 0
    while True:
        assert response.status_code == 200, response.text
        pages += 1
        items.extend(response.json())
        link = response.headers.get("link")
        if link is None:
            assert "x-next-cursor" not in response.headers
            return items, pages
        match = re.fullmatch(r'<(/v1/[^>]+)>; rel="next"', link)
        assert match, link
        assert f"cursor={response.headers['x-next-cursor']}" in match.group(1)
        response = client.get(match.group(1))


@pytest.fixture
def people(app_server: InProcessServer) -> dict[str, Any]:
    tag = uuid.uuid4().hex[:8]
    owner = app_server.client(app_server.key(f"pg-owner-{tag}", "owner"))
    analyst_name = f"pg-analyst-{tag}"
    analyst = app_server.client(app_server.key(analyst_name, "analyst"))
    return {
        "owner": owner,
        "analyst": analyst,
        "analyst_name": analyst_name,
        "database_url": app_server.database_url,
    }


def test_datasets_page_in_creation_order(people: dict[str, Any]) -> None:
    owner = people["owner"]
    created = []
    for _ in range(5):
        response = owner.post("/v1/datasets", json=credit_dataset())
        assert response.status_code == 201, response.text
        created.append(response.json()["id"])
    items, pages = all_pages(owner, "/v1/datasets", limit=2)
    assert [d["id"] for d in items] == created and pages == 3
    assert [d["id"] for d in owner.get("/v1/datasets").json()] == created  # default limit 100
    # A dataset registered while paging appears on a later page; none is skipped or repeated.
    first = owner.get("/v1/datasets", params={"limit": 3})
    late = owner.post("/v1/datasets", json=credit_dataset()).json()["id"]
    rest, _ = all_pages(owner, "/v1/datasets", limit=3, cursor=first.headers["x-next-cursor"])
    assert [d["id"] for d in first.json() + rest] == [*created, late]


def test_jobs_page_and_filter_by_status(
    people: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    owner, analyst = people["owner"], people["analyst"]
    dataset_id = owner.post("/v1/datasets", json=credit_dataset(epsilon=50.0)).json()["id"]
    owner.post(f"/v1/datasets/{dataset_id}/grants", json={"principal": people["analyst_name"]})
    submitted = []
    for _ in range(5):
        job = analyst.post("/v1/jobs", json=logistic_job(dataset_id, epsilon=0.05, iterations=1))
        assert job.status_code == 202, job.text
        submitted.append(job.json()["id"])
    items, pages = all_pages(analyst, "/v1/jobs", limit=2)
    assert [j["id"] for j in items] == submitted and pages == 3
    # The in-process app queues; each job runs as its worker would run it (a worker takes its
    # data roots from the environment, as under `dpfit serve`).
    monkeypatch.setenv("DPFIT_DATA_ROOTS", f"{EXAMPLES}{os.pathsep}{COPIES}")
    queued, _ = all_pages(analyst, "/v1/jobs", status="queued", limit=2)
    assert [j["id"] for j in queued] == submitted
    for job_id in submitted:
        assert run_job(job_id, 1, people["database_url"]) == "succeeded"
    succeeded, _ = all_pages(analyst, "/v1/jobs", status="succeeded", limit=4)
    assert [j["id"] for j in succeeded] == submitted
    assert all(j["status"] == "succeeded" for j in succeeded)
    assert analyst.get("/v1/jobs", params={"status": "queued"}).json() == []
    # The owner sees only their own jobs (none), not the analyst's.
    assert owner.get("/v1/jobs").json() == []


def test_keys_page(app_server: InProcessServer, people: dict[str, Any]) -> None:
    admin = app_server.client(app_server.key("admin", "admin"))
    everything = admin.get("/v1/keys", params={"limit": 1000}).json()
    items, pages = all_pages(admin, "/v1/keys", limit=1)
    assert items == everything and pages == len(everything) >= 3


def test_bad_page_parameters_are_422(people: dict[str, Any]) -> None:
    analyst = people["analyst"]
    for path in ("/v1/jobs", "/v1/datasets"):
        problem(analyst.get(path, params={"limit": 0}), 422, "query.limit")
        problem(analyst.get(path, params={"limit": 1001}), 422, "query.limit")
        problem(analyst.get(path, params={"limit": "ten"}), 422, "query.limit")
        for cursor in ("abc", "bm90IGpzb24", "WzEsMl0", "WyIyMDI2LTAxLTAxIiwgIngiXQ"):
            problem(analyst.get(path, params={"cursor": cursor}), 422, "query.cursor")
    problem(analyst.get("/v1/jobs", params={"status": "done"}), 422, "query.status")


def test_one_query_per_page_whatever_the_page_size(tmp_path: Path) -> None:
    """The statements GET /v1/jobs makes do not grow with the number of jobs listed (before:
    one refund lookup per job), and the refund flag stays right for every job."""
    url = f"sqlite:///{tmp_path / 'dpfit.db'}"
    with in_process_app(url, COPIES) as (client, admin_key):
        admin = bearer(admin_key)
        owner = bearer(
            client.post("/v1/keys", json={"name": "o", "role": "owner"}, headers=admin).json()[
                "key"
            ]
        )
        analyst = bearer(
            client.post("/v1/keys", json={"name": "a", "role": "analyst"}, headers=admin).json()[
                "key"
            ]
        )
        dataset_id = client.post(
            "/v1/datasets", json=credit_dataset(epsilon=50.0), headers=owner
        ).json()["id"]
        client.post(f"/v1/datasets/{dataset_id}/grants", json={"principal": "a"}, headers=owner)
        ids = []
        for _ in range(30):
            job = client.post(
                "/v1/jobs", json=logistic_job(dataset_id, epsilon=0.05), headers=analyst
            )
            assert job.status_code == 202, job.text
            ids.append(job.json()["id"])
        cancelled = set(ids[::3])
        for job_id in cancelled:  # queued, never read: cancelling refunds
            assert client.post(f"/v1/jobs/{job_id}/cancel", headers=analyst).status_code == 200

        statements: list[str] = []
        engine = client.app.state.engine

        def count(*args: Any) -> None:
            # The app's job-event thread polls the same engine every second (and the reconciler,
            # where one runs); their statements are not the request's.
            if threading.current_thread().name not in BACKGROUND_THREADS:
                statements.append(str(args[2]))

        event.listen(engine, "before_cursor_execute", count)
        try:
            one = client.get("/v1/jobs", params={"limit": 1}, headers=analyst)
            n_one = len(statements)
            statements.clear()
            every = client.get("/v1/jobs", params={"limit": 1000}, headers=analyst)
            n_every = len(statements)
        finally:
            event.remove(engine, "before_cursor_execute", count)
        assert len(one.json()) == 1 and len(every.json()) == 30
        assert n_every == n_one <= 4, statements
        assert {j["id"] for j in every.json() if j["refunded"]} == cancelled


def test_sqlite_reads_never_wait_for_the_write_lock(tmp_path: Path) -> None:
    """API read sessions begin deferred on SQLite: while a write transaction holds the lock
    (BEGIN IMMEDIATE, as an admission does), a list is still answered from the last commit."""
    from service.db.session import ApiSessions, make_engine

    url = f"sqlite:///{tmp_path / 'dpfit.db'}"
    with in_process_app(url, COPIES) as (client, admin_key):
        sessions = client.app.state.sessions
        assert isinstance(sessions, ApiSessions)
        other = ApiSessions(make_engine(url, must_exist=True))
        with other.begin() as writer:
            writer.execute(event_free_statement())  # takes the write lock now
            listed = client.get("/v1/keys", headers=bearer(admin_key))  # blocks if reads lock
            assert listed.status_code == 200 and len(listed.json()) == 1


def event_free_statement() -> Any:
    from sqlalchemy import text

    return text("UPDATE api_keys SET id = id WHERE 1 = 0")


def test_ledger_pages_keep_the_totals_on_every_page(tmp_path: Path) -> None:
    """GET /v1/datasets/{id}/ledger pages its charges and refunds in ledger order (`limit`,
    `cursor`, `X-Next-Cursor`, `Link`); every page carries the same cached and recomputed
    totals; a row written while paging comes on a later page; a page's statements do not grow
    with its size; a cursor of another list (or garbage) is 422 on `cursor`."""
    url = f"sqlite:///{tmp_path / 'dpfit.db'}"
    with in_process_app(url, COPIES) as (client, admin_key):
        admin = bearer(admin_key)
        keys = {
            name: bearer(
                client.post("/v1/keys", json={"name": name, "role": role}, headers=admin).json()[
                    "key"
                ]
            )
            for name, role in (("o", "owner"), ("a", "analyst"))
        }
        owner, analyst = keys["o"], keys["a"]
        dataset_id = client.post(
            "/v1/datasets", json=credit_dataset(epsilon=50.0), headers=owner
        ).json()["id"]
        client.post(f"/v1/datasets/{dataset_id}/grants", json={"principal": "a"}, headers=owner)
        path = f"/v1/datasets/{dataset_id}/ledger"
        ids = []
        for _ in range(6):
            job = client.post(
                "/v1/jobs", json=logistic_job(dataset_id, epsilon=0.05), headers=analyst
            )
            assert job.status_code == 202, job.text
            ids.append(job.json()["id"])
        for job_id in ids[::2]:  # three refunds: nine rows in all
            assert client.post(f"/v1/jobs/{job_id}/cancel", headers=analyst).status_code == 200

        whole = client.get(path, params={"limit": 1000}, headers=owner)
        assert whole.status_code == 200 and "x-next-cursor" not in whole.headers
        everything = whole.json()
        assert len(everything["charges"]) == 9
        assert [c["id"] for c in everything["charges"]] == sorted(
            c["id"] for c in everything["charges"]
        )
        assert len(client.get(path, headers=owner).json()["charges"]) == 9  # default limit 100
        totals = {k: v for k, v in everything.items() if k != "charges"}

        seen: list[dict[str, Any]] = []
        response = client.get(path, params={"limit": 2}, headers=owner)
        pages = 0
        while True:
            assert response.status_code == 200, response.text
            pages += 1
            body = response.json()
            assert {k: v for k, v in body.items() if k != "charges"} == totals
            seen += body["charges"]
            link = response.headers.get("link")
            if link is None:
                assert "x-next-cursor" not in response.headers
                break
            match = re.fullmatch(r'<(/v1/[^>]+)>; rel="next"', link)
            assert match and f"cursor={response.headers['x-next-cursor']}" in match.group(1)
            response = client.get(match.group(1), headers=owner)
        assert seen == everything["charges"] and pages == 5

        # A charge written while a client pages comes on a later page, nothing repeated.
        first = client.get(path, params={"limit": 4}, headers=owner)
        late = client.post("/v1/jobs", json=logistic_job(dataset_id, epsilon=0.05), headers=analyst)
        assert late.status_code == 202
        rest = client.get(
            path, params={"limit": 100, "cursor": first.headers["x-next-cursor"]}, headers=owner
        ).json()
        rows = first.json()["charges"] + rest["charges"]
        assert [c["id"] for c in rows] == [c["id"] for c in everything["charges"]] + [
            rows[-1]["id"]
        ]
        assert rows[-1]["job_id"] == late.json()["id"] and rest["consistent"] is True

        statements: list[str] = []
        engine = client.app.state.engine

        def count(*args: Any) -> None:
            # The app's job-event thread polls the same engine every second (and the reconciler,
            # where one runs); their statements are not the request's.
            if threading.current_thread().name not in BACKGROUND_THREADS:
                statements.append(str(args[2]))

        event.listen(engine, "before_cursor_execute", count)
        try:
            client.get(path, params={"limit": 1}, headers=owner)
            n_one = len(statements)
            statements.clear()
            client.get(path, params={"limit": 1000}, headers=owner)
            n_every = len(statements)
        finally:
            event.remove(engine, "before_cursor_execute", count)
        assert n_every == n_one, statements

        from datetime import UTC, datetime

        from service.pagination import encode_cursor

        another_list = encode_cursor(datetime.now(UTC), dataset_id)  # a dataset list's cursor
        for cursor in ("abc", "WzEsMl0", another_list):
            problem(client.get(path, params={"cursor": cursor}, headers=owner), 422, "query.cursor")
