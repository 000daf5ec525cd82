"""Keyset pagination for every list endpoint: ``limit`` and an opaque ``cursor``.

A list answers at most ``limit`` items (default 100, at most 1000) in ``(created_at, id)`` order
and, when more remain, the next page's cursor in two headers: ``X-Next-Cursor`` and a
``Link: <…?cursor=…>; rel="next"`` (RFC 8288). The body stays a plain JSON array, so clients that
read one page keep working. A page is ONE query (``LIMIT limit + 1`` past the cursor's key), and
items created while a client pages are never skipped or repeated.

The cursor is base64url JSON of the last item's ``[created_at, id]``: opaque to clients, never
secret (it names an item the caller has just been shown). A malformed cursor → 422 on ``cursor``.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, TypeVar
from urllib.parse import urlencode

from fastapi import Depends, Query, Request, Response
from sqlalchemy import Select, and_, or_
from sqlalchemy.orm import InstrumentedAttribute

from service.api.errors import invalid

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
NEXT_CURSOR_HEADER = "X-Next-Cursor"

T = TypeVar("T")


@dataclass(frozen=True)
class Page:
    """One page request: how many items, and the key of the last item already seen."""

    limit: int
    after: tuple[datetime, str] | None


async def page_params(
    limit: Annotated[
        int, Query(ge=1, le=MAX_LIMIT, description="Items per page (default 100, at most 1000).")
    ] = DEFAULT_LIMIT,
    cursor: Annotated[
        str | None,
        Query(
            max_length=500,
            description="The `X-Next-Cursor` of the previous page (opaque); omit for the first.",
        ),
    ] = None,
) -> Page:
    return Page(limit=limit, after=decode_cursor(cursor) if cursor else None)


PageParams = Annotated[Page, Depends(page_params)]


def encode_cursor(created_at: datetime, item_id: str) -> str:
    raw = json.dumps([created_at.isoformat(), item_id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, str]:
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
        raise invalid("cursor", "not a cursor this service issued; omit it to start over") from None


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


def finish_page(
    rows: Sequence[T],
    page: Page,
    request: Request,
    response: Response,
    key: Callable[[T], tuple[datetime, str]],
) -> list[T]:
    """The page's rows (the extra one dropped), with the next-page headers set when needed."""
    items = list(rows[: page.limit])
    if len(rows) > page.limit:
        cursor = encode_cursor(*key(items[-1]))
        params = {k: v for k, v in request.query_params.items() if k != "cursor"}
        params["cursor"] = cursor
        response.headers[NEXT_CURSOR_HEADER] = cursor
        response.headers["Link"] = f'<{request.url.path}?{urlencode(params)}>; rel="next"'
    return items
