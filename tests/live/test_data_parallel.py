"""Data-parallel full-gradient jobs (issue 11): partitions, identical maths, memory, faults.

- Partition windows read bit-identical rows (Parquet folder, CSV file).
- On a real multi-process Dask LocalCluster, the data-parallel path gives the single-process
  model to float tolerance with the same noise draws (seeded generator, test only) for dp_gd,
  dp_agd, output_perturbation_gd and dp_accmd.
- A worker killed mid-fit makes the step fail (never a partial sum), and the fit restarts on
  the workers alive.
- Live servers: the embedded cluster with memory-limited workers runs a job too large for one
  worker over all of them, refuses before any charge a job that cannot fit at all; an external
  `dask scheduler` + `dask worker` cluster on PostgreSQL runs a partitioned job.
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from distributed import Client, LocalCluster, get_worker
from distributed.security import Security

from service.data.encoding import Encoder
from service.data.partitions import (
    DATA_FRACTION,
    WORKER_PROCESS_BYTES,
    RowWindow,
    WindowSource,
    choose_layout,
    encoded_bytes,
    split_rows,
    usable_bytes,
)
from service.data.reader import read_encoded
from service.data.sources import local_source
from service.data.spec import LabelSpec, NumericFeature
from service.domain.submission import DatasetFacts, check_fits_cluster
from service.models.logistic import LogisticLoss
from service.optimizers.dp_accmd import DPAccMD, DPAccMDParams
from service.optimizers.dp_agd import DPAGD, DPAGDParams
from service.optimizers.dp_gd import DPGD, DPGDParams, oracle_gradient_descent
from service.optimizers.kits.base import InfeasibleSpec, PrivacyTarget, ReleasePlan
from service.optimizers.kits.full_gradient import LocalGradient, PartitionMissing, SummedGradient
from service.optimizers.output_perturbation_gd import (
    OutputPerturbationGD,
    OutputPerturbationGDParams,
)
from service.settings import Settings
from service.workers.data_parallel import (
    PartitionRead,
    WorkerLost,
    fit_partitioned,
    held_partitions,
)
from service.workers.scheduler_workers import scheduler_workers
from service.workers.security import TlsSet
from tests.support.dask_cluster import three_worker_cluster
from tests.support.live import LiveServer, free_port

BIN = Path(sys.executable).parent
FEATURES = [NumericFeature(name=f"x{j}", min=-1.0, max=1.0) for j in range(6)]
LABEL = LabelSpec(column="label", type="binary", positive="yes", negative="no")


def _write_folder(folder: Path, rows_per_file: list[int], seed: int = 0) -> int:
    """A Parquet folder of files with the given row counts (x0…x5 in [-1, 1], a yes/no label
    depending on them, a few missing cells); returns n."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for index, rows in enumerate(rows_per_file):
        x = rng.uniform(-1.2, 1.2, size=(rows, 6))
        columns: dict[str, Any] = {f"x{j}": x[:, j] for j in range(6)}
        columns["x3"] = pa.array([None if i % 17 == 0 else v for i, v in enumerate(x[:, 3])])
        signal_ = x @ np.array([1.0, -0.5, 0.3, 0.0, 0.8, -1.0]) + rng.normal(0, 0.5, rows)
        columns["label"] = np.where(signal_ > 0, "yes", "no")
        pq.write_table(pa.table(columns), folder / f"part-{index:03d}.parquet", row_group_size=97)
    return sum(rows_per_file)


def _encoder() -> Encoder:
    return Encoder(features=FEATURES, fit_intercept=True)


# --------------------------------------------------------------------------------------------
# Partitions
# --------------------------------------------------------------------------------------------


def test_windows_have_public_sizes_and_cover_every_row_once() -> None:
    for n in (0, 1, 7, 1000, 1001):
        for parts in (1, 2, 3, 8):
            windows = split_rows(n, parts)
            sizes = [w.rows for w in windows]
            assert sum(sizes) == n and max(sizes) - min(sizes) <= 1
            assert windows[0].start == 0 and windows[-1].stop == n
            assert all(a.stop == b.start for a, b in zip(windows, windows[1:], strict=False))


@pytest.mark.parametrize("kind", ["parquet_folder", "csv"])
def test_window_reads_are_bit_identical_to_the_whole_read(tmp_path: Path, kind: str) -> None:
    n = _write_folder(tmp_path / "folder", [300, 1, 0, 250, 449])
    if kind == "csv":
        table = pq.read_table(tmp_path / "folder")
        path = tmp_path / "data.csv"
        import pyarrow.csv as pacsv

        pacsv.write_csv(table, path)
        source = local_source(path, "csv")
    else:
        source = local_source(tmp_path / "folder", "parquet")
    X, Y = read_encoded(source, _encoder(), LABEL, None)
    assert X.shape[0] == n
    for parts in (1, 3, 7):
        pieces = [
            read_encoded(WindowSource(source, w), _encoder(), LABEL, None, rows_per_block=64)
            for w in split_rows(n, parts)
        ]
        assert np.array_equal(np.concatenate([p[0] for p in pieces]), X)
        assert np.array_equal(np.concatenate([p[1] for p in pieces]), Y)
    # a window past the end reads fewer rows, which the reader reports as a changed source
    with pytest.raises(ValueError, match="changed"):
        read_encoded(WindowSource(source, RowWindow(n - 5, n + 5)), _encoder(), LABEL, None)


