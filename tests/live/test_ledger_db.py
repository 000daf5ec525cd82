"""The admission transaction against real databases: SQLite file and PostgreSQL.

Many threads (each its own connection) admit jobs on one dataset at once; exactly as many are
admitted as the filter allows sequentially, and the cached total equals the sum of the rows.
"""

from __future__ import annotations

import math
import random
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from dp_accounting import dp_event
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from service.cli import migrate
from service.db.models import Charge, Dataset, Job, LedgerTotal
from service.db.session import make_engine, session_factory
from service.ids import new_id
from service.ledger import filter as privacy_filter
from service.ledger import totals as ledger_totals
from service.ledger.accounting import event_to_json, pure_dp_event, rdp_curve
from service.ledger.admission import (
    BudgetExceeded,
    JobCharge,
    admit_job,
    cancel_or_refund_unread,
)
from service.ledger.audit import audit, recompute_totals
from service.privacy.gdp import event_mu

CLIENTS = 40


@pytest.fixture(params=["sqlite", "postgres"])
def sessions(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[sessionmaker[Session]]:
    if request.param == "postgres":
        # A database of its own: these tests insert bare rows (no label, no job spec) that the
        # API never makes, and the session's shared database also backs the live pg_server.
        url = request.getfixturevalue("private_postgres_database")
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
        mu=None if delta == 0 else event_mu(event),
    )


def sequential_capacity(budget: privacy_filter.Budget, charges: list[JobCharge]) -> int:
    """Jobs admitted one by one, cycling through ``charges``, until the first refusal."""
    spent, k = privacy_filter.Spent.nothing(), 0
    while privacy_filter.admit(budget, spent, charges[k % len(charges)].cost).admitted:
        spent, k = spent.plus(charges[k % len(charges)].cost), k + 1
    return k


def hammer(
    sessions: sessionmaker[Session],
    dataset_id: str,
    charge: JobCharge | list[JobCharge],
    clients: int = CLIENTS,
) -> int:
    """``clients`` threads admit one job each (client i: charge i mod len), released together;
    returns how many got in."""
    charges = charge if isinstance(charge, list) else [charge]
    barrier = threading.Barrier(clients)
    admitted: list[bool] = []
    lock = threading.Lock()

    def client(i: int) -> None:
        barrier.wait()
        try:
            with sessions.begin() as session:
                admit_job(session, dataset_id, new_job(dataset_id), charges[i % len(charges)])
            ok = True
        except BudgetExceeded:
            ok = False
        with lock:
            admitted.append(ok)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(admitted) == clients
    return sum(admitted)


def assert_ledger_adds_up(sessions: sessionmaker[Session], dataset_id: str, expected: int) -> None:
    with sessions() as session:
        dataset = session.get(Dataset, dataset_id)
        assert dataset is not None
        totals = recompute_totals(session, dataset_id)
        cached = ledger_totals.read(session, dataset_id).spent
        checked = audit(session, dataset)
        n_charges = len(
            session.scalars(select(Charge).where(Charge.dataset_id == dataset_id)).all()
        )
        n_jobs = len(session.scalars(select(Job).where(Job.dataset_id == dataset_id)).all())
    assert totals.jobs_charged == expected == n_jobs == n_charges
    assert cached.rdp == totals.rdp  # exactly the rows summed again, in ledger order
    assert cached.pure_epsilon == totals.pure_epsilon
    assert checked.consistent
    budget = privacy_filter.Budget(dataset.epsilon, dataset.delta)
    with sessions() as session:
        live = ledger_totals.recompute(session, dataset_id)[ledger_totals.DATASET].spent
    assert privacy_filter.fits(budget, live) is not None  # the filter's invariant holds
    assert privacy_filter.spent_epsilon(budget, live) <= budget.epsilon * (1 + 1e-9)


def test_concurrent_gaussian_admissions_never_overspend(sessions: sessionmaker[Session]) -> None:
    budget = privacy_filter.Budget(epsilon=1.0, delta=1e-5)
    charge = charge_for(dp_event.GaussianDpEvent(noise_multiplier=12.0), 0.3, 1e-6)
    k = sequential_capacity(budget, [charge])
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
        assert ledger_totals.read(session, dataset_id).spent.pure_epsilon == pytest.approx(0.5)
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


def _sampled_charge() -> JobCharge:
    """A subsampled Gaussian job (Rényi only; +∞ at α = 10⁶)."""
    event = dp_event.SelfComposedDpEvent(
        dp_event.SampledWithoutReplacementDpEvent(1000, 50, dp_event.GaussianDpEvent(4.0)), 20
    )
    return charge_for(event, 0.5, 1e-6)


