"""Benchmark and regeneration of the demo data set: ``curvekit run`` on this CPU.

Runs the demo sweep (:data:`curvekit.runner.demo.DEMO_SWEEP`: digits, fc_128_128_128, sgd
and nesterov_momentum, 11 batch sizes × 24 trials = 528 trials) from scratch on the CPU,
times it, reports trials per minute (overall and per batch size), and writes the result
into ``curvekit/_demo/`` (the files ``curvekit demo`` installs).

Usage::

    python benchmarks/run.py                 # fresh run, 1 worker (about 30-45 min here)
    python benchmarks/run.py --workers 2     # faster on an idle machine
    python benchmarks/run.py --resume        # continue an interrupted run, then export

The equivalent command line (without the export) is in docs/running.md.
"""

from __future__ import annotations

import argparse
import platform
import shutil
import statistics
import sys
import time
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

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
    args = parser.parse_args()

    import torch

    import curvekit
    from curvekit.runner.collect import sweep_tables
    from curvekit.runner.demo import DEMO_SWEEP, export_demo
    from curvekit.runner.parts import finished_trials
    from curvekit.runner.plan import Sweep

    work = WORK / "demo-run"
    if work.exists() and not args.resume:
        shutil.rmtree(work)

    def progress(stage: str, done: int, total: int | None) -> None:
        if done % 24 == 0 or done == total:
            print(f"{done}/{total} trials, {time.perf_counter() - start:.0f} s", flush=True)

    options = {k: v for k, v in DEMO_SWEEP.items() if k != "name"}
    start = time.perf_counter()
    result = curvekit.run(DEMO_SWEEP["name"], **options, device="cpu",
                          workers=args.workers, work_dir=work, store=False,
                          progress=progress)
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
                          "machine": platform.machine(), "statuses": result.statuses}}
    folder = export_demo(tables, info, work, args.out)
    size = sum(p.stat().st_size for p in folder.glob("*"))
    per_batch = {b: {"trials": len(v), "mean_s": round(statistics.mean(v), 2),
                     "trials_per_min": round(60 / statistics.mean(v), 1)}
                 for b, v in sorted(seconds.items())}
    out = save("run-demo", {
        "command": COMMAND, "workers": args.workers, "wall_s": wall, "trials": result.trials,
        "trials_run": result.ran, "trials_per_min": 60 * result.ran / wall if result.ran else None,
        "per_batch_size": per_batch, "statuses": result.statuses, "demo_bytes": size,
        "all_trials_training_s": trial_seconds,
        "all_trials_per_min": 60 * len(finished) / trial_seconds,
        "torch": torch.__version__, "cpu_count": __import__("os").cpu_count()})
    print(f"{result.ran} trials in {wall:.0f} s: {60 * result.ran / max(wall, 1e-9):.1f} "
          f"trials/min; demo files {size / 1e6:.2f} MB in {folder}; results in {out}")


if __name__ == "__main__":
    main()
