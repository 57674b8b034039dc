"""Adding workloads of one's own to the store: atomic, idempotent, kept across fetches."""

from __future__ import annotations

import math
import random
from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import curvekit
from curvekit.errors import StoreError
from curvekit.records import StudyKey, StudyRecord, TrialRecord
from curvekit.release.download import file_sha256
from curvekit.release.synthetic import tiny_archive
from curvekit.store.build import convert
from curvekit.store.catalog import info, verify
from curvekit.store.fetch import fetch
from curvekit.store.store import Store
from curvekit.store.update import WorkloadData, add_workload, remove_workload
from tests.conftest import snapshot

NAME = "my_data/mlp_64/momentum"


def workload(name: str = NAME, batch_sizes: tuple[int, ...] = (16, 64), trials: int = 3,
             scale: float = 1.0) -> WorkloadData:
    """A small workload: error falls faster at larger batch sizes; one trial diverges."""
    base_dir, model, optimizer = name.rsplit("/", 2)
    studies, records, rows = [], [], {}
    for bs in batch_sizes:
        key = StudyKey(base_dir, model, optimizer, bs)
        studies.append(StudyRecord(key, base_dir, False, 400, {}, {"source": "test"}, "m.toml"))
        for t in range(trials):
            status = "INFEASIBLE" if t == trials - 1 else "COMPLETE"
            records.append(TrialRecord(key, t, status, 400,
                                       {"learning_rate": 0.1 * (t + 1), "momentum": 0.9,
                                        "warmup": bool(t % 2)}, f"run-{bs}-{t}.csv"))
            steps = list(range(0, 401, 100))
            err = [scale * (1.0 - s / 500) ** (1 + math.log2(bs) / 4 + t / 10) for s in steps]
            if status == "INFEASIBLE":
                err[-2:] = [math.nan, math.nan]
            rows[(key, t)] = pa.table({"step": pa.array(steps, pa.int64()),
                                       "valid/error": err,
                                       "train/loss": [2 * e for e in err]})
    return WorkloadData(studies, records, rows, {"format": "test"})


@pytest.fixture
def release_home(tmp_path: Path) -> Path:
    archive = tmp_path / "tiny.tar.bz2"
    manifest = tiny_archive(archive)
    convert(archive, tmp_path / "home", manifest=manifest)
    return tmp_path / "home"


def test_add_to_empty_home_then_query(tmp_path: Path) -> None:
    result = add_workload(tmp_path, workload())
    assert result.changed and (result.studies, result.trials, result.measurements) == (2, 6, 30)
    store = Store.open(tmp_path)
    assert store.workloads() == [NAME]
    assert store.metrics(NAME) == ["train/loss", "valid/error"]
    assert store.parameter_columns(NAME) == ["learning_rate", "momentum", "warmup"]
    curve = curvekit.steps_to_result(store, curvekit.Selection(NAME, "valid/error", 0.5))
    assert curve["batch_size"].to_list() == [16, 64]
    # a literal reading: the first step any trial's error is strictly below the goal
    data = workload()
    for bs, step in zip(curve["batch_size"], curve["step"], strict=True):
        first = min(int(t["step"][i].as_py()) for (k, _), t in data.measurements.items()
                    if k.batch_size == bs for i in range(t.num_rows)
                    if t["valid/error"][i].as_py() < 0.5)
        assert step == first
    assert verify(store).ok
    assert store.metadata["counts"] == {"workloads": 1, "studies": 2, "trials": 6,
                                        "measurements": 30}
    assert store.metadata["added"][NAME]["origin"] == {"format": "test"}


def test_adding_the_same_data_again_changes_nothing(tmp_path: Path) -> None:
    add_workload(tmp_path, workload())
    before = snapshot(tmp_path)
    again = add_workload(tmp_path, workload())
    assert not again.changed
    assert snapshot(tmp_path) == before


def test_different_data_needs_replace(tmp_path: Path) -> None:
    add_workload(tmp_path, workload())
    before = snapshot(tmp_path)
    with pytest.raises(StoreError, match="--replace"):
        add_workload(tmp_path, workload(scale=0.5))
    assert snapshot(tmp_path) == before
    result = add_workload(tmp_path, workload(batch_sizes=(8, 16, 32), scale=0.5), replace=True)
    assert result.changed
    store = Store.open(tmp_path)
    assert store.studies(NAME)["batch_size"].to_list() == [8, 16, 32]
    assert store.metadata["counts"]["trials"] == 9
    assert store.metadata["counts"]["measurements"] == 45
    assert verify(store).ok
    # the replaced snapshot is gone: one store folder remains
    assert [p.name for p in (tmp_path / "stores").iterdir()] == [store.path.name]


