"""Running one job inside a worker process (a Dask task).

The database is the source of truth. A run is tied to the ``attempt`` it was dispatched with:
every write it makes is conditioned on the job row still carrying that attempt, so a stale run
(after a restart re-dispatched the job) can never overwrite a newer one, and the model row's
unique ``job_id`` means only the first finished result is stored and released.

Order of events, which the refund rule depends on (docs/privacy-model.md#failures-and-refunds):
1. reopen the source from the dataset row (``reopen_source``) and pre-check its fingerprint — a
   changed source fails the job *with* a refund: no row of the registered dataset was used; a
   source whose root this server no longer opens fails the same way, saying so
   (``SOURCE_NOT_OPEN``, not "changed": the submission refuses this case before any charge);
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

**Wall-clock limit.** A run may take ``DPFIT_JOB_TIME_LIMIT`` seconds (default 3600) from its
claim; the progress reporter checks the clock at every step and stops a run past it: the job
ends ``failed`` with :data:`TIMED_OUT` and its charge *stands* — the worker has read the data
(docs/privacy-model.md#failures-and-refunds). The limit is public and fixed before any row is
read (the operator's setting, read by the worker before the claim). Whether a run reaches it
depends on what a run's duration depends on: public sizes (n, the dimension, the planned
steps, all fixed before the data is read: the code path is the same for every dataset of those
sizes) and the machine's load — not on the content of any row. So the stop releases nothing
about the data beyond the duration channel docs/privacy-model.md already documents; an
analyst can predict it from the public spec and reruns a smaller spec. The clock is checked
between steps: a single step (or the read) longer than the limit ends at its end.

**Database outages.** Every read and status write of a run is retried with back-off through a
connection failure (:mod:`service.workers.db_retry`; each is a conditional UPDATE, so a retry of
an applied write changes nothing); a run whose writes fail past the retry budget ends, and the
reconciler (service/workers/reconciler.py) dispatches the job again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import TypeAdapter
from sqlalchemy.orm import Session, sessionmaker

from service.data.backends import reopen_source
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
from service.data.sources import SourceError
from service.data.spec import Feature, LabelSpec
from service.data.sql_source import SqlSource
from service.db import job_status
from service.db.models import Dataset, Job
from service.db.session import session_factory
from service.domain.evaluation import evaluate_and_store, is_evaluation
from service.domain.released_model import released_weights
from service.domain.roots import open_to_owner, owner_is_admin, owner_settings
from service.ledger.admission import cancel_or_refund_unread
from service.models.base import Loss, fit_labels
from service.models.registry import ModelSpec, build_loss
from service.optimizers.kits.base import JobCancelled, ReleasePlan
from service.optimizers.kits.full_gradient import GradientOracle
from service.optimizers.kits.inputs import encoder_layout, laid_out
from service.optimizers.kits.one_vs_rest import class_plan_of
from service.optimizers.kits.planning import plan_from_json
from service.optimizers.kits.registry import get_optimizer
from service.privacy.secure_random import SecureRandom
from service.settings import Settings
from service.workers.data_parallel import (
    PartitionRead,
    cluster_memory,
    fit_partitioned,
    own_memory,
)
from service.workers.db_retry import with_retry
from service.workers.engines import job_engine
from service.workers.in_database import InDatabaseGradient, encoded_rows
from service.workers.in_database_sgd import fit_bolt_on_in_database
from service.workers.row_cache import Rows, cached_rows, row_key
from service.workers.run_writes import (
    JobTimedOut,
    ProgressReporter,
    current_status,
    finish,
    mark_failed,
    offset,
    store_model,
)

logger = logging.getLogger("dpfit.worker")

TIMED_OUT = (
    "The job ran longer than the service's wall-clock limit per job (DPFIT_JOB_TIME_LIMIT) and "
    "was stopped; its charge stands. Submit fewer steps or a smaller job."
)
FAILED_READING = "The job failed while reading or fitting the data; its charge stands."
SOURCE_CHANGED = (
    "The dataset's data changed since it was registered (fingerprint mismatch). Restore the "
    "data as registered: changed data is new data, and its location keeps its one budget, so "
    "new data needs a new location (file, folder or table)."
)
SOURCE_NOT_OPEN = (
    "The dataset's source lies outside the data roots this server may read (DPFIT_DATA_ROOTS, "
    "or DPFIT_SQL_CONNECTIONS for a table, no longer holds it): nothing was read and the charge "
    "was refunded. The data is not known to have changed; the operator must re-open its root."
)


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
    # "workers" (rows are read by the worker) or "in_database" (only aggregates leave the
    # owner's PostgreSQL: service/workers/in_database.py)
    execution: str = "workers"
    # The dataset's owner: the source is reopened within the roots open to them.
    owner: str = ""
    owner_is_admin: bool = False

    @staticmethod
    def of(job: Job, dataset: Dataset, owner_is_admin: bool = False) -> JobRecord:
        return JobRecord(
            owner=dataset.owner,
            owner_is_admin=owner_is_admin,
            execution=str(getattr(dataset, "execution", None) or "workers"),
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
        return encoder, build_loss(model_spec, self.classes)


def _read_job(sessions: sessionmaker[Session], job_id: str, attempt: int) -> JobRecord | str:
    """The job's record, or its status (``missing``) when this attempt has nothing to do."""
    with sessions() as session:
        job = session.get(Job, job_id)
        if job is None or job.attempt != attempt or job.status not in job_status.ACTIVE:
            return job.status if job is not None else "missing"
        dataset = session.get(Dataset, job.dataset_id)
        assert dataset is not None
        return JobRecord.of(job, dataset, owner_is_admin(session, dataset.owner))


