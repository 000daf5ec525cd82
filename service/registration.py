"""Registering and retiring datasets: the service functions behind ``POST /v1/datasets`` and
``POST /v1/datasets/{id}/retire``. Routes only translate HTTP; these raise domain errors.

Guarantees
----------
- **Refusals come before a budget exists.** Registration opens the source inside the roots the
  owner may use, checks the declared columns, fixes ``n`` and the content fingerprint, and parses
  the *whole* source with the worker's own row-local reader
  (:func:`service.data.reader.validate_source`). Whatever refuses the source (unreadable,
  too short, strict mode) refuses it here, before any dataset row or budget exists.
- **One budget per data.** A dataset claims its source's canonical location and its content
  fingerprint (:class:`~service.db.models.SourceClaim`, primary key = the claim). Claims are
  never deleted, also not when a dataset is retired, so the same location, or the same content
  under another path, never backs a second dataset: the service never hands out a second budget
  for the same data. A location nested in a registered one (a file of a registered Parquet
  folder or ``s3://`` prefix), or holding one, is the same data too. A Parquet folder (local or
  an ``s3://`` prefix) also claims the content of *each member file*
  (:func:`member_claims`): a member's fingerprint is the plain SHA-256 of its bytes, computed
  exactly as a single file's, so the same bytes give the same key whether they are registered
  as a file or inside a folder. A file copied out of a registered folder, a folder holding a
  subset of a registered folder's files, or a folder holding a registered file (or a
  registered folder's member) is refused in either order. The claims are inserted in
  the dataset's own transaction (which re-checks nesting under a PostgreSQL advisory lock;
  SQLite transactions are serial), so of concurrent registrations of one source exactly one
  commits; the others get :class:`SourceAlreadyRegistered`. Limit: equality is byte equality
  (per source kind) — a modified copy (one row changed, re-encoded, re-ordered, another format)
  is new data. Registration is a trust boundary for owners. Folders registered before their
  per-file fingerprints were stored (``Dataset.file_fingerprints`` NULL, alembic revision 0009)
  hold no member claims (revision 0012 backfills the others); they keep their location, nesting
  and whole-content claims.
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
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import unquote, urlsplit

from sqlalchemy import or_, select, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from service.data.encoding import Encoder
from service.data.source import Source
from service.data.sources import SourceError, open_source
from service.db.models import Dataset, SourceClaim, utcnow
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
    """The source's location or content, or the content of one of its files, already backs a
    dataset (one budget per data).

    ``existing_id`` is that dataset's id when the caller owns it or is an admin, else ``None``
    (others learn that the data is registered, not by which dataset)."""

    def __init__(self, existing_id: str | None) -> None:
        super().__init__(existing_id or "")
        self.existing_id = existing_id


class DatasetRetired(Exception):
    """The dataset was retired by an admin: its budget is final, no job is admitted."""

    def __init__(self, dataset_id: str) -> None:
        super().__init__(dataset_id)
        self.dataset_id = dataset_id


# --------------------------------------------------------------------------------------------
# Claims (alembic revisions 0005 and 0012 compute the same keys for existing datasets)
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
    """The claim key of a content fingerprint (``Source.fingerprint()``)."""
    return "content:" + hashlib.sha256(fingerprint.encode()).hexdigest()


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


def register_dataset(
    *,
    sessions: sessionmaker[Session],
    principal: Actor,
    body: DatasetCreate,
    settings: Settings,
) -> Dataset:
    """Register ``body``'s source for ``principal`` (an owner or admin) and return the new row.

    Raises :class:`RegistrationRefused` (422) or :class:`SourceAlreadyRegistered` (409).
    Order: open (roots), columns, ``n`` and fingerprints (the whole source's and, for a Parquet
    folder, each member's), the claim check (cheap, so a duplicate is refused before the whole
    source is parsed), validation of the whole source, strict mode, then one transaction
    inserting the dataset and all its claims (location, content, members' contents).
    """
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
    check_distinct_members(file_fingerprints)
    # Distinct keys (the location's and the whole content's may coincide with a member's).
    claims = list(
        dict.fromkeys(
            [
                location_claim(source.location),
                content_claim(fingerprint),
                *member_claims(file_fingerprints),
            ]
        )
    )
    with sessions() as session:
        existing = _conflicting(session, source.location, claims)
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
    if body.strict:
        check_strict(body, report)

    dataset = Dataset(
        id=new_id("ds"),
        name=body.name,
        owner=principal.name,
        source_uri=body.source.uri,
        source_path=source.location,
        source_format=source.format,
        fingerprint=fingerprint,
        file_fingerprints=file_fingerprints,
        label=body.label.model_dump(mode="json"),
        features=[f.model_dump(mode="json") for f in body.features],
        n_rows=n_rows,
        n_features=Encoder(features=body.features, fit_intercept=False).n_features,
        epsilon=body.budget.epsilon,
        delta=body.budget.delta,
        validation=report.to_json(),
        created_at=utcnow(),
    )
    try:
        with sessions.begin() as session:
            _serialise_registrations(session)
            existing = _conflicting(session, source.location, claims)
            if existing is not None:
                raise _already_registered(principal, existing)
            session.add(dataset)
            session.flush()
            session.add_all(SourceClaim(key=key, dataset_id=dataset.id) for key in claims)
    except IntegrityError:
        # A concurrent registration of the same location or content committed first.
        with sessions() as session:
            existing = claimed_by(session, claims)
        raise (
            _already_registered(principal, existing)
            if existing is not None
            else SourceAlreadyRegistered(None)
        ) from None
    return dataset


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
        declared = (
            "the declared classes"
            if body.label.type == "categorical"
            else "the declared positive and negative values"
        )
        raise RegistrationRefused(
            "label.classes" if body.label.type == "categorical" else "label.positive",
            f"strict: {label['outside_declared']} of {rows} labels are none of {declared}",
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
