"""A categorical label through the whole service (in-process app, the worker's runner inline):
``auto`` fits the classes jointly and records it, the worker stores a K × d' model, ``/predict``
scores it by the softmax (the client's local scores equal it), a private evaluation releases
accuracy and a K × K confusion matrix, and every optimizer outside the joint model's list is
refused on ``model`` before any charge."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from dpfit.model import Model

from service.models.multinomial import JOINT_OPTIMIZERS
from service.optimizers.kits.limits import WEIGHTS_CAP
from service.privacy.evaluation import MAX_CONFUSION_CLASSES
from service.workers.runner import run_job
from tests.support.inprocess import bearer, in_process_app
from tests.support.walkthrough import COPIES, PREDICT_ROWS, credit_dataset

CLASSES = ["HS", "Bachelors", "Masters", "PhD"]


@pytest.fixture
def api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    data_root = tmp_path / "data"
    data_root.mkdir()
    monkeypatch.setenv("DPFIT_DATA_ROOTS", f"{data_root}:{COPIES}")
    url = f"sqlite:///{tmp_path / 'dpfit.db'}"
    with in_process_app(url, data_root) as (client, admin):
        keys = {}
        for name, role in [("olivia", "owner"), ("ann", "analyst")]:
            made = client.post("/v1/keys", json={"name": name, "role": role}, headers=bearer(admin))
            keys[name] = made.json()["key"]
        yield {"client": client, "keys": keys, "url": url, "data_root": data_root}


def _registered(api: dict[str, Any], body: dict[str, Any]) -> str:
    """Olivia registers ``body`` and grants ann; the dataset's id."""
    owner = bearer(api["keys"]["olivia"])
    made = api["client"].post("/v1/datasets", json=body, headers=owner)
    assert made.status_code == 201, made.text
    dsid = str(made.json()["id"])
    api["client"].post(f"/v1/datasets/{dsid}/grants", json={"principal": "ann"}, headers=owner)
    return dsid


def _education_dataset(api: dict[str, Any]) -> str:
    """The example credit data with its ``education`` column as a 4-class label."""
    body = credit_dataset(epsilon=100.0)
    body["features"] = [f for f in body["features"] if f["name"] != "education"]
    body["label"] = {"column": "education", "type": "categorical", "classes": CLASSES}
    return _registered(api, body)


def _many_classes(
    api: dict[str, Any], name: str, rows: list[str], classes: int, feature: dict[str, Any]
) -> str:
    """A CSV of ``rows`` (``<feature>,y``) under the data root, registered with a label of
    ``classes`` declared classes c0 … and the one ``feature``."""
    (api["data_root"] / f"{name}.csv").write_text("\n".join([f"{feature['name']},y", *rows]) + "\n")
    labels = [f"c{k}" for k in range(classes)]
    body = {
        "name": name,
        "source": {"uri": f"{name}.csv"},
        "label": {"column": "y", "type": "categorical", "classes": labels},
        "features": [feature],
        "budget": {"epsilon": 10.0, "delta": 1e-5},
    }
    return _registered(api, body)


def _call(api: dict[str, Any], method: str, path: str, body: Any = None) -> Any:
    return api["client"].request(method, path, json=body, headers=bearer(api["keys"]["ann"]))


