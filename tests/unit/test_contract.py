"""The contract is generated, never hand-edited: openapi.yaml and sdk/python must be fresh."""

from __future__ import annotations

from pathlib import Path

from service.cli import openapi_yaml
from tests.support.sdk_tools import GENERATED, ROOT, generate, tree


def test_openapi_yaml_is_current() -> None:
    committed = (ROOT / "openapi.yaml").read_text()
    assert committed == openapi_yaml(), "openapi.yaml is stale: run `make openapi`"


def test_python_sdk_is_current(tmp_path: Path) -> None:
    fresh = tmp_path / "python"
    generate(fresh)
    committed = tree(ROOT / "sdk" / "python" / GENERATED)  # the hand-written rest is kept
    regenerated = tree(fresh / GENERATED)
    stale = sorted(set(committed) ^ set(regenerated)) + sorted(
        name for name in set(committed) & set(regenerated) if committed[name] != regenerated[name]
    )
    assert not stale, f"sdk/python is stale ({stale[:5]}…): run `make sdk`"
