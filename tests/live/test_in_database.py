"""In-database execution against a real PostgreSQL: the encoding compiled to SQL agrees with the
reader on adversarial tables, the gradient aggregate agrees with numpy's, and a fit through the
database equals the worker path's (same seed) to summation rounding."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import numpy as np
import pytest
import sqlalchemy as sa

from service.data.encoding import Encoder
from service.data.reader import read_encoded
from service.data.sources import SourceError
from service.data.spec import CategoricalFeature, LabelSpec, NumericFeature
from service.data.sql_encoding import PARSE_FUNCTION_SQL, SESSION_SETTINGS, InDatabaseUnsupported
from service.data.sql_source import open_sql_source
from service.models.logistic import LogisticLoss
from service.optimizers.kits.full_gradient import LocalGradient
from service.workers import in_database
from service.workers.in_database import InDatabaseGradient, encoded_rows, encoded_select
from tests.support.fixtures import _fresh_postgres_database
from tests.support.warehouse import create_table, warehouse_settings

pytestmark = pytest.mark.postgres

# Cells chosen to hit every rule of service/data/cells.py: NULLs, NaN, ±inf, text that is and is
# not a number (signs, exponents, blanks, huge and tiny magnitudes, commas, hex, Unicode digits),
# out-of-range values, category spellings and unknown categories.
TEXT_NUMBERS = [
    "1",
    " 2.5 ",
    "-3e2",
    "+.5",
    "5.",
    "1e309",
    "-1e-400",
    "1e-320",
    "0x1",
    "1,000",
    "١٢٣",
    "True",
    "n/a",
    "NaN",
    "inf",
    "",
    "   ",
    None,
    "0000123.4500e-0002",
    "9" * 50,
    "1" + "0" * 400,
    "0." + "0" * 330 + "17",
    "1e99",
    "12345678901234567890123456789012345678901e-300",
    "\t7\n",
    "1e-2",
    "-0",
    "+0.0e+00",
    "2.4703282292062328e-324",
    "1.7976931348623158e308",
    "TRUE",
    " false\t",
    "tRuE",
    "truee",
    "x" * 5000,
    "1" * 4097,
    "1" * 4096,
]
CATEGORY_TEXT = [
    "a",
    " a ",
    "A",
    "\u00a0a\u2003",
    "TRUE",
    "false",
    "yes",
    "003",
    "+3",
    "-0",
    "3.0",
    "3e0",
    "2.50",
    "2.5",
    "1e999",
    "-inf",
    "inf",
    "",
    None,
    "b",
    "nan",
    "x y",
    "0.1",
    "1e-1",
    "a" + " " * 5000,
    "yes",
]
FLOATS = [
    0.5,
    float("nan"),
    float("inf"),
    float("-inf"),
    None,
    -7.0,
    1e300,
    -1e-300,
    3.0,
    2.5,
    0.1,
    42.0,
    1.0,
]
# single precision (real): by the float32's shortest text (0.1 stays 0.1), like the SQL reader
REALS = [
    0.5,
    float("nan"),
    float("inf"),
    None,
    1e30,
    -7.0,
    1.5e-30,
    81993888.0,
    3.0,
    2.5,
    0.1,
    42.0,
    1.0,
]
DECIMALS = [
    "12.25",
    "NaN",
    "1e300",
    "-1e-400",
    "0.1",
    None,
    "3",
    "2.5",
    "1e400",
    "-2e308",
    "0",
    "7.5",
    "2.50",
]
INTS = [30, None, -7, 9223372036854775807, 0, 3, -3, 12, 1, 2, 100, -100, 7]
BOOLS = [True, None, False, True, False, None, True, True, False, True, False, True, None]


@pytest.fixture(scope="module")
def warehouse() -> Iterator[str]:
    yield from _fresh_postgres_database()


def _sql_rows(
    source, encoder: Encoder, label: LabelSpec, bound: float | None = None
) -> tuple[np.ndarray, np.ndarray]:
    select, names = encoded_select(source, encoder, label, bound, ordered=True)
    with source.connect() as conn:
        # a server that rounds float output (extra_float_digits ≤ 0) must not change a real's
        # value: the session settings restore the shortest text
        conn.exec_driver_sql("SET extra_float_digits = 0")
        for setting in SESSION_SETTINGS:
            conn.exec_driver_sql(setting)
        conn.exec_driver_sql(PARSE_FUNCTION_SQL)
        rows = conn.execute(select).all()
    data = np.array([[float(v) for v in row] for row in rows], dtype=np.float64)
    return data[:, : len(names)], data[:, len(names)]


def _assert_same(sql: np.ndarray, reader: np.ndarray) -> None:
    assert sql.shape == reader.shape
    # Entries are computed with the same IEEE operations; only the row-norm guard sums in
    # another order, which can move a boundary row's factor by an ulp.
    np.testing.assert_array_max_ulp(sql, reader, maxulp=1)


def test_numeric_text_cells_encode_as_the_reader(warehouse: str) -> None:
    rows = [(i, t, "a" if i % 2 else "b") for i, t in enumerate(TEXT_NUMBERS)]
    create_table(warehouse, "text_numbers", rows, "id integer PRIMARY KEY, v text, label text")
    source = open_sql_source("sql://wh/text_numbers", warehouse_settings(warehouse))
    for low, high in [(-10.0, 10.0), (0.0, 1e308), (-1e-200, 1e-200), (0.0, 1e-250), (-0.5, 1e6)]:
        encoder = Encoder([NumericFeature(name="v", min=low, max=high)], fit_intercept=True)
        label = LabelSpec(column="label", type="binary", positive="a", negative="b")
        X, y = read_encoded(source, encoder, label, None)
        sql_x, sql_y = _sql_rows(source, encoder, label)
        _assert_same(sql_x, X)
        np.testing.assert_array_equal(sql_y, y)


def test_spans_postgresql_cannot_compute_are_refused(warehouse: str) -> None:
    """PostgreSQL raises where a product underflows to zero: spans that would need it (or that
    overflow) are refused for this mode, naming the field, before anything is read."""
    source = open_sql_source("sql://wh/text_numbers", warehouse_settings(warehouse))
    label = LabelSpec(column="label", type="binary", positive="a", negative="b")
    for low, high in [(0.0, 1e-300), (-1e308, 1e308)]:
        encoder = Encoder([NumericFeature(name="v", min=low, max=high)])
        with pytest.raises(InDatabaseUnsupported) as refused:
            encoded_select(source, encoder, label, None)
        assert refused.value.field == "features"


def test_typed_and_text_cells_encode_as_the_reader(warehouse: str) -> None:
    n = len(FLOATS)
    rows = [
        (
            i,
            INTS[i],
            FLOATS[i],
            DECIMALS[i],
            BOOLS[i],
            CATEGORY_TEXT[i],
            CATEGORY_TEXT[i + n],
            INTS[i],
            REALS[i],
        )
        for i in range(n)
    ]
    create_table(
        warehouse,
        "typed",
        rows,
        "id integer PRIMARY KEY, i bigint, f double precision, d numeric, b boolean, "
        "c1 text, c2 text, lab bigint, r real",
    )
    source = open_sql_source("sql://wh/typed", warehouse_settings(warehouse))
    categories = [
        "a",
        "A",
        "1",
        "0",
        "3",
        "2.5",
        "inf",
        "-inf",
        "yes",
        "b",
        "nan",
        "x y",
        "0.1",
        "-0",
    ]
    numeric_features = [
        NumericFeature(name="i", min=-50, max=50),
        NumericFeature(name="f", min=-10, max=10),
        NumericFeature(name="d", min=0, max=20),
        NumericFeature(name="b", min=0, max=1),
        NumericFeature(name="r", min=-1, max=1),
    ]
    categorical_features = [
        CategoricalFeature(name="c1", categories=[c for c in categories if c != "-0"]),
        CategoricalFeature(name="c2", categories=[c for c in categories if c != "-0"]),
        CategoricalFeature(name="i", categories=["3", "-3", "12", "9223372036854775807", "0"]),
        CategoricalFeature(name="f", categories=["3", "2.5", "0.1", "inf", "-inf", "0.5"]),
        CategoricalFeature(name="d", categories=["3", "2.5", "0.1", "inf", "7.5", "0"]),
        CategoricalFeature(name="b", categories=["1", "0"]),
        CategoricalFeature(name="r", categories=["0.1", "2.5", "1", "inf", "0.5"]),
    ]
    for features in (numeric_features, categorical_features):
        encoder = Encoder(features, fit_intercept=False)
        for positive in ["3", "12", "1"]:
            label = LabelSpec(column="lab", type="binary", positive=positive, negative="0")
            X, y = read_encoded(source, encoder, label, None)
            sql_x, sql_y = _sql_rows(source, encoder, label)
            _assert_same(sql_x, X)
            np.testing.assert_array_equal(sql_y, y)
        # every category column and value kind is exercised (not a vacuous all-zero block)
        assert X.any(axis=0).sum() >= X.shape[1] // 2
    numeric = LabelSpec(column="d", type="numeric")
    X, y = read_encoded(source, encoder, numeric, 5.0)
    sql_x, sql_y = _sql_rows(source, encoder, numeric, 5.0)
    np.testing.assert_array_equal(sql_y, y)


def _random_table(url: str, name: str, n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    age = rng.integers(17, 90, n)
    hours = np.round(rng.normal(40, 12, n), 1)
    kind = rng.choice(["x", "y", "z", "w"], n)
    score = 0.05 * (age - 40) + 0.04 * (hours - 40) + (kind == "x") * 1.0
    positive = (score + rng.logistic(size=n)) > 0
    rows = [(i, int(age[i]), float(hours[i]), str(kind[i]), bool(positive[i])) for i in range(n)]
    create_table(
        url,
        name,
        rows,
        "id integer PRIMARY KEY, age integer, hours double precision, kind text, y boolean",
    )


def _schema() -> tuple[Encoder, LabelSpec]:
    encoder = Encoder(
        [
            NumericFeature(name="age", min=17, max=90),
            NumericFeature(name="hours", min=0, max=99),
            CategoricalFeature(name="kind", categories=["x", "y", "z"]),
        ],
        fit_intercept=True,
    )
    return encoder, LabelSpec(column="y", type="binary", positive="true", negative="false")


def test_gradient_aggregate_equals_numpy(warehouse: str) -> None:
    _random_table(warehouse, "fit_rows", 3000, 1)
    source = open_sql_source("sql://wh/fit_rows", warehouse_settings(warehouse))
    encoder, label = _schema()
    X, y = read_encoded(source, encoder, label, None)
    rng = np.random.default_rng(2)
    for clip in (None, 0.5):
        loss = LogisticLoss(l2=1e-3, gradient_clip=clip)
        local = LocalGradient(loss, X, y)
        with encoded_rows(
            source, encoder, label, None, n=3000, fingerprint=source.fingerprint()
        ) as conn:
            oracle = InDatabaseGradient(conn, loss, 3000, encoder.dimension)
            for _ in range(5):
                w = rng.normal(size=encoder.dimension) * 3
                np.testing.assert_allclose(
                    oracle.gradient(w), local.gradient(w), rtol=1e-11, atol=1e-14
                )


def _jit_mode(session: sa.Connection) -> str:
    """The session's mode: "compiled" where its queries are JIT-compiled without inlining or
    optimisation (checked on a plan where the server has LLVM), "interpreted" where JIT is off."""
    settings = [
        session.exec_driver_sql(f"SHOW {name}").scalar_one()
        for name in ("jit", "jit_above_cost", "jit_inline_above_cost", "jit_optimize_above_cost")
    ]
    if settings[0] == "off":
        return "interpreted"
    assert settings == ["on", "0", "-1", "-1"], settings
    if session.exec_driver_sql("SELECT pg_jit_available()").scalar_one():
        plan = session.exec_driver_sql(
            "EXPLAIN (ANALYZE, FORMAT JSON) SELECT sum(x0) FROM pg_temp.dpfit_rows"
        ).scalar_one()
        jit = plan[0]["JIT"]
        assert jit["Functions"] > 0 and not jit["Options"]["Inlining"], jit
        assert not jit["Options"]["Optimization"], jit
    return "compiled"


def test_large_shards_run_compiled_with_the_interpreters_values(
    warehouse: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Shards of at least ``JIT_MIN_CELLS`` encoded cells (public sizes) run their gradient
    queries with PostgreSQL's JIT (no inlining, no optimisation): the same function calls, so
    the gradients equal the interpreted sessions' (and numpy's to summation order); smaller
    shards stay interpreted."""
    n = 3000
    _random_table(warehouse, "jit_rows", n, 8)
    source = open_sql_source("sql://wh/jit_rows", warehouse_settings(warehouse))
    encoder, label = _schema()
    X, y = read_encoded(source, encoder, label, None)
    loss = LogisticLoss(l2=1e-3, gradient_clip=0.5)
    points = [np.random.default_rng(9).normal(size=encoder.dimension) * 3 for _ in range(4)]
    width = encoder.dimension + 1

    def gradients(threshold: int) -> tuple[list[str], list[np.ndarray]]:
        monkeypatch.setattr(in_database, "JIT_MIN_CELLS", threshold)
        with encoded_rows(
            source, encoder, label, None, n=n, fingerprint=source.fingerprint(), sessions=2
        ) as conn:
            shards = conn.info["dpfit_shards"].sessions
            modes = [_jit_mode(s) for s in shards]
            oracle = InDatabaseGradient(conn, loss, n, encoder.dimension)
            return modes, [oracle.gradient(w) for w in points]

    # the shard holds 1,500 rows of ``width`` cells: at the threshold compiled, one above not
    compiled_modes, compiled = gradients(1500 * width)
    interpreted_modes, interpreted = gradients(1500 * width + 1)
    assert compiled_modes == ["compiled", "compiled"]
    assert interpreted_modes == ["interpreted", "interpreted"]
    local = LocalGradient(loss, X, y)
    for w, a, b in zip(points, compiled, interpreted, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-14, atol=0)
        np.testing.assert_allclose(a, local.gradient(w), rtol=1e-11, atol=1e-14)


