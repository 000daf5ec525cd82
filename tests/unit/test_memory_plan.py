"""A job's worker memory is planned from public sizes, with headroom below Dask's pause threshold
(issue 22 item 3, issue 23 item 6).

- the estimate grows with every public size (n, the encoded width, the label's classes, the
  columns read) and shrinks with the workers' memory: a smaller job never fails where a larger
  one fits;
- it is a function of those sizes only — neighbouring datasets (same n, same schema) get the
  same answer whatever their cells;
- the planned peak stays 5 % of the limit below the pause threshold, which stays below the
  terminate threshold; the issue's 6·10⁶ × 40 job on 4 workers of 900 MiB is planned
  data-parallel within that headroom;
- without ``DPFIT_WORKER_MEMORY`` the embedded cluster's workers are limited to a share of the
  machine (they were unlimited), and admission checks against that limit.
"""

from __future__ import annotations

import inspect
import itertools
import math
import re

import pytest

from service.data import partitions
from service.data.partitions import (
    DATA_FRACTION,
    MACHINE_SHARE,
    PAUSE_FRACTION,
    TERMINATE_FRACTION,
    choose_layout,
    default_worker_memory,
    encoded_bytes,
    usable_bytes,
    worker_memory_limit,
    worker_overhead,
)
from service.domain.submission import DatasetFacts, check_fits_cluster
from service.optimizers.kits.base import InfeasibleSpec
from service.settings import Settings

MIB = 1 << 20


def _feasible(n: int, d: int, classes: int | None, memory: int, workers: int, dp: bool) -> bool:
    layout = choose_layout(
        n, d, classes, [memory] * workers, data_parallel=dp, min_rows=None, columns=d
    )
    return layout.kind != "infeasible"


