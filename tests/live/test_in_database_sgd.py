"""Bolt-on PSGD inside PostgreSQL (paper 004's Bismarck design) against a real PostgreSQL: the
aggregate's passes equal ``permutation_sgd`` on the reader's rows for the same permutations,
the released model equals ``BoltOnPSGD.fit``'s for the same generator, the session's temporary
objects are gone afterwards, and a role with nothing but SELECT on the table and TEMP runs it."""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Iterator

import numpy as np
import pytest
import sqlalchemy as sa

from service.data.encoding import Encoder
from service.data.reader import read_encoded
from service.data.spec import CategoricalFeature, LabelSpec, NumericFeature
from service.data.sql_encoding import InDatabaseUnsupported
from service.data.sql_source import open_sql_source
from service.models.logistic import LogisticLoss
from service.optimizers.bolt_on_psgd import BoltOnPSGD, BoltOnPSGDParams, permutation_sgd
from service.optimizers.kits.base import PrivacyTarget
from service.optimizers.kits.sgd_common import (
    StepSchedule,
    pass_layout,
    permutation_batches,
    run_sgd,
)
from service.privacy.secure_random import SecureRandom
from service.workers import in_database_sgd
from service.workers.in_database import InDatabaseGradient, encoded_rows
from service.workers.in_database_sgd import fit_bolt_on_in_database, in_database_permutation_sgd
from tests.support.fixtures import _fresh_postgres_database
from tests.support.warehouse import warehouse_settings

pytestmark = pytest.mark.postgres

N = 1003  # not a multiple of the batch sizes: uneven batches (np.array_split's q + 1 first)
RTOL, ATOL = 1e-9, 1e-12


@pytest.fixture(scope="module")
def warehouse() -> Iterator[str]:
    for url in _fresh_postgres_database():
        _table(url, "people", N, seed=4)
        yield url


def _table(url: str, name: str, n: int, seed: int) -> None:
    """Rows inserted in a shuffled primary-key order, so the stable order (by key) is not the
    physical one: a pass that ignored the positions would visit other rows."""
    rng = np.random.default_rng(seed)
    ids = rng.permutation(n) + 1
    age = rng.integers(17, 90, n)
    hours = np.round(rng.normal(40, 12, n), 1)
    score = rng.normal(size=n)
    kind = rng.choice(["x", "y", "z", "w"], n)
    logit = 0.06 * (age - 45) + 0.05 * (hours - 40) + 1.2 * score + (kind == "x")
    positive = (logit + rng.logistic(size=n)) > 0
    rows = [
        (
            int(ids[i]),
            int(age[i]),
            float(hours[i]),
            float(score[i]),
            str(kind[i]),
            bool(positive[i]),
        )
        for i in range(n)
    ]
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql(
            f"CREATE TABLE {name} (id integer PRIMARY KEY, age integer, hours double precision, "
            "score double precision, kind text, y boolean)"
        )
        conn.exec_driver_sql(f"INSERT INTO {name} VALUES (%s, %s, %s, %s, %s, %s)", rows)
    engine.dispose()


def _schema() -> tuple[Encoder, LabelSpec]:
    encoder = Encoder(
        [
            NumericFeature(name="age", min=17, max=90),
            NumericFeature(name="hours", min=0, max=99),
            NumericFeature(name="score", min=-3, max=3),
            CategoricalFeature(name="kind", categories=["x", "y", "z"]),
        ],
        fit_intercept=True,
    )
    return encoder, LabelSpec(column="y", type="binary", positive="true", negative="false")


def _source(url: str):
    return open_sql_source("sql://wh/people", warehouse_settings(url))


