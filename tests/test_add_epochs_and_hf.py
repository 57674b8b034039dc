"""curvekit add meets real logs: the epoch axis, MLflow's final values, decorated metric
names, one typing rule for metaparameters, and Hugging Face Trainer logs.

Each test reproduces a way real logs went wrong (an epoch number stored as a step, a final
value stored at step 0, ``train_loss_epoch`` left unmapped, ``512.0`` for a batch size) on a
generated look-alike, and shows that it is now imported right or refused with a fix.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from curvekit.errors import IngestError, IngestWarning
from curvekit.ingest.add import add, build, detect_format
from curvekit.ingest.hf import read_hf_runs
from curvekit.ingest.metrics import apply_map, target
from curvekit.ingest.runs import RunLog, settle_axis
from curvekit.ingest.yamlish import read_flat_yaml
from curvekit.store.update import WorkloadData
from tests.conftest import snapshot

NAME = "my_data/cnn/adam"


def _steps(data: WorkloadData) -> dict[int, list[int]]:
    return {t.trial_id: data.measurements[(t.key, t.trial_id)].column("step").to_pylist()
            for t in data.trials}


def _columns(data: WorkloadData) -> list[str]:
    return sorted({c for t in data.measurements.values() for c in t.column_names})


# ---------------------------------------------------------------------- MLflow files
def _mlflow_run(root: Path, run_id: str, metrics: dict[str, list[tuple[int, float, int]]],
                params: dict[str, str] | None = None, tags: dict[str, str] | None = None
                ) -> Path:
    """A run of MLflow's file store: metrics as (timestamp ms, value, step) lines."""
    run = root / "mlruns" / "1" / run_id
    (run / "metrics").mkdir(parents=True)
    (run / "params").mkdir()
    (run / "tags").mkdir()
    (root / "mlruns" / "1" / "meta.yaml").write_text("experiment_id: '1'\nname: sweep\n")
    (run / "meta.yaml").write_text(f"run_id: {run_id}\nlifecycle_stage: active\n"
                                   "start_time: 1700000000000\n")
    for key, points in metrics.items():
        (run / "metrics" / key).write_text("".join(f"{t} {v} {s}\n" for t, v, s in points))
    for key, value in {"batch_size": "64", **(params or {})}.items():
        (run / "params" / key).write_text(value)
    for key, value in (tags or {}).items():
        (run / "tags" / key).write_text(value)
    return root / "mlruns"


def _per_epoch(epochs: int, start: float = 2.0) -> list[tuple[int, float, int]]:
    return [(1700000000000 + 1000 * e, start - 0.1 * e, e) for e in range(epochs)]


def test_mlflow_epoch_series_equal_to_the_step_is_an_epoch_axis(tmp_path: Path) -> None:
    """Lightning's MLflow logger with step=epoch: a logged ``epoch`` equal to the step."""
    epochs = [(t, float(s), s) for t, _, s in _per_epoch(4)]
    source = _mlflow_run(tmp_path, "r1", {"epoch": epochs, "val_loss": _per_epoch(4)})
    with pytest.raises(IngestError, match=r"counts epochs, not training steps: its 'epoch' "
                       r"metric equals the step at every point; give steps_per_epoch = N"):
        build(source, name=NAME)
    manifest = tmp_path / "runs.toml"
    manifest.write_text("[workload]\nsteps_per_epoch = 100\n")
    data = build(source, name=NAME, manifest=manifest)
    assert _steps(data) == {1: [100, 200, 300, 400]}
    assert _columns(data) == ["step", "val/loss"]  # epoch is no metric


def test_mlflow_autolog_epochs_parameter_and_its_own_steps_per_epoch(tmp_path: Path) -> None:
    """Keras/PyTorch autologging: one point per epoch at step = epoch, ``epochs`` = 5."""
    source = _mlflow_run(tmp_path, "r1", {"loss": _per_epoch(5)}, {"epochs": "5"})
    with pytest.raises(IngestError, match=r"its steps run 0\.\.4 and its epochs parameter is "
                       r"5.*steps_per_epoch = N"):
        build(source, name=NAME)
    # the log's own steps_per_epoch parameter (Keras's autologging records it) is used
    (source / "1" / "r1" / "params" / "steps_per_epoch").write_text("30")
    assert _steps(build(source, name=NAME)) == {1: [30, 60, 90, 120, 150]}
    # an autologging tag is evidence too, for a run stopped before its epochs
    early = _mlflow_run(tmp_path / "b", "r2", {"loss": _per_epoch(3)}, {"epochs": "10"},
                        {"mlflow.autologging": "tensorflow"})
    with pytest.raises(IngestError, match=r"MLflow autologging \(tensorflow\) logs once per "
                       "epoch"):
        build(early, name=NAME)


