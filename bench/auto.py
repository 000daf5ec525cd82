"""`auto` on UCI Adult vs the issue's targets, `auto` vs the catalog's best on other public data,
and the error of a private evaluation on Adult's test set (issue 13).

What runs is exactly what the service runs for a job without an optimizer: the body goes through
:func:`service.domain.submission.price_job` (``auto`` resolved from public facts: n = 32,561,
104 features + intercept, ε, δ = 1e-5, binary label), and the resolved optimizer's ``fit`` runs
on the encoded training rows (the worker's call, minus the database). Test accuracy is on
Adult's 16,281-row test file, which the rule never saw (``--explore`` re-runs the rule's
exploration on public data only: Adult's TRAIN file split 2:1, synthetic logistic data,
scikit-learn's breast_cancer, with ``private_selection`` against the fixed rule at the same
(ε, δ); ``--api`` times the auto job through a live server on SQLite and PostgreSQL, then
registers Adult's test file as a holdout and evaluates the last auto model on it through
``POST /v1/models/{id}/evaluate``, ``--evaluations`` times at ε = 0.1).
The other datasets use ``--other-runs`` (3) runs per cell, ``--small-runs`` (30) below 1,000
rows; the catalog rivals run at the model's defaults (l2 = 1e-4, no clip), ``private_tuning``
and ``private_selection`` included; multiclass labels (scikit-learn's iris, wine, digits;
``--small-runs`` seeds) are fitted one-vs-rest as the worker does, against the same rivals but
``private_tuning``, which refuses them.

Speed: each Adult fit of `auto` is followed, in the same process and on the same encoded rows, by
a diffprivlib ``LogisticRegression`` fit at the same ε (objective perturbation, ``data_norm`` = 1,
no extra intercept) — at its most accurate C of the head-to-head run (C = 0.01 at ε = 0.1, 0.1
above: picked on the test set there, the rival's best case) with numpy's default BLAS threads and
with BLAS on one thread (threadpoolctl; diffprivlib's time depends on it on this 2-core machine),
and at its default C = 1. Reported: the median fit times and their ratios (auto / diffprivlib);
interleaving the fits keeps the machine's load the same for both, so the ratio holds where the
absolute times do not.

Evaluation: the `auto` model fitted at ε = 1 is evaluated privately on Adult's test set as a
registered holdout would be (:mod:`service.domain.evaluation`'s plan and row statistics, same
code as the worker), at ε = 0.1, δ = 1e-5; reported: |noised accuracy − exact accuracy| (exact
computed here only) against the plan's public noise level.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time
from types import SimpleNamespace
from typing import Any

import numpy as np

from bench.data import (
    Dataset,
    accuracy,
    load_adult,
    machine_description,
    plan,
    results_dir,
    save_json,
    synthetic_rows,
)
from service.domain.evaluation import evaluate_rows
from service.domain.submission import DatasetFacts, price_job
from service.optimizers.auto import AVERAGED, CLIP, L2_FACTOR
from service.privacy.evaluation import accuracy_std, loss_clip_bound, plan_evaluation
from service.privacy.gdp import gdp_mu
from service.schemas import JobCreate

TARGETS = {0.1: 83.1, 0.5: 84.1, 1.0: 84.35, 2.0: 84.4}
DELTA = 1e-5
#: diffprivlib's most accurate C per ε in the head-to-head run (bench/results/head_to_head.json).
DIFFPRIVLIB_BEST_C = {0.1: 0.01, 0.5: 0.1, 1.0: 0.1, 2.0: 0.1}
#: Pause before each timed fit: OpenBLAS's worker threads spin for a while after a
#: multi-threaded call (diffprivlib's), which would tax whichever fit runs next.
SETTLE_S = 0.3
RIVALS = (
    "dp_agd",
    "dp_agd_averaged",
    "dp_gd",
    "output_perturbation_gd",
    "noisy_sgd_bst14",
    "private_tuning",
    "private_selection",
)
#: --explore: (label, optimizer, model overrides, params) at C = 1/2; "auto" is the service's job.
EXPLORE_ARMS: tuple[tuple[str, str, dict[str, Any], dict[str, Any]], ...] = (
    ("dp_agd, l2 1e-4 (old rule at n ≥ 1e4)", "dp_agd", {"l2": 1e-4}, {}),
    ("dp_gd, l2 1e-4", "dp_gd", {"l2": 1e-4}, {}),
    ("dp_agd_averaged, l2 1e-4", "dp_agd_averaged", {"l2": 1e-4}, {}),
    (
        "private_selection {dp_agd_averaged, dp_gd}",
        "private_selection",
        {"l2": 1e-4},
        {"candidates": [{"optimizer": "dp_agd_averaged"}, {"optimizer": "dp_gd"}]},
    ),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--epsilons", type=float, nargs="+", default=[0.1, 0.5, 1.0, 2.0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--other-runs", type=int, default=3)
    parser.add_argument(
        "--small-runs",
        type=int,
        default=30,
        help="runs per cell on the other datasets below 1,000 rows (breast_cancer: 169 test "
        "rows, a 3-run mean swings by 20 points)",
    )
    parser.add_argument("--evaluations", type=int, default=10)
    parser.add_argument("--smoke", action="store_true", help="one ε, one run, small data")
    parser.add_argument(
        "--explore",
        action="store_true",
        help="the rule's evidence on public data only (Adult TRAIN split 2:1, synthetic, "
        "breast_cancer): auto vs the old rule, dp_gd, averaging, private selection",
    )
    parser.add_argument("--explore-runs", type=int, default=6)
    parser.add_argument(
        "--api",
        action="store_true",
        help="the auto job on Adult through a live server (SQLite and PostgreSQL): submit → "
        "model readable, p50 over --api-jobs jobs per ε",
    )
    parser.add_argument("--api-jobs", type=int, default=10)


def auto_job(data: Dataset, eps: float) -> Any:
    """The priced ``auto`` job for ``data`` (public facts only)."""
    facts = DatasetFacts(
        id="bench",
        n_rows=data.n,
        n_features=data.d - 1,
        delta=DELTA,
        label_type="binary",
        classes=None,
        retired=False,
    )
    body = JobCreate.model_validate(
        {
            "dataset_id": "bench",
            "model": {"type": "logistic_regression", "fit_intercept": True},
            "privacy": {"epsilon": eps, "delta": DELTA},
        }
    )
    return price_job(facts, body)


def fit_auto(data: Dataset, eps: float, seed: int) -> tuple[np.ndarray, float, dict[str, Any]]:
    priced = auto_job(data, eps)
    planned = priced.planned
    start = time.perf_counter()
    w = planned.optimizer.fit(
        planned.plan, planned.loss, data.X, data.y, np.random.default_rng(seed), lambda s: None
    )
    return (
        w,
        time.perf_counter() - start,
        priced.plan_json["auto"]
        | {
            "steps": planned.plan.total_steps,
            "model": priced.spec["model"],
        },
    )


def diffprivlib_seconds(
    data: Dataset, eps: float, c: float, seed: int, threads: int | None
) -> float:
    """Wall time of one diffprivlib ``LogisticRegression`` fit on the same rows (BLAS limited to
    ``threads`` threads, numpy's default when None)."""
    import warnings

    from diffprivlib.models import LogisticRegression
    from threadpoolctl import threadpool_limits

    clf = LogisticRegression(
        epsilon=eps, data_norm=1.0, C=c, fit_intercept=False, random_state=seed
    )
    with warnings.catch_warnings(), threadpool_limits(threads):
        warnings.simplefilter("ignore")
        start = time.perf_counter()
        clf.fit(data.X, data.y)
        return time.perf_counter() - start


def rival_accuracy(data: Dataset, name: str, eps: float, runs: int) -> float | None:
    """A catalog optimizer at its defaults (model defaults: l2 = 1e-4, no clip)."""
    model = {"type": "logistic_regression", "l2": 1e-4, "fit_intercept": True}
    try:
        job = plan(name, model, data.n, data.d, eps, DELTA)
    except ValueError:
        return None
    accs = []
    for seed in range(runs):
        w = job.optimizer.fit(
            job.plan, job.loss, data.X, data.y, np.random.default_rng(seed), lambda s: None
        )
        accs.append(accuracy(w, data.Xt, data.yt))
    return statistics.mean(accs)


#: Multiclass rivals: RIVALS one-vs-rest at the model's defaults, but private_tuning (which
#: refuses categorical labels).
MULTICLASS_RIVALS = tuple(name for name in RIVALS if name != "private_tuning")


def multiclass_datasets(smoke: bool) -> list[tuple[str, Dataset]]:
    """scikit-learn's iris, wine (features on their own ranges) and digits (pixels on [0, 16]),
    70/30 split, labels as class indices (in ``Dataset.y``/``yt``)."""
    from sklearn.datasets import load_digits, load_iris, load_wine

    sets = []
    for name, loader, low, high in (
        ("iris", load_iris, None, None),
        ("wine", load_wine, None, None),
        ("digits", load_digits, np.zeros(64), np.full(64, 16.0)),
    ):
        X, y = loader(return_X_y=True)
        sets.append((name, scaled_rows(name, X, y.astype(float), int(0.7 * len(y)), low, high)))
    return sets[:1] if smoke else sets


def one_vs_rest_accuracy(job: Any, data: Dataset, classes: int, seed: int) -> float:
    """Fit ``job`` one-vs-rest as the worker does (one rng, class by class) and score argmax;
    a joint multinomial job (what ``auto`` runs for these labels now) as the worker fits it."""
    from service.optimizers.kits.one_vs_rest import class_plan_of

    class_plan = class_plan_of(job.plan)
    if class_plan is None:
        from bench.multiclass import fit_scores

        W, _ = fit_scores(job, data, classes, seed)
        return float(np.mean(np.argmax(data.Xt @ W.T, axis=1) == data.yt))
    rng = np.random.default_rng(seed)
    W = np.stack(
        [
            job.optimizer.fit(
                class_plan, job.loss, data.X, np.where(data.y == k, 1.0, -1.0), rng, lambda s: None
            )
            for k in range(classes)
        ]
    )
    return float(np.mean(np.argmax(data.Xt @ W.T, axis=1) == data.yt))


def multiclass_rows(smoke: bool, runs: int) -> list[dict[str, Any]]:
    """auto (the service's job for a categorical label) vs each catalog optimizer at its
    defaults, one-vs-rest, mean test accuracy (%) over ``runs`` seeds."""
    from service.models.registry import parse_model_spec
    from service.optimizers.kits.planning import plan_job
    from service.privacy.target import InfeasibleSpec, PrivacyTarget

    rows = []
    for name, data in multiclass_datasets(smoke):
        classes = int(data.y.max()) + 1
        majority = max(float(np.mean(data.yt == k)) for k in range(classes))
        for eps in (0.1,) if smoke else (0.1, 0.5, 1.0, 2.0):
            facts = DatasetFacts(
                id="bench", n_rows=data.n, n_features=data.d - 1, delta=DELTA,
                label_type="categorical", classes=classes, retired=False,
            )  # fmt: skip
            body = JobCreate.model_validate(
                {
                    "dataset_id": "bench",
                    "model": {"type": "logistic_regression", "fit_intercept": True},
                    "privacy": {"epsilon": eps, "delta": DELTA},
                }
            )
            jobs = {"auto": price_job(facts, body).planned}
            spec = parse_model_spec({"type": "logistic_regression", "l2": 1e-4})
            for rival in MULTICLASS_RIVALS:
                target = PrivacyTarget(eps, DELTA)
                try:
                    jobs[rival] = plan_job(
                        spec, rival, {}, data.n, data.d - 1, target, classes=classes
                    )
                except InfeasibleSpec:
                    continue  # e.g. private_selection below ε ≈ 0.2 per class
            means = {
                key: statistics.mean(
                    one_vs_rest_accuracy(job, data, classes, s) for s in range(runs)
                )
                for key, job in jobs.items()
            }
            best = max((v, k) for k, v in means.items() if k != "auto")
            rows.append(
                {
                    "dataset": f"{name} ({classes} classes)",
                    "epsilon": eps,
                    "auto": means["auto"] * 100,
                    "best": best[0] * 100,
                    "best_name": best[1],
                    "majority": majority * 100,
                    "runs": runs,
                }
            )
            print(rows[-1], flush=True)
    return rows


def other_datasets(smoke: bool) -> list[Dataset]:
    """Public data other than Adult: synthetic logistic rows and scikit-learn's breast_cancer
    (features mapped to [−1, 1] by the dataset's documented ranges, rows scaled to ‖x‖ ≤ 1)."""
    from sklearn.datasets import load_breast_cancer

    n = 4000 if smoke else 30000
    X, y = synthetic_rows(n, 20, seed=1)
    X = np.column_stack([X, np.ones(n)]) / math.sqrt(21)
    cut = 2 * n // 3
    synth = Dataset("synthetic d=20", X[:cut], y[:cut], X[cut:], y[cut:])
    bc = load_breast_cancer()
    lo, hi = bc.data.min(axis=0), bc.data.max(axis=0)  # the data set's documented ranges
    Xb = np.column_stack([2 * (bc.data - lo) / (hi - lo) - 1, np.ones(len(bc.data))])
    Xb /= math.sqrt(Xb.shape[1])
    yb = np.where(bc.target == 1, 1.0, -1.0)
    order = np.random.default_rng(0).permutation(len(yb))
    tr, te = order[:400], order[400:]
    cancer = Dataset("breast_cancer", Xb[tr], yb[tr], Xb[te], yb[te])
    return [synth, cancer]


def evaluation_error(data: Dataset, w: np.ndarray, eps: float, count: int) -> dict[str, Any]:
    """Private evaluation of ``w`` on the test rows as a holdout: errors of the noised accuracy."""
    norm = float(np.linalg.norm(w))
    clip = loss_clip_bound("binary", norm, None)
    eval_plan = plan_evaluation("binary", len(data.yt), eps, DELTA, clip)
    model = SimpleNamespace(coefficients=w.tolist(), intercept=None)
    exact = evaluate_rows(eval_plan, model, data.Xt, data.yt, None)  # type: ignore[arg-type]
    rng = np.random.default_rng(12345)
    errors = []
    loss_errors = []
    for _ in range(count):
        noised = evaluate_rows(eval_plan, model, data.Xt, data.yt, rng)  # type: ignore[arg-type]
        errors.append(abs(float(noised["accuracy"]) - float(exact["accuracy"])))
        loss_errors.append(abs(float(noised["log_loss"]) - float(exact["log_loss"])))
    return {
        "epsilon": eps,
        "delta": DELTA,
        "n": len(data.yt),
        "exact_accuracy": exact["accuracy"],
        "accuracy_std_declared": accuracy_std(eval_plan),
        "mean_abs_error": statistics.mean(errors),
        "max_abs_error": max(errors),
        "log_loss_clip": clip,
        "exact_log_loss": exact["log_loss"],
        "log_loss_mean_abs_error": statistics.mean(loss_errors),
    }


def adult_train_split(adult: Dataset) -> Dataset:
    """Adult's TRAIN file split 2:1 at random (seed 0): the rule's development data. The test
    file is never read by the exploration."""
    order = np.random.default_rng(0).permutation(adult.n)
    cut = 2 * adult.n // 3
    tr, te = order[:cut], order[cut:]
    return Dataset("Adult TRAIN split 2:1", adult.X[tr], adult.y[tr], adult.X[te], adult.y[te])


def arm_accuracy(
    data: Dataset, name: str, model: dict[str, Any], params: dict[str, Any], eps: float, runs: int
) -> float | None:
    """Mean test accuracy (%) of one optimizer/model setting over ``runs`` seeds (100 + s)."""
    spec = {"type": "logistic_regression", "fit_intercept": True, "gradient_clip": CLIP} | model
    try:
        job = plan(name, spec, data.n, data.d, eps, DELTA, params)
    except ValueError:
        return None
    accs = [
        accuracy(
            job.optimizer.fit(
                job.plan, job.loss, data.X, data.y, np.random.default_rng(100 + s), lambda s: None
            ),
            data.Xt,
            data.yt,
        )
        for s in range(runs)
    ]
    return statistics.mean(accs) * 100


def uncapped_accuracy(data: Dataset, eps: float, runs: int) -> float | None:
    """The auto job's tail-averaged optimizer (``dp_agd_centred`` or ``dp_agd_averaged``)
    without its default 400-step cap (max_iterations = 2000, the earlier default), same model
    and seeds; None when auto picks another optimizer."""
    priced = auto_job(data, eps)
    chosen = priced.planned.optimizer.name
    if chosen not in AVERAGED:
        return None
    job = plan(
        chosen,
        priced.spec["model"],
        data.n,
        data.d,
        eps,
        DELTA,
        {"max_iterations": 2000},
    )
    if job.plan.total_steps == priced.planned.plan.total_steps:
        return None  # the cap does not bind: same job as auto
    accs = [
        accuracy(
            job.optimizer.fit(
                job.plan, job.loss, data.X, data.y, np.random.default_rng(100 + s), lambda s: None
            ),
            data.Xt,
            data.yt,
        )
        for s in range(runs)
    ]
    return statistics.mean(accs) * 100


#: Ceilings of the l2 rule compared by :func:`ceiling_sweep` (1.0: no ceiling).
CEILINGS = (1e-4, 1e-3, 3e-3, 1e-2, 1.0)


def scaled_rows(
    name: str, X: np.ndarray, y: np.ndarray, n_train: int, low: Any = None, high: Any = None
) -> Dataset:
    """Public rows mapped to [−1, 1] by ranges (given, else the data set's own documented
    ranges), an intercept column, scaled to ‖x‖ ≤ 1; a random split (seed 0)."""
    low = X.min(axis=0) if low is None else low
    high = X.max(axis=0) if high is None else high
    span = np.where(high > low, high - low, 1.0)
    Xe = np.column_stack([2 * (X - low) / span - 1, np.ones(len(X))]) / math.sqrt(X.shape[1] + 1)
    order = np.random.default_rng(0).permutation(len(y))
    tr, te = order[:n_train], order[n_train:]
    return Dataset(name, Xe[tr], y[tr], Xe[te], y[te])


def small_binary_datasets(smoke: bool) -> list[Dataset]:
    """The l2 ceiling's public data: breast_cancer, wine (class 0 against the rest), digits
    (< 5 against ≥ 5, pixels in [0, 16]) and synthetic logistic rows of several sizes."""
    from sklearn.datasets import load_digits, load_wine

    def synthetic(n: int, d: int, seed: int) -> Dataset:
        X, y = synthetic_rows(n + 3000, d, seed=seed)
        X = np.column_stack([X, np.ones(len(y))]) / math.sqrt(d + 1)
        return Dataset(f"synthetic d={d}", X[:n], y[:n], X[n:], y[n:])

    wine, digits = load_wine(), load_digits()
    sets = [
        other_datasets(smoke)[1],
        scaled_rows("wine 0 vs rest", wine.data, np.where(wine.target == 0, 1.0, -1.0), 120),
        scaled_rows(
            "digits < 5",
            digits.data,
            np.where(digits.target < 5, 1.0, -1.0),
            1200,
            np.zeros(64),
            np.full(64, 16.0),
        ),
        synthetic(400, 20, 3),
        synthetic(1500, 20, 4),
        synthetic(5000, 20, 5),
        synthetic(1000, 5, 6),
        synthetic(3000, 50, 7),
    ]
    return sets[:2] if smoke else sets


def ceiling_sweep(smoke: bool, runs: int) -> tuple[list[str], list[dict[str, Any]]]:
    """The evidence for the l2 rule's ceiling (auto.py's docstring): the averaged method with
    l2 = clamp(9·d·(2L·z₁/n)², 1e-5, ceiling) for each of :data:`CEILINGS`, in every cell
    where the formula exceeds 1e-4 (elsewhere the ceiling does not bind)."""
    lines = [
        f"## The l2 rule's ceiling ({runs} seeds per cell; cells where 9·d·(2L·z₁/n)² > 1e-4)",
        "",
        "| data (n, d) | ε | formula | " + " | ".join(f"ceiling {c:g}" for c in CEILINGS) + " |",
        "|---|---|---|" + "---|" * len(CEILINGS),
    ]
    rows: list[dict[str, Any]] = []
    for data in small_binary_datasets(smoke):
        for eps in (0.1,) if smoke else (0.1, 0.5, 1.0, 2.0):
            raw = L2_FACTOR * data.d * (2 * CLIP / (data.n * gdp_mu(eps, DELTA))) ** 2
            if raw <= 1e-4:
                continue
            cells = [
                arm_accuracy(data, "dp_agd_averaged", {"l2": min(c, max(1e-5, raw))}, {}, eps, runs)
                for c in CEILINGS
            ]
            rows.append({"data": data.name, "n": data.n, "epsilon": eps, "cells": cells})
            text = " | ".join("—" if c is None else f"{c:.2f}" for c in cells)
            lines.append(f"| {data.name} ({data.n}, {data.d}) | {eps:g} | {raw:.1e} | {text} |")
            print(lines[-1], flush=True)
    return lines, rows


#: Huber thresholds δ = c·B compared by :func:`huber_sweep` (auto uses HUBER_FRACTION).
HUBER_FRACTIONS = (0.01, 0.03, 0.1)


def regression_datasets(smoke: bool) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """Public regression data for the huber_delta rule: scikit-learn's diabetes (its labels
    25–346, and centred), make_regression (6,000 rows, d = 8), Friedman #1 (3,000 rows) and a
    20,000-row linear set with features in [−1, 1] (labels shifted by +5)."""
    from sklearn import datasets

    X, y = datasets.load_diabetes(return_X_y=True)
    sets = [("diabetes", X, y), ("diabetes centred", X, y - 152.0)]
    X, y = datasets.make_regression(n_samples=6000, n_features=8, noise=10, random_state=0)
    sets.append(("make_regression", X, y))
    X, y = datasets.make_friedman1(n_samples=3000, noise=1.0, random_state=0)
    sets.append(("friedman1", X, y))
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (20000, 20))
    sets.append(("linear", X, X @ rng.normal(size=20) * 3 + rng.normal(size=20000) + 5))
    return sets[2:3] if smoke else sets


