"""Datasets: registration by reference, grants, budget and ledger."""

from __future__ import annotations

from fastapi import APIRouter
from sqlalchemy import or_, select
from sqlalchemy.exc import IntegrityError

from service.api.access import owned_dataset, visible_dataset
from service.api.auth import Principal
from service.api.deps import AnyRole, AppSettings, Owner, Sessions
from service.api.errors import ProblemError, invalid
from service.data.encoding import Encoder
from service.data.sources import (
    SourceError,
    available_columns,
    count_rows,
    detect_format,
    fingerprint,
    resolve_source,
)
from service.db.models import Charge, Dataset, Grant
from service.ids import new_id
from service.ledger import filter as privacy_filter
from service.ledger.accounting import ORDERS
from service.ledger.admission import (
    budget_of,
    count_charged_jobs,
    curve_to_json,
    principal_cap,
    principal_spent,
    recompute_totals,
    spent_of,
)
from service.principals import NotAnAnalyst, require_analyst
from service.schemas import (
    BudgetOut,
    ChargeOut,
    DatasetCreate,
    DatasetOut,
    GrantCreate,
    GrantOut,
    LedgerOut,
)

router = APIRouter(prefix="/v1/datasets", tags=["datasets"])


def dataset_out(dataset: Dataset, principal: Principal) -> DatasetOut:
    owner_view = principal.is_admin or principal.name == dataset.owner
    return DatasetOut.model_validate(
        {
            "id": dataset.id,
            "name": dataset.name,
            "owner": dataset.owner,
            "n_rows": dataset.n_rows,
            "n_features": dataset.n_features,
            "label": dataset.label,
            "features": dataset.features,
            "budget": {"epsilon": dataset.epsilon, "delta": dataset.delta},
            "fingerprint": dataset.fingerprint if owner_view else None,
            "source": {"uri": dataset.source_uri, "format": dataset.source_format}
            if owner_view
            else None,
            "created_at": dataset.created_at,
        }
    )


@router.post("", status_code=201, response_model=DatasetOut, summary="Register a dataset")
def create_dataset(
    body: DatasetCreate, principal: Owner, sessions: Sessions, settings: AppSettings
) -> DatasetOut:
    """Register a CSV/Parquet file (under an allowed data root) with its public schema and budget.

    Reads the header, counts rows (n is public) and records the file's fingerprint; a job on a
    changed file fails with a clear error.
    """
    try:
        path = resolve_source(body.source.uri, settings.data_roots)
        fmt = body.source.format or detect_format(path)
        columns = set(available_columns(path, fmt))
    except SourceError as exc:
        raise invalid("source.uri", str(exc)) from None
    if body.label.column not in columns:
        raise invalid("label.column", f"column {body.label.column!r} is not in the source")
    names = [f.name for f in body.features]
    for i, name in enumerate(names):
        if name not in columns:
            raise invalid(f"features.{i}.name", f"column {name!r} is not in the source")
        if name == body.label.column:
            raise invalid(f"features.{i}.name", "the label column cannot also be a feature")
        if name in names[:i]:
            raise invalid(f"features.{i}.name", f"column {name!r} is listed twice")
    try:
        n_rows = count_rows(path, fmt)
        digest = fingerprint(path)
    except (SourceError, OSError):
        raise invalid("source.uri", "the source could not be read") from None
    if n_rows < 2:
        raise invalid("source.uri", "the source must have at least 2 rows")
    encoder = Encoder(features=body.features, fit_intercept=False)
    dataset = Dataset(
        id=new_id("ds"),
        name=body.name,
        owner=principal.name,
        source_uri=body.source.uri,
        source_path=str(path),
        source_format=fmt,
        fingerprint=digest,
        label=body.label.model_dump(mode="json"),
        features=[f.model_dump(mode="json") for f in body.features],
        n_rows=n_rows,
        n_features=encoder.n_features,
        epsilon=body.budget.epsilon,
        delta=body.budget.delta,
        spent_rdp=curve_to_json([0.0] * len(ORDERS)),
        spent_pure_epsilon=0.0,
    )
    with sessions.begin() as session:
        session.add(dataset)
    return dataset_out(dataset, principal)


@router.get("", response_model=list[DatasetOut], summary="List visible datasets")
def list_datasets(principal: AnyRole, sessions: Sessions) -> list[DatasetOut]:
    with sessions() as session:
        query = select(Dataset).order_by(Dataset.created_at)
        if not principal.is_admin:
            granted = select(Grant.dataset_id).where(Grant.principal == principal.name)
            query = query.where(or_(Dataset.owner == principal.name, Dataset.id.in_(granted)))
        return [dataset_out(d, principal) for d in session.scalars(query)]


