"""Sweeps: a tiny CPU sweep lands in the store, resumes after a crash, and the CLI drives it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

pytest.importorskip("torch")
pytest.importorskip("sklearn")

import curvekit
from curvekit.cli import main
from curvekit.errors import RunError
from tests.patience import PATIENCE

TINY: dict[str, Any] = dict(dataset="digits", model="fc_32", optimizers=["nesterov_momentum"],
                            batch_sizes=[16, 64], trials=3, steps=200, eval_every=50,
                            device="cpu", seed=3)


def parts(work: Path) -> dict[str, float]:
    return {str(p.relative_to(work)): p.stat().st_mtime_ns
            for p in sorted(work.glob("parts/**/*.parquet"))}


def test_tiny_sweep_lands_in_the_store_and_is_queryable(tmp_path: Path) -> None:
    home = tmp_path / "home"
    result = curvekit.run("tiny", **TINY, home=home)
    workload = "tiny/fc_32/nesterov_momentum"
    assert result.workloads == [workload]
    assert (result.trials, result.ran, result.resumed) == (6, 6, 0)
    assert sum(result.statuses.values()) == 6
    store = curvekit.open(home)
    assert workload in store.workloads()
    studies = store.studies(workload)
    assert sorted(studies["batch_size"].to_list()) == [16, 64]
    configs = json.loads(studies["parameter_configs"][0])
    assert configs["momentum"]["scale"] == "REVERSE_LOG_SCALE"
    assert studies["train_steps"].to_list() == [200, 200]
    trials = store.trials(workload)
    assert trials.height == 6
    assert {"learning_rate", "momentum", "end_learning_rate_factor",
            "learning_rate_decay_steps"} <= set(trials.columns)
    rows = store.sql("select count(distinct step) as n, max(step) as last from measurements "
                     "where base_dir = 'tiny' and trial_id = 1 and batch_size = 16")
    assert rows.to_dicts() == [{"n": 5, "last": 200}]
    assert "val/classification_error" in store.metrics(workload)
    curve = curvekit.steps_to_result(
        store, curvekit.Selection(workload, "val/classification_error", 0.5))
    assert sorted(curve["batch_size"].to_list()) == [16, 64]
    # The same command again finds everything done and changes nothing in the store.
    again = curvekit.run("tiny", **TINY, home=home)
    assert (again.ran, again.resumed) == (0, 6)
    assert [a.changed for a in again.added] == [False]


def test_interrupted_sweep_resumes_keeping_finished_trials(tmp_path: Path) -> None:
    work = tmp_path / "work"

    def crash_after_two(stage: str, done: int, total: int | None) -> None:
        if done == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        curvekit.run("tiny", **TINY, work_dir=work, store=False, progress=crash_after_two)
    kept = parts(work)
    assert len(kept) == 2
    resumed = curvekit.run("tiny", **TINY, work_dir=work, store=False)
    assert (resumed.ran, resumed.resumed) == (4, 2)
    after = parts(work)
    assert len(after) == 6
    assert all(after[p] == t for p, t in kept.items())  # finished parts were not redone
    # The resumed sweep equals one that was never interrupted, run in two processes.
    fresh = tmp_path / "fresh"
    curvekit.run("tiny", **TINY, work_dir=fresh, store=False, workers=2)
    for name in after:
        assert pq.read_table(work / name).equals(pq.read_table(fresh / name))


# The sweep stops in the middle of writing its second part (the file written, not yet
# renamed into place), says so on stdout and waits there to be killed: the kill lands at
# that moment however busy the machine is.
_STOP_AT_SECOND_PART = """
import os, sys, threading
import curvekit
import curvekit.outputs as outputs
rename, written = os.replace, []
def replace(src, dst):
    if str(dst).endswith(".parquet"):
        written.append(dst)
        if len(written) == 2:
            print("writing the second part", flush=True)
            threading.Event().wait()
    rename(src, dst)
