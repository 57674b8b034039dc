"""``curvekit add`` on Sacred, DVCLive, timm, Ultralytics, JSON-lines logs, MLflow's SQLite
store and W&B run folders: look-alikes written as those libraries write them
(``tests/logformats.py``), with generated values checked against what was written."""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from curvekit.errors import IngestError
from curvekit.ingest.add import add, build, detect_format
from curvekit.ingest.configs import flatten
from curvekit.ingest.runs import IngestWarning
from tests.logformats import (
    write_dvclive,
    write_jsonl,
    write_mlflow_db,
    write_sacred_run,
    write_timm,
    write_ultralytics,
    write_wandb08,
)

NAME = "mine/net/sgd"
# the by-product notices of detection are checked where they matter, with pytest.warns
pytestmark = pytest.mark.filterwarnings("ignore::curvekit.errors.IngestWarning")


def _manifest(tmp: Path, text: str) -> Path:
    path = tmp / "runs.toml"
    path.write_text(text)
    return path


def _rows(data: Any) -> dict[int, list[tuple[Any, ...]]]:
    return {tid: data.measurements[(key, tid)].to_pylist()
            for key, tid in sorted(data.measurements, key=lambda k: k[1])}


def _column(data: Any, metric: str) -> list[tuple[int, float]]:
    out = []
    for table in data.measurements.values():
        for row in table.to_pylist():
            if row.get(metric) is not None:
                out.append((row["step"], row[metric]))
    return sorted(out)


# ---------------------------------------------------------------------- Sacred
def _sacred_sweep(root: Path) -> Path:
    for rid, (status, bs) in enumerate((("COMPLETED", 32), ("FAILED", 64),
                                        ("INTERRUPTED", 64), ("RUNNING", 32)), 1):
        steps = [100, 200, 300, 400] if status == "COMPLETED" else [100, 200]
        write_sacred_run(root / "runs" / str(rid), status=status,
                         config={"__doc__": "Configuration", "batch_size": bs, "lr": 0.1 * rid,
                                 "model": {"width": 64, "depth": 3}},
                         metrics={"val_loss": (steps, [2.0 / (i + 1) for i in range(len(steps))]),
                                  "train_loss": (steps,
                                                 [2.1 / (i + 1) for i in range(len(steps))])})
    (root / "runs" / "1" / "predictions.csv").write_text("id,label\n1,2\n")
    return root / "runs"


def test_sacred_runs_import_with_their_status_and_config(tmp_path: Path) -> None:
    source = _sacred_sweep(tmp_path)
    with pytest.warns(IngestWarning, match=r"read as sacred; not read: predictions\.csv"):
        assert detect_format(source) == "sacred"
    data = build(source, name=NAME)
    by_member = {t.member.rsplit("/", 1)[-1]: t for t in data.trials}
    # only run.json's COMPLETED is a finished run; a FAILED, INTERRUPTED or RUNNING run of
    # full length is still INCOMPLETE
    assert {k: t.status for k, t in by_member.items()} == {
        "1": "COMPLETE", "2": "INCOMPLETE", "3": "INCOMPLETE", "4": "INCOMPLETE"}
    assert by_member["1"].parameters == {"depth": 3, "learning_rate": 0.1, "width": 64}
    assert _column(data, "val/loss")[:4] == [
        (100, 2.0), (100, 2.0), (100, 2.0), (100, 2.0)]


def test_a_manifest_status_wins_over_sacreds_record(tmp_path: Path) -> None:
    source = _sacred_sweep(tmp_path)
    manifest = _manifest(tmp_path, '[[runs]]\nrun = "2"\nstatus = "COMPLETE"\n')
    data = build(source, name=NAME, manifest=manifest)
    assert {t.member.rsplit("/", 1)[-1]: t.status for t in data.trials}["2"] == "COMPLETE"


