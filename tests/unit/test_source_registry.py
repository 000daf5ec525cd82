"""The source registry (service/data/opening.py): the URI scheme — or, for a stored row, the
format — names the backend, and every backend gets its arguments in its own order."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from service.data import backends, local_files, object_store, opening, sql_source
from service.data.sources import SourceError


class _Settings:
    data_roots: tuple[str, ...] = ()
    root_owners: dict[str, Any] = {}


def test_the_service_registers_every_backend() -> None:
    assert set(backends.BACKENDS) == {local_files, object_store, sql_source}
    assert {"s3", "sql", None} <= set(opening._BY_SCHEME)
    assert "sql" in opening._BY_FORMAT


def test_each_backend_gets_its_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[Any, ...]] = []
    settings = _Settings()
    monkeypatch.setattr(
        object_store, "open_object_store_source", lambda uri, s: calls.append(("s3", uri, s))
    )
    monkeypatch.setattr(
        object_store,
        "reopen_object_store_source",
        lambda location, format, s: calls.append(("s3 again", location, format, s)),
    )
    monkeypatch.setattr(sql_source, "open_sql_source", lambda uri, s: calls.append(("sql", uri, s)))
    monkeypatch.setattr(
        sql_source,
        "reopen_sql_source",
        lambda location, s: calls.append(("sql again", location, s)),
    )
    backends.open_source("S3://lake/a.csv", settings)
    backends.reopen_source("csv", "s3://lake/a.csv", settings)
    backends.open_source("sql://db/table", settings)
    backends.reopen_source("sql", "sql://db/table", settings)
    backends.reopen_source("sql", "db/table", settings)  # a stored sql format, whatever its text
    assert calls == [
        ("s3", "S3://lake/a.csv", settings),
        ("s3 again", "s3://lake/a.csv", "csv", settings),
        ("sql", "sql://db/table", settings),
        ("sql again", "sql://db/table", settings),
        ("sql again", "db/table", settings),
    ]


def test_other_locations_are_local_files(tmp_path: Path) -> None:
    settings = _Settings()
    settings.data_roots = (str(tmp_path),)
    (tmp_path / "a.csv").write_text("x,y\n1,0\n")
    source = backends.open_source("a.csv", settings)
    assert source.location == str((tmp_path / "a.csv").resolve())
    assert backends.reopen_source("csv", source.location, settings).location == source.location
    with pytest.raises(SourceError, match="unsupported URI scheme 'http'"):
        backends.open_source("http://example.org/a.csv", settings)
    with pytest.raises(SourceError, match="outside the allowed data roots"):
        backends.reopen_source("csv", "/etc/passwd", settings)
