"""The admission transaction against real databases: SQLite file and PostgreSQL.

Many threads (each its own connection) admit jobs on one dataset at once; exactly as many are
admitted as the filter allows sequentially, and the cached total equals the sum of the rows.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from dp_accounting import dp_event
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from service.cli import migrate
from service.db.models import Charge, Dataset, Job
from service.db.session import make_engine, session_factory
from service.ids import new_id
from service.ledger import filter as privacy_filter
from service.ledger.accounting import ORDERS, event_to_json, pure_dp_event, rdp_curve
from service.ledger.admission import (
    BudgetExceeded,
    JobCharge,
    admit_job,
    cancel_or_refund_unread,
    curve_to_json,
    recompute_totals,
    spent_of,
)

CLIENTS = 40


@pytest.fixture(params=["sqlite", "postgres"])
def sessions(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[sessionmaker[Session]]:
    if request.param == "postgres":
        url = request.getfixturevalue("postgres_database")
    else:
        url = f"sqlite:///{tmp_path / 'ledger.db'}"
    migrate(url)
    engine = make_engine(url)
    yield session_factory(engine)
    engine.dispose()


def make_dataset(sessions: sessionmaker[Session], epsilon: float, delta: float) -> str:
    dataset_id = new_id("ds")
    with sessions.begin() as session:
        session.add(
            Dataset(
                id=dataset_id,
                name="t",
                owner="owner",
                source_uri="x.csv",
                source_path="/x.csv",
                source_format="csv",
                fingerprint="sha256:0",
                label={},
                features=[],
                n_rows=100,
                n_features=1,
                epsilon=epsilon,
                delta=delta,
                spent_rdp=curve_to_json([0.0] * len(ORDERS)),
                spent_pure_epsilon=0.0,
            )
        )
    return dataset_id


def new_job(dataset_id: str, principal: str = "analyst", key: str | None = None) -> Job:
    return Job(
        id=new_id("job"),
        dataset_id=dataset_id,
        principal=principal,
        spec={},
        plan={},
        status="queued",
        progress_step=0,
        progress_total=1,
        attempt=1,
        cancel_requested=False,
        idempotency_key=key,
        request_hash="h",
    )


def charge_for(event: dp_event.DpEvent, epsilon: float, delta: float) -> JobCharge:
    return JobCharge(
        epsilon=epsilon,
        delta=delta,
        rdp=rdp_curve(event),
        pure_epsilon=epsilon if delta == 0 else None,
        event=event_to_json(event),
    )


def sequential_capacity(budget: privacy_filter.Budget, charge: JobCharge) -> int:
    spent, k = privacy_filter.Spent.nothing(), 0
    while privacy_filter.admit(budget, spent, charge.rdp, charge.pure_epsilon).admitted:
        spent, k = spent.plus(charge.rdp, charge.pure_epsilon), k + 1
    return k


def hammer(sessions: sessionmaker[Session], dataset_id: str, charge: JobCharge) -> int:
    """CLIENTS threads admit one job each, released together; returns how many got in."""
    barrier = threading.Barrier(CLIENTS)
    admitted: list[bool] = []
    lock = threading.Lock()

    def client() -> None:
        barrier.wait()
        try:
            with sessions.begin() as session:
                admit_job(session, dataset_id, new_job(dataset_id), charge)
            ok = True
        except BudgetExceeded:
            ok = False
        with lock:
            admitted.append(ok)

    threads = [threading.Thread(target=client) for _ in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(admitted) == CLIENTS
    return sum(admitted)


def assert_ledger_adds_up(sessions: sessionmaker[Session], dataset_id: str, expected: int) -> None:
    with sessions() as session:
        dataset = session.get(Dataset, dataset_id)
        assert dataset is not None
        totals = recompute_totals(session, dataset_id)
        cached = spent_of(dataset)
        n_charges = len(
            session.scalars(select(Charge).where(Charge.dataset_id == dataset_id)).all()
        )
        n_jobs = len(session.scalars(select(Job).where(Job.dataset_id == dataset_id)).all())
    assert totals.jobs_charged == expected == n_jobs == n_charges
    assert cached.rdp == pytest.approx(totals.rdp, rel=1e-12)
    assert cached.pure_epsilon == pytest.approx(totals.pure_epsilon)
    budget = privacy_filter.Budget(dataset.epsilon, dataset.delta)
    assert privacy_filter.spent_epsilon(budget, cached) <= budget.epsilon * (1 + 1e-9)


def test_concurrent_gaussian_admissions_never_overspend(sessions: sessionmaker[Session]) -> None:
    budget = privacy_filter.Budget(epsilon=1.0, delta=1e-5)
    charge = charge_for(dp_event.GaussianDpEvent(noise_multiplier=12.0), 0.3, 1e-6)
    k = sequential_capacity(budget, charge)
    assert 1 < k < CLIENTS
    dataset_id = make_dataset(sessions, budget.epsilon, budget.delta)
    assert hammer(sessions, dataset_id, charge) == k
    assert_ledger_adds_up(sessions, dataset_id, k)


def test_concurrent_pure_admissions_use_basic_composition(sessions: sessionmaker[Session]) -> None:
    charge = charge_for(pure_dp_event(0.125), 0.125, 0.0)
    dataset_id = make_dataset(sessions, 1.0, 0.0)
    assert hammer(sessions, dataset_id, charge) == 8
    assert_ledger_adds_up(sessions, dataset_id, 8)


def test_idempotent_retries_charge_once(sessions: sessionmaker[Session]) -> None:
    charge = charge_for(pure_dp_event(0.1), 0.1, 0.0)
    dataset_id = make_dataset(sessions, 1.0, 0.0)
    ids = set()
    for _ in range(3):
        with sessions.begin() as session:
            ids.add(admit_job(session, dataset_id, new_job(dataset_id, key="retry-1"), charge).id)
    assert len(ids) == 1
    assert_ledger_adds_up(sessions, dataset_id, 1)


def test_refund_only_before_data_is_read(sessions: sessionmaker[Session]) -> None:
    charge = charge_for(pure_dp_event(0.5), 0.5, 0.0)
    dataset_id = make_dataset(sessions, 1.0, 0.0)
    jobs = []
    for _ in range(2):
        with sessions.begin() as session:
            jobs.append(admit_job(session, dataset_id, new_job(dataset_id), charge).id)
    with sessions.begin() as session:  # a worker claimed the second job: data read
        job = session.get(Job, jobs[1])
        assert job is not None
        job.status, job.data_read_at = "running", job.created_at
    with sessions.begin() as session:
        assert cancel_or_refund_unread(session, jobs[0], "cancelled", None)
    with sessions.begin() as session:
        assert not cancel_or_refund_unread(session, jobs[0], "cancelled", None)  # once
        assert not cancel_or_refund_unread(session, jobs[1], "cancelled", None)
    with sessions() as session:
        totals = recompute_totals(session, dataset_id)
        dataset = session.get(Dataset, dataset_id)
        assert dataset is not None
        assert totals.jobs_charged == 1
        assert dataset.spent_pure_epsilon == pytest.approx(0.5)
        kinds = [
            c.kind
            for c in session.scalars(select(Charge).order_by(Charge.id))
            if c.dataset_id == dataset_id
        ]
    assert kinds == ["charge", "charge", "refund"]


def test_per_principal_cap_refuses_beyond_the_grant(sessions: sessionmaker[Session]) -> None:
    from service.db.models import Grant

    charge = charge_for(pure_dp_event(0.3), 0.3, 0.0)
    dataset_id = make_dataset(sessions, 10.0, 0.0)
    with sessions.begin() as session:
        session.add(Grant(dataset_id=dataset_id, principal="capped", epsilon_cap=0.7))
    admitted = {"capped": 0, "free": 0}
    for principal in ("capped", "free"):
        for _ in range(5):
            try:
                with sessions.begin() as session:
                    admit_job(session, dataset_id, new_job(dataset_id, principal), charge)
                admitted[principal] += 1
            except BudgetExceeded as exc:
                assert "capped at ε = 0.7" in exc.reason
    assert admitted == {"capped": 2, "free": 5}
