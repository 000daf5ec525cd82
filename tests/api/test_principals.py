"""Principals (issue 9): one name and one role per principal, keys belong to principals.

The issue's attacks, rotation, revocation, grants to existing analysts only, the last admin key,
the CLI's rules, and the 0004 migration of conflicting legacy rows — on SQLite and PostgreSQL.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext
from fastapi.testclient import TestClient

from alembic import command
from service.cli import ROOT, main, migrate
from service.db.models import Base
from service.db.session import make_engine, session_factory
from service.domain.principals import (
    LastAdminKey,
    RoleConflict,
    authenticate_key,
    hash_key,
    issue_key,
    revoke_key,
)
from tests.support.inprocess import bearer, in_process_app
from tests.support.problems import problem
from tests.support.walkthrough import EXAMPLES, credit_dataset, logistic_job


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgres":
        return str(request.getfixturevalue("private_postgres_database"))
    return f"sqlite:///{tmp_path / 'dpfit.db'}"


@pytest.fixture
def api(database_url: str) -> Iterator[tuple[TestClient, str]]:
    with in_process_app(database_url, EXAMPLES) as app:
        yield app


def new_key(client: TestClient, admin: str, name: str, role: str) -> dict[str, Any]:
    response = client.post("/v1/keys", json={"name": name, "role": role}, headers=bearer(admin))
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


def test_analyst_key_named_like_an_owner_is_refused(api: tuple[TestClient, str]) -> None:
    """Issue 9, attack 1: an analyst key named "alice" while alice is an owner."""
    client, admin = api
    alice = new_key(client, admin, "alice", "owner")
    dataset = client.post("/v1/datasets", json=credit_dataset(), headers=bearer(alice["key"]))
    assert dataset.status_code == 201, dataset.text

    body = problem(
        client.post("/v1/keys", json={"name": "alice", "role": "analyst"}, headers=bearer(admin)),
        409,
        "role",
    )
    assert "owner" in body["detail"]
    listed = client.get("/v1/keys", headers=bearer(admin)).json()
    assert [(k["name"], k["role"]) for k in listed if k["name"] == "alice"] == [("alice", "owner")]
    # An admin key named like an owner is refused the same way.
    problem(
        client.post("/v1/keys", json={"name": "alice", "role": "admin"}, headers=bearer(admin)),
        409,
        "role",
    )


def test_rotation_keeps_the_principal_and_its_datasets(api: tuple[TestClient, str]) -> None:
    client, admin = api
    first = new_key(client, admin, "alice", "owner")
    dataset = client.post(
        "/v1/datasets", json=credit_dataset(), headers=bearer(first["key"])
    ).json()
    second = new_key(client, admin, "alice", "owner")
    assert second["id"] != first["id"] and second["key"] != first["key"]

    revoked = client.post(f"/v1/keys/{first['id']}/revoke", headers=bearer(admin))
    assert revoked.status_code == 200 and revoked.json()["revoked_at"] is not None
    problem(client.get("/v1/datasets", headers=bearer(first["key"])), 401)
    seen = client.get(f"/v1/datasets/{dataset['id']}", headers=bearer(second["key"]))
    assert seen.status_code == 200
    assert seen.json()["owner"] == "alice" and seen.json()["source"] is not None
    ledger = client.get(f"/v1/datasets/{dataset['id']}/ledger", headers=bearer(second["key"]))
    assert ledger.status_code == 200


def test_a_revoked_principals_name_is_not_reused(api: tuple[TestClient, str]) -> None:
    """Issue 9, attack 2: a new key with a revoked principal's name and another role."""
    client, admin = api
    owner = new_key(client, admin, "alice", "owner")
    bob = new_key(client, admin, "bob", "analyst")
    dataset = client.post(
        "/v1/datasets", json=credit_dataset(), headers=bearer(owner["key"])
    ).json()
    granted = client.post(
        f"/v1/datasets/{dataset['id']}/grants",
        json={"principal": "bob"},
        headers=bearer(owner["key"]),
    )
    assert granted.status_code == 201, granted.text
    job = client.post("/v1/jobs", json=logistic_job(dataset["id"]), headers=bearer(bob["key"]))
    assert job.status_code == 202, job.text
    assert client.post(f"/v1/keys/{bob['id']}/revoke", headers=bearer(admin)).status_code == 200

    # bob's name cannot come back as an owner (or admin) and inherit bob's job ...
    problem(
        client.post("/v1/keys", json={"name": "bob", "role": "owner"}, headers=bearer(admin)),
        409,
        "role",
    )
    # ... nor can another owner see bob's job: ownership never moves.
    problem(client.get(f"/v1/jobs/{job.json()['id']}", headers=bearer(owner["key"])), 404)
    # The same name with the same role is the same principal (an admin's rotation).
    again = new_key(client, admin, "bob", "analyst")
    mine = client.get(f"/v1/jobs/{job.json()['id']}", headers=bearer(again["key"]))
    assert mine.status_code == 200


