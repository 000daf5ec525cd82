"""SQL tables as sources, against a real PostgreSQL database (and a SQLite file).

The "warehouse" is a database of its own, as an operator's database would be; the service's own
database is not involved at this level.
"""

from __future__ import annotations

import json
import math
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given
from hypothesis import settings as hyp_settings
from hypothesis import strategies as st
from sqlalchemy.engine import make_url

from service.data.encoding import Encoder
from service.data.reader import read_encoded
from service.data.sources import SourceError
from service.data.spec import CategoricalFeature, LabelSpec, NumericFeature
from service.data.sql_source import open_sql_source, reopen_sql_source
from service.data.sql_uri import parse_sql_uri
from service.settings import Settings, SettingsError
from tests.support.fixtures import EXAMPLES, _fresh_postgres_database
from tests.support.live import LiveServer, start_server
from tests.support.walkthrough import credit_dataset, logistic_job

pytestmark = pytest.mark.postgres

SECRET = "s3cr3t-pw-never-shown"


@pytest.fixture(scope="module")
def warehouse() -> Iterator[str]:
    """A fresh PostgreSQL database standing for an operator's warehouse; yields its URL."""
    yield from _fresh_postgres_database()


@pytest.fixture(scope="module")
def settings(warehouse: str) -> Settings:
    # Trust auth ignores the password: it is there to prove it never shows.
    url = make_url(warehouse).set(password=SECRET).render_as_string(hide_password=False)
    unreachable = make_url(url).set(port=1).render_as_string(hide_password=False)
    return Settings(
        database_url="sqlite://",
        data_roots=(),
        workers=1,
        dask_scheduler=None,
        sql_connections={"wh": url, "down": unreachable},
    )


def run(url: str, *statements: str) -> None:
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        for statement in statements:
            conn.execute(sa.text(statement))
    engine.dispose()


@pytest.fixture(scope="module")
def tables(warehouse: str) -> str:
    run(
        warehouse,
        "CREATE SCHEMA sales",
        "CREATE TABLE people (id integer PRIMARY KEY, age bigint, score double precision, "
        "amount numeric, ok boolean, city text, blob bytea, born date)",
        # Inserted out of key order: reads must come back ordered by the key.
        "INSERT INTO people VALUES "
        "(3, 30, 0.5, 12.25, true, 'Zürich', '\\x0001', '2001-02-03'), "
        "(1, NULL, 'NaN', 'NaN', NULL, NULL, NULL, NULL), "
        "(2, -7, '-Infinity', 1e300, false, '', '\\x', '1999-12-31'), "
        "(5, 9223372036854775807, 1.5, 0.1, true, 'a,\"b\"\nc', '\\xff', '2020-01-01'), "
        "(4, 0, 0, 0, false, 'x', '\\x00', '2000-01-01')",
        "CREATE TABLE sales.orders (region text, units integer)",
        "INSERT INTO sales.orders VALUES ('b', 2), ('a', 9), ('a', 1), (NULL, 3), ('a', 1)",
        'CREATE TABLE "Mixed$Case" (k integer PRIMARY KEY, v text)',
        "INSERT INTO \"Mixed$Case\" VALUES (1, 'one')",
        "CREATE TABLE unordered (doc json)",
        "INSERT INTO unordered VALUES ('{}')",
        "CREATE TABLE victim (id integer PRIMARY KEY)",
    )
    return warehouse


def read_all(source: object, columns: list[str], block: int = 2) -> pa.Table:
    batches = list(source.iter_batches(columns, block))  # type: ignore[attr-defined]
    assert all(b.num_rows <= block for b in batches)
    return pa.Table.from_batches(batches)


# ----------------------------------------------------------------------------------------------
# URIs and identifiers
# ----------------------------------------------------------------------------------------------


def test_uri_forms_are_parsed() -> None:
    ref = parse_sql_uri("sql://wh/people")
    assert (ref.connection, ref.schema, ref.table) == ("wh", None, "people")
    ref = parse_sql_uri("sql://my-db_2/sales.orders")
    assert (ref.connection, ref.schema, ref.table) == ("my-db_2", "sales", "orders")
    assert ref.location == "sql://my-db_2/sales.orders"


