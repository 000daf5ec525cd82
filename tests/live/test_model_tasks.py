"""Regression and classification models through the live service: label types must match the
model's task, and a regression model predicts numbers (no probabilities)."""

from __future__ import annotations

import time
import uuid
from typing import Any

from tests.support.live import LiveServer
from tests.support.walkthrough import credit_dataset, logistic_job


def hours_dataset() -> dict[str, Any]:
    body = credit_dataset()
    body["label"] = {"column": "hours_per_week", "type": "numeric"}
    body["features"] = [f for f in body["features"] if f["name"] != "hours_per_week"]
    return body


def test_label_type_must_match_model_task(server: LiveServer) -> None:
    tag = uuid.uuid4().hex[:6]
    owner = server.client(server.key(f"owner-{tag}", "owner"))
    analyst = server.client(server.key(f"analyst-{tag}", "analyst"))
    numeric = owner.post("/v1/datasets", json=hours_dataset()).json()["id"]
    binary = owner.post("/v1/datasets", json=credit_dataset()).json()["id"]
    for dataset_id in (numeric, binary):
        owner.post(f"/v1/datasets/{dataset_id}/grants", json={"principal": f"analyst-{tag}"})

    wrong = analyst.post("/v1/jobs", json=logistic_job(numeric))
    assert wrong.status_code == 422 and wrong.json()["field"] == "model"
    regression = logistic_job(binary)
    regression["model"] = {"type": "huber_regression", "l2": 0.05, "label_bound": 99}
    wrong = analyst.post("/v1/jobs", json=regression)
    assert wrong.status_code == 422 and wrong.json()["field"] == "model"

    regression["dataset_id"] = numeric
    job = analyst.post("/v1/jobs", json=regression)
    assert job.status_code == 202, job.text
    job_id = job.json()["id"]
    deadline = time.monotonic() + 120
    while (state := analyst.get(f"/v1/jobs/{job_id}").json())["status"] in ("queued", "running"):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert state["status"] == "succeeded", state["error"]
    rows = [{"age": 40, "education": "PhD", "sector": "private"}]
    predicted = analyst.post(f"/v1/models/{state['model_id']}/predict", json={"rows": rows}).json()
    assert predicted["probabilities"] is None
    assert isinstance(predicted["predictions"][0], float)


def test_multiclass_one_vs_rest_through_the_api(server: LiveServer) -> None:
    tag = uuid.uuid4().hex[:6]
    owner = server.client(server.key(f"owner-{tag}", "owner"))
    analyst = server.client(server.key(f"analyst-{tag}", "analyst"))
    body = credit_dataset()
    classes = ["HS", "Bachelors", "Masters", "PhD"]
    body["label"] = {"column": "education", "type": "categorical", "classes": classes}
    body["features"] = [f for f in body["features"] if f["name"] != "education"]
    body["features"].append(
        {"name": "income", "type": "categorical", "categories": [">50K", "<=50K"]}
    )
    dataset_id = owner.post("/v1/datasets", json=body).json()["id"]
    owner.post(f"/v1/datasets/{dataset_id}/grants", json={"principal": f"analyst-{tag}"})

    regression = logistic_job(dataset_id)
    regression["model"] = {"type": "huber_regression", "l2": 0.05, "label_bound": 1}
    assert analyst.post("/v1/jobs", json=regression).json()["field"] == "model"

    job = analyst.post("/v1/jobs", json=logistic_job(dataset_id, epsilon=1.0, delta=1e-6))
    assert job.status_code == 202, job.text
    job_id = job.json()["id"]
    deadline = time.monotonic() + 120
    while (state := analyst.get(f"/v1/jobs/{job_id}").json())["status"] in ("queued", "running"):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert state["status"] == "succeeded", state["error"]
    assert state["progress"]["total"] % 4 == 0
    model = analyst.get(f"/v1/models/{state['model_id']}").json()
    assert model["classes"] == classes
    assert len(model["coefficients"]) == 4 and len(model["intercept"]) == 4
    assert all(len(row) == len(model["feature_names"]) for row in model["coefficients"])
    rows = [{"age": 60, "hours_per_week": 70, "sector": "private", "income": ">50K"}]
    predicted = analyst.post(f"/v1/models/{state['model_id']}/predict", json={"rows": rows})
    assert predicted.status_code == 200, predicted.text
    assert predicted.json()["predictions"][0] in classes
    assert 0.0 < predicted.json()["probabilities"][0] <= 1.0
