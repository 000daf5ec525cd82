"""The joint multinomial (softmax) model: its constants, its sensitivity under every optimizer that
runs it, the refusals, the released model's scoring, and a small empirical audit.

(a) Constants by finite differences and random probes: the gradient matches the value's
    finite differences (clipped and not); ‖∇ℓ‖ ≤ L and ‖∇ℓ(W) − ∇ℓ(W')‖ ≤ β‖W − W'‖ on random
    and adversarial probes, each attained (≥ 0.99 of the bound) where the docstring says;
    the centred split's two bounds (dp_agd_centred) hold and are attained.
(b) Sensitivity on adversarial neighbours (flipped class, antipodal and extreme rows, a row of
    no declared class): the per-row gradient moves by at most 2L (attained), and for every
    optimizer in ``JOINT_OPTIMIZERS`` the query its plan states a sensitivity for (the step's
    mean gradient, or the noise-free output) stays within ``plan.sensitivity``, with a
    construction that reaches a stated fraction of it.
(c) Every other optimizer refuses the model on ``model``; so does a non-categorical label.
(d) An empirical audit of one noisy dp_gd step (Clopper–Pearson lower bound on ε below the
    claim; a plan with a third of the noise is caught).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from service.models.base import fit_labels, objective_gap_bound, parameter_count
from service.models.multinomial import (
    JOINT_OPTIMIZERS,
    MultinomialLoss,
    class_indices,
)
from service.models.registry import build_loss, parse_model_spec
from service.optimizers.kits.base import InfeasibleSpec, PrivacyTarget, ReleasePlan
from service.optimizers.kits.planning import plan_job
from service.optimizers.kits.registry import get_optimizer, optimizer_names
from tests.support.nonconvex_loss import centred_threshold_bound, projected_releases

K, WIDTH, N = 4, 3, 40
TARGET = PrivacyTarget(1.0, 1e-5)


def _rows(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    X = rng.normal(size=(n, d))
    return X / np.linalg.norm(X, axis=1, keepdims=True) * rng.uniform(0.3, 1.0, (n, 1))


def _loss(clip: float | None = None, l2: float = 0.0, classes: int = K) -> MultinomialLoss:
    return MultinomialLoss(l2=l2, classes=classes, gradient_clip=clip)


# --- (a) constants -----------------------------------------------------------------------------


@pytest.mark.parametrize("clip", [None, 0.5, 0.2, 0.8])
def test_gradient_matches_finite_differences(clip: float | None) -> None:
    rng = np.random.default_rng(1)
    loss = _loss(clip, l2=0.3)
    X, y = _rows(rng, 25, WIDTH), rng.integers(-1, K, size=25).astype(float)
    for scale in (0.1, 3.0, 30.0):
        w = rng.normal(size=K * WIDTH) * scale
        h = 1e-6 * max(1.0, scale)
        numeric = np.array(
            [
                (loss.value(w + h * e, X, y) - loss.value(w - h * e, X, y)) / (2 * h)
                for e in np.eye(K * WIDTH)
            ]
        )
        assert np.allclose(loss.gradient(w, X, y), numeric, atol=1e-6 * max(1.0, scale))
        per_row = loss.example_gradients(w, X, y).mean(axis=0) + loss.l2 * w
        assert np.allclose(per_row, loss.gradient(w, X, y), atol=1e-12)


def _saturating(loss: MultinomialLoss, x: np.ndarray, wrong: int, scale: float) -> np.ndarray:
    """W whose scores on x put all mass on class ``wrong``."""
    W = np.zeros((loss.classes, x.size))
    W[wrong] = scale * x / float(x @ x)
    return W.ravel()


@pytest.mark.parametrize("clip", [None, 0.5, 0.2])
def test_lipschitz_bound_holds_and_is_attained(clip: float | None) -> None:
    rng = np.random.default_rng(2)
    loss = _loss(clip)
    norms = []
    for _ in range(300):
        x = _rows(rng, 1, WIDTH)
        w = rng.normal(size=K * WIDTH) * rng.choice([0.1, 3.0, 50.0])
        y = rng.integers(0, K, size=1).astype(float)
        norms.append(float(np.linalg.norm(loss.example_gradients(w, x, y))))
    assert max(norms) <= loss.lipschitz * (1 + 1e-12)
    x = np.eye(WIDTH)[:1]  # ‖x‖ = 1, everything on a wrong class
    worst = loss.example_gradients(_saturating(loss, x[0], 1, 60.0), x, np.array([0.0]))
    assert float(np.linalg.norm(worst)) >= 0.99 * loss.lipschitz
    assert loss.lipschitz == pytest.approx(math.sqrt(2.0) * (clip or 1.0))


@pytest.mark.parametrize("clip", [None, 0.5, 0.2])
def test_smoothness_bound_holds_on_random_probes(clip: float | None) -> None:
    rng = np.random.default_rng(3)
    loss = _loss(clip)
    ratios = []
    for _ in range(400):
        x = _rows(rng, 1, WIDTH)
        y = rng.integers(0, K, size=1).astype(float)
        w = rng.normal(size=K * WIDTH) * rng.choice([0.3, 2.0, 8.0])
        v = w + rng.normal(size=K * WIDTH) * rng.choice([1e-3, 0.1, 1.0])
        moved = np.linalg.norm(loss.example_gradients(w, x, y) - loss.example_gradients(v, x, y))
        ratios.append(float(moved / np.linalg.norm(w - v)))
    assert max(ratios) <= loss.smoothness * (1 + 1e-9)


def test_boehning_half_is_attained_without_clipping() -> None:
    """At p = (1/2, 1/2, 0, …) the Hessian has the eigenvalue 1/2 along (e_0 − e_1) ⊗ x."""
    loss = _loss()
    x = np.eye(WIDTH)[:1]
    W = np.zeros((K, WIDTH))
    W[2:, 0] = -40.0  # classes 2, 3 get no mass; 0 and 1 split it
    direction = np.zeros((K, WIDTH))
    direction[0, 0], direction[1, 0] = 1.0, -1.0
    h = 1e-5 * direction.ravel() / np.linalg.norm(direction)
    w = W.ravel()
    moved = loss.example_gradients(w + h, x, np.array([0.0])) - loss.example_gradients(
        w - h, x, np.array([0.0])
    )
    assert float(np.linalg.norm(moved) / np.linalg.norm(2 * h)) == pytest.approx(0.5, rel=1e-4)
    assert loss.smoothness == 0.5


def test_loss_is_nonnegative_and_log_k_at_zero() -> None:
    rng = np.random.default_rng(4)
    for clip in (None, 0.5):
        loss = _loss(clip, classes=6)
        X, y = _rows(rng, 30, WIDTH), rng.integers(0, 6, size=30).astype(float)
        at_zero = loss.value(np.zeros(6 * WIDTH), X, y)
        if clip is None:
            assert at_zero == pytest.approx(math.log(6))
        else:  # the tangent lies below the logistic loss
            assert 0.0 < at_zero < math.log(6)
        for _ in range(20):
            assert loss.value(rng.normal(size=6 * WIDTH) * 20, X, y) >= 0.0
        assert objective_gap_bound(loss) == pytest.approx(math.log(6))


def test_centred_split_bounds_hold_and_are_attained() -> None:
    """‖c(W) − κc(0)‖ ≤ r and ‖κc(0)‖ ≤ r with r = √(1 − 1/K), c the per-row coefficient."""
    rng = np.random.default_rng(5)
    loss = _loss()
    anchor = loss.coefficient_anchor()
    assert anchor is not None and anchor.scale == 1.0
    x = np.eye(WIDTH)[:1]
    zero = np.zeros(K * WIDTH)
    centred, label = [], []
    for _ in range(200):
        y = rng.integers(-1, K, size=1).astype(float)
        w = rng.normal(size=K * WIDTH) * rng.choice([0.5, 5.0, 80.0])
        c0 = anchor.scale * loss.example_gradients(zero, x, y)
        centred.append(float(np.linalg.norm(loss.example_gradients(w, x, y) - c0)))
        label.append(float(np.linalg.norm(c0)))
    assert max(centred + label) <= anchor.half_width * (1 + 1e-12)
    assert min(max(centred), max(label)) >= 0.99 * anchor.half_width
    assert _loss(0.5).coefficient_anchor() is None  # clipped: dp_agd_centred refuses it


# --- labels -------------------------------------------------------------------------------------


def test_labels_from_the_readers_one_vs_rest_matrix() -> None:
    Y = -np.ones((3, 5))
    Y[0, 1] = Y[2, 0] = Y[1, 4] = 1.0  # rows 2 and 3: no declared class
    assert class_indices(Y).tolist() == [2.0, 0.0, -1.0, -1.0, 1.0]
    loss = _loss(classes=3)
    assert fit_labels(loss, Y).tolist() == [2.0, 0.0, -1.0, -1.0, 1.0]
    assert parameter_count(loss, 7) == 21
    loss.check_labels(np.array([0.0, 2.0, -1.0]))
    for bad in (3.0, 0.5, -2.0):
        with pytest.raises(ValueError, match="class indices") as info:
            loss.check_labels(np.array([0.0, bad]))
        assert str(bad) not in str(info.value)


def test_a_row_of_no_declared_class_contributes_nothing() -> None:
    rng = np.random.default_rng(6)
    loss = _loss(l2=0.0)
    X = _rows(rng, 5, WIDTH)
    y = np.array([0.0, -1.0, 2.0, -1.0, 3.0])
    w = rng.normal(size=K * WIDTH)
    grads = loss.example_gradients(w, X, y)
    assert np.all(grads[[1, 3]] == 0.0)
    for clip in (None, 0.5):
        assert np.all(_loss(clip).example_gradients(w, X, y)[[1, 3]] == 0.0)


# --- (b) sensitivity ----------------------------------------------------------------------------


def _neighbour_pairs(rng: np.random.Generator, n: int) -> list[tuple[np.ndarray, ...]]:
    """Replace-one pairs: random rows with one row's class flipped, its row negated, replaced
    by an extreme (unit) row of another class, or by a row of no declared class; and the
    saturating pair: shared rows along e0, the differing row (−α, ±√(1 − α²), 0…) of class 0 in
    both versions."""
    pairs = []
    for _ in range(2):
        X, y = _rows(rng, n, WIDTH), rng.integers(0, K, size=n).astype(float)
        j = int(rng.integers(n))
        unit = np.zeros(WIDTH)
        unit[-1] = 1.0
        for x_new, y_new in [
            (X[j], float((y[j] + 1) % K)),
            (-X[j], y[j]),
            (unit, float((y[j] + 2) % K)),
            (X[j], -1.0),
        ]:
            X2, y2 = X.copy(), y.copy()
            X2[j], y2[j] = x_new, y_new
            pairs.append((X, y, X2, y2))
    X, X2 = _saturating_rows(n)
    pairs.append((X, np.zeros(n), X2, np.zeros(n)))
    return pairs


def _saturating_rows(n: int) -> tuple[np.ndarray, np.ndarray]:
    alpha = 0.05
    X = np.zeros((n, WIDTH))
    X[:, 0] = 1.0
    X2 = X.copy()
    X[0, :2] = (-alpha, math.sqrt(1 - alpha**2))
    X2[0, :2] = (-alpha, -math.sqrt(1 - alpha**2))
    return X, X2


def _pushed_to_wrong_class() -> np.ndarray:
    """W whose class-1 score is 400·α on both versions of the differing row, 0 on the others:
    both versions put all mass on class 1 while labelled 0, so their gradients are
    (e_1 − e_0) ⊗ x and (e_1 − e_0) ⊗ x', ‖·‖ = 2L·√(1 − α²) apart (times the clip)."""
    W = np.zeros((K, WIDTH))
    W[1, 0] = -400.0
    return W.ravel()


