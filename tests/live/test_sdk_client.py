"""`import dpfit` against a live `dpfit serve` over real HTTP: fitting with a progress bar, local
prediction and scikit-learn export equal to the service's `/predict`, typed exceptions from
problem+json, paging, budgets as DataFrames, and retries that charge once."""

from __future__ import annotations

import math
import pickle
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import dpfit
import httpx
import numpy as np
import pandas as pd
import pytest

from tests.support.fixtures import EXAMPLES  # noqa: F401 - the live servers' data root
from tests.support.live import LiveServer
from tests.support.walkthrough import COPIES, PREDICT_ROWS, credit_dataset

pytestmark = pytest.mark.slow

CLASSES = ["HS", "Bachelors", "Masters", "PhD"]
# Rows that exercise every per-cell rule: text numbers, MISSING cells, out-of-range values,
# unknown and differently spelled categories, booleans, huge integers.
TRICKY_ROWS: list[dict[str, Any]] = [
    *PREDICT_ROWS,
    {"age": " 33.5 ", "hours_per_week": "40", "education": " Masters ", "sector": "public"},
    {"age": None, "hours_per_week": "", "education": None, "sector": None},
    {"age": 500, "hours_per_week": -3, "education": "Kindergarten", "sector": "PRIVATE"},
    {"age": "n/a", "hours_per_week": "1,000", "education": 3, "sector": True},
    {"age": True, "hours_per_week": 10**400, "education": "PhD", "sector": "self-employed"},
    {"age": 18, "hours_per_week": 99, "education": "HS", "sector": "private"},
    {"age": 90, "hours_per_week": 1, "education": "Bachelors", "sector": "public"},
    {"age": ".5e2", "hours_per_week": "5.", "education": "Masters", "sector": " public "},
]


@dataclass
class World:
    """Principals, datasets and fitted models shared by this module's tests."""

    server: LiveServer
    owner: str
    analyst: str
    owner_key: str
    analyst_key: str
    binary: str = ""
    multiclass: str = ""
    numeric: str = ""
    models: dict[str, dpfit.Model] = field(default_factory=dict)

    def client(self, key: str | None = None, **kwargs: Any) -> dpfit.Client:
        return dpfit.Client(self.server.base_url, key or self.analyst_key, **kwargs)


def register(world: World, body: dict[str, Any]) -> str:
    with world.client(world.owner_key) as owner:
        dataset = owner.register_dataset(body)
        owner.grant(dataset["id"], world.analyst)
    return str(dataset["id"])


@pytest.fixture(scope="module")
def world(sqlite_server: LiveServer) -> Iterator[World]:
    tag = uuid.uuid4().hex[:6]
    w = World(
        server=sqlite_server,
        owner=f"sdk-owner-{tag}",
        analyst=f"sdk-analyst-{tag}",
        owner_key=sqlite_server.key(f"sdk-owner-{tag}", "owner"),
        analyst_key=sqlite_server.key(f"sdk-analyst-{tag}", "analyst"),
    )
    w.binary = register(w, credit_dataset(epsilon=50.0))
    body = credit_dataset(epsilon=50.0)
    body["label"] = {"column": "education", "type": "categorical", "classes": CLASSES}
    body["features"] = [f for f in body["features"] if f["name"] != "education"]
    body["features"].append(
        {"name": "income", "type": "categorical", "categories": [">50K", "<=50K"]}
    )
    w.multiclass = register(w, body)
    body = credit_dataset(epsilon=50.0)
    body["label"] = {"column": "hours_per_week", "type": "numeric"}
    body["features"] = [f for f in body["features"] if f["name"] != "hours_per_week"]
    w.numeric = register(w, body)
    with w.client() as c:
        w.models["logistic"] = c.fit(
            w.binary, "logistic_regression", epsilon=1.0, delta=1e-6, l2=0.01, progress=False
        )
        w.models["huber_svm"] = c.fit(
            w.binary, "huber_svm", epsilon=1.0, delta=1e-6, l2=0.01, progress=False
        )
        w.models["multiclass"] = c.fit(
            w.multiclass, "logistic_regression", epsilon=2.0, delta=1e-6, l2=0.05, progress=False
        )
        w.models["regression"] = c.fit(
            w.numeric,
            {"type": "huber_regression", "l2": 0.05, "label_bound": 99},
            "output_perturbation_gd",
            epsilon=1.0,
            delta=1e-6,
            progress=False,
        )
    yield w


