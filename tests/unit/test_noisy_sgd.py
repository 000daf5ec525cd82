"""The noisy-SGD baselines noisy_sgd_scs13 (SCS13) and noisy_sgd_bst14 (BST14).

docs/privacy-model.md#testing-privacy: per-step sensitivity of the noised batch gradients on
random and adversarial
neighbouring pairs (same seed ⇒ same batches), the batching the accounting assumes, the
calibration against dp-accounting (and the drawn noise against the plan), utility, and a small
empirical audit of each mechanism.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from dp_accounting import dp_event
from pydantic import BaseModel, ValidationError
from scipy import stats
from sklearn.linear_model import LogisticRegression

from service.ledger.accounting import ORDERS, rdp_curve
from service.models.base import FloatArray, LinearModelLoss, Task
from service.models.huber_svm import HuberSVMLoss
from service.models.logistic import LogisticLoss
from service.models.sigmoid import SigmoidLoss
from service.optimizers.kits.base import InfeasibleSpec, JobCancelled, PrivacyTarget, ReleasePlan
from service.optimizers.kits.limits import SAMPLED_STEPS_CAP
from service.optimizers.kits.planning import plan_from_json, plan_to_json
from service.optimizers.kits.registry import catalog, get_optimizer
from service.optimizers.kits.sgd_common import (
    InverseSqrtSchedule,
    StepSchedule,
    baseline_steps,
    schedule_from_json,
)
from service.optimizers.noisy_sgd_bst14 import (
    NoisySGDBST14,
    NoisySGDBST14Params,
    bst14_event,
    sampled_noisy_sgd,
)
from service.optimizers.noisy_sgd_scs13 import (
    NoisySGDSCS13,
    NoisySGDSCS13Params,
    noisy_permutation_sgd,
    scs13_event,
)
from service.privacy.calibration import calibrate_noise_multiplier, event_epsilon
from service.privacy.gdp import event_mu, gdp_delta, gdp_epsilon
from service.privacy.secure_release import laplace_release

SCS = NoisySGDSCS13()
BST = NoisySGDBST14()


@dataclass
class LinearLoss(LinearModelLoss):
    """ℓ(w; x, y) = −y w·x (convex, L = 1, any β ≥ 0): gradients do not depend on w, so the
    output is an explicit affine function of the noise and the audits below are exact."""

    name: str = field(default="linear_test_loss", init=False)
    task: Task = field(default="classification", init=False)
    lipschitz: float = field(default=1.0, init=False)
    smoothness: float = field(default=0.25, init=False)

    def phi(self, z: FloatArray, y: FloatArray) -> FloatArray:
        out: FloatArray = -y * z
        return out

    def dphi(self, z: FloatArray, y: FloatArray) -> FloatArray:
        out: FloatArray = -y * np.ones_like(z)
        return out


def _scs(
    loss: LinearModelLoss, n: int, d: int, eps: float = 1.0, delta: float = 1e-5, **kw: Any
) -> ReleasePlan:
    return SCS.plan(NoisySGDSCS13Params.model_validate(kw), loss, n, d, PrivacyTarget(eps, delta))


def _bst(
    loss: LinearModelLoss, n: int, d: int, eps: float = 1.0, delta: float = 1e-5, **kw: Any
) -> ReleasePlan:
    return BST.plan(NoisySGDBST14Params.model_validate(kw), loss, n, d, PrivacyTarget(eps, delta))


def _unit_rows(rng: np.random.Generator, n: int, d: int) -> FloatArray:
    x = rng.normal(size=(n, d))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x * rng.uniform(0.2, 1.0, size=(n, 1))


def _labels(rng: np.random.Generator, n: int) -> FloatArray:
    return rng.choice([-1.0, 1.0], size=n)


def _noop(_: int) -> None:
    return None


Runner = Callable[..., FloatArray]


def _run(
    name: str,
    loss: LinearModelLoss,
    X: FloatArray,
    y: FloatArray,
    plan: ReleasePlan,
    seed: int,
    noise: bool = True,
    observe: Callable[[int, FloatArray, Any], None] | None = None,
) -> FloatArray:
    """The optimizer's public noise-optional function with the plan's hyper-parameters."""
    hp = plan.hyperparameters
    common: dict[str, Any] = {
        "batch_size": hp["batch_size"],
        "schedule": schedule_from_json(hp["schedule"]),
        "radius": hp["radius"],
        "noise_scale": plan.noise_scale,
        "sensitivity": plan.sensitivity,
        "rng": np.random.default_rng(seed),
        "noise": noise,
        "observe": observe,
    }
    if name == "scs13":
        return noisy_permutation_sgd(
            loss, X, y, passes=hp["passes"], mechanism=plan.mechanism, **common
        )
    return sampled_noisy_sgd(loss, X, y, iterations=hp["iterations"], **common)


# --- per-step sensitivity, with the noise off -------------------------------------------------


def _adversarial_rows(w: FloatArray, d: int) -> tuple[FloatArray, FloatArray]:
    """Two rows, both misclassified by w when ‖w‖ is large, whose gradients point in nearly
    opposite directions: (−a u ± c v) with u = w/‖w‖, v ⊥ u, a small, label +1."""
    u = w / np.linalg.norm(w)
    v = np.zeros(d)
    v[int(np.argmin(np.abs(u)))] = 1.0
    v -= (v @ u) * u
    v /= np.linalg.norm(v)
    a = 0.1
    c = math.sqrt(1 - a * a)
    return -a * u + c * v, -a * u - c * v


def _trace(
    name: str, loss: LinearModelLoss, X: FloatArray, y: FloatArray, plan: ReleasePlan, seed: int
) -> list[tuple[FloatArray, Any]]:
    """(w_{t−1}, B_t) of every step of a noisy run."""
    steps: list[tuple[FloatArray, Any]] = []

    def record(t: int, w: FloatArray, idx: Any) -> None:
        steps.append((w.copy(), idx.copy()))

    _run(name, loss, X, y, plan, seed, noise=True, observe=record)
    return steps


@pytest.mark.parametrize("name", ["scs13", "bst14"])
@pytest.mark.parametrize("mu", [0.0, 0.05])
def test_per_step_sensitivity_never_exceeds_plan(name: str, mu: float) -> None:
    n, d = 30, 4
    loss = LogisticLoss(l2=mu)
    plan = (
        _scs(loss, n, d, passes=3, batch_size=4)
        if name == "scs13"
        else _bst(loss, n, d, iterations=40, batch_size=4)
    )
    bound = plan.sensitivity
    assert bound == pytest.approx(2 / (4 if name == "bst14" else 30 // (30 // 4)))
    rng = np.random.default_rng(17 + int(100 * mu))
    observed: list[float] = []
    for base in range(4):
        X, y = _unit_rows(rng, n, d), _labels(rng, n)
        j = int(rng.integers(n))
        w_ref = _run(name, loss, X, y, plan, base, noise=False)
        unit = X[j] / np.linalg.norm(X[j])
        candidates = [(-unit, y[j]), (unit, -y[j]), (0 * unit, 1.0)]
        if np.linalg.norm(w_ref) > 0:
            candidates += [
                (w_ref / np.linalg.norm(w_ref), -1.0),
                (-w_ref / np.linalg.norm(w_ref), 1.0),
            ]  # noqa: E501
        candidates += [(u, s) for u in _unit_rows(rng, 3, d) for s in (-1.0, 1.0)]
        for x_new, y_new in candidates:
            X2, y2 = X.copy(), y.copy()
            X2[j], y2[j] = x_new, y_new
            steps = _trace(name, loss, X, y, plan, base)
            steps2 = _trace(name, loss, X2, y2, plan, base)
            # same seed ⇒ same batches on both neighbours (the noise is data independent)
            assert all(np.array_equal(a[1], b[1]) for a, b in zip(steps, steps2, strict=True))
            for w, idx in steps:
                if j in idx:
                    diff = loss.gradient(w, X[idx], y[idx]) - loss.gradient(w, X2[idx], y2[idx])
                    gap = float(np.linalg.norm(diff))
                    assert gap <= bound * (1 + 1e-12)
                    observed.append(gap)
        # adversarial rows at large iterates (the bound is for every w the run may reach)
        for scale in (1.0, 30.0, 300.0):
            w = scale * rng.normal(size=d)
            x_a, x_b = _adversarial_rows(w, d)
            idx = np.arange(plan.hyperparameters["batch_size"])
            Xa, Xb = X[idx].copy(), X[idx].copy()
            Xa[0], Xb[0] = x_a, x_b
            ya = y[idx].copy()
            ya[0] = 1.0
            gap = float(np.linalg.norm(loss.gradient(w, Xa, ya) - loss.gradient(w, Xb, ya)))
            assert gap <= bound * (1 + 1e-12)
            observed.append(gap)
    assert max(observed) > 0.95 * bound  # so the test would fail if Δ were halved


def test_scs13_batches_touch_each_row_once_per_pass() -> None:
    n, passes, b = 23, 4, 5
    plan = _scs(LogisticLoss(), n, 2, passes=passes, batch_size=b)
    assert plan.hyperparameters["min_batch_size"] == 5 and plan.total_steps == passes * 4
    rng = np.random.default_rng(0)
    X, y = _unit_rows(rng, n, 2), _labels(rng, n)
    batches: list[Any] = []
    _run("scs13", LogisticLoss(), X, y, plan, 3, observe=lambda t, w, idx: batches.append(idx))
    assert len(batches) == plan.total_steps
    assert min(len(idx) for idx in batches) >= b
    for p in range(passes):
        rows = np.concatenate(batches[4 * p : 4 * (p + 1)])
        assert sorted(rows.tolist()) == list(range(n))  # a permutation: each row exactly once
    orders = [tuple(np.concatenate(batches[4 * p : 4 * (p + 1)])) for p in range(passes)]
    assert len(set(orders)) == passes  # a fresh permutation per pass


def test_bst14_batches_are_fixed_size_without_replacement() -> None:
    n, b, iterations = 20, 5, 4000
    plan = _bst(LogisticLoss(), n, 2, iterations=iterations, batch_size=b)
    rng = np.random.default_rng(0)
    X, y = _unit_rows(rng, n, 2), _labels(rng, n)
    batches: list[Any] = []
    _run("bst14", LogisticLoss(), X, y, plan, 5, observe=lambda t, w, idx: batches.append(idx))
    assert len(batches) == iterations
    assert all(len(idx) == b and len(set(idx.tolist())) == b for idx in batches)
    counts = np.bincount(np.concatenate(batches), minlength=n)
    # each row is in a batch with probability q = b/n, independently across steps
    q = b / n
    expected, sd = iterations * q, math.sqrt(iterations * q * (1 - q))
    assert np.all(np.abs(counts - expected) < 4.5 * sd)
    # consecutive batches are independent: overlap ~ hypergeometric with mean b·q
    overlaps = [
        len(set(a.tolist()) & set(c.tolist())) for a, c in zip(batches, batches[1:], strict=False)
    ]
    assert np.mean(overlaps) == pytest.approx(b * q, abs=0.1)


# --- calibration ------------------------------------------------------------------------------


@pytest.mark.parametrize("passes", [1, 5])
@pytest.mark.parametrize(("eps", "delta"), [(0.3, 1e-6), (1.0, 1e-5), (8.0, 1e-5)])
def test_scs13_calibration(passes: int, eps: float, delta: float) -> None:
    plan = _scs(LogisticLoss(), 1000, 5, eps, delta, passes=passes)
    z = plan.hyperparameters["noise_multiplier"]
    assert plan.mechanism == "gaussian"
    assert plan.noise_scale == pytest.approx(z * plan.sensitivity, rel=1e-12)
    assert plan.sensitivity == pytest.approx(2 / 50)
    assert plan.event == scs13_event(z, passes)
    # the ledger's curve is k·α/(2z²): no doubling of the noise multiplier
    # (docs/ledger.md#the-z-convention)
    curve = rdp_curve(plan.event)
    for alpha, rho in zip(ORDERS[:-1], curve[:-1], strict=True):
        assert rho == pytest.approx(passes * alpha / (2 * z * z), rel=1e-9)
    # exact GDP calibration: k passes are √k/z-GDP, (ε, δ) met with equality; RDP needs more
    mu = event_mu(plan.event)
    assert mu == pytest.approx(math.sqrt(passes) / z, rel=1e-12)
    assert gdp_delta(eps, mu) <= delta
    assert gdp_epsilon(mu, delta) == pytest.approx(eps, rel=1e-6)
    reference = calibrate_noise_multiplier(lambda v: scs13_event(v, passes), eps, delta)
    assert z < reference


def test_scs13_pure_calibration() -> None:
    plan = _scs(LogisticLoss(), 1000, 5, 0.5, 0.0, passes=3)
    assert plan.mechanism == "norm_gamma"
    assert plan.noise_scale == pytest.approx(3 * plan.sensitivity / 0.5, rel=1e-12)
    assert isinstance(plan.event, dp_event.RandomizedResponseDpEvent)
    assert plan.event.noise_parameter == pytest.approx(2 / (1 + math.exp(0.5)), rel=1e-12)


@pytest.mark.parametrize(
    ("n", "b", "iterations", "eps", "delta"),
    [(5000, 50, 1000, 1.0, 1e-5), (200, 10, 100, 8.0, 1e-6), (1000, 100, 3000, 0.5, 1e-5)],
)
def test_bst14_calibration(n: int, b: int, iterations: int, eps: float, delta: float) -> None:
    plan = _bst(LogisticLoss(), n, 5, eps, delta, iterations=iterations, batch_size=b)
    z = plan.hyperparameters["noise_multiplier"]
    assert plan.sensitivity == pytest.approx(2 / b)
    assert plan.noise_scale == pytest.approx(z * 2 / b, rel=1e-12)
    assert plan.event == bst14_event(z, n, b, iterations)
    assert isinstance(plan.event, dp_event.SelfComposedDpEvent)
    inner = plan.event.event
    assert isinstance(inner, dp_event.SampledWithoutReplacementDpEvent)
    assert (inner.source_dataset_size, inner.sample_size) == (n, b)
    assert plan.event.count == iterations
    spent = event_epsilon(plan.event, delta)
    assert eps * 0.99 < spent <= eps
    curve = rdp_curve(plan.event)
    assert all(math.isfinite(v) and v > 0 for v in curve[:8])


def test_tiered_calibration_of_sampled_events_matches_the_full_grid() -> None:
    """subsampled=True searches low orders first; it must give the full grid's answer."""

    def sampled(v: float) -> dp_event.DpEvent:
        return bst14_event(v, 2000, 40, 500)

    tiered = calibrate_noise_multiplier(sampled, 1.0, 1e-5, subsampled=True)
    assert tiered == pytest.approx(calibrate_noise_multiplier(sampled, 1.0, 1e-5), rel=2e-3)
    assert event_epsilon(sampled(tiered), 1e-5) <= 1.0

    # small ε needs orders above 64 (α − 1 ≈ 2 log(1/δ)/ε): the full grid is searched then
    def composed(v: float) -> dp_event.DpEvent:
        return scs13_event(v, 3)

    small = calibrate_noise_multiplier(composed, 0.1, 1e-5, subsampled=True)
    assert small == pytest.approx(calibrate_noise_multiplier(composed, 0.1, 1e-5), rel=2e-3)
    # huge ε: a valid, tiny multiplier instead of a bracketing failure
    huge = calibrate_noise_multiplier(composed, 1e9, 1e-5)
    assert 0 < huge < 1e-3 and event_epsilon(composed(huge), 1e-5) <= 1e9


