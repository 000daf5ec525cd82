"""Released models: the noised parameters, their privacy accounting, and prediction."""

from __future__ import annotations

import numpy as np
from fastapi import APIRouter
from pydantic import TypeAdapter

from service.api.access import visible_model
from service.api.deps import AnyRole, Sessions
from service.api.errors import invalid
from service.data.encoding import Encoder
from service.data.spec import LabelSpec
from service.models.registry import ModelSpec, build_loss
from service.schemas import ModelOut, PredictRequest, PredictResponse

router = APIRouter(prefix="/v1/models", tags=["models"])


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


@router.post("/{model_id}/predict", response_model=PredictResponse, summary="Predict")
def predict(
    model_id: str, body: PredictRequest, principal: AnyRole, sessions: Sessions
) -> PredictResponse:
    """Apply the released model to the caller's own rows (raw schema, same public encoding).

    Uses only the released model and the caller's input, so it costs no privacy.
    """
    with sessions() as session:
        m = visible_model(session, principal, model_id)
        coefficients, intercept = m.coefficients, m.intercept
        encoder_json, label_json, model_json = m.encoder, m.label, m.model_spec
    encoder = Encoder.from_dict(encoder_json)
    try:
        X = encoder.encode_records(body.rows)
    except (ValueError, TypeError) as exc:
        raise invalid("rows", str(exc)) from None
    weights = np.atleast_2d(np.asarray(coefficients, dtype=float))
    if intercept is not None:
        weights = np.column_stack([weights, np.atleast_1d(np.asarray(intercept, dtype=float))])
    loss = build_loss(TypeAdapter(ModelSpec).validate_python(model_json))
    label = LabelSpec.model_validate(label_json)
    if label.type == "categorical":
        scores = np.column_stack([loss.predict_proba(w, X) for w in weights])  # type: ignore[attr-defined]
        scores = scores / np.maximum(scores.sum(axis=1, keepdims=True), 1e-300)
        best = scores.argmax(axis=1)
        classes = label.classes or []
        return PredictResponse(
            predictions=[classes[k] for k in best],
            probabilities=[float(scores[i, k]) for i, k in enumerate(best)],
        )
    w = weights[0]
    if loss.task == "regression":
        values = loss.predict(w, X)
        return PredictResponse(predictions=[float(v) for v in values], probabilities=None)
    probabilities = loss.predict_proba(w, X)  # type: ignore[attr-defined]
    predictions = [label.positive if p >= 0.5 else label.negative for p in probabilities]
    return PredictResponse(predictions=predictions, probabilities=[float(p) for p in probabilities])
