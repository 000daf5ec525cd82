"""Dataset registration through live servers: the owner's validation report (and who sees it),
strict mode, one budget per data (409s, concurrent registrations, retirement) and data roots
scoped to owners."""

from __future__ import annotations

import shutil
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.support.live import LiveServer, start_server
from tests.support.walkthrough import EXAMPLES, credit_dataset, logistic_job

# --------------------------------------------------------------------------------------------
# A crafted file: every kind of cell the report counts, at known rows
# --------------------------------------------------------------------------------------------

FEATURES: list[dict[str, Any]] = [
    {"name": "x", "type": "numeric", "min": 0, "max": 10},
    {"name": "c", "type": "categorical", "categories": ["a", "b"]},
]
LABEL = {"column": "y", "positive": "yes", "negative": "no"}
CLEAN_ROWS = 40


def crafted_csv(path: Path, *, tag: str) -> None:
    """40 clean rows, then: x empty, x not a number, x out of bounds (twice), x with an
    undecodable byte; c empty, c unknown; y outside the declared values (twice), y empty.

    ``tag`` goes into an unused column so that every crafted file has content of its own."""
    lines = [f"x,c,y,tag_{tag}".encode()]
    for i in range(CLEAN_ROWS):
        lines.append(f"{i % 10},{'ab'[i % 2]},{('yes', 'no')[i % 3 == 0]},".encode())
    lines += [
        b",a,yes,",  # x missing
        b"abc,b,no,",  # x unparseable
        b"20,a,yes,",  # x out of bounds
        b"-3,b,no,",  # x out of bounds
        b"5\xff,a,no,",  # x unparseable (undecodable byte)
        b"1,,yes,",  # c missing
        b"2,z,no,",  # c unknown
        b"3,a,maybe,",  # y outside the declared values
        b"4,b,YES!,",  # y outside the declared values
        b"5,a,,",  # y missing
    ]
    path.write_bytes(b"\n".join(lines) + b"\n")


def crafted_parquet(path: Path, *, tag: str) -> None:
    """The same counts as :func:`crafted_csv` with typed Parquet columns (x: double with a null,
    ±inf and out-of-bounds values; c and y: strings with nulls)."""
    x: list[float | None] = [float(i % 10) for i in range(CLEAN_ROWS)]
    c: list[str | None] = ["ab"[i % 2] for i in range(CLEAN_ROWS)]
    y: list[str | None] = [("yes", "no")[i % 3 == 0] for i in range(CLEAN_ROWS)]
    extra = [
        (None, "a", "yes"),
        (float("-inf"), "b", "no"),
        (20.0, "a", "yes"),
        (-3.0, "b", "no"),
        (float("inf"), "a", "no"),
        (1.0, None, "yes"),
        (2.0, "z", "no"),
        (3.0, "a", "maybe"),
        (4.0, "b", "YES!"),
        (5.0, "a", None),
    ]
    for xv, cv, yv in extra:
        x.append(xv)
        c.append(cv)
        y.append(yv)
    table = pa.table(
        {
            "x": pa.array(x, pa.float64()),
            "c": pa.array(c, pa.string()),
            "y": pa.array(y, pa.string()),
            f"tag_{tag}": pa.array([0] * len(x), pa.int64()),
        }
    )
    pq.write_table(table, path)


def crafted_body(uri: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": "crafted",
        "source": {"uri": uri},
        "label": dict(LABEL),
        "features": [dict(f) for f in FEATURES],
        "budget": {"epsilon": 5.0, "delta": 1e-5},
        **extra,
    }


def tag() -> str:
    return uuid.uuid4().hex[:8]


@pytest.fixture
def team(sqlite_server: LiveServer) -> dict[str, Any]:
    t = tag()
    server = sqlite_server
    names = {"owner": f"owner-{t}", "other": f"other-{t}", "analyst": f"analyst-{t}"}
    roles = {"owner": "owner", "other": "owner", "analyst": "analyst"}
    clients = {k: server.client(server.key(v, roles[k])) for k, v in names.items()}
    clients["admin"] = server.client(server.key("admin", "admin"))
    return {"server": server, "names": names, **clients}


