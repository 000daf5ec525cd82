"""The budget through the API: a price before the charge (`POST /v1/jobs/estimate`), the
budget's history, exact Gaussian accounting, and refunds of curves holding +∞.

In-process app (TestClient, a dispatcher that runs nothing, so jobs stay queued and a cancel
refunds) on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tests.support.inprocess import bearer, in_process_app
from tests.support.walkthrough import EXAMPLES, credit_dataset, logistic_job


@dataclass
class Team:
    client: TestClient
    data_root: Path
    keys: dict[str, str]
    counter: Iterator[int] = field(default_factory=itertools.count)

    def call(self, actor: str, method: str, path: str, json: Any = None) -> httpx.Response:
        return self.client.request(method, path, json=json, headers=bearer(self.keys[actor]))

    def ok(self, actor: str, method: str, path: str, json: Any = None) -> Any:
        response = self.call(actor, method, path, json)
        assert response.status_code < 300, (method, path, response.text)
        return response.json()

    def dataset(
        self,
        epsilon: float = 3.0,
        delta: float = 1e-5,
        cap: float | None = None,
        grants: tuple[str, ...] = ("ann", "bob"),
    ) -> str:
        """A fresh dataset of the owner (a file of its own), granted to ``grants``."""
        i = next(self.counter)
        lines = (EXAMPLES / "credit.csv").read_text().splitlines()[:201]
        lines.append(f"{18 + i % 70},{1 + (i // 70) % 99},HS,public,<=50K")
        name = f"credit-{i}.csv"
        (self.data_root / name).write_text("\n".join(lines) + "\n")
        body = credit_dataset(epsilon=epsilon, delta=delta, uri=name)
        dataset_id = str(self.ok("owner", "POST", "/v1/datasets", body)["id"])
        for analyst in grants:
            grant: dict[str, Any] = {"principal": analyst}
            if cap is not None and analyst == "ann":
                grant["epsilon_cap"] = cap
            self.ok("owner", "POST", f"/v1/datasets/{dataset_id}/grants", grant)
        return dataset_id


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def team(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Team]:
    if request.param == "postgres":
        url = str(request.getfixturevalue("private_postgres_database"))
    else:
        url = f"sqlite:///{tmp_path / 'dpfit.db'}"
    data_root = tmp_path / "data"
    data_root.mkdir()
    with in_process_app(url, data_root) as (client, admin):
        t = Team(client=client, data_root=data_root, keys={"admin": admin})
        for actor, role in (("owner", "owner"), ("ann", "analyst"), ("bob", "analyst")):
            created = t.ok("admin", "POST", "/v1/keys", {"name": actor, "role": role})
            t.keys[actor] = str(created["key"])
        yield t


def job(dataset_id: str, kind: str, epsilon: float) -> dict[str, Any]:
    """A job body: Gaussian output perturbation, dp_gd (T Gaussians), subsampled noisy SGD
    (Rényi only) or pure ε-DP output perturbation."""
    if kind == "pure":
        return logistic_job(dataset_id, epsilon=epsilon, delta=0.0)
    body = logistic_job(dataset_id, epsilon=epsilon, delta=1e-6)
    if kind == "dp_gd":
        body["optimizer"] = {"name": "dp_gd", "params": {"iterations": 20}}
    elif kind == "sampled":
        body["optimizer"] = {"name": "noisy_sgd_bst14", "params": {"iterations": 30}}
    return body


def budget(team: Team, dataset_id: str, actor: str = "owner") -> dict[str, Any]:
    result: dict[str, Any] = team.ok(actor, "GET", f"/v1/datasets/{dataset_id}/budget")
    return result


def charges(team: Team, dataset_id: str) -> int:
    return len(team.ok("owner", "GET", f"/v1/datasets/{dataset_id}/ledger")["charges"])


def test_the_estimate_names_the_job_target_and_the_budget_apart(team: Team) -> None:
    """A newcomer read the estimate's top-level ``epsilon``/``delta`` (the dataset's ε_B, δ_B)
    as the job's ε. The job's own target is ``privacy``, the budget ``budget`` (as in a job and
    a dataset); the old fields stay, marked deprecated and described as the budget's."""
    dataset_id = team.dataset(epsilon=3.0, delta=1e-5)
    estimate = team.ok("ann", "POST", "/v1/jobs/estimate", job(dataset_id, "gaussian", 0.7))
    assert estimate["privacy"] == {"epsilon": 0.7, "delta": 1e-6}
    assert estimate["budget"] == {"epsilon": 3.0, "delta": 1e-5}
    assert (estimate["epsilon"], estimate["delta"]) == (3.0, 1e-5)  # kept for old clients
    schema = team.client.get("/openapi.json").json()["components"]["schemas"]["JobEstimateOut"]
    for name in ("epsilon", "delta"):
        field = schema["properties"][name]
        assert field["deprecated"] is True
        assert f"budget.{name}" in field["description"] and "NOT the job" in field["description"]
    assert "not the job" in schema["properties"]["budget"]["description"]


