"""Categorical labels: `auto` (the joint multinomial model) vs today's one-vs-rest (issue 24).

What runs is what the service runs for a job on a categorical label: the body goes through
:func:`service.domain.submission.price_job` (``auto`` resolved from public facts n, d, K, ε, δ = 1e-5),
and the resolved optimizer's ``fit`` runs on the encoded training rows (the worker's call, minus
the database). Two arms, side by side on the same rows and seeds:

- **auto**: ``{"type": "logistic_regression"}``, which ``auto`` turns into one joint
  ``multinomial_logistic_regression`` fit (L = √2 whatever K; one release);
- **one-vs-rest**: the same body with ``gradient_clip = 0.5`` set, which keeps the binary loss
  and so one-vs-rest — exactly the job ``auto`` ran for these labels before (it filled in that
  clip itself): K binary fits at μ/√K each, scored by the normalised per-class scores.

Plus non-private multinomial logistic regression (scikit-learn, same encoded rows, C = 1/(n·1e-4))
and the majority class. No diffprivlib / Opacus column: neither is in the bench extra nor
importable here (the note under the table says which are missing); issue 24 quotes them.

Data (public; 70/30 split by ``numpy.random.default_rng(2026)``; each feature mapped onto
[−1, 1] by its range — digits' pixels by their documented [0, 16] —, an intercept column, rows
scaled to ‖x‖ ≤ 1 as the service's encoder does): scikit-learn's iris (150 rows, K = 3), wine
(178, K = 3), digits (1,797, K = 10), and — since no ≥ 10,000-row multiclass set ships with the
installed packages and this machine has no internet (``fetch_covtype`` downloads) — a synthetic
set: 20,000 rows, 20 features uniform on [−1, 1], K = 5 classes drawn from a softmax teacher
(``synthetic_multiclass``). Mean ± std of test accuracy (%) over ``--runs`` seeds (10), and the
mean fit time of each arm.
"""

from __future__ import annotations

import argparse
import math
import time
from importlib.util import find_spec
from typing import Any

import numpy as np

from bench.data import Dataset, pm, results_dir, save_json, seconds
from service.domain.submission import DatasetFacts, price_job
from service.schemas.jobs import JobCreate

DELTA = 1e-5
EPSILONS = (0.5, 1.0, 2.0, 5.0)
SPLIT_SEED = 2026


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--smoke", action="store_true", help="iris only, ε = 1, 2 seeds")
    parser.add_argument("--runs", type=int, default=10, help="seeds per cell")


def encoded_split(
    name: str, X: np.ndarray, y: np.ndarray, low: Any = None, high: Any = None
) -> Dataset:
    """Features mapped onto [−1, 1] by public ranges (given, else the set's documented ones),
    an intercept column, rows scaled to ‖x‖ ≤ 1; 70/30 split by seed 2026; class indices."""
    low = X.min(axis=0) if low is None else low
    high = X.max(axis=0) if high is None else high
    span = np.where(high > low, high - low, 1.0)
    k = X.shape[1] + 1
    E = np.column_stack([np.clip(2 * (X - low) / span - 1, -1, 1), np.ones(len(X))]) / math.sqrt(k)
    order = np.random.default_rng(SPLIT_SEED).permutation(len(y))
    cut = int(0.7 * len(y))
    tr, te = order[:cut], order[cut:]
    return Dataset(name, E[tr], y[tr].astype(float), E[te], y[te].astype(float))


