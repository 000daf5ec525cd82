"""A closed data root is not "data changed" (issue 26, item 3), on SQLite and PostgreSQL.

Following the README's own-data line (``DPFIT_DATA_ROOTS=/path make serve``) dropped
``examples``: the walkthrough's dataset then estimated as admissible, every job was charged and
failed with "the dataset's data changed since it was registered (fingerprint mismatch)"
(refunded). Now a dataset whose source lies outside the roots open to its owner is refused at
estimate and at submission with 409 on ``dataset_id``, before anything is charged, and a worker
that meets a closed root (a job admitted while it was open) says so, refunded.

The in-process app's roots are swapped by replacing ``app.state.settings`` (the routes read it
per request), as an operator restarts ``dpfit serve`` with other roots; the worker's are its
environment, as under ``dpfit serve``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from service.workers.runner import SOURCE_CHANGED, SOURCE_NOT_OPEN, run_job
from tests.support.inprocess import InProcessServer, in_process_server
from tests.support.walkthrough import COPIES, EXAMPLES, credit_dataset, logistic_job


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def world(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[dict[str, Any]]:
    if request.param == "postgres":
        url = str(request.getfixturevalue("private_postgres_database"))
    else:
        url = f"sqlite:///{tmp_path / 'dpfit.db'}"
    root = tmp_path / "examples-like"
    root.mkdir()
    (root / "credit.csv").write_bytes((EXAMPLES / "credit.csv").read_bytes())
    monkeypatch.setenv("DPFIT_DATA_ROOTS", f"{root}:{COPIES}")  # the worker's, as the app's
    with in_process_server(url, root) as app:
        owner = app.client(app.key("olga", "owner"))
        analyst = app.client(app.key("ann", "analyst"))
        registered = owner.post("/v1/datasets", json=credit_dataset(uri="credit.csv"))
        assert registered.status_code == 201, registered.text
        dataset_id = registered.json()["id"]
        grant = owner.post(f"/v1/datasets/{dataset_id}/grants", json={"principal": "ann"})
        assert grant.status_code == 201, grant.text
        yield {
            "app": app,
            "url": url,
            "root": root,
            "owner": owner,
            "analyst": analyst,
            "admin": app.client(app.keys["admin"]),
            "dataset_id": dataset_id,
        }


def set_roots(app: InProcessServer, **changes: Any) -> None:
    state = app.app_client.app.state  # type: ignore[attr-defined]
    state.settings = replace(state.settings, **changes)


def not_open(response: Any) -> None:
    assert response.status_code == 409, response.text
    problem = response.json()
    assert problem["field"] == "dataset_id" and problem["title"] == "Source not open", problem
    assert (
        "outside the data roots" in problem["detail"] and "nothing was charged" in problem["detail"]
    )
    assert "changed" not in problem["detail"].replace("not said to have changed", "")


def test_a_dropped_root_is_refused_at_estimate_and_submission(world: dict[str, Any]) -> None:
    app, analyst, owner, dataset_id = (
        world["app"],
        world["analyst"],
        world["owner"],
        world["dataset_id"],
    )
    job = logistic_job(dataset_id)
    before = analyst.post("/v1/jobs/estimate", json=job)
    assert before.status_code == 200 and before.json()["admissible"] is True, before.text

    set_roots(app, data_roots=(COPIES,))  # DPFIT_DATA_ROOTS=/path: examples dropped
    not_open(analyst.post("/v1/jobs/estimate", json=job))
    not_open(analyst.post("/v1/jobs", json=job))
    not_open(owner.post("/v1/jobs", json=job))
    assert owner.get(f"/v1/datasets/{dataset_id}/ledger").json()["charges"] == []
    assert analyst.get(f"/v1/datasets/{dataset_id}/budget").json()["jobs_charged"] == 0

    set_roots(app, data_roots=(world["root"], COPIES))  # re-opened: admitted again
    assert analyst.post("/v1/jobs", json=job).status_code == 202


def test_an_evaluation_is_refused_the_same_way(world: dict[str, Any]) -> None:
    app, analyst, dataset_id = world["app"], world["analyst"], world["dataset_id"]
    submitted = analyst.post("/v1/jobs", json=logistic_job(dataset_id))
    assert submitted.status_code == 202, submitted.text
    assert run_job(submitted.json()["id"], 1, world["url"]) == "succeeded"
    model_id = analyst.get(f"/v1/jobs/{submitted.json()['id']}").json()["model_id"]
    evaluation = {"dataset_id": dataset_id, "privacy": {"epsilon": 0.5, "delta": 1e-6}}
    set_roots(app, data_roots=(COPIES,))
    not_open(analyst.post(f"/v1/models/{model_id}/evaluate/estimate", json=evaluation))
    not_open(analyst.post(f"/v1/models/{model_id}/evaluate", json=evaluation))


def test_a_root_scoped_to_others_is_closed_to_the_owner_not_to_admins(
    world: dict[str, Any],
) -> None:
    app, analyst, admin, root = world["app"], world["analyst"], world["admin"], world["root"]
    job = logistic_job(world["dataset_id"])
    set_roots(app, root_owners={str(root.resolve()): frozenset({"olga"})})  # hers: open
    assert analyst.post("/v1/jobs/estimate", json=job).status_code == 200
    set_roots(app, root_owners={str(root.resolve()): frozenset({"someone-else"})})
    not_open(analyst.post("/v1/jobs/estimate", json=job))
    # An admin's dataset in that root stays open: admins may use every root.
    (root / "admins.csv").write_bytes((EXAMPLES / "credit.csv").read_bytes() + b"\n")
    mine = admin.post("/v1/datasets", json=credit_dataset(uri="admins.csv"))
    assert mine.status_code == 201, mine.text
    estimate = admin.post("/v1/jobs/estimate", json=logistic_job(mine.json()["id"]))
    assert estimate.status_code == 200, estimate.text


def test_the_worker_says_the_root_is_closed_not_that_the_data_changed(
    world: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job admitted while the root was open, run after it closed: failed before reading,
    refunded, with the message that says what happened."""
    analyst = world["analyst"]
    submitted = analyst.post("/v1/jobs", json=logistic_job(world["dataset_id"]))
    assert submitted.status_code == 202, submitted.text
    monkeypatch.setenv("DPFIT_DATA_ROOTS", str(COPIES))
    assert run_job(submitted.json()["id"], 1, world["url"]) == "failed"
    job = analyst.get(f"/v1/jobs/{submitted.json()['id']}").json()
    assert job["error"] == SOURCE_NOT_OPEN != SOURCE_CHANGED
    assert job["refunded"] is True


def test_a_replay_of_an_admitted_job_is_answered_as_before(world: dict[str, Any]) -> None:
    """The check runs for new jobs only: a retried POST (same Idempotency-Key) of a job admitted
    while the root was open returns that job, charging nothing more."""
    app, analyst = world["app"], world["analyst"]
    job, headers = logistic_job(world["dataset_id"]), {"Idempotency-Key": "first-try"}
    first = analyst.post("/v1/jobs", json=job, headers=headers)
    assert first.status_code == 202, first.text
    set_roots(app, data_roots=(COPIES,))
    replay = analyst.post("/v1/jobs", json=job, headers=headers)
    assert replay.status_code == 202 and replay.json()["id"] == first.json()["id"], replay.text
    assert replay.headers["Idempotent-Replayed"] == "true"
    not_open(analyst.post("/v1/jobs", json=job, headers={"Idempotency-Key": "second"}))
    assert analyst.get(f"/v1/datasets/{world['dataset_id']}/budget").json()["jobs_charged"] == 1