KINDS = st.sampled_from(["gaussian", "dp_gd", "sampled", "pure"])


@settings(
    max_examples=6,
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],  # no shrinking: each step plans
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    steps=st.lists(
        st.tuples(KINDS, st.sampled_from([0.3, 0.7, 1.5]), st.booleans(), st.booleans()),
        min_size=1,
        max_size=6,
    )
)
def test_the_estimate_is_what_the_charge_then_does(
    team: Team, steps: list[tuple[str, float, bool, bool]]
) -> None:
    """For any sequence of jobs (Gaussian, dp_gd, subsampled, pure; by a capped analyst or
    not), cancellations in between: the estimate writes nothing, says 202 exactly when the
    submission is admitted, and its plan, noise and ε-after are what the ledger then shows."""
    dataset_id = team.dataset(cap=2.0)
    for kind, epsilon, by_capped, cancel in steps:
        actor = "ann" if by_capped else "bob"
        body = job(dataset_id, kind, epsilon)
        before = charges(team, dataset_id)
        estimate = team.ok(actor, "POST", "/v1/jobs/estimate", body)
        assert charges(team, dataset_id) == before  # nothing written
        response = team.call(actor, "POST", "/v1/jobs", body)
        assert (response.status_code == 202) == estimate["admissible"], (estimate, response.text)
        if response.status_code != 202:
            assert response.status_code == 409
            assert response.headers["content-type"].startswith("application/problem+json")
            continue
        submitted = response.json()
        assert submitted["plan"] == estimate["plan"]
        assert submitted["plan"]["noise_scale"] == estimate["noise_scale"]
        assert submitted["plan"]["sensitivity"] == estimate["sensitivity"]
        assert submitted["plan"]["total_steps"] == estimate["steps"]
        now = budget(team, dataset_id)
        assert now["epsilon_spent"] == pytest.approx(estimate["epsilon_spent_after"], rel=1e-12)
        assert now["epsilon_remaining"] == pytest.approx(
            estimate["epsilon_remaining_after"], rel=1e-12, abs=1e-12
        )
        expected = {"gaussian": "gaussian", "dp_gd": "gaussian", "sampled": "renyi"}
        assert estimate["accounting"] == expected.get(kind, "renyi")
        if cancel:
            team.ok(actor, "POST", f"/v1/jobs/{submitted['id']}/cancel")
            assert budget(team, dataset_id)["epsilon_spent"] == pytest.approx(
                estimate["epsilon_spent"], rel=1e-12, abs=1e-12
            )
    ledger = team.ok("owner", "GET", f"/v1/datasets/{dataset_id}/ledger")
    assert ledger["consistent"] is True


def test_estimate_refuses_bad_input_with_the_field(team: Team) -> None:
    dataset_id = team.dataset()
    body = job(dataset_id, "gaussian", 0.5)
    body["optimizer"] = {"name": "no_such_optimizer", "params": {}}
    response = team.call("ann", "POST", "/v1/jobs/estimate", body)
    assert response.status_code == 422
    assert response.json()["field"] == "optimizer.name"
    big = job(dataset_id, "gaussian", 50.0)
    answer = team.ok("ann", "POST", "/v1/jobs/estimate", big)
    assert answer["admissible"] is False and "remaining" in answer["reason"]
    assert answer["epsilon_spent"] == 0.0