@pytest.mark.parametrize("clip", [None, 0.5])
def test_per_row_gradient_moves_by_at_most_2l_and_reaches_it(clip: float | None) -> None:
    loss = _loss(clip)
    rng = np.random.default_rng(7)
    gaps = []
    for X, y, X2, y2 in _neighbour_pairs(rng, 8):
        for w in (np.zeros(K * WIDTH), rng.normal(size=K * WIDTH) * 5, _pushed_to_wrong_class()):
            moved = loss.example_gradients(w, X, y).sum(0) - loss.example_gradients(w, X2, y2).sum(
                0
            )
            gaps.append(float(np.linalg.norm(moved)))
    assert max(gaps) <= 2 * loss.lipschitz * (1 + 1e-12)
    assert max(gaps) >= 0.99 * 2 * loss.lipschitz


OUTPUT_RELEASES = {"bolt_on_psgd", "output_perturbation_gd"}
PER_STEP = {"dp_gd", "dp_agd", "dp_agd_averaged"}
CENTRED = {"dp_agd_centred"}


def test_every_joint_optimizer_has_a_sensitivity_check_here() -> None:
    assert set(JOINT_OPTIMIZERS) == OUTPUT_RELEASES | PER_STEP | CENTRED


def _joint_plan(name: str, loss: MultinomialLoss, n: int, **params: object) -> ReleasePlan:
    optimizer = get_optimizer(name)
    return optimizer.plan(optimizer.Params.model_validate(params), loss, n, K * WIDTH, TARGET)