def huber_sweep(smoke: bool, runs: int) -> list[str]:
    """The evidence for auto's huber_delta = 0.03·B (auto.py's docstring): test R² (70/30
    split, B = max|y|, each feature's range as its public bounds) of the auto job, of the old
    default (δ = 1, l2 from the rule at L = δ) and of δ = c·B with l2 from the rule at L = 1."""
    import pandas as pd
    from sklearn.model_selection import train_test_split

    from service.data.encoding import Encoder
    from service.data.spec import NumericFeature

    labels = ["auto", "old default", *(f"c = {c:g}" for c in HUBER_FRACTIONS)]
    lines = [
        f"## huber_regression: δ = c·B ({runs} seeds per cell, R² on a 30 % test split)",
        "",
        "| data (n, d) | ε | " + " | ".join(labels) + " |",
        "|---|---|" + "---|" * len(labels),
    ]
    for name, raw, labels_raw in regression_datasets(smoke):
        names = [f"f{j}" for j in range(raw.shape[1])]
        features = tuple(
            NumericFeature(name=f, min=float(col.min()), max=float(col.max()))
            for f, col in zip(names, raw.T, strict=True)
        )
        X = Encoder(features=features, fit_intercept=True).encode(pd.DataFrame(raw, columns=names))
        Xtr, Xte, ytr, yte = train_test_split(X, labels_raw, test_size=0.3, random_state=0)
        bound = float(np.abs(labels_raw).max())
        n, d = Xtr.shape
        for eps in (0.1,) if smoke else (0.1, 0.5, 1.0, 2.0):
            facts = DatasetFacts(
                id="bench", n_rows=n, n_features=d - 1, delta=DELTA, label_type="numeric",
                classes=None, retired=False,
            )  # fmt: skip
            model = {"type": "huber_regression", "label_bound": bound}
            body = JobCreate.model_validate(
                {"dataset_id": "bench", "model": model, "privacy": {"epsilon": eps, "delta": DELTA}}
            )
            z = 2.0 / (n * gdp_mu(eps, DELTA))
            jobs = [
                price_job(facts, body).planned,
                plan("dp_agd_averaged", {**model, "l2": min(1e-3, max(1e-5, 9 * d * z * z))},
                     n, d, eps, DELTA),
                *(
                    plan("dp_agd_averaged", {**model, "huber_delta": c * bound,
                         "l2": min(1e-3, max(1e-5, 9 * d * z * z))}, n, d, eps, DELTA)
                    for c in HUBER_FRACTIONS
                ),
            ]  # fmt: skip
            cells = [
                statistics.mean(
                    r_squared(job.optimizer.fit(job.plan, job.loss, Xtr, ytr,
                                                np.random.default_rng(s), lambda s: None), Xte, yte)
                    for s in range(runs)
                )
                for job in jobs
            ]  # fmt: skip
            text = " | ".join(f"{c:.3f}" for c in cells)
            lines.append(f"| {name} ({n}, {d}) | {eps:g} | {text} |")
            print(lines[-1], flush=True)
    return lines