def test_beside_the_release_and_kept_by_fetch(release_home: Path, tmp_path: Path) -> None:
    before = Store.open(release_home)
    release = before.workloads()
    first = release[0]
    metric = before.metrics(first)[0]
    best = curvekit.best(before, curvekit.Selection(first, metric))
    add_workload(release_home, workload())
    store = Store.open(release_home)
    assert store.workloads() == sorted([*release, NAME])
    assert verify(store).ok  # the manifest's checks ignore the added workload
    table = info(store)
    assert table.filter(table["workload"] == NAME)["trials"].to_list() == [6]
    # the views read every file with the one fixed schema: a row per evaluation and metric
    n = store.sql("select count(*) as n from measurements where base_dir = 'my_data'")
    assert n["n"].item() == 30 * 2
    assert store.sql("select count(*) as n from measurements where base_dir = 'my_data' "
                     "and metric = 'valid/error'")["n"].item() == 30
    assert store.sql("select count(distinct base_dir) as n from trials")["n"].item() \
        == len({w.rsplit("/", 2)[0] for w in store.workloads()})
    # the release's own files are the same files (hard links), so its queries are unchanged
    assert curvekit.best(store, curvekit.Selection(first, metric)).equals(best)
    # rebuilding the release keeps the added workload
    archive = tmp_path / "again.tar.bz2"
    manifest = tiny_archive(archive, seed=1)
    convert(archive, release_home, manifest=manifest)
    rebuilt = Store.open(release_home)
    assert NAME in rebuilt.workloads()
    assert curvekit.steps_to_result(
        rebuilt, curvekit.Selection(NAME, "valid/error", 0.5)).height == 2
    assert rebuilt.metadata["added"][NAME]["counts"]["trials"] == 6
    assert verify(rebuilt).ok


def test_release_names_are_refused(tmp_path: Path) -> None:
    data = workload("cifar_10/resnet_8/nesterov_momentum")
    with pytest.raises(StoreError, match="published release"):
        add_workload(tmp_path, data)
    assert not (tmp_path / "store").exists()


def test_remove(tmp_path: Path) -> None:
    add_workload(tmp_path, workload())
    add_workload(tmp_path, workload("other/mlp/sgd"))
    remove_workload(tmp_path, NAME)
    store = Store.open(tmp_path)
    assert store.workloads() == ["other/mlp/sgd"]
    assert store.metadata["counts"]["trials"] == 6
    with pytest.raises(StoreError, match="not an added workload"):
        remove_workload(tmp_path, NAME)


def _with_table(data: WorkloadData, table: pa.Table) -> WorkloadData:
    rows = dict(data.measurements)
    rows[next(iter(rows))] = table
    return WorkloadData(data.studies, data.trials, rows, data.origin)


@pytest.mark.parametrize(("table", "message"), [
    (pa.table({"step": [0, 100, 100], "valid/error": [1.0, 0.5, 0.4]}),
     "strictly increase, but step 100 follows step 100"),
    (pa.table({"valid/error": [1.0]}), "no 'step' column"),
    (pa.table({"step": [0.0, 1.5], "valid/error": [1.0, 0.5]}), "expected integers"),
    (pa.table({"step": [0, 1], "valid/error": ["a", "b"]}), "expected numbers"),
    (pa.table({"step": [0, 0], "metric": ["a", "a"], "value": [1.0, 0.5]}),
     "steps of metric 'a' must strictly increase"),
    (pa.table({"step": [0, 1], "metric": ["a", None], "value": [1.0, 0.5]}),
     "'metric' has empty values"),
    (pa.table({"step": [0, 1], "metric": ["a", "a\n"], "value": [1.0, 0.5]}),
     "control character"),
])
def test_bad_rows_are_refused_and_nothing_is_written(tmp_path: Path, table: pa.Table,
                                                     message: str) -> None:
    add_workload(tmp_path, workload("other/mlp/sgd"))
    before = snapshot(tmp_path)
    with pytest.raises(StoreError, match=message):
        add_workload(tmp_path, _with_table(workload(), table))
    assert snapshot(tmp_path) == before


