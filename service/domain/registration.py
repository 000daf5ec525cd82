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

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import unquote, urlsplit

from sqlalchemy import delete, or_, select, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, aliased, sessionmaker

from service.data.backends import open_source, reopen_source
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
    Principal,
    SourceClaim,
    utcnow,
)
from service.errors import DatasetNotFound
from service.ids import new_id
from service.ledger.admission import lock_dataset
from service.schemas import DatasetCreate, NumericFeature
from service.settings import Settings

if TYPE_CHECKING:
    from service.data.reader import ValidationReport


class Actor(Protocol):
    """Who acts: the API's authenticated principal (only its name and admin flag matter here)."""

    @property
    def name(self) -> str: ...

    @property
    def is_admin(self) -> bool: ...


class RegistrationRefused(Exception):
    """The registration cannot be accepted; ``field`` is the request field at fault. The
    message quotes the request and counts of the owner's validation report, never a cell."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


class SourceAlreadyRegistered(Exception):
    """The source's location (or a location nesting with it) already backs a dataset, or its
    content, or the content of one of its files, already backs one of the caller's own datasets
    (one budget per data).

    ``existing_id`` is that dataset's id when the caller owns it or is an admin, else ``None``
    (another owner learns only that the location she named is registered, not by which
    dataset; content is never compared across owners)."""

    def __init__(self, existing_id: str | None) -> None:
        super().__init__(existing_id or "")
        self.existing_id = existing_id


class DatasetHasCharges(Exception):
    """The dataset cannot be withdrawn: a job was submitted on it, so the ledger holds its
    charge (append-only) and the budget it spent is final."""

    def __init__(self, dataset_id: str) -> None:
        super().__init__(dataset_id)
        self.dataset_id = dataset_id


class SourceNotOpen(Exception):
    """The dataset's source lies outside the data roots (or SQL connections) open to its owner
    on this server, so no worker could read it: refused before anything is charged. Says
    nothing about the data (the check reads only the server's configuration and the stored
    location, never the source)."""

    def __init__(self, dataset_id: str) -> None:
        super().__init__(dataset_id)
        self.dataset_id = dataset_id


class DatasetRetired(Exception):
    """The dataset was retired by an admin: its budget is final, no job is admitted."""

    def __init__(self, dataset_id: str) -> None:
        super().__init__(dataset_id)
        self.dataset_id = dataset_id


# --------------------------------------------------------------------------------------------
# Claims (alembic revisions 0005, 0012 and 0013 compute the same keys for existing datasets)
# --------------------------------------------------------------------------------------------


def location_claim(location: str) -> str:
    """The claim key of a canonical source location (``Source.location``)."""
    return "location:" + hashlib.sha256(location.encode()).hexdigest()


def _fingerprints(source: Source) -> tuple[str, dict[str, str] | None]:
    """The content fingerprint and, for a Parquet folder, each file's (one pass)."""
    both = getattr(source, "fingerprints", None)
    if callable(both):
        whole, files = both()
        return str(whole), files
    return source.fingerprint(), None


def content_claim(fingerprint: str) -> str:
    """The unscoped content key of a fingerprint (``Source.fingerprint()``): what
    ``SourceClaim.content`` holds, the same for every owner (admins compare it)."""
    return "content:" + hashlib.sha256(fingerprint.encode()).hexdigest()


def owned_content_claim(owner: str, content_key: str) -> str:
    """The claim key of ``content_key`` (:func:`content_claim`) held by ``owner``'s dataset:
    unique per owner and content, so a registration learns whether *its owner* already holds
    that content and nothing about other owners (owner names are permanent, never re-used)."""
    return "owned:" + hashlib.sha256(f"{owner}\0{content_key}".encode()).hexdigest()


def member_claims(file_fingerprints: Mapping[str, str] | None) -> list[str]:
    """The content claims of a Parquet folder's member files (``Dataset.file_fingerprints``:
    file name → fingerprint), one per distinct content, in sorted order; ``[]`` for a source
    without members.

    A member's fingerprint is ``"sha256:<hex>"`` of its bytes, the very value a single file of
    those bytes has as its ``Source.fingerprint()`` (both are computed by
    :meth:`~service.data.sources.FileSource.fingerprints`, locally and on object stores), so a
    member's key is the :func:`content_claim` a registration of that file alone would take, and
    the other way round. Alembic revision 0012 computes the same keys for existing datasets."""
    if not file_fingerprints:
        return []
    return sorted({content_claim(fp) for fp in file_fingerprints.values()})