def test_a_folder_has_per_file_fingerprints_and_a_window_checks_only_its_files(
    tmp_path: Path,
) -> None:
    import hashlib

    folder = tmp_path / "folder"
    n = _write_folder(folder, [300, 200, 250])
    source = local_source(folder, "parquet")
    whole, files = source.fingerprints()
    assert whole == source.fingerprint()  # the registered whole fingerprint is unchanged
    assert files == {
        p.name: "sha256:" + hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.glob("*.parquet"))
    }
    first, middle, last = RowWindow(0, 300), RowWindow(300, 500), RowWindow(500, n)
    assert all(WindowSource(source, w).files_unchanged(files) for w in (first, middle, last))

    # Rewrite the middle file: only the windows reading it see the change.
    table = pq.read_table(folder / "part-001.parquet")
    pq.write_table(table.slice(0, 199), folder / "part-001.parquet")
    changed = local_source(folder, "parquet")
    assert not WindowSource(changed, RowWindow(250, 350)).files_unchanged(files)
    assert WindowSource(changed, first).files_unchanged(files)
    # A file added to the folder: no window is unchanged (the folder is other data).
    pq.write_table(table, folder / "part-009.parquet")
    grown = local_source(folder, "parquet")
    assert not WindowSource(grown, first).files_unchanged(files)


def test_a_worker_refuses_a_window_whose_files_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from service.data.sources import SourceError
    from service.workers.data_parallel import load_partition, release_partitions

    folder = tmp_path / "folder"
    n = _write_folder(folder, [120, 80])
    _, files = local_source(folder, "parquet").fingerprints()
    monkeypatch.setenv("DPFIT_DATA_ROOTS", str(tmp_path))
    read = PartitionRead(
        source_format="parquet",
        location=str(folder),
        encoder=_encoder().to_dict(),
        label=LABEL.model_dump(mode="json"),
        label_bound=None,
        n=n,
        dimension=_encoder().dimension,
        file_fingerprints=files,
    )
    loss = LogisticLoss(l2=0.0)
    try:
        assert load_partition("t-ok-0", "t-ok", read, RowWindow(0, n), loss) == n
        table = pq.read_table(folder / "part-001.parquet")
        flipped = table.set_column(
            table.schema.get_field_index("x0"), "x0", pa.compute.negate(table["x0"])
        )
        pq.write_table(flipped, folder / "part-001.parquet")
        assert load_partition("t-a-0", "t-a", read, RowWindow(0, 120), loss) == 120
        with pytest.raises(SourceError, match="changed"):
            load_partition("t-b-0", "t-b", read, RowWindow(100, n), loss)
    finally:
        for prefix in ("t-ok", "t-a", "t-b"):
            release_partitions(prefix)


def test_layout_from_public_facts() -> None:
    mib = 1 << 20
    needed = encoded_bytes(1_000_000, 41, None)
    assert needed == 8 * 1_000_000 * 42
    # unlimited workers: single process unless the operator asks for partitioning
    assert choose_layout(10**6, 41, None, [None] * 4, data_parallel=True, min_rows=None).kind == (
        "single"
    )
    forced = choose_layout(10**6, 41, None, [None] * 4, data_parallel=True, min_rows=10**6)
    assert (forced.kind, forced.parts) == ("partitioned", 4)
    # 6e6 x 40 (+ intercept), 41 columns read, in workers of 900 MiB (issue 23 item 6): one
    # cannot, four can — 1.5e6 rows each need 481 MiB of the 0.935 × 900 − 284 − 73.4 = 484 MiB
    # a worker holds (measured peaks 824–831 MiB, bench/RESULTS.md) — and three cannot (2e6
    # rows: 641 MiB each)
    big = choose_layout(
        6 * 10**6, 41, None, [900 * mib] * 4, data_parallel=True, min_rows=None, columns=41
    )
    assert (big.kind, big.parts) == ("partitioned", 4)
    assert (
        encoded_bytes(1_500_000, 41, None)
        <= usable_bytes(900 * mib, 1_500_000, 41)
        < (encoded_bytes(2_000_000, 41, None))
    )
    assert usable_bytes(890 * mib, 1_500_000, 41) < encoded_bytes(1_500_000, 41, None)
    # the step's temporaries count once they exceed the reader's buffers: 24 bytes per row
    assert usable_bytes(900 * mib, 10**7) == (
        int(DATA_FRACTION * 900 * mib) - WORKER_PROCESS_BYTES - 24 * 10**7
    )
    # not a data-parallel optimizer, or too big even spread: infeasible, saying the MiB of
    # encoded rows a worker would hold (all of them, or one window) and the limit it missed
    for layout, rows in (
        (
            choose_layout(6 * 10**6, 41, None, [941 * mib] * 4, data_parallel=False, min_rows=None),
            6 * 10**6,
        ),
        (
            choose_layout(6 * 10**6, 41, None, [941 * mib] * 3, data_parallel=True, min_rows=None),
            2 * 10**6,
        ),
    ):
        assert layout.kind == "infeasible"
        held = math.ceil(encoded_bytes(rows, 41, None) / mib)
        assert f"{held} MiB of encoded rows" in layout.reason, layout.reason
        assert "941 MiB limit" in layout.reason


