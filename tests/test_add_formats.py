"""curvekit add with TensorBoard event files, an MLflow file store, Weights & Biases history
exports and the release's own layout, each written by the real library where it installs."""

from __future__ import annotations

import io
import math
import struct
import tarfile
from pathlib import Path

import pytest

from curvekit.errors import IngestError, IngestWarning
from curvekit.ingest.add import add, build, detect_format
from curvekit.ingest.tensorboard import read_tensorboard_runs, record
from curvekit.ingest.wandb import read_wandb_runs
from curvekit.store.store import Store
from tests.conftest import ROOT, metadata_json, small_members, write_archive
from tests.logfiles import error_curve, eval_steps

NAME = "my_data/cnn/momentum"


# ---------------------------------------------------------------------- TensorBoard
def _tensorboard_runs(logdir: Path) -> None:
    """TF2-style tensor scalars and hparams, with tensorboard's own writer."""
    summary = pytest.importorskip("tensorboard.summary")
    from tensorboard.compat.proto import event_pb2
    from tensorboard.plugins.hparams import summary_v2 as hp
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    for bs in (32, 64, 128):
        run = logdir / f"bs{bs}"
        events = EventFileWriter(str(run))
        events.add_event(event_pb2.Event(
            step=0, summary=hp.hparams_pb({"batch_size": bs, "learning_rate": 0.1,
                                           "optimizer": "momentum"})))
        events.close()
        writer = summary.Writer(str(run))
        steps = eval_steps(bs)
        for step, err in zip(steps, error_curve(bs, 0, steps), strict=True):
            writer.add_scalar("val/accuracy", 1 - err, step=step)
            writer.add_scalar("train/loss", 2.3 * err, step=step)
        writer.close()


def test_tensorboard_writer_runs(tmp_path: Path) -> None:
    _tensorboard_runs(tmp_path / "logs")
    assert detect_format(tmp_path / "logs") == "tensorboard"
    result = add(tmp_path / "logs", name=NAME, home=tmp_path / "home")
    assert (result.studies, result.trials, result.measurements) == (3, 3, 75)
    store = Store.open(tmp_path / "home")
    rows = store.measurements(NAME, batch_size=64).select(  # type: ignore[union-attr]
        "step", "val/classification_error", "train/loss").rows()
    steps = eval_steps(64)
    assert [r[0] for r in rows] == steps
    for (_, err, loss), want in zip(rows, error_curve(64, 0, steps), strict=True):
        # written as float32: compare at float32 precision
        assert err == pytest.approx(want, abs=1e-6) and loss == pytest.approx(2.3 * want,
                                                                               rel=1e-6)
    trials = store.trials(NAME).select("batch_size", "learning_rate", "optimizer").rows()
    assert trials == [(32, 0.1, "momentum"), (64, 0.1, "momentum"), (128, 0.1, "momentum")]


def test_tensorboardx_hparams_folder_and_every_point(tmp_path: Path) -> None:
    """tensorboardX writes simple_value scalars; add_hparams writes a child folder; more than
    TensorBoard's default 10,000 points per tag are all kept, and agree with its loader."""
    tbx = pytest.importorskip("tensorboardX")
    run = tmp_path / "logs" / "bs256"
    with tbx.SummaryWriter(str(run)) as writer:
        for step in range(12_000):
            writer.add_scalar("loss", 2.0 / (1 + step / 1000), step)
        writer.add_hparams({"batch_size": 256, "lr": 0.05}, {"hparam/best": 0.1})
    with pytest.warns(IngestWarning, match=r"left out hparam/best: add_hparams's final values"):
        runs = read_tensorboard_runs(tmp_path / "logs")
    assert [(r.key, r.params) for r in runs] == [("bs256", {"batch_size": 256, "lr": 0.05})]
    frame = runs[0].frame
    assert frame.height == 12_000 and frame.columns == ["step", "loss"]
    accumulator = pytest.importorskip(
        "tensorboard.backend.event_processing.event_accumulator")
    reference = accumulator.EventAccumulator(str(run), size_guidance={"scalars": 0})
    reference.Reload()
    assert [e.step for e in reference.Scalars("loss")] == frame.get_column("step").to_list()
    assert [e.value for e in reference.Scalars("loss")] == frame.get_column("loss").to_list()
    with pytest.warns(IngestWarning, match=r"left out hparam/best"):
        data = build(tmp_path / "logs", name=NAME)
    assert data.trials[0].parameters == {"learning_rate": 0.05}


