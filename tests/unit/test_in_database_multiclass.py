"""The pure-Python parts of categorical labels in the database: which jobs pricing admits there,
the class lookup the SQL label compiles from (the reader's), the shape of the multinomial
gradient query (K·w sums, k-major, over K·w bound parameters) and of the curvature refresh's
query (K·w sums over K·w + w² bound parameters, flushed), which only a joint model's mapped
oracle answers."""

from __future__ import annotations

import numpy as np
import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from service.data.cells import normalise_value
from service.data.encoding import encode_one_vs_rest
from service.data.spec import LabelSpec
from service.data.sql_encoding import InDatabaseUnsupported, class_lookup
from service.domain.execution import IN_DATABASE_CURVATURE_WIDTH, check_in_database
from service.models.logistic import LogisticLoss
from service.models.multinomial import MultinomialLoss, class_indices
from service.optimizers.kits.curvature_refresh import CurvatureTermsOracle
from service.optimizers.kits.curvature_step import CURVATURE_MAX_WIDTH
from service.optimizers.kits.gram_step import GRAM_MAX_WIDTH
from service.optimizers.kits.registry import get_optimizer
from service.workers.in_database import InDatabaseGradient, statement_timeout_ms
from service.workers.in_database_curvature import (
    PARAMETER_FLUSH,
    curvature_blocks,
    curvature_params,
    curvature_query,
    curvature_timeout_ms,
)
from service.workers.in_database_multinomial import multinomial_gradient_query


@pytest.mark.parametrize(
    "optimizer",
    ["dp_gd", "dp_agd", "dp_agd_averaged", "dp_agd_centred", "output_perturbation_gd", "dp_accmd"],
)
@pytest.mark.parametrize("model", ["logistic_regression", "multinomial_logistic_regression"])
def test_full_gradient_jobs_on_a_categorical_label_run_in_the_database(
    optimizer: str, model: str
) -> None:
    check_in_database(model, get_optimizer(optimizer), "categorical")


@pytest.mark.parametrize(
    ("model", "optimizer", "label_type", "field"),
    [
        ("multinomial_logistic_regression", "bolt_on_psgd", "categorical", "optimizer.name"),
        ("logistic_regression", "noisy_sgd_scs13", "categorical", "optimizer.name"),
        ("huber_svm", "dp_gd", "categorical", "model"),
        ("logistic_regression", "dp_gd", "numeric", "label.type"),
    ],
)
def test_what_cannot_run_in_the_database_is_refused_naming_the_field(
    model: str, optimizer: str, label_type: str, field: str
) -> None:
    with pytest.raises(InDatabaseUnsupported) as refused:
        check_in_database(model, get_optimizer(optimizer), label_type)
    assert refused.value.field == field


@pytest.mark.parametrize("label_type", ["binary", "categorical"])
def test_bolt_on_runs_logistic_regression_binary_or_one_vs_rest(label_type: str) -> None:
    check_in_database("logistic_regression", get_optimizer("bolt_on_psgd"), label_type)


@pytest.mark.parametrize(
    "classes",
    [
        ["a", "b", "c"],
        ["3", "b", "3.0"],  # one key twice: the later class keeps it, as the reader's dict
        ["a", " ", "b"],  # a blank class has no key: no cell is of it
        ["TRUE", "1", "x"],  # "TRUE" and "1" share the key "1"
        [True, 2.5, "2.50", 7],
    ],
)
def test_class_lookup_is_the_readers(classes: list[object]) -> None:
    label = LabelSpec(column="y", type="categorical", classes=classes)
    lookup = class_lookup(label)
    cells = ["a", "b", "c", "3", "3.0", " ", "1", "true", "x", "2.5", "7", None, "zz"]
    expected = class_indices(encode_one_vs_rest(cells, label))
    keys = [normalise_value(c) for c in cells]
    got = [-1.0 if key is None else float(lookup.get(key, -1)) for key in keys]
    np.testing.assert_array_equal(got, expected)


def _sql(query: sa.Select) -> str:  # type: ignore[type-arg]
    return str(query.compile(dialect=postgresql.dialect()))