@pytest.mark.parametrize(
    "uri",
    [
        "sql://wh/users;drop table victim",
        'sql://wh/"a"."b"',
        'sql://wh/"victim"',
        "sql://wh/a.b.c",
        "sql://wh/1table",
        "sql://wh/",
        "sql://wh",
        "sql://wh/people--",
        "sql://wh/people where 1=1",
        "sql://wh/peo ple",
        "sql://wh/x" + "y" * 63,
        "sql://w h/people",
        "sql:///people",
        "postgresql://wh/people",
        "sql://wh/people)",
    ],
)
def test_invalid_identifiers_are_refused_before_any_lookup(uri: str) -> None:
    with pytest.raises(SourceError):
        parse_sql_uri(uri)


def test_an_injection_attempt_changes_nothing(settings: Settings, tables: str) -> None:
    for uri in ("sql://wh/victim;drop table victim", 'sql://wh/public."victim"; drop'):
        with pytest.raises(SourceError):
            open_sql_source(uri, settings)
    assert open_sql_source("sql://wh/victim", settings).count_rows() == 0


def test_an_unconfigured_connection_is_refused(settings: Settings, tables: str) -> None:
    with pytest.raises(SourceError, match="'nope' is not configured"):
        open_sql_source("sql://nope/people", settings)


def test_missing_tables_and_columns_are_refused(settings: Settings, tables: str) -> None:
    with pytest.raises(SourceError, match="table not found"):
        open_sql_source("sql://wh/absent", settings)
    with pytest.raises(SourceError, match="table not found"):
        open_sql_source("sql://wh/nosuchschema.people", settings)
    source = open_sql_source("sql://wh/people", settings)
    with pytest.raises(SourceError, match="'nope'"):
        list(source.iter_batches(["age", "nope"], 10))


def test_a_table_the_role_cannot_read_answers_as_if_absent(warehouse: str, tables: str) -> None:
    """The catalogue lists tables and columns a role cannot read. Such a table must answer as
    one that does not exist — before any column name is compared — so that registering it with
    guessed feature names cannot tell which columns it has (issue 23, item 3). A role with
    only some columns' privileges is treated the same way."""
    role = f"dpfit_limited_{secrets.token_hex(3)}"
    run(
        warehouse,
        f"CREATE ROLE {role} LOGIN",
        "CREATE TABLE hidden (id integer PRIMARY KEY, salary integer, city text)",
        "INSERT INTO hidden VALUES (1, 100, 'a'), (2, 200, 'b')",
        "CREATE TABLE partly (id integer PRIMARY KEY, secret integer)",
        f"GRANT SELECT (id) ON partly TO {role}",
        "CREATE TABLE open_to_all (id integer PRIMARY KEY, v integer)",
        f"GRANT SELECT ON open_to_all TO {role}",
    )
    try:
        limited = make_url(warehouse).set(username=role).render_as_string(hide_password=False)
        settings = Settings(
            database_url="sqlite://",
            data_roots=(),
            workers=1,
            dask_scheduler=None,
            sql_connections={"lim": limited},
        )
        answers = set()
        for table in ("hidden", "partly", "no_such_table"):
            with pytest.raises(SourceError) as refused:
                open_sql_source(f"sql://lim/{table}", settings)
            answers.add(str(refused.value).replace(table, "T"))
        assert answers == {"'sql://lim/T': table not found in connection 'lim'"}
        assert open_sql_source("sql://lim/open_to_all", settings).columns() == ["id", "v"]
    finally:
        run(
            warehouse,
            f"REVOKE ALL ON partly FROM {role}",
            f"REVOKE ALL ON open_to_all FROM {role}",
            f"DROP ROLE {role}",
        )


