"""steps_to_result and best_measurement equal a plain-Python reading of the definitions."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import curvekit
from curvekit.cli import main
from curvekit.errors import QueryError
from curvekit.records import StudyKey, StudyRecord, TrialRecord
from curvekit.store.store import Store
from curvekit.store.transaction import new_staging, publish
from curvekit.store.writer import StoreBuilder

WORKLOAD = "mnist_subsets/mnist_6875/simple_cnn_base/nesterov_momentum"
METRIC = "val/error"
STATUSES = ("COMPLETE", "INCOMPLETE", "INFEASIBLE")

Trial = tuple[int, str, float, float]  # id, status, learning_rate, momentum
Row = tuple[int, int, float | None]  # trial id, step, value


def build_store(home: Path, studies: dict[int, tuple[list[Trial], list[Row]]]) -> Store:
    base_dir, model, optimizer = WORKLOAD.rsplit("/", 2)
    builder = StoreBuilder(new_staging(home))
    counts: dict[tuple[StudyKey, int], int] = {}
    for bs, (trials, rows) in studies.items():
        key = StudyKey(base_dir, model, optimizer, bs)
        builder.add_study(StudyRecord(key, "mnist", False, 100, {}, {}, "s"))
        for tid, status, lr, mom in trials:
            builder.add_trial(TrialRecord(key, tid, status, 100,
                                          {"learning_rate": lr, "momentum": mom}, "m"))
            counts[(key, tid)] = sum(1 for r in rows if r[0] == tid)
        if rows:
            builder.add_measurements(key, pa.table({
                "trial_id": pa.array([r[0] for r in rows], pa.int64()),
                "step": pa.array([r[1] for r in rows], pa.int64()),
                METRIC: pa.array([r[2] for r in rows], pa.float64())}))
    builder.metrics.add(METRIC)
    builder.finish({"store_format": 1, "source": {}}, counts)
    publish(builder.root, home, "s")
    return Store.open(home)


def reference(studies: dict[int, tuple[list[Trial], list[Row]]], goal: float | None, *,
              maximize: bool, trials: int | None, step_budget: float | None,
              example_budget: float | None, statuses: tuple[str, ...]) -> list[tuple[Any, ...]]:
    """The definitions, read literally: (batch_size, step, trial_id, value, eff. lr)."""
    out = []
    for bs in sorted(studies):
        trial_list, rows = studies[bs]
        loaded = sorted(t[0] for t in trial_list if t[1] in statuses)
        if trials is not None:
            loaded = loaded[:trials]
        params = {t[0]: t for t in trial_list}
        usable = [(step, tid, v) for tid, step, v in rows
                  if tid in loaded and v is not None and math.isfinite(v)
                  and (step_budget is None or step <= step_budget)
                  and (example_budget is None or bs * step <= example_budget)]
        if goal is None:  # best measurement: best value, ties by (step, trial)
            sign = -1 if maximize else 1
            pick = min(usable, key=lambda r: (sign * r[2], r[0], r[1]), default=None)
        else:
            hits = [r for r in usable if (r[2] > goal if maximize else r[2] < goal)]
            sign = -1 if maximize else 1
            pick = min(hits, key=lambda r: (r[0], r[1], sign * r[2]), default=None)
        if pick is not None:
            _, _, lr, mom = params[pick[1]]
            out.append((bs, pick[0], pick[1], pick[2], lr / (1 - mom)))
    return out


values = st.sampled_from([0.1, 0.2, 0.25, 0.3, 0.5, math.nan, math.inf, -math.inf, None])


@st.composite
def study_sets(draw: st.DrawFn) -> dict[int, tuple[list[Trial], list[Row]]]:
    out = {}
    for bs in draw(st.sets(st.sampled_from([1, 2, 8, 64, 55000]), min_size=1, max_size=3)):
        ids = draw(st.lists(st.integers(1, 30), min_size=1, max_size=5, unique=True))
        trial_list = [(i, draw(st.sampled_from(STATUSES)),
                       draw(st.sampled_from([0.01, 0.1, 1.0])),
                       draw(st.sampled_from([0.0, 0.9]))) for i in ids]
        rows = [(draw(st.sampled_from(ids)), draw(st.sampled_from([0, 1, 2, 3, 5, 10])),
                 draw(values)) for _ in range(draw(st.integers(0, 14)))]
        out[bs] = (trial_list, rows)
    return out


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(studies=study_sets(), goal=st.sampled_from([0.15, 0.2, 0.25, 0.4]),
       maximize=st.booleans(), trials=st.sampled_from([None, 1, 2, 3]),
       step_budget=st.sampled_from([None, 2, 2.5, 10]),
       example_budget=st.sampled_from([None, 8, 100, 1e6]),
       statuses=st.sampled_from([("COMPLETE",), ("COMPLETE", "INFEASIBLE"), STATUSES]))
def test_matches_the_definitions(tmp_path_factory: pytest.TempPathFactory,
                                 studies: dict[int, tuple[list[Trial], list[Row]]],
                                 goal: float, maximize: bool, trials: int | None,
                                 step_budget: float | None, example_budget: float | None,
                                 statuses: tuple[str, ...]) -> None:
    store = build_store(tmp_path_factory.mktemp("m"), studies)
    options: dict[str, Any] = {"maximize": maximize, "trials": trials,
                               "step_budget": step_budget, "example_budget": example_budget,
                               "statuses": statuses}
    if all(r[2] is None for _, rows in studies.values() for r in rows):
        # a workload without a single value of the metric does not have that metric
        with pytest.raises(QueryError, match="has no metric"):
            curvekit.steps_to_result(store, curvekit.Selection(WORKLOAD, METRIC, goal, **options))
        return
    # the definitions only: explaining missing batch sizes is tested in test_empty_answers
    selection = curvekit.Selection(WORKLOAD, METRIC, goal, **options)
    for got, want in ((curvekit.steps_to_result(store, selection, explain=False),
                       reference(studies, goal, **options)),
                      (curvekit.best(store, selection.with_goal(None), explain=False),
                       reference(studies, None, **options))):
        rows = got.select("batch_size", "step", "trial_id", METRIC,
                          "effective_learning_rate").rows()
        assert len(rows) == len(want)
        for g, w in zip(rows, want, strict=True):
            assert g[:4] == w[:4]
            assert g[4] == pytest.approx(w[4])


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Store:
    studies = {8: ([(1, "COMPLETE", 0.1, 0.9), (2, "COMPLETE", 0.2, 0.0),
                    (3, "INFEASIBLE", 1.0, 0.9)],
                   [(1, 0, 0.9), (1, 100, 0.3), (2, 100, 0.2), (3, 50, 0.01)]),
               64: ([(5, "COMPLETE", 0.5, 0.0)], [(5, 0, 0.9), (5, 10, 0.8)])}
    return build_store(tmp_path_factory.mktemp("small"), studies)


def test_ties_go_to_the_smaller_trial_and_batch_sizes_without_a_hit_drop(small: Store) -> None:
    curve = curvekit.steps_to_result(small, curvekit.Selection(WORKLOAD, METRIC, 0.35))
    assert curve.select("batch_size", "step", "trial_id").rows() == [(8, 100, 1)]
    assert curve["effective_learning_rate"].to_list() == pytest.approx([1.0])
    with_infeasible = curvekit.steps_to_result(small, curvekit.Selection(
        WORKLOAD, METRIC, 0.35, statuses=("COMPLETE", "INFEASIBLE")))
    assert with_infeasible.select("step", "trial_id").rows() == [(50, 3)]


def test_errors_name_the_fix(small: Store) -> None:
    with pytest.raises(QueryError, match="did you mean " + WORKLOAD):
        curvekit.steps_to_result(small, curvekit.Selection(
            WORKLOAD.replace("simple", "simpl"), METRIC, 0.3))
    with pytest.raises(QueryError, match="its metrics are val/error"):
        curvekit.steps_to_result(small, curvekit.Selection(WORKLOAD, "val/accuracy", 0.3))
    with pytest.raises(QueryError, match="unknown statuses"):
        curvekit.best(small, curvekit.Selection(WORKLOAD, METRIC, statuses=("DONE",)))
    with pytest.raises(QueryError, match="in the query:\nselect nope from trials"):
        small.sql("select nope from trials")


def test_cli_mirrors_the_api(small: Store) -> None:
    home = str(small.path.parent.parent)
    runner = CliRunner()
    csv = runner.invoke(main, ["steps-to-result", WORKLOAD, "--metric", METRIC, "--goal",
                               "0.35", "--home", home, "--format", "csv"])
    assert csv.exit_code == 0, csv.output
    header, row = csv.stdout.splitlines()  # warnings go to stderr
    assert header.startswith("batch_size,step,trial_id,val/error,")
    assert row.startswith("8,100,1,0.3,")
    best = runner.invoke(main, ["best", WORKLOAD, "--metric", METRIC, "--home", home,
                                "--format", "json", "--max-steps", "50", "--status",
                                "COMPLETE", "--status", "INFEASIBLE"])
    assert [(r["batch_size"], r["step"], r["trial_id"]) for r in __import__("json").loads(
        best.output)] == [(8, 50, 3), (64, 10, 5)]
    q = runner.invoke(main, ["query", "select count(*) as n from trials", "--home", home,
                             "--format", "csv"])
    assert q.output == "n\n4\n"
    bad = runner.invoke(main, ["steps-to-result", "nope/x/y", "--metric", METRIC, "--goal",
                               "1", "--home", home])
    assert bad.exit_code == 1 and bad.output.startswith("Error: unknown workload")


def test_pandas_is_one_call_away(small: Store) -> None:
    frame = small.measurements(WORKLOAD)
    assert isinstance(frame, pl.DataFrame)
    assert frame.to_pandas().shape == (6, 4)
    lazy = small.measurements(WORKLOAD, lazy=True)
    assert isinstance(lazy, pl.LazyFrame)
    assert lazy.filter(pl.col("batch_size") == 64).collect().height == 2


@pytest.mark.parametrize("maximize, goal, value", [(False, 0.25, 0.1), (True, 0.05, 0.2)])
def test_a_repeated_first_step_reports_its_best_value(tmp_path: Path, maximize: bool,
                                                      goal: float, value: float) -> None:
    """Steps to result reads each trial's value in its one pass over the rows unless the
    trial repeats its first qualifying step: then the best value logged at that step is
    reported, whichever row the pass met first."""
    rows: list[Row] = [(1, 5, 0.2), (1, 5, 0.1), (1, 5, 0.15), (1, 10, 0.05),
                       (2, 7, 0.01), (2, 5, 0.9)]
    trials: list[Trial] = [(1, "COMPLETE", 0.1, 0.0), (2, "COMPLETE", 0.1, 0.0)]
    for order in (rows, rows[::-1]):
        store = build_store(tmp_path / str(len(list(tmp_path.iterdir()))), {8: (trials, order)})
        got = curvekit.steps_to_result(store, curvekit.Selection(
            WORKLOAD, METRIC, goal, maximize=maximize), explain=False)
        assert got.select("batch_size", "step", "trial_id", METRIC).rows() == [
            (8, 5, 1, value)]
