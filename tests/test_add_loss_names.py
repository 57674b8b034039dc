"""A loss is stored as the cross-entropy only where the log says so.

The release's ``*/cross_entropy_error`` is the cross-entropy of a classifier or language
model. A logged ``loss`` may be anything (a regression's MSE, fastMRI's L1/SSIM loss): it is
the cross-entropy only when its own name says so (``xent``, ``nll``, ``crossentropy``) or a
parameter of the run names a cross-entropy loss (``loss: categorical_crossentropy``,
``criterion: torch.nn.CrossEntropyLoss``); otherwise it is ``<split>/loss``. One rule in
:func:`curvekit.ingest.metrics.apply_map`, which every format's runs go through: tested here
on generated names and parameters, and on logs of several formats written as their loggers
write them.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from curvekit.cli import main
from curvekit.errors import IngestWarning
from curvekit.ingest.add import add, add_plan, build
from curvekit.ingest.metrics import (
    CROSS_ENTROPY,
    LOSS,
    apply_map,
    loss_evidence,
    says_cross_entropy,
    target,
)
from curvekit.store.update import WorkloadData

NAME = "my_data/net/sgd"

# ---------------------------------------------------------------------- generated names
# How libraries name a cross-entropy loss, and losses that are not one.
CE_LOSSES = ["categorical_crossentropy", "sparse_categorical_crossentropy",
             "binary_crossentropy", "CategoricalCrossentropy", "SparseCategoricalCrossentropy",
             "BinaryCrossentropy", "CrossEntropyLoss", "NLLLoss", "BCELoss",
             "BCEWithLogitsLoss", "cross_entropy", "nll_loss", "log_loss", "xent", "ce",
             "softmax_cross_entropy_with_logits", "LabelSmoothingCrossEntropy",
             "SoftTargetCrossEntropy", "binary_cross_entropy_with_logits"]
OTHER_LOSSES = ["mse", "mean_squared_error", "MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss",
                "huber", "mae", "mean_absolute_error", "ssim", "KLDivLoss", "hinge",
                "CosineEmbeddingLoss", "poisson", "ctc", "MarginRankingLoss", "dice",
                "TripletMarginLoss", "l2", "quantile"]
LOSS_KEYS = ["loss", "loss_fn", "loss_function", "lossFunction", "criterion", "objective",
             "criterion._target_", "model.loss", "train.loss_fn", "loss_type"]


def _spelled(name: str, form: int) -> str:
    """One loss name as configs write it: bare, a module path, Hydra's target, a Python
    repr of a function or an object, a constructor call."""
    return [name, f"torch.nn.modules.loss.{name}", f"tf.keras.losses.{name}",
            f"<function {name} at 0x7f3a2c1d0e50>", f"<keras.losses.{name} object at 0x7f>",
            f"{name}()", f"{name}(label_smoothing=0.1, reduction='mean')"][form]


@settings(max_examples=200, deadline=None)
@given(key=st.sampled_from(LOSS_KEYS), ce=st.sampled_from(CE_LOSSES),
       other=st.sampled_from(OTHER_LOSSES), form=st.integers(0, 6),
       noise=st.dictionaries(st.sampled_from(["lr", "momentum", "epochs", "optimizer",
                                              "monitor", "loss_weight"]),
                             st.sampled_from([0.1, 3, "adam", "val_loss", True]), max_size=4))
def test_a_loss_parameter_says_cross_entropy_only_when_it_names_one(
        key: str, ce: str, other: str, form: int, noise: dict[str, object]) -> None:
    """Property: a loss/criterion parameter naming a cross-entropy loss, in any spelling, is
    evidence; one naming another loss, or other parameters, are not."""
    assert says_cross_entropy(_spelled(ce, form))
    assert not says_cross_entropy(_spelled(other, form))
    assert loss_evidence({**noise, key: _spelled(ce, form)}) is not None
    assert loss_evidence({**noise, key: _spelled(other, form)}) is None
    assert loss_evidence(noise) is None
    # several losses (a multi-output model's list) are not one cross-entropy
    assert loss_evidence({key: json.dumps([ce, other])}) is None
    # a name that says cross-entropy is no evidence under a key that is no loss
    assert loss_evidence({"optimizer": _spelled(ce, form)}) is None


def test_a_switch_named_for_a_cross_entropy_loss_says_so_when_set() -> None:
    """timm's ``--bce-loss`` is ``bce_loss: true`` in its args.yaml."""
    assert loss_evidence({"bce_loss": True}) is not None
    assert loss_evidence({"bce_loss": False}) is None
    assert loss_evidence({"jsd_loss": True}) is None