def test_credentials_never_appear(settings: Settings, tables: str) -> None:
    messages: list[str] = []
    for uri in ("sql://down/people", "sql://wh/absent", "sql://nope/x", "sql://wh/a;b"):
        with pytest.raises(SourceError) as caught:
            open_sql_source(uri, settings)
        messages.append(str(caught.value))
        error = caught.value
        assert error.__cause__ is None and (error.__context__ is None or error.__suppress_context__)
    source = open_sql_source("sql://wh/people", settings)
    messages += [repr(source), source.location]
    for message in messages:
        assert SECRET not in message
        assert "127.0.0.1" not in message and "postgres" not in message.lower()
    assert SECRET not in repr(settings) and "dpfit_test" not in repr(settings)
    assert "could not reflect the table in connection 'down'" in messages[0]


def test_a_malformed_connection_setting_is_a_clear_startup_error() -> None:
    bad_url = '{"wh": "not a url with s3cr3t"}'
    with pytest.raises(SettingsError, match="the URL of 'wh' is not a SQLAlchemy URL") as caught:
        Settings.from_env({"DPFIT_SQL_CONNECTIONS": bad_url})
    assert "s3cr3t" not in str(caught.value)
    for raw in ("[]", "{", '{"a b": "sqlite://"}', '{"wh": 1}'):
        with pytest.raises(SettingsError):
            Settings.from_env({"DPFIT_SQL_CONNECTIONS": raw})
    parsed = Settings.from_env({"DPFIT_SQL_CONNECTIONS": '{"wh": "sqlite:///x.db"}'})
    assert parsed.sql_connections == {"wh": "sqlite:///x.db"}
    assert parsed.sql_connection_owners == {}


def test_a_connection_can_be_scoped_to_owners() -> None:
    raw = json.dumps(
        {"open": "sqlite:///a.db", "team": {"url": "sqlite:///b.db", "owners": ["ann", "bo"]}}
    )
    parsed = Settings.from_env({"DPFIT_SQL_CONNECTIONS": raw})
    assert parsed.sql_connections == {"open": "sqlite:///a.db", "team": "sqlite:///b.db"}
    assert parsed.sql_connection_owners == {"team": frozenset({"ann", "bo"})}
    for bad in (
        {"team": {"url": "sqlite:///b.db"}},  # no owners
        {"team": {"url": "sqlite:///b.db", "owners": []}},
        {"team": {"url": "sqlite:///b.db", "owners": ["a b"]}},
        {"team": {"url": "sqlite:///b.db", "owners": ["ann"], "extra": 1}},
        {"team": {"url": 3, "owners": ["ann"]}},
        {"team": {"url": f"not a url {SECRET}", "owners": ["ann"]}},
    ):
        with pytest.raises(SettingsError, match="'team'") as caught:
            Settings.from_env({"DPFIT_SQL_CONNECTIONS": json.dumps(bad)})
        assert SECRET not in str(caught.value)


# ----------------------------------------------------------------------------------------------
# Reading
# ----------------------------------------------------------------------------------------------


def test_table_is_read_in_key_order_with_natural_arrow_types(
    settings: Settings, tables: str
) -> None:
    source = open_sql_source("sql://wh/people", settings)
    assert source.format == "sql"
    assert source.location == "sql://wh/public.people"
    assert source.columns() == ["id", "age", "score", "amount", "ok", "city", "blob", "born"]
    assert source.order_by == ["id"]
    assert source.count_rows() == 5
    table = read_all(source, ["id", "age", "score", "amount", "ok", "city", "blob", "born"])
    assert table.schema.types == [
        pa.int64(),
        pa.int64(),
        pa.float64(),
        pa.float64(),
        pa.bool_(),
        pa.string(),
        pa.binary(),
        pa.string(),
    ]
    rows = table.to_pylist()
    assert [r["id"] for r in rows] == [1, 2, 3, 4, 5]
    assert rows[0]["age"] is None and rows[0]["ok"] is None and rows[0]["city"] is None
    assert math.isnan(rows[0]["score"]) and math.isnan(rows[0]["amount"])
    assert rows[1]["score"] == -math.inf and rows[1]["amount"] == 1e300
    assert rows[1]["city"] == "" and rows[1]["blob"] == b""
    assert rows[2] == {
        "id": 3,
        "age": 30,
        "score": 0.5,
        "amount": 12.25,
        "ok": True,
        "city": "Zürich",
        "blob": b"\x00\x01",
        "born": "2001-02-03",
    }
    assert rows[4]["age"] == 2**63 - 1 and rows[4]["city"] == 'a,"b"\nc'


