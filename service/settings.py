"""Service settings, read once from the environment by the app factory and the CLI."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from service.cpu_quota import available_cpus
from service.data.limits import ReadLimits

DEFAULT_HOME = Path("var")


@dataclass(frozen=True)
class Settings:
    """Everything configurable, with the embedded defaults.

    - ``DPFIT_DATABASE_URL``: SQLAlchemy URL; default a SQLite file ``var/dpfit.db``.
    - ``DPFIT_DATA_ROOTS``: directories datasets may be registered from, separated by ``:``;
      default ``examples`` (the bundled example data). An entry ``s3://bucket/prefix`` is an
      object-store root (a ``:`` followed by ``//`` does not separate entries); local entries
      become ``data_roots`` (resolved paths), ``s3://`` entries ``object_store_roots``.
      An entry may be scoped to owners: ``alice=/data/alice`` or ``alice,bob=s3://bucket/x``
      (``root_owners`` maps the root, as a string, to those owners; only they and admins may
      register under it, also through an unscoped root that contains it). An unscoped root is
      open to every owner; a root listed both scoped and unscoped is unscoped.
    - ``DPFIT_SQL_CONNECTIONS``: a JSON object naming the operator's databases that tables may
      be registered from, name → SQLAlchemy URL (``{"warehouse": "postgresql+psycopg://…"}``);
      default none. The URLs (credentials) are never shown: not in ``repr``, a response or a log.
    - ``DPFIT_WORKERS``: worker processes of the embedded Dask LocalCluster; default = the CPUs
      this process may use: its affinity and its cgroup's CPU quota (a container's ``--cpus``),
      not the host's cores (service/cpu_quota.py).
    - ``DPFIT_DASK_SCHEDULER``: address of an external Dask scheduler (then no LocalCluster).
    - ``DPFIT_MAX_ATTEMPTS``: runs of one job (a worker starting it) before a restart marks it
      failed (default 3); dispatches that no worker started don't count.
    - ``DPFIT_DASK_HOST``: the interface every listener of the embedded Dask cluster (scheduler,
      nannies, workers) binds to; default ``127.0.0.1`` (loopback only).
    - ``DPFIT_DASK_TLS_DIR``: where the service keeps the private CA and the mutual-TLS
      certificates of its Dask cluster (made at first start, directory 0700, files 0600); default
      ``dask-tls`` beside the SQLite database file, else ``var/dask-tls``.
    - ``DPFIT_DASK_TLS_CA``, ``DPFIT_DASK_TLS_CERT``, ``DPFIT_DASK_TLS_KEY``: the CA, certificate
      and key the service presents to an external scheduler (all three or none; without them it
      uses ``client.pem``/``client-key.pem`` of ``DPFIT_DASK_TLS_DIR``).
    - ``DPFIT_MAX_BODY_BYTES``: the largest request body the API reads (default 10 MiB);
      larger ones are refused with 413 before any parsing.
    - ``DPFIT_LOG_FORMAT``: ``json`` (default: one JSON object per line) or ``text``
      (service/logging_setup.py).
    - ``DPFIT_METRICS``: who may read ``GET /metrics``: ``admin`` (default: an admin key, and the
      scrape includes ε spent per dataset) or ``public`` (no key; no per-dataset series).
    - ``DPFIT_WORKER_MEMORY``: memory limit of each Dask worker (``900MiB``, ``4GB``, bytes);
      the embedded cluster's ``memory_limit``, and for an external cluster the operator's
      statement of its workers' limit. Job admission uses it with ``DPFIT_WORKERS`` to refuse,
      before any charge, a job whose encoded rows cannot fit even spread over all workers.
      Default: unlimited (no such refusal).
    - ``DPFIT_API_WORKERS``: API processes (default 1). With more than one, ``dpfit serve``
      runs a supervisor (service/supervisor.py) that owns the embedded Dask cluster, the
      recovery of unfinished jobs and the job-event log, and N uvicorn worker processes that
      serve HTTP on one socket and dispatch to that cluster over mutual TLS.
    - ``DPFIT_DATA_PARALLEL_MIN_ROWS``: full-gradient jobs on datasets of at least this many
      rows run data-parallel over all workers even when one worker could hold them (default:
      only when one worker cannot hold them comfortably).
    - ``DPFIT_MAX_CELL_BYTES`` (4 KiB), ``DPFIT_MAX_LINE_BYTES`` (1 MiB), ``DPFIT_MAX_COLUMNS``
      (4096), ``DPFIT_MAX_CATEGORIES`` (10,000), ``DPFIT_MAX_FOLDER_FILES`` (10,000),
      ``DPFIT_MAX_PARQUET_FOOTER_BYTES`` (16 MiB), ``DPFIT_MAX_COLUMN_CHUNK_BYTES`` (256 MiB):
      the readers' public limits (``read_limits``; service/data/limits.py, docs/data-path.md):
      an oversize cell is MISSING, an oversize CSV line a row of MISSING cells, a source or
      schema beyond the others is refused.
    - ``DPFIT_WORKER_NICE``: the nice value of the embedded cluster's worker processes (default
      10; 0 keeps the API's priority): fits yield the CPU to requests
      (service/workers/priority.py). An external cluster's operator starts ``dask worker``
      under ``nice`` instead.
    - ``DPFIT_MAX_RUNNING_PER_PRINCIPAL``: jobs of one principal that may hold a worker at once
      (default: all worker slots but one, at least 1 — so another principal's job finds a free
      slot while one principal's long jobs run); the dispatcher holds the rest back and
      releases jobs least-running-principal first (service/workers/fair_queue.py).
    - ``DPFIT_MAX_ACTIVE_PER_PRINCIPAL``: queued + running jobs one principal may have (default
      50); a submission over it is refused with 429 and ``Retry-After`` before anything is
      charged.
    - ``DPFIT_JOB_TIME_LIMIT``: wall-clock seconds a job's run may take once a worker claimed it
      (default 3600; public, fixed before any row is read). A run over it stops and fails, its
      charge standing (service/workers/runner.py).
    - ``DPFIT_RECONCILE_INTERVAL``: seconds between two passes of the reconciler that
      re-dispatches accepted jobs no live worker task holds (after a database outage), without
      a restart (default 2; 0 turns it off). service/workers/reconciler.py.
    - Limits on the API (docs/operations.md, "Limits on the API"): ``DPFIT_COMPUTE_PROCESSES``
      (processes that plan, price and predict off the API's interpreter; default one per two
      cores; 0 runs that work in the request's thread), ``DPFIT_PRICE_CACHE`` (priced requests
      kept, default 512; 0 disables), ``DPFIT_PRINCIPAL_RATE`` / ``DPFIT_PRINCIPAL_BURST``
      (expensive requests per second per principal, default 50, bursts of 100),
      ``DPFIT_PRINCIPAL_CONCURRENCY`` (running at once per principal, default 2),
      ``DPFIT_PRINCIPAL_QUEUE`` (waiting per principal, default 64), ``DPFIT_COMPUTE_SLOTS``
      (running at once for all principals, default 8), ``DPFIT_COMPUTE_WAIT`` (longest wait for
      a slot, default 30 s); connections: ``DPFIT_MAX_CONNECTIONS`` (default 512; more are
      answered 503), ``DPFIT_KEEP_ALIVE_SECONDS`` (idle connection between requests, default
      75), ``DPFIT_HEADER_TIMEOUT_SECONDS`` (a request's head must arrive within it, from the
      connection or the previous response; default 15), ``DPFIT_BODY_TIMEOUT_SECONDS`` (its
      body, default 60; 408 after), ``DPFIT_MAX_HEADER_BYTES`` (default 16 KiB).
    """

    database_url: str
    data_roots: tuple[Path, ...]
    workers: int
    dask_scheduler: str | None
    max_attempts: int = 3
    object_store_roots: tuple[str, ...] = ()
    sql_connections: dict[str, str] = field(default_factory=dict, repr=False)
    root_owners: dict[str, frozenset[str]] = field(default_factory=dict)
    # Connections scoped to owners (name → owners); absent: open to every owner.
    sql_connection_owners: dict[str, frozenset[str]] = field(default_factory=dict)
    dask_host: str = "127.0.0.1"
    dask_tls_dir: Path | None = None
    dask_tls_ca: Path | None = None
    dask_tls_cert: Path | None = None
    dask_tls_key: Path | None = None
    max_body_bytes: int = 10 * 1024 * 1024
    log_format: str = "json"
    metrics_access: str = "admin"
    worker_memory: int | None = None
    data_parallel_min_rows: int | None = None
    api_workers: int = 1
    worker_nice: int = 10
    max_running_per_principal: int | None = None
    max_active_per_principal: int = 50
    job_time_limit_s: float = 3600.0
    reconcile_interval_s: float = 2.0
    read_limits: ReadLimits = field(default_factory=ReadLimits)
    # Limits on the API (service/api/throttle.py, compute.py, server.py); None: the default.
    compute_processes: int | None = None
    price_cache: int = 512
    principal_rate: float = 50.0
    principal_burst: int = 100
    principal_concurrency: int = 2
    principal_queue: int = 64
    compute_slots: int = 8
    compute_wait_seconds: float = 30.0
    max_connections: int = 512
    keep_alive_seconds: float = 75.0
    header_timeout_seconds: float = 15.0
    body_timeout_seconds: float = 60.0
    max_header_bytes: int = 16 * 1024
    # Set by the supervisor for its API processes: it recovers jobs and logs job events itself.
    supervised: bool = False

    @staticmethod
    def from_env(environ: dict[str, str] | None = None) -> Settings:
        env = dict(os.environ if environ is None else environ)
        database_url = env.get("DPFIT_DATABASE_URL") or _default_sqlite_url()
        roots_raw = env.get("DPFIT_DATA_ROOTS") or "examples"
        scoped = [_split_root_scope(p) for p in _ROOT_SEPARATOR.split(roots_raw) if p]
        entries = [p for _, p in scoped]
        roots = tuple(Path(p).expanduser().resolve() for p in entries if not _is_s3(p))
        object_roots = tuple(_s3_root(p) for p in entries if _is_s3(p))
        workers = int(env.get("DPFIT_WORKERS") or available_cpus())
        connections = _sql_connections(env.get("DPFIT_SQL_CONNECTIONS") or "")
        return Settings(
            database_url=database_url,
            data_roots=roots,
            workers=max(1, workers),
            dask_scheduler=env.get("DPFIT_DASK_SCHEDULER") or None,
            max_attempts=int(env.get("DPFIT_MAX_ATTEMPTS") or 3),
            object_store_roots=object_roots,
            sql_connections={name: url for name, (url, _) in connections.items()},
            root_owners=_root_owners(scoped),
            sql_connection_owners={
                name: owners for name, (_, owners) in connections.items() if owners is not None
            },
            dask_host=env.get("DPFIT_DASK_HOST") or "127.0.0.1",
            dask_tls_dir=_optional_path(env.get("DPFIT_DASK_TLS_DIR")),
            dask_tls_ca=_optional_path(env.get("DPFIT_DASK_TLS_CA")),
            dask_tls_cert=_optional_path(env.get("DPFIT_DASK_TLS_CERT")),
            dask_tls_key=_optional_path(env.get("DPFIT_DASK_TLS_KEY")),
            max_body_bytes=int(env.get("DPFIT_MAX_BODY_BYTES") or 10 * 1024 * 1024),
            log_format=_choice(env, "DPFIT_LOG_FORMAT", ("json", "text")),
            metrics_access=_choice(env, "DPFIT_METRICS", ("admin", "public")),
            worker_memory=_memory_bytes(env.get("DPFIT_WORKER_MEMORY")),
            data_parallel_min_rows=_optional_int(env.get("DPFIT_DATA_PARALLEL_MIN_ROWS")),
            api_workers=max(1, int(env.get("DPFIT_API_WORKERS") or 1)),
            worker_nice=min(19, max(0, int(env.get("DPFIT_WORKER_NICE") or 10))),
            supervised=env.get(SUPERVISED_ENV) == "1",
            max_running_per_principal=_positive_int(env, "DPFIT_MAX_RUNNING_PER_PRINCIPAL"),
            max_active_per_principal=_positive_int(env, "DPFIT_MAX_ACTIVE_PER_PRINCIPAL") or 50,
            job_time_limit_s=_positive_float(env, "DPFIT_JOB_TIME_LIMIT", 3600.0),
            reconcile_interval_s=_positive_float(env, "DPFIT_RECONCILE_INTERVAL", 2.0, zero=True),
            read_limits=_read_limits(env),
            **api_limits(env),
        )

    def running_per_principal(self, slots: int) -> int:
        """Worker slots one principal may hold of ``slots``: the setting, else all but one."""
        if self.max_running_per_principal is not None:
            return self.max_running_per_principal
        return max(1, slots - 1)


SUPERVISED_ENV = "DPFIT_SUPERVISED"
#: Set by the supervisor for its API processes (service/supervisor.py): the directory of
#: prometheus-client's multiprocess mode, read by it when first imported
#: (service/api/metrics.py).
MULTIPROCESS_DIR_ENV = "PROMETHEUS_MULTIPROC_DIR"


class SettingsError(ValueError):
    """A setting is malformed: the service refuses to start. Never quotes a credential."""


# Entries of DPFIT_DATA_ROOTS are separated by ":" except where "//" follows (a URI scheme).
_ROOT_SEPARATOR = re.compile(r":(?!//)")
_S3_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_CONNECTION_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def _is_s3(entry: str) -> bool:
    return entry.lower().startswith("s3://")


def _s3_root(entry: str) -> str:
    """``s3://bucket[/prefix]`` normalised to ``s3://bucket/prefix`` (no trailing ``/``)."""
    bucket, _, prefix = entry[len("s3://") :].partition("/")
    parts = [p for p in prefix.split("/") if p]
    if not _S3_BUCKET.fullmatch(bucket) or any(p in (".", "..") for p in parts):
        raise SettingsError(
            f"DPFIT_DATA_ROOTS: {entry!r} is not an s3://bucket/prefix root (a valid bucket "
            "name, no '.' or '..' segments)"
        )
    return "/".join([f"s3://{bucket}", *parts])


_ROOT_SCOPE = re.compile(r"([A-Za-z0-9_.@-]+(?:,[A-Za-z0-9_.@-]+)*)=(.+)", re.DOTALL)
_OWNER_NAME = re.compile(r"[A-Za-z0-9_.@-]+")


def _split_root_scope(entry: str) -> tuple[frozenset[str] | None, str]:
    """``"alice,bob=/data/x"`` → ({alice, bob}, "/data/x"); an unscoped entry → (None, entry)."""
    match = _ROOT_SCOPE.fullmatch(entry)
    if match is None:
        return None, entry
    return frozenset(match.group(1).split(",")), match.group(2)


def _root_owners(scoped: list[tuple[frozenset[str] | None, str]]) -> dict[str, frozenset[str]]:
    """Root (``str`` of the resolved path, or the normalised ``s3://`` root) → its owners, for
    roots that are listed only with a scope."""
    owners: dict[str, frozenset[str]] = {}
    open_roots: set[str] = set()
    for scope, entry in scoped:
        root = _s3_root(entry) if _is_s3(entry) else str(Path(entry).expanduser().resolve())
        if scope is None:
            open_roots.add(root)
        else:
            owners[root] = owners.get(root, frozenset()) | scope
    return {root: names for root, names in owners.items() if root not in open_roots}


def _sql_connections(raw: str) -> dict[str, tuple[str, frozenset[str] | None]]:
    """DPFIT_SQL_CONNECTIONS parsed and checked once: name → (URL, owners or None when open to
    every owner). An entry is a URL string, or ``{"url": …, "owners": [names]}`` to scope the
    connection to those owners (and admins). Errors name the entry, never a URL."""
    if not raw.strip():
        return {}
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        value = json.loads(raw)
    except ValueError:
        raise SettingsError("DPFIT_SQL_CONNECTIONS is not valid JSON") from None
    if not isinstance(value, dict):
        raise SettingsError("DPFIT_SQL_CONNECTIONS must be a JSON object: name → SQLAlchemy URL")
    parsed: dict[str, tuple[str, frozenset[str] | None]] = {}
    for name, entry in value.items():
        if not _CONNECTION_NAME.fullmatch(name):
            raise SettingsError(
                f"DPFIT_SQL_CONNECTIONS: connection name {name!r} must be 1-64 letters, digits, "
                "'_' or '-'"
            )
        url, owners = _connection_entry(name, entry)
        try:
            make_url(url)
        except (ArgumentError, ValueError):
            raise SettingsError(
                f"DPFIT_SQL_CONNECTIONS: the URL of {name!r} is not a SQLAlchemy URL"
            ) from None
        parsed[name] = (url, owners)
    return parsed


def _connection_entry(name: str, entry: object) -> tuple[str, frozenset[str] | None]:
    """One connection's (URL, owners): a string, or an object with "url" and "owners"."""
    if isinstance(entry, str):
        return entry, None
    if not isinstance(entry, dict) or set(entry) != {"url", "owners"}:
        raise SettingsError(
            f"DPFIT_SQL_CONNECTIONS: {name!r} must be a URL string or an object with exactly "
            '"url" and "owners"'
        )
    url, owners = entry["url"], entry["owners"]
    if not isinstance(url, str):
        raise SettingsError(f"DPFIT_SQL_CONNECTIONS: the URL of {name!r} must be a string")
    if (
        not isinstance(owners, list)
        or not owners
        or not all(isinstance(o, str) and _OWNER_NAME.fullmatch(o) for o in owners)
    ):
        raise SettingsError(
            f"DPFIT_SQL_CONNECTIONS: the owners of {name!r} must be a non-empty list of "
            "principal names"
        )
    return url, frozenset(owners)


def _choice(env: dict[str, str], name: str, allowed: tuple[str, ...]) -> str:
    """The setting's value (lower-cased), the first allowed value when unset; else an error."""
    value = (env.get(name) or allowed[0]).strip().lower()
    if value not in allowed:
        raise SettingsError(f"{name} must be one of: {', '.join(allowed)}")
    return value


def _memory_bytes(raw: str | None) -> int | None:
    """``DPFIT_WORKER_MEMORY`` in bytes (Dask's notation: ``900MiB``, ``4GB``, ``2e9``);
    ``None`` when unset or ``0`` (unlimited)."""
    if not raw or not raw.strip() or raw.strip() == "0":
        return None
    from dask.utils import parse_bytes

    try:
        value = int(parse_bytes(raw.strip()))
    except (ValueError, TypeError):
        raise SettingsError("DPFIT_WORKER_MEMORY must be a size such as 900MiB or 4GB") from None
    if value <= 0:
        raise SettingsError("DPFIT_WORKER_MEMORY must be positive")
    return value


def _optional_int(raw: str | None) -> int | None:
    if not raw or not raw.strip():
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        raise SettingsError("DPFIT_DATA_PARALLEL_MIN_ROWS must be an integer") from None
    return max(0, value)


def _positive_int(env: dict[str, str], name: str) -> int | None:
    raw = (env.get(name) or "").strip()
    if not raw:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise SettingsError(f"{name} must be a positive integer") from None
    if value < 1:
        raise SettingsError(f"{name} must be a positive integer")
    return value


def _positive_float(env: dict[str, str], name: str, default: float, zero: bool = False) -> float:
    raw = (env.get(name) or "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise SettingsError(f"{name} must be a number of seconds") from None
    if not (value > 0 or (zero and value == 0)) or value != value or value == float("inf"):
        raise SettingsError(f"{name} must be a positive number of seconds")
    return value


def api_limits(env: dict[str, str]) -> dict[str, float | int | None]:
    """The limits on the API from the environment (unset: the dataclass defaults)."""
    integers = {
        "DPFIT_COMPUTE_PROCESSES": ("compute_processes", 0),
        "DPFIT_PRICE_CACHE": ("price_cache", 0),
        "DPFIT_PRINCIPAL_BURST": ("principal_burst", 1),
        "DPFIT_PRINCIPAL_CONCURRENCY": ("principal_concurrency", 1),
        "DPFIT_PRINCIPAL_QUEUE": ("principal_queue", 0),
        "DPFIT_COMPUTE_SLOTS": ("compute_slots", 1),
        "DPFIT_MAX_CONNECTIONS": ("max_connections", 1),
        "DPFIT_MAX_HEADER_BYTES": ("max_header_bytes", 1024),
    }
    reals = {
        "DPFIT_PRINCIPAL_RATE": ("principal_rate", 0.0),
        "DPFIT_COMPUTE_WAIT": ("compute_wait_seconds", 0.1),
        "DPFIT_KEEP_ALIVE_SECONDS": ("keep_alive_seconds", 1.0),
        "DPFIT_HEADER_TIMEOUT_SECONDS": ("header_timeout_seconds", 1.0),
        "DPFIT_BODY_TIMEOUT_SECONDS": ("body_timeout_seconds", 1.0),
    }
    found: dict[str, float | int | None] = {}
    for name, (attribute, least) in integers.items():
        raw = (env.get(name) or "").strip()
        if raw:
            try:
                value = int(raw)
            except ValueError:
                raise SettingsError(f"{name} must be an integer") from None
            if value < least:
                raise SettingsError(f"{name} must be at least {least}")
            found[attribute] = value
    for name, (attribute, least_real) in reals.items():
        raw = (env.get(name) or "").strip()
        if raw:
            try:
                real = float(raw)
            except ValueError:
                raise SettingsError(f"{name} must be a number") from None
            if not real >= least_real or real == float("inf"):
                raise SettingsError(f"{name} must be a finite number of at least {least_real:g}")
            found[attribute] = real
    return found


def _optional_path(raw: str | None) -> Path | None:
    return Path(raw).expanduser().resolve() if raw else None


def _default_sqlite_url() -> str:
    DEFAULT_HOME.mkdir(mode=0o700, parents=True, exist_ok=True)
    return f"sqlite:///{(DEFAULT_HOME / 'dpfit.db').resolve()}"


def _read_limits(env: dict[str, str]) -> ReadLimits:
    try:
        return ReadLimits.from_env(env)
    except ValueError as exc:
        raise SettingsError(str(exc)) from None
