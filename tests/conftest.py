"""The fixtures every layer shares (tests/unit, tests/api, tests/live), defined in
tests/support/fixtures.py: PostgreSQL databases and live `dpfit serve` processes."""

from tests.support.fixtures import (
    app_server,
    pg_app,
    pg_server,
    postgres_database,
    private_postgres_database,
    server,
    sqlite_app,
    sqlite_server,
)

__all__ = [
    "app_server",
    "pg_app",
    "pg_server",
    "postgres_database",
    "private_postgres_database",
    "server",
    "sqlite_app",
    "sqlite_server",
]