def test_plan_and_charge_work_at_large_n() -> None:
    """Calibration and the ledger's RDP curve at n = 50 000 (speed is measured in bench/)."""
    plan = _bst(LogisticLoss(l2=1e-4), 50_000, 20, 1.0, 1e-5)
    curve = rdp_curve(plan.event)
    assert plan.total_steps == 10_000
    assert all(math.isfinite(v) for v in curve[:12])
    plan = _scs(LogisticLoss(l2=1e-4), 50_000, 20, 1.0, 1e-5, passes=10)
    rdp_curve(plan.event)


def _linear_one_batch(n: int, d: int) -> tuple[FloatArray, FloatArray, FloatArray]:
    rng = np.random.default_rng(1)
    X, y = _unit_rows(rng, n, d), _labels(rng, n)
    return X, y, -(y[:, None] * X).mean(axis=0)  # the (w-independent) full-batch gradient


@pytest.mark.parametrize("name", ["scs13", "bst14"])
def test_drawn_noise_matches_plan(name: str) -> None:
    """Linear loss, one batch of all rows per step, no projection in reach: w_T + gΣη_t is
    exactly −Σ η_t z_t ~ N(0, σ² Σ η_t² I)."""
    n, d, steps = 6, 40, 3
    loss = LinearLoss()
    X, y, g = _linear_one_batch(n, d)
    kw: dict[str, Any] = {"mode": "convex", "batch_size": n, "radius": 1e9, "step_size": 0.5}
    plan = (
        _scs(loss, n, d, 0.7, 1e-5, passes=steps, **kw)
        if name == "scs13"
        else _bst(loss, n, d, 0.7, 1e-5, iterations=steps, **kw)
    )
    etas = np.array([0.5 / math.sqrt(t) for t in range(1, steps + 1)])
    fit = SCS.fit if name == "scs13" else BST.fit
    residual = np.array(
        [
            fit(plan, loss, X, y, np.random.default_rng(s), _noop) + g * etas.sum()
            for s in range(300)
        ]
    )
    expected_sd = plan.noise_scale * math.sqrt(float(etas @ etas))
    assert residual.std() == pytest.approx(expected_sd, rel=0.02)
    assert abs(residual.mean()) < 4 * expected_sd / math.sqrt(residual.size)


