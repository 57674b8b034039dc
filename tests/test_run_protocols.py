"""Scaling protocols: schedule, scaled rates, ghost batch norm, runs into the store, CLI, plot."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
pytest.importorskip("sklearn")

import curvekit  # noqa: E402
from curvekit.cli import main  # noqa: E402
from curvekit.errors import RunError  # noqa: E402
from curvekit.runner.plan import Sweep  # noqa: E402
from curvekit.runner.protocols import (  # noqa: E402
    Protocol,
    Warmup,
    optimizer_directory,
    parse_warmup,
    split_optimizer,
)
from curvekit.runner.train import learning_rate_at  # noqa: E402
from curvekit.runner.workloads import (  # noqa: E402
    GhostBatchNorm,
    build_model,
    use_ghost_batch_norm,
)

N_TRAIN = 1197  # the digits training set


def expected_rate(name: str, k: int, batch: int, base_batch: int, base_lr: float,
                  warmup: int, steps: int, factor: float) -> float:
    """The protocol's schedule written out from its definition (docs/running.md)."""
    peak = base_lr * (batch / base_batch if name == "linear-scaling"
                      else math.sqrt(batch / base_batch))
    w = warmup if batch > base_batch else 0
    if k < w:
        return base_lr + (peak - base_lr) * k / w
    return peak * (1 - (1 - factor) * min(k - w, steps - w) / (steps - w))


@settings(max_examples=50, deadline=None)
@given(name=st.sampled_from(["linear-scaling", "sqrt-scaling"]),
       base_exp=st.integers(0, 8), batch_exp=st.integers(0, 10),
       base_lr=st.floats(1e-4, 10.0), warmup=st.integers(0, 300),
       extra=st.integers(1, 2000), factor=st.sampled_from([0.001, 0.01, 0.1, 1.0]),
       fraction=st.floats(0.0, 1.2))
def test_schedule_at_every_step_is_warmup_then_linear_decay(
        name: str, base_exp: int, batch_exp: int, base_lr: float, warmup: int, extra: int,
        factor: float, fraction: float) -> None:
    base, batch = 2 ** base_exp, 2 ** batch_exp
    steps = warmup + extra
    protocol = Protocol.create(name, base_batch_size=base, warmup=warmup,
                               base_parameters={"learning_rate": base_lr,
                                                "end_learning_rate_factor": factor})
    point = protocol.parameters(batch, steps=steps, n_train=N_TRAIN)
    k = int(fraction * steps)
    got = learning_rate_at(k, point)
    want = expected_rate(name, k, batch, base, base_lr, warmup, steps, factor)
    assert got == pytest.approx(want, rel=1e-9, abs=1e-12)
    # Continuity where warmup hands over to decay, and the end of the budget.
    if batch > base and warmup:
        assert learning_rate_at(warmup, point) == pytest.approx(point["learning_rate"])
        assert learning_rate_at(0, point) == pytest.approx(base_lr)
    assert learning_rate_at(steps, point) == pytest.approx(factor * point["learning_rate"])


def test_tuned_trials_keep_the_papers_schedule() -> None:
    p = {"learning_rate": 0.8, "end_learning_rate_factor": 0.01,
         "learning_rate_decay_steps": 100}
    assert [learning_rate_at(k, p) for k in (0, 50, 100, 200)] == pytest.approx(
        [0.8, 0.8 * (1 - 0.99 / 2), 0.008, 0.008])


@pytest.mark.parametrize(("name", "batch", "want"), [
    ("linear-scaling", 64, 0.1), ("linear-scaling", 256, 0.4), ("linear-scaling", 16, 0.025),
    ("linear-scaling", 1024, 1.6), ("sqrt-scaling", 64, 0.1), ("sqrt-scaling", 256, 0.2),
    ("sqrt-scaling", 16, 0.05), ("sqrt-scaling", 1024, 0.4),
])
def test_scaled_learning_rate_per_batch_size(name: str, batch: int, want: float) -> None:
    protocol = Protocol.create(name, base_batch_size=64, base_parameters={
        "learning_rate": 0.1, "momentum": 0.9})
    point = protocol.parameters(batch, steps=1000, n_train=N_TRAIN)
    assert point["learning_rate"] == pytest.approx(want)
    assert point["momentum"] == 0.9  # momentum is kept, not scaled
    assert point["learning_rate_decay_steps"] == 1000
    assert "warmup_steps" not in point  # no warmup asked for