def problem(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    return response.json()  # type: ignore[no-any-return]


# --------------------------------------------------------------------------------------------
# The validation report
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["csv", "parquet"])
def test_validation_report_counts_every_kind_of_cell(team: dict[str, Any], kind: str) -> None:
    t = tag()
    name = f"crafted-{t}.{kind}"
    path = team["server"].home / name
    (crafted_csv if kind == "csv" else crafted_parquet)(path, tag=t)
    response = team["owner"].post("/v1/datasets", json=crafted_body(name))
    assert response.status_code == 201, response.text
    dataset = response.json()
    assert dataset["n_rows"] == CLEAN_ROWS + 10
    report = dataset["validation"]
    assert report["rows"] == CLEAN_ROWS + 10
    x, c = report["features"]
    assert x == {
        "name": "x",
        "missing": 1,
        "unparseable": 2,  # "abc" and b"5\xff" (CSV); ±inf (Parquet)
        "out_of_bounds": 2,
        "unknown_category": 0,
        "oversize": 0,
    }
    assert c == {"name": "c", "missing": 1, "unparseable": 0, "out_of_bounds": 0,
                 "unknown_category": 1, "oversize": 0}  # fmt: skip
    assert report["label"] == {"column": "y", "missing": 1, "outside_declared": 2,
                               "unparseable": 0, "oversize": 0}  # fmt: skip
    # The owner reads it back; so does an admin.
    for who in ("owner", "admin"):
        again = team[who].get(f"/v1/datasets/{dataset['id']}").json()
        assert again["validation"] == report


def test_validation_report_is_hidden_from_analysts(team: dict[str, Any]) -> None:
    body = credit_dataset()
    dataset = team["owner"].post("/v1/datasets", json=body).json()
    assert dataset["validation"]["rows"] == dataset["n_rows"]
    grant = team["owner"].post(
        f"/v1/datasets/{dataset['id']}/grants", json={"principal": team["names"]["analyst"]}
    )
    assert grant.status_code == 201, grant.text
    seen = team["analyst"].get(f"/v1/datasets/{dataset['id']}").json()
    assert seen["validation"] is None and seen["source"] is None
    listed = team["analyst"].get("/v1/datasets")
    assert listed.status_code == 200
    rows = listed.json()
    rows = rows["items"] if isinstance(rows, dict) else rows  # a paginated envelope, or a list
    mine = [d for d in rows if d["id"] == dataset["id"]]
    assert len(mine) == 1 and mine[0]["validation"] is None
    owners_list = team["owner"].get("/v1/datasets").json()
    owners_list = owners_list["items"] if isinstance(owners_list, dict) else owners_list
    assert [d["validation"] for d in owners_list if d["id"] == dataset["id"]] == [
        dataset["validation"]
    ]
    # Another owner does not see the dataset at all.
    problem(team["other"].get(f"/v1/datasets/{dataset['id']}"), 404)


# --------------------------------------------------------------------------------------------
# Strict mode
# --------------------------------------------------------------------------------------------


def test_strict_mode_refuses_and_names_the_field(team: dict[str, Any]) -> None:
    t = tag()
    name = f"strict-{t}.csv"
    crafted_csv(team["server"].home / name, tag=t)
    got = problem(team["owner"].post("/v1/datasets", json=crafted_body(name, strict=True)), 422)
    assert got["field"] == "label.positive", got
    assert "2 of 50" in got["detail"]

    # With the labels fixed, the numeric column's non-numbers are what strict refuses.
    fixed = team["server"].home / f"strict-fixed-{t}.csv"
    text = (team["server"].home / name).read_bytes()
    fixed.write_bytes(text.replace(b",maybe,", b",yes,").replace(b",YES!,", b",no,"))
    got = problem(
        team["owner"].post("/v1/datasets", json=crafted_body(fixed.name, strict=True)), 422
    )
    assert got["field"] == "features.0.name", got
    assert "2 of 50" in got["detail"]

    # Nothing was registered by the refusals: the same files register without strict.
    assert team["owner"].post("/v1/datasets", json=crafted_body(name)).status_code == 201
    assert team["owner"].post("/v1/datasets", json=crafted_body(fixed.name)).status_code == 201

    # A clean file passes strict mode.
    clean = credit_dataset()
    clean["strict"] = True
    response = team["owner"].post("/v1/datasets", json=clean)
    assert response.status_code == 201, response.text


