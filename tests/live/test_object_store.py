"""Object-store sources against a real S3-compatible server (moto's, on loopback)."""

from __future__ import annotations

import hashlib
import io
import os
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from service.data.limits import ReadLimits
from service.data.object_store import (
    open_object_store_source,
    parse_s3_uri,
    reopen_object_store_source,
    s3_filesystem,
)
from service.data.sources import FileSource, SourceError, local_source
from service.settings import Settings
from tests.support.fixtures import EXAMPLES
from tests.support.live import LiveServer, start_server
from tests.support.s3_server import ACCESS_KEY, SECRET_KEY, S3Server, pointed_at, running_s3_server
from tests.support.walkthrough import credit_dataset, logistic_job

CSV = b'age,city,label\n31,Bern,1\n,Z\xc3\xbcrich,0\n45,"a,b",1\n'


def parquet_bytes(table: pa.Table) -> bytes:
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    return buffer.getvalue()


PART_0 = parquet_bytes(pa.table({"x": [0.5, 1.5], "y": [1, 0]}))
PART_1 = parquet_bytes(pa.table({"x": [2.5], "y": [1]}))


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """The server with the standard AWS variables pointing this process at it."""
    with running_s3_server(tmp_path_factory.mktemp("moto")) as server, pointed_at(server):
        server.put("lake", "data/people.csv", CSV)
        server.put("lake", "data/parts/part-1.parquet", PART_1)
        server.put("lake", "data/parts/part-0.parquet", PART_0)
        server.put("lake", "data/parts/_SUCCESS", b"")
        server.put("lake", "data/parts/.part-0.parquet.crc", b"crc")
        server.put("lake", "data/parts/notes.txt", b"not data")
        server.put("lake", "data/parts/nested/part-9.parquet", PART_1)
        # Siblings whose keys start like the folder's: never members of it.
        server.put("lake", "data/parts-extra/part-0.parquet", PART_1)
        server.put("lake", "data/partsx.parquet", PART_1)
        server.put("lake", "data/one.parquet", PART_0)
        server.put("lake", "data/empty/_SUCCESS", b"")
        server.put("lake", "data/notes.txt", b"text")
        server.put("lake", "database.csv", CSV)
        server.put("lake", "secret/people.csv", CSV)
        server.put("other", "data/people.csv", CSV)
        yield server


def settings_with(*roots: str) -> Settings:
    return Settings(
        database_url="sqlite://",
        data_roots=(),
        workers=1,
        dask_scheduler=None,
        object_store_roots=roots,
    )


SETTINGS = settings_with("s3://lake/data")


def rows(source: FileSource, columns: list[str], block: int = 2) -> list[dict[str, object]]:
    batches = list(source.iter_batches(columns, block))
    assert all(b.num_rows <= block for b in batches)
    return pa.Table.from_batches(batches).to_pylist()


# ----------------------------------------------------------------------------------------------
# Settings and URIs
# ----------------------------------------------------------------------------------------------


def test_data_roots_hold_local_and_s3_entries(tmp_path: Path) -> None:
    raw = f"{tmp_path}:s3://lake/data/:s3://other:examples"
    settings = Settings.from_env({"DPFIT_DATA_ROOTS": raw})
    assert settings.data_roots == (tmp_path.resolve(), Path("examples").resolve())
    assert settings.object_store_roots == ("s3://lake/data", "s3://other")
    # Backward compatible: plain ':'-separated local roots.
    legacy = Settings.from_env({"DPFIT_DATA_ROOTS": f"{tmp_path}:examples"})
    assert legacy.data_roots == (tmp_path.resolve(), Path("examples").resolve())
    assert legacy.object_store_roots == ()


@pytest.mark.parametrize("root", ["s3://Upper/x", "s3://lake/../x", "s3://", "s3://lake/./x"])
def test_a_malformed_s3_root_is_a_startup_error(root: str) -> None:
    with pytest.raises(ValueError, match="DPFIT_DATA_ROOTS"):
        Settings.from_env({"DPFIT_DATA_ROOTS": root})


