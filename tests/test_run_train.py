"""One trial: the paper's schedule, metrics, divergence, seeding, built-in and user workloads."""

from __future__ import annotations

import math
import sys
import textwrap
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("sklearn")

from curvekit.errors import RunError  # noqa: E402
from curvekit.runner.names import canonical_dataset, canonical_model  # noqa: E402
from curvekit.runner.plan import TrialSpec  # noqa: E402
from curvekit.runner.train import learning_rate_at, resolve_device, run_trial  # noqa: E402
from curvekit.runner.workloads import build_model, load_dataset  # noqa: E402

METRICS = [f"{split}/{metric}" for split in ("train", "val", "test")
           for metric in ("classification_error", "cross_entropy_error")]


def spec(**changes: Any) -> TrialSpec:
    base = TrialSpec(base_dir="t", model="fc_32", optimizer="nesterov_momentum", batch_size=32,
                     trial_id=1, dataset="digits",
                     parameters={"learning_rate": 0.05, "momentum": 0.9,
                                 "end_learning_rate_factor": 0.01,
                                 "learning_rate_decay_steps": 100},
                     steps=120, eval_every=25, seed=7)
    return replace(base, **changes)


def test_schedule_decays_linearly_then_stays_constant() -> None:
    p = {"learning_rate": 0.8, "end_learning_rate_factor": 0.001,
         "learning_rate_decay_steps": 400}
    assert learning_rate_at(0, p) == 0.8
    assert learning_rate_at(200, p) == pytest.approx(0.8 * (1 - 0.999 / 2))
    assert learning_rate_at(400, p) == pytest.approx(0.0008)
    assert learning_rate_at(10_000, p) == pytest.approx(0.0008)
    assert learning_rate_at(50, {"learning_rate": 0.3}) == 0.3


def test_a_trial_trains_and_reports_release_metrics() -> None:
    result = run_trial(spec())
    assert result.status == "COMPLETE" and result.steps == 120
    assert result.columns["step"] == [0, 25, 50, 75, 100, 120]
    assert sorted(c for c in result.columns if c != "step") == sorted(METRICS)
    val = result.columns["val/classification_error"]
    assert val[0] > 0.6 and val[-1] < 0.2  # it learns digits
    assert all(0 <= v <= 1 for v in val)
    assert result.device == "cpu" and result.torch_version == torch.__version__


def test_same_seed_same_curve_other_seed_other_curve() -> None:
    first, again = run_trial(spec()), run_trial(spec())
    assert first.columns == again.columns
    other = run_trial(spec(seed=8))
    assert other.columns["val/cross_entropy_error"] != first.columns["val/cross_entropy_error"]


def test_huge_learning_rate_diverges_and_is_infeasible() -> None:
    result = run_trial(spec(optimizer="sgd", steps=200,
                            parameters={"learning_rate": 1e12}))
    assert result.status == "INFEASIBLE"
    assert result.steps < 200
    last = {k: v[-1] for k, v in result.columns.items()}
    assert last["step"] == result.steps
    assert not math.isfinite(last["train/cross_entropy_error"])
    assert math.isnan(last["val/classification_error"])


@pytest.mark.parametrize("optimizer", ["sgd", "momentum", "adam"])
def test_every_optimizer_trains(optimizer: str) -> None:
    parameters: dict[str, Any] = {"learning_rate": 0.003 if optimizer == "adam" else 0.1}
    if optimizer == "momentum":
        parameters["momentum"] = 0.9
    result = run_trial(spec(optimizer=optimizer, parameters=parameters, steps=60,
                            eval_every=60))
    assert result.status == "COMPLETE"
    loss = result.columns["train/cross_entropy_error"]
    assert loss[-1] < loss[0]


def test_full_batch_and_batch_too_large() -> None:
    n_train = load_dataset("digits").n_train
    assert n_train == 1197
    result = run_trial(spec(batch_size=n_train, steps=5, eval_every=5))
    assert result.status == "COMPLETE"
    with pytest.raises(RunError, match="larger than the 1197 training examples"):
        run_trial(spec(batch_size=n_train + 1))


def test_simple_cnn_on_digits() -> None:
    data = load_dataset("digits")
    assert data.input_shape == (1, 8, 8)
    model = build_model("simple_cnn_narrow", data.input_shape, 10)
    assert model(data.splits["val"][0][:3]).shape == (3, 10)
    result = run_trial(spec(model="simple_cnn_narrow", steps=10, eval_every=10))
    assert result.status == "COMPLETE"


def test_user_model_and_dataset_entry_points(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "my_workload.py").write_text(textwrap.dedent("""
        import numpy as np
        import torch

        def build(input_shape, num_classes):
            return torch.nn.Sequential(torch.nn.Flatten(),
                                       torch.nn.Linear(int(np.prod(input_shape)), num_classes))

        def load():
            rng = np.random.default_rng(0)
            x = rng.normal(size=(300, 5)).astype("float32")
            y = (x[:, 0] > 0).astype("int64")
            return {"train": (x[:200], y[:200]), "val": (x[200:], y[200:])}

        def broken(input_shape, num_classes):
            return "not a module"
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("my_workload", None)
    result = run_trial(spec(model="my_workload:build", dataset="my_workload:load",
                            optimizer="sgd", parameters={"learning_rate": 0.5},
                            batch_size=20, steps=50, eval_every=50))
    assert sorted(c for c in result.columns if c != "step") == [
        "train/classification_error", "train/cross_entropy_error",
        "val/classification_error", "val/cross_entropy_error"]
    assert result.columns["val/classification_error"][-1] < 0.2
    assert spec(model="my_workload:build").key.model == "my_workload.build"
    with pytest.raises(RunError, match=r"must return a torch\.nn\.Module"):
        run_trial(spec(model="my_workload:broken", dataset="my_workload:load"))
    with pytest.raises(RunError, match="cannot import 'no_such_module'"):
        run_trial(spec(model="no_such_module:build"))


def test_names_and_devices() -> None:
    assert canonical_model("FC-64-64") == "fc_64_64"
    assert canonical_dataset("CIFAR10") == "cifar_10"
    with pytest.raises(RunError, match="unknown model 'resnet_8'"):
        canonical_model("resnet_8")
    with pytest.raises(RunError, match="unknown data set 'imagenet'"):
        canonical_dataset("imagenet")
    assert resolve_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
    if not torch.cuda.is_available():
        with pytest.raises(RunError, match="no CUDA GPU"):
            resolve_device("cuda")


def test_torchvision_data_sets_are_read_locally_only(tmp_path: Path) -> None:
    with pytest.raises(RunError, match=r"torchvision|not under"):
        load_dataset("mnist", tmp_path)
