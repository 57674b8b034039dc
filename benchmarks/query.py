"""Benchmark: the paper's measurements on the full-scale store.

Side by side in one run:

* ``steps_to_result`` for one workload, warm (same process, median of repeats) and in a
  fresh process (``python -c``: import, open, query);
* steps to result for all 454 studies (every workload, one goal each);
* the reference approach on the same workload: the extracted files loaded with pandas
  (``read_csv`` per trial, ``json`` per metadata), then filtered and sorted with pandas.

With ``--output``, instead: ``curvekit query "select * from measurements"`` in each format,
the streaming command against the previous one (the whole result as one DataFrame, then
printed), run alternately in fresh processes; wall time, CPU time and peak memory of each.
Each command also runs the same query with ``limit 0`` (start-up: imports, opening the
store, planning the query, the header); the difference is the cost of the rows themselves,
reported per million rows.

Usage::

    python benchmarks/query.py            # needs the full archive from benchmarks/convert.py
    python benchmarks/query.py --output --name frac03 --trial-fraction 0.03
    python benchmarks/query.py --output --name frac15 --trial-fraction 0.15 --formats csv
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import WORK, archive, save, timed

WORKLOAD = "cifar_10/resnet_8/nesterov_momentum"
METRIC, GOAL, N = "val/classification_error", 0.3, 100

REFERENCE = r"""
import glob, json, os, sys
import pandas as pd
root, metric, goal, n = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
frames, trials = [], []
for study in sorted(glob.glob(os.path.join(root, "*"))):
    bs = int(os.path.basename(study))
    for trial_dir in glob.glob(os.path.join(study, "*", "")):
        with open(os.path.join(trial_dir, "metadata.json")) as fh:
            meta = json.load(fh)
        trials.append((bs, meta["trial_id"], meta["status"]))
        frame = pd.read_csv(os.path.join(trial_dir, "measurements.csv"))
        frame["batch_size"], frame["trial_id"] = bs, meta["trial_id"]
        frames.append(frame)
data = pd.concat(frames, ignore_index=True)
t = pd.DataFrame(trials, columns=["batch_size", "trial_id", "status"])
t = t[t.status == "COMPLETE"].sort_values(["batch_size", "trial_id"]).groupby("batch_size").head(n)
data = data.merge(t[["batch_size", "trial_id"]], on=["batch_size", "trial_id"])
hits = data[data[metric] < goal].sort_values(["batch_size", "step", "trial_id"])
print(hits.groupby("batch_size").first()[["step", "trial_id"]].reset_index().to_csv(index=False))
"""

FRESH = r"""
import sys, curvekit
curve = curvekit.steps_to_result(curvekit.open(sys.argv[1]), curvekit.Selection(
    sys.argv[2], sys.argv[3], float(sys.argv[4]), trials=int(sys.argv[5])))
