"""Generating the contract (openapi.yaml) and the Python SDK (sdk/python) from the app.

`make sdk` runs ``python -m tests.support.sdk_tools generate sdk/python``; tests regenerate both
into a temporary directory and fail when the committed copies are stale.

Only the generated low-level package ``sdk/python/dpfit_client/`` is (re)written. Everything
else in ``sdk/python`` is hand-written and kept: the high-level ``dpfit`` package, the packaging
(``pyproject.toml``, which installs both packages with one ``pip install ./sdk/python``) and the
README. openapi-python-client's own packaging files are discarded.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "sdk" / "openapi-python-client.yaml"
IGNORED = {".ruff_cache", "__pycache__", "dpfit_client.egg-info", "build"}
#: The generated package: the only part of sdk/python that generation replaces.
GENERATED = "dpfit_client"
BIN = Path(sys.executable).parent


def generate(output: Path, spec: Path = ROOT / "openapi.yaml") -> None:
    """Run openapi-python-client on ``spec`` and replace ``output/dpfit_client`` with its
    package; every other file under ``output`` (the hand-written ``dpfit`` package, the
    packaging, the README) is left as it is."""
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
        package = output / GENERATED
        if package.exists():
            shutil.rmtree(package)
        output.mkdir(parents=True, exist_ok=True)
        shutil.copytree(target / GENERATED, package, ignore=shutil.ignore_patterns(*IGNORED))


def tree(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (relative path → bytes), ignoring caches."""
    files = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and not IGNORED.intersection(path.relative_to(root).parts):
            files[str(path.relative_to(root))] = path.read_bytes()
    return files


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "generate":
        sys.exit("usage: python -m tests.support.sdk_tools generate OUTPUT_DIR")
    generate(Path(sys.argv[2]))
    print(f"generated {sys.argv[2]}")
