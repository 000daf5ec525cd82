"""Tests of dataset sources: path confinement, formats, fingerprints, counting, reading, errors."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from service.data.backends import open_source, reopen_source
from service.data.cells import numeric_cells
from service.data.encoding import Encoder
from service.data.limits import ReadLimits
from service.data.local_files import detect_format, resolve_source
from service.data.reader import read_encoded
from service.data.sources import (
    SourceError,
    available_columns,
    count_rows,
    fingerprint,
    local_source,
)
from service.data.spec import CategoricalFeature, LabelSpec, NumericFeature
from service.settings import Settings

SECRET = "SECRET-VALUE-123"


@pytest.fixture
def roots(tmp_path: Path) -> list[Path]:
    first, second = tmp_path / "root1", tmp_path / "root2"
    first.mkdir()
    second.mkdir()
    return [first, second]


def _frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "age": [25, 61, 40, 33, 19],
            "income": [50_000.0, np.nan, 1e9, -3.0, 20_000.5],
            "city": ["Paris", "Lyon", "Nice", SECRET, "Paris"],
            "zone": [3, 1, 2, 3, 7],
            "label": ["yes", "no", "yes", "no", "no"],
        }
    )


def read_columns(path: Path, fmt: str, columns: list[str]) -> pa.Table:
    """The raw cells of ``columns``, all blocks concatenated."""
    source = local_source(path, fmt)  # type: ignore[arg-type]
    return pa.Table.from_batches(list(source.iter_batches(columns, 2)))


def _write_all_formats(root: Path, frame: pd.DataFrame) -> None:
    frame.to_csv(root / "data.csv", index=False)
    frame.to_parquet(root / "data.parquet", index=False)
    folder = root / "folder"
    folder.mkdir()
    frame.iloc[:2].to_parquet(folder / "part-0.parquet", index=False)
    frame.iloc[2:].to_parquet(folder / "part-1.parquet", index=False)
    (folder / "_SUCCESS").write_text("")


# ---------------------------------------------------------------------------------------------
# resolve_source
# ---------------------------------------------------------------------------------------------


def test_relative_path_and_second_root(roots: list[Path]) -> None:
    (roots[0] / "a.csv").write_text("x\n1\n")
    (roots[1] / "sub").mkdir()
    (roots[1] / "sub" / "b.parquet").write_bytes(b"")
    assert resolve_source("a.csv", roots) == (roots[0] / "a.csv").resolve()
    assert resolve_source("sub/b.parquet", roots) == (roots[1] / "sub" / "b.parquet").resolve()


def test_first_root_wins(roots: list[Path]) -> None:
    for root in roots:
        (root / "same.csv").write_text("x\n1\n")
    assert resolve_source("same.csv", roots) == (roots[0] / "same.csv").resolve()


def test_file_uri_inside_root(roots: list[Path]) -> None:
    target = roots[1] / "with space.csv"
    target.write_text("x\n1\n")
    uri = "file://" + str(target).replace(" ", "%20")
    assert resolve_source(uri, roots) == target.resolve()


def test_parquet_folder_accepted(roots: list[Path]) -> None:
    _write_all_formats(roots[0], _frame())
    assert resolve_source("folder", roots) == (roots[0] / "folder").resolve()


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        ("../outside.csv", "outside the allowed data roots"),
        ("sub/../../outside.csv", "outside the allowed data roots"),
        ("file:///etc/passwd", "outside the allowed data roots"),
        ("/etc/passwd", "absolute path"),
        ("http://example.com/data.csv", "unsupported URI scheme"),
        ("s3://bucket/data.parquet", "unsupported URI scheme"),
        ("file://otherhost/data.csv", "remote host"),
        ("nope.csv", "not found"),
        ("", "empty"),
    ],
)
def test_rejected_locations(roots: list[Path], uri: str, message: str) -> None:
    (roots[0].parent / "outside.csv").write_text("x\n1\n")
    with pytest.raises(SourceError, match=message):
        resolve_source(uri, roots)


def test_symlink_escaping_roots_is_rejected(roots: list[Path]) -> None:
    outside = roots[0].parent / "private.csv"
    outside.write_text("x\n1\n")
    os.symlink(outside, roots[0] / "link.csv")
    with pytest.raises(SourceError, match="outside the allowed data roots"):
        resolve_source("link.csv", roots)
    with pytest.raises(SourceError, match="outside the allowed data roots"):
        resolve_source(f"file://{roots[0] / 'link.csv'}", roots)


def test_symlinked_file_inside_parquet_folder_is_rejected(roots: list[Path]) -> None:
    outside = roots[0].parent / "private.parquet"
    _frame().to_parquet(outside)
    folder = roots[0] / "folder"
    folder.mkdir()
    os.symlink(outside, folder / "part.parquet")
    with pytest.raises(SourceError, match="outside the allowed data roots"):
        resolve_source("folder", roots)


def test_symlink_within_roots_is_followed(roots: list[Path]) -> None:
    target = roots[1] / "real.csv"
    target.write_text("x\n1\n")
    os.symlink(target, roots[0] / "alias.csv")
    assert resolve_source("alias.csv", roots) == target.resolve()


def test_wrong_kinds_rejected(roots: list[Path]) -> None:
    (roots[0] / "notes.txt").write_text("hello")
    (roots[0] / "empty_dir").mkdir()
    with pytest.raises(SourceError, match=r"not a \.csv"):
        resolve_source("notes.txt", roots)
    with pytest.raises(SourceError, match="no .parquet files"):
        resolve_source("empty_dir", roots)
    with pytest.raises(SourceError, match="no data roots"):
        resolve_source("x.csv", [])


def test_detect_format(tmp_path: Path) -> None:
    assert detect_format(tmp_path / "a.csv") == "csv"
    assert detect_format(tmp_path / "a.PARQUET") == "parquet"
    assert detect_format(tmp_path / "a.pq") == "parquet"
    assert detect_format(tmp_path) == "parquet"
    with pytest.raises(SourceError):
        detect_format(tmp_path / "a.json")


# ---------------------------------------------------------------------------------------------
# fingerprint and count_rows
# ---------------------------------------------------------------------------------------------


def test_fingerprint_stable_and_sensitive_to_one_byte(tmp_path: Path) -> None:
    path = tmp_path / "d.csv"
    content = bytearray(b"x,y\n" + b"1,2\n" * 100_000)  # > 1 MiB: spans several chunks
    path.write_bytes(bytes(content))
    first = fingerprint(path)
    assert first.startswith("sha256:") and len(first) == len("sha256:") + 64
    assert fingerprint(path) == first
    content[-2] = ord("3")
    path.write_bytes(bytes(content))
    assert fingerprint(path) != first


def test_fingerprint_of_folder(roots: list[Path]) -> None:
    _write_all_formats(roots[0], _frame())
    folder = roots[0] / "folder"
    first = fingerprint(folder)
    assert fingerprint(folder) == first
    (folder / "part-1.parquet").rename(folder / "part-2.parquet")
    assert fingerprint(folder) != first
    (folder / "part-2.parquet").rename(folder / "part-1.parquet")
    assert fingerprint(folder) == first
    part = folder / "part-0.parquet"
    data = bytearray(part.read_bytes())
    data[10] ^= 0xFF
    part.write_bytes(bytes(data))
    assert fingerprint(folder) != first


def test_count_rows(roots: list[Path]) -> None:
    _write_all_formats(roots[0], _frame())
    assert count_rows(roots[0] / "data.csv", "csv") == 5
    assert count_rows(roots[0] / "data.parquet", "parquet") == 5
    assert count_rows(roots[0] / "folder", "parquet") == 5


def test_count_rows_csv_lines_are_rows_and_quotes_never_span_lines(tmp_path: Path) -> None:
    """One physical line is one row: a quote cannot swallow the next line, a blank line is a row
    of missing cells, and the count does not depend on any cell."""
    path = tmp_path / "q.csv"
    path.write_text('a,b\n1,"two\nlines"\n2,x\n\n3,y\n')
    assert count_rows(path, "csv") == 5
    cells = read_columns(path, "csv", ["a", "b"])
    assert cells.column("a").to_pylist() == [b"", b"", b"2", b"", b"3"]
    assert cells.column("b").to_pylist() == [b"", b"", b"x", b"", b"y"]
    header_only = tmp_path / "h.csv"
    header_only.write_text("a,b\n")
    assert count_rows(header_only, "csv") == 0


# ---------------------------------------------------------------------------------------------
# Reading and encoding the same data from every format
# ---------------------------------------------------------------------------------------------


def test_read_columns_selects_and_orders(roots: list[Path]) -> None:
    _write_all_formats(roots[0], _frame())
    for name, fmt in [("data.csv", "csv"), ("data.parquet", "parquet"), ("folder", "parquet")]:
        cells = read_columns(roots[0] / name, fmt, ["zone", "age"])
        assert cells.column_names == ["zone", "age"]
        assert numeric_cells(cells.column("age")).tolist() == [25, 61, 40, 33, 19]
        assert available_columns(roots[0] / name, fmt) == list(_frame().columns)
    csv_cells = read_columns(roots[0] / "data.csv", "csv", ["age"])
    assert csv_cells.schema.field("age").type == pa.binary()  # text stays undecoded bytes


def test_open_source_dispatches_local_paths(roots: list[Path]) -> None:
    _write_all_formats(roots[0], _frame())

    class _Settings:
        data_roots = roots

    source = open_source("data.csv", _Settings())
    assert (source.format, source.location) == ("csv", str(roots[0] / "data.csv"))
    assert source.count_rows() == 5
    assert open_source("folder", _Settings()).format == "parquet"
    with pytest.raises(SourceError, match="outside"):
        open_source("../x.csv", _Settings())


def test_same_data_encodes_identically_in_every_format(roots: list[Path]) -> None:
    _write_all_formats(roots[0], _frame())
    encoder = Encoder(
        (
            NumericFeature(name="age", min=18, max=65),
            NumericFeature(name="income", min=0, max=200_000),
            CategoricalFeature(name="city", categories=["Paris", "Lyon", "Nice"]),
            CategoricalFeature(name="zone", categories=["1", "2", 3]),
        ),
        True,
    )
    label = LabelSpec(column="label", positive="yes", negative="no")
    results = []
    for name in ["data.csv", "data.parquet", "folder"]:
        path = resolve_source(name, roots)
        source = local_source(path, detect_format(path))
        results.append(read_encoded(source, encoder, label, None, 3))
    reference_x, reference_y = results[0]
    assert reference_x.shape == (5, encoder.dimension)
    np.testing.assert_array_equal(reference_y, [1, -1, 1, -1, -1])
    for matrix, labels in results[1:]:
        np.testing.assert_array_equal(matrix, reference_x)
        np.testing.assert_array_equal(labels, reference_y)
    assert np.all(np.linalg.norm(reference_x, axis=1) <= 1 + 1e-12)


def test_csv_keeps_na_like_strings_as_values(tmp_path: Path) -> None:
    path = tmp_path / "na.csv"
    path.write_text("region,x\nNA,1\n,2\nEU,3\n")
    cells = read_columns(path, "csv", ["region"])
    assert cells.column("region").to_pylist() == [b"NA", b"", b"EU"]


# ---------------------------------------------------------------------------------------------
# Error messages never carry data from the file
# ---------------------------------------------------------------------------------------------


def _assert_clean(error: pytest.ExceptionInfo[SourceError]) -> None:
    text = str(error.value)
    assert SECRET not in text
    assert error.value.__cause__ is None
    assert error.value.__suppress_context__ or error.value.__context__ is None


def test_missing_column_message_names_only_columns(roots: list[Path]) -> None:
    _write_all_formats(roots[0], _frame())
    for name, fmt in [("data.csv", "csv"), ("data.parquet", "parquet"), ("folder", "parquet")]:
        with pytest.raises(SourceError, match="'height'") as error:
            read_columns(roots[0] / name, fmt, ["city", "height"])
        _assert_clean(error)
        assert "city" not in str(error.value)


def test_unbalanced_quote_is_an_unparseable_row_not_an_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(f'a,b\n1,2\n3,"{SECRET}\n4,5\n')  # unterminated quote on one line
    assert count_rows(path, "csv") == 3
    cells = read_columns(path, "csv", ["a", "b"])
    assert cells.column("a").to_pylist() == [b"1", b"", b"4"]
    assert cells.column("b").to_pylist() == [b"2", b"", b"5"]


def test_ragged_csv_rows_are_read_consistently(tmp_path: Path) -> None:
    path = tmp_path / "ragged.csv"
    path.write_text("a,b,c\n1,2,3\n4,5\n6,7,8,9\n")
    cells = read_columns(path, "csv", ["a", "c"])
    assert cells.num_rows == count_rows(path, "csv") == 3
    assert cells.column("a").to_pylist() == [b"1", b"4", b"6"]
    assert cells.column("c").to_pylist() == [b"3", b"", b"8"]


def test_undecodable_csv_cells_are_bytes_not_errors(tmp_path: Path) -> None:
    path = tmp_path / "latin.csv"
    path.write_bytes(b"a,b\n1," + SECRET.encode() + b"\xff\xfe\n2,x\n")
    cells = read_columns(path, "csv", ["b"])
    assert cells.column("b").to_pylist() == [SECRET.encode() + b"\xff\xfe", b"x"]


def test_corrupt_parquet_message_is_generic(tmp_path: Path) -> None:
    path = tmp_path / "bad.parquet"
    path.write_bytes(b"PAR1" + SECRET.encode() * 10)
    for call in (
        lambda: read_columns(path, "parquet", ["a"]),
        lambda: count_rows(path, "parquet"),
        lambda: list(local_source(path, "parquet").iter_batches(["a"], 5)),
        lambda: available_columns(path, "parquet"),
    ):
        with pytest.raises(SourceError) as error:
            call()
        _assert_clean(error)


def test_parquet_parts_of_different_types_convert_file_by_file(roots: list[Path]) -> None:
    """No type promotion across files: each file's cells convert by that file's column type (a
    list column converts to nothing: MISSING), and reading never fails on it."""
    folder = roots[0] / "mixed"
    folder.mkdir()
    pq.write_table(pa.table({"a": [1, 2], "y": [1.0, 2.0]}), folder / "p0.parquet")
    pq.write_table(pa.table({"a": [[SECRET]], "y": ["3"]}), folder / "p1.parquet")
    encoder = Encoder((NumericFeature(name="a", min=0, max=2),), False)
    source = local_source(folder, "parquet")
    X, y = read_encoded(source, encoder, LabelSpec(column="y", type="numeric"), None, 2)
    np.testing.assert_array_equal(X[:, 0], [0.0, 1.0, 0.0])
    np.testing.assert_array_equal(y, [1.0, 2.0, 3.0])


def test_resolution_messages_do_not_reveal_symlink_targets(roots: list[Path]) -> None:
    secret_dir = roots[0].parent / SECRET
    secret_dir.mkdir()
    (secret_dir / "x.csv").write_text("a\n1\n")
    os.symlink(secret_dir / "x.csv", roots[0] / "x.csv")
    with pytest.raises(SourceError) as error:
        resolve_source("x.csv", roots)
    _assert_clean(error)


def test_symlink_loop_message_is_generic(roots: list[Path]) -> None:
    os.symlink(roots[0] / "loop-b", roots[0] / "loop-a")
    os.symlink(roots[0] / "loop-a", roots[0] / "loop-b")
    with pytest.raises(SourceError) as error:
        resolve_source("loop-a/data.csv", roots)
    assert str(roots[0]) not in str(error.value)


def test_a_very_long_cell_is_a_cell_not_a_read_failure(tmp_path: Path) -> None:
    """A line longer than Arrow's parse block (and than one read chunk) must not fail the read:
    that would be a failure decided by one row's content. Within the line limit it is read
    whole; beyond it (the default 1 MiB) it keeps its place as a row of empty cells."""
    path = tmp_path / "long.csv"
    long_line = b"3," + b"9" * (9 << 20)
    path.write_bytes(b"a,b\n" + b"1,2\n" * 100_000 + long_line + b"\n4,5\n")
    roomy = ReadLimits(max_line_bytes=16 << 20)
    source = local_source(path, "csv", roomy)
    cells = pa.Table.from_batches(list(source.iter_batches(["a", "b"], 2)))
    assert cells.num_rows == count_rows(path, "csv") == 100_002
    assert cells.column("a").to_pylist()[-2:] == [b"3", b"4"]
    assert len(cells.column("b")[-2].as_py()) == 9 << 20
    bounded = read_columns(path, "csv", ["a", "b"])
    assert bounded.num_rows == 100_002
    assert bounded.column("a").to_pylist()[-3:] == [b"1", b"", b"4"]
    assert bounded.column("b").to_pylist()[-3:] == [b"2", b"", b"5"]


# ----------------------------------------------------------------------------------------------
# Roots that hold (issue 23, item 3): members, links and other owners' roots
# ----------------------------------------------------------------------------------------------


def _scoped(tmp_path: Path) -> tuple[Path, Path, Settings, Settings]:
    """An unscoped root ``data`` holding alice's scoped root ``data/alice``; the full settings
    (admins, workers) and carol's (``registration.settings_for``: alice's root left out)."""
    data = tmp_path / "data"
    alice = data / "alice"
    (alice / "folder").mkdir(parents=True)
    (data / "pub").mkdir()
    frame = pd.DataFrame({"x": [1.0, 2.0], "y": ["yes", "no"]})
    frame.to_parquet(alice / "folder" / "a.parquet")
    frame.to_csv(alice / "real.csv", index=False)
    (alice / "notes.txt").write_text("private")
    full = Settings(
        database_url="sqlite://",
        data_roots=(data.resolve(), alice.resolve()),
        workers=1,
        dask_scheduler=None,
        root_owners={str(alice.resolve()): frozenset({"alice"})},
    )
    carol = replace(full, data_roots=(data.resolve(),))
    return data, alice, full, carol


@pytest.mark.parametrize("target", ["folder/a.parquet", "folder/absent.parquet"])
def test_a_folder_of_links_into_another_owners_root_is_refused(tmp_path: Path, target: str) -> None:
    """carol's folder in the unscoped root, its member a link into alice's root: refused the
    same way whether the link's target exists or not (old code: registered when it existed)."""
    data, alice, full, carol = _scoped(tmp_path)
    folder = data / "pub" / "mine"
    folder.mkdir()
    pd.DataFrame({"x": [3.0], "y": ["no"]}).to_parquet(folder / "0.parquet")
    os.symlink(alice / target, folder / "1.parquet")
    with pytest.raises(SourceError) as refused:
        open_source("pub/mine", carol)
    assert (
        str(refused.value) == "a file in folder 'pub/mine' resolves outside the allowed data roots"
    )
    if target == "folder/a.parquet":
        assert open_source("pub/mine", full).count_rows() == 3  # alice's or an admin's view


