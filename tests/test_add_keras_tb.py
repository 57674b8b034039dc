"""TensorBoard logs as Keras and PyTorch Lightning lay them out.

Keras's TensorBoard callback writes one run as ``<run>/train/`` and ``<run>/validation/``
(both folders hold ``epoch_loss``: the folder names the split) and logs each validation a
second time at the optimizer's step count (``evaluation_loss_vs_iterations``). Lightning's
TensorBoardLogger writes a placeholder ``hp_metric`` of -1. The look-alikes are written with
``tensorboard``'s own writers the way the callback calls them (TensorFlow is not needed),
and with Lightning's real logger.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from curvekit.errors import IngestError
from curvekit.ingest.add import add, build
from curvekit.ingest.metrics import apply_map
from curvekit.ingest.runs import IngestWarning
from curvekit.ingest.tensorboard import read_tensorboard_runs
from curvekit.store.update import WorkloadData
from tests.conftest import snapshot

NAME = "my_data/cnn/adam"
STEPS_PER_EPOCH = 50


def _scalars(folder: Path, scalars: dict[str, list[tuple[int, float]]]) -> None:
    """TF2 tensor scalars, as ``tf.summary.scalar`` writes them."""
    summary = pytest.importorskip("tensorboard.summary")
    writer = summary.Writer(str(folder))
    for tag, points in scalars.items():
        for step, value in points:
            writer.add_scalar(tag, value, step=step)
    writer.close()


def _keras_run(run: Path, epochs: int = 4, *, validation: str = "validation",
               hparams: dict[str, object] | None = None, evaluations: bool = True,
               initial_epoch: int = 0) -> None:
    """What ``model.fit(..., callbacks=[TensorBoard(run), hp.KerasCallback(run, ...)])``
    leaves: the hparams in the run folder, per-epoch tags in ``train/`` (with the learning
    rate, as Keras 3 logs it), the validation's ``epoch_*`` tags and its
    ``evaluation_*_vs_iterations`` tags in ``validation/``, and TensorFlow's
    ``.profile-empty`` file."""
    from tensorboard.compat.proto import event_pb2
    from tensorboard.plugins.hparams import summary_v2 as hp
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    if hparams:
        events = EventFileWriter(str(run))
        events.add_event(event_pb2.Event(step=0, summary=hp.hparams_pb(hparams)))
        events.close()
    range_ = range(initial_epoch, initial_epoch + epochs)
    _scalars(run / "train", {
        "epoch_loss": [(e, 2.0 - e / 10) for e in range_],
        "epoch_accuracy": [(e, 0.5 + e / 20) for e in range_],
        "epoch_learning_rate": [(e, 0.01) for e in range_]})
    (run / "train" / "events.out.tfevents.1628697787.host.profile-empty").write_bytes(b"")
    val = {"epoch_loss": [(e, 2.5 - e / 10) for e in range_],
           "epoch_accuracy": [(e, 0.4 + e / 20) for e in range_]}
    if evaluations:
        val.update({
            "evaluation_loss_vs_iterations":
                [((e + 1 - initial_epoch) * STEPS_PER_EPOCH, 2.5 - e / 10) for e in range_],
            "evaluation_accuracy_vs_iterations":
                [((e + 1 - initial_epoch) * STEPS_PER_EPOCH, 0.4 + e / 20) for e in range_]})
    _scalars(run / validation, val)


def _columns(data: WorkloadData) -> list[str]:
    return sorted({c for t in data.measurements.values() for c in t.column_names})


# ---------------------------------------------------------------------- Keras's layout
def test_keras_train_and_validation_folders_are_one_trial(tmp_path: Path) -> None:
    """Two runs of a sweep, each as Keras writes it: one trial each, validation metrics
    from the validation folder, the steps from the evaluations' step counts."""
    for bs in (32, 64):
        _keras_run(tmp_path / "logs" / f"bs{bs}", hparams={"batch_size": bs, "lr": 0.01})
    runs = read_tensorboard_runs(tmp_path / "logs")
    assert [r.key for r in runs] == ["bs32", "bs64"]
    assert runs[0].params == {"batch_size": 32, "lr": 0.01, "steps_per_epoch": STEPS_PER_EPOCH}
    assert runs[0].frame.columns == ["step", "epoch_accuracy", "epoch_learning_rate",
                                     "epoch_loss", "epoch_val_accuracy", "epoch_val_loss"]
    data = build(tmp_path / "logs", name=NAME)
    assert sorted(t.key.batch_size for t in data.trials) == [32, 64]
    assert _columns(data) == ["epoch_learning_rate", "step", "train/classification_error",
                              "train/loss", "val/classification_error",
                              "val/loss"]
    trial = next(t for t in data.trials if t.key.batch_size == 32)
    table = data.measurements[(trial.key, trial.trial_id)]
    assert table.column("step").to_pylist() == [50, 100, 150, 200]
    assert table.column("val/loss").to_pylist() == pytest.approx(
        [2.5, 2.4, 2.3, 2.2], rel=1e-6)
    assert table.column("val/classification_error").to_pylist() == pytest.approx(
        [0.6, 0.55, 0.5, 0.45], rel=1e-6)
    assert table.column("train/loss").to_pylist() == pytest.approx(
        [2.0, 1.9, 1.8, 1.7], rel=1e-6)


