"""Migration 0013 re-keys content claims per owner and adds the withdrawal records, on SQLite and
PostgreSQL: existing claims keep their holder, their unscoped key is kept for admins, the
location claims are untouched, and the schema matches the models. The downgrade restores global
content keys, the earliest holder keeping a content two owners share."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext

from alembic import command
from service.cli import ROOT
from service.db.models import Base
from service.db.session import make_engine
from service.domain.claims import content_claim, location_claim, owned_content_claim

_datasets = sa.table(
    "datasets",
    *(sa.column(c) for c in ("id", "name", "owner", "source_uri", "source_path")),
    *(sa.column(c) for c in ("source_format", "fingerprint", "n_rows", "n_features")),
    *(sa.column(c) for c in ("epsilon", "delta")),
    sa.column("label", sa.JSON()),
    sa.column("features", sa.JSON()),
    sa.column("created_at", sa.DateTime(timezone=True)),
)
_claims = sa.table(
    "source_claims",
    sa.column("key", sa.String()),
    sa.column("dataset_id", sa.String()),
    sa.column("created_at", sa.DateTime(timezone=True)),
)
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _config(url: str) -> Config:
    config = Config(str(ROOT / "alembic.ini"))
    config.set_main_option("script_location", str(ROOT / "alembic"))
    config.attributes["url"] = url
    return config


def _claims_of(url: str) -> set[tuple[str, str, str | None]]:
    engine = make_engine(url)
    with engine.connect() as conn:
        columns = sa.inspect(conn).get_columns("source_claims")
        has_content = any(c["name"] == "content" for c in columns)
        content = sa.column("content") if has_content else sa.null()
        rows = conn.execute(sa.select(_claims.c.key, _claims.c.dataset_id, content).select_from(
            _claims
        )).all()  # fmt: skip
    engine.dispose()
    return {(str(k), str(d), None if c is None else str(c)) for k, d, c in rows}


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_content_claims_are_rekeyed_per_owner_and_back(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if backend == "postgres":
        url = str(request.getfixturevalue("private_postgres_database"))
    else:
        url = f"sqlite:///{tmp_path / 'legacy.db'}"
    config = _config(url)
    command.upgrade(config, "0012")
    legacy = [("a1", "alice", "/d/a.csv", "sha256:a", 0), ("b1", "bob", "/d/b.csv", "sha256:b", 1)]
    engine = make_engine(url)
    with engine.begin() as conn:
        for dataset_id, owner, path, fingerprint, minutes in legacy:
            at = T0 + timedelta(minutes=minutes)
            conn.execute(
                sa.insert(_datasets).values(
                    id=dataset_id, name=dataset_id, owner=owner, source_uri=path,
                    source_path=path, source_format="csv", fingerprint=fingerprint, n_rows=10,
                    n_features=1, epsilon=1.0, delta=0.0, created_at=at,
                    label={"column": "y", "positive": 1, "negative": 0}, features=[],
                )
            )  # fmt: skip
            for key in (location_claim(path), content_claim(fingerprint)):
                conn.execute(
                    sa.insert(_claims).values(key=key, dataset_id=dataset_id, created_at=at)
                )
    engine.dispose()

    command.upgrade(config, "head")
    a, b = content_claim("sha256:a"), content_claim("sha256:b")
    assert _claims_of(url) == {
        (location_claim("/d/a.csv"), "a1", None),
        (location_claim("/d/b.csv"), "b1", None),
        (owned_content_claim("alice", a), "a1", a),
        (owned_content_claim("bob", b), "b1", b),
    }
    engine = make_engine(url)
    with engine.connect() as conn:
        assert compare_metadata(MigrationContext.configure(conn), Base.metadata) == []
        # What the service now allows: bob holds alice's content too (a duplicate for admins).
        conn.execute(
            sa.insert(_datasets).values(
                id="b2", name="b2", owner="bob", source_uri="/e/a.csv", source_path="/e/a.csv",
                source_format="csv", fingerprint="sha256:a", n_rows=10, n_features=1,
                epsilon=1.0, delta=0.0, created_at=T0 + timedelta(minutes=2),
                label={"column": "y", "positive": 1, "negative": 0}, features=[],
            )
        )  # fmt: skip
        conn.execute(
            sa.text("INSERT INTO source_claims (key, dataset_id, content, created_at) "
                    "VALUES (:k, 'b2', :c, :t)"),
            {"k": owned_content_claim("bob", a), "c": a, "t": T0},
        )  # fmt: skip
        conn.commit()
    engine.dispose()

    command.downgrade(config, "0012")
    assert _claims_of(url) == {
        (location_claim("/d/a.csv"), "a1", None),
        (location_claim("/d/b.csv"), "b1", None),
        (a, "a1", None),  # the earliest holder of the shared content keeps the global claim
        (b, "b1", None),
    }
    engine = make_engine(url)
    with engine.connect() as conn:
        assert "dataset_withdrawals" not in sa.inspect(conn).get_table_names()
    engine.dispose()
