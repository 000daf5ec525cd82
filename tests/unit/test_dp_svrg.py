"""dp_svrg and dp_svrg_pp (Wang, Ye & Xu 2017, Alg. 1–2): schedules, the composed event,
snapshot and inner-step sensitivities, calibration, utility, audits."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
from dp_accounting import dp_event
from pydantic import ValidationError
from sklearn.linear_model import LogisticRegression

from service.ledger.accounting import ORDERS, rdp_curve
from service.models.base import FloatArray
from service.models.logistic import LogisticLoss
from service.optimizers.dp_svrg import DPSVRG, DPSVRGParams
from service.optimizers.dp_svrg_pp import DPSVRGPlusPlus, DPSVRGPlusPlusParams
from service.optimizers.kits.base import InfeasibleSpec, JobCancelled, PrivacyTarget, ReleasePlan
from service.optimizers.kits.gradient_kit import QueryRecord, full_gradient_query
from service.optimizers.kits.planning import plan_from_json, plan_to_json
from service.optimizers.kits.registry import catalog
from service.optimizers.kits.svrg_common import batch_difference_query, noisy_svrg, svrg_contraction
from service.privacy.calibration import event_epsilon
from tests.support.nonconvex_loss import (
    LinearLoss,
    LogCoshLoss,
    SigmoidLoss,
    audit_pair,
    epsilon_lower_bound,
    query_gaps,
)

SVRG, PP = DPSVRG(), DPSVRGPlusPlus()
OPTS = {"dp_svrg": SVRG, "dp_svrg_pp": PP}
PARAMS = {"dp_svrg": DPSVRGParams, "dp_svrg_pp": DPSVRGPlusPlusParams}


def _plan(
    name: str, loss: object, n: int, d: int, eps: float = 1.0, delta: float = 1e-5, **kw: object
) -> ReleasePlan:
    params = PARAMS[name].model_validate(kw)
    return OPTS[name].plan(params, loss, n, d, PrivacyTarget(eps, delta))  # type: ignore[arg-type]


def _noop(_: int) -> None:
    return None


def _unit_rows(rng: np.random.Generator, n: int, d: int) -> FloatArray:
    x = rng.normal(size=(n, d))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x * rng.uniform(0.2, 1.0, size=(n, 1))


def _separable(rng: np.random.Generator, n: int, d: int) -> tuple[FloatArray, FloatArray]:
    Z = rng.uniform(-1, 1, size=(4 * n, d - 1))
    score = Z @ np.linspace(1.0, -0.5, d - 1) + 0.4
    keep = np.abs(score) > 0.1
    Z, score = Z[keep][:n], score[keep][:n]
    X = np.hstack([Z, np.ones((n, 1))]) / math.sqrt(d)
    return X, np.where(score > 0, 1.0, -1.0)


def _run(
    name: str, loss: object, X: FloatArray, y: FloatArray, plan: ReleasePlan, noise: bool, seed: int
) -> tuple[FloatArray, list[QueryRecord]]:
    trace: list[QueryRecord] = []
    hp = plan.hyperparameters
    w = noisy_svrg(
        loss,  # type: ignore[arg-type]
        X,
        y,
        epoch_lengths=hp["epoch_lengths"],
        batch_size=hp["batch_size"],
        step_size=hp["step_size"],
        noise_std=plan.noise_scale if noise else 0.0,
        sensitivity=plan.sensitivity,
        snapshot_sensitivity=plan.hyperparameters["snapshot_sensitivity"],
        snapshot_stds=hp["snapshot_noise_scales"] if noise else [0.0] * hp["epochs"],
        continue_from_last=name == "dp_svrg_pp",
        rng=np.random.default_rng(seed),
        trace=trace,
    )
    return w, trace


# --- schedules --------------------------------------------------------------------------------


def test_dp_svrg_default_schedule() -> None:
    n, d, mu, eps, delta = 5000, 5, 0.01, 1.0, 1e-5
    plan = _plan("dp_svrg", LogisticLoss(l2=mu), n, d, eps, delta)
    hp = plan.hyperparameters
    bf = 0.25 + mu
    assert hp["batch_size"] == 64
    assert hp["step_size"] == pytest.approx(1 / (2 * bf))
    m, eta = hp["inner_steps"], hp["step_size"]
    # m is the shortest epoch with mini-batch Prox-SVRG contraction ρ ≤ 1/2
    assert svrg_contraction(mu, bf, eta, m, 64) <= 0.5 < svrg_contraction(mu, bf, eta, m - 1, 64)
    rho = svrg_contraction(mu, bf, eta, m, 64)
    assert hp["contraction"] == pytest.approx(rho)
    s = math.ceil(math.log(mu * n**2 * eps**2 / (d * math.log(1 / delta))) / math.log(1 / rho))
    assert hp["epochs"] == s and hp["epoch_lengths"] == [m] * s
    assert plan.total_steps == s * m
    # small μ: m capped, S capped by the total-steps cap
    plan = _plan("dp_svrg", LogisticLoss(l2=1e-4), n, d, eps, delta)
    assert plan.hyperparameters["inner_steps"] == 2000
    assert plan.total_steps <= 20_000
    explicit = _plan("dp_svrg", LogisticLoss(l2=0.1), 100, 3, epochs=3, inner_steps=7, batch_size=5)
    assert explicit.hyperparameters["epoch_lengths"] == [7, 7, 7]


def test_dp_svrg_pp_default_schedule() -> None:
    n, d, eps, delta = 5000, 5, 1.0, 1e-5
    plan = _plan("dp_svrg_pp", LogisticLoss(), n, d, eps, delta)
    hp = plan.hyperparameters
    assert hp["step_size"] == pytest.approx(2.0)  # min(1/(2β), b/(7β)), β = 1/4
    m0 = math.ceil(n / (4 * 64))
    assert hp["initial_epoch_length"] == m0
    k_star = 10 * n * eps / (4 * 2.0 * math.sqrt(d * math.log(1 / delta)))
    s = hp["epochs"]
    assert m0 * (2 ** (s + 1) - 2) >= k_star > m0 * (2**s - 2)
    assert hp["epoch_lengths"] == [m0 * 2**k for k in range(1, s + 1)]
    assert plan.total_steps == sum(hp["epoch_lengths"])
    capped = _plan("dp_svrg_pp", LogisticLoss(), n, d, 1e6, delta, max_total_steps=1000)
    assert capped.total_steps <= 1000
    assert _plan("dp_svrg_pp", LinearLoss(), 50, 2, step_size=0.1).total_steps >= 2


# --- the composed event and its calibration ---------------------------------------------------


@pytest.mark.parametrize("name", ["dp_svrg", "dp_svrg_pp"])
def test_event_structure_and_calibration(name: str) -> None:
    n, d, b = 2000, 4, 32
    kw: dict[str, object] = {"batch_size": b, "epochs": 4, "snapshot_noise_ratio": 0.7}
    if name == "dp_svrg":
        kw["inner_steps"] = 50
    else:
        kw["initial_epoch_length"] = 10
    plan = _plan(name, LogisticLoss(l2=0.01), n, d, 1.0, 1e-6, **kw)
    hp = plan.hyperparameters
    lengths = hp["epoch_lengths"]
    snapshots, inner = plan.event.events  # type: ignore[attr-defined]
    assert isinstance(inner, dp_event.SelfComposedDpEvent) and inner.count == sum(lengths)
    sampled = inner.event
    assert isinstance(sampled, dp_event.SampledWithoutReplacementDpEvent)
    assert (sampled.source_dataset_size, sampled.sample_size) == (n, b)
    z = sampled.event.noise_multiplier
    assert plan.sensitivity == pytest.approx(4 / b)  # 4L/b
    assert plan.noise_scale == pytest.approx(z * 4 / b, rel=1e-12)
    assert hp["snapshot_sensitivity"] == pytest.approx(2 / n)  # 2L/n
    # σ_s = κσ/√m_s and z_s = σ_s/(2L/n)
    expected_stds = [0.7 * plan.noise_scale / math.sqrt(m) for m in lengths]
    np.testing.assert_allclose(hp["snapshot_noise_scales"], expected_stds, rtol=1e-12)
    if name == "dp_svrg":
        assert isinstance(snapshots, dp_event.SelfComposedDpEvent) and snapshots.count == 4
        multipliers = [snapshots.event.noise_multiplier] * 4
    else:
        multipliers = [e.noise_multiplier for e in snapshots.events]
    np.testing.assert_allclose(multipliers, np.array(expected_stds) / (2 / n), rtol=1e-12)
    spent = event_epsilon(plan.event, 1e-6)
    assert 0.99 <= spent <= 1.0
    # the snapshots take a small share of the run's RDP (docstring: 4–6 % at κ = 1)
    share = [s / (s + i) for s, i in zip(rdp_curve(snapshots), rdp_curve(inner), strict=True)]
    assert 0.02 < share[ORDERS.index(8.0)] < 0.2


@pytest.mark.parametrize("name", ["dp_svrg", "dp_svrg_pp"])
def test_plan_and_ledger_curve_work_at_scale(name: str) -> None:
    plan = _plan(name, LogisticLoss(l2=1e-3), 50_000, 30, 1.0, 1e-5)
    curve = rdp_curve(plan.event)
    assert all(math.isfinite(v) for v in curve[:12])


# --- infeasible specs -------------------------------------------------------------------------


def test_infeasible_specs_name_the_field() -> None:
    ok = LogisticLoss(l2=0.1)
    target = PrivacyTarget(1.0, 1e-5)
    cases: list[tuple[str, object, PrivacyTarget, dict[str, object], str]] = [
        ("dp_svrg", LogisticLoss(l2=0.0), target, {}, "model"),
        ("dp_svrg", SigmoidLoss(l2=0.1), target, {}, "model"),
        ("dp_svrg_pp", SigmoidLoss(), target, {}, "model"),
        ("dp_svrg", ok, PrivacyTarget(1.0, 0.0), {}, "privacy.delta"),
        ("dp_svrg_pp", ok, PrivacyTarget(1.0, 0.0), {}, "privacy.delta"),
        ("dp_svrg_pp", ok, PrivacyTarget(0.0, 1e-5), {}, "privacy.epsilon"),
        ("dp_svrg", ok, target, {"batch_size": 101}, "optimizer.params.batch_size"),
        ("dp_svrg_pp", ok, target, {"batch_size": 101}, "optimizer.params.batch_size"),
        ("dp_svrg_pp", LinearLoss(), target, {}, "optimizer.params.step_size"),
        ("dp_svrg_pp", ok, target, {"epochs": 25}, "optimizer.params.epochs"),
        ("dp_svrg", ok, target, {"epochs": 1000, "inner_steps": 1001}, "optimizer.params.epochs"),
    ]
    for name, loss, tgt, kw, field in cases:
        with pytest.raises(InfeasibleSpec) as info:
            OPTS[name].plan(PARAMS[name].model_validate(kw), loss, 100, 3, tgt)  # type: ignore[arg-type]
        assert info.value.field == field
        assert info.value.message
    with pytest.raises(InfeasibleSpec, match="dp_svrg_pp"):
        SVRG.plan(DPSVRGParams(), LogisticLoss(), 100, 3, target)
    # convex losses with l1 (and μ = 0 for ++) are fine
    assert _plan("dp_svrg_pp", LogisticLoss(l1=0.01), 100, 3).total_steps >= 2
    assert _plan("dp_svrg", LogisticLoss(l2=0.01, l1=0.01), 100, 3).total_steps >= 1


@pytest.mark.parametrize("name", ["dp_svrg", "dp_svrg_pp"])
def test_params_validation(name: str) -> None:
    for payload in ({"m": 3}, {"batch_size": 0}, {"epochs": 0}, {"snapshot_noise_ratio": 0.0}):
        with pytest.raises(ValidationError):
            PARAMS[name].model_validate(payload)
    schema = PARAMS[name].model_json_schema()
    assert schema["additionalProperties"] is False
    assert all(prop["description"] for prop in schema["properties"].values())


# --- (a) sensitivities with the noise switched off --------------------------------------------


@pytest.mark.parametrize("name", ["dp_svrg", "dp_svrg_pp"])
@pytest.mark.parametrize("loss_name", ["logistic", "logcosh_l1"])
def test_per_query_sensitivity_on_trajectories(name: str, loss_name: str) -> None:
    if loss_name == "logistic":
        loss: object = LogisticLoss(l2=0.05)
    else:
        loss = LogCoshLoss(l2=0.05, l1=0.01)
    n, d, b = 40, 3, 8
    kw: dict[str, object] = {"batch_size": b, "epochs": 3, "step_size": 0.5}
    kw["inner_steps" if name == "dp_svrg" else "initial_epoch_length"] = 4
    plan = _plan(name, loss, n, d, **kw)
    inner_bound, snap_bound = plan.sensitivity, plan.hyperparameters["snapshot_sensitivity"]
    rng = np.random.default_rng(23)
    first_snapshot: list[float] = []
    for _ in range(3):
        X = _unit_rows(rng, n, d)
        y = rng.choice([-1.0, 1.0], size=n) * (1.0 if loss_name == "logistic" else 3.0)
        j = int(rng.integers(n))
        unit = X[j] / np.linalg.norm(X[j])
        for x_new, y_new in [(-unit, y[j]), (unit, -y[j]), (-X[j], -y[j]), (np.zeros(d), y[j])]:
            X2, y2 = X.copy(), y.copy()
            X2[j], y2[j] = x_new, y_new
            for seed in range(2):
                _, trace = _run(name, loss, X, y, plan, noise=False, seed=seed)
                _, trace2 = _run(name, loss, X2, y2, plan, noise=False, seed=seed)
                assert [r.kind for r in trace] == [r.kind for r in trace2]
                assert all(
                    r.rows is None or np.array_equal(r.rows, r2.rows)
                    for r, r2 in zip(trace, trace2, strict=True)
                )
                gaps = query_gaps(loss, trace, X, y, X2, y2)
                assert max(gaps["snapshot"]) <= snap_bound * (1 + 1e-9)
                assert max(gaps["batch_difference"]) <= inner_bound * (1 + 1e-9)
                inner = [r for r in trace if r.kind == "batch_difference"]
                for record, gap in zip(inner, gaps["batch_difference"], strict=True):
                    if j not in record.rows:  # type: ignore[operator]
                        assert gap == 0.0
                first_snapshot.append(gaps["snapshot"][0])
    if loss_name == "logcosh_l1":  # x vs −unit with |y| = 3 at w̃_0 = 0: tanh(3)(1 + ‖x‖)/n
        assert max(first_snapshot) > 0.9 * snap_bound


def test_inner_bound_is_reachable_and_never_exceeded() -> None:
    """At adversarial points (w, w̃) far apart, two nearly parallel log-cosh rows on opposite
    sides of the hyperplane ⊥ (w − w̃) make the batch difference ≈ 4L/b: the bound 4L/b is
    tight for L-Lipschitz convex losses (so it cannot be halved), and random points stay below."""
    b, d = 5, 3
    loss = LogCoshLoss(l2=0.05)
    bound = 4 * loss.lipschitz / b
    rng = np.random.default_rng(8)
    Xb = _unit_rows(rng, b, d)
    yb = rng.normal(size=b)
    c, s = 0.1, math.sqrt(1 - 0.01)
    w, anchor = np.array([60.0, 0.0, 0.0]), np.array([-60.0, 0.0, 0.0])
    X1, X2 = Xb.copy(), Xb.copy()
    X1[0], X2[0] = (c, s, 0.0), (-c, s, 0.0)
    y1, y2 = yb.copy(), yb.copy()
    y1[0] = y2[0] = 0.0
    gap = np.linalg.norm(
        batch_difference_query(loss, w, anchor, X1, y1)
        - batch_difference_query(loss, w, anchor, X2, y2)
    )
    assert 0.98 * bound < gap <= bound
    # the logistic loss reaches only half of it (its φ' spans (−1, 0)), as the docstring says
    logistic = LogisticLoss(l2=0.05)
    yl = np.ones(b)
    gap_logistic = np.linalg.norm(
        batch_difference_query(logistic, w, anchor, X1, yl)
        - batch_difference_query(logistic, w, anchor, X2, -yl)
    )
    assert gap_logistic <= 0.5 * bound + 1e-12
    worst = 0.0
    for _ in range(300):
        w, anchor = rng.normal(scale=20, size=d), rng.normal(scale=20, size=d)
        X1, X2 = _unit_rows(rng, b, d), None
        X2 = X1.copy()
        X2[0] = _unit_rows(rng, 1, d)[0]
        y1 = rng.normal(scale=3, size=b)
        y2 = y1.copy()
        y2[0] = rng.normal(scale=3)
        gap = np.linalg.norm(
            batch_difference_query(loss, w, anchor, X1, y1)
            - batch_difference_query(loss, w, anchor, X2, y2)
        )
        assert gap <= bound * (1 + 1e-12)
        worst = max(worst, gap)
    assert worst > 0.5 * bound
    # the snapshot query at w̃ with w̃·x = 0: rows x and −x with label −3 are 2 tanh(3)/n apart
    n = 10
    X = _unit_rows(rng, n, d)
    X[0] = (0.0, 0.0, 1.0)
    Xs = X.copy()
    Xs[0] = (0.0, 0.0, -1.0)
    yy = np.full(n, -3.0)
    point = np.array([1.0, -2.0, 0.0])
    gap = np.linalg.norm(
        full_gradient_query(loss, point, X, yy) - full_gradient_query(loss, point, Xs, yy)
    )
    assert gap == pytest.approx(2 * math.tanh(3.0) / n, rel=1e-12)


# --- (b) the drawn noise is the accountant's --------------------------------------------------


@pytest.mark.parametrize("name", ["dp_svrg", "dp_svrg_pp"])
def test_drawn_noise_matches_the_plan(name: str) -> None:
    rng = np.random.default_rng(4)
    n, d = 60, 200
    X, y = _unit_rows(rng, n, d), rng.choice([-1.0, 1.0], size=n)
    loss = LogisticLoss(l2=0.02)
    kw: dict[str, object] = {"batch_size": 10, "epochs": 4}
    kw["inner_steps" if name == "dp_svrg" else "initial_epoch_length"] = 8
    plan = _plan(name, loss, n, d, 0.8, 1e-6, **kw)
    _, trace = _run(name, loss, X, y, plan, noise=True, seed=5)
    inner = np.array([r.noise for r in trace if r.kind == "batch_difference"])
    assert inner.std() == pytest.approx(plan.noise_scale, rel=0.02)
    snaps = [r.noise for r in trace if r.kind == "snapshot"]
    for noise, expected in zip(snaps, plan.hyperparameters["snapshot_noise_scales"], strict=True):
        assert noise.std() == pytest.approx(expected, rel=0.15)
    w_fit = OPTS[name].fit(plan, loss, X, y, np.random.default_rng(5), _noop)
    np.testing.assert_array_equal(w_fit, _run(name, loss, X, y, plan, True, 5)[0])
    rebuilt = plan_from_json(json.loads(json.dumps(plan_to_json(plan))))
    again = OPTS[name].fit(rebuilt, loss, X, y, np.random.default_rng(5), _noop)
    np.testing.assert_array_equal(w_fit, again)


# --- (c) utility ------------------------------------------------------------------------------


def _sklearn(X: FloatArray, y: FloatArray, mu: float, l1: float = 0.0) -> FloatArray:
    n = X.shape[0]
    if l1 == 0.0:
        model = LogisticRegression(C=1 / (n * mu), fit_intercept=False, tol=1e-12, max_iter=10_000)
    else:
        model = LogisticRegression(
            solver="saga",
            penalty="elasticnet",
            l1_ratio=l1 / (l1 + mu),
            C=1 / (n * (l1 + mu)),
            fit_intercept=False,
            tol=1e-12,
            max_iter=100_000,
        )
    out: FloatArray = model.fit(X, y).coef_[0]
    return out


@pytest.mark.parametrize(
    ("name", "l1"), [("dp_svrg", 0.0), ("dp_svrg", 0.005), ("dp_svrg_pp", 0.0)]
)
def test_huge_epsilon_reaches_the_non_private_optimum(name: str, l1: float) -> None:
    rng = np.random.default_rng(12)
    n, d, mu = 300, 5, 0.01
    X, y = _separable(rng, n, d)
    y[rng.random(n) < 0.1] *= -1
    coef = _sklearn(X, y, mu, l1)
    loss = LogisticLoss(l2=mu, l1=l1)
    caps = {"max_epochs": 12} if name == "dp_svrg" else {"max_total_steps": 2000}
    plan = _plan(name, loss, n, d, 1e8, 1e-5, **caps)
    w = OPTS[name].fit(plan, loss, X, y, np.random.default_rng(13), _noop)
    assert np.linalg.norm(w - coef) / np.linalg.norm(coef) < 2e-3
    assert loss.value(w, X, y) - loss.value(coef, X, y) < 1e-6


@pytest.mark.parametrize(
    ("name", "mu", "l1"),
    [("dp_svrg", 0.01, 0.0), ("dp_svrg_pp", 0.0, 0.0), ("dp_svrg_pp", 1e-3, 1e-3)],
)
def test_moderate_epsilon_beats_majority(name: str, mu: float, l1: float) -> None:
    rng = np.random.default_rng(14)
    n, d = 5000, 5
    X, y = _separable(rng, n, d)
    majority = max(np.mean(y == 1), np.mean(y == -1))
    loss = LogisticLoss(l2=mu, l1=l1)
    plan = _plan(name, loss, n, d, 1.0, 1e-5)  # theory defaults
    accuracies = [
        float(
            np.mean(
                np.sign(X @ OPTS[name].fit(plan, loss, X, y, np.random.default_rng(s), _noop)) == y
            )
        )
        for s in range(3)
    ]
    assert np.mean(accuracies) > majority + 0.1
    assert min(accuracies) > majority


# --- (d) empirical audit ----------------------------------------------------------------------


def _audit(name: str, plan: ReleasePlan, loss: object, runs: int, seed: int) -> float:
    """Outputs on the audit pair projected on e1; thresholds from quantiles of a separate pilot
    sample on S' (fixed before the audited runs)."""
    X, X2, y = audit_pair(plan.hyperparameters["n"])
    rng = np.random.default_rng(seed)
    opt = OPTS[name]
    pilot = np.array([opt.fit(plan, loss, X2, y, rng, _noop)[0] for _ in range(200)])
    thresholds = [float(np.quantile(pilot, q)) for q in (0.5, 0.8, 0.95, 0.99)]
    high = np.array([opt.fit(plan, loss, X, y, rng, _noop)[0] for _ in range(runs)])
    low = np.array([opt.fit(plan, loss, X2, y, rng, _noop)[0] for _ in range(runs)])
    return epsilon_lower_bound(low, high, thresholds, 1e-5)


