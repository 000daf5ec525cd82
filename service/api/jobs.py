"""Jobs: submission (plan → atomic admission → dispatch), status, cancellation."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import JSONResponse
from sqlalchemy import Exists, bindparam, exists, select
from sqlalchemy.orm import Session

from service.api.access import shown_job, visible_dataset, visible_job
from service.api.compute import ComputePool, PriceCache
from service.api.deps import (
    AnyRole,
    AppDispatcher,
    AppSettings,
    Compute,
    ComputeSlot,
    PriceCacheDep,
    Sessions,
)
from service.api.errors import ProblemError, problem_response
from service.api.idempotency import IdempotencyKey
from service.api.paging import PageParams, finish_page
from service.api.strict_json import StrictJSONRoute
from service.db import job_status
from service.db.models import Charge, Job
from service.domain.submission import (
    DatasetFacts,
    PricedJob,
    estimate_job,
    price_job,
    request_hash,
    submit_and_dispatch,
)
from service.ledger.admission import budget_of, cancel_or_refund_unread, find_idempotent
from service.pagination import paginate
from service.schemas import JobCreate, JobEstimateOut, JobOut, JobStatus, PrivacyOut, Problem
from service.settings import Settings

router = APIRouter(prefix="/v1/jobs", tags=["jobs"], route_class=StrictJSONRoute)


def refunded_column() -> Exists:
    """Whether the job's charge was refunded, as a column of a job query (no query per job)."""
    return exists().where(Charge.job_id == Job.id, Charge.kind == "refund")


# A job and whether its charge was refunded, in one statement (the most polled route).
_JOB_AND_REFUNDED = select(Job, refunded_column()).where(Job.id == bindparam("job_id"))


def was_refunded(session: Session, job_id: str) -> bool:
    """Whether the job's charge was refunded (a refund row on the ledger)."""
    refund = select(Charge.id).where(Charge.job_id == job_id, Charge.kind == "refund")
    return session.scalar(refund) is not None


def job_out(session: Session, job: Job, refunded: bool | None = None) -> JobOut:
    """The job as the API shows it; ``refunded`` is looked up unless the caller has it."""
    if refunded is None:
        refunded = was_refunded(session, job.id)
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


#: The throttled routes' extra answer (service/api/throttle.py).
TOO_MANY: dict[int | str, dict[str, object]] = {
    429: {"description": "Over a per-principal limit (see Retry-After)", "model": Problem}
}


def priced_off_thread(
    facts: DatasetFacts,
    body: JobCreate,
    settings: Settings,
    compute: ComputePool,
    cache: PriceCache,
) -> PricedJob:
    """:func:`price_job` in a compute process, once per identical request on the same public
    facts and cluster shape (service/api/compute.py)."""
    key = (
        "job",
        facts,
        request_hash(body),
        settings.workers,
        settings.worker_memory,
        settings.data_parallel_min_rows,
    )
    return cache.get_or_compute(key, compute, price_job, facts, body, settings)


@router.post(
    "/estimate",
    response_model=JobEstimateOut,
    summary="Price a job without submitting it",
    responses=TOO_MANY,
)
def estimate(
    body: JobCreate,
    principal: AnyRole,
    sessions: Sessions,
    settings: AppSettings,
    compute: Compute,
    cache: PriceCacheDep,
    _slot: ComputeSlot,
) -> JobEstimateOut:
    """Plan and price the body of `POST /v1/jobs` exactly as a submission would, and say
    whether the dataset's budget (and your grant's cap) would admit it now. Charges nothing,
    writes nothing. ε figures are at the dataset's δ_B."""
    with sessions() as session:
        dataset = visible_dataset(session, principal, body.dataset_id, field="dataset_id")
        facts = DatasetFacts.of(dataset)
    priced = priced_off_thread(facts, body, settings, compute, cache)
    with sessions() as session:
        dataset = visible_dataset(session, principal, body.dataset_id, field="dataset_id")
        answer = estimate_job(session, dataset, principal.name, priced, settings)
        budget = budget_of(dataset)
    plan = priced.planned.plan
    return JobEstimateOut(
        dataset_id=body.dataset_id,
        admissible=answer.admissible,
        reason=answer.reason,
        privacy=PrivacyOut(epsilon=body.privacy.epsilon, delta=body.privacy.delta),
        budget=PrivacyOut(epsilon=budget.epsilon, delta=budget.delta),
        epsilon=budget.epsilon,
        delta=budget.delta,
        epsilon_spent=answer.epsilon_spent,
        epsilon_spent_after=answer.epsilon_spent_after,
        epsilon_remaining_after=answer.epsilon_remaining_after,
        accounting=answer.accounting,
        gdp_mu=answer.gdp_mu,
        mechanism=plan.mechanism,
        noise_scale=plan.noise_scale,
        sensitivity=plan.sensitivity,
        steps=plan.total_steps,
        plan=priced.plan_json,
    )


