"""`make serve` installs what the README's snippets use, so that they run (issue 26 item 6):
the client with its `sklearn` extra (the snippet ends in ``m.to_sklearn()``), and NOT editable
(an editable install's finder comes after the script's own folder on ``sys.path``: a script run
beside a clone named ``dpfit`` imported the clone's folder as an empty namespace package).
Checked on what ``make -n`` would run, and on the README's snippet."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.fixtures import ROOT
from tests.support.walkthrough import readme_block


def install_commands(target: str, tmp_path: Path) -> list[list[str]]:
    if shutil.which("make") is None:
        pytest.skip("no make on this machine")
    result = subprocess.run(
        ["make", "-n", "-B", target, f"VENV={tmp_path / 'venv'}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return [shlex.split(line) for line in result.stdout.splitlines() if " install " in line]


def test_make_serve_installs_the_client_with_sklearn_and_not_editable(tmp_path: Path) -> None:
    commands = install_commands("install", tmp_path)
    client = [
        (command, i)
        for command in commands
        for i, word in enumerate(command)
        if word.startswith("./sdk/python") or word.startswith("sdk/python")
    ]
    assert len(client) == 1, commands
    command, index = client[0]
    assert command[index] == "./sdk/python[sklearn]"
    assert command[index - 1] != "-e", "the client must not be installed editable"


def test_the_readme_snippet_needs_only_what_make_serve_installs() -> None:
    """The snippet calls to_sklearn (scikit-learn), the client's `sklearn` extra provides it."""
    snippet = readme_block("sdk", "python")
    client = (ROOT / "sdk" / "python" / "pyproject.toml").read_text()
    if "to_sklearn(" in snippet:
        assert 'sklearn = ["scikit-learn' in client
