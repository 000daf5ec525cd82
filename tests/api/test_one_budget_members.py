"""One budget per data, file by file: a Parquet folder claims the content of each member file, so
the same bytes never back two datasets whether they are registered as a single file or inside a
folder, in either order (the in-process app on SQLite and PostgreSQL).

Before member claims, each of the three copies below got a 201 — a new budget for rows that
already had one. Content is compared within one owner's datasets only (issue 22): another
owner's copy registers, and admins see it as a duplicate."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sqlalchemy import select

from service.data.sources import local_source
from service.db.models import Dataset, SourceClaim
from service.domain.claims import content_claim, member_claims, owned_content_claim
from tests.support.inprocess import InProcessServer, in_process_server

LABEL = {"column": "y", "positive": "yes", "negative": "no"}
FEATURES = [{"name": "x", "type": "numeric", "min": -10.0, "max": 10.0}]


def write_part(path: Path) -> None:
    """A small Parquet file whose content is its own (a random 40-bit value: the 1,000 values
    this drew before collided between two of a test's seven files about one run in fifty)."""
    seed = uuid.uuid4().int % (1 << 40)
    table = pa.table(
        {"x": [seed / (1 << 37), -0.5, 0.25, (seed % 7) / 10.0], "y": ["yes", "no", "yes", "no"]}
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)


def body(uri: str) -> dict[str, Any]:
    return {
        "name": "parts",
        "source": {"uri": uri},
        "label": dict(LABEL),
        "features": [dict(f) for f in FEATURES],
        "budget": {"epsilon": 1.0, "delta": 1e-6},
    }


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def world(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """An app whose data root is ``root``, an owner, another owner, and ``register``."""
    if request.param == "postgres":
        url = str(request.getfixturevalue("private_postgres_database"))
    else:
        url = f"sqlite:///{tmp_path / 'dpfit.db'}"
    root = tmp_path / "data"
    root.mkdir()
    with in_process_server(url, root) as app:
        owner = app.client(app.key("owner", "owner"))
        other = app.client(app.key("other", "owner"))

        def register(uri: str, who: Any = owner) -> Any:
            return who.post("/v1/datasets", json=body(uri))

        admin = app.client(app.keys["admin"])
        yield {
            "app": app,
            "root": root,
            "owner": owner,
            "other": other,
            "admin": admin,
            "register": register,
        }


def created(response: Any) -> str:
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def refused(response: Any, dataset_id: str | None) -> None:
    """409 on ``source.uri``, naming ``dataset_id`` (``None``: naming none)."""
    assert response.status_code == 409, response.text
    problem = response.json()
    assert problem["field"] == "source.uri"
    assert problem.get("dataset_id") == dataset_id, problem


def duplicate_for_admins(world: dict[str, Any], copy_id: str, original_id: str) -> None:
    """Another owner's copy registered: admins see the pair; its owner sees no such field."""
    for dataset_id, other_id in ((copy_id, original_id), (original_id, copy_id)):
        view = world["admin"].get(f"/v1/datasets/{dataset_id}").json()
        assert other_id in view["duplicates"], view
    assert world["other"].get(f"/v1/datasets/{copy_id}").json()["duplicates"] is None


def multi_folder(root: Path, name: str = "multi", parts: int = 3) -> Path:
    folder = root / name
    for k in range(parts):
        write_part(folder / f"part-{k}.parquet")
    return folder


def test_a_member_file_copied_out_of_a_registered_folder_is_refused(world: dict[str, Any]) -> None:
    root, register = world["root"], world["register"]
    folder = multi_folder(root)
    folder_id = created(register("multi"))
    scratch = root / "scratch"
    scratch.mkdir()
    shutil.copyfile(folder / "part-2.parquet", scratch / "p2.parquet")
    refused(register("scratch/p2.parquet"), folder_id)
    refused(register((scratch / "p2.parquet").as_uri()), folder_id)
    # Another owner's copy of those bytes registers (no oracle on the owner's data).
    duplicate_for_admins(world, created(register("scratch/p2.parquet", world["other"])), folder_id)


def test_a_folder_holding_part_of_a_registered_folder_is_refused(world: dict[str, Any]) -> None:
    root, register = world["root"], world["register"]
    folder = multi_folder(root)
    folder_id = created(register("multi"))
    partial = root / "partial"
    partial.mkdir()
    for name in ("part-0.parquet", "part-1.parquet"):
        shutil.copyfile(folder / name, partial / name)
    refused(register("partial"), folder_id)
    # One registered member among new files is enough, under any name.
    mixed = root / "mixed"
    write_part(mixed / "a-new.parquet")
    shutil.copyfile(folder / "part-1.parquet", mixed / "renamed.parquet")
    refused(register("mixed"), folder_id)
    duplicate_for_admins(world, created(register("mixed", world["other"])), folder_id)


def test_a_folder_holding_registered_files_is_refused(world: dict[str, Any]) -> None:
    root, register = world["root"], world["register"]
    write_part(root / "singles" / "one.parquet")
    write_part(root / "singles" / "two.parquet")
    one_id = created(register("singles/one.parquet"))
    two_id = created(register("singles/two.parquet"))
    holdout = root / "withholdout"
    holdout.mkdir()
    shutil.copyfile(root / "singles" / "one.parquet", holdout / "a.parquet")
    shutil.copyfile(root / "singles" / "two.parquet", holdout / "b.parquet")
    refused(register("withholdout"), one_id)  # the earliest holder is named
    # A registered file beside a new one: still the same rows.
    half = root / "half"
    write_part(half / "a.parquet")
    shutil.copyfile(root / "singles" / "two.parquet", half / "b.parquet")
    refused(register("half"), two_id)


def test_a_folder_holding_a_member_of_another_registered_folder_is_refused(
    world: dict[str, Any],
) -> None:
    root, register = world["root"], world["register"]
    folder = multi_folder(root)
    folder_id = created(register("multi"))
    regrouped = root / "regrouped"
    write_part(regrouped / "part-0.parquet")  # same name as a member, other content: new data
    write_part(regrouped / "part-1.parquet")
    shutil.copyfile(folder / "part-2.parquet", regrouped / "part-9.parquet")
    refused(register("regrouped"), folder_id)


def test_distinct_files_and_folders_still_register(world: dict[str, Any]) -> None:
    root, register, app = world["root"], world["register"], world["app"]
    multi_folder(root, "first")
    multi_folder(root, "second")  # same member names, other content
    write_part(root / "alone.parquet")
    ids = [created(register(uri)) for uri in ("first", "second", "alone.parquet")]

    # Each folder holds one content claim per distinct member, the key a single file of those
    # bytes would take.
    server: InProcessServer = app
    sessions = server.app_client.app.state.sessions  # type: ignore[attr-defined]
    with sessions() as session:
        for dataset_id, folder in zip(ids[:2], ("first", "second"), strict=True):
            row = session.get(Dataset, dataset_id)
            assert row is not None and row.file_fingerprints is not None
            held = set(
                session.scalars(select(SourceClaim.key).where(SourceClaim.dataset_id == dataset_id))
            )
            members = member_claims(row.file_fingerprints)
            owned = {owned_content_claim("owner", key) for key in members}
            assert owned <= held
            for k in range(3):
                single = local_source(root / folder / f"part-{k}.parquet", "parquet")
                key = content_claim(single.fingerprint())
                assert owned_content_claim("owner", key) in held


def test_a_folder_holding_one_file_twice_is_refused(world: dict[str, Any]) -> None:
    """Byte-identical members would put their rows into every job twice (one person counted as
    two rows): a 422 naming the two files, before any budget exists."""
    root, register = world["root"], world["register"]
    dup = root / "dup"
    write_part(dup / "a.parquet")
    shutil.copyfile(dup / "a.parquet", dup / "b.parquet")
    write_part(dup / "c.parquet")
    response = register("dup")
    assert response.status_code == 422, response.text
    problem = response.json()
    assert problem["field"] == "source.uri" and "'a.parquet' and 'b.parquet'" in problem["detail"]
    (dup / "b.parquet").unlink()
    created(register("dup"))


def test_a_members_fingerprint_is_the_single_files_fingerprint(tmp_path: Path) -> None:
    """The premise of member claims: the same bytes have one fingerprint, as a file or inside a
    folder (the folder's own fingerprint stays the length-prefixed whole)."""
    folder = multi_folder(tmp_path, parts=2)
    whole, files = local_source(folder, "parquet").fingerprints()
    assert files is not None
    for name, fp in files.items():
        assert local_source(folder / name, "parquet").fingerprint() == fp
        assert local_source(folder / name, "parquet").fingerprints() == (fp, None)
    assert whole not in files.values()
