"""The batched trainer: a study's trials trained together give one-by-one's curves.

Equivalence runs in float64 (torch's default dtype switched for the test), where the only
difference left, the order of float sums in a batched product, stays below 1e-9 relative.
"""

from __future__ import annotations

import math
import sys
import textwrap
import warnings
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
pytest.importorskip("sklearn")

import curvekit  # noqa: E402
from curvekit.cli import main  # noqa: E402
from curvekit.errors import RunError  # noqa: E402
from curvekit.runner import batched  # noqa: E402
from curvekit.runner.batched import (  # noqa: E402
    BatchingFallbackWarning,
    group_bytes,
    train_trials,
    trial_bytes,
    trials_that_fit,
)
from curvekit.runner.executors import chunks  # noqa: E402
from curvekit.runner.plan import Sweep, TrialResult, TrialSpec  # noqa: E402
from curvekit.runner.train import _data, run_trial  # noqa: E402

RTOL = 1e-9


@pytest.fixture(params=[False, True], ids=["cpu-path", "gpu-path"])
def sync_free(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Both paths, here on the CPU: a CPU's (the loss read back at every step, so that a
    diverged trial leaves the group at once; evaluations trial by trial) and a GPU's (a
    diverged trial masked on the device until the next evaluation; evaluations of all
    trials at once)."""
    monkeypatch.setattr(batched, "SYNC_FREE", request.param)
    monkeypatch.setattr(batched, "EVAL_ALL_AT_ONCE", request.param)
    return bool(request.param)


@pytest.fixture
def float64() -> Iterator[None]:
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


def study(optimizer: str = "nesterov_momentum", *, model: str = "fc_32", batch_size: int = 16,
          trials: int = 4, steps: int = 150, eval_every: int = 50,
          extra: list[dict[str, Any]] | None = None) -> list[TrialSpec]:
    sweep = Sweep.create("b", dataset="digits", model=model, optimizers=[optimizer],
                         batch_sizes=[batch_size], trials=trials, steps=steps,
                         eval_every=eval_every, seed=11)
    specs = sweep.trial_specs()
    if extra:
        specs = [replace(s, parameters={**s.parameters, **extra[i % len(extra)]})
                 for i, s in enumerate(specs)]
    return specs


def assert_same(batch: list[TrialResult], alone: list[TrialResult], rtol: float = RTOL) -> None:
    assert [r.spec for r in batch] == [r.spec for r in alone]
    for b, a in zip(batch, alone, strict=True):
        assert (b.status, b.steps) == (a.status, a.steps), b.spec.trial_id
        assert b.columns["step"] == a.columns["step"]
        assert sorted(b.columns) == sorted(a.columns)
        for name, values in a.columns.items():
            for got, want in zip(b.columns[name], values, strict=True):
                if math.isfinite(want):
                    assert got == pytest.approx(want, rel=rtol, abs=1e-12), (name, b.spec)
                else:  # NaN where one-by-one has NaN, inf where it has inf
                    assert (math.isnan(got) and math.isnan(want)) or got == want, name


@pytest.mark.parametrize("optimizer", ["sgd", "momentum", "nesterov_momentum", "adam"])
def test_batched_equals_one_by_one_in_float64(optimizer: str, float64: None) -> None:
    # Weight decay and label smoothing on some trials only, a warmup on others: per-trial
    # metaparameters of every kind in one batch.
    extra = [{"weight_decay": 1e-3}, {"label_smoothing": 0.1},
             {"warmup_steps": 30, "warmup_start_learning_rate": 1e-4},
             {"weight_decay": 5e-4, "label_smoothing": 0.05}]
    if optimizer == "adam":
        extra[3].update(beta1=0.8, beta2=0.99, epsilon=1e-6)
    specs = study(optimizer, extra=extra)
    batch = train_trials(specs)
    alone = [run_trial(spec) for spec in specs]
    assert_same(batch, alone)
    assert all(r.status == "COMPLETE" and r.steps == 150 for r in batch)
    assert min(r.columns["val/classification_error"][-1] for r in batch) < 0.5  # it learns


def test_a_diverging_trial_stops_at_the_same_step_and_the_others_go_on(
        float64: None, sync_free: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    # Learning rates come in blocks of steps: small blocks here, so that trials leave the
    # group in the middle of one and the schedule goes on across many.
    monkeypatch.setattr(batched, "_SCHEDULE_BLOCK", 7)
    specs = study("sgd", steps=200, eval_every=50,
                  extra=[{}, {}, {"warmup_steps": 30, "warmup_start_learning_rate": 1e-3}])
    specs[1] = replace(specs[1], parameters={"learning_rate": 1e200})
    batch = train_trials(specs)
    alone = [run_trial(spec) for spec in specs]
    assert_same(batch, alone)
    diverged = batch[1]
    assert diverged.status == "INFEASIBLE" and diverged.steps < 50  # between two evaluations
    assert diverged.columns["step"][-1] == diverged.steps
    assert not math.isfinite(diverged.columns["train/cross_entropy_error"][-1])
    assert math.isnan(diverged.columns["val/classification_error"][-1])
    assert [r.status for i, r in enumerate(batch) if i != 1] == ["COMPLETE"] * 3


def test_an_infeasible_start_and_a_non_finite_evaluation(float64: None,
                                                         sync_free: bool) -> None:
    # A learning rate of inf makes the first update non-finite; a NaN learning rate is
    # the other path to INFEASIBLE: evaluated weights whose train cross-entropy is NaN.
    specs = study("sgd", trials=3, steps=60, eval_every=20)
    specs[0] = replace(specs[0], parameters={"learning_rate": math.inf})
    specs[2] = replace(specs[2], parameters={"learning_rate": math.nan})
    assert_same(train_trials(specs), [run_trial(spec) for spec in specs])


@pytest.mark.parametrize("model, batch_size, ghost", [
    ("fc_32_bn", 16, None), ("fc_32_bn", 32, 8), ("fc_32", 1197, None)])
def test_batch_norm_ghost_batch_norm_and_full_batch(model: str, batch_size: int,
                                                    ghost: int | None, float64: None,
                                                    sync_free: bool) -> None:
    extra = [{"ghost_batch_size": ghost}] if ghost else None
    specs = study("momentum", model=model, batch_size=batch_size, trials=3, steps=60,
                  eval_every=20, extra=extra)
    assert_same(train_trials(specs), [run_trial(spec) for spec in specs])


def test_a_diverging_batch_norm_trial_keeps_its_statistics(float64: None,
                                                           sync_free: bool) -> None:
    # Frozen or dropped, a diverged trial's running statistics are those of its last step.
    specs = study("sgd", model="fc_32_bn", batch_size=16, trials=3, steps=40, eval_every=20)
    specs[0] = replace(specs[0], parameters={"learning_rate": 1e150})
    batch = train_trials(specs)
    assert batch[0].status == "INFEASIBLE"
    assert_same(batch, [run_trial(spec) for spec in specs])


def test_simple_cnn_with_batch_norm(float64: None, sync_free: bool) -> None:
    specs = study("nesterov_momentum", model="simple_cnn_narrow_bn", batch_size=8, trials=2,
                  steps=6, eval_every=3)
    assert_same(train_trials(specs), [run_trial(spec) for spec in specs])


def test_float32_agrees_like_another_machine() -> None:
    specs = study("adam", trials=3, steps=100)
    assert_same(train_trials(specs), [run_trial(spec) for spec in specs], rtol=1e-4)


def test_no_host_sync_between_evaluations(monkeypatch: pytest.MonkeyPatch) -> None:
    # On the sync-free path (a GPU's), reading a device tensor back (item, bool, float,
    # int, tolist) happens at evaluations only: four times the steps between the same
    # evaluations read back no more often, a diverging trial included.
    monkeypatch.setattr(batched, "SYNC_FREE", True)
    counts = {"n": 0}
    for name in ("item", "tolist", "__bool__", "__float__", "__int__"):
        original = getattr(torch.Tensor, name)

        def counting(self: Any, *args: Any, _original: Any = original) -> Any:
            counts["n"] += 1
            return _original(self, *args)

        monkeypatch.setattr(torch.Tensor, name, counting)

    def syncs(steps: int) -> int:
        counts["n"] = 0
        specs = study("adam", trials=3, steps=steps, eval_every=steps // 2,
                      extra=[{"weight_decay": 1e-4}])
        specs[1] = replace(specs[1], parameters={"learning_rate": 1e30})
        assert train_trials(specs)[1].status == "INFEASIBLE"
        return counts["n"]

    assert syncs(20) == syncs(80)


def test_user_models_batch_with_vmap_or_fall_back_with_a_notice(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, float64: None,
        sync_free: bool) -> None:
    (tmp_path / "batched_workload.py").write_text(textwrap.dedent("""
        import torch

        class Residual(torch.nn.Module):
            def __init__(self, size, classes):
                super().__init__()
                self.inner = torch.nn.Linear(size, size)
                self.out = torch.nn.Linear(size, classes)

            def forward(self, x):
                x = x.flatten(1)
                return self.out(x + torch.tanh(self.inner(x)))

        class Picky(Residual):
            def forward(self, x):
                if x.sum() > 0:  # data-dependent control flow: vmap cannot batch it
                    x = x * 1.0
                return super().forward(x)

        def residual(input_shape, num_classes):
            return Residual(64, num_classes)

        def picky(input_shape, num_classes):
            return Picky(64, num_classes)
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("batched_workload", None)
    specs = study("momentum", model="batched_workload:residual", trials=3, steps=40,
                  eval_every=20)
    with warnings.catch_warnings():
        warnings.simplefilter("error", BatchingFallbackWarning)  # batched: no notice
        batch = train_trials(specs)
    assert_same(batch, [run_trial(spec) for spec in specs])
    picky = [replace(s, model="batched_workload:picky") for s in specs]
    with pytest.warns(BatchingFallbackWarning,
                      match=r"3 trials of b/batched_workload:picky/momentum at batch size 16 "
                            r"run one by one: torch\.func\.vmap cannot batch it"):
        fallback = train_trials(picky)
    assert_same(fallback, [run_trial(spec) for spec in picky], rtol=0)