def synthetic_multiclass(n: int = 20_000, d: int = 20, classes: int = 5, seed: int = 7) -> Dataset:
    """n rows uniform on [−1, 1]^d, labels drawn from softmax(Wx) with W ~ N(0, 64I/d) fixed by
    ``seed`` (a learnable but noisy task: the Bayes rate is below 100 %)."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.0, 1.0, size=(n, d))
    W = rng.standard_normal((classes, d)) * 8.0 / math.sqrt(d)
    Z = X @ W.T
    P = np.exp(Z - Z.max(axis=1, keepdims=True))
    P /= P.sum(axis=1, keepdims=True)
    y = np.array([rng.choice(classes, p=p) for p in P])
    return encoded_split(f"synthetic ({n:,} rows)", X, y, -np.ones(d), np.ones(d))


def datasets(smoke: bool) -> list[Dataset]:
    from sklearn.datasets import load_digits, load_iris, load_wine

    iris = encoded_split("iris", *load_iris(return_X_y=True))
    if smoke:
        return [iris]
    return [
        iris,
        encoded_split("wine", *load_wine(return_X_y=True)),
        encoded_split("digits", *load_digits(return_X_y=True), np.zeros(64), np.full(64, 16.0)),
        synthetic_multiclass(),
    ]


def priced(data: Dataset, classes: int, eps: float, model: dict[str, Any]) -> Any:
    facts = DatasetFacts(
        id="bench", n_rows=data.n, n_features=data.d - 1, delta=DELTA,
        label_type="categorical", classes=classes, retired=False,
    )  # fmt: skip
    body = JobCreate.model_validate(
        {"dataset_id": "bench", "model": model, "privacy": {"epsilon": eps, "delta": DELTA}}
    )
    return price_job(facts, body)


def fit_scores(job: Any, data: Dataset, classes: int, seed: int) -> tuple[np.ndarray, float]:
    """(K × d weights, fit seconds) as the worker fits ``job`` (joint, or class by class)."""
    from service.domain.released_model import released_weights
    from service.models.base import fit_labels
    from service.optimizers.kits.one_vs_rest import class_plan_of

    rng = np.random.default_rng(seed)
    start = time.perf_counter()
    class_plan = class_plan_of(job.plan)
    one_vs_rest = np.stack([np.where(data.y == k, 1.0, -1.0) for k in range(classes)])
    if class_plan is None:
        labels = fit_labels(job.loss, one_vs_rest)
        w = job.optimizer.fit(job.plan, job.loss, data.X, labels, rng, lambda s: None)
        W = released_weights(job.loss, w)
    else:
        W = np.stack(
            [
                job.optimizer.fit(class_plan, job.loss, data.X, one_vs_rest[k], rng, lambda s: None)
                for k in range(classes)
            ]
        )
    return W, time.perf_counter() - start


def test_accuracy(job: Any, W: np.ndarray, data: Dataset) -> float:
    from service.domain.released_model import class_probabilities

    probabilities = class_probabilities(W, job.loss, data.Xt)
    return float(np.mean(probabilities.argmax(axis=1) == data.yt))


def non_private(data: Dataset) -> float:
    from sklearn.linear_model import LogisticRegression

    model = LogisticRegression(C=1.0 / (data.n * 1e-4), fit_intercept=False, max_iter=5_000)
    model.fit(data.X, data.y)
    return float(model.score(data.Xt, data.yt))


def run(args: argparse.Namespace) -> None:
    runs = 2 if args.smoke else args.runs
    epsilons = (1.0,) if args.smoke else EPSILONS
    rows: list[dict[str, Any]] = []
    lines = [
        "| data | K | n | ε | auto (joint) % | one-vs-rest % | auto fit | one-vs-rest fit "
        "| non-private % | majority % | auto chose |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for data in datasets(args.smoke):
        classes = int(max(data.y.max(), data.yt.max())) + 1
        majority = max(float(np.mean(data.yt == k)) for k in range(classes)) * 100
        exact = non_private(data) * 100
        for eps in epsilons:
            arms = {
                "auto": priced(data, classes, eps, {"type": "logistic_regression"}),
                "one_vs_rest": priced(
                    data, classes, eps, {"type": "logistic_regression", "gradient_clip": 0.5}
                ),
            }
            accuracy: dict[str, list[float]] = {key: [] for key in arms}
            times: dict[str, list[float]] = {key: [] for key in arms}
            for seed in range(runs):
                for key, job in arms.items():
                    W, took = fit_scores(job.planned, data, classes, seed)
                    accuracy[key].append(test_accuracy(job.planned, W, data))
                    times[key].append(took)
            record = arms["auto"].plan_json["auto"]
            chose = f"{record['multiclass']}, {record['optimizer']}"
            rows.append(
                {
                    "dataset": data.name, "classes": classes, "n": data.n, "epsilon": eps,
                    "auto": accuracy["auto"], "one_vs_rest": accuracy["one_vs_rest"],
                    "auto_seconds": times["auto"], "one_vs_rest_seconds": times["one_vs_rest"],
                    "non_private": exact, "majority": majority, "auto_record": record,
                }
            )  # fmt: skip
            lines.append(
                f"| {data.name} | {classes} | {data.n} | {eps:g} | {pm(accuracy['auto'], 100, 1)} "
                f"| {pm(accuracy['one_vs_rest'], 100, 1)} "
                f"| {seconds(float(np.mean(times['auto'])))} "
                f"| {seconds(float(np.mean(times['one_vs_rest'])))} "
                f"| {exact:.1f} | {majority:.1f} | {chose} |"
            )
            print(lines[-1], flush=True)
    missing = [name for name in ("diffprivlib", "opacus") if find_spec(name) is None]
    table = "\n".join(lines)
    note = (
        f"\n\n{runs} seeds per cell, δ = {DELTA:g}, replace-one adjacency, 70/30 split (seed "
        f"{SPLIT_SEED}). No diffprivlib / Opacus column ({', '.join(missing) or 'none'} not "
        "importable here; issue 24 quotes their numbers)."
    )
    print("\n" + table + note)
    out = results_dir(args.smoke)
    (out / "multiclass.md").write_text(table + note + "\n")
    save_json(out / "multiclass.json", rows)