def test_sacred_counters_at_different_rates_are_refused(tmp_path: Path) -> None:
    write_sacred_run(tmp_path / "r" / "7", config={"batch_size": 8},
                     metrics={"trainLoss": (range(6), [1.0] * 6),
                              "validLoss": (range(3), [2.0] * 3)})
    with pytest.raises(IngestError) as info:
        build(tmp_path / "r", name=NAME)
    message = str(info.value)
    assert message.startswith(str(tmp_path / "r" / "7" / "metrics.json"))
    assert "trainLoss at steps 0..5; validLoss at steps 0..2" in message
    assert "--map 'validLoss='" in message
    # the fix the message names, then the epoch axis the counters are
    with pytest.raises(IngestError, match="counts epochs"):
        build(tmp_path / "r", name=NAME, metric_map=["validLoss="])
    data = build(tmp_path / "r", name=NAME, metric_map=["trainLoss="],
                 manifest=_manifest(tmp_path, "[workload]\nsteps_per_epoch = 50\n"))
    assert _column(data, "validLoss") == [(50, 2.0), (100, 2.0), (150, 2.0)]


def test_a_sacred_run_without_curves_is_refused_or_kept_by_its_status(tmp_path: Path) -> None:
    write_sacred_run(tmp_path / "r" / "1", config={"batch_size": 8}, metrics={})
    (tmp_path / "r" / "1" / "train_metrics.csv").write_text(",epoch,loss\n0,0,1.0\n")
    with pytest.raises(IngestError, match=r"COMPLETED but logged no metric.*--log-format csv"
                                          r".*--exclude '1'"):
        build(tmp_path / "r", name=NAME, format="sacred")
    write_sacred_run(tmp_path / "f" / "1", config={"batch_size": 8}, metrics={},
                     status="FAILED")
    with pytest.raises(IngestError, match=r"nothing to import"):
        build(tmp_path / "f", name=NAME)  # no run of the source holds a curve
    write_sacred_run(tmp_path / "f" / "2", config={"batch_size": 8},
                     metrics={"loss": ([10, 20], [1.0, 0.5])})
    data = build(tmp_path / "f", name=NAME)
    assert sorted(t.status for t in data.trials)[-1] == "INCOMPLETE"  # the failed run, kept
    assert len(data.trials) == 2
    write_sacred_run(tmp_path / "p" / "1", config={"batch_size": 8},
                     metrics={"lr": ([0], [0.1]), "decay": ([0], [0.9])})
    with pytest.raises(IngestError, match=r"holds no curve.*\(decay, lr\).*--exclude '1'"):
        build(tmp_path / "p", name=NAME)


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.integers(1, 10**6), min_size=2, max_size=30, unique=True),
       st.data())
def test_sacred_values_are_the_files(tmp_path_factory: pytest.TempPathFactory,
                                     steps: list[int], data: st.DataObject) -> None:
    """Explicit steps (not Sacred's counters) and any finite values: the stored curve is
    the file's, point for point."""
    steps = sorted(steps)
    values = data.draw(st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=len(steps),
                                max_size=len(steps)))
    root = tmp_path_factory.mktemp("sacred")
    write_sacred_run(root / "1", config={"batch_size": 4}, metrics={"acc": (steps, values)})
    got = build(root, name=NAME, metric_map=["acc=acc"])
    assert _column(got, "acc") == list(zip(steps, values, strict=True))


# ---------------------------------------------------------------------- DVCLive
def test_dvclive_lightning_logger_reads_the_global_step(tmp_path: Path) -> None:
    steps = [429, 859, 1289]
    write_dvclive(tmp_path / "dvclive", {
        "train/loss": (steps, [0.3, 0.1, 0.07]), "val/acc": (steps, [0.96, 0.97, 0.975]),
        "epoch": ([429, 429, 859, 859, 1289], [0, 0, 1, 1, 2])},
        params={"data": {"batch_size": 128}, "trainer": {"max_epochs": 3}})
    assert detect_format(tmp_path) == "dvclive"
    data = build(tmp_path, name=NAME,
                 manifest=_manifest(tmp_path, "[workload]\ntrain_steps = 1290\n"))
    # Lightning's step is the 0-based index of the batch just trained: 1289 + 1 = 1290 done
    assert [t.status for t in data.trials] == ["COMPLETE"]
    assert data.studies[0].key.batch_size == 128
    assert _column(data, "val/classification_error") == [
        (429, pytest.approx(0.04)), (859, pytest.approx(0.03)), (1289, pytest.approx(0.025))]


