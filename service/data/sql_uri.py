"""``sql://<connection>/<table>`` locations: parsed and validated, nothing looked up.

Split out of :mod:`service.data.sql_source` (which opens and reads the table): the domain's
source-open check (:func:`service.domain.roots.location_open`) needs only the connection's name.
Errors quote only what the user typed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from service.data.sources import SourceError

__all__ = ["SCHEME", "TableRef", "parse_sql_uri"]

SCHEME = "sql://"
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_$]{0,62}")
_CONNECTION = re.compile(r"[A-Za-z0-9_-]{1,64}")


@dataclass(frozen=True)
class TableRef:
    """A table named by an owner: the connection's name and validated identifiers."""

    connection: str
    schema: str | None
    table: str

    @property
    def location(self) -> str:
        qualified = self.table if self.schema is None else f"{self.schema}.{self.table}"
        return f"{SCHEME}{self.connection}/{qualified}"


def parse_sql_uri(uri: str) -> TableRef:
    """``sql://<connection>/<table>`` or ``sql://<connection>/<schema>.<table>``, validated.

    Raises :class:`SourceError` (quoting only what the user typed) when the form or an
    identifier is invalid. Nothing is looked up.
    """
    text = uri.strip()
    if not text.lower().startswith(SCHEME):
        raise SourceError(f"{uri!r} is not a sql://<connection>/<table> URI")
    connection, slash, name = text[len(SCHEME) :].partition("/")
    if not _CONNECTION.fullmatch(connection):
        raise SourceError(f"{uri!r}: the connection name must be 1-64 letters, digits, '_' or '-'")
    parts = name.split(".")
    if not slash or len(parts) > 2 or not all(_IDENTIFIER.fullmatch(p) for p in parts):
        raise SourceError(
            f"{uri!r}: the table must be <table> or <schema>.<table>, each an identifier of "
            "letters, digits, '_' or '$' (not starting with a digit, at most 63 characters)"
        )
    schema, table = (None, parts[0]) if len(parts) == 1 else (parts[0], parts[1])
    return TableRef(connection=connection, schema=schema, table=table)