def test_auto_fits_the_classes_jointly_through_the_service(api: dict[str, Any]) -> None:
    dsid = _education_dataset(api)
    request = {
        "dataset_id": dsid,
        "model": {"type": "logistic_regression"},
        "privacy": {"epsilon": 2.0, "delta": 1e-6},
    }
    accepted = _call(api, "POST", "/v1/jobs", request)
    assert accepted.status_code == 202, accepted.text
    job = accepted.json()
    assert job["model"]["type"] == "multinomial_logistic_regression"
    assert job["plan"]["auto"]["multiclass"] == "joint"
    assert job["optimizer"]["name"] in JOINT_OPTIMIZERS
    assert "one_vs_rest" not in job["plan"]["hyperparameters"]
    # 4,000 rows of width 6: the curvature step's Gram form (gram_step.gram_pays) runs here
    assert job["plan"]["hyperparameters"]["curvature_form"] == "gram"
    assert run_job(job["id"], 1, api["url"]) == "succeeded"
    model_id = _call(api, "GET", f"/v1/jobs/{job['id']}").json()["model_id"]
    body = _call(api, "GET", f"/v1/models/{model_id}").json()
    assert np.asarray(body["coefficients"]).shape == (4, 2 + 3)  # age, hours, sector one-hot
    assert len(body["intercept"]) == 4 and body["classes"] == CLASSES

    rows = [{k: v for k, v in r.items() if k != "education"} for r in PREDICT_ROWS]
    served = _call(api, "POST", f"/v1/models/{model_id}/predict", {"rows": rows}).json()
    local = Model.from_json(body)
    assert list(local.predict(rows)) == served["predictions"]
    np.testing.assert_allclose(
        local.predict_proba(rows).max(axis=1), served["probabilities"], rtol=0, atol=1e-12
    )

    evaluation = {"dataset_id": dsid, "privacy": {"epsilon": 50.0, "delta": 1e-6}}
    queued = _call(api, "POST", f"/v1/models/{model_id}/evaluate", evaluation)
    assert queued.status_code == 202, queued.text
    assert queued.json()["plan"]["sensitivity"] == pytest.approx(2.0)
    assert run_job(queued.json()["id"], 1, api["url"]) == "succeeded"
    done = _call(api, "GET", f"/v1/models/{model_id}/evaluations/{queued.json()['id']}").json()
    metrics = done["metrics"]
    matrix = np.asarray(metrics["confusion_matrix"])
    assert matrix.shape == (4, 4) and np.all(matrix >= 0)
    assert matrix.sum() + sum(metrics["undeclared_label_predictions"]) == pytest.approx(4000)
    assert 0.0 <= metrics["accuracy"] <= 1.0
    assert "confusion_matrix_std" in done["plan"]["hyperparameters"]


def test_a_label_of_many_classes_is_evaluated_for_accuracy_alone(api: dict[str, Any]) -> None:
    """Above MAX_CONFUSION_CLASSES declared classes the evaluation's plan (estimate and
    submission) says it releases accuracy alone, and the worker releases just that: no
    (K + 1)·K matrix is drawn (at the label's cap of 10,000 classes 10⁸ cells ran a worker out
    of memory after the charge)."""
    classes = MAX_CONFUSION_CLASSES + 44
    x = np.random.default_rng(7).uniform(0, 1, 900)
    rows = [f"{v:.4f},c{int(v * classes)}" for v in x]
    feature = {"name": "x", "type": "numeric", "min": 0, "max": 1}
    dsid = _many_classes(api, "many", rows, classes, feature)
    request = {
        "dataset_id": dsid,
        "model": {"type": "multinomial_logistic_regression", "l2": 1e-2},
        "optimizer": {"name": "dp_gd", "params": {"iterations": 3}},
        "privacy": {"epsilon": 1.0, "delta": 1e-6},
    }
    job = _call(api, "POST", "/v1/jobs", request).json()
    assert run_job(job["id"], 1, api["url"]) == "succeeded"
    model_id = _call(api, "GET", f"/v1/jobs/{job['id']}").json()["model_id"]
    evaluation = {"dataset_id": dsid, "privacy": {"epsilon": 1.0, "delta": 1e-6}}
    estimate = _call(api, "POST", f"/v1/models/{model_id}/evaluate/estimate", evaluation)
    assert estimate.status_code == 200, estimate.text
    queued = _call(api, "POST", f"/v1/models/{model_id}/evaluate", evaluation)
    assert queued.status_code == 202, queued.text
    plan = queued.json()["plan"]
    assert plan["sensitivity"] == pytest.approx(2**0.5)
    assert plan["hyperparameters"]["metrics"] == "categorical"
    assert any(f"{classes} classes" in w for w in plan["warnings"])
    assert run_job(queued.json()["id"], 1, api["url"]) == "succeeded"
    done = _call(api, "GET", f"/v1/models/{model_id}/evaluations/{queued.json()['id']}").json()
    assert set(done["metrics"]) == {"accuracy"}
    assert 0.0 <= done["metrics"]["accuracy"] <= 1.0