def test_a_wide_source_needs_more_reader_memory_than_a_narrow_one() -> None:
    """Arrow's Parquet reader holds ~1.3 MiB per column read: a job on a 300-column source that
    would fit a 900 MiB worker by its rows alone is refused (or spread) once the columns count."""
    from service.data.partitions import READER_BYTES, reader_bytes

    assert reader_bytes(None) == reader_bytes(20) == READER_BYTES
    assert READER_BYTES < reader_bytes(41) < reader_bytes(42)  # 73.4 MiB: 72–73 measured
    assert reader_bytes(301) > 300 << 20
    mib900 = 900 << 20
    rows = 400_000  # 400k × (40 + 1) floats ≈ 125 MiB of encoded rows
    narrow = choose_layout(rows, 40, None, [mib900], data_parallel=False, min_rows=None)
    assert narrow.kind == "single"
    assert usable_bytes(mib900, rows, 301) < usable_bytes(mib900, rows)
    wide = choose_layout(rows, 40, None, [mib900], data_parallel=False, min_rows=None, columns=301)
    assert wide.kind == "infeasible"


def test_admission_refuses_a_job_that_cannot_fit_before_pricing_it() -> None:
    facts = DatasetFacts("ds_x", 6 * 10**6, 40, 1e-5, "binary", None, False)
    env = {"DPFIT_WORKERS": "2", "DPFIT_WORKER_MEMORY": "900MiB", "DPFIT_DATA_ROOTS": "."}
    with pytest.raises(InfeasibleSpec) as refused:
        check_fits_cluster(facts, 41, "dp_gd", Settings.from_env(env))
    assert refused.value.field == "dataset_id" and "MiB" in refused.value.message
    seven = Settings.from_env({**env, "DPFIT_WORKERS": "7"})
    check_fits_cluster(facts, 41, "dp_gd", seven)
    with pytest.raises(InfeasibleSpec):  # reads every row in one process
        check_fits_cluster(facts, 41, "bolt_on_psgd", seven)
    check_fits_cluster(facts, 41, "dp_gd", Settings.from_env({"DPFIT_DATA_ROOTS": "."}))


def test_summed_gradient_never_answers_from_a_partial_sum() -> None:
    loss = LogisticLoss(l2=0.1)
    oracle = SummedGradient(loss, 10, 3, 2, lambda w: [np.ones(3)])
    with pytest.raises(PartitionMissing):
        oracle.gradient(np.zeros(3))


# --------------------------------------------------------------------------------------------
# Identical maths on a real multi-process cluster
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    root = tmp_path_factory.mktemp("dp-data")
    n = _write_folder(root / "folder", [400, 350, 1, 500, 249], seed=3)
    return root, n


@pytest.fixture(scope="module")
def cluster(folder: tuple[Path, int]) -> Iterator[Client]:
    with three_worker_cluster(folder[0]) as client:
        yield client


def _read(folder: tuple[Path, int]) -> PartitionRead:
    root, n = folder
    return PartitionRead(
        source_format="parquet",
        location=str((root / "folder").resolve()),
        encoder=_encoder().to_dict(),
        label=LABEL.model_dump(mode="json"),
        label_bound=None,
        n=n,
        dimension=_encoder().dimension,
    )


OPTIMIZERS: dict[str, tuple[Any, Any]] = {
    "dp_gd": (DPGD(), DPGDParams(iterations=25)),
    "dp_agd": (DPAGD(), DPAGDParams(iterations=25)),
    "output_perturbation_gd": (OutputPerturbationGD(), OutputPerturbationGDParams(iterations=25)),
    "dp_accmd": (DPAccMD(), DPAccMDParams(iterations=25)),
}


