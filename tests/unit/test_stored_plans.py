"""A plan stored by the previous release still runs (docs/adding-an-optimizer.md, "Stored plans").

Plans are kept as JSON in the jobs table and a queued job is re-run from that JSON, possibly by a
newer release than the one that planned it. For every registered optimizer,
``tests/unit/data/stored_plans/<name>.json`` holds, written once by the release that added it:

- ``plan``: the plan JSON (``plan_to_json``) of a small public spec (logistic loss, l2 = 0.01,
  n = 200, d = 4, (ε, δ) = (1, 1e-5), default parameters);
- ``weights``: the parameter vector ``fit`` returned on a fixed synthetic dataset with a fixed
  seed (noise on: the same generator gives the same draws).

The tests load each stored plan with today's ``plan_from_json``, refit, and require the same
weights (to float tolerance); and they require today's planner to produce the stored plan from
the same spec (the same plans, the same charges). A fixture is never rewritten to make a test
pass: a difference means stored jobs would run differently, which the compatibility rules forbid.
``python -m tests.unit.test_stored_plans NAME`` writes the fixture of a NEW optimizer only.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from service.models.logistic import LogisticLoss
from service.optimizers.kits.planning import plan_from_json, plan_to_json
from service.optimizers.kits.registry import get_optimizer, optimizer_names
from service.privacy.target import PrivacyTarget

DATA = Path(__file__).parent / "data" / "stored_plans"
N, D = 200, 4
L2 = 0.01
TARGET = PrivacyTarget(1.0, 1e-5)
DATA_SEED, FIT_SEED = 20261123, 7


def _dataset() -> tuple[np.ndarray, np.ndarray]:
    """Rows of norm ≤ 1 with labels ±1 from a noisy linear rule (public, synthetic)."""
    rng = np.random.default_rng(DATA_SEED)
    X = rng.normal(size=(N, D))
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
    w = np.array([1.5, -1.0, 0.5, 0.0])
    y = np.where(X @ w + 0.3 * rng.normal(size=N) > 0, 1.0, -1.0)
    return X, y


def _plan_json(name: str) -> dict[str, Any]:
    optimizer = get_optimizer(name)
    plan = optimizer.plan(optimizer.Params.model_validate({}), LogisticLoss(l2=L2), N, D, TARGET)
    return json.loads(json.dumps(plan_to_json(plan)))


def _fit(name: str, stored_plan: dict[str, Any], seed: int = FIT_SEED) -> np.ndarray:
    X, y = _dataset()
    plan = plan_from_json(stored_plan)
    w = get_optimizer(name).fit(
        plan, LogisticLoss(l2=L2), X, y, np.random.default_rng(seed), lambda _: None
    )
    return np.asarray(w, dtype=np.float64)


def _close(a: Any, b: Any, path: str = "plan") -> None:
    """Equal JSON trees, floats to 1e-9 relative: the planner's arithmetic may be reordered,
    and a calibrated noise multiplier (Brent's method to relative 1e-4 on dp-accounting's RDP,
    ``privacy/calibration.py``) lands up to ~1e-10 apart on another CPU, whose ``exp``/``log``
    round their last bits differently (dp_svrg, dp_svrg_pp and rrpsgd: 1e-12 to 3.5e-11 on an
    AVX2-only AMD EPYC host). 1e-9 still catches any change of the planner's rule."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and set(a) == set(b), (path, a, b)
        for key in a:
            _close(a[key], b[key], f"{path}.{key}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), (path, a, b)
        for i, (x, z) in enumerate(zip(a, b, strict=True)):
            _close(x, z, f"{path}[{i}]")
    elif isinstance(a, float) and not isinstance(b, bool) and isinstance(b, (int, float)):
        assert math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-300), (path, a, b)
    else:
        assert type(a) is type(b) and a == b, (path, a, b)


def test_every_registered_optimizer_has_a_stored_plan() -> None:
    stored = sorted(p.stem for p in DATA.glob("*.json"))
    assert stored == optimizer_names(), "write the fixture of a new optimizer (module docstring)"