def test_dvclive_steps_counting_calls_need_steps_per_epoch(tmp_path: Path) -> None:
    write_dvclive(tmp_path / "dvclive", {"loss": ([0, 1, 2], [2.0, 1.0, 0.5])},
                  params={"batch_size": 32})
    with pytest.raises(IngestError, match=r"counts epochs.*next_step"):
        build(tmp_path, name=NAME)
    data = build(tmp_path, name=NAME,
                 manifest=_manifest(tmp_path, "[workload]\nsteps_per_epoch = 100\n"))
    assert _column(data, "train/loss") == [(100, 2.0), (200, 1.0), (300, 0.5)]


def test_dvclive_hugging_face_callback_is_refused(tmp_path: Path) -> None:
    write_dvclive(tmp_path / "dvclive", {
        "loss": ([0, 2, 4], [1.0, 0.9, 0.8]), "eval/loss": ([1, 3, 5], [0.7, 0.7, 0.6]),
        "epoch": ([0, 1, 2, 3, 4, 5], [2.01, 2.01, 2.06, 2.06, 2.1, 2.1])},
        params={"per_device_train_batch_size": 8})
    with pytest.raises(IngestError, match=r"no training step.*trainer_state\.json"):
        build(tmp_path, name=NAME, manifest=_manifest(tmp_path, '[[runs]]\nrun = "*"\n'
                                                                "batch_size = 8\n"))


def test_dvclive_fractional_epochs_in_proportion_are_training_steps(tmp_path: Path) -> None:
    steps = [50, 100, 150, 200]
    write_dvclive(tmp_path / "dvclive", {"loss": (steps, [1.0, 0.9, 0.8, 0.7]),
                                         "epoch": (steps, [0.25, 0.5, 0.75, 1.0])},
                  params={"batch_size": 8})
    data = build(tmp_path, name=NAME)
    assert [s for s, _ in _column(data, "train/loss")] == steps


# ---------------------------------------------------------------------- timm
def test_timm_summary_percentages_and_resumed_epochs(tmp_path: Path) -> None:
    rows = [{"epoch": e, "train_loss": 2.0 - e / 1000, "eval_loss": 1.0, "eval_top1": 95.125,
             "eval_top5": 99.5} for e in range(1508, 1512)]
    write_timm(tmp_path / "output" / "train" / "run1", rows,
               {"batch_size": 200, "lr": 4e-4, "epochs": 1800, "start_epoch": 1508})
    assert detect_format(tmp_path / "output") == "timm"
    with pytest.raises(IngestError, match="counts epochs"):
        build(tmp_path / "output", name=NAME)
    data = build(tmp_path / "output", name=NAME,
                 manifest=_manifest(tmp_path, "[workload]\nsteps_per_epoch = 250\n"))
    assert _column(data, "val/classification_error")[0] == (1509 * 250,
                                                            pytest.approx(1 - 0.95125))
    assert _column(data, "val/top5")[0] == (1509 * 250, 0.995)
    assert data.trials[0].parameters["learning_rate"] == 4e-4


# ---------------------------------------------------------------------- Ultralytics
@pytest.mark.parametrize("v5", [False, True])
@pytest.mark.parametrize("first", [0, 1])
def test_ultralytics_results_are_read_through_their_padding(tmp_path: Path, v5: bool,
                                                           first: int) -> None:
    rows = [{"epoch": first + e, "train/box_loss": 1.6878 - e / 10,
             "metrics/mAP50(B)": 0.15826 + e / 10, "lr/pg0": 0.070545} for e in range(3)]
    args = {"batch_size": 16, "epochs": 3} if v5 else {"epochs": 3, "batch": 16}
    run = write_ultralytics(tmp_path / "runs" / "detect" / "train", rows, args, v5=v5)
    (run / "events.out.tfevents.1675348815.host.1.0").write_bytes(b"")
    with pytest.warns(IngestWarning, match="read as ultralytics; not read: TensorBoard"):
        assert detect_format(tmp_path / "runs") == "ultralytics"
    data = build(tmp_path / "runs", name=NAME,
                 manifest=_manifest(tmp_path, "[workload]\nsteps_per_epoch = 10\n"))
    # the n-th epoch ends at step n x 10, whether the file counts from 0 or from 1
    assert _column(data, "train/box_loss") == [(10, 1.6878), (20, 1.5878), (30, 1.4878)]
    assert data.studies[0].key.batch_size == 16


