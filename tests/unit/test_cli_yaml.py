"""`dpfit datasets register spec.yaml` reads numbers as JSON does: `delta: 1e-5` — how every
README example writes δ — is a float, not the string PyYAML's YAML 1.1 resolver makes of it
(which the service refused: `422 budget.delta: Input should be a valid number`). The README's
YAML spec registers verbatim through the CLI's own code path."""

from __future__ import annotations

import argparse
import datetime
import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml

from service.cli_http.common import EXIT_OK
from service.cli_http.datasets import SpecLoader, datasets_register, load_spec
from tests.support.fixtures import EXAMPLES
from tests.support.inprocess import in_process_server
from tests.support.walkthrough import readme_block


def readme_spec() -> str:
    return readme_block("cli-spec", "yaml", "docs/reference/cli.md")


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1e-5", 1e-5),
        ("1E5", 1e5),
        (".5", 0.5),
        ("-.5", -0.5),
        ("-3e+2", -300.0),
        ("+1e5", 1e5),
        ("2.5e-3", 2.5e-3),
        ("1.", 1.0),
        ("0.1", 0.1),
        ("1_000.5", 1000.5),
    ],
)
def test_numbers_are_floats_as_in_json(text: str, value: float) -> None:
    loaded = load_spec(f"x: {text}")["x"]
    assert type(loaded) is float and loaded == value
    assert load_spec(f"[{text}]") == [value]  # in flow style too


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("5", 5),
        ("-7", -7),
        ("0x1F", 31),
        ("1_000", 1000),
        ("true", True),
        ("no", False),
        ("null", None),
        ("~", None),
        ("2001-12-14", datetime.date(2001, 12, 14)),
        ("1e", "1e"),
        ("e5", "e5"),
        ("1.2.3", "1.2.3"),
        ('"1e-5"', "1e-5"),
        ("'3.0'", "3.0"),
        ("<=50K", "<=50K"),
    ],
)
def test_everything_else_is_read_as_safe_load_reads_it(text: str, value: Any) -> None:
    loaded = load_spec(f"x: {text}")["x"]
    assert loaded == value and type(loaded) is type(value)
    assert loaded == yaml.safe_load(f"x: {text}")["x"]


def test_infinities_and_nan_stay_yaml_floats() -> None:
    assert load_spec("[.inf, -.Inf, .nan]")[:2] == [math.inf, -math.inf]
    assert math.isnan(load_spec("[.nan]")[0])


def test_the_loader_is_safe_and_changes_no_global_loader() -> None:
    assert issubclass(SpecLoader, yaml.SafeLoader)
    with pytest.raises(yaml.constructor.ConstructorError):
        load_spec("!!python/object/apply:os.system ['true']")
    assert yaml.safe_load("delta: 1e-5") == {"delta": "1e-5"}  # PyYAML's own rule, untouched
    assert yaml.load("delta: 1e-5", Loader=yaml.SafeLoader) == {"delta": "1e-5"}


def test_json_specs_read_the_same() -> None:
    body = {"budget": {"epsilon": 3.0, "delta": 1e-5}, "x": [1, -2.5e-3, True, None, "1e-5"]}
    assert load_spec(json.dumps(body)) == body


class _AppClient:
    """The one method of the dpfit client `datasets register` calls, on the in-process app."""

    def __init__(self, http: Any) -> None:
        self.http = http
        self.status: int | None = None

    def register_dataset(self, spec: dict[str, Any]) -> dict[str, Any]:
        response = self.http.post("/v1/datasets", json=spec)
        self.status = response.status_code
        answer: dict[str, Any] = response.json()
        return answer


def test_the_readme_yaml_spec_registers_verbatim(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = readme_spec()
    assert "delta: 1e-5" in text
    spec = tmp_path / "spec.yaml"
    spec.write_text(text)
    with in_process_server(f"sqlite:///{tmp_path / 'dpfit.db'}", EXAMPLES) as server:
        owner = server.client(server.key("alice", "owner"))
        # What plain yaml.safe_load hands the service: the string "1e-5", refused.
        plain = owner.post("/v1/datasets", json=yaml.safe_load(text))
        assert plain.status_code == 422 and plain.json()["field"] == "budget.delta", plain.text
        # The CLI's own code path (the file read with its loader), against the app.
        client = _AppClient(owner)
        args = argparse.Namespace(spec=spec, output="json")
        capsys.readouterr()
        assert datasets_register(client, args) == EXIT_OK
        assert client.status == 201
        dataset = json.loads(capsys.readouterr().out)
        assert dataset["budget"] == {"epsilon": 3.0, "delta": 1e-5}
        assert dataset["n_rows"] == 4000 and dataset["name"] == "credit"