def _drive(read: PartitionRead, name: str, seed: int) -> tuple[np.ndarray, list[str]]:
    """Runs inside a worker task (as the job runner does): the data-parallel fit."""
    optimizer, params = OPTIMIZERS[name]
    loss = LogisticLoss(l2=0.01)
    plan = optimizer.plan(params, loss, read.n, read.dimension, PrivacyTarget(1.0, 1e-6))
    rng = np.random.default_rng(seed)
    w = fit_partitioned(
        f"test-{name}-{seed}",
        read,
        loss,
        lambda oracle_for: optimizer.fit_oracle(plan, loss, oracle_for(None), rng, lambda t: None),
        after_load=lambda: None,
        max_rounds=1,
    )
    return w, [get_worker().address]


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_data_parallel_equals_single_process_with_the_same_noise(
    cluster: Client, folder: tuple[Path, int], name: str
) -> None:
    read = _read(folder)
    optimizer, params = OPTIMIZERS[name]
    loss = LogisticLoss(l2=0.01)
    target = PrivacyTarget(1.0, 1e-6)
    plan: ReleasePlan = optimizer.plan(params, loss, read.n, read.dimension, target)
    source = local_source(folder[0] / "folder", "parquet")
    X, Y = read_encoded(source, _encoder(), LABEL, None)
    single = optimizer.fit(plan, loss, X, Y, np.random.default_rng(7), lambda t: None)
    before = cluster.run(held_partitions)
    parallel, _ = cluster.submit(_drive, read, name, 7, pure=False).result()
    after = cluster.run(held_partitions)
    assert np.allclose(parallel, single, rtol=1e-9, atol=1e-12), (parallel, single)
    assert not np.array_equal(
        single, optimizer.fit(plan, loss, X, Y, np.random.default_rng(8), lambda t: None)
    )
    # every worker loaded exactly one partition, and none holds rows after the job
    assert all(after[a][1] == before[a][1] + 1 for a in after), (before, after)
    assert all(held == 0 for held, _ in after.values())


def _drive_with_a_kill(read: PartitionRead, pids: dict[str, int], rounds: int) -> np.ndarray:
    """Noise-free DP-GD over partitions; after the first step, kill a worker other than this
    one (SIGKILL: as an out-of-memory kill would)."""
    loss = LogisticLoss(l2=0.01)
    me = get_worker().address
    killed: list[str] = []

    def fit(oracle_for: Callable[[int | None], Any]) -> np.ndarray:
        oracle = oracle_for(None)

        def step(t: int) -> None:
            if t == 1 and not killed:
                victim = next(a for a in sorted(pids) if a != me)
                killed.append(victim)
                os.kill(pids[victim], signal.SIGKILL)
                time.sleep(0.5)

        return oracle_gradient_descent(
            loss,
            oracle,
            step_size=1.0,
            iterations=5,
            noise_std=0.0,
            rng=np.random.default_rng(0),
            progress=step,
        )

    return fit_partitioned(
        f"kill-{rounds}", read, loss, fit, after_load=lambda: None, max_rounds=rounds
    )


@pytest.mark.parametrize("rounds", [1, 2])
def test_a_worker_killed_mid_fit_fails_the_step_or_restarts_the_fit(
    cluster: Client, folder: tuple[Path, int], rounds: int
) -> None:
    read = _read(folder)
    cluster.wait_for_workers(3, timeout=60)
    pids = cluster.run(os.getpid)
    future = cluster.submit(_drive_with_a_kill, read, pids, rounds, pure=False)
    if rounds == 1:
        with pytest.raises(WorkerLost):
            future.result(timeout=120)
        return
    w = future.result(timeout=120)
    source = local_source(folder[0] / "folder", "parquet")
    X, Y = read_encoded(source, _encoder(), LABEL, None)
    loss = LogisticLoss(l2=0.01)
    expected = oracle_gradient_descent(
        loss,
        LocalGradient(loss, X, Y),
        step_size=1.0,
        iterations=5,
        noise_std=0.0,
        rng=np.random.default_rng(0),
    )
    assert np.allclose(w, expected, rtol=1e-9, atol=1e-12)


#: Bytes a test puts on a worker to push it over its pause threshold (per process, never pickled).
_BALLAST: list[np.ndarray] = []


