"""``auto``'s l2 for a joint fit in the Gram form at the curvature at w = 0
(``service/optimizers/kits/joint_rule.py``, "Gram-form l2").

(a) The rule: factor 1 and floor 1e-6 exactly where ``takes_gram_l2`` holds (K ≥ 3, the
    curvature release pays, e·w/n ≤ 1/3 at the curvature share's multiplier); factor 9 and
    floor 1e-5 elsewhere — two classes, wide rows, few rows, the noisy side of the line, no
    intercept (no row map), the analyst's own l2.
(b) The prediction is the plan's: over a grid of public shapes, a job that took the Gram-form
    l2 is planned in the Gram form with h = 1/K, and a job that did not is not, except within
    1 % of the line (the plan rounds z_c up for the exact δ).
"""

from __future__ import annotations

import math

import pytest

from service.models.registry import build_loss, parse_model_spec
from service.optimizers.auto import L2_FACTOR, L2_FLOOR, resolve, rule_l2
from service.optimizers.dp_agd_averaged import DPAGDAveraged, DPAGDAveragedParams
from service.optimizers.kits.base import PrivacyTarget
from service.optimizers.kits.curvature_step import CURVATURE_SHARE
from service.optimizers.kits.gram_step import (
    CURVATURE_AT_ZERO_MAX_NOISE,
    curvature_scale,
    gram_edge,
)
from service.optimizers.kits.joint_rule import (
    GRAM_L2_FACTOR,
    GRAM_L2_FLOOR,
    joint_l2_ceiling,
    takes_gram_l2,
)
from service.privacy.gdp import gdp_mu

SPEC = {"type": "logistic_regression"}
DELTA = 1e-5


def _job(n: int, features: int, classes: int | None, eps: float, **model: object) -> object:
    return resolve(
        parse_model_spec({**SPEC, **model}), n, features, PrivacyTarget(eps, DELTA), classes
    )


def _expected(job: object, n: int, features: int, classes: int, eps: float, gram: bool) -> float:
    loss = build_loss(parse_model_spec(job.model), classes)  # type: ignore[attr-defined]
    d = classes * (features + (1 if job.model.get("fit_intercept", True) else 0))  # type: ignore[attr-defined]
    shape = (GRAM_L2_FACTOR, GRAM_L2_FLOOR) if gram else (L2_FACTOR, L2_FLOOR)
    ceiling = joint_l2_ceiling(n, classes, 1e-3)  # "Many rows": min(1e-3, 1/n) from K = 3
    return rule_l2(float(loss.lipschitz), n, d, PrivacyTarget(eps, DELTA), ceiling, *shape)


@pytest.mark.parametrize(
    ("n", "features", "classes", "eps", "gram"),
    [
        (20_000, 7, 10, 1.0, True),  # surveys' shape: e·w/n ≈ 0.06
        (20_000, 7, 10, 5.0, True),  # the floor 1e-6 binds
        (40_000, 21, 5, 2.0, True),
        (20_000, 7, 2, 1.0, False),  # two classes: no curvature step
        (20_000, 40, 10, 1.0, False),  # rows of 41 > 32: the eigenvalue form
        (1_500, 7, 10, 1.0, False),  # few rows: the curvature release does not pay
        (9_800, 20, 5, 0.5, False),  # e·w/n ≈ 0.98: the Gram form at β
    ],
)
def test_the_gram_form_l2_is_taken_where_its_steps_run_at_the_curvature_at_zero(
    n: int, features: int, classes: int, eps: float, gram: bool
) -> None:
    target = PrivacyTarget(eps, DELTA)
    assert takes_gram_l2(n, features + 1, classes, target) is gram
    job = _job(n, features, classes, eps)
    assert job.optimizer == "dp_agd_averaged"  # type: ignore[attr-defined]
    l2 = job.model["l2"]  # type: ignore[attr-defined]
    assert l2 == _expected(job, n, features, classes, eps, gram)
    assert job.record["filled"]["model.l2"] == l2  # type: ignore[attr-defined]
    if gram:  # the same formula at factor 1 over 9, or the floor
        other = _expected(job, n, features, classes, eps, False)
        assert l2 == pytest.approx(max(GRAM_L2_FLOOR, other / 9), rel=1e-12) or l2 == GRAM_L2_FLOOR
        assert l2 < other


def test_without_an_intercept_or_with_the_analysts_l2_the_rule_is_the_old_one() -> None:
    n, features, classes, eps = 20_000, 7, 10, 1.0
    plain = _job(n, features, classes, eps, fit_intercept=False)
    assert plain.model["l2"] == _expected(plain, n, features, classes, eps, False)  # type: ignore[attr-defined]
    own = _job(n, features, classes, eps, l2=3e-4)
    assert own.model["l2"] == 3e-4  # type: ignore[attr-defined]


def test_the_prediction_matches_the_plans_form_and_scale() -> None:
    """Every public shape of the grid: the Gram-form l2 iff the plan runs the Gram form at
    h = 1/K, but within 1 % of the line e·w/n = 1/3."""
    checked = 0
    for n in (3_000, 9_000, 20_000, 60_000):
        for features in (5, 11, 23, 31):
            for classes in (3, 5, 10):
                for eps in (0.5, 1.0, 2.0, 5.0):
                    job = _job(n, features, classes, eps)
                    width = features + 1
                    took = job.model["l2"] == _expected(job, n, features, classes, eps, True)  # type: ignore[attr-defined]
                    took = took and takes_gram_l2(n, width, classes, PrivacyTarget(eps, DELTA))
                    loss = build_loss(parse_model_spec(job.model), classes)  # type: ignore[attr-defined]
                    params = DPAGDAveragedParams.model_validate(job.params)  # type: ignore[attr-defined]
                    plan = DPAGDAveraged().plan(
                        params, loss, n, classes * width, PrivacyTarget(eps, DELTA)
                    )
                    hyper = plan.hyperparameters
                    at_zero = (
                        hyper.get("curvature_form") == "gram"
                        and curvature_scale(loss, n, width, float(hyper["curvature_noise_std"]))
                        == 1.0 / classes
                    )
                    if took != at_zero:
                        z_c = 1.0 / (gdp_mu(eps, DELTA) * math.sqrt(CURVATURE_SHARE))
                        ratio = gram_edge(width, z_c) * width / n / CURVATURE_AT_ZERO_MAX_NOISE
                        assert abs(ratio - 1.0) < 0.01, (n, features, classes, eps, ratio)
                    checked += took
    assert checked > 20  # the grid reaches both sides