def test_warmup_in_epochs_follows_the_batch_size_and_only_above_the_base() -> None:
    protocol = Protocol.create("linear-scaling", base_batch_size=32, warmup="5e",
                               base_parameters={"learning_rate": 0.05})
    assert protocol.parameters(128, steps=500, n_train=N_TRAIN)["warmup_steps"] == 5 * 9
    assert protocol.parameters(1197, steps=500, n_train=N_TRAIN)["warmup_steps"] == 5
    assert "warmup_steps" not in protocol.parameters(32, steps=500, n_train=N_TRAIN)
    assert "warmup_steps" not in protocol.parameters(8, steps=500, n_train=N_TRAIN)
    assert parse_warmup("200") == Warmup(200, "steps")
    assert parse_warmup("0.5e") == Warmup(0.5, "epochs")
    assert parse_warmup(" 3 epochs ") == Warmup(3.0, "epochs")
    for bad in ("five", "-3", "2.5", "5x"):
        with pytest.raises(RunError, match="warmup"):
            parse_warmup(bad)
    with pytest.raises(RunError, match=r"warmup 5e is 185 steps at batch size 32.*--warmup"):
        Protocol.create("linear-scaling", base_batch_size=16, warmup="5e",
                        base_parameters={"learning_rate": 0.05}).parameters(
            32, steps=100, n_train=N_TRAIN)


def test_protocol_names_and_bad_base_settings() -> None:
    assert optimizer_directory("sgd", "linear-scaling") == "sgd+linear-scaling"
    assert split_optimizer("sgd+linear-scaling") == ("sgd", "linear-scaling")
    assert split_optimizer("adam") == ("adam", "tuned")
    with pytest.raises(RunError, match="unknown protocol 'cubic-scaling'"):
        Protocol.create("cubic-scaling", base_batch_size=8, base_parameters={"learning_rate": 1})
    with pytest.raises(RunError, match="base learning rate must be a positive number, got -1"):
        Protocol.create("linear-scaling", base_batch_size=8,
                        base_parameters={"learning_rate": -1})
    with pytest.raises(RunError, match="base batch size must be a positive integer, got 0"):
        Protocol.create("linear-scaling", base_batch_size=0,
                        base_parameters={"learning_rate": 1})
    ghost = Protocol.create("linear-scaling", base_batch_size=8, ghost_batch_size=16,
                            base_parameters={"learning_rate": 0.1})
    assert ghost.parameters(64, steps=10, n_train=N_TRAIN)["ghost_batch_size"] == 16
    assert "ghost_batch_size" not in ghost.parameters(16, steps=10, n_train=N_TRAIN)
    with pytest.raises(RunError, match="ghost batch size 16 does not divide batch size 40"):
        ghost.parameters(40, steps=10, n_train=N_TRAIN)


def manual_ghost_norm(x: Any, ghost: int, weight: Any, bias: Any, eps: float) -> Any:
    """Batch norm written out per chunk: (x - chunk mean) / sqrt(chunk var + eps)."""
    dims = [0, *range(2, x.dim())]
    shape = [1, -1, *([1] * (x.dim() - 2))]
    outs = []
    for chunk in x.split(ghost):
        mean = chunk.mean(dim=dims, keepdim=True)
        var = chunk.var(dim=dims, unbiased=False, keepdim=True)
        outs.append((chunk - mean) / torch.sqrt(var + eps) * weight.view(shape)
                    + bias.view(shape))
    return torch.cat(outs)


