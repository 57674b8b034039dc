"""Every answer stays the same: on the demo home, ``info``, ``steps-to-result`` and ``best``
(table, CSV, JSON), ``fit --all`` and the report's data are byte for byte those the store of
format 1 gave (tests/answers_demo, recorded by benchmarks/answers.py with that code).
``python benchmarks/answers.py side-by-side --archive A`` compares the same and every
figure's spec on a converted archive, with both versions of the code in one run."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from benchmarks.answers import REPORT_DATA, _safe
from curvekit.cli import main
from curvekit.runner.demo import demo

FROZEN = Path(__file__).resolve().parent / "answers_demo"


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("answers") / "home"
    demo(home)
    return home


def _cli(args: list[str], home: Path) -> str:
    result = CliRunner().invoke(main, [*args, "--home", str(home)])
    text = result.stdout + (f"\n[stderr]\n{result.stderr}" if result.stderr else "")
    return text + f"\n[exit {result.exit_code}]\n"


def _frozen(name: str) -> str:
    return (FROZEN / name).read_text()


def test_info_is_unchanged(home: Path) -> None:
    for fmt in ("table", "csv", "json"):
        assert _cli(["info", "--format", fmt], home) == _frozen(f"info.{fmt}"), fmt


@pytest.mark.parametrize("command", ["steps", "best"])
def test_steps_to_result_and_best_are_unchanged(home: Path, command: str) -> None:
    goals = json.loads(_frozen("goals.json"))
    for workload, (metric, goal, maximize, trials) in goals.items():
        sel = [workload, "--metric", metric, "--trials", str(trials),
               *(["--maximize"] if maximize else [])]
        args = (["steps-to-result", *sel, "--goal", repr(goal)] if command == "steps"
                else ["best", *sel])
        for fmt in ("table", "csv", "json"):
            got = _cli([*args, "--format", fmt], home)
            assert got == _frozen(f"{command}-{_safe(workload)}.{fmt}"), (workload, fmt)


def test_fit_all_is_unchanged(home: Path) -> None:
    for fmt in ("table", "json"):
        assert _cli(["fit", "--all", "--format", fmt], home) == _frozen(f"fit-all.{fmt}"), fmt


def test_the_reports_data_is_unchanged(home: Path, capsys: pytest.CaptureFixture[str],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.argv", ["report-data", str(home), "20"])
    exec(compile(REPORT_DATA, "<report-data>", "exec"), {})
    got = capsys.readouterr().out
    want = re.sub(r"\n\[exit 0\]\n$", "", _frozen("report-data.json"))
    assert got.rstrip("\n") == want.rstrip("\n")
