"""The parsing attack of issue 8, as a regression test.

A numeric feature declared [0, 1] whose CSV cells are ``True``/``False``; the neighbouring file
differs in ONE row, whose cell is a token that is not a boolean. pandas' whole-column inference
read the first file as booleans (1/0) and the second as strings (every row missing), so the
noise-free models differed by ~75× the sensitivity. With the row-local reader only the changed
row's encoding differs, so ‖w(S) − w(S′)‖ stays within the plan's sensitivity. A second case
uses ``1``/``0`` cells (which the rules do parse), so the bound is tested on a model that does
learn from the column. Boolean words convert as booleans do (issue 22): ``True``/``False``
cells are 1/0, and a neighbour that writes the same logical value as a word (``TRUE`` for
``1``) does not move the model at all.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from service.data.encoding import Encoder
from service.data.reader import read_encoded
from service.data.sources import local_source
from service.data.spec import LabelSpec, NumericFeature
from service.models.logistic import LogisticLoss
from service.optimizers.kits.base import PrivacyTarget
from service.optimizers.output_perturbation_gd import (
    OutputPerturbationGD,
    OutputPerturbationGDParams,
    gradient_descent,
)

N = 2000
LABEL = LabelSpec(column="y", type="binary", positive="yes", negative="no")
FEATURES = [NumericFeature(name="x", min=0, max=1), NumericFeature(name="z", min=-1, max=1)]


def _write(path: Path, cells: list[str], labels: list[str], z: list[str]) -> None:
    lines = ["x,z,y", *(f"{c},{v},{y}" for c, v, y in zip(cells, z, labels, strict=True))]
    path.write_text("\n".join(lines) + "\n")


def _noise_free_model(path: Path) -> tuple[np.ndarray, float]:
    encoder = Encoder(FEATURES, fit_intercept=True)
    X, y = read_encoded(local_source(path, "csv"), encoder, LABEL, None)
    optimizer = OutputPerturbationGD()
    loss = LogisticLoss(l2=0.0)
    plan = optimizer.plan(
        OutputPerturbationGDParams(), loss, N, encoder.dimension, PrivacyTarget(1.0, 1e-6)
    )
    hp = plan.hyperparameters
    return gradient_descent(loss, X, y, hp["step_size"], hp["iterations"]), plan.sensitivity


@pytest.mark.parametrize(
    ("true", "false", "token", "moves"),
    # "True"/"False" are 1/0 and "maybe" is MISSING: the changed row moves the model, within the
    # sensitivity. "word" writes the row's own value as a boolean word: nothing moves.
    [
        ("True", "False", "maybe", True),
        ("1", "0", "maybe", True),
        ("1", "0", "n/a", True),
        ("1", "0", "word", False),
        ("True", "False", "word", False),
    ],
)
def test_neighbouring_files_give_models_within_the_sensitivity(
    tmp_path: Path, true: str, false: str, token: str, moves: bool
) -> None:
    rng = np.random.default_rng(8)
    truth = rng.random(N) < 0.5
    cells = [true if t else false for t in truth]
    labels = ["yes" if t == (rng.random() < 0.9) else "no" for t in truth]
    z = [f"{v:.3f}" for v in rng.uniform(-1, 1, N)]
    neighbour = list(cells)
    neighbour[17] = token if token != "word" else ("TRUE" if truth[17] else "false")
    _write(tmp_path / "s.csv", cells, labels, z)
    _write(tmp_path / "s2.csv", neighbour, labels, z)
    w, sensitivity = _noise_free_model(tmp_path / "s.csv")
    w2, _ = _noise_free_model(tmp_path / "s2.csv")
    gap = float(np.linalg.norm(w - w2))
    assert gap <= sensitivity, (gap, sensitivity)
    assert (gap > 0) == moves