@pytest.mark.parametrize("clip", [None, 0.5])
def test_the_multinomial_query_has_k_times_w_sums_over_k_times_w_parameters(
    clip: float | None,
) -> None:
    K, width = 4, 3
    rows = sa.table("dpfit_rows", *(sa.column(f"x{j}") for j in range(width)), sa.column("y"))
    query = multinomial_gradient_query(rows, MultinomialLoss(classes=K, gradient_clip=clip), width)
    text = _sql(query)
    assert len(query.selected_columns) == 1  # one array (a select list holds ≤ 1,664)
    assert text.count("sum(") == K * width
    names = {p for p in query.compile().params if p.startswith("w")}
    assert names == {f"w{i}" for i in range(K * width)}
    # each level fenced: the scores are computed once per row, not once per reference
    assert text.count("OFFSET") >= 5
    assert text.count("exp(") == K + (1 if clip else 0)


def test_the_curvature_query_has_k_blocks_of_sums_over_w_and_the_basis() -> None:
    K, width = 4, 3
    query = curvature_query("dpfit_mapped", K, width)
    text = _sql(query)
    assert len(query.selected_columns) == 1  # one array, k-major
    assert text.count("sum(") == K * width * (width + 1) // 2  # each block's upper triangle
    names = {p for p in query.compile().params if p[0] in "wq" and p[1:].isdigit()}
    assert names == {f"w{i}" for i in range(K * width)} | {f"q{i}" for i in range(width**2)}
    assert text.count("exp(") == K and text.count("OFFSET") >= 5  # each level once per row
    assert "dpfit_mapped.y >=" in text  # m_i = [y_i ≥ 0]: a row of no declared class adds 0


def test_the_curvature_sums_unpack_into_symmetric_blocks() -> None:
    K, width = 2, 3
    values = np.arange(1.0, 13.0)  # block 0: 1..6, block 1: 7..12, upper triangles row by row
    blocks = curvature_blocks(values, K, width)
    np.testing.assert_array_equal(blocks[0], [[1, 2, 3], [2, 4, 5], [3, 5, 6]])
    np.testing.assert_array_equal(blocks[1], [[7, 8, 9], [8, 10, 11], [9, 11, 12]])
    with pytest.raises(ValueError):
        curvature_blocks(values[:-1], K, width)


def test_the_curvature_parameters_are_flushed_and_checked() -> None:
    K, width = 3, 2
    w = np.array([1.0, 5e-324, -(2.0**-501), 2.0**-499, -50.0, 0.0])
    basis = np.array([[1e-300, 1.0], [1.0, -(2.0**-500)]])
    params = curvature_params(w, basis, K, width)
    assert [params[f"w{i}"] for i in range(6)] == [1.0, 0.0, 0.0, 2.0**-499, -50.0, 0.0]
    assert [params[f"q{i}"] for i in range(4)] == [0.0, 1.0, 1.0, -PARAMETER_FLUSH]
    with pytest.raises(ValueError):
        curvature_params(w[:5], basis, K, width)
    with pytest.raises(ValueError):
        curvature_params(w, np.eye(3), K, width)
    with pytest.raises(ValueError):
        curvature_params(np.where(w == 1.0, np.nan, w), basis, K, width)


def test_only_a_joint_models_mapped_oracle_sums_the_curvature_terms() -> None:
    class _Conn:
        info: dict[str, object] = {}

    joint = MultinomialLoss(classes=3)
    encoded = InDatabaseGradient(_Conn(), joint, 10, 4)  # type: ignore[arg-type]
    assert isinstance(encoded, CurvatureTermsOracle)
    with pytest.raises(ValueError):  # the encoded rows (not mapped): before any query
        encoded.curvature_terms(np.zeros(12), np.eye(4))
    logistic = InDatabaseGradient(_Conn(), LogisticLoss(), 10, 4, table="dpfit_mapped")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        logistic.curvature_terms(np.zeros(4), np.eye(4))


def test_the_oracle_refuses_a_class_for_the_joint_model_and_other_losses() -> None:
    class _Conn:
        info: dict[str, object] = {}

    with pytest.raises(ValueError):
        InDatabaseGradient(_Conn(), MultinomialLoss(classes=3), 10, 4, label_class=1)  # type: ignore[arg-type]
    from service.models.registry import build_loss, parse_model_spec

    huber = build_loss(parse_model_spec({"type": "huber_svm"}))
    with pytest.raises(InDatabaseUnsupported) as refused:
        InDatabaseGradient(_Conn(), huber, 10, 4)  # type: ignore[arg-type]
    assert refused.value.field == "model"
    oracle = InDatabaseGradient(_Conn(), MultinomialLoss(classes=3), 10, 4)  # type: ignore[arg-type]
    assert (oracle.n, oracle.dimension) == (10, 12)


