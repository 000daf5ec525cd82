"""Registration that forgives (issue 26, item 2), on SQLite and PostgreSQL (the in-process app).

- ``DELETE /v1/datasets/{id}`` withdraws a dataset no job was submitted on: gone, its claims
  released (the corrected spec registers on the same source), its grants gone, a record for
  admins; 409 (problem+json on ``dataset_id``) once a job was charged, also after a refund.
- The label rule: a registration most of whose non-empty labels are outside the declared values
  is refused with 422 naming the label field, unless the body says ``"strict": false``.
- ``POST /v1/datasets/validate``: the validation report and the verdict, nothing created.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.inprocess import in_process_server
from tests.support.walkthrough import credit_dataset, logistic_job

FEATURES = [{"name": "x", "type": "numeric", "min": -10.0, "max": 10.0}]


def table(path: Path, labels: list[str]) -> str:
    """A CSV of one feature and the ``labels`` (an empty string is a missing label)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [f"{(i % 7) - 3.5},{label}" for i, label in enumerate(labels)]
    path.write_text("\n".join(["x,y", *rows]) + "\n")
    return path.name


def binary(uri: str, positive: Any = "malignant", negative: Any = "benign", **extra: Any) -> Any:
    return {
        "name": "cells",
        "source": {"uri": uri},
        "label": {"column": "y", "positive": positive, "negative": negative},
        "features": [dict(f) for f in FEATURES],
        "budget": {"epsilon": 1.0, "delta": 1e-6},
        **extra,
    }


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def world(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, Any]]:
    if request.param == "postgres":
        url = str(request.getfixturevalue("private_postgres_database"))
    else:
        url = f"sqlite:///{tmp_path / 'dpfit.db'}"
    root = tmp_path / "data"
    root.mkdir()
    with in_process_server(url, root) as app:
        yield {
            "root": root,
            "owner": app.client(app.key("olga", "owner")),
            "other": app.client(app.key("otto", "owner")),
            "analyst": app.client(app.key("ann", "analyst")),
            "admin": app.client(app.keys["admin"]),
        }