def _refund_unread(sessions: sessionmaker[Session], job_id: str, error: str) -> bool:
    def write() -> bool:
        with sessions.begin() as session:
            return cancel_or_refund_unread(session, job_id, "failed", error)

    return with_retry(write, what="refunding an unread job")


def _run(sessions: sessionmaker[Session], job_id: str, attempt: int) -> str:
    found = with_retry(lambda: _read_job(sessions, job_id, attempt), what="reading a job")
    if isinstance(found, str):
        return found
    record = found
    registered_fingerprint = record.fingerprint

    settings = _settings()
    if settings is not None and not open_to_owner(
        settings, record.source_format, record.source_path, record.owner, record.owner_is_admin
    ):  # a closed root is not a changed source (submission refuses this before a charge)
        with sessions.begin() as session:
            if cancel_or_refund_unread(session, job_id, "failed", SOURCE_NOT_OPEN):
                return "failed"
        return mark_failed(sessions, job_id, attempt, SOURCE_NOT_OPEN)
    source = None if settings is None else _reopen(record, settings)
    if settings is None or source is None or not _source_unchanged(source, registered_fingerprint):
        if _refund_unread(sessions, job_id, SOURCE_CHANGED):
            return "failed"
        return mark_failed(sessions, job_id, attempt, SOURCE_CHANGED)

    layout = Layout("single", 0) if record.execution == "in_database" else _layout(record, settings)
    if layout.kind == "infeasible":
        # Before the claim: nothing was read, so the charge is refunded.
        message = f"{layout.reason}; nothing was read and the charge was refunded."
        if _refund_unread(sessions, job_id, message):
            return "failed"
        return mark_failed(sessions, job_id, attempt, message)

    held = _claim(sessions, job_id, attempt)
    if held is None:
        return current_status(sessions, job_id)
    attempt = held  # a re-run of a lost dispatch holds the next attempt (job_status.claim)
    deadline = time.monotonic() + settings.job_time_limit_s  # public, fixed before the read

    try:
        return _fit_and_store(sessions, job_id, attempt, source, record, layout, deadline)
    except JobCancelled:
        return finish(sessions, job_id, attempt, "cancelled", None)
    except JobTimedOut:
        logger.warning("job %s attempt %d passed the wall-clock limit", job_id, attempt)
        return mark_failed(sessions, job_id, attempt, TIMED_OUT)
    except Exception as exc:  # noqa: BLE001 - any failure after reading keeps the charge
        logger.error("job %s attempt %d failed: %s", job_id, attempt, type(exc).__name__)
        changed = _fingerprint_differs(source, registered_fingerprint)
        return mark_failed(sessions, job_id, attempt, SOURCE_CHANGED if changed else FAILED_READING)


def _settings() -> Settings | None:
    """The worker's settings, read once per run; None when they are malformed (the source then
    cannot be reopened: the job fails before its claim, refunded)."""
    try:
        return Settings.from_env()
    except ValueError:  # SettingsError
        return None


def _reopen(record: JobRecord, settings: Settings) -> Source | None:
    """The dataset's source, every read of it confined to its owner's roots."""
    mine = owner_settings(settings, record.owner, record.owner_is_admin)
    try:
        return reopen_source(record.source_format, record.source_path, mine)
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


