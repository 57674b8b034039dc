"""Benchmark: PD1 in the store, side by side with the release.

In one run, on generated archives:

* conversion of a **PD1-sized** look-alike (``pd1_full_scale_kwargs``: 400 matched Halton
  points per task, about 46,000 trial lines) with ``curvekit fetch --dataset pd1
  --archive``, its peak memory (process tree), next to ``gzip -dc > /dev/null`` of the same
  file (decompression alone) and to reading every line with ``json.loads`` and nothing
  else (the floor of any reader of PD1's JSON Lines in Python);
* conversion of a generated **release** archive (``--release-fraction`` of its published
  trial counts) with ``curvekit fetch --archive``, next to ``bzip2 -dc > /dev/null``;
* each conversion's throughput in stored measurement rows per second (one row per
  evaluation and metric), so the two are compared per row;
* ``curvekit.steps_to_result`` on a PD1 task (CIFAR-10 WRN, two batch sizes, at its default
  goal) and on the release's CIFAR-10 ResNet-8 (at its paper goal), in-process, median of
  ``--repeat`` calls on an open store, and the same through the command line (process
  start included).

Usage::

    python benchmarks/pd1.py                              # PD1-sized, release at 5%
    python benchmarks/pd1.py --points 100 --release-fraction 0.02   # a quicker look
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import WORK, archive, du, save, timed

PD1_TASK = "pd1/cifar10/wide_resnet/nesterov_momentum"
RELEASE_TASK = "cifar_10/resnet_8/nesterov_momentum"


def pd1_archive(points: int) -> tuple[Path, Path]:
    """A generated PD1 archive and its manifest, made once and cached under WORK."""
    from curvekit import structured
    from curvekit.release.pd1_synthetic import generate_pd1, pd1_full_scale_kwargs

    WORK.mkdir(parents=True, exist_ok=True)
    path = WORK / f"pd1-{points}.tar.gz"
    manifest = WORK / f"pd1-{points}.tar.gz.manifest.json"
    if not (path.exists() and manifest.exists()):
        kwargs: dict[str, Any] = pd1_full_scale_kwargs()
        if points != kwargs["points"]:
            kwargs = {"points": points, "phase0_points": max(2, points // 4),
                      "unmatched_points": points * 3}
        start = time.perf_counter()
        m = generate_pd1(path, **kwargs)
        manifest.write_text(structured.dumps(m.to_dict(), indent=1))
        print(f"generated {path} in {time.perf_counter() - start:.0f} s", flush=True)
    return path, manifest


JSON_FLOOR = r"""
import gzip, json, sys, tarfile
n = 0
with tarfile.open(sys.argv[1], "r|gz") as tar:
    for m in tar:
        if m.name.endswith(".jsonl.gz"):
            with gzip.open(tar.extractfile(m)) as fh:
                for line in fh:
                    json.loads(line)
                    n += 1
