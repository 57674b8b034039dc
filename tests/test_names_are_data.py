"""Names are data (docs/store.md, "One fixed schema: names are rows"; docs/security.md,
"Names and paths are data, never SQL"): any metric or metaparameter name the one name rule
accepts, in any case, goes through add -> info, steps-to-result, best, fit, plot, query and
the report exactly and case-sensitively, beside its other-case twin, and the store's files
keep their fixed columns."""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import curvekit
from curvekit.cli import main
from curvekit.errors import CurvekitError
from curvekit.names import name_problem
from curvekit.records import StudyKey, StudyRecord, TrialRecord
from curvekit.store.catalog import info, verify
from curvekit.store.layout import TABLES, fixed_schema
from curvekit.store.store import Store
from curvekit.store.update import WorkloadData, add_workload
from curvekit.store.wide import frame_names

NAME = "mine/net/sgd"
BATCH_SIZES = (16, 32, 64, 128)
TRIALS = (0, 1)
STEPS = tuple(range(0, 1000, 100))
SPECIAL = ["step", "Step", "STEP", "batch_size", "trial_id", "value", "metric", "name",
           "type", "number", "base_dir", "model", "optimizer", "status", "steps",
           "n_measurements", "effective_learning_rate", "val/err", "VAL/ERR",
           "param_optimizer", "step (metric)", '0") from x; --', "learning_rate", "momentum",
           "\u00e9", "e\u0301", "中文/损失", "a" * 255]
# any text the rule may accept or refuse, and the names that used to be columns
NAMES = st.one_of(st.sampled_from(SPECIAL),
                  st.text(st.characters(codec=None, exclude_categories=()), min_size=0,
                          max_size=30))


def _curve(bs: int, trial: int, step: int, offset: float) -> float:
    return offset + 1.0 / (1.0 + step * bs / (800.0 * (1 + trial)))


def workload(metrics: dict[str, float], parameters: dict[str, Any]) -> WorkloadData:
    """Two trials per batch size; each metric's curve shifted by its offset (so two
    metrics never answer for each other), in the long form that carries any name."""
    base_dir, model, optimizer = NAME.rsplit("/", 2)
    studies, trials, rows = [], [], {}
    for bs in BATCH_SIZES:
        key = StudyKey(base_dir, model, optimizer, bs)
        studies.append(StudyRecord(key, "mine", False, STEPS[-1], {}, {}, "runs.toml"))
        for t in TRIALS:
            trials.append(TrialRecord(key, t, "COMPLETE", STEPS[-1],
                                      {"learning_rate": 0.1 * (t + 1), **parameters}, f"r{t}"))
            rows[(key, t)] = pa.table({
                "step": [s for _ in metrics for s in STEPS],
                "metric": [m for m in metrics for _ in STEPS],
                "value": [_curve(bs, t, s, off) for off in metrics.values() for s in STEPS]})
    return WorkloadData(studies, trials, rows, {"format": "test"})


def reference(metric_offset: float, goal: float) -> dict[int, tuple[int, int]]:
    """Steps to result read literally: batch size -> (step, trial)."""
    out = {}
    for bs in BATCH_SIZES:
        hits = [(s, t) for t in TRIALS for s in STEPS if _curve(bs, t, s, metric_offset) < goal]
        if hits:
            out[bs] = min(hits)
    return out


def _check_files(home: Path) -> None:
    snap = (home / "store").resolve()
    for table in TABLES:
        for path in (snap / table).rglob("*.parquet"):
            assert pq.read_schema(path).remove_metadata().equals(fixed_schema(table))


