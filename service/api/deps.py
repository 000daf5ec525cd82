"""Request-scoped dependencies: the app's state, reached through the request (no globals).

The trivial ones are ``async def``: FastAPI runs a plain ``def`` dependency in its threadpool,
and a thread hop per dependency was a measurable share of a request's cost under load.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.orm import Session, sessionmaker

from service.api.auth import Principal, require
from service.settings import Settings
from service.workers.dispatch import Dispatcher


async def get_sessions(request: Request) -> sessionmaker[Session]:
    return request.app.state.sessions


async def get_settings(request: Request) -> Settings:
    return request.app.state.settings


async def get_dispatcher(request: Request) -> Dispatcher:
    return request.app.state.dispatcher


Sessions = Annotated[sessionmaker[Session], Depends(get_sessions)]
AppSettings = Annotated[Settings, Depends(get_settings)]
AppDispatcher = Annotated[Dispatcher, Depends(get_dispatcher)]
Admin = Annotated[Principal, Depends(require("admin"))]
Owner = Annotated[Principal, Depends(require("owner"))]
Analyst = Annotated[Principal, Depends(require("analyst"))]
AnyRole = Annotated[Principal, Depends(require("owner", "analyst"))]
