"""Member claims on object stores: an ``s3://`` prefix is a Parquet folder like a local one, so
each of its member objects claims its content — against other objects and against local files
of the same bytes (a real S3-compatible server, moto's, on loopback; the app in process)."""

from __future__ import annotations

import io
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fastapi.testclient import TestClient

from service.api.app import create_app
from service.cli import create_key_cli, migrate
from service.settings import Settings
from tests.support.inprocess import QueueOnly, bearer
from tests.support.s3_server import S3Server, pointed_at, running_s3_server


def part_bytes() -> bytes:
    """A small Parquet file whose content is its own: a 128-bit random tag in its own column
    (a value drawn from 1,000 made two of the test's seven parts equal once in ~50 runs)."""
    tag = uuid.uuid4().hex
    table = pa.table({"x": [1.5, -0.5, 0.25], "y": ["yes", "no", "yes"], "tag": [tag, tag, tag]})
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    return buffer.getvalue()


def body(uri: str) -> dict[str, Any]:
    return {
        "name": "parts",
        "source": {"uri": uri},
        "label": {"column": "y", "positive": "yes", "negative": "no"},
        "features": [{"name": "x", "type": "numeric", "min": -10.0, "max": 10.0}],
        "budget": {"epsilon": 1.0, "delta": 1e-6},
    }


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    with running_s3_server(tmp_path_factory.mktemp("moto")) as server, pointed_at(server):
        yield server


@pytest.fixture
def owner(s3: S3Server, tmp_path: Path) -> Iterator[TestClient]:
    """An owner of the in-process app with the roots ``tmp_path/data`` and ``s3://lake/data``."""
    url = f"sqlite:///{tmp_path / 'dpfit.db'}"
    (tmp_path / "data").mkdir()
    migrate(url)
    settings = Settings(
        database_url=url,
        data_roots=(tmp_path / "data",),
        object_store_roots=("s3://lake/data",),
        workers=1,
        dask_scheduler=None,
    )
    admin = create_key_cli(url, "admin", "admin")
    with TestClient(
        create_app(settings, dispatcher_factory=QueueOnly), raise_server_exceptions=False
    ) as client:
        made = client.post("/v1/keys", json={"name": "o", "role": "owner"}, headers=bearer(admin))
        client.headers.update(bearer(made.json()["key"]))
        yield client


def created(response: Any) -> str:
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def refused(response: Any, dataset_id: str) -> None:
    assert response.status_code == 409, response.text
    assert response.json()["dataset_id"] == dataset_id


def test_object_store_members_are_claimed_in_both_directions(
    s3: S3Server, owner: TestClient, tmp_path: Path
) -> None:
    t = uuid.uuid4().hex[:8]

    def register(uri: str) -> Any:
        return owner.post("/v1/datasets", json=body(uri))

    parts = [part_bytes() for _ in range(3)]
    for k, data in enumerate(parts):
        s3.put("lake", f"data/{t}/multi/part-{k}.parquet", data)
    folder_id = created(register(f"s3://lake/data/{t}/multi"))

    # single object ⊂ registered prefix; a prefix holding a subset; the same bytes on local disk
    s3.put("lake", f"data/{t}/scratch/p2.parquet", parts[2])
    refused(register(f"s3://lake/data/{t}/scratch/p2.parquet"), folder_id)
    s3.put("lake", f"data/{t}/partial/part-0.parquet", parts[0])
    s3.put("lake", f"data/{t}/partial/part-1.parquet", parts[1])
    refused(register(f"s3://lake/data/{t}/partial"), folder_id)
    (tmp_path / "data" / "local-copy.parquet").write_bytes(parts[1])
    refused(register("local-copy.parquet"), folder_id)

    # A registered single object inside a new prefix, beside a new member.
    alone = part_bytes()
    s3.put("lake", f"data/{t}/alone.parquet", alone)
    alone_id = created(register(f"s3://lake/data/{t}/alone.parquet"))
    s3.put("lake", f"data/{t}/withholdout/a.parquet", alone)
    s3.put("lake", f"data/{t}/withholdout/b.parquet", part_bytes())
    refused(register(f"s3://lake/data/{t}/withholdout"), alone_id)

    # A local folder holding an object's bytes is the same data too.
    local = tmp_path / "data" / "local-folder"
    local.mkdir()
    (local / "a.parquet").write_bytes(alone)
    refused(register("local-folder"), alone_id)

    # Distinct content still registers.
    for k in range(2):
        s3.put("lake", f"data/{t}/fresh/part-{k}.parquet", part_bytes())
    created(register(f"s3://lake/data/{t}/fresh"))