def test_a_schema_whose_model_exceeds_the_weights_cap_is_refused_before_any_charge(
    api: dict[str, Any],
) -> None:
    """600 classes over a feature of 2,000 categories: 1,200,600 weights, above WEIGHTS_CAP —
    the estimate and the submission answer 422 on ``model`` with the count, nothing charged
    (3,000,000 weights took 14 s to fit and 64 MB of JSON to serve; the schema's own caps
    allow 10⁸, which a worker cannot hold)."""
    classes, categories = 600, 2000
    assert classes * (categories + 1) > WEIGHTS_CAP
    rows = [f"v{i % categories},c{i % classes}" for i in range(300)]
    values = [f"v{k}" for k in range(categories)]
    feature = {"name": "cat", "type": "categorical", "categories": values}
    dsid = _many_classes(api, "wide", rows, classes, feature)
    request = {
        "dataset_id": dsid,
        "model": {"type": "logistic_regression"},
        "privacy": {"epsilon": 1.0, "delta": 1e-6},
    }
    for path in ("/v1/jobs/estimate", "/v1/jobs"):
        refused = _call(api, "POST", path, request)
        assert refused.status_code == 422, refused.text
        assert refused.json()["field"] == "model"
        assert f"{classes * (categories + 1):,} weights" in refused.json()["detail"]
    assert _call(api, "GET", f"/v1/datasets/{dsid}/budget").json()["jobs_charged"] == 0


@pytest.mark.parametrize("optimizer", ["dp_svrg", "rrpsgd", "noisy_sgd_bst14", "private_tuning"])
def test_other_optimizers_refuse_the_joint_model_before_any_charge(
    api: dict[str, Any], optimizer: str
) -> None:
    dsid = _education_dataset(api)
    request = {
        "dataset_id": dsid,
        "model": {"type": "multinomial_logistic_regression"},
        "optimizer": {"name": optimizer},
        "privacy": {"epsilon": 1.0, "delta": 1e-6},
    }
    refused = _call(api, "POST", "/v1/jobs", request)
    assert refused.status_code == 422, refused.text
    assert refused.json()["field"] == "model"
    assert _call(api, "GET", f"/v1/datasets/{dsid}/budget").json()["jobs_charged"] == 0


@pytest.mark.parametrize(
    "params", [{"curvature_form": "hessian"}, {"curvature_form": 3},
               {"curvature_form": "gram", "curvature_share": 0}],
)  # fmt: skip
def test_a_curvature_form_that_cannot_run_is_refused_on_its_field(
    api: dict[str, Any], params: dict[str, Any]
) -> None:
    dsid = _education_dataset(api)
    request = {
        "dataset_id": dsid,
        "model": {"type": "multinomial_logistic_regression", "l2": 1e-3},
        "optimizer": {"name": "dp_agd_averaged", "params": params},
        "privacy": {"epsilon": 1.0, "delta": 1e-6},
    }
    refused = _call(api, "POST", "/v1/jobs", request)
    assert refused.status_code == 422, refused.text
    assert refused.json()["field"] == "optimizer.params.curvature_form"
    assert _call(api, "GET", f"/v1/datasets/{dsid}/budget").json()["jobs_charged"] == 0


def test_the_joint_model_on_a_binary_label_is_refused_on_model(api: dict[str, Any]) -> None:
    owner = bearer(api["keys"]["olivia"])
    dsid = api["client"].post("/v1/datasets", json=credit_dataset(), headers=owner).json()["id"]
    api["client"].post(f"/v1/datasets/{dsid}/grants", json={"principal": "ann"}, headers=owner)
    for optimizer in (None, "dp_agd"):
        request: dict[str, Any] = {
            "dataset_id": dsid,
            "model": {"type": "multinomial_logistic_regression"},
            "privacy": {"epsilon": 1.0, "delta": 1e-6},
        }
        if optimizer:
            request["optimizer"] = {"name": optimizer}
        refused = _call(api, "POST", "/v1/jobs", request)
        assert refused.status_code == 422, refused.text
        assert refused.json()["field"] == "model"


def test_the_recorded_joint_spec_replans_the_same_job() -> None:
    """Re-sending an auto job's stored model and optimizer on a categorical label prices the
    very same plan and charge (the joint model's objective gap, log K, included)."""
    from service.domain.submission import DatasetFacts, price_job
    from service.schemas import JobCreate

    facts = DatasetFacts(
        id="ds_x", n_rows=1257, n_features=64, delta=1e-5,
        label_type="categorical", classes=10, retired=False,
    )  # fmt: skip

    def body(**extra: Any) -> JobCreate:
        return JobCreate.model_validate(
            {"dataset_id": "ds_x", "privacy": {"epsilon": 1.0, "delta": 1e-5}} | extra
        )

    auto = price_job(facts, body(model={"type": "logistic_regression"}))
    assert auto.plan_json["hyperparameters"]["objective_gap"] == pytest.approx(np.log(10))
    again = price_job(facts, body(model=auto.spec["model"], optimizer=auto.spec["optimizer"]))
    plan = dict(auto.plan_json)
    plan.pop("auto")
    assert again.plan_json == plan and again.charge == auto.charge


