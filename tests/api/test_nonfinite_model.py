"""Defence in depth (service/workers/runner.py): a fit whose result has a non-finite
coefficient is never stored or released. The job fails with the generic message (no value in
it), no model exists, and the charge stands (the data was read).

In-process app on SQLite with the worker's own ``run_job``; the optimizer's ``fit`` is replaced
by one returning NaN (planning refuses every known spec that would overflow, so a real spec no
longer gets there).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from service.optimizers.kits.registry import get_optimizer
from service.workers import runner
from service.workers.runner import FAILED_READING, run_job
from tests.support.inprocess import bearer, in_process_app
from tests.support.walkthrough import EXAMPLES, credit_dataset, logistic_job


class _Diverging:
    """An optimizer whose fit returns a non-finite vector (everything else delegated)."""

    def __init__(self, name: str, bad: float) -> None:
        self._inner, self._bad = get_optimizer(name), bad

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._inner, attr)

    def fit(self, plan: Any, loss: Any, X: Any, y: Any, rng: Any, progress: Any) -> np.ndarray:
        w = np.asarray(self._inner.fit(plan, loss, X, y, rng, progress), dtype=np.float64)
        w = w.copy()
        w[0] = self._bad
        return w


@pytest.fixture
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[TestClient, str, str]]:
    root = tmp_path / "data"
    root.mkdir()
    (root / "credit.csv").write_bytes((EXAMPLES / "credit.csv").read_bytes())
    monkeypatch.setenv("DPFIT_DATA_ROOTS", str(root))
    url = f"sqlite:///{tmp_path / 'dpfit.db'}"
    with in_process_app(url, root) as (client, admin):
        yield client, admin, url


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_a_non_finite_fit_fails_generically_and_releases_nothing(
    app: tuple[TestClient, str, str], monkeypatch: pytest.MonkeyPatch, bad: float
) -> None:
    client, admin, url = app
    keys = {}
    for name, role in [("olga", "owner"), ("ann", "analyst")]:
        made = client.post("/v1/keys", json={"name": name, "role": role}, headers=bearer(admin))
        assert made.status_code == 201, made.text
        keys[name] = made.json()["key"]
    created = client.post(
        "/v1/datasets", json=credit_dataset(uri="credit.csv"), headers=bearer(keys["olga"])
    )
    assert created.status_code == 201, created.text
    dataset_id = created.json()["id"]
    client.post(
        f"/v1/datasets/{dataset_id}/grants", json={"principal": "ann"}, headers=bearer(keys["olga"])
    )
    submitted = client.post("/v1/jobs", json=logistic_job(dataset_id), headers=bearer(keys["ann"]))
    assert submitted.status_code == 202, submitted.text
    job_id = submitted.json()["id"]

    monkeypatch.setattr(runner, "get_optimizer", lambda name: _Diverging(name, bad))
    assert run_job(job_id, 1, url) == "failed"

    job = client.get(f"/v1/jobs/{job_id}", headers=bearer(keys["ann"])).json()
    assert job["status"] == "failed" and job["model_id"] is None
    assert job["error"] == FAILED_READING
    assert job["refunded"] is False
    budget = client.get(f"/v1/datasets/{dataset_id}/budget", headers=bearer(keys["ann"]))
    assert budget.json()["jobs_charged"] == 1
    models = client.get("/v1/models", headers=bearer(keys["ann"]))
    if models.status_code == 200:
        assert all(m.get("job_id") != job_id for m in models.json())