def r_squared(w: np.ndarray, X: np.ndarray, y: np.ndarray) -> float:
    return float(1.0 - np.mean((X @ w - y) ** 2) / np.var(y))


def explore(args: argparse.Namespace) -> None:
    """The evidence table of service/optimizers/auto.py's docstring (public data only)."""
    runs = 1 if args.smoke else args.explore_runs
    epsilons = args.epsilons[:1] if args.smoke else args.epsilons
    datasets = [adult_train_split(load_adult()), *other_datasets(args.smoke)]
    labels = [
        "auto (the service's job)",
        "auto without the 400-step cap",
        *(arm[0] for arm in EXPLORE_ARMS),
    ]
    lines = [
        f"# auto --explore: public data only, {runs} seeds per cell, δ = {DELTA:g}, C = 1/2",
        "",
        "| data (n, d) | ε | " + " | ".join(labels) + " |",
        "|---|---|" + "---|" * len(labels),
    ]
    rows: list[dict[str, Any]] = []
    for data in datasets:
        for eps in epsilons:
            cells: list[float | None] = [
                statistics.mean(
                    accuracy(fit_auto(data, eps, 100 + s)[0], data.Xt, data.yt) for s in range(runs)
                )
                * 100,
                uncapped_accuracy(data, eps, runs),
            ]
            for _, name, model, params in EXPLORE_ARMS:
                cells.append(arm_accuracy(data, name, model, params, eps, runs))
            rows.append(
                {
                    "data": data.name,
                    "n": data.n,
                    "d": data.d,
                    "epsilon": eps,
                    "cells": dict(zip(labels, cells, strict=True)),
                }
            )
            text = " | ".join("—" if c is None else f"{c:.2f}" for c in cells)
            lines.append(f"| {data.name} ({data.n}, {data.d}) | {eps:g} | {text} |")
            print(lines[-1], flush=True)
    ceiling_lines, ceiling_rows = ceiling_sweep(args.smoke, 40 if not args.smoke else 1)
    lines += ["", *ceiling_lines, "", *huber_sweep(args.smoke, 5 if not args.smoke else 1)]
    out = results_dir(args.smoke)
    save_json(out / "auto_explore.json", {"runs": runs, "rows": rows, "l2_ceiling": ceiling_rows})
    lines += ["", f"Load average at the end: {os.getloadavg()[0]:.1f}.", ""]
    (out / "auto-explore.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


#: ε of each private evaluation on the holdout (the issue's figure).
EVAL_EPSILON = 0.1


def holdout_evaluations(
    owner: Any, analyst: Any, model_id: str, count: int, rows: int
) -> dict[str, Any]:
    """Register ``adult-test.csv`` (written beside the training file) as a holdout, evaluate
    ``model_id`` on it ``count`` times through the API at ε = EVAL_EPSILON, and compare the
    noised accuracies with the exact one (computed here from the released coefficients and the
    bench's own encoding of the file's first ``rows`` test rows, which the released feature
    names must match)."""
    from bench.scaling import adult_dataset_body

    body = adult_dataset_body("adult-test.csv") | {"name": "adult-holdout"}
    body["budget"] = {"epsilon": EVAL_EPSILON * count + 1.0, "delta": 1e-5}
    response = owner.post("/v1/datasets", json=body)
    response.raise_for_status()
    holdout = response.json()["id"]
    owner.post(f"/v1/datasets/{holdout}/grants", json={"principal": "analyst"}).raise_for_status()
    model = analyst.get(f"/v1/models/{model_id}").json()
    adult = load_adult()
    assert adult.encoder is not None and model["feature_names"] == adult.encoder.feature_names
    w = np.asarray([*model["coefficients"], model["intercept"]], dtype=np.float64)
    exact = accuracy(w, adult.Xt[:rows], adult.yt[:rows])
    request = {"dataset_id": holdout, "privacy": {"epsilon": EVAL_EPSILON, "delta": DELTA}}
    noised, stds = [], []
    for _ in range(count):
        out = analyst.post(f"/v1/models/{model_id}/evaluate", json=request).json()
        while out["status"] not in ("succeeded", "failed", "cancelled"):
            time.sleep(0.02)
            out = analyst.get(f"/v1/models/{model_id}/evaluations/{out['id']}").json()
        if out["status"] != "succeeded":
            raise RuntimeError(f"evaluation ended {out['status']}")
        noised.append(float(out["metrics"]["accuracy"]))
        stds.append(float(out["plan"]["hyperparameters"]["accuracy_std"]))
    budget = owner.get(f"/v1/datasets/{holdout}/budget").json()
    errors = [abs(a - exact) for a in noised]
    return {
        "n": rows,
        "count": count,
        "exact_accuracy": exact,
        "mean_abs_error": statistics.mean(errors),
        "max_abs_error": max(errors),
        "accuracy_std": stds[0],
        "spent_epsilon": budget["epsilon_spent"],
    }


def api_latency(args: argparse.Namespace) -> None:
    """Submit → model readable for the auto job (no optimizer named) on Adult's TRAIN file,
    through a live server with one worker, on SQLite and PostgreSQL (test accuracy not read)."""
    import tempfile
    from pathlib import Path

    from bench import service_overhead as so
    from bench.data import ADULT_COLUMNS, read_adult_frame
    from bench.scaling import adult_dataset_body
    from tests.support.fixtures import DEFAULT_PG
    from tests.support.live import start_server

    jobs = 2 if args.smoke else args.api_jobs
    epsilons = args.epsilons[:1] if args.smoke else args.epsilons
    lines = [
        f"# auto on Adult through the API: submit → model readable, {jobs} jobs per ε",
        "",
        "| database | ε | chosen | p50 (s) | p95 (s) |",
        "|---|---|---|---|---|",
    ]
    holdout: dict[str, Any] = {}
    model_id = ""
    for backend in ("sqlite", "postgres"):
        with tempfile.TemporaryDirectory() as tmp:
            home = Path(tmp)
            roots = home / "data"
            roots.mkdir()
            frame = read_adult_frame("train")
            if args.smoke:
                frame = frame.head(2000)
            frame[ADULT_COLUMNS].to_csv(roots / "adult.csv", index=False)
            url = so._database_url(backend, home, DEFAULT_PG)
            server = start_server(url, data_roots=[roots], home=home)
            try:
                owner = server.client(server.key("owner", "owner"))
                analyst = server.client(server.key("analyst", "analyst"))
                response = owner.post("/v1/datasets", json=adult_dataset_body("adult.csv"))
                response.raise_for_status()
                dataset_id = response.json()["id"]
                owner.post(f"/v1/datasets/{dataset_id}/grants", json={"principal": "analyst"})
                for eps in epsilons:
                    request = {
                        "dataset_id": dataset_id,
                        "model": {"type": "logistic_regression", "fit_intercept": True},
                        "privacy": {"epsilon": eps, "delta": 1e-6},
                    }
                    seconds, chosen = [], ""
                    for _ in range(jobs):
                        start = time.perf_counter()
                        job = analyst.post("/v1/jobs", json=request).json()
                        chosen = job["optimizer"]["name"]
                        while True:
                            state = analyst.get(f"/v1/jobs/{job['id']}").json()
                            if state["status"] in ("succeeded", "failed", "cancelled"):
                                break
                            time.sleep(0.005)
                        if state["status"] != "succeeded":
                            raise RuntimeError(f"auto job ended {state['status']}")
                        analyst.get(f"/v1/models/{state['model_id']}").raise_for_status()
                        seconds.append(time.perf_counter() - start)
                    lines.append(
                        f"| {backend} | {eps:g} | {chosen} | {statistics.median(seconds):.3f} | "
                        f"{so.percentile(seconds, 0.95):.3f} |"
                    )
                    print(lines[-1], flush=True)
                    model_id = state["model_id"]
                if backend == "sqlite":
                    test = read_adult_frame("test")
                    if args.smoke:
                        test = test.head(1000)
                    test[ADULT_COLUMNS].to_csv(roots / "adult-test.csv", index=False)
                    holdout = holdout_evaluations(
                        owner, analyst, model_id, 3 if args.smoke else args.evaluations, len(test)
                    )
            finally:
                server.stop()
                so._drop(backend, url, DEFAULT_PG)
    lines += [
        "",
        f"## Private evaluation through the API: adult.test registered as a holdout "
        f"(n = {holdout['n']}), ε = {EVAL_EPSILON}, δ = {DELTA}",
        "",
        f"The last auto model (ε = {epsilons[-1]:g}) evaluated {holdout['count']} times through "
        f"`POST /v1/models/{{id}}/evaluate`. Exact accuracy {holdout['exact_accuracy'] * 100:.3f} "
        f"% (computed here only, from the released coefficients); noised: mean |error| "
        f"{holdout['mean_abs_error'] * 100:.4f} points, max {holdout['max_abs_error'] * 100:.4f}; "
        f"declared std {holdout['accuracy_std'] * 100:.4f} points. The holdout's ledger: "
        f"spent ε = {holdout['spent_epsilon']:g} for {holdout['count']} evaluations "
        f"({EVAL_EPSILON} each).",
        "",
        f"Load average at the end: {os.getloadavg()[0]:.1f} (2 shared cores).",
        "",
    ]
    (results_dir(args.smoke) / "auto-api.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def run(args: argparse.Namespace) -> None:
    if args.explore:
        explore(args)
        return
    if args.api:
        api_latency(args)
        return
    adult = load_adult()
    epsilons = args.epsilons[:1] if args.smoke else args.epsilons
    runs = 1 if args.smoke else args.runs
    if args.smoke:
        adult = adult.head(4000, 2000)
    rows: list[dict[str, Any]] = []
    models: dict[float, np.ndarray] = {}
    timed_runs = max(runs, 5)  # medians of at least 5 fits for the speed ratio
    for eps in epsilons:
        accs, times, record = [], [], {}
        rival: dict[str, list[float]] = {"best_c": [], "best_c_1_thread": [], "c_1": []}
        best_c = DIFFPRIVLIB_BEST_C.get(eps, 0.1)
        for seed in range(timed_runs):
            time.sleep(SETTLE_S)
            w, seconds, record = fit_auto(adult, eps, seed)
            times.append(seconds)
            if seed < runs:
                accs.append(accuracy(w, adult.Xt, adult.yt))
                models.setdefault(eps, w)
            for key, c, threads in (
                ("best_c", best_c, None),
                ("best_c_1_thread", best_c, 1),
                ("c_1", 1.0, None),
            ):
                time.sleep(SETTLE_S)
                rival[key].append(diffprivlib_seconds(adult, eps, c, seed, threads))
        fit_median = statistics.median(times)
        rivals = {k: statistics.median(v) for k, v in rival.items()}
        rows.append(
            {
                "epsilon": eps,
                "mean": statistics.mean(accs) * 100,
                "std": statistics.pstdev(accs) * 100,
                "target": TARGETS.get(eps),
                "fit_median_s": fit_median,
                "fit_runs": timed_runs,
                "diffprivlib_best_c": best_c,
                "diffprivlib_median_s": rivals,
                "ratio": {k: fit_median / v for k, v in rivals.items()},
                "choice": record,
            }
        )
        print(
            f"adult ε={eps}: {rows[-1]['mean']:.2f} ± {rows[-1]['std']:.2f}, fit "
            f"{fit_median * 1000:.0f} ms, / diffprivlib {rows[-1]['ratio']}",
            flush=True,
        )

    others: list[dict[str, Any]] = []
    for data in other_datasets(args.smoke):
        for eps in epsilons:
            k = 1 if args.smoke else (args.other_runs if data.n >= 1000 else args.small_runs)
            auto_acc = statistics.mean(
                accuracy(fit_auto(data, eps, s)[0], data.Xt, data.yt) for s in range(k)
            )
            rivals = {name: rival_accuracy(data, name, eps, k) for name in RIVALS}
            best = max((v, n) for n, v in rivals.items() if v is not None)
            others.append(
                {
                    "dataset": data.name,
                    "epsilon": eps,
                    "auto": auto_acc * 100,
                    "best": best[0] * 100,
                    "best_name": best[1],
                    "majority": data.majority() * 100,
                    "runs": k,
                }
            )
            print(others[-1], flush=True)

    others += multiclass_rows(args.smoke, 1 if args.smoke else args.small_runs)

    eval_eps = 1.0 if 1.0 in models else epsilons[0]
    evaluation = evaluation_error(
        adult, models[eval_eps], 0.1, 1 if args.smoke else args.evaluations
    )
    evaluation["model_epsilon"] = eval_eps

    out = results_dir(args.smoke)
    save_json(out / "auto.json", {"adult": rows, "others": others, "evaluation": evaluation})
    lines = [
        "# auto on UCI Adult (replace-one, δ = 1e-5, no optimizer named, no tuning)",
        "",
        f"{runs} run(s) per ε; test accuracy in % on adult.test; fit = the optimizer's fit "
        f"(median of {timed_runs}).",
        "",
        "| ε | auto | target | chosen | steps | fit (median) |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        choice = r["choice"]
        chosen = f"{choice['optimizer']}, gradient_clip = {choice['model'].get('gradient_clip')}"
        lines.append(
            f"| {r['epsilon']:g} | {r['mean']:.2f} ± {r['std']:.2f} | {r['target']} | {chosen} "
            f"| {choice['steps']} | {r['fit_median_s'] * 1000:.0f} ms |"
        )
    lines += [
        "",
        "## Fit time vs diffprivlib, same process, same rows, fits interleaved",
        "",
        "auto's fit / diffprivlib's `LogisticRegression` fit (medians; ≤ 1 = auto no slower). "
        "Best C = its most accurate C in the head-to-head run (picked on the test set there); "
        "'1 BLAS thread' = diffprivlib with numpy's BLAS on one thread (auto's fit uses one "
        "thread either way).",
        "",
        "| ε | auto fit | diffprivlib best C | ratio | best C, 1 BLAS thread | ratio "
        "| C = 1 (default) | ratio |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        t, q = r["diffprivlib_median_s"], r["ratio"]
        lines.append(
            f"| {r['epsilon']:g} | {r['fit_median_s'] * 1000:.0f} ms | "
            f"{t['best_c'] * 1000:.0f} ms (C = {r['diffprivlib_best_c']:g}) | "
            f"{q['best_c']:.2f} | {t['best_c_1_thread'] * 1000:.0f} ms | "
            f"{q['best_c_1_thread']:.2f} | {t['c_1'] * 1000:.0f} ms | {q['c_1']:.2f} |"
        )
    lines += [
        "",
        "## auto vs the catalog's best at its defaults (other public data)",
        "",
        "| dataset | ε | runs | auto | best catalog optimizer at defaults | majority |",
        "|---|---|---|---|---|---|",
    ]
    for o in others:
        lines.append(
            f"| {o['dataset']} | {o['epsilon']:g} | {o['runs']} | {o['auto']:.2f} | "
            f"{o['best']:.2f} (`{o['best_name']}`) | {o['majority']:.2f} |"
        )
    e = evaluation
    lines += [
        "",
        f"## Private evaluation on adult.test as a holdout (n = {e['n']}), ε = {e['epsilon']}, "
        f"δ = {e['delta']:g}",
        "",
        f"Model: `auto` at ε = {e['model_epsilon']:g}. "
        f"Exact accuracy {e['exact_accuracy'] * 100:.3f} %"
        f" (computed here only). Noised accuracy over {args.evaluations if not args.smoke else 1}"
        f" releases: mean |error| {e['mean_abs_error'] * 100:.4f} points, max "
        f"{e['max_abs_error'] * 100:.4f}; declared noise std {e['accuracy_std_declared'] * 100:.4f}"
        f" points. Log-loss clip B = {e['log_loss_clip']:.2f} (no row clipped), exact "
        f"{e['exact_log_loss']:.4f}, mean |error| {e['log_loss_mean_abs_error']:.4f}. "
        f"Cost: ε = {e['epsilon']} (δ = {e['delta']:g}) on the holdout's ledger.",
        "",
        f"Load average at the end of the run: {os.getloadavg()[0]:.1f} (2 cores, shared: fit "
        "times are indicative only).",
        "",
        machine_description(),
    ]
    text = "\n".join(lines)
    (out / "auto.md").write_text(text + "\n")
    print(text)
