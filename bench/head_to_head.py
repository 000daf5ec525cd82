"""head-to-head: dpfit's convex optimizers vs diffprivlib and Opacus on UCI Adult, at equal ε.

Same machine, same run, same encoded rows (public-bounds encoding, d = 104 + intercept, ‖x‖ ≤ 1)
and the same 32,561 / 16,281 train/test split for everyone:

- **ours**: every optimizer of the catalog that accepts the convex model (logistic regression,
  l2 = 1e-4, the model spec's default) with its theory-derived defaults — no tuning on the test
  set; ``private_tuning`` is the private alternative (its default grid over l2). (ε, δ = 1e-5),
  replace-one adjacency; those that support pure ε-DP are also run at δ = 0 (the notion
  diffprivlib gives).
- **ours, clipped**: the same, on the clipped-slope logistic loss (``gradient_clip`` = 1/2,
  fixed a priori: the logistic slope at the decision boundary; it halves L and so every
  sensitivity) for CLIPPED_OPTIMIZERS.
- **diffprivlib** ``LogisticRegression`` (objective perturbation, Chaudhuri et al. 2011), pure ε,
  replace-one, ``data_norm = 1`` (our rows already satisfy it), no extra intercept (the intercept
  is our constant column): its default C = 1 and, labelled, the best C on the test set over a grid.
- **Opacus** DP-SGD on one linear layer (``make_private_with_epsilon``: Poisson sampling, the PRV
  accountant, (ε, δ = 1e-5) with **add/remove** adjacency — a replace-one guarantee at the same
  nominal ε would need about twice its noise), BCE loss, plain SGD from 0, expected batch 512,
  10 epochs, max_grad_norm = 1 (our rows give per-example gradients of norm ≤ 1, so nothing is
  clipped). Light tuning: lr ∈ LR_GRID, 2 runs each, the best mean **test** accuracy picked per
  ε (optimistic for Opacus, as in the issue's reference table), then fresh runs at that lr.
  Opacus is also run at **replace-one (ε, δ)** — the guarantee ours give — through group
  privacy: replacing a row is removing one and adding one, so add/remove (ε/2, δ') with
  δ' = δ/(1 + e^{ε/2}) implies replace-one (ε, δ); tuned the same way.
- **non-private** scikit-learn on the same objective (l2 = 1e-4 and l2 = 0) and the majority class.

Reported: test accuracy mean ± std over RUNS runs and the median fit wall time (ours: the
optimizer's ``fit`` on encoded rows; the plan — noise calibration from public n, d, ε — is
timed separately, it runs at admission).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import statistics
import time
import warnings
from typing import Any

import numpy as np

from bench.data import (
    Dataset,
    accuracy,
    fit,
    load_adult,
    logistic_model,
    mean_std,
    plan,
    pm,
    pyplot,
    results_dir,
    save_json,
    seconds,
    sklearn_logistic,
)
from service.optimizers.kits.base import InfeasibleSpec
from service.optimizers.kits.registry import optimizer_names

EPSILONS = [0.1, 0.5, 1.0, 2.0]
DELTA = 1e-5
L2 = 1e-4
C_GRID = [0.01, 0.1, 1.0, 10.0, 100.0]
LR_GRID = [1.0, 4.0, 16.0]
OPACUS_EPOCHS = 10
OPACUS_BATCH = 512
CLIP = 0.5
CLIPPED_OPTIMIZERS = ("dp_agd", "dp_gd", "output_perturbation_gd")

# The reference figures (same kind of machine; best hyper-parameter on the test set).
REFERENCE = {
    0.1: ("77.57 ± 1.51", "82.57 ± 0.28"),
    0.5: ("82.23 ± 0.27", "83.60 ± 0.11"),
    1.0: ("83.18 ± 0.17", "83.65 ± 0.09"),
    2.0: ("83.81 ± 0.12", "83.65 ± 0.07"),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--epsilons", type=float, nargs="+", default=EPSILONS)
    parser.add_argument("--optimizers", nargs="*", default=None, help="ours (default: all convex)")
    parser.add_argument("--no-opacus", action="store_true")
    parser.add_argument("--no-diffprivlib", action="store_true")
    parser.add_argument("--smoke", action="store_true", help="2,000 rows, one ε, one run")


# --------------------------------------------------------------------------------------------
# Contestants
# --------------------------------------------------------------------------------------------


def ours(
    data: Dataset, name: str, eps: float, delta: float, runs: int, clip: float | None = None
) -> dict[str, Any] | None:
    """Runs of one of our optimizers; None when it rejects the job (not convex / no pure ε)."""
    model = logistic_model(L2)
    if clip is not None:
        model["gradient_clip"] = clip
    try:
        start = time.perf_counter()
        job = plan(name, model, data.n, data.d, eps, delta)
        plan_time = time.perf_counter() - start
    except InfeasibleSpec:
        return None
    accs, times = [], []
    for seed in range(runs):
        w, wall, _ = fit(job, data.X, data.y, 1000 + seed)
        accs.append(accuracy(w, data.Xt, data.yt))
        times.append(wall)
    return {"acc": accs, "time": times, "plan_time": plan_time}


def diffprivlib_runs(data: Dataset, eps: float, c: float, runs: int) -> dict[str, Any]:
    from diffprivlib.models import LogisticRegression

    accs, times = [], []
    for seed in range(runs):
        clf = LogisticRegression(
            epsilon=eps, data_norm=1.0, C=c, fit_intercept=False, random_state=seed
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            start = time.perf_counter()
            clf.fit(data.X, data.y)
            times.append(time.perf_counter() - start)
        accs.append(float(np.mean(clf.predict(data.Xt) == data.yt)))
    return {"acc": accs, "time": times}


def opacus_once(
    data: Dataset, eps: float, lr: float, seed: int, epochs: int, delta: float = DELTA
) -> tuple[float, float]:
    """One Opacus DP-SGD fit of a linear layer; returns (test accuracy, wall seconds)."""
    import torch
    from opacus import PrivacyEngine

    torch.manual_seed(seed)
    X = torch.tensor(data.X, dtype=torch.float32)
    y = torch.tensor((data.y > 0).astype(np.float32))
    model = torch.nn.Linear(data.d, 1, bias=False)
    torch.nn.init.zeros_(model.weight)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(X, y),
        batch_size=min(OPACUS_BATCH, data.n),
        shuffle=True,
    )
    criterion = torch.nn.BCEWithLogitsLoss()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        start = time.perf_counter()
        engine = PrivacyEngine(accountant="prv")
        model, optimizer, loader = engine.make_private_with_epsilon(
            module=model,
            optimizer=optimizer,
            data_loader=loader,
            target_epsilon=eps,
            target_delta=delta,
            epochs=epochs,
            max_grad_norm=1.0,
        )
        for _ in range(epochs):
            for xb, yb in loader:
                if len(xb) == 0:
                    continue
                optimizer.zero_grad()
                criterion(model(xb).squeeze(-1), yb).backward()
                optimizer.step()
        elapsed = time.perf_counter() - start
    w = model._module.weight.detach().numpy()[0].astype(np.float64)
    return accuracy(w, data.Xt, data.yt), elapsed


def replace_one_as_add_remove(eps: float, delta: float) -> tuple[float, float]:
    """Add/remove (ε', δ') with ε' = ε/2, δ' = δ/(1 + e^{ε/2}) implies replace-one (ε, δ):
    a replacement is a removal then an addition, and group privacy for two steps gives
    (2ε', δ' + e^{ε'} δ') = (ε, δ)."""
    half = eps / 2.0
    return half, delta / (1.0 + math.exp(half))


def opacus_runs(
    data: Dataset,
    eps: float,
    runs: int,
    lr_grid: list[float],
    tune_runs: int,
    epochs: int,
    delta: float = DELTA,
) -> dict[str, Any]:
    tuning = {}
    for lr in lr_grid:
        tuning[lr] = statistics.fmean(
            opacus_once(data, eps, lr, 500 + s, epochs, delta)[0] for s in range(tune_runs)
        )
    best = max(tuning, key=lambda lr: tuning[lr])
    accs, times = [], []
    for seed in range(runs):
        acc, elapsed = opacus_once(data, eps, best, seed, epochs, delta)
        accs.append(acc)
        times.append(elapsed)
    return {"acc": accs, "time": times, "lr": best, "tuning": tuning}


# --------------------------------------------------------------------------------------------
# The suite
# --------------------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> None:
    data = load_adult()
    epsilons, runs = args.epsilons, args.runs
    lr_grid, tune_runs, epochs, c_grid = LR_GRID, 2, OPACUS_EPOCHS, C_GRID
    if args.smoke:
        data, epsilons, runs = data.head(2000, 1000), epsilons[-1:], 1
        lr_grid, tune_runs, epochs, c_grid = LR_GRID[:1], 1, 1, [1.0]
    names = args.optimizers or optimizer_names()
    with contextlib.suppress(ImportError):
        import torch

        torch.set_num_threads(2)

    rows: list[dict[str, Any]] = []
    for name in names:
        for delta, label in ((DELTA, f"(ε, {DELTA:g})"), (0.0, "pure ε")):
            cells = {eps: ours(data, name, eps, delta, runs) for eps in epsilons}
            if all(c is None for c in cells.values()):
                continue
            rows.append({"who": f"`{name}`", "privacy": label, "kind": "ours", "cells": cells})
            print(f"  ran {name} {label}", flush=True)
    for name in [n for n in CLIPPED_OPTIMIZERS if n in names]:
        cells = {eps: ours(data, name, eps, DELTA, runs, clip=CLIP) for eps in epsilons}
        who = f"`{name}`, gradient_clip = {CLIP:g}"
        rows.append({"who": who, "privacy": f"(ε, {DELTA:g})", "kind": "ours", "cells": cells})
        print(f"  ran {who}", flush=True)
    if not args.no_diffprivlib:
        results = {
            c: {eps: diffprivlib_runs(data, eps, c, runs) for eps in epsilons} for c in c_grid
        }
        default = results.get(1.0) or results[c_grid[0]]
        rows.append(
            {
                "who": "diffprivlib LR, C = 1 (default)",
                "privacy": "pure ε",
                "kind": "them",
                "cells": default,
            }
        )
        best = {
            eps: max(
                ({**results[c][eps], "C": c} for c in c_grid),
                key=lambda r: statistics.fmean(r["acc"]),
            )
            for eps in epsilons
        }
        rows.append(
            {
                "who": "diffprivlib LR, best C on test†",
                "privacy": "pure ε",
                "kind": "them",
                "cells": best,
            }
        )
        print("  ran diffprivlib", flush=True)
    if not args.no_opacus:
        cells = {eps: opacus_runs(data, eps, runs, lr_grid, tune_runs, epochs) for eps in epsilons}
        rows.append(
            {
                "who": "Opacus DP-SGD, best lr on test†",
                "privacy": f"(ε, {DELTA:g}) add/remove",
                "kind": "them",
                "cells": cells,
            }
        )
        cells = {}
        for eps in epsilons:
            eps_ar, delta_ar = replace_one_as_add_remove(eps, DELTA)
            cells[eps] = opacus_runs(data, eps_ar, runs, lr_grid, tune_runs, epochs, delta=delta_ar)
        rows.append(
            {
                "who": "Opacus DP-SGD at replace-one (group privacy), best lr on test†",
                "privacy": f"(ε, {DELTA:g}) replace-one",
                "kind": "them",
                "cells": cells,
            }
        )
        print("  ran opacus", flush=True)

    baselines = {}
    for l2 in (L2, 0.0):
        start = time.perf_counter()
        w = sklearn_logistic(data.X, data.y, l2)
        baselines[l2] = (accuracy(w, data.Xt, data.yt), time.perf_counter() - start)

    print()
    print(
        f"Adult: n_train = {data.n}, n_test = {len(data.yt)}, d = {data.d} (incl. intercept); "
        f"majority class {100 * data.majority():.2f} %; non-private scikit-learn lbfgs "
        f"{100 * baselines[L2][0]:.2f} % (l2 = {L2:g}, {seconds(baselines[L2][1])}), "
        f"{100 * baselines[0.0][0]:.2f} % (l2 = 0, damped Newton, {seconds(baselines[0.0][1])})."
    )
    print()
    header = " | ".join(f"ε = {e:g}" for e in epsilons)
    print(f"| method | privacy | {header} | fit time (median) | plan time |")
    print("|---|---|" + "---|" * len(epsilons) + "---|---|")
    for row in rows:
        cells = row["cells"]
        texts, all_times = [], []
        for eps in epsilons:
            cell = cells.get(eps)
            if cell is None:
                texts.append("n/a")
                continue
            extra = ""
            if "C" in cell:
                extra = f" (C={cell['C']:g})"
            elif "lr" in cell:
                extra = f" (lr={cell['lr']:g})"
            texts.append(pm(cell["acc"]) + extra)
            all_times.extend(cell["time"])
        fit_time = seconds(statistics.median(all_times)) if all_times else "—"
        plans = [c["plan_time"] for c in cells.values() if c and "plan_time" in c]
        plan_time = seconds(statistics.median(plans)) if plans else "—"
        print(
            f"| {row['who']} | {row['privacy']} | "
            + " | ".join(texts)
            + f" | {fit_time} | {plan_time} |"
        )
    print()
    print(
        f"Test accuracy in %, mean ± std over {runs} run(s); ours: l2 = {L2:g}, theory defaults, "
        "replace-one adjacency. † best hyper-parameter picked on the test set (optimistic, "
        "labelled as in the issue's reference). Opacus: add/remove adjacency — at the same "
        "nominal ε it needs about half the noise a replace-one guarantee needs; its "
        "replace-one row runs it at add/remove (ε/2, δ/(1 + e^{ε/2})), which implies "
        "replace-one (ε, δ) by group privacy."
    )
    if not args.smoke:
        print()
        print("Issue reference (same kind of machine, 10 runs, best on test):")
        print()
        print("| ε | diffprivlib LR (pure ε, best C) | Opacus DP-SGD (ε, 1e-5), best lr |")
        print("|---|---|---|")
        for eps in epsilons:
            ref = REFERENCE.get(eps, ("—", "—"))
            print(f"| {eps:g} | {ref[0]} | {ref[1]} |")

    out = results_dir(args.smoke)
    save_json(
        out / "head_to_head.json",
        {
            "rows": [{**r, "cells": {str(k): v for k, v in r["cells"].items()}} for r in rows],
            "baselines": {str(k): v for k, v in baselines.items()},
            "majority": data.majority(),
            "runs": runs,
        },
    )
    _plot(rows, epsilons, baselines, data.majority(), out)
    print(f"\nplot: {out / 'head_to_head.png'}")


def _plot(
    rows: list[dict[str, Any]],
    epsilons: list[float],
    baselines: dict[float, tuple[float, float]],
    majority: float,
    out: Any,
) -> None:
    plt = pyplot()
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(14, 8))
    for row in rows:
        pts = [(e, row["cells"][e]) for e in epsilons if row["cells"].get(e)]
        if not pts:
            continue
        means = [100 * mean_std(c["acc"])[0] for _, c in pts]
        stds = [100 * mean_std(c["acc"])[1] for _, c in pts]
        style = "-" if row["kind"] == "ours" else "--"
        width = 1.2 if row["kind"] == "ours" else 2.2
        label = f"{row['who'].replace('`', '')} [{row['privacy']}]"
        ax.errorbar(
            [e for e, _ in pts],
            means,
            yerr=stds,
            linestyle=style,
            linewidth=width,
            marker="o",
            markersize=3,
            capsize=2,
            label=label,
        )
        times = [statistics.median(c["time"]) for _, c in pts]
        bx.scatter(times, means, s=14)
        bx.annotate(row["who"].replace("`", "")[:22], (times[-1], means[-1]), fontsize=6)
    ax.axhline(100 * baselines[L2][0], color="k", linestyle=":", label=f"non-private (l2={L2:g})")
    ax.axhline(100 * majority, color="grey", linestyle=":", label="majority class")
    ax.set_xscale("log")
    ax.set_xlabel("ε")
    ax.set_ylabel("test accuracy (%)")
    ax.set_ylim(max(70.0, 100 * majority - 6), 86.0)
    ax.set_title("Adult: test accuracy vs ε (mean ± std)")
    ax.grid(True, alpha=0.3)
    bx.set_xscale("log")
    bx.set_xlabel("fit wall time per run (median, s)")
    bx.set_ylabel("test accuracy (%)")
    bx.set_ylim(max(60.0, 100 * majority - 8), 86.5)
    bx.set_title("accuracy vs fit time (every ε)")
    bx.grid(True, alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    fig.tight_layout(rect=(0.0, 0.25, 1.0, 1.0))
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=7, frameon=False)
    fig.savefig(out / "head_to_head.png", dpi=110)
    plt.close(fig)
