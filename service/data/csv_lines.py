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
from typing import NamedTuple

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


_BLOCK_BYTES = 1 << 22


class Lines(NamedTuple):
    """A chunk after :func:`normalise_lines`: its text, its number of lines (rows), and a bound
    on its longest line in bytes (terminator included)."""

    text: bytes
    rows: int
    longest: int


class RowCountMismatch(ValueError):
    """Arrow parsed a different number of rows than the chunk has lines (a bug, never data)."""


def normalise_lines(chunk: bytes, n_fields: int) -> Lines:
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
    stops = ends - ((ends > starts) & (buf[np.maximum(ends - 1, 0)] == _CR))  # content end
    n_lines = ends.size
    # A rewritten line is at most its content plus the padding commas.
    longest = int(np.max(ends - starts)) + 1 + n_fields
    bad = np.zeros(n_lines, dtype=bool)
    # Everything below works on the positions of the few special bytes, never byte by byte.
    commas = np.flatnonzero(buf == _COMMA)
    fields = 1 + np.diff(np.searchsorted(commas, ends), prepend=0)  # no comma is a newline
    # Commas inside quoted values: [lo, hi) ranges of indices into ``commas`` (disjoint, sorted).
    quoted_lo = quoted_hi = np.zeros(0, dtype=np.intp)

    if b"\r" in chunk:
        carriage = np.flatnonzero(buf == _CR)
        line = np.searchsorted(ends, carriage)
        bad[line[carriage != stops[line]]] = True

    if b'"' in chunk:
        quotes = np.flatnonzero(buf == _QUOTE)
        after = np.searchsorted(quotes, ends)  # quotes before each line's end
        first = np.concatenate(([0], after[:-1]))  # index of each line's first quote
        per_line = after - first
        quote_line = np.repeat(np.arange(n_lines), per_line)  # quotes are sorted
        bad |= per_line % 2 == 1
        opening = (np.arange(quotes.size) - first[quote_line]) % 2 == 0
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
        # Commas between an opening quote and the next quote of its line are inside a value.
        pair = np.flatnonzero(opening[:-1] & (quote_line[:-1] == quote_line[1:]))
        if commas.size and pair.size:
            # Only spans whose next comma comes before their closing quote hold any (usually few).
            next_comma = np.searchsorted(commas, quotes[pair])
            holds = np.flatnonzero(
                commas[np.minimum(next_comma, commas.size - 1)] < quotes[pair + 1]
            )
            holds = holds[next_comma[holds] < commas.size]
            if holds.size:
                spans = pair[holds]
                quoted_lo = next_comma[holds]
                quoted_hi = np.searchsorted(commas, quotes[spans + 1])
                inside = quoted_hi - quoted_lo
                fields -= np.bincount(
                    quote_line[spans], weights=inside, minlength=n_lines
                ).astype(fields.dtype)

    to_fix = np.flatnonzero(bad | (fields != n_fields))
    if to_fix.size == 0:
        return Lines(chunk, n_lines, longest)
    # Where a line with more fields than the header is cut: before its n_fields-th comma outside
    # quotes (vectorised; the lines' quoting is valid, so that comma exists).
    cuts: dict[int, int] = {}
    wide = np.flatnonzero(~bad & (fields > n_fields))
    if wide.size:
        depth = np.zeros(commas.size + 1, dtype=np.int64)
        np.add.at(depth, quoted_lo, 1)
        np.add.at(depth, quoted_hi, -1)
        outside = commas[np.cumsum(depth[:-1]) == 0]
        first = np.searchsorted(outside, starts[wide])
        cuts = dict(zip(wide.tolist(), outside[first + n_fields - 1].tolist(), strict=True))
    empty_line = b"," * (n_fields - 1)
    pieces: list[bytes] = []
    done = 0
    for i in to_fix.tolist():
        start, stop = int(starts[i]), int(stops[i])
        pieces.append(chunk[done:start])
        if bad[i]:
            pieces.append(empty_line)
        elif fields[i] < n_fields:
            pieces.append(chunk[start:stop] + b"," * (n_fields - int(fields[i])))
        else:
            pieces.append(chunk[start : cuts[i]])
        pieces.append(b"\n")
        done = int(ends[i]) + 1
    pieces.append(chunk[done:])
    return Lines(b"".join(pieces), n_lines, longest)


def iter_csv_tables(lines: Lines, n_fields: int, indices: Sequence[int]) -> Iterator[pa.Table]:
    """Arrow tables of the fields at ``indices`` (in that order, as ``pa.binary()``) of
    :func:`normalise_lines` output, one row per line. Arrow's parse block is made larger than
    the longest line (Arrow refuses a line that straddles blocks: a long cell must never make a
    read fail)."""
    if not indices:
        raise ValueError("read at least one column")
    names = [f"f{i}" for i in range(n_fields)]
    unique = list(dict.fromkeys(indices))
    block_size = min(max(_BLOCK_BYTES, 2 * lines.longest), 2**31 - 1)  # Arrow: int32
    table = pcsv.read_csv(
        pa.py_buffer(lines.text),
        read_options=pcsv.ReadOptions(column_names=names, block_size=block_size),
        parse_options=_PARSE,
        convert_options=pcsv.ConvertOptions(
            include_columns=[names[i] for i in unique],
            column_types={names[i]: pa.binary() for i in unique},
            strings_can_be_null=False,
            quoted_strings_can_be_null=False,
            null_values=[],
        ),
    )
    if table.num_rows != lines.rows:
        raise RowCountMismatch("the CSV chunk parsed into a different number of rows")
    yield pa.table([table.column(names[i]) for i in indices], names=[names[i] for i in indices])
