"""Running one job inside a worker process (a Dask task).

The database is the source of truth. A run is tied to the ``attempt`` it was dispatched with:
every write it makes is conditioned on the job row still carrying that attempt, so a stale run
(after a restart re-dispatched the job) can never overwrite a newer one, and the model row's
unique ``job_id`` means only the first finished result is stored and released.

Order of events, which the refund rule depends on (docs/privacy-model.md#failures-and-refunds):
1. reopen the source from the dataset row (``reopen_source``) and pre-check its fingerprint — a
   changed source fails the job *with* a refund: no row of the registered dataset was used;
2. claim: ``queued|running → running`` and ``data_read_at`` set, in one committed UPDATE,
   before any row is read; from here on the charge stays;
3. read and encode with the row-local reader (:func:`service.data.reader.read_encoded`: every
   cell converts or becomes MISSING, declared bounds enforced), re-check the fingerprint,
   optimise, add noise — or take the encoded rows this worker kept from its last job on the
   same registered bytes (:mod:`service.workers.row_cache`), which is the same read;
4. store the model and mark the job succeeded in one transaction.

Before the claim the runner also chooses the job's layout from public facts and the live
workers' memory limits (:func:`service.data.partitions.choose_layout`): one process, or —
for the full-gradient optimizers, when the rows would not fit comfortably in one worker or
``DPFIT_DATA_PARALLEL_MIN_ROWS`` says so — data-parallel over every worker
(:mod:`service.workers.data_parallel`: each worker reads and keeps its own row window, this task
drives the steps). A job no layout can hold fails before the claim, refunded.

Total after the claim: no cell's content can make the job fail — the reader converts every cell
and raises only for content-independent reasons. What can still fail a job after the claim is
independent of any one row's content and keeps the charge: an I/O error or a vanished source
(``FAILED_READING``), a source whose fingerprint changed (``SOURCE_CHANGED``, used only when the
fingerprint really differs from the registered one), a killed worker, a cancellation. As a
defence in depth, a fit whose result has a non-finite coefficient fails too (``FAILED_READING``,
nothing released, the charge stands): planning refuses every spec whose arithmetic could
overflow, so this should never happen — but a NaN model must never be released.

Nothing computed from the rows is written anywhere but the noised model: errors are fixed
messages and logs carry exception *types* only.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import TypeAdapter
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from service import job_status
from service.data.encoding import Encoder
from service.data.partitions import (
    Layout,
    choose_layout,
    encoded_bytes,
    single_here,
    spread_fits,
)
from service.data.reader import read_encoded
from service.data.source import Source
from service.data.sources import SourceError, reopen_source
from service.data.spec import Feature, LabelSpec
from service.db.models import Dataset, Job, TrainedModel
from service.db.session import session_factory
from service.evaluation import evaluate_and_store, is_evaluation
from service.ids import new_id
from service.ledger.admission import cancel_or_refund_unread
from service.models.base import Loss
from service.models.registry import ModelSpec, build_loss
from service.optimizers.base import JobCancelled, ReleasePlan
from service.optimizers.full_gradient import GradientOracle
from service.optimizers.one_vs_rest import class_plan_of
from service.optimizers.planning import plan_from_json
from service.optimizers.registry import get_optimizer
from service.privacy.secure_random import SecureRandom
from service.released_model import pack
from service.settings import Settings
from service.workers.data_parallel import (
    PartitionRead,
    cluster_memory,
    fit_partitioned,
    own_memory,
)
from service.workers.engines import job_engine
from service.workers.row_cache import Rows, cached_rows, row_key

logger = logging.getLogger("dpfit.worker")

PROGRESS_INTERVAL_S = 0.25
FAILED_READING = "The job failed while reading or fitting the data; its charge stands."
SOURCE_CHANGED = (
    "The dataset's data changed since it was registered (fingerprint mismatch). Restore the "
    "data as registered: changed data is new data, and its location keeps its one budget, so "
    "new data needs a new location (file, folder or table)."
)


class NonFiniteModel(Exception):
    """A fit produced a non-finite coefficient; the model is not stored (no value attached)."""


def run_job(job_id: str, attempt: int, database_url: str) -> str:
    """Run one dispatched attempt of a job; returns the job's status afterwards."""
    with job_engine(database_url) as engine:
        return _run(session_factory(engine), job_id, attempt)