@pytest.mark.parametrize("name", sorted(PER_STEP))
@pytest.mark.parametrize("clip", [None, 0.5])
def test_the_step_query_stays_within_the_plan_sensitivity(name: str, clip: float | None) -> None:
    loss = _loss(clip, l2=0.01)
    plan = _joint_plan(name, loss, N)
    rng = np.random.default_rng(8)
    gaps = []
    for X, y, X2, y2 in _neighbour_pairs(rng, N):
        for w in (np.zeros(K * WIDTH), rng.normal(size=K * WIDTH) * 5, _pushed_to_wrong_class()):
            gaps.append(float(np.linalg.norm(loss.gradient(w, X, y) - loss.gradient(w, X2, y2))))
    assert max(gaps) <= plan.sensitivity * (1 + 1e-9), (max(gaps), plan.sensitivity)
    assert max(gaps) >= 0.99 * plan.sensitivity, "the construction is far from the bound"


def test_the_centred_queries_stay_within_the_plan_sensitivity() -> None:
    loss = _loss(l2=0.01)
    plan = _joint_plan("dp_agd_centred", loss, N)
    kappa = float(plan.hyperparameters["anchor_scale"])
    zero = np.zeros(K * WIDTH)
    rng = np.random.default_rng(9)
    steps, once, whole = [], [], []
    for X, y, X2, y2 in _neighbour_pairs(rng, N):
        label, label2 = kappa * loss.gradient(zero, X, y), kappa * loss.gradient(zero, X2, y2)
        once.append(float(np.linalg.norm(label - label2)))
        for w in (rng.normal(size=K * WIDTH) * 5, _pushed_to_wrong_class()):
            a = loss.gradient(w, X, y) - label
            b = loss.gradient(w, X2, y2) - label2
            steps.append(float(np.linalg.norm(a - b)))
            whole.append(float(np.linalg.norm(loss.gradient(w, X, y) - loss.gradient(w, X2, y2))))
    assert max(steps + once) <= plan.sensitivity * (1 + 1e-9)
    assert min(max(steps), max(once)) >= 0.9 * plan.sensitivity
    assert max(whole) > 1.3 * plan.sensitivity  # the split is what makes the smaller Δ hold


