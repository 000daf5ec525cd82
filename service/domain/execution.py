"""Which jobs a dataset's execution can run, from public facts, before anything is charged.

A dataset registered with ``"execution": "in_database"`` is fitted inside its PostgreSQL
database (:mod:`service.workers.in_database`, :mod:`service.workers.in_database_sgd`); pricing
(:mod:`service.domain.submission`) refuses what that path cannot run with a 422 naming the
field. The check lives in the domain so the domain does not import the workers.
"""

from __future__ import annotations

from typing import Any

from service.data.sql_encoding import InDatabaseUnsupported
from service.optimizers.kits.curvature_step import IN_DATABASE_CURVATURE_WIDTH

__all__ = [
    "IN_DATABASE_CURVATURE_WIDTH",
    "IN_DATABASE_MODELS",
    "MAX_SELECT_ENTRIES",
    "MAX_TABLE_COLUMNS",
    "check_in_database",
    "check_in_database_width",
    "in_database_params",
]

#: The models whose per-row gradient coefficient is compiled to SQL (logistic regression,
#: binary or one-vs-rest over a categorical label; the joint multinomial model:
#: :mod:`service.workers.in_database_multinomial`).
IN_DATABASE_MODELS = frozenset({"logistic_regression", "multinomial_logistic_regression"})


#: PostgreSQL's own limits: a table holds at most 1,600 columns (the temporary table of encoded
#: rows: the d columns, y and a position), a select list at most 1,664 entries (the joint
#: multinomial query's levels carry the d columns and K values per class and a few more).
MAX_TABLE_COLUMNS = 1600
MAX_SELECT_ENTRIES = 1664


def check_in_database(
    model: str,
    optimizer: Any,
    label_type: str,
    *,
    width: int | None = None,
    classes: int | None = None,
) -> None:
    """Raise :class:`InDatabaseUnsupported` (field, message) when a job on an in-database
    dataset cannot run there: the model must be compiled, the optimizer a full-gradient one
    (``fit_oracle``) or ``bolt_on_psgd``, the label binary or categorical — ``bolt_on_psgd``
    (SGD as one aggregate over ±1 labels) on ``logistic_regression`` only (binary or
    one-vs-rest), not on the joint multinomial model. With the encoded row ``width`` (d,
    intercept included) and the label's ``classes``: the rows must fit a PostgreSQL table and
    the joint model's query a select list (:data:`MAX_TABLE_COLUMNS`,
    :data:`MAX_SELECT_ENTRIES`). Public facts only."""
    if model not in IN_DATABASE_MODELS:
        raise InDatabaseUnsupported(
            "model",
            "this dataset is fitted inside its database, which runs "
            + ", ".join(sorted(IN_DATABASE_MODELS))
            + " only",
        )
    if not hasattr(optimizer, "fit_oracle") and getattr(optimizer, "name", "") != "bolt_on_psgd":
        raise InDatabaseUnsupported(
            "optimizer.name",
            "this dataset is fitted inside its database, which runs bolt_on_psgd (SGD as an "
            "aggregate) and the full-gradient optimizers (dp_gd, dp_agd, dp_agd_averaged, "
            "dp_agd_centred, output_perturbation_gd, dp_accmd, auto)",
        )
    if label_type not in ("binary", "categorical"):
        raise InDatabaseUnsupported(
            "label.type", "in-database execution supports binary and categorical labels"
        )
    if model != "logistic_regression" and getattr(optimizer, "name", "") == "bolt_on_psgd":
        raise InDatabaseUnsupported(
            "optimizer.name",
            "bolt_on_psgd runs inside the database on logistic_regression (binary or "
            "one-vs-rest); the joint multinomial model runs the full-gradient optimizers there "
            "(dp_gd, dp_agd, dp_agd_averaged, dp_agd_centred, output_perturbation_gd, auto)",
        )
    if width is not None:
        check_in_database_width(width)
    joint = model == "multinomial_logistic_regression"
    if joint and width is not None and width + (classes or 0) + 8 > MAX_SELECT_ENTRIES:
        raise InDatabaseUnsupported(
            "model",
            "the joint multinomial model's query in the database carries the encoded columns "
            f"and one value per class, at most {MAX_SELECT_ENTRIES - 8} in all (a PostgreSQL "
            "limit); fit one-vs-rest (logistic_regression) instead",
        )


def check_in_database_width(width: int) -> None:
    """The encoded rows (``width`` columns, y and a position) must fit a PostgreSQL table:
    :class:`InDatabaseUnsupported` on ``features`` otherwise (at registration and pricing)."""
    if width + 2 > MAX_TABLE_COLUMNS:
        raise InDatabaseUnsupported(
            "features",
            f"in-database execution holds at most {MAX_TABLE_COLUMNS - 2} encoded columns "
            "(a PostgreSQL table's limit); this dataset encodes more",
        )


def in_database_params(optimizer: str, params: dict[str, Any], width: int) -> dict[str, Any]:
    """The optimizer parameters a job runs with in the database: ``params`` with
    ``curvature_share`` = 0 for ``dp_agd_averaged`` on rows wider than
    :data:`IN_DATABASE_CURVATURE_WIDTH` when the analyst left it unset (the job's recorded spec
    then shows it); unchanged otherwise. Public facts only."""
    if (
        optimizer == "dp_agd_averaged"
        and width > IN_DATABASE_CURVATURE_WIDTH
        and "curvature_share" not in params
    ):
        return {**params, "curvature_share": 0.0}
    return params
