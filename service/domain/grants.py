"""Grants: list them (with what each analyst has spent) and revoke them.

A grant (service/db/models.py ``Grant``) lets one analyst principal submit jobs on one dataset,
optionally under an ε cap. Creating one is ``POST /v1/datasets/{id}/grants``
(service/api/datasets.py); this module holds the two operations owners also need:

- :func:`list_grants` — one keyset page in ``(created_at, principal)`` order (a principal holds at
  most one grant per dataset, so the pair is a unique key), each grant with the ε (at δ_B) of that
  principal's standing charges. Two queries per page whatever the dataset's history: the grants,
  then the charges of the page's principals only.
- :func:`revoke_grant` — delete the grant row under the dataset row lock that admission takes
  (service/ledger/admission.py ``lock_dataset``).

What revocation guarantees, and what it does not:

- It stops NEW jobs: the principal's next ``POST /v1/jobs`` (and estimate, evaluation, budget,
  dataset read) answers 404, as for a dataset never granted.
- It changes no accounting. The ledger is append-only: the principal's charges stay, and its jobs
  already admitted (queued or running) keep running and keep their charge; a queued job cancelled
  later is refunded as always. The principal still sees its own jobs and models (those are
  visible by principal, not by grant). Granting again starts a new grant (new ``created_at``,
  the cap given then); the principal's earlier charges still count against that cap.
- No job is admitted after the revocation commits: admission checks the grant again under the
  dataset lock that revocation takes (service/domain/submission.py ``submit_job``), so a submission
  whose first check ran just before the revocation is refused (404, nothing charged).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.db.models import Dataset, Grant
from service.ledger import filter as privacy_filter
from service.ledger import totals
from service.ledger.admission import budget_of, lock_dataset
from service.pagination import Page, paginate


class GrantNotFound(Exception):
    """The dataset has no grant for this principal."""


@dataclass(frozen=True)
class GrantView:
    """One grant as owners see it."""

    dataset_id: str
    principal: str
    epsilon_cap: float | None
    created_at: datetime
    epsilon_spent: float


def list_grants(session: Session, dataset: Dataset, page: Page) -> list[Grant]:
    """One page of the dataset's grants (plus one row telling whether another page exists)."""
    query = select(Grant).where(Grant.dataset_id == dataset.id)
    return list(session.scalars(paginate(query, page, Grant.created_at, Grant.principal)).all())


def with_spend(session: Session, dataset: Dataset, grants: list[Grant]) -> list[GrantView]:
    """The grants with each principal's standing spend: ε at δ_B of its live charges (charges
    whose job has no refund), composed exactly as ``GET …/budget`` composes ``your_epsilon_spent``
    (ledger/filter.py ``spent_epsilon``), from the running totals (ledger/totals.py). One
    statement for the page's principals."""
    spent = totals.read_scopes(session, dataset.id, [g.principal for g in grants])
    budget = budget_of(dataset)
    return [
        GrantView(
            dataset_id=dataset.id,
            principal=g.principal,
            epsilon_cap=g.epsilon_cap,
            created_at=g.created_at,
            epsilon_spent=privacy_filter.spent_epsilon(budget, spent[g.principal].spent),
        )
        for g in grants
    ]


def cap_problem(dataset: Dataset, cap: float | None) -> str | None:
    """Why ``cap`` cannot be a cap of a grant on ``dataset``, or None. A cap above the
    dataset's ε_B caps nothing (the principal's charges are among the dataset's, which its
    budget already bounds), so it is refused rather than stored as if it meant something."""
    if cap is not None and cap > dataset.epsilon:
        return (
            f"epsilon_cap = {cap:g} is above this dataset's budget ε_B = {dataset.epsilon:g} "
            f"and would cap nothing: choose at most {dataset.epsilon:g}, or omit epsilon_cap "
            "for no cap"
        )
    return None


def revoke_grant(session: Session, dataset_id: str, principal: str) -> Grant:
    """Delete ``principal``'s grant on the dataset and return it as it was (module docstring:
    new jobs stop, accounting stays). Takes the dataset row lock admission takes, so it
    serialises with admissions that are already past their access check. Must run inside
    ``session.begin()``; raises :class:`GrantNotFound` if there is no such grant."""
    if lock_dataset(session, dataset_id) is None:
        raise GrantNotFound(principal)
    grant = session.scalar(
        select(Grant).where(Grant.dataset_id == dataset_id, Grant.principal == principal)
    )
    if grant is None:
        raise GrantNotFound(principal)
    session.delete(grant)
    session.flush()
    return grant
