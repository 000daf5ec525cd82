"""neighbours: fit durations of neighbouring datasets side by side (one code path per schema).

Issue 22, item 2: the rows' representation used to follow the realised share of non-zeros
(sparse at ≤ 25 %), so one row could move a job between a fast and a slow path (0.8 s vs 5.2 s
in process). Now every choice that shapes a fit is a function of n, the declared schema and the
spec (``service/optimizers/kits/inputs.py``). This suite times the service's fit on pairs of
datasets that differ in **one row**, interleaved in one process (median of ``--repeat`` fits
each; the ratio neighbour / base should be 1 within run-to-run noise, which the control row —
the first dataset timed again as if it were another — measures):

- **UCI Adult** (train, 32,561 rows, the ``auto`` job at ε = 1: ``dp_agd_centred``) against
  Adult with row 0's categorical cells all MISSING, and with row 0's numeric cells at the
  bounds' far ends;
- **the density pair**: a synthetic table of the same schema family (6 numeric features,
  two 6-category and one 2-category feature, intercept; ``--rows`` rows) whose realised share
  of non-zeros is exactly the old 25 % threshold, against its neighbour whose row 0 has six
  more non-zero numeric cells (``dp_agd_averaged``, the default's method, 400 steps).

"old rule" names the path the previous ``gradient_rows`` would have taken on each dataset (the
realised density against 25 %): the pair straddles it. Fits run on rows carrying the schema's
public layout, as in the worker (``runner.py``). "density pair, before" times the same pair on
the previous rows (kept below, for timing only), with the same loop and noise draws.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
from scipy import sparse

from bench.data import load_adult, read_adult_frame, results_dir, save_json, seconds
from service.data.encoding import Encoder
from service.data.spec import CategoricalFeature, NumericFeature
from service.models.logistic import LogisticLoss
from service.optimizers.kits.base import PrivacyTarget
from service.optimizers.kits.inputs import encoder_layout, laid_out
from service.optimizers.kits.registry import get_optimizer

#: The previous rule's threshold on the realised share of non-zeros (sparse at or below it).
OLD_THRESHOLD = 0.25
NUMERIC = [f"x{i}" for i in range(6)]
SYNTHETIC = Encoder(
    features=[
        *[NumericFeature(name=name, min=-1.0, max=1.0) for name in NUMERIC],
        CategoricalFeature(name="colour", categories=list("abcdef")),
        CategoricalFeature(name="shape", categories=list("uvwxyz")),
        CategoricalFeature(name="flag", categories=["yes", "no"]),
    ],
    fit_intercept=True,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--rows", type=int, default=40_000, help="rows of the density pair (a multiple of 16)"
    )
    parser.add_argument("--repeat", type=int, default=9, help="fits per dataset (median)")
    parser.add_argument("--smoke", action="store_true", help="2,000 rows, 2 repeats, 20 steps")
    parser.add_argument(
        "--no-baseline", action="store_true", help="skip the density pair on the old rows"
    )


def density_pair(rows: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A table at exactly the old threshold and its neighbour one row over it. Every row holds
    3 categories and the intercept (4 of 21 entries); 5/16 of the rows get 4 non-zero numeric
    cells (a cell at its declared midpoint 0 encodes to exactly 0): (4 + 5/4)/21 = 25 %
    (``rows`` a multiple of 16)."""
    rng = np.random.default_rng(11)
    frame = pd.DataFrame({name: np.zeros(rows) for name in NUMERIC})
    busy = rows * 5 // 16
    frame.loc[rows - busy :, NUMERIC[:4]] = rng.uniform(0.1, 0.9, size=(busy, 4))
    frame["colour"] = rng.choice(list("abcdef"), size=rows)
    frame["shape"] = rng.choice(list("uvwxyz"), size=rows)
    frame["flag"] = rng.choice(["yes", "no"], size=rows)
    frame["label"] = np.where(frame["x0"] + (frame["colour"] == "a") > 0.3, 1.0, -1.0)
    neighbour = frame.copy()
    neighbour.loc[0, NUMERIC] = 0.5
    return frame, neighbour


def adult_neighbours(encoder: Encoder) -> dict[str, pd.DataFrame]:
    """Adult's training rows, and two neighbours that differ in row 0."""
    train = read_adult_frame("train")
    missing = train.copy()
    categorical = [f.name for f in encoder.categorical]
    missing[categorical] = missing[categorical].astype(object)
    missing.loc[0, categorical] = None
    extreme = train.copy()
    for feature in encoder.numeric:
        extreme[feature.name] = extreme[feature.name].astype(object)
        extreme.loc[0, feature.name] = feature.max
    return {"Adult": train, "row 0 all MISSING": missing, "row 0 numerics at max": extreme}