@pytest.mark.parametrize("name", sorted(OUTPUT_RELEASES))
@pytest.mark.parametrize("clip", [None, 0.5])
def test_noise_free_outputs_on_neighbours_stay_within_the_plan_sensitivity(
    name: str, clip: float | None
) -> None:
    loss = _loss(clip, l2=0.05)
    plan = _joint_plan(name, loss, N)
    silent = dataclasses.replace(plan, noise_scale=0.0)
    optimizer = get_optimizer(name)
    gaps = []
    for X, y, X2, y2 in _neighbour_pairs(np.random.default_rng(10), N):
        w = optimizer.fit(silent, loss, X, y, np.random.default_rng(3), lambda _: None)
        w2 = optimizer.fit(silent, loss, X2, y2, np.random.default_rng(3), lambda _: None)
        assert w.shape == (K * WIDTH,) and np.all(np.isfinite(w))
        gaps.append(float(np.linalg.norm(w - w2)))
    assert max(gaps) <= plan.sensitivity * (1 + 1e-9), (max(gaps), plan.sensitivity)
    assert max(gaps) >= 0.2 * plan.sensitivity, "the construction is far from the bound"


@pytest.mark.parametrize("name", sorted(JOINT_OPTIMIZERS))
def test_fits_return_k_times_d_parameters_on_read_only_rows(name: str) -> None:
    rng = np.random.default_rng(11)
    loss = _loss(l2=0.01)
    X, y = _rows(rng, N, WIDTH), rng.integers(-1, K, size=N).astype(float)
    X.flags.writeable = False
    y.flags.writeable = False
    plan = _joint_plan(name, loss, N)
    w = get_optimizer(name).fit(plan, loss, X, y, np.random.default_rng(1), lambda _: None)
    assert w.shape == (K * WIDTH,) and np.all(np.isfinite(w))
    with pytest.raises(ValueError):  # a loss over another K: not the plan's shape (or anchor)
        get_optimizer(name).fit(
            plan, _loss(l2=0.01, classes=K + 1), X, y, np.random.default_rng(1), lambda _: None
        )