def test_keras_run_folder_given_itself_and_eval_named_folder(tmp_path: Path) -> None:
    """The run folder as the source is named by the source; ``eval`` works as
    ``validation`` does."""
    _keras_run(tmp_path / "run1", validation="eval")
    (run,) = read_tensorboard_runs(tmp_path / "run1")
    assert run.key == "run1" and run.path == str(tmp_path / "run1")
    assert {"epoch_val_loss", "epoch_val_accuracy"} <= set(run.frame.columns)


def test_keras_without_evaluations_needs_steps_per_epoch(tmp_path: Path) -> None:
    """Older Keras logs no evaluation_* tags: the run counts epochs, and the refusal says
    how to turn them into steps; the manifest's value is then used."""
    _keras_run(tmp_path / "logs" / "run1", evaluations=False)
    manifest = tmp_path / "runs.toml"
    manifest.write_text("[[runs]]\nrun = \"*\"\nbatch_size = 32\n")
    with pytest.raises(IngestError, match=r"Keras's per-epoch TensorBoard tags.*steps_per_epoch"):
        build(tmp_path / "logs", name=NAME, manifest=manifest)
    manifest.write_text("[workload]\nsteps_per_epoch = 10\n[[runs]]\nrun = \"*\"\n"
                        "batch_size = 32\n")
    data = build(tmp_path / "logs", name=NAME, manifest=manifest)
    (table,) = data.measurements.values()
    assert table.column("step").to_pylist() == [10, 20, 30, 40]
    assert "val/loss" in table.column_names


def test_keras_resumed_run_gives_no_steps_per_epoch(tmp_path: Path) -> None:
    """``fit(initial_epoch=3)``: the step counts do not pair with the epochs as (e + 1) * N,
    so nothing is guessed; the evaluations still stay out of the metrics."""
    _keras_run(tmp_path / "logs" / "run1", initial_epoch=3)
    (run,) = read_tensorboard_runs(tmp_path / "logs")
    assert "steps_per_epoch" not in run.params
    assert not any(c.startswith("evaluation_") for c in run.frame.columns)


def test_lone_train_folder_and_plain_folders_stay_runs_of_their_own(tmp_path: Path) -> None:
    """Only the pair of split folders is Keras's layout: a ``train`` folder alone, or
    folders of other names, are runs as before."""
    _scalars(tmp_path / "a" / "train", {"epoch_loss": [(0, 1.0), (1, 0.5)]})
    _scalars(tmp_path / "b" / "validation", {"epoch_loss": [(0, 1.0), (1, 0.5)]})
    _scalars(tmp_path / "c" / "train", {"loss": [(0, 1.0)]})
    _scalars(tmp_path / "c" / "test", {"loss": [(0, 1.0)]})
    keys = [r.key for r in read_tensorboard_runs(tmp_path)]
    assert keys == ["a/train", "b/validation", "c/test", "c/train"]


def test_keras_same_tag_twice_is_refused_with_the_folders(tmp_path: Path) -> None:
    """A validation and an eval folder both name the validation split: refused, naming
    both folders and how to leave one out; nothing is stored."""
    _keras_run(tmp_path / "logs" / "run1", evaluations=False)
    _scalars(tmp_path / "logs" / "run1" / "eval", {"epoch_loss": [(0, 1.0)]})
    home = tmp_path / "home"
    before = snapshot(home)
    with pytest.raises(IngestError, match=r"'epoch_val_loss' of .*eval is also in "
                       r".*validation.*--exclude") as info:
        add(tmp_path / "logs", name=NAME, home=home)
    assert str(info.value).startswith(str(tmp_path / "logs" / "run1"))
    assert snapshot(home) == before


