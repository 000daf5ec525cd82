"""Every local read is confined when it happens (service/data/confined_files.py).

The race a hostile owner won about once in 300–500 tries — a directory of a checked path
swapped for a symlink into another owner's scoped root between the check and the read — is
played here deterministically: the swap is made after the source was resolved and opened. The
same swap read through pyarrow's plain local filesystem reaches the other owner's file (the
test would pass vacuously otherwise); through the source it is refused, and nothing of the
file shows in the error.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from service.data.backends import reopen_source
from service.data.confined_files import ConfinedFiles, open_no_follow
from service.data.local_files import resolve_source
from service.data.sources import FileSource, SourceError, local_source
from service.domain.roots import owner_settings
from service.settings import Settings

DECOY = b"x,y\n1,yes\n2,no\n"
SECRET = b"x,y\n9,yes\n8,yes\n7,no\n6,no\n"


@pytest.fixture
def roots(tmp_path: Path) -> tuple[Path, Path]:
    """An open root and a root scoped to another owner (closed to the reader)."""
    open_root, scoped = tmp_path / "open", tmp_path / "scoped"
    (open_root / "race" / "a").mkdir(parents=True)
    (scoped / "sub").mkdir(parents=True)
    (open_root / "race" / "a" / "x.csv").write_bytes(DECOY)
    (scoped / "sub" / "x.csv").write_bytes(SECRET)
    return open_root.resolve(), scoped.resolve()


def _swap_in_link(directory: Path, target: Path) -> None:
    os.rename(directory, directory.with_name(directory.name + "-old"))
    os.symlink(target, directory)


def test_a_directory_swapped_for_a_link_after_the_check_is_never_followed(
    roots: tuple[Path, Path],
) -> None:
    open_root, scoped = roots
    path = resolve_source("race/a/x.csv", [open_root], [scoped])
    source = local_source(path, "csv", roots=[open_root], closed=[scoped])
    assert source.count_rows() == 2
    _swap_in_link(open_root / "race" / "a", scoped / "sub")

    plain = FileSource(pafs.LocalFileSystem(), str(path), "csv")
    assert plain.count_rows() == 4  # by name, the path now reaches the scoped file
    for read in (source.count_rows, source.columns, source.fingerprint):
        with pytest.raises(SourceError) as refused:
            read()
        assert "9" not in str(refused.value) and "scoped" not in str(refused.value)
    with pytest.raises(SourceError):
        list(source.iter_batches(["x", "y"], 10))


def test_a_folder_member_swapped_for_a_link_out_is_refused(roots: tuple[Path, Path]) -> None:
    open_root, scoped = roots
    folder = open_root / "parts"
    folder.mkdir()
    table = pa.table({"x": [1.0, 2.0], "y": ["yes", "no"]})
    pq.write_table(table, folder / "part-0.parquet")
    pq.write_table(table, folder / "part-1.parquet")
    pq.write_table(pa.table({"x": [9.0] * 5, "y": ["yes"] * 5}), scoped / "secret.parquet")
    path = resolve_source("parts", [open_root], [scoped])
    source = local_source(path, "parquet", roots=[open_root], closed=[scoped])
    assert source.count_rows() == 4
    os.remove(folder / "part-1.parquet")
    os.symlink(scoped / "secret.parquet", folder / "part-1.parquet")
    with pytest.raises(SourceError):
        source.count_rows()
    with pytest.raises(SourceError):
        source.fingerprint()


def test_a_link_inside_the_open_roots_still_reads(roots: tuple[Path, Path]) -> None:
    """Confinement is by the real location: a swap inside the reader's own roots reads there."""
    open_root, scoped = roots
    (open_root / "elsewhere").mkdir()
    (open_root / "elsewhere" / "x.csv").write_bytes(SECRET)
    path = resolve_source("race/a/x.csv", [open_root], [scoped])
    source = local_source(path, "csv", roots=[open_root], closed=[scoped])
    _swap_in_link(open_root / "race" / "a", open_root / "elsewhere")
    assert source.count_rows() == 4


def test_a_closed_root_nested_in_an_open_one_is_refused(tmp_path: Path) -> None:
    """The deepest root holding a path decides, as resolve_source decides."""
    open_root = tmp_path.resolve()
    nested = open_root / "scoped"
    nested.mkdir()
    (nested / "x.csv").write_bytes(SECRET)
    files = ConfinedFiles([open_root], [nested])
    assert files.allows(open_root / "x.csv")
    assert not files.allows(nested / "x.csv")
    with pytest.raises(OSError):
        files.open_fd(str(nested / "x.csv"))


def test_open_no_follow_refuses_any_link_on_the_path(tmp_path: Path) -> None:
    real = tmp_path.resolve()
    (real / "d").mkdir()
    (real / "d" / "f.csv").write_bytes(DECOY)
    os.symlink(real / "d", real / "link")
    os.close(open_no_follow(real / "d" / "f.csv"))
    with pytest.raises(OSError):
        open_no_follow(real / "link" / "f.csv")
    os.symlink(real / "d" / "f.csv", real / "file-link.csv")
    with pytest.raises(OSError):
        open_no_follow(real / "file-link.csv")


def test_a_fifo_swapped_in_is_refused_without_blocking(roots: tuple[Path, Path]) -> None:
    open_root, scoped = roots
    path = resolve_source("race/a/x.csv", [open_root], [scoped])
    source = local_source(path, "csv", roots=[open_root], closed=[scoped])
    os.remove(path)
    os.mkfifo(path)
    outcome: list[BaseException | int] = []

    def read() -> None:
        try:
            outcome.append(source.count_rows())
        except BaseException as error:  # noqa: BLE001 - the outcome is what is checked
            outcome.append(error)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout=30)
    if reader.is_alive():  # unblock the reader so the test process can end
        with open(path, "wb"):
            pass
        pytest.fail("opening a FIFO blocked the reader")
    assert len(outcome) == 1 and isinstance(outcome[0], SourceError)


def test_the_filesystem_is_read_only(tmp_path: Path) -> None:
    files = ConfinedFiles([tmp_path.resolve()])
    with pytest.raises(PermissionError):
        files.delete_file(str(tmp_path / "x"))
    with pytest.raises(PermissionError):
        files.open_output_stream(str(tmp_path / "x"), None)


def test_a_worker_reads_a_source_within_its_owners_roots(roots: tuple[Path, Path]) -> None:
    """A worker reopened a dataset against every root: a folder member of bob's dataset
    repointed into alice's scoped root was read (the fingerprint check failing or not depending
    on whether the target exists — an existence oracle). Reopened with the owner's settings,
    as the runner and each data-parallel window now do, it is refused whatever lies there."""
    open_root, scoped = roots
    settings = Settings.from_env({"DPFIT_DATA_ROOTS": f"{open_root}:alice={scoped}"})
    folder = open_root / "parts"
    folder.mkdir()
    pq.write_table(pa.table({"x": [1.0, 2.0], "y": ["yes", "no"]}), folder / "part-0.parquet")
    pq.write_table(pa.table({"x": [9.0] * 5, "y": ["yes"] * 5}), scoped / "secret.parquet")
    os.symlink(scoped / "secret.parquet", folder / "part-1.parquet")

    everyone = reopen_source("parquet", str(folder), settings)
    assert everyone.count_rows() == 7  # all roots: alice's file is read
    with pytest.raises(SourceError):
        reopen_source("parquet", str(folder), owner_settings(settings, "bob", False)).count_rows()
    alices = reopen_source("parquet", str(scoped), owner_settings(settings, "alice", False))
    assert alices.count_rows() == 5
