"""Jobs: submission (plan → atomic admission → dispatch), status, cancellation."""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Annotated

from fastapi import APIRouter, Header, Query, Request, Response
from sqlalchemy import Exists, exists, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from service.api.access import visible_dataset, visible_job
from service.api.deps import AnyRole, AppDispatcher, Sessions
from service.api.errors import ProblemError, invalid, not_found
from service.api.pagination import PageParams, finish_page, paginate
from service.db.models import Charge, Job
from service.ids import new_id
from service.ledger.accounting import charge_curve
from service.ledger.admission import (
    BudgetExceeded,
    IdempotencyConflict,
    JobCharge,
    admit_job,
    cancel_or_refund_unread,
)
from service.models.registry import build_loss
from service.optimizers.base import InfeasibleSpec, PrivacyTarget
from service.optimizers.planning import plan_job, plan_to_json
from service.registration import DatasetRetired, ensure_not_retired
from service.schemas import JobCreate, JobOut, JobStatus

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])
logger = logging.getLogger("dpfit.api")


def refunded_column() -> Exists:
    """Whether the job's charge was refunded, as a column of a job query (no query per job)."""
    return exists().where(Charge.job_id == Job.id, Charge.kind == "refund")


def job_out(session: Session, job: Job, refunded: bool | None = None) -> JobOut:
    """The job as the API shows it; ``refunded`` is looked up unless the caller has it."""
    if refunded is None:
        refunded = (
            session.scalar(
                select(Charge.id).where(Charge.job_id == job.id, Charge.kind == "refund")
            )
            is not None
        )
    return JobOut.model_validate(
        {
            "id": job.id,
            "dataset_id": job.dataset_id,
            "status": job.status,
            "progress": {"step": job.progress_step, "total": job.progress_total},
            "model": job.spec["model"],
            "optimizer": job.spec["optimizer"],
            "privacy": job.spec["privacy"],
            "plan": job.plan,
            "model_id": job.model_id,
            "error": job.error,
            "refunded": refunded,
            "created_at": job.created_at,
            "started_at": job.started_at,
            "finished_at": job.finished_at,
        }
    )


