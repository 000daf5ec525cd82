"""The README stays true: its walkthrough runs verbatim against a fresh `dpfit serve`."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import EXAMPLES, ROOT
from tests.live import start_server


def walkthrough_script() -> str:
    readme = (ROOT / "README.md").read_text()
    block = readme.split("<!-- walkthrough:start -->")[1].split("<!-- walkthrough:end -->")[0]
    match = re.search(r"```bash\n(.*?)```", block, re.S)
    assert match, "the README's walkthrough block is missing"
    return match.group(1)


def test_readme_walkthrough_runs_verbatim(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'dpfit.db'}"
    server = start_server(url, data_roots=[EXAMPLES], home=tmp_path)
    try:
        # The walkthrough calls .venv/bin/dpfit from the repository root: give it one here.
        (tmp_path / ".venv").mkdir()
        (tmp_path / ".venv" / "bin").symlink_to(Path(sys.executable).parent)
        env = dict(server.env, DPFIT_URL=server.base_url)
        result = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", walkthrough_script()],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert result.returncode == 0, result.stderr + result.stdout
        out = result.stdout
        assert re.search(r"job job_\w+: succeeded", out), out
        lines = [line for line in out.splitlines() if line.startswith("{")]
        model = next(json.loads(line) for line in lines if '"coefficients"' in line)
        assert model["privacy"]["epsilon"] == 1.0 and len(model["coefficients"]) == 9
        prediction = next(json.loads(line) for line in lines if '"predictions"' in line)
        assert set(prediction["predictions"]) <= {">50K", "<=50K"}
        budget = next(json.loads(line) for line in lines if '"epsilon_remaining"' in line)
        assert budget["jobs_charged"] == 1 and budget["epsilon_remaining"] < 3.0
        ledger = next(json.loads(line) for line in lines if '"charges"' in line)
        assert ledger["consistent"] and len(ledger["charges"]) == 1
    finally:
        server.stop()


def test_readme_names_every_environment_variable() -> None:
    readme = (ROOT / "README.md").read_text()
    settings = (ROOT / "service" / "settings.py").read_text()
    for name in set(re.findall(r"DPFIT_[A-Z_]+", settings)):
        assert name in readme, f"{name} is not documented in the README"


def test_ci_runs_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test" in readme and "make test" in ci
    assert os.access(ROOT / ".ci" / "run", os.X_OK)


def test_readme_lists_every_optimizer_and_model() -> None:
    from service.models.registry import model_names
    from service.optimizers.registry import optimizer_names

    readme = (ROOT / "README.md").read_text()
    for name in [*optimizer_names(), *model_names()]:
        assert f"`{name}`" in readme, f"{name} is missing from the README"
