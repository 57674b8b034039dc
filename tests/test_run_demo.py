"""The shipped demo data set: made by the runner from its plan, installed offline in seconds,
and its steps-to-result curves have the paper's shape."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pytest
from click.testing import CliRunner

import curvekit
from curvekit.cli import main
from curvekit.runner.demo import DEMO_DIR, DEMO_GOAL, DEMO_SWEEP, load_demo_tables
from curvekit.runner.plan import Sweep
from curvekit.scaling import fit_critical_batch, fit_regimes

FULL_BATCH = 1197
WORKLOADS = ["demo/digits/fc_128_128_128/sgd", "demo/digits/fc_128_128_128/nesterov_momentum"]


def demo_sweep() -> Sweep:
    options: dict[str, Any] = {k: v for k, v in DEMO_SWEEP.items() if k != "name"}
    options["batch_sizes"] = [FULL_BATCH if b == "full" else b for b in options["batch_sizes"]]
    return Sweep.create(DEMO_SWEEP["name"], **options)


def test_the_shipped_files_are_the_plan_s_trials() -> None:
    tables, info = load_demo_tables()
    size = sum(p.stat().st_size for p in DEMO_DIR.iterdir())
    assert size < 5_000_000
    sweep = demo_sweep()
    assert info["plan"] == json.loads(json.dumps(sweep.to_json()))
    specs = sweep.trial_specs()
    assert len(specs) == 2 * 11 * 24
    shipped = {(r["optimizer"], r["batch_size"], r["trial_id"]): r
               for r in tables["trials"].to_pylist()}
    assert len(shipped) == len(specs)
    for spec in specs:
        row = shipped[(spec.optimizer, spec.batch_size, spec.trial_id)]
        # Every trial's metaparameters are the quasi-random point the plan gives it.
        assert json.loads(row["parameters"]) == spec.parameters
        assert row["status"] in ("COMPLETE", "INFEASIBLE")
        assert row["steps"] <= spec.steps
        assert row["steps"] == spec.steps or row["status"] == "INFEASIBLE"
    assert set(tables["measurements"].column_names) >= {
        "step", "train/classification_error", "val/cross_entropy_error",
        "test/classification_error"}


def test_demo_installs_offline_in_seconds_and_is_idempotent(tmp_path: Path) -> None:
    # CPU time, not the clock: other work on a busy machine does not lengthen it.
    start = time.process_time()
    result = curvekit.demo(tmp_path)
    assert time.process_time() - start < 20
    assert sorted(result.workloads) == sorted(WORKLOADS)
    assert result.changed and result.trials == 528
    again = CliRunner().invoke(main, ["demo", "--home", str(tmp_path)])
    assert again.exit_code == 0, again.output
    assert again.output.startswith("Already in the store: ")
    store = curvekit.open(tmp_path)
    assert set(WORKLOADS) <= set(store.workloads())
    assert store.studies(WORKLOADS[0]).height == 11


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory: pytest.TempPathFactory) -> Any:
    home = tmp_path_factory.mktemp("demo-home")
    curvekit.demo(home)
    return curvekit.open(home)


@pytest.mark.parametrize("workload", WORKLOADS)
def test_demo_curves_have_the_paper_s_shape(demo_store: Any, workload: str) -> None:
    metric, goal = DEMO_GOAL
    curve = curvekit.steps_to_result(demo_store, curvekit.Selection(workload, metric, goal))
    sizes, steps = curve["batch_size"].to_list(), curve["step"].to_list()
    assert len(sizes) >= 10 and sizes[0] == 2 and sizes[-1] >= 1024
    fit = fit_regimes(sizes, steps)
    # Perfect scaling at the small batch sizes, then (for sgd) diminishing returns, then a
    # plateau: the paper's shape.
    assert fit.segments[0] == "perfect" and fit.segments[-1] == "plateau", fit
    assert fit.perfect_scaling_end is not None and 4 <= fit.perfect_scaling_end <= 64
    assert fit.max_useful_batch_size is not None and 32 <= fit.max_useful_batch_size <= 512
    if "diminishing" in fit.segments:
        assert fit.diminishing_slope is not None and -0.95 < fit.diminishing_slope < -0.05
    # Going from batch size 2 to the plateau saves at least 8x the steps, not 500x.
    assert 8 <= steps[0] / min(steps) <= 200
    critical = fit_critical_batch(sizes, steps)
    assert 4 <= critical.b_crit <= 256


REGIMES = {WORKLOADS[0]: "perfect+diminishing+plateau", WORKLOADS[1]: "perfect+plateau"}


@pytest.mark.parametrize("workload", WORKLOADS)
def test_the_regimes_the_readme_names_are_the_ones_fit_finds(demo_store: Any,
                                                             workload: str) -> None:
    """README, the demo data set: `curvekit fit` finds the paper's three regimes in the sgd
    workload, and two (perfect scaling, then a plateau) in the nesterov_momentum one."""
    metric, goal = DEMO_GOAL
    [row] = curvekit.fit(demo_store, curvekit.Selection(workload, metric, goal),
                         explain=False)
    assert row["model"] == REGIMES[workload]
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    section = readme.split("## Try it on real curves", 1)[1].split("\n## ", 1)[0]
    text = " ".join(section.split())
    assert ("finds the paper's three regimes in the sgd workload: perfect scaling up to batch "
            "size ~6, diminishing returns up to ~100, then a plateau") in text
    assert ("The nesterov_momentum workload has two: perfect scaling up to ~40, then a "
            "plateau") in text
    ends = {WORKLOADS[0]: (6, 96), WORKLOADS[1]: (38, 38)}[workload]
    assert (round(float(row["perfect_scaling_end"])),  # type: ignore[arg-type]
            round(float(row["max_useful_batch_size"]))) == ends  # type: ignore[arg-type]


# torch promises the same numbers only on the same machine, build and thread count, not
# across CPUs: another CPU's vector units may order float32 sums differently (one seen:
# 2.2841807073021094 vs 2.2841805033416875, 9e-8 apart). Values are compared to this
# relative tolerance, two orders of magnitude above that drift; what is exact by
# construction (steps, trial ids, statuses, which values are finite) is compared exactly.
RERUN_RTOL = 1e-5


def test_a_shipped_trial_reruns_to_the_same_curve() -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("sklearn")
    from curvekit.runner.batched import train_trials
    from curvekit.runner.train import run_trial

    tables, info = load_demo_tables()
    made_with = info["generated"]["torch"].split("+")[0]
    if torch.__version__.split("+")[0] != made_with:
        pytest.skip(f"the demo was made with torch {made_with}, this is {torch.__version__}: "
                    f'pip install "torch=={made_with}" to rerun its trials')
    spec = next(s for s in demo_sweep().trial_specs()
                if (s.optimizer, s.batch_size, s.trial_id) == ("nesterov_momentum", 128, 3))
    # The demo says how it was trained: its study together, or one by one. Trained alone, a
    # trial of a batched study differs from its shipped curve by float rounding only
    # (1.7e-7 relative here), well inside RERUN_RTOL.
    batched = info["generated"].get("trials_at_once", 1) != 1
    result = train_trials([spec])[0] if batched else run_trial(spec)
    m = tables["measurements"]
    rows = m.filter(pc.and_(pc.and_(pc.equal(m["optimizer"], "nesterov_momentum"),
                                    pc.equal(m["batch_size"], 128)),
                            pc.equal(m["trial_id"], 3)))
    trial = tables["trials"].filter(pc.and_(
        pc.and_(pc.equal(tables["trials"]["optimizer"], "nesterov_momentum"),
                pc.equal(tables["trials"]["batch_size"], 128)),
        pc.equal(tables["trials"]["trial_id"], 3))).to_pylist()
    assert len(trial) == 1
    assert (result.status, result.steps) == (trial[0]["status"], trial[0]["steps"])
    assert rows.num_rows == len(result.columns["step"])
    assert set(rows["trial_id"].to_pylist()) == {3}
    assert rows["step"].to_pylist() == result.columns["step"]
    for name, values in result.columns.items():
        if name == "step":
            continue
        shipped = rows[name].to_pylist()
        assert [math.isfinite(v) for v in shipped] == [math.isfinite(v) for v in values], name
        for step, old, new in zip(result.columns["step"], shipped, values, strict=True):
            if math.isfinite(old):
                assert math.isclose(new, old, rel_tol=RERUN_RTOL, abs_tol=1e-12), (
                    f"{name} at step {step}: {new} != {old} within rtol {RERUN_RTOL}")
