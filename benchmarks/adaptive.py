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
    python benchmarks/adaptive.py --replay        # simulated: no training, ~1 minute

**Replay.** An adaptive study of N trials holds the same trials as the demo's study of 24
(the first N points of the same quasi-random sequence, with the same seeds), so the
adaptive run can be simulated without training: each round reads its trials' steps to
result from the shipped demo's sgd sweep and fits them exactly as a round does
(:func:`curvekit.runner.adaptive.run_rounds` and :func:`~curvekit.runner.adaptive.fitted_round`
with the calibrated interval), studies capped at the sweep's 24 trials. Trained again, a
trial agrees with the demo's to float32 rounding only (the demo trained 24 trials at once,
an adaptive round trains fewer together; see "Trials trained together" in
docs/running.md), and a trial whose metric hovers at the goal can cross it at another
evaluation: a replay is the run on the demo's draws, a real run makes its own. Beyond the
sweep's own order, ``--orders K`` replays K − 1 shuffles of each study's 24 trials (other
draws of the same search) to show how the rule fares over resamplings of trial order.
Results: ``benchmarks/results/adaptive-replay.json``.

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


def _demo_hits(home: Path, workload: str) -> dict[int, dict[int, float]]:
    """The full sweep's loaded trials: batch size → trial id → first step at the goal."""
    import math

    import curvekit
    from curvekit.measure import trial_hits

    with curvekit.open(home) as store:
        frame = trial_hits(store, curvekit.Selection(workload, METRIC, GOAL))
    out: dict[int, dict[int, float]] = {}
    for b, trial, step in zip(frame["batch_size"].to_list(), frame["trial_id"].to_list(),
                              frame["step"].to_list(), strict=True):
        out.setdefault(int(b), {})[int(trial)] = math.inf if step is None else float(step)
    return out


class _Replayed:
    """A fit's summary as :func:`curvekit.runner.adaptive.fitted_round` reads it."""

    def __init__(self, hits: dict[int, list[float]], samples: int) -> None:
        import numpy as np

        from curvekit.intervals import critical_intervals
        from curvekit.scaling import beyond_measured, critical_point

        best = {b: min(h) for b, h in hits.items() if h and min(h) < float("inf")}
        sizes = sorted(best)
        crit = critical_intervals(hits, samples=samples, seed=0)  # FitError below 3 sizes
        # the point every fit reports (the bias-corrected estimate where it is available)
        point = critical_point(hits, np.array(sizes, dtype=float),
                               np.array([best[b] for b in sizes], dtype=float)).b_crit
        low, high = crit.intervals.get("b_crit", (None, None))
        self.row: dict[str, Any] = {"b_crit": point, "b_crit_low": low, "b_crit_high": high,
                    "points": len(sizes), "b_crit_beyond": beyond_measured(point, sizes),
                    "b_crit_low_beyond": beyond_measured(low, sizes),
                    "b_crit_high_beyond": beyond_measured(high, sizes)}
        if "b_crit" in crit.reasons:
            self.row["b_crit_interval_note"] = crit.reasons["b_crit"]

    def summary(self) -> dict[str, Any]:
        return self.row


