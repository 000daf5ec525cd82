"""Input hygiene (issue 9): strict JSON types, no control characters anywhere, the
Idempotency-Key race, lower bounds on ε/δ, the body limit and request ids.

Here what needs a real server: live servers on SQLite and PostgreSQL (tests/support/fixtures.py),
plain httpx — paths as uvicorn parses them, the concurrent Idempotency-Key race, the smallest jobs
running, the body limit, request ids and the server log. The refusals of bodies, queries and
headers are in tests/api/test_input_hygiene.py (in-process app). Every refusal is a problem+json,
never a 5xx, and costs nothing.
"""

from __future__ import annotations

import threading
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from service.schemas import MIN_EPSILON, MIN_POSITIVE_DELTA
from tests.support.live import LiveServer
from tests.support.walkthrough import credit_dataset, logistic_job


def problem(response: httpx.Response, status: int, field: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body = response.json()
    assert body["status"] == status and body["title"] and body["detail"]
    if field is not None:
        assert body["field"] == field, body
    return body


@pytest.fixture
def actors(server: LiveServer) -> dict[str, Any]:
    tag = uuid.uuid4().hex[:8]
    owner = server.client(server.key(f"owner-{tag}", "owner"))
    analyst = server.client(server.key(f"analyst-{tag}", "analyst"))
    datasets = []
    for _ in range(2):
        created = owner.post("/v1/datasets", json=credit_dataset(epsilon=50.0))
        assert created.status_code == 201, created.text
        dataset_id = created.json()["id"]
        granted = owner.post(
            f"/v1/datasets/{dataset_id}/grants", json={"principal": f"analyst-{tag}"}
        )
        assert granted.status_code == 201, granted.text
        datasets.append(dataset_id)
    return {"owner": owner, "analyst": analyst, "datasets": datasets, "tag": tag}


def charged(actors: dict[str, Any], dataset_id: str) -> int:
    budget = actors["analyst"].get(f"/v1/datasets/{dataset_id}/budget")
    assert budget.status_code == 200, budget.text
    return int(budget.json()["jobs_charged"])


# --- control characters in paths --------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "/v1/jobs/job%00x",
        "/v1/jobs/job%00x/cancel",
        "/v1/models/mdl%00x",
        "/v1/datasets/ds%00x",
        "/v1/datasets/ds%00x/budget",
        "/v1/datasets/ds%01x/ledger",
        "/v1/jobs/job%ED%A0%80",  # a surrogate's UTF-8 bytes: decoded as U+FFFD, a plain 404
    ],
)
def test_control_characters_in_paths_are_404(actors: dict[str, Any], path: str) -> None:
    for client in (actors["analyst"], actors["owner"]):
        method = "POST" if path.endswith("/cancel") else "GET"
        response = client.request(method, path)
        assert response.status_code in (403, 404), response.text
        problem(response, response.status_code)


# --- the Idempotency-Key race ------------------------------------------------------------------


def test_same_idempotency_key_on_two_datasets_concurrently(
    actors: dict[str, Any], server: LiveServer
) -> None:
    """The same key sent at once with two different requests (two datasets): one is admitted,
    the other refused with 422 naming the header — never a 500, never two charges."""
    analyst_key = server.keys[f"analyst-{actors['tag']}"]
    rounds, statuses = 12, []
    lock = threading.Lock()
    for _ in range(rounds):
        key = uuid.uuid4().hex
        barrier = threading.Barrier(4)

        def post(dataset_id: str, key: str = key, barrier: threading.Barrier = barrier) -> None:
            body = logistic_job(dataset_id, epsilon=0.01, iterations=1)
            with server.client(analyst_key) as http:
                barrier.wait()
                response = http.post("/v1/jobs", json=body, headers={"Idempotency-Key": key})
            with lock:
                statuses.append((key, response.status_code, response.headers.get("content-type")))

        threads = [
            threading.Thread(target=post, args=(actors["datasets"][i % 2],)) for i in range(4)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert all(code in (202, 409, 422) for _, code, _ in statuses), statuses
    for key in {k for k, _, _ in statuses}:
        codes = [code for k, code, _ in statuses if k == key]
        # Both posts on the winning dataset answer 202 (the second one replays), the other
        # dataset's posts are refused.
        assert 1 <= codes.count(202) <= 2 and codes.count(202) + codes.count(422) == 4, codes
    total = sum(charged(actors, d) for d in actors["datasets"])
    assert total == rounds  # one charge per key


# --- lower bounds -----------------------------------------------------------------------------


def test_the_smallest_accepted_jobs_are_admitted_and_run(actors: dict[str, Any]) -> None:
    """At the bounds, a job plans, is charged and finishes (no 202 followed by a failure)."""
    analyst = actors["analyst"]
    for delta in (0.0, MIN_POSITIVE_DELTA):
        body = logistic_job(actors["datasets"][1], epsilon=MIN_EPSILON, delta=delta)
        accepted = analyst.post("/v1/jobs", json=body)
        assert accepted.status_code == 202, accepted.text
        job_id = accepted.json()["id"]
        for _ in range(600):
            state = analyst.get(f"/v1/jobs/{job_id}").json()
            if state["status"] in ("succeeded", "failed", "cancelled"):
                break
            threading.Event().wait(0.1)
        assert state["status"] == "succeeded", state


# --- body limit and request ids ----------------------------------------------------------------


def test_bodies_over_the_limit_are_413_before_parsing(actors: dict[str, Any]) -> None:
    analyst = actors["analyst"]
    limit = 10 * 1024 * 1024
    big = b'{"dataset_id": "' + b"x" * (limit + 1) + b'"}'
    declared = analyst.post("/v1/jobs", content=big, headers={"content-type": "application/json"})
    got = problem(declared, 413)
    assert str(limit) in got["detail"]

    def chunks() -> Any:  # no Content-Length: counted as it streams
        yield b'{"dataset_id": "'
        for _ in range(11):
            yield b"x" * (1024 * 1024)
        yield b'"}'

    streamed = analyst.post(
        "/v1/jobs", content=chunks(), headers={"content-type": "application/json"}
    )
    again = problem(streamed, 413)
    # One refusal, one answer: the same title and detail however the body came.
    assert again["title"] == got["title"] == "Content too large"
    assert again["detail"] == got["detail"]
    # A body just under the limit is parsed as usual (here: refused for its content).
    small = b'{"dataset_id": "' + b"x" * 1000 + b'"}'
    headers = {"content-type": "application/json"}
    problem(analyst.post("/v1/jobs", content=small, headers=headers), 422)
    assert analyst.get("/healthz").status_code == 200


def test_every_answer_carries_a_request_id(actors: dict[str, Any], server: LiveServer) -> None:
    analyst = actors["analyst"]
    ids = {analyst.get("/v1/jobs").headers["x-request-id"] for _ in range(3)}
    assert len(ids) == 3 and all(len(i) >= 8 for i in ids)
    assert server.client().get("/v1/jobs").headers["x-request-id"]  # 401s too
    echoed = analyst.get("/v1/jobs", headers={"X-Request-ID": "trace-123.abc"})
    assert echoed.headers["x-request-id"] == "trace-123.abc"
    replaced = analyst.get("/v1/jobs", headers={"X-Request-ID": "no spaces or <tags>"})
    assert replaced.headers["x-request-id"] != "no spaces or <tags>"


def test_nothing_unsafe_reached_the_server_log(server: LiveServer) -> None:
    """After the tests above, the server's log holds no traceback (failures are one line)."""
    log = b"".join(p.read_bytes() for p in Path(server.home).glob("server-*.log"))
    assert b"Traceback" not in log
