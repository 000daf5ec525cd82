"""The CSV row rule, applied to a chunk of whole lines with numpy, then parsed by Arrow.

The rule (also stated in :mod:`service.data.sources`): every physical line is one row; a line is
split at ``,`` outside ``"…"`` quotes (``""`` inside quotes is a literal quote); more fields than
the header → the first ones are kept; fewer → the absent cells are empty; quoting of any other
form, or a carriage return that is not the line terminator's, makes the whole line unparseable →
every cell empty. Each of these decisions looks at the bytes of *one line* only.

:func:`normalise_lines` rewrites every line into the well-formed shape the rule gives it (exactly
the header's number of fields, valid quoting, no stray ``\\r``), so that Arrow's CSV parser —
with ``newlines_in_values=False``, no empty-line skipping, every column read as undecoded bytes —
sees one row per line and can neither skip a line nor reject the chunk. Well-formed lines (the
usual case) are not copied; a vectorised pass over the chunk finds the others.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv

_NEWLINE, _CR, _QUOTE, _COMMA = ord("\n"), ord("\r"), ord('"'), ord(",")

_PARSE = pcsv.ParseOptions(
    delimiter=",",
    quote_char='"',
    double_quote=True,
    escape_char=False,
    newlines_in_values=False,
    ignore_empty_lines=False,
)


class RowCountMismatch(ValueError):
    """Arrow parsed a different number of rows than the chunk has lines (a bug, never data)."""


def normalise_lines(chunk: bytes, n_fields: int) -> bytes:
    """``chunk`` (whole lines, ending with ``\\n``) with every line rewritten by the row rule to
    exactly ``n_fields`` well-quoted fields. Same number of lines, in the same order."""
    if n_fields < 1:
        raise ValueError("a CSV source has at least one column")
    buf = np.frombuffer(chunk, dtype=np.uint8)
    ends = np.flatnonzero(buf == _NEWLINE)
    if ends.size == 0 or ends[-1] != len(buf) - 1:
        raise ValueError("a chunk must consist of whole lines")
    starts = np.empty_like(ends)
    starts[0] = 0
    starts[1:] = ends[:-1] + 1
    before_end = np.maximum(ends - 1, 0)
    stops = ends - ((ends > starts) & (buf[before_end] == _CR))  # content end, exclusive
    n_lines = ends.size
    bad = np.zeros(n_lines, dtype=bool)

    carriage = np.flatnonzero(buf == _CR)
    if carriage.size:
        line = np.searchsorted(ends, carriage)
        bad[line[carriage != stops[line]]] = True

    commas = np.flatnonzero(buf == _COMMA)
    comma_line = np.searchsorted(ends, commas)
    quotes = np.flatnonzero(buf == _QUOTE)
    if quotes.size:
        quote_line = np.searchsorted(ends, quotes)
        first = np.searchsorted(quotes, starts)  # index of each line's first quote
        rank = np.arange(quotes.size) - first[quote_line]
        opening = rank % 2 == 0
        previous = np.where(quotes > starts[quote_line], buf[quotes - 1], _COMMA)
        following = np.where(
            quotes + 1 < stops[quote_line], buf[np.minimum(quotes + 1, len(buf) - 1)], _COMMA
        )
        valid = np.where(
            opening,
            (previous == _COMMA) | (previous == _QUOTE),
            (following == _COMMA) | (following == _QUOTE),
        )
        bad[quote_line[~valid]] = True
        bad |= np.bincount(quote_line, minlength=n_lines) % 2 == 1
        inside = (np.searchsorted(quotes, commas) - first[comma_line]) % 2 == 1
        commas, comma_line = commas[~inside], comma_line[~inside]
    fields = 1 + np.bincount(comma_line, minlength=n_lines)

    to_fix = np.flatnonzero(bad | (fields != n_fields))
    if to_fix.size == 0:
        return chunk
    empty_line = b"," * (n_fields - 1)
    pieces: list[bytes] = []
    done = 0
    for i in to_fix.tolist():
        start = int(starts[i])
        pieces.append(chunk[done:start])
        if bad[i]:
            pieces.append(empty_line)
        elif fields[i] < n_fields:
            pieces.append(chunk[start : int(stops[i])] + b"," * (n_fields - int(fields[i])))
        else:
            cut = int(commas[np.searchsorted(commas, start) + n_fields - 1])
            pieces.append(chunk[start:cut])
        pieces.append(b"\n")
        done = int(ends[i]) + 1
    pieces.append(chunk[done:])
    return b"".join(pieces)


def iter_csv_tables(text: bytes, n_fields: int, indices: Sequence[int]) -> Iterator[pa.Table]:
    """Arrow tables of the fields at ``indices`` (in that order, as ``pa.binary()``) of
    :func:`normalise_lines` output, one row per line."""
    if not indices:
        raise ValueError("read at least one column")
    names = [f"f{i}" for i in range(n_fields)]
    unique = list(dict.fromkeys(indices))
    table = pcsv.read_csv(
        pa.py_buffer(text),
        read_options=pcsv.ReadOptions(column_names=names, block_size=1 << 22),
        parse_options=_PARSE,
        convert_options=pcsv.ConvertOptions(
            include_columns=[names[i] for i in unique],
            column_types={names[i]: pa.binary() for i in unique},
            strings_can_be_null=False,
            quoted_strings_can_be_null=False,
            null_values=[],
        ),
    )
    if table.num_rows != text.count(b"\n"):
        raise RowCountMismatch("the CSV chunk parsed into a different number of rows")
    yield pa.table([table.column(names[i]) for i in indices], names=[names[i] for i in indices])
