"""Benchmark: regime fits on the full-scale store.

* ``curvekit fit --all --bootstrap 200`` as a whole command (fresh process);
* 1,000 bootstrap resamples of one workload, in process.

Usage::

    python benchmarks/fit.py        # needs benchmarks/_work/home-full (see query.py)
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import WORK, save, timed

WORKLOAD = "imagenet/resnet_50/nesterov_momentum"


def main() -> None:
    home = WORK / "home-full"
    if not (home / "store").exists():
        raise SystemExit("run benchmarks/query.py first: it converts the full-scale archive")
    everything = timed("curvekit fit --all --bootstrap 200", [
        sys.executable, "-m", "curvekit", "fit", "--all", "--bootstrap", "200", "--home",
        str(home), "--format", "csv"])
    import curvekit

    store = curvekit.open(home)
    start = time.perf_counter()
    fit = curvekit.fit_workload(
        store, curvekit.Selection(WORKLOAD, "val/classification_error", 0.25, trials=100),
        bootstrap_samples=1000, seed=0)
    one = time.perf_counter() - start
    result = {"fit_all_bootstrap_200": everything, "one_workload_1000_resamples_s": one,
              "workload": WORKLOAD, "summary": fit.summary()}
    out = save("fit-full", result)
    print(f"fit --all --bootstrap 200   {everything.seconds:6.1f} s")
    print(f"1000 resamples of {WORKLOAD}: {one:5.1f} s; results in {out}")


if __name__ == "__main__":
    main()