def _request_hash(body: JobCreate) -> str:
    canonical = json.dumps(body.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


@router.post(
    "",
    status_code=202,
    response_model=JobOut,
    summary="Submit a training job",
)
def create_job(
    body: JobCreate,
    principal: AnyRole,
    sessions: Sessions,
    dispatcher: AppDispatcher,
    response: Response,
    idempotency_key: Annotated[
        str | None, Header(alias="Idempotency-Key", max_length=200, pattern=r"^[\x21-\x7e]+$")
    ] = None,
) -> JobOut:
    """Plan the job from public information, charge its RDP curve atomically, dispatch it.

    The answer is 202 with status ``queued``: the charge is already on the ledger. Retrying
    with the same ``Idempotency-Key`` returns the same job and charges once.
    """
    with sessions() as session:
        dataset = visible_dataset(session, principal, body.dataset_id, field="dataset_id")
        if dataset.retired_at is not None:
            raise DatasetRetired(dataset.id)
        n_rows, n_features, dataset_delta = dataset.n_rows, dataset.n_features, dataset.delta
        label_type = dataset.label.get("type", "binary")
        classes = len(dataset.label["classes"]) if label_type == "categorical" else None
    task = build_loss(body.model).task
    if (task == "regression") != (label_type == "numeric"):
        wanted = "a regression model" if label_type == "numeric" else "a classification model"
        raise invalid(
            "model",
            f"this dataset's label is {label_type}, so it needs {wanted}; "
            f"{body.model.type!r} is a {task} model",
        )
    if dataset_delta == 0 and body.privacy.delta > 0:
        raise invalid(
            "privacy.delta",
            "this dataset's budget has δ = 0 (pure ε-DP); submit the job with privacy.delta = 0",
        )
    target = PrivacyTarget(epsilon=body.privacy.epsilon, delta=body.privacy.delta)
    try:
        planned = plan_job(
            body.model,
            body.optimizer.name,
            body.optimizer.params,
            n_rows,
            n_features,
            target,
            classes=classes,
        )
        curve = charge_curve(planned.plan.event, planned.plan.parallel_events)
    except InfeasibleSpec as exc:
        raise invalid(exc.field, exc.message) from None
    except (ValueError, ArithmeticError) as exc:
        # Planning sees only the public spec, so its message quotes no data.
        raise invalid(
            "optimizer.params", f"this job cannot be planned or accounted: {exc}"
        ) from None

    spec = body.model_dump(mode="json")
    spec["optimizer"]["params"] = planned.params.model_dump(mode="json")
    job = Job(
        id=new_id("job"),
        dataset_id=body.dataset_id,
        principal=principal.name,
        spec=spec,
        plan=plan_to_json(planned.plan),
        status="queued",
        progress_step=0,
        progress_total=planned.plan.total_steps,
        attempt=1,
        cancel_requested=False,
        idempotency_key=idempotency_key,
        request_hash=_request_hash(body),
    )
    charge = JobCharge(
        epsilon=target.epsilon,
        delta=target.delta,
        rdp=curve,
        pure_epsilon=target.epsilon if target.delta == 0 else None,
        event=job.plan["event"],
    )
    new_job_id = job.id
    try:
        with sessions.begin() as session:
            admitted = admit_job(session, body.dataset_id, job, charge)
            if admitted.id == new_job_id:  # under admission's lock: races safely with retire
                ensure_not_retired(session, body.dataset_id)
            out = job_out(session, admitted)
    except BudgetExceeded as exc:
        raise ProblemError(
            409,
            "Budget exceeded",
            exc.reason,
            "privacy.epsilon",
            extra={"epsilon_remaining": exc.remaining},
        ) from None
    except IdempotencyConflict:
        raise invalid(
            "Idempotency-Key", "this Idempotency-Key was already used with a different request"
        ) from None
    except IntegrityError:
        # The only unique key a new job can break is (principal, Idempotency-Key): the same
        # key was admitted concurrently on another dataset (same-dataset retries serialise on
        # the dataset lock and replay), i.e. with a different request. Nothing was charged.
        if idempotency_key is None:
            raise ProblemError(409, "Conflict", "A concurrent change conflicted; retry.") from None
        raise invalid(
            "Idempotency-Key", "this Idempotency-Key was already used with a different request"
        ) from None
    except LookupError:
        raise not_found(f"Dataset {body.dataset_id!r}", "dataset_id") from None
    if out.id == new_job_id:
        try:
            dispatcher.submit(out.id, 1)
        except Exception as exc:  # noqa: BLE001 - the job stays queued; recovery dispatches it
            logger.error("dispatch of %s failed: %s", out.id, type(exc).__name__)
    else:
        response.headers["Idempotent-Replayed"] = "true"
    return out


@router.get("", response_model=list[JobOut], summary="List your jobs")
def list_jobs(
    principal: AnyRole,
    sessions: Sessions,
    page: PageParams,
    request: Request,
    response: Response,
    status: Annotated[JobStatus | None, Query(description="Only jobs in this status.")] = None,
) -> list[JobOut]:
    """Your jobs (admins: all), oldest first, one page per call (see `X-Next-Cursor`)."""
    query = select(Job, refunded_column())
    if not principal.is_admin:
        query = query.where(Job.principal == principal.name)
    if status is not None:
        query = query.where(Job.status == status)
    with sessions() as session:
        rows = session.execute(paginate(query, page, Job.created_at, Job.id)).all()
        rows = finish_page(rows, page, request, response, key=lambda r: (r[0].created_at, r[0].id))
        return [job_out(session, job, refunded) for job, refunded in rows]


@router.get("/{job_id}", response_model=JobOut, summary="Get a job")
def get_job(job_id: str, principal: AnyRole, sessions: Sessions) -> JobOut:
    with sessions() as session:
        return job_out(session, visible_job(session, principal, job_id))


@router.post("/{job_id}/cancel", response_model=JobOut, summary="Cancel a job")
def cancel_job(job_id: str, principal: AnyRole, sessions: Sessions) -> JobOut:
    """Cancel a queued or running job. Refunded only if no worker read the data (DESIGN §1)."""
    with sessions.begin() as session:
        job = visible_job(session, principal, job_id)
        if job.status in ("succeeded", "failed", "cancelled"):
            raise ProblemError(
                409, "Conflict", f"The job has already finished with status {job.status!r}."
            )
        if not cancel_or_refund_unread(session, job_id, "cancelled", None):
            session.execute(
                update(Job)
                .where(Job.id == job_id, Job.status.in_(("queued", "running")))
                .values(status="cancelled", cancel_requested=True)
            )
    with sessions() as session:
        return job_out(session, visible_job(session, principal, job_id))
