"""The app factory: the only place that holds state (engine, sessions, dispatcher)."""

from __future__ import annotations

import gc
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from anyio import to_thread
from fastapi import FastAPI
from sqlalchemy.orm import Session, sessionmaker

from service import __version__
from service.api import catalog, datasets, docs, jobs, keys, me, metrics, models
from service.api.compute import ComputePool, PriceCache, default_processes
from service.api.errors import install_error_handlers
from service.api.health import IntegrityCheck
from service.api.middleware import (
    BodyLimit,
    HeadLimit,
    RequestContext,
    SafeTarget,
    SingleHeaders,
)
from service.api.server import install_bounded_logs
from service.api.throttle import ComputeLimiter, Limits
from service.api.ui import install_ui
from service.db.session import API_THREADS, ApiSessions, expected_schema_revision, make_engine
from service.domain.dispatching import Dispatcher
from service.ledger.audit import AuditCache
from service.logging_setup import use_log_format
from service.schemas import Problem
from service.settings import Settings
from service.workers.dispatch import DaskDispatcher, SupervisorDispatches
from service.workers.startup import start_once_per_service

DispatcherFactory = Callable[[Settings, sessionmaker[Session]], Dispatcher]

_PROBLEM = {"model": Problem}
ERROR_RESPONSES: dict[int | str, dict[str, object]] = {
    401: {"description": "Missing or unknown API key", **_PROBLEM},
    403: {"description": "The key's role may not do this", **_PROBLEM},
    404: {"description": "Not found or not visible to this key", **_PROBLEM},
    409: {"description": "Conflict (e.g. the budget does not allow the job)", **_PROBLEM},
    413: {"description": "The request body is larger than the limit", **_PROBLEM},
    422: {"description": "Invalid request; `field` names the part at fault", **_PROBLEM},
    503: {
        "description": "The database is unreachable or its schema is missing (see Retry-After)",
        **_PROBLEM,
    },
}

DESCRIPTION = """\
Fit machine-learning models to sensitive data under differential privacy.

Owners register datasets by reference with a total budget (ε, δ); analysts submit jobs naming a
dataset, a model and a private optimizer; a ledger charges every job atomically; only noised
models leave the service. Authenticate with `Authorization: Bearer <api key>`. Errors are
`application/problem+json` with the `field` at fault.
"""


def create_app(
    settings: Settings | None = None, dispatcher_factory: DispatcherFactory | None = None
) -> FastAPI:
    """Build the app. Starting it (lifespan) connects the database and the workers and
    re-dispatches jobs that were accepted but not finished."""
    settings = settings or Settings.from_env()
    # Under the supervisor, its reconciler is the one dispatcher (fair across all processes).
    default: DispatcherFactory = SupervisorDispatches if settings.supervised else DaskDispatcher
    factory: DispatcherFactory = dispatcher_factory or default
    use_log_format(settings.log_format)
    app = FastAPI(
        title="dpfit",
        version=__version__,
        description=DESCRIPTION,
        lifespan=_lifespan(settings, factory),
        generate_unique_id_function=lambda route: route.name,
        responses=ERROR_RESPONSES,
        # Offline Swagger UI / ReDoc with vendored assets (service/api/docs.py) replace these.
        docs_url=None,
        redoc_url=None,
    )
    _install_state(app, settings)
    install_error_handlers(app)
    # Outermost last: request id + failure log, then the head's limit and single-valued fields,
    # the body limit, then safe paths/queries.
    app.add_middleware(SafeTarget)
    app.add_middleware(
        BodyLimit, max_bytes=settings.max_body_bytes, deadline=settings.body_timeout_seconds
    )
    app.add_middleware(SingleHeaders)
    app.add_middleware(HeadLimit, max_bytes=settings.max_header_bytes)
    app.add_middleware(RequestContext)
    for module in (datasets, jobs, models, keys, me, catalog, docs, metrics):
        app.include_router(module.router)
    install_ui(app)
    _serve_problem_json_schema(app)
    return app


def _lifespan(
    settings: Settings, factory: DispatcherFactory
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """What starting the app does, and stopping it undoes (see :func:`create_app`)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # Sync routes run in AnyIO's thread pool: 40 threads by default, more than the GIL and
        # the database pools can serve (they queued and churned connections under load).
        to_thread.current_default_thread_limiter().total_tokens = API_THREADS
        app.state.compute.warm()
        app.state.limiter.reset()
        engine = make_engine(settings.database_url, must_exist=True, pre_ping=False)
        app.state.engine = engine
        app.state.sessions = ApiSessions(engine)
        app.state.dispatcher = factory(settings, app.state.sessions)
        job_events = None
        if not settings.supervised:  # else the supervisor does it (service/supervisor.py)
            job_events = start_once_per_service(
                app.state.sessions, app.state.dispatcher, settings.max_attempts, settings
            )
        # RequestContext writes one access line per request (route template, no query string).
        logging.getLogger("uvicorn.access").setLevel(logging.WARNING)
        install_bounded_logs()  # no tracebacks, repeats bounded (service/api/server.py)
        # What exists now (modules, the app, pools: ≈ 230k objects) lives as long as the process.
        # Left in the collector's oldest generation, each full collection walks all of it,
        # ≈ 80 ms with the GIL held, stalling every request of this process (bench/RESULTS.md,
        # section 7); frozen, a full collection walks only what requests left behind.
        gc.collect()
        gc.freeze()
        try:
            yield
        finally:
            gc.unfreeze()
            if job_events is not None:
                job_events.stop()
            app.state.dispatcher.close()
            app.state.compute.close()
            app.state.sessions.dispose()
            engine.dispose()

    return lifespan


def _install_state(app: FastAPI, settings: Settings) -> None:
    """The app's state before it starts: settings, metrics, compute pool and limits, caches."""
    app.state.settings = settings
    app.state.metrics = metrics.create_metrics(
        lambda: getattr(app.state, "sessions", None),
        per_dataset=settings.metrics_access == "admin",
    )
    app.state.dispatcher = None
    # Work that burns CPU (pricing, predicting) runs in compute processes, a bounded number per
    # principal at a time (service/api/compute.py, throttle.py).
    processes = settings.compute_processes
    app.state.compute = ComputePool(default_processes() if processes is None else processes)
    app.state.price_cache = PriceCache(settings.price_cache)
    app.state.limiter = ComputeLimiter(
        Limits(
            rate=settings.principal_rate,
            burst=settings.principal_burst,
            concurrency=settings.principal_concurrency,
            queue=settings.principal_queue,
            wait_seconds=settings.compute_wait_seconds,
            slots=settings.compute_slots,
        )
    )
    app.state.schema_revision = expected_schema_revision()
    app.state.integrity = IntegrityCheck()
    app.state.ledger_audits = AuditCache()


def _serve_problem_json_schema(app: FastAPI) -> None:
    """Declare error bodies as ``application/problem+json`` (what the handlers send)."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = build()
        for path in schema.get("paths", {}).values():
            for operation in path.values():
                for status, response in operation.get("responses", {}).items():
                    content = response.get("content", {})
                    if str(status) >= "400" and "application/json" in content:
                        content["application/problem+json"] = content.pop("application/json")
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
