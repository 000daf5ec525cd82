"""The `dpfit` CLI's HTTP commands against a live `dpfit serve`: `-o json` answers, text
output, and exit codes that say what went wrong (service/cli_http/)."""

from __future__ import annotations

import csv
import json
import os
import pickle
import pty
import re
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from service.cli import main
from service.cli_http.common import (
    EXIT_AUTH,
    EXIT_BUDGET,
    EXIT_CONFLICT,
    EXIT_INVALID,
    EXIT_JOB_FAILED,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_USAGE,
)
from tests.support.live import LiveServer
from tests.support.walkthrough import COPIES, PREDICT_ROWS, credit_dataset, fresh_credit_copy
from tests.unit.test_cli_yaml import readme_spec

pytestmark = pytest.mark.slow
BIN = Path(sys.executable).parent


class Cli:
    """Runs ``dpfit …`` in this process (real HTTP to the live server) as one principal."""

    def __init__(
        self,
        server: LiveServer,
        key: str,
        monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        self.server, self.key, self.monkeypatch, self.capsys = server, key, monkeypatch, capsys

    def __call__(self, *argv: str, key: str | None = None) -> tuple[int, str, str]:
        self.monkeypatch.setenv("DPFIT_URL", self.server.base_url)
        self.monkeypatch.setenv("DPFIT_API_KEY", key if key is not None else self.key)
        self.capsys.readouterr()
        try:
            code = main(list(argv))
        except SystemExit as exc:  # argparse
            code = int(exc.code or 0)
        out = self.capsys.readouterr()
        return code, out.out, out.err

    def json(self, *argv: str, key: str | None = None) -> Any:
        code, out, err = self(*argv, "-o", "json", key=key)
        assert code == EXIT_OK, (code, out, err)
        return json.loads(out)


@pytest.fixture
def people(sqlite_server: LiveServer) -> tuple[str, str, str, str]:
    tag = uuid.uuid4().hex[:6]
    owner, analyst = f"cli-owner-{tag}", f"cli-analyst-{tag}"
    return (
        owner,
        sqlite_server.key(owner, "owner"),
        analyst,
        sqlite_server.key(analyst, "analyst"),
    )


def write_spec(tmp_path: Path, body: dict[str, Any]) -> Path:
    spec = tmp_path / f"spec-{uuid.uuid4().hex[:6]}.yaml"
    spec.write_text(yaml.safe_dump(body))
    return spec


def test_the_whole_story_from_the_cli(
    sqlite_server: LiveServer,
    people: tuple[str, str, str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    owner, owner_key, analyst, analyst_key = people
    as_owner = Cli(sqlite_server, owner_key, monkeypatch, capsys)
    as_analyst = Cli(sqlite_server, analyst_key, monkeypatch, capsys)

    # register from YAML, grant, list and show
    spec = write_spec(tmp_path, credit_dataset(epsilon=3.0))
    dataset = as_owner.json("datasets", "register", str(spec))
    dataset_id = dataset["id"]
    assert dataset["n_rows"] == 4000 and dataset["owner"] == owner
    grant = as_owner.json("datasets", "grant", dataset_id, analyst, "--epsilon-cap", "2.5")
    assert grant == {**grant, "principal": analyst, "epsilon_cap": 2.5}
    assert dataset_id in [d["id"] for d in as_analyst.json("datasets", "list")]
    code, out, _ = as_analyst("datasets", "list")
    assert code == EXIT_OK and dataset_id in out and "ε=3.0" in out
    shown = as_analyst.json("datasets", "show", dataset_id)
    assert shown["id"] == dataset_id and shown["source"] is None  # analysts never see locations

    # estimate, then submit and wait: text prints the job id, then the model id
    estimate = as_analyst.json(
        "jobs",
        "estimate",
        "--dataset",
        dataset_id,
        "--model",
        "logistic_regression",
        "--l2",
        "0.01",
        "--epsilon",
        "1",
        "--delta",
        "1e-6",
    )
    assert estimate["admissible"] is True and estimate["steps"] >= 1
    code, out, err = as_analyst(
        "jobs",
        "submit",
        "--dataset",
        dataset_id,
        "--model",
        "logistic_regression",
        "--l2",
        "0.01",
        "--optimizer",
        "output_perturbation_gd",
        "--epsilon",
        "1",
        "--delta",
        "1e-6",
        "--wait",
    )
    assert code == EXIT_OK, err
    job_id, model_id = out.split()
    assert job_id.startswith("job_") and model_id.startswith("mdl_")
    assert "job_" not in err  # stdout is not a terminal: no progress bar

    job = as_analyst.json("jobs", "show", job_id)
    assert job["status"] == "succeeded" and job["model_id"] == model_id
    assert job["model"]["l2"] == 0.01 and job["optimizer"]["name"] == "output_perturbation_gd"
    assert as_analyst.json("jobs", "watch", job_id)["status"] == "succeeded"
    code, _, err = as_analyst("jobs", "cancel", job_id)  # finished: nothing to cancel
    assert code == EXIT_CONFLICT and "succeeded" in err
    assert job_id in [j["id"] for j in as_analyst.json("jobs", "list", "--status", "succeeded")]
    code, out, _ = as_analyst("jobs", "list")
    assert code == EXIT_OK and job_id in out and "succeeded" in out

    # a job submitted without --wait prints its id; -o json answers the job; --model-param
    queued = as_analyst.json(
        "jobs",
        "submit",
        "--dataset",
        dataset_id,
        "--model",
        "huber_svm",
        "--model-param",
        "fit_intercept=false",
        "--epsilon",
        "0.5",
        "--delta",
        "1e-6",
    )
    assert queued["status"] in ("queued", "running", "succeeded") and queued["id"] != job_id
    assert queued["model"]["type"] == "huber_svm" and queued["model"]["fit_intercept"] is False
    as_analyst.json("jobs", "watch", queued["id"])

    # -o json before the command, after its group, or after it: the same answer
    for argv in (
        ("-o", "json", "jobs", "show", job_id),
        ("jobs", "-o", "json", "show", job_id),
        ("jobs", "show", job_id, "-o", "json"),
    ):
        code, out, err = as_analyst(*argv)
        assert code == EXIT_OK and json.loads(out)["id"] == job_id, (argv, err)
    code, out, _ = as_analyst("-o", "json", "jobs", "show", job_id, "-o", "text")
    assert code == EXIT_OK and out.startswith(f"job {job_id}: succeeded")  # the last one wins

    # the model, predictions (service and local agree), exports
    model = as_analyst.json("models", "show", model_id)
    assert model["id"] == model_id and model["privacy"]["epsilon"] == 1.0
    code, out, _ = as_analyst("models", "show", model_id)
    assert code == EXIT_OK and "(intercept)" in out and "education=PhD" in out
    rows = tmp_path / "rows.csv"
    with rows.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(PREDICT_ROWS[0]))
        writer.writeheader()
        writer.writerows(
            [
                *PREDICT_ROWS,
                {"age": "", "hours_per_week": " 40 ", "education": "none", "sector": "public"},
            ]
        )
    served = as_analyst.json("models", "predict", model_id, str(rows))
    local = as_analyst.json("models", "predict", model_id, str(rows), "--local")
    assert served["predictions"] == local["predictions"] and len(served["predictions"]) == 3
    np.testing.assert_allclose(local["probabilities"], served["probabilities"], rtol=0, atol=1e-12)
    # the third row's empty age and undeclared education are warned of, served and local alike
    assert served["warnings"] == local["warnings"]
    assert [(w["row"], w["column"], w["kind"]) for w in served["warnings"]] == [
        (2, "age", "missing"),
        (2, "education", "unknown_category"),
    ]
    for local_flag in ((), ("--local",)):
        code, out, err = as_analyst("models", "predict", model_id, str(rows), *local_flag)
        assert code == EXIT_OK and "PREDICTION" in out
        assert "warning: row 2 education: 'none' is not a declared category" in err, err
        assert err.count("warning:") == 2 and "PredictionWarning" not in err
    exported = tmp_path / "model.pkl"
    as_analyst.json("models", "export", model_id, "--format", "sklearn", "--file", str(exported))
    pipeline = pickle.loads(exported.read_bytes())
    assert list(pipeline.predict(PREDICT_ROWS)) == served["predictions"][:2]
    code, out, _ = as_analyst("models", "export", model_id, "--format", "json")
    assert code == EXIT_OK and json.loads(out)["coefficients"] == model["coefficients"]

    # the budget, with its burn-down
    budget = as_analyst.json("budget", dataset_id, "--history")
    assert budget["jobs_charged"] == 2 and budget["your_epsilon_cap"] == 2.5
    assert [p["job_id"] for p in budget["history"]] == [job_id, queued["id"]]
    assert budget["history"][-1]["epsilon_spent"] == pytest.approx(budget["epsilon_spent"])
    code, out, _ = as_analyst("budget", dataset_id, "--history")
    assert code == EXIT_OK and "remaining" in out and "█" in out and job_id in out


def test_exit_codes_say_what_went_wrong(
    sqlite_server: LiveServer,
    people: tuple[str, str, str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    owner, owner_key, analyst, analyst_key = people
    as_owner = Cli(sqlite_server, owner_key, monkeypatch, capsys)
    as_analyst = Cli(sqlite_server, analyst_key, monkeypatch, capsys)
    body = credit_dataset(epsilon=0.5)
    spec = write_spec(tmp_path, body)
    dataset_id = as_owner.json("datasets", "register", str(spec))["id"]
    as_owner.json("datasets", "grant", dataset_id, analyst)
    submit = ["jobs", "submit", "--dataset", dataset_id, "--delta", "1e-6"]  # --model: default

    code, out, err = as_analyst(*submit, "--epsilon", "2", "-o", "json")
    assert code == EXIT_BUDGET and "epsilon_remaining" in json.loads(out), err
    code, out, err = as_analyst(*submit, "--epsilon", "-1", "-o", "json")
    assert code == EXIT_INVALID and json.loads(out)["field"] == "privacy.epsilon"
    code, _, err = as_analyst("jobs", "show", "job_nope")
    assert code == EXIT_NOT_FOUND and "404" in err
    code, _, _ = as_analyst("datasets", "list", key="dpf_wrong")
    assert code == EXIT_AUTH
    code, out, _ = as_owner("datasets", "register", str(spec), "-o", "json")
    assert code == EXIT_CONFLICT and json.loads(out)["dataset_id"] == dataset_id
    code, _, _ = as_analyst("jobs", "submit", "--dataset", dataset_id)  # argparse
    assert code == EXIT_USAGE
    code, _, err = as_analyst("models", "predict", "model_x", str(tmp_path / "missing.csv"))
    assert code == EXIT_USAGE and "cannot read" in err

    # a source changed after registration: the job fails (refunded), --wait says so
    path = COPIES / body["source"]["uri"]
    path.write_text(path.read_text().replace("PhD", "Masters", 1))
    code, out, err = as_analyst(*submit, "--epsilon", "0.1", "--wait", "-o", "json")
    assert code == EXIT_JOB_FAILED, err
    failed = json.loads(out)["job"]
    assert failed["status"] == "failed" and failed["refunded"] is True
    assert failed["model"]["type"] == "logistic_regression"  # --model's default, as the client's


def test_the_installed_command_over_http(
    sqlite_server: LiveServer, people: tuple[str, str, str, str]
) -> None:
    _, _, analyst, analyst_key = people
    env = dict(os.environ, DPFIT_URL=sqlite_server.base_url, DPFIT_API_KEY=analyst_key)

    def dpfit(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(BIN / "dpfit"), *args], env=env, capture_output=True, text=True, timeout=120
        )

    listed = dpfit("jobs", "list", "-o", "json")
    assert listed.returncode == 0 and json.loads(listed.stdout) == [], listed.stderr
    missing = dpfit("models", "show", "model_nope")
    assert missing.returncode == EXIT_NOT_FOUND and "Not found" in missing.stderr
    before = dpfit("-o", "json", "jobs", "list")
    assert before.returncode == 0 and json.loads(before.stdout) == [], before.stderr
    local = dpfit("-o", "json", "openapi")
    assert local.returncode == EXIT_USAGE and "HTTP commands" in local.stderr


def test_the_readme_yaml_spec_registers_with_the_installed_command(
    sqlite_server: LiveServer, people: tuple[str, str, str, str], tmp_path: Path
) -> None:
    """The README's YAML spec (`delta: 1e-5`, a float as in JSON) on a fresh copy of the data
    (one budget per data: the example file itself may be registered already on this server)."""
    _, owner_key, _, _ = people
    text = readme_spec()
    assert text.count("uri: credit.csv") == 1
    spec = tmp_path / "spec.yaml"
    spec.write_text(text.replace("uri: credit.csv", f"uri: {fresh_credit_copy()}"))
    env = dict(os.environ, DPFIT_URL=sqlite_server.base_url, DPFIT_API_KEY=owner_key)
    registered = subprocess.run(
        [str(BIN / "dpfit"), "datasets", "register", str(spec), "-o", "json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert registered.returncode == EXIT_OK, registered.stdout + registered.stderr
    dataset = json.loads(registered.stdout)
    assert dataset["budget"] == {"epsilon": 3.0, "delta": 1e-5} and dataset["n_rows"] == 4000


def test_a_terminal_gets_a_progress_bar(
    sqlite_server: LiveServer, people: tuple[str, str, str, str], tmp_path: Path
) -> None:
    """With stdout on a terminal (a pseudo-terminal here), `jobs submit --wait` draws tqdm's
    bar on stderr; the ids still go to stdout."""
    owner, owner_key, analyst, analyst_key = people
    env = dict(os.environ, DPFIT_URL=sqlite_server.base_url, DPFIT_API_KEY=owner_key)
    spec = write_spec(tmp_path, credit_dataset(epsilon=2.0))
    registered = subprocess.run(
        [str(BIN / "dpfit"), "datasets", "register", str(spec), "-o", "json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert registered.returncode == 0, registered.stderr
    dataset_id = json.loads(registered.stdout)["id"]
    leader, follower = pty.openpty()
    try:
        done = subprocess.run(
            [
                str(BIN / "dpfit"),
                "jobs",
                "submit",
                "--dataset",
                dataset_id,
                "--model",
                "logistic_regression",
                "--epsilon",
                "0.5",
                "--delta",
                "1e-6",
                "--wait",
            ],
            env=dict(env, DPFIT_API_KEY=owner_key),
            stdout=follower,
            stderr=subprocess.PIPE,
            text=True,
            timeout=300,
        )
        os.close(follower)
        shown = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the terminal was closed: all read
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(leader)
    assert done.returncode == EXIT_OK, done.stderr
    job_id, model_id = shown.decode().split()
    assert f"job {job_id}" in done.stderr and "succeeded" in done.stderr
    assert model_id.startswith("mdl_")


def test_keys_create_names_its_database_and_never_makes_one_silently(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "DPFIT_DATABASE_URL"}
    dpfit = str(BIN / "dpfit")
    args = [dpfit, "keys", "create", "--role", "admin", "--name", "admin"]
    refused = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert refused.returncode == 1 and "--create" in refused.stderr
    assert list(tmp_path.iterdir()) == []  # no var/, no database
    made = subprocess.run(
        [*args, "--create"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    database = tmp_path / "var" / "dpfit.db"
    assert made.returncode == 0 and database.is_file()
    assert f"database: sqlite:///{database}" in made.stdout
    again = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert again.returncode == 0 and again.stdout.strip().splitlines()[-1].startswith("dpf_")
    url = "postgresql+psycopg://dpfit:s3cret@127.0.0.1:1/nowhere"
    unreachable = subprocess.run(
        args, env=dict(env, DPFIT_DATABASE_URL=url), capture_output=True, text=True
    )
    assert unreachable.returncode == 1 and "s3cret" not in unreachable.stderr
    assert "dpfit:***@" in unreachable.stderr


def test_grants_are_listed_and_revoked_from_the_cli(
    sqlite_server: LiveServer,
    people: tuple[str, str, str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    owner, owner_key, analyst, analyst_key = people
    as_owner = Cli(sqlite_server, owner_key, monkeypatch, capsys)
    as_analyst = Cli(sqlite_server, analyst_key, monkeypatch, capsys)
    spec = write_spec(tmp_path, credit_dataset(epsilon=3.0))
    dataset_id = as_owner.json("datasets", "register", str(spec))["id"]
    code, out, _ = as_owner("datasets", "grants", dataset_id)
    assert code == EXIT_OK and out.strip() == f"no grants on {dataset_id}"
    as_owner.json("datasets", "grant", dataset_id, analyst, "--epsilon-cap", "2.5")
    estimate = as_analyst.json(
        "jobs",
        "estimate",
        "--dataset",
        dataset_id,
        "--model",
        "logistic_regression",
        "--epsilon",
        "0.5",
        "--delta",
        "1e-6",
    )
    assert estimate["admissible"] is True

    grants = as_owner.json("datasets", "grants", dataset_id)
    assert [(g["principal"], g["epsilon_cap"], g["epsilon_spent"]) for g in grants] == [
        (analyst, 2.5, 0.0)
    ]
    code, out, _ = as_owner("datasets", "grants", dataset_id)
    assert code == EXIT_OK and analyst in out and "2.5" in out and "ε CAP" in out
    code, _, err = as_analyst("datasets", "grants", dataset_id)
    assert code == EXIT_AUTH, err

    revoked = as_owner.json("datasets", "revoke", dataset_id, analyst)
    assert revoked["principal"] == analyst and revoked["revoked_at"]
    assert as_owner.json("datasets", "grants", dataset_id) == []
    code, _, err = as_analyst(
        "jobs",
        "submit",
        "--dataset",
        dataset_id,
        "--model",
        "logistic_regression",
        "--epsilon",
        "0.5",
        "--delta",
        "1e-6",
    )
    assert code == EXIT_NOT_FOUND, err
    code, out, err = as_owner("datasets", "revoke", dataset_id, analyst)
    assert code == EXIT_NOT_FOUND and out == "", err


def test_auto_evaluation_bom_rows_and_history_from_the_cli(
    sqlite_server: LiveServer,
    people: tuple[str, str, str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """What a newcomer tripped on: auto's choice and what it filled in are shown; CSV files with
    a byte-order mark predict; a bad file predicted locally is a clean exit 4; models can be
    evaluated privately (and `jobs show` says so); the burn-down labels its running total."""
    owner, owner_key, analyst, analyst_key = people
    as_owner = Cli(sqlite_server, owner_key, monkeypatch, capsys)
    as_analyst = Cli(sqlite_server, analyst_key, monkeypatch, capsys)
    spec = write_spec(tmp_path, credit_dataset(epsilon=5.0))
    dataset_id = as_owner.json("datasets", "register", str(spec))["id"]
    as_owner.json("datasets", "grant", dataset_id, analyst)
    privacy = ["--epsilon", "1", "--delta", "1e-6"]

    # auto: the estimate and the job say it chose, and what it filled in
    code, out, err = as_analyst("jobs", "estimate", "--dataset", dataset_id, *privacy)
    assert code == EXIT_OK and "(chosen by auto; filled in: " in out, (out, err)
    assert "model.gradient_clip=0.5" in out
    # the job's own (ε, δ) and the dataset's total are told apart (not one unlabelled ε)
    assert "this job: ε=1.0 δ=1e-06" in out and "of the dataset's ε_B=5.0" in out
    code, out, _ = as_analyst(
        "jobs", "estimate", "--dataset", dataset_id, "--optimizer", "dp_gd", *privacy
    )
    assert code == EXIT_OK and "optimizer: dp_gd" in out and "auto" not in out
    code, out, err = as_analyst("jobs", "submit", "--dataset", dataset_id, *privacy, "--wait")
    assert code == EXIT_OK, err
    job_id, model_id = out.split()
    auto = as_analyst.json("jobs", "show", job_id)["plan"]["auto"]
    code, out, _ = as_analyst("jobs", "show", job_id)
    assert code == EXIT_OK and f"optimizer: {auto['optimizer']} (chosen by auto; filled" in out
    assert auto["filled"] and all(f"{name}=" in out for name in auto["filled"])

    # a CSV saved with a UTF-8 byte-order mark (as spreadsheets do) predicts, served and local
    rows = tmp_path / "bom.csv"
    with rows.open("w", newline="", encoding="utf-8-sig") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(PREDICT_ROWS[0]))
        writer.writeheader()
        writer.writerows(PREDICT_ROWS)
    assert rows.read_bytes().startswith(b"\xef\xbb\xbf")
    served = as_analyst.json("models", "predict", model_id, str(rows))
    local = as_analyst.json("models", "predict", model_id, str(rows), "--local")
    assert served["predictions"] == local["predictions"] and len(served["predictions"]) == 2

    # a file the encoding refuses: exit 4 naming the problem, locally as from the service
    bad = tmp_path / "no-age.csv"
    with bad.open("w", newline="") as handle:
        columns = [c for c in PREDICT_ROWS[0] if c != "age"]
        writer = csv.DictWriter(handle, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(PREDICT_ROWS)
    for local_flag in ([], ["--local"]):
        code, out, err = as_analyst("models", "predict", model_id, str(bad), *local_flag)
        assert code == EXIT_INVALID and "age" in err and "Traceback" not in err, err
        code, out, _ = as_analyst(
            "models", "predict", model_id, str(bad), *local_flag, "-o", "json"
        )
        assert code == EXIT_INVALID and json.loads(out)["field"] == "rows"

    # label values that match no label (booleans here): refused naming the field (most labels
    # would be outside the declared values); the dry run shows the report and creates nothing
    slipped = credit_dataset()
    slipped["label"].update(positive=True, negative=False)
    spec = write_spec(tmp_path, slipped)
    code, out, err = as_owner("datasets", "register", str(spec))
    assert code == EXIT_INVALID and "label.positive" in err, err
    code, out, err = as_owner("datasets", "register", str(spec), "--dry-run")
    assert code == EXIT_INVALID and "would register: no" in out, err
    assert "validation: cells the encoding changed:" in out, out
    assert re.search(r"label income: outside_declared (\d+)/\1", out), out

    # a header naming a column twice: refused (a CSV reader would keep the last silently)
    twice = tmp_path / "twice.csv"
    twice.write_text("age,age,hours_per_week,education,sector\n30,40,40,HS,private\n")
    code, _, err = as_analyst("models", "predict", model_id, str(twice))
    assert code == EXIT_USAGE and "names age more than once" in err, err

    # private evaluation: priced (nothing charged), then run, with each metric's noise std
    evaluate = ["models", "evaluate", model_id, "--dataset", dataset_id, "--epsilon", "0.5"]
    before = as_analyst.json("budget", dataset_id)["epsilon_spent"]
    priced = as_analyst.json(*evaluate, "--delta", "1e-6", "--estimate")
    assert priced["admissible"] is True and priced["plan"]["hyperparameters"]["accuracy_std"] > 0
    code, out, _ = as_analyst(*evaluate, "--delta", "1e-6", "--estimate")
    assert code == EXIT_OK and "admissible" in out and "accuracy noise std: " in out
    assert as_analyst.json("budget", dataset_id)["epsilon_spent"] == before
    code, out, err = as_analyst(*evaluate, "--delta", "1e-6")
    assert code == EXIT_OK, err
    evaluation_id = out.split()[0]
    assert evaluation_id.startswith("job_") and f"of model {model_id}" in out
    for shown in ("accuracy: ", "log_loss: ", "true_positive=", "noise std ", "std per cell"):
        assert shown in out, out
    clipped = as_analyst.json(*evaluate, "--delta", "1e-6", "--loss-clip", "1")
    assert clipped["status"] == "succeeded" and 0 <= clipped["metrics"]["accuracy"] <= 1
    assert clipped["plan"]["hyperparameters"]["loss_clip"] == 1.0
    code, out, err = as_analyst(*evaluate, "--delta", "0", "-o", "json")
    assert code == EXIT_INVALID and json.loads(out)["field"] == "privacy.delta", err

    # jobs show: an evaluation of the model, not a job with an empty model id
    code, out, _ = as_analyst("jobs", "show", evaluation_id)
    assert code == EXIT_OK and f"evaluation of model {model_id}" in out
    assert "model_id:" not in out and "optimizer: evaluation" not in out
    code, out, _ = as_analyst("jobs", "list")
    listed = next(line for line in out.splitlines() if line.startswith(evaluation_id))
    assert code == EXIT_OK and listed.endswith(f"evaluates {model_id}")

    # the burn-down's ε is the dataset's total spent after each row, and says so; another
    # principal's row (here the owner's job) has no job id for the analyst: null, not NaN
    code, _, err = as_owner("jobs", "submit", "--dataset", dataset_id, *privacy, "--wait")
    assert code == EXIT_OK, err
    budget = as_analyst.json("budget", dataset_id, "--history")
    assert budget["history"][-1]["job_id"] is None
    code, out, _ = as_analyst("budget", dataset_id, "--history")
    assert "(another)" in out
    lines = [line for line in out.splitlines() if job_id in line or evaluation_id in line]
    assert len(lines) == 2, out
    for line, point in zip(lines, budget["history"][:2], strict=True):
        assert f"ε spent after: {point['epsilon_spent']:.4f}" in line