@pytest.mark.parametrize("kind", ["1d", "2d"])
def test_ghost_batch_norm_is_plain_batch_norm_at_the_batch_size(kind: str) -> None:
    torch.manual_seed(0)
    make = torch.nn.BatchNorm1d if kind == "1d" else torch.nn.BatchNorm2d
    x = torch.randn(32, 6) * 3 + 1 if kind == "1d" else torch.randn(32, 6, 4, 4) * 3 + 1
    plain, layer = make(6), make(6)
    with torch.no_grad():
        for bn in (plain, layer):
            bn.weight.copy_(torch.linspace(0.5, 2, 6))
            bn.bias.copy_(torch.linspace(-1, 1, 6))
    ghost = GhostBatchNorm(layer, 32)
    assert torch.equal(ghost(x), plain(x))
    assert torch.allclose(layer.running_mean, plain.running_mean)
    assert torch.allclose(layer.running_var, plain.running_var)
    # Smaller ghost batches: each chunk of 8 is normalized on its own, unlike plain BN.
    small = GhostBatchNorm(make(6), 8)
    with torch.no_grad():
        small.layer.weight.copy_(plain.weight)
        small.layer.bias.copy_(plain.bias)
    out = small(x)
    want = manual_ghost_norm(x, 8, plain.weight, plain.bias, plain.eps)
    assert torch.allclose(out, want, atol=1e-5)
    assert not torch.allclose(out, make(6)(x) * 1.0, atol=1e-3)
    # Running statistics: one momentum step towards the mean of the chunks' statistics.
    dims = [0, *range(2, x.dim())]
    chunk_means = torch.stack([c.mean(dim=dims) for c in x.split(8)]).mean(dim=0)
    assert torch.allclose(small.layer.running_mean, 0.1 * chunk_means, atol=1e-6)
    assert small.layer.num_batches_tracked is not None
    assert int(small.layer.num_batches_tracked) == 1
    small.eval()  # evaluation uses the running statistics, as plain BN does
    assert torch.allclose(small(x), small.layer(x))


def test_ghost_batch_norm_goes_into_the_batch_norm_models_only() -> None:
    model = build_model("fc_32_16_bn", (1, 8, 8), 10)
    assert use_ghost_batch_norm(model, 8) == 2
    cnn = build_model("simple_cnn_narrow_bn", (1, 8, 8), 10)
    assert use_ghost_batch_norm(cnn, 8) == 3
    assert cnn(torch.randn(16, 1, 8, 8)).shape == (16, 10)
    with pytest.raises(RunError, match=r"no batch-norm layer.*fc_128_128_bn"):
        use_ghost_batch_norm(build_model("fc_32", (1, 8, 8), 10), 8)


def test_plan_round_trips_and_a_changed_base_is_another_sweep() -> None:
    protocol = Protocol.create("sqrt-scaling", base_batch_size=16, warmup="2e",
                               base_parameters={"learning_rate": 0.2, "momentum": 0.9},
                               ghost_batch_size=8)
    sweep = Sweep.create("p", dataset="digits", model="fc_32_bn",
                         optimizers=["nesterov_momentum"], batch_sizes=[16, 64], trials=2,
                         steps=100, eval_every=50, protocol=protocol, n_train=N_TRAIN)
    assert sweep.workloads() == ["p/fc_32_bn/nesterov_momentum+sqrt-scaling"]
    back = Sweep.from_json(json.loads(json.dumps(sweep.to_json())))
    assert back == sweep and back.differences(sweep) == []
    specs = sweep.trial_specs()
    assert [s.optimizer for s in specs] == ["nesterov_momentum+sqrt-scaling"] * 4
    # Trials of a study share their metaparameters and differ in their seed.
    assert specs[2].parameters == specs[3].parameters and specs[2].seed != specs[3].seed
    assert specs[2].parameters == {
        "end_learning_rate_factor": 0.01, "ghost_batch_size": 8, "learning_rate": 0.4,
        "learning_rate_decay_steps": 64, "momentum": 0.9, "warmup_start_learning_rate": 0.2,
        "warmup_steps": 36}
    other = Sweep.create("p", dataset="digits", model="fc_32_bn",
                         optimizers=["nesterov_momentum"], batch_sizes=[16, 64], trials=2,
                         steps=100, eval_every=50, n_train=N_TRAIN, protocol=Protocol.create(
                             "sqrt-scaling", base_batch_size=16, warmup="2e",
                             base_parameters={"learning_rate": 0.3, "momentum": 0.9},
                             ghost_batch_size=8))
    assert sweep.differences(other) == ["protocol", "spaces"]
    with pytest.raises(RunError, match="takes no search space"):
        Sweep.create("p", dataset="digits", model="fc_32", optimizers=["sgd"],
                     batch_sizes=[16], trials=1, steps=10, eval_every=5, protocol=protocol,
                     space={"learning_rate": {"type": "DOUBLE", "min_value": 0.1,
                                              "max_value": 1.0, "scale": "LOG_SCALE"}})


