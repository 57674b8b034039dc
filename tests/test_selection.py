"""One Selection, carried whole: from the command line's options to the library's SQL."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import FrozenInstanceError
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import curvekit
from curvekit import measure, structured
from curvekit.cli import main
from curvekit.errors import QueryError
from curvekit.scaling import FitError
from curvekit.scaling import fit as fit_
from curvekit.selection import SCATTER_STATUSES, Selection
from curvekit.store.store import Store
from tests.conftest import snapshot

LSTM = "lm1b/lstm/nesterov_momentum"
CE = "val/cross_entropy_error"


@pytest.fixture(scope="module")
def home(converted_home: Callable[..., Path]) -> Path:
    return converted_home(name="selection")


def cli(home: Path, *args: str) -> Any:
    return CliRunner().invoke(main, [*args, "--home", str(home)])


# -- the value ---------------------------------------------------------------------------


def test_selection_is_a_checked_frozen_value() -> None:
    s = Selection(LSTM, CE, 3.9, statuses=["COMPLETE", "INFEASIBLE"])  # type: ignore[arg-type]
    assert s.statuses == ("COMPLETE", "INFEASIBLE")  # kept as a tuple: equal and hashable
    assert s == Selection(LSTM, CE, 3.9, statuses=SCATTER_STATUSES) and len({s, s}) == 1
    with pytest.raises(FrozenInstanceError):
        s.goal = 4.0  # type: ignore[misc]
    assert s.with_goal(4.0).goal == 4.0 and s.goal == 3.9
    assert s.with_goal(0.3, maximize=True).target == f"{CE} > 0.3"
    assert Selection(LSTM, CE, step_budget=5).without_budgets().budgeted is False
    # the same errors the measurements raised before the value existed
    with pytest.raises(QueryError, match=r"unknown statuses \['DONE'\]; choose from COMPLETE"):
        Selection(LSTM, CE, statuses=("DONE",))
    with pytest.raises(QueryError, match=r"unknown statuses \[\]"):
        Selection(LSTM, CE, statuses=())
    with pytest.raises(QueryError, match="trials must be a positive number of trials, got 0"):
        Selection(LSTM, CE, trials=0)


def test_a_measurement_against_a_goal_needs_one(home: Path) -> None:
    store = Store.open(home)
    with pytest.raises(QueryError, match=r"steps to result of .* needs a goal .*--goal G"):
        curvekit.steps_to_result(store, Selection(LSTM, CE))
    with pytest.raises(QueryError, match="needs a goal"):
        curvekit.trial_outcomes(store, Selection(LSTM, CE), None)
    # best ignores a goal: the best value is the same whatever the target
    assert curvekit.best(store, Selection(LSTM, CE, 1.0)).equals(
        curvekit.best(store, Selection(LSTM, CE)))
    assert curvekit.best_measurement is curvekit.best


def test_store_no_longer_relays_to_measure() -> None:
    assert not hasattr(Store, "steps_to_result") and not hasattr(Store, "best_measurement")
    code = ("import sys, curvekit.store.store; "
            "print('curvekit.measure' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=Path(__file__).resolve().parent.parent)
    assert out.stdout.strip() == "False"


# -- the command line builds the same Selection the library takes ------------------------


def _options(s: Selection, *, old_names: bool = False) -> list[str]:
    """The command-line options that say ``s``."""
    args = [s.workload, "--metric", s.metric]
    if s.goal is not None:
        args += ["--goal", repr(s.goal)]
    if s.maximize:
        args.append("--maximize")
    if s.trials is not None:
        args += ["--trials", str(s.trials)]
    if s.step_budget is not None:
        args += ["--max-steps" if old_names else "--step-budget", repr(s.step_budget)]
    if s.example_budget is not None:
        args += ["--max-examples" if old_names else "--example-budget", repr(s.example_budget)]
    for status in s.statuses:
        args += ["--status", status]
    return args


selections = st.builds(
    Selection, workload=st.just(LSTM), metric=st.just(CE),
    goal=st.sampled_from([3.5, 4.5, 6.0, 20.0]), maximize=st.booleans(),
    trials=st.sampled_from([None, 1, 2, 6]),
    step_budget=st.sampled_from([None, 0.0, 500.0, 1e9]),
    example_budget=st.sampled_from([None, 1e4, 1e7]),
    statuses=st.sampled_from([("COMPLETE",), ("COMPLETE", "INCOMPLETE"),
                              ("COMPLETE", "INCOMPLETE", "INFEASIBLE"), ("INFEASIBLE",)]))


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(selection=selections, old_names=st.booleans())
def test_cli_options_round_trip_to_the_same_selection_and_result(
        home: Path, monkeypatch: pytest.MonkeyPatch, selection: Selection,
        old_names: bool) -> None:
    store = Store.open(home)
    seen: list[Selection] = []
    real = measure.steps_to_result

    def spy(store: Store, s: Selection, **kw: Any) -> Any:
        seen.append(s)
        return real(store, s, **kw)

    with monkeypatch.context() as m:
        m.setattr(measure, "steps_to_result", spy)
        result = cli(home, "steps-to-result", *_options(selection, old_names=old_names),
                     "--format", "json")
    assert result.exit_code in (0, 3), result.output
    assert seen[0] == selection  # the options built exactly this Selection (then explained)
    library = curvekit.steps_to_result(store, selection, explain=False)
    assert json.loads(result.stdout) == json.loads(  # the one writer: NaN/inf as null
        structured.dumps(library.to_dicts(), default=str))
    best_cli = cli(home, "best", *_options(selection.with_goal(None), old_names=old_names),
                   "--format", "json")
    assert best_cli.exit_code in (0, 3), best_cli.output
    assert json.loads(best_cli.stdout) == json.loads(structured.dumps(
        curvekit.best(store, selection, explain=False).to_dicts(), default=str))


# -- one vocabulary: --step-budget / --example-budget, the former names hidden -----------


def test_former_budget_names_are_hidden_aliases(home: Path) -> None:
    new = cli(home, "best", LSTM, "--metric", CE, "--step-budget", "300", "--example-budget",
              "1e6", "--format", "csv")
    old = cli(home, "best", LSTM, "--metric", CE, "--max-steps", "300", "--max-examples",
              "1e6", "--format", "csv")
    assert new.exit_code == old.exit_code == 0 and new.stdout == old.stdout
    alone = cli(home, "best", LSTM, "--metric", CE, "--step-budget", "300", "--format", "csv")
    both = cli(home, "best", LSTM, "--metric", CE, "--step-budget", "300", "--max-steps", "300",
               "--format", "csv")
    assert both.exit_code == 0 and both.stdout == alone.stdout
    clash = cli(home, "best", LSTM, "--metric", CE, "--step-budget", "300", "--max-steps",
                "200")
    assert clash.exit_code == 2
    assert "--step-budget 300 and --max-steps 200 disagree; --max-steps is the former name " \
        "of --step-budget: give it once" in clash.output
    for command in (["steps-to-result"], ["best"], ["fit"], ["plot", "steps-to-result"],
                    ["plot", "metaparameters"], ["plot", "scatter"], ["plot", "best"]):
        helped = CliRunner().invoke(main, [*command, "--help"])
        assert "--step-budget" in helped.output and "--example-budget" in helped.output
        assert "--max-steps " not in helped.output and "--max-examples " not in helped.output
        assert "--status" in helped.output and "--trials" in helped.output
    reference = (Path(__file__).resolve().parent.parent / "docs" / "cli.md").read_text()
    assert "`--max-steps`" not in reference and "`--step-budget`" in reference


def test_plots_take_the_whole_selection(home: Path, tmp_path: Path) -> None:
    out = tmp_path / "best.json"
    drawn = cli(home, "plot", "best", LSTM, "--metric", CE, "--goal", "6", "--status",
                "COMPLETE", "--status", "INCOMPLETE", "--max-steps", "400", "--format", "json",
                "--out", str(out))
    assert drawn.exit_code == 0, drawn.output
    meta = json.loads(out.read_text())["usermeta"]["curvekit"]
    assert meta["statuses"] == ["COMPLETE", "INCOMPLETE"] and meta["step_budget"] == 400
    assert meta["goal"] == 6.0
    scatter = tmp_path / "scatter.json"
    assert cli(home, "plot", "scatter", LSTM, "--metric", CE, "--goal", "6", "--batch-size",
               "16", "--format", "json", "--out", str(scatter)).exit_code == 0
    meta = json.loads(scatter.read_text())["usermeta"]["curvekit"]
    assert meta["statuses"] == list(SCATTER_STATUSES)  # the paper's scatter, by default
    before = snapshot(home)
    wrong = cli(home, "plot", "scatter", LSTM, "--metric", CE, "--goal", "6", "--batch-size",
                "16", "--status", "INCOMPLETE", "--out", str(tmp_path / "no.json"))
    assert wrong.exit_code == 1 and "a scatter shows COMPLETE and INFEASIBLE" in wrong.output
    assert not (tmp_path / "no.json").exists() and snapshot(home) == before


def test_fit_function_and_command_agree(home: Path) -> None:
    # (curvekit.scaling names the module until it is renamed: the function is imported from it)
    store = Store.open(home)
    with pytest.raises(FitError, match=r"give a selection .* or all=True, not both"):
        fit_(store)
    with pytest.raises(FitError, match="not both"):
        fit_(store, Selection(LSTM, CE, 6.0), all=True)
    rows = fit_(store, all=True, explain=False)
    cli_rows = json.loads(cli(home, "fit", "--all", "--format", "json").stdout)
    assert [r["workload"] for r in cli_rows] == [r["workload"] for r in rows]
    refused = cli(home, "fit", "--all", "--trials", "3", "--max-steps", "100")
    assert refused.exit_code == 2
    assert "--all fits every workload at the paper's goals; drop --trials, --step-budget " \
        "(--status still selects the trials)" in refused.output
    assert "give WORKLOAD, --metric and --goal (or --all, or --table)" in cli(
        home, "fit", LSTM, "--metric", CE).output