def test_requested_columns_come_in_the_requested_order(settings: Settings, tables: str) -> None:
    source = open_sql_source("sql://wh/people", settings)
    table = read_all(source, ["city", "id"], block=3)
    assert table.column_names == ["city", "id"]
    assert table.column("id").to_pylist() == [1, 2, 3, 4, 5]
    # A column may be asked for twice (a label that is also a feature): both get its cells.
    repeated = pa.Table.from_batches(list(source.iter_batches(["city", "id", "city"], 2)))
    assert repeated.num_columns == 3 and repeated.column(0).equals(repeated.column(2))
    no_columns = list(source.iter_batches([], 2))
    assert [b.num_rows for b in no_columns] == [2, 2, 1]
    assert all(b.num_columns == 0 for b in no_columns)


def test_a_table_without_primary_key_is_read_ordered_by_all_columns(
    settings: Settings, tables: str
) -> None:
    source = open_sql_source("sql://wh/sales.orders", settings)
    assert source.location == "sql://wh/sales.orders"
    assert source.order_by == ["region", "units"]
    table = read_all(source, ["units", "region"])
    # NULL sorts last in PostgreSQL's ascending order.
    assert table.to_pylist() == [
        {"units": 1, "region": "a"},
        {"units": 1, "region": "a"},
        {"units": 9, "region": "a"},
        {"units": 2, "region": "b"},
        {"units": 3, "region": None},
    ]


def test_a_table_that_cannot_be_ordered_is_refused(settings: Settings, tables: str) -> None:
    with pytest.raises(SourceError, match="no primary key"):
        open_sql_source("sql://wh/unordered", settings)


def test_case_sensitive_identifiers_are_quoted(settings: Settings, tables: str) -> None:
    source = open_sql_source("sql://wh/public.Mixed$Case", settings)
    assert read_all(source, ["v"]).to_pylist() == [{"v": "one"}]
    with pytest.raises(SourceError, match="table not found"):
        open_sql_source("sql://wh/mixed$case", settings)


def test_reopen_from_the_stored_location(settings: Settings, tables: str) -> None:
    source = open_sql_source("sql://wh/people", settings)
    again = reopen_sql_source(source.location, settings)
    assert again.fingerprint() == source.fingerprint()
    assert read_all(again, ["id", "city"]).equals(read_all(source, ["id", "city"]))
    with pytest.raises(SourceError):
        reopen_sql_source("sql://wh/people", settings)  # stored locations are schema-qualified


# ----------------------------------------------------------------------------------------------
# Fingerprint
# ----------------------------------------------------------------------------------------------


def test_fingerprint_is_content_only_and_changes_with_any_cell(
    settings: Settings, warehouse: str, tables: str
) -> None:
    run(
        warehouse,
        "CREATE TABLE fp_a (id integer PRIMARY KEY, x double precision, s text)",
        "CREATE TABLE fp_b (id integer PRIMARY KEY, x double precision, s text)",
        "INSERT INTO fp_a VALUES (1, 0.5, 'p'), (2, NULL, ''), (3, 2, 'q')",
        # The same rows, inserted in another order, in another table.
        "INSERT INTO fp_b VALUES (3, 2, 'q'), (1, 0.5, 'p'), (2, NULL, '')",
    )
    a = open_sql_source("sql://wh/fp_a", settings)
    b = open_sql_source("sql://wh/fp_b", settings)
    first = a.fingerprint()
    assert first.startswith("sha256:") and len(first) == len("sha256:") + 64
    assert a.fingerprint() == first == b.fingerprint()
    changes = [
        ("UPDATE fp_b SET x = 0.5000000001 WHERE id = 1", "UPDATE fp_b SET x = 0.5 WHERE id = 1"),
        ("UPDATE fp_b SET s = NULL WHERE id = 2", "UPDATE fp_b SET s = '' WHERE id = 2"),
        ("UPDATE fp_b SET x = 0 WHERE id = 2", "UPDATE fp_b SET x = NULL WHERE id = 2"),
        ("INSERT INTO fp_b VALUES (4, 1, 'r')", "DELETE FROM fp_b WHERE id = 4"),
        ("UPDATE fp_b SET id = 9 WHERE id = 3", "UPDATE fp_b SET id = 3 WHERE id = 9"),
        (
            "ALTER TABLE fp_b ALTER COLUMN x TYPE numeric",
            "ALTER TABLE fp_b ALTER COLUMN x TYPE double precision",
        ),
    ]
    for change, undo in changes:
        run(warehouse, change)
        # Reopened: a changed column type is seen by reflection (as a worker's reopen sees it).
        assert open_sql_source("sql://wh/fp_b", settings).fingerprint() != first, change
        run(warehouse, undo)
        assert open_sql_source("sql://wh/fp_b", settings).fingerprint() == first, undo
    run(warehouse, "UPDATE fp_b SET s = 'P' WHERE id = 1")
    assert b.fingerprint() != first  # an open source sees cell changes too