def test_grants_name_existing_analyst_principals_only(api: tuple[TestClient, str]) -> None:
    """Issue 9, attack 3: grants to principals that do not exist (or are not analysts)."""
    client, admin = api
    owner = new_key(client, admin, "alice", "owner")
    new_key(client, admin, "carol", "owner")
    new_key(client, admin, "bob", "analyst")
    dataset = client.post(
        "/v1/datasets", json=credit_dataset(), headers=bearer(owner["key"])
    ).json()
    grants = f"/v1/datasets/{dataset['id']}/grants"
    unknown = problem(
        client.post(grants, json={"principal": "nobody"}, headers=bearer(owner["key"])),
        422,
        "principal",
    )
    as_owner = problem(
        client.post(grants, json={"principal": "carol"}, headers=bearer(owner["key"])),
        422,
        "principal",
    )
    # The same answer for an unknown name and an owner's: a grant does not probe principals.
    assert unknown["detail"].replace("nobody", "X") == as_owner["detail"].replace("carol", "X")
    problem(client.post(grants, json={"principal": "admin"}, headers=bearer(admin)), 422)
    ok = client.post(grants, json={"principal": "bob"}, headers=bearer(owner["key"]))
    assert ok.status_code == 201 and ok.json()["principal"] == "bob"
    # A later principal called "nobody" finds no grant waiting for it.
    nobody = new_key(client, admin, "nobody", "analyst")
    problem(client.get(f"/v1/datasets/{dataset['id']}", headers=bearer(nobody["key"])), 404)


def test_the_last_admin_key_cannot_be_revoked(api: tuple[TestClient, str]) -> None:
    client, admin = api
    first_id = client.get("/v1/keys", headers=bearer(admin)).json()[0]["id"]
    problem(client.post(f"/v1/keys/{first_id}/revoke", headers=bearer(admin)), 409)
    assert client.get("/v1/keys", headers=bearer(admin)).status_code == 200

    other = new_key(client, admin, "root", "admin")
    assert (
        client.post(f"/v1/keys/{first_id}/revoke", headers=bearer(other["key"])).status_code == 200
    )
    problem(client.get("/v1/keys", headers=bearer(admin)), 401)
    problem(client.post(f"/v1/keys/{other['id']}/revoke", headers=bearer(other["key"])), 409)
    # Revoking an already revoked key stays idempotent.
    again = client.post(f"/v1/keys/{first_id}/revoke", headers=bearer(other["key"]))
    assert again.status_code == 200
    problem(client.post("/v1/keys/key_nope/revoke", headers=bearer(other["key"])), 404)


