"""The runner's shortcut: a job its own worker settles alone (``single_here``) skips the
scheduler round trip, which is only sound if ``choose_layout`` would have said "single" for
every cluster containing that worker."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from service.data.partitions import choose_layout, single_here

MIB = 1 << 20
memory = st.one_of(st.none(), st.integers(300 * MIB, 64 * 1024 * MIB))


@settings(max_examples=400, deadline=None)
@given(
    n=st.integers(1, 50_000_000),
    dimension=st.integers(1, 2_000),
    classes=st.one_of(st.none(), st.integers(3, 20)),
    own=memory,
    others=st.lists(memory, max_size=6),
    min_rows=st.one_of(st.none(), st.integers(1, 50_000_000)),
    columns=st.integers(1, 500),
    data_parallel=st.booleans(),
)
def test_a_job_settled_by_its_own_worker_is_single_on_every_cluster_holding_it(
    n: int,
    dimension: int,
    classes: int | None,
    own: int | None,
    others: list[int | None],
    min_rows: int | None,
    columns: int,
    data_parallel: bool,
) -> None:
    if not single_here(n, dimension, classes, own, min_rows=min_rows, columns=columns):
        return
    layout = choose_layout(
        n,
        dimension,
        classes,
        [own, *others],
        data_parallel=data_parallel,
        min_rows=min_rows,
        columns=columns,
    )
    assert layout.kind == "single"


def test_the_shortcut_declines_what_the_cluster_must_decide() -> None:
    # Rows too large for the worker's comfortable share, or the operator's partition threshold.
    assert single_here(10_000, 40, None, 2_000 * MIB, min_rows=None, columns=41)
    assert not single_here(10**8, 40, None, 2_000 * MIB, min_rows=None, columns=41)
    assert not single_here(10_000, 40, None, None, min_rows=10_000, columns=41)
    assert single_here(10**8, 40, None, None, min_rows=None, columns=41)  # unlimited worker