def check_distinct_members(file_fingerprints: Mapping[str, str] | None) -> None:
    """Refuse a folder two of whose member files hold the same bytes: their rows would enter
    every job twice, so one person's row would count as two (the replace-one guarantee assumes
    each row once). Names the files (public: the owner's own listing), never their content."""
    seen: dict[str, str] = {}
    for name, fingerprint in sorted((file_fingerprints or {}).items()):
        if fingerprint in seen:
            raise RegistrationRefused(
                "source.uri",
                f"the folder holds the same file twice ({seen[fingerprint]!r} and {name!r} are "
                "byte-identical): its rows would count twice; remove one copy",
            )
        seen[fingerprint] = name


def claimed_by(session: Session, keys: list[str]) -> Dataset | None:
    """The (earliest) dataset holding any of the claim ``keys``, if one does."""
    return session.scalar(
        select(Dataset)
        .join(SourceClaim, SourceClaim.dataset_id == Dataset.id)
        .where(SourceClaim.key.in_(keys))
        .order_by(Dataset.created_at)
        .limit(1)
    )


def nested_with(session: Session, location: str) -> Dataset | None:
    """The (earliest) dataset whose location holds ``location`` (a Parquet folder or prefix
    holding this file) or lies inside it (a file of this folder): part of the same data.

    Local paths and ``s3://`` keys nest by ``/`` segments; ``sql://`` tables never nest."""
    if location.startswith("sql://"):
        return None
    parts = location.rstrip("/").split("/")
    ancestors = ["/".join(parts[:i]) for i in range(1, len(parts))]
    ancestors = [a for a in ancestors if a and not a.endswith(":") and a != "s3:/"]
    inside = Dataset.source_path.startswith(location.rstrip("/") + "/", autoescape=True)
    return session.scalar(
        select(Dataset)
        .where(or_(Dataset.source_path.in_(ancestors), inside))
        .order_by(Dataset.created_at)
        .limit(1)
    )


def _conflicting(session: Session, location: str, keys: list[str]) -> Dataset | None:
    return claimed_by(session, keys) or nested_with(session, location)


@dataclass(frozen=True)
class Claims:
    """What a registration claims: its location (global) and its contents (the whole source's
    and each member file's unscoped keys, distinct, scoped to ``owner`` when stored)."""

    owner: str
    location: str
    contents: tuple[str, ...]

    @staticmethod
    def of(owner: str, location: str, fingerprint: str, files: Mapping[str, str] | None) -> Claims:
        contents = dict.fromkeys([content_claim(fingerprint), *member_claims(files)])
        return Claims(owner, location, tuple(contents))

    @property
    def keys(self) -> list[str]:
        """The primary keys a conflicting dataset would hold: the location's and the owner's
        content keys — never another owner's."""
        return [location_claim(self.location)] + [
            owned_content_claim(self.owner, c) for c in self.contents
        ]

    def rows(self, dataset_id: str) -> list[SourceClaim]:
        location = SourceClaim(key=location_claim(self.location), dataset_id=dataset_id)
        return [location] + [
            SourceClaim(key=owned_content_claim(self.owner, c), dataset_id=dataset_id, content=c)
            for c in self.contents
        ]


def cross_owner_duplicates(session: Session, dataset_ids: list[str]) -> dict[str, list[str]]:
    """For admins: each of ``dataset_ids`` → the other datasets holding the same content (the
    whole source's or a member file's), oldest first. Only datasets of other owners can share
    content (one owner's second registration of it is refused), so these are the duplicates
    registration let through without telling anyone; an admin decides about their budgets."""
    if not dataset_ids:
        return {}
    mine, theirs = aliased(SourceClaim), aliased(SourceClaim)
    rows = session.execute(
        select(mine.dataset_id, theirs.dataset_id)
        .join(theirs, theirs.content == mine.content)
        .join(Dataset, Dataset.id == theirs.dataset_id)
        .where(mine.dataset_id.in_(dataset_ids), theirs.dataset_id != mine.dataset_id)
        .order_by(mine.dataset_id, Dataset.created_at, Dataset.id)
    ).all()
    found: dict[str, list[str]] = {}
    for dataset_id, other in rows:
        if other not in found.setdefault(dataset_id, []):
            found[dataset_id].append(other)
    return found


