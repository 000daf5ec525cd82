"""Public read limits: no failure or memory a row controls, bounded memory whatever the shape.

Issue 22, attack 3: two CSVs identical but for one row's *undeclared* cell (``n100`` vs a huge
one) must read into rows of the same shape with the same memory — the huge line keeps its place
as a row of MISSING cells and is never held. Issue 23, item 2: hostile shapes (a very wide
header, a header without a newline, short rows padded to a wide header, Parquet files with
many columns, folders with many files) are refused naming the limit, or read, in a memory that
does not grow with the hostile part.

Peak memory is measured as the peak RSS (``resource.getrusage``) of a fresh subprocess that
reads one file, compared with the same read of a benign file of the same declared schema:
Arrow allocates outside Python's heap, so ``tracemalloc`` would not see it. No timed assertion.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from service.data.backends import open_source
from service.data.encoding import Encoder
from service.data.limits import ReadLimits
from service.data.reader import read_encoded, validate_source
from service.data.sources import LimitExceeded, local_source
from service.data.spec import CategoricalFeature, LabelSpec, NumericFeature
from service.settings import Settings

LABEL = LabelSpec(column="y", positive="yes", negative="no")
FEATURES = [NumericFeature(name="x", min=0, max=10)]
MiB = 1 << 20

# The reading subprocess: read ``path`` with the given limits and report the peak RSS (KiB on
# Linux) together with what the read gave (shapes, a digest of the rows, or the refusal).
_READER = r"""
import json, resource, sys, hashlib
from pathlib import Path
from service.data.encoding import Encoder
from service.data.limits import ReadLimits
from service.data.reader import read_encoded, validate_source
from service.data.sources import SourceError, local_source
from service.data.spec import LabelSpec, NumericFeature

path, fmt = sys.argv[1], sys.argv[2]
limits, columns = json.loads(sys.argv[3]), json.loads(sys.argv[4])
features = [NumericFeature(name=c, min=0, max=10) for c in columns]
label = LabelSpec(column="y", positive="yes", negative="no")
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
out = {}
try:
    source = local_source(Path(path), fmt, ReadLimits(**limits))
    source.columns()
    X, Y = read_encoded(source, Encoder(features, fit_intercept=True), label, None)
    report = validate_source(source, features, label)
    out["shape"] = [list(X.shape), list(Y.shape)]
    out["rows"] = [hashlib.sha256(row.tobytes()).hexdigest() for row in X]
    out["labels"] = Y.tolist()
    out["oversize_lines"] = report.oversize_lines
except SourceError as exc:
    out["refused"] = str(exc)