def _push_over_the_pause(dask_worker: Any) -> int:
    """Allocate (and touch) enough memory that this worker's RSS passes its pause threshold."""
    import psutil

    manager = dask_worker.memory_manager
    threshold = manager.memory_pause_fraction * manager.memory_limit
    need = int(threshold - psutil.Process().memory_info().rss) + (96 << 20)
    _BALLAST.append(np.ones(max(need, 1 << 20) // 8))
    return need


def _drop_ballast(dask_worker: Any) -> int:
    import ctypes

    _BALLAST.clear()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    return 0


def _drive_through_a_pause(read: PartitionRead) -> tuple[np.ndarray, list[str]]:
    """Noise-free DP-GD over partitions (10 steps); at step 2 a worker holding a partition (not
    this one) goes over its memory pause threshold for real — Dask's memory monitor pauses it —
    and steps 3-6 run while it is paused; at step 6 its memory goes back and it resumes. Returns
    the model and the statuses the scheduler reported for that worker after each step."""
    from distributed import get_client

    from service.workers import data_parallel

    # Every wait for a step's answer times out at least once here, so the driver looks at the
    # workers' statuses during the pause (as it does when a big partition's step takes > POLL_S).
    data_parallel.POLL_S = 1e-4
    loss = LogisticLoss(l2=0.01)
    me = get_worker().address
    client = get_client()
    other = next(a for a in sorted(scheduler_workers(client)) if a != me)
    seen: list[str] = []

    def status() -> str:
        return str(scheduler_workers(client)[other].get("status"))

    def until(wanted: str) -> None:
        deadline = time.monotonic() + 60
        while status() != wanted:
            assert time.monotonic() < deadline, f"the worker never became {wanted}"
            time.sleep(0.1)

    def step(t: int) -> None:
        if t == 2:
            client.run(_push_over_the_pause, workers=[other])
            until("paused")
        if t == 6:
            client.run(_drop_ballast, workers=[other])
            until("running")
        seen.append(status())

    def fit(oracle_for: Callable[[int | None], Any]) -> np.ndarray:
        return oracle_gradient_descent(
            loss,
            oracle_for(None),
            step_size=1.0,
            iterations=10,
            noise_std=0.0,
            rng=np.random.default_rng(0),
            progress=step,
        )

    w = fit_partitioned("pause", read, loss, fit, after_load=lambda: None, max_rounds=1)
    return w, seen


def test_a_worker_paused_by_its_memory_mid_fit_is_waited_for_never_a_failure(
    folder: tuple[Path, int],
) -> None:
    """Issue 23 item 6: a worker holding a partition that passes Dask's memory pause threshold
    (a real pause: its memory monitor, not a stub) used to fail the job with ``WorkerPaused``,
    its charge standing. Now it is back-pressure: the paused worker still answers its actors'
    steps, the fit finishes in the same round (``max_rounds=1``: no restart either) with the
    model of a run without a pause, and the job's rows are released everywhere."""
    import dask

    os.environ["DPFIT_DATA_ROOTS"] = str(folder[0])
    # 2 workers of 1 GiB pausing at 0.5 (512 MiB): a few hundred MiB of ballast pause one; no
    # spilling, and no nanny restart, so only the pause acts.
    with (
        dask.config.set(
            {
                "distributed.worker.memory.pause": 0.5,
                "distributed.worker.memory.terminate": False,
                "distributed.worker.memory.spill": False,
                "distributed.worker.memory.target": False,
            }
        ),
        LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            memory_limit="1GiB",
            dashboard_address=None,
        ) as local,
        Client(local) as client,
    ):
        read = _read(folder)
        w, seen = client.submit(_drive_through_a_pause, read, pure=False).result(timeout=240)
        held = client.run(held_partitions)
    assert seen[1:4] == ["paused"] * 3 and seen[-1] == "running", seen
    source = local_source(folder[0] / "folder", "parquet")
    X, Y = read_encoded(source, _encoder(), LABEL, None)
    loss = LogisticLoss(l2=0.01)
    expected = oracle_gradient_descent(
        loss,
        LocalGradient(loss, X, Y),
        step_size=1.0,
        iterations=10,
        noise_std=0.0,
        rng=np.random.default_rng(0),
    )
    assert np.allclose(w, expected, rtol=1e-9, atol=1e-12)
    assert all(count == 0 for count, _ in held.values()), held


# --------------------------------------------------------------------------------------------
# Live servers: the embedded cluster (SQLite) and an external cluster (PostgreSQL)
# --------------------------------------------------------------------------------------------

CATEGORIES = [f"k{i}" for i in range(3000)]


def _wide_dataset(root: Path, name: str, rows: int) -> dict[str, Any]:
    """A Parquet file whose encoded rows are wide (two categorical features of 3000 declared
    categories: dimension 6002 with the intercept), and its registration body."""
    rng = np.random.default_rng(rows)
    a = rng.integers(0, 3000, rows)
    table = pa.table(
        {
            "a": [f"k{i}" for i in a],
            "b": [f"k{i}" for i in rng.integers(0, 3000, rows)],
            "label": np.where((a % 2 == 0) ^ (rng.random(rows) < 0.2), "yes", "no"),
        }
    )
    pq.write_table(table, root / f"{name}.parquet")
    return {
        "name": name,
        "source": {"uri": f"{name}.parquet"},
        "label": {"column": "label", "type": "binary", "positive": "yes", "negative": "no"},
        "features": [
            {"name": "a", "type": "categorical", "categories": CATEGORIES},
            {"name": "b", "type": "categorical", "categories": CATEGORIES},
        ],
        "budget": {"epsilon": 5.0, "delta": 1e-5},
    }


def _job(dataset_id: str) -> dict[str, Any]:
    return {
        "dataset_id": dataset_id,
        "model": {"type": "logistic_regression", "l2": 0.01, "fit_intercept": True},
        "optimizer": {"name": "dp_gd", "params": {"iterations": 10}},
        "privacy": {"epsilon": 1.0, "delta": 1e-6},
    }


def _wait(client: httpx.Client, job_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 180
    while (state := client.get(f"/v1/jobs/{job_id}").json())["status"] in ("queued", "running"):
        assert time.monotonic() < deadline, state
        time.sleep(0.2)
    return state


def _server(
    database_url: str, roots: list[Path], home: Path, extra: dict[str, str], workers: int
) -> LiveServer:
    from tests.support.walkthrough import COPIES

    env = dict(os.environ)
    env.update(
        DPFIT_DATABASE_URL=database_url,
        DPFIT_DATA_ROOTS=os.pathsep.join(str(p) for p in [*roots, COPIES]),
        DPFIT_WORKERS=str(workers),
        DPFIT_DASK_TLS_DIR=str(home / "dask-tls"),
        PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}",
        **extra,
    )
    live = LiveServer(database_url=database_url, port=free_port(), env=env, home=home)
    try:
        live.start(timeout=300.0)  # this shared machine runs at a load of 10-20
    except BaseException:
        live.stop()
        raise
    return live


def _security(tls_dir: Path) -> Security:
    tls = TlsSet(tls_dir)
    return Security(
        require_encryption=True,
        tls_ca_file=str(tls.ca),
        tls_client_cert=str(tls.cert("client")),
        tls_client_key=str(tls.key("client")),
    )


#: Connect timeout for the tests' own Dask clients: generous, because this shared 2-core machine
#: runs at loads of 10-20 (a 5 s timeout once failed under load). A dead peer still fails fast
#: (refused connection); nothing here waits without a bound.
CONNECT_TIMEOUT = "120s"


def _loads_per_worker(address: str, tls_dir: Path) -> dict[str, tuple[int, int]]:
    """(partitions held, partitions loaded so far) of every worker: counts, no data."""
    with Client(address, security=_security(tls_dir), timeout=CONNECT_TIMEOUT) as client:
        return client.run(held_partitions)


def _scheduler_address(server: LiveServer) -> str:
    """The embedded scheduler among the TCP listeners of the API process (its nannies listen
    there too): asked by Dask's own ``identity`` call, which every Dask server answers with its
    class name — one deterministic round trip per port, no guessing from a timeout."""
    import asyncio

    import psutil
    from distributed.core import rpc

    assert server.process is not None
    ports = sorted(
        {
            conn.laddr.port
            for conn in psutil.Process(server.process.pid).net_connections(kind="tcp")
            if conn.status == psutil.CONN_LISTEN and conn.laddr.port != server.port
        }
    )
    args = _security(server.home / "dask-tls").get_connection_args("client")

    async def kind(address: str) -> str:
        async with rpc(address, connection_args=args, timeout=120) as peer:
            identity = await asyncio.wait_for(peer.identity(), timeout=120)
        return str(identity.get("type", ""))

    kinds = {port: asyncio.run(kind(f"tls://127.0.0.1:{port}")) for port in ports}
    schedulers = [port for port, name in kinds.items() if name.endswith("Scheduler")]
    assert len(schedulers) == 1, kinds
    return f"tls://127.0.0.1:{schedulers[0]}"


def test_embedded_cluster_partitions_a_job_too_big_for_one_worker_and_refuses_one_too_big_for_all(
    tmp_path: Path,
) -> None:
    """2 workers of 1 GiB (each holds ≈ 573 MiB of job data beside its own 348 MiB): 7000 wide
    rows (≈ 321 MiB) exceed what one worker holds comfortably (half of it), so the job runs over
    both; 28000 rows (≈ 1283 MiB, 641 MiB per worker) fit nowhere: 422 on dataset_id before any
    charge."""
    data = tmp_path / "data"
    data.mkdir()
    server = _server(
        f"sqlite:///{tmp_path / 'dpfit.db'}",
        [data],
        tmp_path,
        {"DPFIT_WORKER_MEMORY": "1GiB"},
        workers=2,
    )
    try:
        owner = server.client(server.key("owner", "owner"))
        analyst = server.client(server.key("analyst", "analyst"))
        ids = {}
        for name, rows in (("wide", 7000), ("huge", 28000)):
            made = owner.post("/v1/datasets", json=_wide_dataset(data, name, rows))
            assert made.status_code == 201, made.text
            ids[name] = made.json()["id"]
            owner.post(f"/v1/datasets/{ids[name]}/grants", json={"principal": "analyst"})

        refused = analyst.post("/v1/jobs", json=_job(ids["huge"]))
        assert refused.status_code == 422, refused.text
        assert refused.headers["content-type"].startswith("application/problem+json")
        problem = refused.json()
        assert problem["field"] == "dataset_id" and "MiB" in problem["detail"], problem
        budget = owner.get(f"/v1/datasets/{ids['huge']}/budget").json()
        assert budget["epsilon_spent"] == 0.0, budget

        job = analyst.post("/v1/jobs", json=_job(ids["wide"]))
        assert job.status_code == 202, job.text
        state = _wait(analyst, job.json()["id"])
        assert state["status"] == "succeeded", state["error"]
        model = analyst.get(f"/v1/models/{state['model_id']}").json()
        assert len(model["coefficients"]) == 6000
        loads = _loads_per_worker(_scheduler_address(server), tmp_path / "dask-tls")
        assert len(loads) == 2 and all(
            loaded == 1 and held == 0 for held, loaded in loads.values()
        ), loads
    finally:
        server.stop()


def test_embedded_workers_are_limited_by_default_with_headroom_below_the_pause(
    tmp_path: Path,
) -> None:
    """Issue 23: without DPFIT_WORKER_MEMORY the workers had no limit. Now each gets its share of
    the machine's memory (partitions.default_worker_memory — what admission checks against), and
    Dask pauses at PAUSE_FRACTION (jobs are planned to peak 5 % below) and restarts at
    TERMINATE_FRACTION."""
    from service.data.partitions import PAUSE_FRACTION, TERMINATE_FRACTION, default_worker_memory

    # Nested, so that cloudpickle ships them by value: the server's workers cannot import tests.
    def worker_memory_settings(dask_worker: Any) -> tuple[int, float, bool]:
        return (
            int(dask_worker.memory_manager.memory_limit or 0),
            float(dask_worker.memory_manager.memory_pause_fraction),
            # the statistical profiler (cluster.WORKER_CONFIG): off, it grew a job's driver
            "profile-cycle" in dask_worker.periodic_callbacks,
        )

    def nanny_terminate_fraction(dask_worker: Any) -> float:
        return float(dask_worker.memory_manager.memory_terminate_fraction)

    server = _server(f"sqlite:///{tmp_path / 'dpfit.db'}", [], tmp_path, {}, workers=2)
    try:
        address = _scheduler_address(server)
        with Client(
            address, security=_security(tmp_path / "dask-tls"), timeout=CONNECT_TIMEOUT
        ) as client:
            seen = client.run(worker_memory_settings)
            nannies = client.run(nanny_terminate_fraction, nanny=True)
        assert len(seen) == 2 and len(nannies) == 2
        assert set(seen.values()) == {(default_worker_memory(2), PAUSE_FRACTION, False)}
        assert set(nannies.values()) == {TERMINATE_FRACTION}
    finally:
        server.stop()


@pytest.fixture
def two_worker_cluster(tmp_path: Path, folder: tuple[Path, int]) -> Iterator[str]:
    """`dask scheduler` + `dask worker --nworkers 2 --memory-limit 600MiB` on loopback, mutual
    TLS with a set made by `python -m service.workers.security` (as docs/reference/cluster.md
    says)."""
    from tests.support.dask_net import tls_args as _tls_args

    subprocess.run(
        [sys.executable, "-m", "service.workers.security", str(tmp_path / "dask-tls")],
        check=True,
        capture_output=True,
    )
    tls = TlsSet(tmp_path / "dask-tls")
    address = f"tls://127.0.0.1:{free_port()}"
    log = open(tmp_path / "dask.log", "ab")  # noqa: SIM115
    common: dict[str, Any] = {
        "stdout": log,
        "stderr": subprocess.STDOUT,
        "start_new_session": True,
        "cwd": tmp_path,
        # Workers run the jobs: they read the data roots and the partitioning threshold from
        # their own environment
        # (docs/reference/cluster.md#growing-to-a-cluster-of-many-machines-data-parallel-jobs).
        "env": dict(
            os.environ, DPFIT_DATA_ROOTS=str(folder[0]), DPFIT_DATA_PARALLEL_MIN_ROWS="1000"
        ),
    }
    port = address.rsplit(":", 1)[1]
    scheduler = subprocess.Popen(
        [
            str(BIN / "dask"),
            "scheduler",
            "--host",
            "127.0.0.1",
            "--port",
            port,
            "--no-dashboard",
            "--preload",
            "service.workers.cluster",
            *_tls_args(tls, "scheduler"),
        ],
        **common,
    )
    worker = subprocess.Popen(
        [
            str(BIN / "dask"),
            "worker",
            address,
            "--nworkers",
            "2",
            "--nthreads",
            "1",
            "--memory-limit",
            "600MiB",
            "--no-dashboard",
            "--host",
            "127.0.0.1",
            "--preload",
            "service.workers.cluster",
            *_tls_args(tls, "worker"),
        ],
        **common,
    )
    try:
        yield address
    finally:
        for process in (worker, scheduler):
            os.killpg(process.pid, signal.SIGTERM)
        for process in (worker, scheduler):
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)


