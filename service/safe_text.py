"""One rule for text that enters the service: no control characters, no lone surrogates.

Every id, name and string arriving over HTTP — body strings and object keys at any depth, path
segments, query values — is checked with this module's predicate, so that no backend ever sees
them: PostgreSQL refuses NUL in text and lone UTF-16 surrogates cannot be encoded as UTF-8, and
either would surface as a 500 after the request was accepted. Nothing here quotes the offending
value: callers report only *where* it is.

Refused: Unicode category Cc (C0 controls including NUL, tab and newline, DEL, C1 controls) and
Cs (surrogates). Everything else, including non-ASCII letters, is accepted.

In NAMES (the value of a ``name`` or ``principal`` key at any depth: a dataset's, a feature's, a
key's principal, a grant's) the bidirectional controls are refused too — U+061C, U+200E/U+200F,
U+202A–U+202E, U+2066–U+2069 ("Trojan Source", CVE-2021-42574): a name shown in a listing, a
log line or a terminal must read as it sorts and compares, and one holding an override can look
like another. Elsewhere (category values, the rows of a prediction) they stay accepted:
right-to-left data legitimately carries marks.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")

_BIDI = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
#: Keys whose string values are names (see the module docstring).
NAME_KEYS = frozenset({"name", "principal"})

MESSAGE = (
    "must not contain control characters (e.g. NUL, tab, newline) or lone surrogates, nor, in "
    "a name, bidirectional controls (U+202A-U+202E, U+2066-U+2069, U+200E, U+200F, U+061C)"
)


def is_safe(text: str) -> bool:
    """True when ``text`` has no control character and no lone surrogate."""
    return _UNSAFE.search(text) is None


def is_safe_name(text: str) -> bool:
    """True when ``text`` is safe (:func:`is_safe`) and holds no bidirectional control."""
    return is_safe(text) and _BIDI.search(text) is None


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
            if key in NAME_KEYS and isinstance(item, str) and not is_safe_name(item):
                yield (*path, key)
                continue
            yield from _unsafe_paths(item, (*path, key))
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            yield from _unsafe_paths(item, (*path, i))
