"""``dp_agd_averaged``'s row map inside PostgreSQL (service/workers/in_database_row_map.py):

- the row sum, the mapped rows and the mapped rows' Gram matrix the database computes equal
  numpy's (``X.sum``, ``mapped_rows``, ``gram_of_rows``), in one session and in three — the
  Gram matrix also at a width of 60 (1,830 sums: more than one chunk query); the plain
  oracle refuses the Gram matrix;
- a fixed-seed ``fit_oracle`` through the database (binary, joint multinomial, one-vs-rest;
  one session and three) releases ``DPAGDAveraged.fit``'s model on the reader's rows: the mean
  released (the row-map share spent), the steps on the mapped rows, the fold;
- (turn 18) the column scales' deviation sums and the scaled mapped rows equal numpy's
  (``deviation_sum``, ``mapped_rows`` under ``RowMap.scales``), in one session and in three;
- adversarial mappings (a row equal to the centre, centred entries cancelling to ~1e-32, centre
  entries of 1e-30 … 5e-324, rows with entries of 2⁻⁵²) build the mapped table without an
  underflow error, with rows of norm ≤ 1 equal to numpy's up to the 2⁻⁸⁰ flush; their Gram
  matrix is summed without one either, and so are their deviation sums; scales at the ends of
  their range (2⁻⁶ and 16) map without one too;
- the curvature refresh's terms the database sums over the mapped rows (a joint model, rows of
  no declared class, weights up to ±3000, a random orthonormal basis) equal the kit's
  ``curvature_terms``, in one session and in three; a fixed-seed ``fit_oracle`` of a default
  joint plan with the refresh releases ``fit``'s model (and without the capability, another).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import sqlalchemy as sa

from service.data.encoding import Encoder
from service.data.reader import read_encoded
from service.data.spec import LabelSpec, NumericFeature
from service.data.sql_source import open_sql_source
from service.models.logistic import LogisticLoss
from service.models.multinomial import MultinomialLoss, class_indices
from service.models.registry import parse_model_spec
from service.optimizers.kits.base import PrivacyTarget
from service.optimizers.kits.column_scales import ColumnScalable, column_scales, deviation_sum
from service.optimizers.kits.curvature_refresh import CurvatureTermsOracle, curvature_terms
from service.optimizers.kits.curvature_step import GramOracle, gram_of_rows
from service.optimizers.kits.dp_agd_row_map import RowMap, RowMappable, mapped_rows, row_map
from service.optimizers.kits.full_gradient import LocalGradient
from service.optimizers.kits.one_vs_rest import class_plan_of
from service.optimizers.kits.planning import plan_job
from service.optimizers.kits.registry import get_optimizer
from service.workers.in_database import InDatabaseGradient, encoded_rows
from service.workers.in_database_row_map import (
    ENTRY_FLUSH,
    GRAM_CHUNK_ENTRIES,
    flushed_centre,
    gram_queries,
)
from tests.live.test_in_database import _random_table, _schema
from tests.live.test_in_database_multiclass import _random_table as _random_classes
from tests.live.test_in_database_multiclass import _schema as _class_schema
from tests.support.fixtures import _fresh_postgres_database
from tests.support.warehouse import create_table, warehouse_settings

pytestmark = pytest.mark.postgres

_MAPPED = "SELECT * FROM pg_temp.dpfit_mapped"
_BOTH_FIT = (
    "SELECT pg_relation_size('pg_temp.dpfit_rows') + pg_relation_size('pg_temp.dpfit_mapped') "
    "<= pg_size_bytes(current_setting('temp_buffers'))"
)
_TEMP = (
    "SELECT count(*) FROM pg_class WHERE relpersistence = 't' "
    "AND relname IN ('dpfit_rows', 'dpfit_mapped')"
)


@pytest.fixture(scope="module")
def warehouse() -> Iterator[str]:
    yield from _fresh_postgres_database()


def _quiet(_: int) -> None:
    return None


def _mapped_table(conn: sa.Connection, width: int) -> np.ndarray:
    """The mapped rows of every session, back in the source's order (session k holds the rows
    at positions ≡ k mod P)."""
    shards = conn.info.get("dpfit_shards")
    sessions = [conn] if shards is None else list(shards.sessions)
    parts = [np.array(s.exec_driver_sql(_MAPPED).all(), dtype=np.float64) for s in sessions]
    rows = sum(len(p) for p in parts)
    out = np.empty((rows, width + 1))
    for k, part in enumerate(parts):
        out[k :: len(sessions)] = part
    return out


def _binary_case(warehouse: str, table: str, n: int, seed: int) -> tuple[Any, ...]:
    """A random binary table of ``n`` rows in the warehouse: (source, encoder, label, X, y, a
    row map from its mean plus noise of std 0.01, a generator for the test's own draws)."""
    _random_table(warehouse, table, n, seed)
    source = open_sql_source(f"sql://wh/{table}", warehouse_settings(warehouse))
    encoder, label = _schema()
    X, y = read_encoded(source, encoder, label, None)
    rng = np.random.default_rng(seed + 2)
    mapping = row_map(X.mean(axis=0) + rng.normal(size=encoder.dimension) * 0.01, 0.01)
    return source, encoder, label, X, y, mapping, rng


@pytest.mark.parametrize("sessions", [1, 3])
def test_row_sum_and_mapped_rows_equal_numpy(warehouse: str, sessions: int) -> None:
    n = 3001
    source, encoder, label, X, y, mapping, rng = _binary_case(warehouse, "map_rows", n, 1)
    width = encoder.dimension
    assert np.linalg.norm(mapping.centre) > 0.1
    loss = LogisticLoss(l2=1e-3, gradient_clip=0.5, fit_intercept=True)
    with encoded_rows(
        source,
        encoder,
        label,
        None,
        n=n,
        fingerprint=source.fingerprint(),
        sessions=sessions,
        row_map=True,
    ) as conn:
        oracle = InDatabaseGradient(conn, loss, n, width)
        assert isinstance(oracle, RowMappable) and oracle.sessions == sessions
        np.testing.assert_allclose(oracle.row_sum(), X.sum(axis=0), rtol=1e-12)
        on_mapped = oracle.mapped(mapping)
        expected = mapped_rows(X, mapping)
        table = _mapped_table(conn, width)
        np.testing.assert_allclose(table[:, :width], expected, rtol=1e-13, atol=1e-15)
        # each session's local buffers hold both tables (scans read memory)
        shards = conn.info.get("dpfit_shards")
        for session in [conn] if shards is None else shards.sessions:
            assert session.exec_driver_sql(_BOTH_FIT).scalar_one()
        np.testing.assert_array_equal(table[:, width], y)
        local = LocalGradient(loss, expected, y)
        for _ in range(3):
            w = rng.normal(size=width) * 3
            np.testing.assert_allclose(
                on_mapped.gradient(w), local.gradient(w), rtol=1e-11, atol=1e-14
            )
        with pytest.raises(ValueError):
            on_mapped.mapped(mapping)  # the mapped rows are never mapped again
        assert isinstance(on_mapped, GramOracle)
        _check_gram(on_mapped.gram(), table[:, :width], expected)
        with pytest.raises(ValueError):  # the encoded rows' Gram matrix is never answered
            oracle.gram()
    with sa.create_engine(warehouse).connect() as admin:
        assert admin.exec_driver_sql(_TEMP).scalar_one() == 0


@pytest.mark.parametrize("sessions", [1, 3])
def test_deviation_sums_and_scaled_rows_equal_numpy(warehouse: str, sessions: int) -> None:
    n = 3001
    source, encoder, label, X, y, mapping, rng = _binary_case(warehouse, "map_scales", n, 2)
    width = encoder.dimension
    loss = LogisticLoss(l2=1e-3, gradient_clip=0.5, fit_intercept=True)
    fingerprint = source.fingerprint()
    with encoded_rows(
        source, encoder, label, None, n=n, fingerprint=fingerprint, sessions=sessions, row_map=True
    ) as conn:
        oracle = InDatabaseGradient(conn, loss, n, width)
        assert isinstance(oracle, ColumnScalable)
        expected = deviation_sum(X, mapping.centre, mapping.intercept)
        inside = oracle.deviation_sum(mapping.centre, mapping.intercept)
        assert inside.shape == (width - 1,) and np.all(inside > 0)
        np.testing.assert_allclose(inside, expected, rtol=1e-11, atol=n * ENTRY_FLUSH)
        scales = column_scales(expected / n, 1e-4)
        assert scales.max() / scales.min() > 1.5  # the columns spread unlike: not D = I
        scaled = mapping.scaled(scales)
        on_mapped = oracle.mapped(scaled)
        table = _mapped_table(conn, width)
        np.testing.assert_allclose(table[:, :width], mapped_rows(X, scaled), rtol=1e-13, atol=1e-15)
        assert not np.allclose(table[:, :width], mapped_rows(X, mapping), atol=1e-3)
        w = rng.normal(size=width)
        local = LocalGradient(loss, mapped_rows(X, scaled), y).gradient(w)
        np.testing.assert_allclose(on_mapped.gradient(w), local, rtol=1e-11, atol=1e-14)
        with pytest.raises(ValueError):  # the mapped rows are never asked for their deviations
            on_mapped.deviation_sum(mapping.centre, mapping.intercept)  # type: ignore[attr-defined]


def _check_gram(gram: np.ndarray, table: np.ndarray, expected: np.ndarray) -> None:
    """The database's Gram matrix against ``gram_of_rows`` of its own mapped rows and of numpy's
    (``expected``; an entry flushed below 2⁻⁸⁰ moves a product by less than 2⁻⁸⁰): entry-wise to
    1e-12 of the matrix's largest entry (an off-diagonal entry of centred rows is a cancelling
    sum, whose own relative error is not the summation's)."""
    width = table.shape[1]
    assert gram.shape == (width, width) and gram.dtype == np.float64
    np.testing.assert_array_equal(gram, gram.T)  # assembled symmetric
    for rows in (table, expected):
        numpy_gram = gram_of_rows(rows)
        scale = float(np.abs(numpy_gram).max())
        atol = 1e-12 * scale + len(rows) * ENTRY_FLUSH
        np.testing.assert_allclose(gram, numpy_gram, rtol=1e-12, atol=atol)


@pytest.mark.parametrize("sessions", [1, 3])
def test_the_gram_matrix_of_wide_mapped_rows_equals_numpy(warehouse: str, sessions: int) -> None:
    """Width 60: 1,830 sums, more than one query of at most ``GRAM_CHUNK_ENTRIES``."""
    n, features = 1500, 59
    rng = np.random.default_rng(12)
    values = rng.uniform(-1.0, 1.0, size=(n, features)) + np.linspace(-0.4, 0.4, features)
    rows = [(i, *map(float, values[i]), "a" if i % 3 else "b") for i in range(n)]
    names = [f"f{j}" for j in range(features)]
    columns = ", ".join(["id integer PRIMARY KEY", *(f"{c} double precision" for c in names)])
    create_table(warehouse, "map_wide", rows, f"{columns}, lab text")
    source = open_sql_source("sql://wh/map_wide", warehouse_settings(warehouse))
    encoder = Encoder(
        [NumericFeature(name=c, min=-1.5, max=1.5) for c in names], fit_intercept=True
    )
    label = LabelSpec(column="lab", type="binary", positive="a", negative="b")
    X, _ = read_encoded(source, encoder, label, None)
    width = encoder.dimension
    assert width == 60 and len(gram_queries("dpfit_mapped", width)) > 1
    assert width * (width + 1) // 2 > GRAM_CHUNK_ENTRIES
    mapping = row_map(X.mean(axis=0) + rng.normal(size=width) * 0.01, 0.01)
    assert np.linalg.norm(mapping.centre) > 0.1
    loss = LogisticLoss(l2=1e-3, fit_intercept=True)
    with encoded_rows(
        source, encoder, label, None, n=n, fingerprint=source.fingerprint(), sessions=sessions
    ) as conn:
        oracle = InDatabaseGradient(conn, loss, n, width)
        assert oracle.sessions == sessions
        with pytest.raises(ValueError):
            oracle.gram()
        on_mapped = oracle.mapped(mapping)
        gram = on_mapped.gram()
        table = _mapped_table(conn, width)[:, :width]
    _check_gram(gram, table, mapped_rows(X, mapping))
    assert np.trace(gram) > 0.5 * n  # the mapped rows, not a chunk's zeros


def _fits(plan, loss, X, y, conn, n: int, width: int, label_class: int | None = None):
    optimizer = get_optimizer("dp_agd_averaged")
    local = optimizer.fit(plan, loss, X, y, np.random.default_rng(9), _quiet)
    oracle = InDatabaseGradient(conn, loss, n, width, label_class=label_class)
    inside = optimizer.fit_oracle(plan, loss, oracle, np.random.default_rng(9), _quiet)
    plain = optimizer.fit_oracle(
        plan, loss, LocalGradient(loss, X, y), np.random.default_rng(9), _quiet
    )
    return local, inside, plain


@pytest.mark.parametrize("sessions", [1, 3])
def test_a_binary_fit_through_the_database_equals_fit(warehouse: str, sessions: int) -> None:
    n = 2000
    _random_table(warehouse, "map_fit", n, 5)
    source = open_sql_source("sql://wh/map_fit", warehouse_settings(warehouse))
    encoder, label = _schema()
    X, y = read_encoded(source, encoder, label, None)
    width = encoder.dimension
    spec = {"type": "logistic_regression", "l2": 1e-3, "fit_intercept": True}
    planned = plan_job(
        parse_model_spec(spec), "dp_agd_averaged", {}, n, width - 1, PrivacyTarget(1.0, 1e-6)
    )
    plan, loss = planned.plan, planned.loss
    assert plan.hyperparameters["row_map_share"] > 0.0
    with encoded_rows(
        source, encoder, label, None, n=n, fingerprint=source.fingerprint(), sessions=sessions
    ) as conn:
        local, inside, plain = _fits(plan, loss, X, y, conn, n, width)
        # the share was spent: the mapped table was built, once, from every row
        shards = conn.info.get("dpfit_shards")
        held = [conn] if shards is None else shards.sessions
        count = "SELECT count(*) FROM pg_temp.dpfit_mapped"
        assert sum(s.exec_driver_sql(count).scalar_one() for s in held) == n
    assert np.all(np.isfinite(local)) and np.abs(local).max() > 1e-2
    np.testing.assert_allclose(inside, local, rtol=1e-9, atol=1e-11)
    assert not np.allclose(plain, local, rtol=1e-3)  # the plain steps release another model


def test_joint_and_one_vs_rest_fits_through_the_database_equal_fit(warehouse: str) -> None:
    n = 2000
    _random_classes(warehouse, "map_classes", n, 5)
    source = open_sql_source("sql://wh/map_classes", warehouse_settings(warehouse))
    encoder, label = _class_schema()
    X, Y = read_encoded(source, encoder, label, None)
    width = encoder.dimension
    target = PrivacyTarget(1.0, 1e-6)
    with encoded_rows(
        source, encoder, label, None, n=n, fingerprint=source.fingerprint(), sessions=2
    ) as conn:
        cases = [
            ("multinomial_logistic_regression", "eigenvalue"),
            ("multinomial_logistic_regression", "gram"),  # the Gram form (gram_step)
            ("logistic_regression", None),
        ]
        for kind, form in cases:
            spec = {"type": kind, "l2": 1e-3, "fit_intercept": True}
            params = {} if form is None else {"curvature_form": form}
            planned = plan_job(
                parse_model_spec(spec), "dp_agd_averaged", params, n, width - 1, target, classes=3
            )
            plan, loss = planned.plan, planned.loss
            class_plan = class_plan_of(plan)
            if class_plan is None:
                assert isinstance(loss, MultinomialLoss)
                assert plan.hyperparameters["row_map_share"] > 0.0
                assert plan.hyperparameters["curvature_form"] == form
                local, inside, plain = _fits(plan, loss, X, class_indices(Y), conn, n, width)
            else:  # one mean and one mapped table per class, the classes in order
                assert class_plan.hyperparameters["row_map_share"] > 0.0
                runs = [_fits(class_plan, loss, X, Y[k], conn, n, width, k) for k in range(3)]
                local, inside, plain = (np.stack(r) for r in zip(*runs, strict=True))
            assert np.abs(local).max() > 1e-2, kind
            np.testing.assert_allclose(inside, local, rtol=1e-9, atol=1e-11)
            assert not np.allclose(plain, local, rtol=1e-3)


def test_adversarial_mappings_build_without_an_underflow(warehouse: str) -> None:
    """Rows with entries of 2⁻⁵² and of 0; mappings whose centre is a row (it maps to the
    intercept axis), whose centred entries cancel to ~1e-32 (flushed), whose centre entries are
    1e-30, 1e-300 and 5e-324 with a = x_w/ĉ < 1 (v·a underflows: PostgreSQL raises without the
    centre's flush). Every mapped table builds; its rows have norm ≤ 1 and equal numpy's
    ``mapped_rows`` under the flushed centre, up to entries below 2⁻⁸⁰."""
    values = [2.3e-16, -2.3e-16, 0.5, -0.25, 4.5e-16, 0.0, 0.999, -1.0]
    rows = [(i, values[i % 8], values[(3 * i + 1) % 8], "a" if i % 3 else "b") for i in range(80)]
    columns = "id integer PRIMARY KEY, z double precision, u double precision, lab text"
    create_table(warehouse, "map_tiny", rows, columns)
    source = open_sql_source("sql://wh/map_tiny", warehouse_settings(warehouse))
    encoder = Encoder(
        [NumericFeature(name="z", min=-1, max=1), NumericFeature(name="u", min=-1, max=1)],
        fit_intercept=True,
    )
    label = LabelSpec(column="lab", type="binary", positive="a", negative="b")
    X, y = read_encoded(source, encoder, label, None)
    width = encoder.dimension
    assert 0 < np.abs(X[X != 0]).min() < 1e-15
    c = float(X[0, -1])
    tiny = X[np.abs(X[:, 0]) < 1e-15][0]  # a row with an entry of ~1e-16
    cancel = tiny.copy()
    cancel[:-1] = np.nextafter(tiny[:-1], 0.0)  # centred entries of one ulp: ~1e-32
    cancel[-1] = 0.0
    equal = X[2].copy()
    equal[-1] = 0.0
    mappings = [
        RowMap(centre=equal, intercept=c),  # row 2 maps to (0, 0, 1)
        RowMap(centre=cancel, intercept=c),
        RowMap(centre=np.array([1e-30, 1e-300, 0.0]), intercept=1.0),
        RowMap(centre=np.array([5e-324, -5e-324, 0.0]), intercept=1.0),
        RowMap(centre=np.array([0.3, 5e-324, 0.0]), intercept=1.0 / math.sqrt(width)),
        RowMap(centre=cancel, intercept=c).scaled(np.array([2.0**-6, 16.0, 1.0])),
        RowMap(centre=np.array([1e-30, 1e-300, 0.0]), intercept=1.0).scaled(
            np.array([16.0, 2.0**-6, 1.0])
        ),
    ]
    loss = LogisticLoss(l2=1e-3, gradient_clip=0.5, fit_intercept=True)
    rng = np.random.default_rng(8)
    with encoded_rows(source, encoder, label, None, n=80, fingerprint=source.fingerprint()) as conn:
        oracle = InDatabaseGradient(conn, loss, 80, width)
        for index, mapping in enumerate(mappings):
            on_mapped = oracle.mapped(mapping)  # must not raise
            table = _mapped_table(conn, width)[:, :width]
            if index == 0:  # the row equal to the centre: on the intercept axis
                np.testing.assert_array_equal(table[2, :-1], [0.0, 0.0])
            flushed = RowMap(
                centre=flushed_centre(mapping), intercept=mapping.intercept, scales=mapping.scales
            )
            expected = mapped_rows(X, flushed)
            assert np.all(np.linalg.norm(table, axis=1) <= 1.0)
            np.testing.assert_allclose(table, expected, rtol=1e-13, atol=ENTRY_FLUSH)
            small = table[table != 0.0]
            assert np.all(np.abs(small) >= ENTRY_FLUSH)
            _check_gram(on_mapped.gram(), table, expected)  # no product underflows
            sums = oracle.deviation_sum(mapping.centre, mapping.intercept)  # must not raise
            numpy_sums = deviation_sum(X, flushed.centre, mapping.intercept)
            np.testing.assert_allclose(sums, numpy_sums, rtol=1e-12, atol=80 * ENTRY_FLUSH)
            w = rng.normal(size=width)
            np.testing.assert_allclose(
                on_mapped.gradient(w),
                LocalGradient(loss, expected, y).gradient(w),
                rtol=1e-11,
                atol=1e-14,
            )
    # not vacuous: the second mapping's centred entries were below the flush in numpy
    cancelled = mapped_rows(X, mappings[1])
    assert np.any((np.abs(cancelled) < ENTRY_FLUSH) & (cancelled != 0.0))


def _class_case(warehouse: str, table: str, n: int, seed: int) -> tuple[Any, ...]:
    """A random three-class table (rows of no declared class among them): (source, encoder,
    label, X, class indices)."""
    _random_classes(warehouse, table, n, seed)
    source = open_sql_source(f"sql://wh/{table}", warehouse_settings(warehouse))
    encoder, label = _class_schema()
    X, Y = read_encoded(source, encoder, label, None)
    return source, encoder, label, X, class_indices(Y)


@pytest.mark.parametrize("sessions", [1, 3])
def test_curvature_terms_equal_the_kits(warehouse: str, sessions: int) -> None:
    n = 3001
    source, encoder, label, X, y = _class_case(warehouse, "map_curvature", n, 3)
    assert (y < 0).any() and (y >= 0).any()  # rows of no declared class: m_i = 0
    width, K = encoder.dimension, 3
    rng = np.random.default_rng(4)
    mapping = row_map(X.mean(axis=0) + rng.normal(size=width) * 0.01, 0.01)
    loss = MultinomialLoss(l2=1e-3, classes=K, fit_intercept=True)
    fingerprint = source.fingerprint()
    with encoded_rows(
        source, encoder, label, None, n=n, fingerprint=fingerprint, sessions=sessions, row_map=True
    ) as conn:
        oracle = InDatabaseGradient(conn, loss, n, width)
        Q = np.linalg.qr(rng.normal(size=(width, width)))[0]
        with pytest.raises(ValueError):  # the encoded rows' terms are never answered
            oracle.curvature_terms(np.zeros(K * width), Q)
        on_mapped = oracle.mapped(mapping)
        assert isinstance(on_mapped, CurvatureTermsOracle) and on_mapped.sessions == sessions
        table = _mapped_table(conn, width)
        np.testing.assert_array_equal(table[:, width], y)
        checked = 0
        for scale in (0.0, 1.0, 3.0, 50.0, 50.0, 3000.0):
            Q = np.linalg.qr(rng.normal(size=(width, width)))[0]
            w = rng.uniform(-scale, scale, size=K * width)
            terms = on_mapped.curvature_terms(w, Q)
            assert terms.shape == (K, width, width) and terms.dtype == np.float64
            # against the kit on the database's own mapped rows and on numpy's (a flushed e_k
            # or square moves a row's term by less than 2⁻²⁰⁰)
            for rows in (table[:, :width], mapped_rows(X, mapping)):
                with np.errstate(under="ignore"):
                    expected = curvature_terms(loss, w, rows, y, Q)
                np.testing.assert_allclose(terms, expected, rtol=1e-9, atol=n * 2.0**-200)
                checked += int(np.sum(expected > 1e-6))
        assert checked > 0.5 * 2 * 6 * K * width  # mostly terms of a real size, not zeros


class _WithoutTerms:
    """The oracle (and its mapped oracle) without ``curvature_terms``: every other capability."""

    def __init__(self, oracle: Any) -> None:
        self._oracle = oracle

    def __getattr__(self, name: str) -> Any:
        if name == "curvature_terms":
            raise AttributeError(name)
        value = getattr(self._oracle, name)
        if name == "mapped":
            return lambda mapping: _WithoutTerms(value(mapping))
        return value


def test_a_joint_fit_with_the_curvature_refresh_through_the_database_equals_fit(
    warehouse: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A default joint plan with the refresh (many rows, narrow rows, ε = 1: the Gram form at
    the curvature at 0): ``fit_oracle`` through the database, over two sessions, releases
    ``fit``'s model; an oracle without ``curvature_terms`` skips the refresh and releases
    another."""
    n = 5000
    source, encoder, label, X, y = _class_case(warehouse, "map_refresh", n, 6)
    width = encoder.dimension
    spec = {"type": "multinomial_logistic_regression", "l2": 1e-3, "fit_intercept": True}
    planned = plan_job(
        parse_model_spec(spec),
        "dp_agd_averaged",
        {},
        n,
        width - 1,
        PrivacyTarget(1.0, 1e-6),
        classes=3,
    )
    plan, loss = planned.plan, planned.loss
    hyper = plan.hyperparameters
    assert hyper["curvature_form"] == "gram" and hyper["curvature_refresh_share"] > 0.0
    optimizer = get_optimizer("dp_agd_averaged")
    calls: list[int] = []
    summed = InDatabaseGradient.curvature_terms

    def counted(self: InDatabaseGradient, w: np.ndarray, basis: np.ndarray) -> np.ndarray:
        calls.append(1)
        return summed(self, w, basis)

    with encoded_rows(
        source, encoder, label, None, n=n, fingerprint=source.fingerprint(), sessions=2
    ) as conn:
        local, inside, _ = _fits(plan, loss, X, y, conn, n, width)
        monkeypatch.setattr(InDatabaseGradient, "curvature_terms", counted)
        again = optimizer.fit_oracle(
            plan, loss, InDatabaseGradient(conn, loss, n, width), np.random.default_rng(9), _quiet
        )
        oracle = _WithoutTerms(InDatabaseGradient(conn, loss, n, width))
        skipped = optimizer.fit_oracle(plan, loss, oracle, np.random.default_rng(9), _quiet)
    assert calls == [1]  # the refresh summed c once, after step t_r
    assert np.all(np.isfinite(local)) and np.abs(local).max() > 1e-2
    np.testing.assert_allclose(inside, local, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(again, local, rtol=1e-9, atol=1e-11)
    assert not np.allclose(skipped, local, rtol=1e-3)  # the refresh moved the released model
