"""dp_spiderboost (Liu & Talwar, Alg. 1–3): plan, per-element and tree sensitivity, calibration,
utility (convex and non-convex), a small empirical audit, and infeasible specs
(docs/privacy-model.md#testing-privacy)."""

from __future__ import annotations

import dataclasses
import json
import math
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np
import pytest
from dp_accounting import dp_event
from pydantic import ValidationError
from scipy import stats
from scipy.special import expit
from sklearn.linear_model import LogisticRegression

from service.ledger.accounting import rdp_curve
from service.models.base import FloatArray
from service.models.logistic import LogisticLoss
from service.optimizers.dp_spiderboost import (
    DPSpiderBoost,
    DPSpiderBoostParams,
    rows_needed,
    solve_alpha,
    theory_alpha,
)
from service.optimizers.kits.base import InfeasibleSpec, JobCancelled, PrivacyTarget, ReleasePlan
from service.optimizers.kits.registry import catalog, get_optimizer, optimizer_names
from service.optimizers.kits.spider_run import (
    SpiderConfig,
    StreamRecord,
    difference_batch_size,
    difference_sensitivity,
    first_sensitivity,
    spiderboost_run,
    stream_element,
)
from service.privacy.gdp import event_mu, gdp_delta, gdp_epsilon
from service.privacy.tree_aggregation import node_sums, tree_depth

OPT = DPSpiderBoost()
SIGMOID_BETA = 1.0 / (6.0 * math.sqrt(3.0))
SIGMOID_PEAK = math.log(2.0 + math.sqrt(3.0))  # margin where |φ''| = β


@dataclass
class SigmoidLoss:
    """Local non-convex test loss ℓ = 1/(1 + exp(y w·x)) (L = 1/4, β = 1/(6√3))."""

    l2: float = 0.0
    name: str = field(default="sigmoid_test", init=False)
    lipschitz: float = field(default=0.25, init=False)
    smoothness: float = field(default=SIGMOID_BETA, init=False)
    convex: bool = field(default=False, init=False)

    def value(self, w: FloatArray, X: FloatArray, y: FloatArray) -> float:
        return float(np.mean(expit(-y * (X @ w)))) + 0.5 * self.l2 * float(w @ w)

    def gradient(self, w: FloatArray, X: FloatArray, y: FloatArray) -> FloatArray:
        s = expit(y * (X @ w))
        out: FloatArray = -(X.T @ (s * (1 - s) * y)) / X.shape[0] + self.l2 * w
        return out

    def predict_proba(self, w: FloatArray, X: FloatArray) -> FloatArray:
        out: FloatArray = expit(X @ w)
        return out


def _params(**kw: object) -> DPSpiderBoostParams:
    return DPSpiderBoostParams.model_validate(kw)


def _plan(loss: object, n: int, d: int, eps: float = 1.0, delta: float = 1e-5, **kw: object):
    return OPT.plan(_params(**kw), loss, n, d, PrivacyTarget(eps, delta))  # type: ignore[arg-type]


def _config(plan: ReleasePlan) -> SpiderConfig:
    return SpiderConfig.from_hyperparameters(plan.hyperparameters)


def _unit_rows(rng: np.random.Generator, n: int, d: int) -> FloatArray:
    x = rng.normal(size=(n, d))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x * rng.uniform(0.2, 1.0, size=(n, 1))


def _labels(rng: np.random.Generator, n: int) -> FloatArray:
    return rng.choice([-1.0, 1.0], size=n)


def _separable(rng: np.random.Generator, n: int, d: int) -> tuple[FloatArray, FloatArray]:
    """Linearly separable data with margin, a constant column, ‖x‖ ≤ 1 and ~72% majority."""
    Z = rng.uniform(-1, 1, size=(4 * n, d - 1))
    score = Z @ np.linspace(1.0, -0.5, d - 1) + 0.4
    keep = np.abs(score) > 0.1
    Z, score = Z[keep][:n], score[keep][:n]
    X = np.hstack([Z, np.ones((n, 1))]) / math.sqrt(d)
    return X, np.where(score > 0, 1.0, -1.0)


def _noop(_: int) -> None:
    return None


