"""Job lifecycle against live servers (SQLite and PostgreSQL): cancellation and refunds, and
40 concurrent HTTP clients against a budget that admits exactly k of their jobs."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import httpx
import pytest

from service.ledger import filter as privacy_filter
from service.ledger.accounting import rdp_curve
from service.models.registry import parse_model_spec
from service.optimizers.kits.base import PrivacyTarget
from service.optimizers.kits.planning import plan_job
from service.privacy.gdp import event_mu
from tests.support.live import LiveServer
from tests.support.walkthrough import EXAMPLES, credit_dataset, logistic_job, write_large_credit

LARGE_ROWS = 200_000


def wait_status(
    client: httpx.Client, job_id: str, statuses: set[str], timeout: float = 120
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = client.get(f"/v1/jobs/{job_id}").json()
        if job["status"] in statuses:
            return job
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} never reached {statuses}")


@pytest.fixture
def team(server: LiveServer) -> dict[str, Any]:
    tag = uuid.uuid4().hex[:6]
    owner = server.client(server.key(f"owner-{tag}", "owner"))
    analyst = server.client(server.key(f"analyst-{tag}", "analyst"))
    return {"owner": owner, "analyst": analyst, "analyst_name": f"analyst-{tag}"}


def register(team: dict[str, Any], body: dict[str, Any]) -> str:
    response = team["owner"].post("/v1/datasets", json=body)
    assert response.status_code == 201, response.text
    dataset_id = response.json()["id"]
    grant = team["owner"].post(
        f"/v1/datasets/{dataset_id}/grants", json={"principal": team["analyst_name"]}
    )
    assert grant.status_code == 201
    return dataset_id


def test_cancel_running_keeps_charge_and_cancel_queued_refunds(
    server: LiveServer, team: dict[str, Any]
) -> None:
    """One worker: a long job A runs while B waits in the queue. Cancelling B refunds it (no
    worker read the data); cancelling A mid-run does not, and A's model is never released."""
    name = write_large_credit(server.home, LARGE_ROWS)
    dataset_id = register(team, credit_dataset(epsilon=5.0, uri=name))
    analyst = team["analyst"]
    long_job = logistic_job(dataset_id, epsilon=0.5, iterations=20_000, max_iterations=20_000)
    a = analyst.post("/v1/jobs", json=long_job).json()
    b = analyst.post("/v1/jobs", json=long_job).json()
    wait_status(analyst, a["id"], {"running"})
    assert analyst.get(f"/v1/jobs/{b['id']}").json()["status"] == "queued"

    cancelled_b = analyst.post(f"/v1/jobs/{b['id']}/cancel").json()
    assert cancelled_b["status"] == "cancelled" and cancelled_b["refunded"] is True
    cancelled_a = analyst.post(f"/v1/jobs/{a['id']}/cancel").json()
    assert cancelled_a["status"] == "cancelled" and cancelled_a["refunded"] is False

    # The worker notices between steps and stops; nothing is ever released for A or B.
    time.sleep(1.0)
    for job_id in (a["id"], b["id"]):
        job = analyst.get(f"/v1/jobs/{job_id}").json()
        assert job["status"] == "cancelled" and job["model_id"] is None
    assert analyst.post(f"/v1/jobs/{a['id']}/cancel").status_code == 409

    budget = analyst.get(f"/v1/datasets/{dataset_id}/budget").json()
    assert budget["jobs_charged"] == 1
    ledger = team["owner"].get(f"/v1/datasets/{dataset_id}/ledger").json()
    assert [(c["job_id"], c["kind"]) for c in ledger["charges"]] == [
        (a["id"], "charge"),
        (b["id"], "charge"),
        (b["id"], "refund"),
    ]
    assert ledger["consistent"]


def test_changed_file_fails_the_job_with_a_refund(server: LiveServer, team: dict[str, Any]) -> None:
    source = server.home / f"changing-{uuid.uuid4().hex[:6]}.csv"
    source.write_text((EXAMPLES / "credit.csv").read_text())
    dataset_id = register(team, credit_dataset(uri=source.name))
    with source.open("a") as handle:
        handle.write("40,40,HS,private,<=50K\n")
    job = team["analyst"].post("/v1/jobs", json=logistic_job(dataset_id)).json()
    done = wait_status(team["analyst"], job["id"], {"succeeded", "failed", "cancelled"})
    assert done["status"] == "failed" and "changed" in done["error"]
    assert done["refunded"] is True and done["model_id"] is None
    assert team["analyst"].get(f"/v1/datasets/{dataset_id}/budget").json()["jobs_charged"] == 0


