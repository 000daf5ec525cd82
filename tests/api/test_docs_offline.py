"""Swagger UI, ReDoc and the dashboard need no network: their HTML names only this service's
files, those files are served, and every vendored file ships in the package with its license.

In-process app (TestClient). The browser-level check (no request leaves the host while the pages
render) is in tests/live/test_dashboard.py.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterator
from fnmatch import fnmatch
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from service.api.ui import STATIC_DIR
from tests.support.inprocess import in_process_app

ROOT = Path(__file__).resolve().parents[2]
URL_ATTRIBUTE = re.compile(r"""(?:src|href)\s*=\s*["']([^"']+)["']""")
JS_URL = re.compile(r"""(?:url|spec-url)\s*[:=]\s*["']([^"']+)["']""")


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    home = tmp_path_factory.mktemp("docs")
    with in_process_app(f"sqlite:///{home / 'dpfit.db'}", home) as (client, _):
        yield client


def referenced(html: str) -> list[str]:
    return URL_ATTRIBUTE.findall(html) + JS_URL.findall(html)


@pytest.mark.parametrize("page", ["/docs", "/redoc", "/ui"])
def test_pages_reference_only_local_assets_that_are_served(client: TestClient, page: str) -> None:
    response = client.get(page)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    html = response.text
    urls = referenced(html)
    assert urls, "the page names no asset at all?"
    for url in urls:
        assert url.startswith("/") and not url.startswith("//"), f"{page}: non-local URL {url}"
        asset = client.get(url)
        assert asset.status_code == 200, (page, url, asset.status_code)
    assert not re.search(r"https?://", re.sub(r"https?://www\.w3\.org/[\w/.]+", "", html)), html
    assert "cdn" not in html.lower() and "googleapis" not in html


def test_swagger_and_redoc_use_the_vendored_bundles(client: TestClient) -> None:
    swagger = client.get("/docs").text
    assert "/ui/static/vendor/swagger-ui/swagger-ui-bundle.js" in swagger
    assert "/ui/static/vendor/swagger-ui/swagger-ui.css" in swagger
    assert '"validatorUrl": null' in swagger  # no badge fetched from validator.swagger.io
    bundle = client.get("/ui/static/vendor/swagger-ui/swagger-ui-bundle.js")
    assert bundle.headers["content-type"].startswith("text/javascript")
    assert len(bundle.content) > 1_000_000  # the real bundle, not a stub
    redoc = client.get("/redoc").text
    assert "/ui/static/vendor/redoc/redoc.standalone.js" in redoc
    assert "fonts.googleapis.com" not in redoc
    # The one image ReDoc fetched from its CDN is patched out of the vendored bundle.
    assert "cdn.redoc.ly" not in (STATIC_DIR / "vendor/redoc/redoc.standalone.js").read_text()


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_docs_pages_may_not_reach_another_origin(client: TestClient, page: str) -> None:
    policy = client.get(page).headers["content-security-policy"]
    directives = dict(d.strip().split(" ", 1) for d in policy.split(";"))
    assert directives["default-src"] == "'self'"
    for name in ("connect-src", "img-src", "script-src", "style-src"):
        sources = directives[name].split()
        assert all(s.startswith("'") or s in ("data:",) for s in sources), (name, sources)


def test_dashboard_page_has_a_strict_content_security_policy(client: TestClient) -> None:
    for path in ("/ui", "/ui/static/app.js"):
        policy = client.get(path).headers["content-security-policy"]
        directives = dict(d.strip().split(" ", 1) for d in policy.split(";"))
        assert directives["default-src"] == "'self'"
        assert directives["script-src"] == "'self'" and directives["connect-src"] == "'self'"
        assert "unsafe-inline" not in policy and "unsafe-eval" not in policy
    html = client.get("/ui").text
    assert "<script>" not in html and " style=" not in html  # nothing inline for CSP to block


def test_static_mount_refuses_paths_outside_its_folder(client: TestClient) -> None:
    for path in ("/ui/static/../api/ui.py", "/ui/static/%2e%2e/api/ui.py", "/ui/static/nope.js"):
        response = client.get(path)
        assert response.status_code == 404, path
        assert "def dashboard" not in response.text


def test_every_vendored_file_ships_with_the_package_and_a_license() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["service.ui"]
    base = STATIC_DIR.parent
    files = [p.relative_to(base).as_posix() for p in STATIC_DIR.rglob("*") if p.is_file()]
    # setuptools globs: ``*`` never crosses a ``/`` (fnmatch alone would let it).
    unshipped = [
        f
        for f in files
        if not any(f.count("/") == p.count("/") and fnmatch(f, p) for p in patterns)
    ]
    assert unshipped == []
    for folder in (STATIC_DIR / "vendor").iterdir():
        if folder.is_dir():
            assert (folder / "LICENSE").is_file(), folder