# ----------------------------------------------------------------------------------------------
# SQLite (the cheap second dialect): types are not enforced there, cells still convert totally
# ----------------------------------------------------------------------------------------------


def test_sqlite_tables_read_with_mistyped_cells_as_null(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    run(
        url,
        "CREATE TABLE t (id INTEGER PRIMARY KEY, n INTEGER, x REAL, flag BOOLEAN, s TEXT)",
        "INSERT INTO t VALUES (2, 'abc', 'not a number', 7, 'b'), (1, 4, 1.5, 1, 'a'), "
        "(3, 2.5, X'00', 0, X'ff')",
    )
    settings = Settings(
        database_url="sqlite://",
        data_roots=(),
        workers=1,
        dask_scheduler=None,
        sql_connections={"lite": url},
    )
    source = open_sql_source("sql://lite/t", settings)
    assert source.location == "sql://lite/main.t"
    assert source.count_rows() == 3
    assert read_all(source, ["id", "n", "x", "flag", "s"]).to_pylist() == [
        {"id": 1, "n": 4, "x": 1.5, "flag": True, "s": "a"},
        {"id": 2, "n": None, "x": None, "flag": None, "s": "b"},
        {"id": 3, "n": None, "x": None, "flag": False, "s": None},
    ]
    first = source.fingerprint()
    assert reopen_sql_source(source.location, settings).fingerprint() == first
    run(url, "UPDATE t SET s = 'A' WHERE id = 1")
    assert source.fingerprint() != first


#: A ``real`` column's cells and the float32 values a Parquet writer stores for them.
REALS = ["0.1", "1e-45", "3.4028235e38", "NaN", "Infinity", "-Infinity", "-2.5", "16777217"]


@pytest.mark.parametrize("extra_float_digits", [None, 3])
def test_a_real_column_converts_like_a_parquet_float32(
    tmp_path: Path, extra_float_digits: int | None
) -> None:
    """One rule for a float4 in both readers: its shortest text (0.1, not 0.10000000149…),
    whatever text the server sends (``extra_float_digits = 3`` sends "0.100000001", the
    pre-PostgreSQL-12 default) — the same values and the same encoded rows as the Parquet
    float32 column holding the same floats."""
    import numpy as np
    import pyarrow.parquet as pq

    from service.data.cells import numeric_cells
    from service.data.sources import local_source

    for url in _fresh_postgres_database():
        if extra_float_digits is not None:
            name = make_url(url).database
            run(url, f'ALTER DATABASE "{name}" SET extra_float_digits = {extra_float_digits}')
        values = ", ".join(
            f"({i}, '{v}'::real, {str(i % 2 == 0).lower()})" for i, v in enumerate(REALS)
        )
        run(
            url,
            "CREATE TABLE r (id integer PRIMARY KEY, v real, y boolean)",
            f"INSERT INTO r VALUES {values}",
        )
        settings = Settings(
            database_url="sqlite://",
            data_roots=(),
            workers=1,
            dask_scheduler=None,
            sql_connections={"wh": url},
        )
        source = open_sql_source("sql://wh/r", settings)
        table = read_all(source, ["v", "y"], block=3)
        assert table.schema.types == [pa.float32(), pa.bool_()]
        floats = np.array([float(v) for v in REALS], dtype=np.float32)
        path = tmp_path / f"r{extra_float_digits}.parquet"
        pq.write_table(
            pa.table(
                {
                    "v": pa.array(floats, type=pa.float32()),
                    "y": [i % 2 == 0 for i in range(len(REALS))],
                }
            ),
            path,
        )
        parquet = local_source(path, "parquet")
        via_sql = numeric_cells(table.column("v"))
        via_parquet = numeric_cells(
            pa.Table.from_batches(list(parquet.iter_batches(["v"], 3))).column("v")
        )
        # the float32's shortest text: 0.1 is 0.1 (the widened float would be 0.10000000149…)
        assert via_sql[0] == pytest.approx(0.1, rel=1e-15, abs=0)
        assert via_sql[1] == pytest.approx(1e-45, rel=1e-15, abs=0)
        assert via_sql[2] == pytest.approx(3.4028235e38, rel=1e-15, abs=0)
        assert np.isnan(via_sql[3:6]).all()  # NaN and ±inf are MISSING in both readers
        assert via_sql[7] == 16777216.0  # the float32 stored for 16777217
        np.testing.assert_array_equal(np.isnan(via_sql), np.isnan(via_parquet))
        np.testing.assert_allclose(via_sql, via_parquet, rtol=1e-15, atol=0)
        # and the encoded rows (the reader's whole path) agree
        encoder = Encoder(
            features=[NumericFeature(name="v", min=-4.0, max=4.0)], fit_intercept=True
        )
        label = LabelSpec(column="y", type="binary", positive=True, negative=False)
        X_sql, y_sql = read_encoded(source, encoder, label, None)
        X_parquet, y_parquet = read_encoded(parquet, encoder, label, None)
        np.testing.assert_allclose(X_sql, X_parquet, rtol=1e-15, atol=0)
        np.testing.assert_array_equal(y_sql, y_parquet)


# ----------------------------------------------------------------------------------------------
# End to end: a live server registers a PostgreSQL table, runs a job and releases a model
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
def live(
    settings: Settings, warehouse: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    """A live `dpfit serve` (its own SQLite database) whose operator configured the warehouse
    as connection ``wh`` (with a password, to prove it never shows) and an unreachable one."""
    header, *lines = (EXAMPLES / "credit.csv").read_text().splitlines()
    assert header == "age,hours_per_week,education,sector,income"
    values = [line.split(",") for line in lines]
    engine = sa.create_engine(warehouse)
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "CREATE TABLE credit (id integer PRIMARY KEY, age integer, hours_per_week "
                "numeric, education text, sector varchar(20), income text)"
            )
        )
        conn.execute(
            sa.text("INSERT INTO credit VALUES (:id, :a, :h, :e, :s, :i)"),
            [
                {"id": i, "a": int(a), "h": int(h), "e": e, "s": s, "i": y}
                for i, (a, h, e, s, y) in enumerate(values)
            ],
        )
    engine.dispose()
    home = tmp_path_factory.mktemp("sql-live")
    connections: dict[str, object] = dict(settings.sql_connections)
    connections["wh_team"] = {"url": settings.sql_connections["wh"], "owners": ["sql-owner"]}
    with pytest.MonkeyPatch.context() as env:
        env.setenv("DPFIT_SQL_CONNECTIONS", json.dumps(connections))
        server = start_server(f"sqlite:///{home / 'dpfit.db'}", data_roots=[EXAMPLES], home=home)
    try:
        yield server
    finally:
        server.stop()


