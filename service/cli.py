"""`dpfit serve | migrate | keys create | openapi`, and the HTTP commands for people
(`datasets | jobs | models | budget`, in service/cli_http.py)."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import shlex
import shutil
import sys
from pathlib import Path

import yaml

from service.settings import Settings

ROOT = Path(__file__).resolve().parent.parent


def secure_sqlite_file(database_url: str) -> None:
    """A SQLite database file is created readable by its owner only (0600, in a directory
    made 0700): it holds the ledger and the principals. SQLite gives its journal and WAL files
    the database file's mode. An existing file is left as the operator made it."""
    from sqlalchemy.engine import make_url

    url = make_url(database_url)
    name = url.database or ""
    if url.get_backend_name() != "sqlite" or name in ("", ":memory:") or name.startswith("file:"):
        return
    path = Path(name)
    if path.exists():
        return
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))


def check_database(database_url: str) -> None:
    """Migrate and check the database before serving; a database that cannot be used stops the
    service with ONE line naming the reason (not a traceback). SQLite: ``PRAGMA quick_check``."""
    from sqlalchemy import text
    from sqlalchemy.exc import SQLAlchemyError

    from service.api.health import database_corrupt
    from service.db.session import make_engine

    shown = masked_url(database_url)
    try:
        migrate(database_url)
        engine = make_engine(database_url)
        try:
            with engine.connect() as connection:
                if connection.dialect.name == "sqlite":
                    verdict = connection.execute(text("PRAGMA quick_check")).scalar()
                    if verdict != "ok":
                        raise _Corrupt()
        finally:
            engine.dispose()
    except (SQLAlchemyError, _Corrupt) as exc:
        if isinstance(exc, _Corrupt) or database_corrupt(exc):
            reason = "the file is corrupt or not a SQLite database; restore it from a backup"
        else:
            reason = f"{type(exc).__name__} (is it running and reachable?)"
        print(f"dpfit: cannot use the database {shown}: {reason}", file=sys.stderr, flush=True)
        raise SystemExit(1) from None


class _Corrupt(Exception):
    """``PRAGMA quick_check`` did not answer ok."""


def migrate(database_url: str) -> None:
    """Upgrade the database to the newest Alembic revision (a new SQLite file: 0600)."""
    secure_sqlite_file(database_url)
    logging.getLogger("alembic").setLevel(logging.WARNING)  # before import: plugins log at INFO
    from alembic.config import Config

    from alembic import command

    config = Config(str(ROOT / "alembic.ini"))
    config.set_main_option("script_location", str(ROOT / "alembic"))
    config.attributes["url"] = database_url
    command.upgrade(config, "head")


def create_key_cli(database_url: str, name: str, role: str) -> str:
    """A new key for principal ``name`` under the same rules as POST /v1/keys (one role per
    principal; same name and role = rotation). Raises `RoleConflict`."""
    from service.db.session import make_engine, session_factory
    from service.domain.principals import issue_key

    engine = make_engine(database_url)
    try:
        with session_factory(engine).begin() as session:
            secret = issue_key(session, name=name, role=role).secret  # type: ignore[arg-type]
    finally:
        engine.dispose()
    return secret


def database_exists(database_url: str) -> bool:
    """Whether ``database_url`` names a dpfit database that already exists: a SQLite file that
    is there, or a server database holding Alembic's version table. Never creates anything (a
    server that cannot be reached counts as absent)."""
    from sqlalchemy import inspect
    from sqlalchemy.engine import make_url

    from service.db.session import make_engine

    url = make_url(database_url)
    if url.get_backend_name() == "sqlite":
        name = url.database or ""
        if name in ("", ":memory:") or name.startswith("file:"):
            return name not in ("", ":memory:")
        if not Path(name).is_file():
            return False
    engine = make_engine(database_url)
    try:
        with engine.connect() as connection:
            return inspect(connection).has_table("alembic_version")
    except Exception:  # noqa: BLE001 - unreachable or not a database: nothing to write to
        return False
    finally:
        engine.dispose()


def _drop_empty_default_home() -> None:
    """Remove the ``var/`` directory that reading the default settings made, if it is empty."""
    from service.settings import DEFAULT_HOME

    if not os.environ.get("DPFIT_DATABASE_URL"):
        with contextlib.suppress(OSError):  # not empty, or not there
            DEFAULT_HOME.rmdir()