@pytest.mark.parametrize(
    "uri",
    [
        "s3://lake/data/../secret/people.csv",
        "s3://lake/data/./people.csv",
        "s3://lake/data//people.csv",
        "s3://lake/data/people.csv?versionId=1",
        "s3://lake/data/people.csv#x",
        "s3://lake/data/*.csv",
        "s3://lake/data/[ab].csv",
        "s3://lake/data/people\x00.csv",
        "s3://lake/data/people\n.csv",
        "s3:///data/people.csv",
        "https://lake/data/people.csv",
    ],
)
def test_malformed_uris_are_refused_before_any_request(uri: str) -> None:
    with pytest.raises(SourceError):
        parse_s3_uri(uri)


# ----------------------------------------------------------------------------------------------
# Confinement
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "uri",
    [
        "s3://other/data/people.csv",  # another bucket
        "s3://lake/database.csv",  # a sibling whose name starts like the root's prefix
        "s3://lake/secret/people.csv",  # another prefix of the same bucket
        "s3://lake",  # the bucket above the root
        "s3://lake/data/../secret/people.csv",
    ],
)
def test_objects_outside_the_roots_are_refused(s3: S3Server, uri: str) -> None:
    with pytest.raises(SourceError, match="outside the allowed data roots|'\\.\\.'"):
        open_object_store_source(uri, SETTINGS)


def test_no_s3_roots_means_no_object_store_datasets(s3: S3Server) -> None:
    with pytest.raises(SourceError, match="no s3:// data roots"):
        open_object_store_source("s3://lake/data/people.csv", settings_with())


def test_a_whole_bucket_root_admits_its_keys(s3: S3Server) -> None:
    source = open_object_store_source("s3://lake/secret/people.csv", settings_with("s3://lake"))
    assert source.count_rows() == 3


def test_what_is_not_a_dataset_is_refused(s3: S3Server) -> None:
    with pytest.raises(SourceError, match="was not found"):
        open_object_store_source("s3://lake/data/absent.csv", SETTINGS)
    with pytest.raises(SourceError, match=r"not a \.csv, \.parquet or \.pq"):
        open_object_store_source("s3://lake/data/notes.txt", SETTINGS)
    with pytest.raises(SourceError, match="no .parquet files"):
        open_object_store_source("s3://lake/data/empty", SETTINGS)


def test_workers_recheck_the_stored_location(s3: S3Server) -> None:
    location = open_object_store_source("s3://lake/data/people.csv", SETTINGS).location
    assert location == "s3://lake/data/people.csv"
    assert reopen_object_store_source(location, "csv", SETTINGS).count_rows() == 3
    with pytest.raises(SourceError, match="outside the allowed data roots"):
        reopen_object_store_source(location, "csv", settings_with("s3://lake/elsewhere"))
    with pytest.raises(SourceError, match="unknown source format"):
        reopen_object_store_source(location, "sql", SETTINGS)


def test_another_owners_prefix_answers_alike_whatever_exists_and_the_scheme_case(
    s3: S3Server,
) -> None:
    """``s3://lake/data/secret`` scoped to alice inside the open ``s3://lake/data``: for carol
    an existing key and an absent one get the same answer, however the scheme is written (the
    old check compared the raw text, so ``S3://`` asked the store)."""
    s3.put("lake", "data/secret/people.csv", CSV)
    full = replace(
        settings_with("s3://lake/data", "s3://lake/data/secret"),
        root_owners={"s3://lake/data/secret": frozenset({"alice"})},
    )
    carol = replace(full, object_store_roots=("s3://lake/data",))
    answers = set()
    for scheme in ("s3://", "S3://", "S3://"):
        for key in ("people.csv", "absent.csv", ""):
            uri = f"{scheme}lake/data/secret/{key}"
            with pytest.raises(SourceError) as refused:
                open_object_store_source(uri, carol)
            answers.add(str(refused.value).replace(repr(uri), "URI"))
    assert answers == {"URI lies outside the allowed data roots"}
    assert open_object_store_source("S3://lake/data/secret/people.csv", full).count_rows() == 3


