"""A header that names a requested column twice (``age,age,label``) is refused before any row,
naming the column and nothing else: CSV (where the first one used to be read silently) and
Parquet (where Arrow hands out both and the columns after it shifted)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from service.data.sources import SourceError, local_source

SECRET = "777.25"  # a cell value: it must never appear in a message


def _write_csv(path: Path) -> Path:
    path.write_text(f"age,age,label,note\n{SECRET},31,1,x\n40,41,0,y\n")
    return path


def _duplicate_parquet(path: Path) -> Path:
    table = pa.table(
        [pa.array([float(SECRET), 40.0]), pa.array([31.0, 41.0]), pa.array([1, 0])],
        names=["age", "age", "label"],
    )
    pq.write_table(table, path)
    return path


def _refusal(path: Path, fmt: str, columns: list[str]) -> str:
    source = local_source(path, fmt)  # type: ignore[arg-type]
    with pytest.raises(SourceError) as caught:
        next(iter(source.iter_batches(columns, 10)))
    return str(caught.value)


def test_a_csv_header_naming_a_requested_column_twice_is_refused(tmp_path: Path) -> None:
    path = _write_csv(tmp_path / "dup.csv")
    message = _refusal(path, "csv", ["age", "label"])
    assert message == "column(s) named more than once in the source's header: 'age'"
    assert SECRET not in message
    # only the requested columns count: the others of that header still read
    source = local_source(path, "csv")
    rows = pa.Table.from_batches(list(source.iter_batches(["label", "note"], 10)))
    assert rows.column("note").to_pylist() == [b"x", b"y"]
    # the label column repeated is refused the same way
    (tmp_path / "label.csv").write_text("age,label,label\n1,0,1\n")
    assert "'label'" in _refusal(tmp_path / "label.csv", "csv", ["age", "label"])


def test_a_parquet_file_with_a_repeated_name_is_refused_the_same_way(tmp_path: Path) -> None:
    path = _duplicate_parquet(tmp_path / "dup.parquet")
    assert pq.ParquetFile(path).schema_arrow.names == ["age", "age", "label"]  # Arrow allows it
    message = _refusal(path, "parquet", ["age", "label"])
    assert message == "column(s) named more than once in the source's header: 'age'"
    assert SECRET not in message


def test_a_parquet_folder_is_checked_file_by_file(tmp_path: Path) -> None:
    folder = tmp_path / "parts"
    folder.mkdir()
    pq.write_table(pa.table({"age": [1.0, 2.0], "label": [0, 1]}), folder / "a.parquet")
    _duplicate_parquet(folder / "b.parquet")  # the repeat is only in the second file
    message = _refusal(folder, "parquet", ["label", "age"])
    assert message.endswith("'age'") and SECRET not in message
