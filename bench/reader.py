"""reader: read + encode throughput (rows/s) of the row-local reader vs the old pandas reader.

The same synthetic table — ``--rows`` rows (default 1e6) of 8 numeric features written as
decimal text with 6 digits, 2 categorical features (6 values, 5 declared) and a binary label
(``yes``/``no``) — is written once as CSV and once as Parquet (float64 / string columns), then
read and encoded into ``X`` (n × 19 with the intercept) and ``y`` by

- **baseline**: the reader of ``main`` before issue 8, kept verbatim in spirit below (pandas
  ``read_csv``/``read_parquet`` with whole-column type inference, then ``pd.to_numeric`` and
  ``pd.factorize`` over whole columns). It is NOT row-local and is here only to be timed;
- **row-local**: the service's reader (``FileSource`` + ``read_encoded``, block by block).

Best of ``--repeat`` wall times and CPU times (``time.process_time``: all threads of this
process, so Arrow's parallel parsing counts in full) each, interleaved; the ratios are row-local
/ baseline (the issue's target: at most 1.5). On a loaded shared machine the CPU-time ratio is
the steadier figure.
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

from bench.data import results_dir, save_json, seconds
from service.data.encoding import Encoder, clip_rows_to_unit_norm
from service.data.reader import read_encoded
from service.data.sources import local_source
from service.data.spec import CategoricalFeature, LabelSpec, NumericFeature

ROWS = 1_000_000
NUMERIC = 8
CATEGORIES = ["red", "green", "blue", "cyan", "grey"]
FEATURES = [
    *(NumericFeature(name=f"x{i}", min=-1, max=1) for i in range(NUMERIC)),
    CategoricalFeature(name="colour", categories=CATEGORIES),
    CategoricalFeature(name="shade", categories=CATEGORIES),
]
LABEL = LabelSpec(column="y", type="binary", positive="yes", negative="no")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rows", type=int, default=ROWS)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="20,000 rows, one repeat")


# --------------------------------------------------------------------------------------------
# BASELINE — the pre-issue-8 reader (pandas whole-column inference), for timing only
# --------------------------------------------------------------------------------------------

_OLD_CSV_OPTIONS: dict[str, Any] = {"keep_default_na": False, "na_values": [""]}


def _old_to_float(values: pd.Series) -> np.ndarray:
    if values.dtype.kind in "biuf":
        return values.to_numpy(dtype=np.float64, na_value=np.nan)
    converted = pd.to_numeric(values, errors="coerce")
    return converted.to_numpy(dtype=np.float64, na_value=np.nan)


def _old_codes(values: pd.Series, lookup: dict[str, int]) -> np.ndarray:
    codes, uniques = pd.factorize(values, use_na_sentinel=True)
    table = np.array([*(lookup.get(str(u).strip(), -1) for u in uniques), -1], dtype=np.intp)
    return table[codes]


def _old_unit_interval(raw: np.ndarray, low: float, high: float) -> np.ndarray:
    mapped = ((np.clip(raw, low, high) - low) / (high - low)) * 2.0 - 1.0
    return np.where(np.isnan(mapped), 0.0, np.clip(mapped, -1.0, 1.0))


def baseline_encode(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """The old Encoder.encode + encode_labels on a whole frame (same layout and scale)."""
    dimension = NUMERIC + 2 * len(CATEGORIES) + 1
    out = np.zeros((len(frame), dimension))
    position = 0
    lookup = {c: i for i, c in enumerate(CATEGORIES)}
    for feature in FEATURES:
        if isinstance(feature, NumericFeature):
            raw = _old_to_float(frame[feature.name])
            out[:, position] = _old_unit_interval(raw, feature.min, feature.max)
            position += 1
        else:
            codes = _old_codes(frame[feature.name], lookup)
            rows = np.flatnonzero(codes >= 0)
            out[rows, position + codes[rows]] = 1.0
            position += len(CATEGORIES)
    out[:, position] = 1.0
    out *= 1.0 / math.sqrt(len(FEATURES) + 1)
    clip_rows_to_unit_norm(out)
    y = np.where(_old_codes(frame["y"], {"yes": 0}) == 0, 1.0, -1.0)
    return out, y


def baseline_csv(path: Path) -> tuple[np.ndarray, np.ndarray]:
    columns = [*(f.name for f in FEATURES), "y"]
    frame = pd.read_csv(path, usecols=columns, low_memory=False, **_OLD_CSV_OPTIONS)
    return baseline_encode(frame[columns])


def baseline_parquet(path: Path) -> tuple[np.ndarray, np.ndarray]:
    columns = [*(f.name for f in FEATURES), "y"]
    return baseline_encode(pq.read_table(path, columns=columns).to_pandas())


# --------------------------------------------------------------------------------------------
# The row-local reader
# --------------------------------------------------------------------------------------------


def row_local(path: Path, fmt: str) -> tuple[np.ndarray, np.ndarray]:
    encoder = Encoder(FEATURES, fit_intercept=True)
    return read_encoded(local_source(path, fmt), encoder, LABEL, None)  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------


def write_data(folder: Path, rows: int) -> tuple[Path, Path]:
    rng = np.random.default_rng(0)
    values = ["red", "green", "blue", "cyan", "grey", "pink"]
    columns: dict[str, pa.Array] = {
        f"x{i}": pa.array(np.round(rng.uniform(-1.2, 1.2, rows), 6)) for i in range(NUMERIC)
    }
    columns["colour"] = pa.array(rng.choice(values, rows))
    columns["shade"] = pa.array(rng.choice(values, rows))
    columns["y"] = pa.array(rng.choice(["yes", "no"], rows))
    table = pa.table(columns)
    csv, parquet = folder / "data.csv", folder / "data.parquet"
    pcsv.write_csv(table, csv)
    pq.write_table(table, parquet)
    return csv, parquet


def _time(fn: Callable[..., Any], *args: Any) -> tuple[float, float]:
    """(wall, CPU) seconds of one call."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn(*args)
    return time.perf_counter() - wall, time.process_time() - cpu


