"""dp_agd_averaged: the same mechanism as dp_agd (same queries, same noise, same charge), a
post-processed release (the mean of the second half of the iterates), twice the default T."""

from __future__ import annotations

import numpy as np
import pytest

from service.ledger.accounting import charge_curve
from service.models.logistic import LogisticLoss
from service.optimizers.dp_agd import DPAGD, DPAGDParams
from service.optimizers.dp_agd_averaged import (
    STEP_CAP,
    STEP_FACTOR,
    DPAGDAveraged,
    DPAGDAveragedParams,
    averaged_accelerated_descent,
)
from service.optimizers.kits.accelerated_kit import noisy_accelerated_descent
from service.optimizers.kits.base import InfeasibleSpec, PrivacyTarget
from service.optimizers.kits.full_gradient import LocalGradient
from service.optimizers.kits.gradient_kit import QueryRecord
from service.privacy.gdp import event_mu, gdp_mu

TARGET = PrivacyTarget(1.0, 1e-5)


def _rows(n: int, d: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    y = np.where(X @ rng.normal(size=d) + 0.3 * rng.normal(size=n) >= 0, 1.0, -1.0)
    return X, y


def test_the_plan_is_dp_agds_with_twice_its_steps() -> None:
    loss = LogisticLoss(l2=1e-3, gradient_clip=0.5)
    agd = DPAGD().plan(DPAGDParams(), loss, 5000, 8, TARGET)
    avg = DPAGDAveraged().plan(DPAGDAveragedParams(), loss, 5000, 8, TARGET)
    assert avg.hyperparameters["iterations"] == STEP_FACTOR * agd.hyperparameters["iterations"]
    same_t = DPAGD().plan(
        DPAGDParams(iterations=avg.hyperparameters["iterations"]), loss, 5000, 8, TARGET
    )
    assert avg.event == same_t.event and avg.noise_scale == same_t.noise_scale
    assert avg.sensitivity == same_t.sensitivity == 2 * 0.5 / 5000
    mu = event_mu(avg.event)
    assert mu is not None and mu <= gdp_mu(1.0, 1e-5) * (1 + 1e-12)
    assert charge_curve(avg.event) == charge_curve(same_t.event)
    with pytest.raises(InfeasibleSpec) as no_radius:
        DPAGDAveraged().plan(DPAGDAveragedParams(), LogisticLoss(l2=0.0), 5000, 8, TARGET)
    assert no_radius.value.field == "optimizer.params.radius"


def test_same_queries_and_noise_as_dp_agd_and_the_release_is_their_tail_mean() -> None:
    loss = LogisticLoss(l2=1e-3, gradient_clip=0.5)
    X, y = _rows(400, 6, 1)
    ours: list[QueryRecord] = []
    theirs: list[QueryRecord] = []
    iterates: list[np.ndarray] = []
    w_avg = averaged_accelerated_descent(
        loss,
        LocalGradient(loss, X, y),
        step_size=2.0,
        iterations=9,
        noise_std=0.05,
        sensitivity=0.01,
        rng=np.random.default_rng(4),
        trace=ours,
        iterates=iterates,
    )
    w_last = noisy_accelerated_descent(
        loss,
        X,
        y,
        step_size=2.0,
        iterations=9,
        noise_std=0.05,
        sensitivity=0.01,
        rng=np.random.default_rng(4),
        trace=theirs,
    )
    assert len(ours) == len(theirs) == 9
    for a, b in zip(ours, theirs, strict=True):
        assert np.array_equal(a.point, b.point) and np.array_equal(a.noise, b.noise)
    assert np.array_equal(iterates[-1], w_last)
    assert np.allclose(w_avg, np.mean(iterates[4:], axis=0))  # t = 5 … 9 (⌊9/2⌋ + 1 …)


def test_it_fits_and_checks_the_data_against_the_plan() -> None:
    loss = LogisticLoss(l2=1e-3, gradient_clip=0.5)
    X, y = _rows(3000, 8, 2)
    opt = DPAGDAveraged()
    plan = opt.plan(DPAGDAveragedParams(), loss, 3000, 8, PrivacyTarget(2.0, 1e-5))
    steps: list[int] = []
    w = opt.fit(plan, loss, X, y, np.random.default_rng(0), steps.append)
    assert steps[-1] == plan.total_steps
    assert np.mean(np.where(X @ w >= 0, 1.0, -1.0) == y) > 0.8
    with pytest.raises(ValueError):
        opt.fit(plan, loss, X[:-1], y[:-1], np.random.default_rng(0), steps.append)
    wider = LogisticLoss(l2=1e-3)  # L = 1 > the plan's L = 1/2
    with pytest.raises(ValueError):
        opt.fit(plan, wider, X, y, np.random.default_rng(0), steps.append)
    oracle = LocalGradient(loss, X, y)
    w2 = opt.fit_oracle(plan, loss, oracle, np.random.default_rng(0), lambda s: None)
    assert np.allclose(w, w2)


def test_the_default_steps_stop_at_the_compute_cap_unless_the_analyst_lifts_it() -> None:
    """Many rows and a small l2 put 2·T_agd above STEP_CAP: the default plan runs STEP_CAP
    steps with the noise calibrated for them; ``max_iterations`` lifts the cap."""
    loss = LogisticLoss(l2=1e-5, gradient_clip=0.5)
    n, d = 200_000, 20
    agd = DPAGD().plan(DPAGDParams(), loss, n, d, TARGET)
    assert STEP_FACTOR * agd.hyperparameters["iterations"] > STEP_CAP
    capped = DPAGDAveraged().plan(DPAGDAveragedParams(), loss, n, d, TARGET)
    assert capped.total_steps == capped.hyperparameters["iterations"] == STEP_CAP
    same_t = DPAGD().plan(DPAGDParams(iterations=STEP_CAP), loss, n, d, TARGET)
    assert capped.noise_scale == same_t.noise_scale and capped.event == same_t.event
    lifted = DPAGDAveraged().plan(DPAGDAveragedParams(max_iterations=5000), loss, n, d, TARGET)
    assert lifted.total_steps == STEP_FACTOR * agd.hyperparameters["iterations"]