def created(response: Any) -> str:
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def problem(response: Any, status: int, field: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body: dict[str, Any] = response.json()
    assert body["field"] == field, body
    return body


# --------------------------------------------------------------------------------------------
# Withdrawal
# --------------------------------------------------------------------------------------------


def test_a_dataset_without_charges_is_withdrawn_and_its_source_freed(world: dict[str, Any]) -> None:
    owner, admin, analyst = world["owner"], world["admin"], world["analyst"]
    # The slip: a budget far too small, registered (exit 0) on the source's only budget.
    slip = credit_dataset(epsilon=0.01)
    dataset_id = created(owner.post("/v1/datasets", json=slip))
    grant = owner.post(f"/v1/datasets/{dataset_id}/grants", json={"principal": "ann"})
    assert grant.status_code == 201, grant.text
    again = owner.post("/v1/datasets", json=slip)
    assert again.status_code == 409  # one source, one budget: the slip is locked in…

    gone = owner.delete(f"/v1/datasets/{dataset_id}")
    assert gone.status_code == 200, gone.text
    record = gone.json()
    assert record["dataset_id"] == dataset_id and record["withdrawn_by"] == "olga"
    assert record["budget"] == {"epsilon": 0.01, "delta": 1e-5}
    for who in (owner, admin, analyst):
        assert who.get(f"/v1/datasets/{dataset_id}").status_code == 404
    assert owner.delete(f"/v1/datasets/{dataset_id}").status_code == 404  # once

    # …until withdrawn: the corrected spec registers on the same source (claims released).
    fixed = dict(slip, budget={"epsilon": 3.0, "delta": 1e-5})
    fresh_id = created(owner.post("/v1/datasets", json=fixed))
    assert fresh_id != dataset_id
    # The grant went with the dataset: the analyst sees nothing until granted again.
    assert analyst.get(f"/v1/datasets/{fresh_id}").status_code == 404

    # The record stays, for admins only.
    listed = admin.get("/v1/datasets/withdrawals")
    assert listed.status_code == 200, listed.text
    assert [(w["dataset_id"], w["owner"]) for w in listed.json()] == [(dataset_id, "olga")]
    assert owner.get("/v1/datasets/withdrawals").status_code == 403
    assert analyst.get("/v1/datasets/withdrawals").status_code == 403


def test_withdrawal_is_for_the_owner_and_admins(world: dict[str, Any]) -> None:
    owner, other, analyst, admin = world["owner"], world["other"], world["analyst"], world["admin"]
    dataset_id = created(owner.post("/v1/datasets", json=credit_dataset()))
    owner.post(f"/v1/datasets/{dataset_id}/grants", json={"principal": "ann"})
    assert other.delete(f"/v1/datasets/{dataset_id}").status_code == 404
    assert analyst.delete(f"/v1/datasets/{dataset_id}").status_code == 403
    assert owner.get(f"/v1/datasets/{dataset_id}").status_code == 200  # still there
    by_admin = admin.delete(f"/v1/datasets/{dataset_id}")
    assert by_admin.status_code == 200 and by_admin.json()["withdrawn_by"] == "admin"


def test_a_dataset_with_a_charge_cannot_be_withdrawn(world: dict[str, Any]) -> None:
    owner, analyst = world["owner"], world["analyst"]
    dataset_id = created(owner.post("/v1/datasets", json=credit_dataset()))
    owner.post(f"/v1/datasets/{dataset_id}/grants", json={"principal": "ann"})
    job = analyst.post("/v1/jobs", json=logistic_job(dataset_id))
    assert job.status_code == 202, job.text

    refused = problem(owner.delete(f"/v1/datasets/{dataset_id}"), 409, "dataset_id")
    assert refused["title"] == "Dataset has charges" and "append-only" in refused["detail"]
    # Cancelled before any worker read it (refunded): the ledger still holds both rows.
    cancelled = analyst.post(f"/v1/jobs/{job.json()['id']}/cancel")
    assert cancelled.status_code == 200, cancelled.text
    problem(owner.delete(f"/v1/datasets/{dataset_id}"), 409, "dataset_id")
    assert owner.get(f"/v1/datasets/{dataset_id}").status_code == 200
    assert len(owner.get(f"/v1/datasets/{dataset_id}/ledger").json()["charges"]) == 2


# --------------------------------------------------------------------------------------------
# The label rule
# --------------------------------------------------------------------------------------------


def test_most_labels_outside_the_declared_values_is_refused_naming_the_label(
    world: dict[str, Any],
) -> None:
    """The issue's typo, as data: 3 of 5 labels are "malignant", declared "malignent"."""
    owner, root = world["owner"], world["root"]
    uri = table(root / "typo.csv", ["malignant", "benign", "malignant", "benign", "malignant"])
    got = problem(owner.post("/v1/datasets", json=binary(uri, "malignent")), 422, "label.positive")
    assert "3 of 5" in got["detail"] and '"strict": false' in got["detail"]
    assert owner.get("/v1/datasets").json() == []  # nothing registered, nothing claimed
    # Turned off explicitly: registered, with the counts in the report.
    forced = owner.post("/v1/datasets", json=binary(uri, "malignent", strict=False))
    assert created(forced)
    assert forced.json()["validation"]["label"]["outside_declared"] == 3


def test_the_rule_counts_non_empty_labels_and_needs_more_than_half(world: dict[str, Any]) -> None:
    owner, root = world["owner"], world["root"]
    # 2 of 4 non-empty labels outside: exactly half is not most — registered.
    half = table(root / "half.csv", ["yes", "no", "maybe", "perhaps", ""])
    assert created(owner.post("/v1/datasets", json=binary(half, "yes", "no")))
    # 3 of 4 non-empty labels outside (4 empty ones are missing, not wrong): refused.
    most = table(root / "most.csv", ["yes", "maybe", "perhaps", "unsure", "", "", "", ""])
    problem(owner.post("/v1/datasets", json=binary(most, "yes", "no")), 422, "label.positive")


def test_the_rule_names_the_classes_and_the_numeric_label_column(world: dict[str, Any]) -> None:
    owner, root = world["owner"], world["root"]
    uri = table(root / "multi.csv", ["a", "b", "c", "d", "e"])
    categorical = binary(uri)
    categorical["label"] = {"column": "y", "type": "categorical", "classes": ["a", "x", "z"]}
    problem(owner.post("/v1/datasets", json=categorical), 422, "label.classes")
    numeric = binary(table(root / "words.csv", ["1.5", "high", "low", "mid", "2"]))
    numeric["label"] = {"column": "y", "type": "numeric"}
    problem(owner.post("/v1/datasets", json=numeric), 422, "label.column")
    numeric["strict"] = False
    assert created(owner.post("/v1/datasets", json=numeric))


def test_strict_true_still_refuses_any_label_outside(world: dict[str, Any]) -> None:
    owner, root = world["owner"], world["root"]
    uri = table(root / "one-off.csv", ["yes", "no", "yes", "no", "maybe"])
    got = problem(
        owner.post("/v1/datasets", json=binary(uri, "yes", "no", strict=True)),
        422,
        "label.positive",
    )
    assert got["detail"].startswith("strict: 1 of 5")
    assert created(owner.post("/v1/datasets", json=binary(uri, "yes", "no")))  # the default


# --------------------------------------------------------------------------------------------
# The dry run
# --------------------------------------------------------------------------------------------


def test_validate_shows_the_report_and_creates_nothing(world: dict[str, Any]) -> None:
    owner, root = world["owner"], world["root"]
    uri = table(root / "typo.csv", ["malignant", "benign", "malignant", "benign", "malignant"])
    checked = owner.post("/v1/datasets/validate", json=binary(uri, "malignent"))
    assert checked.status_code == 200, checked.text
    check = checked.json()
    assert check["would_register"] is False
    assert check["refusal"]["field"] == "label.positive" and "3 of 5" in check["refusal"]["detail"]
    assert check["n_rows"] == 5 and check["validation"]["label"]["outside_declared"] == 3

    fixed = owner.post("/v1/datasets/validate", json=binary(uri))
    assert fixed.status_code == 200 and fixed.json()["would_register"] is True, fixed.text
    assert fixed.json()["refusal"] is None
    assert owner.get("/v1/datasets").json() == []  # the dry runs created nothing…
    dataset_id = created(owner.post("/v1/datasets", json=binary(uri)))  # …nor claimed anything
    # What registration refuses before validating, the dry run refuses the same way.
    again = owner.post("/v1/datasets/validate", json=binary(uri))
    assert again.status_code == 409 and again.json()["dataset_id"] == dataset_id, again.text
    problem(owner.post("/v1/datasets/validate", json=binary("absent.csv")), 422, "source.uri")
    assert world["analyst"].post("/v1/datasets/validate", json=binary(uri)).status_code == 403


# --------------------------------------------------------------------------------------------
# The Python client
# --------------------------------------------------------------------------------------------


def test_the_python_client_validates_and_withdraws(tmp_path: Path) -> None:
    import dpfit

    root = tmp_path / "data"
    root.mkdir()
    uri = table(root / "typo.csv", ["malignant", "benign", "malignant", "benign", "malignant"])
    with in_process_server(f"sqlite:///{tmp_path / 'dpfit.db'}", root) as app:
        transport = app.app_client._transport  # the in-process app behind httpx
        key = app.key("olga", "owner")
        with dpfit.Client("http://testserver", key, transport=transport, retries=0) as client:
            check = client.validate_dataset(binary(uri, "malignent"))
            assert check["would_register"] is False
            assert check["refusal"]["field"] == "label.positive"
            with pytest.raises(dpfit.InvalidSpec):
                client.register_dataset(binary(uri, "malignent"))
            dataset = client.register_dataset(binary(uri))
            withdrawn = client.withdraw_dataset(dataset["id"])
            assert withdrawn["dataset_id"] == dataset["id"]
            with pytest.raises(dpfit.NotFound):
                client.withdraw_dataset(dataset["id"])
            assert client.register_dataset(binary(uri))["id"] != dataset["id"]  # freed
