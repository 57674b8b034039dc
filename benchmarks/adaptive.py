"""Benchmark of ``curvekit run --adaptive`` against the full sweep, on the demo's sgd workload.

Both train the demo's configuration (:data:`curvekit.runner.demo.DEMO_SWEEP`: digits,
fc_128_128_128, sgd, batch sizes 2 … 1,024 and the full batch, its budgets, an evaluation
every 10 steps, seed 0) on the CPU with ``--workers 2``, one after the other in this
process, each into a fresh home:

1. the full sweep: 24 trials at each of the 11 batch sizes (264 trials);
2. the adaptive run at ``val/classification_error`` < 0.05 with a budget of 105 trials
   (40% of 264) and the full sweep's own relative interval width as its target.

Both are fitted the same way (``curvekit fit --bootstrap 1000``, seed 0). The full sweep's
first N trials per study give the grid at about the adaptive run's trial count (without
training: a study's first N trials are the same trials). The workload is named
``demo/digits`` as the demo's, so its trials are the demo's: an adaptive study of N trials
holds the demo study's first N.

Usage::

    python benchmarks/adaptive.py                 # both runs, ~10-20 minutes on 2 cores
    python benchmarks/adaptive.py --full-from-demo  # the shipped demo as the full sweep
                                                  # (no full training; its time is not
                                                  # measured here)

Results: ``benchmarks/results/adaptive.json``; the tables in docs/running.md and
docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import WORK, save

METRIC, GOAL, BUDGET = "val/classification_error", 0.05, 105
RESULTS = Path(__file__).parent / "results"


def _sweep() -> dict[str, Any]:
    from curvekit.runner.demo import DEMO_SWEEP

    return {**DEMO_SWEEP, "optimizers": ["sgd"]}


def _fit(home: Path, workload: str, trials: int | None = None) -> dict[str, Any]:
    import curvekit
    from curvekit.scaling import fit_workload

    with curvekit.open(home) as store:
        selection = curvekit.Selection(workload, METRIC, GOAL, trials=trials)
        fit = fit_workload(store, selection, bootstrap_samples=1000, seed=0, explain=False)
        counts = store.trials(workload)
    row = fit.summary()
    b, low, high = row["b_crit"], row.get("b_crit_low"), row.get("b_crit_high")
    used = (sum(min(trials, int(n)) for n in counts.group_by("batch_size").len()["len"])
            if trials else counts.height)
    return {"trials": used, "b_crit": b, "low": low, "high": high, "s_min": row["s_min"],
            "points": row["points"],
            "width": None if low is None else (high - low) / b}


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _cpu() -> float:
    """CPU seconds of this process and its finished children (the trainer's workers)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(
        resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _compute(totals: dict[int, int]) -> dict[str, float]:
    """The trials' cost: examples processed (the rule's cost) and trial-seconds at the
    per-trial times the demo's 2-worker regeneration measured on an idle machine."""
    from curvekit.runner.adaptive import trial_cost

    sweep = _sweep()
    measured = json.loads((RESULTS / "run-demo-batched-2-workers.json").read_text())
    seconds = {int(b): v["mean_s"] for b, v in measured["per_batch_size"].items()}
    return {"examples": sum(n * trial_cost(sweep["steps"][b], b, sweep["eval_every"], 1797)
                            for b, n in totals.items()),
            "trial_seconds_idle": sum(n * seconds[b] for b, n in totals.items())}


def main() -> None:
    import curvekit
    from curvekit.runner.adaptive import Adaptive

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--full-from-demo", action="store_true",
                        help="use the shipped demo as the full sweep instead of training it")
    parser.add_argument("--label", default="adaptive")
    args = parser.parse_args()
    root = WORK / "adaptive"
    shutil.rmtree(root, ignore_errors=True)
    sweep = _sweep()
    workload = "demo/digits/fc_128_128_128/sgd"
    out: dict[str, Any] = {"date": datetime.now(UTC).isoformat(timespec="seconds"),
                           "machine": platform.machine(), "cpus": os.cpu_count(),
                           "workers": args.workers, "metric": METRIC, "goal": GOAL,
                           "trial_budget": BUDGET}
    full_home = root / "full"
    out["load_before_full"] = _load()
    if args.full_from_demo:
        curvekit.demo(full_home)
        out["full_seconds"] = None
    else:
        cpu = _cpu()
        start = time.perf_counter()
        result = curvekit.run(**sweep, device="cpu", workers=args.workers, home=full_home)
        out["full_seconds"] = time.perf_counter() - start
        out["full_cpu_seconds"] = _cpu() - cpu
        out["full_statuses"] = result.statuses
    out["load_after_full"] = _load()
    full = _fit(full_home, workload)
    out["full"] = full
    print(f"full sweep: {full}", file=sys.stderr)
    target = float(full["width"])
    adaptive_home = root / "adaptive"
    out["load_before_adaptive"] = _load()
    cpu = _cpu()
    start = time.perf_counter()
    result = curvekit.run(**{**sweep, "trials": None}, device="cpu", workers=args.workers,
                          home=adaptive_home,
                          adaptive=Adaptive(METRIC, GOAL, trial_budget=BUDGET,
                                            target_width=target, bootstrap=1000))
    out["adaptive_seconds"] = time.perf_counter() - start
    out["adaptive_cpu_seconds"] = _cpu() - cpu
    out["load_after_adaptive"] = _load()
    assert result.adaptive is not None
    last = result.adaptive.last
    out["adaptive"] = {"trials": last.trials, "b_crit": last.b_crit, "low": last.low,
                       "high": last.high, "width": last.width, "points": last.points,
                       "stopped": result.adaptive.stopped, "reason": result.adaptive.reason,
                       "statuses": result.statuses, "totals": last.totals,
                       "rounds": [r.to_json() for r in result.adaptive.rounds]}
    # the grid at about the adaptive run's trial count: the full sweep's first N per study
    per_study = max(1, round(last.trials / len(last.totals)))
    out["grid_same_trials"] = {"per_study": per_study,
                               **_fit(full_home, workload, trials=per_study)}
    inside = full["low"] <= (last.b_crit or float("nan")) <= full["high"]
    out["checks"] = {
        "b_crit_inside_full_interval": bool(inside),
        "trials_at_most_40_percent": last.trials <= BUDGET,
        "interval_no_wider": (last.width is not None and last.width <= full["width"]),
    }
    out["full_compute"] = _compute({b: 24 for b in last.totals})
    out["adaptive_compute"] = _compute(last.totals)
    out["compute_ratio"] = {k: out["adaptive_compute"][k] / out["full_compute"][k]
                            for k in out["full_compute"]}
    if out["full_seconds"]:
        out["time_ratio"] = out["adaptive_seconds"] / out["full_seconds"]
    print(f"adaptive: {out['adaptive']['trials']} trials, B_crit {last.b_crit} "
          f"[{last.low}–{last.high}] width {last.width}; {result.adaptive.reason}",
          file=sys.stderr)
    print(f"checks: {out['checks']}", file=sys.stderr)
    save(args.label, out)


if __name__ == "__main__":
    main()
