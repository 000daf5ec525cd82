"""Registering and retiring datasets: the service functions behind ``POST /v1/datasets`` and
``POST /v1/datasets/{id}/retire``. Routes only translate HTTP; these raise domain errors.

Guarantees
----------
- **Refusals come before a budget exists.** Registration opens the source inside the roots the
  owner may use, checks the declared columns, fixes ``n`` and the content fingerprint, and parses
  the *whole* source with the worker's own row-local reader
  (:func:`service.data.reader.validate_source`). Whatever refuses the source (unreadable,
  too short, strict mode) refuses it here, before any dataset row or budget exists.
- **One budget per data, per owner.** A dataset claims its source's canonical location and its
  content fingerprint (:class:`~service.db.models.SourceClaim`, primary key = the claim). A
  *location* claim is global: the same path, object key or table never backs a second dataset,
  whoever registers it, and a location nested in a registered one (a file of a registered
  Parquet folder or ``s3://`` prefix), or holding one, is the same data too. A *content* claim
  is scoped to the owner (:func:`owned_content_claim`): the same content under another path
  never backs a second dataset of the same owner, so an owner never gets a second budget for
  her own data. A Parquet folder (local or an ``s3://`` prefix) also claims the content of
  *each member file* (:func:`member_claims`): a member's fingerprint is the plain SHA-256 of
  its bytes, computed exactly as a single file's, so the same bytes give the same key whether
  they are registered as a file or inside a folder. A file copied out of one's own registered
  folder, a folder holding a subset of one's registered folder's files, or a folder holding
  one's registered file is refused in either order. The claims are inserted in the dataset's
  own transaction (which re-checks nesting under a PostgreSQL advisory lock; SQLite
  transactions are serial), so of concurrent registrations of one source exactly one commits;
  the others get :class:`SourceAlreadyRegistered`. Limit: equality is byte equality (per
  source kind) — a modified copy (one row changed, re-encoded, re-ordered, another format) is
  new data. Folders registered before their per-file fingerprints were stored
  (``Dataset.file_fingerprints`` NULL, alembic revision 0009) hold no member claims.
- **Registration is no oracle on other owners' data** (issue 22). Content equality is checked
  only against the registrant's own datasets: whether another owner registered the same bytes
  changes nothing in the answer, its status, its body or the work done before it (the claims
  of every registration are the same rows, whatever other owners hold). Were it otherwise, an
  owner who knows n − 1 rows of another owner's table could register each candidate for the
  last row in her own database and read that row off the one answer that is a 409. What a 409
  tells another owner is only that the *location* she named (a path, key or table she can
  already reach) is registered. A content duplicate across owners registers; each content
  claim keeps the unscoped content key (``SourceClaim.content``), so admins see the datasets
  that share content (:func:`cross_owner_duplicates`, the ``duplicates`` field of their dataset
  view) and decide about the budgets (e.g. retire one).
- **Withdrawal forgives a mistake that cost nothing.** An owner (or an admin) may withdraw a
  dataset on which no job was ever submitted (:func:`withdraw_dataset`): its row, grants and
  claims go, a :class:`~service.db.models.DatasetWithdrawal` record stays for admins. Once any
  job was charged, the ledger is append-only and the dataset stays (:class:`DatasetHasCharges`).
- **Scoped roots.** ``DPFIT_DATA_ROOTS`` entries may be scoped to owners
  (:attr:`Settings.root_owners`). An owner resolves URIs only inside the roots open to them, and
  a location inside a root scoped to others is refused with the same message as any location
  outside the roots (it does not tell whether the file exists). Admins may use every root.
  ``DPFIT_SQL_CONNECTIONS`` entries may be scoped the same way
  (:attr:`Settings.sql_connection_owners`): for anyone else the connection is "not configured",
  the answer a name the operator never configured gets.
- **The validation report** is stored with the dataset; who may see it is the API's concern
  (owner and admins only).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import delete, select, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from service.data.encoding import Encoder
from service.data.source import Source
from service.data.sources import SourceError
from service.db.models import (
    Charge,
    Dataset,
    DatasetWithdrawal,
    Grant,
    Job,
    LedgerTotal,
    SourceClaim,
    utcnow,
)
from service.domain.claims import (
    Claims,
    check_distinct_members,
    claimed_by,
    conflicting,
    fingerprints_of,
)
from service.domain.principals import Actor
from service.domain.roots import open_for_registration
from service.errors import (
    DatasetHasCharges,
    DatasetNotFound,
    DatasetRetired,
    RegistrationRefused,
    SourceAlreadyRegistered,
)
from service.ids import new_id
from service.ledger.admission import lock_dataset
from service.schemas import DatasetCreate, NumericFeature
from service.settings import Settings

if TYPE_CHECKING:
    from service.data.reader import ValidationReport


_REGISTRATION_LOCK = 0x6470666974_01


def _serialise_registrations(session: Session) -> None:
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _REGISTRATION_LOCK})


def _already_registered(principal: Actor, existing: Dataset) -> SourceAlreadyRegistered:
    visible = principal.is_admin or existing.owner == principal.name
    return SourceAlreadyRegistered(existing.id if visible else None)


# --------------------------------------------------------------------------------------------
# Registration
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Prepared:
    """A source opened, counted, fingerprinted, checked against the claims and validated:
    everything a registration decides before it writes."""

    source: Source
    n_rows: int
    fingerprint: str
    file_fingerprints: dict[str, str] | None
    claims: Claims
    report: ValidationReport
    refusal: RegistrationRefused | None  # the label rule / strict mode's answer, if it refuses


@dataclass(frozen=True)
class RegistrationCheck:
    """What ``POST /v1/datasets/validate`` answers: the validation report a registration of the
    body would store and whether it would register (``refusal``: why not)."""

    n_rows: int
    n_features: int
    report: ValidationReport
    refusal: RegistrationRefused | None


def _prepare(
    sessions: sessionmaker[Session], principal: Actor, body: DatasetCreate, settings: Settings
) -> Prepared:
    """Open (roots), columns, ``n`` and fingerprints (the whole source's and, for a Parquet
    folder, each member's), the claim check (cheap, so a duplicate is refused before the whole
    source is parsed), validation of the whole source, then the label rule (its refusal is
    returned, not raised, so a dry run can show it beside the report)."""
    source = open_for_registration(body, settings, principal)
    try:
        columns = set(source.columns())
    except SourceError as exc:
        raise RegistrationRefused("source.uri", str(exc)) from None
    _check_columns(body, columns)
    try:
        n_rows = source.count_rows()
        fingerprint, file_fingerprints = fingerprints_of(source)
    except (SourceError, OSError):
        raise RegistrationRefused("source.uri", "the source could not be read") from None
    if n_rows < 2:
        raise RegistrationRefused("source.uri", "the source must have at least 2 rows")
    if body.execution == "in_database":
        check_in_database_source(source, body)
    check_distinct_members(file_fingerprints)
    claims = Claims.of(principal.name, source.location, fingerprint, file_fingerprints)
    with sessions() as session:
        existing = conflicting(session, source.location, claims.keys)
        if existing is not None:
            raise _already_registered(principal, existing)

    from service.data.reader import validate_source

    try:
        report = validate_source(source, body.features, body.label)
        unchanged = source.fingerprint() == fingerprint
    except SourceError as exc:  # its messages never quote a cell
        raise RegistrationRefused("source.uri", str(exc)) from None
    except OSError:
        raise RegistrationRefused("source.uri", "the source could not be read") from None
    if not unchanged or report.rows != n_rows:
        raise RegistrationRefused(
            "source.uri", "the source changed while it was being registered; try again"
        )
    return Prepared(
        source=source,
        n_rows=n_rows,
        fingerprint=fingerprint,
        file_fingerprints=file_fingerprints,
        claims=claims,
        report=report,
        refusal=label_refusal(body, report),
    )


def check_registration(
    *,
    sessions: sessionmaker[Session],
    principal: Actor,
    body: DatasetCreate,
    settings: Settings,
) -> RegistrationCheck:
    """A dry run of :func:`register_dataset`: the same checks in the same order and the same
    validation report, nothing written. Raises what registration raises before the report
    (:class:`RegistrationRefused`, :class:`SourceAlreadyRegistered`); the label rule's or
    strict mode's refusal comes back in :attr:`RegistrationCheck.refusal` with the report."""
    prepared = _prepare(sessions, principal, body, settings)
    return RegistrationCheck(
        n_rows=prepared.n_rows,
        n_features=Encoder(features=body.features, fit_intercept=False).n_features,
        report=prepared.report,
        refusal=prepared.refusal,
    )