def test_ultralytics_autobatch_has_no_batch_size(tmp_path: Path) -> None:
    write_ultralytics(tmp_path / "train", [{"epoch": 0, "train/box_loss": 1.0}],
                      {"epochs": 1, "batch": -1})
    with pytest.raises(IngestError, match="has no batch size"):
        build(tmp_path, name=NAME, format="ultralytics")


# ---------------------------------------------------------------------- JSON lines
def _detr(epoch: int, loss: float) -> dict[str, Any]:
    return {"train_lr": 1e-4, "train_loss": loss, "test_loss": loss + 0.1,
            "test_coco_eval_bbox": [0.1] * 12, "epoch": epoch, "n_parameters": 41302368}


def test_jsonl_log_epochs_parameters_and_left_out_lists(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "out" / "log.txt", [_detr(e, 2.0 - e / 10) for e in range(3)])
    assert detect_format(tmp_path / "out") == "jsonl"
    assert detect_format(tmp_path / "out" / "log.txt") == "jsonl"
    manifest = _manifest(tmp_path, '[workload]\nsteps_per_epoch = 7\n[[runs]]\nrun = "*"\n'
                                   "batch_size = 2\n")
    with pytest.warns(IngestWarning, match="left out 1 key.*test_coco_eval_bbox"):
        data = build(tmp_path / "out", name=NAME, manifest=manifest)
    assert data.trials[0].parameters == {"n_parameters": 41302368}
    assert _column(data, "test/loss") == [
        (7, 2.1), (14, pytest.approx(2.0)), (21, pytest.approx(1.9))]


def test_jsonl_appended_runs_are_refused_naming_both_lines(tmp_path: Path) -> None:
    log = write_jsonl(tmp_path / "log.txt", [_detr(0, 2.0)])
    write_jsonl(log, [_detr(0, 1.5)])
    with pytest.raises(IngestError) as info:
        build(tmp_path, name=NAME, format="jsonl",
              manifest=_manifest(tmp_path, '[[runs]]\nrun = "*"\nbatch_size = 2\n'))
    assert str(info.value).startswith(f"{log}, line 2: epoch 0 appears twice")


# ---------------------------------------------------------------------- MLflow SQLite
def _points(n: int, start: float = 2.0) -> list[tuple[int, float, int]]:
    return [(100 * (i + 1), start / (i + 1), 1_700_000_000_000 + i) for i in range(n)]


def _mlflow_db(root: Path) -> Path:
    return write_mlflow_db(root / "mlflow.db", {0: "Default", 1: "sweep"}, [
        {"id": "a" * 32, "name": "bs32", "experiment": 1, "status": "FINISHED", "start": 1,
         "params": {"batch_size": 32, "lr": 0.1}, "metrics": {"val_loss": _points(4)}},
        {"id": "b" * 32, "name": "bs64", "experiment": 1, "status": "KILLED", "start": 2,
         "params": {"batch_size": 64, "lr": 0.2},
         "metrics": {"val_loss": [(100, float("nan"), 1), (200, float("inf"), 2)]}},
        {"id": "c" * 32, "experiment": 1, "status": "FAILED", "start": 3},
        {"id": "d" * 32, "experiment": 1, "status": "FINISHED", "start": 4, "deleted": True,
         "params": {"batch_size": 32}, "metrics": {"val_loss": _points(2)}},
    ])