def test_mlflow_manifest_steps_per_epoch_is_applied_not_ignored(tmp_path: Path) -> None:
    """The manifest's steps_per_epoch changed nothing for MLflow (same content hash)."""
    source = _mlflow_run(tmp_path, "r1", {"val_loss": [(1, 2.0, 0), (2, 1.5, 3), (3, 1.0, 7)]})
    plain = build(source, name=NAME)
    manifest = tmp_path / "runs.toml"
    manifest.write_text("[workload]\ntrain_examples = 6400\n")  # 100 steps of 64
    declared = build(source, name=NAME, manifest=manifest)
    assert _steps(plain) == {1: [0, 3, 7]}
    assert _steps(declared) == {1: [100, 400, 800]}
    home_a, home_b = tmp_path / "ha", tmp_path / "hb"
    add(source, name=NAME, home=home_a)
    add(source, name=NAME, manifest=manifest, home=home_b)
    assert snapshot(home_a) != snapshot(home_b)


def test_steps_per_epoch_for_logs_that_count_steps_is_refused(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "run.csv").write_text("step,val_loss\n0,2.0\n100,1.0\n")
    manifest = tmp_path / "runs.toml"
    manifest.write_text("[workload]\nsteps_per_epoch = 50\n[[runs]]\nrun = \"run.csv\"\n"
                        "batch_size = 32\n")
    with pytest.raises(IngestError, match=r"steps_per_epoch = 50 is given, but no run counts "
                       r"epochs.*remove steps_per_epoch"):
        build(logs, name=NAME, manifest=manifest)
    manifest.write_text("[[runs]]\nrun = \"run.csv\"\nbatch_size = 32\nsteps_per_epoch = 50\n")
    with pytest.raises(IngestError, match=r"steps_per_epoch = 50 is given for run 'run\.csv', "
                       r"but its log counts training steps"):
        build(logs, name=NAME, manifest=manifest)


def test_mlflow_final_values_only_are_refused(tmp_path: Path) -> None:
    finals = {k: [(1700000009000, 0.5, 0)] for k in ("test_loss", "val_accuracy")}
    source = _mlflow_run(tmp_path, "r1", finals)
    home = tmp_path / "home"
    before = snapshot(home) if home.exists() else {}
    with pytest.raises(IngestError, match=r"holds final values only: each of its metrics "
                       r"\(test_loss, val_accuracy\) is one value at step 0.*step=<training"):
        add(source, name=NAME, home=home)
    assert (snapshot(home) if home.exists() else {}) == before


def test_mlflow_final_value_beside_a_curve_and_the_fix(tmp_path: Path) -> None:
    metrics = {"val_loss": [(1700000000000, 2.0, 0), (1700000001000, 1.0, 100)],
               "test_loss": [(1700000002000, 0.9, 0)],  # logged after the curve: final
               "val_acc0": [(1699999999000, 0.1, 0)]}  # before it: an evaluation at step 0
    source = _mlflow_run(tmp_path, "r1", metrics)
    with pytest.raises(IngestError, match=r"metric 'test_loss' is one value at step 0, logged "
                       r"after the run's curves.*--map 'test_loss='"):
        build(source, name=NAME)
    data = build(source, name=NAME, metric_map=["test_loss="])
    assert _columns(data) == ["step", "val/acc0", "val/loss"]


