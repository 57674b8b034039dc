"""Only finite values are results: ±infinity (a diverged evaluation) and NaN never qualify
for a goal and are never a best value, in every measurement, and a goal that is not a finite
number is refused wherever a goal enters."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import curvekit
from curvekit.cli import main
from curvekit.errors import QueryError
from curvekit.goals import Goal
from curvekit.measure import explain_empty, trial_hits, trial_outcomes
from curvekit.selection import SCATTER_STATUSES, Selection
from curvekit.store.store import Store
from tests.test_measure import METRIC, STATUSES, WORKLOAD, Row, Trial, build_store

Studies = dict[int, tuple[list[Trial], list[Row]]]

finite = st.sampled_from([0.1, 0.2, 0.25, 0.3, 0.5])
infinite = st.sampled_from([math.inf, -math.inf, math.nan])


@st.composite
def finite_studies(draw: st.DrawFn) -> Studies:
    """Studies whose values are all finite, every trial with at least one value."""
    out = {}
    for bs in draw(st.sets(st.sampled_from([1, 2, 8, 64]), min_size=1, max_size=3)):
        ids = draw(st.lists(st.integers(1, 30), min_size=1, max_size=5, unique=True))
        trial_list = [(i, draw(st.sampled_from(STATUSES)), draw(st.sampled_from([0.01, 0.1])),
                       draw(st.sampled_from([0.0, 0.9]))) for i in ids]
        rows = [(i, draw(st.sampled_from([0, 1, 2, 5, 10])), draw(finite)) for i in ids]
        rows += [(draw(st.sampled_from(ids)), draw(st.sampled_from([0, 1, 2, 3, 5, 10])),
                  draw(finite)) for _ in range(draw(st.integers(0, 8)))]
        out[bs] = (trial_list, rows)
    return out


def _answers(store: Store, selection: Selection) -> dict[str, Any]:
    """Every measurement's answer to ``selection``: steps to result, best, trial hits and
    scatter outcomes, and the explanation of what is missing."""
    steps = curvekit.steps_to_result(store, selection, explain=False)
    best = curvekit.best(store, selection.with_goal(None), explain=False)
    out = {"steps": steps.select("batch_size", "step", "trial_id", METRIC).rows(),
           "best": best.select("batch_size", "step", "trial_id", METRIC).rows(),
           "hits": trial_hits(store, selection).rows(),
           "explained": explain_empty(store, selection, result=steps)}
    if set(selection.statuses) <= set(SCATTER_STATUSES):
        out["outcomes"] = trial_outcomes(store, selection, None).select(
            "batch_size", "trial_id", "outcome", "winner").rows()
    return out


def _values(answers: dict[str, Any]) -> list[float]:
    return [row[3] for key in ("steps", "best") for row in answers[key]]


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(studies=finite_studies(), data=st.data(), goal=st.sampled_from([0.15, 0.2, 0.25, 0.4]),
       maximize=st.booleans(),
       statuses=st.sampled_from([("COMPLETE",), ("COMPLETE", "INFEASIBLE"), STATUSES]))
def test_infinite_values_never_change_an_answer(
        tmp_path_factory: pytest.TempPathFactory, studies: Studies, data: st.DataObject,
        goal: float, maximize: bool, statuses: tuple[str, ...]) -> None:
    """Adding ±inf and NaN rows anywhere (to trials that qualify or not, at any step) changes
    no steps to result, no best value, no trial's first hit, no scatter outcome or star, and
    no explanation; no answer ever holds an infinite value."""
    selection = Selection(WORKLOAD, METRIC, goal, maximize, statuses=statuses)
    plain = _answers(build_store(tmp_path_factory.mktemp("finite"), studies), selection)
    noisy: Studies = {}
    for bs, (trial_list, rows) in studies.items():
        ids = [t[0] for t in trial_list]
        extra = data.draw(st.lists(st.tuples(st.sampled_from(ids),
                                             st.sampled_from([0, 1, 2, 3, 5, 10, 20]),
                                             infinite), min_size=1, max_size=6))
        noisy[bs] = (trial_list, rows + extra)
    store = build_store(tmp_path_factory.mktemp("infinite"), noisy)
    answers = _answers(store, selection)
    assert answers == plain
    assert all(math.isfinite(v) for v in _values(answers))


def _diverged_store(home: Path) -> Store:
    """At batch size 8 the COMPLETE trial stops at 0.5; the INFEASIBLE trial's only values
    below any goal are -inf. At 64 a COMPLETE trial reaches 0.2 (finite)."""
    studies: Studies = {
        8: ([(1, "COMPLETE", 0.1, 0.9), (2, "INFEASIBLE", 1.0, 0.9)],
            [(1, 0, 0.9), (1, 10, 0.5), (2, 0, 0.9), (2, 5, -math.inf), (2, 10, math.inf)]),
        64: ([(3, "COMPLETE", 0.1, 0.0), (4, "INFEASIBLE", 0.3, 0.9)],
             [(3, 0, 0.9), (3, 10, 0.2), (4, 2, -math.inf), (4, 3, math.nan)]),
    }
    return build_store(home, studies)


def test_minus_infinity_never_reaches_a_goal_nor_is_best(tmp_path: Path) -> None:
    store = _diverged_store(tmp_path)
    both = Selection(WORKLOAD, METRIC, 0.3, statuses=SCATTER_STATUSES)
    steps = curvekit.steps_to_result(store, both, explain=False)
    assert steps.select("batch_size", "step", "trial_id").rows() == [(64, 10, 3)]
    best = curvekit.best(store, both.with_goal(None), explain=False)
    assert best.select("batch_size", METRIC).rows() == [(8, 0.5), (64, 0.2)]
    # maximizing, +inf is no better a result than -inf is when minimizing
    top = curvekit.best(store, both.with_goal(None, maximize=True), explain=False)
    assert top.select("batch_size", METRIC).rows() == [(8, 0.9), (64, 0.9)]
    assert curvekit.steps_to_result(store, both.with_goal(0.95, maximize=True),
                                    explain=False).is_empty()
    # the scatter: the diverged trial is an x, and no star sits on it
    outcomes = trial_outcomes(store, both, 8)
    assert outcomes.select("trial_id", "outcome", "winner").rows() == [
        (1, "Goal Not Achieved", False), (2, "Infeasible", False)]


def test_the_hint_never_recommends_statuses_whose_only_hits_are_infinite(
        tmp_path: Path) -> None:
    store = _diverged_store(tmp_path)
    lines = explain_empty(store, Selection(WORKLOAD, METRIC, 0.3))
    text = "\n".join(lines)
    assert "1 INFEASIBLE trial at the batch sizes left out is excluded by status" in text
    assert "with it, none would reach the goal either" in text
    assert "--status INFEASIBLE" not in text
    result = CliRunner().invoke(main, ["steps-to-result", WORKLOAD, "--metric", METRIC,
                                       "--goal", "0.3", "--status", "COMPLETE", "--status",
                                       "INFEASIBLE", "--format", "csv", "--home",
                                       str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "inf" not in result.stdout
    assert result.stdout.splitlines()[1].startswith("64,10,3,0.2,")


@pytest.mark.parametrize("goal", ["nan", "inf", "-inf", "NaN", "infinity"])
@pytest.mark.parametrize("command", [
    ["steps-to-result"], ["fit"], ["plot", "steps-to-result"], ["plot", "best"],
    ["plot", "scatter", "--batch-size", "8"], ["plot", "metaparameters"]])
def test_a_goal_that_is_not_finite_is_refused_everywhere(tmp_path_factory:
                                                         pytest.TempPathFactory,
                                                         command: list[str], goal: str) -> None:
    home = tmp_path_factory.getbasetemp() / "diverged"
    if not home.exists():
        _diverged_store(home)
    result = CliRunner().invoke(main, [*command, WORKLOAD, "--metric", METRIC, "--goal", goal,
                                       "--home", str(home)])
    assert result.exit_code == 1, result.output
    assert result.output.startswith(f"Error: goal {float(goal)!r} is not a finite number")
    assert "give a finite number" in result.output


@pytest.mark.parametrize("goal", [math.nan, math.inf, -math.inf])
def test_python_api_and_goal_rules_refuse_a_goal_that_is_not_finite(goal: float) -> None:
    with pytest.raises(QueryError, match="is not a finite number"):
        Selection(WORKLOAD, METRIC, goal)
    with pytest.raises(QueryError, match="is not a finite number"):
        Selection(WORKLOAD, METRIC, 0.3).with_goal(goal)
    with pytest.raises(QueryError, match="is not a finite number"):
        Goal(WORKLOAD, METRIC, goal, False, 100, "rule")


def test_the_reports_goal_choices_ignore_values_that_are_not_finite() -> None:
    from curvekit.reporting.data import goal_choices

    goal = Goal(WORKLOAD, METRIC, 0.3, False, 100, "paper")
    assert goal_choices(goal, [0.1, -math.inf, 0.2, math.nan, 0.25, math.inf, 0.4]) == \
        goal_choices(goal, [0.1, 0.2, 0.25, 0.4])