def test_the_noise_scale_trains_one_by_one_with_a_notice(tmp_path: Path) -> None:
    options: dict[str, Any] = dict(dataset="digits", model="fc_16", optimizers=["sgd"],
                                   batch_sizes=[32], trials=2, steps=20, eval_every=10,
                                   device="cpu", noise_micro_batches=2)
    with pytest.warns(BatchingFallbackWarning, match="gradient noise scale"):
        curvekit.run("n", **options, work_dir=tmp_path / "w", store=False)
    runner = CliRunner()
    result = runner.invoke(main, ["run", "n", "--model", "fc_16", "--optimizer", "sgd",
                                  "--batch-sizes", "32", "--trials", "2", "--steps", "20",
                                  "--eval-every", "10", "--device", "cpu", "--quiet",
                                  "--noise-micro-batches", "2", "--no-store",
                                  "--work-dir", str(tmp_path / "cli")])
    assert result.exit_code == 0, result.output
    assert ("Warning: 2 trials of n/fc_16/sgd at batch size 32 run one by one: the gradient "
            "noise scale") in result.stderr


def parts(work: Path) -> dict[str, Any]:
    return {str(p.relative_to(work)): pq.read_table(p)
            for p in sorted(work.glob("parts/**/*.parquet"))}


TINY: dict[str, Any] = dict(dataset="digits", model="fc_32", optimizers=["sgd", "adam"],
                            batch_sizes=[16, 64], trials=3, steps=60, eval_every=30,
                            device="cpu", seed=2)