def test_scs13_pure_noise_is_the_discrete_laplace() -> None:
    n, d = 6, 30
    loss = LinearLoss()
    X, y, g = _linear_one_batch(n, d)
    plan = _scs(loss, n, d, 0.5, 0.0, mode="convex", batch_size=n, radius=1e9, step_size=1.0)
    noise = np.array(
        [-SCS.fit(plan, loss, X, y, np.random.default_rng(s), _noop) - g for s in range(400)]
    )
    # "norm_gamma" plans now draw the exact discrete Laplace at the ℓ1 sensitivity (on a grid
    # g ≪ the scale: ≈ continuous Laplace of scale g·b per coordinate)
    rel = laplace_release(d, plan.sensitivity / plan.noise_scale, plan.sensitivity)
    flat = noise.reshape(-1)
    assert stats.kstest(flat, stats.laplace(scale=rel.noise_scale).cdf).pvalue > 1e-3
    assert stats.kstest(flat, stats.laplace(scale=1.1 * rel.noise_scale).cdf).pvalue < 1e-3


# --- steps, plans, infeasible specs -----------------------------------------------------------


def test_step_defaults_and_mode_choice() -> None:
    # convex: c = 2R/G with G² = (L + μR)² + E‖z‖²
    plan = _bst(LogisticLoss(), 5000, 5, iterations=1000)
    hp = plan.hyperparameters
    g = math.sqrt(1 + 5 * plan.noise_scale**2)
    assert hp["mode"] == "convex" and hp["radius"] == 10.0
    assert hp["schedule"] == {"kind": "inverse_sqrt", "scale": pytest.approx(20 / g)}
    # strongly convex: 1/(μt), R = L/μ; chosen automatically when its bound is smaller
    strong = _scs(LogisticLoss(l2=0.5), 5000, 5, passes=5)
    assert strong.hyperparameters["mode"] == "strongly_convex"
    assert strong.hyperparameters["radius"] == pytest.approx(2.0)
    schedule = schedule_from_json(strong.hyperparameters["schedule"])
    assert isinstance(schedule, StepSchedule)
    assert [schedule(t) for t in (1, 2, 10)] == pytest.approx([2.0, 1.0, 0.2])
    assert _scs(LogisticLoss(l2=1e-4), 5000, 5).hyperparameters["mode"] == "convex"
    assert _scs(LogisticLoss(l2=0.5), 5000, 5, step_size=1.0).hyperparameters["mode"] == "convex"
    direct = baseline_steps(
        mode=None, loss=LogisticLoss(l2=0.5), radius=None, step_size=None, second_moment=1.0,
        steps=100,
    )  # fmt: skip
    assert isinstance(direct.schedule, StepSchedule) and direct.radius == 2.0
    # BST14's default T = (n/b)², capped
    assert _bst(LogisticLoss(), 500, 5).total_steps == 100
    assert _bst(LogisticLoss(), 5000, 5, max_iterations=700).total_steps == 700
    assert _scs(LogisticLoss(), 103, 5, passes=2).total_steps == 4