@pytest.mark.parametrize(
    "uri",
    [
        "alice/notes.txt",
        "alice/nothing.txt",
        "alice/real.csv",
        "alice/none.csv",
        "alice/folder",
        "alice/none/",
        "pub/../alice/real.csv",
        "pub/../alice/nothing.csv",
    ],
)
def test_another_owners_root_answers_as_if_nothing_existed(tmp_path: Path, uri: str) -> None:
    """Relative paths into alice's root: the same answer whatever exists there (old code:
    "is not a .csv ... file" for an existing non-data file, "not found" otherwise)."""
    _, _, _, carol = _scoped(tmp_path)
    with pytest.raises(SourceError) as refused:
        open_source(uri, carol)
    assert str(refused.value) == f"{uri!r} was not found under any data root"


def test_links_inside_another_owners_root_are_not_followed(tmp_path: Path) -> None:
    data, alice, _, carol = _scoped(tmp_path)
    os.symlink("/etc/passwd", alice / "out.csv")  # would answer "resolves outside"
    os.symlink(alice, data / "pub" / "door")  # carol's link to alice's root
    answers = set()
    for uri in ["alice/out.csv", "alice/nope.csv", "pub/door/out.csv", "pub/door/nope.csv"]:
        with pytest.raises(SourceError) as refused:
            open_source(uri, carol)
        answers.add(str(refused.value).replace(repr(uri), "URI"))
    assert answers == {"URI was not found under any data root"}
    for uri in ["out.csv", "nope.csv", "real.csv"]:
        with pytest.raises(SourceError) as refused:
            open_source(f"file://{alice / uri}", carol)
        assert "lies outside the allowed data roots" in str(refused.value)