def test_mlflow_sqlite_store_runs_statuses_and_values(tmp_path: Path) -> None:
    db = _mlflow_db(tmp_path)
    (tmp_path / "mlruns.db").write_bytes(b"")  # not a database: not MLflow's
    assert detect_format(tmp_path) == "mlflow"
    assert detect_format(db) == "mlflow"
    with pytest.warns(IngestWarning, match=r"left out 1 run\(s\) that logged no metric"):
        data = build(tmp_path, name=NAME)
    statuses = {t.key.batch_size: t.status for t in data.trials}
    assert statuses == {32: "COMPLETE", 64: "INFEASIBLE"}  # diverged beats KILLED
    rows = _column(data, "val/loss")
    assert rows[:4] == [(100, 2.0), (100, rows[1][1]), (200, 1.0), (200, math.inf)]
    assert math.isnan(rows[1][1])
    assert {t.parameters["learning_rate"] for t in data.trials} == {0.1, 0.2}


def test_mlflow_sqlite_artifact_root_holds_by_products(tmp_path: Path) -> None:
    """``mlflow ui --backend-store-uri sqlite:///mlflow.db`` keeps artifacts in
    ``mlruns/<experiment>/<run>/artifacts/`` (no meta.yaml there): autolog's event files
    in it are the runs' by-products, as in a file store."""
    _mlflow_db(tmp_path)
    events = tmp_path / "mlruns" / "1" / ("a" * 32) / "artifacts" / "tb"
    events.mkdir(parents=True)
    (events / "events.out.tfevents.1.host").write_bytes(b"")
    with pytest.warns(IngestWarning, match="read as mlflow; not read: TensorBoard event files"):
        assert detect_format(tmp_path) == "mlflow"


def test_mlflow_sqlite_killed_run_is_incomplete(tmp_path: Path) -> None:
    write_mlflow_db(tmp_path / "mlflow.db", {1: "sweep"}, [
        {"id": "a" * 32, "experiment": 1, "status": "KILLED", "start": 1,
         "params": {"batch_size": 32}, "metrics": {"val_loss": _points(4)}},
        {"id": "b" * 32, "experiment": 1, "status": "FINISHED", "start": 2,
         "params": {"batch_size": 32}, "metrics": {"val_loss": _points(4)}}])
    data = build(tmp_path, name=NAME)
    assert sorted(t.status for t in data.trials) == ["COMPLETE", "INCOMPLETE"]


def test_mlflow_sqlite_several_experiments_are_refused_and_include_picks_one(
        tmp_path: Path) -> None:
    write_mlflow_db(tmp_path / "mlflow.db", {1: "one", 2: "two"}, [
        {"id": "a" * 32, "experiment": 1, "status": "FINISHED", "start": 1,
         "params": {"batch_size": 32}, "metrics": {"loss": _points(3)}},
        {"id": "b" * 32, "experiment": 2, "status": "FINISHED", "start": 1,
         "params": {"batch_size": 32}, "metrics": {"loss": _points(3)}}])
    with pytest.raises(IngestError, match=r"1 \(one\), 2 \(two\).*--include '1/\*'"):
        build(tmp_path, name=NAME)
    data = build(tmp_path / "mlflow.db", name=NAME, include=["2/*"])
    assert [t.member for t in data.trials] == [str(tmp_path / "mlflow.db")]


def test_mlflow_sqlite_epochs_and_wal_are_refused(tmp_path: Path) -> None:
    write_mlflow_db(tmp_path / "mlflow.db", {1: "gan"}, [
        {"id": "a" * 32, "experiment": 1, "status": "FINISHED", "start": 1,
         "params": {"batch_size": 256, "epochs": 5},
         "metrics": {"generator_loss": [(s, 1.0 / (s + 1), s) for s in range(5)]}}])
    with pytest.raises(IngestError, match=r"counts epochs.*epochs parameter is 5"):
        build(tmp_path, name=NAME)
    (tmp_path / "mlflow.db-wal").write_bytes(b"x")
    with pytest.raises(IngestError, match="write-ahead log"):
        build(tmp_path, name=NAME)