# ---------------------------------------------------------------------- TensorBoard
def _tensorboard(run: Path, scalars: dict[str, list[tuple[int, float]]],
                 hparams: dict[str, object] | None = None) -> None:
    summary = pytest.importorskip("tensorboard.summary")
    from tensorboard.compat.proto import event_pb2
    from tensorboard.plugins.hparams import summary_v2 as hp
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    if hparams:
        events = EventFileWriter(str(run))
        events.add_event(event_pb2.Event(step=0, summary=hp.hparams_pb(hparams)))
        events.close()
    writer = summary.Writer(str(run))
    for tag, points in scalars.items():
        for step, value in points:
            writer.add_scalar(tag, value, step=step)
    writer.close()


def test_keras_tensorboard_epoch_tags_are_epochs(tmp_path: Path) -> None:
    run = tmp_path / "logs" / "train"
    _tensorboard(run, {"epoch_loss": [(e, 2.0 - e / 10) for e in range(3)],
                       "epoch_accuracy": [(e, 0.5 + e / 10) for e in range(3)]})
    manifest = tmp_path / "runs.toml"
    manifest.write_text("[[runs]]\nrun = \"*\"\nbatch_size = 32\n")
    with pytest.raises(IngestError, match=r"its metrics are Keras's per-epoch TensorBoard tags "
                       r"\(epoch_\*\); give steps_per_epoch = N"):
        build(tmp_path / "logs", name=NAME, manifest=manifest)
    manifest.write_text("[workload]\nsteps_per_epoch = 10\n[[runs]]\nrun = \"*\"\n"
                        "batch_size = 32\n")
    data = build(tmp_path / "logs", name=NAME, manifest=manifest)
    assert _steps(data) == {1: [10, 20, 30]}
    assert _columns(data) == ["step", "train/classification_error", "train/loss"]


def test_keras_mixed_epoch_and_batch_tags_are_refused_with_a_fix(tmp_path: Path) -> None:
    run = tmp_path / "logs" / "train"
    _tensorboard(run, {"epoch_loss": [(0, 2.0), (1, 1.0)],
                       "batch_loss": [(0, 2.5), (50, 1.5), (99, 1.1)]})
    manifest = tmp_path / "runs.toml"
    manifest.write_text("[workload]\nsteps_per_epoch = 100\n[[runs]]\nrun = \"*\"\n"
                        "batch_size = 32\n")
    with pytest.raises(IngestError, match=r"mixes Keras's per-epoch tags.*--map 'batch_loss='"):
        build(tmp_path / "logs", name=NAME, manifest=manifest)
    data = build(tmp_path / "logs", name=NAME, manifest=manifest, metric_map=["batch_loss="])
    assert _steps(data) == {1: [100, 200]}


def test_lightning_epoch_scalar_says_steps_and_is_no_metric(tmp_path: Path) -> None:
    """TensorBoardLogger logs ``epoch`` at the global step: the steps are steps; hparams as
    the plugin stores them (doubles, str()) are typed by the one rule."""
    run = tmp_path / "logs" / "version_0"
    _tensorboard(run, {"epoch": [(0, 0.0), (49, 0.0), (99, 1.0)],
                       "train_loss_step": [(0, 2.0), (49, 1.5), (99, 1.0)],
                       "train_loss_epoch": [(49, 1.7), (99, 1.2)]},
                 {"batch_size": 512, "lr": 0.1, "optimizer": "<class 'torch.optim.adam.Adam'>"})
    data = build(tmp_path / "logs", name=NAME)
    assert _steps(data) == {1: [0, 49, 99]}
    assert _columns(data) == ["step", "train/loss",
                              "train/loss_step"]
    trial = data.trials[0]
    assert trial.key.batch_size == 512
    assert trial.parameters == {"learning_rate": 0.1, "optimizer": "torch.optim.adam.Adam"}


