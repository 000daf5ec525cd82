"""What the dashboard needs from the API (issue 26 item 5): ``GET /`` sends a browser to the
dashboard, and ``GET /v1/me`` names the key's principal and role (an admin's page said "owner
view": the page guessed the role from what it could see)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tests.support.inprocess import bearer, in_process_app


@pytest.fixture()
def app(tmp_path: Path) -> Iterator[tuple[TestClient, str]]:
    with in_process_app(f"sqlite:///{tmp_path / 'dpfit.db'}", tmp_path) as (client, admin):
        yield client, admin


def test_root_redirects_to_the_dashboard(app: tuple[TestClient, str]) -> None:
    client, _ = app
    response = client.get("/", follow_redirects=False)
    assert response.status_code == 307 and response.headers["location"] == "/ui"
    assert client.get("/").url.path == "/ui"


def test_me_names_the_principal_and_role(app: tuple[TestClient, str]) -> None:
    client, admin = app
    assert client.get("/v1/me", headers=bearer(admin)).json() == {"name": "admin", "role": "admin"}
    for name, role in [("olivia", "owner"), ("ann", "analyst")]:
        key = client.post("/v1/keys", json={"name": name, "role": role}, headers=bearer(admin))
        me = client.get("/v1/me", headers=bearer(key.json()["key"]))
        assert me.status_code == 200 and me.json() == {"name": name, "role": role}
    assert client.get("/v1/me").status_code == 401
    assert client.get("/v1/me", headers=bearer("dpf_not-a-key")).status_code == 401