# ---------------------------------------------------------------------- W&B run folders
def test_wandb08_run_folder(tmp_path: Path) -> None:
    rows: list[dict[str, Any]] = []
    for i in range(4):
        rows.append({"loss": 2.0 - i / 10})
        rows.append({"video": {"_type": "video-file", "path": "media/v.mp4"}})
    write_wandb08(tmp_path / "wandb" / "run-20200219_000833-abc", rows,
                  {"batch_size": 32, "optimizer": {"lr": 0.003}}, state="running")
    assert detect_format(tmp_path) == "wandb"
    data = build(tmp_path, name=NAME)
    assert [t.status for t in data.trials] == ["INCOMPLETE"]  # the log's own "running"
    assert data.trials[0].parameters == {"learning_rate": 0.003}
    assert _column(data, "train/loss") == [
        (0, 2.0), (2, 1.9), (4, 1.8), (6, pytest.approx(1.7))]


@pytest.mark.parametrize("follow", [False, True])
def test_wandb_latest_run_link_is_no_second_run(tmp_path: Path, follow: bool) -> None:
    write_wandb08(tmp_path / "wandb" / "run-20200219_000833-abc", [{"loss": 1.0}],
                  {"batch_size": 8})
    (tmp_path / "wandb" / "latest-run").symlink_to("run-20200219_000833-abc")
    with warnings.catch_warnings():
        warnings.simplefilter("error", IngestWarning)  # no notice about the link either
        data = build(tmp_path, name=NAME, follow_links=follow)
    assert [t.member for t in data.trials] == [
        str(tmp_path / "wandb" / "run-20200219_000833-abc" / "wandb-history.jsonl")]


def test_wandb_binary_run_folder_names_the_export(tmp_path: Path) -> None:
    run = tmp_path / "wandb" / "run-20230329_015319-r8mtbfdx"
    (run / "files").mkdir(parents=True)
    (run / "run-r8mtbfdx.wandb").write_bytes(b":W&B\x00\x01")
    (run / "files" / "config.yaml").write_text("bs:\n  desc: null\n  value: 4\n")
    with pytest.raises(IngestError) as info:
        build(tmp_path, name=NAME)
    message = str(info.value)
    assert message.startswith(str(run / "run-r8mtbfdx.wandb"))
    assert f"`wandb sync {run}`" in message and "scan_history()" in message


# ---------------------------------------------------------------------- shared rules
def test_nested_configs_flatten_by_one_rule() -> None:
    assert flatten({"a": {"x": 1}, "b": {"x": 2, "y": None, "z": {}}, "x0": [1, 2],
                    "obj": {"py/object": "torch.Size", "py/seq": []},
                    "arr": {"py/object": "numpy.ndarray", "values": [0.5, 0.25]}}) == {
        "a.x": 1, "arr": "[0.5, 0.25]", "b.x": 2, "obj": "torch.Size", "x0": "[1, 2]"}


@pytest.mark.parametrize("maker", ["sacred", "mlflow", "wandb"])
def test_a_refused_new_format_leaves_the_store_as_it_was(tmp_path: Path, maker: str) -> None:
    home = tmp_path / "home"
    logs = tmp_path / "logs"
    write_sacred_run(logs / "ok" / "1", config={"batch_size": 8},
                     metrics={"loss": ([10, 20], [1.0, 0.5])})
    add(logs / "ok", name="mine/net/first", home=home)
    before = sorted((p.relative_to(home), p.stat().st_mtime_ns) for p in home.rglob("*")
                    if p.is_file())
    bad = tmp_path / "bad"
    if maker == "sacred":
        write_sacred_run(bad / "1", config={"batch_size": 8}, metrics={})
    elif maker == "mlflow":
        write_mlflow_db(bad / "mlflow.db", {1: "a", 2: "b"}, [
            {"id": str(e) * 32, "experiment": e, "status": "FINISHED", "start": 1,
             "params": {"batch_size": 8}, "metrics": {"loss": _points(2)}} for e in (1, 2)])
    else:
        (bad / "run-x").mkdir(parents=True)
        (bad / "run-x" / "run-x.wandb").write_bytes(b"\x00")
    with pytest.raises(IngestError):
        add(bad, name="mine/net/second", home=home)
    after = sorted((p.relative_to(home), p.stat().st_mtime_ns) for p in home.rglob("*")
                   if p.is_file())
    assert after == before