_SPLIT = st.sampled_from(["", "train", "training", "val", "valid", "validation", "eval",
                          "test"])
_SEP = st.sampled_from(["_", "/", "-", ".", " "])


@settings(max_examples=200, deadline=None)
@given(split=_SPLIT, sep=_SEP, prefix=st.booleans(), upper=st.booleans(),
       decoration=st.sampled_from(["", "_epoch", "epoch_", "_step", "batch_"]),
       said=st.booleans())
def test_a_loss_name_is_the_cross_entropy_only_when_the_run_says_so(
        split: str, sep: str, prefix: bool, upper: bool, decoration: str, said: bool) -> None:
    """Property: ``loss`` under any split word, separator, case and decoration becomes
    ``<split>/loss`` (``_step`` for per-batch values), or ``<split>/cross_entropy_error``
    when the run says its loss is one; never the cross-entropy otherwise."""
    words = ["loss"] if not split else (["loss", split] if not prefix else [split, "loss"])
    name = sep.join(words)
    name = name.upper() if upper else name
    if decoration.startswith(("epoch", "batch")):
        name = decoration + name
    elif decoration:
        name = name + decoration
    new, complement = target(name, cross_entropy=said)
    assert not complement
    stored_split, metric = new.split("/")
    assert stored_split in ("train", "val", "test")
    kind = CROSS_ENTROPY if said else LOSS
    assert metric == (kind + "_step" if decoration in ("_step", "batch_") else kind)
    assert target(new, cross_entropy=said) == (new, False)  # a stored name maps to itself


@pytest.mark.parametrize("name", ["val_xent", "nll", "train/cross_entropy", "val_crossentropy",
                                  "val_log_loss", "categorical_crossentropy",
                                  "val_sparse_categorical_crossentropy", "bce_loss"])
def test_a_name_that_says_cross_entropy_needs_no_parameter(name: str) -> None:
    new, _ = target(name)
    assert new.endswith("/" + CROSS_ENTROPY)
    frame = pl.DataFrame({"step": [1], name: [0.5]})
    assert apply_map(frame, "step", "r.csv").why[new] == "the cross-entropy: its name says so"


def test_a_map_wins_and_needs_no_explanation() -> None:
    frame = pl.DataFrame({"step": [1], "val_loss": [0.5]})
    mapped = apply_map(frame, "step", "r.csv", {"val_loss": "val/cross_entropy_error"})
    assert mapped.frame.columns == ["step", "val/cross_entropy_error"] and not mapped.why


# ---------------------------------------------------------------------- logs of each format
def _curve(batch_size: int) -> list[tuple[int, float]]:
    """A loss falling faster for larger batches (so steps to result and fits find something)."""
    return [(s, 1.0 / (1.0 + s * batch_size / 3200.0)) for s in range(0, 1001, 100)]


def _lightning(logs: Path, batch_size: int, criterion: str | None) -> None:
    """Lightning's CSVLogger, with the model's criterion saved by save_hyperparameters()
    in hparams.yaml as PyYAML writes a module (a python/object tag)."""
    folder = logs / f"version_{batch_size}"
    folder.mkdir(parents=True)
    rows = ["epoch,step,train_loss,val_loss"]
    for step, value in _curve(batch_size):
        rows += [f"0,{step},{value * 0.9},", f"0,{step},,{value}"]
    (folder / "metrics.csv").write_text("\n".join(rows) + "\n")
    hparams = f"batch_size: {batch_size}\nlr: 0.1\n"
    if criterion is not None:
        hparams += f"criterion: !!python/object:torch.nn.modules.loss.{criterion}\n" \
                   "  training: true\n"
    (folder / "hparams.yaml").write_text(hparams)


def _mlflow(root: Path, batch_size: int, params: dict[str, str]) -> None:
    """MLflow's file store: one run, metrics as 'timestamp value step' lines."""
    experiment = root / "mlruns" / "1"
    run = experiment / f"run{batch_size}"
    for sub in ("metrics", "params", "tags"):
        (run / sub).mkdir(parents=True)
    (experiment / "meta.yaml").write_text("experiment_id: '1'\nname: sweep\n")
    (run / "meta.yaml").write_text(f"run_id: run{batch_size}\nlifecycle_stage: active\n"
                                   f"start_time: {1700000000000 + batch_size}\n")
    (run / "metrics" / "val_loss").write_text(
        "".join(f"1700000000000 {v} {s}\n" for s, v in _curve(batch_size)))
    for key, value in {"batch_size": str(batch_size), **params}.items():
        (run / "params" / key).write_text(value)


