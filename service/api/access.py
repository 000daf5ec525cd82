"""Who may see which dataset, job and model. Invisible things answer 404, never 403."""

from __future__ import annotations

from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session

from service.api.auth import Principal
from service.api.errors import not_found
from service.db.models import Dataset, Grant, Job, TrainedModel


def is_owner(principal: Principal, dataset: Dataset) -> bool:
    """Admins, and the owner principal named on the dataset (names are unique and permanent;
    the role check keeps a pre-0004 dataset of a name that migrated to another role closed)."""
    return principal.is_admin or (principal.role == "owner" and dataset.owner == principal.name)


_GRANT = select(Grant).where(
    Grant.dataset_id == bindparam("dataset_id"), Grant.principal == bindparam("principal")
)


def _grant_of(session: Session, principal: Principal, dataset_id: str) -> Grant | None:
    return session.scalar(_GRANT, {"dataset_id": dataset_id, "principal": principal.name})


def visible_dataset(
    session: Session, principal: Principal, dataset_id: str, field: str | None = None
) -> Dataset:
    """The dataset if the principal owns it or was granted it, else 404."""
    return visible_dataset_and_grant(session, principal, dataset_id, field)[0]


def visible_dataset_and_grant(
    session: Session, principal: Principal, dataset_id: str, field: str | None = None
) -> tuple[Dataset, Grant | None]:
    """:func:`visible_dataset` and the caller's grant on it (None for its owner and admins),
    read once: the budget route needs both (the grant holds the caller's ε cap)."""
    dataset = session.get(Dataset, dataset_id)
    if dataset is not None and is_owner(principal, dataset):
        return dataset, None
    grant = None if dataset is None else _grant_of(session, principal, dataset_id)
    if dataset is None or grant is None:
        raise not_found(f"Dataset {dataset_id!r}", field)
    return dataset, grant


def owned_dataset(session: Session, principal: Principal, dataset_id: str) -> Dataset:
    """The dataset if the principal owns it (or is admin), else 404."""
    dataset = session.get(Dataset, dataset_id)
    if dataset is None or not is_owner(principal, dataset):
        raise not_found(f"Dataset {dataset_id!r}")
    return dataset


def visible_job(session: Session, principal: Principal, job_id: str) -> Job:
    return shown_job(principal, job_id, session.get(Job, job_id))


def shown_job(principal: Principal, job_id: str, job: Job | None) -> Job:
    """``job`` if it exists and is the principal's own (admins: any), else 404."""
    if job is None or not (principal.is_admin or job.principal == principal.name):
        raise not_found(f"Job {job_id!r}")
    return job


def visible_model(session: Session, principal: Principal, model_id: str) -> TrainedModel:
    model = session.get(TrainedModel, model_id)
    if model is None or not (principal.is_admin or model.principal == principal.name):
        raise not_found(f"Model {model_id!r}")
    return model