def test_trials_at_once_one_is_the_one_by_one_path(tmp_path: Path) -> None:
    curvekit.run("t", **TINY, work_dir=tmp_path / "one", store=False, trials_at_once=1)
    sweep = Sweep.create("t", **{k: v for k, v in TINY.items() if k != "device"})
    for spec in sweep.trial_specs():
        got = pq.read_table(tmp_path / "one" / "parts" / spec.optimizer
                            / str(spec.batch_size) / f"{spec.trial_id}.parquet")
        assert got.to_pydict() == run_trial(spec).columns


def test_resume_redoes_no_finished_trial_and_gives_the_same_curves(tmp_path: Path) -> None:
    work = tmp_path / "work"

    def crash_after_four(stage: str, done: int, total: int | None) -> None:
        if done == 4:  # mid-study: two trials of the second study are saved, one is not
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        curvekit.run("t", **TINY, work_dir=work, store=False, progress=crash_after_four)
    kept = {p: (work / p).stat().st_mtime_ns for p in parts(work)}
    assert len(kept) == 4
    resumed = curvekit.run("t", **TINY, work_dir=work, store=False, trials_at_once=2)
    assert (resumed.ran, resumed.resumed) == (8, 4)
    assert all((work / p).stat().st_mtime_ns == t for p, t in kept.items())
    fresh = tmp_path / "fresh"
    curvekit.run("t", **TINY, work_dir=fresh, store=False, workers=2)
    after, again = parts(work), parts(fresh)
    assert sorted(after) == sorted(again) and len(after) == 12
    for name, table in after.items():  # a trial's curve depends on its company by rounding only
        other = again[name]
        assert table.column_names == other.column_names, name
        assert table["step"].to_pylist() == other["step"].to_pylist(), name
        for column in table.column_names:
            np.testing.assert_allclose(table[column].to_numpy(), other[column].to_numpy(),
                                       rtol=1e-5, err_msg=f"{name} {column}")


