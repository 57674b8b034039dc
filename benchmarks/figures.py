"""Benchmark: rendering the paper's figures from the full-scale store.

* ``curvekit figure 8`` as a whole command (fresh process, PNG), five runs, side by side in
  the same run with two floors it cannot beat: importing the libraries it needs, and
  vl-convert alone turning the same Vega-Lite spec into a PNG in a fresh process;
* ``curvekit figures --out DIR``: all 24 figures as PNGs plus the gallery.

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

RENDER_ONLY = """
import json, sys, vl_convert as vlc
spec = json.load(open(sys.argv[1]))
open(sys.argv[2], "wb").write(vlc.vegalite_to_png(json.dumps(spec)))
"""
IMPORTS = "import altair, duckdb, polars, pyarrow.parquet, vl_convert"


def main() -> None:
    home = WORK / "home-full"
    if not (home / "store").exists():
        raise SystemExit("run benchmarks/query.py first: it converts the full-scale archive")
    out = Path(tempfile.mkdtemp(prefix="ck-figures-", dir=WORK))
    cli = [sys.executable, "-m", "curvekit"]
    spec = out / "f8.json"
    timed("figure 8 spec", [*cli, "figure", "8", "--home", str(home), "--out", str(spec),
                            "--format", "json"])
    eight, render, imports = [], [], []
    for _ in range(5):  # interleaved, so that load on the machine hits all three alike
        eight.append(timed("curvekit figure 8", [*cli, "figure", "8", "--home", str(home),
                                                 "--out", str(out / "f8.png")]))
        render.append(timed("vl-convert alone", [sys.executable, "-c", RENDER_ONLY,
                                                 str(spec), str(out / "r8.png")]))
        imports.append(timed("imports alone", [sys.executable, "-c", IMPORTS]))
    everything = timed("curvekit figures", [*cli, "figures", "--home", str(home), "--out",
                                            str(out / "all")])
    count = len(list((out / "all").glob("figure-*.png")))
    shutil.rmtree(out)

    def median(runs: list) -> float:  # type: ignore[type-arg]
        return statistics.median(r.seconds for r in runs)

    result = {"figure_8": eight, "render_only": render, "imports_only": imports,
              "figure_8_median_s": median(eight), "render_only_median_s": median(render),
              "imports_only_median_s": median(imports),
              "figure_8_over_floor": median(eight) / (median(render) + median(imports)),
              "all": everything, "figures": count}
    path = save("figures-full", result)
    print(f"curvekit figure 8   median {median(eight):.2f} s of 5")
    print(f"  floors: vl-convert alone {median(render):.2f} s, imports alone "
          f"{median(imports):.2f} s; figure 8 / (sum of floors) = "
          f"{result['figure_8_over_floor']:.2f}")
    print(f"curvekit figures    {everything.seconds:.1f} s for {count} figures; results in {path}")


if __name__ == "__main__":
    main()
