"""Opaque, prefixed identifiers (``ds_…``, ``job_…``, ``mdl_…``)."""

from __future__ import annotations

import secrets


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(10)}"