def test_external_cluster_on_postgresql_runs_a_partitioned_job(
    two_worker_cluster: str,
    private_postgres_database: str,
    folder: tuple[Path, int],
    tmp_path: Path,
) -> None:
    """The operator's settings for a cluster of several machines: DPFIT_DASK_SCHEDULER,
    PostgreSQL, DPFIT_WORKERS/DPFIT_WORKER_MEMORY describing the workers, and
    DPFIT_DATA_PARALLEL_MIN_ROWS so that this small dataset is partitioned."""
    server = _server(
        private_postgres_database,
        [folder[0]],
        tmp_path,
        {
            "DPFIT_DASK_SCHEDULER": two_worker_cluster,
            "DPFIT_WORKER_MEMORY": "600MiB",
            "DPFIT_DATA_PARALLEL_MIN_ROWS": "1000",
        },
        workers=2,
    )
    try:
        owner = server.client(server.key("owner", "owner"))
        analyst = server.client(server.key("analyst", "analyst"))
        body = {
            "name": "folder",
            "source": {"uri": "folder"},
            "label": LABEL.model_dump(mode="json"),
            "features": [f.model_dump(mode="json") for f in FEATURES],
            "budget": {"epsilon": 5.0, "delta": 1e-5},
        }
        made = owner.post("/v1/datasets", json=body)
        assert made.status_code == 201, made.text
        dataset_id = made.json()["id"]
        owner.post(f"/v1/datasets/{dataset_id}/grants", json={"principal": "analyst"})
        before = _loads_per_worker(two_worker_cluster, tmp_path / "dask-tls")
        job = analyst.post(
            "/v1/jobs",
            json={
                **_job(dataset_id),
                "optimizer": {"name": "dp_agd", "params": {"iterations": 10}},
            },
        )
        assert job.status_code == 202, job.text
        state = _wait(analyst, job.json()["id"])
        assert state["status"] == "succeeded", state["error"]
        after = _loads_per_worker(two_worker_cluster, tmp_path / "dask-tls")
        assert len(after) == 2
        assert all(after[a][1] == before[a][1] + 1 and after[a][0] == 0 for a in after), (
            before,
            after,
        )
    finally:
        server.stop()