def test_cli_option_and_refusals(tmp_path: Path) -> None:
    runner = CliRunner()
    args = ["run", "c", "--model", "fc_16", "--optimizer", "sgd", "--batch-sizes", "32",
            "--trials-per-study", "3", "--steps", "20", "--eval-every", "10", "--device", "cpu",
            "--quiet", "--no-store"]
    ok = runner.invoke(main, [*args, "--trials-at-once", "2", "--work-dir", str(tmp_path / "a")])
    assert ok.exit_code == 0, ok.output
    assert ok.stdout.startswith("3 trials (3 run now, 0 from")
    bad = runner.invoke(main, [*args, "--trials-at-once", "0", "--work-dir", str(tmp_path / "b")])
    assert bad.exit_code == 2 and "--trials-at-once" in bad.output
    assert not (tmp_path / "b").exists()
    with pytest.raises(RunError, match="trials at once 0 is less than 1"):
        curvekit.run("c", dataset="digits", model="fc_16", optimizers=["sgd"],
                     batch_sizes=[32], trials=1, steps=5, device="cpu", trials_at_once=0,
                     work_dir=tmp_path / "c", store=False)
    assert not (tmp_path / "c").exists()


def test_trials_of_different_studies_are_refused_together() -> None:
    specs = study("sgd", trials=2)
    with pytest.raises(RunError, match=r"trial 2 differs from trial 1 in batch_size, steps"):
        train_trials([specs[0], replace(specs[1], batch_size=32, steps=9)])


@settings(max_examples=30, deadline=None)
@given(sizes=st.lists(st.integers(1, 5), min_size=1, max_size=4),
       cap=st.one_of(st.none(), st.integers(1, 6)))
def test_chunks_are_runs_of_one_study_within_the_cap(sizes: list[int], cap: int | None) -> None:
    specs = [TrialSpec("c", "fc_16", "sgd", batch, trial, "digits", {"learning_rate": 0.1},
                       10, 5, trial)
             for batch, count in enumerate(sizes, start=1) for trial in range(1, count + 1)]
    cut = chunks(specs, cap)
    assert [s for chunk in cut for s in chunk] == specs
    assert all(len({s.batch_size for s in chunk}) == 1 for chunk in cut)
    assert all(cap is None or len(chunk) <= cap for chunk in cut)
    assert len(cut) == sum(math.ceil(n / (cap or n)) for n in sizes)