print(n)
"""


def rows(home: Path) -> int:
    import curvekit

    frame = curvekit.query("select count(*) as n from measurements", home)
    return int(frame["n"][0])


def steps_timing(home: Path, workload: str, repeat: int) -> dict[str, Any]:
    import curvekit
    from curvekit.goals import default_goal

    store = curvekit.open(home)
    goal = default_goal(store, workload)
    selection = goal.selection
    curvekit.steps_to_result(store, selection, explain=False)  # warm: views, footers
    seconds = []
    for _ in range(repeat):
        start = time.perf_counter()
        result = curvekit.steps_to_result(store, selection, explain=False)
        seconds.append(time.perf_counter() - start)
    trials = store.trials(workload).height
    store.close()
    cli = timed(f"curvekit steps-to-result {workload}", [
        sys.executable, "-m", "curvekit", "steps-to-result", workload, "--home", str(home),
        "--metric", goal.metric, "--goal", repr(goal.goal), "--format", "csv"]
        + (["--maximize"] if goal.maximize else []))
    return {"workload": workload, "goal": f"{goal.metric} {'>' if goal.maximize else '<'} "
            f"{goal.goal}", "goal_source": goal.source, "trials": trials,
            "batch_sizes": result.height, "median_seconds": statistics.median(seconds),
            "runs": seconds, "cli": cli}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=400,
                        help="matched phase-1 points per task (PD1: 400)")
    parser.add_argument("--release-fraction", type=float, default=0.05)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    pd1, pd1_manifest = pd1_archive(args.points)
    release, release_manifest = archive(f"f{args.release_fraction:g}",
                                        trial_fraction=args.release_fraction, order="walk")
    homes = {k: Path(tempfile.mkdtemp(prefix=f"ck-{k}-", dir=WORK)) for k in ("pd1", "rel")}
    runs = [
        timed("gzip -dc pd1 > /dev/null", f"gzip -dc '{pd1}' > /dev/null", shell=True),
        timed("gzip + json.loads per line", [sys.executable, "-c", JSON_FLOOR, str(pd1)]),
        timed("curvekit fetch --dataset pd1", [
            sys.executable, "-m", "curvekit", "fetch", "--dataset", "pd1", "--archive",
            str(pd1), "--manifest", str(pd1_manifest), "--home", str(homes["pd1"]),
            "--quiet"]),
        timed("bzip2 -dc release > /dev/null", f"bzip2 -dc '{release}' > /dev/null",
              shell=True),
        timed("curvekit fetch (release)", [
            sys.executable, "-m", "curvekit", "fetch", "--archive", str(release),
            "--manifest", str(release_manifest), "--home", str(homes["rel"]), "--quiet"]),
    ]
    counts = {k: rows(h) for k, h in homes.items()}
    conversion = {
        "pd1": {"archive_bytes": pd1.stat().st_size, "store_bytes": du(homes["pd1"] / "store"),
                "rows": counts["pd1"], "seconds": runs[2].seconds,
                "peak_rss_mb": runs[2].peak_rss_mb,
                "rows_per_second": counts["pd1"] / runs[2].seconds,
                "over_decompression": runs[2].seconds / runs[0].seconds,
                "over_json_parse": runs[2].seconds / runs[1].seconds},
        "release": {"archive_bytes": release.stat().st_size,
                    "store_bytes": du(homes["rel"] / "store"), "rows": counts["rel"],
                    "seconds": runs[4].seconds, "peak_rss_mb": runs[4].peak_rss_mb,
                    "rows_per_second": counts["rel"] / runs[4].seconds,
                    "over_decompression": runs[4].seconds / runs[3].seconds},
    }
    conversion["pd1_over_release_seconds_per_row"] = (
        conversion["release"]["rows_per_second"] / conversion["pd1"]["rows_per_second"])
    steps = {"pd1": steps_timing(homes["pd1"], PD1_TASK, args.repeat),
             "release": steps_timing(homes["rel"], RELEASE_TASK, args.repeat)}
    steps["pd1_over_release"] = (steps["pd1"]["median_seconds"]
                                 / steps["release"]["median_seconds"])
    out = save(f"pd1-{args.points}", {"pd1_archive": str(pd1), "release_archive": str(release),
                                      "runs": runs, "conversion": conversion, "steps": steps})
    for run in runs:
        print(f"{run.label:34s} {run.seconds:8.1f} s  peak {run.peak_rss_mb:7.0f} MB")
    for k in ("pd1", "release"):
        c = conversion[k]
        print(f"{k:8s} {c['rows']:>11,} rows  {c['rows_per_second']:>10,.0f} rows/s  "
              f"store {c['store_bytes'] / 1e6:6.1f} MB  x{c['over_decompression']:.1f} of "
              "decompression")
        s = steps[k]
        print(f"{'':8s} steps-to-result {s['workload']} ({s['trials']} trials, "
              f"{s['batch_sizes']} batch sizes): {s['median_seconds'] * 1000:.1f} ms "
              f"in-process, {s['cli'].seconds:.2f} s CLI")
    print(f"results in {out}")
    for home in homes.values():
        shutil.rmtree(home)


if __name__ == "__main__":
    main()