def _claim(sessions: sessionmaker[Session], job_id: str, attempt: int) -> int | None:
    """queued → running (one more run, data_read_at set), iff this attempt is current; returns
    the attempt the run holds (:func:`service.db.job_status.claim`)."""

    def write() -> int | None:
        with sessions.begin() as session:
            return job_status.claim(session, job_id, attempt)

    return with_retry(write, what="claiming a job")


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
    deadline: float | None = None,
) -> str:
    registered_fingerprint = record.fingerprint
    if is_evaluation(record.spec):  # a private evaluation job (service/domain/evaluation.py)
        return evaluate_and_store(sessions, job_id, attempt, source, registered_fingerprint)
    spec, plan_json, classes = record.spec, record.plan, record.classes
    file_fingerprints = record.file_fingerprints
    label = LabelSpec.model_validate(record.label)
    encoder, loss = record.encoder_and_loss()
    if record.execution == "in_database":
        if not isinstance(source, SqlSource):
            raise SourceError("an in-database dataset must be a SQL table")
        w = _fit_in_database(
            sessions, job_id, attempt, source, record, (encoder, loss, label), deadline
        )
        w = released_weights(loss, w)
        plan = plan_from_json(plan_json)
        return store_model(sessions, job_id, attempt, spec, plan, encoder, label, w)
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
            owner=record.owner,
            owner_is_admin=record.owner_is_admin,
        )

        def unchanged() -> None:
            if file_fingerprints:
                return  # every worker checked the files it read (data_parallel.load_partition)
            if source.fingerprint() != registered_fingerprint:
                raise SourceError("source changed while the job was reading it")

        plan = plan_from_json(plan_json)
        progress = ProgressReporter(sessions, job_id, attempt, plan, deadline)
        w = _fit_partitioned(
            f"{job_id}-{attempt}", read, plan, spec, loss, progress, unchanged, classes
        )
        w = released_weights(loss, w)
        return store_model(sessions, job_id, attempt, spec, plan, encoder, label, w)
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
    # The schema's public column layout travels with the rows: it alone (with n and d) shapes
    # the optimizers' computation, never the values (service/optimizers/kits/inputs.py).
    X = laid_out(X, encoder_layout(encoder))
    Y = fit_labels(loss, Y)  # a joint multiclass loss takes class indices (row-local)

    plan = plan_from_json(plan_json)
    optimizer = get_optimizer(spec["optimizer"]["name"])
    progress = ProgressReporter(sessions, job_id, attempt, plan, deadline)
    progress.check_clock()  # the read counts towards the limit
    rng = SecureRandom()  # every bit from os.urandom; never logged or returned
    class_plan = class_plan_of(plan)
    if class_plan is None:
        w = optimizer.fit(plan, loss, X, Y, rng, progress)
    else:
        steps = class_plan.total_steps
        w = np.stack(
            [
                optimizer.fit(class_plan, loss, X, Y[k], rng, offset(progress, k * steps))
                for k in range(Y.shape[0])
            ]
        )
    del X, Y
    w = released_weights(loss, w)
    return store_model(sessions, job_id, attempt, spec, plan, encoder, label, w)


def _fit_in_database(
    sessions: sessionmaker[Session],
    job_id: str,
    attempt: int,
    source: SqlSource,
    record: JobRecord,
    schema: tuple[Encoder, Loss, LabelSpec],
    deadline: float | None,
) -> np.ndarray:
    """The fit of a dataset whose rows never leave its PostgreSQL database: the encoded rows in
    ``pg_temp`` (one snapshot, checked against the fingerprint and n), the optimizer's
    ``fit_oracle`` on one aggregate query per gradient, the noise drawn here
    (:mod:`service.workers.in_database`) — for a categorical label, one joint multinomial fit
    or K one-vs-rest fits of the class plan (as :func:`_fit_partitioned`). Pricing admitted
    only what runs there."""
    encoder, loss, label = schema
    plan = plan_from_json(record.plan)
    optimizer = get_optimizer(record.spec["optimizer"]["name"])
    progress = ProgressReporter(sessions, job_id, attempt, plan, deadline)
    rng = SecureRandom()  # every bit from os.urandom; never logged or returned
    bound = getattr(loss, "label_bound", None)
    bolt_on = record.spec["optimizer"]["name"] == "bolt_on_psgd"
    with encoded_rows(
        source,
        encoder,
        label,
        bound,
        n=record.n_rows,
        fingerprint=record.fingerprint,
        positions=bolt_on,
        row_map=_maps_rows(class_plan_of(plan) or plan),
    ) as conn:
        n, d = record.n_rows, encoder.dimension

        def fit(run_plan: ReleasePlan, k: int | None, report: Callable[[int], None]) -> Any:
            if bolt_on:  # SGD as an aggregate in the database (in_database_sgd.py)
                return fit_bolt_on_in_database(
                    conn, run_plan, loss, n, d, rng, report, label_class=k
                )
            oracle = InDatabaseGradient(conn, loss, n, d, label_class=k)
            return optimizer.fit_oracle(run_plan, loss, oracle, rng, report)

        class_plan = class_plan_of(plan)
        if class_plan is None:  # binary, or the joint multinomial model (one K·d release)
            return np.asarray(fit(plan, None, progress))
        steps = class_plan.total_steps  # one-vs-rest: class k against the rest, in order
        classes = range(record.classes or 0)
        return np.stack([fit(class_plan, k, offset(progress, k * steps)) for k in classes])


def _maps_rows(plan: ReleasePlan) -> bool:
    """Whether the plan runs ``dp_agd_averaged``'s row map (a share of μ² on the mean row)."""
    return float(plan.hyperparameters.get("row_map_share", 0.0) or 0.0) > 0.0


def _fit_partitioned(
    job_prefix: str,
    read: PartitionRead,
    plan: ReleasePlan,
    spec: dict[str, Any],
    loss: Loss,
    progress: ProgressReporter,
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
                    class_plan, loss, oracle_for(k), rng, offset(progress, k * steps)
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