@settings(max_examples=30, deadline=None)
@given(tag=st.lists(st.sampled_from(["loss", "acc", "accuracy", "mean", "absolute", "error",
                                     "auc", "top", "k", "precision", "lr", "ap", "x"]),
                    min_size=1, max_size=3).map("_".join))
def test_a_validation_folders_tags_map_to_the_val_split(tag: str) -> None:
    """Property: whatever Keras names a metric, the validation folder's copy goes to a
    ``val/`` column and the training folder's copy to its ``train/`` twin."""
    from curvekit.ingest.tensorboard import _split_tag

    train, val = f"epoch_{tag}", _split_tag(f"epoch_{tag}", "val")
    if train == val:  # the tag already names a split
        return
    mapped = apply_map(pl.DataFrame({"step": [0], train: [0.25], val: [0.5]}), "step", "r")
    columns = {logged: column for column, logged in mapped.sources.items()}
    assert columns[val].startswith("val/"), (tag, columns)
    assert columns[train] == "train/" + columns[val].removeprefix("val/"), (tag, columns)


# ---------------------------------------------------------------------- hp_metric
def _lightning_run(root: Path, hp_metric: float | None) -> Path:
    """What Lightning's TensorBoardLogger writes (``log_hyperparams`` with the placeholder
    or the user's own hp_metric, then ``log_metrics``), by the calls it makes on
    tensorboardX's writer (importing Lightning itself takes many seconds)."""
    tbx = pytest.importorskip("tensorboardX")
    from tensorboardX.summary import hparams

    run = root / "lightning_logs" / "version_0"
    params = {"batch_size": 32, "lr": 0.1}
    metrics = {"hp_metric": -1 if hp_metric is None else hp_metric}
    with tbx.SummaryWriter(str(run)) as writer:
        for name, value in metrics.items():  # log_metrics(metrics, step=None)
            writer.add_scalar(name, value, None)
        for summary in hparams(params, metrics):
            writer._get_file_writer().add_summary(summary, None)
        for step in (9, 19, 29):
            writer.add_scalar("val_loss", 2.0 - step / 20, step)
            writer.add_scalar("epoch", step // 10, step)
    (run / "hparams.yaml").write_text("batch_size: 32\nlr: 0.1\n")
    return run


def test_lightning_hp_metric_placeholder_is_left_out(tmp_path: Path) -> None:
    run = _lightning_run(tmp_path, None)
    (log,) = read_tensorboard_runs(run.parent)
    assert "hp_metric" not in log.frame.columns
    assert log.frame.get_column("step").to_list() == [9, 19, 29]  # no row at step 0 left
    data = build(run.parent, name=NAME)
    assert _columns(data) == ["step", "val/loss"]


def test_lightning_hp_metric_of_the_user_is_kept(tmp_path: Path) -> None:
    """A value the user gave (one point, not -1), or a series, is a metric."""
    run = _lightning_run(tmp_path / "one", 0.25)
    (log,) = read_tensorboard_runs(run.parent)
    assert log.frame.select("step", "hp_metric").drop_nulls().rows() == [(0, 0.25)]
    run = tmp_path / "series" / "version_0"
    _scalars(run, {"hp_metric": [(0, -1.0), (10, 0.5)], "val_loss": [(10, 1.0)]})
    (log,) = read_tensorboard_runs(run.parent)
    assert log.frame.select("step", "hp_metric").drop_nulls().rows() == [(0, -1.0), (10, 0.5)]


def test_lightning_per_epoch_batch_series_are_left_out_with_a_warning(tmp_path: Path) -> None:
    """Lightning 1.x logs per-batch validation values as ``valid_loss_step/epoch_N``, stepped
    by the batch index within the epoch: on the step axis they would be wrong points."""
    run = tmp_path / "lightning_logs" / "version_0"
    _scalars(run, {"train_loss_step": [(49, 2.0), (99, 1.5), (149, 1.2)],
                   "valid_loss_epoch": [(99, 1.6), (149, 1.3)],
                   "valid_loss_step/epoch_0": [(0, 1.7), (1, 1.5), (2, 1.6)],
                   "valid_loss_step/epoch_1": [(0, 1.4), (1, 1.2), (2, 1.3)]})
    (run / "hparams.yaml").write_text("batch_size: 32\n")
    with pytest.warns(IngestWarning, match=r"left out 2 per-epoch series of per-batch values "
                      r"\(valid_loss_step/epoch_0, valid_loss_step/epoch_1\)"):
        data = build(tmp_path / "lightning_logs", name=NAME)
    assert _columns(data) == ["step", "train/loss_step",
                              "val/loss"]
    (table,) = data.measurements.values()
    assert table.column("step").to_pylist() == [49, 99, 149]


# ---------------------------------------------------------------------- TF1-era Keras
def _tf1_keras_run(run: Path, epochs: int, *, metrics: tuple[str, ...] = ("acc",),
                   validation: bool = True, lr: bool = False, initial_epoch: int = 0) -> None:
    """What Keras 2.x's ``TensorBoard`` callback leaves on TensorFlow 1: at the end of each
    epoch one ``Summary`` holding a ``simple_value`` per key of the epoch's logs (``loss``,
    ``acc``, ``val_loss``, ``val_acc``; ``lr`` with ReduceLROnPlateau), under the key's own
    name, written by ``FileWriter.add_summary(summary, epoch)``: the step is the epoch."""
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    writer = EventFileWriter(str(run))
    for epoch in range(initial_epoch, initial_epoch + epochs):
        logs = {"loss": 2.0 - epoch / 20, **{m: 0.5 + epoch / 100 for m in metrics}}
        if validation:
            logs.update({f"val_{k}": v + 0.05 for k, v in list(logs.items())})
        if lr:
            logs["lr"] = 0.01
        values = [summary_pb2.Summary.Value(tag=k, simple_value=v) for k, v in logs.items()]
        writer.add_event(event_pb2.Event(wall_time=1500000000.0 + epoch, step=epoch,
                                         summary=summary_pb2.Summary(value=values)))
    writer.close()


def _bs(tmp_path: Path, extra: str = "") -> Path:
    manifest = tmp_path / "runs.toml"
    manifest.write_text(extra + '[[runs]]\nrun = "*"\nbatch_size = 32\n')
    return manifest


def test_tf1_keras_history_tags_count_epochs_and_are_refused_without_steps(
        tmp_path: Path) -> None:
    """``acc``, ``loss``, ``val_acc``, ``val_loss`` at steps 0..9 are ten epochs: refused,
    naming the evidence and both fixes, the store as it was; with steps_per_epoch (or
    train_examples) epoch e is at step (e + 1) x N."""
    _tf1_keras_run(tmp_path / "logs" / "run1", 10, lr=True)
    home = tmp_path / "home"
    before = snapshot(home)
    with pytest.raises(IngestError, match=r"run 'run1' counts epochs, not training steps: its "
                       r"metrics are a Keras history \(acc/val_acc, loss/val_loss: a metric "
                       r"and its val_ twin\), one point at every step 0\.\.9.*steps_per_epoch "
                       r"= N.*train_examples = N") as info:
        add(tmp_path / "logs", name=NAME, manifest=_bs(tmp_path), home=home)
    assert info.value.path == str(tmp_path / "logs" / "run1")
    assert snapshot(home) == before
    data = build(tmp_path / "logs", name=NAME,
                 manifest=_bs(tmp_path, "[workload]\nsteps_per_epoch = 50\n"))
    (table,) = data.measurements.values()
    assert table.column("step").to_pylist() == [50 * (e + 1) for e in range(10)]
    assert _columns(data) == ["lr", "step", "train/classification_error", "train/loss",
                              "val/classification_error", "val/loss"]
    assert table.column("val/loss").to_pylist() == pytest.approx(
        [2.05 - e / 20 for e in range(10)], rel=1e-6)
    data = build(tmp_path / "logs", name=NAME,
                 manifest=_bs(tmp_path, "[workload]\ntrain_examples = 1000\n"))
    (table,) = data.measurements.values()
    assert table.column("step").to_pylist()[:2] == [32, 64]  # ceil(1000 / 32) = 32


def test_the_plan_gives_the_keras_history_as_the_axis_evidence(tmp_path: Path) -> None:
    from curvekit.ingest.add import add_plan

    _tf1_keras_run(tmp_path / "logs" / "run1", 4, metrics=("acc", "mean_absolute_error"))
    plan = add_plan(tmp_path / "logs", name=NAME,
                    manifest=_bs(tmp_path, "[workload]\nsteps_per_epoch = 7\n"))
    (run,) = plan.runs
    assert run.axis == "epoch x 7" and run.steps == (7, 28)
    assert "Keras history (acc/val_acc, loss/val_loss, mean_absolute_error/val_mean_absolute_" \
        "error: a metric and its val_ twin)" in run.axis_evidence
    assert "7 steps per epoch from the manifest" in run.axis_evidence


_KERAS_METRICS = st.lists(st.sampled_from(["acc", "accuracy", "mae", "mse", "auc", "top_k",
                                           "categorical_accuracy", "precision", "recall"]),
                          unique=True, max_size=3).map(tuple)


@settings(max_examples=25, deadline=None)
@given(metrics=_KERAS_METRICS, epochs=st.integers(2, 40), initial=st.integers(0, 5),
       lr=st.booleans(), per_epoch=st.integers(1, 500))
def test_any_keras_history_on_the_epoch_axis_becomes_steps(
        tmp_path_factory: pytest.TempPathFactory, metrics: tuple[str, ...], epochs: int,
        initial: int, lr: bool, per_epoch: int) -> None:
    """Property: whatever metrics a TF1-era Keras run logged, for how many epochs, resumed
    at any initial_epoch, it is never stored on the step axis as logged: refused without
    steps per epoch, and at (e + 1) x N with it."""
    root = tmp_path_factory.mktemp("tf1")
    _tf1_keras_run(root / "logs" / "run", epochs, metrics=metrics, lr=lr,
                   initial_epoch=initial)
    with pytest.raises(IngestError, match=r"counts epochs.*Keras history.*steps_per_epoch"):
        build(root / "logs", name=NAME, manifest=_bs(root))
    data = build(root / "logs", name=NAME,
                 manifest=_bs(root, f"[workload]\nsteps_per_epoch = {per_epoch}\n"))
    (table,) = data.measurements.values()
    assert table.column("step").to_pylist() == [
        (e + 1) * per_epoch for e in range(initial, initial + epochs)]


def test_the_same_history_names_at_training_steps_stay_steps(tmp_path: Path) -> None:
    """What is not a per-epoch Keras history keeps its steps: a loop that logs ``loss``
    every step and ``val_loss`` every 5 (gaps in the validation), steps that skip, and
    names without val_ twins."""
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    def write(run: Path, points: list[tuple[int, str, float]]) -> None:
        writer = EventFileWriter(str(run))
        for step, tag, value in points:
            writer.add_event(event_pb2.Event(step=step, summary=summary_pb2.Summary(
                value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)])))
        writer.close()

    write(tmp_path / "a" / "run", [(s, "loss", 1.0 / (s + 1)) for s in range(20)]
          + [(s, "val_loss", 1.0) for s in range(0, 20, 5)])
    write(tmp_path / "b" / "run", [(s, tag, 1.0) for s in range(0, 1000, 100)
                                   for tag in ("loss", "val_loss")])
    write(tmp_path / "c" / "run", [(s, tag, 1.0) for s in range(10)
                                   for tag in ("loss", "accuracy")])
    for folder, last in (("a", 19), ("b", 900), ("c", 9)):
        data = build(tmp_path / folder, name=NAME, manifest=_bs(tmp_path))
        (table,) = data.measurements.values()
        assert table.column("step").to_pylist()[-1] == last, folder
    # Keras's validation_freq=5 looks like "a": the manifest's steps_per_epoch says epochs
    data = build(tmp_path / "a", name=NAME,
                 manifest=_bs(tmp_path, "[workload]\nsteps_per_epoch = 10\n"))
    (table,) = data.measurements.values()
    assert table.column("step").to_pylist() == [10 * (e + 1) for e in range(20)]


def test_one_epoch_rule_for_every_format_whose_step_is_the_callers(tmp_path: Path) -> None:
    """The same history logged to MLflow with step = epoch is an epoch axis too."""
    experiment = tmp_path / "mlruns" / "1"
    run = experiment / "abc"
    for sub in ("metrics", "params", "tags"):
        (run / sub).mkdir(parents=True)
    (experiment / "meta.yaml").write_text("experiment_id: '1'\nname: keras\n")
    (run / "meta.yaml").write_text("run_id: abc\nlifecycle_stage: active\n")
    for key in ("loss", "val_loss", "accuracy", "val_accuracy"):
        (run / "metrics" / key).write_text(
            "".join(f"{1700000000000 + e} {1.0 / (e + 1)} {e}\n" for e in range(5)))
    (run / "params" / "batch_size").write_text("32")
    with pytest.raises(IngestError, match=r"counts epochs.*Keras history"):
        build(tmp_path / "mlruns", name=NAME)