def test_a_postgresql_table_end_to_end(live: LiveServer, tables: str) -> None:
    owner = live.client(live.key("sql-owner", "owner"))
    analyst = live.client(live.key("sql-analyst", "analyst"))
    body = credit_dataset(uri="sql://wh/credit")
    response = owner.post("/v1/datasets", json=body)
    assert response.status_code == 201, response.text
    dataset = response.json()
    assert dataset["n_rows"] == 4000
    assert dataset["source"] == {"uri": "sql://wh/credit", "format": "sql"}
    assert dataset["fingerprint"].startswith("sha256:")
    assert SECRET not in response.text
    grant = owner.post(f"/v1/datasets/{dataset['id']}/grants", json={"principal": "sql-analyst"})
    assert grant.status_code == 201, grant.text

    job = analyst.post("/v1/jobs", json=logistic_job(dataset["id"]))
    assert job.status_code == 202, job.text
    done = wait_done(analyst, job.json()["id"])
    assert done["status"] == "succeeded", done
    model = analyst.get(f"/v1/models/{done['model_id']}")
    assert model.status_code == 200, model.text
    assert len(model.json()["coefficients"]) == dataset["n_features"]

    # One budget per data: the same table (named with or without its schema) registers once.
    again = owner.post("/v1/datasets", json=credit_dataset(uri="sql://wh/public.credit"))
    assert again.status_code == 409, again.text


