"""Datasets: registration by reference, grants, budget and ledger."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from sqlalchemy import or_, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from service.api.access import (
    is_owner,
    owned_dataset,
    visible_dataset,
    visible_dataset_and_grant,
)
from service.api.auth import Principal
from service.api.deps import Admin, AnyRole, AppSettings, Owner, Sessions
from service.api.errors import ProblemError, invalid, not_found
from service.api.paging import PageParams, finish_page, integer_cursor_id
from service.api.strict_json import StrictJSONRoute
from service.db.models import Charge, Dataset, DatasetWithdrawal, Grant, utcnow
from service.domain.claims import cross_owner_duplicates
from service.domain.grants import (
    GrantNotFound,
    cap_problem,
    list_grants,
    revoke_grant,
    with_spend,
)
from service.domain.principals import NotAnAnalyst, require_analyst
from service.domain.registration import (
    check_registration,
    list_withdrawals,
    register_dataset,
    report_counts,
    retire_dataset,
    stored_report_counts,
    withdraw_dataset,
)
from service.errors import DatasetHasCharges
from service.ledger import filter as privacy_filter
from service.ledger.accounting import ORDERS
from service.ledger.admission import budget_of
from service.ledger.history import budget_history
from service.ledger.standing import standing
from service.ledger.totals import curve_to_json
from service.pagination import paginate
from service.schemas import (
    BudgetHistoryOut,
    BudgetHistoryPoint,
    BudgetOut,
    ChargeOut,
    DatasetCreate,
    DatasetOut,
    GrantCreate,
    GrantListItem,
    GrantOut,
    GrantRevokedOut,
    LedgerOut,
    ValidationOut,
)
from service.schemas.common import PrivacyOut
from service.schemas.datasets import (
    DatasetValidationOut,
    DatasetWithdrawalOut,
    RegistrationRefusalOut,
)

router = APIRouter(prefix="/v1/datasets", tags=["datasets"], route_class=StrictJSONRoute)


def dataset_out(
    dataset: Dataset, principal: Principal, duplicates: dict[str, list[str]] | None = None
) -> DatasetOut:
    """The dataset as ``principal`` may see it. ``duplicates`` (admins: from
    :func:`~service.domain.claims.cross_owner_duplicates`) fills the admin-only field."""
    owner_view = is_owner(principal, dataset)
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
            "validation": validation_out(dataset.validation) if owner_view else None,
            "execution": dataset.execution or "workers",
            "created_at": dataset.created_at,
            "retired_at": dataset.retired_at,
            "duplicates": (duplicates or {}).get(dataset.id, [])
            if principal.is_admin and duplicates is not None
            else None,
        }
    )


def admin_view(
    session: Session, principal: Principal, datasets: list[Dataset]
) -> dict[str, list[str]] | None:
    """Cross-owner duplicates of ``datasets`` for an admin; ``None`` (not computed, not shown)
    for everyone else."""
    if not principal.is_admin:
        return None
    return cross_owner_duplicates(session, [d.id for d in datasets])


def withdrawal_out(record: DatasetWithdrawal) -> DatasetWithdrawalOut:
    return DatasetWithdrawalOut(
        dataset_id=record.dataset_id,
        name=record.name,
        owner=record.owner,
        source_uri=record.source_uri,
        n_rows=record.n_rows,
        budget=PrivacyOut(epsilon=record.epsilon, delta=record.delta),
        registered_at=record.registered_at,
        withdrawn_by=record.withdrawn_by,
        withdrawn_at=record.withdrawn_at,
    )


def validation_out(stored: dict[str, Any] | None) -> ValidationOut | None:
    """The stored validation report in the API's shape (``None`` for datasets registered before
    reports existed)."""
    if stored is None:
        return None
    return ValidationOut.model_validate(stored_report_counts(stored))


@router.post("", status_code=201, response_model=DatasetOut, summary="Register a dataset")
def create_dataset(
    body: DatasetCreate, principal: Owner, sessions: Sessions, settings: AppSettings
) -> DatasetOut:
    """Register a source (under a data root open to the caller) with its public schema and
    budget.

    Parses the whole source with the workers' reader and answers with the validation report
    (shown to the owner and admins only). `strict` decides what the report refuses (422 naming
    the field): by default a source most of whose non-empty labels are outside the declared
    values; `true`: any such label and any non-number in a numeric column; `false`: nothing.
    A source whose location (or a folder holding it, or a file inside it) already backs a
    dataset, or whose content already backs one of the caller's own datasets, is refused with
    409 (one budget per data; the existing id is named only to its owner and admins). Content
    is never compared with other owners' datasets: an equal copy registers, and admins see it
    in `duplicates`. n and the fingerprint are fixed here; a job on a changed source fails.
    Try a body first with `POST /v1/datasets/validate`.
    """
    dataset = register_dataset(sessions=sessions, principal=principal, body=body, settings=settings)
    if not principal.is_admin:
        return dataset_out(dataset, principal)
    with sessions() as session:
        return dataset_out(dataset, principal, admin_view(session, principal, [dataset]))


@router.post(
    "/validate",
    response_model=DatasetValidationOut,
    summary="Validate a registration without creating anything (dry run)",
)
def validate_dataset(
    body: DatasetCreate, principal: Owner, sessions: Sessions, settings: AppSettings
) -> DatasetValidationOut:
    """Run every check of `POST /v1/datasets` on the body — roots, columns, one budget per
    data, the whole source parsed with the workers' reader — and answer with the validation
    report and whether the registration would succeed, creating nothing. What registration
    refuses before the report is refused here the same way (422, 409); the label rule's or
    strict mode's refusal comes back in `refusal`, beside the report it was read from."""
    check = check_registration(sessions=sessions, principal=principal, body=body, settings=settings)
    refusal = check.refusal
    return DatasetValidationOut(
        would_register=refusal is None,
        refusal=None
        if refusal is None
        else RegistrationRefusalOut(field=refusal.field, detail=refusal.message),
        n_rows=check.n_rows,
        n_features=check.n_features,
        validation=ValidationOut.model_validate(report_counts(check.report)),
    )


