"""Benchmark and regeneration of the demo data set: ``curvekit run`` on this CPU.

Runs the demo sweep (:data:`curvekit.runner.demo.DEMO_SWEEP`: digits, fc_128_128_128, sgd
and nesterov_momentum, 11 batch sizes × 24 trials = 528 trials) from scratch on the CPU,
times it, reports trials per minute (overall and per batch size), and writes the result
into ``curvekit/_demo/`` (the files ``curvekit demo`` installs).

Usage::

    python benchmarks/run.py                 # fresh run, 1 worker, trials batched per study
    python benchmarks/run.py --trials-at-once 1   # the one-by-one trainer (30-45 min here)
    python benchmarks/run.py --workers 2     # faster on an idle machine
    python benchmarks/run.py --resume        # continue an interrupted run, then export
    python benchmarks/run.py --compare       # batched against one by one, per batch size

``--compare`` times, for every batch size of the demo and both of its optimizers, the
study's 24 trials trained together and the same 24 trials trained one by one, each trial
cut to the first ``--compare-steps`` steps of the protocol (evaluations every 10 steps
included; the same trials diverge both ways), in a fresh process each so that its peak
memory can be read, best of ``--compare-repeats`` alternating runs (the machine is
shared). Trials per minute are per full-length trial: the study's seconds ×
budget / steps timed (a study whose trials diverge early comes out faster both ways). It
does not touch the demo files; results in ``benchmarks/results/run-compare.json``.

The equivalent command line (without the export) is in docs/running.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import sys
import time
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import WORK, save

COMMAND = ("curvekit run demo/digits --dataset digits --model fc_128_128_128 "
           "--optimizer sgd,nesterov_momentum "
           "--batch-sizes 2,4,8,16,32,64,128,256,512,1024,full --trials-per-study 24 "
           "--steps 2:5000,4:3500,8:2500,16:1600,32:1200,64:800,128:600,256:500,512:500,"
           "1024:500,1197:500 --eval-every 10 --seed 0 --device cpu")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--resume", action="store_true",
                        help="keep the trials an earlier run finished")
    parser.add_argument("--out", type=Path, help="export folder (default curvekit/_demo)")
    parser.add_argument("--label", default="run-demo",
                        help="name of the results file under benchmarks/results/")
    parser.add_argument("--trials-at-once", type=int, default=None,
                        help="cap on trials trained together (default: whole studies)")
    parser.add_argument("--compare", action="store_true",
                        help="time batched against one-by-one training per batch size")
    parser.add_argument("--compare-steps", type=int, default=100)
    parser.add_argument("--compare-repeats", type=int, default=2)
    parser.add_argument("--time-study", nargs=4, metavar=("OPTIMIZER", "BATCH", "MODE", "STEPS"),
                        help=argparse.SUPPRESS)  # the child process of --compare
    args = parser.parse_args()
    if args.time_study:
        optimizer, batch, mode, steps = args.time_study
        time_study(optimizer, int(batch), mode, int(steps))
        return
    if args.compare:
        compare(args.compare_steps, args.compare_repeats)
        return

    import torch

    import curvekit
    from curvekit.runner.collect import sweep_tables
    from curvekit.runner.demo import DEMO_SWEEP, export_demo
    from curvekit.runner.parts import finished_trials
    from curvekit.runner.plan import Sweep

    work = WORK / ("demo-run" if args.label == "run-demo" else args.label)
    if work.exists() and not args.resume:
        shutil.rmtree(work)

    def progress(stage: str, done: int, total: int | None) -> None:
        if done % 24 == 0 or done == total:
            print(f"{done}/{total} trials, {time.perf_counter() - start:.0f} s", flush=True)

    options = {k: v for k, v in DEMO_SWEEP.items() if k != "name"}
    start = time.perf_counter()
    result = curvekit.run(DEMO_SWEEP["name"], **options, device="cpu",
                          workers=args.workers, work_dir=work, store=False,
                          progress=progress, trials_at_once=args.trials_at_once)
    wall = time.perf_counter() - start
    sweep = Sweep.from_json(__import__("json").loads((work / "plan.json").read_text()))
    specs = sweep.trial_specs()
    finished = finished_trials(work, specs)
    tables = sweep_tables(sweep, specs, finished, work)
    # Training time of every trial, including those an earlier (resumed) run finished.
    trial_seconds = sum(meta["seconds"] for meta, _, _ in finished.values())
    seconds: dict[int, list[float]] = defaultdict(list)
    for i, (meta, _, _) in finished.items():
        seconds[specs[i].batch_size].append(meta["seconds"])
    info = {"plan": sweep.to_json(), "command": COMMAND,
            "generated": {"date": datetime.now(UTC).date().isoformat(),
                          "seconds": round(wall, 1), "trials_run": result.ran,
                          "training_seconds_all_trials": round(trial_seconds, 1),
                          "workers": args.workers, "torch": torch.__version__,
                          "trials_at_once": args.trials_at_once or "study",
                          "load_average": list(os.getloadavg()),
                          "machine": platform.machine(), "statuses": result.statuses}}
    folder = export_demo(tables, info, work, args.out)
    size = sum(p.stat().st_size for p in folder.glob("*"))
    per_batch = {b: {"trials": len(v), "mean_s": round(statistics.mean(v), 2),
                     "trials_per_min": round(60 / statistics.mean(v), 1)}
                 for b, v in sorted(seconds.items())}
    out = save(args.label, {
        "command": COMMAND, "workers": args.workers, "wall_s": wall, "trials": result.trials,
        "trials_at_once": args.trials_at_once or "study", "load_average": list(os.getloadavg()),
        "trials_run": result.ran, "trials_per_min": 60 * result.ran / wall if result.ran else None,
        "per_batch_size": per_batch, "statuses": result.statuses, "demo_bytes": size,
        "all_trials_training_s": trial_seconds,
        "all_trials_per_min": 60 * len(finished) / trial_seconds,
        "torch": torch.__version__, "cpu_count": os.cpu_count()})
    print(f"{result.ran} trials in {wall:.0f} s: {60 * result.ran / max(wall, 1e-9):.1f} "
          f"trials/min; demo files {size / 1e6:.2f} MB in {folder}; results in {out}")


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def time_study(optimizer: str, batch: int, mode: str, steps: int) -> None:
    """Child of --compare: time one demo study's trials over ``steps`` steps; print JSON."""
    import json

    from curvekit.runner.batched import train_trials, trials_that_fit
    from curvekit.runner.demo import DEMO_SWEEP
    from curvekit.runner.plan import Sweep
    from curvekit.runner.train import _data, run_trial

    sweep = Sweep.create(DEMO_SWEEP["name"], dataset="digits", model=DEMO_SWEEP["model"],
                         optimizers=[optimizer], batch_sizes=[batch],
                         trials=DEMO_SWEEP["trials"], steps=DEMO_SWEEP["steps"][batch],
                         eval_every=DEMO_SWEEP["eval_every"], seed=DEMO_SWEEP["seed"])
    from dataclasses import replace

    specs = [replace(s, steps=min(steps, s.steps)) for s in sweep.trial_specs()]
    data = _data(specs[0], "cpu")  # loaded before the baseline, as a worker holds it
    group = min(len(specs), trials_that_fit(specs[0], data, "cpu")) if mode == "batched" else 1
    before = _status_kb("VmRSS")
    start = time.perf_counter()
    results = train_trials(specs) if mode == "batched" else [run_trial(s) for s in specs]
    seconds = time.perf_counter() - start
    print(json.dumps({"seconds": seconds, "trials": len(specs), "steps": specs[0].steps,
                      "group": group,
                      "steps_taken": sum(r.steps for r in results),
                      "infeasible": sum(r.status == "INFEASIBLE" for r in results),
                      "extra_peak_kb": max(0, _status_kb("VmHWM") - before)}))


