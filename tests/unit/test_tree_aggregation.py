"""The tree mechanism (service.privacy.tree_aggregation): node structure, sensitivity s·√m,
noise distribution, event and calibration (docs/privacy-model.md#testing-privacy)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dp_accounting import NeighboringRelation, dp_event
from dp_accounting.rdp import rdp_privacy_accountant

from service.ledger.accounting import ORDERS, rdp_curve
from service.privacy.calibration import calibrate_noise_multiplier, event_epsilon
from service.privacy.tree_aggregation import (
    TreeAggregator,
    element_nodes,
    node_sums,
    prefix_nodes,
    tree_depth,
    tree_event,
    tree_sensitivity,
)


def _interval(node: tuple[int, int]) -> range:
    level, j = node
    return range(j * (1 << level) + 1, (j + 1) * (1 << level) + 1)


def test_tree_depth_matches_dp_accounting_max_depth() -> None:
    for t in range(1, 1100):
        assert tree_depth(t) == math.floor(math.log2(t)) + 1 == math.ceil(math.log2(t + 1))
    # dp-accounting's SingleEpochTreeAggregation RDP is α·max_depth/(2z²), max_depth its depth
    accountant = rdp_privacy_accountant.RdpAccountant([2.0], NeighboringRelation.REPLACE_SPECIAL)
    accountant.compose(dp_event.SingleEpochTreeAggregationDpEvent(1.0, 37))
    assert float(accountant._rdp[0]) == pytest.approx(tree_depth(37))  # noqa: SLF001
    with pytest.raises(ValueError):
        tree_depth(0)


@pytest.mark.parametrize("t", list(range(1, 130)) + [1000, 1023, 1024, 4097])
def test_prefix_nodes_partition_the_prefix(t: int) -> None:
    nodes = prefix_nodes(t)
    assert len(nodes) == bin(t).count("1") <= tree_depth(t)
    covered = sorted(k for node in nodes for k in _interval(node))
    assert covered == list(range(1, t + 1))  # disjoint union of [1, t]
    assert all(j % 2 == 0 for _, j in nodes)  # only left children are ever used


@pytest.mark.parametrize("length", [1, 2, 3, 7, 8, 9, 31, 64, 100])
def test_node_sums_and_element_nodes(length: int) -> None:
    rng = np.random.default_rng(length)
    stream = rng.normal(size=(length, 3))
    sums = node_sums(stream)
    used = {node for t in range(1, length + 1) for node in prefix_nodes(t)}
    assert set(sums) == used  # exactly the released nodes
    for node, value in sums.items():
        idx = [k - 1 for k in _interval(node)]
        np.testing.assert_allclose(value, stream[idx].sum(axis=0), atol=1e-12)
    counts = []
    for k in range(1, length + 1):
        nodes = element_nodes(k, length)
        assert set(nodes) == {node for node in used if k in _interval(node)}
        counts.append(len(nodes))
    assert max(counts) == counts[0] == tree_depth(length)


@pytest.mark.parametrize("length", [1, 5, 8, 16, 33, 100])
def test_node_vector_sensitivity_is_s_sqrt_m(length: int) -> None:
    """Changing one element by a vector of norm s moves the vector of all node sums by
    s·√(#nodes containing it) ≤ s√m, with equality for the first element."""
    rng = np.random.default_rng(100 + length)
    s = 0.37
    bound = tree_sensitivity(s, length)
    assert bound == pytest.approx(s * math.sqrt(tree_depth(length)))
    stream = rng.normal(size=(length, 4))
    base = node_sums(stream)
    observed = []
    for k in range(1, length + 1):
        change = rng.normal(size=4)
        change *= s / np.linalg.norm(change)
        other = stream.copy()
        other[k - 1] += change
        moved = node_sums(other)
        gap = math.sqrt(sum(float(np.sum((base[n] - moved[n]) ** 2)) for n in base))
        assert gap <= bound * (1 + 1e-12)
        assert gap == pytest.approx(s * math.sqrt(len(element_nodes(k, length))), rel=1e-9)
        observed.append(gap)
    assert observed[0] == pytest.approx(bound, rel=1e-9)  # would fail if Δ were halved


def test_aggregator_without_noise_is_exact() -> None:
    rng = np.random.default_rng(1)
    stream = rng.normal(size=(20, 3))
    tree = TreeAggregator(3, 0.0, 20, np.random.default_rng(2))
    for t in range(20):
        np.testing.assert_allclose(tree.add(stream[t]), stream[: t + 1].sum(axis=0), atol=1e-12)
    assert tree.length == 20
    with pytest.raises(ValueError, match="capacity"):
        tree.add(stream[0])


def test_aggregator_noise_is_the_sum_of_node_noises() -> None:
    """Var(TREE(t)) = σ²·popcount(t), and two prefixes share exactly their common nodes."""
    sigma, dim, length = 0.7, 40_000, 13
    tree = TreeAggregator(dim, sigma, length, np.random.default_rng(3), sensitivity=0.5)
    zero = np.zeros(dim)
    noises = np.array([tree.add(zero) for _ in range(length)])
    for t in range(1, length + 1):
        variance = float(np.mean(noises[t - 1] ** 2))
        assert variance == pytest.approx(sigma**2 * bin(t).count("1"), rel=0.04)
    for t in range(1, length + 1):
        for u in range(t + 1, length + 1):
            shared = len(set(prefix_nodes(t)) & set(prefix_nodes(u)))
            cov = float(np.mean(noises[t - 1] * noises[u - 1]))
            assert cov == pytest.approx(sigma**2 * shared, abs=0.04 * sigma**2)


def test_aggregator_without_noise_draws_nothing_and_noise_needs_a_sensitivity() -> None:
    """Nodes are released exactly (secure_gaussian at the element sensitivity), so a noise-free
    tree (σ = 0, the sensitivity tests' run) releases the exact sums and draws no randomness;
    a noisy tree refuses a missing sensitivity."""
    gen = np.random.default_rng(4)
    quiet = TreeAggregator(2, 0.0, 10, gen)
    for _ in range(10):
        quiet.add(np.ones(2))
    assert gen.bytes(8) == np.random.default_rng(4).bytes(8)
    with pytest.raises(ValueError, match="sensitivity"):
        TreeAggregator(2, 1.0, 10, np.random.default_rng(4))


# --- event and calibration ------------------------------------------------------------------


def test_tree_event_is_a_plain_gaussian_pinned() -> None:
    """Pin (docs/ledger.md#the-z-convention): the RDP accountant charges a Gaussian event
    α/(2z²) under REPLACE_ONE
    (not doubled), so z = σ/Δ_tree with our replace-one Δ_tree is charged correctly."""
    z = 2.0
    curve = rdp_curve(tree_event(z))
    for order, value in zip(ORDERS, curve, strict=True):
        assert value == pytest.approx(order / (2 * z * z), rel=1e-12)
    # same RDP as dp-accounting's tree event at the same depth, with its per-record s
    s, length, sigma = 0.3, 50, 1.7
    ours = rdp_privacy_accountant.RdpAccountant([2.0, 8.0], NeighboringRelation.REPLACE_ONE)
    ours.compose(tree_event(sigma / tree_sensitivity(s, length)))
    theirs = rdp_privacy_accountant.RdpAccountant([2.0, 8.0], NeighboringRelation.REPLACE_SPECIAL)
    theirs.compose(dp_event.SingleEpochTreeAggregationDpEvent(sigma / s, length))
    np.testing.assert_allclose(ours._rdp, theirs._rdp, rtol=1e-12)  # noqa: SLF001
    # … but that event is refused under the ledger's REPLACE_ONE relation
    replace_one = rdp_privacy_accountant.RdpAccountant([2.0], NeighboringRelation.REPLACE_ONE)
    assert not replace_one.supports(dp_event.SingleEpochTreeAggregationDpEvent(1.0, 10))
    with pytest.raises(ValueError):
        tree_event(0.0)
    with pytest.raises(ValueError):
        tree_sensitivity(0.0, 3)


@pytest.mark.parametrize(("eps", "delta"), [(0.05, 1e-6), (1.0, 1e-5), (8.0, 1e-9)])
def test_calibration_is_tight_and_agrees(eps: float, delta: float) -> None:
    z = calibrate_noise_multiplier(tree_event, eps, delta, rtol=1e-6)
    assert event_epsilon(tree_event(z), delta) <= eps
    assert event_epsilon(tree_event(z * (1 - 1e-4)), delta) > eps  # the smallest such z


@pytest.mark.parametrize("eps", [1e4, 1e6, 1e9])
def test_calibration_handles_huge_epsilon(eps: float) -> None:
    z = calibrate_noise_multiplier(tree_event, eps, 1e-5, rtol=1e-6)
    assert 0 < z < 0.1
    assert event_epsilon(tree_event(z), 1e-5) <= eps
    assert event_epsilon(tree_event(z * (1 - 1e-4)), 1e-5) > eps


def test_calibration_rejects_bad_targets() -> None:
    for eps, delta in [(0.0, 1e-5), (math.inf, 1e-5), (1.0, 0.0), (1.0, 1.0)]:
        with pytest.raises(ValueError):
            calibrate_noise_multiplier(tree_event, eps, delta)