@router.get(
    "/withdrawals",
    response_model=list[DatasetWithdrawalOut],
    summary="Withdrawn datasets (admins)",
)
def get_withdrawals(
    principal: Admin, sessions: Sessions, page: PageParams, request: Request, response: Response
) -> list[DatasetWithdrawalOut]:
    """The datasets withdrawn with `DELETE /v1/datasets/{id}`, oldest first, one page per call
    (`limit`, `cursor` and `X-Next-Cursor` as every list): what each was, who withdrew it,
    when. Admins only."""
    with sessions() as session:
        rows = list_withdrawals(session, page.limit, integer_cursor_id(page))
        rows = finish_page(rows, page, request, response, key=lambda r: (r.withdrawn_at, str(r.id)))
        return [withdrawal_out(r) for r in rows]


@router.delete(
    "/{dataset_id}",
    response_model=DatasetWithdrawalOut,
    summary="Withdraw a dataset that has no charges",
)
def withdraw(dataset_id: str, principal: Owner, sessions: Sessions) -> DatasetWithdrawalOut:
    """Withdraw a dataset on which no job was ever submitted — the way back from a registration
    mistake. The dataset, its grants and its claims are removed (the source may be registered
    again, corrected); a record stays for admins (`GET /v1/datasets/withdrawals`). The
    dataset's owner and admins (other owners: 404; analysts: 403). Once any job was submitted
    (and so charged) on it, 409: the ledger is append-only and its budget stays (an admin may
    retire it)."""
    try:
        record = withdraw_dataset(sessions=sessions, principal=principal, dataset_id=dataset_id)
    except DatasetHasCharges:
        raise ProblemError(
            409,
            "Dataset has charges",
            f"Dataset {dataset_id!r} cannot be withdrawn: jobs were submitted on it, so its "
            "ledger holds their charges (append-only) and its budget stays. An admin may "
            "retire it (POST /v1/datasets/{id}/retire) so that no further job is admitted.",
            "dataset_id",
        ) from None
    return withdrawal_out(record)


@router.post("/{dataset_id}/retire", response_model=DatasetOut, summary="Retire a dataset (admins)")
def retire(dataset_id: str, principal: AnyRole, sessions: Sessions) -> DatasetOut:
    """Retire a dataset: no job is admitted on it afterwards and its budget is final. Its source
    (location and content) can never be registered again by its owner. Admins only (404 for
    everyone else); idempotent."""
    dataset = retire_dataset(sessions=sessions, principal=principal, dataset_id=dataset_id)
    with sessions() as session:
        return dataset_out(dataset, principal, admin_view(session, principal, [dataset]))