@router.post(
    "",
    status_code=202,
    response_model=JobOut,
    summary="Submit a training job",
    responses=TOO_MANY,
)
def create_job(
    body: JobCreate,
    principal: AnyRole,
    sessions: Sessions,
    dispatcher: AppDispatcher,
    settings: AppSettings,
    compute: Compute,
    cache: PriceCacheDep,
    _slot: ComputeSlot,
    response: Response,
    idempotency_key: IdempotencyKey = None,
) -> JobOut:
    """Plan the job from public information, charge its RDP curve atomically, dispatch it.

    The answer is 202 with status ``queued``: the charge is already on the ledger. Retrying
    with the same ``Idempotency-Key`` returns the same job and charges once.
    """
    with sessions() as session:
        facts = DatasetFacts.of(
            visible_dataset(session, principal, body.dataset_id, field="dataset_id")
        )
        replay = idempotency_key and find_idempotent(session, principal.name, idempotency_key)
        try:  # before planning, pricing or any charge; a replay is answered as before
            if not replay:
                job_status.check_active_limit(
                    session, principal.name, settings.max_active_per_principal
                )
        except job_status.TooManyActiveJobs as exc:
            return _too_many(exc)  # type: ignore[return-value]
    out, is_new = submit_and_dispatch(
        sessions,
        dispatcher,
        body.dataset_id,
        principal.name,
        priced_off_thread(facts, body, settings, compute, cache),
        idempotency_key=idempotency_key,
        body_hash=request_hash(body),
        view=job_out,
        needs_grant=principal.role == "analyst",
        settings=settings,
    )
    if not is_new:
        response.headers["Idempotent-Replayed"] = "true"
    return out


def _too_many(exc: job_status.TooManyActiveJobs) -> JSONResponse:
    """429 problem+json with ``Retry-After``: nothing was planned or charged."""
    answer = problem_response(
        429,
        "Too many active jobs",
        f"{exc}; wait for one to finish (DPFIT_MAX_ACTIVE_PER_PRINCIPAL). Nothing was charged.",
        limit=exc.limit,
    )
    answer.headers["Retry-After"] = str(exc.RETRY_AFTER_S)
    return answer


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
        found = session.execute(_JOB_AND_REFUNDED, {"job_id": job_id}).first()
        job = shown_job(principal, job_id, None if found is None else found[0])
        return job_out(session, job, None if found is None else found[1])


@router.post("/{job_id}/cancel", response_model=JobOut, summary="Cancel a job")
def cancel_job(job_id: str, principal: AnyRole, sessions: Sessions) -> JobOut:
    """Cancel a queued or running job. Refunded only if no worker read the data
    (docs/privacy-model.md#failures-and-refunds)."""
    with sessions.begin() as session:
        job = visible_job(session, principal, job_id)
        if job.status in job_status.FINISHED:
            raise ProblemError(
                409, "Conflict", f"The job has already finished with status {job.status!r}."
            )
        if not cancel_or_refund_unread(session, job_id, "cancelled", None):
            job_status.request_cancel(session, job_id)
    with sessions() as session:
        return job_out(session, visible_job(session, principal, job_id))