@dataclass(frozen=True)
class JobRecord:
    """What a run needs of the job and its dataset rows, read once at its start (both are
    fixed once the job is admitted: the spec, the plan and the dataset's registered facts)."""

    spec: dict[str, Any]
    plan: dict[str, Any]
    source_format: str
    source_path: str
    fingerprint: str
    file_fingerprints: dict[str, str] | None
    label: dict[str, Any]
    features: list[Any]
    n_rows: int

    @staticmethod
    def of(job: Job, dataset: Dataset) -> JobRecord:
        return JobRecord(
            spec=dict(job.spec),
            plan=dict(job.plan),
            source_format=dataset.source_format,
            source_path=dataset.source_path,
            fingerprint=dataset.fingerprint,
            file_fingerprints=dataset.file_fingerprints,
            label=dict(dataset.label),
            features=list(dataset.features),
            n_rows=int(dataset.n_rows),
        )

    @property
    def classes(self) -> int | None:
        return len(self.label.get("classes") or []) or None

    def encoder_and_loss(self) -> tuple[Encoder, Loss]:
        model_spec = TypeAdapter(ModelSpec).validate_python(self.spec["model"])
        encoder = Encoder(
            features=TypeAdapter(list[Feature]).validate_python(self.features),
            fit_intercept=bool(getattr(model_spec, "fit_intercept", False)),
        )
        return encoder, build_loss(model_spec)


def _run(sessions: sessionmaker[Session], job_id: str, attempt: int) -> str:
    with sessions() as session:
        job = session.get(Job, job_id)
        if job is None or job.attempt != attempt or job.status not in job_status.ACTIVE:
            return job.status if job is not None else "missing"
        dataset = session.get(Dataset, job.dataset_id)
        assert dataset is not None
        record = JobRecord.of(job, dataset)
    registered_fingerprint = record.fingerprint

    settings = _settings()
    source = None if settings is None else _reopen(record, settings)
    if settings is None or source is None or not _source_unchanged(source, registered_fingerprint):
        with sessions.begin() as session:
            if cancel_or_refund_unread(session, job_id, "failed", SOURCE_CHANGED):
                return "failed"
        return _mark_failed(sessions, job_id, attempt, SOURCE_CHANGED)

    layout = _layout(record, settings)
    if layout.kind == "infeasible":
        # Before the claim: nothing was read, so the charge is refunded.
        message = f"{layout.reason}; nothing was read and the charge was refunded."
        with sessions.begin() as session:
            if cancel_or_refund_unread(session, job_id, "failed", message):
                return "failed"
        return _mark_failed(sessions, job_id, attempt, message)

    if not _claim(sessions, job_id, attempt):
        with sessions() as session:
            job = session.get(Job, job_id)
            return job.status if job is not None else "missing"

    try:
        return _fit_and_store(sessions, job_id, attempt, source, record, layout)
    except JobCancelled:
        return _finish(sessions, job_id, attempt, "cancelled", None)
    except Exception as exc:  # noqa: BLE001 - any failure after reading keeps the charge
        logger.error("job %s attempt %d failed: %s", job_id, attempt, type(exc).__name__)
        changed = _fingerprint_differs(source, registered_fingerprint)
        return _mark_failed(
            sessions, job_id, attempt, SOURCE_CHANGED if changed else FAILED_READING
        )


def _settings() -> Settings | None:
    """The worker's settings, read once per run; None when they are malformed (the source then
    cannot be reopened: the job fails before its claim, refunded)."""
    try:
        return Settings.from_env()
    except ValueError:  # SettingsError
        return None


def _reopen(record: JobRecord, settings: Settings) -> Source | None:
    try:
        return reopen_source(record.source_format, record.source_path, settings)
    except (OSError, ValueError):  # SourceError: nothing was read
        return None


def _source_unchanged(source: Source, registered: str) -> bool:
    try:
        return source.fingerprint() == registered
    except (OSError, SourceError):
        return False