TUNED: dict[str, Any] = dict(dataset="digits", model="fc_32", optimizers=["sgd"],
                             batch_sizes=[16, 64], trials=2, steps=150, eval_every=25,
                             device="cpu", seed=5)


def test_a_protocol_run_is_its_own_workload_beside_the_tuned_one(tmp_path: Path) -> None:
    home = tmp_path / "home"
    tuned = curvekit.run("p", **TUNED, home=home)
    linear = curvekit.run("p", **{**TUNED, "batch_sizes": [16, 64, 256], "trials": 1},
                          home=home, protocol="linear-scaling", base_batch_size=16,
                          warmup="1e")
    assert linear.workloads == ["p/fc_32/sgd+linear-scaling"]
    assert linear.work_dir == home / "runs" / "p" / "fc_32+linear-scaling"
    store = curvekit.open(home)
    assert {*tuned.workloads, *linear.workloads} <= set(store.workloads())
    # The base setting is the tuned study's best trial at batch size 16.
    best = curvekit.best(store, curvekit.Selection("p/fc_32/sgd", "val/classification_error"),
                         explain=False)
    base = best.filter(best["batch_size"] == 16).to_dicts()[0]
    trials = store.trials("p/fc_32/sgd+linear-scaling").sort("batch_size")
    assert trials["learning_rate"].to_list() == pytest.approx(
        [base["learning_rate"] * r for r in (1, 4, 16)])
    assert trials["end_learning_rate_factor"].to_list() == [base["end_learning_rate_factor"]] * 3
    assert trials["warmup_steps"].to_list() == [None, 18, 4]
    extra = json.loads(store.studies("p/fc_32/sgd+linear-scaling")["extra"][0])
    assert extra["runner"]["protocol"]["base_from"].startswith(
        f"p/fc_32/sgd trial {base['trial_id']} at batch size 16")
    curve = curvekit.steps_to_result(store, curvekit.Selection(
        "p/fc_32/sgd+linear-scaling", "train/cross_entropy_error", 2.5), explain=False)
    assert curve.height >= 1 and set(curve["batch_size"]) <= {16, 64, 256}
    # sqrt-scaling with a given base learning rate: its own workload and work folder.
    sqrt = curvekit.run("p", **{**TUNED, "trials": 1}, home=home, protocol="sqrt-scaling",
                        base_batch_size=16, base_learning_rate=0.2)
    assert sqrt.workloads == ["p/fc_32/sgd+sqrt-scaling"]
    again = curvekit.open(home).trials("p/fc_32/sgd+sqrt-scaling").sort("batch_size")
    assert again["learning_rate"].to_list() == pytest.approx([0.2, 0.4])


def test_a_protocol_without_a_base_setting_is_refused_and_the_store_kept(
        tmp_path: Path) -> None:
    home = tmp_path / "home"
    with pytest.raises(RunError, match=r"no curvekit store.*--base-learning-rate"):
        curvekit.run("p", **TUNED, home=home, protocol="linear-scaling", base_batch_size=16)
    curvekit.run("p", **{**TUNED, "batch_sizes": [16], "trials": 1, "steps": 20}, home=home)
    before = sorted(p.name for p in (home / "runs").rglob("*"))
    with pytest.raises(RunError, match=r"has no COMPLETE trial .* at batch size 64 "
                                       r"\(it has \[16\]\)"):
        curvekit.run("p", **TUNED, home=home, protocol="linear-scaling", base_batch_size=64)
    with pytest.raises(RunError, match="no tuned workload p/fc_32/momentum"):
        curvekit.run("p", **{**TUNED, "optimizers": ["momentum"]}, home=home,
                     protocol="linear-scaling", base_batch_size=16)
    with pytest.raises(RunError, match="momentum needs a momentum in the base setting"):
        curvekit.run("p", **{**TUNED, "optimizers": ["momentum"]}, home=home,
                     protocol="linear-scaling", base_batch_size=16, base_learning_rate=0.1)
    with pytest.raises(RunError, match="takes one optimizer"):
        curvekit.run("p", **{**TUNED, "optimizers": ["sgd", "adam"]}, home=home,
                     protocol="sqrt-scaling", base_batch_size=16, base_learning_rate=0.1)
    with pytest.raises(RunError, match="only apply to the scaling protocols"):
        curvekit.run("p", **TUNED, home=home, warmup="5e")
    with pytest.raises(RunError, match="no batch-norm layer"):
        curvekit.run("p", **{**TUNED, "batch_sizes": [32], "trials": 1, "steps": 5},
                     home=home, protocol="linear-scaling", base_batch_size=16,
                     base_learning_rate=0.1, ghost_batch_size=16)
    assert sorted(p.name for p in (home / "runs").rglob("*") if "scaling" not in str(p)) \
        == before
    assert curvekit.open(home).workloads() == ["p/fc_32/sgd"]