# Registrations take this PostgreSQL advisory lock in their inserting transaction, so the
# nesting check (a range, not a key) cannot race; SQLite transactions are serial already
# (BEGIN IMMEDIATE). The claims' primary key stays the guard for equal locations and contents.
_REGISTRATION_LOCK = 0x6470666974_01


def _serialise_registrations(session: Session) -> None:
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _REGISTRATION_LOCK})


def _already_registered(principal: Actor, existing: Dataset) -> SourceAlreadyRegistered:
    visible = principal.is_admin or existing.owner == principal.name
    return SourceAlreadyRegistered(existing.id if visible else None)


# --------------------------------------------------------------------------------------------
# Data roots open to an owner
# --------------------------------------------------------------------------------------------


def settings_for(settings: Settings, principal: Actor) -> Settings:
    """``settings`` with only the data roots and SQL connections ``principal`` may register
    from (admins: all). A connection scoped to others is then "not configured" for them, the
    answer a connection that does not exist gets."""
    if principal.is_admin or not (settings.root_owners or settings.sql_connection_owners):
        return settings
    return replace(
        settings,
        data_roots=tuple(r for r in settings.data_roots if _open_to(settings, str(r), principal)),
        object_store_roots=tuple(
            r for r in settings.object_store_roots if _open_to(settings, r, principal)
        ),
        sql_connections={
            name: url
            for name, url in settings.sql_connections.items()
            if principal.name in settings.sql_connection_owners.get(name, {principal.name})
        },
    )


def _open_to(settings: Settings, root: str, principal: Actor) -> bool:
    owners = settings.root_owners.get(root)
    return owners is None or principal.name in owners


def _inside_foreign_root(settings: Settings, location: str, principal: Actor) -> bool:
    """Whether ``location`` lies in a root scoped to others (also when reached through an
    unscoped root that contains it)."""
    if principal.is_admin:
        return False
    for root, owners in settings.root_owners.items():
        if principal.name in owners:
            continue
        if root.startswith("s3://"):
            if location == root or location.startswith(root + "/"):
                return True
        elif "://" not in location and Path(location).is_relative_to(root):
            return True
    return False


def _open(body: DatasetCreate, settings: Settings, principal: Actor) -> Source:
    """Open the source inside the roots open to ``principal``. A location in a root scoped to
    others is refused with the message a location that does not exist there would get: for a
    ``file://`` URI the check comes before any existence check; a relative path that only
    exists in such a root is "not found"."""
    uri = body.source.uri
    text = uri.strip()
    mine = settings_for(settings, principal)
    outside = RegistrationRefused("source.uri", f"{uri!r} lies outside the allowed data roots")
    not_found = RegistrationRefused("source.uri", f"{uri!r} was not found under any data root")
    is_file_uri = text.lower().startswith("file:")
    is_relative = not is_file_uri and "://" not in text
    if is_file_uri and _inside_foreign_root(settings, _file_uri_path(text), principal):
        raise outside
    if text.lower().startswith("s3://") and _inside_foreign_root(settings, text, principal):
        raise outside  # before the object store is asked whether the key exists
    if (is_file_uri or is_relative) and not mine.data_roots and settings.data_roots:
        raise outside if is_file_uri else not_found
    try:
        source = open_source(uri, mine, body.source.format)
    except SourceError as exc:
        raise RegistrationRefused("source.uri", str(exc)) from None
    if _inside_foreign_root(settings, source.location, principal):
        raise not_found if is_relative else outside
    return source