def test_tensorboard_tensor_scalars_of_every_shape(tmp_path: Path) -> None:
    """TF2 writes a tag's metadata once, then bare tensors; doubles, tensor_content and
    int64 scalars are read too; tensors of other plugins (text) or of none are not."""
    pytest.importorskip("tensorboard")
    import numpy as np
    from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2, types_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    def meta(plugin: str) -> summary_pb2.SummaryMetadata:
        return summary_pb2.SummaryMetadata(
            plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name=plugin))

    def value(tag: str, tensor: tensor_pb2.TensorProto, plugin: str | None
              ) -> summary_pb2.Summary.Value:
        v = summary_pb2.Summary.Value(tag=tag, tensor=tensor)
        if plugin is not None:
            v.metadata.CopyFrom(meta(plugin))
        return v

    writer = EventFileWriter(str(tmp_path / "logs" / "run"))
    for step in range(3):
        first = "scalars" if step == 0 else None
        values = [
            value("loss", tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT,
                                                 float_val=[0.5 + step]), first),
            value("acc64", tensor_pb2.TensorProto(dtype=types_pb2.DT_DOUBLE,
                                                  double_val=[0.1 * step]), "scalars"),
            value("packed", tensor_pb2.TensorProto(
                dtype=types_pb2.DT_FLOAT, tensor_content=np.float32(2.5 * step).tobytes()),
                first),
            value("count", tensor_pb2.TensorProto(dtype=types_pb2.DT_INT64,
                                                  int64_val=[10 * step]), first),
            value("note", tensor_pb2.TensorProto(dtype=types_pb2.DT_STRING,
                                                 string_val=[b"hi"]), "text"),
            value("raw", tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT, float_val=[1.0]),
                  None),
        ]
        for v in values:
            writer.add_event(event_pb2.Event(step=step * 100, wall_time=1.0,
                                             summary=summary_pb2.Summary(value=[v])))
    writer.close()
    frame = read_tensorboard_runs(tmp_path / "logs")[0].frame
    assert frame.columns == ["step", "acc64", "count", "loss", "packed"]
    assert frame.rows() == [(0, 0.0, 0.0, 0.5, 0.0), (100, 0.1, 10.0, 1.5, 2.5),
                            (200, 0.2, 20.0, 2.5, 5.0)]


def _event(step: int, tag: str, value: float, session_start: bool = False) -> bytes:
    value_msg = b"\x0a" + bytes([len(tag)]) + tag.encode() + b"\x15" + struct.pack("<f", value)
    summary = b"\x0a" + bytes([len(value_msg)]) + value_msg
    step_field = b"\x10" + bytes([step]) if step < 128 else b"\x10" + bytes(
        [step & 0x7F | 0x80, step >> 7])
    if session_start:
        return step_field + b"\x3a\x02\x08\x01"  # session_log { status: START }
    return step_field + b"\x2a" + bytes([len(summary)]) + summary