def test_an_open_root_nested_in_a_closed_one_stays_open(tmp_path: Path) -> None:
    data, alice, full, _ = _scoped(tmp_path)
    shared = alice / "shared"
    shared.mkdir()
    pd.DataFrame({"x": [1.0, 2.0], "y": ["yes", "no"]}).to_csv(shared / "s.csv", index=False)
    carol = replace(full, data_roots=(data.resolve(), shared.resolve()))
    assert open_source("alice/shared/s.csv", carol).count_rows() == 2
    with pytest.raises(SourceError, match="not found"):
        open_source("alice/real.csv", carol)


@pytest.mark.parametrize("scheme", ["s3://", "S3://", "s3:/" + "/", "S3://"])
def test_object_keys_in_another_owners_root_are_refused_whatever_the_scheme_case(
    scheme: str,
) -> None:
    """Refused before the store is asked anything (no store is configured here: asking it
    would answer differently), the same for ``S3://`` as for ``s3://``."""
    from service.data.object_store import open_object_store_source

    full = Settings(
        database_url="sqlite://",
        data_roots=(),
        workers=1,
        dask_scheduler=None,
        object_store_roots=("s3://bucket", "s3://bucket/alice"),
        root_owners={"s3://bucket/alice": frozenset({"alice"})},
    )
    carol = replace(full, object_store_roots=("s3://bucket",))
    for key in ["alice/x.csv", "alice/absent.csv", "alice/folder/"]:
        uri = f"{scheme}bucket/{key}"
        with pytest.raises(SourceError) as refused:
            open_object_store_source(uri, carol)
        assert str(refused.value) == f"{uri!r} lies outside the allowed data roots"


def test_a_worker_rechecks_every_member_of_a_folder(tmp_path: Path) -> None:
    data, alice, full, _ = _scoped(tmp_path)
    folder = data / "pub" / "f"
    folder.mkdir()
    pd.DataFrame({"x": [3.0], "y": ["no"]}).to_parquet(folder / "0.parquet")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    pd.DataFrame({"x": [3.0], "y": ["no"]}).to_parquet(outside / "e.parquet")
    assert reopen_source("parquet", str(folder), full).count_rows() == 1
    os.symlink(outside / "e.parquet", folder / "1.parquet")
    with pytest.raises(SourceError, match="outside the allowed data roots"):
        reopen_source("parquet", str(folder), full)