@pytest.mark.parametrize("name", optimizer_names())
def test_a_stored_plan_refits_to_the_stored_weights(name: str) -> None:
    """Issue 22 replaced every sampler (OS bits, exact discrete noise on a public grid, exact
    permutations and selections): the stored weights were drawn by numpy's float sampler, and no
    secure sampler reproduces those draws, so the same seed no longer means the same noise. What
    a stored job relies on is still checked: the stored plan decodes and refits, the refit is
    deterministic from a seeded stream, and it releases at the stored plan's scale — its distance
    to the stored weights is of the order of two independent releases' distance."""
    fixture = json.loads((DATA / f"{name}.json").read_text())
    w = _fit(name, fixture["plan"])
    expected = np.array(fixture["weights"], dtype=np.float64)
    assert w.shape == expected.shape
    np.testing.assert_array_equal(w, _fit(name, fixture["plan"]))
    other = _fit(name, fixture["plan"], seed=FIT_SEED + 1)
    spread = max(float(np.linalg.norm(w - other)), 1e-12)
    assert float(np.linalg.norm(w - expected)) <= 6.0 * spread, (w, expected, other)


def _without_rule_text(plan: dict[str, Any]) -> dict[str, Any]:
    """The plan without ``hyperparameters.auto.rule``: the text of the rule that chose, kept for
    the analyst to read. No run reads it (``AutoConfig`` takes the chosen optimizer's name), so
    a stored auto job runs the same whatever today's text; what the rule *chose* — optimizer,
    filled-in values, every other key — is still compared."""
    record = plan.get("hyperparameters", {}).get("auto")
    if not isinstance(record, dict) or "rule" not in record:
        return plan
    hyper = {**plan["hyperparameters"], "auto": {k: v for k, v in record.items() if k != "rule"}}
    return {**plan, "hyperparameters": hyper}


#: ``auto``'s choice may change between releases (the rule improves): a stored auto job runs
#: its stored choice (the refit test above), a new one today's — which must then be exactly the
#: stored plan of the optimizer it chose, plus the public record (the test below).
RULE_MAY_CHANGE = {"auto"}

#: Optimizers whose plan a privacy fix had to change: the stored plan still runs as charged
#: (the refit test above and the optimizer's own test of a stored plan), a new job gets
#: today's plan. private_selection (issue 22, item 6): a public schedule of F slots hides K;
#: its event now composes the truncation's term and its defaults became η = 1, E[K] = 2
#: (tests/unit/test_private_selection.py runs the stored, untruncated plan).
PLAN_CHANGED = {"private_selection"}


@pytest.mark.parametrize(
    "name", [n for n in optimizer_names() if n not in RULE_MAY_CHANGE | PLAN_CHANGED]
)
def test_todays_planner_gives_the_stored_plan(name: str) -> None:
    fixture = json.loads((DATA / f"{name}.json").read_text())
    _close(_without_rule_text(_plan_json(name)), _without_rule_text(fixture["plan"]))


def test_todays_auto_plan_is_its_choices_stored_plan() -> None:
    today = _plan_json("auto")
    hyper = dict(today["hyperparameters"])
    chosen = hyper.pop("auto")["optimizer"]
    fixture = json.loads((DATA / f"{chosen}.json").read_text())
    _close({**today, "hyperparameters": hyper}, fixture["plan"])


@pytest.mark.parametrize("name", optimizer_names())
def test_the_typed_config_reads_the_stored_plan_and_gives_back_its_keys(name: str) -> None:
    stored = json.loads((DATA / f"{name}.json").read_text())["plan"]["hyperparameters"]
    config = get_optimizer(name).Config.from_hyperparameters(stored)
    back = json.loads(json.dumps(config.to_hyperparameters()))
    assert back, "a config reads at least one stored key"
    for key, value in back.items():
        assert key in stored, (name, key)
        _close(value, stored[key], f"hyperparameters.{key}")


@pytest.mark.parametrize("name", optimizer_names())
def test_a_stored_plan_without_a_required_key_is_refused_by_name(name: str) -> None:
    stored = json.loads((DATA / f"{name}.json").read_text())["plan"]["hyperparameters"]
    config = get_optimizer(name).Config
    required = next(
        f.name
        for f in dataclasses.fields(config)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    )
    broken = {k: v for k, v in stored.items() if k != required}
    with pytest.raises(ValueError, match=repr(required)):
        config.from_hyperparameters(broken)


def _write(name: str) -> None:
    path = DATA / f"{name}.json"
    if path.exists():
        raise SystemExit(f"{path} exists: stored fixtures are never rewritten")
    plan = _plan_json(name)
    fixture = {"optimizer": name, "plan": plan, "weights": _fit(name, plan).tolist()}
    path.write_text(json.dumps(fixture, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        _write(arg)