# --------------------------------------------------------------------------------------------
# One budget per data
# --------------------------------------------------------------------------------------------


def test_the_same_data_registers_once(team: dict[str, Any]) -> None:
    body = credit_dataset()
    uri = body["source"]["uri"]
    first = team["owner"].post("/v1/datasets", json=body)
    assert first.status_code == 201, first.text
    first_id = first.json()["id"]

    # The same path: the owner and an admin are told which dataset holds it, another owner not.
    again = problem(team["owner"].post("/v1/datasets", json=credit_dataset(uri=uri)), 409)
    assert again["dataset_id"] == first_id and again["field"] == "source.uri"
    by_admin = problem(team["admin"].post("/v1/datasets", json=credit_dataset(uri=uri)), 409)
    assert by_admin["dataset_id"] == first_id
    other = problem(team["other"].post("/v1/datasets", json=credit_dataset(uri=uri)), 409)
    assert "dataset_id" not in other and first_id not in other["detail"]

    # The same bytes under another path (and through a file:// URI).
    copy = team["server"].home / f"copy-{tag()}.csv"
    from tests.support.walkthrough import COPIES

    shutil.copyfile(COPIES / uri, copy)
    for where in (copy.name, copy.as_uri()):
        got = problem(team["owner"].post("/v1/datasets", json=credit_dataset(uri=where)), 409)
        assert got.get("dataset_id") == first_id, got
    # Another owner's copy registers: content is compared within one owner's data only, so a
    # registration tells nobody whether another owner holds the same bytes (issue 22); admins
    # see the pair.
    theirs = team["other"].post("/v1/datasets", json=credit_dataset(uri=copy.name))
    assert theirs.status_code == 201, theirs.text
    view = team["admin"].get(f"/v1/datasets/{first_id}").json()
    assert theirs.json()["id"] in view["duplicates"], view

    # A budget exceeded on the first dataset cannot be reset by registering again.
    assert team["owner"].get(f"/v1/datasets/{first_id}").json()["retired_at"] is None


def test_a_folder_and_the_files_inside_it_are_the_same_data(team: dict[str, Any]) -> None:
    """A Parquet folder and a file of it back one dataset together, in either order."""
    home = team["server"].home
    for first_is_folder in (True, False):
        t = tag()
        folder = home / f"folder-{t}"
        folder.mkdir()
        for part in range(2):
            crafted_parquet(folder / f"part-{part}.parquet", tag=f"{t}{part}")
        folder_body = crafted_body(folder.name)
        folder_body["source"]["format"] = "parquet"
        file_body = crafted_body(f"{folder.name}/part-1.parquet")
        first, second = (folder_body, file_body) if first_is_folder else (file_body, folder_body)
        created = team["owner"].post("/v1/datasets", json=first)
        assert created.status_code == 201, created.text
        got = problem(team["owner"].post("/v1/datasets", json=second), 409)
        assert got["dataset_id"] == created.json()["id"]
        assert "dataset_id" not in problem(team["other"].post("/v1/datasets", json=second), 409)


def _register_concurrently(
    server: LiveServer, key: str, bodies: list[dict[str, Any]]
) -> list[tuple[int, str]]:
    """Every body POSTed at once from its own client; (status, source uri) sorted."""
    barrier = threading.Barrier(len(bodies))
    codes: list[tuple[int, str]] = []
    lock = threading.Lock()

    def register(body: dict[str, Any]) -> None:
        with server.client(key, timeout=120) as http:
            barrier.wait()
            code = http.post("/v1/datasets", json=body).status_code
        with lock:
            codes.append((code, body["source"]["uri"]))

    threads = [threading.Thread(target=register, args=(b,)) for b in bodies]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sorted(codes)