def test_one_typing_rule_for_metaparameters(tmp_path: Path) -> None:
    """hparams.yaml with Python tags, MLflow's text params and TensorBoard's doubles agree."""
    yaml_text = ("batch_size: 32\nlayers: 4\nlr: 0.5\n"
                 "criterion: !!python/object:torch.nn.modules.loss.MSELoss\n"
                 "  training: true\n  _buffers: !!python/object/apply:collections.OrderedDict\n"
                 "  - []\noptimizer: !!python/name:torch.optim.adam.Adam ''\n"
                 "shape: !!python/tuple\n- 1\n- 2\n")
    (tmp_path / "hparams.yaml").write_text(yaml_text)
    from_yaml = read_flat_yaml(tmp_path / "hparams.yaml")
    assert from_yaml == {"batch_size": 32, "layers": 4, "lr": 0.5, "shape": [1, 2],
                         "criterion": "torch.nn.modules.loss.MSELoss",
                         "optimizer": "torch.optim.adam.Adam"}
    source = _mlflow_run(tmp_path / "m", "r1", {"val_loss": [(1, 2.0, 0), (2, 1.0, 9)]},
                         {"layers": "4", "lr": "0.5",
                          "optimizer": "<class 'torch.optim.adam.Adam'>"})
    params = build(source, name=NAME).trials[0].parameters
    assert params == {"layers": 4, "learning_rate": 0.5, "optimizer": "torch.optim.adam.Adam"}
    run = tmp_path / "tb" / "version_0"
    _tensorboard(run, {"val_loss": [(0, 2.0), (9, 1.0)]},
                 {"batch_size": 32, "layers": 4, "lr": 0.5, "optimizer": "str() text"})
    (run / "hparams.yaml").write_text(yaml_text)  # Lightning's copy, typed, wins
    params = build(tmp_path / "tb", name=NAME).trials[0].parameters
    assert params == {"criterion": "torch.nn.modules.loss.MSELoss", "layers": 4,
                      "learning_rate": 0.5, "optimizer": "torch.optim.adam.Adam",
                      "shape": [1, 2]}
    assert isinstance(params["layers"], int)


# ---------------------------------------------------------------------- names
@pytest.mark.parametrize(("logged", "column"), [
    ("train_loss_epoch", ("train/loss", False)),
    ("train_loss_step", ("train/loss_step", False)),
    ("acc_epoch", ("train/classification_error", True)),
    ("valid_acc_step", ("val/classification_error_step", True)),
    ("epoch_loss", ("train/loss", False)),
    ("epoch_val_accuracy", ("val/classification_error", True)),
    ("batch_loss", ("train/loss_step", False)),
    ("val_mean_absolute_error", ("val/mean_absolute_error", False)),
    ("eval_runtime_x", ("val/runtime_x", False)),
    ("grad_norm_epoch", ("grad_norm_epoch", False)),
    ("epoch_lr", ("epoch_lr", False)),
    ("lr-Adam", ("lr-Adam", False)),
])
def test_decorated_names_map_like_their_siblings(logged: str, column: tuple[str, bool]
                                                 ) -> None:
    assert target(logged) == column
    assert target(column[0]) == (column[0], False)  # a mapped name maps to itself


def test_training_sibling_and_identical_duplicates() -> None:
    frame = pl.DataFrame({"step": [0, 1], "mean_absolute_error": [0.3, 0.2],
                          "val_mean_absolute_error": [0.4, 0.3], "acc": [0.5, None],
                          "acc_epoch": [0.5, 0.6]})
    mapped = apply_map(frame, "step", "x")
    assert mapped.frame.columns == ["step", "train/mean_absolute_error",
                                    "val/mean_absolute_error", "train/classification_error"]
    assert mapped.frame.get_column("train/classification_error").to_list() == [0.5, 0.4]
    clash = frame.with_columns(pl.Series("acc", [0.1, 0.2]))
    with pytest.raises(IngestError, match=r"metrics 'acc' and 'acc_epoch' would both become"):
        apply_map(clash, "step", "x")


@settings(max_examples=40, deadline=None)
@given(steps=st.lists(st.integers(0, 10**6), min_size=2, max_size=20, unique=True),
       shift=st.integers(0, 3))
def test_epochs_never_land_on_the_step_axis_silently(steps: list[int], shift: int) -> None:
    """An epoch series equal to the step makes an epoch axis; any other says steps."""
    steps = sorted(steps)
    frame = pl.DataFrame({"step": steps, "epoch": [float(s + shift) for s in steps],
                          "loss": [1.0] * len(steps)})
    run = settle_axis(RunLog("r", "r", frame, axis_named=False))
    assert run.by_epoch == (shift == 0)
    assert "epoch" not in run.frame.columns[1:]
    assert run.frame.columns[0] == ("epoch" if shift == 0 else "step")


# ---------------------------------------------------------------------- Hugging Face
def _entry(step: int, epoch: float, **values: float) -> dict[str, float]:
    return {"epoch": epoch, "step": step, **values}