def test_inconsistent_records_are_refused(tmp_path: Path) -> None:
    data = workload()
    rows = dict(data.measurements)
    rows.pop(next(iter(rows)))
    with pytest.raises(StoreError, match="has no measurements"):
        add_workload(tmp_path, WorkloadData(data.studies, data.trials, rows))
    with pytest.raises(StoreError, match="has no study"):
        add_workload(tmp_path, WorkloadData(data.studies[:1], data.trials, data.measurements))
    mixed = workload("a/b/c")
    with pytest.raises(StoreError, match="one workload per call"):
        add_workload(tmp_path, WorkloadData([*data.studies, *mixed.studies], data.trials,
                                            data.measurements))
    assert not (tmp_path / "store").exists()


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_order_of_input_does_not_matter(tmp_path_factory: pytest.TempPathFactory,
                                        seed: int) -> None:
    """Any order of studies, trials and tables writes byte-identical Parquet files."""
    data = workload(batch_sizes=(8, 16, 32), trials=4)
    rng = random.Random(seed)
    studies, trials, rows = list(data.studies), list(data.trials), list(data.measurements.items())
    for seq in (studies, trials, rows):
        rng.shuffle(seq)
    shuffled = WorkloadData(studies, trials, dict(rows), {"format": "shuffled"})
    a, b = tmp_path_factory.mktemp("a"), tmp_path_factory.mktemp("b")
    add_workload(a, data)
    add_workload(b, shuffled)

    def files(home: Path) -> dict[str, str]:  # paths inside the store folder
        return {k.split("/", 2)[2]: v for k, v in snapshot(home).items()
                if k.endswith(".parquet")}

    assert files(a) and files(a) == files(b)
    # and adding the shuffled data where the ordered data is changes nothing
    assert not add_workload(a, shuffled).changed


def test_fetch_result_reports_added_store(tmp_path: Path) -> None:
    add_workload(tmp_path, workload())
    archive = tmp_path / "tiny.tar.bz2"
    manifest = tiny_archive(archive)
    result = fetch(home=tmp_path, archive=archive, manifest=manifest,
                   sha256=file_sha256(archive))
    assert result.action == "converted"
    assert NAME in Store.open(tmp_path).workloads()


def test_metaparameters_named_like_columns_keep_their_names(tmp_path: Path) -> None:
    """Names are data: a metaparameter named like a column of the store or of an answer is
    stored as it is; the wide frames label its column by the one collision rule."""
    data = workload()
    trials = [TrialRecord(t.key, t.trial_id, t.status, t.steps,
                          {**t.parameters, "optimizer": "adam", "batch_size": 3,
                           "param_optimizer": "sgd"}, t.member)
              for t in data.trials]
    add_workload(tmp_path, WorkloadData(data.studies, trials, data.measurements))
    store = Store.open(tmp_path)
    assert {"optimizer", "batch_size", "param_optimizer"} <= set(store.parameter_columns(NAME))
    frame = store.trials(NAME)
    assert set(frame["optimizer"]) == {"adam"} and set(frame["param_optimizer"]) == {"sgd"}
    assert set(frame["batch_size (metaparameter)"]) == {3}
    assert frame["batch_size"].to_list() == [16] * 3 + [64] * 3
    curve = curvekit.steps_to_result(store, curvekit.Selection(NAME, "valid/error", 0.5))
    assert curve.height == 2 and set(curve["optimizer"]) == {"adam"}
    assert set(curve["batch_size (metaparameter)"]) == {3}


def test_the_long_form_carries_any_metric_name(tmp_path: Path) -> None:
    """A metric named ``step`` (or ``trial_id``) fits the long form of WorkloadData."""
    data = workload()
    rows = {k: pa.table({"step": [*t["step"].to_pylist()] * 2,
                         "metric": ["step"] * t.num_rows + ["trial_id"] * t.num_rows,
                         "value": [*t["valid/error"].to_pylist(), *t["train/loss"].to_pylist()]})
            for k, t in data.measurements.items()}
    add_workload(tmp_path, WorkloadData(data.studies, data.trials, rows))
    store = Store.open(tmp_path)
    assert store.metrics(NAME) == ["step", "trial_id"]
    curve = curvekit.steps_to_result(store, curvekit.Selection(NAME, "step", 0.5))
    want = curvekit.steps_to_result(Store.open(_plain(tmp_path, data)),
                                    curvekit.Selection(NAME, "valid/error", 0.5))
    assert curve["step"].to_list() == want["step"].to_list()
    assert curve["step (metric)"].to_list() == want["valid/error"].to_list()
    wide = store.measurements(NAME)
    assert isinstance(wide, pl.DataFrame)
    assert wide.columns == ["batch_size", "trial_id", "step", "step (metric)",
                            "trial_id (metric)"]


def _plain(tmp_path: Path, data: WorkloadData) -> Path:
    home = tmp_path / "plain"
    add_workload(home, data)
    return home


def test_a_goal_recorded_in_the_origin_is_the_default_goal(tmp_path: Path) -> None:
    from curvekit.goals import default_goal

    data = workload()
    add_workload(tmp_path, WorkloadData(data.studies, data.trials, data.measurements,
                                        {"goal": {"metric": "valid/error", "goal": 0.4}}))
    add_workload(tmp_path, workload("other/mlp/sgd"))
    store = Store.open(tmp_path)
    goal = default_goal(store, NAME)
    assert (goal.metric, goal.goal, goal.maximize, goal.source) == ("valid/error", 0.4, False,
                                                                     "origin")
    rule = default_goal(store, "other/mlp/sgd")  # no recorded goal: the median rule
    assert rule.source == "rule" and rule.metric == "valid/error"
