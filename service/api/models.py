"""Released models: the noised parameters, their privacy accounting, and prediction."""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

from fastapi import APIRouter, Response
from pydantic import TypeAdapter
from sqlalchemy import select
from sqlalchemy.orm import Session

from service.api.access import visible_dataset, visible_job, visible_model
from service.api.deps import AnyRole, AppDispatcher, AppSettings, Compute, ComputeSlot, Sessions
from service.api.errors import invalid, not_found
from service.api.idempotency import IdempotencyKey
from service.api.jobs import TOO_MANY, was_refunded
from service.api.strict_json import StrictJSONRoute
from service.data.encoding import Encoder
from service.data.spec import LabelSpec
from service.db.models import Evaluation, Job
from service.domain import released_model
from service.domain.evaluation import PricedEvaluation, is_evaluation, price_evaluation
from service.domain.prediction_warnings import prediction_warnings
from service.domain.released_model import weight_matrix
from service.domain.submission import estimate_job, submit_and_dispatch
from service.ledger.admission import budget_of
from service.models.registry import ModelSpec, build_loss
from service.schemas import (
    EvaluationCreate,
    EvaluationOut,
    JobEstimateOut,
    ModelOut,
    PredictionWarningOut,
    PredictRequest,
    PredictResponse,
    PrivacyOut,
)

router = APIRouter(prefix="/v1/models", tags=["models"], route_class=StrictJSONRoute)
logger = logging.getLogger("dpfit.api")


@router.get("/{model_id}", response_model=ModelOut, summary="Get a released model")
def get_model(model_id: str, principal: AnyRole, sessions: Sessions) -> ModelOut:
    """The noised coefficients and the privacy accounting; nothing else computed from data."""
    with sessions() as session:
        m = visible_model(session, principal, model_id)
        return ModelOut.model_validate(
            {
                "id": m.id,
                "job_id": m.job_id,
                "dataset_id": m.dataset_id,
                "model": m.model_spec,
                "coefficients": m.coefficients,
                "intercept": m.intercept,
                "classes": m.label.get("classes"),
                "feature_names": m.feature_names,
                "encoding": m.encoder,
                "privacy": m.privacy,
                "created_at": m.created_at,
            }
        )


@router.post(
    "/{model_id}/predict", response_model=PredictResponse, summary="Predict", responses=TOO_MANY
)
def predict(
    model_id: str,
    body: PredictRequest,
    principal: AnyRole,
    sessions: Sessions,
    compute: Compute,
    _slot: ComputeSlot,
) -> PredictResponse:
    """Apply the released model to the caller's own rows (raw schema, same public encoding).

    Uses only the released model and the caller's input, so it costs no privacy.
    """
    with sessions() as session:
        m = visible_model(session, principal, model_id)
        coefficients, intercept = m.coefficients, m.intercept
        encoder_json, label_json, model_json = m.encoder, m.label, m.model_spec
    # Encoding and predicting 10⁵ rows is seconds of CPU: a compute process does it.
    predictions, probabilities, listed, total = compute.run(
        predicted, encoder_json, label_json, model_json, coefficients, intercept, body.rows
    )
    return PredictResponse(
        predictions=predictions,
        probabilities=probabilities,
        warnings=[PredictionWarningOut.model_validate(w) for w in listed],
        warnings_total=total,
    )


def predicted(
    encoder_json: dict[str, Any],
    label_json: dict[str, Any],
    model_json: dict[str, Any],
    coefficients: Any,
    intercept: Any,
    rows: list[dict[str, Any]],
) -> tuple[Any, Any, list[dict[str, Any]], int]:
    """The released model applied to the caller's rows: (predictions, probabilities, the
    prediction warnings listed as dicts, how many there were in all). Runs in a
    compute process (service/api/compute.py); a row the encoder refuses is a 422 on ``rows``."""
    encoder = Encoder.from_dict(encoder_json)
    try:
        X = encoder.encode_records(rows)
    except (ValueError, TypeError) as exc:
        raise invalid("rows", str(exc)) from None
    label = LabelSpec.model_validate(label_json)
    classes = len(label.classes or []) or None
    loss = build_loss(TypeAdapter(ModelSpec).validate_python(model_json), classes)
    result = released_model.predict(weight_matrix(coefficients, intercept), loss, label, X)
    found = prediction_warnings(encoder, rows)
    listed = [vars(w) for w in found.listed]
    return result.predictions, result.probabilities, listed, found.total


