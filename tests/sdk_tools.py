"""Generating the contract (openapi.yaml) and the Python SDK (sdk/python) from the app.

`make sdk` runs ``python -m tests.sdk_tools generate sdk/python``; tests regenerate both into a
temporary directory and fail when the committed copies are stale.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "sdk" / "openapi-python-client.yaml"
IGNORED = {".ruff_cache", "__pycache__", "dpfit_client.egg-info", "build"}
BIN = Path(sys.executable).parent


def generate(output: Path, spec: Path = ROOT / "openapi.yaml") -> None:
    """Run openapi-python-client on ``spec`` into ``output`` (replacing it)."""
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / "client"
        subprocess.run(
            [
                str(BIN / "openapi-python-client"),
                "generate",
                "--path",
                str(spec),
                "--output-path",
                str(target),
                "--meta",
                "setup",
                "--config",
                str(CONFIG),
            ],
            check=True,
            capture_output=True,
            env=env,
            cwd=tmp,
        )
        if output.exists():
            shutil.rmtree(output)
        shutil.copytree(target, output, ignore=shutil.ignore_patterns(*IGNORED))


def tree(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (relative path → bytes), ignoring caches."""
    files = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and not IGNORED.intersection(path.relative_to(root).parts):
            files[str(path.relative_to(root))] = path.read_bytes()
    return files


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "generate":
        sys.exit("usage: python -m tests.sdk_tools generate OUTPUT_DIR")
    generate(Path(sys.argv[2]))
    print(f"generated {sys.argv[2]}")