def test_one_gaussian_job_reads_its_epsilon(team: Team) -> None:
    """A first Gaussian job of (0.5, δ_B) reads ε_spent = 0.5 (was 0.557 with the RDP filter);
    at δ_j = δ_B/10 it reads its smaller ε at δ_B."""
    dataset_id = team.dataset()
    body = logistic_job(dataset_id, epsilon=0.5, delta=1e-5)
    team.ok("ann", "POST", "/v1/jobs", body)
    assert budget(team, dataset_id)["epsilon_spent"] == pytest.approx(0.5, rel=1e-6)
    other = team.dataset()
    team.ok("ann", "POST", "/v1/jobs", logistic_job(other, epsilon=0.5, delta=1e-6))
    assert 0.40 < budget(team, other)["epsilon_spent"] < 0.5


def test_cancelling_a_subsampled_job_refunds_exactly(team: Team) -> None:
    """The issue's refund bug through the API: a subsampled job's curve is +∞ at α = 10⁶; its
    cancel used to answer 500 on PostgreSQL and leave a NaN total on SQLite."""
    dataset_id = team.dataset()
    team.ok("ann", "POST", "/v1/jobs", job(dataset_id, "gaussian", 0.5))
    before = budget(team, dataset_id)
    sampled = team.ok("ann", "POST", "/v1/jobs", job(dataset_id, "sampled", 0.5))
    ledger = team.ok("owner", "GET", f"/v1/datasets/{dataset_id}/ledger")
    assert ledger["charges"][-1]["rdp"][-1] is None  # +∞ at α = 10⁶
    assert budget(team, dataset_id)["epsilon_spent"] > before["epsilon_spent"]
    cancelled = team.call("ann", "POST", f"/v1/jobs/{sampled['id']}/cancel")
    assert cancelled.status_code == 200 and cancelled.json()["refunded"] is True
    after = budget(team, dataset_id)
    assert after["epsilon_spent"] == pytest.approx(before["epsilon_spent"], rel=1e-12)
    assert after["jobs_charged"] == 1
    ledger = team.ok("owner", "GET", f"/v1/datasets/{dataset_id}/ledger")
    assert ledger["consistent"] is True
    assert all(v is None or math.isfinite(v) for v in ledger["cached_rdp"])
    team.ok("ann", "POST", "/v1/jobs", job(dataset_id, "gaussian", 0.5))  # still admits


def test_budget_history_shows_what_each_caller_may_see(team: Team) -> None:
    dataset_id = team.dataset()
    mine = team.ok("ann", "POST", "/v1/jobs", job(dataset_id, "gaussian", 0.5))["id"]
    theirs = team.ok("bob", "POST", "/v1/jobs", job(dataset_id, "dp_gd", 0.5))["id"]
    team.ok("ann", "POST", f"/v1/jobs/{mine}/cancel")
    team.ok("bob", "POST", "/v1/jobs", job(dataset_id, "sampled", 0.5))
    owner = team.ok("owner", "GET", f"/v1/datasets/{dataset_id}/budget/history")
    assert owner["epsilon"] == 3.0 and owner["delta"] == 1e-5
    points = owner["points"]
    assert [p["kind"] for p in points] == ["charge", "charge", "refund", "charge"]
    assert [p["job_id"] for p in points][:3] == [mine, theirs, mine]
    spent = [p["epsilon_spent"] for p in points]
    assert spent[0] < spent[1] and spent[2] < spent[1] and spent[3] > spent[2]
    assert spent[-1] == pytest.approx(budget(team, dataset_id)["epsilon_spent"], rel=1e-12)
    ann = team.ok("ann", "GET", f"/v1/datasets/{dataset_id}/budget/history")["points"]
    assert [p["job_id"] for p in ann] == [mine, None, mine, None]
    assert [p["epsilon_spent"] for p in ann] == pytest.approx(spent, rel=1e-12)
    assert ann[0]["your_epsilon_spent"] == pytest.approx(spent[0], rel=1e-12)
    assert ann[-1]["your_epsilon_spent"] == 0.0
    # an analyst without a grant sees nothing (404, like the budget)
    other = team.dataset(grants=("ann",))
    assert team.call("bob", "GET", f"/v1/datasets/{other}/budget/history").status_code == 404