def test_the_schemas_one_hot_columns_reach_a_plan_whose_column_scales_run() -> None:
    """DatasetFacts.of reads the one-hot columns off the registered features; a default job
    whose column scales run records them in its plan (``kits/column_scales.py``, "One-hot
    columns"), one without them does not; the recorded spec replans the same plan."""
    from types import SimpleNamespace

    from service.domain.submission import DatasetFacts, price_job
    from service.schemas import JobCreate

    features = (
        [{"name": "age", "type": "numeric", "min": 0, "max": 100}]
        + [{"name": f"x{j}", "type": "numeric", "min": -1, "max": 1} for j in range(9)]
        + [{"name": "region", "type": "categorical", "categories": ["n", "s", "e", "w"]}]
    )
    dataset = SimpleNamespace(
        id="ds_x", n_rows=30_000, n_features=14, delta=1e-5, retired_at=None,
        label={"column": "y", "type": "categorical", "classes": ["a", "b", "c", "d"]},
        features=features, execution="workers",
    )  # fmt: skip
    facts = DatasetFacts.of(dataset)  # type: ignore[arg-type]
    assert facts.one_hot_columns == (10, 11, 12, 13)
    body = {
        "dataset_id": "ds_x",
        "model": {"type": "logistic_regression"},
        "privacy": {"epsilon": 2.0, "delta": 1e-5},
    }
    scaled = price_job(facts, JobCreate.model_validate(body))
    hyper = scaled.plan_json["hyperparameters"]
    assert hyper["column_scale_share"] > 0.0 and hyper["one_hot_columns"] == [10, 11, 12, 13]
    again = price_job(
        facts,
        JobCreate.model_validate(
            body | {"model": scaled.spec["model"], "optimizer": scaled.spec["optimizer"]}
        ),
    )
    assert again.plan_json["hyperparameters"] == hyper
    small = DatasetFacts.of(SimpleNamespace(**{**vars(dataset), "n_rows": 300}))  # type: ignore[arg-type]
    unscaled = price_job(small, JobCreate.model_validate(body))
    assert "one_hot_columns" not in unscaled.plan_json["hyperparameters"]


def test_a_joint_fit_is_capped_at_200_steps_and_replans_from_its_stored_spec() -> None:
    """``auto``'s joint model runs at most JOINT_STEP_CAP steps where its optimizer's own cap
    (400) would allow more, sets that in the stored optimizer params and the record, and the
    stored spec replans the same job; a binary job of the same size keeps the 400 cap."""
    from service.domain.submission import DatasetFacts, price_job
    from service.optimizers.auto import JOINT_STEP_CAP
    from service.schemas import JobCreate

    def priced(label_type: str, classes: int | None, **extra: Any) -> Any:
        facts = DatasetFacts(
            id="ds_x", n_rows=14_000, n_features=20, delta=1e-5,
            label_type=label_type, classes=classes, retired=False,
        )  # fmt: skip
        body = {"dataset_id": "ds_x", "privacy": {"epsilon": 5.0, "delta": 1e-5}} | extra
        return price_job(facts, JobCreate.model_validate(body))

    joint = priced("categorical", 5, model={"type": "logistic_regression"})
    assert joint.plan_json["auto"]["multiclass"] == "joint"
    assert joint.spec["optimizer"]["params"]["max_iterations"] == JOINT_STEP_CAP
    assert joint.plan_json["auto"]["filled"]["optimizer.params.max_iterations"] == JOINT_STEP_CAP
    assert joint.plan_json["hyperparameters"]["iterations"] == JOINT_STEP_CAP
    again = priced("categorical", 5, model=joint.spec["model"], optimizer=joint.spec["optimizer"])
    plan = dict(joint.plan_json)
    plan.pop("auto")
    assert again.plan_json == plan and again.charge == joint.charge
    binary = priced("binary", None, model={"type": "logistic_regression"})
    assert binary.spec["optimizer"]["params"].get("max_iterations") != JOINT_STEP_CAP
    assert binary.plan_json["hyperparameters"]["iterations"] > JOINT_STEP_CAP