def test_objects_are_read_within_the_limits(s3: S3Server) -> None:
    """The same read limits as local files: an oversize line is a row of empty cells, a wide
    header is refused naming the limit."""
    s3.put("lake", "data/long.csv", b"a,b\n1,2\n3," + b"9" * 5000 + b"\n4,5\n")
    s3.put("lake", "data/wide.csv", b",".join([b"c"] * 50) + b"\n" + b"1\n")
    limited = replace(SETTINGS, read_limits=ReadLimits(max_line_bytes=1024, max_columns=10))
    source = open_object_store_source("s3://lake/data/long.csv", limited)
    assert [r["a"] for r in rows(source, ["a"])] == [b"1", b"", b"4"]
    assert source.oversize_lines == 1
    with pytest.raises(SourceError, match="DPFIT_MAX_COLUMNS"):
        open_object_store_source("s3://lake/data/wide.csv", limited).columns()


# ----------------------------------------------------------------------------------------------
# Reading and fingerprints
# ----------------------------------------------------------------------------------------------


def test_a_csv_object_reads_as_raw_cells(s3: S3Server) -> None:
    source = open_object_store_source("s3://lake/data/people.csv", SETTINGS)
    assert (source.format, source.location) == ("csv", "s3://lake/data/people.csv")
    assert source.columns() == ["age", "city", "label"]
    assert source.count_rows() == 3
    assert rows(source, ["label", "city"]) == [
        {"label": b"1", "city": b"Bern"},
        {"label": b"0", "city": "Zürich".encode()},
        {"label": b"1", "city": b"a,b"},
    ]
    assert source.fingerprint() == "sha256:" + hashlib.sha256(CSV).hexdigest()


def test_a_parquet_folder_reads_its_sorted_direct_members(s3: S3Server) -> None:
    for uri in ("s3://lake/data/parts", "s3://lake/data/parts/"):
        source = open_object_store_source(uri, SETTINGS)
        assert (source.format, source.location) == ("parquet", "s3://lake/data/parts")
        assert source.columns() == ["x", "y"]
        # _SUCCESS, .crc, notes.txt, nested/ and the sibling prefixes are not read.
        assert source.count_rows() == 3
        assert rows(source, ["y", "x"]) == [
            {"y": 1, "x": 0.5},
            {"y": 0, "x": 1.5},
            {"y": 1, "x": 2.5},
        ]
    single = open_object_store_source("s3://lake/data/one.parquet", SETTINGS)
    assert single.format == "parquet" and single.count_rows() == 2


def test_fingerprints_equal_the_local_ones_for_equal_content(s3: S3Server, tmp_path: Path) -> None:
    (tmp_path / "people.csv").write_bytes(CSV)
    folder = tmp_path / "parts"
    folder.mkdir()
    (folder / "part-0.parquet").write_bytes(PART_0)
    (folder / "part-1.parquet").write_bytes(PART_1)
    (folder / "_SUCCESS").write_bytes(b"")
    csv_source = open_object_store_source("s3://lake/data/people.csv", SETTINGS)
    folder_source = open_object_store_source("s3://lake/data/parts", SETTINGS)
    assert csv_source.fingerprint() == local_source(tmp_path / "people.csv", "csv").fingerprint()
    assert folder_source.fingerprint() == local_source(folder, "parquet").fingerprint()


def test_fingerprints_see_every_change(s3: S3Server) -> None:
    s3.put("lake", "data/change/a.csv", CSV)
    s3.put("lake", "data/change/parts/part-0.parquet", PART_0)
    file_source = open_object_store_source("s3://lake/data/change/a.csv", SETTINGS)
    folder_source = open_object_store_source("s3://lake/data/change/parts", SETTINGS)
    file_before, folder_before = file_source.fingerprint(), folder_source.fingerprint()
    s3.put("lake", "data/change/a.csv", CSV.replace(b"31", b"32"))
    assert file_source.fingerprint() != file_before
    # A new member is seen by the same source object: listings are never cached.
    s3.put("lake", "data/change/parts/part-1.parquet", PART_1)
    assert folder_source.fingerprint() != folder_before
    assert folder_source.count_rows() == 3
    s3.delete("lake", "data/change/parts/part-1.parquet")
    assert folder_source.fingerprint() == folder_before


def test_the_filesystem_is_read_only(s3: S3Server) -> None:
    filesystem = s3_filesystem()
    with pytest.raises(PermissionError):
        filesystem.open_output_stream("lake/data/written.csv")
    with pytest.raises(PermissionError):
        filesystem.delete_file("lake/data/people.csv")
    assert open_object_store_source("s3://lake/data/people.csv", SETTINGS).count_rows() == 3