@pytest.mark.postgres
def test_concurrent_registrations_of_one_source_admit_exactly_one(server: LiveServer) -> None:
    """Eight clients register one file at once (four by its path, four by a copy of its
    bytes): exactly one 201, seven 409s, on SQLite and PostgreSQL."""
    t = tag()
    owner_key = server.key(f"racer-{t}", "owner")
    body = credit_dataset()
    copy = server.home / f"race-copy-{t}.csv"
    from tests.support.walkthrough import COPIES

    shutil.copyfile(COPIES / body["source"]["uri"], copy)
    bodies = [credit_dataset(uri=body["source"]["uri"]) for _ in range(4)]
    bodies += [credit_dataset(uri=copy.name) for _ in range(4)]
    codes = [code for code, _ in _register_concurrently(server, owner_key, bodies)]
    assert codes == [201] + [409] * 7, codes
    with server.client(owner_key) as owner:
        listed = owner.get("/v1/datasets").json()
    listed = listed["items"] if isinstance(listed, dict) else listed
    assert len(listed) == 1


@pytest.mark.postgres
def test_concurrent_registrations_of_a_folder_and_its_files_admit_exactly_one(
    server: LiveServer,
) -> None:
    """A folder (four clients) and each of its two files (two clients each) at once: either the
    folder is registered once, or each file once (two files are different data) — never both.
    Nesting is a range, not a key: this holds by the registrations' serialisation."""
    t = tag()
    owner_key = server.key(f"nest-racer-{t}", "owner")
    folder = server.home / f"race-folder-{t}"
    folder.mkdir()
    for part in range(2):
        crafted_parquet(folder / f"part-{part}.parquet", tag=f"{t}{part}")
    folder_body = crafted_body(folder.name)
    folder_body["source"]["format"] = "parquet"
    bodies = [folder_body] * 4
    bodies += [crafted_body(f"{folder.name}/part-{part % 2}.parquet") for part in range(4)]
    results = _register_concurrently(server, owner_key, bodies)
    created = sorted(uri for code, uri in results if code == 201)
    assert all(code in (201, 409) for code, _ in results), results
    assert created in (
        [folder.name],
        [f"{folder.name}/part-0.parquet", f"{folder.name}/part-1.parquet"],
    ), results


def test_retired_dataset_admits_no_job_and_its_data_stays_claimed(
    team: dict[str, Any],
) -> None:
    body = credit_dataset(epsilon=10.0)
    dataset = team["owner"].post("/v1/datasets", json=body).json()
    dataset_id = dataset["id"]
    team["owner"].post(
        f"/v1/datasets/{dataset_id}/grants", json={"principal": team["names"]["analyst"]}
    )
    job = team["analyst"].post("/v1/jobs", json=logistic_job(dataset_id, epsilon=0.5))
    assert job.status_code == 202, job.text

    # Only admins retire; everyone else gets 404 (the owner too: retirement is the operator's).
    for who in ("owner", "other", "analyst"):
        problem(team[who].post(f"/v1/datasets/{dataset_id}/retire"), 404)
    retired = team["admin"].post(f"/v1/datasets/{dataset_id}/retire")
    assert retired.status_code == 200, retired.text
    retired_at = retired.json()["retired_at"]
    assert retired_at is not None
    again = team["admin"].post(f"/v1/datasets/{dataset_id}/retire").json()
    assert again["retired_at"] == retired_at  # idempotent
    problem(team["admin"].post("/v1/datasets/ds_missing/retire"), 404)

    refused = problem(team["analyst"].post("/v1/jobs", json=logistic_job(dataset_id)), 409)
    assert refused["field"] == "dataset_id" and "retired" in refused["detail"]
    assert team["analyst"].get(f"/v1/datasets/{dataset_id}").json()["retired_at"] == retired_at

    # The budget is final: the same data never gets a second one, for anyone.
    for who in ("owner", "other", "admin"):
        problem(team[who].post("/v1/datasets", json=credit_dataset(uri=body["source"]["uri"])), 409)
    # The job admitted before retirement still runs to its end.
    job_id = job.json()["id"]
    deadline = time.monotonic() + 120
    while (state := team["analyst"].get(f"/v1/jobs/{job_id}").json())["status"] in (
        "queued",
        "running",
    ):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert state["status"] == "succeeded", state


