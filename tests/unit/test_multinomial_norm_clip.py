"""The joint model's per-row norm clip (``gradient_norm_clip``: service/models/multinomial.py,
"Per-row norm clip"): its bound, its sensitivity under the optimizers that accept it, who
refuses it, ``auto``'s fill, and an empirical audit.

(a) Every row's gradient has norm ≤ B at every iterate (huge scores included) and = B at w = 0
    when B = C·√(K/(K − 1)); L = B; a B at or above √2·C does not bind (the exact gradient).
(b) On adversarial neighbours the step query of dp_gd / dp_agd / dp_agd_averaged moves by at
    most its plan's sensitivity 2B/n and reaches it (rows x and −x of one class at w = 0);
    without the clip the same construction exceeds 2B/n (the clip is what makes it hold).
(c) The dense kernel, the per-row reference and sparse rows agree, and so do the data-parallel
    partitions with a pickled loss; the clip is what makes the released gradient differ from ∇F.
(d) Output perturbation, bolt-on and dp_agd_centred refuse it on ``model`` (through planning
    and when planned directly).
(e) ``auto`` fills B from K = 3 on, keeps the analyst's value, and a fallback that needs
    exact gradients runs without it.
(f) An empirical audit of one noisy dp_gd step on the pair that attains 2B: the ε lower bound
    stays below the claim, and a plan with a third of the noise is caught.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import scipy.sparse as sp
from pydantic import ValidationError

from service.models.multinomial import NORM_CLIP_OPTIMIZERS, MultinomialLoss
from service.models.registry import parse_model_spec
from service.optimizers.kits.base import InfeasibleSpec, PrivacyTarget, ReleasePlan
from service.optimizers.kits.joint_rule import joint_norm_clip
from service.optimizers.kits.planning import plan_job
from service.optimizers.kits.registry import get_optimizer
from tests.support.nonconvex_loss import centred_threshold_bound, projected_releases

K, WIDTH, N = 5, 4, 40
C = 0.5
B = C * math.sqrt(K / (K - 1))
TARGET = PrivacyTarget(1.0, 1e-5)


def _loss(bound: float | None = B, l2: float = 0.01, clip: float | None = C) -> MultinomialLoss:
    return MultinomialLoss(l2=l2, classes=K, gradient_clip=clip, gradient_norm_clip=bound)


def _rows(rng: np.random.Generator, n: int) -> np.ndarray:
    X = rng.normal(size=(n, WIDTH))
    return X / np.linalg.norm(X, axis=1, keepdims=True) * rng.uniform(0.3, 1.0, (n, 1))


def _unit_rows(n: int) -> np.ndarray:
    X = np.zeros((n, WIDTH))
    X[:, 0] = 1.0
    return X


# --- (a) the bound -------------------------------------------------------------------------------


def test_every_row_gradient_is_within_b_and_every_row_reaches_it_at_zero() -> None:
    rng = np.random.default_rng(1)
    loss = _loss()
    assert loss.lipschitz == pytest.approx(B) and not loss.exact_gradient
    X, y = _rows(rng, 300), rng.integers(-1, K, size=300).astype(float)
    for scale in (0.0, 1.0, 30.0, 3000.0):
        w = rng.normal(size=K * WIDTH) * scale
        norms = np.linalg.norm(loss.example_gradients(w, X, y), axis=1)
        assert norms.max() <= B
    unit = _unit_rows(50)
    labels = rng.integers(0, K, size=50).astype(float)
    at_zero = np.linalg.norm(loss.example_gradients(np.zeros(K * WIDTH), unit, labels), axis=1)
    np.testing.assert_allclose(at_zero, B, rtol=1e-11)
    assert joint_norm_clip(C, K) == pytest.approx(B)


@pytest.mark.parametrize("clip", [None, 0.5])
def test_a_bound_at_or_above_the_slopes_does_not_bind(clip: float | None) -> None:
    natural = math.sqrt(2.0) * (clip or 1.0)
    loose = _loss(natural, clip=clip)
    assert loose.exact_gradient and loose.lipschitz == pytest.approx(natural)
    assert loose.coefficient_anchor() == _loss(None, clip=clip).coefficient_anchor()
    assert _loss(None, clip=None).coefficient_anchor() is not None
    assert _loss(B, clip=None).coefficient_anchor() is None  # the anchor's bound is gone


def test_the_bound_is_validated() -> None:
    with pytest.raises(ValueError):
        _loss(0.0)
    with pytest.raises(ValueError):
        _loss(math.inf)
    for bad in (0, 1e-7, 1e7, "inf"):
        with pytest.raises(ValidationError) as info:  # the API's 422 on this field
            parse_model_spec({"type": "multinomial_logistic_regression", "gradient_norm_clip": bad})
        assert info.value.errors()[0]["loc"][-1] == "gradient_norm_clip"


# --- (b) sensitivity --------------------------------------------------------------------------


def _neighbours(rng: np.random.Generator) -> list[tuple[np.ndarray, ...]]:
    """Replace-one pairs: one row's class flipped, the row negated, a unit row of another
    class, a row of no class; the pair that attains 2B at w = 0 (unit rows along e0, the
    differing row e0 and −e0 of one class); and the pair both of whose rows are confidently
    wrong at :func:`_wrong` (unit rows (±√(1 − α²), 0, 0, α) of class 0, α = 0.05)."""
    pairs = []
    X, y = _rows(rng, N), rng.integers(0, K, size=N).astype(float)
    unit = np.zeros(WIDTH)
    unit[-1] = 1.0
    for x_new, y_new in [(X[0], (y[0] + 1) % K), (-X[0], y[0]), (unit, (y[0] + 2) % K), (X[0], -1)]:
        X2, y2 = X.copy(), y.copy()
        X2[0], y2[0] = x_new, float(y_new)
        pairs.append((X, y, X2, y2))
    X = _unit_rows(N)
    X2 = X.copy()
    X2[0] = -X[0]
    pairs.append((X, np.zeros(N), X2, np.zeros(N)))
    X, X2 = X.copy(), X.copy()
    X[0] = (math.sqrt(1 - ALPHA**2), 0.0, 0.0, ALPHA)
    X2[0] = (-math.sqrt(1 - ALPHA**2), 0.0, 0.0, ALPHA)
    pairs.append((X, np.zeros(N), X2, np.zeros(N)))
    return pairs


ALPHA = 0.05


def _wrong() -> np.ndarray:
    """W scoring class 1 at 400 on both versions of the differing row of the last pair (their
    last entry is α): both put all mass on class 1 while labelled 0, ‖c‖ = √2·C unclipped."""
    W = np.zeros((K, WIDTH))
    W[1, -1] = 400.0 / ALPHA
    return W.ravel()


def _plan(name: str, loss: MultinomialLoss, **params: object) -> ReleasePlan:
    optimizer = get_optimizer(name)
    return optimizer.plan(optimizer.Params.model_validate(params), loss, N, K * WIDTH, TARGET)


@pytest.mark.parametrize("name", sorted(NORM_CLIP_OPTIMIZERS))
def test_the_step_query_stays_within_2b_over_n_and_reaches_it(name: str) -> None:
    loss = _loss()
    plan = _plan(name, loss)
    assert plan.sensitivity == pytest.approx(2 * B / N)
    rng = np.random.default_rng(2)
    gaps, unclipped = [], []
    for X, y, X2, y2 in _neighbours(rng):
        for w in (np.zeros(K * WIDTH), rng.normal(size=K * WIDTH) * 5, _wrong()):
            gaps.append(float(np.linalg.norm(loss.gradient(w, X, y) - loss.gradient(w, X2, y2))))
            plain = _loss(None)
            unclipped.append(
                float(np.linalg.norm(plain.gradient(w, X, y) - plain.gradient(w, X2, y2)))
            )
    assert max(gaps) <= plan.sensitivity * (1 + 1e-9), (max(gaps), plan.sensitivity)
    assert max(gaps) >= 0.999 * plan.sensitivity
    assert max(unclipped) > 1.2 * plan.sensitivity  # without the clip 2B/n would not hold


# --- (c) kernels -----------------------------------------------------------------------------


@pytest.mark.parametrize("scale", [1.0, 2_000.0])
@pytest.mark.parametrize("clip", [None, 0.5])
def test_dense_sparse_and_per_row_gradients_agree_under_the_clip(
    clip: float | None, scale: float
) -> None:
    rng = np.random.default_rng(3)
    loss = _loss(0.4, l2=0.02, clip=clip)
    X, y = _rows(rng, 600), rng.integers(-1, K, size=600).astype(float)
    w = rng.normal(size=K * WIDTH) * scale
    with np.errstate(over="ignore"):
        dense = loss.gradient(w, X, y)
        sparse = loss.gradient(w, sp.csr_matrix(X), y)
        per_row = loss.example_gradients(w, X, y).mean(axis=0) + loss.l2 * w
    size = float(np.abs(per_row).max())
    np.testing.assert_allclose(dense, per_row, rtol=0, atol=1e-13 * size)
    np.testing.assert_allclose(sparse, per_row, rtol=0, atol=1e-13 * size)
    if scale == 1.0:  # moderate scores: the clip binds on many rows
        exact = _loss(None, l2=0.02, clip=clip).gradient(w, X, y)
        assert np.linalg.norm(dense - exact) > 1e-3 * np.linalg.norm(exact)


def test_the_partitions_and_a_pickled_loss_clip_alike() -> None:
    """What a data-parallel job ships to its workers (the loss, pickled) and sums (per-partition
    gradient sums): the same clipped gradient as the rows in one process."""
    import pickle

    from service.optimizers.kits.full_gradient import (
        LocalGradient,
        SummedGradient,
        partial_gradient_sum,
    )

    rng = np.random.default_rng(4)
    loss = _loss()
    shipped = pickle.loads(pickle.dumps(loss))
    assert shipped.norm_clip == B and not shipped.exact_gradient
    X, y = _rows(rng, 90), rng.integers(-1, K, size=90).astype(float)
    parts = [slice(0, 30), slice(30, 61), slice(61, 90)]
    summed = SummedGradient(
        loss, 90, K * WIDTH, len(parts),
        lambda w: [partial_gradient_sum(shipped, w, X[p], y[p]) for p in parts],
    )  # fmt: skip
    w = rng.normal(size=K * WIDTH) * 3
    local = LocalGradient(loss, X, y).gradient(w)
    np.testing.assert_allclose(summed.gradient(w), local, rtol=0, atol=1e-13)


# --- (d) refusals -----------------------------------------------------------------------------

MODEL = {"type": "multinomial_logistic_regression", "l2": 0.01, "gradient_norm_clip": B}


@pytest.mark.parametrize("name", ["output_perturbation_gd", "bolt_on_psgd", "dp_agd_centred"])
def test_optimizers_that_need_the_exact_gradient_refuse_it_on_model(name: str) -> None:
    with pytest.raises(InfeasibleSpec) as info:
        plan_job(parse_model_spec(MODEL), name, {}, 500, 3, TARGET, classes=K)
    assert info.value.field == "model"
    if name != "dp_agd_centred":  # planned directly (a library's path): refused all the same
        with pytest.raises(InfeasibleSpec) as info:
            _plan(name, _loss())
        assert info.value.field == "model"


@pytest.mark.parametrize("name", sorted(NORM_CLIP_OPTIMIZERS))
def test_the_gradient_perturbation_optimizers_plan_it_at_l_equal_b(name: str) -> None:
    job = plan_job(parse_model_spec(MODEL), name, {}, 5000, 3, TARGET, classes=K)
    assert job.loss.lipschitz == pytest.approx(B)
    assert job.plan.sensitivity == pytest.approx(2 * B / 5000)


# --- (e) auto ----------------------------------------------------------------------------------


def test_auto_fills_the_clip_from_three_classes() -> None:
    from service.optimizers.auto import resolve

    logistic = parse_model_spec({"type": "logistic_regression"})
    for classes in (2,):  # B = √2·C: it would not bind
        choice = resolve(logistic, 2000, 6, TARGET, classes)
        assert "gradient_norm_clip" not in choice.record["filled"]
        assert choice.model.get("gradient_norm_clip") is None
    for classes in (3, 4, 5, 10):
        choice = resolve(logistic, 2000, 6, TARGET, classes)
        bound = C * math.sqrt(classes / (classes - 1))
        assert choice.model["gradient_norm_clip"] == pytest.approx(bound)
        assert choice.record["filled"]["model.gradient_norm_clip"] == pytest.approx(bound)
        assert choice.optimizer in NORM_CLIP_OPTIMIZERS
    mine = parse_model_spec({**MODEL, "gradient_norm_clip": 0.3})
    assert resolve(mine, 2000, 6, TARGET, K).model["gradient_norm_clip"] == 0.3


def test_a_fallback_that_needs_exact_gradients_runs_without_the_filled_clip() -> None:
    from service.optimizers.auto import resolve

    pure = resolve(parse_model_spec({"type": "logistic_regression"}), 2000, 6,
                   PrivacyTarget(1.0, 0.0), 10)  # fmt: skip
    assert pure.optimizer == "output_perturbation_gd"
    assert pure.model.get("gradient_norm_clip") is None
    assert "model.gradient_norm_clip" not in pure.record["filled"]
    mine = parse_model_spec(MODEL)
    with pytest.raises(InfeasibleSpec):  # the analyst's own clip is never dropped
        resolve(mine, 2000, 6, PrivacyTarget(1.0, 0.0), K)


# --- (f) empirical audit ----------------------------------------------------------------------


def test_empirical_audit_of_one_noisy_step_on_the_attaining_pair() -> None:
    """dp_gd with T = 1 releases −η(∇F(0) + noise). Rows e0 and −e0 of class 0 (the others e0)
    put the two versions' first gradients exactly 2B/n = Δ apart: the output's coordinate
    along their difference carries the whole signal. The ε lower bound (Clopper–Pearson,
    Bonferroni) stays below the claim; a plan with a third of the noise is caught."""
    eps, n = 2.0, 20
    loss = _loss()
    X = _unit_rows(n)
    X2 = X.copy()
    X2[0] = -X[0]
    y = np.zeros(n)
    optimizer = get_optimizer("dp_gd")
    params = optimizer.Params.model_validate({"iterations": 1, "step_size": 1.0})
    plan = optimizer.plan(params, loss, n, K * WIDTH, PrivacyTarget(eps, 1e-5))
    zero = np.zeros(K * WIDTH)
    difference = loss.gradient(zero, X, y) - loss.gradient(zero, X2, y)
    assert np.linalg.norm(difference) == pytest.approx(plan.sensitivity, rel=1e-9)
    direction = difference / np.linalg.norm(difference)

    def bound(p: ReleasePlan, seed: int) -> float:
        low = projected_releases(optimizer, p, loss, X, y, direction, 3000, seed)
        high = projected_releases(optimizer, p, loss, X2, y, direction, 3000, seed + 1)
        return centred_threshold_bound(low, high, 1e-5)

    assert bound(plan, 300) < eps
    assert bound(dataclasses.replace(plan, noise_scale=plan.noise_scale / 3), 400) > eps
