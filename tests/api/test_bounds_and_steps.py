"""Numbers in a spec that would make the arithmetic non-finite are refused up front (422 on the
field at fault), never a 500, never a job that runs and releases NaN or fails for certain:

- a numeric feature bound that is not a finite number (``1e400`` parses to inf, ``Infinity``,
  ``NaN``), or bounds whose span ``max − min`` overflows;
- a step size beyond 2/β_F (gradient descent diverges), or a model constant so large that the
  plan's sensitivity / noise scale is not finite — at estimate and at submission, before any
  charge.

Through the in-process app (tests/support/inprocess.py) on SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import pytest

from tests.support.inprocess import InProcessServer
from tests.support.walkthrough import credit_dataset


def problem(response: httpx.Response, status: int, field: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body = response.json()
    if field is not None:
        assert body["field"] == field, body
    return body


def post_raw(client: Any, path: str, text: str) -> httpx.Response:
    """POST a JSON text as is (Python's json.dumps cannot write 1e400)."""
    return client.post(path, content=text, headers={"Content-Type": "application/json"})


OWNER, ANALYST = "bounds-owner", "bounds-analyst"  # one key each for the session's app


@pytest.fixture
def owner(app_server: InProcessServer) -> Any:
    return app_server.client(app_server.key(OWNER, "owner"))


# --- numeric feature bounds ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bound", "literal"),
    [
        ("max", "1e400"),
        ("max", "Infinity"),
        ("min", "-1e400"),
        ("min", "-Infinity"),
        ("max", "NaN"),
        ("min", "NaN"),
    ],
)
def test_a_non_finite_bound_is_a_422_naming_it(owner: Any, bound: str, literal: str) -> None:
    body = credit_dataset()
    placeholder = "__BOUND__"
    body["features"][1][bound] = placeholder
    text = json.dumps(body).replace(f'"{placeholder}"', literal)
    answer = problem(post_raw(owner, "/v1/datasets", text), 422, f"features.1.{bound}")
    assert "finite number" in answer["detail"]
    assert "greater than" not in answer["detail"]  # NaN no longer reads as an ordering problem


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-1e400"])
@pytest.mark.parametrize(
    ("where", "field"),
    [
        (("features", 2, "categories", 1), "features.2.categories.1"),
        (("label", "positive"), "label.positive"),
        (("label", "negative"), "label.negative"),
    ],
)
def test_a_non_finite_category_or_label_value_is_a_422_naming_it(
    owner: Any, literal: str, where: tuple[Any, ...], field: str
) -> None:
    """An independent tester's NaN category was a 500 and a NaN positive label was stored as
    null (its dataset's label then invalid)."""
    body = credit_dataset()
    placeholder = "__VALUE__"
    target: Any = body
    for key in where[:-1]:
        target = target[key]
    target[where[-1]] = placeholder
    text = json.dumps(body).replace(f'"{placeholder}"', literal)
    answer = problem(post_raw(owner, "/v1/datasets", text), 422, field)
    assert "finite" in answer["detail"]


def test_a_non_finite_class_is_a_422_naming_it(owner: Any) -> None:
    body = credit_dataset()
    body["label"] = {"column": "income", "type": "categorical", "classes": [">50K", "__V__"]}
    text = json.dumps(body).replace('"__V__"', "NaN")
    problem(post_raw(owner, "/v1/datasets", text), 422, "label.classes.1")


@pytest.mark.parametrize(
    ("low", "high"),
    [(-1e308, 1e308), (-1e308, 8e307), (-1.7976931348623157e308, 1.7976931348623157e308)],
)
def test_bounds_whose_span_overflows_are_refused(owner: Any, low: float, high: float) -> None:
    body = credit_dataset()
    body["features"][0].update(min=low, max=high)
    answer = problem(owner.post("/v1/datasets", json=body), 422, "features.0.max")
    assert "max − min" in answer["detail"]
    assert "1e+308" not in answer["detail"] and "1e308" not in answer["detail"]


def test_wide_but_finite_spans_are_accepted(owner: Any) -> None:
    body = credit_dataset()
    body["features"][0].update(min=-8e307, max=8e307)  # span 1.6e308: finite
    created = owner.post("/v1/datasets", json=body)
    assert created.status_code == 201, created.text


# --- step sizes and plans that cannot stay finite -------------------------------------------


@pytest.fixture
def granted(app_server: InProcessServer, owner: Any) -> dict[str, Any]:
    """A fresh registered credit dataset granted to the analyst."""
    analyst = app_server.client(app_server.key(ANALYST, "analyst"))
    created = owner.post("/v1/datasets", json=credit_dataset(epsilon=50.0))
    assert created.status_code == 201, created.text
    dataset_id = created.json()["id"]
    grant = owner.post(f"/v1/datasets/{dataset_id}/grants", json={"principal": ANALYST})
    assert grant.status_code == 201, grant.text
    return {"analyst": analyst, "dataset_id": dataset_id}


def refused_before_any_charge(granted: dict[str, Any], job: dict[str, Any], field: str) -> str:
    analyst, dataset_id = granted["analyst"], granted["dataset_id"]
    estimate = problem(analyst.post("/v1/jobs/estimate", json=job), 422, field)
    submitted = problem(
        analyst.post("/v1/jobs", json=job, headers={"Idempotency-Key": uuid.uuid4().hex}),
        422,
        field,
    )
    assert estimate["detail"] == submitted["detail"]
    budget = analyst.get(f"/v1/datasets/{dataset_id}/budget")
    assert budget.status_code == 200 and budget.json()["jobs_charged"] == 0
    return str(submitted["detail"])


def test_a_divergent_step_size_is_refused_before_any_charge(granted: dict[str, Any]) -> None:
    job = {
        "dataset_id": granted["dataset_id"],
        "model": {"type": "logistic_regression"},
        "optimizer": {"name": "dp_gd", "params": {"step_size": 1e308}},
        "privacy": {"epsilon": 0.1, "delta": 1e-5},
    }
    detail = refused_before_any_charge(granted, job, "optimizer.params.step_size")
    assert "2/(β + μ)" in detail


def test_a_model_constant_that_overflows_the_plan_is_refused_before_any_charge(
    app_server: InProcessServer, owner: Any
) -> None:
    analyst = app_server.client(app_server.key(ANALYST, "analyst"))
    body = credit_dataset(epsilon=50.0)
    body["label"] = {"column": "hours_per_week", "type": "numeric"}
    body["features"] = [f for f in body["features"] if f["name"] != "hours_per_week"]
    created = owner.post("/v1/datasets", json=body)
    assert created.status_code == 201, created.text
    dataset_id = created.json()["id"]
    owner.post(f"/v1/datasets/{dataset_id}/grants", json={"principal": ANALYST})
    granted = {"analyst": analyst, "dataset_id": dataset_id}
    model = {"type": "huber_regression", "label_bound": 350, "huber_delta": 1e308}
    for optimizer in (None, "dp_gd", "noisy_sgd_bst14", "output_perturbation_gd", "rrpsgd"):
        job: dict[str, Any] = {
            "dataset_id": dataset_id,
            "model": model,
            "privacy": {"epsilon": 0.1, "delta": 1e-5},
        }
        if optimizer is not None:
            job["optimizer"] = {"name": optimizer, "params": {}}
        # auto included: the model is at fault whatever the optimizer, and its field is named
        detail = refused_before_any_charge(granted, job, "model.huber_delta")
        assert "Lipschitz constant" in detail