def openapi_yaml() -> str:
    """The OpenAPI document of the app, as YAML (what openapi.yaml holds)."""
    from service.api.app import create_app

    logging.getLogger("alembic").setLevel(logging.WARNING)  # the in-memory schema's steps
    app = create_app(
        Settings(database_url="sqlite://", data_roots=(), workers=1, dask_scheduler=None)
    )
    return yaml.safe_dump(app.openapi(), sort_keys=False, allow_unicode=True, width=100)


def masked_url(url: str) -> str:
    """``url`` with its password replaced by ``***`` (for banners and logs)."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - an unparsable URL is not shown at all
        return "(unparsable database URL)"


def serve(settings: Settings, host: str, port: int, run_migrations: bool) -> None:
    import uvicorn

    from service.api.app import create_app

    logging.getLogger("distributed").setLevel(logging.WARNING)
    if run_migrations:
        check_database(settings.database_url)
    shown = "http://localhost" if host in ("0.0.0.0", "::") else f"http://{host}"
    print(f"dpfit listening on {shown}:{port}  (API docs: {shown}:{port}/docs)", flush=True)
    print(f"database: {masked_url(settings.database_url)}", flush=True)
    print("data roots: " + ", ".join(shown_roots(settings)), flush=True)
    # names only: a connection URL may hold a password
    connections = ", ".join(sorted(settings.sql_connections)) or "none (DPFIT_SQL_CONNECTIONS)"
    print(f"SQL connections: {connections}", flush=True)
    workers = settings.dask_scheduler or f"LocalCluster, {settings.workers} worker process(es)"
    print(f"workers: {workers}", flush=True)
    print(f"first key: {first_key_command(settings.database_url)}", flush=True)
    _check_dask_tls(settings)
    if settings.api_workers > 1:
        from service.supervisor import serve_with_workers

        print(f"API processes: {settings.api_workers} (one supervisor)", flush=True)
        serve_with_workers(settings, host, port)
        return
    # Timeouts, the connection cap and bounded logs: service/api/server.py (shared with the
    # supervisor's API processes and the Docker image, which runs this command).
    from service.api.server import uvicorn_options

    uvicorn.run(create_app(settings), host=host, port=port, **uvicorn_options(settings))


def shown_roots(settings: Settings) -> list[str]:
    """The data roots as ``DPFIT_DATA_ROOTS`` scopes them: ``alice,bob=/data/x`` for a root
    open to those owners only, the bare path for one open to every owner."""
    roots = [str(r) for r in settings.data_roots] + list(settings.object_store_roots)
    scoped = settings.root_owners
    return [f"{','.join(sorted(scoped[r]))}={r}" if r in scoped else r for r in roots]


def _check_dask_tls(settings: Settings) -> None:
    """Make (first start) or check the Dask TLS set before serving: a bad set stops the service
    with its one-line reason instead of a startup traceback."""
    from service.workers.security import DaskTlsError, embedded_security, external_security

    try:
        if settings.dask_scheduler:
            external_security(settings)
        else:
            embedded_security(settings)
    except DaskTlsError as exc:
        print(f"dpfit: cannot start the worker cluster: {exc}", file=sys.stderr, flush=True)
        raise SystemExit(1) from None


def first_key_command(database_url: str, executable: str | None = None) -> str:
    """The banner's command making the first admin key, meant to be pasted in any directory:
    the dpfit executable by its absolute path, and ``DPFIT_DATABASE_URL=…`` in front naming
    this service's database (without it ``keys create`` would look for ``var/dpfit.db`` under
    the directory it is pasted in). The URL is shown as :func:`masked_url` shows it everywhere
    else: a password is never printed — the line then says to put it in place of ``***``."""
    url = _absolute_sqlite_url(database_url)
    shown = masked_url(url)
    command = (
        f"DPFIT_DATABASE_URL={shlex.quote(shown)} "
        f"{shlex.quote(executable or _own_command())} keys create --role admin --name admin"
    )
    if shown != url and "***" in shown:  # masked: not runnable verbatim, never the secret
        command += "  # put the database password in place of ***"
    return command


def _absolute_sqlite_url(database_url: str) -> str:
    """A SQLite URL naming a relative file, made absolute (against the current directory);
    every other URL unchanged."""
    from sqlalchemy.engine import make_url

    try:
        url = make_url(database_url)
    except Exception:  # noqa: BLE001 - masked_url says it is unparsable
        return database_url
    name = url.database or ""
    if url.get_backend_name() != "sqlite" or name in ("", ":memory:") or name.startswith("file:"):
        return database_url
    if Path(name).is_absolute():
        return database_url
    return url.set(database=str(Path(name).resolve())).render_as_string(hide_password=False)


def _own_command() -> str:
    """The absolute path of the ``dpfit`` executable that is running (else the one beside this
    Python, else the one on ``PATH``, else plain ``dpfit``)."""
    script = Path(sys.argv[0])
    if script.name == "dpfit":
        found = str(script) if os.sep in sys.argv[0] else shutil.which(sys.argv[0])
        if found and Path(found).is_file():
            return str(Path(found).absolute())
    beside = Path(sys.executable).parent / "dpfit"
    if beside.is_file():
        return str(beside.absolute())
    return shutil.which("dpfit") or "dpfit"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="dpfit", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p_serve = sub.add_parser("serve", help="migrate, then start the API and the workers")
    p_serve.add_argument("--host", default="127.0.0.1")
    p_serve.add_argument("--port", type=int, default=8000)
    p_serve.add_argument("--no-migrate", action="store_true", help="skip `dpfit migrate`")
    sub.add_parser("migrate", help="upgrade the database schema (Alembic)")
    p_keys = sub.add_parser("keys", help="manage API keys")
    keys_sub = p_keys.add_subparsers(dest="keys_command", required=True)
    p_create = keys_sub.add_parser("create", help="create a key; prints it as the last line")
    p_create.add_argument("--role", choices=("admin", "owner", "analyst"), required=True)
    p_create.add_argument("--name", required=True)
    p_create.add_argument(
        "--create",
        action="store_true",
        help="create and migrate the database if it does not exist yet (else refused)",
    )
    p_openapi = sub.add_parser("openapi", help="print (or write) the OpenAPI document")
    # Its own dest: "output" is the HTTP commands' -o/--output format (cli_http).
    p_openapi.add_argument("--output", type=Path, dest="document_path")
    from service import cli_http

    cli_http.add_output_option(parser)
    cli_http.add_http_commands(sub)
    args = parser.parse_args(argv)
    if args.command in cli_http.COMMANDS:
        return cli_http.run(args)
    if hasattr(args, "output"):
        parser.error(f"-o/--output is for the HTTP commands ({', '.join(cli_http.COMMANDS)})")

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    if args.command == "openapi":
        document = openapi_yaml()
        if args.document_path:
            args.document_path.write_text(document)
        else:
            sys.stdout.write(document)
        return 0
    settings = Settings.from_env()
    if args.command == "serve":
        serve(settings, args.host, args.port, not args.no_migrate)
    elif args.command == "migrate":
        migrate(settings.database_url)
        print(f"migrated {masked_url(settings.database_url)}")
    elif args.command == "keys":
        shown = masked_url(settings.database_url)
        if not args.create and not database_exists(settings.database_url):
            print(
                f"dpfit keys create: no dpfit database at {shown}; set DPFIT_DATABASE_URL to the "
                "server's database (run from its directory for the default var/dpfit.db), or "
                "pass --create to make a new one",
                file=sys.stderr,
            )
            _drop_empty_default_home()
            return 1
        migrate(settings.database_url)
        from pydantic import ValidationError

        from service.domain.principals import RoleConflict
        from service.schemas import KeyCreate

        try:
            KeyCreate(name=args.name, role=args.role)  # the same name rules as POST /v1/keys
            key = create_key_cli(settings.database_url, args.name, args.role)
        except ValidationError:
            print("dpfit keys create: --name must be 1-200 of A-Z a-z 0-9 _ . @ -", file=sys.stderr)
            return 2
        except RoleConflict as exc:
            print(f"dpfit keys create: {exc}", file=sys.stderr)
            return 1
        print(f"database: {shown}")
        print(f"created {args.role} key for {args.name!r}; it is shown once:")
        print(key)
    return 0


if __name__ == "__main__":
    sys.exit(main())
