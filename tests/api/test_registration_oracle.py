"""Registration is no equality oracle across owners (issue 22, item 4), on SQLite and PostgreSQL
(the in-process app).

The attack: owner B knows n − 1 rows of owner A's table. She writes one candidate table per
value the last row may take, each under her own location, and registers them. When content
claims were global, the one equal to A's table answered 409 — the last row, read off a status
code. Now content is compared with the registrant's own datasets only: every candidate
registers the same way (201, the same fields), admins see the copy as a duplicate of A's
dataset, and one owner registering her own content twice is still refused (one budget per data).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.inprocess import in_process_server

LABEL = {"column": "y", "positive": "yes", "negative": "no"}
FEATURES = [{"name": "x", "type": "numeric", "min": -10.0, "max": 10.0}]
KNOWN_ROWS = ["0.5,yes", "-1.25,no", "2.0,yes", "3.5,no", "-0.75,yes"]  # B knows these
SECRET_ROW = "1.5,no"  # A's last row
CANDIDATES = ["1.5,yes", "1.5,no", "-1.5,no"]  # B's guesses; the second is A's


def body(uri: str, name: str = "table") -> dict[str, Any]:
    return {
        "name": name,
        "source": {"uri": uri},
        "label": dict(LABEL),
        "features": [dict(f) for f in FEATURES],
        "budget": {"epsilon": 1.0, "delta": 1e-6},
    }


def write_table(path: Path, rows: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(["x,y", *rows]) + "\n")


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
            "alice": app.client(app.key("alice", "owner")),
            "bob": app.client(app.key("bob", "owner")),
            "admin": app.client(app.keys["admin"]),
        }


def test_candidates_for_another_owners_last_row_all_register_alike(world: dict[str, Any]) -> None:
    root, alice, bob, admin = world["root"], world["alice"], world["bob"], world["admin"]
    write_table(root / "alice" / "table.csv", KNOWN_ROWS + [SECRET_ROW])
    registered = alice.post("/v1/datasets", json=body("alice/table.csv"))
    assert registered.status_code == 201, registered.text
    alice_id = registered.json()["id"]

    answers = []
    for i, guess in enumerate(CANDIDATES):
        write_table(root / "bob" / f"guess-{i}.csv", KNOWN_ROWS + [guess])
        answers.append(bob.post("/v1/datasets", json=body(f"bob/guess-{i}.csv")))
    # Every candidate registers, with the same fields: nothing tells B which one is A's table.
    assert [a.status_code for a in answers] == [201, 201, 201], [a.text for a in answers]
    assert len({tuple(sorted(a.json())) for a in answers}) == 1
    assert all(a.json()["duplicates"] is None for a in answers)  # an owner's view: no field
    equal_id = answers[1].json()["id"]
    others = [answers[0].json()["id"], answers[2].json()["id"]]

    # Admins see the copy, from either side, in the dataset view and in the list.
    assert admin.get(f"/v1/datasets/{alice_id}").json()["duplicates"] == [equal_id]
    assert admin.get(f"/v1/datasets/{equal_id}").json()["duplicates"] == [alice_id]
    for other in others:
        assert admin.get(f"/v1/datasets/{other}").json()["duplicates"] == []
    listed = {d["id"]: d["duplicates"] for d in admin.get("/v1/datasets").json()}
    assert listed[alice_id] == [equal_id] and listed[equal_id] == [alice_id]
    # Owners never see the field, not even on their own dataset.
    assert alice.get(f"/v1/datasets/{alice_id}").json()["duplicates"] is None
    assert all(d["duplicates"] is None for d in bob.get("/v1/datasets").json())


def test_one_owner_registering_her_content_twice_is_still_refused(world: dict[str, Any]) -> None:
    root, alice, bob = world["root"], world["alice"], world["bob"]
    write_table(root / "alice" / "table.csv", KNOWN_ROWS + [SECRET_ROW])
    alice_id = alice.post("/v1/datasets", json=body("alice/table.csv")).json()["id"]
    write_table(root / "alice" / "copy.csv", KNOWN_ROWS + [SECRET_ROW])
    again = alice.post("/v1/datasets", json=body("alice/copy.csv"))
    assert again.status_code == 409, again.text
    assert again.json()["field"] == "source.uri" and again.json()["dataset_id"] == alice_id

    # B's copy registers once; B's second copy of it is B's own duplicate: refused, named.
    write_table(root / "bob" / "one.csv", KNOWN_ROWS + [SECRET_ROW])
    write_table(root / "bob" / "two.csv", KNOWN_ROWS + [SECRET_ROW])
    bob_id = bob.post("/v1/datasets", json=body("bob/one.csv")).json()["id"]
    twice = bob.post("/v1/datasets", json=body("bob/two.csv"))
    assert twice.status_code == 409 and twice.json()["dataset_id"] == bob_id, twice.text


def test_a_location_stays_claimed_for_everyone(world: dict[str, Any]) -> None:
    """The same path (a location, not content) backs one dataset whoever names it; another
    owner learns only that it is registered, not by which dataset."""
    root, alice, bob = world["root"], world["alice"], world["bob"]
    write_table(root / "shared" / "table.csv", KNOWN_ROWS + [SECRET_ROW])
    alice_id = alice.post("/v1/datasets", json=body("shared/table.csv")).json()["id"]
    got = bob.post("/v1/datasets", json=body("shared/table.csv"))
    assert got.status_code == 409, got.text
    assert "dataset_id" not in got.json() and alice_id not in got.json()["detail"]


# --------------------------------------------------------------------------------------------
# The issue measured the attack on SQL tables: each owner registers from her own database
# --------------------------------------------------------------------------------------------


def _warehouse(path: Path, tables: dict[str, list[str]]) -> str:
    """A SQLite database holding ``tables`` (name → CSV rows of ``x,y``); its URL."""
    import sqlalchemy as sa

    url = f"sqlite:///{path}"
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        for name, rows in tables.items():
            conn.execute(sa.text(f"CREATE TABLE {name} (id INTEGER PRIMARY KEY, x REAL, y TEXT)"))
            for i, row in enumerate(rows):
                x, y = row.split(",")
                conn.execute(
                    sa.text(f"INSERT INTO {name} VALUES (:i, :x, :y)"),
                    {"i": i, "x": float(x), "y": y},
                )
    engine.dispose()
    return url


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def sql_world(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, Any]]:
    from fastapi.testclient import TestClient

    from service.api.app import create_app
    from service.cli import create_key_cli, migrate
    from service.settings import Settings
    from tests.support.inprocess import QueueOnly, bearer

    if request.param == "postgres":
        url = str(request.getfixturevalue("private_postgres_database"))
    else:
        url = f"sqlite:///{tmp_path / 'dpfit.db'}"
    alice_db = _warehouse(tmp_path / "alice.db", {"patients": KNOWN_ROWS + [SECRET_ROW]})
    bob_db = _warehouse(
        tmp_path / "bob.db",
        {f"guess{i}": KNOWN_ROWS + [guess] for i, guess in enumerate(CANDIDATES)},
    )
    migrate(url)
    settings = Settings(
        database_url=url,
        data_roots=(tmp_path,),
        workers=1,
        dask_scheduler=None,
        sql_connections={"alice_wh": alice_db, "bob_wh": bob_db},
        sql_connection_owners={"alice_wh": frozenset({"alice"}), "bob_wh": frozenset({"bob"})},
    )
    admin = create_key_cli(url, "admin", "admin")
    app = create_app(settings, dispatcher_factory=QueueOnly)
    with TestClient(app, raise_server_exceptions=False) as client:
        clients: dict[str, Any] = {"admin": TestClient(app, headers=bearer(admin))}
        for name in ("alice", "bob"):
            made = client.post(
                "/v1/keys", json={"name": name, "role": "owner"}, headers=bearer(admin)
            )
            assert made.status_code == 201, made.text
            clients[name] = TestClient(app, headers=bearer(made.json()["key"]))
        yield clients


def test_candidate_tables_in_her_own_database_tell_her_nothing(
    sql_world: dict[str, Any],
) -> None:
    alice, bob, admin = sql_world["alice"], sql_world["bob"], sql_world["admin"]
    alice_id = alice.post("/v1/datasets", json=body("sql://alice_wh/patients")).json()["id"]
    answers = [
        bob.post("/v1/datasets", json=body(f"sql://bob_wh/guess{i}"))
        for i in range(len(CANDIDATES))
    ]
    assert [a.status_code for a in answers] == [201, 201, 201], [a.text for a in answers]
    equal_id = answers[1].json()["id"]
    assert admin.get(f"/v1/datasets/{alice_id}").json()["duplicates"] == [equal_id]