@pytest.mark.parametrize("name", ["scs13", "bst14"])
def test_plan_json_round_trip_progress_and_cancel(name: str) -> None:
    n, d = 60, 3
    rng = np.random.default_rng(2)
    X, y = _unit_rows(rng, n, d), _labels(rng, n)
    loss = HuberSVMLoss(l2=0.02)
    plan = (
        _scs(loss, n, d, passes=2, batch_size=7)
        if name == "scs13"
        else _bst(loss, n, d, iterations=30, batch_size=7)
    )
    fit = SCS.fit if name == "scs13" else BST.fit
    rebuilt = plan_from_json(json.loads(json.dumps(plan_to_json(plan))))
    assert rebuilt.hyperparameters == plan.hyperparameters
    assert rebuilt.event == plan.event
    steps: list[int] = []
    w1 = fit(rebuilt, loss, X, y, np.random.default_rng(1), steps.append)
    w2 = fit(plan, loss, X, y, np.random.default_rng(1), _noop)
    np.testing.assert_array_equal(w1, w2)
    assert steps == list(range(1, plan.total_steps + 1))
    assert np.linalg.norm(w1) <= plan.hyperparameters["radius"] * (1 + 1e-12)

    def cancel(step: int) -> None:
        if step == 2:
            raise JobCancelled("job")

    with pytest.raises(JobCancelled):
        fit(plan, loss, X, y, np.random.default_rng(1), cancel)
    with pytest.raises(ValueError, match="sensitivity"):
        fit(dataclasses.replace(plan, sensitivity=plan.sensitivity / 2), loss, X, y, rng, _noop)
    with pytest.raises(ValueError, match="‖x‖"):
        fit(plan, loss, 2 * X, y, rng, _noop)


