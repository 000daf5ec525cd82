"""Request-scoped dependencies: the app's state, reached through the request (no globals).

The trivial ones are ``async def``: FastAPI runs a plain ``def`` dependency in its threadpool,
and a thread hop per dependency was a measurable share of a request's cost under load.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.orm import Session, sessionmaker

from service.api.auth import Principal, authenticate, require
from service.api.compute import ComputePool, PriceCache
from service.domain.dispatching import Dispatcher
from service.settings import Settings


async def get_sessions(request: Request) -> sessionmaker[Session]:
    return request.app.state.sessions


async def get_settings(request: Request) -> Settings:
    return request.app.state.settings


async def get_dispatcher(request: Request) -> Dispatcher:
    return request.app.state.dispatcher


async def get_compute(request: Request) -> ComputePool:
    return request.app.state.compute


async def get_price_cache(request: Request) -> PriceCache:
    return request.app.state.price_cache


async def compute_slot(
    request: Request, principal: Annotated[Principal, Depends(authenticate)]
) -> AsyncIterator[None]:
    """Hold one of the principal's compute slots for the request (service/api/throttle.py):
    waits on the event loop (no API thread held), or 429 with ``Retry-After``."""
    async with request.app.state.limiter.slot(principal.name):
        yield


Sessions = Annotated[sessionmaker[Session], Depends(get_sessions)]
AppSettings = Annotated[Settings, Depends(get_settings)]
AppDispatcher = Annotated[Dispatcher, Depends(get_dispatcher)]
Compute = Annotated[ComputePool, Depends(get_compute)]
PriceCacheDep = Annotated[PriceCache, Depends(get_price_cache)]
ComputeSlot = Annotated[None, Depends(compute_slot)]
Admin = Annotated[Principal, Depends(require("admin"))]
Owner = Annotated[Principal, Depends(require("owner"))]
Analyst = Annotated[Principal, Depends(require("analyst"))]
AnyRole = Annotated[Principal, Depends(require("owner", "analyst"))]