print(curve.select("batch_size", "step", "trial_id").write_csv())
"""


def goal_for(metrics: list[str]) -> tuple[str, float, bool]:
    """One goal per workload for the all-studies run (the paper's usual metrics)."""
    if "val/average_precision" in metrics:
        return "val/average_precision", 0.3, True
    if "val/classification_error" in metrics:
        return "val/classification_error", 0.3, False
    return "val/cross_entropy_error", 4.0, False


def extracted(path: Path, workload: str) -> Path:
    """The workload's folder extracted from the archive once (cached)."""
    root = WORK / "extracted"
    target = root / "batch_science" / workload
    if not target.exists():
        root.mkdir(parents=True, exist_ok=True)
        unzip = "lbzip2" if shutil.which("lbzip2") else "bzip2"
        subprocess.run(f"{unzip} -dc '{path}' | tar -x -C '{root}' 'batch_science/{workload}'",
                       shell=True, check=True)
    return target


# The query command before streaming: the whole result as one DataFrame, then printed.
PREVIOUS = r"""
import sys
from curvekit.cli import emit
from curvekit.store.store import Store
emit(Store.open(sys.argv[1]).sql(sys.argv[2]), sys.argv[3])
"""


def measured(label: str, argv: list[str]) -> dict[str, object]:
    """Run a command with stdout to /dev/null: wall time, CPU time (user + system) and the
    peak resident memory the kernel recorded for it."""
    with open(os.devnull, "wb") as sink, open(WORK / "stderr.txt", "w+b") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=sink, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode:
            err.seek(0)
            raise SystemExit(f"{label} failed: {err.read().decode()[-2000:]}")
    return {"label": label, "seconds": seconds, "cpu_s": usage.ru_utime + usage.ru_stime,
            "peak_rss_mb": usage.ru_maxrss / 1024}


def _medians(runs: list[dict[str, object]]) -> dict[str, float]:
    return {m: statistics.median(float(r[m]) for r in runs)  # type: ignore[arg-type]
            for m in ("seconds", "cpu_s", "peak_rss_mb")}


def output(home: Path, repeat: int, rows: int | None, rows_in_store: int,
           formats: list[str]) -> dict[str, object]:
    """Streaming ``curvekit query`` against the previous command, alternately, each with
    every row of the query and with none (``limit 0``: the start-up alone)."""
    results: dict[str, object] = {}
    for fmt in formats:
        limit = rows if rows is not None and fmt != "csv" else None
        sql = "select * from measurements" + (f" limit {limit}" if limit is not None else "")
        count = min(limit, rows_in_store) if limit is not None else rows_in_store
        empty = f"select * from ({sql}) limit 0"
        runs: dict[str, list[dict[str, object]]] = {
            "new": [], "previous": [], "new_start": [], "previous_start": []}
        for _ in range(repeat):
            for key, query in (("", sql), ("_start", empty)):
                runs["new" + key].append(measured(f"query {fmt}{key}", [
                    sys.executable, "-m", "curvekit", "query", "--home", str(home), query,
                    "--format", fmt]))
                runs["previous" + key].append(measured(f"previous query {fmt}{key}", [
                    sys.executable, "-c", PREVIOUS, str(home), query, fmt]))
        med = {k: _medians(v) for k, v in runs.items()}
        # The rows' own cost: the whole command less its start-up, per million rows.
        per_m = {k: {m: (med[k][m] - med[k + "_start"][m]) / count * 1e6
                     for m in ("seconds", "cpu_s")} for k in ("new", "previous")}
        result = {"sql": sql, "rows": count, "runs": runs, "median": med,
                  "per_million_rows": per_m,
                  "speedup_wall": med["previous"]["seconds"] / med["new"]["seconds"],
                  "speedup_cpu": med["previous"]["cpu_s"] / med["new"]["cpu_s"],
                  "speedup_wall_per_row": per_m["previous"]["seconds"]
                  / per_m["new"]["seconds"],
                  "speedup_cpu_per_row": per_m["previous"]["cpu_s"] / per_m["new"]["cpu_s"],
                  "memory_ratio": med["previous"]["peak_rss_mb"]
                  / med["new"]["peak_rss_mb"]}
        results[fmt] = result
        new, old = med["new"], med["previous"]
        print(f"{fmt:5}  new {new['seconds']:6.1f} s {new['peak_rss_mb']:6.0f} MB  previous "
              f"{old['seconds']:6.1f} s {old['peak_rss_mb']:6.0f} MB  "
              f"x{result['speedup_wall']:.1f} wall, x{result['speedup_cpu']:.1f} cpu; "
              f"per row (start-up {med['new_start']['seconds']:.1f} s / "
              f"{med['previous_start']['seconds']:.1f} s left out) "
              f"x{result['speedup_wall_per_row']:.1f} wall, "
              f"x{result['speedup_cpu_per_row']:.1f} cpu", flush=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", default="full", help="cached archive name under _work")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--output", action="store_true",
                        help="benchmark query output (csv, json, table) instead")
    parser.add_argument("--trial-fraction", type=float, default=1.0,
                        help="when the archive is generated: fraction of the trials")
    parser.add_argument("--formats", default="csv,json,table",
                        help="with --output: the formats to run, comma-separated")
    parser.add_argument("--rows", type=int, default=500_000,
                        help="with --output: rows of the json and table runs (the previous "
                             "json needs about 4 KB of memory per row)")
    args = parser.parse_args()
    path, manifest = archive(args.name, trial_fraction=args.trial_fraction)
    home = WORK / f"home-{args.name}"
    if not (home / "store").exists():
        subprocess.run([sys.executable, "-m", "curvekit", "fetch", "--archive", str(path),
                        "--manifest", str(manifest), "--home", str(home), "--quiet"], check=True)
    import curvekit

    if args.output:
        rows_in_store = curvekit.open(home).metadata["counts"]["measurements"]
        result = {"rows_in_store": rows_in_store, "load_before": os.getloadavg(),
                  **output(home, args.repeat, args.rows, rows_in_store,
                           args.formats.split(",")),
                  "load_after": os.getloadavg()}
        print(f"results in {save(f'query-output-{args.name}', result)}")
        return

    store = curvekit.open(home)
    selection = curvekit.Selection(WORKLOAD, METRIC, GOAL, trials=N)
    curvekit.steps_to_result(store, selection)  # warm the caches
    warm = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        curve = curvekit.steps_to_result(store, selection)
        warm.append(time.perf_counter() - start)
    fresh = timed("fresh process", [sys.executable, "-c", FRESH, str(home), WORKLOAD, METRIC,
                                    str(GOAL), str(N)])
    start = time.perf_counter()
    studies = 0
    for workload in store.workloads():
        metric, goal, maximize = goal_for(store.metrics(workload))
        curvekit.steps_to_result(store, curvekit.Selection(workload, metric, goal, maximize))
        studies += store.studies(workload).height
    all_studies = time.perf_counter() - start
    folder = extracted(path, WORKLOAD)
    reference = timed("pandas on extracted files", [sys.executable, "-c", REFERENCE,
                                                    str(folder), METRIC, str(GOAL), str(N)])
    result = {
        "workload": WORKLOAD, "rows_in_store": store.metadata["counts"]["measurements"],
        "curve_points": curve.height,
        "warm_median_s": statistics.median(warm), "warm_min_s": min(warm),
        "fresh_process": fresh, "all_studies_s": all_studies, "studies": studies,
        "reference": reference,
        "speedup_warm": reference.seconds / statistics.median(warm),
        "speedup_fresh": reference.seconds / fresh.seconds,
    }
    out = save(f"query-{args.name}", result)
    print(f"steps_to_result warm  {result['warm_median_s'] * 1000:8.1f} ms (median of "
          f"{args.repeat})")
    print(f"steps_to_result fresh {fresh.seconds:8.2f} s (new process, import included)")
    print(f"all {studies} studies   {all_studies:8.2f} s")
    print(f"pandas reference      {reference.seconds:8.2f} s -> x{result['speedup_warm']:.0f} "
          f"warm, x{result['speedup_fresh']:.1f} fresh; results in {out}")


if __name__ == "__main__":
    main()