# --- (c) refusals and planning -------------------------------------------------------------------


MODEL = {"type": "multinomial_logistic_regression", "l2": 0.01}


@pytest.mark.parametrize("name", sorted(set(optimizer_names()) - JOINT_OPTIMIZERS - {"auto"}))
def test_other_optimizers_refuse_the_model_on_model(name: str) -> None:
    with pytest.raises(InfeasibleSpec) as info:
        plan_job(parse_model_spec(MODEL), name, {}, 500, 3, TARGET, classes=K)
    assert info.value.field == "model"


def test_a_binary_label_refuses_the_joint_model_on_model() -> None:
    with pytest.raises(InfeasibleSpec) as info:
        plan_job(parse_model_spec(MODEL), "dp_agd", {}, 500, 3, TARGET, classes=None)
    assert info.value.field == "model"


@pytest.mark.parametrize("name", sorted(JOINT_OPTIMIZERS))
def test_plans_are_over_k_times_d_parameters(name: str) -> None:
    job = plan_job(parse_model_spec(MODEL), name, {}, 5000, 3, TARGET, classes=K)
    assert job.plan.hyperparameters["d"] == K * 4  # 3 features + intercept, K rows
    assert job.loss.classes == K
    assert "one_vs_rest" not in job.plan.hyperparameters
    assert job.plan.sensitivity <= 2 * math.sqrt(2.0) / 5000 * 1e6  # finite, planned


def test_registry_binds_the_label_classes() -> None:
    loss = build_loss(parse_model_spec(MODEL), 7)
    assert isinstance(loss, MultinomialLoss) and loss.classes == 7


# --- (d) empirical audit -----------------------------------------------------------------------


def test_empirical_audit_of_one_noisy_step_below_the_claim() -> None:
    """dp_gd with T = 1 releases −η(∇F(0) + noise): on the saturating pair (w = 0: the
    differing rows' gradients (u − e_0) ⊗ x, (u − e_0) ⊗ x', 0.61 of Δ apart — at w = 0 no
    row's gradient is longer than √(1 − 1/K)) the output's coordinate along their difference
    is the whole signal. ε lower bound (Clopper–Pearson, Bonferroni) below the
    claimed ε; the same test catches a plan with a sixth of the noise."""
    eps, n = 2.0, 20
    loss = _loss(l2=0.01)
    X, X2 = _saturating_rows(n)
    y = np.zeros(n)
    optimizer = get_optimizer("dp_gd")
    params = optimizer.Params.model_validate({"iterations": 1, "step_size": 1.0})
    plan = optimizer.plan(params, loss, n, K * WIDTH, PrivacyTarget(eps, 1e-5))
    # the direction the two versions' first steps differ in: (u − e_0) ⊗ (x − x')
    zero = np.zeros(K * WIDTH)
    direction = loss.gradient(zero, X, y) - loss.gradient(zero, X2, y)
    direction /= np.linalg.norm(direction)

    def bound(p: ReleasePlan, seed: int) -> float:
        low = projected_releases(optimizer, p, loss, X, y, direction, 3000, seed)
        high = projected_releases(optimizer, p, loss, X2, y, direction, 3000, seed + 1)
        return centred_threshold_bound(low, high, 1e-5)

    assert bound(plan, 100) < eps
    # at w = 0 the pair realises 0.61 of Δ, so understated noise shows from about half of it
    broken = dataclasses.replace(plan, noise_scale=plan.noise_scale / 6)
    assert bound(broken, 200) > eps


