"""Benchmark: rendering the paper's figures from the full-scale store.

* ``curvekit figure 8`` as a whole command (fresh process, PNG), three runs;
* ``curvekit figures --out DIR`` (every figure drawn so far).

Usage::

    python benchmarks/figures.py      # needs benchmarks/_work/home-full (see query.py)
"""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import WORK, save, timed


def main() -> None:
    home = WORK / "home-full"
    if not (home / "store").exists():
        raise SystemExit("run benchmarks/query.py first: it converts the full-scale archive")
    out = Path(tempfile.mkdtemp(prefix="ck-figures-", dir=WORK))
    cli = [sys.executable, "-m", "curvekit"]
    eight = [timed("curvekit figure 8", [*cli, "figure", "8", "--home", str(home), "--out",
                                         str(out / "f8.png")]) for _ in range(3)]
    everything = timed("curvekit figures", [*cli, "figures", "--home", str(home), "--out",
                                            str(out / "all")])
    count = len(list((out / "all").glob("figure-*.png")))
    shutil.rmtree(out)
    result = {"figure_8": eight, "figure_8_median_s": statistics.median(r.seconds for r in eight),
              "all": everything, "figures": count}
    path = save("figures-full", result)
    print(f"curvekit figure 8   median {result['figure_8_median_s']:.2f} s of 3")
    print(f"curvekit figures    {everything.seconds:.1f} s for {count} figures; results in {path}")


if __name__ == "__main__":
    main()
