"""``LogisticLoss.coefficient_anchor``: the two bounds ``dp_agd_centred``'s privacy rests on.

Every per-example gradient of the (clipped-slope) logistic loss is c(w)·x, and the anchor
(κ, r) = (scale, half_width) claims, for every w and every admissible row (‖x‖ ≤ 1, y = ±1),

    |c(w) − κ·c(0)| ≤ r   and   |κ·c(0)| ≤ r

(service/models/logistic.py, "Centred coefficients"). Probed for C ∈ {none, 0.05, 0.3, 0.5,
0.8, 1} at random and adversarial w — margins w·x up to ±1e8 of either sign, on both sides of
the clip kink m_C, random rows and unit rows — through both code paths that compute c:
``dphi`` (and ``example_gradients``, checked to be c·x) and ``gradient``, the one the optimizers
run. Both sups must also come within 1 % of r, so a too-large r fails as well as a too-small
one; a test checks that the probe rejects anchors that are slightly off (moved centre, r 2 %
too small or too large). A hypothesis property test adds arbitrary single rows and weights.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import sparse

from service.models.base import CoefficientAnchor, FloatArray
from service.models.logistic import LogisticLoss, clip_margin

CLIPS: list[float | None] = [None, 0.05, 0.3, 0.5, 0.8, 1.0]
#: Slack for floating-point rounding in c(w) − κ·c(0) (relative to r, plus an absolute 1e-15).
ROUNDING = 1e-12
#: Both sups must reach this fraction of r (the bound is attained or approached).
TIGHT = 0.99


def _rows(n: int, d: int, seed: int) -> tuple[FloatArray, FloatArray]:
    """n rows with norms in (0, 1] (a quarter exactly 1) and labels ±1."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    X[n // 4 :] *= rng.uniform(0.01, 1.0, size=(n - n // 4, 1))
    y = rng.choice([-1.0, 1.0], size=n)
    return X, y


def _margins(clip: float | None) -> FloatArray:
    """Margins z = w·x to probe: a fine grid, both tails up to 1e8, and the kink m_C ± 1e-9."""
    tails = np.logspace(-12, 8, 121)
    grid = [np.linspace(-60.0, 60.0, 2401), tails, -tails, np.zeros(1)]
    m_c = clip_margin(1.0 if clip is None else clip)
    if math.isfinite(m_c):
        grid.append(np.array([m_c, -m_c, m_c + 1e-9, m_c - 1e-9, -m_c + 1e-9, -m_c - 1e-9]))
    return np.concatenate(grid)


def _dphi_coefficients(loss: LogisticLoss, clip: float | None) -> tuple[FloatArray, FloatArray]:
    """(c(w), c(0)) per probe through ``dphi``: random rows at random w of scales 1e-3 … 1e6,
    and w = t·x_i/‖x_i‖² that puts row i exactly at margin t for every probed t."""
    X, y = _rows(64, 5, seed=1)
    rng = np.random.default_rng(2)
    weights = [scale * rng.normal(size=5) for scale in (1e-3, 0.1, 1.0, 10.0, 1e3, 1e6)]
    weights += [t * X[i] / float(X[i] @ X[i]) for i in (0, 40) for t in _margins(clip)[::7]]
    c0 = loss.dphi(np.zeros(len(y)), y)
    cs, c0s = [], []
    for w in weights:
        c = loss.dphi(X @ w, y)
        np.testing.assert_allclose(
            loss.example_gradients(w, X, y), c[:, None] * X, rtol=1e-15, atol=0
        )
        cs.append(c)
        c0s.append(c0)
    return np.concatenate(cs), np.concatenate(c0s)