# --- private evaluation (service/domain/evaluation.py) ---------------------------------------


def _priced_evaluation(
    sessions: Sessions, principal: AnyRole, model_id: str, body: EvaluationCreate
) -> PricedEvaluation:
    with sessions() as session:
        model = visible_model(session, principal, model_id)
        dataset = visible_dataset(session, principal, body.dataset_id, field="dataset_id")
        return price_evaluation(dataset, model, body)


def _evaluation_out(session: Session, job: Job) -> EvaluationOut:
    result = session.scalar(select(Evaluation).where(Evaluation.job_id == job.id))
    return EvaluationOut(
        id=job.id,
        model_id=str(job.spec["model_id"]),
        dataset_id=job.dataset_id,
        status=job.status,  # type: ignore[arg-type]
        privacy=job.spec["privacy"],
        plan=job.plan,
        metrics=result.metrics if result is not None and job.status == "succeeded" else None,
        error=job.error,
        refunded=was_refunded(session, job.id),
        created_at=job.created_at,
        finished_at=job.finished_at,
    )


@router.post(
    "/{model_id}/evaluate/estimate",
    response_model=JobEstimateOut,
    summary="Price a private evaluation without submitting it",
    responses=TOO_MANY,
)
def estimate_evaluation(
    model_id: str,
    body: EvaluationCreate,
    principal: AnyRole,
    sessions: Sessions,
    settings: AppSettings,
    _slot: ComputeSlot,
) -> JobEstimateOut:
    """Plan and price the body of `POST /v1/models/{id}/evaluate` exactly as a submission
    would; charges nothing, writes nothing."""
    priced = _priced_evaluation(sessions, principal, model_id, body)
    with sessions() as session:
        dataset = visible_dataset(session, principal, body.dataset_id, field="dataset_id")
        answer = estimate_job(session, dataset, principal.name, priced, settings)
        budget = budget_of(dataset)
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
        mechanism="gaussian",
        noise_scale=priced.plan.noise_scale,
        sensitivity=priced.plan.sensitivity,
        steps=1,
        plan=priced.plan_json,
    )


@router.post(
    "/{model_id}/evaluate",
    status_code=202,
    response_model=EvaluationOut,
    summary="Evaluate a model privately on a dataset",
    responses=TOO_MANY,
)
def evaluate(
    model_id: str,
    body: EvaluationCreate,
    principal: AnyRole,
    sessions: Sessions,
    dispatcher: AppDispatcher,
    settings: AppSettings,
    _slot: ComputeSlot,
    response: Response,
    idempotency_key: IdempotencyKey = None,
) -> EvaluationOut:
    """Noised accuracy, log-loss (squared error for regression) and, for binary labels, a noised
    confusion matrix of the model on a dataset you are granted (same schema as the model's).

    An evaluation is a job: charged on that dataset's ledger when accepted (202, status
    ``queued``), run by a worker; poll `GET /v1/models/{id}/evaluations/{evaluation_id}`."""
    priced = _priced_evaluation(sessions, principal, model_id, body)
    canonical = json.dumps({"model_id": model_id, **body.model_dump(mode="json")}, sort_keys=True)
    out, is_new = submit_and_dispatch(
        sessions,
        dispatcher,
        body.dataset_id,
        principal.name,
        priced,
        idempotency_key=idempotency_key,
        body_hash=hashlib.sha256(canonical.encode()).hexdigest(),
        view=_evaluation_out,
        same_kind=lambda job: is_evaluation(job.spec),
        needs_grant=principal.role == "analyst",
        settings=settings,
    )
    if not is_new:
        response.headers["Idempotent-Replayed"] = "true"
    return out


@router.get(
    "/{model_id}/evaluations/{evaluation_id}",
    response_model=EvaluationOut,
    summary="Get a private evaluation",
)
def get_evaluation(
    model_id: str, evaluation_id: str, principal: AnyRole, sessions: Sessions
) -> EvaluationOut:
    """The evaluation job's state and, once succeeded, its noised metrics."""
    with sessions() as session:
        visible_model(session, principal, model_id)
        job = visible_job(session, principal, evaluation_id)
        if not is_evaluation(job.spec) or job.spec.get("model_id") != model_id:
            raise not_found(f"Evaluation {evaluation_id!r}")
        return _evaluation_out(session, job)