# --- plan: defaults, event, calibration -------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "d", "eps"), [(5000, 5, 1.0), (200, 3, 0.5), (50_000, 20, 4.0), (10**6, 100, 0.1)]
)
def test_default_plan_follows_the_stated_formulas(n: int, d: int, eps: float) -> None:
    loss = LogisticLoss()
    plan = _plan(loss, n, d, eps)
    hp = plan.hyperparameters
    cfg = _config(plan)
    big_m, lip = 0.25, 1.0
    z, m, m_alpha = hp["noise_multiplier"], hp["tree_depth"], hp["alpha_depth"]
    assert m == tree_depth(cfg.iterations)
    assert m <= m_alpha <= m + 1  # the fixed point, or the larger of two oscillating depths
    eps_eff = 1 / (2 * z * m_alpha)
    assert hp["effective_epsilon"] == pytest.approx(eps_eff)
    # α solves Lemma 3.9's row count = n (with ε' = 1/(2zm)) …
    assert cfg.alpha == pytest.approx(solve_alpha(n, 1.0, lip, big_m, d, eps_eff), rel=1e-9)
    assert rows_needed(cfg.alpha, 1.0, lip, big_m, d, eps_eff) <= n * (1 + 1e-6)
    assert rows_needed(cfg.alpha * 0.999, 1.0, lip, big_m, d, eps_eff) > n
    # … and is within a constant factor of Lemma 3.10's closed form
    assert 0.2 < cfg.alpha / theory_alpha(1.0, lip, big_m, d, n, eps_eff) < 5
    assert cfg.iterations == min(1000, max(1, math.ceil(4 * big_m / cfg.alpha**2)))
    raw = 2 * lip * z * m_alpha * math.sqrt(d) / cfg.alpha + (lip / cfg.alpha) ** 2
    assert cfg.first_batch == min(math.ceil(raw), n // 2)
    assert cfg.element_sensitivity == pytest.approx(2 * lip / cfg.first_batch)
    assert plan.sensitivity == pytest.approx(cfg.element_sensitivity * math.sqrt(m))
    assert plan.noise_scale == cfg.node_sigma == pytest.approx(z * plan.sensitivity)
    assert cfg.drift_threshold == pytest.approx(
        max(cfg.alpha * math.sqrt(d) / eps_eff, (1.0 * lip * big_m) ** (1 / 3))
    )
    assert cfg.step_size == pytest.approx(1 / big_m)
    assert cfg.difference_factor == 1.0  # convex
    assert 1 <= cfg.escape_interval <= cfg.iterations
    assert plan.total_steps == cfg.iterations
    json.dumps(hp)  # the plan is stored as JSON


def test_more_privacy_or_fewer_rows_means_coarser_alpha() -> None:
    loss = LogisticLoss()
    alphas = [_config(_plan(loss, 5000, 5, eps)).alpha for eps in (0.1, 1.0, 10.0, 1e6)]
    assert alphas == sorted(alphas, reverse=True)
    by_n = [_config(_plan(loss, n, 5)).alpha for n in (1000, 10_000, 100_000)]
    assert by_n == sorted(by_n, reverse=True)


@pytest.mark.parametrize(("eps", "delta"), [(0.1, 1e-6), (1.0, 1e-5), (8.0, 1e-9), (1e9, 1e-5)])
def test_event_is_calibrated_gaussian(eps: float, delta: float) -> None:
    plan = _plan(SigmoidLoss(), 10_000, 4, eps, delta)
    assert plan.mechanism == "gaussian"
    assert isinstance(plan.event, dp_event.GaussianDpEvent)
    z = plan.event.noise_multiplier
    assert z == pytest.approx(plan.noise_scale / plan.sensitivity, rel=1e-12)
    assert z == plan.hyperparameters["noise_multiplier"]
    mu = event_mu(plan.event)  # one Gaussian (★): exactly 1/z-GDP, the μ charged
    assert mu is not None and gdp_delta(eps, mu) <= delta
    assert gdp_epsilon(mu, delta) == pytest.approx(eps, rel=1e-6)
    curve = rdp_curve(plan.event)
    assert all(math.isfinite(v) for v in curve[:-1])
    assert curve[0] == pytest.approx(1.5 / (2 * z * z), rel=1e-12)


def test_plan_and_charge_work_at_large_n() -> None:
    plan = _plan(LogisticLoss(), 50_000, 30, 1.0, 1e-6)
    rdp_curve(plan.event)


def test_explicit_parameters_are_used() -> None:
    plan = _plan(
        SigmoidLoss(l2=0.01),
        1000,
        3,
        alpha=0.2,
        iterations=17,
        first_batch_size=40,
        drift_threshold=2.5,
        hessian_lipschitz=0.125,
        saddle_escape=False,
    )
    cfg = _config(plan)
    assert (cfg.alpha, cfg.iterations, cfg.first_batch, cfg.drift_threshold) == (0.2, 17, 40, 2.5)
    assert cfg.escape_threshold < 0  # escape off
    assert cfg.difference_factor == 2.0  # non-convex
    assert cfg.step_size == pytest.approx(1 / (SIGMOID_BETA + 0.01))
    assert plan.hyperparameters["tree_depth"] == tree_depth(17) == 5
    assert cfg.element_sensitivity == pytest.approx(2 * 0.25 / 40)


# --- per-element sensitivity ------------------------------------------------------------------


def test_batch_rule_keeps_every_element_below_s() -> None:
    rng = np.random.default_rng(0)
    for loss in (LogisticLoss(), SigmoidLoss()):
        cfg = _config(_plan(loss, 20_000, 4))
        for step in np.concatenate([rng.exponential(1.0, 300), [0.0, 1e-9, 1e3, 1e12]]):
            batch = difference_batch_size(cfg, float(step))
            bound = difference_sensitivity(
                cfg.lipschitz, cfg.smoothness, cfg.difference_factor, float(step), batch
            )
            assert bound <= cfg.element_sensitivity
            assert batch >= 1
            privacy_rows = min(cfg.difference_factor * cfg.smoothness * step, 4 * cfg.lipschitz)
            assert math.ceil(privacy_rows / cfg.element_sensitivity - 1e-9) <= batch


def test_first_oracle_sensitivity_is_reached() -> None:
    """O1 differs by at most 2G/b; flipping a unit row's label at w = 0 under the sigmoid loss
    (|φ'(0)| = 1/4 = G) reaches it exactly, so halving 2G/b would fail."""
    rng = np.random.default_rng(1)
    d, b = 4, 25
    for loss in (LogisticLoss(), SigmoidLoss()):
        lip = loss.lipschitz
        for _ in range(200):
            w = rng.normal(size=d) * rng.choice([0.1, 1.0, 30.0])
            X, y = _unit_rows(rng, b, d), _labels(rng, b)
            X2, y2 = X.copy(), y.copy()
            X2[0], y2[0] = _unit_rows(rng, 1, d)[0], rng.choice([-1.0, 1.0])
            gap = np.linalg.norm(
                stream_element(loss, w, None, X, y) - stream_element(loss, w, None, X2, y2)
            )
            assert gap <= first_sensitivity(lip, b) * (1 + 1e-12)
    X, y = _unit_rows(rng, b, d), _labels(rng, b)
    X[0] /= np.linalg.norm(X[0])
    y2 = y.copy()
    y2[0] = -y[0]
    loss = SigmoidLoss()
    gap = np.linalg.norm(
        stream_element(loss, np.zeros(d), None, X, y)
        - stream_element(loss, np.zeros(d), None, X, y2)
    )
    assert gap == pytest.approx(first_sensitivity(0.25, b), rel=1e-12)


def test_difference_oracle_sensitivity_convex_and_not() -> None:
    """O2 differs by ≤ min(cβD, 4G)/b_t: c = 1 for the convex logistic loss (co-coercivity) and
    c = 2 for the sigmoid loss; both factors are approached by explicit constructions."""
    rng = np.random.default_rng(2)
    d, b = 3, 10
    for loss, factor in ((LogisticLoss(), 1.0), (SigmoidLoss(), 2.0)):
        worst = 0.0
        for _ in range(400):
            w_prev = rng.normal(size=d) * rng.choice([0.1, 2.0, 20.0])
            delta = rng.normal(size=d) * rng.choice([1e-3, 0.1, 3.0])
            w = w_prev + delta
            X, y = _unit_rows(rng, b, d), _labels(rng, b)
            X2, y2 = X.copy(), y.copy()
            X2[0], y2[0] = _unit_rows(rng, 1, d)[0], rng.choice([-1.0, 1.0])
            gap = np.linalg.norm(
                stream_element(loss, w, w_prev, X, y) - stream_element(loss, w, w_prev, X2, y2)
            )
            bound = difference_sensitivity(
                loss.lipschitz, loss.smoothness, factor, float(np.linalg.norm(delta)), b
            )
            assert gap <= bound * (1 + 1e-9)
            worst = max(worst, gap / bound)
        assert worst > 0.1
    # convex: a row with full curvature along the step against one with none (ratio → 1)
    u = np.array([1.0, 0.0, 0.0])
    step = 1e-4 * u
    X, y = np.zeros((b, d)), np.ones(b)
    X[:, 1] = 1.0
    X[0] = u
    X2 = X.copy()
    X2[0] = np.array([0.0, 0.0, 1.0])  # orthogonal to the step: no change in its gradient
    loss = LogisticLoss()
    gap = np.linalg.norm(
        stream_element(loss, step, np.zeros(d), X, y)
        - stream_element(loss, step, np.zeros(d), X2, y)
    )
    assert gap / difference_sensitivity(1.0, 0.25, 1.0, 1e-4, b) > 0.99
    # non-convex: the same row with curvature +β (margin +m*) and −β (label flipped)
    sig = SigmoidLoss()
    w_prev = SIGMOID_PEAK * u
    Xs, ys = np.zeros((b, d)), np.ones(b)
    Xs[:, 1] = 1.0
    Xs[0] = u
    ys2 = ys.copy()
    ys2[0] = -1.0
    gap = np.linalg.norm(
        stream_element(sig, w_prev + step, w_prev, Xs, ys)
        - stream_element(sig, w_prev + step, w_prev, Xs, ys2)
    )
    bound2 = difference_sensitivity(0.25, SIGMOID_BETA, 2.0, 1e-4, b)
    assert gap / bound2 > 0.99  # so c = 1 would be violated for a non-convex loss
    assert gap > difference_sensitivity(0.25, SIGMOID_BETA, 1.0, 1e-4, b)


# --- run-level sensitivity: replay each element on the neighbour, same history -----------------


def _replay_gaps(
    loss: object, trace: list[StreamRecord], X2: FloatArray, y2: FloatArray
) -> tuple[list[float], float]:
    """Per-element gaps ‖v_k(S) − v_k(S')‖ at S's history, and the gap of all node sums."""
    gaps: list[float] = []
    streams: dict[int, tuple[list[FloatArray], list[FloatArray]]] = defaultdict(lambda: ([], []))
    for rec in trace:
        other = stream_element(loss, rec.w, rec.w_prev, X2[rec.rows], y2[rec.rows])  # type: ignore[arg-type]
        gaps.append(float(np.linalg.norm(rec.value - other)))
        assert gaps[-1] <= rec.bound * (1 + 1e-9) + 1e-15, (gaps[-1], rec.bound)
        streams[rec.segment][0].append(rec.value)
        streams[rec.segment][1].append(other)
    total = 0.0
    for ours, theirs in streams.values():
        a, b = node_sums(np.array(ours)), node_sums(np.array(theirs))
        total += sum(float(np.sum((a[k] - b[k]) ** 2)) for k in a)
    return gaps, math.sqrt(total)


@pytest.mark.parametrize("loss_name", ["logistic", "sigmoid"])
@pytest.mark.parametrize("noise", [True, False])
def test_replayed_elements_and_nodes_never_exceed_the_plan(loss_name: str, noise: bool) -> None:
    rng = np.random.default_rng(3 + noise)
    loss: object = LogisticLoss(l2=0.01) if loss_name == "logistic" else SigmoidLoss()
    n, d = 600, 3
    plan = _plan(loss, n, d, 2.0, 1e-5, iterations=40, alpha=0.4)
    cfg = _config(plan)
    s = cfg.element_sensitivity
    bound = plan.sensitivity
    fractions: list[float] = []
    for base in range(4):
        X, y = _unit_rows(rng, n, d), _labels(rng, n)
        trace: list[StreamRecord] = []
        spiderboost_run(
            loss,
            X,
            y,
            cfg,
            np.random.default_rng(base),
            trace=trace,  # type: ignore[arg-type]
            node_sigma=None if noise else 0.0,
        )
        used = np.concatenate([r.rows for r in trace])
        assert len(np.unique(used)) == len(used)  # each row at most once
        assert all(r.bound <= s * (1 + 1e-12) for r in trace)
        candidates = [int(rng.integers(n)) for _ in range(6)]
        candidates += [int(trace[0].rows[0]), int(trace[-1].rows[-1])]  # first / last batch
        if len(trace) > 1:
            candidates.append(int(trace[1].rows[0]))  # a difference batch
        for j in candidates:
            rows = [
                (_unit_rows(rng, 1, d)[0], float(rng.choice([-1.0, 1.0]))),
                (X[j] / max(np.linalg.norm(X[j]), 1e-12), -y[j]),  # flipped label, unit row
                (-X[j] / max(np.linalg.norm(X[j]), 1e-12), y[j]),
                (np.zeros(d), y[j]),
            ]
            for x_new, y_new in rows:
                X2, y2 = X.copy(), y.copy()
                X2[j], y2[j] = x_new, y_new
                _, total = _replay_gaps(loss, trace, X2, y2)
                assert total <= bound * (1 + 1e-9)
                fractions.append(total / bound)
    assert max(fractions) > 0.1


def test_tree_sensitivity_is_reached_by_the_first_row() -> None:
    """One segment of 8 elements (m = 4): flipping the label of a unit row of the first batch
    under the sigmoid loss changes O1 by exactly s, and that element is in all m nodes, so the
    node vector moves by exactly Δ_tree = s√m — a test that fails if Δ_tree were halved."""
    n, d = 400, 3
    rng = np.random.default_rng(5)
    loss = SigmoidLoss()
    plan = _plan(
        loss,
        n,
        d,
        1.0,
        1e-5,
        iterations=8,
        alpha=1.0,
        first_batch_size=20,
        drift_threshold=50.0,
        saddle_escape=False,
    )
    cfg = _config(plan)
    assert plan.hyperparameters["tree_depth"] == 4
    X, y = _unit_rows(rng, n, d), _labels(rng, n)
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    trace: list[StreamRecord] = []
    spiderboost_run(loss, X, y, cfg, np.random.default_rng(6), trace=trace, node_sigma=0.0)
    assert len(trace) == 8 and {r.segment for r in trace} == {0}
    assert [r.kind for r in trace] == ["first"] + ["difference"] * 7
    j = int(trace[0].rows[0])
    y2 = y.copy()
    y2[j] = -y[j]
    gaps, total = _replay_gaps(loss, trace, X, y2)
    assert gaps[0] == pytest.approx(cfg.element_sensitivity, rel=1e-9)
    assert total == pytest.approx(plan.sensitivity, rel=1e-6)


# --- calibration through the run --------------------------------------------------------------


def test_fit_draws_the_planned_tree_noise() -> None:
    """Residuals ∇̃_t − ∇_t are the tree noise: N(0, σ²·popcount(position)) per coordinate."""
    n, d = 3000, 50
    rng = np.random.default_rng(7)
    X, y = _unit_rows(rng, n, d), _labels(rng, n)
    loss = LogisticLoss(l2=0.1)
    plan = _plan(loss, n, d, 0.5, 1e-5, iterations=12, first_batch_size=60, saddle_escape=False)
    cfg = _config(plan)
    standardised = []
    for seed in range(10):
        trace: list[StreamRecord] = []
        spiderboost_run(loss, X, y, cfg, np.random.default_rng(seed), trace=trace)
        for rec in trace:
            scale = math.sqrt(bin(rec.position).count("1"))
            standardised.append((rec.noisy - rec.exact) / scale)
    values = np.concatenate(standardised)
    assert values.std() == pytest.approx(plan.noise_scale, rel=0.05)
    assert abs(values.mean()) < 5 * plan.noise_scale / math.sqrt(values.size)
    # fit is exactly the core run with the job's generator
    w_fit = OPT.fit(plan, loss, X, y, np.random.default_rng(99), _noop)
    w_run = spiderboost_run(loss, X, y, cfg, np.random.default_rng(99))
    np.testing.assert_array_equal(w_fit, w_run)
    # a plan rebuilt from its JSON runs identically
    rebuilt = dataclasses.replace(
        plan, hyperparameters=json.loads(json.dumps(plan.hyperparameters))
    )
    np.testing.assert_array_equal(
        OPT.fit(rebuilt, loss, X, y, np.random.default_rng(99), _noop), w_fit
    )


def test_escape_noise_schedule() -> None:
    n, d = 5000, 4
    rng = np.random.default_rng(8)
    X, y = _unit_rows(rng, n, d), _labels(rng, n)  # random labels: gradients are tiny
    loss = LogisticLoss()
    plan = _plan(loss, n, d, 1e6, 1e-5, iterations=60, alpha=0.05, first_batch_size=50)
    cfg = _config(plan)
    trace: list[StreamRecord] = []
    spiderboost_run(loss, X, y, cfg, np.random.default_rng(9), trace=trace)
    escapes = [i for i, r in enumerate(trace) if r.escape is not None]
    assert escapes, "no escape step"
    assert escapes[0] >= 1  # never at t = 0
    assert all(b - a >= cfg.escape_interval for a, b in zip(escapes, escapes[1:], strict=False))
    for i in escapes:
        prev = trace[i - 1]
        direction = prev.noisy if prev.escape is None else prev.noisy + prev.escape
        assert np.linalg.norm(direction) <= cfg.escape_threshold
    noise = np.concatenate([trace[i].escape for i in escapes])  # type: ignore[misc]
    assert noise.std() == pytest.approx(cfg.escape_noise / math.sqrt(d), rel=0.5)


def test_stops_when_rows_run_out_and_reports_all_steps() -> None:
    n, d = 300, 3
    rng = np.random.default_rng(10)
    X, y = _unit_rows(rng, n, d), _labels(rng, n)
    loss = LogisticLoss()
    plan = _plan(loss, n, d, 1.0, 1e-5, iterations=500, first_batch_size=100)
    steps: list[int] = []
    trace: list[StreamRecord] = []
    spiderboost_run(loss, X, y, _config(plan), np.random.default_rng(0), steps.append, trace)
    assert len(trace) < 500
    assert sum(len(r.rows) for r in trace) <= n
    assert steps == list(range(1, 501))

    def cancel_at_3(step: int) -> None:
        if step == 3:
            raise JobCancelled("job")

    with pytest.raises(JobCancelled):
        OPT.fit(plan, loss, X, y, np.random.default_rng(0), cancel_at_3)


def test_fit_checks_its_assumptions() -> None:
    rng = np.random.default_rng(11)
    n, d = 200, 3
    X, y = _unit_rows(rng, n, d), _labels(rng, n)
    loss = LogisticLoss()
    plan = _plan(loss, n, d)
    bad_norm = X.copy()
    bad_norm[3] *= 1.5 / np.linalg.norm(bad_norm[3])
    bad_labels = y.copy()
    bad_labels[0] = 0.0
    for Xb, yb in [(bad_norm, y), (X[:-1], y[:-1]), (X[:, :2], y), (X, bad_labels)]:
        with pytest.raises(ValueError):
            OPT.fit(plan, loss, Xb, yb, rng, _noop)
    for other in (SigmoidLoss(), LogisticLoss(l2=0.5), LogisticLoss(l1=0.1)):
        with pytest.raises(ValueError):
            OPT.fit(plan, other, X, y, rng, _noop)  # type: ignore[arg-type]


# --- utility ----------------------------------------------------------------------------------


def test_huge_epsilon_reaches_the_convex_optimum() -> None:
    rng = np.random.default_rng(12)
    n, d, mu = 20_000, 3, 0.1
    X, y = _separable(rng, n, d)
    y[rng.random(n) < 0.1] *= -1
    sk = LogisticRegression(C=1 / (n * mu), fit_intercept=False, tol=1e-12, max_iter=10_000)
    coef = sk.fit(X, y).coef_[0]
    loss = LogisticLoss(l2=mu)
    plan = _plan(loss, n, d, 1e9, 1e-5, alpha=0.01)
    w = OPT.fit(plan, loss, X, y, np.random.default_rng(13), _noop)
    assert np.linalg.norm(w - coef) / np.linalg.norm(coef) < 0.06
    assert np.linalg.norm(loss.gradient(w, X, y)) < 0.01


def test_huge_epsilon_finds_a_stationary_point_of_the_nonconvex_loss() -> None:
    rng = np.random.default_rng(14)
    n, d = 20_000, 3
    X, y = _separable(rng, n, d)
    y[rng.random(n) < 0.1] *= -1
    loss = SigmoidLoss()
    start = np.linalg.norm(loss.gradient(np.zeros(d), X, y))
    for alpha in (None, 0.01):
        plan = _plan(loss, n, d, 1e9, 1e-5, alpha=alpha)
        w = OPT.fit(plan, loss, X, y, np.random.default_rng(15), _noop)
        assert np.linalg.norm(loss.gradient(w, X, y)) < 0.05 * start
        assert np.mean(np.sign(X @ w) == y) > 0.85


@pytest.mark.parametrize("loss_name", ["logistic", "sigmoid"])
def test_moderate_epsilon_beats_majority(loss_name: str) -> None:
    rng = np.random.default_rng(16)
    n, d = 5000, 5
    X, y = _separable(rng, n, d)
    majority = max(np.mean(y == 1), np.mean(y == -1))
    loss: object = LogisticLoss() if loss_name == "logistic" else SigmoidLoss()
    plan = _plan(loss, n, d, 1.0, 1e-5)  # theory defaults
    accuracies = [
        float(np.mean(np.sign(X @ OPT.fit(plan, loss, X, y, np.random.default_rng(s), _noop)) == y))  # type: ignore[arg-type]
        for s in range(8)
    ]
    assert np.mean(accuracies) > majority + 0.1
    assert min(accuracies) > majority


# --- empirical audit --------------------------------------------------------------------------


def _clopper_pearson(k: int, trials: int, alpha: float) -> tuple[float, float]:
    lo = 0.0 if k == 0 else float(stats.beta.ppf(alpha, k, trials - k + 1))
    hi = 1.0 if k == trials else float(stats.beta.ppf(1 - alpha, k + 1, trials - k))
    return lo, hi


def _audit(plan: ReleasePlan, delta: float, runs: int, seed: int) -> float:
    """S vs S' (one unit row's label flipped) under the sigmoid loss; threshold tests on the
    projection of the released iterate, turned into a 95% lower bound on ε."""
    n, d = plan.hyperparameters["n"], plan.hyperparameters["d"]
    X = np.zeros((n, d))
    X[:, 0] = 1.0
    y = np.ones(n)
    y2 = y.copy()
    y2[0] = -1.0
    loss = SigmoidLoss()
    cfg = _config(plan)
    quiet = [
        spiderboost_run(loss, X, yy, cfg, np.random.default_rng(0), node_sigma=0.0)
        for yy in (y, y2)
    ]
    v = (quiet[1] - quiet[0]) / np.linalg.norm(quiet[1] - quiet[0])
    rng = np.random.default_rng(seed)
    proj = [
        np.array([OPT.fit(plan, loss, X, yy, rng, _noop) @ v for _ in range(runs)])
        for yy in (y, y2)
    ]
    scale = cfg.step_size * plan.noise_scale  # the released iterate's noise
    thresholds = [float(quiet[0] @ v) + k * scale for k in (0.5, 1.0, 1.5, 2.0, 2.5)]
    alpha = 0.05 / (2 * len(thresholds))
    best = 0.0
    for t in thresholds:
        fp, tp = int(np.sum(proj[0] > t)), int(np.sum(proj[1] > t))
        fpr_lo, fpr_hi = _clopper_pearson(fp, runs, alpha)
        tpr_lo, tpr_hi = _clopper_pearson(tp, runs, alpha)
        if tpr_lo - delta > 0 and fpr_hi > 0:
            best = max(best, math.log((tpr_lo - delta) / fpr_hi))
        if (1 - fpr_lo) - delta > 0 and (1 - tpr_lo) > 0:
            best = max(best, math.log(((1 - fpr_lo) - delta) / (1 - tpr_lo)))
    return best


def test_empirical_audit_below_claimed_epsilon() -> None:
    """One step on a single full batch (b = n): the release is −η(O1 + N(0, σ²)), the flipped
    row moves O1 by exactly s = Δ_tree, so this is the worst case of the mechanism."""
    eps, delta, n = 1.0, 1e-5, 50
    plan = OPT.plan(
        _params(iterations=1, first_batch_size=n, alpha=1.0),
        SigmoidLoss(),
        n,
        2,
        PrivacyTarget(eps, delta),
    )
    assert plan.hyperparameters["tree_depth"] == 1
    lower = _audit(plan, delta, runs=2500, seed=17)
    assert lower < eps
    broken = dataclasses.replace(
        plan,
        hyperparameters={**plan.hyperparameters, "node_sigma": plan.noise_scale / 6},
        noise_scale=plan.noise_scale / 6,
    )
    assert _audit(broken, delta, runs=2500, seed=18) > eps


# --- infeasible specs, parameters, registry ---------------------------------------------------


def test_infeasible_specs_name_the_field() -> None:
    loss = LogisticLoss()
    cases: list[tuple[DPSpiderBoostParams, object, PrivacyTarget, str]] = [
        (_params(), loss, PrivacyTarget(1.0, 0.0), "privacy.delta"),
        (_params(), loss, PrivacyTarget(1.0, 1.0), "privacy.delta"),
        (_params(), loss, PrivacyTarget(1.0, -1e-9), "privacy.delta"),
        (_params(), loss, PrivacyTarget(0.0, 1e-5), "privacy.epsilon"),
        (_params(), loss, PrivacyTarget(math.inf, 1e-5), "privacy.epsilon"),
        (_params(), loss, PrivacyTarget(math.nan, 1e-5), "privacy.epsilon"),
        (_params(), LogisticLoss(l1=0.1), PrivacyTarget(1.0, 1e-5), "model"),
        (_params(alpha=1e-3), loss, PrivacyTarget(1.0, 1e-5), "optimizer.params.alpha"),
        (
            _params(first_batch_size=101),
            loss,
            PrivacyTarget(1.0, 1e-5),
            "optimizer.params.first_batch_size",
        ),
    ]
    for params, case_loss, target, field_name in cases:
        with pytest.raises(InfeasibleSpec) as info:
            OPT.plan(params, case_loss, 100, 3, target)  # type: ignore[arg-type]
        assert info.value.field == field_name
        assert info.value.message
    with pytest.raises(InfeasibleSpec, match="delta > 0"):
        OPT.plan(_params(), loss, 100, 3, PrivacyTarget(1.0, 0.0))


@pytest.mark.parametrize(
    "payload",
    [
        {"eta": 1.0},
        {"alpha": 0.0},
        {"alpha": math.inf},
        {"iterations": 0},
        {"iterations": 10**9},
        {"max_iterations": 0},
        {"initial_gap": -1.0},
        {"first_batch_size": 0},
        {"drift_threshold": 0.0},
        {"hessian_lipschitz": -1.0},
    ],
)
def test_params_validation(payload: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        DPSpiderBoostParams.model_validate(payload)


def test_params_schema_and_registry() -> None:
    schema = DPSpiderBoostParams.model_json_schema()
    assert schema["additionalProperties"] is False
    for prop in schema["properties"].values():
        assert prop["description"]
    assert "dp_spiderboost" in optimizer_names()
    assert isinstance(get_optimizer("dp_spiderboost"), DPSpiderBoost)
    (entry,) = [e for e in catalog() if e["name"] == "dp_spiderboost"]
    json.dumps(entry)
    assert "second-order stationary" in entry["guarantee"]
    assert "Liu & Talwar" in entry["reference"]