def _tensorboard(run: Path, batch_size: int, loss_fn: str | None) -> None:
    """``SummaryWriter.add_scalar`` points and ``hp.hparams`` as the plugin writes them."""
    summary = pytest.importorskip("tensorboard.summary")
    from tensorboard.compat.proto import event_pb2
    from tensorboard.plugins.hparams import summary_v2 as hp
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    hparams: dict[str, object] = {"batch_size": batch_size}
    if loss_fn is not None:
        hparams["loss_fn"] = loss_fn
    events = EventFileWriter(str(run))
    events.add_event(event_pb2.Event(step=0, summary=hp.hparams_pb(hparams)))
    events.close()
    writer = summary.Writer(str(run))
    for step, value in _curve(batch_size):
        writer.add_scalar("Loss/val", value, step=step)
    writer.close()


def _metrics(data: WorkloadData) -> set[str]:
    return {c for t in data.measurements.values() for c in t.column_names} - {"step"}


@pytest.mark.parametrize(("criterion", "expected"), [
    ("CrossEntropyLoss", {"train/cross_entropy_error", "val/cross_entropy_error"}),
    ("NLLLoss", {"train/cross_entropy_error", "val/cross_entropy_error"}),
    ("BCEWithLogitsLoss", {"train/cross_entropy_error", "val/cross_entropy_error"}),
    ("MSELoss", {"train/loss", "val/loss"}),
    (None, {"train/loss", "val/loss"}),
])
def test_lightning_hparams_criterion_decides(tmp_path: Path, criterion: str | None,
                                             expected: set[str]) -> None:
    _lightning(tmp_path / "lightning_logs", 32, criterion)
    data = build(tmp_path / "lightning_logs", name=NAME)
    assert _metrics(data) == expected
    table = next(iter(data.measurements.values()))
    column = next(c for c in expected if c.startswith("val/"))
    assert table.column(column).to_pylist() == [v for _, v in _curve(32)]


@pytest.mark.parametrize(("params", "expected"), [
    ({"loss": "categorical_crossentropy"}, "val/cross_entropy_error"),
    ({"loss": "<function sparse_categorical_crossentropy at 0x7f>"}, "val/cross_entropy_error"),
    ({"loss": "mean_squared_error"}, "val/loss"),
    ({"optimizer": "Adam"}, "val/loss"),
])
def test_mlflow_params_decide(tmp_path: Path, params: dict[str, str], expected: str) -> None:
    _mlflow(tmp_path, 64, params)
    assert _metrics(build(tmp_path / "mlruns", name=NAME)) == {expected}


@pytest.mark.parametrize(("loss_fn", "expected"), [
    ("nll", "val/cross_entropy_error"), ("CrossEntropyLoss", "val/cross_entropy_error"),
    ("smooth_l1", "val/loss"), (None, "val/loss")])
def test_tensorboard_hparams_decide(tmp_path: Path, loss_fn: str | None, expected: str) -> None:
    _tensorboard(tmp_path / "runs" / "bs16", 16, loss_fn)
    assert _metrics(build(tmp_path / "runs", name=NAME)) == {expected}


def test_the_manifests_parameters_say_it_too(tmp_path: Path) -> None:
    """A Keras CSVLogger log holds no configuration: the manifest's parameters may name the
    loss (as the log's would), and ``--map`` stores one run's loss as the cross-entropy."""
    logs = tmp_path / "logs"
    logs.mkdir()
    for batch_size in (32, 64):
        rows = [f"{e},{1.0 / (e + 1)},{1.2 / (e + 1)}" for e in range(4)]
        (logs / f"bs{batch_size}.csv").write_text("epoch,loss,val_loss\n" + "\n".join(rows))
    manifest = tmp_path / "runs.toml"
    manifest.write_text('[workload]\nsteps_per_epoch = 10\n'
                        '[[runs]]\nrun = "bs32.csv"\nbatch_size = 32\n'
                        'parameters = { loss = "sparse_categorical_crossentropy" }\n'
                        '[[runs]]\nrun = "bs64.csv"\nbatch_size = 64\n')
    with pytest.warns(IngestWarning, match=r"metrics 'loss', 'val_loss' are stored as "):
        data = build(logs, name=NAME, manifest=manifest)
    by_batch = {k.batch_size: set(t.column_names) - {"step"}
                for (k, _), t in data.measurements.items()}
    assert by_batch == {32: {"train/cross_entropy_error", "val/cross_entropy_error"},
                        64: {"train/loss", "val/loss"}}
    data = build(logs, name=NAME, manifest=manifest, metric_map=[
        "loss=train/cross_entropy_error", "val_loss=val/cross_entropy_error"])
    assert _metrics(data) == {"train/cross_entropy_error", "val/cross_entropy_error"}