@pytest.mark.parametrize("name", ["scs13", "bst14"])
def test_infeasible_specs_name_the_field(name: str) -> None:
    opt: Any = SCS if name == "scs13" else BST
    params_cls: type[BaseModel] = NoisySGDSCS13Params if name == "scs13" else NoisySGDBST14Params

    def params(**kw: Any) -> BaseModel:
        return params_cls.model_validate(kw)

    loss = LogisticLoss(l2=0.1)
    target = PrivacyTarget(1.0, 1e-5)
    cases: list[tuple[BaseModel, LinearModelLoss, PrivacyTarget, str]] = [
        (params(), SigmoidLoss(l2=0.1), target, "model"),
        (params(), LogisticLoss(l2=0.1, l1=0.01), target, "model"),
        (params(mode="strongly_convex"), LogisticLoss(l2=0.0), target, "model"),
        (params(mode="strongly_convex", step_size=1.0), loss, target, "optimizer.params.step_size"),
        (params(batch_size=11), loss, target, "optimizer.params.batch_size"),
        (params(), loss, PrivacyTarget(0.0, 1e-5), "privacy.epsilon"),
        (params(), loss, PrivacyTarget(math.inf, 1e-5), "privacy.epsilon"),
        (params(), loss, PrivacyTarget(1.0, 1.0), "privacy.delta"),
        (params(), loss, PrivacyTarget(1.0, -0.1), "privacy.delta"),
    ]
    if name == "bst14":
        cases.append((params(), loss, PrivacyTarget(1.0, 0.0), "privacy.delta"))
    else:
        cases.append((params(), loss, PrivacyTarget(800.0, 0.0), "privacy.epsilon"))
    for case_params, case_loss, case_target, fld in cases:
        with pytest.raises(InfeasibleSpec) as info:
            opt.plan(case_params, case_loss, 10, 2, case_target)
        assert info.value.field == fld
        assert info.value.message