def register_dataset(
    *,
    sessions: sessionmaker[Session],
    principal: Actor,
    body: DatasetCreate,
    settings: Settings,
) -> Dataset:
    """Register ``body``'s source for ``principal`` (an owner or admin) and return the new row.

    Raises :class:`RegistrationRefused` (422) or :class:`SourceAlreadyRegistered` (409).
    Order (:func:`_prepare`): open (roots), columns, ``n`` and fingerprints, the claim check,
    validation of the whole source, the label rule (:func:`label_refusal`), then one
    transaction inserting the dataset and all its claims (location, the owner's contents).
    """
    prepared = _prepare(sessions, principal, body, settings)
    if prepared.refusal is not None:
        raise prepared.refusal
    source, claims = prepared.source, prepared.claims
    dataset = Dataset(
        id=new_id("ds"),
        name=body.name,
        owner=principal.name,
        source_uri=body.source.uri,
        source_path=source.location,
        source_format=source.format,
        fingerprint=prepared.fingerprint,
        file_fingerprints=prepared.file_fingerprints,
        label=body.label.model_dump(mode="json"),
        features=[f.model_dump(mode="json") for f in body.features],
        n_rows=prepared.n_rows,
        n_features=Encoder(features=body.features, fit_intercept=False).n_features,
        epsilon=body.budget.epsilon,
        delta=body.budget.delta,
        validation=prepared.report.to_json(),
        execution=body.execution,
        created_at=utcnow(),
    )
    try:
        with sessions.begin() as session:
            _serialise_registrations(session)
            existing = conflicting(session, source.location, claims.keys)
            if existing is not None:
                raise _already_registered(principal, existing)
            session.add(dataset)
            session.flush()
            session.add_all(claims.rows(dataset.id))
    except IntegrityError:
        # A concurrent registration of the same location or (the owner's) content committed.
        with sessions() as session:
            existing = claimed_by(session, claims.keys)
        raise (
            _already_registered(principal, existing)
            if existing is not None
            else SourceAlreadyRegistered(None)
        ) from None
    return dataset