def test_an_unreachable_store_leaks_nothing(s3: S3Server) -> None:
    saved = os.environ["AWS_ENDPOINT_URL"]
    os.environ["AWS_ENDPOINT_URL"] = "http://127.0.0.1:9"
    try:
        with pytest.raises(SourceError) as caught:
            open_object_store_source("s3://lake/data/people.csv", SETTINGS)
    finally:
        os.environ["AWS_ENDPOINT_URL"] = saved
    message = str(caught.value)
    assert message == "'s3://lake/data/people.csv' could not be reached in the object store"
    assert caught.value.__cause__ is None and caught.value.__suppress_context__
    assert SECRET_KEY not in message and "127.0.0.1" not in message


# ----------------------------------------------------------------------------------------------
# End to end: a live server registers S3 objects, runs jobs and releases models
# ----------------------------------------------------------------------------------------------


def wait_done(client: httpx.Client, job_id: str, timeout: float = 180.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = client.get(f"/v1/jobs/{job_id}").json()
        if job["status"] in ("succeeded", "failed", "cancelled"):
            return job  # type: ignore[no-any-return]
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} did not finish")


@pytest.fixture(scope="module")
def live(s3: S3Server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """A live `dpfit serve` with the root ``s3://lake/data`` (the AWS variables that point at the
    moto server are in the environment it inherits), and the example data in the bucket: as a
    CSV object and as a Parquet folder of two parts."""
    credit = (EXAMPLES / "credit.csv").read_bytes()
    s3.put("lake", "data/credit/credit.csv", credit)
    table = pacsv.read_csv(io.BytesIO(credit))
    half = table.num_rows // 2
    s3.put("lake", "data/credit-parts/part-0.parquet", parquet_bytes(table.slice(0, half)))
    s3.put("lake", "data/credit-parts/part-1.parquet", parquet_bytes(table.slice(half)))
    home = tmp_path_factory.mktemp("s3-live")
    roots: list[Any] = [EXAMPLES, "s3://lake/data"]
    server = start_server(f"sqlite:///{home / 'dpfit.db'}", data_roots=roots, home=home)
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("uri", "fmt"),
    [("s3://lake/data/credit-parts", "parquet"), ("s3://lake/data/credit/credit.csv", "csv")],
)
def test_s3_objects_end_to_end(live: LiveServer, uri: str, fmt: str) -> None:
    owner = live.client(live.key("s3-owner", "owner"))
    analyst = live.client(live.key("s3-analyst", "analyst"))
    response = owner.post("/v1/datasets", json=credit_dataset(uri=uri))
    assert response.status_code == 201, response.text
    dataset = response.json()
    assert dataset["n_rows"] == 4000
    assert dataset["source"] == {"uri": uri, "format": fmt}
    assert SECRET_KEY not in response.text
    grant = owner.post(f"/v1/datasets/{dataset['id']}/grants", json={"principal": "s3-analyst"})
    assert grant.status_code == 201, grant.text

    job = analyst.post("/v1/jobs", json=logistic_job(dataset["id"]))
    assert job.status_code == 202, job.text
    done = wait_done(analyst, job.json()["id"])
    assert done["status"] == "succeeded", done
    model = analyst.get(f"/v1/models/{done['model_id']}")
    assert model.status_code == 200, model.text
    assert len(model.json()["coefficients"]) == dataset["n_features"]


@pytest.mark.parametrize(
    "uri",
    [
        "s3://other/data/people.csv",
        "s3://lake/secret/people.csv",
        "s3://lake/database.csv",
        "s3://lake/data/../secret/people.csv",
        "s3://lake/data/credit/../../secret/people.csv",
        "s3://lake/data/absent.csv",
        "s3://lake/data/people.csv?versionId=1",
    ],
)
def test_refusals_name_the_field_and_leak_nothing(live: LiveServer, uri: str) -> None:
    owner = live.client(live.key("s3-owner", "owner"))
    response = owner.post("/v1/datasets", json=credit_dataset(uri=uri))
    assert response.status_code == 422, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    assert response.json()["field"] == "source.uri"
    for secret in (SECRET_KEY, ACCESS_KEY, "127.0.0.1"):
        assert secret not in response.text