def _fingerprint_differs(source: Source, registered: str) -> bool:
    """True only when the source's fingerprint could be computed and differs."""
    try:
        return source.fingerprint() != registered
    except Exception:  # noqa: BLE001 - unreadable now: not proven changed
        return False


def _claim(sessions: sessionmaker[Session], job_id: str, attempt: int) -> bool:
    """queued|running → running (one more run, data_read_at set), iff this attempt is current."""
    with sessions.begin() as session:
        return job_status.claim(session, job_id, attempt)


def _layout(record: JobRecord, settings: Settings) -> Layout:
    """Single-process or partitioned (or infeasible) for this job on the cluster as it is now,
    from public facts only (:func:`service.data.partitions.choose_layout`). Outside a Dask
    worker (tests running a job inline) always single-process. A job this worker settles alone
    (:func:`service.data.partitions.single_here`: most jobs) does not ask the scheduler for the
    cluster's memory."""
    here = own_memory()
    if here is None or is_evaluation(record.spec):
        return Layout("single", 0)  # an evaluation reads its rows in one worker
    encoder, _ = record.encoder_and_loss()
    optimizer = get_optimizer(record.spec["optimizer"]["name"])
    columns = len(record.features) + 1
    facts = (record.n_rows, encoder.dimension, record.classes)
    if single_here(*facts, here, min_rows=settings.data_parallel_min_rows, columns=columns):
        return Layout("single", encoded_bytes(*facts))
    memory = cluster_memory()
    if memory is None:
        return Layout("single", 0)
    return choose_layout(
        *facts,
        memory,
        data_parallel=hasattr(optimizer, "fit_oracle"),
        min_rows=settings.data_parallel_min_rows,
        columns=columns,
    )


def _fit_and_store(
    sessions: sessionmaker[Session],
    job_id: str,
    attempt: int,
    source: Source,
    record: JobRecord,
    layout: Layout | None = None,
) -> str:
    registered_fingerprint = record.fingerprint
    if is_evaluation(record.spec):  # a private evaluation job (service/evaluation.py)
        return evaluate_and_store(sessions, job_id, attempt, source, registered_fingerprint)
    spec, plan_json, classes = record.spec, record.plan, record.classes
    file_fingerprints = record.file_fingerprints
    label = LabelSpec.model_validate(record.label)
    encoder, loss = record.encoder_and_loss()
    if layout is not None and layout.kind == "partitioned":
        read = PartitionRead(
            source_format=record.source_format,
            location=record.source_path,
            encoder=encoder.to_dict(),
            label=label.model_dump(mode="json"),
            label_bound=getattr(loss, "label_bound", None),
            n=record.n_rows,
            dimension=encoder.dimension,
            file_fingerprints=file_fingerprints,
            columns=len(record.features) + 1,
        )

        def unchanged() -> None:
            if file_fingerprints:
                return  # every worker checked the files it read (data_parallel.load_partition)
            if source.fingerprint() != registered_fingerprint:
                raise SourceError("source changed while the job was reading it")

        plan = plan_from_json(plan_json)
        progress = _ProgressReporter(sessions, job_id, attempt, plan)
        w = _fit_partitioned(
            f"{job_id}-{attempt}", read, plan, spec, loss, progress, unchanged, classes
        )
        return _store_model(sessions, job_id, attempt, spec, plan, encoder, label, w)
    label_bound = getattr(loss, "label_bound", None)

    def read() -> Rows:
        rows = read_encoded(source, encoder, label, label_bound)
        if source.fingerprint() != registered_fingerprint:
            raise SourceError("source changed while the job was reading it")
        return rows

    key = row_key(
        registered_fingerprint,
        record.source_path,
        encoder.to_dict(),
        label.model_dump(mode="json"),
        label_bound,
    )
    X, Y = cached_rows(key, read)  # the rows of the registered bytes (service/workers/row_cache)

    plan = plan_from_json(plan_json)
    optimizer = get_optimizer(spec["optimizer"]["name"])
    progress = _ProgressReporter(sessions, job_id, attempt, plan)
    rng = SecureRandom()  # every bit from os.urandom; never logged or returned
    class_plan = class_plan_of(plan)
    if class_plan is None:
        w = optimizer.fit(plan, loss, X, Y, rng, progress)
    else:
        steps = class_plan.total_steps
        w = np.stack(
            [
                optimizer.fit(class_plan, loss, X, Y[k], rng, _offset(progress, k * steps))
                for k in range(Y.shape[0])
            ]
        )
    del X, Y
    return _store_model(sessions, job_id, attempt, spec, plan, encoder, label, w)


