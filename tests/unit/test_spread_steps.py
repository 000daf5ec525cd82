"""The spread rows' steps (``service/optimizers/kits/joint_rule.py``, "Spread rows";
``kits/curvature_step.py``, step 2 and :data:`SPREAD_CONCENTRATION`).

(a) Step 2 with a plan's T_s: wherever λ⁺·w ≤ SPREAD_CONCENTRATION and T_s < T, T_s stands in
    for T in T' = ⌈T √(β̂/β_F)⌉; elsewhere the step is the one without T_s. In every case the
    steps' total μ² is the plan's (T'/σ'² = T/σ²: adaptive composition on the released λ̃ holds
    whatever T_s), T' ≤ T, and the step size does not depend on T_s.
(b) The plan records T_s in the eigenvalue form only, and only below T; the ledger's event does
    not depend on it.
(c) ``auto`` sets T_s = the T of the same joint job planned at the l2 before the many-rows
    ceiling, where that ceiling lowered l2 and the curvature step runs in the eigenvalue form;
    nowhere else (a job up to 1,000 rows, the Gram form, a binary label).
(d) The fit: on rows spread evenly over their width the eigenvalue form runs T_s-scaled steps,
    on rows along one direction the T-scaled ones (noise off: the steps' count is what the
    released λ̃ and public facts fix).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from service.models.logistic import LogisticLoss
from service.models.multinomial import MultinomialLoss
from service.models.registry import parse_model_spec
from service.optimizers.auto import L2_CEILING, AutoChoice, choose_model_and_optimizer, resolve
from service.optimizers.dp_agd_averaged import DPAGDAveraged, DPAGDAveragedParams
from service.optimizers.kits.base import PrivacyTarget
from service.optimizers.kits.curvature_step import SPREAD_CONCENTRATION, curvature_steps
from service.optimizers.kits.planning import plan_job
from service.privacy.secure_random import SecureRandom

TARGET = PrivacyTarget(1.0, 1e-5)


# --- (a) step 2 --------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(5))
def test_spread_steps_keep_the_plans_mu_and_stand_in_for_t_only_on_spread_rows(seed: int) -> None:
    rng = np.random.default_rng(seed)
    used = {True: 0, False: 0}
    for _ in range(300):
        n, w, T = (
            int(rng.integers(100, 10**6)),
            int(rng.integers(2, 800)),
            int(rng.integers(2, 400)),
        )
        spread = int(rng.integers(1, 2 * T))
        loss = MultinomialLoss(l2=float(10 ** rng.uniform(-5, -2)), classes=4, gradient_clip=0.5)
        sigma, sigma_c = float(rng.uniform(0.01, 2.0)), float(rng.uniform(0.1, 50.0))
        released = float(n / w * 10 ** rng.uniform(-0.5, 2.5))  # λ⁺·w around the line
        args = dict(
            n=n, width=w, loss=loss, iterations=T, step_noise_std=sigma, curvature_noise_std=sigma_c
        )
        out = curvature_steps(released, spread_iterations=spread, **args)  # type: ignore[arg-type]
        plain = curvature_steps(released, **args)  # type: ignore[arg-type]
        assert out.iterations / out.noise_std**2 == pytest.approx(T / sigma**2, rel=1e-12)
        assert 1 <= out.iterations <= T
        assert (out.step_size, out.upper) == (plain.step_size, plain.upper)
        takes = spread < T and out.upper * w <= SPREAD_CONCENTRATION
        used[takes] += 1
        if takes:
            ratio = (loss.smoothness * out.upper + loss.l2) / (loss.smoothness + loss.l2)
            expected = max(1, min(spread, math.ceil(spread * math.sqrt(ratio) - 1e-12)))
            assert out.iterations == expected <= plain.iterations
        else:
            assert out == plain
    assert used[True] > 20 and used[False] > 20  # both sides of the line were probed


def test_the_line_is_inclusive_and_reads_the_upper_estimate() -> None:
    loss = MultinomialLoss(l2=1e-4, classes=10, gradient_clip=0.5)
    n, w, T, sigma_c = 100_000, 100, 200, 5.0
    margin = 2.0 * sigma_c
    at_line = SPREAD_CONCENTRATION / w * n - margin  # λ⁺·w exactly at the line
    args = dict(
        n=n, width=w, loss=loss, iterations=T, step_noise_std=1.0, curvature_noise_std=sigma_c
    )
    at = curvature_steps(at_line, spread_iterations=50, **args)  # type: ignore[arg-type]
    above = curvature_steps(at_line + 10.0, spread_iterations=50, **args)  # type: ignore[arg-type]
    assert at.upper * w == pytest.approx(SPREAD_CONCENTRATION, rel=1e-12)
    assert at.iterations <= 50 < above.iterations


# --- (b) the plan ------------------------------------------------------------------------------


def _plan(n: int, width: int, **params: object) -> dict[str, object]:
    loss = MultinomialLoss(l2=1e-4, classes=5, gradient_clip=0.5, fit_intercept=True)
    plan = DPAGDAveraged().plan(
        DPAGDAveragedParams.model_validate(params), loss, n, 5 * width, TARGET
    )
    return plan.hyperparameters


def test_the_plan_records_spread_steps_in_the_eigenvalue_form_below_t_only() -> None:
    base = _plan(20_000, 100)
    assert base["curvature_form"] == "eigenvalue"
    T = int(base["iterations"])  # type: ignore[call-overload]
    with_spread = _plan(20_000, 100, spread_iterations=T // 2)
    assert with_spread["spread_iterations"] == T // 2
    assert {k: v for k, v in with_spread.items() if k != "spread_iterations"} == base
    assert "spread_iterations" not in _plan(20_000, 100, spread_iterations=T)
    gram = _plan(20_000, 12, spread_iterations=5)
    assert gram["curvature_form"] == "gram" and "spread_iterations" not in gram
    public = _plan(20_000, 100, spread_iterations=5, curvature_share=0.0)
    assert "spread_iterations" not in public


# --- (c) auto ----------------------------------------------------------------------------------


def _auto(n: int, features: int, classes: int | None, eps: float = 1.0) -> AutoChoice:
    spec = parse_model_spec({"type": "logistic_regression"})
    return resolve(spec, n, features, PrivacyTarget(eps, 1e-5), classes)


@pytest.mark.parametrize(("n", "features", "classes"), [(14_699, 784, 10), (9_800, 50, 10)])
def test_auto_sets_the_steps_of_the_l2_before_the_ceiling(
    n: int, features: int, classes: int
) -> None:
    job: AutoChoice = _auto(n, features, classes)
    filled = job.record["filled"]
    sent = parse_model_spec({"type": "logistic_regression"}).model_dump(mode="json")
    before_l2 = choose_model_and_optimizer(
        sent, {"type"}, True, TARGET, n, features, classes, rows_ceiling=False
    )[0]["l2"]
    assert job.model["l2"] < before_l2 <= L2_CEILING
    params = {"max_iterations": filled["optimizer.params.max_iterations"]}
    at = {**job.model, "l2": before_l2}
    before = plan_job(parse_model_spec(at), "dp_agd_averaged", params, n, features, TARGET, classes)
    spec = parse_model_spec(job.model)
    now = plan_job(spec, "dp_agd_averaged", job.params, n, features, TARGET, classes).plan
    assert now.hyperparameters["curvature_form"] == "eigenvalue"
    steps = before.plan.hyperparameters["iterations"]
    assert filled["optimizer.params.spread_iterations"] == steps
    assert now.hyperparameters["spread_iterations"] == steps < now.hyperparameters["iterations"]


@pytest.mark.parametrize(
    ("n", "features", "classes"),
    [(1_000, 784, 10), (9_800, 16, 26), (9_800, 20, None)],  # few rows; the Gram form; binary
)
def test_auto_sets_no_spread_steps_elsewhere(n: int, features: int, classes: int | None) -> None:
    job = _auto(n, features, classes)
    assert "optimizer.params.spread_iterations" not in job.record["filled"]
    assert "spread_iterations" not in job.params


# --- (d) the fit -------------------------------------------------------------------------------


def _steps_run(X: np.ndarray, y: np.ndarray, spread: int | None) -> tuple[int, int]:
    """(steps run, the plan's T) of the eigenvalue form at ε = 50 (the released λ̃ within a
    few units of λ_max(G) on thousands of rows: λ⁺·w far from the line on both sets)."""
    n, w = X.shape
    loss = MultinomialLoss(l2=1e-4, classes=3, gradient_clip=0.5, fit_intercept=True)
    params = DPAGDAveragedParams(curvature_form="eigenvalue", spread_iterations=spread)
    plan = DPAGDAveraged().plan(params, loss, n, 3 * w, PrivacyTarget(50.0, 1e-5))
    seen: list[int] = []
    DPAGDAveraged().fit(plan, loss, X, y, SecureRandom(np.random.default_rng(0).bytes), seen.append)
    return seen[-1], int(plan.hyperparameters["iterations"])


def test_spread_rows_run_the_spread_steps_and_concentrated_rows_the_plans() -> None:
    rng = np.random.default_rng(3)
    n, w = 4_000, 60
    spread_rows = rng.uniform(-1.0, 1.0, (n, w))
    spread_rows[:, -1] = 1.0  # the intercept column
    spread_rows /= np.linalg.norm(spread_rows, axis=1, keepdims=True)
    along = np.outer(rng.choice([-1.0, 1.0], n), np.r_[np.ones(w - 1), 0.0])
    along[:, -1] = 1.0
    along /= np.linalg.norm(along, axis=1, keepdims=True)
    y = rng.integers(0, 3, n).astype(float)
    steps, T = _steps_run(spread_rows, y, None)
    spread_steps, _ = _steps_run(spread_rows, y, T // 4)
    assert spread_steps < steps and spread_steps <= T // 4
    concentrated, _ = _steps_run(along, y, None)
    assert _steps_run(along, y, T // 4)[0] == concentrated  # λ⁺·w far above the line
    binary = LogisticLoss(l2=1e-4, gradient_clip=0.5, fit_intercept=True)
    assert (
        "spread_iterations"
        not in DPAGDAveraged()
        .plan(DPAGDAveragedParams(spread_iterations=5), binary, n, w, TARGET)
        .hyperparameters
    )  # no curvature step on a binary model by default: nothing to read
