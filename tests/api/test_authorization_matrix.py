"""The authorization matrix (issue 9): every endpoint × every kind of caller → exact status.

Callers: an admin; the owner of the dataset; another owner; an analyst granted the dataset; an
analyst without a grant; no key; a revoked key (a rotated-out key of the admin principal, so a
revocation bug would show as success everywhere). Resources: dataset D of the owner, granted to
the analyst; job J of the analyst on D, run to completion by the worker's own ``run_job``; its
model M. Requests that change state get fresh resources for every call.

Every route of the app must have a row (enumerated from ``app.routes``): a new endpoint without
a row fails `test_every_route_has_a_row`, and a row without a route fails it too. Invisible
things answer 404, never 403 (service/api/access.py); 403 is for a role that may never do this.

In-process app (TestClient, a dispatcher that runs nothing) on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.routing import iter_route_contexts
from fastapi.testclient import TestClient
from starlette.routing import Mount

from service.api.app import create_app
from service.settings import Settings
from service.workers.runner import run_job
from tests.support.inprocess import bearer, in_process_app
from tests.support.walkthrough import EXAMPLES, PREDICT_ROWS, credit_dataset, logistic_job

ACTORS = ("admin", "owner", "other_owner", "analyst", "stranger", "no_key", "revoked")
ACTOR_LABELS = {
    "admin": "admin",
    "owner": "owning owner",
    "other_owner": "other owner",
    "analyst": "granted analyst",
    "stranger": "ungranted analyst",
    "no_key": "no key",
    "revoked": "revoked key",
}
ALL_200 = (200, 200, 200, 200, 200, 200, 200)

# fmt: off
#                                                   admin owner other granted ungranted none revoked
EXPECTED: dict[str, tuple[int, ...]] = {
    "GET /healthz":                                    ALL_200,
    "GET /openapi.json":                               ALL_200,
    "GET /docs":                                       ALL_200,
    "GET /docs/oauth2-redirect":                       ALL_200,
    "GET /redoc":                                      ALL_200,
    "GET /v1/optimizers":                              ALL_200,
    "GET /ui":                                         ALL_200,
    "GET /":                                           ALL_200,
    "GET /v1/me":                                      (200, 200, 200, 200, 200, 401, 401),
    "MOUNT /ui/static":                                ALL_200,
    "GET /metrics":                                    (200, 403, 403, 403, 403, 401, 401),
    "POST /v1/keys":                                   (201, 403, 403, 403, 403, 401, 401),
    "GET /v1/keys":                                    (200, 403, 403, 403, 403, 401, 401),
    "POST /v1/keys/{key_id}/revoke":                   (200, 403, 403, 403, 403, 401, 401),
    "POST /v1/datasets":                               (201, 201, 201, 403, 403, 401, 401),
    "GET /v1/datasets":                                (200, 200, 200, 200, 200, 401, 401),
    "GET /v1/datasets/{dataset_id}":                   (200, 200, 404, 200, 404, 401, 401),
    "POST /v1/datasets/{dataset_id}/grants":           (201, 201, 404, 403, 403, 401, 401),
    "GET /v1/datasets/{dataset_id}/grants":            (200, 200, 404, 403, 403, 401, 401),
    "POST /v1/datasets/{dataset_id}/grants/{grantee}/revoke": (200, 200, 404, 403, 403, 401, 401),
    "POST /v1/datasets/{dataset_id}/retire":           (200, 404, 404, 404, 404, 401, 401),
    "POST /v1/datasets/validate":                      (200, 200, 200, 403, 403, 401, 401),
    "GET /v1/datasets/withdrawals":                    (200, 403, 403, 403, 403, 401, 401),
    "DELETE /v1/datasets/{dataset_id}":                (200, 200, 404, 403, 403, 401, 401),
    "GET /v1/datasets/{dataset_id}/budget":            (200, 200, 404, 200, 404, 401, 401),
    "GET /v1/datasets/{dataset_id}/budget/history":    (200, 200, 404, 200, 404, 401, 401),
    "GET /v1/datasets/{dataset_id}/ledger":            (200, 200, 404, 403, 403, 401, 401),
    "POST /v1/jobs/estimate":                          (200, 200, 404, 200, 404, 401, 401),
    "POST /v1/jobs":                                   (202, 202, 404, 202, 404, 401, 401),
    "GET /v1/jobs":                                    (200, 200, 200, 200, 200, 401, 401),
    "GET /v1/jobs/{job_id}":                           (200, 404, 404, 200, 404, 401, 401),
    "POST /v1/jobs/{job_id}/cancel":                   (200, 404, 404, 200, 404, 401, 401),
    "GET /v1/models/{model_id}":                       (200, 404, 404, 200, 404, 401, 401),
    "POST /v1/models/{model_id}/predict":              (200, 404, 404, 200, 404, 401, 401),
    "POST /v1/models/{model_id}/evaluate/estimate":    (200, 404, 404, 200, 404, 401, 401),
    "POST /v1/models/{model_id}/evaluate":             (202, 404, 404, 202, 404, 401, 401),
    "GET /v1/models/{model_id}/evaluations/{evaluation_id}": (200, 404, 404, 200, 404, 401, 401),
}
# fmt: on


@dataclass
class World:
    """The callers' keys and the resources the matrix acts on."""

    client: TestClient
    database_url: str
    data_root: Path
    keys: dict[str, str | None]
    dataset_id: str = ""
    job_id: str = ""
    model_id: str = ""
    counter: Iterator[int] = field(default_factory=itertools.count)

    def call(self, actor: str, method: str, path: str, json: Any = None) -> httpx.Response:
        return self.client.request(method, path, json=json, headers=bearer(self.keys[actor]))

    def ok(self, actor: str, method: str, path: str, json: Any = None) -> dict[str, Any]:
        response = self.call(actor, method, path, json)
        assert response.status_code < 300, (method, path, response.text)
        body: dict[str, Any] = response.json()
        return body

    def register(self, actor: str = "owner") -> str:
        """A fresh dataset of ``actor`` from a file of its own (one budget per data)."""
        body = credit_dataset(epsilon=50.0, uri=self.fresh_csv())
        return str(self.ok(actor, "POST", "/v1/datasets", body)["id"])

    def fresh_csv(self) -> str:
        i = next(self.counter)
        lines = (EXAMPLES / "credit.csv").read_text().splitlines()[:201]
        lines.append(f"{18 + i % 70},{1 + (i // 70) % 99},HS,public,<=50K")
        name = f"credit-{i}.csv"
        (self.data_root / name).write_text("\n".join(lines) + "\n")
        return name

    def fresh_grantee(self) -> str:
        """A new analyst principal granted dataset D (so that every revocation has its own)."""
        name = f"grantee-{next(self.counter)}"
        self.ok("admin", "POST", "/v1/keys", {"name": name, "role": "analyst"})
        self.ok("owner", "POST", f"/v1/datasets/{self.dataset_id}/grants", {"principal": name})
        return name

    def submit(self, actor: str = "analyst") -> str:
        job = logistic_job(self.dataset_id, epsilon=0.5)
        return str(self.ok(actor, "POST", "/v1/jobs", job)["id"])

    def evaluation_body(self) -> dict[str, Any]:
        return {"dataset_id": self.dataset_id, "privacy": {"epsilon": 0.2, "delta": 1e-6}}

    def evaluate(self, actor: str = "analyst") -> str:
        path = f"/v1/models/{self.model_id}/evaluate"
        return str(self.ok(actor, "POST", path, self.evaluation_body())["id"])