def replay(full: dict[int, dict[int, float]], target: float, *, order: int | None,
           bootstrap: int = 1000, initial: int = 2) -> dict[str, Any]:
    """The adaptive run simulated on the full sweep: its trial k at batch size b is the
    sweep's trial k there (``order`` None), or the k-th of the sweep's trials shuffled
    with that seed, per batch size (another draw of the same search); nothing trains."""
    import tempfile

    import numpy as np

    from curvekit.runner.adaptive import Adaptive, fitted_round, run_rounds, trial_cost

    sweep = _sweep()
    sizes = sorted(full)
    total = int(sweep["trials"])
    rng = np.random.default_rng(order)
    ids = {b: (list(range(1, total + 1)) if order is None
               else [int(i) + 1 for i in rng.permutation(total)]) for b in sizes}
    costs = {b: trial_cost(sweep["steps"][b], b, sweep["eval_every"], 1797) for b in sizes}
    settings = Adaptive(METRIC, GOAL, trial_budget=BUDGET, target_width=target,
                        bootstrap=bootstrap)

    def fit_round(counts: dict[int, int], rounds: list[Any]) -> tuple[Any, Any]:
        hits = {b: [full[b][i] for i in ids[b][:counts.get(b, 0)] if i in full[b]]
                for b in sizes}
        return hits, fitted_round(rounds[-1], hits, lambda: _Replayed(hits, bootstrap))

    with tempfile.TemporaryDirectory() as work:
        result = run_rounds(Path(work), settings, batch_sizes=sizes, initial=initial,
                            costs=costs, seed=int(sweep["seed"]), train=lambda counts: None,
                            fit_round=fit_round, publish=lambda *args: None, cap=total)
    last = result.last
    return {"order": order, "trials": last.trials, "b_crit": last.b_crit, "low": last.low,
            "high": last.high, "width": last.width, "stopped": result.stopped,
            "rounds": len(result.rounds), "totals": last.totals,
            "round_by_round": [{"round": r.number, "trials": r.trials, "added": r.added,
                                "b_crit": r.b_crit, "low": r.low, "high": r.high,
                                "width": r.width, "note": r.note} for r in result.rounds],
            "first_interval_after": next((r.trials for r in result.rounds
                                          if r.width is not None), None)}


def replays(orders: int, label: str) -> dict[str, Any]:
    """Replays of the adaptive run on the shipped demo's sgd sweep: in the sweep's trial
    order, then in ``orders - 1`` shuffles of each study's trials (seeds 1, 2, …), each
    checked against the targets; written to ``benchmarks/results/<label>.json``."""
    import tempfile

    import curvekit

    workload = "demo/digits/fc_128_128_128/sgd"
    with tempfile.TemporaryDirectory() as home:
        curvekit.demo(home)
        full_fit = _fit(Path(home), workload)
        full = _demo_hits(Path(home), workload)
    target = float(full_fit["width"])
    runs = []
    for order in [None, *range(1, orders)]:
        start = time.perf_counter()
        one = replay(full, target, order=order)
        b = one["b_crit"]
        one["checks"] = {
            "b_crit_inside_full_interval": b is not None
            and full_fit["low"] <= b <= full_fit["high"],
            "trials_at_most_40_percent": one["trials"] <= BUDGET,
            "interval_no_wider": one["width"] is not None and one["width"] <= target}
        one["seconds"] = time.perf_counter() - start
        runs.append(one)
        print(f"order {order}: {one['trials']} trials, B_crit {b} [{one['low']}–"
              f"{one['high']}] width {one['width']}; {one['checks']}", file=sys.stderr)
    met = sum(all(r["checks"].values()) for r in runs)
    out = {"date": datetime.now(UTC).isoformat(timespec="seconds"), "metric": METRIC,
           "goal": GOAL, "trial_budget": BUDGET, "full": full_fit, "target_width": target,
           "replays": runs, "all_targets_met": met, "of": len(runs)}
    print(f"all targets met in {met} of {len(runs)} replays", file=sys.stderr)
    save(label, out)
    return out


def main() -> None:
    import curvekit
    from curvekit.runner.adaptive import Adaptive

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--full-from-demo", action="store_true",
                        help="use the shipped demo as the full sweep instead of training it")
    parser.add_argument("--label", default="adaptive")
    parser.add_argument("--replay", action="store_true",
                        help="simulate the adaptive run on the shipped demo's full sweep "
                             "instead of training (seconds per run)")
    parser.add_argument("--orders", type=int, default=6,
                        help="with --replay: the sweep's trial order and this many less one "
                             "shuffles of it")
    args = parser.parse_args()
    if args.replay:
        replays(args.orders, args.label + "-replay")
        return
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
