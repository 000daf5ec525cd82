"""`dpfit datasets register` reads label values and categories as the text the owner typed
(issue 26, item 2): YAML 1.1 made `positive: yes` the boolean True, so every "yes" cell fell
outside the declared values and the file's only budget went to a dataset whose jobs learn
nothing. And `--dry-run` shows the validation report without creating anything."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from service.cli_http.common import EXIT_INVALID, EXIT_OK
from service.cli_http.datasets import datasets_register, load_spec
from tests.support.inprocess import in_process_server

SPEC = """\
name: answers
source: {{uri: answers.csv}}
label:
  column: answer
  positive: {positive}
  negative: {negative}
features:
  - {{name: x, type: numeric, min: 0, max: 10}}
  - {{name: switch, type: categorical, categories: [on, off, Yes]}}
budget: {{epsilon: 1, delta: 1e-5}}
"""


def test_yes_no_on_off_in_label_values_and_categories_are_the_text_typed() -> None:
    spec = load_spec(SPEC.format(positive="yes", negative="no"))
    assert spec["label"]["positive"] == "yes" and spec["label"]["negative"] == "no"
    assert spec["features"][1]["categories"] == ["on", "off", "Yes"]
    classes = load_spec("label: {column: y, type: categorical, classes: [ON, Off, maybe]}")
    assert classes["label"]["classes"] == ["ON", "Off", "maybe"]


def test_everything_else_reads_as_before() -> None:
    # true/false are booleans in JSON and YAML 1.2 alike: they stay booleans.
    assert load_spec("label: {positive: true, negative: False}")["label"] == {
        "positive": True,
        "negative": False,
    }
    # Quoted text stays text; numbers stay numbers.
    assert load_spec('label: {positive: "true", negative: 0}')["label"] == {
        "positive": "true",
        "negative": 0,
    }
    # Outside label values and categories, YAML's reading is unchanged.
    spec = load_spec("strict: no\nx: yes\nlabel: {column: on}\nfeatures: [{name: off}]")
    assert spec["strict"] is False and spec["x"] is True
    assert spec["label"]["column"] is True and spec["features"][0]["name"] is False
    assert load_spec(json.dumps({"label": {"positive": "yes"}})) == {"label": {"positive": "yes"}}


class _AppClient:
    """The two methods of the dpfit client `datasets register` calls, on the in-process app."""

    def __init__(self, http: Any) -> None:
        self.http = http
        self.created = 0

    def register_dataset(self, spec: dict[str, Any]) -> dict[str, Any]:
        response = self.http.post("/v1/datasets", json=spec)
        assert response.status_code == 201, response.text
        self.created += 1
        answer: dict[str, Any] = response.json()
        return answer

    def validate_dataset(self, spec: dict[str, Any]) -> dict[str, Any]:
        response = self.http.post("/v1/datasets/validate", json=spec)
        assert response.status_code == 200, response.text
        answer: dict[str, Any] = response.json()
        return answer


def test_an_unquoted_yes_registers_as_typed_and_the_dry_run_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "data"
    root.mkdir()
    cells = [f"{i % 10},{'on' if i % 3 else 'off'},{'yes' if i % 2 else 'no'}" for i in range(40)]
    (root / "answers.csv").write_text("\n".join(["x,switch,answer", *cells]) + "\n")
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC.format(positive="yes", negative="no"))
    with in_process_server(f"sqlite:///{tmp_path / 'dpfit.db'}", root) as server:
        client = _AppClient(server.client(server.key("olga", "owner")))
        capsys.readouterr()
        dry = argparse.Namespace(spec=spec, output="text", dry_run=True)
        assert datasets_register(client, dry) == EXIT_OK
        out = capsys.readouterr().out
        assert "would register: yes" in out and "every cell as declared" in out, out
        assert client.created == 0

        # Typos: the dry run shows the report and the refusal; exit 4, nothing created.
        typo = tmp_path / "typo.yaml"
        typo.write_text(SPEC.format(positive="yse", negative="np"))
        args = argparse.Namespace(spec=typo, output="text", dry_run=True)
        assert datasets_register(client, args) == EXIT_INVALID
        out = capsys.readouterr().out
        assert "would register: no — label.positive:" in out, out
        assert "label answer: outside_declared 40/40" in out, out
        assert client.created == 0

        assert datasets_register(client, argparse.Namespace(spec=spec, output="json")) == EXIT_OK
        dataset = json.loads(capsys.readouterr().out)
        assert dataset["label"]["positive"] == "yes"
        assert dataset["validation"]["label"]["outside_declared"] == 0
        switch = dataset["validation"]["features"][1]
        assert switch["name"] == "switch" and switch["unknown_category"] == 0
        assert client.created == 1