# --- auto ---------------------------------------------------------------------------------------


def test_auto_fits_a_categorical_label_jointly_and_records_it() -> None:
    from service.cli_http.jobs import _auto_text
    from service.optimizers.auto import CLIP, resolve

    choice = resolve(parse_model_spec({"type": "logistic_regression"}), 1257, 64, TARGET, 10)
    assert choice.model["type"] == "multinomial_logistic_regression"
    assert choice.model["gradient_clip"] == CLIP
    assert choice.optimizer in JOINT_OPTIMIZERS
    assert choice.record["multiclass"] == "joint"
    assert choice.record["filled"]["model.type"] == "multinomial_logistic_regression"
    assert "classes fitted joint" in _auto_text({"auto": choice.record})
    job = plan_job(parse_model_spec(choice.model), choice.optimizer, {}, 1257, 64, TARGET, 10)
    assert job.plan.hyperparameters["d"] == 10 * 65


@pytest.mark.parametrize(
    "model",
    [
        {"type": "logistic_regression", "gradient_clip": 0.5},  # a binary loss asked for
        {"type": "logistic_regression", "l1": 0.01},  # l1: no joint optimizer takes it
        {"type": "huber_svm"},
    ],
)
def test_auto_keeps_one_vs_rest_when_the_analyst_asked_for_a_binary_loss(model: dict) -> None:
    from service.optimizers.auto import resolve

    choice = resolve(parse_model_spec(model), 1257, 64, TARGET, 10)
    assert choice.model["type"] == model["type"]
    assert choice.record["multiclass"] == "one_vs_rest"


def test_auto_on_a_binary_label_is_unchanged_and_refuses_the_joint_model_on_model() -> None:
    from service.optimizers.auto import resolve

    binary = resolve(parse_model_spec({"type": "logistic_regression"}), 1257, 64, TARGET, None)
    assert binary.model["type"] == "logistic_regression" and binary.record["multiclass"] is None
    with pytest.raises(InfeasibleSpec) as info:
        resolve(parse_model_spec(MODEL), 1257, 64, TARGET, None)
    assert info.value.field == "model"


# --- data-parallel: the summed oracle over partitions --------------------------------------------


def test_partitioned_gradients_and_fits_equal_the_single_process_ones() -> None:
    """What a data-parallel job computes (service/workers/data_parallel.py): per-partition
    sums of the joint loss's gradients, summed by :class:`SummedGradient` over K·d' parameters —
    the same gradient, and the same fit, as the rows in one process."""
    from service.optimizers.kits.full_gradient import (
        LocalGradient,
        SummedGradient,
        partial_gradient_sum,
    )

    rng = np.random.default_rng(12)
    loss = _loss(0.5, l2=0.02)
    X, y = _rows(rng, 90, WIDTH), rng.integers(-1, K, size=90).astype(float)
    parts = [slice(0, 30), slice(30, 61), slice(61, 90)]

    def sums(w: np.ndarray) -> list[np.ndarray]:
        return [partial_gradient_sum(loss, w, X[p], y[p]) for p in parts]

    summed = SummedGradient(loss, 90, parameter_count(loss, WIDTH), len(parts), sums)
    local = LocalGradient(loss, X, y)
    assert summed.dimension == local.dimension == K * WIDTH
    w = rng.normal(size=K * WIDTH)
    np.testing.assert_allclose(summed.gradient(w), local.gradient(w), rtol=0, atol=1e-13)
    for name in ("dp_gd", "dp_agd_averaged", "output_perturbation_gd"):
        optimizer = get_optimizer(name)
        plan = _joint_plan(name, loss, 90)
        assert hasattr(optimizer, "fit_oracle"), name  # a full-gradient optimizer
        a = optimizer.fit_oracle(plan, loss, summed, np.random.default_rng(4), lambda _: None)
        b = optimizer.fit(plan, loss, X, y, np.random.default_rng(4), lambda _: None)
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-9)


