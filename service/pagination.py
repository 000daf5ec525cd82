"""Keyset pagination for every list: ``limit`` and an opaque cursor, without HTTP.

A list answers at most ``limit`` items (default 100, at most 1000) in ``(created_at, id)`` order.
A page is ONE query (``LIMIT limit + 1`` past the cursor's key), and items created while a
client pages are never skipped or repeated. The HTTP side (the ``limit``/``cursor`` query
parameters, the ``X-Next-Cursor`` and ``Link`` headers, 422 on a malformed cursor) is
:mod:`service.api.paging`; this module is neutral so the domain (``grants``) pages its queries
without importing the API.

The cursor is base64url JSON of the last item's ``[created_at, id]``: opaque to clients, never
secret (it names an item the caller has just been shown).
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Select, and_, or_
from sqlalchemy.orm import InstrumentedAttribute

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000


@dataclass(frozen=True)
class Page:
    """One page request: how many items, and the key of the last item already seen."""

    limit: int
    after: tuple[datetime, str] | None


def encode_cursor(created_at: datetime, item_id: str) -> str:
    raw = json.dumps([created_at.isoformat(), item_id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    """The key a cursor of :func:`encode_cursor` holds; ``ValueError`` for anything else."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        created, item_id = json.loads(raw)
        if not isinstance(created, str) or not isinstance(item_id, str):
            raise ValueError("cursor fields")
        when = datetime.fromisoformat(created)
        if when.tzinfo is None:
            raise ValueError("naive cursor time")
        return when, item_id
    except (binascii.Error, ValueError, TypeError, UnicodeDecodeError):
        raise ValueError("not a cursor this service issued") from None


def paginate(
    query: Select[Any],
    page: Page,
    created_at: InstrumentedAttribute[datetime],
    item_id: InstrumentedAttribute[str],
) -> Select[Any]:
    """``query`` ordered by (created_at, id), past the cursor, limited to one extra row (which
    tells :func:`finish_page` whether a next page exists)."""
    if page.after is not None:
        when, last = page.after
        query = query.where(or_(created_at > when, and_(created_at == when, item_id > last)))
    return query.order_by(created_at, item_id).limit(page.limit + 1)