def test_cli_runs_a_protocol_and_plots_it_against_the_tuned_frontier(tmp_path: Path) -> None:
    home = str(tmp_path / "home")
    runner = CliRunner()
    common = ["p", "--model", "fc_16_bn", "--optimizer", "sgd", "--batch-sizes", "16,64",
              "--steps", "120", "--eval-every", "20", "--device", "cpu", "--quiet",
              "--home", home]
    result = runner.invoke(main, ["run", *common, "--trials", "2"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(main, ["run", *common, "--protocol", "linear-scaling",
                                  "--base-batch-size", "16", "--warmup", "10",
                                  "--ghost-batch-size", "16",
                                  "--base-parameter", "end_learning_rate_factor=0.1"])
    assert result.exit_code == 0, result.output
    assert "2 trials (2 run now, 0 from" in result.output
    assert "In the store: p/fc_16_bn/sgd+linear-scaling" in result.output
    trials = curvekit.open(home).trials("p/fc_16_bn/sgd+linear-scaling").sort("batch_size")
    assert trials["ghost_batch_size"].to_list() == [None, 16]
    assert trials["warmup_steps"].to_list() == [None, 10]
    assert trials["end_learning_rate_factor"].to_list() == [0.1, 0.1]
    steps = runner.invoke(main, ["steps-to-result", "p/fc_16_bn/sgd+linear-scaling",
                                 "--metric", "train/cross_entropy_error", "--goal", "2.5",
                                 "--format", "json", "--home", home])
    assert steps.exit_code == 0, steps.output
    assert {r["batch_size"] for r in json.loads(steps.stdout)} <= {16, 64}
    out = tmp_path / "compare.json"
    plot = runner.invoke(main, ["plot", "steps-to-result", "p/fc_16_bn/sgd", "--metric",
                                "train/cross_entropy_error", "--goal", "2.5", "--compare",
                                "p/fc_16_bn/sgd+linear-scaling", "--format", "json", "--out",
                                str(out), "--home", home])
    assert plot.exit_code == 0, plot.output
    spec = json.loads(out.read_text())
    rows = [r for data in spec["datasets"].values() for r in data if "curve" in r]
    assert {r["curve"] for r in rows} == {"p/fc_16_bn/sgd", "p/fc_16_bn/sgd+linear-scaling"}
    # Bad options: Error lines, exit 1 or click's 2, nothing new in the store.
    bad = runner.invoke(main, ["run", *common, "--protocol", "sqrt-scaling",
                               "--base-batch-size", "16", "--base-parameter", "momentum"])
    assert bad.exit_code == 2 and "NAME=VALUE" in bad.output
    bad = runner.invoke(main, ["run", *common, "--base-batch-size", "16"])
    assert bad.exit_code == 1
    assert "Error: --base-batch-size only apply to the scaling protocols" in bad.output
    bad = runner.invoke(main, ["run", *common, "--protocol", "linear-scaling"])
    assert bad.exit_code == 1 and "pass --base-batch-size" in bad.output
    missing = runner.invoke(main, ["plot", "steps-to-result", "p/fc_16_bn/sgd", "--metric",
                                   "train/cross_entropy_error", "--goal", "2.5", "--compare",
                                   "p/fc_16_bn/sgd+sqrt-scaling", "--home", home])
    assert missing.exit_code == 1 and "sgd+sqrt-scaling" in missing.output