def test_blocked_and_sparse_rows_give_the_same_gradient_and_value() -> None:
    """Row blocks (dense) and the optimizers' sparse rows change only the summation order."""
    from service.models import multinomial
    from service.optimizers.kits.inputs import gradient_rows

    rng = np.random.default_rng(13)
    n, width = 3000, 12
    X = np.zeros((n, width))
    X[np.arange(n), rng.integers(0, width - 1, size=n)] = 0.7  # one-hot-like: sparse rows
    X[:, -1] = 0.7
    y = rng.integers(-1, K, size=n).astype(float)
    loss = _loss(0.5, l2=0.01)
    w = rng.normal(size=K * width)
    sparse = gradient_rows(X)
    assert not isinstance(sparse, np.ndarray)
    assert len(loss._row_blocks(X)) == 1  # 3000 × 12 is within one block by default
    whole_grad, whole_value = loss.gradient(w, X, y), loss.smooth_value(w, X, y)
    np.testing.assert_allclose(loss.gradient(w, sparse, y), whole_grad, rtol=0, atol=1e-13)
    sizes = ("BLOCK_ENTRIES", "ELEMENTWISE_ENTRIES", "PRODUCT_ENTRIES")
    original = {name: getattr(multinomial, name) for name in sizes}
    try:
        multinomial.BLOCK_ENTRIES = 256  # blocks of 21 rows
        assert len(loss._row_blocks(X)) == math.ceil(n / 21)
        np.testing.assert_allclose(loss.gradient(w, X, y), whole_grad, rtol=0, atol=1e-13)
        assert loss.smooth_value(w, X, y) == pytest.approx(whole_value, rel=1e-13)
        # the gradient's elementwise blocks (here 175 rows) and the products' sub-blocks
        # inside them (here 6 rows, the last of each block shorter)
        multinomial.ELEMENTWISE_ENTRIES = 175 * K
        multinomial.PRODUCT_ENTRIES = 6 * K * width
        np.testing.assert_allclose(loss.gradient(w, X, y), whole_grad, rtol=0, atol=1e-13)
    finally:
        for name, value in original.items():
            setattr(multinomial, name, value)


@pytest.mark.parametrize("clip", [None, 0.5, 0.2])
@pytest.mark.parametrize("scale", [1.0, 2_000.0])
def test_the_in_place_dense_gradient_equals_the_per_row_coefficients(
    clip: float | None, scale: float
) -> None:
    """The dense gradient's in-place kernel (gathered labels, exp in place, the clipped slope as
    (S − e_y)/S with S = Σ_k e_k) against the reference the value uses (one-hot targets,
    expit of the margin): equal to 1e-13 relative to the gradient's size, on rows of no
    declared class, on scores where the label dominates by over 710 (scale 2,000: e^{z_y − top}
    over the other classes' maximum would overflow, and S − e_y cancels), and on row
    blocks of a few rows (the product-size limit forced down) — the summation order only."""
    from service.models import multinomial

    rng = np.random.default_rng(21)
    n, width, classes = 700, 9, 6
    X = _rows(rng, n, width)
    y = rng.integers(-1, classes, size=n).astype(float)
    loss = _loss(clip, l2=0.03, classes=classes)
    w = rng.normal(size=classes * width) * scale
    _, coef = loss._losses_and_coefficients(
        loss._scores(loss._matrix(w, width), X), y, with_losses=False
    )
    reference = loss._back(X, coef).ravel() / n + loss.l2 * w
    tolerance = 1e-13 * float(np.abs(reference).max())
    with np.errstate(over="raise"):  # the kernel's one overflow is masked on purpose
        np.testing.assert_allclose(loss.gradient(w, X, y), reference, rtol=0, atol=tolerance)
        original = multinomial.PRODUCT_ENTRIES
        try:
            multinomial.PRODUCT_ENTRIES = classes * width * 7  # blocks of 7 rows
            np.testing.assert_allclose(loss.gradient(w, X, y), reference, rtol=0, atol=tolerance)
        finally:
            multinomial.PRODUCT_ENTRIES = original
    if scale > 1.0 and clip is not None:  # the overflow branch was reached
        Z = loss._scores(loss._matrix(w, width), X)
        idx = np.maximum(y.astype(int), 0)
        z_y = Z[idx, np.arange(n)]
        others = np.where(np.arange(classes)[:, None] == idx, -np.inf, Z).max(axis=0)
        assert float(np.max(z_y - others)) > 710.0
