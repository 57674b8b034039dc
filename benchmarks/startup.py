"""Benchmark: start-up cost of ``import curvekit`` and ``curvekit --help``, against a baseline.

Both are fresh processes, timed alternately (baseline, current, baseline, ...) so that the
machine's load hits both alike; the ratio of the medians is what to read. The baseline is a
git revision checked out into a temporary worktree; both run with the same interpreter, with
``PYTHONPATH`` choosing which checkout's ``curvekit`` is imported.

Usage::

    python benchmarks/startup.py --baseline 0e02783      # 25 repetitions of each
    python benchmarks/startup.py --baseline main~5 --repeat 50
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import save

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = {
    "import curvekit": [sys.executable, "-c", "import curvekit"],
    "curvekit --help": [sys.executable, "-m", "curvekit", "--help"],
}


def _time(argv: list[str], checkout: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    start = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL, cwd=checkout)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True, help="git revision to compare with")
    parser.add_argument("--repeat", type=int, default=25)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "baseline"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q",
                        str(base), args.baseline], check=True)
        try:
            results: dict[str, dict[str, list[float]]] = {}
            for label, argv in COMMANDS.items():
                for checkout in (base, ROOT):  # warm the page cache and .pyc files
                    _time(argv, checkout)
                times: dict[str, list[float]] = {"baseline": [], "current": []}
                for _ in range(args.repeat):
                    times["baseline"].append(_time(argv, base))
                    times["current"].append(_time(argv, ROOT))
                results[label] = times
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force",
                            str(base)], check=False)

    summary = {}
    print(f"{'command':<18} {'baseline (median)':>18} {'current (median)':>17} {'ratio':>7}")
    for label, times in results.items():
        b, c = statistics.median(times["baseline"]), statistics.median(times["current"])
        summary[label] = {"baseline_median_s": b, "current_median_s": c, "ratio": c / b,
                          "baseline_min_s": min(times["baseline"]),
                          "current_min_s": min(times["current"])}
        print(f"{label:<18} {b * 1000:>15.0f} ms {c * 1000:>14.0f} ms {c / b:>7.2f}")
    out = save("startup", {"baseline": args.baseline, "repeat": args.repeat,
                           "load_average": os.getloadavg(), "summary": summary,
                           "times": results})
    print(f"results in {out}")


if __name__ == "__main__":
    main()