def test_json_is_read_through_the_one_loader() -> None:
    """The new readers parse users' JSON with curvekit.structured only."""
    package = Path(__file__).resolve().parent.parent / "curvekit" / "ingest"
    for name in ("sacred.py", "jsonlines.py", "wandb_local.py", "dvclive.py"):
        text = (package / name).read_text()
        assert "json.load" not in text, name


@settings(max_examples=50, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.floats(0, 100, allow_nan=False), min_size=1, max_size=40))
def test_timm_percentages_are_divided_exactly(tmp_path_factory: pytest.TempPathFactory,
                                              top1: list[float]) -> None:
    """Each stored accuracy is the float64 nearest top1 / 100, as Python divides."""
    root = tmp_path_factory.mktemp("timm")
    write_timm(root / "run", [{"epoch": e, "eval_top1": v} for e, v in enumerate(top1)],
               {"batch_size": 8})
    data = build(root, name=NAME, format="timm", metric_map=["eval_top1=top1_fraction"],
                 manifest=_manifest(root, "[workload]\nsteps_per_epoch = 1\n"))
    written = [float(line.split(",")[1]) for line in
               (root / "run" / "summary.csv").read_text().splitlines()[1:]]
    assert [v for _, v in _column(data, "top1_fraction")] == [v / 100 for v in written]


_CURVES = st.lists(st.tuples(st.integers(1, 2**40),
                             st.floats(allow_nan=True, allow_infinity=True, width=64)),
                   min_size=1, max_size=25, unique_by=lambda p: p[0])


def _same(got: list[tuple[int, float]], want: list[tuple[int, float]]) -> bool:
    return len(got) == len(want) and all(
        gs == ws and (gv == wv or (math.isnan(gv) and math.isnan(wv)))
        for (gs, gv), (ws, wv) in zip(got, want, strict=True))


@pytest.mark.parametrize("fmt", ["dvclive", "jsonl", "wandb", "mlflow"])
@settings(max_examples=10, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(points=_CURVES)
def test_stored_values_are_the_written_ones(tmp_path_factory: pytest.TempPathFactory,
                                            fmt: str, points: list[tuple[int, float]]) -> None:
    """Any steps and any float64 (NaN and infinities too) round-trip exactly: the stored
    curve is what the library wrote, at the steps it wrote."""
    points = sorted(points)
    steps, values = [s for s, _ in points], [v for _, v in points]
    root = tmp_path_factory.mktemp(fmt)
    if fmt == "dvclive":
        write_dvclive(root / "dvclive", {"m": (steps, values),
                                         "epoch": (steps, [0] * len(steps))},
                      params={"batch_size": 8})
    elif fmt == "jsonl":
        write_jsonl(root / "log.txt", [{"step": s, "m": v} for s, v in points])
    elif fmt == "wandb":
        folder = root / "wandb" / "run-1"
        write_wandb08(folder, [{"m": v} for v in values], {"batch_size": 8})
        lines = (folder / "wandb-history.jsonl").read_text().splitlines()
        (folder / "wandb-history.jsonl").write_text("".join(  # the steps the caller gave
            line.replace(f'"_step": {i}}}', f'"step": {s}, "_step": {i}}}') + "\n"
            for i, (line, s) in enumerate(zip(lines, steps, strict=True))))
    else:
        write_mlflow_db(root / "mlflow.db", {1: "x"}, [
            {"id": "a" * 32, "experiment": 1, "status": "FINISHED", "start": 1,
             "params": {"batch_size": 8}, "metrics": {"m": [(s, v, i) for i, (s, v)
                                                            in enumerate(points)]}}])
    manifest = _manifest(root, '[[runs]]\nrun = "*"\nbatch_size = 8\n')
    data = build(root, name=NAME, format=fmt, metric_map=["m=m"],
                 manifest=manifest if fmt == "jsonl" else None)
    got = _column(data, "m")
    if fmt == "mlflow":  # MLflow's SQL store keeps an infinity as the largest float, so
        values = [math.copysign(math.inf, v) if abs(v) == 1.7976931348623157e308 else v
                  for v in values]  # the largest float itself reads back as one
    assert _same(got, list(zip(steps, values, strict=True))), (got, points)