@pytest.mark.postgres
def test_no_job_is_admitted_after_retirement_under_concurrent_submissions(
    server: LiveServer,
) -> None:
    """Eight analysts submit jobs in a loop while an admin retires the dataset: every charge on
    the ledger was written before the retirement, every later submission answers 409."""
    t = tag()
    owner = server.client(server.key(f"owner-r{t}", "owner"))
    admin = server.client(server.key("admin", "admin"))
    analysts = [f"analyst-r{t}-{i}" for i in range(8)]
    keys = [server.key(name, "analyst") for name in analysts]
    dataset_id = owner.post("/v1/datasets", json=credit_dataset(epsilon=1000.0)).json()["id"]
    for name in analysts:
        owner.post(f"/v1/datasets/{dataset_id}/grants", json={"principal": name})
    job = logistic_job(dataset_id, epsilon=0.5, delta=1e-6, iterations=5)
    first_admitted = threading.Event()
    last: list[dict[str, Any]] = []
    lock = threading.Lock()

    def submit(key: str) -> None:
        with server.client(key, timeout=120) as http:
            for _ in range(500):  # until refused (the retirement comes after the first 202)
                response = http.post("/v1/jobs", json=job)
                assert response.status_code in (202, 409), response.text
                if response.status_code == 202:
                    first_admitted.set()
                    continue
                with lock:
                    last.append(response.json())
                return

    threads = [threading.Thread(target=submit, args=(k,)) for k in keys]
    for thread in threads:
        thread.start()
    assert first_admitted.wait(120)
    response = admin.post(f"/v1/datasets/{dataset_id}/retire")
    for thread in threads:
        thread.join()
    assert response.status_code == 200, response.text
    retired_at = response.json()["retired_at"]
    # Every client stopped on the retirement (not on the budget), and stays refused.
    assert len(last) == len(keys) and all("retired" in p["detail"] for p in last), last
    for key in keys:
        with server.client(key) as http:
            assert http.post("/v1/jobs", json=job).status_code == 409
    charges = owner.get(f"/v1/datasets/{dataset_id}/ledger").json()["charges"]
    assert charges and all(
        c["created_at"] <= retired_at for c in charges if c["kind"] == "charge"
    ), (retired_at, charges)


def test_an_undecodable_byte_registers_and_every_job_succeeds(team: dict[str, Any]) -> None:
    """One undecodable byte in one cell of a used column: registration counts it (unparseable)
    and jobs on the file succeed, like jobs on the neighbouring file without the byte."""
    t = tag()
    lines = (EXAMPLES / "credit.csv").read_bytes().splitlines()
    header, rows = lines[0] + f",tag_{t}".encode(), [r + b"," for r in lines[1:]]
    bad = team["server"].home / f"byte-{t}.csv"
    rows_bad = list(rows)
    rows_bad[17] = b"4\xff" + rows_bad[17][2:]  # the age cell of one row
    bad.write_bytes(b"\n".join([header, *rows_bad]) + b"\n")
    dataset = team["owner"].post("/v1/datasets", json=credit_dataset(uri=bad.name))
    assert dataset.status_code == 201, dataset.text
    age = dataset.json()["validation"]["features"][0]
    assert age["name"] == "age" and age["unparseable"] == 1
    dataset_id = dataset.json()["id"]
    team["owner"].post(
        f"/v1/datasets/{dataset_id}/grants", json={"principal": team["names"]["analyst"]}
    )
    jobs = [
        team["analyst"].post("/v1/jobs", json=logistic_job(dataset_id, epsilon=0.5)).json()["id"]
        for _ in range(2)
    ]
    for job_id in jobs:
        deadline = time.monotonic() + 120
        while (state := team["analyst"].get(f"/v1/jobs/{job_id}").json())["status"] in (
            "queued",
            "running",
        ):
            assert time.monotonic() < deadline
            time.sleep(0.1)
        assert state["status"] == "succeeded" and state["model_id"], state