def run(args: argparse.Namespace) -> None:
    rows, repeat = (20_000, 1) if args.smoke else (args.rows, args.repeat)
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as folder:
        csv, parquet = write_data(Path(folder), rows)
        for fmt, path, old in (("csv", csv, baseline_csv), ("parquet", parquet, baseline_parquet)):
            want_x, _ = old(path)
            got_x, _ = row_local(path, fmt)
            assert want_x.shape == got_x.shape
            # Interleave so that machine load hits both alike.
            best = {name: [math.inf, math.inf] for name in ("baseline", "row-local")}
            for _ in range(repeat):
                for name, timing in (
                    ("baseline", _time(old, path)),
                    ("row-local", _time(row_local, path, fmt)),
                ):
                    best[name] = [min(a, b) for a, b in zip(best[name], timing, strict=True)]
            results.append(
                {
                    "format": fmt,
                    "rows": rows,
                    "bytes": path.stat().st_size,
                    "baseline_s": best["baseline"][0],
                    "row_local_s": best["row-local"][0],
                    "ratio": best["row-local"][0] / best["baseline"][0],
                    "baseline_cpu_s": best["baseline"][1],
                    "row_local_cpu_s": best["row-local"][1],
                    "cpu_ratio": best["row-local"][1] / best["baseline"][1],
                }
            )
    print(f"\nread + encode, {rows:,} rows × {len(FEATURES)} features + label, best of {repeat}\n")
    print(
        "| format | baseline (pandas) | rows/s | row-local | rows/s | ratio (wall) "
        "| baseline CPU | row-local CPU | ratio (CPU) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        print(
            f"| {r['format']} | {seconds(r['baseline_s'])} | {r['rows'] / r['baseline_s']:,.0f} "
            f"| {seconds(r['row_local_s'])} | {r['rows'] / r['row_local_s']:,.0f} "
            f"| {r['ratio']:.2f} | {seconds(r['baseline_cpu_s'])} "
            f"| {seconds(r['row_local_cpu_s'])} | {r['cpu_ratio']:.2f} |"
        )
    save_json(results_dir(args.smoke) / "reader.json", results)
