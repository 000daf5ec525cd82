"""``GET /metrics``: the service in the Prometheus text format (``prometheus-client``).

State: one :class:`Metrics` per app, made by the app factory (a ``CollectorRegistry`` of its own,
no module-global registry), reached through ``app.state.metrics``.

Series (all from public facts: ids, statuses, public job parameters, the ledger — nothing computed
from data; a job's duration is a release the API already makes through its timestamps):

- ``dpfit_http_request_duration_seconds{method,route,status}``: latency by route TEMPLATE
  (``/v1/jobs/{job_id}``), never the raw path, so the label set stays bounded; ``(unrouted)``
  for paths no route matched. Recorded by ``RequestContext`` (service/api/middleware.py).
- ``dpfit_job_submissions_total{outcome}``: ``POST /v1/jobs`` answers: ``admitted`` (202),
  ``replayed`` (an ``Idempotency-Key`` retry), ``refused`` (409: the budget does not allow it),
  ``invalid`` (422), ``not_found`` (404), ``unauthorized`` (401/403), ``error`` (5xx). Counted
  since the service started (a counter; Prometheus handles resets), summed over the API
  processes when there are several (:func:`create_metrics`).
- At scrape time, from the database (the source of truth, whatever process changed it; cheaper
  than tracking events across Dask workers): ``dpfit_jobs{status,optimizer}``,
  ``dpfit_job_queue_depth`` (queued jobs), ``dpfit_jobs_running``,
  ``dpfit_job_duration_seconds{optimizer}`` (histogram of finished jobs, started → finished),
  ``dpfit_ledger_rows{kind}`` (charges = admissions; refunds).
- ``dpfit_dataset_epsilon_spent{dataset_id}`` and ``dpfit_dataset_epsilon_budget{dataset_id}``:
  ONLY when ``DPFIT_METRICS=admin`` (the default, where a scrape needs an admin key). ε spent is
  an owner-level figure (an ungranted analyst may not even learn that a dataset exists, and the
  spending pace tells how active its analysts are); a ``public`` endpoint drops these series.

Cost: one scrape runs five small aggregate queries plus one pass over finished jobs' two
timestamps (and, for admins, one read of the live datasets' running ledger totals).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from service.api.auth import authenticate
from service.api.errors import ProblemError
from service.db import job_status
from service.db.models import Charge, Dataset, Job
from service.ledger import filter as privacy_filter
from service.ledger import totals
from service.ledger.admission import budget_of
from service.settings import MULTIPROCESS_DIR_ENV

JOB_STATUSES = job_status.STATUSES
DURATION_BUCKETS = (0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0, float("inf"))
# The classic text format every Prometheus version reads (generate_latest writes it).
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
HTTP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, float("inf"))

SessionsOf = Callable[[], sessionmaker[Session] | None]


@dataclass(frozen=True)
class Metrics:
    """The app's registry and the series recorded while serving (the rest is scraped)."""

    registry: CollectorRegistry
    http_latency: Histogram
    job_submissions: Counter

    def observe_request(
        self, method: str, route: str, status: int, seconds: float, replayed: bool = False
    ) -> None:
        self.http_latency.labels(method, route, str(status)).observe(seconds)
        if method == "POST" and route == "/v1/jobs":
            self.job_submissions.labels(submission_outcome(status, replayed)).inc()


def submission_outcome(status: int, replayed: bool = False) -> str:
    """The ``outcome`` label of a ``POST /v1/jobs`` answer (see the module docstring)."""
    if replayed:
        return "replayed"
    if status == 202:
        return "admitted"
    return {409: "refused", 422: "invalid", 404: "not_found", 401: "unauthorized"}.get(
        status, "unauthorized" if status == 403 else "error"
    )


def create_metrics(sessions_of: SessionsOf, per_dataset: bool) -> Metrics:
    """A fresh registry with the request series and the database collector. ``sessions_of``
    returns the app's sessions (None before startup: the scraped series are then empty).

    Under the supervisor (``DPFIT_API_WORKERS`` > 1) every API process records its request
    series in the supervisor's ``PROMETHEUS_MULTIPROC_DIR`` (prometheus-client's multiprocess
    mode, chosen when the process imports it) and a scrape, whichever process answers it, sums
    every process's files — otherwise each scrape would show one process's share."""
    shared = os.environ.get(MULTIPROCESS_DIR_ENV)
    registry = CollectorRegistry(auto_describe=True)
    # The request series live in the process's own registry; with a shared directory the
    # exposition reads every process's values from it instead.
    own = CollectorRegistry(auto_describe=True) if shared else registry
    if shared:
        MultiProcessCollector(registry, path=shared)
    http_latency = Histogram(
        "dpfit_http_request_duration_seconds",
        "HTTP request latency by method, route template and status.",
        ("method", "route", "status"),
        buckets=HTTP_BUCKETS,
        registry=own,
    )
    submissions = Counter(
        "dpfit_job_submissions",
        "Answers to POST /v1/jobs by outcome (admitted, refused by the budget, …).",
        ("outcome",),
        registry=own,
    )
    registry.register(DatabaseCollector(sessions_of, per_dataset))
    return Metrics(registry=registry, http_latency=http_latency, job_submissions=submissions)