Request = tuple[str, str, Any]
REQUESTS: dict[str, Callable[[World], Request]] = {
    "GET /healthz": lambda w: ("GET", "/healthz", None),
    "GET /openapi.json": lambda w: ("GET", "/openapi.json", None),
    "GET /docs": lambda w: ("GET", "/docs", None),
    "GET /docs/oauth2-redirect": lambda w: ("GET", "/docs/oauth2-redirect", None),
    "GET /redoc": lambda w: ("GET", "/redoc", None),
    "GET /v1/optimizers": lambda w: ("GET", "/v1/optimizers", None),
    "GET /ui": lambda w: ("GET", "/ui", None),
    "GET /": lambda w: ("GET", "/", None),
    "GET /v1/me": lambda w: ("GET", "/v1/me", None),
    "MOUNT /ui/static": lambda w: ("GET", "/ui/static/app.js", None),
    "GET /metrics": lambda w: ("GET", "/metrics", None),
    "POST /v1/keys": lambda w: (
        "POST",
        "/v1/keys",
        {"name": f"new-{next(w.counter)}", "role": "analyst"},
    ),
    "GET /v1/keys": lambda w: ("GET", "/v1/keys", None),
    "POST /v1/keys/{key_id}/revoke": lambda w: (
        "POST",
        "/v1/keys/{}/revoke".format(
            w.ok(
                "admin",
                "POST",
                "/v1/keys",
                {"name": f"victim-{next(w.counter)}", "role": "analyst"},
            )["id"]
        ),
        None,
    ),
    "POST /v1/datasets": lambda w: ("POST", "/v1/datasets", credit_dataset(uri=w.fresh_csv())),
    "GET /v1/datasets": lambda w: ("GET", "/v1/datasets", None),
    "GET /v1/datasets/{dataset_id}": lambda w: ("GET", f"/v1/datasets/{w.dataset_id}", None),
    "POST /v1/datasets/{dataset_id}/grants": lambda w: (
        "POST",
        f"/v1/datasets/{w.dataset_id}/grants",
        {"principal": "ann"},
    ),
    "GET /v1/datasets/{dataset_id}/grants": lambda w: (
        "GET",
        f"/v1/datasets/{w.dataset_id}/grants",
        None,
    ),
    "POST /v1/datasets/{dataset_id}/grants/{grantee}/revoke": lambda w: (
        "POST",
        f"/v1/datasets/{w.dataset_id}/grants/{w.fresh_grantee()}/revoke",
        None,
    ),
    "POST /v1/datasets/{dataset_id}/retire": lambda w: (
        "POST",
        f"/v1/datasets/{w.register()}/retire",
        None,
    ),
    "POST /v1/datasets/validate": lambda w: (
        "POST",
        "/v1/datasets/validate",
        credit_dataset(uri=w.fresh_csv()),
    ),
    "GET /v1/datasets/withdrawals": lambda w: ("GET", "/v1/datasets/withdrawals", None),
    "DELETE /v1/datasets/{dataset_id}": lambda w: (
        "DELETE",
        f"/v1/datasets/{w.register()}",
        None,
    ),
    "GET /v1/datasets/{dataset_id}/budget": lambda w: (
        "GET",
        f"/v1/datasets/{w.dataset_id}/budget",
        None,
    ),
    "GET /v1/datasets/{dataset_id}/budget/history": lambda w: (
        "GET",
        f"/v1/datasets/{w.dataset_id}/budget/history",
        None,
    ),
    "GET /v1/datasets/{dataset_id}/ledger": lambda w: (
        "GET",
        f"/v1/datasets/{w.dataset_id}/ledger",
        None,
    ),
    "POST /v1/jobs/estimate": lambda w: (
        "POST",
        "/v1/jobs/estimate",
        logistic_job(w.dataset_id, epsilon=0.5),
    ),
    "POST /v1/jobs": lambda w: ("POST", "/v1/jobs", logistic_job(w.dataset_id, epsilon=0.5)),
    "GET /v1/jobs": lambda w: ("GET", "/v1/jobs", None),
    "GET /v1/jobs/{job_id}": lambda w: ("GET", f"/v1/jobs/{w.job_id}", None),
    "POST /v1/jobs/{job_id}/cancel": lambda w: ("POST", f"/v1/jobs/{w.submit()}/cancel", None),
    "GET /v1/models/{model_id}": lambda w: ("GET", f"/v1/models/{w.model_id}", None),
    "POST /v1/models/{model_id}/predict": lambda w: (
        "POST",
        f"/v1/models/{w.model_id}/predict",
        {"rows": PREDICT_ROWS},
    ),
    "POST /v1/models/{model_id}/evaluate/estimate": lambda w: (
        "POST",
        f"/v1/models/{w.model_id}/evaluate/estimate",
        w.evaluation_body(),
    ),
    "POST /v1/models/{model_id}/evaluate": lambda w: (
        "POST",
        f"/v1/models/{w.model_id}/evaluate",
        w.evaluation_body(),
    ),
    "GET /v1/models/{model_id}/evaluations/{evaluation_id}": lambda w: (
        "GET",
        f"/v1/models/{w.model_id}/evaluations/{w.evaluate()}",
        None,
    ),
}