@router.get("", response_model=list[DatasetOut], summary="List visible datasets")
def list_datasets(
    principal: AnyRole, sessions: Sessions, page: PageParams, request: Request, response: Response
) -> list[DatasetOut]:
    """Datasets you own or were granted (admins: all), oldest first, one page per call (see
    `X-Next-Cursor`)."""
    with sessions() as session:
        query = select(Dataset)
        if not principal.is_admin:
            granted = select(Grant.dataset_id).where(Grant.principal == principal.name)
            visible = Dataset.id.in_(granted)
            if principal.role == "owner":  # only an owner principal owns datasets
                visible = or_(Dataset.owner == principal.name, visible)
            query = query.where(visible)
        rows = session.scalars(paginate(query, page, Dataset.created_at, Dataset.id)).all()
        rows = finish_page(rows, page, request, response, key=lambda d: (d.created_at, d.id))
        duplicates = admin_view(session, principal, list(rows))
        return [dataset_out(d, principal, duplicates) for d in rows]


@router.get("/{dataset_id}", response_model=DatasetOut, summary="Get a dataset")
def get_dataset(dataset_id: str, principal: AnyRole, sessions: Sessions) -> DatasetOut:
    with sessions() as session:
        dataset = visible_dataset(session, principal, dataset_id)
        return dataset_out(dataset, principal, admin_view(session, principal, [dataset]))


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
            dataset = owned_dataset(session, principal, dataset_id)
            try:
                require_analyst(session, body.principal)
            except NotAnAnalyst as exc:
                raise invalid("principal", str(exc)) from None
            refused = cap_problem(dataset, body.epsilon_cap)
            if refused is not None:
                raise invalid("epsilon_cap", refused)
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


@router.get(
    "/{dataset_id}/grants", response_model=list[GrantListItem], summary="List a dataset's grants"
)
def get_grants(
    dataset_id: str,
    principal: Owner,
    sessions: Sessions,
    page: PageParams,
    request: Request,
    response: Response,
) -> list[GrantListItem]:
    """Who may submit jobs on this dataset: each grant with its cap and the ε (at δ_B) its
    principal's standing charges add up to. The dataset's owner and admins only (other owners:
    404; analysts: 403). Oldest grant first, one page per call (see `X-Next-Cursor`)."""
    with sessions() as session:
        dataset = owned_dataset(session, principal, dataset_id)
        rows = list_grants(session, dataset, page)
        rows = finish_page(rows, page, request, response, key=lambda g: (g.created_at, g.principal))
        views = with_spend(session, dataset, rows)
    return [GrantListItem.model_validate(v, from_attributes=True) for v in views]


@router.post(
    "/{dataset_id}/grants/{grantee}/revoke",
    response_model=GrantRevokedOut,
    summary="Revoke a grant",
)
def revoke(dataset_id: str, grantee: str, principal: Owner, sessions: Sessions) -> GrantRevokedOut:
    """Revoke ``grantee``'s grant (the dataset's owner and admins; analysts 403, other owners 404).

    Revocation stops NEW jobs: the grantee's next submission, estimate or read of the dataset
    answers 404. It changes no accounting: the ledger is append-only, so the grantee's charges
    stay; its queued and running jobs keep running and keep their charge (cancelling one that no
    worker has read is refunded as always), and it still sees its own jobs and models. Granting
    again later is a new grant; earlier charges count against its cap. A submission whose access
    check ran just before the revocation committed may still be admitted (service/domain/grants.py).
    No such grant → 404 (a second revocation too)."""
    with sessions.begin() as session:
        owned_dataset(session, principal, dataset_id)
        try:
            grant = revoke_grant(session, dataset_id, grantee)
        except GrantNotFound:
            raise not_found(f"The grant of {grantee!r} on dataset {dataset_id!r}") from None
        return GrantRevokedOut(
            dataset_id=dataset_id,
            principal=grant.principal,
            epsilon_cap=grant.epsilon_cap,
            created_at=grant.created_at,
            revoked_at=utcnow(),
        )