class DatabaseCollector(Collector):
    """Series computed at scrape time from the database (see the module docstring)."""

    def __init__(self, sessions_of: SessionsOf, per_dataset: bool) -> None:
        self._sessions_of = sessions_of
        self._per_dataset = per_dataset

    def describe(self) -> list[Metric]:
        return []  # computed at scrape time; nothing to check for name clashes up front

    def collect(self) -> Iterator[Metric]:
        sessions = self._sessions_of()
        if sessions is None:
            return
        with sessions() as session:
            yield from _job_series(session)
            yield _ledger_series(session)
            if self._per_dataset:
                yield from _dataset_series(session)


def _optimizer_column():  # type: ignore[no-untyped-def]
    return Job.spec["optimizer"]["name"].as_string()


def _job_series(session: Session) -> Iterator[Metric]:
    jobs = GaugeMetricFamily(
        "dpfit_jobs", "Jobs by status and optimizer.", labels=["status", "optimizer"]
    )
    # One labelled expression, grouped by its label: two instances of the JSON path carry
    # separate bound parameters, which PostgreSQL does not see as the same GROUP BY expression.
    optimizer_name = _optimizer_column().label("optimizer")
    counts = session.execute(
        select(Job.status, optimizer_name, func.count()).group_by(Job.status, optimizer_name)
    ).all()
    by_status = dict.fromkeys(JOB_STATUSES, 0)
    for status, optimizer, count in counts:
        jobs.add_metric([status, optimizer or "unknown"], count)
        by_status[status] = by_status.get(status, 0) + count
    yield jobs
    yield GaugeMetricFamily(
        "dpfit_job_queue_depth", "Jobs accepted and waiting for a worker.", by_status["queued"]
    )
    yield GaugeMetricFamily("dpfit_jobs_running", "Jobs a worker is running.", by_status["running"])

    durations: dict[str, list[float]] = {}
    finished = session.execute(
        select(_optimizer_column(), Job.started_at, Job.finished_at).where(
            Job.started_at.is_not(None), Job.finished_at.is_not(None)
        )
    )
    for optimizer, started, ended in finished:
        durations.setdefault(optimizer or "unknown", []).append(
            max(0.0, (ended - started).total_seconds())
        )
    histogram = HistogramMetricFamily(
        "dpfit_job_duration_seconds",
        "Run time of finished jobs (started → finished), by optimizer.",
        labels=["optimizer"],
    )
    for optimizer, values in sorted(durations.items()):
        buckets = [(_bucket_label(b), sum(1 for v in values if v <= b)) for b in DURATION_BUCKETS]
        histogram.add_metric([optimizer], buckets, sum_value=sum(values))
    yield histogram


def _bucket_label(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(bound)


def _ledger_series(session: Session) -> Metric:
    rows = GaugeMetricFamily(
        "dpfit_ledger_rows", "Ledger rows by kind (charge = an admitted job).", labels=["kind"]
    )
    counts = dict(session.execute(select(Charge.kind, func.count()).group_by(Charge.kind)).all())
    for kind in ("charge", "refund"):
        rows.add_metric([kind], counts.get(kind, 0))
    return rows


def _dataset_series(session: Session) -> Iterator[Metric]:
    spent = GaugeMetricFamily(
        "dpfit_dataset_epsilon_spent",
        "ε spent at δ_B of each live dataset (as GET /v1/datasets/{id}/budget).",
        labels=["dataset_id"],
    )
    total = GaugeMetricFamily(
        "dpfit_dataset_epsilon_budget", "ε_B of each live dataset.", labels=["dataset_id"]
    )
    datasets = session.scalars(select(Dataset).where(Dataset.retired_at.is_(None))).all()
    standing = totals.read_datasets(session, [d.id for d in datasets])
    for dataset in datasets:
        budget = budget_of(dataset)
        spent.add_metric(
            [dataset.id], privacy_filter.spent_epsilon(budget, standing[dataset.id].spent)
        )
        total.add_metric([dataset.id], budget.epsilon)
    yield spent
    yield total


router = APIRouter(include_in_schema=False)
_bearer = HTTPBearer(auto_error=False)


@router.get("/metrics")
def metrics(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Response:
    """The Prometheus exposition. With ``DPFIT_METRICS=admin`` (default) it needs an admin key
    (Prometheus: ``authorization: {credentials_file: …}``); ``public`` needs none."""
    if request.app.state.settings.metrics_access != "public":
        principal = authenticate(request, credentials)
        if not principal.is_admin:
            raise ProblemError(403, "Forbidden", "/metrics needs an admin key (DPFIT_METRICS).")
    state: Metrics = request.app.state.metrics
    return Response(generate_latest(state.registry), media_type=CONTENT_TYPE)