def round_trip(home: Path, names: list[str], parameter: str) -> None:
    """Add a workload whose metrics are ``names`` (distinct), with a metaparameter named
    ``parameter``, and check every answer names each exactly."""
    offsets = {n: 0.01 * i for i, n in enumerate(names)}
    add_workload(home, workload(offsets, {parameter: 7}))
    _check_files(home)
    store = Store.open(home)
    assert store.metrics(NAME) == sorted(names)
    assert info(store).row(0, named=True)["metrics"] == sorted(names)
    assert parameter in store.parameter_columns(NAME)
    for name, offset in offsets.items():
        goal = offset + 0.5
        curve = curvekit.steps_to_result(store, curvekit.Selection(NAME, name, goal),
                                         explain=False)
        assert dict(zip(curve["batch_size"], zip(curve["step"], curve["trial_id"],
                                                  strict=True), strict=True)) \
            == reference(offset, goal)
        own = ("batch_size", "step", "trial_id", "effective_learning_rate")
        column = frame_names(own, [name], "metric")[name]
        label = frame_names((*own, column), [parameter], "metaparameter")[parameter]
        assert curve[label].to_list() == [7] * curve.height
        best = curvekit.best(store, curvekit.Selection(NAME, name), explain=False)
        assert best[column].to_list() == pytest.approx(
            [min(_curve(bs, t, s, offset) for t in TRIALS for s in STEPS) for bs in BATCH_SIZES])
        # a query names the metric as a value: the rows of this name and no other
        count = store.query("select count(*) from measurements where metric = ?", [name])
        assert count.item() == len(BATCH_SIZES) * len(TRIALS) * len(STEPS)
    assert verify(store).ok


PROPERTY = settings(max_examples=30, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])


@pytest.mark.slow
@PROPERTY
@given(name=NAMES, parameter=NAMES)
def test_any_accepted_name_round_trips_beside_its_other_case(name: str, parameter: str) -> None:
    """The property: a name the rule accepts, and its upper-case twin where that differs,
    come back exactly from every answer; a name the rule refuses is refused, store unchanged."""
    names = list(dict.fromkeys([name, name.upper(), name.lower()]))
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        if any(name_problem(n) for n in names) or name_problem(parameter):
            with pytest.raises(CurvekitError, match="name"):
                add_workload(home, workload({n: 0.0 for n in names}, {parameter: 7}))
            assert not (home / "store").exists()
            return
        round_trip(home, names, parameter)


@pytest.mark.parametrize("names, parameter", [
    (["step", "Step"], "step"),
    (["batch_size", "trial_id"], "trial_id"),
    (["value", "metric"], "value"),
    (["val/err", "VAL/ERR"], "val/err"),
    (["optimizer", "model", "base_dir"], "optimizer"),
    (["effective_learning_rate"], "param_optimizer"),
])
def test_names_that_used_to_be_columns_round_trip(tmp_path: Path, names: list[str],
                                                  parameter: str) -> None:
    round_trip(tmp_path / "home", names, parameter)


def test_the_commands_name_the_metric_exactly(tmp_path: Path) -> None:
    """The CLI: info, steps-to-result, best (table, CSV, JSON), fit, plot, query, report."""
    home = tmp_path / "home"
    add_workload(home, workload({"val/err": 0.0, "VAL/ERR": 0.2, "Step": 0.1}, {"step": 3}))

    def cli(*args: str, ok: tuple[int, ...] = (0,)) -> str:
        result = CliRunner().invoke(main, [*args, "--home", str(home)])
        assert result.exit_code in ok, result.output
        return result.output

    assert json.loads(cli("info", "--format", "json"))[0]["metrics"] == [
        "Step", "VAL/ERR", "val/err"]
    for metric, offset in (("val/err", 0.0), ("VAL/ERR", 0.2), ("Step", 0.1)):
        rows = json.loads(cli("steps-to-result", NAME, "--metric", metric, "--goal",
                              str(offset + 0.5), "--format", "json"))
        assert {r["batch_size"]: (r["step"], r["trial_id"]) for r in rows} == \
            reference(offset, offset + 0.5)
        assert all(r[metric] < offset + 0.5 and r["step (metaparameter)"] == 3 for r in rows)
        best = json.loads(cli("best", NAME, "--metric", metric, "--format", "json"))
        assert [r[metric] for r in best] == pytest.approx(
            [min(_curve(bs, t, s, offset) for t in TRIALS for s in STEPS) for bs in BATCH_SIZES])
        assert cli("best", NAME, "--metric", metric, "--format", "csv").splitlines()[0] \
            .split(",")[:4] == ["batch_size", "step", "trial_id", metric]
        fit = json.loads(cli("fit", NAME, "--metric", metric, "--goal", str(offset + 0.5),
                             "--format", "json"))
        assert fit[0]["metric"] == metric
    out = json.loads(cli("query", "select metric, count(*) as n from measurements group by 1 "
                                  "order by 1", "--format", "json"))
    assert out == [{"metric": m, "n": 80} for m in ("Step", "VAL/ERR", "val/err")]
    chart = tmp_path / "chart.json"
    cli("plot", "steps-to-result", NAME, "--metric", "VAL/ERR", "--goal", "0.7", "--out",
        str(chart), "--format", "json")
    assert "VAL/ERR" in chart.read_text() and "val/err" not in chart.read_text()
    cli("report", "--out", str(tmp_path / "site"), "--no-figures", "--bootstrap", "0",
        "--quiet")
    assert (tmp_path / "site" / "index.html").is_file()