outputs.os.replace = replace
curvekit.run("tiny", **{options!r}, work_dir={work!r}, store=False)
"""


def test_killed_process_resumes(tmp_path: Path) -> None:
    work = tmp_path / "work"
    options = {**TINY, "batch_sizes": [8, 16]}
    script = _STOP_AT_SECOND_PART.format(options=options, work=str(work))
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == "writing the second part\n"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(timeout=PATIENCE)
    kept = parts(work)
    assert len(kept) == 1
    assert len(list(work.glob("parts/**/.*"))) == 1  # the part being written when killed
    resumed = curvekit.run("tiny", **options, work_dir=work, store=False)
    assert not list(work.glob("parts/**/.*"))  # the half-written part was cleared away
    assert resumed.resumed == 1 and resumed.ran == 5
    assert all(parts(work)[p] == t for p, t in kept.items())


def test_more_trials_and_batch_sizes_later_keep_the_first_ones(tmp_path: Path) -> None:
    work = tmp_path / "work"
    options = {**TINY, "batch_sizes": [64], "steps": 50}
    curvekit.run("tiny", **{**options, "trials": 2}, work_dir=work, store=False)
    before = parts(work)
    more = curvekit.run("tiny", **{**options, "trials": 3}, work_dir=work, store=False)
    assert (more.ran, more.resumed) == (1, 2)
    wider = curvekit.run("tiny", **{**options, "trials": 3, "batch_sizes": [32, 64]},
                         work_dir=work, store=False)
    assert (wider.ran, wider.resumed) == (3, 3)
    assert all(parts(work)[p] == t for p, t in before.items())
    with pytest.raises(RunError, match=r"differs in batch_sizes"):
        curvekit.run("tiny", **{**options, "trials": 3, "batch_sizes": [32]},
                     work_dir=work, store=False)


def test_a_work_folder_of_another_sweep_is_refused(tmp_path: Path) -> None:
    work = tmp_path / "work"
    options = {**TINY, "batch_sizes": [64], "steps": 20, "trials": 1}
    curvekit.run("tiny", **options, work_dir=work, store=False)
    with pytest.raises(RunError,
                       match=r"holds another sweep \(it differs in seed, spaces, steps\)"):
        curvekit.run("tiny", **{**options, "seed": 4, "steps": 30}, work_dir=work, store=False)


def test_release_workload_names_are_refused(tmp_path: Path) -> None:
    with pytest.raises(RunError, match="mnist/fc_1024/sgd is a workload of the published"):
        curvekit.run("mnist", dataset="digits", model="fc_1024", optimizers=["sgd"],
                     batch_sizes=[8], trials=1, steps=1, home=tmp_path)


def test_cli_run_and_its_errors(tmp_path: Path) -> None:
    home = str(tmp_path / "home")
    space = tmp_path / "space.json"
    space.write_text(json.dumps({"learning_rate": {"type": "DOUBLE", "min_value": 0.05,
                                                   "max_value": 0.5, "scale": "LOG_SCALE"}}))
    argv = ["run", "cli", "--model", "fc-16", "--optimizer", "sgd", "--batch-sizes",
            "32,full", "--trials", "2", "--steps", "32:40,1197:10", "--eval-every", "10",
            "--space", str(space), "--device", "cpu", "--home", home]
    result = CliRunner().invoke(main, argv)
    assert result.exit_code == 0, result.output
    assert "4 trials (4 run now, 0 from" in result.output
    assert "In the store: cli/fc_16/sgd" in result.output
    info = CliRunner().invoke(main, ["query", "select batch_size, count(*) as n from trials "
                                     "where base_dir = 'cli' group by 1 order by 1",
                                     "--home", home, "--format", "csv"])
    assert info.output == "batch_size,n\n32,2\n1197,2\n"
    bad = CliRunner().invoke(main, ["run", "--model", "resnet_8", "--home", home])
    assert bad.exit_code == 1
    assert bad.output.startswith("Error: unknown model 'resnet_8'")
    bad = CliRunner().invoke(main, ["run", "--steps", "8=100", "--home", home])
    assert bad.exit_code == 2 and "BATCH:STEPS" in bad.output


def test_missing_torch_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch now raises ImportError
    with pytest.raises(RunError, match=r'pip install -e "\.\[train\]"'):
        curvekit.run("tiny", **TINY, home=tmp_path)
    # The demo needs no torch.
    assert curvekit.demo(tmp_path).trials == 528
