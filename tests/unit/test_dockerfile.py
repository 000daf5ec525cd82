"""The image says when it is healthy (issue 26 item 7): a HEALTHCHECK that asks the service's
own /healthz on the port the image serves, with a command the slim base image has (Python)."""

from __future__ import annotations

import json
import re

from tests.support.fixtures import ROOT


def instruction(name: str) -> str:
    text = (ROOT / "Dockerfile").read_text()
    found = [line for line in text.splitlines() if line.startswith(f"{name} ")]
    assert len(found) == 1, f"the Dockerfile has {len(found)} {name} lines"
    return found[0]


def test_the_healthcheck_asks_healthz_on_the_served_port() -> None:
    from service.api.catalog import router

    check = instruction("HEALTHCHECK")
    command = json.loads(check.split(" CMD ", 1)[1])
    assert command[:2] == ["python", "-c"]  # python:3.11-slim has no curl or wget
    compile(command[2], "HEALTHCHECK", "exec")  # the check is valid Python
    port = instruction("EXPOSE").split()[1]
    assert f"http://127.0.0.1:{port}/healthz" in command[2]
    assert "/healthz" in {route.path for route in router.routes}  # type: ignore[attr-defined]
    assert re.search(r"--start-period=\d+s", check) and re.search(r"--timeout=\d+s", check)