def test_tensorboard_restart_truncation_and_corruption(tmp_path: Path) -> None:
    run = tmp_path / "logs" / "run"
    run.mkdir(parents=True)
    first = b"".join(record(_event(s, "loss", s / 1000)) for s in range(0, 600, 100))
    (run / "events.out.tfevents.100.host").write_bytes(first + record(_event(1, "x", 0))[:9])
    # the restart resumes from the checkpoint at step 300: later events replace 300 and up
    second = record(_event(300, "", 0, session_start=True)) + b"".join(
        record(_event(s, "loss", 1 + s / 1000)) for s in range(300, 800, 100))
    (run / "events.out.tfevents.200.host").write_bytes(second)
    with pytest.warns(IngestWarning, match=r"tfevents\.100\.host: the file ends inside "
                      r"record 7 \(byte \d+\): it holds 9 bytes"), \
            pytest.warns(IngestWarning, match=r"steps go back.*3 of 'loss'"):
        frame = read_tensorboard_runs(tmp_path / "logs")[0].frame
    assert frame.get_column("step").to_list() == [0, 100, 200, 300, 400, 500, 600, 700]
    assert frame.get_column("loss").to_list()[2:4] == [
        pytest.approx(0.2), pytest.approx(1.3)]
    broken = bytearray(second)
    broken[8] ^= 0xFF  # the length checksum of the first record
    (run / "events.out.tfevents.200.host").write_bytes(bytes(broken))
    with pytest.raises(IngestError, match=r"events\.out\.tfevents\.200\.host, line 1: record 1 "
                       r"\(byte 0\) has a corrupt length"), pytest.warns(IngestWarning):
        read_tensorboard_runs(tmp_path / "logs")


# ---------------------------------------------------------------------- MLflow
def _mlflow_runs(root: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    mlflow = pytest.importorskip("mlflow")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 asks for it
    mlflow.set_tracking_uri(f"file:{root / 'mlruns'}")
    experiment = mlflow.set_experiment("batch-size-sweep")
    for bs in (32, 64, 128):
        for trial in range(2):
            with mlflow.start_run(run_name=f"bs{bs}-t{trial}"):
                mlflow.log_params({"batch_size": bs, "learning_rate": 0.1 * (trial + 1),
                                   "momentum": 0.9})
                steps = eval_steps(bs, n=10)
                for step, err in zip(steps, error_curve(bs, trial, steps), strict=True):
                    loss = math.nan if bs == 128 and trial == 1 and step > 0 else 2.3 * err
                    mlflow.log_metrics({"val_loss": loss, "val_accuracy": 1 - err}, step=step)
    with mlflow.start_run(run_name="abandoned") as run:
        mlflow.log_param("batch_size", 32)
        mlflow.log_metric("val_loss", 1.0, step=0)
    mlflow.delete_run(run.info.run_id)
    return root / "mlruns" / experiment.experiment_id


def test_mlflow_file_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    experiment = _mlflow_runs(tmp_path, monkeypatch)
    assert detect_format(tmp_path / "mlruns") == "mlflow"
    data = build(tmp_path / "mlruns", name=NAME)
    assert [(t.key.batch_size, t.trial_id, t.status) for t in data.trials] == [
        (32, 1, "COMPLETE"), (32, 2, "COMPLETE"), (64, 1, "COMPLETE"), (64, 2, "COMPLETE"),
        (128, 1, "COMPLETE"), (128, 2, "INFEASIBLE")]  # the deleted run is left out
    params = sorted((t.parameters["learning_rate"], t.parameters["momentum"])
                    for t in data.trials)
    assert params[0] == (0.1, 0.9) and params[-1] == (0.2, 0.9)
    trial = next(t for t in data.trials if t.key.batch_size == 64 and
                 t.parameters["learning_rate"] == 0.1)
    table = data.measurements[(trial.key, trial.trial_id)]
    steps = eval_steps(64, n=10)
    assert table.column("step").to_pylist() == steps
    assert table.column("val/classification_error").to_pylist() == pytest.approx(
        error_curve(64, 0, steps))
    # runs are named by run id and run name: the manifest can override by name
    (tmp_path / "m.toml").write_text('[[runs]]\nrun = "bs32-t0"\nstatus = "INCOMPLETE"\n')
    data = build(experiment, name=NAME, manifest=tmp_path / "m.toml")
    assert [t.status for t in data.trials][:2].count("INCOMPLETE") == 1
    result = add(tmp_path / "mlruns", name=NAME, home=tmp_path / "home")
    assert result.trials == 6
    live = next(p for p in experiment.iterdir() if (p / "metrics").is_dir()
                and "lifecycle_stage: active" in (p / "meta.yaml").read_text())
    one = build(live, name=NAME)
    assert len(one.trials) == 1


def test_mlflow_experiments_are_not_mixed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                          ) -> None:
    _mlflow_runs(tmp_path, monkeypatch)
    import mlflow

    mlflow.set_experiment("another-sweep")
    with mlflow.start_run():
        mlflow.log_param("batch_size", 8)
        mlflow.log_metric("loss", 1.0, step=1)
    with pytest.raises(IngestError, match=r"holds several MLflow experiments with runs: "
                       r"\d+ \(\S+-sweep\), \d+ \(\S+-sweep\); one workload is one "
                       r"experiment: pass the experiment's folder") as info:
        build(tmp_path / "mlruns", name=NAME)
    assert "(batch-size-sweep)" in str(info.value) and "(another-sweep)" in str(info.value)


