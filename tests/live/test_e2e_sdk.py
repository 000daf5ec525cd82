"""The whole story of issue #2 through the generated SDK, against live `dpfit serve` processes
on SQLite and on PostgreSQL: keys → dataset → grant → job → model → predict → budget/ledger."""

from __future__ import annotations

import time
import uuid

import pytest
from dpfit_client import AuthenticatedClient, Client
from dpfit_client.api.datasets import create_dataset, create_grant, get_budget, get_ledger
from dpfit_client.api.health import healthz
from dpfit_client.api.jobs import create_job, get_job
from dpfit_client.api.keys import create_api_key
from dpfit_client.api.models import get_model, predict
from dpfit_client.api.optimizers import list_optimizers
from dpfit_client.models import (
    DatasetCreate,
    GrantCreate,
    JobCreate,
    JobOut,
    KeyCreate,
    PredictRequest,
    Problem,
)

from tests.support.live import LiveServer
from tests.support.walkthrough import PREDICT_ROWS, credit_dataset, logistic_job


def sdk(server: LiveServer, key: str) -> AuthenticatedClient:
    return AuthenticatedClient(base_url=server.base_url, token=key, timeout=60.0)


def wait_for(client: AuthenticatedClient, job_id: str, timeout: float = 120.0) -> JobOut:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = get_job.sync(job_id, client=client)
        assert isinstance(job, JobOut)
        if job.status in ("succeeded", "failed", "cancelled"):
            return job
        time.sleep(0.1)
    raise AssertionError(f"job {job_id} did not finish")


def test_whole_story_through_the_sdk(server: LiveServer) -> None:
    tag = uuid.uuid4().hex[:6]
    admin = sdk(server, server.key("admin", "admin"))
    health = healthz.sync(client=Client(base_url=server.base_url))
    assert health is not None and health.status == "ok"

    owner_key = create_api_key.sync(
        client=admin, body=KeyCreate.from_dict({"name": f"owner-{tag}", "role": "owner"})
    )
    analyst_key = create_api_key.sync(
        client=admin, body=KeyCreate.from_dict({"name": f"analyst-{tag}", "role": "analyst"})
    )
    assert owner_key is not None and analyst_key is not None
    owner, analyst = sdk(server, owner_key.key), sdk(server, analyst_key.key)

    dataset = create_dataset.sync(
        client=owner, body=DatasetCreate.from_dict(credit_dataset(epsilon=3.0))
    )
    assert dataset is not None and not isinstance(dataset, Problem)
    assert (dataset.n_rows, dataset.n_features) == (4000, 9)

    # Not granted yet: the analyst cannot see it (404, not 403).
    job_body = JobCreate.from_dict(logistic_job(dataset.id, epsilon=1.0, delta=1e-6))
    refused = create_job.sync_detailed(client=analyst, body=job_body)
    assert refused.status_code == 404
    assert isinstance(refused.parsed, Problem) and refused.parsed.field == "dataset_id"

    grant = create_grant.sync(
        dataset.id, client=owner, body=GrantCreate(principal=f"analyst-{tag}")
    )
    assert grant is not None and grant.principal == f"analyst-{tag}"

    catalog = list_optimizers.sync(client=analyst)
    assert catalog is not None and "output_perturbation_gd" in [o.name for o in catalog]

    submitted = create_job.sync_detailed(client=analyst, body=job_body, idempotency_key=f"k-{tag}")
    assert submitted.status_code == 202
    job = submitted.parsed
    assert isinstance(job, JobOut) and job.status == "queued"
    retried = create_job.sync_detailed(client=analyst, body=job_body, idempotency_key=f"k-{tag}")
    assert isinstance(retried.parsed, JobOut) and retried.parsed.id == job.id

    done = wait_for(analyst, job.id)
    assert done.status == "succeeded", done.error
    assert done.progress.step == done.progress.total > 0
    assert done.model_id is not None

    model = get_model.sync(done.model_id, client=analyst)
    assert model is not None and not isinstance(model, Problem)
    assert len(model.coefficients) == len(model.feature_names) == 9
    assert model.intercept is not None
    assert model.privacy.mechanism == "gaussian"
    assert model.privacy.epsilon == 1.0 and model.privacy.delta == 1e-6
    assert model.privacy.noise_scale > 0 and model.privacy.sensitivity > 0
    assert set(model.to_dict()) == {
        "id",
        "job_id",
        "dataset_id",
        "model",
        "coefficients",
        "intercept",
        "feature_names",
        "encoding",
        "privacy",
        "created_at",
        "classes",
    }
    assert model.classes is None  # a binary label: one coefficient vector

    predicted = predict.sync(
        done.model_id, client=analyst, body=PredictRequest.from_dict({"rows": PREDICT_ROWS})
    )
    assert predicted is not None and not isinstance(predicted, Problem)
    assert set(predicted.predictions) <= {">50K", "<=50K"}
    assert all(0.0 <= p <= 1.0 for p in predicted.probabilities)

    budget = get_budget.sync(dataset.id, client=analyst)
    assert budget is not None and not isinstance(budget, Problem)
    assert budget.jobs_charged == 1
    assert 0 < budget.epsilon_spent <= budget.epsilon
    assert budget.epsilon_remaining == pytest.approx(budget.epsilon - budget.epsilon_spent)

    ledger = get_ledger.sync(dataset.id, client=owner)
    assert ledger is not None and not isinstance(ledger, Problem)
    assert [c.kind for c in ledger.charges] == ["charge"] and ledger.consistent
    assert ledger.charges[0].job_id == job.id

    # A job the remaining budget cannot cover: 409 saying what remains; nothing charged.
    greedy = create_job.sync_detailed(
        client=analyst, body=JobCreate.from_dict(logistic_job(dataset.id, epsilon=5.0, delta=1e-6))
    )
    assert greedy.status_code == 409
    assert isinstance(greedy.parsed, Problem)
    assert greedy.parsed.epsilon_remaining == pytest.approx(budget.epsilon_remaining)
    assert "remaining" in greedy.parsed.detail
    after = get_budget.sync(dataset.id, client=analyst)
    assert after is not None and not isinstance(after, Problem) and after.jobs_charged == 1