def test_an_algoperf_fastmri_loss_is_no_cross_entropy(tmp_path: Path) -> None:
    """AlgoPerf's fastMRI logs ``validation/loss`` (an L1 loss) beside ``validation/ssim``:
    stored as ``val/loss``."""
    trial = tmp_path / "fastmri_jax" / "trial_1"
    trial.mkdir(parents=True)
    (trial / "eval_measurements.csv").write_text(
        "global_step,train/loss,train/ssim,validation/loss,validation/ssim,score\n"
        "1,0.9,0.2,0.95,0.21,0\n500,0.3,0.7,0.32,0.71,10\n")
    (tmp_path / "runs.toml").write_text('[[runs]]\nrun = "*"\nbatch_size = 32\n')
    data = build(tmp_path / "fastmri_jax", name=NAME, manifest=tmp_path / "runs.toml")
    assert {"train/loss", "val/loss", "train/ssim", "val/ssim"} <= _metrics(data)
    assert not any(CROSS_ENTROPY in m for m in _metrics(data))


def test_the_plan_says_why_each_loss_got_its_name_and_the_map(tmp_path: Path) -> None:
    _lightning(tmp_path / "a", 32, None)
    plan = add_plan(tmp_path / "a", name=NAME)
    why = {m.logged: (m.stored, m.why) for m in plan.runs[0].metrics}
    stored, text = why["val_loss"]
    assert stored == "val/loss"
    assert "not known to be the cross-entropy" in text
    assert "--map 'val_loss=val/cross_entropy_error'" in text
    assert "--map 'train_loss=train/cross_entropy_error'" in why["train_loss"][1]
    _lightning(tmp_path / "b", 32, "CrossEntropyLoss")
    plan = add_plan(tmp_path / "b", name=NAME)
    why = {m.logged: (m.stored, m.why) for m in plan.runs[0].metrics}
    assert why["val_loss"] == (
        "val/cross_entropy_error", "the cross-entropy: its parameter 'criterion' = "
        "'torch.nn.modules.loss.CrossEntropyLoss' names a cross-entropy loss")
    assert plan.as_dict()["runs"][0]["metrics"][0]["why"]
    result = CliRunner().invoke(main, ["add", str(tmp_path / "a"), "--name", NAME,
                                       "--dry-run", "--home", str(tmp_path / "home")])
    assert result.exit_code == 0, result.output
    assert ("metric:  val_loss -> val/loss: a loss not known to be the cross-entropy"
            in result.output)
    assert "--map 'val_loss=val/cross_entropy_error' stores it so" in result.output


def test_a_workload_whose_loss_is_neutral_has_a_default_goal_fits_and_a_report(
        tmp_path: Path) -> None:
    """An imported regression (``val_loss`` only): the default metric of fit --all and the
    report is ``val/loss``, minimized; the fit finds the batch sizes' steps."""
    from curvekit.goals import default_goal
    from curvekit.reporting.data import workload_data
    from curvekit.scaling import fit_all
    from curvekit.store.store import Store

    for batch_size in (16, 32, 64, 128, 256):
        _mlflow(tmp_path, batch_size, {"loss": "mse", "lr": "0.1"})
    home = tmp_path / "home"
    add(tmp_path / "mlruns", name=NAME, home=home)
    store = Store.open(home)
    assert store.metrics(NAME) == ["val/loss"]
    goal = default_goal(store, NAME)
    assert (goal.metric, goal.maximize) == ("val/loss", False)
    (row,) = [r for r in fit_all(store, explain=False) if r["workload"] == NAME]
    assert row["metric"] == "val/loss" and row["points"] == 3, row  # fitted, not refused
    assert math.isfinite(float(row["s_min"]))  # type: ignore[arg-type]
    page = workload_data(store, NAME, bootstrap=0)
    assert page is not None


def test_runs_that_disagree_about_their_loss_are_named_in_a_warning(tmp_path: Path) -> None:
    """One sweep whose runs record their criterion in some versions only: the loss gets two
    names, and a warning says so with the map that gives every run one."""
    _lightning(tmp_path / "logs", 32, "CrossEntropyLoss")
    _lightning(tmp_path / "logs", 64, None)
    with pytest.warns(IngestWarning, match=r"metrics 'train_loss', 'val_loss' are stored as "
                      r"the cross-entropy in 1 run\(s\) \('version_32/metrics.csv': .* in 1 "
                      r"\('version_64/metrics.csv': nothing says so\).*"
                      r"--map 'train_loss=train/cross_entropy_error' "
                      r"--map 'val_loss=val/cross_entropy_error'"):
        build(tmp_path / "logs", name=NAME)