def check_in_database_source(source: Source, body: DatasetCreate) -> None:
    """``"execution": "in_database"`` needs a PostgreSQL table whose declared columns and
    label compile to SQL (:mod:`service.data.sql_encoding`) and a binary or categorical label
    (its class index compiled to SQL); refused with 422 naming the field otherwise. Reads no
    row (compiling looks at the schema only)."""
    from service.data.sql_encoding import InDatabaseUnsupported, compile_rows
    from service.data.sql_source import SqlSource
    from service.domain.execution import check_in_database_width

    if not isinstance(source, SqlSource) or source.dialect != "postgresql":
        raise RegistrationRefused(
            "execution", "in-database execution needs a PostgreSQL table (sql://connection/table)"
        )
    if body.label.type not in ("binary", "categorical"):
        raise RegistrationRefused(
            "execution", "in-database execution supports binary and categorical labels"
        )
    encoder = Encoder(features=body.features, fit_intercept=True)
    try:
        compile_rows(
            source.table,
            source.encoding_families(),
            encoder,
            body.label,
            max_cell_bytes=source.limits.max_cell_bytes,
        )
        check_in_database_width(encoder.dimension)
    except InDatabaseUnsupported as exc:
        raise RegistrationRefused(exc.field, str(exc)) from None


def _check_columns(body: DatasetCreate, columns: set[str]) -> None:
    if body.label.column not in columns:
        raise RegistrationRefused(
            "label.column", f"column {body.label.column!r} is not in the source"
        )
    names = [f.name for f in body.features]
    for i, name in enumerate(names):
        if name not in columns:
            raise RegistrationRefused(f"features.{i}.name", f"column {name!r} is not in the source")
        if name == body.label.column:
            raise RegistrationRefused(
                f"features.{i}.name", "the label column cannot also be a feature"
            )
        if name in names[:i]:
            raise RegistrationRefused(f"features.{i}.name", f"column {name!r} is listed twice")


