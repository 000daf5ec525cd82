"""Migration 0012 backfills the member claims of registered Parquet folders, on SQLite and
PostgreSQL: idempotent, and it never fails on datasets that already share a member file."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic.config import Config

from alembic import command
from service.cli import ROOT
from service.db.session import make_engine
from service.domain.claims import content_claim, location_claim, member_claims


def _alembic(url: str) -> Config:
    config = Config(str(ROOT / "alembic.ini"))
    config.set_main_option("script_location", str(ROOT / "alembic"))
    config.attributes["url"] = url
    return config


def _database_at_0011(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> tuple[str, Config]:
    """A fresh database on ``backend`` migrated to 0011 (before member claims), and its config."""
    if backend == "postgres":
        url = str(request.getfixturevalue("private_postgres_database"))
    else:
        url = f"sqlite:///{tmp_path / 'legacy.db'}"
    config = _alembic(url)
    command.upgrade(config, "0011")
    return url, config


def _legacy_dataset(
    conn: sa.Connection, dataset_id: str, path: str, whole: str, files: Any, at: datetime
) -> None:
    """A datasets row as an earlier release stored it (``files``: the member fingerprints,
    None, or the string "null" for a JSON null as the ORM stores None)."""
    conn.execute(
        sa.insert(_datasets).values(
            id=dataset_id, name=dataset_id, owner="o", source_uri=path, source_path=path,
            source_format="parquet", fingerprint=whole, n_rows=10, n_features=1, epsilon=1.0,
            delta=0.0, label={"column": "y", "positive": 1, "negative": 0}, features=[],
            created_at=at, file_fingerprints=sa.text("'null'") if files == "null" else files,
        )
    )  # fmt: skip


_datasets = sa.table(
    "datasets",
    *(sa.column(c) for c in ("id", "name", "owner", "source_uri", "source_path")),
    *(sa.column(c) for c in ("source_format", "fingerprint", "n_rows", "n_features")),
    *(sa.column(c) for c in ("epsilon", "delta")),
    sa.column("label", sa.JSON()),
    sa.column("features", sa.JSON()),
    sa.column("file_fingerprints", sa.JSON(none_as_null=True)),
    sa.column("created_at", sa.DateTime(timezone=True)),
)
_claims = sa.table(
    "source_claims",
    sa.column("key", sa.String()),
    sa.column("dataset_id", sa.String()),
    sa.column("created_at", sa.DateTime(timezone=True)),
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
# id, path, whole fingerprint, member fingerprints (None: a single file / pre-0009 folder; the
# string "null": a JSON null, as the ORM stores None), minutes after T0.
LEGACY: list[tuple[str, str, str, Any, int]] = [
    ("single_b", "/data/b.parquet", "sha256:b", None, 0),  # registered before folder f1
    ("f1", "/data/f1", "sha256:f1", {"p0.parquet": "sha256:a", "p1.parquet": "sha256:b"}, 1),
    # f2 shares member "a" with f1 (registered before the fix) and has one of its own, twice.
    ("f2", "/data/f2", "sha256:f2", {"x.parquet": "sha256:a", "y.parquet": "sha256:c",
                                     "z.parquet": "sha256:c"}, 2),
    ("single_a", "/scratch/a.parquet", "sha256:a", "null", 3),  # f1's member, copied out
    ("old_folder", "/data/old", "sha256:old", None, 4),  # registered before revision 0009
]  # fmt: skip


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_member_claims_are_backfilled_keeping_the_earliest(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url, config = _database_at_0011(backend, tmp_path, request)
    engine = make_engine(url)
    with engine.begin() as conn:
        for dataset_id, path, whole, files, minutes in LEGACY:
            at = T0 + timedelta(minutes=minutes)
            _legacy_dataset(conn, dataset_id, path, whole, files, at)
            # The claims registration took then: location and whole content.
            for key in (location_claim(path), content_claim(whole)):
                conn.execute(
                    sa.insert(_claims).values(key=key, dataset_id=dataset_id, created_at=at)
                )
    engine.dispose()
    before = _claims_of(url)

    command.upgrade(config, "0012")  # 0013 re-keys content claims per owner (its own test)
    after = _claims_of(url)
    assert after == {
        **before,
        # "a" (a member of f1 and f2, registered before the fix, and copied out as single_a):
        # single_a's whole-content claim is that key already; it keeps it, and nobody is retired.
        content_claim("sha256:a"): "single_a",
        content_claim("sha256:b"): "single_b",  # already claimed by the single file: kept
        content_claim("sha256:c"): "f2",  # f2's own member, claimed once though it is there twice
    }
    assert before[content_claim("sha256:a")] == "single_a"
    # Core on the columns revision 0012 has (the ORM's Dataset has later revisions' columns)
    table = sa.table(
        "datasets",
        sa.column("id"),
        sa.column("retired_at"),
        sa.column("file_fingerprints", sa.JSON),
    )
    engine = make_engine(url)
    with engine.connect() as conn:
        rows = {r.id: r for r in conn.execute(sa.select(table))}
    engine.dispose()
    assert all(d.retired_at is None for d in rows.values())  # nobody is retired
    f1 = rows["f1"].file_fingerprints
    assert f1 is not None and set(member_claims(f1)) <= set(after)

    # Idempotent: down (keeps the claims) and up again inserts nothing, fails on nothing.
    command.downgrade(config, "0011")
    assert _claims_of(url) == after
    command.upgrade(config, "0012")
    assert _claims_of(url) == after


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_the_earliest_of_two_folders_sharing_a_member_gets_its_claim(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Two folders registered before the fix share member "m": the earlier one (by
    ``created_at``, not insertion order) holds it afterwards; both stay as they are. The
    backfill also runs again from scratch when some claims are already there."""
    url, config = _database_at_0011(backend, tmp_path, request)
    engine = make_engine(url)
    with engine.begin() as conn:
        for dataset_id, minutes in (("late", 5), ("early", 1)):
            own = f"sha256:{dataset_id}-own"
            files = {"m.parquet": "sha256:m", "own.parquet": own}
            at = T0 + timedelta(minutes=minutes)
            _legacy_dataset(
                conn, dataset_id, f"/data/{dataset_id}", f"sha256:{dataset_id}", files, at
            )
        # Part of the backfill already done (e.g. by a service that claimed it since).
        conn.execute(
            sa.insert(_claims).values(key=content_claim("sha256:late-own"), dataset_id="late",
                                      created_at=T0)
        )  # fmt: skip
    engine.dispose()
    command.upgrade(config, "0012")
    claims = _claims_of(url)
    assert claims == {
        content_claim("sha256:m"): "early",
        content_claim("sha256:early-own"): "early",
        content_claim("sha256:late-own"): "late",
    }


def _claims_of(url: str) -> dict[str, str]:
    """key → dataset id, read with Core (the ORM's SourceClaim has revision 0013's column)."""
    engine = make_engine(url)
    with engine.connect() as conn:
        claims = {
            str(k): str(d) for k, d in conn.execute(sa.select(_claims.c.key, _claims.c.dataset_id))
        }
    engine.dispose()
    return claims
