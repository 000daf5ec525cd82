"""One budget per data: the claims a dataset makes on its source (alembic revisions 0005, 0012
and 0013 compute the same keys for existing datasets).

A dataset claims its source's canonical location (global) and its content fingerprint (scoped
to its owner), and a Parquet folder the content of each member file; the rules and their
reasons are in :mod:`service.domain.registration`'s docstring, which inserts these claims in
the dataset's own transaction.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass

from sqlalchemy import or_, select
from sqlalchemy.orm import Session, aliased

from service.data.source import Source
from service.db.models import Dataset, SourceClaim
from service.errors import RegistrationRefused

# --------------------------------------------------------------------------------------------
# Claims (alembic revisions 0005, 0012 and 0013 compute the same keys for existing datasets)
# --------------------------------------------------------------------------------------------


def location_claim(location: str) -> str:
    """The claim key of a canonical source location (``Source.location``)."""
    return "location:" + hashlib.sha256(location.encode()).hexdigest()


def fingerprints_of(source: Source) -> tuple[str, dict[str, str] | None]:
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


def conflicting(session: Session, location: str, keys: list[str]) -> Dataset | None:
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