def _encoded(encoder: Encoder, frame: pd.DataFrame) -> np.ndarray:
    return laid_out(encoder.encode(frame), encoder_layout(encoder))


def _old_rule(X: np.ndarray) -> str:
    share = np.count_nonzero(X) / X.size
    return f"{'sparse' if share <= OLD_THRESHOLD else 'dense'} ({100 * share:.3f} % non-zero)"


def _interleaved(fits: dict[str, Callable[[], Any]], repeat: int) -> dict[str, list[float]]:
    """Wall times of each fit, ``repeat`` rounds, the order rotated every round."""
    times: dict[str, list[float]] = {name: [] for name in fits}
    names = list(fits)
    for round_ in range(repeat):
        for name in names[round_ % len(names) :] + names[: round_ % len(names)]:
            start = time.perf_counter()
            fits[name]()
            times[name].append(time.perf_counter() - start)
    return times


def run(args: argparse.Namespace) -> None:
    rows = 2_000 if args.smoke else args.rows // 16 * 16
    repeat = 2 if args.smoke else args.repeat
    table: list[dict[str, Any]] = []

    # UCI Adult: the auto job at ε = 1, as bench auto plans it
    from bench.auto import auto_job

    adult = load_adult()
    assert adult.encoder is not None
    job = auto_job(adult, 1.0).planned
    labels = np.asarray(adult.y)
    n_adult = len(labels) if not args.smoke else rows
    datasets = {
        name: _encoded(adult.encoder, frame)[:n_adult]
        for name, frame in adult_neighbours(adult.encoder).items()
    }
    if args.smoke:
        job = _plan("dp_agd_averaged", n_adult, adult.d, steps=20)
    # a control: the same dataset again (its ratio is the run-to-run noise)
    datasets = {"Adult": datasets["Adult"], "Adult (again: noise)": datasets["Adult"], **datasets}
    fits = {
        name: _fit(job.optimizer, job.plan, job.loss, X, labels[:n_adult])
        for name, X in datasets.items()
    }
    table += _rows("Adult", job.optimizer.name, datasets, _interleaved(fits, repeat))

    # the density pair
    base, neighbour = density_pair(rows)
    pair = {"at 25 %": base, "at 25 % (again: noise)": base, "row 0 over 25 %": neighbour}
    encoded = {name: _encoded(SYNTHETIC, frame) for name, frame in pair.items()}
    y = base["label"].to_numpy()
    planned = _plan("dp_agd_averaged", rows, SYNTHETIC.dimension, steps=20 if args.smoke else 400)
    fits = {
        name: _fit(planned.optimizer, planned.plan, planned.loss, X, y)
        for name, X in encoded.items()
    }
    table += _rows("density pair", planned.optimizer.name, encoded, _interleaved(fits, repeat))
    if not args.no_baseline:  # the same pair on the old rows (realised density decides)
        old = {f"{name}, old rows": X for name, X in encoded.items() if "again" not in name}
        fits = {name: _old_fit(planned, X, y) for name, X in old.items()}
        table += _rows("density pair, before", "dp_agd_averaged", old, _interleaved(fits, repeat))

    lines = [
        f"Neighbours' fit durations (median of {repeat}, interleaved; {rows:,} rows in the "
        "density pair)",
        "",
        "| pair | dataset | optimizer | old rule's path | median fit | ratio to the first |",
        "|---|---|---|---|---|---|",
    ]
    for row in table:
        lines.append(
            f"| {row['pair']} | {row['dataset']} | {row['optimizer']} | {row['old_rule']} | "
            f"{seconds(row['median_s'])} | {row['ratio']:.3f} |"
        )
    print("\n".join(lines))
    save_json(results_dir(args.smoke) / "neighbours.json", table)


class _Planned:
    def __init__(self, optimizer: Any, plan: Any, loss: Any) -> None:
        self.optimizer, self.plan, self.loss = optimizer, plan, loss


def _plan(name: str, n: int, d: int, steps: int) -> _Planned:
    optimizer = get_optimizer(name)
    loss = LogisticLoss(l2=1e-3, gradient_clip=0.5)
    params = optimizer.Params.model_validate({"iterations": steps})
    return _Planned(optimizer, optimizer.plan(params, loss, n, d, PrivacyTarget(1.0, 1e-5)), loss)


