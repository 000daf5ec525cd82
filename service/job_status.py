"""A job's status and every transition of it: the only module that writes ``jobs.status``.

::

    queued ──claim──▶ running ──succeed──▶ succeeded
      │                  │ └──end_run────▶ failed | cancelled
      └──end_unread─────────────────────▶ failed | cancelled   (then refunded: nothing read)

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


def claim(session: Session, job_id: str, attempt: int) -> bool:
    """``queued|running → running`` for the current ``attempt``, unless a cancel was requested:
    counts one more run and stamps ``data_read_at``/``started_at`` (kept from an earlier run)."""
    job = session.get(Job, job_id)
    if job is None or job.cancel_requested:
        return False
    now = utcnow()
    result = session.execute(
        update(Job)
        .where(
            Job.id == job_id,
            Job.attempt == attempt,
            Job.status.in_(ACTIVE),
            Job.cancel_requested.is_(False),
        )
        .values(
            status="running",
            runs=Job.runs + 1,
            data_read_at=job.data_read_at or now,
            started_at=job.started_at or now,
            progress_step=0,
        )
    )
    return bool(result.rowcount == 1)


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
    """``running → failed|cancelled`` for the current ``attempt`` (the data was read: the charge
    stands)."""
    result = session.execute(
        update(Job)
        .where(Job.id == job_id, Job.attempt == attempt, Job.status == "running")
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
    cancelled and changes nothing)."""
    result = session.execute(
        update(Job)
        .where(Job.id == job_id, Job.status.in_(ACTIVE))
        .values(status="cancelled", cancel_requested=True)
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
