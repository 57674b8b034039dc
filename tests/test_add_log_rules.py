"""The rules every format goes through, on generated look-alikes of logs from the wild.

Each test writes logs the way a real library does (TensorBoard's own writers, the ``csv``
module) and checks one rule at its choke point: units of error rates
(:func:`curvekit.ingest.metrics.apply_map`), rows that share a step
(:func:`curvekit.ingest.runs.merge_rows` and ``--on-conflict``), and the import plan that
``curvekit add --dry-run`` prints (:func:`curvekit.ingest.plan.add_plan`).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from curvekit.errors import IngestError, IngestWarning
from curvekit.ingest.add import build
from curvekit.ingest.metrics import apply_map

NAME = "my_data/cnn/adam"


def _manifest(folder: Path, batch_size: int = 32, **workload: object) -> Path:
    path = folder / "runs.toml"
    table = "".join(f"{k} = {v!r}\n" for k, v in workload.items())
    path.write_text((f"[workload]\n{table}" if table else "")
                    + f'[[runs]]\nrun = "*"\nbatch_size = {batch_size}\n')
    return path


def _scalars(folder: Path, scalars: dict[str, list[tuple[int, float]]]) -> None:
    """Scalars as ``SummaryWriter.add_scalar`` and ``tf.summary.scalar`` write them."""
    summary = pytest.importorskip("tensorboard.summary")
    writer = summary.Writer(str(folder))
    for tag, points in scalars.items():
        for step, value in points:
            writer.add_scalar(tag, value, step=step)
    writer.close()


# ---------------------------------------------------------------------- units
def test_a_tensorboard_accuracy_in_percent_is_divided_by_100(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    _scalars(logs / "run", {"Accuracy/test": [(100, 61.5), (200, 98.25)],
                            "Loss/test": [(100, 1.2), (200, 0.1)]})
    with pytest.warns(IngestWarning, match=r"'Accuracy/test'.*percent.*--map"):
        data = build(logs, name=NAME, manifest=_manifest(tmp_path))
    table = pl.from_arrow(next(iter(data.measurements.values())))
    assert isinstance(table, pl.DataFrame)
    assert table.get_column("test/classification_error").to_list() == pytest.approx(
        [0.385, 0.0175])


@pytest.mark.parametrize("bad", [-0.5, 100.5, 250.0])
def test_an_accuracy_outside_0_to_100_is_refused_with_the_map(tmp_path: Path,
                                                               bad: float) -> None:
    (tmp_path / "run.csv").write_text(f"step,val_acc\n100,0.5\n200,{bad}\n")
    with pytest.raises(IngestError) as info:
        build(tmp_path / "run.csv", name=NAME, manifest=_manifest(tmp_path))
    assert "'val_acc'" in str(info.value) and "--map 'val_acc=val_acc'" in str(info.value)
    # the fix named works: the column keeps its own name and its values
    data = build(tmp_path / "run.csv", name=NAME, manifest=_manifest(tmp_path),
                 metric_map=["val_acc=val_acc"])
    assert next(iter(data.measurements.values())).column("val_acc").to_pylist() == [0.5, bad]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0, 100, allow_nan=False), min_size=1, max_size=20),
       st.sampled_from(["val_acc", "accuracy", "test/top1", "val_error", "err_train"]))
def test_a_stored_error_rate_lies_between_0_and_1(values: list[float], name: str) -> None:
    frame = pl.DataFrame({"step": list(range(len(values))), name: values})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IngestWarning)
        mapped = apply_map(frame, "step", "run.csv")
    (column,) = [c for c in mapped.frame.columns if c != "step"]
    assert column.endswith("/classification_error")
    stored = mapped.frame.get_column(column).to_list()
    assert all(0.0 <= v <= 1.0 for v in stored)
    scale = 100.0 if max(values) > 1 else 1.0
    accuracy = "acc" in name or "top1" in name
    expected = [(1 - v / scale) if accuracy else v / scale for v in values]
    assert stored == pytest.approx(expected)
    assert ("percent" in mapped.transforms.get(column, "")) == (scale == 100.0)


# ---------------------------------------------------------------------- rows sharing a step
def _csv(path: Path, header: list[str], rows: list[list[object]]) -> Path:
    """A log as ``csv.writer`` writes it (empty cells where a row lacks a metric)."""
    import csv

    with path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        writer.writerows(["" if v is None else v for v in row] for row in rows)
    return path


def test_train_and_validation_rows_of_one_step_are_one_row(tmp_path: Path) -> None:
    # Lightning's CSVLogger and hand-written loops: one line per logging call
    log = _csv(tmp_path / "metrics.csv", ["epoch", "step", "train_loss", "val_loss"],
               [[0, 249, 0.9, None], [0, 249, None, 1.1], [1, 499, 0.7, None],
                [1, 499, None, 0.8]])
    data = build(log, name=NAME, manifest=_manifest(tmp_path))
    table = next(iter(data.measurements.values())).to_pylist()
    assert table == [{"step": 249, "train/loss": 0.9,
                      "val/loss": 1.1},
                     {"step": 499, "train/loss": 0.7,
                      "val/loss": 0.8}]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.sampled_from(["loss", "val_loss"]),
                          st.floats(0, 10, allow_nan=False)), min_size=1, max_size=30),
       st.sampled_from(["refuse", "first", "last"]))
def test_a_conflict_is_refused_or_resolved_by_the_rule(rows: list[tuple[int, str, float]],
                                                       rule: str) -> None:
    """Property: rows of one step are merged; one metric with two values at one step is a
    conflict, refused naming --on-conflict, or resolved to the first or last value logged."""
    from curvekit.ingest.runs import merge_rows

    frame = pl.DataFrame({"step": [s for s, _, _ in rows],
                          "loss": [v if m == "loss" else None for _, m, v in rows],
                          "val_loss": [v if m == "val_loss" else None for _, m, v in rows]},
                         schema={"step": pl.Int64, "loss": pl.Float64, "val_loss": pl.Float64})
    seen: dict[tuple[int, str], list[float]] = {}
    for step, metric, value in rows:
        seen.setdefault((step, metric), []).append(value)
    conflict = any(len(set(v)) > 1 for v in seen.values())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", IngestWarning)
        if conflict and rule == "refuse":
            with pytest.raises(IngestError, match=r"--on-conflict first\|last"):
                merge_rows(frame, "m.csv", lambda row: row + 2, on_conflict=rule)
            return
        merged = merge_rows(frame, "m.csv", lambda row: row + 2, on_conflict=rule)
    assert merged.get_column("step").to_list() == sorted({s for s, _, _ in rows})
    for row in merged.to_dicts():
        for metric in ("loss", "val_loss"):
            values = seen.get((row["step"], metric))
            expected = None if values is None else values[-1 if rule == "last" else 0]
            assert row[metric] == expected
    assert any("--on-conflict" in str(w.message) for w in caught) == conflict


def test_on_conflict_reaches_every_reader_through_add(tmp_path: Path) -> None:
    log = _csv(tmp_path / "run.csv", ["step", "loss"], [[100, 2.0], [200, 1.5], [200, 1.2]])
    with pytest.raises(IngestError, match=r"line 4.*--on-conflict first\|last"):
        build(log, name=NAME, manifest=_manifest(tmp_path))
    for rule, value in (("first", 1.5), ("last", 1.2)):
        with pytest.warns(IngestWarning, match=f"kept the value logged {rule}"):
            data = build(log, name=NAME, manifest=_manifest(tmp_path), on_conflict=rule)
        table = next(iter(data.measurements.values()))
        assert table.column("train/loss").to_pylist() == [2.0, value]


# ---------------------------------------------------------------------- the dry-run
def _sweep(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for batch_size, speed in ((64, 1.0), (128, 2.0)):
        _csv(folder / f"bs{batch_size}.csv", ["epoch", "val_acc", "loss"],
             [[e, min(99.0, 50 + speed * e * 5), 2.0 / (e + 1)] for e in range(5)])
    (folder / "runs.toml").write_text(
        '[workload]\nname = "my_data/mlp/sgd"\nsteps_per_epoch = 100\ntrain_steps = 500\n'
        '[[runs]]\nrun = "bs64.csv"\nbatch_size = 64\nparameters = { learning_rate = 0.1 }\n'
        '[[runs]]\nrun = "bs128.csv"\nbatch_size = 128\n')
    return folder


def test_the_plan_says_what_would_be_imported_and_why(tmp_path: Path) -> None:
    from curvekit.ingest.add import add_plan

    logs = _sweep(tmp_path / "logs")
    with pytest.warns(IngestWarning):
        plan = add_plan(logs, manifest=logs / "runs.toml")
    assert plan.workload == "my_data/mlp/sgd" and plan.format == "csv"
    (bs64,) = [r for r in plan.runs if r.batch_size == 64]
    assert (bs64.run, bs64.trial_id, bs64.rows, bs64.steps) == ("bs64.csv", 1, 5, (100, 500))
    assert bs64.axis == "epoch x 100" and "epoch column" in bs64.axis_evidence
    assert bs64.status == "COMPLETE" and "500" in bs64.status_why
    metrics = {m.logged: (m.stored, m.transform) for m in bs64.metrics}
    assert metrics == {"val_acc": ("val/classification_error",
                                   "1 - value/100 (accuracy in percent)"),
                       "loss": ("train/loss", "value")}
    assert bs64.parameters == {"learning_rate": 0.1}
    assert [(s.batch_size, s.budget, s.budget_from) for s in plan.studies] == [
        (64, 500, "the manifest's train_steps"), (128, 500, "the manifest's train_steps")]
    assert any("--map 'val_acc=val_acc'" in note for note in plan.notes)


def test_dry_run_writes_nothing_and_prints_the_plan(tmp_path: Path) -> None:
    import json

    from click.testing import CliRunner

    from curvekit.cli import main
    from tests.conftest import snapshot

    home = tmp_path / "home"
    first = tmp_path / "first"
    first.mkdir()
    _csv(first / "bs32.csv", ["step", "loss"], [[100, 1.0], [200, 0.5]])
    runner = CliRunner()
    added = runner.invoke(main, ["add", str(first), "--name", "my_data/a/b", "--run-manifest",
                                 str(_manifest(first)), "--home", str(home)])
    assert added.exit_code == 0, added.output
    before = snapshot(home)
    listing = sorted(p.relative_to(home).as_posix() for p in home.rglob("*"))
    logs = _sweep(tmp_path / "logs")
    for extra in ([], ["--format", "json"]):
        result = runner.invoke(main, ["add", str(logs), "--run-manifest",
                                      str(logs / "runs.toml"), "--dry-run", *extra,
                                      "--home", str(home)])
        assert result.exit_code == 0, result.output
        assert snapshot(home) == before  # byte-identical, no new snapshot left
        assert sorted(p.relative_to(home).as_posix() for p in home.rglob("*")) == listing
    plan = json.loads(result.stdout)
    assert [r["run"] for r in plan["runs"]] == ["bs64.csv", "bs128.csv"]
    transforms = {m["logged"]: m["transform"] for m in plan["runs"][0]["metrics"]}
    assert transforms == {"loss": "value", "val_acc": "1 - value/100 (accuracy in percent)"}
    table = runner.invoke(main, ["add", str(logs), "--run-manifest", str(logs / "runs.toml"),
                                 "--dry-run", "--home", str(home)]).stdout
    assert "nothing is written" in table and "axis:    epoch x 100" in table
    assert "val_acc -> val/classification_error  [1 - value/100" in table
    assert snapshot(home) == before


def test_a_refused_dry_run_names_the_option_that_settles_it(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from curvekit.cli import main

    logs = _sweep(tmp_path / "logs")
    (logs / "runs.toml").write_text('[[runs]]\nrun = "*"\nbatch_size = 64\n')
    result = CliRunner().invoke(main, ["add", str(logs), "--name", NAME, "--run-manifest",
                                       str(logs / "runs.toml"), "--dry-run"])
    assert result.exit_code == 1
    assert result.output.startswith("Error: ") and "steps_per_epoch" in result.output


# ---------------------------------------------------------------------- layouts of writers
def test_an_estimators_eval_folder_is_the_validation_of_its_run(tmp_path: Path) -> None:
    # tf.estimator: training events in model_dir, evaluations in model_dir/eval
    model_dir = tmp_path / "logs" / "output"
    _scalars(model_dir, {"loss": [(s, 2.0 - s / 1000) for s in range(1, 2002, 100)],
                         "global_step/sec": [(s, 50.0) for s in range(101, 2002, 100)]})
    _scalars(model_dir / "eval", {"loss": [(2000, 0.4)], "accuracy": [(2000, 0.91)]})
    data = build(tmp_path / "logs", name=NAME, manifest=_manifest(tmp_path))
    assert len(data.trials) == 1 and data.trials[0].member.endswith("output")
    table = pl.from_arrow(next(iter(data.measurements.values())))
    assert isinstance(table, pl.DataFrame)
    assert {"train/loss", "val/loss",
            "val/classification_error"} <= set(table.columns)
    last = table.filter(pl.col("step") == 2000).row(0, named=True)
    assert last["val/classification_error"] == pytest.approx(0.09)
    assert last["val/loss"] == pytest.approx(0.4)


def _testtube_version(folder: Path, batch_size: int, epochs: int) -> None:
    """What PyTorch Lightning 0.6's TestTubeLogger leaves: metrics.csv (one row per epoch,
    a created_at clock), meta_tags.csv (key,value), meta.experiment, and tf/ events."""
    folder.mkdir(parents=True)
    _csv(folder / "metrics.csv", ["train_loss", "epoch", "created_at"],
         [[3.0 / (e + 1), e, f"2020-02-03 16:{50 + e}:44.934109"] for e in range(epochs)])
    _csv(folder / "meta_tags.csv", ["key", "value"],
         [["train_dataset", "<my.Dataset object at 0x7fd449fe1550>"],
          ["hidden_nodes", "[10, 10]"], ["lr", "0.02"], ["batch_size", str(batch_size)]])
    (folder / "meta.experiment").write_text('{"name": "lightning_logs", "version": 0}')
    _scalars(folder / "tf", {"train_loss": [(e, 3.0 / (e + 1)) for e in range(epochs)]})


def test_a_testtube_log_reads_its_tags_and_leaves_its_tensorboard_copy(tmp_path: Path
                                                                       ) -> None:
    logs = tmp_path / "lightning_logs"
    _testtube_version(logs / "version_0", 20, 4)
    _testtube_version(logs / "version_1", 40, 3)
    manifest = tmp_path / "runs.toml"
    manifest.write_text("[workload]\nsteps_per_epoch = 10\n")
    with pytest.warns(IngestWarning, match=r"read as csv; not read: TestTube"):
        data = build(logs, name=NAME, manifest=manifest)
    assert sorted((t.key.batch_size, t.member.split("/")[-2]) for t in data.trials) == [
        (20, "version_0"), (40, "version_1")]
    trial = next(t for t in data.trials if t.key.batch_size == 20)
    assert trial.parameters["learning_rate"] == 0.02
    assert trial.parameters["train_dataset"].startswith("<my.Dataset")
    table = data.measurements[(trial.key, trial.trial_id)]
    assert table.column_names == ["step", "train/loss"]
    assert table.column("step").to_pylist() == [10, 20, 30, 40]
    # without steps per epoch it is refused, naming the fix
    with pytest.raises(IngestError, match=r"counts epochs.*steps_per_epoch"), \
            pytest.warns(IngestWarning, match="TestTube"):
        build(logs, name=NAME)


def test_a_keras_csvlogger_training_log_is_a_csv_log(tmp_path: Path) -> None:
    # CSVLogger's default file name is training.log
    logs = tmp_path / "logs"
    logs.mkdir()
    _csv(logs / "training.log", ["epoch", "acc", "loss", "val_acc", "val_loss"],
         [[e, 0.5 + e / 10, 1.0 - e / 10, 0.45 + e / 10, 1.1 - e / 10] for e in range(3)])
    (logs / "notes.log").write_text("2024-01-01 12:00 started\n")  # not a CSVLogger log
    data = build(logs, name=NAME, manifest=_manifest(tmp_path, steps_per_epoch=100))
    assert [t.member.rsplit("/", 1)[-1] for t in data.trials] == ["training.log"]
    table = next(iter(data.measurements.values()))
    assert table.column("step").to_pylist() == [100, 200, 300]
    assert table.column("val/classification_error").to_pylist() == pytest.approx(
        [0.55, 0.45, 0.35])


def test_the_trainers_tensorboard_files_are_named_as_not_read(tmp_path: Path) -> None:
    import json

    out = tmp_path / "out"
    for step in (50, 100):
        checkpoint = out / f"checkpoint-{step}"
        checkpoint.mkdir(parents=True)
        (checkpoint / "trainer_state.json").write_text(json.dumps({
            "global_step": step, "max_steps": 100, "train_batch_size": 16,
            "log_history": [{"step": s, "loss": 1.0 / s, "epoch": s / 100}
                            for s in range(10, step + 1, 10)]}))
    _scalars(out / "runs" / "May01_10-00-00_host", {"train/loss": [(10, 0.1)]})
    with pytest.warns(IngestWarning, match=r"read as hf; not read: TensorBoard event files"):
        data = build(out, name=NAME)
    assert len(data.trials) == 1 and data.trials[0].status == "COMPLETE"


# ---------------------------------------------------------------------- the log's own record
def _mlflow_store(root: Path, runs: dict[str, tuple[int, int]], epochs: int = 50) -> Path:
    """MLflow's file store as ``mlflow.log_metric(..., step=epoch)`` leaves it: run id ->
    (epochs logged, RunStatus number in meta.yaml: 1 RUNNING, 3 FINISHED, 4 FAILED)."""
    experiment = root / "mlruns" / "1"
    experiment.mkdir(parents=True)
    (experiment / "meta.yaml").write_text("experiment_id: '1'\nname: sweep\n")
    for number, (run_id, (logged, status)) in enumerate(runs.items()):
        run = experiment / run_id
        for sub in ("metrics", "params", "tags"):
            (run / sub).mkdir(parents=True)
        (run / "meta.yaml").write_text(f"run_id: {run_id}\nlifecycle_stage: active\n"
                                       f"status: {status}\nstart_time: {1700000000000 + number}\n")
        (run / "metrics" / "val_loss").write_text("".join(
            f"{1700000000000 + 1000 * e} {2.0 - 0.01 * e} {e}\n" for e in range(logged)))
        (run / "params" / "batch_size").write_text("64")
        (run / "params" / "epochs").write_text(str(epochs))
    return root / "mlruns"


def test_a_run_the_logger_records_as_failed_is_incomplete(tmp_path: Path) -> None:
    from curvekit.ingest.add import add_plan

    source = _mlflow_store(tmp_path, {"done": (50, 3), "failed": (2, 4), "stuck": (30, 1),
                                      "stopped": (40, 3)})
    manifest = tmp_path / "runs.toml"
    manifest.write_text("[workload]\nsteps_per_epoch = 10\ntrain_steps = 400\n")
    data = build(source, name=NAME, manifest=manifest)
    statuses = {t.member.rsplit("/", 1)[-1]: t.status for t in data.trials}
    # FAILED after 2 epochs and a RUNNING left behind are incomplete whatever the budget;
    # a FINISHED run is judged by the budget (400 steps: 40 epochs of 10 steps)
    assert statuses == {"done": "COMPLETE", "failed": "INCOMPLETE", "stuck": "INCOMPLETE",
                        "stopped": "COMPLETE"}
    plan = add_plan(source, name=NAME, manifest=manifest)
    why = {r.run: r.status_why for r in plan.runs}
    assert "MLflow status FAILED" in why["failed"] and "MLflow status RUNNING" in why["stuck"]


@settings(max_examples=25, deadline=None)
@given(st.integers(2, 60), st.integers(2, 100))
def test_epochs_on_the_step_axis_are_never_stored_as_steps(logged: int, epochs: int) -> None:
    """Property: an MLflow run logged at steps 0..k-1 with an epochs parameter of at least k
    (stopped early, or not) counts epochs: refused without steps per epoch."""
    import tempfile

    root = Path(tempfile.mkdtemp())
    source = _mlflow_store(root, {"r": (logged, 3)}, epochs=epochs)
    if logged <= epochs:
        with pytest.raises(IngestError, match=r"counts epochs.*steps_per_epoch"):
            build(source, name=NAME)
    else:  # more points than epochs: no epoch axis
        assert next(iter(build(source, name=NAME).measurements.values())).num_rows == logged


# ---------------------------------------------------------------------- messages
def test_every_problem_is_reported_at_once_each_with_its_fix(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "empty.csv").write_text("")
    _csv(logs / "epochs.csv", ["epoch", "loss"], [[0, 1.0], [1, 0.5]])
    _csv(logs / "acc.csv", ["step", "val_acc"], [[100, 0.5], [200, 250.0]])
    with pytest.raises(IngestError) as info:
        build(logs, name=NAME)
    message = str(info.value)
    assert message.startswith(str(logs / "empty.csv")) and "--exclude 'empty.csv'" in message
    logs_ok = tmp_path / "second"
    logs_ok.mkdir()
    for f in ("epochs.csv", "acc.csv"):
        (logs_ok / f).write_bytes((logs / f).read_bytes())
    with pytest.raises(IngestError) as info:
        build(logs_ok, name=NAME)
    message = str(info.value)
    # three problems, three fixes, in one round: batch sizes, the epoch axis, the units
    assert "and 3 more problems in this import" in message
    for fix in ("batch_size = N", "steps_per_epoch", "--map 'val_acc=val_acc'"):
        assert fix in message


def test_a_folder_without_curves_is_nothing_to_import(tmp_path: Path) -> None:
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    run = tmp_path / "logs" / "version_0"
    writer = EventFileWriter(str(run))  # an image and Lightning's hp_metric placeholder
    image = summary_pb2.Summary.Image(height=1, width=1, colorspace=1,
                                      encoded_image_string=b"\x89PNG")
    writer.add_event(event_pb2.Event(step=0, summary=summary_pb2.Summary(
        value=[summary_pb2.Summary.Value(tag="samples", image=image)])))
    writer.add_event(event_pb2.Event(step=0, summary=summary_pb2.Summary(
        value=[summary_pb2.Summary.Value(tag="hp_metric", simple_value=-1.0)])))
    writer.close()
    with pytest.raises(IngestError, match=r"nothing to import.*version_0.*no curve"):
        build(tmp_path / "logs", name=NAME)


def test_the_hparams_plugins_sessions_are_runs_of_their_own(tmp_path: Path) -> None:
    from tensorboard.compat.proto import event_pb2
    from tensorboard.plugins.hparams import summary_v2 as hp
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    root = tmp_path / "hparam_tuning"
    experiment = EventFileWriter(str(root))  # hp.hparams_config: the experiment, no scalars
    experiment.add_event(event_pb2.Event(step=0, summary=hp.hparams_config_pb(
        hparams=[hp.HParam("units")], metrics=[hp.Metric("accuracy")])))
    experiment.close()
    for n, units in enumerate((16, 32)):
        session = EventFileWriter(str(root / f"run-{n}"))
        session.add_event(event_pb2.Event(step=0, summary=hp.hparams_pb({"units": units})))
        session.close()
        _scalars(root / f"run-{n}", {"accuracy": [(1, 0.8 + n / 100)]})
    data = build(root, name=NAME, manifest=_manifest(tmp_path, 16))
    assert sorted((t.member.rsplit("/", 1)[-1], t.parameters["units"]) for t in data.trials) \
        == [("run-0", 16), ("run-1", 32)]


# ---------------------------------------------------------------------- one run, several writers
def test_add_scalars_folders_are_metrics_of_their_run(tmp_path: Path) -> None:
    # SummaryWriter.add_scalars("Loss", {"train": ..., "val": ...}) under runs/exp1
    run = tmp_path / "runs" / "exp1"
    _scalars(run, {"lr": [(s, 0.1) for s in (100, 200)]})
    _scalars(run / "Loss_train", {"Loss": [(100, 1.0), (200, 0.8)]})
    _scalars(run / "Loss_val", {"Loss": [(100, 1.2), (200, 0.9)]})
    data = build(tmp_path / "runs", name=NAME, manifest=_manifest(tmp_path))
    assert [t.member.rsplit("/", 1)[-1] for t in data.trials] == ["exp1"]
    table = next(iter(data.measurements.values()))
    assert table.column("train/loss").to_pylist() == pytest.approx([1.0, 0.8])
    assert table.column("val/loss").to_pylist() == pytest.approx([1.2, 0.9])


def test_event_files_that_restart_are_read_in_order_and_named(tmp_path: Path) -> None:
    """Two writers into one run folder (a resumed run, a second fit()): TensorBoard's rule,
    later points replace the earlier ones from the step they restart at, and a warning says
    how many were left out and how to import each file alone."""
    run = tmp_path / "logs" / "run"
    _scalars(tmp_path / "first", {"loss": [(s, 2.0) for s in range(0, 500, 100)]})
    _scalars(tmp_path / "second", {"loss": [(s, 1.0) for s in range(0, 300, 100)]})
    run.mkdir(parents=True)
    # the writers' start times, as their names hold them: by name the later one sorts first
    for folder, started in (("first", 999999999), ("second", 1000000000)):
        (event,) = (tmp_path / folder).iterdir()
        event.rename(run / f"events.out.tfevents.{started}.host")
    with pytest.warns(IngestWarning, match=r"steps go back.*5 of 'loss'.*--include"):
        data = build(tmp_path / "logs", name=NAME, manifest=_manifest(tmp_path))
    table = next(iter(data.measurements.values()))
    assert table.column("step").to_pylist() == [0, 100, 200]
    assert table.column("train/loss").to_pylist() == [1.0, 1.0, 1.0]


# ---------------------------------------------------------------------- names
def test_an_imported_workloads_default_metric_has_curves(tmp_path: Path) -> None:
    """A one-value summary logged at the end (``avg_test_acc``) sorts first by name, but the
    default metric of fit --all and the report is one with a curve."""
    from curvekit.goals import default_goal
    from curvekit.ingest.add import add
    from curvekit.store.store import Store

    logs = tmp_path / "logs"
    logs.mkdir()
    for batch_size in (32, 64):
        _csv(logs / f"bs{batch_size}.csv", ["step", "loss", "avg_test_acc"],
             [[s, 2.0 / s, None] for s in range(100, 1001, 100)] + [[1000, None, 0.9]])
    (logs / "runs.toml").write_text('[[runs]]\nrun = "bs32.csv"\nbatch_size = 32\n'
                                    '[[runs]]\nrun = "bs64.csv"\nbatch_size = 64\n')
    home = tmp_path / "home"
    add(logs, name=NAME, manifest=logs / "runs.toml", home=home)
    store = Store.open(home)
    assert "avg_test_acc" in store.metrics(NAME)
    assert default_goal(store, NAME).metric == "train/loss"


# ---------------------------------------------------------------------- CSV dialects
@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 10, allow_nan=False), st.floats(0, 1, allow_nan=False)),
                min_size=1, max_size=15),
       st.sampled_from(["semicolon", "tab", "padded"]))
def test_csv_dialects_read_as_the_plain_file(rows: list[tuple[float, float]],
                                             kind: str) -> None:
    """Property: a log written with semicolons and decimal commas (a spreadsheet of a locale
    that writes 0,5), with tabs, or with space-padded right-aligned cells, reads exactly as
    the same log written plainly by ``csv.writer``."""
    import csv
    import io
    import tempfile

    from curvekit.ingest.csvlogs import read_csv_run

    table = [["step", "loss", "val_acc"],
             *([100 * (i + 1), repr(a), repr(b)] for i, (a, b) in enumerate(rows))]
    folder = Path(tempfile.mkdtemp())
    with (folder / "plain.csv").open("w", newline="") as fh:
        csv.writer(fh).writerows(table)
    out = io.StringIO()
    if kind == "padded":
        csv.writer(out, lineterminator="\n").writerows(
            [[f"{c:>12}" for c in map(str, row)] for row in table])
    else:
        cells = [[str(c).replace(".", ",") if kind == "semicolon" else str(c) for c in row]
                 for row in table]
        csv.writer(out, delimiter=";" if kind == "semicolon" else "\t",
                   lineterminator="\n").writerows(cells)
    (folder / "other.csv").write_text(out.getvalue())
    plain = read_csv_run(folder / "plain.csv", "plain.csv").frame
    other = read_csv_run(folder / "other.csv", "other.csv").frame
    assert other.equals(plain)


def test_a_single_epoch_autologged_run_imports_with_steps_per_epoch(tmp_path: Path) -> None:
    source = _mlflow_store(tmp_path, {"one": (1, 3)}, epochs=1)
    (source / "1" / "one" / "tags" / "mlflow.autologging").write_text("pytorch")
    with pytest.raises(IngestError, match="final values only"):
        build(source, name=NAME)
    manifest = tmp_path / "runs.toml"
    manifest.write_text("[workload]\nsteps_per_epoch = 469\n")
    data = build(source, name=NAME, manifest=manifest)
    table = next(iter(data.measurements.values()))
    assert table.column("step").to_pylist() == [469]
    assert data.trials[0].status == "COMPLETE"