MOSTLY_OUTSIDE = 0.5
"""The label rule's threshold: a share of the non-empty label cells strictly above it that are
outside the declared values (or, for a numeric label, not numbers) refuses the registration
unless ``strict`` is false."""


def label_refusal(body: DatasetCreate, report: ValidationReport) -> RegistrationRefused | None:
    """What the body's ``strict`` setting says about the validated source (``None``: register).

    - ``strict: false`` — nothing is refused; the counts are in the report.
    - ``strict`` omitted (the default) — **the label rule**: refused when *most* labels are
      wrong, i.e. when more than :data:`MOSTLY_OUTSIDE` (half) of the label cells that are not
      empty are outside the declared values (binary: neither ``positive`` nor ``negative``;
      categorical: none of ``classes``), or for a numeric label are not numbers. That is the
      mark of a declaration that does not describe the column (a typo in the value YAML reads
      as a boolean, ``positive: yes``, or the wrong column), which would otherwise register and
      lock the source's only budget to a dataset whose jobs learn nothing. Empty cells are not
      counted either way (they are missing labels, not wrong ones).
    - ``strict: true`` — :func:`check_strict`: refused on any label outside the declared values
      and any non-number in a numeric feature or label.

    The message gives counts from the report (the owner's own data, shown to the owner only)
    and names the label field at fault."""
    if body.strict is False:
        return None
    if body.strict:
        try:
            check_strict(body, report)
        except RegistrationRefused as refusal:
            return refusal
        return None
    counts = report_counts(report)
    label = counts["label"]
    present = counts["rows"] - label["missing"]
    wrong = label["unparseable"] if body.label.type == "numeric" else label["outside_declared"]
    if present <= 0 or wrong <= MOSTLY_OUTSIDE * present:
        return None
    if body.label.type == "numeric":
        return RegistrationRefused(
            "label.column",
            f"{wrong} of {present} non-empty label cells are not numbers: is this the label "
            'column? Send "strict": false to register it anyway',
        )
    field, declared = _declared_label(body)
    return RegistrationRefused(
        field,
        f"{wrong} of {present} non-empty labels are none of {declared}: most labels would "
        "belong to no declared class (a typo, or YAML reading yes/no as booleans?). Fix the "
        "declared values, check with `dpfit datasets register --dry-run`, or send "
        '"strict": false to register it anyway',
    )


def _declared_label(body: DatasetCreate) -> tuple[str, str]:
    if body.label.type == "categorical":
        return "label.classes", "the declared classes"
    return "label.positive", "the declared positive and negative values"


def check_strict(body: DatasetCreate, report: ValidationReport) -> None:
    """Strict mode: refuse label values outside the declared set (binary/categorical), and
    non-empty cells that are not numbers in a numeric feature or a numeric label.

    The message gives counts from the report (the owner's own data, shown to the owner only)."""
    counts = report_counts(report)
    label = counts["label"]
    rows = counts["rows"]
    if body.label.type == "numeric":
        if label["unparseable"] > 0:
            raise RegistrationRefused(
                "label.column",
                f"strict: {label['unparseable']} of {rows} label cells are not numbers",
            )
    elif label["outside_declared"] > 0:
        field, declared = _declared_label(body)
        raise RegistrationRefused(
            field, f"strict: {label['outside_declared']} of {rows} labels are none of {declared}"
        )
    for i, feature in enumerate(body.features):
        if not isinstance(feature, NumericFeature):
            continue
        bad = counts["features"][i]["unparseable"]
        if bad > 0:
            raise RegistrationRefused(
                f"features.{i}.name",
                f"strict: {bad} of {rows} non-empty cells of numeric column {feature.name!r} "
                "are not numbers",
            )


def report_counts(report: ValidationReport) -> dict[str, Any]:
    """The report as the API's ``ValidationOut`` shape: rows, features (a list in declared
    order, each with its ``name``), label."""
    data = report.to_json()
    return {
        "rows": data["rows"],
        "features": [{"name": name, **c} for name, c in data["features"].items()],
        "label": data["label"],
    }


def stored_report_counts(stored: dict[str, Any]) -> dict[str, Any]:
    """A dataset's stored report (``Dataset.validation``) in the API's ``ValidationOut`` shape."""
    from service.data.reader import ValidationReport

    return report_counts(ValidationReport.from_json(stored))


