"""selection_k: private_selection's duration against its hidden K, before and after the schedule.

Issue 22, item 6: Papernot & Steinke's theorem needs the number K of competing repetitions
hidden, but the job used to run K fits of a random candidate, so its duration grew with K
(measured through the API: correlation 0.986). Now it runs a public schedule of F slots, every
slot fitting every candidate, and only the first K compete
(``service/optimizers/private_selection.py``).

This suite times, interleaved in one process, for each K of a spread over [1, F]:

- **after**: ``PrivateSelection.run`` on the default plan with K forced to that value (the
  optimizer's test hook: K is drawn as usual, then replaced), which is exactly the work a job
  with that K does;
- **before**: the previous loop, kept below for timing only — K repetitions, each fitting one
  uniformly drawn candidate and noising its score.

It prints the median duration per K for both and Pearson's correlation of duration with K over
all timed runs (≈ 1 before, ≈ 0 after: only run-to-run noise is left), and the after/before
ratio of the mean duration (the schedule's compute price). Rows: synthetic, ``--rows`` × 10
numeric features plus an intercept; the default candidates (``dp_agd``, ``dp_gd``) at ε = 1.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from typing import Any

import numpy as np

from bench.data import results_dir, save_json, seconds, synthetic_rows
from service.models.registry import parse_model_spec
from service.optimizers.kits.base import PrivacyTarget
from service.optimizers.kits.planning import JobPlan, plan_from_json, plan_job
from service.optimizers.kits.registry import get_optimizer
from service.optimizers.kits.selection_kit import spawn, with_l2
from service.optimizers.private_selection import PrivateSelection, correct_count
from service.privacy.secure_random import SecureRandom
from service.privacy.secure_release import secure_gaussian

MODEL = {"type": "logistic_regression", "l2": 1e-4, "fit_intercept": True}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rows", type=int, default=5_000, help="synthetic rows")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per K and variant")
    parser.add_argument("--smoke", action="store_true", help="500 rows, 1 repeat, 3 values of K")


def _before(job: JobPlan, X: np.ndarray, y: np.ndarray, k: int, rng: SecureRandom) -> None:
    """The previous run loop (timing only): K repetitions of one random candidate."""
    hp = job.plan.hyperparameters
    candidates = hp["candidates"]
    plans = [plan_from_json(c["plan"]) for c in candidates]
    optimizers = [get_optimizer(str(c["optimizer"])) for c in candidates]
    losses = [with_l2(job.loss, c.get("l2")) for c in candidates]
    control, fits = spawn(rng, 2)
    best = -math.inf
    for _ in range(k):
        j = control.integer(len(candidates))
        w = np.asarray(optimizers[j].fit(plans[j], losses[j], X, y, fits, lambda s: None))
        count = np.array([float(correct_count(job.loss, w, X, y))])
        best = max(best, float(secure_gaussian(count, hp["score_noise_std"], 1.0, control)[0]))


def _after(job: JobPlan, X: np.ndarray, y: np.ndarray, k: int, rng: SecureRandom) -> None:
    PrivateSelection().run(job.plan, job.loss, X, y, rng, lambda s: None, force_repetitions=k)


def _pearson(xs: list[float], ys: list[float]) -> float:
    return float(np.corrcoef(np.asarray(xs, dtype=float), np.asarray(ys, dtype=float))[0, 1])


def run(args: argparse.Namespace) -> None:
    rows = 500 if args.smoke else args.rows
    repeat = 1 if args.smoke else args.repeat
    X, y = synthetic_rows(rows, 10, seed=3)
    X = np.hstack([X, np.ones((rows, 1))])
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
    job = plan_job(
        parse_model_spec(MODEL), "private_selection", {}, rows, 10, PrivacyTarget(1.0, 1e-5)
    )
    slots = int(job.plan.hyperparameters["slots"])
    ks = sorted({1, max(1, slots // 4), max(1, slots // 2), max(1, 3 * slots // 4), slots})
    if args.smoke:
        ks = [1, max(1, slots // 2), slots]
    samples: dict[str, dict[int, list[float]]] = {"before": {}, "after": {}}
    order = [(k, variant) for _ in range(repeat) for k in ks for variant in ("before", "after")]
    for k, variant in order:  # interleaved: load drifts hit both variants alike
        body = _before if variant == "before" else _after
        rng = SecureRandom.seeded(1000 * k + len(samples[variant].get(k, [])))
        start = time.perf_counter()
        body(job, X, y, k, rng)
        samples[variant].setdefault(k, []).append(time.perf_counter() - start)
    correlation = {
        variant: _pearson([k for k in ks for _ in by_k[k]], [t for k in ks for t in by_k[k]])
        for variant, by_k in samples.items()
    }
    mean = {
        v: statistics.fmean(t for ts in by_k.values() for t in ts) for v, by_k in samples.items()
    }
    print(
        f"private_selection, {rows} rows × 11, default candidates (dp_agd, dp_gd), ε = 1: "
        f"F = {slots} slots, {job.plan.hyperparameters['fits']} fits per job; "
        f"median of {repeat} run(s) per cell, interleaved\n"
    )
    print("| K | before (K fits) | after (F slots) |")
    print("|---|---|---|")
    for k in ks:
        before = statistics.median(samples["before"][k])
        after = statistics.median(samples["after"][k])
        print(f"| {k} | {seconds(before)} | {seconds(after)} |")
    print(
        f"| corr(duration, K) | {correlation['before']:.3f} | {correlation['after']:.3f} |\n"
        f"| mean duration | {seconds(mean['before'])} | {seconds(mean['after'])} "
        f"(×{mean['after'] / mean['before']:.1f}) |"
    )
    payload: dict[str, Any] = {
        "rows": rows,
        "slots": slots,
        "ks": ks,
        "samples": {v: {str(k): ts for k, ts in by_k.items()} for v, by_k in samples.items()},
        "correlation": correlation,
    }
    save_json(results_dir(args.smoke) / "selection_k.json", payload)
