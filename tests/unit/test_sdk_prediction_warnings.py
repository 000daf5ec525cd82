"""The client's local prediction warns as the service's does (issue 26 item 4): the same cells,
kinds and messages as ``service/domain/prediction_warnings.py`` for the same rows, one
``dpfit.PredictionWarning`` from ``Model.predict`` attributed to the caller's line, none for
clean rows."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
from dpfit import Model, PredictionWarning

from service.data.encoding import Encoder
from service.domain.prediction_warnings import prediction_warnings
from tests.support.walkthrough import CREDIT_FEATURES

GOOD = {"age": 45, "hours_per_week": 50, "education": "PhD", "sector": "private"}
ROWS: list[dict[str, Any]] = [
    GOOD,
    dict(GOOD, education="Phd"),
    dict(GOOD, education="phd "),
    dict(GOOD, age=120, hours_per_week=-3),
    dict(GOOD, age="200", hours_per_week="0.5"),
    dict(GOOD, sector=None, age="n/a"),
    dict(GOOD, education="Doctorate", sector=""),
    dict(GOOD, age=18, hours_per_week=99, education=" Masters "),
    dict(GOOD, age=True, education=1),
]


def credit_model() -> Model:
    encoder = Encoder(CREDIT_FEATURES, fit_intercept=True)
    body = {
        "id": "m_test",
        "job_id": "job_test",
        "dataset_id": "ds_test",
        "model": {"type": "logistic_regression", "l2": 0.01, "fit_intercept": True},
        "coefficients": np.linspace(-1.0, 1.0, encoder.n_features).tolist(),
        "intercept": 0.1,
        "feature_names": encoder.feature_names,
        "encoding": encoder.to_dict(),
        "privacy": {"epsilon": 1.0, "delta": 1e-6},
    }
    return Model.from_json(body, {"positive": ">50K", "negative": "<=50K"})


def test_local_warnings_are_the_services() -> None:
    service = prediction_warnings(Encoder(CREDIT_FEATURES, fit_intercept=True), ROWS)
    local = credit_model().prediction_warnings(ROWS)
    assert local == [vars(w) for w in service.listed]
    assert {(w["row"], w["kind"]) for w in local} >= {
        (1, "unknown_category"),
        (2, "unknown_category"),
        (3, "out_of_bounds"),
        (4, "out_of_bounds"),
        (5, "missing"),
        (6, "missing"),
        (6, "unknown_category"),
        (8, "unknown_category"),
    }
    assert not any(w["row"] in (0, 7) for w in local)


def test_booleans_in_numeric_columns_warn_alike() -> None:
    rows = [dict(ROWS[0], age=True), dict(ROWS[0], hours_per_week=False)]
    service = prediction_warnings(Encoder(CREDIT_FEATURES, fit_intercept=True), rows)
    local = credit_model().prediction_warnings(rows)
    assert local == [vars(w) for w in service.listed] and len(local) == 2
    assert local[0]["message"].startswith("true (read as 1)")


def test_model_predict_warns_once_at_the_callers_line() -> None:
    model = credit_model()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.predict([GOOD, dict(GOOD, education="Phd")])
    assert len(caught) == 1
    warning = caught[0]
    assert issubclass(warning.category, PredictionWarning)
    assert warning.filename == __file__
    assert "row 1 education" in str(warning.message) and "'PhD'" in str(warning.message)
    assert isinstance(warning.message, PredictionWarning)
    assert [w["column"] for w in warning.message.warnings] == ["education"]


def test_clean_rows_do_not_warn() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", PredictionWarning)
        credit_model().predict([GOOD, ROWS[7]])


def test_the_warning_quotes_a_few_and_counts_all() -> None:
    with pytest.warns(PredictionWarning, match=r"12 cell\(s\).*… 7 more"):
        credit_model().predict_proba([dict(GOOD, education="Phd")] * 12)


def test_client_predict_warns_with_the_services_warnings() -> None:
    """The remote prediction: the answer's ``warnings`` stay in the answer and are issued as one
    PredictionWarning at the caller's line (the service's answer mocked at the transport)."""
    import httpx
    from dpfit import Client

    listed = [
        {"row": 1, "column": "education", "kind": "unknown_category", "message": "'Phd' is …"}
    ]

    def answer(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/v1/models/m_1/predict"
        body = {"predictions": [">50K", "<=50K"], "probabilities": [0.6, 0.4]}
        return httpx.Response(200, json={**body, "warnings": listed, "warnings_total": 1})

    client = Client("http://dpfit.test", "key", transport=httpx.MockTransport(answer))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = client.predict("m_1", [GOOD, dict(GOOD, education="Phd")])
    assert got["warnings"] == listed
    assert len(caught) == 1 and issubclass(caught[0].category, PredictionWarning)
    assert caught[0].filename == __file__ and "row 1 education" in str(caught[0].message)


def test_the_sklearn_pipeline_warns_too() -> None:
    pytest.importorskip("sklearn")
    pipeline = credit_model().to_sklearn()
    with pytest.warns(PredictionWarning, match="row 0 education"):
        pipeline.predict([dict(GOOD, education="Phd")])
    with warnings.catch_warnings():
        warnings.simplefilter("error", PredictionWarning)
        pipeline.predict([GOOD])
