"""End to end: `curvekit add`, then the new workload answers steps-to-result, fit, plot and
info like the release's own workloads."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from curvekit.cli import main
from curvekit.ingest.manifest import EXAMPLE
from curvekit.scaling import fit_critical_batch
from tests.logfiles import B_CRIT, BATCH_SIZES, GOAL, write_lightning

NAME = "my_data/cnn/momentum"


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    version = 0
    for bs in BATCH_SIZES:
        for trial in range(2):
            write_lightning(tmp_path / "logs" / f"version_{version}", bs, trial,
                            lr=0.1 * (trial + 1), diverge=(bs == 16 and trial == 0))
            version += 1
    return tmp_path / "logs"


def _run(*args: str | Path) -> str:
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result.output


def _expected_steps(logs: Path) -> dict[int, int]:
    """Steps to result read straight from the files: the first step at which any run's
    validation error (1 - val_acc) is below GOAL, over runs that did not diverge."""
    best: dict[int, int] = {}
    for path in logs.glob("version_*/metrics.csv"):
        bs = int((path.parent / "hparams.yaml").read_text().split()[1])
        rows = list(csv.DictReader(path.open()))
        if any(r["val_loss"] == "nan" or r["train_loss"] == "nan" for r in rows):
            continue
        hits = [int(r["step"]) for r in rows if r["val_acc"] and 1 - float(r["val_acc"]) < GOAL]
        if hits:
            best[bs] = min(best.get(bs, hits[0]), min(hits))
    return best


def test_add_then_query_fit_plot_info(logs: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    out = _run("add", logs, "--name", NAME, "--home", home)
    assert out == f"Added {NAME} (6 studies, 12 trials, 300 measurements) to the store at " \
        f"{next((home / 'stores').iterdir())}.\n"
    assert _run("add", logs, "--name", NAME, "--home", home) == (
        f"Nothing to do: {NAME} is already in the store with the same data (6 studies, "
        "12 trials, 300 measurements).\n")

    steps = json.loads(_run("steps-to-result", NAME, "--metric", "val/classification_error",
                            "--goal", GOAL, "--format", "json", "--home", home))
    assert {r["batch_size"]: r["step"] for r in steps} == _expected_steps(logs)

    fits = json.loads(_run("fit", NAME, "--metric", "val/classification_error", "--goal", GOAL,
                           "--model", "critical", "--format", "json", "--home", home))
    expected = _expected_steps(logs)
    direct = fit_critical_batch(sorted(expected), [expected[b] for b in sorted(expected)])
    assert fits[0]["workload"] == NAME and fits[0]["points"] == len(BATCH_SIZES)
    assert fits[0]["b_crit"] == pytest.approx(direct.b_crit)
    assert fits[0]["s_min"] == pytest.approx(direct.s_min)
    assert B_CRIT / 2 < fits[0]["b_crit"] < B_CRIT * 2  # the curves were made with B_CRIT

    figure = tmp_path / "plot.json"
    _run("plot", "steps-to-result", NAME, "--metric", "val/classification_error", "--goal",
         GOAL, "--format", "json", "--out", figure, "--home", home)
    spec = json.loads(figure.read_text())
    curve = next(rows for rows in spec["datasets"].values() if rows[0].get("curve") == NAME)
    assert {int(r["batch_size"]): int(r["step"]) for r in curve} == expected

    info = json.loads(_run("info", "--format", "json", "--home", home))
    row = next(r for r in info if r["workload"] == NAME)
    assert (row["studies"], row["trials"], row["complete"], row["infeasible"]) == (6, 12, 11, 1)
    assert row["metrics"] == ["train/loss", "val/classification_error",
                              "val/loss"]


def test_cli_errors_and_template(logs: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    assert _run("add", "--example-manifest") == EXAMPLE
    bad = logs / "version_3" / "metrics.csv"
    lines = bad.read_text().splitlines()
    lines[4] = lines[4].replace(",", ",x", 1)
    bad.write_text("\n".join(lines) + "\n")
    result = runner.invoke(main, ["add", str(logs), "--name", NAME, "--home",
                                  str(tmp_path / "home")])
    assert result.exit_code == 1
    assert result.output.startswith(f"Error: {bad}, line 5: value ")
    assert not (tmp_path / "home" / "store").exists()
    result = runner.invoke(main, ["add", "--home", str(tmp_path / "home")])
    assert result.exit_code == 2 and "give SOURCE" in result.output
    result = runner.invoke(main, ["add", str(logs), "--name", NAME, "--map", "nonsense"])
    assert result.exit_code == 1 and "--map 'nonsense' is not OLD=NEW" in result.output


def test_docs_examples_run(capsys: pytest.CaptureFixture[str]) -> None:
    """The Python example of docs/adding-workloads.md runs and prints what it says; the
    template in the page is the one --example-manifest prints."""
    page = (Path(__file__).resolve().parent.parent / "docs" / "adding-workloads.md").read_text()
    assert f"```toml\n{EXAMPLE}```" in page
    for block in re.findall(r"```python\n(.*?)```", page, re.S):
        exec(compile(block, "adding-workloads.md", "exec"), {})
        printed = capsys.readouterr().out.splitlines()
        promised = [line.split("# ", 1)[1].strip() for line in block.splitlines()
                    if line.startswith("print(") and "# " in line]
        assert printed == promised


def test_add_leaves_pandas_unimported(logs: Path, tmp_path: Path) -> None:
    """pyarrow would import pandas (a third of a second) for the first array it builds;
    the add never hands it a pandas object, so it runs, and answers the same, without."""
    import subprocess
    import sys

    script = ("import runpy, sys\n"
              "sys.argv = ['curvekit', *sys.argv[1:]]\n"
              "try:\n"
              "    runpy.run_module('curvekit', run_name='__main__')\n"
              "finally:\n"
              "    print('pandas imported:', 'pandas' in sys.modules)\n")
    home = tmp_path / "home"
    done = subprocess.run([sys.executable, "-c", script, "add", str(logs), "--name", NAME,
                           "--home", str(home)], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parent.parent)
    assert done.returncode == 0, done.stderr
    assert done.stdout.endswith("pandas imported: False\n"), done.stdout
    # the same store as an add in this process, where pandas may be imported
    other = tmp_path / "other"
    _run("add", logs, "--name", NAME, "--home", other)
    query = "select * from measurements order by all"
    assert _run("query", query, "--format", "csv", "--home", home) == \
        _run("query", query, "--format", "csv", "--home", other)