def test_the_estimate_is_monotone_in_every_public_size() -> None:
    sizes = [10**3, 10**5, 10**6, 5 * 10**6, 2 * 10**7]
    widths = [2, 41, 200]
    memories = [512 * MIB, 900 * MIB, 4096 * MIB]
    for n, d, classes in itertools.product(sizes, widths, [None, 3]):
        assert encoded_bytes(n, d, classes) < encoded_bytes(2 * n, d, classes)
        assert encoded_bytes(n, d, classes) < encoded_bytes(n, d + 1, classes)
        assert encoded_bytes(n, d, None) <= encoded_bytes(n, d, 3)
        assert worker_overhead(n, d) <= worker_overhead(2 * n, d)
        assert worker_overhead(n, d) <= worker_overhead(n, 4 * d)
        for memory in memories:
            assert usable_bytes(memory, n, d) <= usable_bytes(2 * memory, n, d)
            assert usable_bytes(memory, 2 * n, d) <= usable_bytes(memory, n, d)
    # feasibility: whatever fits, every smaller job fits too (more workers and memory help)
    for n, d, memory, workers, dp in itertools.product(
        sizes, widths, memories, [1, 2, 4], [True, False]
    ):
        if _feasible(n, d, None, memory, workers, dp):
            assert _feasible(n // 2, d, None, memory, workers, dp)
            assert _feasible(n, max(1, d // 2), None, memory, workers, dp)
            assert _feasible(n, d, None, 2 * memory, workers, dp)
            if dp:
                assert _feasible(n, d, None, memory, 2 * workers, dp)


def test_the_estimate_takes_public_sizes_only() -> None:
    """Nothing the estimate reads can hold a cell: its inputs are n, the width, the label's
    classes, the columns read, the optimizer and the memory limits — the same for neighbours."""
    for function in (choose_layout, encoded_bytes, usable_bytes, worker_overhead):
        parameters = set(inspect.signature(function).parameters)
        assert parameters <= {
            "n",
            "dimension",
            "classes",
            "worker_memory",
            "data_parallel",
            "min_rows",
            "columns",
            "memory_limit",
            "rows",
        }, function
    base = DatasetFacts("ds_a", 10**6, 40, 1e-5, "binary", None, False, columns=41)
    neighbour = DatasetFacts("ds_b", 10**6, 40, 1e-5, "binary", None, False, columns=41)
    settings = Settings.from_env(
        {"DPFIT_DATA_ROOTS": ".", "DPFIT_WORKERS": "1", "DPFIT_WORKER_MEMORY": "700MiB"}
    )
    outcomes = []
    for facts in (base, neighbour):
        try:
            check_fits_cluster(facts, 41, "noisy_sgd_bst14", settings)
            outcomes.append("admitted")
        except InfeasibleSpec as exc:
            outcomes.append(exc.message.replace(facts.id, ""))
    assert outcomes[0] == outcomes[1] != "admitted"


#: Peak RSS of the 6e6 × 40 job's service workers, 4 × 900/941 MiB, measured 2026-11-26 on this
#: project's 2-core host (bench/RESULTS.md, "The big folder job"): the lead's run before this
#: turn (842–849 MiB, the plan said 801), then three runs with the partition reads trimmed and
#: Dask's profiler off (the driver is the largest of each run).
MEASURED_PEAKS_MIB = [842, 848, 848, 849, 826, 826, 826, 830, 826, 826, 826, 831]
MEASURED_NOW = MEASURED_PEAKS_MIB[4:]


def test_planned_peak_has_headroom_below_the_pause() -> None:
    """Planned peaks stay below the pause (a pause is back-pressure, tested live) and well
    below the restart (a restart loses the worker's window)."""
    assert PAUSE_FRACTION - DATA_FRACTION >= 0.015 - 1e-12
    assert TERMINATE_FRACTION - DATA_FRACTION >= 0.045 - 1e-12
    assert PAUSE_FRACTION < TERMINATE_FRACTION < 1.0


def test_the_estimate_is_honest_for_the_issues_job() -> None:
    """Issue 23's job: 6e6 rows × 40 numeric features (+ intercept), one label, 41 columns read.
    The planned peak of a worker holding 1.5e6 of its rows is at or above every peak measured
    since the reads were trimmed — the old model (256 MiB + 64 MiB) planned 801 MiB for peaks
    of 842–849 MiB, 6 MiB under the pause. With honest constants it plans 838 MiB: admitted on
    4 × 900 MiB (the issue's cluster: it must succeed every time), below the pause by more
    than the jitter measured (≤ 8 MiB), and refused on a limit that could not hold it."""
    n, d, workers = 6 * 10**6, 41, 4
    rows = n // workers
    peak = encoded_bytes(rows, d, None) + worker_overhead(rows, 41)
    assert peak >= max(MEASURED_NOW) * MIB
    assert peak <= PAUSE_FRACTION * 900 * MIB - 16 * MIB  # headroom below the pause at 900 MiB

    def layout(limit_mib: int) -> str:
        return choose_layout(
            n, d, None, [limit_mib * MIB] * workers, data_parallel=True, min_rows=None, columns=41
        ).kind

    assert layout(900) == "partitioned"
    smallest = math.ceil(peak / DATA_FRACTION / MIB)
    assert layout(smallest - 1) == "infeasible" and layout(smallest) == "partitioned"
    # three workers of 1 GiB cannot (2e6 rows each: 641 MiB of rows)
    three = choose_layout(n, d, None, [1024 * MIB] * 3, data_parallel=True, min_rows=None)
    assert three.kind == "infeasible"


def test_workers_are_limited_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(partitions, "machine_memory", lambda: 16 * 1024 * MIB)
    assert default_worker_memory(4) == int(MACHINE_SHARE * 16 * 1024 * MIB) // 4
    assert default_worker_memory(3) % MIB == 0
    embedded = Settings.from_env({"DPFIT_DATA_ROOTS": ".", "DPFIT_WORKERS": "4"})
    assert worker_memory_limit(embedded) == 3 * 1024 * MIB
    stated = Settings.from_env(
        {"DPFIT_DATA_ROOTS": ".", "DPFIT_WORKERS": "4", "DPFIT_WORKER_MEMORY": "900MiB"}
    )
    assert worker_memory_limit(stated) == 900 * MIB
    external = Settings.from_env(
        {"DPFIT_DATA_ROOTS": ".", "DPFIT_DASK_SCHEDULER": "tls://10.0.0.1:8786"}
    )
    assert worker_memory_limit(external) is None


def test_admission_checks_the_default_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before, with DPFIT_WORKER_MEMORY unset nothing was checked: a job too large for the
    machine was admitted, charged, and failed (or took the machine down)."""
    monkeypatch.setattr(partitions, "machine_memory", lambda: 2 * 1024 * MIB)
    settings = Settings.from_env({"DPFIT_DATA_ROOTS": ".", "DPFIT_WORKERS": "2"})
    facts = DatasetFacts("ds_x", 4 * 10**6, 40, 1e-5, "binary", None, False, columns=41)
    with pytest.raises(InfeasibleSpec) as refused:
        check_fits_cluster(facts, 41, "dp_gd", settings)
    assert refused.value.field == "dataset_id" and "768 MiB" in refused.value.message
    small = DatasetFacts("ds_y", 10**5, 40, 1e-5, "binary", None, False, columns=41)
    check_fits_cluster(small, 41, "dp_gd", settings)


@pytest.mark.parametrize("data_parallel", [False, True])
def test_a_refusal_states_the_peak_it_planned_and_the_limit_it_missed(data_parallel: bool) -> None:
    """A small job refused for the worker's own overhead said "the encoded rows need about
    1 MiB, more than the cluster can hold": the message gives the planned peak, its parts and
    the limit, and the peak is what the planner compared."""
    limit = 330 << 20
    layout = choose_layout(
        4000, 12, None, [limit, limit], data_parallel=data_parallel, min_rows=None, columns=5
    )
    assert layout.kind == "infeasible"
    peak, rows, overhead, fraction, shown_limit = (
        float(x) for x in re.findall(r"(\d+(?:\.\d+)?)(?= MiB|%)", layout.reason)
    )
    assert math.isclose(peak, rows + overhead, abs_tol=1) and shown_limit == 330
    assert math.isclose(fraction / 100, partitions.DATA_FRACTION)
    assert peak * (1 << 20) > partitions.DATA_FRACTION * limit
