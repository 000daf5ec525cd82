"""A job's status and every transition of it: the only module that writes ``jobs.status``.

::

    queued ──claim──▶ running ──succeed──▶ succeeded
      │  ▲               │ └──end_run────▶ failed | cancelled
      │  └──redispatch───┘                 (a new attempt waits for a worker again)
      └──end_unread─────────────────────▶ failed | cancelled   (then refunded: nothing read)

``attempt`` counts dispatches and runs: :func:`redispatch` (a restart's recovery, the
reconciler) gives the job the next attempt, and so does a :func:`claim` that finds its own
attempt already ``running`` — Dask ran the same task again after its worker died — so every
run of a job holds its own attempt number, and a run that lost its worker can no longer write.

Every transition is ONE conditional UPDATE whose ``WHERE`` states the states it leaves, so two
racing writers (a worker's claim and a cancel, two dispatches of one job after a restart) can
never both succeed: exactly one matches the row. A worker's writes also carry the ``attempt``
it was dispatched with, so a stale run can never overwrite a newer one. Each function returns
whether it moved the row; callers decide what follows (a refund, a stored model).

Who calls what: admission's refund path (``end_unread``), the runner (``claim``, ``succeed``,
``end_run``, ``write_progress``), the dispatcher's failure callback and recovery (``end_unread``,
``end_run``), the cancel route (``end_unread``, ``request_cancel``).
"""

from __future__ import annotations

from typing import Final, Literal, get_args

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from service.db.models import Job, utcnow

JobStatus = Literal["queued", "running", "succeeded", "failed", "cancelled"]
STATUSES: Final[tuple[JobStatus, ...]] = get_args(JobStatus)
ACTIVE: Final[tuple[JobStatus, ...]] = ("queued", "running")
FINISHED: Final[tuple[JobStatus, ...]] = ("succeeded", "failed", "cancelled")
Ending = Literal["failed", "cancelled"]


class TooManyActiveJobs(Exception):
    """The principal already has ``limit`` queued or running jobs (``DPFIT_MAX_ACTIVE_PER_
    PRINCIPAL``): the submission is refused before it is planned, priced or charged."""

    RETRY_AFTER_S = 10

    def __init__(self, limit: int) -> None:
        super().__init__(f"you already have {limit} queued or running jobs, the limit")
        self.limit = limit


def check_active_limit(session: Session, principal: str, limit: int) -> None:
    """Raise :class:`TooManyActiveJobs` when ``principal`` has ``limit`` or more active jobs.

    Read without a lock: concurrent submissions of one principal may each see the count below
    the limit and pass together (the overshoot is at most the number of concurrent requests,
    which the API's own request limits bound). Only the principal's own jobs are counted, so
    the answer tells them nothing about anyone else's."""
    active = session.scalar(
        select(func.count())
        .select_from(Job)
        .where(Job.principal == principal, Job.status.in_(ACTIVE))
    )
    if int(active or 0) >= limit:
        raise TooManyActiveJobs(limit)


def claim(session: Session, job_id: str, attempt: int) -> int | None:
    """``queued → running`` for the current ``attempt``, unless a cancel was requested: counts
    one more run and stamps ``data_read_at``/``started_at`` (kept from an earlier run).

    Returns the attempt the run now holds (its later writes carry it), or None when the job is
    not this attempt's to run. A dispatch found already ``running`` under its own attempt was
    claimed before and lost its worker (Dask runs a task again when its worker dies): the new
    run takes ``attempt + 1``, so the attempt counter advances with every run and the lost run,
    should it still be alive, can no longer write."""
    job = session.get(Job, job_id)
    if job is None or job.cancel_requested or job.attempt != attempt:
        return None
    now = utcnow()
    rerun = job.status == "running"
    held = attempt + 1 if rerun else attempt
    result = session.execute(
        update(Job)
        .where(
            Job.id == job_id,
            Job.attempt == attempt,
            Job.status == ("running" if rerun else "queued"),
            Job.cancel_requested.is_(False),
        )
        .values(
            status="running",
            attempt=held,
            runs=Job.runs + 1,
            data_read_at=job.data_read_at or now,
            started_at=job.started_at or now,
            progress_step=0,
        )
    )
    return held if result.rowcount == 1 else None


def redispatch(session: Session, job_id: str, attempt: int) -> int | None:
    """``queued|running → queued`` with the next attempt, for a job that no live worker task
    holds (recovery at a start, the reconciler). Returns the new attempt, or None when the job
    moved meanwhile. A job whose data was read stays charged: ``end_unread`` never matches it."""
    result = session.execute(
        update(Job)
        .where(Job.id == job_id, Job.attempt == attempt, Job.status.in_(ACTIVE))
        .values(status="queued", attempt=attempt + 1)
    )
    return attempt + 1 if result.rowcount == 1 else None


def end_unread(session: Session, job_id: str, status: Ending, error: str | None) -> bool:
    """``queued → failed|cancelled`` iff no worker has read the data (``data_read_at`` NULL).
    Races safely with :func:`claim`; the caller refunds the charge when this returns True."""
    result = session.execute(
        update(Job)
        .where(Job.id == job_id, Job.status == "queued", Job.data_read_at.is_(None))
        .values(status=status, error=error, finished_at=utcnow())
    )
    return bool(result.rowcount == 1)


def end_run(session: Session, job_id: str, attempt: int, status: Ending, error: str | None) -> bool:
    """``running → failed|cancelled`` for the current ``attempt`` — or ``queued`` after a
    :func:`redispatch`, when a worker had read the data (the charge stands either way)."""
    result = session.execute(
        update(Job)
        .where(
            Job.id == job_id,
            Job.attempt == attempt,
            Job.status.in_(ACTIVE),
            Job.data_read_at.is_not(None),
        )
        .values(status=status, error=error, finished_at=utcnow())
    )
    return bool(result.rowcount == 1)


def succeed(
    session: Session, job_id: str, attempt: int, *, progress: int, model_id: str | None = None
) -> bool:
    """``running → succeeded`` for the current ``attempt``, unless a cancel was requested. The
    caller stores the result in the same transaction (and rolls back when this returns False)."""
    result = session.execute(
        update(Job)
        .where(
            Job.id == job_id,
            Job.attempt == attempt,
            Job.status == "running",
            Job.cancel_requested.is_(False),
        )
        .values(status="succeeded", model_id=model_id, progress_step=progress, finished_at=utcnow())
    )
    return bool(result.rowcount == 1)


def request_cancel(session: Session, job_id: str) -> bool:
    """``queued|running → cancelled`` with ``cancel_requested`` set: a running worker sees the
    flag at its next progress write and stops (its ``end_run`` then finds the row already
    cancelled and changes nothing) — so the job's end is now: ``finished_at`` is set here."""
    result = session.execute(
        update(Job)
        .where(Job.id == job_id, Job.status.in_(ACTIVE))
        .values(status="cancelled", cancel_requested=True, finished_at=utcnow())
    )
    return bool(result.rowcount == 1)


def write_progress(session: Session, job_id: str, attempt: int, step: int) -> bool:
    """Record a running attempt's progress; returns whether a cancel was requested."""
    session.execute(
        update(Job)
        .where(Job.id == job_id, Job.attempt == attempt, Job.status == "running")
        .values(progress_step=step)
    )
    return bool(session.scalar(select(Job.cancel_requested).where(Job.id == job_id)))