# --------------------------------------------------------------------------------------------
# Read limits: hostile shapes refused naming the limit; one row's huge cell decides nothing
# --------------------------------------------------------------------------------------------


def test_hostile_shapes_are_refused_naming_the_limit(team: dict[str, Any]) -> None:
    """Issue 23, item 2: a header wider than DPFIT_MAX_COLUMNS (4096), a header line without a
    newline longer than DPFIT_MAX_LINE_BYTES (1 MiB), and more declared categories than
    DPFIT_MAX_CATEGORIES (10,000): each a 422 naming the field and the limit, at once (the old
    service parsed such files for minutes into gigabytes)."""
    t = tag()
    home = team["server"].home
    wide = home / f"wide-{t}.csv"
    names = ["x", "c", "y", *(f"u{i}" for i in range(5000))]
    wide.write_text(",".join(names) + "\n" + "1,a,yes\n2,b,no\n")
    endless = home / f"endless-{t}.csv"
    endless.write_bytes(b"x,c,y," + b"abcdefgh," * (3 << 17))
    for path, limit in ((wide, "DPFIT_MAX_COLUMNS"), (endless, "DPFIT_MAX_LINE_BYTES")):
        got = problem(team["owner"].post("/v1/datasets", json=crafted_body(path.name)), 422)
        assert got["field"] == "source.uri" and limit in got["detail"], got
    crafted_csv(home / f"cats-{t}.csv", tag=t)
    body = crafted_body(f"cats-{t}.csv")
    body["features"][1]["categories"] = [f"k{i}" for i in range(10_001)]
    got = problem(team["owner"].post("/v1/datasets", json=body), 422)
    assert "categories" in got["field"] and "DPFIT_MAX_CATEGORIES" in got["detail"], got


@pytest.fixture(scope="module")
def small_workers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """A server whose one worker has 512 MiB, as in issue 22's attack 3."""
    home = tmp_path_factory.mktemp("small-workers")
    server = start_server(
        f"sqlite:///{home / 'dpfit.db'}",
        data_roots=[home],
        home=home,
        extra_env={"DPFIT_WORKER_MEMORY": "512MiB"},
    )
    try:
        yield server
    finally:
        server.stop()


def test_attack_3_one_rows_undeclared_cell_decides_no_failure(small_workers: LiveServer) -> None:
    """Two CSVs identical but for one row's undeclared cell (``n100`` vs 150 MB): both register
    and the same job succeeds on both (on the old service the second one's worker ran out of
    memory and the job failed with its charge standing). The huge line is one row of MISSING
    cells: the reports differ by that row only."""
    server = small_workers
    t = tag()
    owner = server.client(server.key(f"owner-{t}", "owner"))
    analyst_name = f"analyst-{t}"
    analyst = server.client(server.key(analyst_name, "analyst"))
    lines = (EXAMPLES / "credit.csv").read_bytes().splitlines()
    header, rows = lines[0] + f",note_{t}".encode(), [r + b",n" for r in lines[1:]]
    small, large = server.home / f"small-{t}.csv", server.home / f"large-{t}.csv"
    small.write_bytes(b"\n".join([header, *(r + str(i).encode() for i, r in enumerate(rows))]))
    with large.open("wb") as out:
        for i, row in enumerate(rows):
            out.write(b"\n" if i else header + b"\n")
            out.write(row + (b"z" * (150 << 20) if i == 100 else str(i).encode()))
    reports, states = [], []
    for path in (small, large):
        created = owner.post("/v1/datasets", json=credit_dataset(uri=path.name))
        assert created.status_code == 201, created.text
        dataset = created.json()
        reports.append(dataset["validation"])
        owner.post(f"/v1/datasets/{dataset['id']}/grants", json={"principal": analyst_name})
        job = analyst.post("/v1/jobs", json=logistic_job(dataset["id"], epsilon=0.5))
        assert job.status_code in (201, 202), job.text
        deadline = time.monotonic() + 300
        while (state := analyst.get(f"/v1/jobs/{job.json()['id']}").json())["status"] in (
            "queued",
            "running",
        ):
            assert time.monotonic() < deadline
            time.sleep(0.2)
        states.append(state)
    assert [s["status"] for s in states] == ["succeeded", "succeeded"], states
    assert reports[0]["rows"] == reports[1]["rows"]
    for a, b in zip(reports[0]["features"], reports[1]["features"], strict=True):
        assert b["missing"] - a["missing"] <= 1 and b["oversize"] == 0


