"""Benchmark: rendering the paper's figures from the full-scale store.

* ``curvekit figure 8`` as a whole command (fresh process, PNG), five runs, interleaved in
  the same run with:
  - the floor it cannot beat: vl-convert alone turning the same Vega-Lite spec into a PNG
    in a fresh process (starting the engine, then drawing);
  - the libraries the command imports, alone (``click, polars, duckdb, pyarrow``);
  - the sequential path, as the Python API takes it: ``curvekit.figure(8)`` (an Altair
    chart) saved as PNG by vl-convert in the same process, engine started on demand;
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
IMPORTS = "import click, duckdb, polars, pyarrow.parquet"
SEQUENTIAL = """
import sys, curvekit
from curvekit.plotting.output import save
chart, meta = curvekit.figure(8, curvekit.open(sys.argv[1]))
save(chart, sys.argv[2], meta)
"""


def main() -> None:
    home = WORK / "home-full"
    if not (home / "store").exists():
        raise SystemExit("run benchmarks/query.py first: it converts the full-scale archive")
    out = Path(tempfile.mkdtemp(prefix="ck-figures-", dir=WORK))
    cli = [sys.executable, "-m", "curvekit"]
    spec = out / "f8.json"
    timed("figure 8 spec", [*cli, "figure", "8", "--home", str(home), "--out", str(spec),
                            "--format", "json"])
    eight, render, imports, sequential = [], [], [], []
    for _ in range(5):  # interleaved, so that load on the machine hits all alike
        eight.append(timed("curvekit figure 8", [*cli, "figure", "8", "--home", str(home),
                                                 "--out", str(out / "f8.png")]))
        render.append(timed("vl-convert alone", [sys.executable, "-c", RENDER_ONLY,
                                                 str(spec), str(out / "r8.png")]))
        imports.append(timed("imports alone", [sys.executable, "-c", IMPORTS]))
        sequential.append(timed("sequential path", [sys.executable, "-c", SEQUENTIAL,
                                                    str(home), str(out / "s8.png")]))
    everything = timed("curvekit figures", [*cli, "figures", "--home", str(home), "--out",
                                            str(out / "all")])
    count = len(list((out / "all").glob("figure-*.png")))
    failed = [r.label for r in [*eight, *render, *imports, *sequential, everything]
              if r.returncode]
    if failed:
        raise SystemExit(f"failed: {', '.join(failed)} (outputs kept in {out})")
    shutil.rmtree(out)

    def median(runs: list) -> float:  # type: ignore[type-arg]
        return statistics.median(r.seconds for r in runs)

    result = {"figure_8": eight, "render_only": render, "imports_only": imports,
              "sequential": sequential, "figure_8_median_s": median(eight),
              "render_only_median_s": median(render), "imports_only_median_s": median(imports),
              "sequential_median_s": median(sequential),
              "figure_8_over_render_only": median(eight) / median(render),
              "sequential_over_figure_8": median(sequential) / median(eight),
              "all": everything, "figures": count}
    path = save("figures-full", result)
    print(f"curvekit figure 8   median {median(eight):.2f} s of 5 "
          f"(runs {min(r.seconds for r in eight):.2f}-{max(r.seconds for r in eight):.2f})")
    print(f"  vl-convert alone {median(render):.2f} s (ratio "
          f"{result['figure_8_over_render_only']:.2f}); imports alone "
          f"{median(imports):.2f} s; sequential path {median(sequential):.2f} s "
          f"({result['sequential_over_figure_8']:.2f}x the command)")
    print(f"curvekit figures    {everything.seconds:.1f} s for {count} figures; results in {path}")


if __name__ == "__main__":
    main()