def test_mlflow_metric_without_steps(tmp_path: Path) -> None:
    run = tmp_path / "mlruns" / "1" / "abc"
    (run / "metrics").mkdir(parents=True)
    (run.parent / "meta.yaml").write_text("experiment_id: '1'\nname: x\n")
    (run / "meta.yaml").write_text("run_id: abc\nlifecycle_stage: active\n")
    (run / "metrics" / "loss").write_text("1700000000000 2.3 0\n1700000000500 2.1 0\n")
    with pytest.raises(IngestError, match=r"loss, line 2: all 2 points of metric 'loss' are at "
                       r"step 0 .* log it with mlflow\.log_metric\(key, value, step=\.\.\.\)"):
        build(tmp_path / "mlruns", name=NAME)


# ---------------------------------------------------------------------- Weights & Biases
def test_wandb_history_csv_and_parquet(tmp_path: Path) -> None:
    pd = pytest.importorskip("pandas")
    logs = tmp_path / "wandb"
    logs.mkdir()
    for bs, kind in ((32, "csv"), (64, "parquet")):
        steps = eval_steps(bs)
        errors = error_curve(bs, 0, steps)
        history = pd.DataFrame({"_step": steps, "_runtime": [s / 10 for s in steps],
                                "_timestamp": [1.7e9 + s for s in steps],
                                "val/acc": [1 - e for e in errors],
                                "train/loss": [2 * e for e in errors]})
        if kind == "csv":  # the shape of run.scan_history() written with pandas
            history.to_csv(logs / f"run-bs{bs}.csv", index=False)
        else:
            history["media"] = [{"_type": "image-file", "path": "x.png"}] * len(steps)
            history.to_parquet(logs / f"run-bs{bs}.parquet")
    (tmp_path / "m.toml").write_text('[[runs]]\nrun = "run-bs32"\nbatch_size = 32\n'
                                     '[[runs]]\nrun = "run-bs64"\nbatch_size = 64\n')
    assert detect_format(logs) == "wandb"
    data = build(logs, name=NAME, manifest=tmp_path / "m.toml")
    lightning = logs / "lightning.csv"  # WandbLogger: _step counts log calls, not steps
    lightning.write_text("_step,trainer/global_step,val_loss,_runtime\n0,0,2.3,1\n1,500,2.0,2\n"
                         "2,1000,1.8,3\n")
    (run,) = read_wandb_runs(lightning)
    assert run.frame.rows() == [(0, 2.3), (500, 2.0), (1000, 1.8)]
    lightning.unlink()
    for study in data.studies:
        table = data.measurements[(study.key, 1)]
        assert sorted(table.column_names) == ["step", "train/loss",
                                              "val/classification_error"]
        assert table.column("step").to_pylist() == eval_steps(study.key.batch_size)
        assert table.column("val/classification_error").to_pylist() == pytest.approx(
            error_curve(study.key.batch_size, 0, eval_steps(study.key.batch_size)))