# --------------------------------------------------------------------------------------------
# Data roots scoped to owners
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def scoped_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """Roots: ``shared`` (open to every owner), ``shared/alice`` and ``alices`` (alice only)."""
    home = tmp_path_factory.mktemp("scoped")
    shared = home / "shared"
    (shared / "alice").mkdir(parents=True)
    (home / "alices").mkdir()
    roots = [shared, Path(f"alice={shared / 'alice'}"), Path(f"alice={home / 'alices'}")]
    server = start_server(f"sqlite:///{home / 'dpfit.db'}", data_roots=roots, home=home)
    try:
        yield server
    finally:
        server.stop()


def test_scoped_roots_admit_only_their_owners(scoped_server: LiveServer) -> None:
    server = scoped_server
    home = server.home
    t = tag()
    alice = server.client(server.key("alice", "owner"))
    bob = server.client(server.key(f"bob-{t}", "owner"))
    header, *rows = (EXAMPLES / "credit.csv").read_text().splitlines()

    def write(path: Path) -> Path:
        path.write_text("\n".join([f"{header},t_{uuid.uuid4().hex}", *(r + "," for r in rows)]))
        return path

    in_alices = write(home / "alices" / f"a-{t}.csv")
    nested = write(home / "shared" / "alice" / f"n-{t}.csv")
    open_file = write(home / "shared" / f"o-{t}.csv")

    # Bob: alice's files are "outside the allowed data roots", exactly as a file that does not
    # exist there (nothing tells him which of alice's files exist).
    for uri in (in_alices.as_uri(), nested.as_uri(), f"alice/{nested.name}"):
        got = problem(bob.post("/v1/datasets", json=credit_dataset(uri=uri)), 422)
        assert got["field"] == "source.uri"
        ghost = uri.replace(f"-{t}.csv", f"-{t}-ghost.csv")
        absent = problem(bob.post("/v1/datasets", json=credit_dataset(uri=ghost)), 422)
        assert got["detail"].replace(uri, "URI") == absent["detail"].replace(ghost, "URI"), (
            got,
            absent,
        )
    assert bob.post("/v1/datasets", json=credit_dataset(uri=open_file.name)).status_code == 201

    # Alice registers under her roots (relative or file://) and under the open root.
    assert alice.post("/v1/datasets", json=credit_dataset(uri=in_alices.name)).status_code == 201
    assert alice.post("/v1/datasets", json=credit_dataset(uri=nested.as_uri())).status_code == 201


def test_a_folder_of_links_into_a_scoped_root_registers_for_nobody_else(
    scoped_server: LiveServer,
) -> None:
    """Issue 23, item 3: a Parquet folder in the open root whose members are links into alice's
    scoped root registered for carol (201), and alice was then refused her own data (409). Now
    carol's folder is refused, with the same answer whether the link's target exists, and alice
    registers her data."""
    server = scoped_server
    home = server.home
    t = tag()
    alice = server.client(server.key("alice", "owner"))
    carol = server.client(server.key(f"carol-{t}", "owner"))
    table = pa.table({"x": [1.0, 2.0, 3.0], "c": ["a", "b", "a"], "y": ["yes", "no", t]})
    theirs = home / "shared" / "alice" / f"data-{t}"
    theirs.mkdir()
    pq.write_table(table, theirs / "part-0.parquet")
    details = []
    for target in ("part-0.parquet", "absent.parquet"):
        folder = home / "shared" / f"carol-{t}-{target.split('.')[0]}"
        folder.mkdir()
        pq.write_table(table.slice(0, 2), folder / "own.parquet")
        (folder / "zz.parquet").symlink_to(theirs / target)
        got = problem(carol.post("/v1/datasets", json=crafted_body(folder.name)), 422)
        assert got["field"] == "source.uri"
        details.append(got["detail"].replace(folder.name, "F"))
    assert details[0] == details[1], details
    created = alice.post("/v1/datasets", json=crafted_body(f"alice/data-{t}"))
    assert created.status_code == 201, created.text


