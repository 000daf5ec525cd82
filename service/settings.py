"""Service settings, read once from the environment by the app factory and the CLI."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

DEFAULT_HOME = Path("var")


@dataclass(frozen=True)
class Settings:
    """Everything configurable, with the embedded defaults.

    - ``DPFIT_DATABASE_URL``: SQLAlchemy URL; default a SQLite file ``var/dpfit.db``.
    - ``DPFIT_DATA_ROOTS``: directories datasets may be registered from, separated by ``:``;
      default ``examples`` (the bundled example data).
    - ``DPFIT_WORKERS``: worker processes of the embedded Dask LocalCluster; default = cores.
    - ``DPFIT_DASK_SCHEDULER``: address of an external Dask scheduler (then no LocalCluster).
    - ``DPFIT_MAX_ATTEMPTS``: dispatches of one job before it is marked failed (default 3).
    """

    database_url: str
    data_roots: tuple[Path, ...]
    workers: int
    dask_scheduler: str | None
    max_attempts: int = 3

    @staticmethod
    def from_env(environ: dict[str, str] | None = None) -> Settings:
        env = dict(os.environ if environ is None else environ)
        database_url = env.get("DPFIT_DATABASE_URL") or _default_sqlite_url()
        roots_raw = env.get("DPFIT_DATA_ROOTS") or "examples"
        roots = tuple(Path(p).expanduser().resolve() for p in roots_raw.split(os.pathsep) if p)
        workers = int(env.get("DPFIT_WORKERS") or (os.cpu_count() or 1))
        return Settings(
            database_url=database_url,
            data_roots=roots,
            workers=max(1, workers),
            dask_scheduler=env.get("DPFIT_DASK_SCHEDULER") or None,
            max_attempts=int(env.get("DPFIT_MAX_ATTEMPTS") or 3),
        )


def _default_sqlite_url() -> str:
    DEFAULT_HOME.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{(DEFAULT_HOME / 'dpfit.db').resolve()}"
