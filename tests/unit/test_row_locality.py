"""Row-locality of the reader, the property that makes a row the unit of privacy (issue 8).

For random small files in every local format — a CSV file, a Parquet file, a Parquet folder — and
a replacement of ONE row by adversarial content, every OTHER row's encoded vector and label are
bit-identical between the two files, ``n`` is the same, and reading never fails (so a job's
outcome cannot depend on the row). The old reader (pandas' whole-column type inference) fails
this at once: e.g. one non-boolean token turns a True/False column into strings.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.data.encoding import Encoder
from service.data.reader import read_encoded, validate_source
from service.data.sources import local_source
from service.data.spec import CategoricalFeature, LabelSpec, NumericFeature

MAX_EXAMPLES = 300
BIG = 2**53 + 1
HEADER = ["x", "z", "c", "y"]
FEATURES = [
    NumericFeature(name="x", min=0, max=1),
    NumericFeature(name="z", min=-5, max=5),
    # 2^53 + 1 is not a float64: an integer column read as floats would lose this category.
    CategoricalFeature(name="c", categories=["a", "b", 1, BIG]),
]
LABELS = [
    LabelSpec(column="y", type="binary", positive="yes", negative="no"),
    LabelSpec(column="y", type="categorical", classes=["a", "b", 1, BIG]),
    LabelSpec(column="y", type="numeric"),
]

# Adversarial cell contents (bytes): booleans and boolean-like words, "n/a", empty, overflow,
# infinities, NaN, undecodable bytes, non-ASCII digits, quoted numbers, thousands separators,
# padding, very long cells, quotes, carriage returns, and ordinary values.
TOKENS: list[bytes] = [
    b"True", b"false", b"TRUE", b"yes", b"no", b"n/a", b"NA", b"", b" ", b"1e309", b"-1e309",
    b"-inf", b"inf", b"NaN", b"nan", b"\xff\xfe", b"\xc3", "١٢٣".encode(), "５".encode(),
    b'"5"', b'" 0.5 "', b"1,000", b'"1,000"', b" 5 ", b"\t3\t", b"x" * 3000, b"9" * 400,
    b"0.5", b"1", b"0", b"-0", b"+.5", b"1e-400", b"0x10", b"1_0", b"a", b"b", b" a ", b"A",
    b"-" + b"7" * 5000, b"0" * 3 + b"1", b"+1",
    b'"', b'"a""b"', b'a"b', b"\r", b"2.5", b"3.0", b"-7", b"1e2", b".", b"e5", b"\x00",
]


def _utf8(token: bytes) -> bool:
    try:
        token.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


TEXT_TOKENS = [t.decode() for t in TOKENS if _utf8(t)]

# --- CSV lines -------------------------------------------------------------------------------


def _quoted(cell: bytes) -> bytes:
    return b'"' + cell.replace(b'"', b'""') + b'"'


@st.composite
def csv_lines(draw: st.DrawFn) -> bytes:
    """One physical line (no ``\\n``): 0–6 fields of adversarial tokens, each possibly quoted,
    sometimes with an unbalanced quote appended."""
    cells = draw(st.lists(st.sampled_from(TOKENS), min_size=0, max_size=6))
    parts = [_quoted(c) if draw(st.booleans()) else c for c in cells]
    line = b",".join(parts)
    if draw(st.integers(0, 9)) == 0:
        line += b',"unbalanced'
    return line


@st.composite
def csv_pair(draw: st.DrawFn) -> tuple[bytes, bytes, int, int]:
    lines = draw(st.lists(csv_lines(), min_size=1, max_size=8))
    index = draw(st.integers(0, len(lines) - 1))
    other = draw(csv_lines())
    crlf = draw(st.booleans())
    end = b"\r\n" if crlf else b"\n"
    terminated = draw(st.booleans())
    replaced = [*lines[:index], other, *lines[index + 1 :]]
    # Without a final terminator an empty last line is the same bytes as no line at all: the
    # row rule counts a last unterminated line only when it is non-empty.
    if not (lines[-1] and replaced[-1]):
        terminated = True
    last = end if terminated else b""

    def render(rows: list[bytes]) -> bytes:
        return b",".join(h.encode() for h in HEADER) + end + end.join(rows) + last

    return render(lines), render(replaced), index, len(lines)


# --- Parquet tables --------------------------------------------------------------------------

COLUMN_TYPES = ["binary", "string", "float64", "int64", "bool"]


def _cells(kind: str) -> st.SearchStrategy[Any]:
    value: st.SearchStrategy[Any] = {
        "binary": st.sampled_from(TOKENS),
        "string": st.sampled_from(TEXT_TOKENS),
        "float64": st.floats(allow_nan=True, allow_infinity=True)
        | st.sampled_from([0.0, -0.0, 0.5, 1.0, 2.5, 1e308, -1e-320]),
        "int64": st.sampled_from([BIG, 1, 2**63 - 1]) | st.integers(-(2**63), 2**63 - 1),
        "bool": st.booleans(),
    }[kind]
    return st.none() | value


@st.composite
def parquet_pair(
    draw: st.DrawFn, max_files: int
) -> tuple[list[pa.Table], list[pa.Table], int, int]:
    """Tables (one per file, each with its own column types) and the same tables with one row
    replaced by other cells of the same types."""
    n_files = draw(st.integers(1, max_files))
    files: list[pa.Table] = []
    for _ in range(n_files):
        kinds = [draw(st.sampled_from(COLUMN_TYPES)) for _ in HEADER]
        rows = draw(st.integers(1 if n_files == 1 else 0, 5))
        columns = [
            pa.array([draw(_cells(k)) for _ in range(rows)], type=_arrow_type(k)) for k in kinds
        ]
        files.append(pa.table(columns, names=HEADER))
    total = sum(t.num_rows for t in files)
    if total == 0:
        files[0] = pa.table(
            [pa.array([None], type=t.type) for t in files[0].columns], names=HEADER
        )
        total = 1
    index = draw(st.integers(0, total - 1))
    replaced = []
    start = 0
    for table in files:
        local = index - start
        if 0 <= local < table.num_rows:
            columns = []
            for column in table.columns:
                kind = _kind(column.type)
                values = column.to_pylist()
                values[local] = draw(_cells(kind))
                columns.append(pa.array(values, type=column.type))
            table = pa.table(columns, names=HEADER)
        replaced.append(table)
        start += table.num_rows
    return files, replaced, index, total


def _arrow_type(kind: str) -> pa.DataType:
    return {
        "binary": pa.binary(),
        "string": pa.string(),
        "float64": pa.float64(),
        "int64": pa.int64(),
        "bool": pa.bool_(),
    }[kind]


def _kind(kind: pa.DataType) -> str:
    for name in COLUMN_TYPES:
        if _arrow_type(name) == kind:
            return name
    raise AssertionError(kind)


# --- the property ----------------------------------------------------------------------------


def _read(path: Path, fmt: str, label: LabelSpec, block: int) -> tuple[np.ndarray, np.ndarray]:
    source = local_source(path, fmt)  # type: ignore[arg-type]
    encoder = Encoder(FEATURES, fit_intercept=True)
    X, Y = read_encoded(source, encoder, label, 3.0, rows_per_block=block)
    report = validate_source(source, FEATURES, label)  # never raises on content either
    assert report.rows == source.count_rows() == X.shape[0]
    return X, Y


def _assert_other_rows_identical(
    a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray], index: int, n: int
) -> None:
    (X1, Y1), (X2, Y2) = a, b
    assert X1.shape[0] == X2.shape[0] == n
    keep = np.arange(n) != index
    # Bit-identical (a view as integers also tells 0.0 from -0.0 and compares NaNs).
    assert np.array_equal(X1[keep].view(np.uint64), X2[keep].view(np.uint64))
    assert np.array_equal(Y1[..., keep].view(np.uint64), Y2[..., keep].view(np.uint64))
    assert np.all(np.einsum("ij,ij->i", X1, X1) <= 1.0)
    assert np.all(np.einsum("ij,ij->i", X2, X2) <= 1.0)


SETTINGS = settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@SETTINGS
@given(pair=csv_pair(), label=st.sampled_from(LABELS), block=st.integers(1, 5))
def test_csv_one_row_changes_only_its_own_encoding(
    pair: tuple[bytes, bytes, int, int], label: LabelSpec, block: int
) -> None:
    text, replaced, index, n = pair
    with tempfile.TemporaryDirectory() as folder:
        first, second = Path(folder, "a.csv"), Path(folder, "b.csv")
        first.write_bytes(text)
        second.write_bytes(replaced)
        _assert_other_rows_identical(
            _read(first, "csv", label, block), _read(second, "csv", label, block), index, n
        )


@SETTINGS
@given(pair=parquet_pair(max_files=1), label=st.sampled_from(LABELS), block=st.integers(1, 5))
def test_parquet_file_one_row_changes_only_its_own_encoding(
    pair: tuple[list[pa.Table], list[pa.Table], int, int], label: LabelSpec, block: int
) -> None:
    files, replaced, index, n = pair
    with tempfile.TemporaryDirectory() as folder:
        first, second = Path(folder, "a.parquet"), Path(folder, "b.parquet")
        pq.write_table(files[0], first)
        pq.write_table(replaced[0], second)
        _assert_other_rows_identical(
            _read(first, "parquet", label, block),
            _read(second, "parquet", label, block),
            index,
            n,
        )


@SETTINGS
@given(pair=parquet_pair(max_files=3), label=st.sampled_from(LABELS), block=st.integers(1, 5))
def test_parquet_folder_one_row_changes_only_its_own_encoding(
    pair: tuple[list[pa.Table], list[pa.Table], int, int], label: LabelSpec, block: int
) -> None:
    files, replaced, index, n = pair
    with tempfile.TemporaryDirectory() as folder:
        first, second = Path(folder, "a"), Path(folder, "b")
        for target, tables in ((first, files), (second, replaced)):
            target.mkdir()
            for number, table in enumerate(tables):
                pq.write_table(table, target / f"part-{number}.parquet")
        _assert_other_rows_identical(
            _read(first, "parquet", label, block),
            _read(second, "parquet", label, block),
            index,
            n,
        )


def test_csv_row_count_is_the_number_of_lines() -> None:
    """Blank lines, short/long lines and unparseable lines are rows; the final terminator is
    not; ``n`` never depends on content."""
    body = b'x,z,c,y\n1,2,a,yes\n\n"unbalanced,1\n1,2,3,4,5,6\n1\nx"y,1,a,no\n'
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder, "rows.csv")
        path.write_bytes(body)
        source = local_source(path, "csv")
        assert source.count_rows() == 6
        encoder = Encoder(FEATURES)
        X, Y = read_encoded(source, encoder, LABELS[0], None)
        assert X.shape == (6, encoder.dimension)
        assert Y.tolist() == [1.0, -1.0, -1.0, -1.0, -1.0, -1.0]
        # Row 1 parses; the blank, unbalanced and broken-quote lines are all-missing rows.
        assert np.count_nonzero(X[[1, 2, 5], :-1]) == 0
        path.write_bytes(body.rstrip(b"\n"))  # no final terminator: same rows
        assert local_source(path, "csv").count_rows() == 6


_FIELD = rb'(?:[^",\r\n]*|"(?:[^"\r\n]|"")*")'
_WELL_QUOTED = re.compile(_FIELD + rb"(?:," + _FIELD + rb")*")


def _first_fields_reference(line: bytes, n_fields: int) -> bytes:
    """The scalar rule (the reader's former byte loop): cut before the n-th unquoted comma."""
    quoted, seen = False, 0
    for position, byte in enumerate(line):
        if byte == ord('"'):
            quoted = not quoted
        elif byte == ord(",") and not quoted:
            seen += 1
            if seen == n_fields:
                return line[:position]
    return line


@settings(max_examples=300, deadline=None)
@given(st.lists(csv_lines(), min_size=1, max_size=8), st.integers(1, 4))
def test_lines_wider_than_the_header_keep_their_first_fields(
    lines: list[bytes], n_fields: int
) -> None:
    """The vectorised cut of a line with more fields than the header (no Python loop over a
    line's bytes, whose cost a long line would control) equals the scalar rule."""
    from service.data.csv_lines import normalise_lines

    out = normalise_lines(b"\n".join(lines) + b"\n", n_fields).text.split(b"\n")[:-1]
    assert len(out) == len(lines)
    for line, got in zip(lines, out, strict=True):
        if not _WELL_QUOTED.fullmatch(line):
            continue  # unparseable lines: all fields empty (covered above)
        wanted = _first_fields_reference(line, n_fields)
        if wanted != line:  # more fields than the header
            assert got == wanted