def test_200_concurrent_mixed_clients_never_overspend(sessions: sessionmaker[Session]) -> None:
    """200 clients at once, Gaussian-family and subsampled jobs interleaved: the jobs admitted
    never break the filter's invariant, and nothing more fits afterwards for the job that
    was refused (so the ledger is neither overspent nor short-changed by the race)."""
    budget = privacy_filter.Budget(epsilon=3.0, delta=1e-5)
    gauss = charge_for(dp_event.GaussianDpEvent(noise_multiplier=8.0), 0.5, 1e-6)
    charges = [gauss, _sampled_charge()]
    dataset_id = make_dataset(sessions, budget.epsilon, budget.delta)
    k = hammer(sessions, dataset_id, charges, clients=200)
    assert 1 < k < 200
    assert_ledger_adds_up(sessions, dataset_id, k)
    with sessions() as session:
        live = ledger_totals.recompute(session, dataset_id)[ledger_totals.DATASET].spent
    assert not privacy_filter.admit(budget, live, gauss.cost).admitted


def test_refunding_an_infinite_curve_keeps_the_ledger_consistent(
    sessions: sessionmaker[Session],
) -> None:
    """The issue's refund bug: a sampled job holds +∞ at α = 10⁶; refunding it used to write
    ∞ − ∞ = NaN into the cached total (SQLite: inconsistent ledger; PostgreSQL: 500). Now the
    cache is the live charges summed again, and later admissions are unaffected."""
    sampled, gauss = _sampled_charge(), charge_for(dp_event.GaussianDpEvent(8.0), 0.5, 1e-6)
    dataset_id = make_dataset(sessions, 3.0, 1e-5)
    with sessions.begin() as session:
        first = admit_job(session, dataset_id, new_job(dataset_id), gauss).id
    with sessions.begin() as session:
        job = admit_job(session, dataset_id, new_job(dataset_id), sampled).id
    with sessions.begin() as session:
        assert cancel_or_refund_unread(session, job, "cancelled", None)
    with sessions() as session:
        dataset = session.get(Dataset, dataset_id)
        assert dataset is not None
        cached = ledger_totals.read(session, dataset_id).spent
        totals = recompute_totals(session, dataset_id)
        live = ledger_totals.recompute(session, dataset_id)[ledger_totals.DATASET].spent
    assert cached.rdp == totals.rdp
    assert cached.rdp == pytest.approx(gauss.cost.rdp, rel=1e-12)
    assert live.all_gaussian and live.mu_squared == pytest.approx(1 / 64)
    with sessions.begin() as session:
        admit_job(session, dataset_id, new_job(dataset_id), gauss)
    assert first


def test_running_totals_equal_the_rows_after_every_charge_and_refund(
    sessions: sessionmaker[Session],
) -> None:
    """Random charges and refunds by three principals, mixing Gaussian (μ), subsampled (Rényi
    only, +∞ at the largest order) and pure charges: after every step every stored total — the
    dataset's and each principal's — is bit-for-bit the standing rows summed again, and the
    audit says so. A total off by one ulp fails the test: ``audit`` compares with ``==``."""
    rng = random.Random(7)
    kinds = [
        charge_for(dp_event.GaussianDpEvent(40.0), 0.05, 1e-7),
        charge_for(dp_event.GaussianDpEvent(13.0), 0.2, 1e-7),
        _sampled_charge(),
    ]
    dataset_id = make_dataset(sessions, 50.0, 1e-5)
    admitted: list[str] = []
    for step in range(60):
        if admitted and rng.random() < 0.3:
            job_id = admitted.pop(rng.randrange(len(admitted)))
            with sessions.begin() as session:
                assert cancel_or_refund_unread(session, job_id, "cancelled", None)
        else:
            job = new_job(dataset_id, principal=rng.choice(["ann", "bob", "cy"]))
            with sessions.begin() as session:
                admitted.append(admit_job(session, dataset_id, job, rng.choice(kinds)).id)
        with sessions() as session:
            dataset = session.get(Dataset, dataset_id)
            assert dataset is not None
            stored = ledger_totals.stored(session, dataset_id)
            again = ledger_totals.recompute(session, dataset_id)
            assert audit(session, dataset).consistent, step
        assert stored[ledger_totals.DATASET] == again[ledger_totals.DATASET], step
        for who in ("ann", "bob", "cy"):
            nothing = ledger_totals.Total.nothing()
            assert stored.get(who, nothing) == again.get(who, nothing), (step, who)
    assert again[ledger_totals.DATASET].charges == len(admitted)


def test_the_audit_sees_a_total_that_differs_from_the_rows(
    sessions: sessionmaker[Session],
) -> None:
    """The audit can fail: a stored total one ulp off its rows (a lost update, a hand edit) is
    reported inconsistent."""
    dataset_id = make_dataset(sessions, 3.0, 1e-5)
    gauss = charge_for(dp_event.GaussianDpEvent(8.0), 0.5, 1e-6)
    with sessions.begin() as session:
        admit_job(session, dataset_id, new_job(dataset_id), gauss)
    with sessions.begin() as session:
        row = session.get(LedgerTotal, (dataset_id, "analyst"))
        assert row is not None
        row.mu_squared = math.nextafter(row.mu_squared, math.inf)
    with sessions() as session:
        dataset = session.get(Dataset, dataset_id)
        assert dataset is not None
        assert not audit(session, dataset).consistent
