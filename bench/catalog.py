"""Every optimizer of the catalog on the bundled example: test accuracy and fit time vs ε.

Splits examples/credit.csv 75/25 with a fixed public permutation, encodes it with the service's
own encoder (public bounds only), and for each optimizer (theory-derived defaults, no tuning)
fits at each ε with δ = 1e-6 (δ = 0 where the optimizer is pure-ε only), several runs each.
Reports mean ± std test accuracy and median fit time, next to the majority class and a
non-private scikit-learn fit of the same objective. Measurements, not tests.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import numpy as np
import pandas as pd

from service.data.encoding import Encoder
from service.data.spec import LabelSpec
from service.models.registry import build_loss, parse_model_spec
from service.optimizers.kits.base import InfeasibleSpec, PrivacyTarget
from service.optimizers.kits.planning import plan_job
from service.optimizers.kits.registry import optimizer_names
from tests.support.walkthrough import CREDIT_FEATURES, CREDIT_LABEL, EXAMPLES

CONVEX_MODEL = {"type": "logistic_regression", "l2": 0.01, "fit_intercept": True}
NONCONVEX_MODEL = {"type": "sigmoid_classifier", "l2": 0.01, "fit_intercept": True}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--epsilons", type=float, nargs="+", default=[0.5, 1.0, 2.0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--delta", type=float, default=1e-6)
    parser.add_argument("--optimizers", nargs="*", default=None)
    parser.add_argument("--smoke", action="store_true", help="one ε, one run")


def load_example() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, Encoder]:
    frame = pd.read_csv(EXAMPLES / "credit.csv")
    encoder = Encoder(features=CREDIT_FEATURES, fit_intercept=True)
    X = encoder.encode(frame)
    y = encoder.encode_labels(frame, LabelSpec.model_validate(CREDIT_LABEL))
    order = np.random.default_rng(0).permutation(len(y))
    cut = int(0.75 * len(y))
    train, test = order[:cut], order[cut:]
    return X[train], y[train], X[test], y[test], encoder


def accuracy(loss: Any, w: np.ndarray, X: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean(np.where(X @ w >= 0, 1.0, -1.0) == y))


def fit_once(
    name: str,
    model: dict[str, Any],
    X: np.ndarray,
    y: np.ndarray,
    eps: float,
    delta: float,
    seed: int,
) -> tuple[np.ndarray, float, Any]:
    spec = parse_model_spec(model)
    planned = plan_job(spec, name, {}, len(y), X.shape[1] - 1, PrivacyTarget(eps, delta))
    loss = build_loss(spec)
    start = time.perf_counter()
    w = planned.optimizer.fit(planned.plan, loss, X, y, np.random.default_rng(seed), lambda s: None)
    return w, time.perf_counter() - start, loss


def run(args: argparse.Namespace) -> None:
    X, y, Xt, yt, _ = load_example()
    epsilons = args.epsilons[:1] if args.smoke else args.epsilons
    runs = 1 if args.smoke else args.runs
    names = args.optimizers or optimizer_names()
    majority = max(np.mean(yt == 1), np.mean(yt == -1))
    from sklearn.linear_model import LogisticRegression

    clf = LogisticRegression(C=1 / (len(y) * 0.01), fit_intercept=False).fit(X, y)
    print(
        f"n_train = {len(y)}, n_test = {len(yt)}, d = {X.shape[1]} (incl. intercept); "
        f"majority class {majority:.2%}; non-private logistic (l2 = 0.01) "
        f"{clf.score(Xt, yt):.2%}\n"
    )
    header = " | ".join(f"ε = {e:g}" for e in epsilons)
    print(f"| optimizer | model | {header} | fit time (median) |")
    print("|---|---|" + "---|" * len(epsilons) + "---|")
    for name in names:
        cells, times, used = [], [], CONVEX_MODEL["type"]
        for eps in epsilons:
            accs = []
            for seed in range(runs):
                try:
                    delta = args.delta
                    try:
                        w, t, loss = fit_once(name, CONVEX_MODEL, X, y, eps, delta, seed)
                    except InfeasibleSpec as exc:
                        if exc.field == "privacy.delta":
                            delta = 0.0
                            w, t, loss = fit_once(name, CONVEX_MODEL, X, y, eps, delta, seed)
                        elif exc.field == "model":
                            used = NONCONVEX_MODEL["type"]
                            w, t, loss = fit_once(name, NONCONVEX_MODEL, X, y, eps, delta, seed)
                        else:
                            raise
                except InfeasibleSpec as exc:
                    cells.append(f"n/a ({exc.field})")
                    break
                accs.append(accuracy(loss, w, Xt, yt))
                times.append(t)
            else:
                sd = statistics.pstdev(accs) if len(accs) > 1 else 0.0
                cells.append(f"{100 * statistics.mean(accs):.2f} ± {100 * sd:.2f}")
        fit_time = f"{1000 * statistics.median(times):.1f} ms" if times else "—"
        print(f"| `{name}` | {used} | " + " | ".join(cells) + f" | {fit_time} |")
    print(
        f"\nδ = {args.delta:g} (0 for pure-ε optimizers), {runs} run(s) per cell, "
        "theory-derived defaults, accuracy in % on the held-out 25 %."
    )
