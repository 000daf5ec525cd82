"""The README stays true: its walkthrough runs verbatim against a fresh `dpfit serve`."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support.fixtures import EXAMPLES, ROOT
from tests.support.live import start_server
from tests.support.walkthrough import readme_block, run_python


def walkthrough_script() -> str:
    return readme_block("walkthrough", "bash")


def sdk_snippet() -> str:
    return readme_block("sdk", "python")


def run_walkthrough(env: dict[str, str], cwd: Path) -> list[dict[str, Any]]:
    """Run the walkthrough; returns the JSON documents it printed (one per line)."""
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", walkthrough_script()],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr + result.stdout
    assert re.search(r"job job_\w+: succeeded", result.stdout), result.stdout
    return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]


def answer(documents: list[dict[str, Any]], key: str) -> dict[str, Any]:
    return next(d for d in documents if key in d)


def test_readme_walkthrough_runs_verbatim_twice(tmp_path: Path) -> None:
    """Pasting the walkthrough twice into one server works: the second run reuses the dataset
    (its registration answers 409 naming it) and its new Idempotency-Key submits a new job."""
    url = f"sqlite:///{tmp_path / 'dpfit.db'}"
    server = start_server(url, data_roots=[EXAMPLES], home=tmp_path)
    try:
        # The walkthrough calls .venv/bin/dpfit from the repository root: give it one here.
        (tmp_path / ".venv").mkdir()
        (tmp_path / ".venv" / "bin").symlink_to(Path(sys.executable).parent)
        env = dict(server.env, DPFIT_URL=server.base_url)
        first = run_walkthrough(env, tmp_path)
        model = answer(first, "coefficients")
        assert model["privacy"]["epsilon"] == 1.0 and len(model["coefficients"]) == 9
        prediction = answer(first, "predictions")
        assert set(prediction["predictions"]) <= {">50K", "<=50K"}
        budget = answer(first, "epsilon_remaining")
        assert budget["jobs_charged"] == 1 and budget["epsilon_remaining"] < 3.0
        ledger = answer(first, "charges")
        assert ledger["consistent"] and len(ledger["charges"]) == 1

        second = run_walkthrough(env, tmp_path)
        again = answer(second, "epsilon_remaining")
        assert again["dataset_id"] == budget["dataset_id"]  # the same dataset, one budget
        assert again["jobs_charged"] == 2
        assert again["epsilon_remaining"] < budget["epsilon_remaining"]
        jobs = [c["job_id"] for c in answer(second, "charges")["charges"]]
        assert len(jobs) == len(set(jobs)) == 2 and jobs[0] == model["job_id"]
        assert answer(second, "coefficients")["job_id"] == jobs[1]

        # The README's dpfit snippet, as bob, on the walkthrough's dataset.
        bob = server.key("bob", "analyst")
        script = f"DATASET_ID = {budget['dataset_id']!r}\n" + sdk_snippet()
        result = run_python(script, dict(env, DPFIT_API_KEY=bob), tmp_path)
        assert result.returncode == 0, result.stderr + result.stdout
        assert ">50K" in result.stdout or "<=50K" in result.stdout
        assert "job job_" in result.stderr  # the progress bar
    finally:
        server.stop()


def test_readme_sdk_snippet_is_short() -> None:
    """From `import dpfit` to a fitted model in at most five lines."""
    lines = [line for line in sdk_snippet().splitlines() if line.strip()]
    fitted = next(i for i, line in enumerate(lines) if ".fit(" in line)
    assert lines[0] == "import dpfit" and fitted + 1 <= 5


def test_readme_names_every_environment_variable() -> None:
    """The configuration reference (the README's "where to go next" links it) names every
    variable the settings read."""
    readme = (ROOT / "README.md").read_text()
    assert "](docs/reference/configuration.md)" in readme
    reference = (ROOT / "docs" / "reference" / "configuration.md").read_text()
    settings = (ROOT / "service" / "settings.py").read_text()
    for name in set(re.findall(r"DPFIT_[A-Z_]+", settings)):
        assert name in reference, f"{name} is not documented in docs/reference/configuration.md"


def test_ci_runs_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test" in readme and "make test" in ci
    assert os.access(ROOT / ".ci" / "run", os.X_OK)


def test_readme_is_a_one_page_start() -> None:
    """A newcomer's page (issue 26 item 8): short, the two commands, how long `make test` takes,
    how to reset the demo, the first key (also in Docker), and a link to the reference."""
    readme = (ROOT / "README.md").read_text()
    assert len(readme.encode()) < 16_000, "the README is a first page: the reference is in docs/"
    assert "make serve" in readme and "make test" in readme
    assert re.search(r"`make test`\*\* takes long: about \*\*\d+–\d+ minutes", readme)
    assert "`make clean`** resets the demo" in readme
    assert "dpfit keys create --role admin" in readme
    assert re.search(r"docker exec \S+ dpfit keys create", readme)
    assert "](docs/README.md)" in readme


def test_readme_own_data_line_keeps_the_examples_root() -> None:
    """`DPFIT_DATA_ROOTS=/path make serve` dropped `examples` (the walkthrough's data): the
    README's line keeps it, joined by the separator the settings split on."""
    from service.settings import Settings

    readme = (ROOT / "README.md").read_text()
    lines = re.findall(r"`(DPFIT_DATA_ROOTS=\S+) make serve`", readme)
    assert lines, "the README has no own-data line"
    for line in lines:
        value = line.split("=", 1)[1]
        roots = Settings.from_env({"DPFIT_DATA_ROOTS": value.replace("/path/to/your/data", "/tmp")})
        assert Path("examples").resolve() in roots.data_roots, line


def test_readme_lists_every_optimizer_and_model() -> None:
    """The optimizer reference (linked from the README) names every optimizer and model."""
    from service.models.registry import model_names
    from service.optimizers.kits.registry import optimizer_names

    assert "](docs/reference/optimizers.md)" in (ROOT / "README.md").read_text()
    reference = (ROOT / "docs" / "reference" / "optimizers.md").read_text()
    for name in [*optimizer_names(), *model_names()]:
        assert f"`{name}`" in reference, f"{name} is missing from docs/reference/optimizers.md"
