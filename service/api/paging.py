"""The HTTP side of keyset pagination (:mod:`service.pagination`): ``limit`` and ``cursor``.

A list answers at most ``limit`` items and, when more remain, the next page's cursor in two
headers: ``X-Next-Cursor`` and a ``Link: <…?cursor=…>; rel="next"`` (RFC 8288). The body stays
a plain JSON array, so clients that read one page keep working. A malformed cursor → 422 on
``query.cursor``, the field FastAPI names for an over-long one (every query parameter's
field is ``query.<name>``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Annotated, TypeVar
from urllib.parse import urlencode

from fastapi import Depends, Query, Request, Response

from service.api.errors import ProblemError, invalid
from service.pagination import DEFAULT_LIMIT, MAX_LIMIT, Page, decode_cursor, encode_cursor

NEXT_CURSOR_HEADER = "X-Next-Cursor"

T = TypeVar("T")


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
    try:
        return Page(limit=limit, after=decode_cursor(cursor) if cursor else None)
    except ValueError:
        raise bad_cursor() from None


PageParams = Annotated[Page, Depends(page_params)]

#: The field of a cursor refusal: a query parameter, named as FastAPI names its own refusals.
CURSOR_FIELD = "query.cursor"


def bad_cursor() -> ProblemError:
    """The 422 of a cursor this service did not issue (for this list)."""
    return invalid(CURSOR_FIELD, "not a cursor this service issued; omit it to start over")


def integer_cursor_id(page: Page) -> int | None:
    """The integer row id the page's cursor names, for lists keyed by an integer id (the ledger,
    the withdrawals; their cursors carry ``[created_at, str(id)]``, the format of
    :func:`service.pagination.encode_cursor`); None on the first page."""
    if page.after is None:
        return None
    item_id = page.after[1]
    if not item_id.isdigit() or len(item_id) > 18:
        raise bad_cursor()
    return int(item_id)


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
