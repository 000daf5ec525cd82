"""Predictions that warn (issue 26 item 4): ``POST /v1/models/{id}/predict`` lists the cells of
the caller's rows whose encoding changed their meaning — an undeclared category (``"Phd"`` for
``"PhD"``), a number outside the declared bounds (clipped), a missing value — and nothing for
rows the encoding takes as they are. In-process app, real database, the worker's ``run_job``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from service.data.encoding import Encoder
from service.domain.prediction_warnings import prediction_warnings
from service.workers.runner import run_job
from tests.support.inprocess import bearer, in_process_app
from tests.support.walkthrough import COPIES, CREDIT_FEATURES, credit_dataset, logistic_job

GOOD = {"age": 45, "hours_per_week": 50, "education": "PhD", "sector": "private"}


@pytest.fixture()
def model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    data_root = tmp_path / "data"
    data_root.mkdir()
    monkeypatch.setenv("DPFIT_DATA_ROOTS", f"{data_root}:{COPIES}")
    url = f"sqlite:///{tmp_path / 'dpfit.db'}"
    with in_process_app(url, data_root) as (client, admin):
        keys = {}
        for name, role in [("olivia", "owner"), ("ann", "analyst")]:
            response = client.post(
                "/v1/keys", json={"name": name, "role": role}, headers=bearer(admin)
            )
            keys[name] = response.json()["key"]
        dataset = client.post(
            "/v1/datasets", json=credit_dataset(), headers=bearer(keys["olivia"])
        ).json()
        client.post(
            f"/v1/datasets/{dataset['id']}/grants",
            json={"principal": "ann"},
            headers=bearer(keys["olivia"]),
        ).raise_for_status()
        job = client.post(
            "/v1/jobs", json=logistic_job(dataset["id"]), headers=bearer(keys["ann"])
        ).json()
        assert run_job(job["id"], 1, url) == "succeeded"
        model_id = client.get(f"/v1/jobs/{job['id']}", headers=bearer(keys["ann"])).json()[
            "model_id"
        ]
        yield {"client": client, "key": keys["ann"], "model_id": model_id}


def predict(model: dict[str, Any], rows: list[dict[str, Any]]) -> dict[str, Any]:
    response = model["client"].post(
        f"/v1/models/{model['model_id']}/predict",
        json={"rows": rows},
        headers=bearer(model["key"]),
    )
    assert response.status_code == 200, response.text
    return dict(response.json())


def test_predict_lists_what_the_encoding_changed(model: dict[str, Any]) -> None:
    rows = [
        GOOD,
        dict(GOOD, education="Phd"),  # a one-letter slip
        dict(GOOD, age=120, hours_per_week=-3),  # both outside their declared bounds
        dict(GOOD, sector=None, age="n/a"),  # missing, and text that is no number
        dict(GOOD, education="Doctorate"),  # nothing like a declared category
    ]
    answer = predict(model, rows)
    assert len(answer["predictions"]) == 5
    found = {(w["row"], w["column"]): w for w in answer["warnings"]}
    assert set(found) == {
        (1, "education"),
        (2, "age"),
        (2, "hours_per_week"),
        (3, "age"),
        (3, "sector"),
        (4, "education"),
    }
    assert answer["warnings_total"] == 6
    assert [w["row"] for w in answer["warnings"]] == sorted(w["row"] for w in answer["warnings"])
    assert found[1, "education"]["kind"] == "unknown_category"
    assert "'PhD'" in found[1, "education"]["message"]  # the hint names the declared spelling
    assert "did you mean" not in found[4, "education"]["message"]
    assert (
        found[2, "age"]["kind"] == "out_of_bounds" and "clipped to 90" in found[2, "age"]["message"]
    )
    assert "clipped to 1" in found[2, "hours_per_week"]["message"]
    assert found[3, "age"]["kind"] == found[3, "sector"]["kind"] == "missing"


def test_clean_rows_get_no_warnings(model: dict[str, Any]) -> None:
    """Values at the declared bounds, numbers sent as text and categories up to the public
    normalisation (surrounding space) encode as they are: no warning."""
    rows = [
        GOOD,
        dict(GOOD, age=18, hours_per_week=99),
        dict(GOOD, age=" 42 ", education=" Masters "),
    ]
    answer = predict(model, rows)
    assert answer["warnings"] == [] and answer["warnings_total"] == 0


def test_the_listed_warnings_are_capped_and_counted() -> None:
    encoder = Encoder(CREDIT_FEATURES, fit_intercept=True)
    rows = [dict(GOOD, education="Phd") for _ in range(30)]
    found = prediction_warnings(encoder, rows, limit=10)
    assert len(found.listed) == 10 and found.total == 30
    assert [w.row for w in found.listed] == list(range(10))


def test_a_boolean_cell_is_spelled_as_json_sent_it() -> None:
    """A JSON ``true`` in a numeric column is read as 1: the warning said "True is below the
    declared min 18" (Python's spelling of the value)."""
    encoder = Encoder(CREDIT_FEATURES, fit_intercept=True)
    found = prediction_warnings(encoder, [dict(GOOD, age=True)], limit=10)
    (warning,) = found.listed
    assert warning.message.startswith("true (read as 1) is below the declared min 18")
    assert "True" not in warning.message