def _fit_partitioned(
    job_prefix: str,
    read: PartitionRead,
    plan: ReleasePlan,
    spec: dict[str, Any],
    loss: Loss,
    progress: _ProgressReporter,
    after_load: Callable[[], None],
    classes: int | None,
) -> np.ndarray:
    """The data-parallel fit (:mod:`service.workers.data_parallel`): the same optimizer, plan
    and noise as the single-process path, with gradients summed over the workers' partitions."""
    optimizer = get_optimizer(spec["optimizer"]["name"])
    rng = SecureRandom()  # every bit from os.urandom; never logged or returned
    class_plan = class_plan_of(plan)

    def fit(oracle_for: Callable[[int | None], GradientOracle]) -> np.ndarray:
        if class_plan is None:
            return optimizer.fit_oracle(plan, loss, oracle_for(None), rng, progress)
        steps = class_plan.total_steps
        return np.stack(
            [
                optimizer.fit_oracle(
                    class_plan, loss, oracle_for(k), rng, _offset(progress, k * steps)
                )
                for k in range(classes or 0)
            ]
        )

    def placeable(parts: int, limits: list[int | None]) -> bool:
        return spread_fits(read.n, read.dimension, classes, limits, read.columns)

    return fit_partitioned(
        job_prefix,
        read,
        loss,
        fit,
        after_load=after_load,
        max_rounds=Settings.from_env().max_attempts,
        min_free_bytes=placeable,
    )


def _offset(progress: _ProgressReporter, done: int) -> Callable[[int], None]:
    return lambda step: progress(done + step)


class _ProgressReporter:
    """Writes ``progress_step`` at most every PROGRESS_INTERVAL_S and checks for cancellation
    (not at the last step: :func:`service.job_status.succeed` writes it, and refuses a job
    whose cancellation was requested)."""

    def __init__(
        self, sessions: sessionmaker[Session], job_id: str, attempt: int, plan: ReleasePlan
    ) -> None:
        self._sessions = sessions
        self._job_id = job_id
        self._attempt = attempt
        self._total = plan.total_steps
        self._last = 0.0

    def __call__(self, step: int) -> None:
        if step >= self._total:
            return  # storing the model writes the last step and honours a cancellation
        now = time.monotonic()
        if now - self._last < PROGRESS_INTERVAL_S:
            return
        self._last = now
        with self._sessions.begin() as session:
            cancelled = job_status.write_progress(
                session, self._job_id, self._attempt, min(step, self._total)
            )
        if cancelled:
            raise JobCancelled(self._job_id)


def _store_model(
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
    try:
        with sessions() as session:
            job = session.get(Job, job_id)
            assert job is not None
            stored = job_status.succeed(
                session, job_id, attempt, progress=plan.total_steps, model_id=model_id
            )
            if not stored:
                session.rollback()
                return _current_status(sessions, job_id)
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
        return _current_status(sessions, job_id)
    return "succeeded"


def _finish(
    sessions: sessionmaker[Session],
    job_id: str,
    attempt: int,
    status: job_status.Ending,
    error: str | None,
) -> str:
    with sessions.begin() as session:
        job_status.end_run(session, job_id, attempt, status, error)
    return _current_status(sessions, job_id)


def _mark_failed(sessions: sessionmaker[Session], job_id: str, attempt: int, error: str) -> str:
    return _finish(sessions, job_id, attempt, "failed", error)


def _current_status(sessions: sessionmaker[Session], job_id: str) -> str:
    with sessions() as session:
        status = session.scalar(select(Job.status).where(Job.id == job_id))
    return status or "missing"
