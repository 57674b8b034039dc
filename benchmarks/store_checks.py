"""Benchmark: ``curvekit verify`` of this checkout against an earlier commit's, and
``curvekit add`` of a 3-row workload with new names (then its removal), on one kept store of
the current format.

Each command runs in a fresh process with that code on the import path (``PYTHONPATH``);
the verify calls alternate (earlier, this, this, earlier, ...) so that both meet the same
load, and every call's wall and CPU time (user and system, its whole process) is recorded
with the load average. The add leaves the store as it was (the workload is removed again).

Usage::

    python benchmarks/store_checks.py --home benchmarks/_work/layout-full/home-new --ref HEAD~3
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import WORK, save, timed
from benchmarks.store_layout import ADDED, REMOVE, _cli, _logs

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, required=True, help="a kept home of format 2")
    parser.add_argument("--ref", required=True, help="the earlier commit for verify")
    parser.add_argument("--repeat", type=int, default=3, help="rounds")
    parser.add_argument("--name", default="store-checks-full", help="the results' name")
    args = parser.parse_args()
    args.home = args.home.resolve()
    old = Path(tempfile.mkdtemp(prefix="ck-checks-")) / "code"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(old), args.ref],
                   check=True, capture_output=True)
    codes = {"before": old, "after": ROOT}
    runs: dict[str, dict[str, list[tuple[float, float]]]] = {
        "verify": {"before": [], "after": []}, "add_new_names": {"after": []},
        "remove": {"after": []}}
    loads = []
    logs = _logs(WORK / "checks-logs", "val/brand_new_metric", "brand_new_parameter")
    try:
        for i in range(args.repeat):
            loads.append(os.getloadavg()[0])
            for label in (("before", "after") if i % 2 == 0 else ("after", "before")):
                done = _cli(f"{label}: verify", codes[label], ["verify", "--home", str(args.home)])
                runs["verify"][label].append((done.seconds, done.cpu_seconds))
            done = _cli("add", ROOT, ["add", str(logs), "--name", ADDED, "--manifest",
                                      str(logs / "runs.toml"), "--home", str(args.home)])
            runs["add_new_names"]["after"].append((done.seconds, done.cpu_seconds))
            done = timed("remove", [sys.executable, "-c", REMOVE, str(args.home), ADDED],
                         env={"PYTHONPATH": str(ROOT)}, cwd=tempfile.gettempdir())
            runs["remove"]["after"].append((done.seconds, done.cpu_seconds))
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old)],
                       capture_output=True)
    medians: dict[str, Any] = {
        kind: {label: {"wall_s": statistics.median(w for w, _ in v),
                       "cpu_s": statistics.median(c for _, c in v)} for label, v in by.items()}
        for kind, by in runs.items()}
    out = save(args.name, {"home": str(args.home), "ref": args.ref, "cpus": os.cpu_count(),
                           "load_1min": loads, "runs": runs, "medians": medians})
    for kind, by in medians.items():
        print(kind, ", ".join(f"{label} {m['wall_s']:.2f} s (CPU {m['cpu_s']:.2f} s)"
                              for label, m in by.items()))
    print(f"load average (1 min) per round: {loads}; results in {out}")


if __name__ == "__main__":
    main()
