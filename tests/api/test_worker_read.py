"""The worker's read path (issue 8): total after the claim, and "file changed" only when it did.

In-process app on SQLite (real routes, real database, the worker's own ``run_job``):

- the issue's second violation: a file with one undecodable byte in one cell of a used column
  and its neighbour without it both register and both jobs succeed with a model (before, every
  job on the first failed after reading the data — a failure bit released without noise — and
  the error wrongly said the file changed);
- a file changed after registration fails the job with the "changed" message.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.workers.runner import SOURCE_CHANGED, run_job
from tests.support.inprocess import bearer, in_process_app
from tests.support.walkthrough import EXAMPLES, credit_dataset, logistic_job


class Team:
    def __init__(self, client: TestClient, admin: str, url: str, root: Path) -> None:
        self.client, self.url, self.root = client, url, root
        self.owner = self._key(admin, "olga", "owner")
        self.analyst = self._key(admin, "ann", "analyst")

    def _key(self, admin: str, name: str, role: str) -> str:
        body = {"name": name, "role": role}
        response = self.client.post("/v1/keys", json=body, headers=bearer(admin))
        assert response.status_code == 201, response.text
        return str(response.json()["key"])

    def register(self, name: str, content: bytes) -> str:
        (self.root / name).write_bytes(content)
        body = credit_dataset(epsilon=20.0, uri=name)
        response = self.client.post("/v1/datasets", json=body, headers=bearer(self.owner))
        assert response.status_code == 201, response.text
        dataset_id = str(response.json()["id"])
        grant = {"principal": "ann"}
        headers = bearer(self.owner)
        self.client.post(f"/v1/datasets/{dataset_id}/grants", json=grant, headers=headers)
        return dataset_id

    def run(self, dataset_id: str) -> dict[str, Any]:
        job = logistic_job(dataset_id, epsilon=1.0)
        response = self.client.post("/v1/jobs", json=job, headers=bearer(self.analyst))
        assert response.status_code == 202, response.text
        job_id = response.json()["id"]
        run_job(job_id, 1, self.url)
        body: dict[str, Any] = self.client.get(
            f"/v1/jobs/{job_id}", headers=bearer(self.analyst)
        ).json()
        return body


@pytest.fixture
def team(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Team]:
    root = tmp_path / "data"
    root.mkdir()
    monkeypatch.setenv("DPFIT_DATA_ROOTS", str(root))  # the worker's roots, as under dpfit serve
    url = f"sqlite:///{tmp_path / 'dpfit.db'}"
    with in_process_app(url, root) as (client, admin):
        yield Team(client, admin, url, root)


def _credit(rows: int = 300) -> list[bytes]:
    return (EXAMPLES / "credit.csv").read_bytes().splitlines()[: rows + 1]


def test_undecodable_cell_and_its_neighbour_both_succeed(team: Team) -> None:
    lines = _credit()
    neighbour = list(lines)
    age, hours, education, sector, income = neighbour[17].split(b",")
    neighbour[17] = b",".join([age, hours, b"HS\xff\xfe", sector, income])
    plain = team.run(team.register("plain.csv", b"\n".join(lines) + b"\n"))
    broken = team.run(team.register("broken.csv", b"\n".join(neighbour) + b"\n"))
    for job in (plain, broken):
        assert job["status"] == "succeeded", job.get("error")
        assert job["model_id"]


def test_changed_file_fails_with_the_changed_message(team: Team) -> None:
    dataset_id = team.register("data.csv", b"\n".join(_credit()) + b"\n")
    (team.root / "data.csv").write_bytes(b"\n".join(_credit(299)) + b"\n")
    job = team.run(dataset_id)
    assert job["status"] == "failed"
    assert job["error"] == SOURCE_CHANGED