def test_cli_follows_the_same_rules(
    database_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DPFIT_DATABASE_URL", database_url)
    assert main(["keys", "create", "--role", "owner", "--name", "alice", "--create"]) == 0
    first = capsys.readouterr().out.strip().splitlines()[-1]
    assert main(["keys", "create", "--role", "analyst", "--name", "alice"]) == 1
    assert "owner" in capsys.readouterr().err
    assert main(["keys", "create", "--role", "owner", "--name", "alice"]) == 0
    second = capsys.readouterr().out.strip().splitlines()[-1]
    assert main(["keys", "create", "--role", "owner", "--name", "al\x00ice"]) == 2
    engine = make_engine(database_url)
    try:
        with session_factory(engine)() as session:
            one, two = authenticate_key(session, first), authenticate_key(session, second)
            assert one is not None and two is not None
            assert one.id == two.id and (one.name, one.role) == ("alice", "owner")
    finally:
        engine.dispose()


# --- migration 0004 -------------------------------------------------------------------------


def _alembic(url: str) -> Config:
    config = Config(str(ROOT / "alembic.ini"))
    config.set_main_option("script_location", str(ROOT / "alembic"))
    config.attributes["url"] = url
    return config


T0 = datetime(2026, 1, 1, tzinfo=UTC)
LEGACY_KEYS = [
    # (id, name, role, created, revoked, secret)
    ("key_alice_owner", "alice", "owner", T0, None, "s-alice-owner"),
    ("key_alice_analyst", "alice", "analyst", T0 + timedelta(days=1), None, "s-alice-analyst"),
    ("key_bob_old", "bob", "analyst", T0, T0 + timedelta(days=1), "s-bob-old"),
    ("key_bob_owner", "bob", "owner", T0 + timedelta(days=2), None, "s-bob-owner"),
    ("key_bob_new", "bob", "analyst", T0 + timedelta(days=3), None, "s-bob-new"),
    ("key_admin", "admin", "admin", T0, None, "s-admin"),
]


def test_migration_0004_resolves_conflicting_legacy_names(database_url: str) -> None:
    config = _alembic(database_url)
    command.upgrade(config, "0003")
    engine = make_engine(database_url)
    meta = sa.MetaData()
    meta.reflect(engine, only=["api_keys", "datasets", "grants"])
    keys, datasets, grants = (meta.tables[t] for t in ("api_keys", "datasets", "grants"))
    with engine.begin() as conn:
        conn.execute(
            keys.insert(),
            [
                {
                    "id": i,
                    "name": n,
                    "role": r,
                    "key_hash": hash_key(s),
                    "created_at": c,
                    "revoked_at": v,
                }
                for i, n, r, c, v, s in LEGACY_KEYS
            ],
        )
        conn.execute(
            datasets.insert().values(
                id="ds_legacy",
                name="d",
                owner="alice",
                source_uri="credit.csv",
                source_path="/x/credit.csv",
                source_format="csv",
                fingerprint="f",
                label={},
                features=[],
                n_rows=10,
                n_features=1,
                epsilon=1.0,
                delta=0.0,
                spent_rdp=[],
                spent_pure_epsilon=0.0,
                created_at=T0,
            )
        )
        conn.execute(
            grants.insert(),
            [
                {"dataset_id": "ds_legacy", "principal": p, "created_at": T0}
                for p in ("alice", "bob", "ghost")
            ],
        )
    engine.dispose()

    command.upgrade(config, "0004")
    engine = make_engine(database_url)
    try:
        with engine.connect() as conn:
            principals = dict(conn.execute(sa.text("SELECT name, role FROM principals")).all())
            assert principals == {"alice": "owner", "bob": "analyst", "admin": "admin"}
            active = {
                row[0]
                for row in conn.execute(
                    sa.text("SELECT id FROM api_keys WHERE revoked_at IS NULL")
                ).all()
            }
            # Earliest key's role wins; the later keys of another role are revoked.
            assert active == {"key_alice_owner", "key_bob_new", "key_admin"}
            left = {r[0] for r in conn.execute(sa.text("SELECT principal FROM grants")).all()}
            assert left == {"bob"}
    finally:
        engine.dispose()

    command.downgrade(config, "0003")
    engine = make_engine(database_url)
    try:
        with engine.connect() as conn:
            rows = dict(conn.execute(sa.text("SELECT id, role FROM api_keys")).all())
        assert rows["key_bob_owner"] == "analyst" and rows["key_alice_analyst"] == "owner"
    finally:
        engine.dispose()

    command.upgrade(config, "head")
    engine = make_engine(database_url)
    try:
        with engine.connect() as conn:
            assert compare_metadata(MigrationContext.configure(conn), Base.metadata) == []
        with session_factory(engine)() as session:
            alice = authenticate_key(session, "s-alice-owner")
            assert alice is not None and (alice.name, alice.role) == ("alice", "owner")
            assert authenticate_key(session, "s-alice-analyst") is None
            assert authenticate_key(session, "s-bob-owner") is None
            bob = authenticate_key(session, "s-bob-new")
            assert bob is not None and bob.role == "analyst"
    finally:
        engine.dispose()


# --- races on PostgreSQL (SQLite serializes every transaction with BEGIN IMMEDIATE) ----------


def _run_blocked(url: str, first: Any, second: Any) -> Any:
    """Run ``first(session)`` in a transaction left open, start ``second(session)`` in another
    thread until PostgreSQL shows it waiting on a lock, then commit the first; returns what the
    second returned or raised."""
    engine = make_engine(url)
    sessions = session_factory(engine)
    outcome: dict[str, Any] = {}

    def run_second() -> None:
        try:
            with sessions.begin() as session:
                outcome["value"] = second(session)
        except Exception as exc:  # noqa: BLE001 - handed to the test
            outcome["value"] = exc

    try:
        with sessions.begin() as session:
            first(session)
            session.flush()
            thread = threading.Thread(target=run_second)
            thread.start()
            deadline = time.monotonic() + 60
            with engine.connect() as watcher:
                while time.monotonic() < deadline and thread.is_alive():
                    waiting = watcher.execute(
                        sa.text(
                            "SELECT count(*) FROM pg_stat_activity WHERE "
                            "datname = current_database() AND wait_event_type = 'Lock'"
                        )
                    ).scalar_one()
                    watcher.rollback()
                    if waiting:
                        break
                    time.sleep(0.02)
            assert thread.is_alive(), "the second transaction was not blocked by the first"
        thread.join(60)
        return outcome["value"]
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_concurrent_first_keys_of_one_name_get_one_role(private_postgres_database: str) -> None:
    url = private_postgres_database
    migrate(url)
    result = _run_blocked(
        url,
        lambda s: issue_key(s, name="dana", role="owner"),
        lambda s: issue_key(s, name="dana", role="analyst"),
    )
    assert isinstance(result, RoleConflict)
    same = _run_blocked(
        url,
        lambda s: issue_key(s, name="erin", role="owner"),
        lambda s: issue_key(s, name="erin", role="owner"),
    )
    assert same.principal.name == "erin"
    engine = make_engine(url)
    with session_factory(engine)() as session:
        roles = dict(session.execute(sa.text("SELECT name, role FROM principals")).all())
        keys = session.execute(sa.text("SELECT count(*) FROM api_keys")).scalar_one()
    engine.dispose()
    assert roles == {"dana": "owner", "erin": "owner"} and keys == 3


@pytest.mark.postgres
def test_two_admins_revoking_each_other_leave_one(private_postgres_database: str) -> None:
    url = private_postgres_database
    migrate(url)
    engine = make_engine(url)
    with session_factory(engine).begin() as session:
        first = issue_key(session, name="admin", role="admin").key.id
        second = issue_key(session, name="root", role="admin").key.id
    engine.dispose()
    result = _run_blocked(url, lambda s: revoke_key(s, first), lambda s: revoke_key(s, second))
    assert isinstance(result, LastAdminKey)
