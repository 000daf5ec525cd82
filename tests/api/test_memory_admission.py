"""A job that cannot fit the workers' memory is refused before any charge (issue 22 item 3,
issue 23 item 6), and neighbouring datasets are refused or admitted alike.

In-process app on SQLite (real routes and database; the worker's own ``run_job`` runs the jobs
it admits). ``DPFIT_WORKER_MEMORY`` is unset, as by default: the workers' limit is then the
machine's share (``partitions.default_worker_memory``) — before, nothing was checked and every
job was admitted. The machine's memory is set small here so the credit job cannot fit.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.data import partitions
from service.workers.runner import run_job
from tests.support.inprocess import bearer, in_process_app
from tests.support.walkthrough import EXAMPLES, credit_dataset, logistic_job

MIB = 1 << 20


@pytest.fixture
def app(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[TestClient, str, str, Path]]:
    url = f"sqlite:///{tmp_path / 'dpfit.db'}"
    root = tmp_path / "data"
    root.mkdir()
    monkeypatch.setenv("DPFIT_DATA_ROOTS", str(root))  # the worker's roots, as under dpfit serve
    monkeypatch.delenv("DPFIT_WORKER_MEMORY", raising=False)
    # pricing in the request's thread: the tests patch this process's view of the machine
    with in_process_app(url, root, compute_processes=0) as (client, admin):
        yield client, admin, url, root


def _keys(client: TestClient, admin: str) -> tuple[str, str]:
    keys = []
    for name, role in (("olga", "owner"), ("ann", "analyst")):
        made = client.post("/v1/keys", json={"name": name, "role": role}, headers=bearer(admin))
        assert made.status_code == 201, made.text
        keys.append(str(made.json()["key"]))
    return keys[0], keys[1]


def _register(client: TestClient, owner: str, root: Path, name: str, content: str) -> str:
    (root / name).write_text(content)
    made = client.post(
        "/v1/datasets", json=credit_dataset(epsilon=20.0, uri=name), headers=bearer(owner)
    )
    assert made.status_code == 201, made.text
    dataset_id = str(made.json()["id"])
    granted = client.post(
        f"/v1/datasets/{dataset_id}/grants", json={"principal": "ann"}, headers=bearer(owner)
    )
    assert granted.status_code in (200, 201), granted.text
    return dataset_id


def _neighbours() -> tuple[str, str]:
    """The example credit CSV with an undeclared column, and its neighbour whose one row holds
    a 1 MB cell in that column (the issue's attack 3, scaled down)."""
    lines = (EXAMPLES / "credit.csv").read_text().splitlines()
    header, rows = lines[0] + ",note", [line + ",n100" for line in lines[1:]]
    big = list(rows)
    big[3] = lines[4] + "," + "x" * 1_000_000
    return "\n".join([header, *rows]) + "\n", "\n".join([header, *big]) + "\n"


def _budget(client: TestClient, analyst: str, dataset_id: str) -> dict[str, Any]:
    response = client.get(f"/v1/datasets/{dataset_id}/budget", headers=bearer(analyst))
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_a_job_that_cannot_fit_is_refused_before_any_charge(
    app: tuple[TestClient, str, str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    client, admin, _, root = app
    owner, analyst = _keys(client, admin)
    plain, with_big_cell = _neighbours()
    ids = [
        _register(client, owner, root, "plain.csv", plain),
        _register(client, owner, root, "big.csv", with_big_cell),
    ]
    # one worker with 0.75 × 400 MiB = 300 MiB: less than the worker process alone needs
    monkeypatch.setattr(partitions, "machine_memory", lambda: 400 * MIB, raising=False)
    answers = []
    for dataset_id in ids:
        job = logistic_job(dataset_id, epsilon=1.0)
        for path in ("/v1/jobs/estimate", "/v1/jobs"):
            response = client.post(path, json=job, headers=bearer(analyst))
            assert response.status_code == 422, response.text
            problem = response.json()
            assert problem["field"] == "dataset_id", problem
            assert "300 MiB" in problem["detail"] and "nothing was charged" in problem["detail"]
            answers.append(problem["detail"])
        budget = _budget(client, analyst, dataset_id)
        assert budget["jobs_charged"] == 0 and budget["epsilon_spent"] == 0.0
        listed = client.get("/v1/jobs", headers=bearer(analyst))
        assert listed.status_code == 200 and listed.json() == [], listed.text
    assert len(set(answers)) == 1  # neighbours: the same refusal, word for word


def test_neighbours_that_fit_are_admitted_and_run_alike(
    app: tuple[TestClient, str, str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    client, admin, url, root = app
    owner, analyst = _keys(client, admin)
    plain, with_big_cell = _neighbours()
    ids = [
        _register(client, owner, root, "plain.csv", plain),
        _register(client, owner, root, "big.csv", with_big_cell),
    ]
    monkeypatch.setattr(partitions, "machine_memory", lambda: 2048 * MIB, raising=False)
    statuses = []
    for dataset_id in ids:
        submitted = client.post(
            "/v1/jobs", json=logistic_job(dataset_id, epsilon=1.0), headers=bearer(analyst)
        )
        assert submitted.status_code == 202, submitted.text
        job_id = submitted.json()["id"]
        run_job(job_id, 1, url)
        body = client.get(f"/v1/jobs/{job_id}", headers=bearer(analyst)).json()
        statuses.append((body["status"], body.get("error")))
    assert statuses == [("succeeded", None), ("succeeded", None)]
