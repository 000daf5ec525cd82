"""The ``Idempotency-Key`` request header, declared once for every route that takes it
(``POST /v1/jobs``, ``POST /v1/models/{id}/evaluate``).

A key is 1–200 visible ASCII characters (``!`` to ``~``: no space, no control character). Every
refusal that concerns it — malformed, or reused with a different request
(``IdempotencyConflict``, service/api/errors.py) — is a 422 on :data:`FIELD`, the field FastAPI
names for a header (``header.<name>``).
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from fastapi import Header
from pydantic import BeforeValidator
from pydantic_core import PydanticCustomError

__all__ = ["FIELD", "HEADER", "MAX_LENGTH", "MESSAGE", "IdempotencyKey"]

HEADER = "Idempotency-Key"
#: The problem+json field of every refusal about the key.
FIELD = f"header.{HEADER}"
MAX_LENGTH = 200
MESSAGE = f"must be 1–{MAX_LENGTH} visible ASCII characters, no spaces"
_PATTERN = r"^[\x21-\x7e]+$"
_VALID = re.compile(f"[\\x21-\\x7e]{{1,{MAX_LENGTH}}}")


def _readable(value: Any) -> Any:
    """Refuse a malformed key with :data:`MESSAGE` (before pydantic's own pattern and length
    checks, whose messages quote a regular expression); the value itself is never echoed."""
    if isinstance(value, str) and _VALID.fullmatch(value) is None:
        raise PydanticCustomError("idempotency_key", MESSAGE)
    return value


IdempotencyKey = Annotated[
    str | None,
    Header(
        alias=HEADER,
        max_length=MAX_LENGTH,
        pattern=_PATTERN,
        description="Retrying with the same key and the same body answers the first job "
        "(`Idempotent-Replayed: true`) and charges once; with another body it is a 422. "
        f"1–{MAX_LENGTH} visible ASCII characters (no spaces).",
    ),
    BeforeValidator(_readable),
]
