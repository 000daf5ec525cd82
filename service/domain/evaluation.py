"""Private evaluation of a released model: an *evaluation job*.

Design (decided for issue 13): an evaluation reads private rows, so it is a job like any
other — planned from public facts, priced, admitted and charged on the evaluation dataset's
ledger through :func:`service.domain.submission.submit_job` (the one admission path),
dispatched to a Dask worker, run by :mod:`service.workers.runner` (which hands
``spec.kind == "evaluation"`` jobs to :func:`evaluate_and_store`), its result stored once
(``evaluations.job_id`` unique) and answered when done. So refunds, cancellation, restart
recovery, idempotency and the ledger's audit work unchanged. The job's ``optimizer`` shows
``{"name": "evaluation"}``.

The mechanism and its sensitivity are in :mod:`service.privacy.evaluation`. What is released:
the noised metrics only (never the exact ones, never a count of anything else), post-processed
into their feasible set (counts in [0, n] summing to n, accuracy in [0, 1], mean losses in
[0, B]). The plan (public, stated before any charge, also by the estimate) carries the standard
deviation of every released metric in ``hyperparameters`` (``accuracy_std``,
``confusion_matrix_std``, ``log_loss_std``, ``mean_squared_error_std``) and ``warnings``: public
sentences saying when a mean loss's noise spans its useful range (suggesting ``loss_clip``).

Which datasets: one the analyst is granted (owner, admin, or grant) whose declared features and
label equal the model's (the training dataset or a holdout the owner registered with the same
schema); anything else is refused before any charge.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import TypeAdapter
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from service.data.encoding import Encoder
from service.data.reader import read_encoded
from service.data.source import Source
from service.data.sources import SourceError
from service.data.spec import LabelSpec
from service.db import job_status
from service.db.models import Dataset, Evaluation, Job, TrainedModel
from service.domain.released_model import row_blocks, weight_matrix
from service.domain.submission import check_finite
from service.errors import DatasetRetired
from service.ids import new_id
from service.ledger.accounting import charge_curve, event_to_json
from service.ledger.admission import JobCharge
from service.models.registry import ModelSpec, build_loss
from service.optimizers.kits.base import InfeasibleSpec
from service.privacy.evaluation import (
    MAX_CONFUSION_CLASSES,
    WITHOUT_LOSS,
    EvaluationKind,
    EvaluationPlan,
    categorical_kind,
    confusion_warnings,
    loss_clip_bound,
    metric_stds,
    metric_sums,
    metric_warnings,
    plan_evaluation,
    release_metrics,
)
from service.privacy.gdp import parallel_mu
from service.privacy.secure_random import SecureRandom
from service.schemas import EvaluationCreate

__all__ = [
    "EVALUATION",
    "PricedEvaluation",
    "evaluate_and_store",
    "is_evaluation",
    "price_evaluation",
]

logger = logging.getLogger("dpfit.worker")

EVALUATION = "evaluation"


def is_evaluation(spec: dict[str, Any]) -> bool:
    """Whether a stored job spec is an evaluation job."""
    return spec.get("kind") == EVALUATION


@dataclass(frozen=True)
class PricedEvaluation:
    """A planned evaluation and what it costs (satisfies ``service.domain.submission.Priced``)."""

    plan: EvaluationPlan
    charge: JobCharge
    spec: dict[str, Any]
    plan_json: dict[str, Any]

    @property
    def field_at_fault(self) -> str:
        return "loss_clip"


def _kind(label: LabelSpec) -> EvaluationKind:
    if label.type == "numeric":
        return "regression"
    return categorical_kind(len(label.classes or [])) if label.type == "categorical" else "binary"


def weight_norm(model: TrainedModel) -> float:
    """‖w‖₂ of the released parameters, intercept included (the intercept column is inside the
    row-norm bound); the largest row norm for a one-vs-rest model."""
    weights = weight_matrix(model.coefficients, model.intercept)
    return float(np.max(np.linalg.norm(weights, axis=1)))


def price_evaluation(
    dataset: Dataset, model: TrainedModel, body: EvaluationCreate
) -> PricedEvaluation:
    """Plan and price an evaluation of ``model`` on ``dataset`` from public facts only (the
    released model, the declared schema and bounds, n, the target). Raises
    :class:`InfeasibleSpec` naming the field, or :class:`DatasetRetired`."""
    if dataset.retired_at is not None:
        raise DatasetRetired(dataset.id)
    if (dataset.execution or "workers") == "in_database":
        raise InfeasibleSpec(
            "dataset_id",
            "this dataset's rows never leave its database, and private evaluation reads them in "
            "a worker: evaluate on a holdout registered for the workers",
        )
    if list(dataset.features) != list(model.encoder.get("features", [])) or dict(
        dataset.label
    ) != dict(model.label):
        raise InfeasibleSpec(
            "dataset_id",
            "this dataset's declared features or label differ from the model's; evaluate on "
            "the training dataset or a holdout registered with the same schema",
        )
    if body.privacy.delta == 0 or dataset.delta == 0:
        raise InfeasibleSpec(
            "privacy.delta",
            "a private evaluation adds Gaussian noise: it needs δ > 0 (on a dataset whose "
            "budget has δ > 0)",
        )
    label = LabelSpec.model_validate(dataset.label)
    kind = _kind(label)
    if kind in WITHOUT_LOSS and body.loss_clip is not None:
        raise InfeasibleSpec(
            "loss_clip",
            "a categorical label's evaluation releases counts only (accuracy, and the "
            f"confusion matrix up to {MAX_CONFUSION_CLASSES} classes), no loss, so loss_clip "
            "does not apply: omit it",
        )
    loss = build_loss(TypeAdapter(ModelSpec).validate_python(model.model_spec))
    clip: float | None = None
    bound: float | None = getattr(loss, "label_bound", None)
    declared = len(label.classes or [])
    classes = declared if kind == "multiclass" else None
    if kind not in WITHOUT_LOSS:
        if body.loss_clip is None and kind == "regression" and bound is None:
            raise InfeasibleSpec(
                "loss_clip",
                "this model declares no label bound, so no row's squared error is bounded: "
                "declare loss_clip",
            )
        clip = body.loss_clip or loss_clip_bound(kind, weight_norm(model), bound)
        if not math.isfinite(clip):
            raise InfeasibleSpec("loss_clip", "the default loss clip overflows: declare loss_clip")
    try:
        plan = plan_evaluation(
            kind, dataset.n_rows, body.privacy.epsilon, body.privacy.delta, clip, classes
        )
        curve = charge_curve(plan.event)
    except (ValueError, ArithmeticError) as exc:
        raise InfeasibleSpec("privacy", f"this evaluation cannot be accounted: {exc}") from None
    event_json = event_to_json(plan.event)
    hyper: dict[str, Any] = {
        "model_id": model.id,
        "metrics": kind,
        "loss_clip": clip,
        "noise_multiplier": plan.noise_multiplier,
    }
    if classes is not None:
        hyper["classes"] = classes
    hyper.update(metric_stds(plan))  # the std of every released metric (before its clamp)
    stds = [k for k, v in hyper.items() if isinstance(v, float) and not math.isfinite(v)]
    if stds:  # B·σ/n beyond float64: a plan that cannot be stated, stored or run
        raise InfeasibleSpec(
            "loss_clip",
            f"loss_clip = {clip:.4g} makes the plan's {', '.join(sorted(stds))} "
            "(loss_clip·noise_scale/n) overflow; declare a smaller loss_clip",
        )
    plan_json: dict[str, Any] = {
        "kind": EVALUATION,
        "mechanism": "gaussian",
        "sensitivity": plan.sensitivity,
        "noise_scale": plan.noise_scale,
        "total_steps": 1,
        "hyperparameters": hyper,
        "event": event_json,
        "parallel_events": [],
        "warnings": metric_warnings(
            plan, bound if kind == "regression" else None, body.privacy.epsilon
        )
        + (confusion_warnings(declared) if kind in WITHOUT_LOSS else []),
    }
    privacy = {"epsilon": body.privacy.epsilon, "delta": body.privacy.delta}
    spec: dict[str, Any] = {
        "kind": EVALUATION,
        "dataset_id": dataset.id,
        "model_id": model.id,
        "model": dict(model.model_spec),
        "optimizer": {"name": EVALUATION, "params": {"model_id": model.id, "loss_clip": clip}},
        "privacy": privacy,
    }
    charge = JobCharge(
        epsilon=body.privacy.epsilon,
        delta=body.privacy.delta,
        rdp=curve,
        pure_epsilon=None,
        event=event_json,
        mu=parallel_mu(plan.event),
    )
    priced = PricedEvaluation(plan=plan, charge=charge, spec=spec, plan_json=plan_json)
    check_finite(priced)  # the one guard of every plan (service/domain/submission.py)
    return priced


def plan_of(spec: dict[str, Any], plan_json: dict[str, Any], n: int) -> EvaluationPlan:
    """The stored plan back (as admitted: σ and B exactly as charged)."""
    hyper = plan_json["hyperparameters"]
    kind: EvaluationKind = hyper["metrics"]
    clip = hyper.get("loss_clip")
    classes = hyper.get("classes")
    return EvaluationPlan(
        kind=kind,
        n=n,
        loss_clip=None if clip is None else float(clip),
        sensitivity=float(plan_json["sensitivity"]),
        noise_multiplier=float(hyper["noise_multiplier"]),
        classes=None if classes is None else int(classes),
    )


def model_scores(model: TrainedModel, X: np.ndarray) -> np.ndarray:
    """Per row, from the public model and that row only: the margin w·x (binary), the predicted
    class index (categorical: arg max of the class scores, one-vs-rest or joint — the softmax
    and the normalised one-vs-rest scores are increasing in them) or the prediction w·x."""
    weights = weight_matrix(model.coefficients, model.intercept)
    if weights.shape[0] == 1:
        result: np.ndarray = X @ weights[0]
        return result
    best = np.empty(X.shape[0], dtype=float)
    for rows in row_blocks(X.shape[0], weights.shape[0]):  # (rows, K) scores: ≤ 8 MB a block
        best[rows] = np.argmax(X[rows] @ weights.T, axis=1)
    return best


def true_classes(Y: np.ndarray) -> np.ndarray:
    """The class index of each row from the one-vs-rest ±1 matrix (K, n); −1 where no class is
    positive (a missing or undeclared label: never counted correct)."""
    positive = Y > 0
    return np.where(positive.any(axis=0), np.argmax(positive, axis=0), -1).astype(float)


def evaluate_rows(
    plan: EvaluationPlan,
    model: TrainedModel,
    X: np.ndarray,
    Y: np.ndarray,
    rng: SecureRandom | None,
) -> dict[str, Any]:
    """The released metrics of ``model`` on encoded rows (``rng=None``: noise off, tests)."""
    scores = model_scores(model, X)
    labels = true_classes(Y) if plan.kind in WITHOUT_LOSS else Y
    return release_metrics(plan, metric_sums(plan, scores, labels), rng)


def evaluate_and_store(
    sessions: sessionmaker[Session],
    job_id: str,
    attempt: int,
    source: Source,
    registered_fingerprint: str,
) -> str:
    """The worker's part, after the runner's claim (the charge stands from here on): read the
    rows with the row-local reader, compute the sums, noise them once, store the result and mark
    the job succeeded in one transaction. Returns the job's status."""
    with sessions() as session:
        job = session.get(Job, job_id)
        dataset = session.get(Dataset, job.dataset_id) if job else None
        model = session.get(TrainedModel, str(job.spec["model_id"])) if job else None
        if job is None or dataset is None or model is None:
            raise LookupError(job_id)  # content-independent; the runner marks it failed
        spec, plan_json = dict(job.spec), dict(job.plan)
        label = LabelSpec.model_validate(dataset.label)
        n, dataset_id, principal = int(dataset.n_rows), dataset.id, job.principal
        session.expunge(model)
    encoder = Encoder.from_dict(model.encoder)
    loss = build_loss(TypeAdapter(ModelSpec).validate_python(spec["model"]))
    X, Y = read_encoded(source, encoder, label, getattr(loss, "label_bound", None))
    if source.fingerprint() != registered_fingerprint:
        raise SourceError("source changed while the job was reading it")
    plan = plan_of(spec, plan_json, n)
    metrics = evaluate_rows(plan, model, X, Y, SecureRandom())  # the OS CSPRNG
    del X, Y
    try:
        with sessions() as session:
            if not job_status.succeed(session, job_id, attempt, progress=1):
                session.rollback()
                return _status(sessions, job_id)
            session.add(
                Evaluation(
                    id=new_id("evl"),
                    job_id=job_id,
                    model_id=model.id,
                    dataset_id=dataset_id,
                    principal=principal,
                    metrics=metrics,
                )
            )
            session.commit()
    except IntegrityError:
        return _status(sessions, job_id)
    return "succeeded"


def _status(sessions: sessionmaker[Session], job_id: str) -> str:
    with sessions() as session:
        job = session.get(Job, job_id)
        return job.status if job is not None else "missing"