# --------------------------------------------------------------------------------------------
# Retirement
# --------------------------------------------------------------------------------------------


def retire_dataset(
    *, sessions: sessionmaker[Session], principal: Actor, dataset_id: str
) -> Dataset:
    """Retire a dataset (admins only; :class:`DatasetNotFound` for everyone else).

    Takes the dataset row lock that admission takes, so no job is admitted after this commits;
    the budget spent so far is final. The dataset keeps its claims: the same location or content
    can never be registered again. Idempotent (a second call keeps the first ``retired_at``).
    """
    if not principal.is_admin:
        raise DatasetNotFound(dataset_id)
    with sessions.begin() as session:
        dataset = lock_dataset(session, dataset_id)
        if dataset is None:
            raise DatasetNotFound(dataset_id)
        if dataset.retired_at is None:
            dataset.retired_at = utcnow()
    return dataset


def ensure_not_retired(session: Session, dataset_id: str) -> None:
    """Raise :class:`DatasetRetired` if the dataset is retired. Called by job submission inside
    the admission transaction, after the dataset row is locked, so it races safely with
    :func:`retire_dataset`."""
    retired_at = session.scalar(select(Dataset.retired_at).where(Dataset.id == dataset_id))
    if retired_at is not None:
        raise DatasetRetired(dataset_id)


# --------------------------------------------------------------------------------------------
# Withdrawal
# --------------------------------------------------------------------------------------------


def withdraw_dataset(
    *, sessions: sessionmaker[Session], principal: Actor, dataset_id: str
) -> DatasetWithdrawal:
    """Withdraw a dataset on which no job was ever submitted: its owner's (or an admin's)
    way back from a registration mistake (a wrong label value, the wrong column, the wrong
    budget) that would otherwise lock the source's only budget.

    Under the dataset row lock that admission takes (so no job is admitted meanwhile, and one
    admitted before makes this refuse): if any job or ledger row names the dataset, raises
    :class:`DatasetHasCharges` (the ledger is append-only and the budget spent is final — an
    admin may retire it instead). Otherwise deletes its claims (location and content: the
    source may be registered again, corrected), its grants, its ledger totals and the dataset
    row, and records a :class:`~service.db.models.DatasetWithdrawal` for admins — all in one
    transaction. :class:`DatasetNotFound` for anyone but its owner and admins."""
    with sessions.begin() as session:
        dataset = lock_dataset(session, dataset_id)
        if dataset is None or not (principal.is_admin or dataset.owner == principal.name):
            raise DatasetNotFound(dataset_id)
        job = session.scalar(select(Job.id).where(Job.dataset_id == dataset_id).limit(1))
        charge = session.scalar(select(Charge.id).where(Charge.dataset_id == dataset_id).limit(1))
        if job is not None or charge is not None:
            raise DatasetHasCharges(dataset_id)
        record = DatasetWithdrawal(
            dataset_id=dataset.id,
            name=dataset.name,
            owner=dataset.owner,
            source_uri=dataset.source_uri,
            source_path=dataset.source_path,
            fingerprint=dataset.fingerprint,
            n_rows=dataset.n_rows,
            epsilon=dataset.epsilon,
            delta=dataset.delta,
            registered_at=dataset.created_at,
            withdrawn_by=principal.name,
            withdrawn_at=utcnow(),
        )
        for table in (SourceClaim, Grant, LedgerTotal):
            session.execute(delete(table).where(table.dataset_id == dataset_id))
        session.delete(dataset)
        session.add(record)
    return record


def list_withdrawals(
    session: Session, limit: int, after: int | None = None
) -> list[DatasetWithdrawal]:
    """One page of withdrawals, oldest first (the admins' audit view): up to ``limit`` + 1 rows
    (the extra one says another page exists) whose id follows ``after``. Ids grow with the
    withdrawal (one row inserted per withdrawal), so the page is a keyset range of one query."""
    query = select(DatasetWithdrawal)
    if after is not None:
        query = query.where(DatasetWithdrawal.id > after)
    return list(session.scalars(query.order_by(DatasetWithdrawal.id).limit(limit + 1)))