# --------------------------------------------------------------------------------------------
# A joint multiclass model over partitions (issue 24)
# --------------------------------------------------------------------------------------------

CATEGORICAL = LabelSpec(column="label", type="categorical", classes=["yes", "no", "maybe"])


def _joint_loss() -> Any:
    from service.models.multinomial import MultinomialLoss

    return MultinomialLoss(l2=0.01, classes=3, gradient_clip=0.5)


def _joint_plan(read: PartitionRead) -> ReleasePlan:
    from service.models.base import parameter_count

    loss = _joint_loss()
    d = parameter_count(loss, read.dimension)
    return DPGD().plan(DPGDParams(iterations=15), loss, read.n, d, PrivacyTarget(1.0, 1e-6))


def _drive_joint(read: PartitionRead, seed: int) -> np.ndarray:
    """Inside a worker task: the joint model's data-parallel fit, as the runner drives it."""
    loss = _joint_loss()
    plan = _joint_plan(read)
    rng = np.random.default_rng(seed)
    return fit_partitioned(
        f"joint-{seed}",
        read,
        loss,
        lambda oracle_for: DPGD().fit_oracle(plan, loss, oracle_for(None), rng, lambda t: None),
        after_load=lambda: None,
        max_rounds=1,
    )


def test_a_joint_multiclass_fit_over_partitions_equals_the_single_process_one(
    cluster: Client, folder: tuple[Path, int]
) -> None:
    """Each worker turns its partition's one-vs-rest labels into class indices
    (``fit_labels``) and the summed oracle answers over K·d' parameters: the same noised
    model as one process with the same noise."""
    from dataclasses import replace

    from service.models.base import fit_labels

    read = replace(_read(folder), label=CATEGORICAL.model_dump(mode="json"))
    loss = _joint_loss()
    plan = _joint_plan(read)
    source = local_source(folder[0] / "folder", "parquet")
    X, Y = read_encoded(source, _encoder(), CATEGORICAL, None)
    labels = fit_labels(loss, Y)
    assert set(np.unique(labels)) == {0.0, 1.0}  # "maybe" is declared, never present
    single = DPGD().fit(plan, loss, X, labels, np.random.default_rng(7), lambda t: None)
    assert single.shape == (3 * read.dimension,)
    parallel = cluster.submit(_drive_joint, read, 7, pure=False).result()
    assert np.allclose(parallel, single, rtol=1e-9, atol=1e-12), (parallel, single)


def test_the_schedulers_workers_are_all_listed_while_the_client_refreshes_its_cache() -> None:
    """Dask's client refreshes its cached scheduler info every millisecond here, each time with
    no per-worker entries; ``scheduler_workers`` asks the scheduler and lists both workers on
    every one of 300 calls (``Client.scheduler_info()`` returns that cache, and lost the race
    in 2 of 6 runs of the pause test above on a loaded host)."""
    import dask

    with (
        dask.config.set({"distributed.client.scheduler-info-interval": "1ms"}),
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
        ) as local,
        Client(local) as client,
    ):
        counts = {len(scheduler_workers(client)) for _ in range(300)}
    assert counts == {2}
