"""Alembic environment: migrates the database named by DPFIT_DATABASE_URL."""

from __future__ import annotations

import os

from alembic import context
from service.db.models import Base
from service.db.session import make_engine

config = context.config
url = config.attributes.get("url") or os.environ.get("DPFIT_DATABASE_URL") or config.get_main_option(
    "sqlalchemy.url"
)


def run_migrations_offline() -> None:
    context.configure(url=url, target_metadata=Base.metadata, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    engine = make_engine(str(url))
    with engine.connect() as connection:
        sqlite = connection.dialect.name == "sqlite"
        if sqlite:
            # Batch mode rebuilds a table (copy, drop, rename); with foreign keys ON, dropping a
            # table that other rows reference fails or cascades. SQLite's documented procedure:
            # keys off outside the transaction, then a foreign_key_check before committing.
            connection.connection.driver_connection.execute("PRAGMA foreign_keys=OFF")
        context.configure(
            connection=connection, target_metadata=Base.metadata, render_as_batch=True
        )
        with context.begin_transaction():
            context.run_migrations()
            if sqlite:
                broken = connection.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
                if broken:
                    raise RuntimeError(f"migration left {len(broken)} dangling foreign key(s)")
    engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
