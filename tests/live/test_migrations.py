"""Alembic owns the schema: migrations apply on SQLite and PostgreSQL and match the ORM."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from service.cli import migrate
from service.db.models import Base
from service.db.session import make_engine


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_migrations_match_models(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if backend == "postgres":
        url = request.getfixturevalue("postgres_database")
    else:
        url = f"sqlite:///{tmp_path / 'm.db'}"
    migrate(url)
    migrate(url)  # idempotent
    engine = make_engine(url)
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    engine.dispose()
    assert diff == []
