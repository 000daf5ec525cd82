"""Which data roots and SQL connections are open to an owner, and whether a registered
dataset's source still is (:func:`ensure_source_open`: checked at estimate and submission,
before anything is charged, from the server's configuration and the stored location only).

``DPFIT_DATA_ROOTS`` and ``DPFIT_SQL_CONNECTIONS`` entries may be scoped to owners; a location
inside a root scoped to others is refused with the same message as any location outside the
roots (it does not tell whether the file exists). Admins may use every root.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from urllib.parse import unquote, urlsplit

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.data.backends import open_source, reopen_source
from service.data.source import Source
from service.data.sources import SourceError
from service.db.models import Dataset, Principal
from service.domain.principals import Actor
from service.errors import RegistrationRefused, SourceNotOpen
from service.schemas import DatasetCreate
from service.settings import Settings

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


def open_for_registration(body: DatasetCreate, settings: Settings, principal: Actor) -> Source:
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
        from service.data.sql_uri import parse_sql_uri

        try:
            return parse_sql_uri(location).connection in settings.sql_connections
        except SourceError:
            return False
    try:
        reopen_source(source_format, location, settings)
    except (SourceError, OSError, ValueError):
        return False
    return True


def owner_is_admin(session: Session, owner: str) -> bool:
    """Whether the dataset owner ``owner`` is an admin (who may use every root)."""
    return session.scalar(select(Principal.role).where(Principal.name == owner)) == "admin"


def owner_settings(settings: Settings, owner: str, is_admin: bool) -> Settings:
    """``settings`` narrowed to the roots and connections ``owner`` may read
    (:func:`settings_for`). A worker reopens a dataset's source with these, so every read of
    it — each open checked when it happens (service/data/confined_files.py) — stays inside its
    owner's roots, as registration did."""
    return settings_for(settings, _Owner(owner, is_admin))


def open_to_owner(
    settings: Settings, source_format: str, location: str, owner: str, is_admin: bool
) -> bool:
    """Whether a stored ``location`` lies in the roots open to ``owner`` on this server (a root
    scoped to other owners does not count, admins may use every root), from the configuration
    only."""
    actor = _Owner(owner, is_admin)
    return location_open(
        settings_for(settings, actor), source_format, location
    ) and not _inside_foreign_root(settings, location, actor)


def source_open_to_owner(session: Session, dataset: Dataset, settings: Settings) -> bool:
    """Whether ``dataset``'s stored location lies in the roots open to its owner on this server
    (:func:`open_to_owner`). Reads the configuration and the ``principals`` row, never the
    source."""
    admin = owner_is_admin(session, dataset.owner)
    return open_to_owner(settings, dataset.source_format, dataset.source_path, dataset.owner, admin)


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