# --- fitting ---------------------------------------------------------------------------------


def test_fit_follows_the_job_with_a_progress_bar(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    with world.client() as c:
        model = c.fit(world.binary, "logistic_regression", epsilon=0.5, delta=1e-6, l2=0.01)
        job = c.job(model.job_id)
    err = capsys.readouterr().err
    assert f"job {job.id}" in err, err  # tqdm's bar, labelled with the job
    step, total = job.progress
    assert job.status == "succeeded" and step == total > 0
    assert "auto" in job.data["plan"]  # no optimizer named: the service chose one
    assert job.plan["auto"]["chosen_by"] == "auto" and job.plan == job.data["plan"]
    assert job.plan["auto"]["optimizer"] == job.data["optimizer"]["name"]
    assert f"{total}/{total}" in err, err
    assert err.count("succeeded") == 1, err  # the final state is drawn once
    assert isinstance(model, dpfit.Model) and model.id == job.model_id
    assert model.privacy["epsilon"] == 0.5 and model.privacy["delta"] == 1e-6
    assert model.coefficients.shape == (len(model.feature_names),)
    assert model.classes == ["<=50K", ">50K"]


def test_fit_without_progress_is_silent(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    with world.client() as c:
        c.fit(world.binary, "logistic_regression", epsilon=0.2, delta=1e-6, progress=False)
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out == ""


def test_submit_returns_a_job_to_wait_for(world: World) -> None:
    with world.client() as c:
        job = c.submit(world.binary, "logistic_regression", epsilon=0.2, delta=1e-6)
        assert job.status in ("queued", "running", "succeeded")
        assert job.wait(timeout=120) is job and job.status == "succeeded"
        assert job.model().id == job.model_id
        assert job.id in {j.id for j in c.jobs(status="succeeded")}


def test_cancel_a_job(world: World) -> None:
    dataset_id = register(world, credit_dataset(epsilon=1.0))  # a refund stays off world.binary
    with world.client() as c:
        job = c.submit(dataset_id, "logistic_regression", epsilon=0.1, delta=1e-6)
        try:
            job.cancel()
        except dpfit.Conflict as exc:  # it finished first
            assert exc.status == 409 and job.refresh().status == "succeeded"
        else:
            assert job.status == "cancelled"
            with pytest.raises(dpfit.JobFailed) as raised:
                job.wait()
            assert raised.value.job.status == "cancelled"
        with pytest.raises(dpfit.Conflict):  # finished either way: nothing left to cancel
            c.cancel(job.id)


# --- local prediction and scikit-learn export ------------------------------------------------


MODEL_KINDS = ["logistic", "huber_svm", "multiclass", "regression"]


def rows_for(model: dpfit.Model) -> list[dict[str, Any]]:
    if "income" in model.encoding.columns:  # the multiclass dataset: income is a feature
        incomes = [">50K", " <=50K ", None, "?", 1]
        return [{**r, "income": incomes[i % len(incomes)]} for i, r in enumerate(TRICKY_ROWS)]
    return TRICKY_ROWS


@pytest.mark.parametrize("kind", MODEL_KINDS)
def test_local_predict_equals_the_service(world: World, kind: str) -> None:
    model = world.models[kind]
    rows = rows_for(model)
    with world.client() as c:
        served = c.predict(model.id, rows)
    local = model.predict(rows)
    if model.is_regression:
        assert served["probabilities"] is None
        np.testing.assert_allclose(local, served["predictions"], rtol=0, atol=1e-12)
        with pytest.raises(TypeError):
            model.predict_proba(rows)
        return
    assert list(local) == served["predictions"]
    proba = model.predict_proba(rows)
    assert proba.shape == (len(rows), len(model.classes or []))
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    shown = proba.max(axis=1) if model.is_multiclass else proba[:, 1]
    np.testing.assert_allclose(shown, served["probabilities"], rtol=0, atol=1e-12)


def test_local_predict_takes_a_dataframe_with_missing_values(world: World) -> None:
    model = world.models["logistic"]
    frame = pd.DataFrame(
        {
            "age": [52.0, np.nan, 30.0],
            "hours_per_week": [60, 15, 40],
            "education": ["PhD", None, "HS"],
            "sector": ["self-employed", "public", np.nan],
            "unused": ["x", "y", "z"],
        }
    )
    with world.client() as c:
        served = c.predict(model.id, frame)
    assert list(model.predict(frame)) == served["predictions"]
    np.testing.assert_allclose(
        model.predict_proba(frame)[:, 1], served["probabilities"], rtol=0, atol=1e-12
    )


@pytest.mark.parametrize("kind", MODEL_KINDS)
def test_to_sklearn_predicts_like_the_model(world: World, kind: str) -> None:
    from sklearn.pipeline import Pipeline

    model = world.models[kind]
    rows = rows_for(model)
    pipeline = model.to_sklearn()
    assert isinstance(pipeline, Pipeline)
    frame = pd.DataFrame(rows)
    if model.is_regression:
        np.testing.assert_allclose(pipeline.predict(frame), model.predict(rows), atol=1e-12)
        return
    assert list(pipeline.predict(rows)) == list(model.predict(rows))
    if hasattr(pipeline, "predict_proba") and kind != "huber_svm":
        np.testing.assert_allclose(
            pipeline.predict_proba(rows), model.predict_proba(rows), rtol=0, atol=1e-12
        )
    estimator = pipeline[-1]
    if model.is_multiclass:
        assert list(estimator.classes_) == CLASSES
    else:
        np.testing.assert_array_equal(estimator.coef_.ravel(), model.weights()[0])


@pytest.mark.parametrize("kind", MODEL_KINDS)
def test_to_sklearn_scores_as_scikit_learn_does(world: World, kind: str) -> None:
    """``Pipeline.score`` works for every kind (a multiclass pipeline's once raised TypeError:
    its one-vs-rest estimator's ``score`` attribute hid the method), also after pickling (what
    ``dpfit models export --format sklearn`` writes)."""
    model = world.models[kind]
    frame = pd.DataFrame(rows_for(model))
    labels = model.predict(frame)  # its own predictions: accuracy 1, R² 1
    for pipeline in (model.to_sklearn(), pickle.loads(pickle.dumps(model.to_sklearn()))):
        assert pipeline.score(frame, labels) == pytest.approx(1.0)
        if not model.is_regression:
            flipped = labels[::-1]
            expected = float(np.mean(labels == flipped))
            assert pipeline.score(frame, flipped) == pytest.approx(expected)


# --- private evaluation ------------------------------------------------------------------------


def test_evaluate_a_model_privately(world: World) -> None:
    with world.client() as c:
        model = c.model(world.models["logistic"].id)
        before = c.budget(world.binary).iloc[0]["epsilon_spent"]
        estimate = model.estimate_evaluation(world.binary, epsilon=0.5, delta=1e-6)
        assert c.budget(world.binary).iloc[0]["epsilon_spent"] == before  # nothing charged
        assert estimate.admissible is True and estimate.epsilon_spent_after > before
        stds = estimate.plan["hyperparameters"]

        evaluation = model.evaluate(world.binary, epsilon=0.5, delta=1e-6)
        assert isinstance(evaluation, dpfit.Evaluation) and evaluation.status == "succeeded"
        assert evaluation.model_id == model.id and evaluation.dataset_id == world.binary
        metrics = evaluation.metrics
        assert metrics is not None and set(metrics) == {"accuracy", "log_loss", "confusion_matrix"}
        assert 0.0 <= metrics["accuracy"] <= 1.0
        assert sum(metrics["confusion_matrix"].values()) == pytest.approx(4000)
        assert evaluation.stds == {
            "accuracy": stds["accuracy_std"],
            "log_loss": stds["log_loss_std"],
            "confusion_matrix": stds["confusion_matrix_std"],
        }
        assert evaluation.privacy == {"epsilon": 0.5, "delta": 1e-6}
        assert c.budget(world.binary).iloc[0]["epsilon_spent"] > before  # charged on its ledger
        job = evaluation.job()
        assert job.id == evaluation.id and job.data["optimizer"]["name"] == "evaluation"

        queued = c.evaluate(
            model.id, world.binary, epsilon=0.5, delta=1e-6, loss_clip=1.0, wait=False
        )
        assert queued.status in ("queued", "running", "succeeded")
        assert queued.wait(timeout=120) is queued and queued.metrics is not None
        assert queued.plan["hyperparameters"]["loss_clip"] == 1.0
        assert c.evaluation(model.id, queued.id).metrics == queued.metrics

        with pytest.raises(dpfit.InvalidSpec) as raised:
            model.evaluate(world.binary, epsilon=0.5, delta=0.0)
        assert raised.value.field == "privacy.delta"
    assert pickle.loads(pickle.dumps(model)).client is None  # its HTTP session is not pickled
    unbound = dpfit.Model.from_json(model.to_json(), {"negative": "<=50K", "positive": ">50K"})
    with pytest.raises(dpfit.DpfitError, match="not bound to a client"):
        unbound.evaluate(world.binary, epsilon=0.5, delta=1e-6)


# --- typed exceptions from problem+json ------------------------------------------------------


def test_budget_exceeded_names_what_remains(world: World) -> None:
    small = register(world, credit_dataset(epsilon=0.5))
    with world.client() as c, pytest.raises(dpfit.BudgetExceeded) as raised:
        c.fit(small, "logistic_regression", epsilon=1.0, delta=1e-6, progress=False)
    assert raised.value.status == 409 and raised.value.field == "privacy.epsilon"
    assert raised.value.epsilon_remaining is not None
    assert 0.0 < raised.value.epsilon_remaining <= 0.5


def test_invalid_spec_names_the_field(world: World) -> None:
    with world.client() as c:
        with pytest.raises(dpfit.InvalidSpec) as raised:
            c.submit(world.binary, "logistic_regression", epsilon=-1.0, delta=1e-6)
        assert raised.value.status == 422 and raised.value.field == "privacy.epsilon"
        with pytest.raises(dpfit.InvalidSpec) as raised:
            c.submit(world.binary, "no_such_model", epsilon=1.0, delta=1e-6)
        assert raised.value.field is not None and raised.value.field.startswith("model")


def test_not_found_and_auth_errors(world: World) -> None:
    with world.client() as c:
        with pytest.raises(dpfit.NotFound):
            c.model("model_does_not_exist")
        with pytest.raises(dpfit.NotFound):
            c.submit("ds_does_not_exist", epsilon=1.0, delta=1e-6)
    with world.client("dpf_not_a_key") as bad, pytest.raises(dpfit.AuthError) as raised:
        bad.datasets()
    assert raised.value.status == 401
    with (
        dpfit.Client(world.server.base_url, api_key="") as anonymous,
        pytest.raises(dpfit.AuthError),
    ):
        anonymous.jobs()
    assert issubclass(dpfit.BudgetExceeded, dpfit.DpfitError)


def test_second_registration_is_a_conflict_naming_the_dataset(world: World) -> None:
    body = credit_dataset(epsilon=1.0)
    first = register(world, body)
    with world.client(world.owner_key) as owner, pytest.raises(dpfit.Conflict) as raised:
        owner.register_dataset(body)
    assert not isinstance(raised.value, dpfit.BudgetExceeded)
    assert raised.value.dataset_id == first and raised.value.field == "source.uri"


def test_a_failed_job_raises_job_failed(world: World) -> None:
    body = credit_dataset(epsilon=5.0)
    dataset_id = register(world, body)
    path = COPIES / body["source"]["uri"]
    path.write_text(path.read_text().replace("PhD", "Masters", 1))  # changed after registration
    with world.client() as c, pytest.raises(dpfit.JobFailed) as raised:
        c.fit(dataset_id, "logistic_regression", epsilon=1.0, delta=1e-6, progress=False)
    job = raised.value.job
    assert job.status == "failed" and job.error and job.model_id is None


# --- retries never charge twice --------------------------------------------------------------


class DropFirstJobAnswer(httpx.BaseTransport):
    """Forwards every request to the server; the first answer to POST /v1/jobs is dropped AFTER
    the server processed it (as a connection lost on the way back)."""

    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()
        self.job_posts: list[str | None] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        if request.method == "POST" and request.url.path == "/v1/jobs":
            self.job_posts.append(request.headers.get("Idempotency-Key"))
            if len(self.job_posts) == 1:
                response.read()
                response.close()
                raise httpx.ReadError("connection lost after the server answered", request=request)
        return response

    def close(self) -> None:
        self.inner.close()


def test_a_dropped_answer_is_retried_with_the_same_key_and_charged_once(world: World) -> None:
    dataset_id = register(world, credit_dataset(epsilon=5.0))
    transport = DropFirstJobAnswer()
    with world.client(transport=transport, backoff=0.01) as c:
        model = c.fit(dataset_id, "logistic_regression", epsilon=1.0, delta=1e-6, progress=False)
        jobs = [j for j in c.jobs() if j.data["dataset_id"] == dataset_id]
    assert len(transport.job_posts) == 2 and transport.job_posts[0] == transport.job_posts[1]
    assert transport.job_posts[0] is not None
    assert [j.id for j in jobs] == [model.job_id]
    with world.server.client(world.owner_key) as owner:
        ledger = owner.get(f"/v1/datasets/{dataset_id}/ledger").json()
    assert [(r["job_id"], r["kind"]) for r in ledger["charges"]] == [(model.job_id, "charge")]


class UnavailableFirst(httpx.BaseTransport):
    """Answers the first request with the service's 503 (as during a database outage), then
    forwards every request to the server."""

    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()
        self.seen = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.seen += 1
        if self.seen == 1:
            problem = {"title": "Service unavailable", "status": 503, "detail": "database"}
            return httpx.Response(503, json=problem, request=request)
        return self.inner.handle_request(request)


def test_a_503_is_retried_and_then_raised(world: World) -> None:
    transport = UnavailableFirst()
    with world.client(transport=transport, backoff=0.01) as c:
        assert isinstance(c.jobs(), list) and transport.seen == 2
    with (
        world.client(transport=UnavailableFirst(), retries=0) as c,
        pytest.raises(dpfit.DpfitError) as raised,
    ):
        c.jobs()
    assert raised.value.status == 503


def test_unreachable_service_is_a_connection_error() -> None:
    with (
        dpfit.Client("http://127.0.0.1:9", "k", retries=1, backoff=0.01) as c,
        pytest.raises(dpfit.ConnectionFailed),
    ):
        c.datasets()


# --- lists, budgets, estimates ---------------------------------------------------------------


def test_lists_follow_every_page(world: World) -> None:
    with world.client() as whole, world.client(page_size=1) as paged:
        assert [j.id for j in paged.jobs()] == [j.id for j in whole.jobs()]
        assert len(whole.jobs()) >= 4
        assert [d["id"] for d in paged.datasets()] == [d["id"] for d in whole.datasets()]


def test_budget_and_history_are_dataframes(world: World) -> None:
    with world.client() as c:
        budget = c.budget(world.binary)
        history = c.budget_history(world.binary)
    assert isinstance(budget, pd.DataFrame) and len(budget) == 1
    row = budget.iloc[0]
    assert row["dataset_id"] == world.binary and row["epsilon"] == 50.0
    assert math.isclose(row["epsilon_spent"] + row["epsilon_remaining"], 50.0, rel_tol=1e-9)
    assert list(history.columns[:5]) == [
        "at",
        "kind",
        "job_id",
        "epsilon_spent",
        "your_epsilon_spent",
    ]
    assert len(history) >= 2 and history["at"].is_monotonic_increasing
    assert history["epsilon_spent"].is_monotonic_increasing  # only charges on this dataset
    assert math.isclose(history["epsilon_spent"].iloc[-1], row["epsilon_spent"], rel_tol=1e-9)
    assert history.attrs["epsilon"] == 50.0


def test_estimate_prices_without_charging(world: World) -> None:
    with world.client() as c:
        before = c.budget(world.binary).iloc[0]
        estimate = c.estimate(world.binary, "logistic_regression", epsilon=1.0, delta=1e-6)
        after = c.budget(world.binary).iloc[0]
    assert estimate.admissible is True
    assert estimate.epsilon_spent_after > before["epsilon_spent"]
    assert estimate.noise_scale > 0 and estimate.sensitivity > 0 and estimate.steps >= 1
    assert after["epsilon_spent"] == before["epsilon_spent"]


# --- grants ------------------------------------------------------------------------------------


def test_grants_are_a_dataframe_and_revocation_stops_new_jobs(world: World) -> None:
    tag = uuid.uuid4().hex[:6]
    newcomer = f"sdk-newcomer-{tag}"
    newcomer_key = world.server.key(newcomer, "analyst")
    with (
        world.client(world.owner_key) as owner,
        world.client(world.owner_key, page_size=1) as paged,
        world.client() as analyst,
        world.client(newcomer_key) as late,
    ):
        granted = owner.grant(world.binary, newcomer, epsilon_cap=2.0)
        assert granted["epsilon_cap"] == 2.0
        late.estimate(world.binary, "logistic_regression", epsilon=0.5, delta=1e-6)  # allowed

        grants = owner.grants(world.binary)
        assert isinstance(grants, pd.DataFrame)
        assert list(grants["principal"]) == [world.analyst, newcomer]  # oldest first
        assert grants["created_at"].is_monotonic_increasing
        by_name = grants.set_index("principal")
        assert math.isnan(by_name.loc[world.analyst, "epsilon_cap"])
        assert by_name.loc[newcomer, "epsilon_cap"] == 2.0
        mine = analyst.budget(world.binary).iloc[0]["your_epsilon_spent"]
        assert by_name.loc[world.analyst, "epsilon_spent"] == pytest.approx(mine, rel=1e-12)
        assert mine > 0 and by_name.loc[newcomer, "epsilon_spent"] == 0.0
        pd.testing.assert_frame_equal(paged.grants(world.binary), grants)  # pages followed

        with pytest.raises(dpfit.AuthError):
            analyst.grants(world.binary)
        revoked = owner.revoke_grant(world.binary, newcomer)
        assert revoked["principal"] == newcomer and revoked["revoked_at"]
        assert list(owner.grants(world.binary)["principal"]) == [world.analyst]
        with pytest.raises(dpfit.NotFound):
            late.estimate(world.binary, "logistic_regression", epsilon=0.5, delta=1e-6)
        with pytest.raises(dpfit.NotFound):
            late.submit(world.binary, "logistic_regression", epsilon=0.5, delta=1e-6)
        with pytest.raises(dpfit.NotFound):
            owner.revoke_grant(world.binary, newcomer)  # nothing left to revoke