def test_ten_thousand_metrics_in_one_workload(tmp_path: Path) -> None:
    """No limit on the names a workload holds: 10,000 metrics are 10,000 values of one
    column, and a query for one reads its rows only."""
    home = tmp_path / "home"
    names = [f"layer_{i}/grad_norm" for i in range(9_999)] + ["val/err"]
    base_dir, model, optimizer = NAME.rsplit("/", 2)
    key = StudyKey(base_dir, model, optimizer, 16)
    rows = pa.table({"step": [s for _ in names for s in (0, 10)],
                     "metric": [n for n in names for _ in (0, 10)],
                     "value": [v for _ in names for v in (0.9, 0.1)]})
    add_workload(home, WorkloadData([StudyRecord(key, "m", False, 10, {}, {}, "r")],
                                    [TrialRecord(key, 0, "COMPLETE", 10, {}, "r")],
                                    {(key, 0): rows}))
    store = Store.open(home)
    assert len(store.metrics(NAME)) == 10_000 and len(info(store)["metrics"][0]) == 10_000
    curve = curvekit.steps_to_result(store, curvekit.Selection(NAME, "val/err", 0.5))
    assert curve.select("batch_size", "step").rows() == [(16, 10)]
    wide = store.measurements(NAME)
    assert isinstance(wide, pl.DataFrame) and wide.width == 3 + 10_000 and wide.height == 2
    _check_files(home)
    assert verify(store).ok


def test_nan_and_infinities_keep_their_meaning(tmp_path: Path) -> None:
    """NaN and +-inf are kept as values in the long rows (isnan() and isinf() see them);
    none of them is ever a result: best answers with the finite value only."""
    home = tmp_path / "home"
    data = workload({"val/err": 0.0}, {})
    key = next(iter(data.measurements))
    data.measurements[key] = pa.table(  # type: ignore[index]
        {"step": [0, 100, 200, 300], "metric": ["val/err"] * 4,
         "value": [math.nan, -math.inf, math.inf, 0.05]})
    add_workload(home, data)
    store = Store.open(home)
    assert store.query("select count(*) from measurements where isnan(value)").item() == 1
    assert store.query("select count(*) from measurements where isinf(value)").item() == 2
    best = curvekit.best(store, curvekit.Selection(NAME, "val/err"), explain=False)
    assert best.filter(pl.col("batch_size") == key[0].batch_size)["val/err"].item() == 0.05


