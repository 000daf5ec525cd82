"""The contract every registered optimizer keeps (docs/adding-an-optimizer.md): parametrized over
``service.optimizers.kits.registry``, so a new optimizer is checked the moment it registers.

(a) Plan JSON round trip: ``plan_from_json(json(plan_to_json(plan))) == plan`` — queued jobs are
    re-run from the stored JSON, so the worker must run exactly the plan the ledger charged.
(b) Plan purity: planning reads public inputs only (the signature takes no rows) and is a
    function of them: twice from the same spec gives equal plans, the global NumPy stream is
    not touched, the validated parameters are not mutated.
(c) The plan's sensitivity holds (replace-one neighbours, L2 norm, docs/privacy-model.md):
    - output releases (one Gaussian/norm-gamma draw on the final vector): two noise-free runs
      (``noise_scale = 0``, the same random stream) on neighbouring data end at most
      ``plan.sensitivity`` apart;
    - per-step mechanisms (noise on every step's gradient query; no single output
      sensitivity): the query the plan states a sensitivity for — the mean gradient of a batch
      of ``batch_size`` rows (``n`` for full batches), or SVRG's variance-reduced difference
      ∇ℓ(w) − ∇ℓ(w̃) — moves by at most ``plan.sensitivity`` between neighbouring batches, on
      a near-worst-case pair (two saturated logistic gradients pointing apart) that reaches at
      least a quarter of the bound, so an understated bound fails;
    - centred steps (``dp_agd_centred``): the centred gradient ∇F(w) − κ∇F_data(0) and the
      label term κ∇F_data(0), each within ``plan.sensitivity`` on the saturated pair, which
      reaches 0.9 of it;
    - mechanisms with neither (a data-dependent selection over several fits) are listed with
      the reason and the test file that checks their own composition.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import math
from collections.abc import Callable

import numpy as np
import pytest

from service.models.logistic import LogisticLoss
from service.optimizers.kits.base import PrivacyTarget, ReleasePlan
from service.optimizers.kits.planning import plan_from_json, plan_to_json
from service.optimizers.kits.registry import get_optimizer, optimizer_names

N, D = 200, 4
LOSS = LogisticLoss(l2=0.01)
TARGET = PrivacyTarget(1.0, 1e-5)

# (c): how each optimizer's sensitivity is checked; every registered name must be listed.
OUTPUT_RELEASE = {"bolt_on_psgd", "output_perturbation_gd"}
PER_STEP_MEAN = {
    "auto",  # n·ε = 200 here: auto picks dp_agd_averaged
    "dp_accmd",
    "dp_agd",
    "dp_agd_averaged",
    "dp_gd",
    "noisy_sgd_bst14",
    "noisy_sgd_scs13",
    "private_selection",
    "rrpsgd",
}
PER_STEP_SVRG = {"dp_svrg", "dp_svrg_pp"}
#: The centred gradient A(w) = ∇F(w) − κ∇F_data(0) at each step plus the label term κ∇F_data(0)
#: released once.
PER_STEP_CENTRED = {"dp_agd_centred"}
NOT_CHECKED_HERE = {
    "dp_spiderboost": (
        "per-step queries of two kinds (full gradients and SPIDER differences with a drift "
        "threshold) under one element sensitivity: tests/unit/test_dp_spiderboost.py checks "
        "each kind on noise-free runs"
    ),
    "private_tuning": (
        "a private selection among candidate fits on a held-out part: no single query; "
        "tests/unit/test_private_tuning.py checks the parts' disjointness and the composition"
    ),
}


def _plan(name: str) -> ReleasePlan:
    optimizer = get_optimizer(name)
    return optimizer.plan(optimizer.Params.model_validate({}), LOSS, N, D, TARGET)


def test_every_registered_optimizer_has_a_sensitivity_check() -> None:
    groups = [
        OUTPUT_RELEASE,
        PER_STEP_MEAN,
        PER_STEP_SVRG,
        PER_STEP_CENTRED,
        set(NOT_CHECKED_HERE),
    ]
    listed = set().union(*groups)
    assert sum(len(g) for g in groups) == len(listed), "an optimizer is in two groups"
    assert listed == set(optimizer_names())


@pytest.mark.parametrize("name", optimizer_names())
def test_plan_json_round_trip(name: str) -> None:
    plan = _plan(name)
    stored = json.loads(json.dumps(plan_to_json(plan)))  # as the jobs table keeps it
    loaded = plan_from_json(stored)
    assert loaded == plan
    assert plan_to_json(loaded) == stored


@pytest.mark.parametrize("name", optimizer_names())
def test_plan_is_pure(name: str) -> None:
    optimizer = get_optimizer(name)
    assert list(inspect.signature(optimizer.plan).parameters) == [
        "params",
        "loss",
        "n",
        "d",
        "target",
    ], "plan must see public inputs only"
    params = optimizer.Params.model_validate({})
    before = params.model_dump()
    np.random.seed(1234)
    state = np.random.get_state()[1].copy()
    first = optimizer.plan(params, LOSS, N, D, TARGET)
    second = get_optimizer(name).plan(
        optimizer.Params.model_validate({}), LogisticLoss(l2=0.01), N, D, TARGET
    )
    assert first == second
    assert plan_to_json(first) == plan_to_json(second)
    assert params.model_dump() == before
    assert np.array_equal(np.random.get_state()[1], state), "planning drew from np.random"


# --- (c) sensitivity ---------------------------------------------------------------------------


def _unit_rows(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    rows = rng.normal(size=(n, d))
    return rows / np.linalg.norm(rows, axis=1, keepdims=True) * rng.uniform(0.2, 1.0, (n, 1))


def _neighbours(rng: np.random.Generator) -> list[tuple[np.ndarray, ...]]:
    """Replace-one pairs: random rows with one row replaced (by its negation, its label
    flipped, a zero row), and the orthogonal pair whose two versions pull apart."""
    pairs = []
    for _ in range(2):
        X, y = _unit_rows(rng, N, D), rng.choice([-1.0, 1.0], size=N)
        j = int(rng.integers(N))
        for x_new, y_new in [(-X[j], y[j]), (X[j], -y[j]), (np.zeros(D), -y[j])]:
            X2, y2 = X.copy(), y.copy()
            X2[j], y2[j] = x_new, y_new
            pairs.append((X, y, X2, y2))
    X = np.zeros((N, D))
    X[:, 0] = 1.0
    y = np.ones(N)
    alpha = 0.05
    X2 = X.copy()
    X[0, :2] = (-alpha, math.sqrt(1 - alpha**2))
    X2[0, :2] = (-alpha, -math.sqrt(1 - alpha**2))
    pairs.append((X, y, X2, y.copy()))
    return pairs


@pytest.mark.parametrize("name", sorted(OUTPUT_RELEASE))
def test_noise_free_runs_on_neighbours_stay_within_the_output_sensitivity(name: str) -> None:
    optimizer = get_optimizer(name)
    plan = _plan(name)
    silent = dataclasses.replace(plan, noise_scale=0.0)
    gaps = []
    for X, y, X2, y2 in _neighbours(np.random.default_rng(3)):
        w = optimizer.fit(silent, LOSS, X, y, np.random.default_rng(7), lambda _: None)
        w2 = optimizer.fit(silent, LOSS, X2, y2, np.random.default_rng(7), lambda _: None)
        assert np.all(np.isfinite(w)) and np.all(np.isfinite(w2))
        gaps.append(float(np.linalg.norm(w - w2)))
    assert max(gaps) <= plan.sensitivity * (1 + 1e-9), (max(gaps), plan.sensitivity)
    # The orthogonal pair comes to about Δ/2 (the constructions of
    # tests/unit/test_output_perturbation_gd.py do no better for the logistic loss), so a bound
    # understated by half fails.
    assert max(gaps) >= 0.4 * plan.sensitivity, "the construction is far from the bound"


def _query_gap(query: Callable[[np.ndarray, np.ndarray], np.ndarray], batch: int) -> list[float]:
    """Gaps of ``query(X, y)`` between neighbouring batches of ``batch`` rows: the orthogonal
    pair (shared rows along e1, the differing row (−α, ±√(1−α²)) misclassified on both sides)
    and random rows with one row replaced."""
    rng = np.random.default_rng(11)
    alpha = 0.05
    X = np.zeros((batch, D))
    X[:, 0] = 1.0
    y = np.ones(batch)
    X2 = X.copy()
    X[0, :2] = (-alpha, math.sqrt(1 - alpha**2))
    X2[0, :2] = (-alpha, -math.sqrt(1 - alpha**2))
    pairs = [(X, y, X2, y)]
    for _ in range(5):
        R, r = _unit_rows(rng, batch, D), rng.choice([-1.0, 1.0], size=batch)
        R2 = R.copy()
        R2[0] = -R[0]
        pairs.append((R, r, R2, r))
    return [float(np.linalg.norm(query(A, a) - query(B, b))) for A, a, B, b in pairs]


def _batch(plan: ReleasePlan) -> int:
    return int(plan.hyperparameters.get("batch_size", N))


@pytest.mark.parametrize("name", sorted(PER_STEP_MEAN))
def test_the_per_step_gradient_query_stays_within_the_stated_sensitivity(name: str) -> None:
    plan = _plan(name)
    batch = _batch(plan)
    gaps: list[float] = []
    for w in (400.0 * np.eye(D)[0], np.zeros(D), np.array([3.0, -1.0, 0.5, 2.0])):
        gaps += _query_gap(lambda X, y, w=w: LOSS.gradient(w, X, y), batch)
    assert max(gaps) <= plan.sensitivity * (1 + 1e-9), (max(gaps), plan.sensitivity)
    # At w = 400·e1 both versions of the differing row are misclassified and saturated: their
    # gradients are ≈ −x and −x', ‖x − x'‖/b ≈ 2L/b, the bound itself.
    assert max(gaps) >= 0.9 * plan.sensitivity, "the construction is far from the bound"


@pytest.mark.parametrize("name", sorted(PER_STEP_SVRG))
def test_the_svrg_difference_query_stays_within_the_stated_sensitivity(name: str) -> None:
    plan = _plan(name)
    batch = _batch(plan)
    gaps: list[float] = []
    for w, snapshot in [
        (400.0 * np.eye(D)[0], -400.0 * np.eye(D)[0]),
        (400.0 * np.eye(D)[0], np.zeros(D)),
        (np.array([3.0, -1.0, 0.5, 2.0]), np.array([-2.0, 1.0, 0.0, -1.0])),
    ]:
        gaps += _query_gap(
            lambda X, y, w=w, s=snapshot: LOSS.gradient(w, X, y) - LOSS.gradient(s, X, y),
            batch,
        )
    assert max(gaps) <= plan.sensitivity * (1 + 1e-9), (max(gaps), plan.sensitivity)
    # The saturated pair moves the query by ≈ 2L/b at w (and ≈ 0 at the snapshot w̃ = −w):
    # half of the 4L/b the plan states, so a bound understated by more than half fails.
    assert max(gaps) >= 0.45 * plan.sensitivity, "the construction is far from the bound"


@pytest.mark.parametrize("name", sorted(PER_STEP_CENTRED))
def test_the_centred_queries_stay_within_the_stated_sensitivity(name: str) -> None:
    plan = _plan(name)
    assert plan.mechanism == "anchored_gaussian_per_step"
    kappa = float(plan.hyperparameters["anchor_scale"])
    zero = np.zeros(D)  # F's l2 term vanishes at 0: LOSS.gradient(0) is the data gradient

    def label_term(X: np.ndarray, y: np.ndarray) -> np.ndarray:
        return kappa * LOSS.gradient(zero, X, y)

    steps: list[float] = []
    for w in (400.0 * np.eye(D)[0], np.zeros(D), np.array([3.0, -1.0, 0.5, 2.0])):
        steps += _query_gap(lambda X, y, w=w: LOSS.gradient(w, X, y) - label_term(X, y), N)
    once = _query_gap(label_term, N)
    assert max(steps + once) <= plan.sensitivity * (1 + 1e-9), (steps, once, plan.sensitivity)
    # Saturated at w = 400·e1, the differing row's centred coefficients are ∓C/2 on x and x'
    # pointing apart: ≈ 2r/n, the bound; the label term reaches it at every w.
    assert min(max(steps), max(once)) >= 0.9 * plan.sensitivity, "far from the bound"
    # ... and the whole gradient would not fit: why the split needs its own mechanism.
    whole = _query_gap(lambda X, y: LOSS.gradient(400.0 * np.eye(D)[0], X, y), N)
    assert max(whole) > 1.5 * plan.sensitivity


@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=pytest.mark.skip(reason=why)) for n, why in NOT_CHECKED_HERE.items()],
)
def test_sensitivity_checked_in_the_optimizers_own_tests(name: str) -> None:
    raise AssertionError(f"{name}: {NOT_CHECKED_HERE[name]}")  # skipped with the reason shown


# --- (d) inputs are read-only -------------------------------------------------------------------


@pytest.mark.parametrize("name", optimizer_names())
def test_fits_on_read_only_rows_without_writing_them(name: str) -> None:
    """Workers hand optimizers read-only rows (service/workers/row_cache.py keeps them for the
    next job): an optimizer that wrote into ``X`` or ``y`` would corrupt that job's data, and
    here fails with numpy's "assignment destination is read-only"."""
    rng = np.random.default_rng(11)
    X, y = _unit_rows(rng, N, D), rng.choice([-1.0, 1.0], size=N)
    before = X.copy(), y.copy()
    X.flags.writeable = False
    y.flags.writeable = False
    w = get_optimizer(name).fit(_plan(name), LOSS, X, y, np.random.default_rng(5), lambda _: None)
    assert np.all(np.isfinite(w))
    assert np.array_equal(X, before[0]) and np.array_equal(y, before[1])
