"""The check every API test makes of a refusal: its status, an RFC 9457 problem+json body, and
(optionally) the field it names."""

from __future__ import annotations

from typing import Any

import httpx


def problem(response: httpx.Response, status: int, field: str | None = None) -> dict[str, Any]:
    """The problem+json body of ``response``, after checking its status and, given, its field."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body: dict[str, Any] = response.json()
    if field is not None:
        assert body["field"] == field, body
    return body