def _file_uri_path(text: str) -> str:
    """The resolved local path a ``file://`` URI names (existing or not; "" if malformed)."""
    try:
        return str(Path(unquote(urlsplit(text).path)).resolve())
    except (OSError, RuntimeError, ValueError):
        return ""


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
    source = _open(body, settings, principal)
    try:
        columns = set(source.columns())
    except SourceError as exc:
        raise RegistrationRefused("source.uri", str(exc)) from None
    _check_columns(body, columns)
    try:
        n_rows = source.count_rows()
        fingerprint, file_fingerprints = _fingerprints(source)
    except (SourceError, OSError):
        raise RegistrationRefused("source.uri", "the source could not be read") from None
    if n_rows < 2:
        raise RegistrationRefused("source.uri", "the source must have at least 2 rows")
    if body.execution == "in_database":
        check_in_database_source(source, body)
    check_distinct_members(file_fingerprints)
    claims = Claims.of(principal.name, source.location, fingerprint, file_fingerprints)
    with sessions() as session:
        existing = _conflicting(session, source.location, claims.keys)
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
            existing = _conflicting(session, source.location, claims.keys)
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
    label compile to SQL (:mod:`service.data.sql_encoding`) and a binary label; refused with
    422 naming the field otherwise. Reads no row (compiling looks at the schema only)."""
    from service.data.sql_encoding import InDatabaseUnsupported, compile_rows
    from service.data.sql_source import SqlSource

    if not isinstance(source, SqlSource) or source.dialect != "postgresql":
        raise RegistrationRefused(
            "execution", "in-database execution needs a PostgreSQL table (sql://connection/table)"
        )
    if body.label.type != "binary":
        raise RegistrationRefused("execution", "in-database execution supports binary labels")
    encoder = Encoder(features=body.features, fit_intercept=True)
    try:
        compile_rows(
            source.table,
            source.families(),
            encoder,
            body.label,
            max_cell_bytes=source.limits.max_cell_bytes,
        )
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


def list_withdrawals(session: Session) -> list[DatasetWithdrawal]:
    """Every withdrawal, oldest first (the admins' audit view)."""
    order = (DatasetWithdrawal.withdrawn_at, DatasetWithdrawal.id)
    return list(session.scalars(select(DatasetWithdrawal).order_by(*order)))


# --------------------------------------------------------------------------------------------
# Is the source still open? (estimate and submission, before anything is charged)
# --------------------------------------------------------------------------------------------


class _Owner:
    """A dataset's owner as an :class:`Actor` (name and admin flag from ``principals``)."""

    def __init__(self, name: str, is_admin: bool) -> None:
        self._name, self._admin = name, is_admin

    @property
    def name(self) -> str:
        return self._name

    @property
    def is_admin(self) -> bool:
        return self._admin


def location_open(settings: Settings, source_format: str, location: str) -> bool:
    """Whether a registered ``location`` lies in the data roots (or SQL connections) of
    ``settings`` — the check a worker's :func:`~service.data.backends.reopen_source` makes
    (called here, not re-implemented), without reading the source: a local path or ``s3://``
    key must lie inside a configured root; a ``sql://`` table's connection must be configured
    (asking the database whether the table exists is left to the worker)."""
    if source_format == "sql" or location.startswith("sql://"):
        from service.data.sql_source import parse_sql_uri

        try:
            return parse_sql_uri(location).connection in settings.sql_connections
        except SourceError:
            return False
    try:
        reopen_source(source_format, location, settings)
    except (SourceError, OSError, ValueError):
        return False
    return True


def source_open_to_owner(session: Session, dataset: Dataset, settings: Settings) -> bool:
    """Whether ``dataset``'s stored location lies in the roots open to its owner on this server
    (:func:`settings_for`; a root scoped to other owners does not count, admins may use every
    root). Reads the configuration and the ``principals`` row, never the source."""
    role = session.scalar(select(Principal.role).where(Principal.name == dataset.owner))
    owner = _Owner(dataset.owner, role == "admin")
    return location_open(
        settings_for(settings, owner), dataset.source_format, dataset.source_path
    ) and not _inside_foreign_root(settings, dataset.source_path, owner)


def ensure_source_open(session: Session, dataset_id: str, settings: Settings | None) -> None:
    """Raise :class:`SourceNotOpen` if the dataset's source lies outside the roots open to its
    owner (:func:`source_open_to_owner`). Job estimates and submissions call it before
    anything is charged: every job on such a dataset would fail (refunded) at the worker's
    roots check. ``settings`` None (a caller without the app's settings): nothing is checked."""
    if settings is None:
        return
    dataset = session.get(Dataset, dataset_id)
    if dataset is not None and not source_open_to_owner(session, dataset, settings):
        raise SourceNotOpen(dataset_id)