out["base_kib"] = base
out["peak_kib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps(out))
"""


def _read_in_subprocess(
    path: Path,
    fmt: str = "csv",
    limits: dict[str, int] | None = None,
    columns: tuple[str, ...] = ("x",),
) -> dict[str, Any]:
    env = dict(os.environ)
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            _READER,
            str(path),
            fmt,
            json.dumps(limits or {}),
            json.dumps(list(columns)),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=True,
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def _growth_mib(run: dict[str, Any]) -> float:
    """Peak RSS reached while reading, above the RSS after the imports."""
    return (run["peak_kib"] - run["base_kib"]) / 1024


def _csv(path: Path, lines: list[bytes]) -> Path:
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


# ----------------------------------------------------------------------------------------------
# Issue 22, attack 3: one row's undeclared cell
# ----------------------------------------------------------------------------------------------


def _neighbours(tmp_path: Path, huge: int) -> tuple[Path, Path]:
    rng = np.random.default_rng(3)
    rows = [
        f"{v:.3f},n{i},{'yes' if v > 5 else 'no'}".encode()
        for i, v in enumerate(rng.uniform(0, 10, 2000))
    ]
    small = _csv(tmp_path / "small.csv", [b"x,note,y", *rows])
    rows[100] = rows[100].split(b",")[0] + b"," + b"z" * huge + b",yes"
    large = _csv(tmp_path / "large.csv", [b"x,note,y", *rows])
    return small, large


def test_attack_3_an_undeclared_huge_cell_costs_no_memory_and_keeps_the_row_shape(
    tmp_path: Path,
) -> None:
    """On the old reader the 48 MiB line was gathered whole and parsed with a parse block twice
    its size (peak growth > 100 MiB); now it streams past in bounded memory."""
    small, large = _neighbours(tmp_path, 48 * MiB)
    a = _read_in_subprocess(small)
    b = _read_in_subprocess(large)
    assert a["shape"] == b["shape"] == [[2000, 2], [2000]]
    # Only row 100 differs: in the neighbour it is a row of MISSING cells (x at its midpoint,
    # the label negative), every other row is bit-identical.
    differ = [i for i, (r, s) in enumerate(zip(a["rows"], b["rows"], strict=True)) if r != s]
    assert differ == [100]
    assert b["labels"][100] == -1.0
    assert (a["oversize_lines"], b["oversize_lines"]) == (0, 1)
    assert _growth_mib(b) - _growth_mib(a) < 16, (a, b)


def test_the_row_of_an_oversize_line_is_all_missing(tmp_path: Path) -> None:
    small, large = _neighbours(tmp_path, 2 * MiB)
    encoder = Encoder(FEATURES, fit_intercept=True)
    X, Y = read_encoded(local_source(large, "csv"), encoder, LABEL, None)
    X_missing, Y_missing = read_encoded(
        local_source(_csv(tmp_path / "m.csv", [b"x,note,y", b",,"]), "csv"), encoder, LABEL, None
    )
    np.testing.assert_array_equal(X[100], X_missing[0])
    assert Y[100] == Y_missing[0] == -1.0
    report = validate_source(local_source(large, "csv"), FEATURES, LABEL)
    assert report.oversize_lines == 1 and report.rows == 2000
    assert report.features["x"].missing == 1


@pytest.mark.parametrize("where", ["middle", "last-unterminated", "across-reads"])
def test_oversize_lines_keep_their_place_wherever_they_fall(tmp_path: Path, where: str) -> None:
    limits = ReadLimits(max_line_bytes=64)
    long = b"9," + b"q" * 200 + b",yes"
    lines = [b"x,note,y", b"1,a,yes", long, b"2,b,no"]
    if where == "last-unterminated":
        path = tmp_path / "f.csv"
        path.write_bytes(b"\n".join([b"x,note,y", b"1,a,yes", b"2,b,no", long]))
        expected = [b"1", b"2", b""]
    elif where == "across-reads":
        # Many long lines: several over-long lines per read and partial ones at read edges.
        lines = [b"x,note,y", *([long, b"3,c,yes"] * 40_000)]
        path = _csv(tmp_path / "f.csv", lines)
        expected = [b"", b"3"] * 40_000
    else:
        path = _csv(tmp_path / "f.csv", lines)
        expected = [b"1", b"", b"2"]
    source = local_source(path, "csv", limits)
    cells = pa.Table.from_batches(list(source.iter_batches(["x"], 1000)))
    assert cells.column("x").to_pylist() == expected
    assert source.count_rows() == len(expected)
    assert source.oversize_lines == expected.count(b"")


# ----------------------------------------------------------------------------------------------
# Oversize cells, in every reader
# ----------------------------------------------------------------------------------------------


def test_an_oversize_declared_cell_is_missing_and_counted_csv_and_parquet(tmp_path: Path) -> None:
    limits = ReadLimits(max_cell_bytes=8)
    features = [CategoricalFeature(name="c", categories=["short", "x" * 9])]
    frame = pa.table({"c": ["short", "x" * 9, "short"], "y": ["yes", "no", "y" * 20]})
    pq.write_table(frame, tmp_path / "f.parquet")
    pq.write_table(
        pa.table({"c": frame.column("c").cast(pa.large_string()), "y": frame.column("y")}),
        tmp_path / "large.parquet",
    )
    _csv(tmp_path / "f.csv", [b"c,y", b"short,yes", b"xxxxxxxxx,no", b"short," + b"y" * 20])
    reports = []
    for name, fmt in [("f.csv", "csv"), ("f.parquet", "parquet"), ("large.parquet", "parquet")]:
        source = local_source(tmp_path / name, fmt, limits)  # type: ignore[arg-type]
        report = validate_source(source, features, LABEL)
        reports.append(report.to_json())
        X, Y = read_encoded(source, Encoder(features, fit_intercept=False), LABEL, None)
        assert X[1].tolist() == [0.0, 0.0]  # the 9-byte category is MISSING: all zeros
        assert X[0][0] > 0 and Y.tolist()[2] == -1.0
    assert reports[0] == reports[1] == reports[2]
    assert reports[0]["features"]["c"]["oversize"] == 1
    assert reports[0]["label"]["oversize"] == 1


def test_sql_cells_are_cut_by_the_database_and_oversize_ones_missing(tmp_path: Path) -> None:
    import sqlalchemy as sa

    url = f"sqlite:///{tmp_path / 'wh.db'}"
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE t (id INTEGER PRIMARY KEY, c TEXT, y TEXT, b BLOB)"))
        conn.execute(
            sa.text("INSERT INTO t VALUES (1, 'ab', 'yes', X'00'), (2, :big, 'no', :blob)"),
            {"big": "é" * 5000, "blob": b"\x01" * 5000},
        )
    engine.dispose()
    settings = Settings(
        database_url="sqlite://",
        data_roots=(),
        workers=1,
        dask_scheduler=None,
        sql_connections={"lite": url},
        read_limits=ReadLimits(max_cell_bytes=16),
    )
    source = open_sql_source_for(settings)
    raw = pa.Table.from_batches(list(source.iter_batches(["c", "b"], 10)))
    # The database cut them to 17 characters / bytes: never the whole 5000.
    assert [len(v) for v in raw.column("c").to_pylist()] == [2, 17]
    assert [len(v) for v in raw.column("b").to_pylist()] == [1, 17]
    features = [CategoricalFeature(name="c", categories=["ab"])]
    report = validate_source(source, features, LABEL)
    assert report.features["c"].oversize == 1 and report.features["c"].missing == 0


def open_sql_source_for(settings: Settings) -> Any:
    from service.data.sql_source import open_sql_source

    return open_sql_source("sql://lite/t", settings)


# ----------------------------------------------------------------------------------------------
# Issue 23, item 2: hostile shapes, refused naming the limit, in flat memory
# ----------------------------------------------------------------------------------------------


def test_a_wide_csv_header_is_refused_naming_the_limit(tmp_path: Path) -> None:
    wide = _csv(tmp_path / "wide.csv", [b",".join([b"x", b"y", *[b"c"] * 200_000]), b"1,yes"])
    with pytest.raises(LimitExceeded, match="DPFIT_MAX_COLUMNS") as refusal:
        local_source(wide, "csv", ReadLimits(max_columns=1000)).columns()
    assert refusal.value.setting == "DPFIT_MAX_COLUMNS"
    run = _read_in_subprocess(wide, limits={"max_columns": 1000})
    assert "DPFIT_MAX_COLUMNS" in run["refused"]


def test_a_header_without_newline_is_refused_in_flat_memory(tmp_path: Path) -> None:
    """The old reader gathered the header by repeated concatenation (quadratic, and whole)."""
    path = tmp_path / "endless.csv"
    with path.open("wb") as out:
        for _ in range(40):
            out.write(b"abcdefgh," * (MiB // 9))
    benign = _csv(tmp_path / "benign.csv", [b"x,y", b"1,yes"])
    hostile = _read_in_subprocess(path, limits={"max_line_bytes": 65536})
    baseline = _read_in_subprocess(benign, limits={"max_line_bytes": 65536})
    assert "DPFIT_MAX_LINE_BYTES" in hostile["refused"]
    assert _growth_mib(hostile) - _growth_mib(baseline) < 8, (hostile, baseline)


def test_short_rows_under_a_wide_header_are_read_in_bounded_memory(tmp_path: Path) -> None:
    """Short rows are padded to the header's width before Arrow parses them; chunks now hold
    fewer lines under a wider header, so the padding stays bounded. The old reader padded a
    whole 8 MiB read at once (here ~150 MiB of commas, Arrow's field offsets four times that)."""
    width = 3000
    header = b",".join([b"x", b"y", *[f"c{i}".encode() for i in range(width - 2)]])
    wide = _csv(tmp_path / "wide.csv", [header, *([b"1,yes"] * 50_000)])
    narrow = _csv(tmp_path / "narrow.csv", [b"x,y", *([b"1,yes"] * 50_000)])
    hostile = _read_in_subprocess(wide)
    baseline = _read_in_subprocess(narrow)
    assert hostile["shape"] == baseline["shape"] == [[50_000, 2], [50_000]]
    assert hostile["rows"] == baseline["rows"]
    assert _growth_mib(hostile) - _growth_mib(baseline) < 80, (hostile["peak_kib"], baseline)


def test_parquet_files_with_too_many_columns_or_a_large_footer_are_refused(
    tmp_path: Path,
) -> None:
    table = pa.table({f"c{i}": [1.0, 2.0] for i in range(300)} | {"y": ["yes", "no"]})
    pq.write_table(table, tmp_path / "wide.parquet")
    with pytest.raises(LimitExceeded, match="DPFIT_MAX_COLUMNS"):
        local_source(tmp_path / "wide.parquet", "parquet", ReadLimits(max_columns=100)).columns()
    with pytest.raises(LimitExceeded, match="DPFIT_MAX_PARQUET_FOOTER_BYTES"):
        local_source(
            tmp_path / "wide.parquet", "parquet", ReadLimits(max_parquet_footer_bytes=4096)
        ).columns()
    assert len(local_source(tmp_path / "wide.parquet", "parquet").columns()) == 301


def test_a_declared_parquet_column_chunk_over_the_limit_is_refused(tmp_path: Path) -> None:
    big = pa.table({"x": [1.0, 2.0], "note": ["a" * (2 * MiB), "b"], "y": ["yes", "no"]})
    pq.write_table(big, tmp_path / "f.parquet", compression="snappy")
    limits = ReadLimits(max_column_chunk_bytes=MiB)
    source = local_source(tmp_path / "f.parquet", "parquet", limits)
    # An undeclared large column is never read: the declared ones pass.
    assert validate_source(source, FEATURES, LABEL).rows == 2
    with pytest.raises(LimitExceeded, match="DPFIT_MAX_COLUMN_CHUNK_BYTES"):
        validate_source(source, [CategoricalFeature(name="note", categories=["b"])], LABEL)


def test_a_folder_with_too_many_files_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "root"
    folder = root / "parts"
    folder.mkdir(parents=True)
    for i in range(12):
        pq.write_table(pa.table({"x": [1.0], "y": ["yes"]}), folder / f"p{i:02}.parquet")
    settings = Settings(
        database_url="sqlite://",
        data_roots=(root,),
        workers=1,
        dask_scheduler=None,
        read_limits=ReadLimits(max_folder_files=10),
    )
    with pytest.raises(LimitExceeded, match="DPFIT_MAX_FOLDER_FILES"):
        open_source("parts", settings)
    with pytest.raises(LimitExceeded, match="DPFIT_MAX_FOLDER_FILES"):
        local_source(folder, "parquet", ReadLimits(max_folder_files=10)).columns()
    assert (
        open_source(
            "parts",
            Settings(database_url="sqlite://", data_roots=(root,), workers=1, dask_scheduler=None),
        ).count_rows()
        == 12
    )


def test_categories_are_capped_in_the_schema_and_by_the_setting(tmp_path: Path) -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="DPFIT_MAX_CATEGORIES"):
        CategoricalFeature(name="c", categories=list(range(20_000)))
    with pytest.raises(ValidationError, match="DPFIT_MAX_CATEGORIES"):
        LabelSpec(column="y", type="categorical", classes=list(range(10_001)))
    assert len(CategoricalFeature(name="c", categories=list(range(10_000))).categories) == 10_000
    path = _csv(tmp_path / "f.csv", [b"c,y", b"a,yes", b"b,no"])
    source = local_source(path, "csv", ReadLimits(max_categories=3))
    with pytest.raises(LimitExceeded, match="DPFIT_MAX_CATEGORIES"):
        validate_source(source, [CategoricalFeature(name="c", categories=list("abcd"))], LABEL)


def test_limits_come_from_the_environment() -> None:
    settings = Settings.from_env(
        {"DPFIT_MAX_CELL_BYTES": "100", "DPFIT_MAX_COLUMNS": "7", "DPFIT_DATA_ROOTS": "."}
    )
    assert settings.read_limits.max_cell_bytes == 100
    assert settings.read_limits.max_columns == 7
    assert settings.read_limits.max_line_bytes == ReadLimits().max_line_bytes
    from service.settings import SettingsError

    with pytest.raises(SettingsError, match="DPFIT_MAX_LINE_BYTES"):
        Settings.from_env({"DPFIT_MAX_LINE_BYTES": "0", "DPFIT_DATA_ROOTS": "."})


def test_a_partition_window_reads_by_the_same_limits(tmp_path: Path) -> None:
    """A data-parallel worker's window applies its source's limits: its rows are the whole
    read's rows, oversize cells MISSING in both."""
    from service.data.partitions import RowWindow, WindowSource

    path = _csv(tmp_path / "f.csv", [b"c,y", b"a,yes", b"abcdefghij,no", b"b,yes", b"a,no"])
    source = local_source(path, "csv", ReadLimits(max_cell_bytes=4))
    features = [CategoricalFeature(name="c", categories=["a", "abcdefghij"])]
    encoder = Encoder(features, fit_intercept=False)
    X, _ = read_encoded(source, encoder, LABEL, None)
    assert X[1].tolist() == [0.0, 0.0]
    W, _ = read_encoded(WindowSource(source, RowWindow(1, 3)), encoder, LABEL, None)
    np.testing.assert_array_equal(W, X[1:3])


def test_a_repeated_long_parquet_value_is_never_decoded_row_by_row(tmp_path: Path) -> None:
    """A dictionary-encoded Parquet column holding one 64 KiB value on 10,000 rows is a few
    KiB on disk and in its column chunk; decoded it is 640 MiB (the old reader decoded every
    batch). Text columns are now read as dictionary arrays and converted through their
    dictionary, so the read costs what the benign file's does."""
    value = "7" * (64 << 10)
    rows = 10_000
    labels = pa.array(["yes", "no"] * (rows // 2))
    indices = pa.array(np.zeros(rows, dtype=np.int32))
    hostile = pa.table(
        {"s": pa.DictionaryArray.from_arrays(indices, pa.array([value])), "y": labels}
    )
    benign = pa.table({"s": pa.DictionaryArray.from_arrays(indices, pa.array(["7"])), "y": labels})
    pq.write_table(hostile, tmp_path / "hostile.parquet")
    pq.write_table(benign, tmp_path / "benign.parquet")
    assert (tmp_path / "hostile.parquet").stat().st_size < 1 * MiB
    a = _read_in_subprocess(tmp_path / "benign.parquet", "parquet", columns=("s",))
    b = _read_in_subprocess(tmp_path / "hostile.parquet", "parquet", columns=("s",))
    assert a["shape"] == b["shape"] == [[rows, 2], [rows]]
    assert _growth_mib(b) - _growth_mib(a) < 32, (a["peak_kib"], b["peak_kib"])
    source = local_source(tmp_path / "hostile.parquet", "parquet")
    report = validate_source(source, [NumericFeature(name="s", min=0, max=10)], LABEL)
    assert report.features["s"].oversize == rows  # 64 KiB > the 4 KiB default: MISSING
