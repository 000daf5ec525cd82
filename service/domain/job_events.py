"""One log line per job lifecycle event, read from the database (the source of truth).

Jobs change state in several processes — admission and cancellation in the API, start and
finish in Dask workers that may run on other machines — so instead of logging from each, the API
process watches the ``jobs`` and ``charges`` tables and logs every transition it sees on the
``dpfit.jobs`` logger, with ``event`` one of ``job.accepted``, ``job.started``,
``job.succeeded``, ``job.failed``, ``job.cancelled``, ``job.refunded``.

Fields: job_id, dataset_id, principal (the analyst's name), optimizer, model, attempt, status,
``at`` (when it happened, from the database; the line's ``ts`` is when it was seen), and
``duration_s`` (started → finished) or ``epsilon`` (of a refund row). Never an error text
(``jobs.error`` is shown to the job's analyst only), a data value, a dataset location or a key.

Guarantees and limits:
- Every run of a job logs ``job.started`` with its own ``attempt`` (a run re-dispatched after
  an outage or a lost worker holds the next one, service/db/job_status.py) and ``run`` (the
  job's runs so far).
- Each transition is logged once per process. A job that passes through several states between
  two polls gets every event whose timestamp is set (accepted, started, finished), in order.
- Jobs already present at startup log only their later transitions.
- Several API processes on one database each log the events (dedupe on ``job_id``+``event``).
- A database error ends the poll quietly (one warning line naming the exception type, at most
  once a minute); the next poll retries.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session, defer, sessionmaker

from service.db import job_status
from service.db.models import Charge, Job

logger = logging.getLogger("dpfit.jobs")

TERMINAL = job_status.FINISHED
ACTIVE = job_status.ACTIVE
# Rows created up to this long before the newest one seen are re-read (commit order ≠ time order).
CREATED_MARGIN = timedelta(seconds=30)


@dataclass
class JobEventLog:
    """Polls the database and logs job transitions; :meth:`poll` is one pass (tests call it)."""

    sessions: sessionmaker[Session]
    seen: dict[str, str] = field(default_factory=dict)  # job id → last status logged
    runs: dict[str, int] = field(default_factory=dict)  # job id → runs when last logged
    watermark: datetime | None = None
    last_charge_id: int = 0
    _warned_at: float = 0.0

    def prime(self) -> None:
        """Remember what exists now without logging it."""
        with self.sessions() as session:
            for job_id, status, runs in session.execute(select(Job.id, Job.status, Job.runs)):
                self.seen[job_id] = status
                self.runs[job_id] = runs
            self.watermark = session.scalar(select(func.max(Job.created_at)))
            self.last_charge_id = session.scalar(select(func.max(Charge.id))) or 0

    def poll(self) -> None:
        try:
            self._poll()
        except Exception as error:  # noqa: BLE001 - logging must never take the service down
            if time.monotonic() - self._warned_at > 60:
                self._warned_at = time.monotonic()
                logger.warning(
                    "job event poll failed: %s",
                    type(error).__name__,
                    extra={"fields": {"event": "job.poll_failed"}},
                )

    def _poll(self) -> None:
        active = [job_id for job_id, status in self.seen.items() if status not in TERMINAL]
        with self.sessions() as session:
            recent = Job.created_at >= self.watermark - CREATED_MARGIN if self.watermark else True
            # The queued and recent jobs are read every second: not their spec and plan (JSON),
            # which only a job whose status changed loads, for its log line.
            query = (
                select(Job)
                .options(defer(Job.spec), defer(Job.plan))
                .where(or_(Job.status.in_(ACTIVE), recent, Job.id.in_(active)))  # type: ignore[arg-type]
            )
            jobs = sorted(session.scalars(query), key=lambda j: (j.created_at, j.id))
            refunds = session.execute(
                select(Charge.id, Charge.job_id, Charge.dataset_id, Charge.epsilon)
                .where(Charge.kind == "refund", Charge.id > self.last_charge_id)
                .order_by(Charge.id)
            ).all()
            newest_charge = session.scalar(select(func.max(Charge.id))) or 0
            for job in jobs:
                self._transitions(job)
                if self.watermark is None or job.created_at > self.watermark:
                    self.watermark = job.created_at
        for _, job_id, dataset_id, epsilon in refunds:
            _log("job.refunded", job_id=job_id, dataset_id=dataset_id, epsilon=epsilon)
        self.last_charge_id = max(self.last_charge_id, newest_charge)
        self._forget_old()

    def _transitions(self, job: Job) -> None:
        before = self.seen.get(job.id)
        runs_before = self.runs.get(job.id, 0)
        if before == job.status and runs_before == job.runs:
            return
        ids = _job_fields(job)
        if before is None:
            _log("job.accepted", **ids, status="queued", at=_iso(job.created_at))
        first_start = before in (None, "queued") and job.started_at is not None and not runs_before
        if first_start:
            _log("job.started", **ids, status="running", run=job.runs, at=_iso(job.started_at))
        elif job.runs > runs_before:  # a later run (its start time is when it was seen)
            _log("job.started", **ids, status="running", run=job.runs, at=None)
        if job.status in TERMINAL:
            duration = (
                round((job.finished_at - job.started_at).total_seconds(), 3)
                if job.finished_at and job.started_at
                else None
            )
            _log(
                f"job.{job.status}",
                **ids,
                status=job.status,
                duration_s=duration,
                at=_iso(job.finished_at),
            )
        self.seen[job.id] = job.status
        self.runs[job.id] = job.runs

    def _forget_old(self) -> None:
        """Bound memory: past 10,000 remembered jobs, forget 5,000 finished ones (a forgotten
        job created within CREATED_MARGIN of the newest would be logged again)."""
        if len(self.seen) > 10_000:
            for job_id in [j for j, s in self.seen.items() if s in TERMINAL][:5_000]:
                del self.seen[job_id]
                self.runs.pop(job_id, None)


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment is not None else None


def _job_fields(job: Job) -> dict[str, object]:
    spec = job.spec if isinstance(job.spec, dict) else {}
    optimizer = spec.get("optimizer")
    model = spec.get("model")
    return {
        "job_id": job.id,
        "dataset_id": job.dataset_id,
        "principal": job.principal,
        "optimizer": optimizer.get("name") if isinstance(optimizer, dict) else None,
        "model": model.get("type") if isinstance(model, dict) else None,
        "attempt": job.attempt,
    }


def _log(event: str, **fields: object) -> None:
    logger.info("%s %s", event, fields.get("job_id"), extra={"fields": {"event": event, **fields}})


class JobEventThread:
    """Runs :meth:`JobEventLog.poll` every ``interval`` seconds in a daemon thread named
    :attr:`THREAD_NAME` (so a test that counts a request's statements can leave its polls out)."""

    THREAD_NAME = "dpfit-job-events"

    def __init__(self, sessions: sessionmaker[Session], interval: float = 1.0) -> None:
        self.log = JobEventLog(sessions)
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=self.THREAD_NAME, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        with contextlib.suppress(Exception):  # no database yet: start from nothing known
            self.log.prime()
        while not self._stop.wait(self.interval):
            self.log.poll()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