def _history(steps: int, every: int = 10, evals: int = 20) -> list[dict[str, float]]:
    """log_history as the Trainer writes it: training entries every ``every`` steps
    (loss, grad_norm, learning_rate), evaluations every ``evals`` (eval_* with runtime and
    throughput), and the end-of-training summary."""
    out: list[dict[str, float]] = []
    for step in range(every, steps + 1, every):
        out.append(_entry(step, step / 40, loss=2.0 - step / 100, grad_norm=1.5,
                          learning_rate=5e-5 * (1 - step / steps)))
        if step % evals == 0:
            out.append(_entry(step, step / 40, eval_loss=2.1 - step / 100,
                              eval_accuracy=0.3 + step / 1000, eval_runtime=0.8,
                              eval_samples_per_second=120.0, eval_steps_per_second=15.0))
    out.append(_entry(steps, steps / 40, total_flos=1e12, train_loss=1.7, train_runtime=30.0,
                      train_samples_per_second=200.0, train_steps_per_second=3.0))
    return out


def _trainer_output(folder: Path, batch: int, steps: int, max_steps: int,
                    checkpoints: tuple[int, ...] = (), save_state: bool = True) -> None:
    """A Trainer output folder: checkpoint-N copies (prefixes of the history) and, after
    ``trainer.save_state()``, the folder's own trainer_state.json."""
    folder.mkdir(parents=True)
    for step in checkpoints:
        state = {"global_step": step, "max_steps": max_steps, "train_batch_size": batch,
                 "num_train_epochs": 3, "log_history": [
                     e for e in _history(steps) if e["step"] <= step and "train_loss" not in e]}
        (folder / f"checkpoint-{step}").mkdir()
        (folder / f"checkpoint-{step}" / "trainer_state.json").write_text(json.dumps(state))
        (folder / f"checkpoint-{step}" / "training_args.bin").write_bytes(b"\x80\x04pickle")
    if save_state:
        state = {"global_step": steps, "max_steps": max_steps, "train_batch_size": batch,
                 "num_train_epochs": 3, "trial_name": None, "trial_params": None,
                 "log_history": _history(steps)}
        (folder / "trainer_state.json").write_text(json.dumps(state, indent=2))


def test_hf_trainer_checkpoints_make_one_trial_each_run(tmp_path: Path) -> None:
    """Checkpoint copies are one run's history, not trials; the most complete is read.

    The shape follows trainer_state.json files written by transformers' Trainer as
    committed to public repositories (e.g. checkpoint folders of fine-tuning runs on
    GitHub) and by transformers 5.23 here: log_history entries with step, epoch, loss,
    grad_norm, learning_rate; eval_* with eval_runtime and throughput; a final summary
    entry with train_loss and train_runtime.
    """
    logs = tmp_path / "out"
    _trainer_output(logs / "bs16", 16, 120, 120, checkpoints=(40, 80, 120))
    _trainer_output(logs / "bs32", 32, 60, 120, checkpoints=(20, 40, 60), save_state=False)
    (logs / "bs16" / "runs" / "x").mkdir(parents=True)  # the TensorBoard callback's copy
    (logs / "bs16" / "runs" / "x" / "events.out.tfevents.1.host").write_bytes(b"")
    with pytest.warns(IngestWarning, match="read as hf; not read: TensorBoard event files"):
        assert detect_format(logs) == "hf"
    with pytest.warns(IngestWarning, match="read as hf; not read: TensorBoard event files"):
        data = build(logs, name=NAME)
    assert [(t.key.batch_size, t.trial_id, t.status) for t in data.trials] == [
        (16, 1, "COMPLETE"), (32, 1, "INCOMPLETE")]  # status from max_steps
    bs16 = data.trials[0]
    assert data.measurements[(bs16.key, 1)].column("step").to_pylist() == list(range(10, 121,
                                                                                  10))
    assert _columns(data) == ["grad_norm", "learning_rate", "step", "train/loss",
                              "val/classification_error", "val/loss"]
    bs32 = next(t for t in data.trials if t.key.batch_size == 32)
    table = data.measurements[(bs32.key, bs32.trial_id)]
    assert table.column("step").to_pylist() == list(range(10, 61, 10))  # checkpoint-60
    assert table.column("val/classification_error").to_pylist()[1] == pytest.approx(1 - 0.32)
    assert bs32.parameters == {"max_steps": 120, "num_train_epochs": 3}