# --------------------------------------------------------------------------------------------
# Migration 0005 on a database that already holds duplicates
# --------------------------------------------------------------------------------------------


def _upgrade(url: str, revision: str) -> None:
    from alembic.config import Config

    from alembic import command
    from service.cli import ROOT

    config = Config(str(ROOT / "alembic.ini"))
    config.set_main_option("script_location", str(ROOT / "alembic"))
    config.attributes["url"] = url
    command.upgrade(config, revision)


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_migration_keeps_the_earliest_of_legacy_duplicates(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Legacy rows: d1 and d2 share path and content, d3 has d1's content under another path,
    d4 and d5 share a path with different content (the file changed between registrations).
    The earliest of each keeps its budget; d2, d3 and d5 are retired; nothing fails."""
    from datetime import UTC, datetime, timedelta

    import sqlalchemy as sa

    from service.db.models import Dataset, SourceClaim
    from service.db.session import make_engine, session_factory
    from service.domain.claims import content_claim, location_claim, owned_content_claim

    def partial_owned(unscoped: Any) -> Any:
        return lambda fingerprint: owned_content_claim("o", unscoped(fingerprint))

    if backend == "postgres":
        url = request.getfixturevalue("private_postgres_database")
    else:
        url = f"sqlite:///{tmp_path / 'legacy.db'}"
    _upgrade(url, "0004")
    datasets = sa.table(
        "datasets",
        *(sa.column(c) for c in ("id", "name", "owner", "source_uri", "source_path")),
        *(sa.column(c) for c in ("source_format", "fingerprint", "n_rows", "n_features")),
        *(sa.column(c) for c in ("epsilon", "delta", "spent_pure_epsilon")),
        sa.column("label", sa.JSON()),
        sa.column("features", sa.JSON()),
        sa.column("spent_rdp", sa.JSON()),
        sa.column("created_at", sa.DateTime(timezone=True)),
    )
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    legacy = [  # id, path, fingerprint, minutes after t0 (d4 is the earliest of all)
        ("d1", "/data/a.csv", "sha256:x", 1),
        ("d2", "/data/a.csv", "sha256:x", 2),
        ("d3", "/data/b.csv", "sha256:x", 3),
        ("d4", "/data/c.csv", "sha256:y", 0),
        ("d5", "/data/c.csv", "sha256:z", 4),
    ]
    engine = make_engine(url)
    with engine.begin() as conn:
        for dataset_id, path, digest, minutes in legacy:
            conn.execute(
                sa.insert(datasets).values(
                    id=dataset_id, name=dataset_id, owner="o", source_uri=path,
                    source_path=path, source_format="csv", fingerprint=digest, n_rows=10,
                    n_features=1, epsilon=1.0, delta=0.0, spent_pure_epsilon=0.0,
                    label={"column": "y", "positive": 1, "negative": 0}, features=[],
                    spent_rdp=[0.0], created_at=t0 + timedelta(minutes=minutes),
                )
            )  # fmt: skip
    engine.dispose()

    _upgrade(url, "head")
    engine = make_engine(url)
    with session_factory(engine)() as session:
        retired = {d.id: d.retired_at is not None for d in session.scalars(sa.select(Dataset))}
        claims = {c.key: c.dataset_id for c in session.scalars(sa.select(SourceClaim))}
    engine.dispose()
    # Revision 0013 keyed each content claim by its owner (here "o"): no cross-owner oracle.
    content_claim = partial_owned(content_claim)
    assert retired == {"d1": False, "d2": True, "d3": True, "d4": False, "d5": True}
    assert claims == {
        location_claim("/data/a.csv"): "d1",
        content_claim("sha256:x"): "d1",
        location_claim("/data/b.csv"): "d3",  # free, so claimed, though d3 is retired
        location_claim("/data/c.csv"): "d4",
        content_claim("sha256:y"): "d4",
        content_claim("sha256:z"): "d5",
    }
