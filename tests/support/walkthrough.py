"""The README's walkthrough as data: the example dataset's registration and a job spec."""

from __future__ import annotations

import atexit
import copy
import importlib.util
import re
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
# One budget per data: a source backs one dataset, so tests register fresh copies of the example
# data from here (tests/support/live.py makes it a data root of every server it starts).
COPIES = Path(tempfile.mkdtemp(prefix="dpfit-test-data-"))
atexit.register(shutil.rmtree, COPIES, True)

CREDIT_FEATURES: list[dict[str, Any]] = [
    {"name": "age", "type": "numeric", "min": 18, "max": 90},
    {"name": "hours_per_week", "type": "numeric", "min": 1, "max": 99},
    {
        "name": "education",
        "type": "categorical",
        "categories": ["HS", "Bachelors", "Masters", "PhD"],
    },
    {"name": "sector", "type": "categorical", "categories": ["private", "public", "self-employed"]},
]
CREDIT_LABEL = {"column": "income", "positive": ">50K", "negative": "<=50K"}


def readme_block(marker: str, language: str, document: str = "README.md") -> str:
    """The code block of ``language`` between ``<!-- marker:start -->`` and ``<!-- marker:end -->``
    in ``document`` (a path from the repository root; default the README): the blocks the tests
    run verbatim."""
    text = (EXAMPLES.parent / document).read_text()
    assert f"<!-- {marker}:start -->" in text, f"{document}'s {marker} block is missing"
    block = text.split(f"<!-- {marker}:start -->")[1].split(f"<!-- {marker}:end -->")[0]
    match = re.search(rf"```{language}\n(.*?)```", block, re.S)
    assert match, f"{document}'s {marker} block is missing"
    return match.group(1)


def run_python(script: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``script`` run by this interpreter in a new process (as a reader pastes a documented
    block), its output captured as text; five minutes at most."""
    return subprocess.run(
        [sys.executable, "-c", script],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def fresh_credit_copy() -> str:
    """A new copy of examples/credit.csv in :data:`COPIES` with content of its own (one extra,
    empty, unused column with a unique name: the same rows for every declared column), so that
    it can be registered again. Returns its name (relative to the data root)."""
    tag = uuid.uuid4().hex[:12]
    header, *rows = (EXAMPLES / "credit.csv").read_text().splitlines()
    name = f"credit-{tag}.csv"
    text = "\n".join([f"{header},copy_{tag}", *(f"{row}," for row in rows)]) + "\n"
    (COPIES / name).write_text(text)
    return name


def credit_dataset(
    epsilon: float = 3.0, delta: float = 1e-5, uri: str | None = None
) -> dict[str, Any]:
    """The walkthrough's registration body; by default on a fresh copy of the example data."""
    if uri is None:
        uri = fresh_credit_copy()
    return {
        "name": "credit",
        "source": {"uri": uri},
        "label": copy.deepcopy(CREDIT_LABEL),
        "features": copy.deepcopy(CREDIT_FEATURES),
        "budget": {"epsilon": epsilon, "delta": delta},
    }


def logistic_job(
    dataset_id: str, epsilon: float = 1.0, delta: float = 1e-6, l2: float = 0.01, **params: Any
) -> dict[str, Any]:
    return {
        "dataset_id": dataset_id,
        "model": {"type": "logistic_regression", "l2": l2, "fit_intercept": True},
        "optimizer": {"name": "output_perturbation_gd", "params": params},
        "privacy": {"epsilon": epsilon, "delta": delta},
    }


PREDICT_ROWS = [
    {"age": 52, "hours_per_week": 60, "education": "PhD", "sector": "self-employed"},
    {"age": 19, "hours_per_week": 15, "education": "HS", "sector": "public"},
]


def write_large_credit(path: Path, n: int) -> str:
    """A larger copy of the example data (same schema) as Parquet; returns its file name."""
    spec = importlib.util.spec_from_file_location("make_example", EXAMPLES / "make_example.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    target = path / f"credit_{n}.parquet"
    if not target.exists():
        module.make(n).to_parquet(target)
    return target.name