def test_no_name_reaches_the_text_of_curvekits_sql(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/security.md: names are values in SQL (``metric = ?``, ``name = ?``), never
    identifiers: no SQL text curvekit runs for a measurement, a fit or the report holds
    one, whatever it is."""
    from curvekit.measure import explain_empty, trial_outcomes
    from curvekit.reporting.data import workload_data
    from curvekit.scaling import fit_workload
    from curvekit.selection import SCATTER_STATUSES

    metric, parameter = 'mArKeR") or 1=1; --', "pArAmMaRkEr"
    add_workload(tmp_path / "home", workload({metric: 0.0, "val/err": 0.1}, {parameter: 2,
                                                                            "momentum": 0.5}))
    seen: list[tuple[str, list[object]]] = []
    original = Store.query

    def spy(self: Store, sql: str, params: Any = None) -> pl.DataFrame:
        seen.append((sql, list(params or [])))
        return original(self, sql, params)

    monkeypatch.setattr(Store, "query", spy)
    store = Store.open(tmp_path / "home")
    sel = curvekit.Selection(NAME, metric, 0.5)
    curvekit.steps_to_result(store, sel)
    curvekit.best(store, sel)
    explain_empty(store, sel.with_goal(0.0001))
    trial_outcomes(store, sel.with_statuses(SCATTER_STATUSES), None)
    fit_workload(store, sel, bootstrap_samples=2, explain=False)
    curvekit.steps_to_result(store, curvekit.Selection(NAME, "val/err", 0.5,
                                                       subset=(parameter, 2.0)))
    workload_data(store, NAME, bootstrap=0)
    assert seen and all(metric not in sql and parameter not in sql for sql, _ in seen)
    assert any(metric in params for _, params in seen)
    assert any(parameter in params for _, params in seen)


def test_an_add_reads_no_other_file_and_opening_reads_no_footer(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/store.md, "Cost": an add writes the workload's own files and hard-links the
    others without reading them; the names come from ``_store.json``, not the footers."""
    home = tmp_path / "home"
    add_workload(home, workload({"val/err": 0.0}, {"lr": 1}))
    for name in ("ParquetFile", "read_table", "read_schema", "read_metadata"):
        def refuse(*args: Any, **kwargs: Any) -> Any:
            raise AssertionError(f"a Parquet file was read: {args!r}")
        monkeypatch.setattr(pq, name, refuse)
    base_dir, model, optimizer = "other", "net", "sgd"
    key = StudyKey(base_dir, model, optimizer, 8)
    add_workload(home, WorkloadData([StudyRecord(key, "o", False, 10, {}, {}, "r")],
                                    [TrialRecord(key, 0, "COMPLETE", 10, {"new": 1}, "r")],
                                    {(key, 0): pa.table({"step": [0, 10], "brand/new": [1.0,
                                                                                       0.5]})}))
    store = Store.open(home)
    assert store.metrics(NAME) == ["val/err"] and store.metrics("other/net/sgd") == ["brand/new"]
    assert store.parameter_types("other/net/sgd") == {"new": "int64"}


def test_a_damaged_names_record_is_refused(tmp_path: Path) -> None:
    """docs/security.md: a ``names`` field of ``_store.json`` of the wrong type is a
    StoreError naming the file and the field, wherever it is read."""
    home = tmp_path / "home"
    add_workload(home, workload({"val/err": 0.0}, {}))
    path = (home / "store").resolve() / "_store.json"
    meta = json.loads(path.read_text())
    meta["names"] = {NAME: {"metrics": "val/err", "parameters": {}}}
    path.write_text(json.dumps(meta))
    with pytest.raises(CurvekitError, match=r"_store\.json is damaged: names is .* expected"):
        Store.open(home)
    with pytest.raises(CurvekitError, match=r"names is"):
        add_workload(home, workload({"val/err": 0.1}, {}), replace=True)


@pytest.mark.parametrize("name", ["../../../outside.parquet", "/etc/passwd", "part-0.parquet",
                                  "part-0-0.parquet/../../x.parquet", "part-*-0.parquet",
                                  "sub/part-0-0.parquet", "part-01-0.parquet"])
def test_an_index_that_names_anything_but_a_measurements_file_is_refused(
        tmp_path: Path, name: str) -> None:
    """docs/security.md: the index of a workload's measurements files in ``_store.json``
    holds names curvekit gives (``part-<write>-<index>.parquet``), never a path or a pattern:
    the views join each onto the workload's folder, so any other entry makes the file
    damaged, refused wherever it is read, and nothing outside the store is opened."""
    home = tmp_path / "home"
    add_workload(home, workload({"val/err": 0.0}, {}))
    path = (home / "store").resolve() / "_store.json"
    meta = json.loads(path.read_text())
    files = meta["names"][NAME]["files"]
    files[name] = files.pop(next(iter(files)))
    path.write_text(json.dumps(meta))
    with pytest.raises(CurvekitError, match=r"_store\.json is damaged: names is .*"
                                            r"part-<write>-<index>\.parquet"):
        Store.open(home)
