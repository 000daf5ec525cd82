"""The dashboard: ``GET /ui`` (one HTML page), the ``/ui/static`` files it loads, and ``GET /``
(a redirect to ``/ui``).

The page is a small single-page app (service/ui/static/) that calls the same HTTP API as every
other client with the API key the user typed, kept in the browser's ``sessionStorage`` only (never
in a URL, a cookie or a log). Guarantees:

- Every asset is vendored under service/ui/static/; nothing is loaded from another origin.
- ``Content-Security-Policy`` on the page and its files forbids any request to another origin
  (``default-src 'self'``), inline scripts and styles, framing, and form posts elsewhere — so even
  a bug in the page cannot send data off the host.
- The page itself is public (it holds no data); everything it shows comes from authenticated API
  calls, so it shows exactly what the key may see.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.responses import FileResponse, RedirectResponse
from starlette.responses import Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

STATIC_DIR = Path(__file__).resolve().parent.parent / "ui" / "static"
STATIC_PREFIX = "/ui/static"

CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}

router = APIRouter(include_in_schema=False)


@router.get("/")
async def root() -> RedirectResponse:
    """The service's root sends a browser to the dashboard (``/ui``); the API is under ``/v1``."""
    return RedirectResponse("/ui", status_code=307)


@router.get("/ui")
async def dashboard() -> FileResponse:
    """The dashboard page (public HTML; data comes from API calls made with the user's key)."""
    return FileResponse(
        STATIC_DIR / "index.html",
        media_type="text/html; charset=utf-8",
        headers={**SECURITY_HEADERS, "Cache-Control": "no-store"},
    )


class _UiStaticFiles(StaticFiles):
    """Starlette's static files (path traversal refused, ETags) with the dashboard's headers."""

    async def get_response(self, path: str, scope: Scope) -> Response:
        response = await super().get_response(path, scope)
        response.headers.update(SECURITY_HEADERS)
        return response


def install_ui(app: FastAPI) -> None:
    """Add ``GET /ui`` and mount ``/ui/static`` (the dashboard's and the API docs' assets)."""
    app.include_router(router)
    app.mount(STATIC_PREFIX, _UiStaticFiles(directory=STATIC_DIR), name="ui-static")
