"""The `first key:` line of `dpfit serve`'s banner is a command that works pasted verbatim in
any directory: the dpfit executable by its absolute path and ``DPFIT_DATABASE_URL`` naming the
service's database (before, a path relative to the server's directory and no database, so
from elsewhere it failed: "no dpfit database at …"). A password is never printed."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from service import cli
from service.cli import first_key_command, masked_url, migrate
from service.settings import Settings

DPFIT = Path(sys.executable).parent / "dpfit"


def _env_without_database() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "DPFIT_DATABASE_URL"}


def test_the_command_names_the_executable_and_the_database_absolutely(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'dpfit.db'}"
    command = first_key_command(url, "/opt/dp fit/bin/dpfit")
    assert command == (
        f"DPFIT_DATABASE_URL={url} '/opt/dp fit/bin/dpfit' keys create --role admin --name admin"
    )
    # a relative SQLite file is made absolute against the server's directory
    monkeypatch.chdir(tmp_path)
    relative = first_key_command("sqlite:///var/other.db", "/x/dpfit")
    assert relative.startswith(f"DPFIT_DATABASE_URL=sqlite:///{tmp_path / 'var' / 'other.db'} ")
    # by default: this environment's dpfit, by its absolute path
    words = shlex.split(first_key_command(url))
    assert words[1] == str(DPFIT) and Path(words[1]).is_absolute()


def test_a_password_is_masked_as_everywhere_else_and_never_printed() -> None:
    url = "postgresql+psycopg://dpfit:s3cret@db.example:5432/dpfit"
    command = first_key_command(url, "/x/dpfit")
    assert "s3cret" not in command
    assert f"DPFIT_DATABASE_URL={shlex.quote(masked_url(url))} " in command
    assert "dpfit:***@db.example" in command and "# put the database password" in command
    assert "#" not in first_key_command("postgresql+psycopg://dpfit@db/dpfit", "/x/dpfit")


def test_the_banner_line_runs_verbatim_from_another_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`dpfit serve`'s banner (its server start stubbed out), then its `first key:` line pasted
    into a shell in an unrelated directory: it makes a key in the service's database."""
    home, elsewhere = tmp_path / "server", tmp_path / "elsewhere"
    home.mkdir()
    elsewhere.mkdir()
    url = f"sqlite:///{home / 'dpfit.db'}"
    migrate(url)
    settings = Settings(database_url=url, data_roots=(home,), workers=1, dask_scheduler=None)
    monkeypatch.setattr(cli, "_check_dask_tls", lambda settings: None)
    monkeypatch.setattr("uvicorn.run", lambda *args, **kwargs: None)
    monkeypatch.setattr("service.api.app.create_app", lambda settings: None)
    monkeypatch.setattr(sys, "argv", [os.path.relpath(DPFIT), "serve"])  # as `make serve` runs it
    capsys.readouterr()
    cli.serve(settings, "127.0.0.1", 8000, run_migrations=False)
    banner = capsys.readouterr().out
    line = next(line for line in banner.splitlines() if line.startswith("first key: "))
    command = line.removeprefix("first key: ")
    assert command == first_key_command(url, str(DPFIT))
    made = subprocess.run(
        ["bash", "-c", command],
        cwd=elsewhere,
        env=_env_without_database(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert made.returncode == 0, made.stderr
    assert made.stdout.strip().splitlines()[-1].startswith("dpf_")
    assert f"database: {url}" in made.stdout
    assert list(elsewhere.iterdir()) == []  # nothing made where it was pasted
    assert "SQL connections: none (DPFIT_SQL_CONNECTIONS)" in banner


def test_the_banner_names_the_sql_connections_never_their_urls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'dpfit.db'}"
    secret = "postgresql+psycopg://dpfit:s3cret@db.example/warehouse"
    settings = Settings(
        database_url=url,
        data_roots=(tmp_path,),
        workers=1,
        dask_scheduler=None,
        sql_connections={"warehouse": secret, "lite": f"sqlite:///{tmp_path / 'lite.db'}"},
    )
    monkeypatch.setattr(cli, "_check_dask_tls", lambda settings: None)
    monkeypatch.setattr("uvicorn.run", lambda *args, **kwargs: None)
    monkeypatch.setattr("service.api.app.create_app", lambda settings: None)
    capsys.readouterr()
    cli.serve(settings, "127.0.0.1", 8000, run_migrations=False)
    banner = capsys.readouterr().out
    assert "SQL connections: lite, warehouse" in banner and "s3cret" not in banner


def test_openapi_writes_the_document_to_a_file_and_minus_o_is_refused(tmp_path: Path) -> None:
    """`dpfit openapi --output FILE` (the Makefile's `openapi` target) writes the document: its
    option must not be taken for the HTTP commands' -o/--output format."""
    target = tmp_path / "openapi.yaml"
    assert cli.main(["openapi", "--output", str(target)]) == 0
    assert target.read_text() == (Path(__file__).resolve().parents[2] / "openapi.yaml").read_text()
    with pytest.raises(SystemExit):
        cli.main(["-o", "json", "openapi"])


def test_the_banner_shows_which_roots_are_scoped_and_to_whom(tmp_path: Path) -> None:
    """``DPFIT_DATA_ROOTS=alice=/data/a`` was shown as ``data roots: /data/a``, as if open to
    every owner."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    entries = f"{tmp_path / 'b'}:alice,bob={tmp_path / 'a'}:carol=s3://lake/c:s3://lake/open"
    settings = Settings.from_env({"DPFIT_DATA_ROOTS": entries})
    assert cli.shown_roots(settings) == [
        str((tmp_path / "b").resolve()),
        f"alice,bob={(tmp_path / 'a').resolve()}",
        "carol=s3://lake/c",
        "s3://lake/open",
    ]


def test_openapi_prints_no_migration_lines(capfd: pytest.CaptureFixture[str]) -> None:
    cli.openapi_yaml()
    assert "alembic" not in capfd.readouterr().err