@pytest.mark.parametrize("name", ["dp_svrg", "dp_svrg_pp"])
def test_empirical_audit_below_claimed_epsilon(name: str) -> None:
    loss = LinearLoss(l2=0.2)
    kw: dict[str, object] = {"batch_size": 7, "epochs": 2, "step_size": 1.0}
    kw["inner_steps" if name == "dp_svrg" else "initial_epoch_length"] = (
        2 if name == "dp_svrg" else 1
    )
    plan = _plan(name, loss, 21, 2, 1.0, 1e-5, **kw)
    assert _audit(name, plan, loss, runs=1000, seed=41) < 1.0
    # power: with a linear loss only the snapshots can reveal the row (the batch differences
    # are data-free), so cut all noise 25-fold to see a certified violation
    hp = plan.hyperparameters
    broken = dataclasses.replace(
        plan,
        noise_scale=plan.noise_scale / 25,
        hyperparameters={
            **hp,
            "snapshot_noise_scales": [s / 25 for s in hp["snapshot_noise_scales"]],
        },
    )
    assert _audit(name, broken, loss, runs=1000, seed=42) > 1.0


# --- plumbing ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["dp_svrg", "dp_svrg_pp"])
def test_progress_cancellation_and_checks(name: str) -> None:
    rng = np.random.default_rng(9)
    n, d = 12, 3
    X, y = _unit_rows(rng, n, d), rng.choice([-1.0, 1.0], size=n)
    loss = LogisticLoss(l2=0.1)
    kw: dict[str, object] = {"batch_size": 3, "epochs": 3}
    kw["inner_steps" if name == "dp_svrg" else "initial_epoch_length"] = 2
    plan = _plan(name, loss, n, d, **kw)
    steps: list[int] = []
    OPTS[name].fit(plan, loss, X, y, rng, steps.append)
    assert steps == list(range(1, plan.total_steps + 1))

    def cancel(step: int) -> None:
        if step == 3:
            raise JobCancelled("job")

    with pytest.raises(JobCancelled):
        OPTS[name].fit(plan, loss, X, y, rng, cancel)
    bad = X.copy()
    bad[1] *= 3 / np.linalg.norm(bad[1])
    with pytest.raises(ValueError):
        OPTS[name].fit(plan, loss, bad, y, rng, _noop)
    with pytest.raises(ValueError):
        OPTS[name].fit(plan, loss, X, np.zeros(n), rng, _noop)
    bigger = LogisticLoss(l2=0.1)
    bigger.lipschitz = 3.0
    with pytest.raises(ValueError, match="sensitivity"):
        OPTS[name].fit(plan, bigger, X, y, rng, _noop)
    assert name in {e["name"] for e in catalog()}