# ---------------------------------------------------------------------- the release layout
def _release_folder(root: Path, members: dict[str, bytes]) -> Path:
    for name, data in members.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return root / ROOT


def test_release_folder_and_archives(tmp_path: Path) -> None:
    members = small_members()
    members[f"{ROOT}/mnist/fc_1024/sgd/8/2/metadata.json"] = metadata_json(2, "INFEASIBLE")
    folder = _release_folder(tmp_path / "x", members)
    data = build(folder, name="mine/fc_1024/sgd")
    assert sorted((t.key.batch_size, t.trial_id, t.status) for t in data.trials) == [
        (8, 1, "COMPLETE"), (8, 2, "INFEASIBLE"), (64, 1, "COMPLETE"), (64, 2, "COMPLETE")]
    assert {s.key.workload for s in data.studies} == {"mine/fc_1024/sgd"}
    table = data.measurements[(data.studies[0].key, 1)]
    assert table.to_pydict() == {"step": [0, 100, 200],
                                 "val/classification_error": [0.9, 0.5, 0.25]}
    archive = write_archive(tmp_path / "a.tar.bz2", members)
    gz = tmp_path / "a.tar.gz"
    with tarfile.open(gz, "w:gz") as tar:
        for name, blob in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob))
    workload_dir = folder / "mnist" / "fc_1024" / "sgd"
    for source in (archive, gz, tmp_path / "x", workload_dir):
        assert detect_format(source) == "release"
        other = build(source, name="mine/fc_1024/sgd")
        assert sorted(other.measurements) == sorted(data.measurements)
        for key, value in data.measurements.items():
            assert other.measurements[key].equals(value)
    assert build(workload_dir).studies[0].key.workload == "mnist/fc_1024/sgd"
    mapped = build(archive, name="mine/fc_1024/sgd",
                   metric_map=["val/classification_error=1-val/accuracy"])
    assert mapped.measurements[(data.studies[0].key, 1)].column("val/accuracy").to_pylist() == \
        pytest.approx([0.1, 0.5, 0.75])


def test_release_with_several_workloads_needs_a_name(tmp_path: Path) -> None:
    members = small_members() | small_members("cifar_10/resnet_8/sgd")
    folder = _release_folder(tmp_path / "x", members)
    with pytest.raises(IngestError, match=r"holds 2 workloads \(cifar_10/resnet_8/sgd, "
                       r"mnist/fc_1024/sgd\); pass --name"):
        build(folder)
    assert {s.key.workload for s in build(folder, name="mnist/fc_1024/sgd").studies} == \
        {"mnist/fc_1024/sgd"}
    # the release's own names are refused by the store: rename when adding
    with pytest.raises(Exception, match="is a workload of the published release"):
        add(folder, name="cifar_10/resnet_8/sgd", home=tmp_path / "home")


def test_release_problems_name_the_file(tmp_path: Path) -> None:
    members = small_members()
    members[f"{ROOT}/mnist/fc_1024/sgd/8/1/measurements.csv"] = b"step,val/error\n0,abc\n"
    with pytest.raises(IngestError, match=r"8/1/measurements\.csv"):
        build(write_archive(tmp_path / "a.tar.bz2", members), name="mine/a/b")
    members = small_members()
    del members[f"{ROOT}/mnist/fc_1024/sgd/64/study.json"]
    with pytest.raises(IngestError, match=r"has trials but no study\.json"):
        build(_release_folder(tmp_path / "y", members), name="mine/a/b")
    (tmp_path / "junk.tar.gz").write_bytes(b"\x1f\x8b" + b"\0" * 40)
    with pytest.raises(IngestError, match=r"junk\.tar\.gz: corrupt or unreadable archive"):
        build(tmp_path / "junk.tar.gz", name="mine/a/b")
