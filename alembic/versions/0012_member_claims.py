"""source_claims: every member file of a registered Parquet folder claims its content

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-23 07:00:00

A Parquet folder (local or an ``s3://`` prefix) claimed its location and its whole-content
fingerprint, not its member files' contents: a member copied out as a single file, a folder
holding a subset of a registered folder's files, or a folder holding a registered file got a
second budget for the same rows. The service now claims each member's content at registration
(``service/domain/registration.py:member_claims``): ``"content:" + sha256(member fingerprint)``, the
very key a single file of those bytes claims (a member's fingerprint is ``sha256:<hex>`` of its
bytes, computed as a single file's).

This revision backfills those claims for the datasets already registered, from
``datasets.file_fingerprints`` (NULL for single files, SQL tables and folders registered before
revision 0009: nothing to claim; those folders keep only their location, nesting and
whole-content claims — their members cannot be known without reading the data, which a
migration does not do).

- **Idempotent.** A key already present in ``source_claims`` is never inserted again, so running
  the backfill on a database that already holds some (or all) of the claims inserts only the
  missing ones.
- **Existing duplicates never fail it.** Datasets are visited in registration order
  (``created_at``, then ``id``); each member key goes to the earliest dataset that holds it, and
  a key already claimed (by any dataset, e.g. a single file registered before or after the
  folder) keeps its holder: claims are never moved or deleted. Unlike revision 0005, no dataset
  is retired: two datasets that already share a member file (registered before this fix) are
  both left as they are — their budgets, charges, jobs and models unchanged — and only new
  registrations of that content are refused from now on.
- **Both backends.** Plain SQLAlchemy Core reads and inserts, on SQLite and PostgreSQL.

The downgrade keeps the claims: the older service reads them as any other content claim, so a
copy of a member file stays refused (stricter, never looser); deleting them would re-open the
budget reset this revision closes.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

_datasets = sa.table(
    "datasets",
    sa.column("id", sa.String()),
    sa.column("file_fingerprints", sa.JSON()),
    sa.column("created_at", sa.DateTime(timezone=True)),
)
_claims = sa.table(
    "source_claims",
    sa.column("key", sa.String()),
    sa.column("dataset_id", sa.String()),
    sa.column("created_at", sa.DateTime(timezone=True)),
)


def _content_key(fingerprint: str) -> str:
    """``service.domain.claims.content_claim`` (a migration does not import the service)."""
    return "content:" + hashlib.sha256(fingerprint.encode()).hexdigest()


def upgrade() -> None:
    bind = op.get_bind()
    taken: set[str] = set(bind.scalars(sa.select(_claims.c.key)))
    rows = bind.execute(
        sa.select(_datasets.c.id, _datasets.c.file_fingerprints).order_by(
            _datasets.c.created_at, _datasets.c.id
        )
    ).all()
    now = datetime.now(UTC)
    new: list[dict[str, Any]] = []
    for dataset_id, files in rows:
        if not isinstance(files, dict):  # SQL NULL or JSON null: no members
            continue
        for key in sorted({_content_key(str(fp)) for fp in files.values()}):
            if key in taken:
                continue
            taken.add(key)
            new.append({"key": key, "dataset_id": dataset_id, "created_at": now})
    if new:
        bind.execute(sa.insert(_claims), new)


def downgrade() -> None:
    """Keeps the member claims (see the module docstring)."""
