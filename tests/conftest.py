"""The fixtures every layer shares (tests/unit, tests/api, tests/live), defined in
tests/support/fixtures.py: PostgreSQL databases and live `dpfit serve` processes."""

from tests.support.fixtures import (
    pg_server,
    postgres_database,
    private_postgres_database,
    server,
    sqlite_server,
)

__all__ = ["pg_server", "postgres_database", "private_postgres_database", "server", "sqlite_server"]