def compare(steps: int, repeats: int) -> None:
    """Batched against one-by-one training of the demo's studies (see the docstring)."""
    import json
    import subprocess

    from curvekit.runner.demo import DEMO_SWEEP

    table = []
    load = [list(os.getloadavg())]
    for optimizer in DEMO_SWEEP["optimizers"]:
        for batch, budget in DEMO_SWEEP["steps"].items():
            row: dict[str, Any] = {"optimizer": optimizer, "batch_size": batch,
                                   "budget": budget}
            runs: dict[str, list[dict[str, Any]]] = {"batched": [], "one": []}
            for _ in range(repeats):  # alternating, so that both see the same load
                for mode in ("batched", "one"):
                    out = subprocess.run(
                        [sys.executable, __file__, "--time-study", optimizer, str(batch),
                         mode, str(steps)],
                        check=True, capture_output=True, text=True).stdout
                    runs[mode].append(json.loads(out.strip().splitlines()[-1]))
            for mode, tries in runs.items():
                got = min(tries, key=lambda run: run["seconds"])
                # Seconds of one full-length trial: the study's time per trial, scaled from
                # the steps timed to the budget.
                per_trial = got["seconds"] / got["trials"] * budget / got["steps"]
                row[mode] = {**got, "trials_per_min": 60 / per_trial,
                             # memory is held by one group at a time
                             "peak_mb_per_trial": got["extra_peak_kb"] / 1024 / got["group"]}
            fast, slow = row["batched"]["trials_per_min"], row["one"]["trials_per_min"]
            row["ratio"] = fast / slow
            table.append(row)
            load.append(list(os.getloadavg()))
            print(f"{optimizer:18s} {batch:5d}: batched {fast:7.1f} trials/min, one by one "
                  f"{slow:6.1f}, {fast / slow:.2f}x", flush=True)
    import torch

    out_path = save("run-compare", {
        "steps_timed": steps, "repeats_best_of": repeats, "rows": table,
        "load_average_during": load, "torch": torch.__version__,
        "cpu_count": os.cpu_count(), "machine": platform.machine()})
    print(f"results in {out_path}")


if __name__ == "__main__":
    main()