@pytest.mark.parametrize(
    "uri",
    [
        "sql://wh/credit;drop table credit",
        'sql://wh/"public"."credit"',
        "sql://wh/public.credit.x",
        "sql://nope/credit",
        "sql://down/credit",
        "sql://wh/absent",
    ],
)
def test_refusals_name_the_field_and_leak_nothing(live: LiveServer, uri: str) -> None:
    owner = live.client(live.key("sql-owner", "owner"))
    response = owner.post("/v1/datasets", json=credit_dataset(uri=uri))
    assert response.status_code == 422, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    assert response.json()["field"] == "source.uri"
    for secret in (SECRET, "127.0.0.1", "5432", "dpfit_test", "postgres"):
        assert secret not in response.text
    # The injection attempt changed nothing.
    assert open_sql_source("sql://wh/credit", live_settings(live)).count_rows() == 4000


def test_a_scoped_connection_is_unconfigured_for_other_owners(live: LiveServer) -> None:
    """``wh_team`` is scoped to sql-owner: for another owner it is exactly a connection the
    operator never configured (nothing tells it exists); its owner and admins may use it."""
    other = live.client(live.key("sql-other-owner", "owner"))
    scoped = problem_of(other.post("/v1/datasets", json=credit_dataset(uri="sql://wh_team/credit")))
    absent = problem_of(other.post("/v1/datasets", json=credit_dataset(uri="sql://nope/credit")))
    assert scoped["field"] == absent["field"] == "source.uri"
    assert scoped["detail"].replace("wh_team", "X") == absent["detail"].replace("nope", "X")
    for name, role in (("sql-owner", "owner"), ("admin", "admin")):
        client = live.client(live.key(name, role))
        # The table is reachable: registered here, or refused as already registered (the same
        # content through the open connection `wh`), never "not configured".
        got = client.post("/v1/datasets", json=credit_dataset(uri="sql://wh_team/credit"))
        assert got.status_code in (201, 409), (name, got.text)


def problem_of(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 422, response.text
    return dict(response.json())


def live_settings(live: LiveServer) -> Settings:
    return Settings.from_env({"DPFIT_SQL_CONNECTIONS": live.env["DPFIT_SQL_CONNECTIONS"]})


# ----------------------------------------------------------------------------------------------
# Row locality through the worker's reader: one replaced row changes no other row's encoding
# ----------------------------------------------------------------------------------------------

PROPERTY_FEATURES = [
    NumericFeature(name="x", min=0, max=1),
    NumericFeature(name="d", min=-5, max=5),
    NumericFeature(name="f", min=-5, max=5),
    CategoricalFeature(name="c", categories=["a", "b", 1]),
]
PROPERTY_LABEL = LabelSpec(column="y", type="binary", positive="yes", negative="no")
ADVERSARIAL_TEXT = [
    "",
    " ",
    "True",
    "false",
    "n/a",
    "NaN",
    "-inf",
    "1e309",
    "٣",
    "1,000",
    '"1"',
    " 0.5 ",
    "0x1",
    "yes",
    "no",
    "a",
    "b",
    "1",
    "1.0",
    "x" * 10_000,
    "\u00a0",
    "é",
]
text_cells = st.one_of(st.none(), st.sampled_from(ADVERSARIAL_TEXT), st.text(max_size=20))
numeric_cells = st.one_of(
    st.none(),
    st.sampled_from(["NaN", "Infinity", "-Infinity", "1e300", "-1e1000", "1e-400", "0"]),
    st.decimals(allow_nan=False, allow_infinity=False).map(str),
)
float_cells = st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True))
property_rows = st.fixed_dictionaries(
    {"x": text_cells, "d": numeric_cells, "f": float_cells, "c": text_cells, "y": text_cells}
)


