"""API keys and principals."""

from __future__ import annotations

from datetime import datetime

from pydantic import (
    BaseModel,
    Field,
)

from service.schemas.common import (
    Role,
    Strict,
)


class KeyCreate(Strict):
    name: str = Field(
        min_length=1,
        max_length=200,
        pattern=r"^[A-Za-z0-9_.@-]+$",
        description="The principal this key authenticates (used in dataset grants). A new name "
        "creates the principal; an existing name with the same role gets another key "
        "(rotation); an existing name with another role is refused (409).",
    )
    role: Role


class KeyOut(BaseModel):
    id: str
    name: str
    role: Role
    created_at: datetime
    revoked_at: datetime | None


class WhoAmI(BaseModel):
    """The principal a key belongs to (``GET /v1/me``): what the caller may already know."""

    name: str = Field(description="The principal's permanent name.")
    role: Role


class KeyCreated(BaseModel):
    id: str
    name: str
    role: Role
    key: str = Field(description="The API key. Shown once; only its hash is stored.")
    created_at: datetime