def _gradient_coefficients(loss: LogisticLoss, clip: float | None) -> tuple[FloatArray, FloatArray]:
    """(c(w), c(0)) per probe through ``gradient`` (l2 = 0): on the rows s_i·e_i (s_i ∈ (0, 1],
    both labels), ∇F(w) = (1/n) s ⊙ c, so c = n ∇F(w) / s; w = z/s sets every margin z."""
    z = _margins(clip)
    z = np.concatenate([z, z])
    n = z.size
    y = np.repeat([1.0, -1.0], n // 2)
    s = np.random.default_rng(3).uniform(0.1, 1.0, size=n)
    s[::5] = 1.0
    X = sparse.diags_array(s).tocsr()  # n × n, kept sparse
    c = n * loss.gradient(z / s, X, y) / s
    c0 = n * loss.gradient(np.zeros(n), X, y) / s
    return c, c0


def _coefficients(clip: float | None) -> tuple[LogisticLoss, FloatArray, FloatArray]:
    loss = LogisticLoss(l2=0.0, gradient_clip=clip)
    c1, c01 = _dphi_coefficients(loss, clip)
    c2, c02 = _gradient_coefficients(loss, clip)
    return loss, np.concatenate([c1, c2]), np.concatenate([c01, c02])


def _failures(anchor: CoefficientAnchor, c: FloatArray, c0: FloatArray) -> list[str]:
    """What the probes refute about ``anchor``: either bound exceeded, or either sup below
    ``TIGHT``·r (r too loose)."""
    r = anchor.half_width
    slack = r * (1.0 + ROUNDING) + 1e-15
    centred = float(np.max(np.abs(c - anchor.scale * c0)))
    label = float(np.max(np.abs(anchor.scale * c0)))
    out = []
    if centred > slack:
        out.append(f"|c(w) - k c(0)| reaches {centred} > r = {r}")
    if label > slack:
        out.append(f"|k c(0)| reaches {label} > r = {r}")
    if centred < TIGHT * r:
        out.append(f"|c(w) - k c(0)| only reaches {centred} < {TIGHT} r = {TIGHT * r}")
    if label < TIGHT * r:
        out.append(f"|k c(0)| only reaches {label} < {TIGHT} r = {TIGHT * r}")
    return out


@pytest.mark.parametrize("clip", CLIPS)
def test_the_anchor_bounds_hold_and_are_tight(clip: float | None) -> None:
    loss, c, c0 = _coefficients(clip)
    anchor = loss.coefficient_anchor()
    assert np.all(np.isfinite(c)) and c.size > 10_000
    assert _failures(anchor, c, c0) == []
    # the interval it centres: c(w) ∈ −y·[0, C] (C = 1 unclipped), both ends reached
    big_c = 1.0 if clip is None else clip
    assert float(np.max(np.abs(c))) == pytest.approx(big_c, rel=1e-9)
    assert float(np.min(np.abs(c))) < 1e-6 * big_c


@pytest.mark.parametrize("clip", [None, 0.3, 0.5, 0.8])
def test_the_probe_rejects_a_slightly_wrong_anchor(clip: float | None) -> None:
    """Not vacuous: a centre moved by 5 %, or r 2 % too small or too large, is refuted."""
    loss, c, c0 = _coefficients(clip)
    true = loss.coefficient_anchor()
    wrong = [
        CoefficientAnchor(scale=true.scale * 1.05, half_width=true.half_width),
        CoefficientAnchor(scale=true.scale * 0.95, half_width=true.half_width),
        CoefficientAnchor(scale=true.scale, half_width=true.half_width * 0.98),
        CoefficientAnchor(scale=true.scale, half_width=true.half_width * 1.02),
    ]
    for anchor in wrong:
        assert _failures(anchor, c, c0), anchor


@st.composite
def _row_and_weights(draw: st.DrawFn) -> tuple[FloatArray, FloatArray]:
    """One row of norm ≤ 1 (any direction, norm 0 … 1) and a weight vector up to ±1e6."""
    d = draw(st.integers(1, 4))
    coords = st.floats(-1.0, 1.0, allow_nan=False)
    x = np.array(draw(st.lists(coords, min_size=d, max_size=d)))
    norm = float(np.linalg.norm(x))
    if norm > 0.0:
        x *= draw(st.floats(0.0, 1.0)) / norm
    weights = st.floats(-1e6, 1e6, allow_nan=False)
    w = np.array(draw(st.lists(weights, min_size=d, max_size=d)))
    return x, w


@settings(max_examples=300, deadline=None, database=None)
@given(
    clip=st.sampled_from(CLIPS),
    row=_row_and_weights(),
    label=st.sampled_from([-1.0, 1.0]),
)
def test_the_anchor_bounds_hold_for_any_row_and_weights(
    clip: float | None, row: tuple[FloatArray, FloatArray], label: float
) -> None:
    loss = LogisticLoss(l2=0.0, gradient_clip=clip)
    anchor = loss.coefficient_anchor()
    x, w = row
    y = np.array([label])
    c = float(loss.dphi(np.array([x @ w]), y)[0])
    c0 = float(loss.dphi(np.zeros(1), y)[0])
    gradient = loss.gradient(w, x[None, :], y)  # the optimizers' path: c(w)·x
    np.testing.assert_allclose(gradient, c * x, rtol=1e-12, atol=1e-15)  # tanh vs expit
    slack = anchor.half_width * (1.0 + ROUNDING) + 1e-15
    assert abs(c - anchor.scale * c0) <= slack
    assert abs(anchor.scale * c0) <= slack