def clean(value: str | None) -> str | None:
    """PostgreSQL text cannot hold NUL."""
    return None if value is None else value.replace("\x00", "")


@hyp_settings(max_examples=50, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    base=st.lists(property_rows, min_size=3, max_size=6),
    replacement=property_rows,
    index=st.integers(min_value=0, max_value=5),
    new_key=st.booleans(),
)
def test_one_replaced_row_changes_no_other_rows_encoding(
    settings: Settings,
    warehouse: str,
    tables: str,
    base: list[dict[str, Any]],
    replacement: dict[str, Any],
    index: int,
    new_key: bool,
) -> None:
    """Neighbouring tables (one row replaced by adversarial cells, possibly under another key,
    so that it moves in the order): every other row's encoded vector and label are bit-identical
    (compared by key), and both tables read without error."""
    index %= len(base)
    keyed = {10 * (i + 1): row for i, row in enumerate(base)}
    old_key = 10 * (index + 1)
    neighbour = {k: v for k, v in keyed.items() if k != old_key}
    neighbour[5 if new_key else old_key] = replacement
    encoded = []
    for rows in (keyed, neighbour):
        engine = sa.create_engine(warehouse)
        with engine.begin() as conn:
            conn.execute(sa.text("DROP TABLE IF EXISTS prop"))
            conn.execute(
                sa.text(
                    "CREATE TABLE prop (id integer PRIMARY KEY, x text, d numeric, "
                    "f double precision, c text, y text)"
                )
            )
            conn.execute(
                sa.text("INSERT INTO prop VALUES (:id, :x, CAST(:d AS numeric), :f, :c, :y)"),
                [
                    {"id": k, **{n: clean(v) if isinstance(v, str) else v for n, v in r.items()}}
                    for k, r in rows.items()
                ],
            )
        engine.dispose()
        source = open_sql_source("sql://wh/prop", settings)
        X, Y = read_encoded(source, Encoder(PROPERTY_FEATURES), PROPERTY_LABEL, None, 2)
        keys = sorted(rows)
        assert X.shape[0] == len(keys)
        encoded.append({k: (X[i].tobytes(), Y[i].tobytes()) for i, k in enumerate(keys)})
    for key in keyed:
        if key != old_key:
            assert encoded[0][key] == encoded[1][key]


def test_a_table_changed_after_registration_fails_the_job_with_a_refund(
    live: LiveServer, warehouse: str
) -> None:
    run(
        warehouse,
        "CREATE TABLE credit_changing AS SELECT * FROM credit",
        "ALTER TABLE credit_changing ADD PRIMARY KEY (id)",
        "UPDATE credit_changing SET age = 40 WHERE id = 0",  # content of its own: a new dataset
    )
    owner = live.client(live.key("sql-owner", "owner"))
    analyst = live.client(live.key("sql-analyst", "analyst"))
    response = owner.post("/v1/datasets", json=credit_dataset(uri="sql://wh/credit_changing"))
    assert response.status_code == 201, response.text
    dataset_id = response.json()["id"]
    grant = owner.post(f"/v1/datasets/{dataset_id}/grants", json={"principal": "sql-analyst"})
    assert grant.status_code == 201, grant.text
    run(warehouse, "UPDATE credit_changing SET hours_per_week = 41 WHERE id = 7")
    job = analyst.post("/v1/jobs", json=logistic_job(dataset_id))
    assert job.status_code == 202, job.text
    done = wait_done(analyst, job.json()["id"])
    assert done["status"] == "failed" and "changed" in done["error"], done
    assert done["refunded"] is True and done["model_id"] is None
