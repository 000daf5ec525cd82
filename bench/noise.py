"""The exact samplers' speed (issue 22): draws per second of the discrete Gaussian from 10² to 10⁶
coordinates at several scales beside numpy's float ``standard_normal``, and the default Adult
job (``auto`` at ε = 1) fitted with the secure release and with the old float sampler side by
side in one run (fit time and test accuracy).

Sampler table: one call of ``SecureRandom.discrete_gaussian(σ², m)`` per cell (bits from
``os.urandom``), best of ``--repeats`` timings; σ = 2^k for a few k (σ > 2^30 goes through the
composition of service/privacy/secure_random.py). Release table: ``secure_gaussian`` on a vector
of d = 105 (Adult's width) called per step, as the per-step optimizers do (pooled draws).

Adult: the same priced ``auto`` plan, the same rows, alternating arms; the "float" arm swaps the
release for the pre-issue-22 ``value + σ·standard_normal`` (NOT private against the lattice
attack: a reference only). Target: secure / float fit time ≤ 1.2, accuracy equal within noise.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from fractions import Fraction
from typing import Any

import numpy as np

from bench.data import accuracy, results_dir
from service.privacy import secure_release
from service.privacy.discrete_gaussian_plan import plan_discrete_gaussian
from service.privacy.secure_random import SecureRandom

SIZES = [100, 1_000, 10_000, 100_000, 1_000_000]
SIGMA_EXPONENTS = [0, 10, 20, 30, 40]


def markdown_table(rows: list[dict[str, Any]]) -> list[str]:
    """Rows (same keys) as markdown table lines."""
    keys = list(rows[0])
    lines = ["| " + " | ".join(keys) + " |", "|" + "|".join("---" for _ in keys) + "|"]
    lines += ["| " + " | ".join(str(r[k]) for k in keys) + " |" for r in rows]
    return lines


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, one fit per arm")
    parser.add_argument("--repeats", type=int, default=3, help="timings per sampler cell")
    parser.add_argument("--fits", type=int, default=4, help="Adult fits per arm")


def _best_seconds(fn: Callable[[], object], repeats: int) -> float:
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def sampler_rows(sizes: list[int], exponents: list[int], repeats: int) -> list[dict[str, Any]]:
    rng = SecureRandom()
    gen = np.random.default_rng()
    rows: list[dict[str, Any]] = []
    for m in sizes:
        row: dict[str, Any] = {"coordinates": f"{m:,}"}
        numpy_s = _best_seconds(lambda m=m: gen.standard_normal(m), repeats)
        row["numpy float µs/coord"] = f"{1e6 * numpy_s / m:.3f}"
        for k in exponents:
            sigma2 = 1 << (2 * k)
            seconds = _best_seconds(lambda m=m, s2=sigma2: rng.discrete_gaussian(s2, m), repeats)
            levels = len(plan_discrete_gaussian(sigma2).levels)
            label = f"σ=2^{k}" + (" (composed)" if levels else "")
            row[f"{label} µs/coord"] = f"{1e6 * seconds / m:.3f}"
            row[f"{label} draws/s"] = f"{m / seconds:,.0f}"
        rows.append(row)
    return rows


def release_rows(steps: int, repeats: int) -> list[dict[str, Any]]:
    """Per-step releases of d = 105 coordinates (Adult's width), σ/Δ = 10."""
    d, sens = 105, 1e-3
    value = np.linspace(-1.0, 1.0, d)
    gen = np.random.default_rng()
    rows = []
    for label, fn in [
        ("secure_gaussian (grid + discrete Gaussian)", None),
        ("float value + σ·standard_normal", "float"),
    ]:

        def run(fn: object = fn) -> None:
            rng = SecureRandom()
            for _ in range(steps):
                if fn is None:
                    secure_release.secure_gaussian(value, 10 * sens, sens, rng)
                else:
                    _ = value + 10 * sens * gen.standard_normal(d)

        seconds = _best_seconds(run, repeats)
        rows.append(
            {
                "release": label,
                "steps × d": f"{steps} × {d}",
                "total ms": f"{1e3 * seconds:.1f}",
                "µs/coord": f"{1e6 * seconds / (steps * d):.3f}",
            }
        )
    return rows


def opendp_rows(draws: int) -> list[dict[str, Any]]:
    """Our N_Z(0, σ²) against OpenDP's (``make_gaussian`` on integer vectors; a bench-only
    install: ``pip install opendp==0.16.0``): a two-sample chi-square homogeneity test on the
    same bins, and OpenDP's time per coordinate. Empty when OpenDP is not installed."""
    try:
        import opendp.prelude as dp
    except ImportError:
        return []
    from scipy.stats import chi2_contingency

    dp.enable_features("contrib")
    rng = SecureRandom()
    rows = []
    for sigma in (1.5, 1000.0):
        meas = dp.m.make_gaussian(
            dp.vector_domain(dp.atom_domain(T=int)), dp.l2_distance(T=int), scale=sigma
        )
        start = time.perf_counter()
        theirs = np.asarray(meas([0] * draws), dtype=np.int64)
        their_us = 1e6 * (time.perf_counter() - start) / draws
        ours = rng.discrete_gaussian(Fraction(sigma).limit_denominator(4) ** 2, draws)
        edges = np.unique(np.quantile(np.concatenate([ours, theirs]), np.linspace(0, 1, 41)))
        edges[-1] += 1
        table = np.vstack([np.histogram(ours, bins=edges)[0], np.histogram(theirs, bins=edges)[0]])
        table = table[:, table.sum(axis=0) > 0]
        p_value = float(chi2_contingency(table)[1])
        rows.append(
            {
                "σ": f"{sigma:g}",
                "draws each": f"{draws:,}",
                "var ours / σ²": f"{ours.var() / sigma**2:.4f}",
                "var OpenDP / σ²": f"{theirs.var() / sigma**2:.4f}",
                "two-sample χ² p": f"{p_value:.3f}",
                "OpenDP µs/coord": f"{their_us:.2f}",
            }
        )
    return rows


def _float_release(gen: np.random.Generator) -> Callable[..., np.ndarray]:
    def release(value: np.ndarray, sigma: float, sensitivity: float, rng: object) -> np.ndarray:
        v = np.asarray(value, dtype=np.float64)
        if sigma == 0.0:
            return v.copy()
        out: np.ndarray = v + sigma * gen.standard_normal(v.shape)
        return out

    return release


@contextmanager
def float_sampler(gen: np.random.Generator) -> Iterator[None]:
    """Swap ``secure_gaussian`` for the pre-issue-22 float draw in every loaded module."""
    original = secure_release.secure_gaussian
    replacement = _float_release(gen)
    patched = [
        module
        for module in list(sys.modules.values())
        if module is not None and getattr(module, "secure_gaussian", None) is original
    ]
    for module in patched:
        module.secure_gaussian = replacement  # type: ignore[attr-defined]
    try:
        yield
    finally:
        for module in patched:
            module.secure_gaussian = original  # type: ignore[attr-defined]


def adult_rows(fits: int, smoke: bool) -> list[dict[str, Any]]:
    from bench.auto import auto_job
    from bench.data import load_adult

    data = load_adult()
    if smoke:
        data = type(data)(data.name, data.X[:2000], data.y[:2000], data.Xt, data.yt, None)
    planned = auto_job(data, 1.0).planned
    times: dict[str, list[float]] = {"secure": [], "float": []}
    accs: dict[str, list[float]] = {"secure": [], "float": []}
    gen = np.random.default_rng()
    for _ in range(fits):
        for arm in ("float", "secure"):  # alternate the arms: same load on both
            rng = SecureRandom()
            start = time.perf_counter()
            if arm == "secure":
                w = planned.optimizer.fit(planned.plan, planned.loss, data.X, data.y, rng, _noop)
            else:
                with float_sampler(gen):
                    w = planned.optimizer.fit(
                        planned.plan, planned.loss, data.X, data.y, rng, _noop
                    )
            times[arm].append(time.perf_counter() - start)
            accs[arm].append(accuracy(w, data.Xt, data.yt))
    ratio = statistics.median(times["secure"]) / statistics.median(times["float"])
    return [
        {
            "arm": arm,
            "mechanism": planned.plan.mechanism,
            "steps": planned.plan.total_steps,
            "median fit s": f"{statistics.median(times[arm]):.3f}",
            "fit s (all)": ", ".join(f"{t:.2f}" for t in times[arm]),
            "test accuracy (mean ± sd)": f"{statistics.mean(accs[arm]):.4f} ± "
            f"{statistics.pstdev(accs[arm]):.4f}",
            "secure / float": f"{ratio:.3f}" if arm == "secure" else "",
        }
        for arm in ("float", "secure")
    ]


def _noop(step: int) -> None:
    return None


def run(args: argparse.Namespace) -> None:
    sizes = SIZES[:2] if args.smoke else SIZES
    exponents = [0, 40] if args.smoke else SIGMA_EXPONENTS
    repeats = 1 if args.smoke else args.repeats
    lines = ["# Exact samplers: draws per second (issue 22)", ""]
    lines += markdown_table(sampler_rows(sizes, exponents, repeats))
    lines += ["", "## Per-step releases (d = 105)", ""]
    lines += markdown_table(release_rows(40 if args.smoke else 400, repeats))
    against = opendp_rows(20_000 if args.smoke else 200_000)
    if against:
        lines += ["", "## Against OpenDP 0.16's discrete Gaussian (same bins)", ""]
        lines += markdown_table(against)
    lines += ["", "## Default Adult job (auto, ε = 1): secure vs float sampler, one run", ""]
    lines += markdown_table(adult_rows(1 if args.smoke else args.fits, args.smoke))
    text = "\n".join(lines)
    print(text)
    out = results_dir(args.smoke) / "noise.md"
    out.write_text(text + "\n")
