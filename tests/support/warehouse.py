"""The live in-database tests' warehouse: settings naming one PostgreSQL connection ``wh`` and a
helper that creates a small table from Python rows (values bound, never formatted)."""

from __future__ import annotations

import sqlalchemy as sa

from service.settings import Settings

__all__ = ["create_table", "warehouse_settings"]


def warehouse_settings(url: str) -> Settings:
    """Settings whose one SQL connection ``wh`` is ``url`` (the service's own database is an
    in-memory SQLite: these tests read sources only)."""
    return Settings(
        database_url="sqlite://",
        data_roots=(),
        workers=1,
        dask_scheduler=None,
        sql_connections={"wh": url},
    )


def create_table(url: str, name: str, rows: list[tuple[object, ...]], columns: str) -> None:
    """``DROP``/``CREATE TABLE name (columns)`` and insert ``rows`` (test-chosen names only)."""
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql(f"DROP TABLE IF EXISTS {name}")
        conn.exec_driver_sql(f"CREATE TABLE {name} ({columns})")
        marks = ", ".join(["%s"] * len(rows[0]))
        conn.exec_driver_sql(f"INSERT INTO {name} VALUES ({marks})", rows)
    engine.dispose()
