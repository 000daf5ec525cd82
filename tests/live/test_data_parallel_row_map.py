"""``dp_agd_averaged``'s row map on a real multi-process Dask LocalCluster
(service/workers/partition_row_map.py): the data-parallel fit through ``fit_partitioned`` —
rows summed and mapped on the workers that hold them — releases ``DPAGDAveraged.fit``'s model
on the same rows for the same generator (binary and joint multinomial: rows mapped in place;
one-vs-rest: mapped per gradient), the mean's share spent; no worker holds rows afterwards.
The mapped oracle's Gram matrix (the curvature step's input), summed on the workers, equals
``gram_of_rows(mapped_rows(X, mapping))`` on the same rows; the plain oracle refuses it. The
Gram-form case also spends the column scales (``column_scales``): the workers sum a(x) over
their rows and the release still equals the single-process fit's. The joint model's curvature
terms (the curvature refresh's input), summed on the workers, equal the kit's
``curvature_terms`` on the same mapped rows; the plain oracle refuses them."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from distributed import Client

from service.data.reader import read_encoded
from service.data.sources import local_source
from service.models.base import fit_labels
from service.models.registry import parse_model_spec
from service.optimizers.kits.base import PrivacyTarget
from service.optimizers.kits.curvature_refresh import CurvatureTermsOracle, curvature_terms
from service.optimizers.kits.curvature_step import GramOracle, gram_of_rows
from service.optimizers.kits.dp_agd_row_map import RowMap, mapped_rows, row_map
from service.optimizers.kits.one_vs_rest import class_plan_of
from service.optimizers.kits.planning import plan_job
from service.workers.data_parallel import PartitionRead, fit_partitioned, held_partitions
from tests.live.test_data_parallel import CATEGORICAL, LABEL, _encoder, _write_folder
from tests.support.dask_cluster import three_worker_cluster

TARGET = PrivacyTarget(1.0, 1e-6)
CASES = {
    "binary": ({"type": "logistic_regression", "l2": 1e-3}, None),
    "joint": ({"type": "multinomial_logistic_regression", "l2": 1e-3}, 3),
    "joint_gram": ({"type": "multinomial_logistic_regression", "l2": 1e-3}, 3),
    "one_vs_rest": ({"type": "logistic_regression", "l2": 1e-3}, 3),
}
#: The optimizer's params per case: each joint case forces one form of the curvature step
#: (``curvature_step``'s top eigenvalue; ``gram_step``'s Gram matrix as the preconditioner).
PARAMS: dict[str, dict[str, object]] = {
    "joint": {"curvature_form": "eigenvalue"},
    "joint_gram": {"curvature_form": "gram"},
}


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    root = tmp_path_factory.mktemp("dp-row-map")
    n = _write_folder(root / "folder", [400, 350, 1, 500, 249], seed=4)
    return root, n


@pytest.fixture(scope="module")
def cluster(folder: tuple[Path, int]) -> Iterator[Client]:
    with three_worker_cluster(folder[0]) as client:
        yield client


def _read(folder: tuple[Path, int], categorical: bool) -> PartitionRead:
    root, n = folder
    label = CATEGORICAL if categorical else LABEL
    return PartitionRead(
        source_format="parquet",
        location=str((root / "folder").resolve()),
        encoder=_encoder().to_dict(),
        label=label.model_dump(mode="json"),
        label_bound=None,
        n=n,
        dimension=_encoder().dimension,
    )


def _planned(case: str, n: int) -> Any:
    model, classes = CASES[case]
    spec = parse_model_spec({**model, "fit_intercept": True})
    params = PARAMS.get(case, {})
    return plan_job(spec, "dp_agd_averaged", params, n, _encoder().dimension - 1, TARGET, classes)


def _quiet(_: int) -> None:
    return None


def _drive(read: PartitionRead, case: str, seed: int) -> np.ndarray:
    """Inside a worker task, as the runner drives it (``_fit_partitioned``)."""
    planned = _planned(case, read.n)
    plan, loss, optimizer = planned.plan, planned.loss, planned.optimizer
    class_plan = class_plan_of(plan)
    rng = np.random.default_rng(seed)

    def fit(oracle_for: Any) -> np.ndarray:
        if class_plan is None:
            return optimizer.fit_oracle(plan, loss, oracle_for(None), rng, _quiet)
        return np.stack(
            [optimizer.fit_oracle(class_plan, loss, oracle_for(k), rng, _quiet) for k in range(3)]
        )

    return fit_partitioned(
        f"row-map-{case}-{seed}", read, loss, fit, after_load=lambda: None, max_rounds=1
    )


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_partitioned_row_map_fit_equals_the_single_process_fit(
    cluster: Client, folder: tuple[Path, int], case: str
) -> None:
    categorical = CASES[case][1] is not None
    read = _read(folder, categorical)
    planned = _planned(case, read.n)
    plan, loss, optimizer = planned.plan, planned.loss, planned.optimizer
    class_plan = class_plan_of(plan)
    assert (class_plan or plan).hyperparameters["row_map_share"] > 0.0
    if case.startswith("joint"):
        form = "gram" if case == "joint_gram" else "eigenvalue"
        assert plan.hyperparameters["curvature_form"] == form
        # the Gram form's plan spends the column scales too: the partitions sum a(x)
        scales = plan.hyperparameters.get("column_scale_share", 0.0)
        assert (scales > 0.0) == (form == "gram")
    source = local_source(folder[0] / "folder", "parquet")
    X, Y = read_encoded(source, _encoder(), CATEGORICAL if categorical else LABEL, None)
    rng = np.random.default_rng(7)
    if class_plan is None:
        single = optimizer.fit(plan, loss, X, fit_labels(loss, Y), rng, _quiet)
    else:
        single = np.stack([optimizer.fit(class_plan, loss, X, Y[k], rng, _quiet) for k in range(3)])
    before = cluster.run(held_partitions)
    parallel = cluster.submit(_drive, replace(read), case, 7, pure=False).result()
    after = cluster.run(held_partitions)
    assert np.abs(single).max() > 1e-2
    np.testing.assert_allclose(parallel, single, rtol=1e-9, atol=1e-12)
    assert all(after[a][1] == before[a][1] + 1 for a in after), (before, after)
    assert all(held == 0 for held, _ in after.values())


def _gram_of_partitions(read: PartitionRead, case: str, mapping: RowMap) -> tuple[np.ndarray, bool]:
    """Inside a worker task: the Gram matrix of the partitions' oracle mapped by ``mapping`` (in
    place for ``label_row`` None, on the fly for one-vs-rest's class 1); whether the plain
    oracle refused it."""
    loss = _planned(case, read.n).loss
    label_row = 1 if case == "one_vs_rest" else None

    def fit(oracle_for: Any) -> Any:
        oracle = oracle_for(label_row)
        assert isinstance(oracle, GramOracle)  # every instance has ``gram``; only mapped answers
        try:
            oracle.gram()
            refused = False
        except ValueError:
            refused = True
        return oracle.mapped(mapping).gram(), refused

    return fit_partitioned(
        f"row-map-gram-{case}", read, loss, fit, after_load=lambda: None, max_rounds=1
    )


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_partitions_gram_matrix_equals_the_single_process_one(
    cluster: Client, folder: tuple[Path, int], case: str
) -> None:
    categorical = CASES[case][1] is not None
    read = _read(folder, categorical)
    source = local_source(folder[0] / "folder", "parquet")
    X, _ = read_encoded(source, _encoder(), CATEGORICAL if categorical else LABEL, None)
    rng = np.random.default_rng(11)
    mapping = row_map(X.mean(axis=0) + rng.normal(size=X.shape[1]) * 0.1, 0.01)
    assert np.linalg.norm(mapping.centre) > 0.1  # a real map: rows centred, not just scaled
    task = cluster.submit(_gram_of_partitions, read, case, mapping, pure=False)
    gram, refused = task.result()
    assert refused
    expected = gram_of_rows(mapped_rows(X, mapping))
    assert gram.shape == expected.shape == (X.shape[1], X.shape[1])
    np.testing.assert_allclose(gram, expected, rtol=1e-12)
    assert all(held == 0 for held, _ in cluster.run(held_partitions).values())


def _terms_of_partitions(
    read: PartitionRead, mapping: RowMap, w: np.ndarray, basis: np.ndarray
) -> tuple[np.ndarray, bool]:
    """Inside a worker task: the joint model's curvature terms over the partitions' rows mapped
    in place by ``mapping``; whether the plain oracle refused them."""
    loss = _planned("joint_gram", read.n).loss

    def fit(oracle_for: Any) -> Any:
        oracle = oracle_for(None)
        assert isinstance(oracle, CurvatureTermsOracle)
        try:
            oracle.curvature_terms(w, basis)
            refused = False
        except ValueError:
            refused = True
        mapped = oracle.mapped(mapping)
        assert isinstance(mapped, CurvatureTermsOracle)
        return mapped.curvature_terms(w, basis), refused

    return fit_partitioned("row-map-terms", read, loss, fit, after_load=lambda: None, max_rounds=1)


def test_the_partitions_curvature_terms_equal_the_single_process_ones(
    cluster: Client, folder: tuple[Path, int]
) -> None:
    read = _read(folder, True)
    loss = _planned("joint_gram", read.n).loss
    source = local_source(folder[0] / "folder", "parquet")
    X, Y = read_encoded(source, _encoder(), CATEGORICAL, None)
    rng = np.random.default_rng(13)
    mapping = row_map(X.mean(axis=0) + rng.normal(size=X.shape[1]) * 0.1, 0.01)
    w = rng.normal(size=3 * X.shape[1])
    basis = np.linalg.qr(rng.normal(size=(X.shape[1], X.shape[1])))[0]
    task = cluster.submit(_terms_of_partitions, read, mapping, w, basis, pure=False)
    terms, refused = task.result()
    assert refused
    rows = mapped_rows(X, mapping)
    expected = curvature_terms(loss, w, rows, fit_labels(loss, Y), basis)
    assert terms.shape == expected.shape == (3, X.shape[1], X.shape[1])
    np.testing.assert_allclose(terms, expected, rtol=1e-10)
    assert all(held == 0 for held, _ in cluster.run(held_partitions).values())
