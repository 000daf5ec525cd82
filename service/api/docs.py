"""Swagger UI (``/docs``) and ReDoc (``/redoc``) served with no network: every asset is vendored.

FastAPI's default pages load their JavaScript, CSS, favicon and (ReDoc) Google Fonts from CDNs,
so they are blank on an isolated network. The app factory turns those defaults off and includes
this router instead: the same HTML builders pointed at the files under
``service/ui/static/vendor/`` (swagger-ui-dist 5.35.0, Apache-2.0; redoc 2.5.4 standalone, MIT;
their licenses sit beside them; ReDoc's one hard-coded image URL, its logo on cdn.redoc.ly, is
patched out — see vendor/README.md), which the ``/ui/static`` mount serves (service/api/ui.py).

Guarantee: the HTML of these pages names no URL outside this service (tests/api/test_docs_offline.py
checks the HTML and that every asset it names is served).
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.openapi.docs import (
    get_redoc_html,
    get_swagger_ui_html,
    get_swagger_ui_oauth2_redirect_html,
)
from fastapi.responses import HTMLResponse

from service.api.ui import STATIC_PREFIX

router = APIRouter(include_in_schema=False)

SWAGGER_JS = f"{STATIC_PREFIX}/vendor/swagger-ui/swagger-ui-bundle.js"
SWAGGER_CSS = f"{STATIC_PREFIX}/vendor/swagger-ui/swagger-ui.css"
FAVICON = f"{STATIC_PREFIX}/vendor/swagger-ui/favicon-32x32.png"
REDOC_JS = f"{STATIC_PREFIX}/vendor/redoc/redoc.standalone.js"
OAUTH2_REDIRECT = "/docs/oauth2-redirect"
# No online validator badge (Swagger UI would send the spec's URL to validator.swagger.io).
SWAGGER_PARAMETERS = {"validatorUrl": None}
# Defence in depth: FastAPI's pages start the bundles with an inline script, and both bundles
# inject inline styles (ReDoc runs its search in a blob: worker), so those are allowed — but no
# request may go to another origin (connect, images, fonts, scripts: this origin only).
DOCS_CSP = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self' 'unsafe-inline'",
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data:",
        "worker-src 'self' blob:",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "frame-ancestors 'none'",
    ]
)


def _with_csp(response: HTMLResponse) -> HTMLResponse:
    response.headers["Content-Security-Policy"] = DOCS_CSP
    response.headers["Referrer-Policy"] = "no-referrer"
    return response


@router.get("/docs")
async def swagger_ui(request: Request) -> HTMLResponse:
    """Swagger UI for ``/openapi.json``; assets from this service only."""
    return _with_csp(
        get_swagger_ui_html(
            openapi_url=request.app.openapi_url,
            title=f"{request.app.title} — Swagger UI",
            swagger_js_url=SWAGGER_JS,
            swagger_css_url=SWAGGER_CSS,
            swagger_favicon_url=FAVICON,
            oauth2_redirect_url=OAUTH2_REDIRECT,
            swagger_ui_parameters=SWAGGER_PARAMETERS,
        )
    )


@router.get(OAUTH2_REDIRECT)
async def swagger_ui_redirect() -> HTMLResponse:
    """Swagger UI's OAuth2 redirect page (self-contained HTML, kept for parity with FastAPI)."""
    return get_swagger_ui_oauth2_redirect_html()


@router.get("/redoc")
async def redoc(request: Request) -> HTMLResponse:
    """ReDoc for ``/openapi.json``; no Google Fonts, assets from this service only."""
    return _with_csp(
        get_redoc_html(
            openapi_url=request.app.openapi_url,
            title=f"{request.app.title} — ReDoc",
            redoc_js_url=REDOC_JS,
            redoc_favicon_url=FAVICON,
            with_google_fonts=False,
        )
    )