def test_memory_estimate_bounds_the_group(monkeypatch: pytest.MonkeyPatch) -> None:
    demo = study("nesterov_momentum", model="fc_128_128_128", batch_size=1197, trials=1)[0]
    data = _data(demo, "cpu")
    per_trial = trial_bytes(demo, data)
    assert 2e6 < per_trial < 1e8  # parameters ~40k, activations ~400 per example
    # The evaluation chunk is needed once per group, not once per trial.
    shared = group_bytes(demo, data, 0)
    assert group_bytes(demo, data, 5) == 5 * per_trial + shared > 0
    # A demo study fits a 24 GB machine many times over; on a CPU the examples per step cap
    # a large-batch group.
    assert (batched.CPU_BUDGET_BYTES - shared) // per_trial >= 24
    assert trials_that_fit(demo, data, "cpu") == 4096 // 1197
    assert trials_that_fit(replace(demo, batch_size=64), data, "cpu") == 64
    # On a GPU, 70% of the free memory bounds it (checked here with a pretend GPU).
    free = (shared + 7 * per_trial + per_trial // 2) * 100 // 70 + 100
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (free, 0))
    assert trials_that_fit(demo, data, "cuda") == 7
    # A group larger than the estimate is split; the curves do not change.
    specs = study("sgd", trials=3, steps=20, eval_every=10)
    whole = train_trials(specs)
    monkeypatch.setattr(batched, "CPU_BUDGET_BYTES", group_bytes(specs[0], data, 2))
    assert trials_that_fit(specs[0], data, "cpu") == 2
    split = train_trials(specs)
    assert [r.columns for r in split] == [r.columns for r in whole]


@settings(max_examples=50, deadline=None)
@given(sizes=st.lists(st.integers(1, 9), min_size=1, max_size=3), rows=st.integers(1, 12))
def test_evaluation_chunks_cover_every_split_in_order(sizes: list[int], rows: int) -> None:
    from curvekit.runner.workloads import Splits

    names = ["train", "val", "test"][:len(sizes)]
    splits = {name: (torch.arange(n * 2.0).view(n, 2) + 100 * i, torch.full((n,), i))
              for i, (name, n) in enumerate(zip(names, sizes, strict=True))}
    cut = list(batched._eval_chunks(Splits("toy", splits, 3), rows))
    assert all(len(x) == len(y) == len(ids) <= rows for x, y, ids in cut)
    assert all(len(x) == rows for x, _, _ in cut[:-1])  # only the last chunk is short
    assert torch.equal(torch.cat([x for x, _, _ in cut]),
                       torch.cat([x for x, _ in splits.values()]))
    # Each row's split number is its split's position; the targets here are the same.
    assert all(torch.equal(y, ids) for _, y, ids in cut)


def test_evaluation_chunks_spanning_splits_give_the_same_rows(
        float64: None, sync_free: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    # Chunks far smaller than a split, each spanning two splits somewhere: the same
    # numbers as one by one, both ways of evaluating.
    monkeypatch.setattr(batched, "_EVAL_CHUNK", 301)
    specs = study("sgd", trials=3, steps=20, eval_every=10)
    assert_same(train_trials(specs), [run_trial(spec) for spec in specs])


def test_memory_estimate_wherever_the_data_lies() -> None:
    """The estimate probes the model on the CPU: with the data set on a GPU (here the meta
    device, which holds no values) it neither moves data nor mixes devices."""
    spec = study("nesterov_momentum", model="simple_cnn_narrow", batch_size=32, trials=1)[0]
    data = _data(spec, "cpu")
    elsewhere = type(data)(data.name, {k: (x.to("meta"), y.to("meta"))
                                       for k, (x, y) in data.splits.items()},
                           data.num_classes)
    assert trial_bytes(spec, elsewhere) == trial_bytes(spec, data) > 0