def test_what_postgresql_cannot_hold_is_refused_from_public_sizes() -> None:
    """A table holds ≤ 1,600 columns (features); the joint query's levels ≤ 1,664 entries
    (model) — the K·d sums themselves travel as one array, so K·d is not limited."""
    dp_agd = get_optimizer("dp_agd")
    check_in_database(
        "multinomial_logistic_regression", dp_agd, "categorical", width=62, classes=30
    )
    check_in_database("logistic_regression", dp_agd, "categorical", width=1598, classes=500)
    with pytest.raises(InDatabaseUnsupported) as refused:
        check_in_database("logistic_regression", dp_agd, "binary", width=1599)
    assert refused.value.field == "features"
    with pytest.raises(InDatabaseUnsupported) as refused:
        check_in_database(
            "multinomial_logistic_regression", dp_agd, "categorical", width=100, classes=1600
        )
    assert refused.value.field == "model"


def test_the_session_time_limit_covers_the_refresh_only_where_it_can_run() -> None:
    n, K = 100_000, 10
    gradient = statement_timeout_ms(n, 8 * K)  # the joint gradient's limit alone
    assert statement_timeout_ms(n, 8, K) == curvature_timeout_ms(n, K, 8) > gradient
    assert curvature_timeout_ms(n, K, 8) == 60_000 + n * K * 36 // 1000
    assert curvature_timeout_ms(n, 1, 8) == 0  # no classes: the binary limit
    assert curvature_timeout_ms(n, K, GRAM_MAX_WIDTH + 1) == 0  # no Gram form, no refresh
    assert statement_timeout_ms(n, 65, K) == statement_timeout_ms(n, 65 * K)


def test_no_level_of_the_curvature_query_is_wider_than_the_admission_allows() -> None:
    """``check_in_database`` admits a joint job when w + K + 8 ≤ 1,664 (a select list's limit);
    the refresh's query keeps every level within K + w + 2 columns, whatever w(w+1)/2 is."""
    from sqlalchemy.sql import visitors

    K, width = 40, 32
    query = curvature_query("dpfit_mapped", K, width)
    widths = [
        len(node.selected_columns)
        for node in visitors.iterate(query)
        if isinstance(node, sa.Select)
    ]
    assert len(widths) >= 5 and max(widths[1:]) <= K + width + 2  # [0]: the one array
    assert len(query.selected_columns) == 1


@pytest.mark.parametrize("width", [IN_DATABASE_CURVATURE_WIDTH, IN_DATABASE_CURVATURE_WIDTH + 1])
def test_wide_rows_keep_the_public_step_in_the_database_only(width: int) -> None:
    """The curvature step's Gram matrix is n·w²/2 aggregate transitions in PostgreSQL (w/(2K)
    gradients' work): above IN_DATABASE_CURVATURE_WIDTH the in-database default spends no
    share on it, and the job's recorded spec says so; the workers' default spends it up to
    CURVATURE_MAX_WIDTH; an analyst's own share is kept."""
    from service.domain.submission import DatasetFacts, price_job
    from service.schemas import JobCreate

    def priced(execution: str, params: dict[str, object] | None = None) -> dict[str, object]:
        facts = DatasetFacts(
            id="ds_wide", n_rows=20_000, n_features=width - 1, delta=1e-5,
            label_type="categorical", classes=10, retired=False, execution=execution,
        )  # fmt: skip
        body: dict[str, object] = {
            "dataset_id": "ds_wide",
            "model": {"type": "logistic_regression"},
            "privacy": {"epsilon": 1.0, "delta": 1e-5},
        }
        if params is not None:
            body["optimizer"] = {"name": "dp_agd_averaged", "params": params}
        job = price_job(facts, JobCreate.model_validate(body))
        return {**job.planned.plan.hyperparameters, "spec": job.spec["optimizer"]["params"]}

    assert width <= CURVATURE_MAX_WIDTH
    workers, inside = priced("workers"), priced("in_database")
    assert workers["curvature_share"] > 0  # type: ignore[operator]
    if width > IN_DATABASE_CURVATURE_WIDTH:
        assert "curvature_share" not in inside
        assert inside["spec"]["curvature_share"] == 0.0  # type: ignore[index]
    else:
        assert inside["curvature_share"] == workers["curvature_share"]
    own = priced("in_database", {"curvature_share": 0.05})
    assert own["curvature_share"] == 0.05
