"""One rule for text that enters the service: no control characters, no lone surrogates.

Every id, name and string arriving over HTTP — body strings and object keys at any depth, path
segments, query values — is checked with this module's predicate, so that no backend ever sees
them: PostgreSQL refuses NUL in text and lone UTF-16 surrogates cannot be encoded as UTF-8, and
either would surface as a 500 after the request was accepted. Nothing here quotes the offending
value: callers report only *where* it is.

Refused: Unicode category Cc (C0 controls including NUL, tab and newline, DEL, C1 controls) and
Cs (surrogates). Everything else, including non-ASCII letters, is accepted.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")

MESSAGE = "must not contain control characters (e.g. NUL, tab, newline) or lone surrogates"


def is_safe(text: str) -> bool:
    """True when ``text`` has no control character and no lone surrogate."""
    return _UNSAFE.search(text) is None


def first_unsafe_path(value: Any) -> tuple[str | int, ...] | None:
    """The location of the first unsafe string in a JSON-like value, or None.

    Dict keys are checked as well as values; an unsafe key is reported at its own path.
    """
    return next(_unsafe_paths(value, ()), None)


def _unsafe_paths(value: Any, path: tuple[str | int, ...]) -> Iterator[tuple[str | int, ...]]:
    if isinstance(value, str):
        if not is_safe(value):
            yield path
    elif isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str) and not is_safe(key):
                # The key itself cannot be named safely; point at its parent.
                yield path
            yield from _unsafe_paths(item, (*path, key))
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            yield from _unsafe_paths(item, (*path, i))
