"""What a job's run writes, each write conditioned on the run's ``attempt`` (a stale run never
overwrites a newer one): progress at most every :data:`PROGRESS_INTERVAL_S` (where a
cancellation and the wall-clock limit are noticed), the released model with the
``succeeded`` status in one transaction, the final status. Split out of
:mod:`service.workers.runner`, which reads, fits and decides; every write here is retried as a
whole through a database outage (:func:`service.workers.db_retry.with_retry`).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from service.data.encoding import Encoder
from service.data.spec import LabelSpec
from service.db import job_status
from service.db.models import Job, TrainedModel
from service.domain.released_model import pack
from service.ids import new_id
from service.optimizers.kits.base import JobCancelled, ReleasePlan
from service.workers.db_retry import with_retry

PROGRESS_INTERVAL_S = 0.25


class NonFiniteModel(Exception):
    """A fit produced a non-finite coefficient; the model is not stored (no value attached)."""


class JobTimedOut(Exception):
    """A run passed the wall-clock limit (``DPFIT_JOB_TIME_LIMIT``); carries no value."""


def offset(progress: ProgressReporter, done: int) -> Callable[[int], None]:
    return lambda step: progress(done + step)


class ProgressReporter:
    """Writes ``progress_step`` at most every PROGRESS_INTERVAL_S and checks for cancellation
    (not at the last step: :func:`service.db.job_status.succeed` writes it, and refuses a job
    whose cancellation was requested), and at every step the wall-clock ``deadline``
    (``time.monotonic()`` value; None: no limit), raising :class:`JobTimedOut` past it."""

    def __init__(
        self,
        sessions: sessionmaker[Session],
        job_id: str,
        attempt: int,
        plan: ReleasePlan,
        deadline: float | None = None,
    ) -> None:
        self._sessions = sessions
        self._job_id = job_id
        self._attempt = attempt
        self._total = plan.total_steps
        self._last = 0.0
        self._deadline = deadline

    def check_clock(self) -> None:
        if self._deadline is not None and time.monotonic() > self._deadline:
            raise JobTimedOut()

    def __call__(self, step: int) -> None:
        self.check_clock()
        if step >= self._total:
            return  # storing the model writes the last step and honours a cancellation
        now = time.monotonic()
        if now - self._last < PROGRESS_INTERVAL_S:
            return
        self._last = now

        def write() -> bool:
            with self._sessions.begin() as session:
                return job_status.write_progress(
                    session, self._job_id, self._attempt, min(step, self._total)
                )

        cancelled = with_retry(write, what="writing progress")
        if cancelled:
            raise JobCancelled(self._job_id)


def store_model(
    sessions: sessionmaker[Session],
    job_id: str,
    attempt: int,
    spec: dict[str, object],
    plan: ReleasePlan,
    encoder: Encoder,
    label: LabelSpec,
    w: np.ndarray,
) -> str:
    """Store the noised weights (a vector, or one row per class for one-vs-rest).

    Never a non-finite coefficient: planning refuses what would overflow, and should a fit
    still produce NaN or ±inf this raises :class:`NonFiniteModel` — the job fails with the
    generic :data:`FAILED_READING` (no value in it), nothing is released, the charge stands."""
    if not np.all(np.isfinite(w)):
        raise NonFiniteModel()
    coefficients, intercept = pack(w, encoder.fit_intercept)
    privacy = dict(spec["privacy"])  # type: ignore[arg-type]
    privacy.update(
        mechanism=plan.mechanism, noise_scale=plan.noise_scale, sensitivity=plan.sensitivity
    )
    model_id = new_id("mdl")

    def write() -> str:  # one transaction, retried as a whole through an outage
        try:
            with sessions() as session:
                job = session.get(Job, job_id)
                assert job is not None
                stored = job_status.succeed(
                    session, job_id, attempt, progress=plan.total_steps, model_id=model_id
                )
                if not stored:
                    session.rollback()
                    return current_status(sessions, job_id)
                session.add(
                    TrainedModel(
                        id=model_id,
                        job_id=job_id,
                        dataset_id=job.dataset_id,
                        principal=job.principal,
                        model_spec=dict(spec["model"]),  # type: ignore[arg-type]
                        coefficients=coefficients,
                        intercept=intercept,
                        feature_names=list(encoder.feature_names),
                        encoder=encoder.to_dict(),
                        label=label.model_dump(mode="json"),
                        privacy=privacy,
                    )
                )
                session.commit()
        except IntegrityError:
            return current_status(sessions, job_id)
        return "succeeded"

    return with_retry(write, what="storing a model")


def finish(
    sessions: sessionmaker[Session],
    job_id: str,
    attempt: int,
    status: job_status.Ending,
    error: str | None,
) -> str:
    def write() -> None:
        with sessions.begin() as session:
            job_status.end_run(session, job_id, attempt, status, error)

    with_retry(write, what="ending a run")
    return current_status(sessions, job_id)


def mark_failed(sessions: sessionmaker[Session], job_id: str, attempt: int, error: str) -> str:
    return finish(sessions, job_id, attempt, "failed", error)


def current_status(sessions: sessionmaker[Session], job_id: str) -> str:
    def read() -> str:
        with sessions() as session:
            return session.scalar(select(Job.status).where(Job.id == job_id)) or "missing"

    return with_retry(read, what="reading a job's status")
