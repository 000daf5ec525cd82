"""Private evaluation (issue 13): the mechanism's sensitivity and calibration, and the
evaluation job through the API (in-process app, real database, the worker's own ``run_job``)."""

from __future__ import annotations

import csv
import math
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from dp_accounting import dp_event
from fastapi.testclient import TestClient

from service.domain.evaluation import evaluate_rows, true_classes
from service.ledger.accounting import ORDERS, charge_curve
from service.privacy.evaluation import (
    EvaluationKind,
    accuracy_std,
    loss_clip_bound,
    metric_sums,
    noised_sums,
    plan_evaluation,
    unconstrained_metrics,
)
from service.privacy.gdp import gdp_delta
from service.workers.runner import run_job
from tests.support.inprocess import bearer, in_process_app
from tests.support.walkthrough import COPIES, credit_dataset, logistic_job

# --- the mechanism ------------------------------------------------------------------------------


def unit_rows(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    X = rng.standard_normal((n, d))
    return (
        X
        / np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
        * rng.uniform(0.2, 1.0, (n, 1))
    )


def worst_rows(w: np.ndarray) -> list[np.ndarray]:
    """Rows on the unit sphere that maximise or minimise the margin (the largest losses)."""
    u = w / np.linalg.norm(w)
    return [u, -u]


@pytest.mark.parametrize("kind", ["binary", "categorical", "regression"])
def test_noise_off_sensitivity_on_neighbouring_datasets(kind: EvaluationKind) -> None:
    """Replace one row (random and worst-case rows, labels flipped): the noiseless released
    vector moves by at most the plan's L2 sensitivity, and with the default clip B_max no
    row's loss is ever clipped (the bound holds for every row within the declared bounds)."""
    rng = np.random.default_rng(7)
    n, d, bound = 50, 6, 2.0
    worst = 0.0
    for _ in range(300):
        w = rng.standard_normal(d) * rng.uniform(0.1, 6.0)
        clip = (
            None
            if kind == "categorical"
            else loss_clip_bound(kind, float(np.linalg.norm(w)), bound)
        )
        plan = plan_evaluation(kind, n, 1.0, 1e-6, clip)
        X = unit_rows(rng, n, d)
        if kind == "binary":
            y = rng.choice([-1.0, 1.0], n)
            scores = X @ w
        elif kind == "categorical":
            y = rng.integers(0, 3, n).astype(float)
            scores = rng.integers(0, 3, n).astype(float)
        else:
            y = rng.uniform(-bound, bound, n)
            scores = X @ w
        base = metric_sums(plan, scores, y)
        j = int(rng.integers(n))
        for x_new in [*worst_rows(w), unit_rows(rng, 1, d)[0]]:
            for y_new in (
                [-1.0, 1.0]
                if kind == "binary"
                else [0.0, 2.0, -1.0]
                if kind == "categorical"
                else [-bound, bound]
            ):
                X2, y2, s2 = X.copy(), y.copy(), scores.copy()
                X2[j], y2[j] = x_new, y_new
                s2[j] = float(X2[j] @ w) if kind != "categorical" else float(rng.integers(0, 3))
                moved = float(np.linalg.norm(metric_sums(plan, s2, y2) - base))
                worst = max(worst, moved)
                assert moved <= plan.sensitivity + 1e-9
                if kind == "binary":
                    assert np.logaddexp(0.0, -y_new * s2[j]) <= clip + 1e-9  # type: ignore[operator]
                if kind == "regression":
                    assert (s2[j] - y_new) ** 2 <= clip + 1e-9  # type: ignore[operator]
    assert worst > 0.9 * plan.sensitivity  # the bound is attained, not loose


@pytest.mark.parametrize("epsilon", [0.1, 1.0, 5.0])
def test_calibration_matches_the_accountant(epsilon: float) -> None:
    """One Gaussian release, multiplier z: exactly (1/z)-GDP meeting δ at ε (analytic
    Gaussian, tight), and the ledger's RDP curve is dp-accounting's for GaussianDpEvent(z)."""
    delta = 1e-6
    plan = plan_evaluation("binary", 1000, epsilon, delta, 2.0)
    mu = 1.0 / plan.noise_multiplier
    assert gdp_delta(epsilon, mu) <= delta
    assert gdp_delta(epsilon, mu * (1 + 1e-6)) > delta  # the smallest noise that meets it
    assert plan.noise_scale == pytest.approx(plan.noise_multiplier * math.sqrt(3.0))
    # the Gaussian mechanism's RDP in closed form: ρ(α) = α Δ²/(2σ²) = α/(2z²)
    expected = [a / (2 * plan.noise_multiplier**2) for a in ORDERS]
    assert isinstance(plan.event, dp_event.GaussianDpEvent)
    assert charge_curve(plan.event) == pytest.approx(expected, rel=1e-9)


def test_released_noise_has_the_declared_scale() -> None:
    """Empirically: the unconstrained accuracy's spread equals accuracy_std (the projection on
    the public n halves the variance of TP + TN), and the log-loss's spread is B·σ/n. (The
    released values are these, projected into the feasible set: tests/unit/
    test_evaluation_release.py.)"""
    n = 400
    plan = plan_evaluation("binary", n, 0.5, 1e-6, 3.0)
    sums = np.array([100.0, 50.0, 30.0, 220.0, 90.0])
    rng = np.random.default_rng(3)
    draws = [unconstrained_metrics(plan, noised_sums(plan, sums, rng)) for _ in range(4000)]
    accuracy = np.array([m["accuracy"] for m in draws])
    loss = np.array([m["log_loss"] for m in draws])
    assert accuracy.mean() == pytest.approx(320 / n, abs=4 * accuracy_std(plan) / math.sqrt(4000))
    assert accuracy.std() == pytest.approx(accuracy_std(plan), rel=0.06)
    assert accuracy_std(plan) == pytest.approx(plan.noise_scale / n)
    assert loss.std() == pytest.approx(3.0 * plan.noise_scale / n, rel=0.06)
    cells = np.array([list(m["confusion_matrix"].values()) for m in draws])  # type: ignore[union-attr]
    assert np.allclose(cells.sum(axis=1), n)  # projected on the public n


def test_noise_off_metrics_are_the_exact_ones() -> None:
    """With the noise off the released metrics are the exact accuracy, log-loss and cells."""
    rng = np.random.default_rng(1)
    X = unit_rows(rng, 200, 4)
    w = np.array([1.0, -2.0, 0.5, 0.0])
    y = np.where(rng.random(200) < 0.5, 1.0, -1.0)
    model = SimpleNamespace(coefficients=w.tolist(), intercept=None)
    clip = loss_clip_bound("binary", float(np.linalg.norm(w)), None)
    got = evaluate_rows(plan_evaluation("binary", 200, 1.0, 1e-6, clip), model, X, y, None)  # type: ignore[arg-type]
    margin = X @ w
    assert got["accuracy"] == pytest.approx(float(np.mean(np.where(margin >= 0, 1, -1) == y)))
    assert got["log_loss"] == pytest.approx(float(np.mean(np.logaddexp(0, -y * margin))))
    Y = -np.ones((3, 5))
    Y[[0, 2, 1, 0], [0, 1, 2, 3]] = 1.0  # row 4 has no class (missing label)
    assert true_classes(Y).tolist() == [0, 2, 1, 0, -1]


# --- through the API ----------------------------------------------------------------------------


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def api(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[dict[str, Any]]:
    data_root = tmp_path / "data"
    data_root.mkdir()
    monkeypatch.setenv("DPFIT_DATA_ROOTS", f"{data_root}:{COPIES}")
    if request.param == "postgres":
        url = str(request.getfixturevalue("private_postgres_database"))
    else:
        url = f"sqlite:///{tmp_path / 'dpfit.db'}"
    with in_process_app(url, data_root) as (client, admin):
        keys = {}
        for name, role in [("olivia", "owner"), ("ann", "analyst"), ("sam", "analyst")]:
            response = client.post(
                "/v1/keys", json={"name": name, "role": role}, headers=bearer(admin)
            )
            keys[name] = response.json()["key"]
        yield {"client": client, "keys": keys, "url": url, "root": data_root}


def call(api: dict[str, Any], who: str, method: str, path: str, body: Any = None) -> Any:
    client: TestClient = api["client"]
    return client.request(method, path, json=body, headers=bearer(api["keys"][who]))


def exact_accuracy(api: dict[str, Any], model_id: str, path: Path) -> float:
    """The model's exact accuracy on the CSV's rows, from its own predictions (benchmark-style
    reference; the service never releases it)."""
    with path.open() as f:
        rows = list(csv.DictReader(f))
    features = [{k: v for k, v in r.items() if k != "income"} for r in rows]
    for r in features:
        r["age"], r["hours_per_week"] = float(r["age"]), float(r["hours_per_week"])
    got = call(api, "ann", "POST", f"/v1/models/{model_id}/predict", {"rows": features}).json()
    return float(np.mean([p == r["income"] for p, r in zip(got["predictions"], rows, strict=True)]))


def test_evaluation_job_is_charged_run_and_released(api: dict[str, Any]) -> None:
    dataset = call(api, "olivia", "POST", "/v1/datasets", credit_dataset(epsilon=1000.0)).json()
    dsid = dataset["id"]
    call(api, "olivia", "POST", f"/v1/datasets/{dsid}/grants", {"principal": "ann"})
    job = call(api, "ann", "POST", "/v1/jobs", logistic_job(dsid, epsilon=5.0)).json()
    assert run_job(job["id"], 1, api["url"]) == "succeeded"
    model_id = call(api, "ann", "GET", f"/v1/jobs/{job['id']}").json()["model_id"]

    body = {"dataset_id": dsid, "privacy": {"epsilon": 100.0, "delta": 1e-6}}
    estimate = call(api, "ann", "POST", f"/v1/models/{model_id}/evaluate/estimate", body).json()
    before = call(api, "ann", "GET", f"/v1/datasets/{dsid}/budget").json()
    accepted = call(api, "ann", "POST", f"/v1/models/{model_id}/evaluate", body)
    assert accepted.status_code == 202, accepted.text
    evaluation = accepted.json()
    assert evaluation["status"] == "queued" and evaluation["metrics"] is None
    after = call(api, "ann", "GET", f"/v1/datasets/{dsid}/budget").json()
    # charged on the dataset's ledger when accepted, exactly as the estimate said
    assert after["jobs_charged"] == before["jobs_charged"] + 1
    assert after["epsilon_spent"] == pytest.approx(estimate["epsilon_spent_after"])
    assert estimate["plan"] == evaluation["plan"] and estimate["accounting"] == "gaussian"
    assert estimate["sensitivity"] == pytest.approx(math.sqrt(3.0))

    assert run_job(evaluation["id"], 1, api["url"]) == "succeeded"
    path = f"/v1/models/{model_id}/evaluations/{evaluation['id']}"
    done = call(api, "ann", "GET", path).json()
    assert done["status"] == "succeeded"
    metrics = done["metrics"]
    assert set(metrics) == {"accuracy", "log_loss", "confusion_matrix"}
    cells = metrics["confusion_matrix"]
    assert sum(cells.values()) == pytest.approx(4000)
    # ε = 100: the noise is N(0, σ²) counts with σ = noise_scale ≈ 0.17 (of 4000 rows): the
    # release is the exact accuracy to within 6σ/n (1e-4, the bound used before, was 2.4σ/n
    # and failed about one run in 60)
    exact = exact_accuracy(api, model_id, COPIES / dataset_source(api, dsid))
    assert estimate["noise_scale"] < 0.2
    assert metrics["accuracy"] == pytest.approx(exact, abs=6 * estimate["noise_scale"] / 4000)
    assert 0 < metrics["log_loss"] < done["plan"]["hyperparameters"]["loss_clip"]
    assert min(cells.values()) >= 0 and 0 <= metrics["accuracy"] <= 1  # post-processed
    # the plan states every released metric's std (and, at this n and ε, no warning)
    hyper, sigma = done["plan"]["hyperparameters"], done["plan"]["noise_scale"]
    assert hyper["accuracy_std"] == pytest.approx(sigma / 4000)
    assert hyper["log_loss_std"] == pytest.approx(hyper["loss_clip"] * sigma / 4000)
    assert hyper["confusion_matrix_std"] == pytest.approx(sigma * math.sqrt(3) / 2)
    assert done["plan"]["warnings"] == []
    # a needlessly large declared clip: the estimate warns (public facts only) before any charge
    loose = {**body, "loss_clip": 1000.0, "privacy": {"epsilon": 1.0, "delta": 1e-6}}
    warned = call(api, "ann", "POST", f"/v1/models/{model_id}/evaluate/estimate", loose).json()
    (warning,) = warned["plan"]["warnings"]
    assert warning.startswith("log_loss_std = ") and "loss_clip" in warning
    # the job is an ordinary job of the analyst's, and invisible to others
    listed = call(api, "ann", "GET", f"/v1/jobs/{evaluation['id']}").json()
    assert listed["optimizer"]["name"] == "evaluation" and listed["status"] == "succeeded"
    assert call(api, "sam", "GET", path).status_code == 404
    assert done["refunded"] is False
    # cancelled while queued: refunded, and the evaluation says so as the job does
    queued = call(api, "ann", "POST", f"/v1/models/{model_id}/evaluate", body).json()
    call(api, "ann", "POST", f"/v1/jobs/{queued['id']}/cancel")
    cancelled = call(api, "ann", "GET", f"/v1/models/{model_id}/evaluations/{queued['id']}")
    assert cancelled.json()["status"] == "cancelled" and cancelled.json()["refunded"] is True
    assert call(api, "ann", "GET", f"/v1/jobs/{queued['id']}").json()["refunded"] is True
    # an evaluation id is not a model's job: 404 under another path
    assert (
        call(api, "ann", "GET", f"/v1/models/{model_id}/evaluations/{job['id']}").status_code == 404
    )


def dataset_source(api: dict[str, Any], dsid: str) -> str:
    return str(call(api, "olivia", "GET", f"/v1/datasets/{dsid}").json()["source"]["uri"])


def test_evaluation_refusals_name_the_field(api: dict[str, Any]) -> None:
    dataset = call(api, "olivia", "POST", "/v1/datasets", credit_dataset(epsilon=50.0)).json()
    dsid = dataset["id"]
    call(api, "olivia", "POST", f"/v1/datasets/{dsid}/grants", {"principal": "ann"})
    job = call(api, "ann", "POST", "/v1/jobs", logistic_job(dsid, epsilon=1.0)).json()
    assert run_job(job["id"], 1, api["url"]) == "succeeded"
    model_id = call(api, "ann", "GET", f"/v1/jobs/{job['id']}").json()["model_id"]
    evaluate = f"/v1/models/{model_id}/evaluate"
    pure = call(
        api, "ann", "POST", evaluate, {"dataset_id": dsid, "privacy": {"epsilon": 1.0, "delta": 0}}
    )
    assert pure.status_code == 422 and pure.json()["field"] == "privacy.delta"
    # a dataset with another schema (one feature fewer)
    other = credit_dataset(epsilon=5.0)
    other["features"] = other["features"][:-1]
    other_id = call(api, "olivia", "POST", "/v1/datasets", other).json()["id"]
    call(api, "olivia", "POST", f"/v1/datasets/{other_id}/grants", {"principal": "ann"})
    mismatch = call(
        api,
        "ann",
        "POST",
        evaluate,
        {"dataset_id": other_id, "privacy": {"epsilon": 1.0, "delta": 1e-6}},
    )
    assert mismatch.status_code == 422 and mismatch.json()["field"] == "dataset_id"
    # not granted: invisible
    hidden = call(api, "olivia", "POST", "/v1/datasets", credit_dataset(epsilon=5.0)).json()["id"]
    refused = call(
        api,
        "ann",
        "POST",
        evaluate,
        {"dataset_id": hidden, "privacy": {"epsilon": 1.0, "delta": 1e-6}},
    )
    assert refused.status_code == 404 and refused.json()["field"] == "dataset_id"
    # over budget: 409 naming privacy.epsilon, nothing charged
    big = call(
        api,
        "ann",
        "POST",
        evaluate,
        {"dataset_id": dsid, "privacy": {"epsilon": 100.0, "delta": 1e-6}},
    )
    assert big.status_code == 409 and big.json()["field"] == "privacy.epsilon"
    bad_clip = call(
        api,
        "ann",
        "POST",
        evaluate,
        {"dataset_id": dsid, "loss_clip": -1, "privacy": {"epsilon": 1.0, "delta": 1e-6}},
    )
    assert bad_clip.status_code == 422 and bad_clip.json()["field"] == "loss_clip"


def test_loss_clip_is_refused_where_it_would_be_ignored_or_meaningless(api: dict[str, Any]) -> None:
    """A categorical label's evaluation releases counts only: a declared ``loss_clip`` was
    accepted and silently ignored; it is a 422 on ``loss_clip`` before any charge. A subnormal
    clip (below the smallest normal float64) is refused by the schema: the plan's stated
    ``log_loss_std`` = B·σ/n would underflow."""
    body = credit_dataset(epsilon=50.0)
    body["label"] = {"column": "income", "type": "categorical", "classes": [">50K", "<=50K"]}
    dsid = call(api, "olivia", "POST", "/v1/datasets", body).json()["id"]
    call(api, "olivia", "POST", f"/v1/datasets/{dsid}/grants", {"principal": "ann"})
    job = call(api, "ann", "POST", "/v1/jobs", logistic_job(dsid, epsilon=1.0)).json()
    assert run_job(job["id"], 1, api["url"]) == "succeeded"
    model_id = call(api, "ann", "GET", f"/v1/jobs/{job['id']}").json()["model_id"]
    before = call(api, "ann", "GET", f"/v1/datasets/{dsid}/budget").json()["jobs_charged"]
    request = {"dataset_id": dsid, "loss_clip": 1.0, "privacy": {"epsilon": 1.0, "delta": 1e-6}}
    for path in (f"/v1/models/{model_id}/evaluate/estimate", f"/v1/models/{model_id}/evaluate"):
        refused = call(api, "ann", "POST", path, request)
        assert refused.status_code == 422, refused.text
        assert refused.json()["field"] == "loss_clip"
        assert "no loss" in refused.json()["detail"]
    without = {k: v for k, v in request.items() if k != "loss_clip"}
    estimate = call(api, "ann", "POST", f"/v1/models/{model_id}/evaluate/estimate", without)
    assert estimate.status_code == 200, estimate.text
    # the evaluation's own target and the dataset's budget, apart (as for a job's estimate)
    assert estimate.json()["privacy"] == {"epsilon": 1.0, "delta": 1e-6}
    assert estimate.json()["budget"] == {"epsilon": 50.0, "delta": 1e-5}
    assert call(api, "ann", "GET", f"/v1/datasets/{dsid}/budget").json()["jobs_charged"] == before

    binary = call(api, "olivia", "POST", "/v1/datasets", credit_dataset(epsilon=50.0)).json()
    call(api, "olivia", "POST", f"/v1/datasets/{binary['id']}/grants", {"principal": "ann"})
    job = call(api, "ann", "POST", "/v1/jobs", logistic_job(binary["id"], epsilon=1.0)).json()
    assert run_job(job["id"], 1, api["url"]) == "succeeded"
    model_id = call(api, "ann", "GET", f"/v1/jobs/{job['id']}").json()["model_id"]
    estimate_path = f"/v1/models/{model_id}/evaluate/estimate"
    for clip, status in [
        (0, 422),
        (5e-324, 422),
        (2.2250738585072014e-308 / 2, 422),
        (1e-300, 200),
    ]:
        request = {**request, "dataset_id": binary["id"], "loss_clip": clip}
        answer = call(api, "ann", "POST", estimate_path, request)
        assert answer.status_code == status, answer.text
        if status == 422:
            assert answer.json()["field"] == "loss_clip"
            # a readable bound, not the 300-digit decimal of 2⁻¹⁰²² (pydantic's ge message)
            assert len(answer.json()["detail"]) < 200, answer.json()["detail"]
        else:
            assert answer.json()["plan"]["hyperparameters"]["log_loss_std"] > 0
