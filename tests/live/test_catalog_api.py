"""Every optimizer of the catalog runs through the API on the bundled example (SQLite server):
accepted with its theory defaults, fitted by a worker, released with its accounting."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from service.optimizers.kits.registry import catalog, optimizer_names
from tests.support.live import LiveServer
from tests.support.walkthrough import credit_dataset, logistic_job

MODELS = [
    {"type": "logistic_regression", "l2": 0.01, "fit_intercept": True},
    {"type": "sigmoid_classifier", "l2": 0.01, "fit_intercept": True},
]


@pytest.fixture(scope="module")
def crew(sqlite_server: LiveServer) -> dict[str, Any]:
    tag = uuid.uuid4().hex[:6]
    owner = sqlite_server.client(sqlite_server.key(f"owner-{tag}", "owner"))
    analyst = sqlite_server.client(sqlite_server.key(f"analyst-{tag}", "analyst"))
    dataset_id = owner.post("/v1/datasets", json=credit_dataset(epsilon=100.0)).json()["id"]
    owner.post(f"/v1/datasets/{dataset_id}/grants", json={"principal": f"analyst-{tag}"})
    return {"analyst": analyst, "dataset_id": dataset_id}


def test_catalog_entries_are_complete() -> None:
    for entry in catalog():
        for key in ("summary", "assumptions", "guarantee", "reference"):
            assert len(entry[key]) > 10, (entry["name"], key)
        assert entry["params"]["type"] == "object"


@pytest.mark.parametrize("name", optimizer_names())
def test_optimizer_runs_through_the_api(name: str, crew: dict[str, Any]) -> None:
    analyst = crew["analyst"]
    response = None
    for model in MODELS:
        for delta in (1e-6, 0.0):
            body = logistic_job(crew["dataset_id"], epsilon=1.0, delta=delta)
            body["model"] = model
            body["optimizer"]["name"] = name
            response = analyst.post("/v1/jobs", json=body)
            if response.status_code == 202:
                break
            assert response.status_code == 422, response.text
            assert response.json()["field"] in ("model", "privacy.delta"), response.text
        if response.status_code == 202:
            break
    assert response is not None and response.status_code == 202, response.text
    job = response.json()
    assert job["plan"]["sensitivity"] > 0 and job["plan"]["noise_scale"] > 0
    deadline = time.monotonic() + 180
    while (state := analyst.get(f"/v1/jobs/{job['id']}").json())["status"] in ("queued", "running"):
        assert time.monotonic() < deadline, f"{name} did not finish"
        time.sleep(0.1)
    assert state["status"] == "succeeded", state["error"]
    model = analyst.get(f"/v1/models/{state['model_id']}").json()
    assert model["privacy"]["mechanism"] == job["plan"]["mechanism"]
    assert len(model["coefficients"]) == 9