def app_routes() -> set[str]:
    """``"METHOD path"`` for every route of the app, included routers flattened (HEAD is
    implied by GET); a mounted sub-application counts as a route of its own."""
    app = create_app(
        Settings(database_url="sqlite://", data_roots=(), workers=1, dask_scheduler=None)
    )
    found: set[str] = set()
    for route in iter_route_contexts(app.routes):
        if isinstance(route.original_route, Mount):
            found.add(f"MOUNT {route.path}")
            continue
        for method in route.methods or ():
            if method != "HEAD":
                found.add(f"{method} {route.path}")
    return found


def test_every_route_has_a_row() -> None:
    routes = app_routes()
    assert sorted(routes - EXPECTED.keys()) == [], "routes without a row in EXPECTED"
    assert sorted(EXPECTED.keys() - routes) == [], "rows for routes that do not exist"
    assert EXPECTED.keys() == REQUESTS.keys()
    assert all(len(statuses) == len(ACTORS) for statuses in EXPECTED.values())


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def world(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[World]:
    if request.param == "postgres":
        url = str(request.getfixturevalue("private_postgres_database"))
    else:
        url = f"sqlite:///{tmp_path / 'dpfit.db'}"
    data_root = tmp_path / "data"
    data_root.mkdir()
    # A worker takes its data roots from the environment, as under `dpfit serve`.
    monkeypatch.setenv("DPFIT_DATA_ROOTS", str(data_root))
    with in_process_app(url, data_root) as (client, admin):
        w = World(client=client, database_url=url, data_root=data_root, keys={"admin": admin})
        for actor, name, role in [
            ("owner", "olivia", "owner"),
            ("other_owner", "oscar", "owner"),
            ("analyst", "ann", "analyst"),
            ("stranger", "sam", "analyst"),
        ]:
            w.keys[actor] = str(
                w.ok("admin", "POST", "/v1/keys", {"name": name, "role": role})["key"]
            )
        rotated = w.ok("admin", "POST", "/v1/keys", {"name": "admin", "role": "admin"})
        w.ok("admin", "POST", f"/v1/keys/{rotated['id']}/revoke")
        w.keys["revoked"] = str(rotated["key"])
        w.keys["no_key"] = None

        w.dataset_id = w.register("owner")
        w.ok("owner", "POST", f"/v1/datasets/{w.dataset_id}/grants", {"principal": "ann"})
        w.job_id = w.submit("analyst")
        status = run_job(w.job_id, 1, url)
        assert status == "succeeded", w.ok("analyst", "GET", f"/v1/jobs/{w.job_id}")["error"]
        w.model_id = str(w.ok("analyst", "GET", f"/v1/jobs/{w.job_id}")["model_id"])
        yield w


def test_authorization_matrix(world: World) -> None:
    """Every endpoint × every caller answers exactly the status in EXPECTED."""
    observed: dict[str, tuple[int, ...]] = {}
    for route, request in REQUESTS.items():
        statuses = []
        for actor in ACTORS:
            method, path, body = request(world)
            response = world.call(actor, method, path, body)
            statuses.append(response.status_code)
            if response.status_code >= 400:
                assert response.headers["content-type"].startswith("application/problem+json")
            if response.status_code == 403:  # each role named once ("admin, admin" was said)
                detail = response.json()["detail"]
                named = detail.split(": ", 1)[-1].rstrip(".").split(", ")
                assert len(named) == len(set(named)), detail
        observed[route] = tuple(statuses)
    wrong = {r: (EXPECTED[r], observed[r]) for r in EXPECTED if observed[r] != EXPECTED[r]}
    assert wrong == {}, "route: (expected, observed) in the order " + ", ".join(ACTORS)


def _items(body: Any) -> list[dict[str, Any]]:
    """A list endpoint's items, whether it answers a list or a page ``{"items": …}``."""
    return list(body if isinstance(body, list) else body["items"])


def test_lists_and_views_show_each_caller_only_its_own(world: World) -> None:
    """Beyond the status: what the 200s contain (analysts never see a dataset's location)."""
    datasets = {
        actor: {d["id"] for d in _items(world.ok(actor, "GET", "/v1/datasets"))}
        for actor in ACTORS[:5]
    }
    assert {a for a, ids in datasets.items() if world.dataset_id in ids} == {
        "admin",
        "owner",
        "analyst",
    }
    jobs = {
        actor: {j["id"] for j in _items(world.ok(actor, "GET", "/v1/jobs"))} for actor in ACTORS[:5]
    }
    assert {a for a, ids in jobs.items() if world.job_id in ids} == {"admin", "analyst"}
    for actor, owner_view in [("admin", True), ("owner", True), ("analyst", False)]:
        seen = world.ok(actor, "GET", f"/v1/datasets/{world.dataset_id}")
        assert (seen["source"] is not None) == owner_view, actor
        assert (seen["fingerprint"] is not None) == owner_view, actor


def markdown_table() -> str:
    """The matrix as the markdown table of the closing note."""
    head = "| endpoint | " + " | ".join(ACTOR_LABELS[a] for a in ACTORS) + " |"
    rule = "|---|" + "---|" * len(ACTORS)
    rows = [
        f"| `{route}` | " + " | ".join(str(s) for s in statuses) + " |"
        for route, statuses in EXPECTED.items()
    ]
    return "\n".join([head, rule, *rows])


if __name__ == "__main__":
    print(markdown_table())