@pytest.mark.parametrize(
    ("cls", "payload"),
    [
        (NoisySGDSCS13Params, {"passes": 0}),
        (NoisySGDSCS13Params, {"iterations": 10}),
        (NoisySGDSCS13Params, {"mode": "sgd"}),
        (NoisySGDBST14Params, {"iterations": 0}),
        (NoisySGDBST14Params, {"iterations": SAMPLED_STEPS_CAP + 1}),
        (NoisySGDBST14Params, {"passes": 1}),
        (NoisySGDBST14Params, {"radius": 0.0}),
        (NoisySGDBST14Params, {"step_size": -1.0}),
        (NoisySGDBST14Params, {"batch_size": 0}),
    ],
)
def test_params_validation(cls: type[BaseModel], payload: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        cls.model_validate(payload)


def test_catalog_entries() -> None:
    assert isinstance(get_optimizer("noisy_sgd_scs13"), NoisySGDSCS13)
    assert isinstance(get_optimizer("noisy_sgd_bst14"), NoisySGDBST14)
    entries = {e["name"]: e for e in catalog()}
    json.dumps(entries)
    assert "Song" in entries["noisy_sgd_scs13"]["reference"]
    assert "Bassily" in entries["noisy_sgd_bst14"]["reference"]
    for cls in (NoisySGDSCS13Params, NoisySGDBST14Params):
        schema = cls.model_json_schema()
        assert schema["additionalProperties"] is False
        assert all(prop["description"] for prop in schema["properties"].values())


# --- utility ------------------------------------------------------------------------------------


def _separable(rng: np.random.Generator, n: int, d: int) -> tuple[FloatArray, FloatArray]:
    Z = rng.uniform(-1, 1, size=(4 * n, d - 1))
    score = Z @ np.linspace(1.0, -0.5, d - 1) + 0.4
    keep = np.abs(score) > 0.1
    Z, score = Z[keep][:n], score[keep][:n]
    X = np.hstack([Z, np.ones((n, 1))]) / math.sqrt(d)
    return X, np.where(score > 0, 1.0, -1.0)


def test_huge_epsilon_reaches_the_optimum() -> None:
    rng = np.random.default_rng(12)
    n, d, mu = 500, 5, 0.01
    X, y = _separable(rng, n, d)
    y[rng.random(n) < 0.1] *= -1
    sk = LogisticRegression(C=1 / (n * mu), fit_intercept=False, tol=1e-12, max_iter=10_000)
    coef = sk.fit(X, y).coef_[0]
    loss = LogisticLoss(l2=mu)
    scs = _scs(loss, n, d, 1e9, 1e-5, mode="strongly_convex", passes=200)
    w = SCS.fit(scs, loss, X, y, np.random.default_rng(13), _noop)
    assert np.linalg.norm(w - coef) / np.linalg.norm(coef) < 1e-3
    bst = _bst(loss, n, d, 1e9, 1e-5, mode="strongly_convex", iterations=3000)
    w = BST.fit(bst, loss, X, y, np.random.default_rng(13), _noop)
    assert np.linalg.norm(w - coef) / np.linalg.norm(coef) < 3e-2


@pytest.mark.parametrize(
    ("name", "mu", "delta", "seeds"),
    [("scs13", 0.0, 1e-5, 5), ("scs13", 0.01, 0.0, 5), ("bst14", 0.0, 1e-5, 2),
     ("bst14", 0.01, 1e-5, 2)],
)  # fmt: skip
def test_moderate_epsilon_beats_majority(name: str, mu: float, delta: float, seeds: int) -> None:
    rng = np.random.default_rng(14)
    n, d = 5000, 5
    X, y = _separable(rng, n, d)
    majority = max(np.mean(y == 1), np.mean(y == -1))
    loss = LogisticLoss(l2=mu)
    plan = _scs(loss, n, d, 1.0, delta) if name == "scs13" else _bst(loss, n, d, 1.0, delta)
    fit = SCS.fit if name == "scs13" else BST.fit
    accuracies = [
        float(np.mean(np.sign(X @ fit(plan, loss, X, y, np.random.default_rng(s), _noop)) == y))
        for s in range(seeds)
    ]
    assert np.mean(accuracies) > majority + 0.1
    assert min(accuracies) > majority


# --- empirical audits ---------------------------------------------------------------------------


def _clopper_pearson(k: int, trials: int, alpha: float) -> tuple[float, float]:
    lo = 0.0 if k == 0 else float(stats.beta.ppf(alpha, k, trials - k + 1))
    hi = 1.0 if k == trials else float(stats.beta.ppf(1 - alpha, k + 1, trials - k))
    return lo, hi


def _epsilon_lower_bound(
    out_s: FloatArray, out_s2: FloatArray, thresholds: list[float], delta: float
) -> float:
    """95% Clopper–Pearson lower bound on ε from threshold tests fixed in advance (Bonferroni)."""
    runs = out_s.size
    alpha = 0.05 / (2 * len(thresholds))
    best = 0.0
    for t in thresholds:
        fp, tp = int(np.sum(out_s > t)), int(np.sum(out_s2 > t))
        fpr_lo, fpr_hi = _clopper_pearson(fp, runs, alpha)
        tpr_lo, tpr_hi = _clopper_pearson(tp, runs, alpha)
        if tpr_lo - delta > 0 and fpr_hi > 0:
            best = max(best, math.log((tpr_lo - delta) / fpr_hi))
        if (1 - fpr_lo) - delta > 0 and (1 - tpr_lo) > 0:
            best = max(best, math.log(((1 - fpr_lo) - delta) / (1 - tpr_lo)))
    return best


def _audit(name: str, plan: ReleasePlan, delta: float, runs: int, seed: int) -> float:
    """One noisy step of the linear loss on a pair whose only non-zero row is ±e1: w_1 · e1
    is −η₁(±1/b + z) when the row is in the batch (always for SCS13 with b = n, with
    probability q = b/n for BST14) and −η₁z otherwise."""
    n, d = (4, 2) if name == "scs13" else (8, 2)
    loss = LinearLoss()
    X = np.zeros((n, d))
    y = np.ones(n)
    X[0, 0] = 1.0
    X2 = X.copy()
    X2[0, 0] = -1.0
    fit = SCS.fit if name == "scs13" else BST.fit
    rng = np.random.default_rng(seed)
    # −w_1·e1 = η₁(g·e1 + z): mean −η₁/b on S, +η₁/b on S′ (when the row is sampled)
    out_s = np.array([-fit(plan, loss, X, y, rng, _noop)[0] for _ in range(runs)])
    out_s2 = np.array([-fit(plan, loss, X2, y, rng, _noop)[0] for _ in range(runs)])
    eta = schedule_from_json(plan.hyperparameters["schedule"])(1)
    scale = eta * plan.noise_scale
    thresholds = [k * scale for k in (0.5, 1.0, 1.5, 2.0, 2.5)]
    return _epsilon_lower_bound(out_s, out_s2, thresholds, delta)


@pytest.mark.parametrize(("name", "delta"), [("scs13", 1e-5), ("scs13", 0.0), ("bst14", 1e-5)])
def test_empirical_audit_below_claimed_epsilon(name: str, delta: float) -> None:
    kw: dict[str, Any] = {"mode": "convex", "radius": 1e9, "step_size": 1.0}
    plan = (
        _scs(LinearLoss(), 4, 2, 1.0, delta, batch_size=4, **kw)
        if name == "scs13"
        else _bst(LinearLoss(), 8, 2, 1.0, delta, batch_size=4, iterations=1, **kw)
    )
    assert _audit(name, plan, delta, runs=2500, seed=21) < 1.0
    # the audit has power: with the noise cut 6-fold it certifies a violation of the claim
    broken = dataclasses.replace(plan, noise_scale=plan.noise_scale / 6)
    assert _audit(name, broken, delta, runs=2500, seed=22) > 1.0


def test_schedules_round_trip() -> None:
    for schedule in (
        InverseSqrtSchedule(3.0),
        StepSchedule.constant(0.5, 0.1),
        StepSchedule.capped_inverse_t(math.inf, 0.2),
        StepSchedule.capped_inverse_t(2.0, 0.2),
    ):
        rebuilt = schedule_from_json(json.loads(json.dumps(schedule.to_json())))
        assert rebuilt == schedule
        assert [rebuilt(t) for t in range(1, 20)] == [schedule(t) for t in range(1, 20)]
    capped = StepSchedule.capped_inverse_t(2.0, 0.2)
    assert capped.decay_start == 2  # 1/(0.2·t) ≥ 2 exactly for t ≤ 2.5
    assert [capped(t) for t in (1, 2, 3)] == pytest.approx([2.0, 2.0, 1 / 0.6])