_TEMP_ROWS = "SELECT count(*) FROM pg_class WHERE relpersistence = 't' AND relname = 'dpfit_rows'"


def test_sessions_share_the_rows_in_one_snapshot(
    warehouse: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three sessions hold the rows at positions ≡ 0, 1, 2 (mod 3): every row once, so the
    summed gradient is numpy's; all three read the snapshot the fingerprint was checked on —
    a change committed after it (here: between the snapshot and the materialisation) is seen
    by none of them; the temporary tables are gone afterwards, in every session."""
    n = 3001
    _random_table(warehouse, "sharded", n, 6)
    source = open_sql_source("sql://wh/sharded", warehouse_settings(warehouse))
    encoder, label = _schema()
    X, y = read_encoded(source, encoder, label, None)
    loss = LogisticLoss(l2=1e-3, gradient_clip=0.5)
    local = LocalGradient(loss, X, y)
    admin = sa.create_engine(warehouse, isolation_level="AUTOCOMMIT")
    materialise = in_database._materialise
    lock = threading.Lock()
    changed: list[bool] = []

    def change_then_materialise(*args: object, **kwargs: object) -> int:
        with lock:
            if not changed:  # after every session has its snapshot, before any reads rows
                with admin.connect() as conn:
                    conn.exec_driver_sql("UPDATE sharded SET age = 17, y = NOT y WHERE id < 900")
                changed.append(True)
        return materialise(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(in_database, "_materialise", change_then_materialise)
    rng = np.random.default_rng(4)
    with encoded_rows(
        source, encoder, label, None, n=n, fingerprint=source.fingerprint(), sessions=3
    ) as conn:
        oracle = InDatabaseGradient(conn, loss, n, encoder.dimension)
        assert oracle.sessions == 3
        shards = conn.info["dpfit_shards"].sessions
        counts = [
            s.exec_driver_sql("SELECT count(*) FROM pg_temp.dpfit_rows").scalar() for s in shards
        ]
        assert counts == [1001, 1000, 1000]
        # each session's local buffers hold its rows (scans read memory, not the temp file)
        fits = (
            "SELECT pg_relation_size('pg_temp.dpfit_rows') "
            "<= pg_size_bytes(current_setting('temp_buffers'))"
        )
        assert all(s.exec_driver_sql(fits).scalar() for s in shards)
        for _ in range(4):
            w = rng.normal(size=encoder.dimension) * 3
            np.testing.assert_allclose(
                oracle.gradient(w), local.gradient(w), rtol=1e-11, atol=1e-14
            )
    assert changed  # not vacuous: the table did change under the job …
    X2, y2 = read_encoded(source, encoder, label, None)
    w = rng.normal(size=encoder.dimension)
    # … enough to move the gradient
    assert not np.allclose(LocalGradient(loss, X2, y2).gradient(w), local.gradient(w), rtol=1e-3)
    with admin.connect() as conn:
        assert conn.exec_driver_sql(_TEMP_ROWS).scalar_one() == 0
    admin.dispose()


def test_changed_table_is_refused_and_temp_table_is_gone(warehouse: str) -> None:
    _random_table(warehouse, "changing", 200, 3)
    source = open_sql_source("sql://wh/changing", warehouse_settings(warehouse))
    encoder, label = _schema()
    registered = source.fingerprint()
    with (
        pytest.raises(SourceError),
        encoded_rows(source, encoder, label, None, n=199, fingerprint=registered),
    ):
        pass
    engine = sa.create_engine(warehouse)
    with engine.begin() as conn:
        conn.exec_driver_sql("UPDATE changing SET hours = hours + 1 WHERE id = 7")
    engine.dispose()
    with (
        pytest.raises(SourceError),
        encoded_rows(source, encoder, label, None, n=200, fingerprint=registered),
    ):
        pass


def test_a_fit_through_the_database_equals_the_worker_path(warehouse: str) -> None:
    """Same plan, same seed: fit_oracle over the database's aggregates = fit_oracle over the
    reader's rows, to summation rounding (the noise is drawn in the worker either way)."""
    from service.optimizers.kits.base import PrivacyTarget
    from service.optimizers.kits.registry import get_optimizer

    _random_table(warehouse, "same_fit", 2000, 5)
    source = open_sql_source("sql://wh/same_fit", warehouse_settings(warehouse))
    encoder, label = _schema()
    X, y = read_encoded(source, encoder, label, None)
    loss = LogisticLoss(l2=1e-3, gradient_clip=0.5)
    for name in ("dp_agd", "output_perturbation_gd", "dp_agd_centred"):
        optimizer = get_optimizer(name)
        params = optimizer.Params.model_validate({})
        plan = optimizer.plan(params, loss, 2000, encoder.dimension, PrivacyTarget(1.0, 1e-6))
        local = optimizer.fit_oracle(
            plan, loss, LocalGradient(loss, X, y), np.random.default_rng(9), lambda _: None
        )
        with encoded_rows(
            source, encoder, label, None, n=2000, fingerprint=source.fingerprint()
        ) as conn:
            oracle = InDatabaseGradient(conn, loss, 2000, encoder.dimension)
            inside = optimizer.fit_oracle(
                plan, loss, oracle, np.random.default_rng(9), lambda _: None
            )
        np.testing.assert_allclose(inside, local, rtol=1e-8, atol=1e-10)


def _wait(client, job_id: str, timeout: float = 240.0) -> dict:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = client.get(f"/v1/jobs/{job_id}").json()
        if job["status"] in ("succeeded", "failed", "cancelled"):
            return job
        time.sleep(0.5)
    raise AssertionError(f"job {job_id} did not finish")


def test_an_in_database_dataset_end_to_end(warehouse: str, tmp_path) -> None:
    """Through the API: the owner registers a table with "execution": "in_database"; analysts
    see it; jobs that cannot run in the database are refused before any charge (422 naming the
    field); `auto` runs there and releases a model that predicts."""
    import json

    from tests.support.fixtures import EXAMPLES
    from tests.support.live import start_server
    from tests.support.walkthrough import credit_dataset

    _random_table(warehouse, "in_db", 4000, 11)
    server = start_server(
        f"sqlite:///{tmp_path / 'dpfit.db'}",
        data_roots=[EXAMPLES],
        home=tmp_path,
        extra_env={"DPFIT_SQL_CONNECTIONS": json.dumps({"wh": warehouse})},
    )
    try:
        owner = server.client(server.key("indb-owner", "owner"))
        analyst = server.client(server.key("indb-analyst", "analyst"))
        body = {
            "name": "in-db",
            "source": {"uri": "sql://wh/in_db"},
            "label": {"column": "y", "type": "binary", "positive": "true", "negative": "false"},
            "features": [
                {"name": "age", "type": "numeric", "min": 17, "max": 90},
                {"name": "hours", "type": "numeric", "min": 0, "max": 99},
                {"name": "kind", "type": "categorical", "categories": ["x", "y", "z"]},
            ],
            "budget": {"epsilon": 3.0, "delta": 1e-5},
            "execution": "in_database",
        }
        created = owner.post("/v1/datasets", json=body)
        assert created.status_code == 201, created.text
        dataset = created.json()
        assert dataset["execution"] == "in_database"
        # a file cannot be fitted inside a database
        csv = owner.post("/v1/datasets", json={**credit_dataset(), "execution": "in_database"})
        assert csv.status_code == 422, csv.text
        assert csv.json()["field"] == "execution"
        assert (
            owner.post(
                f"/v1/datasets/{dataset['id']}/grants", json={"principal": "indb-analyst"}
            ).status_code
            == 201
        )
        spent_before = owner.get(f"/v1/datasets/{dataset['id']}/budget").json()
        sgd = {
            "dataset_id": dataset["id"],
            "model": {"type": "logistic_regression", "l2": 0.01, "fit_intercept": True},
            "optimizer": {"name": "noisy_sgd_scs13", "params": {}},
            "privacy": {"epsilon": 0.5, "delta": 1e-6},
        }
        refused = analyst.post("/v1/jobs", json=sgd)
        assert refused.status_code == 422, refused.text
        assert refused.json()["field"] == "optimizer.name"
        huber = {
            **sgd,
            "model": {"type": "huber_svm", "l2": 0.01},
            "optimizer": {"name": "dp_gd", "params": {}},
        }
        refused = analyst.post("/v1/jobs", json=huber)
        assert refused.status_code == 422, refused.text
        assert refused.json()["field"] == "model"
        assert owner.get(f"/v1/datasets/{dataset['id']}/budget").json() == spent_before
        auto = {
            "dataset_id": dataset["id"],
            "model": {"type": "logistic_regression"},
            "optimizer": {"name": "auto"},
            "privacy": {"epsilon": 1.0, "delta": 1e-6},
        }
        job = analyst.post("/v1/jobs", json=auto)
        assert job.status_code == 202, job.text
        done = _wait(analyst, job.json()["id"])
        assert done["status"] == "succeeded", done
        rows = [{"age": 60, "hours": 70, "kind": "x"}, {"age": 20, "hours": 10, "kind": "z"}]
        bolt_on = {**auto, "model": {"type": "logistic_regression", "l2": 0.01}}
        bolt_on["optimizer"] = {"name": "bolt_on_psgd", "params": {}}
        job = analyst.post("/v1/jobs", json=bolt_on)
        assert job.status_code == 202, job.text
        assert _wait(analyst, job.json()["id"])["status"] == "succeeded"
        predicted = analyst.post(f"/v1/models/{done['model_id']}/predict", json={"rows": rows})
        assert predicted.status_code == 200, predicted.text
        evaluation = analyst.post(
            f"/v1/models/{done['model_id']}/evaluate",
            json={"dataset_id": dataset["id"], "privacy": {"epsilon": 0.1, "delta": 1e-6}},
        )
        assert evaluation.status_code == 422, evaluation.text  # it would read the rows out
        assert evaluation.json()["field"] == "dataset_id"
    finally:
        server.stop()