# (loss, batch size, passes, schedule, averaging, radius)
CASES = {
    "convex-constant": (LogisticLoss(l2=0.0), 10, 3, StepSchedule.constant(2.0), False, None),
    "convex-averaged": (LogisticLoss(l2=0.0), 7, 3, StepSchedule.constant(3.0), True, None),
    "convex-projected": (LogisticLoss(l2=0.0), 10, 3, StepSchedule.constant(4.0), True, 0.8),
    "strongly-convex": (
        LogisticLoss(l2=0.02),
        5,
        4,
        StepSchedule.capped_inverse_t(1.0 / 0.27, 0.02),
        False,
        None,
    ),
    "strongly-convex-projected-averaged-clipped": (
        LogisticLoss(l2=0.02, gradient_clip=0.5),
        9,
        3,
        StepSchedule.capped_inverse_t(1.0 / 0.27, 0.02),
        True,
        0.6,
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_passes_equal_permutation_sgd_on_the_readers_rows(warehouse: str, case: str) -> None:
    loss, batch, passes, schedule, averaging, radius = CASES[case]
    source = _source(warehouse)
    encoder, label = _schema()
    X, y = read_encoded(source, encoder, label, None)
    kwargs = dict(
        passes=passes, batch_size=batch, schedule=schedule, averaging=averaging, radius=radius
    )
    expected = permutation_sgd(loss, X, y, rng=np.random.default_rng(11), **kwargs)
    steps: list[int] = []
    with encoded_rows(
        source, encoder, label, None, n=N, fingerprint=source.fingerprint(), positions=True
    ) as conn:
        got = in_database_permutation_sgd(
            conn,
            loss,
            n=N,
            d=encoder.dimension,
            rng=np.random.default_rng(11),
            progress=steps.append,
            **kwargs,
        )
    np.testing.assert_allclose(got, expected, rtol=RTOL, atol=ATOL)
    m = N // batch
    assert steps == [m * (p + 1) for p in range(passes)]
    # not vacuous: other permutations, or the other output, give another model
    other = permutation_sgd(loss, X, y, rng=np.random.default_rng(12), **kwargs)
    assert not np.allclose(other, expected, rtol=1e-4)
    if schedule.decay_start is not None:
        assert schedule.decay_start < passes * m  # both regimes of the schedule are run
    if radius is not None:
        assert np.linalg.norm(got) <= radius * (1 + 1e-12)
        free = permutation_sgd(
            loss, X, y, rng=np.random.default_rng(11), **{**kwargs, "radius": None}
        )
        assert np.linalg.norm(free) > radius * 1.1  # the projection binds


def _plan(loss: LogisticLoss, **params: object):
    return BoltOnPSGD().plan(
        BoltOnPSGDParams(**params), loss, N, _schema()[0].dimension, PrivacyTarget(1.0, 1e-6)
    )


@pytest.mark.parametrize(
    "loss, params",
    [
        (LogisticLoss(l2=0.0), {"passes": 2, "batch_size": 20}),
        (LogisticLoss(l2=0.01), {"mode": "strongly_convex", "passes": 2, "radius": 5.0}),
    ],
)
def test_release_equals_the_worker_paths_fit(warehouse: str, loss: LogisticLoss, params) -> None:
    """Same plan, same generator: the same permutations and the same noise draw."""
    plan = _plan(loss, **params)
    source = _source(warehouse)
    encoder, label = _schema()
    X, y = read_encoded(source, encoder, label, None)
    expected = BoltOnPSGD().fit(plan, loss, X, y, np.random.default_rng(21), lambda t: None)
    with encoded_rows(
        source, encoder, label, None, n=N, fingerprint=source.fingerprint(), positions=True
    ) as conn:
        got = fit_bolt_on_in_database(
            conn, plan, loss, N, encoder.dimension, np.random.default_rng(21), lambda t: None
        )
    np.testing.assert_allclose(got, expected, rtol=RTOL, atol=ATOL)


def test_plan_checks_are_fits(warehouse: str) -> None:
    """A plan that does not cover the loss is refused before any query, as ``fit`` refuses it;
    so are constants the aggregate cannot run (public values only)."""
    loss = LogisticLoss(l2=0.0)
    plan = _plan(loss, passes=2)
    d = _schema()[0].dimension
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="different l2"):
        fit_bolt_on_in_database(None, plan, LogisticLoss(l2=0.1), N, d, rng, lambda t: None)  # type: ignore[arg-type]
    weak = dataclasses.replace(plan, sensitivity=plan.sensitivity / 2)
    with pytest.raises(ValueError, match="sensitivity"):
        fit_bolt_on_in_database(None, weak, loss, N, d, rng, lambda t: None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="shape"):
        fit_bolt_on_in_database(None, plan, loss, N + 1, d, rng, lambda t: None)  # type: ignore[arg-type]
    tiny = _plan(loss, passes=1, step_size=1e-70)
    with pytest.raises(InDatabaseUnsupported) as refused:
        fit_bolt_on_in_database(None, tiny, loss, N, d, rng, lambda t: None)  # type: ignore[arg-type]
    assert refused.value.field == "optimizer.params.step_size"


class _TiedStream:
    """A byte source whose first ``n`` words hold two equal ones (a tie the permutation must
    reject and redraw), then a seeded generator's bytes (asked for in multiples of 8 bytes by
    :class:`SecureRandom`, so how the reads are split does not change the stream)."""

    def __init__(self, n: int, seed: int) -> None:
        rng = np.random.default_rng(seed)
        words = rng.integers(0, 2**64, n, dtype=np.uint64, endpoint=False)
        words[n // 2] = words[7]
        self._prefix = words.tobytes()
        self._rng = rng

    def __call__(self, size: int) -> bytes:
        head, self._prefix = self._prefix[:size], self._prefix[size:]
        # (Generator.bytes(0) still draws a word: ask only for what is missing)
        return head + (self._rng.bytes(size - len(head)) if size > len(head) else b"")


@pytest.mark.parametrize("tied", [False, True])
def test_the_pass_order_is_the_workers_permutation_streamed(
    warehouse: str, tied: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The keys go into the session 100 at a time (11 chunks for N rows), and the rows are
    visited in exactly ``SecureRandom.permutation(N)``'s order for the same stream — also when
    the first draw has a tie (redrawn, as the worker path redraws): the in-database pass and
    ``permutation_sgd`` then give the same model, and the generators end in the same state."""
    monkeypatch.setattr(in_database_sgd, "_COPY_CHUNK", 100)

    def secure(seed: int) -> SecureRandom:
        source = _TiedStream(N, seed) if tied else np.random.default_rng(seed).bytes
        return SecureRandom(source, chunk_bytes=0)

    source = _source(warehouse)
    encoder, label = _schema()
    expected_order = secure(5).permutation(N)
    with encoded_rows(
        source, encoder, label, None, n=N, fingerprint=source.fingerprint(), positions=True
    ) as conn:
        conn.exec_driver_sql(
            "CREATE TEMPORARY TABLE dpfit_order (pos bigint, key bigint) ON COMMIT PRESERVE ROWS"
        )
        drawn = secure(5)
        in_database_sgd._ship_order(conn, drawn, N)
        order = conn.exec_driver_sql("SELECT pos FROM pg_temp.dpfit_order ORDER BY key")
        np.testing.assert_array_equal(np.array([r[0] for r in order]), expected_order)
        reference = secure(5)
        reference.permutation(N)
        assert drawn.words(4).tolist() == reference.words(4).tolist()  # same words consumed
        conn.exec_driver_sql("DROP TABLE pg_temp.dpfit_order")
        conn.commit()
        loss = LogisticLoss(l2=0.0)
        kwargs = dict(
            passes=2,
            batch_size=10,
            schedule=StepSchedule.constant(2.0),
            averaging=False,
            radius=None,
        )
        got = in_database_permutation_sgd(
            conn, loss, n=N, d=encoder.dimension, rng=secure(6), **kwargs
        )
    X, y = read_encoded(source, encoder, label, None)
    expected = permutation_sgd(loss, X, y, rng=secure(6), **kwargs)
    np.testing.assert_allclose(got, expected, rtol=RTOL, atol=ATOL)
    if tied:  # not vacuous: the first draw really had a tie, and it was not the order used
        first = np.frombuffer(_TiedStream(N, 5)(8 * N), dtype=np.uint64)
        assert len(set(first.tolist())) == N - 1
        assert not np.array_equal(np.argsort(first, kind="stable"), expected_order)


def test_per_step_noise_is_joined_at_the_batch_ends(warehouse: str) -> None:
    """The per-step-noise variant (``step_noise``: a draw added to every step's gradient,
    joined to the batch's last row by its rank in the pass) equals ``run_sgd`` adding the same
    draws to the same batches."""
    source = _source(warehouse)
    encoder, label = _schema()
    d = encoder.dimension
    X, y = read_encoded(source, encoder, label, None)
    loss = LogisticLoss(l2=0.0)
    batch, passes = 10, 2
    m, _ = pass_layout(N, batch)
    draws = np.random.default_rng(8).normal(scale=0.05, size=(passes * m, d))
    schedule = StepSchedule.constant(2.0)
    taken = iter(draws)
    steps = iter(draws)
    expected = run_sgd(
        loss,
        X,
        y,
        permutation_batches(N, m, passes, np.random.default_rng(13)),
        schedule,
        noise=lambda g: g + next(steps),
    )
    with encoded_rows(
        source, encoder, label, None, n=N, fingerprint=source.fingerprint(), positions=True
    ) as conn:
        got = in_database_permutation_sgd(
            conn,
            loss,
            n=N,
            d=d,
            passes=passes,
            batch_size=batch,
            schedule=schedule,
            averaging=False,
            radius=None,
            rng=np.random.default_rng(13),
            step_noise=lambda: next(taken),
        )
    np.testing.assert_allclose(got, expected, rtol=RTOL, atol=ATOL)
    plain = permutation_sgd(
        loss,
        X,
        y,
        rng=np.random.default_rng(13),
        passes=passes,
        batch_size=batch,
        schedule=schedule,
        averaging=False,
        radius=None,
    )
    assert not np.allclose(plain, expected, rtol=1e-4)  # not vacuous: the draws moved it


_MINE = (
    "SELECT (SELECT count(*) FROM pg_class WHERE relpersistence = 't' "
    "        AND relname IN ('dpfit_rows', 'dpfit_order', 'dpfit_noise')) "
    "     + (SELECT count(*) FROM pg_proc WHERE proname IN ('dpfit_sgd_row', 'dpfit_sgd_pass'))"
)


def test_select_only_role_runs_it_and_leaves_nothing(warehouse: str) -> None:
    role = f"dpfit_reader_{secrets.token_hex(3)}"
    admin = sa.create_engine(warehouse, isolation_level="AUTOCOMMIT")
    database = sa.engine.make_url(warehouse).database
    with admin.connect() as conn:
        conn.exec_driver_sql(f"CREATE ROLE {role} LOGIN")
        conn.exec_driver_sql(f'REVOKE ALL ON DATABASE "{database}" FROM PUBLIC')
        conn.exec_driver_sql(f'GRANT CONNECT, TEMPORARY ON DATABASE "{database}" TO {role}')
        conn.exec_driver_sql("REVOKE CREATE ON SCHEMA public FROM PUBLIC")
        conn.exec_driver_sql(f"GRANT USAGE ON SCHEMA public TO {role}")
        conn.exec_driver_sql(f"GRANT SELECT ON people TO {role}")
    url = sa.engine.make_url(warehouse).set(username=role, password=None)
    try:
        source = open_sql_source(
            "sql://wh/people", warehouse_settings(url.render_as_string(hide_password=False))
        )
        encoder, label = _schema()
        loss = LogisticLoss(l2=0.0)
        plan = _plan(loss, passes=2, batch_size=50)
        with encoded_rows(
            source, encoder, label, None, n=N, fingerprint=source.fingerprint(), positions=True
        ) as conn:
            # the role really has no more than that
            with pytest.raises(sa.exc.ProgrammingError):
                conn.exec_driver_sql("CREATE TABLE public.nope (a integer)")
            conn.rollback()
            w = fit_bolt_on_in_database(
                conn, plan, loss, N, encoder.dimension, np.random.default_rng(3), lambda t: None
            )
            assert np.all(np.isfinite(w))
            # dropped by the job itself, in its own session (only the rows remain until the
            # session ends)
            assert conn.exec_driver_sql(_MINE).scalar_one() == 1
        # the full-gradient path's sessions (a snapshot exported and adopted) need no more
        with encoded_rows(
            source, encoder, label, None, n=N, fingerprint=source.fingerprint(), sessions=2
        ) as conn:
            oracle = InDatabaseGradient(conn, loss, N, encoder.dimension)
            assert oracle.sessions == 2
            assert np.all(np.isfinite(oracle.gradient(np.full(encoder.dimension, 0.1))))
        with admin.connect() as conn:
            assert conn.exec_driver_sql(_MINE).scalar_one() == 0
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s",
                (role,),
            )
            conn.exec_driver_sql(f"DROP OWNED BY {role}")
            conn.exec_driver_sql(f"DROP ROLE {role}")
        admin.dispose()


def test_a_vanishing_coefficient_does_not_fail_the_job(warehouse: str) -> None:
    """PostgreSQL raises where a product underflows to 0 (numpy returns 0). A feature seen in
    one row only decays by (1 − ημ) = 0.7 at every other step, into the subnormals within a
    pass, down to 2⁻¹⁰⁷⁴, where μ·w rounds to 0: without the flush the job would fail on this
    table and not on others — a data-dependent failure. With it the pass runs and agrees with
    numpy (the flush moves entries < 2⁻⁴⁰⁰)."""
    n = 4000
    engine = sa.create_engine(warehouse)
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "CREATE TABLE rare (id integer PRIMARY KEY, v double precision, y boolean)"
        )
        rows = [(i, 1.0 if i == 3 else 0.0, i % 3 == 0) for i in range(n)]
        conn.exec_driver_sql("INSERT INTO rare VALUES (%s, %s, %s)", rows)
    engine.dispose()
    source = open_sql_source("sql://wh/rare", warehouse_settings(warehouse))
    encoder = Encoder([NumericFeature(name="v", min=-1, max=1)], fit_intercept=True)
    label = LabelSpec(column="y", type="binary", positive="true", negative="false")
    X, y = read_encoded(source, encoder, label, None)
    loss = LogisticLoss(l2=0.3)
    kwargs = dict(passes=1, batch_size=1, schedule=StepSchedule.constant(1.0, 0.3), radius=None)
    # seed 2: the rare row comes early in the permutation (position 350 of 4000), so its
    # coefficient has ~3,650 steps of decay by 0.7 to reach the subnormals
    for averaging in (False, True):
        expected = permutation_sgd(
            loss, X, y, rng=np.random.default_rng(2), averaging=averaging, **kwargs
        )
        with encoded_rows(
            source, encoder, label, None, n=n, fingerprint=source.fingerprint(), positions=True
        ) as conn:
            got = in_database_permutation_sgd(
                conn, loss, n=n, d=2, rng=np.random.default_rng(2), averaging=averaging, **kwargs
            )
        np.testing.assert_allclose(got, expected, rtol=RTOL, atol=2.0**-390)
        if not averaging:  # not vacuous: numpy's coefficient ended in the subnormals
            assert 0.0 < abs(expected[0]) < 2.0**-1022