def test_hf_trainer_bad_state_is_refused_and_the_store_unchanged(tmp_path: Path) -> None:
    logs = tmp_path / "out"
    _trainer_output(logs / "bs16", 16, 40, 40)
    home = tmp_path / "home"
    add(logs, name=NAME, home=home)
    before = snapshot(home)
    (logs / "bs16" / "trainer_state.json").write_text('{"log_history": [{"step": 1.5}]}')
    with pytest.raises(IngestError, match=r"entry 1 has step 1\.5, not a non-negative integer"):
        add(logs, name="my_data/cnn/other", home=home)
    (logs / "bs16" / "trainer_state.json").write_text('{"log_history": ')
    with pytest.raises(IngestError, match=r"trainer_state\.json, line 1: malformed JSON"):
        add(logs, name="my_data/cnn/other", home=home)
    assert snapshot(home) == before


@pytest.mark.slow
def test_hf_trainer_log_written_by_transformers(tmp_path: Path) -> None:
    """A tiny BERT built from a config (nothing downloaded), trained six steps by the real
    Trainer with evaluation and checkpoints; its log imports point for point."""
    pytest.importorskip("accelerate")
    transformers = pytest.importorskip("transformers")
    import numpy as np
    import torch

    config = transformers.BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1,
                                     num_attention_heads=2, intermediate_size=16,
                                     max_position_embeddings=16, num_labels=2)
    torch.manual_seed(0)
    model = transformers.BertForSequenceClassification(config)

    class Data(torch.utils.data.Dataset):  # type: ignore[type-arg]
        def __init__(self, n: int) -> None:
            self.x = torch.randint(0, 50, (n, 8), generator=torch.Generator().manual_seed(n))

        def __len__(self) -> int:
            return len(self.x)

        def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
            return {"input_ids": self.x[i], "labels": (self.x[i, 0] > 25).long()}

    def accuracy(p: object) -> dict[str, float]:
        return {"accuracy": float((np.argmax(p.predictions, -1)  # type: ignore[attr-defined]
                                   == p.label_ids).mean())}  # type: ignore[attr-defined]

    out = tmp_path / "logs" / "bs8"
    args = transformers.TrainingArguments(
        output_dir=str(out), max_steps=6, per_device_train_batch_size=8, logging_steps=2,
        eval_strategy="steps", eval_steps=3, save_steps=3, report_to=[], use_cpu=True,
        disable_tqdm=True, learning_rate=1e-3)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=Data(64),
                                   eval_dataset=Data(16), compute_metrics=accuracy)
    trainer.train()
    trainer.save_state()
    assert sorted(p.parent.name for p in out.rglob("trainer_state.json")) == [
        "bs8", "checkpoint-3", "checkpoint-6"]
    assert detect_format(tmp_path / "logs") == "hf"
    data = build(tmp_path / "logs", name=NAME)
    assert [(t.key.batch_size, t.status) for t in data.trials] == [(8, "COMPLETE")]
    history = json.loads((out / "trainer_state.json").read_text())["log_history"]
    table = data.measurements[(data.trials[0].key, 1)]
    rows = {r["step"]: r for r in table.to_pylist()}
    for entry in history:
        if "loss" in entry:
            assert rows[entry["step"]]["train/loss"] == entry["loss"]
        if "eval_loss" in entry:
            assert rows[entry["step"]]["val/loss"] == entry["eval_loss"]
            assert rows[entry["step"]]["val/classification_error"] == 1 - entry["eval_accuracy"]
    assert sorted(rows) == [2, 3, 4, 6]
    assert "eval_runtime" not in table.column_names and "train_loss" not in table.column_names


def test_hf_reader_reads_a_single_file(tmp_path: Path) -> None:
    _trainer_output(tmp_path / "run", 16, 40, 40)
    runs = read_hf_runs(tmp_path / "run" / "trainer_state.json")
    assert [(r.key, r.frame.height) for r in runs] == [("run", 4)]