@router.get("/{dataset_id}", response_model=DatasetOut, summary="Get a dataset")
def get_dataset(dataset_id: str, principal: AnyRole, sessions: Sessions) -> DatasetOut:
    with sessions() as session:
        return dataset_out(visible_dataset(session, principal, dataset_id), principal)


@router.post(
    "/{dataset_id}/grants", status_code=201, response_model=GrantOut, summary="Grant access"
)
def create_grant(
    dataset_id: str, body: GrantCreate, principal: Owner, sessions: Sessions
) -> GrantOut:
    """Let an existing analyst principal submit jobs on this dataset, optionally capped.

    Idempotent; granting again replaces the cap. A name that is not an analyst principal is
    refused (422 on `principal`)."""
    try:
        with sessions.begin() as session:
            owned_dataset(session, principal, dataset_id)
            try:
                require_analyst(session, body.principal)
            except NotAnAnalyst as exc:
                raise invalid("principal", str(exc)) from None
            grant = session.scalar(
                select(Grant).where(
                    Grant.dataset_id == dataset_id, Grant.principal == body.principal
                )
            )
            if grant is None:
                grant = Grant(
                    dataset_id=dataset_id, principal=body.principal, epsilon_cap=body.epsilon_cap
                )
                session.add(grant)
            else:
                grant.epsilon_cap = body.epsilon_cap
            session.flush()
            return GrantOut(
                dataset_id=dataset_id,
                principal=grant.principal,
                epsilon_cap=grant.epsilon_cap,
                created_at=grant.created_at,
            )
    except IntegrityError:
        raise ProblemError(409, "Conflict", "The grant was created concurrently; retry.") from None


@router.get("/{dataset_id}/budget", response_model=BudgetOut, summary="Remaining budget")
def get_budget(dataset_id: str, principal: AnyRole, sessions: Sessions) -> BudgetOut:
    with sessions() as session:
        dataset = visible_dataset(session, principal, dataset_id)
        budget, spent = budget_of(dataset), spent_of(dataset)
        jobs = count_charged_jobs(session, dataset_id)
        cap = principal_cap(session, dataset_id, principal.name)
        mine = privacy_filter.spent_epsilon(
            budget, principal_spent(session, dataset_id, principal.name)
        )
    accounting = (
        "basic composition of pure ε-DP jobs (δ_B = 0)"
        if budget.pure
        else "Rényi-DP filter over 13 orders, (ε, δ_B) by the Canonne–Kamath–Steinke conversion"
    )
    return BudgetOut(
        dataset_id=dataset_id,
        epsilon=budget.epsilon,
        delta=budget.delta,
        epsilon_spent=privacy_filter.spent_epsilon(budget, spent),
        epsilon_remaining=privacy_filter.remaining_epsilon(budget, spent),
        jobs_charged=jobs,
        accounting=accounting,
        your_epsilon_cap=cap,
        your_epsilon_spent=mine,
    )


@router.get("/{dataset_id}/ledger", response_model=LedgerOut, summary="The dataset's ledger")
def get_ledger(dataset_id: str, principal: Owner, sessions: Sessions) -> LedgerOut:
    """Every charge and refund (append-only), with the cached total and its recomputation."""
    with sessions() as session:
        dataset = owned_dataset(session, principal, dataset_id)
        rows = session.scalars(
            select(Charge).where(Charge.dataset_id == dataset_id).order_by(Charge.id)
        ).all()
        totals = recompute_totals(session, dataset_id)
        cached = spent_of(dataset)
        charges = [ChargeOut.model_validate(r, from_attributes=True) for r in rows]
    consistent = (
        all(
            abs(a - b) <= 1e-9 * max(1.0, abs(a))
            for a, b in zip(cached.rdp, totals.rdp, strict=True)
        )
        and abs(cached.pure_epsilon - totals.pure_epsilon) <= 1e-9
    )
    return LedgerOut(
        dataset_id=dataset_id,
        orders=list(ORDERS),
        charges=charges,
        cached_rdp=curve_to_json(cached.rdp),
        recomputed_rdp=curve_to_json(totals.rdp),
        cached_pure_epsilon=cached.pure_epsilon,
        recomputed_pure_epsilon=totals.pure_epsilon,
        consistent=consistent,
    )