@router.get("/{dataset_id}/budget", response_model=BudgetOut, summary="Remaining budget")
def get_budget(dataset_id: str, principal: AnyRole, sessions: Sessions) -> BudgetOut:
    with sessions() as session:
        dataset, grant = visible_dataset_and_grant(session, principal, dataset_id)
        now = standing(session, dataset_id, principal.name)
    budget = budget_of(dataset)
    used, remaining = privacy_filter.spent_and_remaining(budget, now.spent)
    accounting = (
        "basic composition of pure ε-DP jobs (δ_B = 0)"
        if budget.pure
        else "exact Gaussian DP for Gaussian-family jobs (Σμ² ≤ μ_B², Smith–Thakurta filter), "
        "Rényi-DP filter for the others (Canonne–Kamath–Steinke conversion), one (ε_B, δ_B)"
    )
    return BudgetOut(
        dataset_id=dataset_id,
        epsilon=budget.epsilon,
        delta=budget.delta,
        epsilon_spent=used,
        epsilon_remaining=remaining,
        jobs_charged=now.jobs_charged,
        accounting=accounting,
        your_epsilon_cap=None if grant is None else grant.epsilon_cap,
        your_epsilon_spent=(
            used if now.yours == now.spent else privacy_filter.spent_epsilon(budget, now.yours)
        ),
    )


@router.get(
    "/{dataset_id}/budget/history",
    response_model=BudgetHistoryOut,
    summary="The budget's history (burn-down)",
)
def get_budget_history(
    dataset_id: str,
    principal: AnyRole,
    sessions: Sessions,
    page: PageParams,
    request: Request,
    response: Response,
) -> BudgetHistoryOut:
    """ε spent at δ_B after every charge and refund, oldest first, one page of `points` per call
    (`limit`, `cursor`, `X-Next-Cursor` as on the ledger). Owners and admins see every job id;
    analysts see their own job ids, the dataset's total curve and their own curve."""
    after = integer_cursor_id(page)
    with sessions.snapshot() as session:
        dataset = visible_dataset(session, principal, dataset_id)
        points = budget_history(
            session,
            dataset,
            principal.name,
            is_owner(principal, dataset),
            after_id=after if after is not None else 0,
            limit=page.limit + 1,
        )
        points = finish_page(points, page, request, response, key=lambda p: (p.at, str(p.row_id)))
        budget = budget_of(dataset)
    return BudgetHistoryOut(
        dataset_id=dataset_id,
        epsilon=budget.epsilon,
        delta=budget.delta,
        points=[BudgetHistoryPoint.model_validate(p, from_attributes=True) for p in points],
    )


@router.get("/{dataset_id}/ledger", response_model=LedgerOut, summary="The dataset's ledger")
def get_ledger(
    dataset_id: str,
    principal: Owner,
    sessions: Sessions,
    page: PageParams,
    request: Request,
    response: Response,
) -> LedgerOut:
    """Every charge and refund (append-only), oldest first, one page of `charges` per call
    (`limit`, `cursor`, `X-Next-Cursor` as on the lists), with the cached total and its
    recomputation from ALL the rows on every page (recomputed only when the ledger may have
    changed: service/ledger/audit.py, ``AuditCache``).

    Pages follow the ledger's row ids: every charge and refund of a dataset is written under the
    dataset's row lock (service/ledger/admission.py), so ids grow in commit order within a
    dataset and a row written while a client pages is never skipped or repeated. The page is
    one query; the audit reads the dataset's stored totals and last row id in the same snapshot,
    and its rows once more only when those changed."""
    with sessions.snapshot() as session:
        dataset = owned_dataset(session, principal, dataset_id)
        query = select(Charge).where(Charge.dataset_id == dataset_id)
        after = integer_cursor_id(page)
        if after is not None:
            query = query.where(Charge.id > after)
        rows = session.scalars(query.order_by(Charge.id).limit(page.limit + 1)).all()
        rows = finish_page(rows, page, request, response, key=lambda c: (c.created_at, str(c.id)))
        checked = request.app.state.ledger_audits.audit(session, dataset)
        charges = [ChargeOut.model_validate(r, from_attributes=True) for r in rows]
    return LedgerOut(
        dataset_id=dataset_id,
        orders=list(ORDERS),
        charges=charges,
        cached_rdp=curve_to_json(checked.cached_rdp),
        recomputed_rdp=curve_to_json(checked.recomputed.rdp),
        cached_pure_epsilon=checked.cached_pure_epsilon,
        recomputed_pure_epsilon=checked.recomputed.pure_epsilon,
        consistent=checked.consistent,
    )
