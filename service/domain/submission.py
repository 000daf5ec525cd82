"""One path from a job request to its plan, its price and its admission.

``POST /v1/jobs``, ``POST /v1/jobs/estimate`` and the private evaluation routes call these
functions; routes only translate HTTP. Everything here raises domain errors, mapped to
problem+json in one place (service/api/errors.py):
:class:`~service.optimizers.kits.base.InfeasibleSpec` (field at fault), ``BudgetExceeded``,
``IdempotencyConflict``, ``DatasetRetired``, ``SourceNotOpen``, ``DatasetNotFound``,
``ConcurrentChange``.

Given the app's settings, both also refuse a dataset whose source lies outside the data roots
open to its owner (:func:`service.domain.roots.ensure_source_open`, ``SourceNotOpen``): every
job on it would fail at the worker's roots check, so the estimate says so and the submission
charges nothing.

Guarantee: :func:`estimate_job` and :func:`submit_job` price a request with the same
:func:`price_job` (the plan is deterministic in the public spec) and decide with the same
:func:`service.ledger.admission.check_admissible`; the estimate writes nothing. So an estimate
says exactly what the admission would do on the ledger as it stood when it was read.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from service.data.encoding import Encoder
from service.data.partitions import choose_layout, worker_memory_limit
from service.data.sql_encoding import InDatabaseUnsupported
from service.db.models import Dataset, Grant, Job
from service.domain.dispatching import Dispatcher
from service.domain.execution import check_in_database, in_database_params
from service.domain.registration import ensure_not_retired
from service.domain.roots import ensure_source_open
from service.errors import ConcurrentChange, DatasetNotFound, DatasetRetired
from service.ids import new_id
from service.ledger import filter as privacy_filter
from service.ledger import totals
from service.ledger.accounting import charge_curve
from service.ledger.admission import (
    BudgetExceeded,
    IdempotencyConflict,
    JobCharge,
    admit_job,
    budget_of,
    check_admissible,
)
from service.models.registry import build_loss, parse_model_spec
from service.optimizers import auto
from service.optimizers.kits.base import InfeasibleSpec, PrivacyTarget
from service.optimizers.kits.limits import first_non_finite
from service.optimizers.kits.planning import JobPlan, plan_job, plan_to_json
from service.optimizers.kits.registry import get_optimizer
from service.privacy.gdp import parallel_mu
from service.schemas import JobCreate, OptimizerChoice
from service.settings import Settings

__all__ = [
    "DatasetFacts",
    "Estimate",
    "Priced",
    "PricedJob",
    "check_finite",
    "check_fits_cluster",
    "estimate_job",
    "price_job",
    "request_hash",
    "submit_and_dispatch",
    "submit_job",
]

logger = logging.getLogger("dpfit.submission")
View = TypeVar("View")


@dataclass(frozen=True)
class DatasetFacts:
    """The public facts about a dataset that planning needs."""

    id: str
    n_rows: int
    n_features: int
    delta: float
    label_type: str
    classes: int | None
    retired: bool
    # Source columns a job reads: the declared features and the label (reader memory).
    columns: int | None = None
    # "workers" or "in_database" (the owner's choice at registration: rows never leave the
    # database; only full-gradient logistic jobs run there).
    execution: str = "workers"
    # The encoded feature columns that hold categorical features' one-hot blocks (schema).
    one_hot_columns: tuple[int, ...] = ()

    @staticmethod
    def of(dataset: Dataset) -> DatasetFacts:
        label_type = str(dataset.label.get("type", "binary"))
        classes = len(dataset.label["classes"]) if label_type == "categorical" else None
        return DatasetFacts(
            id=dataset.id,
            n_rows=dataset.n_rows,
            n_features=dataset.n_features,
            delta=dataset.delta,
            label_type=label_type,
            classes=classes,
            retired=dataset.retired_at is not None,
            columns=len(dataset.features) + 1,
            execution=str(getattr(dataset, "execution", None) or "workers"),
            one_hot_columns=Encoder(dataset.features).one_hot_columns,
        )


class Priced(Protocol):
    """What admission needs of a priced job of any kind (a fit, or a private evaluation in
    service/domain/evaluation.py): the stored spec and plan, and the charge."""

    @property
    def charge(self) -> JobCharge: ...

    @property
    def spec(self) -> dict[str, Any]: ...

    @property
    def plan_json(self) -> dict[str, Any]: ...

    @property
    def field_at_fault(self) -> str:
        """The request field a non-finite number in the plan most likely comes from."""
        ...


@dataclass(frozen=True)
class PricedJob:
    """A planned job and what it costs the ledger."""

    planned: JobPlan
    charge: JobCharge
    spec: dict[str, Any]
    plan_json: dict[str, Any]

    @property
    def field_at_fault(self) -> str:
        return "optimizer.params"


def check_finite(priced: Priced) -> None:
    """No plan, spec or charged event holding a non-finite number is ever answered, stored or
    charged: JSON has no such number (PostgreSQL refuses ``Infinity`` in a plan, SQLite would
    store it) and a plan whose numbers overflowed cannot run. Pricing refuses them on the field
    at fault first (:func:`~service.optimizers.kits.planning.check_plan_finite`,
    :func:`service.domain.evaluation.price_evaluation`); this is the one guard behind them all,
    run by :func:`price_job`, the estimate and the submission alike, on
    ``priced.field_at_fault``."""
    for payload in (priced.plan_json, priced.spec, priced.charge.event):  # the JSON stored
        path = first_non_finite(payload)
        if path is not None:
            raise InfeasibleSpec(
                priced.field_at_fault,
                "the plan derived from these values overflows (a number in it is not finite), "
                "so the job could not run; choose smaller values. Nothing was charged",
            )


def price_job(facts: DatasetFacts, body: JobCreate, settings: Settings | None = None) -> PricedJob:
    """Plan and price ``body`` on the dataset from public information only (``settings``: the
    app's, for the cluster's declared memory; read from the environment when not given).

    Raises :class:`InfeasibleSpec` naming the field at fault (planning sees only the public
    spec, so no message quotes data) and :class:`DatasetRetired`.
    """
    if facts.retired:
        raise DatasetRetired(facts.id)
    task = build_loss(body.model).task
    if (task == "regression") != (facts.label_type == "numeric"):
        wanted = "a regression model" if facts.label_type == "numeric" else "a classification model"
        raise InfeasibleSpec(
            "model",
            f"this dataset's label is {facts.label_type}, so it needs {wanted}; "
            f"{body.model.type!r} is a {task} model",
        )
    if facts.delta == 0 and body.privacy.delta > 0:
        raise InfeasibleSpec(
            "privacy.delta",
            "this dataset's budget has δ = 0 (pure ε-DP); submit the job with privacy.delta = 0",
        )
    target = PrivacyTarget(epsilon=body.privacy.epsilon, delta=body.privacy.delta)
    body, auto_record = _resolve_auto(facts, body, target)
    if facts.execution == "in_database":
        _check_in_database(facts, body)
        params = in_database_params(
            body.optimizer.name, body.optimizer.params, width=facts.n_features + 1
        )
        body = body.model_copy(
            update={"optimizer": body.optimizer.model_copy(update={"params": params})}
        )
    try:
        planned = plan_job(
            body.model,
            body.optimizer.name,
            body.optimizer.params,
            facts.n_rows,
            facts.n_features,
            target,
            classes=facts.classes,
            one_hot_columns=facts.one_hot_columns,
        )
        curve = charge_curve(planned.plan.event, planned.plan.parallel_events)
    except InfeasibleSpec:
        raise
    except (ValueError, ArithmeticError) as exc:
        raise InfeasibleSpec(
            "optimizer.params", f"this job cannot be planned or accounted: {exc}"
        ) from None
    if facts.execution != "in_database":  # in the database the worker holds d-vectors only
        check_fits_cluster(facts, planned.dimension, body.optimizer.name, settings)
    plan = planned.plan
    plan_json = plan_to_json(plan)
    if auto_record is not None:
        plan_json["auto"] = auto_record  # public: the rule and what it chose
    charge = JobCharge(
        epsilon=target.epsilon,
        delta=target.delta,
        rdp=curve,
        pure_epsilon=target.epsilon if target.delta == 0 else None,
        event=plan_json["event"],
        mu=None if target.delta == 0 else parallel_mu(plan.event, plan.parallel_events),
    )
    spec = body.model_dump(mode="json")
    spec["optimizer"]["params"] = recorded_params(planned.params, plan.hyperparameters)
    priced = PricedJob(planned=planned, charge=charge, spec=spec, plan_json=plan_json)
    check_finite(priced)
    return priced


def _check_in_database(facts: DatasetFacts, body: JobCreate) -> None:
    """A job on an in-database dataset must run there (model, optimizer, label): refused with
    422 naming the field otherwise, before anything is charged."""
    try:
        check_in_database(
            body.model.type,
            get_optimizer(body.optimizer.name),
            facts.label_type,
            width=facts.n_features + 1,  # at most: the intercept's column
            classes=facts.classes,
        )
    except InDatabaseUnsupported as exc:
        raise InfeasibleSpec(exc.field, str(exc)) from None


def recorded_params(params: BaseModel, hyperparameters: Mapping[str, Any]) -> dict[str, Any]:
    """The optimizer parameters stored in the job's spec: every field, with a derived
    ``objective_gap`` (unset: the model's own bound, :func:`~service.models.base.
    resolved_objective_gap`) replaced by the value the plan used — so re-sending a job's
    recorded spec plans the same job, whatever the field's default."""
    recorded: dict[str, Any] = params.model_dump(mode="json")
    used = hyperparameters.get("objective_gap")
    if "objective_gap" in recorded and isinstance(used, (int, float)):
        recorded["objective_gap"] = float(used)
    return recorded


def _resolve_auto(
    facts: DatasetFacts, body: JobCreate, target: PrivacyTarget
) -> tuple[JobCreate, dict[str, Any] | None]:
    """An ``auto`` job becomes the ordinary job of the optimizer the rule picks
    (service/optimizers/auto.py), with the model it resolved; returns its public record."""
    if body.optimizer.name != "auto":
        return body, None
    if body.optimizer.params:
        raise InfeasibleSpec(
            "optimizer.params", "auto takes no parameters; name an optimizer to set them"
        )
    try:
        choice = auto.resolve(body.model, facts.n_rows, facts.n_features, target, facts.classes)
    except InfeasibleSpec:
        raise
    except (ValueError, ArithmeticError) as exc:
        raise InfeasibleSpec("optimizer", f"auto cannot plan this job: {exc}") from None
    resolved = body.model_copy(
        update={
            "model": parse_model_spec(choice.model),
            "optimizer": OptimizerChoice(name=choice.optimizer, params=choice.params),
        }
    )
    return resolved, choice.record


def check_fits_cluster(
    facts: DatasetFacts, dimension: int, optimizer: str, settings: Settings | None = None
) -> None:
    """Refuse, before any charge, a job whose planned worker memory cannot fit the cluster's
    workers (``DPFIT_WORKERS`` × each worker's limit: ``DPFIT_WORKER_MEMORY``, or the embedded
    cluster's default share of the machine, :func:`~service.data.partitions.
    worker_memory_limit`): spread over all workers for the data-parallel full-gradient
    optimizers, in one worker for the others. The plan (:func:`~service.data.partitions.
    choose_layout`) is priced from public facts only — n, the encoded dimension, the label's
    classes, the declared columns read, the optimizer — never from a cell, so neighbouring
    datasets are refused or admitted alike. An external cluster whose limit was not stated:
    nothing to check here (the runner checks the live workers before reading). Raises
    :class:`InfeasibleSpec` on ``dataset_id``."""
    settings = settings or Settings.from_env()
    limit = worker_memory_limit(settings)
    if not limit:
        return
    layout = choose_layout(
        facts.n_rows,
        dimension,
        facts.classes,
        [limit] * settings.workers,
        data_parallel=hasattr(get_optimizer(optimizer), "fit_oracle"),
        min_rows=settings.data_parallel_min_rows,
        columns=facts.columns,
    )
    if layout.kind == "infeasible":
        raise InfeasibleSpec(
            "dataset_id",
            f"{layout.reason} ({settings.workers} worker(s) of "
            f"{limit // (1 << 20)} MiB); nothing was charged",
        )


def request_hash(body: JobCreate) -> str:
    """The canonical hash of a request body (Idempotency-Key replays must match it)."""
    canonical = json.dumps(body.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass(frozen=True)
class Estimate:
    """What submitting a priced job would do now (ε at δ_B, see ledger/filter.py)."""

    admissible: bool
    reason: str
    epsilon_spent: float
    epsilon_spent_after: float
    epsilon_remaining_after: float
    accounting: str
    gdp_mu: float | None


def accounting_kind(budget: privacy_filter.Budget, charge: JobCharge) -> str:
    """How the ledger accounts the job: ``pure`` (basic composition, δ_B = 0), ``gaussian``
    (exact μ) or ``renyi`` (its curve; pure ε-DP jobs on a δ_B > 0 dataset too)."""
    if budget.pure:
        return "pure"
    return "gaussian" if charge.mu is not None else "renyi"


def estimate_job(
    session: Session,
    dataset: Dataset,
    principal: str,
    priced: Priced,
    settings: Settings | None = None,
) -> Estimate:
    """Price ``priced`` against the dataset's live ledger without writing anything. Raises
    ``SourceNotOpen`` (given ``settings``) and :class:`InfeasibleSpec` (:func:`check_finite`)
    as a submission would."""
    check_finite(priced)
    ensure_source_open(session, dataset.id, settings)
    budget = budget_of(dataset)
    cost = priced.charge.cost
    try:
        spent = check_admissible(session, dataset, principal, cost)
        admissible, reason = True, privacy_filter.fits(budget, spent.plus(cost))
    except BudgetExceeded as exc:
        spent = totals.read(session, dataset.id).spent
        admissible, reason = False, exc.reason
    after = spent.plus(cost)
    return Estimate(
        admissible=admissible,
        reason=reason or "fits",
        epsilon_spent=privacy_filter.spent_epsilon(budget, spent),
        epsilon_spent_after=privacy_filter.spent_epsilon(budget, after),
        epsilon_remaining_after=privacy_filter.remaining_epsilon(budget, after),
        accounting=accounting_kind(budget, priced.charge),
        gdp_mu=priced.charge.mu,
    )


def submit_job(
    session: Session,
    dataset_id: str,
    principal: str,
    priced: Priced,
    *,
    idempotency_key: str | None,
    body_hash: str,
    needs_grant: bool = False,
    settings: Settings | None = None,
) -> tuple[Job, bool]:
    """Admit the priced job atomically (ledger/admission.py) and return it with True — or the
    earlier job of the same Idempotency-Key with False (nothing charged). Must run inside
    ``session.begin()``; the caller commits, then dispatches a new job. Given ``settings``, a
    new job on a dataset whose source is not open to its owner is refused (``SourceNotOpen``)
    and its transaction rolled back: nothing is charged.

    ``needs_grant`` (the caller is an analyst): the grant is checked again under admission's
    dataset lock, which a revocation takes too — a job checked before a revocation committed is
    refused (``DatasetNotFound``, nothing charged) instead of admitted after it. A plan holding a
    non-finite number is refused before anything is written (:func:`check_finite`)."""
    check_finite(priced)
    job = Job(
        id=new_id("job"),
        dataset_id=dataset_id,
        principal=principal,
        spec=priced.spec,
        plan=priced.plan_json,
        status="queued",
        progress_step=0,
        progress_total=int(priced.plan_json["total_steps"]),
        attempt=1,
        cancel_requested=False,
        idempotency_key=idempotency_key,
        request_hash=body_hash,
    )
    admitted = admit_job(session, dataset_id, job, priced.charge)
    if admitted.id != job.id:
        return admitted, False
    # Under admission's lock, before the commit: a refusal rolls the charge back (nothing is
    # charged); a replay of an admitted job is answered as before.
    ensure_source_open(session, dataset_id, settings)
    ensure_not_retired(session, dataset_id)  # under admission's lock: races safely with retire
    if needs_grant and not _granted(session, dataset_id, principal):
        raise DatasetNotFound(dataset_id, "dataset_id")  # revoked meanwhile
    return admitted, True


def _granted(session: Session, dataset_id: str, principal: str) -> bool:
    grant = select(Grant.id).where(Grant.dataset_id == dataset_id, Grant.principal == principal)
    return session.scalar(grant) is not None


def submit_and_dispatch(
    sessions: sessionmaker[Session],
    dispatcher: Dispatcher,
    dataset_id: str,
    principal: str,
    priced: Priced,
    *,
    idempotency_key: str | None,
    body_hash: str,
    view: Callable[[Session, Job], View],
    same_kind: Callable[[Job], bool] = lambda _: True,
    needs_grant: bool = False,
    settings: Settings | None = None,
) -> tuple[View, bool]:
    """Admit the job in one transaction, then dispatch it if it is new.

    Returns ``view(session, job)`` (built inside the transaction) and whether the job is new
    (False: an ``Idempotency-Key`` replay; nothing charged, nothing dispatched). A replay of
    another kind of request (``same_kind`` false, e.g. a training job's key reused for an
    evaluation) is an :class:`IdempotencyConflict`. A unique-key violation at commit can only
    be the same key admitted concurrently on another dataset (same-dataset retries serialise on
    the dataset lock and replay) — an ``IdempotencyConflict``; without a key, a
    :class:`ConcurrentChange`. Nothing is charged in either case. A dispatch failure leaves the
    job queued: recovery dispatches it at the next start.
    """
    try:
        with sessions.begin() as session:
            admitted, is_new = submit_job(
                session,
                dataset_id,
                principal,
                priced,
                idempotency_key=idempotency_key,
                body_hash=body_hash,
                needs_grant=needs_grant,
                settings=settings,
            )
            if not same_kind(admitted):
                raise IdempotencyConflict(idempotency_key or "")
            job_id, out = admitted.id, view(session, admitted)
    except IntegrityError:
        if idempotency_key is None:
            raise ConcurrentChange() from None
        raise IdempotencyConflict(idempotency_key) from None
    if is_new:
        try:
            dispatcher.submit(job_id, 1)
        except Exception as exc:  # noqa: BLE001 - the job stays queued; recovery dispatches it
            logger.error("dispatch of %s failed: %s", job_id, type(exc).__name__)
    return out, is_new
