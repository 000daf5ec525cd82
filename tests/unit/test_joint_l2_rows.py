"""``auto``'s l2 ceiling for a joint fit of K ≥ 3 classes on many rows: min(1e-3, 1/n)
(``service/optimizers/kits/joint_rule.py``, "Many rows").

The rule reads public facts only (n, K, the row width, ε, δ, the spec), so these tests pin it
on shapes: where the formula is above both ceilings the joint job takes exactly 1/n past 1,000
rows and 1e-3 up to it; below 1/n the formula stays; two classes, one-vs-rest, a binary label
and the analyst's own l2 keep the rule before.
"""

from __future__ import annotations

import pytest

from service.models.registry import parse_model_spec
from service.optimizers.auto import L2_CEILING, L2_FACTOR, L2_FLOOR, resolve, rule_l2
from service.optimizers.kits.base import PrivacyTarget
from service.optimizers.kits.joint_rule import (
    GRAM_L2_FACTOR,
    GRAM_L2_FLOOR,
    JOINT_L2_ROWS,
    joint_l2_ceiling,
    joint_norm_clip,
    takes_gram_l2,
)

DELTA = 1e-5
SPEC = {"type": "logistic_regression"}


def _job(n: int, features: int, classes: int | None, eps: float, **model: object) -> object:
    return resolve(
        parse_model_spec({**SPEC, **model}), n, features, PrivacyTarget(eps, DELTA), classes
    )


@pytest.mark.parametrize(
    ("n", "features", "classes", "eps"),
    [
        (14_699, 784, 10, 1.0),  # an MNIST-like development split
        (9_800, 16, 26, 0.5),  # many classes
        (3_919, 784, 10, 5.0),
        (1_470, 7, 4, 0.5),  # just past 1,000 rows
    ],
)
def test_a_joint_fit_on_many_rows_takes_one_over_n_where_the_formula_is_above_it(
    n: int, features: int, classes: int, eps: float
) -> None:
    job = _job(n, features, classes, eps)
    assert job.model["type"] == "multinomial_logistic_regression"  # type: ignore[attr-defined]
    assert job.optimizer == "dp_agd_averaged"  # type: ignore[attr-defined]
    assert rule_l2(0.5, n, classes * (features + 1), PrivacyTarget(eps, DELTA), 1.0) > 1.0 / n
    assert job.model["l2"] == pytest.approx(JOINT_L2_ROWS / n, rel=1e-15)  # type: ignore[attr-defined]
    assert job.record["filled"]["model.l2"] == job.model["l2"]  # type: ignore[attr-defined]
    assert job.model["l2"] < L2_CEILING  # type: ignore[attr-defined]


def test_up_to_a_thousand_rows_the_ceiling_is_the_rule_before() -> None:
    for n in (700, 1_000):
        job = _job(n, 64, 10, 1.0)
        assert job.model["l2"] == L2_CEILING  # type: ignore[attr-defined]
    assert joint_l2_ceiling(1_000, 10, L2_CEILING) == L2_CEILING
    assert joint_l2_ceiling(1_001, 10, L2_CEILING) < L2_CEILING


def test_below_one_over_n_the_formula_stays() -> None:
    n, features, classes, eps = 40_000, 10, 3, 5.0
    job = _job(n, features, classes, eps)
    assert job.model["l2"] < 1.0 / n  # type: ignore[attr-defined]
    target = PrivacyTarget(eps, DELTA)
    shape = (
        (GRAM_L2_FACTOR, GRAM_L2_FLOOR)
        if takes_gram_l2(n, features + 1, classes, target)
        else (L2_FACTOR, L2_FLOOR)
    )
    lipschitz = float(joint_norm_clip(0.5, classes) or 0.0)
    formula = rule_l2(lipschitz, n, classes * (features + 1), target, 1.0, *shape)
    assert job.model["l2"] == pytest.approx(formula, rel=1e-12)  # type: ignore[attr-defined]


def test_two_classes_one_vs_rest_binary_and_the_analysts_l2_keep_the_rule_before() -> None:
    n, features = 14_699, 784
    two = _job(n, features, 2, 1.0)
    assert two.model["type"] == "multinomial_logistic_regression"  # type: ignore[attr-defined]
    assert two.model["l2"] > 1.0 / n  # type: ignore[attr-defined]
    ovr = _job(n, features, 10, 1.0, gradient_clip=0.5)
    assert ovr.model["type"] == "logistic_regression"  # type: ignore[attr-defined]
    assert ovr.model["l2"] > 1.0 / n  # type: ignore[attr-defined]
    binary = _job(n, features, None, 0.5)
    assert binary.model["l2"] > 1.0 / n  # type: ignore[attr-defined]
    own = _job(n, features, 10, 1.0, l2=1e-3)
    assert own.model["l2"] == 1e-3  # type: ignore[attr-defined]
    assert "model.l2" not in own.record["filled"]  # type: ignore[attr-defined]


def test_the_ceiling_falls_with_n_and_never_rises_above_the_one_it_is_given() -> None:
    previous = float("inf")
    for n in (1, 10, 500, 1_000, 1_001, 5_000, 50_000, 10**7):
        ceiling = joint_l2_ceiling(n, 5, L2_CEILING)
        assert 0.0 < ceiling <= L2_CEILING
        assert ceiling <= previous
        previous = ceiling
    assert joint_l2_ceiling(50_000, 2, L2_CEILING) == L2_CEILING  # two classes: untouched