def test_a_file_changed_after_a_job_read_it_fails_the_next_job_with_a_refund(
    server: LiveServer, team: dict[str, Any]
) -> None:
    """The worker keeps the encoded rows of the last source it read (service/workers/row_cache):
    a second job on the same bytes uses them, and a change to the file after the first job is
    still seen by the next one (its fingerprint check comes before any rows are used)."""
    source = server.home / f"kept-{uuid.uuid4().hex[:6]}.csv"
    extra = "".join(f"{30 + i % 40},{1 + uuid.uuid4().int % 98},HS,public,>50K\n" for i in range(3))
    source.write_text((EXAMPLES / "credit.csv").read_text() + extra)  # content of its own
    dataset_id = register(team, credit_dataset(uri=source.name))
    analyst = team["analyst"]
    for _ in range(2):
        job = analyst.post("/v1/jobs", json=logistic_job(dataset_id, epsilon=0.2)).json()
        done = wait_status(analyst, job["id"], {"succeeded", "failed", "cancelled"})
        assert done["status"] == "succeeded", done
    with source.open("a") as handle:
        handle.write("40,40,HS,private,<=50K\n")
    job = analyst.post("/v1/jobs", json=logistic_job(dataset_id, epsilon=0.2)).json()
    done = wait_status(analyst, job["id"], {"succeeded", "failed", "cancelled"})
    assert done["status"] == "failed" and "changed" in done["error"]
    assert done["refunded"] is True and done["model_id"] is None
    assert analyst.get(f"/v1/datasets/{dataset_id}/budget").json()["jobs_charged"] == 2


CLIENTS = 40


def test_forty_concurrent_clients_get_exactly_k_jobs(
    server: LiveServer, team: dict[str, Any]
) -> None:
    budget = privacy_filter.Budget(epsilon=1.0, delta=1e-5)
    job_body = logistic_job("", epsilon=0.25, delta=1e-6, iterations=5)
    dataset_id = register(team, credit_dataset(epsilon=budget.epsilon, delta=budget.delta))
    job_body["dataset_id"] = dataset_id

    # What the ledger must admit, computed sequentially from the same public plan.
    dataset = team["analyst"].get(f"/v1/datasets/{dataset_id}").json()
    planned = plan_job(
        parse_model_spec(job_body["model"]),
        "output_perturbation_gd",
        job_body["optimizer"]["params"],
        dataset["n_rows"],
        dataset["n_features"],
        PrivacyTarget(0.25, 1e-6),
    )
    cost = privacy_filter.Cost(
        rdp=tuple(rdp_curve(planned.plan.event)), mu=event_mu(planned.plan.event)
    )
    assert cost.mu is not None  # output perturbation: charged its exact μ
    spent, k = privacy_filter.Spent.nothing(), 0
    while privacy_filter.admit(budget, spent, cost).admitted:
        spent, k = spent.plus(cost), k + 1
    assert 1 < k < CLIENTS

    barrier = threading.Barrier(CLIENTS)
    codes: list[int] = []
    lock = threading.Lock()

    def client() -> None:
        with server.client(server.keys[team["analyst_name"]]) as http:
            barrier.wait()
            code = http.post("/v1/jobs", json=job_body).status_code
        with lock:
            codes.append(code)

    threads = [threading.Thread(target=client) for _ in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(codes) == [202] * k + [409] * (CLIENTS - k)

    ledger = team["owner"].get(f"/v1/datasets/{dataset_id}/ledger").json()
    assert len(ledger["charges"]) == k and ledger["consistent"]
    budget_now = team["analyst"].get(f"/v1/datasets/{dataset_id}/budget").json()
    assert budget_now["jobs_charged"] == k
    assert budget_now["epsilon_spent"] <= budget.epsilon