def _fit(optimizer: Any, plan: Any, loss: Any, X: np.ndarray, y: np.ndarray) -> Callable[[], Any]:
    def fit() -> Any:
        return optimizer.fit(plan, loss, X, y, np.random.default_rng(0), lambda _: None)

    return fit


def _rows(
    pair: str, optimizer: str, datasets: dict[str, np.ndarray], times: dict[str, list[float]]
) -> list[dict[str, Any]]:
    first = statistics.median(times[next(iter(times))])
    return [
        {
            "pair": pair,
            "dataset": name,
            "optimizer": optimizer,
            "old_rule": _old_rule(np.asarray(datasets[name])),
            "median_s": statistics.median(times[name]),
            "times_s": times[name],
            "ratio": statistics.median(times[name]) / first,
        }
        for name in times
    ]


# --------------------------------------------------------------------------------------------
# BASELINE — the pre-issue-22 rows (realised density decides), for timing only
# --------------------------------------------------------------------------------------------


class _OldTransposed:
    def __init__(self, rows: _OldSparseRows) -> None:
        self._rows = rows

    @property
    def shape(self) -> tuple[int, int]:
        n, d = self._rows.shape
        return d, n

    def __matmul__(self, other: np.ndarray) -> np.ndarray:
        r = self._rows
        out = np.empty(r.shape[1])
        if r.dense_columns.size:
            acc = np.zeros(r.dense_columns.size)
            for block in r.blocks:
                acc += r.dense[block].T @ other[block]
            out[r.dense_columns] = acc
        if r.sparse_columns.size:
            out[r.sparse_columns] = r.sparse_transposed @ other
        return out


class _OldSparseRows:
    """The old ``SparseRows``: columns split by their realised counts, rows sorted by theirs."""

    def __init__(self, X: np.ndarray) -> None:
        n, d = X.shape
        per_row = np.count_nonzero(X, axis=1)
        flat = np.flatnonzero(X)
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(per_row, out=indptr[1:])
        whole = sparse.csr_array((X.ravel()[flat], flat % d, indptr), shape=(n, d))
        per_column = np.bincount(whole.indices, minlength=d)
        self.n_rows = n
        self.dense_columns = np.flatnonzero(per_column > OLD_THRESHOLD * n)
        self.sparse_columns = np.flatnonzero(per_column <= OLD_THRESHOLD * n)
        self.dense = np.asfortranarray(X[:, self.dense_columns])
        csr = sparse.csr_array(whole[:, self.sparse_columns])
        order = np.argsort(np.diff(csr.indptr), kind="stable")
        self.inverse_order = np.empty_like(order)
        self.inverse_order[order] = np.arange(n)
        self.sparse_sorted = csr[order]
        self.sparse_transposed = csr.T.tocsr()
        step = max(1, (1 << 16) // max(1, self.dense_columns.size))
        self.blocks = tuple(slice(start, start + step) for start in range(0, n, step))

    @property
    def shape(self) -> tuple[int, int]:
        return self.n_rows, int(self.dense_columns.size + self.sparse_columns.size)

    @property
    def T(self) -> _OldTransposed:  # noqa: N802 - numpy's name
        return _OldTransposed(self)

    def __matmul__(self, other: np.ndarray) -> np.ndarray:
        w = np.asarray(other, dtype=np.float64)
        out = (self.sparse_sorted @ w[self.sparse_columns])[self.inverse_order]
        for block in self.blocks:
            out[block] += self.dense[block] @ w[self.dense_columns]
        return out


def old_rows(X: np.ndarray) -> Any:
    """The old ``gradient_rows``: sparse at a realised share of non-zeros ≤ 25 %, else ``X``."""
    X = np.ascontiguousarray(np.asarray(X, dtype=np.float64))
    if np.count_nonzero(X) > OLD_THRESHOLD * X.size:
        return X
    return _OldSparseRows(X)


def _old_fit(planned: _Planned, X: np.ndarray, y: np.ndarray) -> Callable[[], Any]:
    """The default method's loop (``dp_agd_averaged``) on the old rows, same noise draws."""
    from service.optimizers.kits.accelerated_kit import averaged_accelerated_descent
    from service.optimizers.kits.full_gradient import LocalGradient

    hp = planned.plan.hyperparameters

    def fit() -> Any:
        return averaged_accelerated_descent(
            planned.loss,
            LocalGradient(planned.loss, old_rows(X), y),
            step_size=hp["step_size"],
            iterations=planned.plan.total_steps,
            noise_std=planned.plan.noise_scale,
            sensitivity=planned.plan.sensitivity,
            rng=np.random.default_rng(0),
        )

    return fit
