"""Benchmark: ``curvekit report`` on the full-scale store, and opening its pages in Chromium.

* ``curvekit report --bootstrap 200`` as a whole command, side by side in the same run with
  ``curvekit fit --all --bootstrap 200`` (the fits the overview table needs) and
  ``curvekit figures --format json`` (the figure specs the gallery needs): the report does
  both and writes the pages, so their sum is the natural yardstick;
* every workload page opened in headless Chromium from a localhost server, timed until all
  four charts have drawn, side by side with a page that only loads the bundled libraries.

Usage::

    python benchmarks/report.py      # needs benchmarks/_work/home-full (see query.py)
"""

from __future__ import annotations

import functools
import http.server
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import WORK, save, timed


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def open_pages(site: Path) -> tuple[list[float], list[float]]:
    """Seconds to draw each workload page, and to load the libraries alone (same count)."""
    from playwright.sync_api import sync_playwright

    (site / "blank.html").write_text(
        "<!doctype html><script src='assets/vega.js'></script><p id='ok'>ok</p>")
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}"
    pages = sorted((site / "workloads").glob("*.html"))
    drawn, blank = [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=shutil.which("chromium"),
                                    args=["--no-sandbox"])
        for page_path in pages:
            page = browser.new_page()  # a new tab each time: nothing cached in memory
            start = time.perf_counter()
            page.goto(f"{base}/workloads/{page_path.name}")
            page.wait_for_function(
                "document.querySelectorAll('.chart[data-rendered=true]').length == "
                "document.querySelectorAll('.chart').length", timeout=30_000)
            drawn.append(time.perf_counter() - start)
            page.close()
            page = browser.new_page()
            start = time.perf_counter()
            page.goto(f"{base}/blank.html")
            page.wait_for_function("typeof vegaEmbed === 'function'")
            blank.append(time.perf_counter() - start)
            page.close()
        browser.close()
    server.shutdown()
    return drawn, blank


def main() -> None:
    home = WORK / "home-full"
    if not (home / "store").exists():
        raise SystemExit("run benchmarks/query.py first: it converts the full-scale archive")
    out = Path(tempfile.mkdtemp(prefix="ck-report-", dir=WORK))
    cli = [sys.executable, "-m", "curvekit"]
    fits = timed("curvekit fit --all", [*cli, "fit", "--all", "--bootstrap", "200", "--home",
                                        str(home), "--format", "csv"])
    specs = timed("curvekit figures json", [*cli, "figures", "--home", str(home), "--format",
                                            "json", "--out", str(out / "specs")])
    site = timed("curvekit report", [*cli, "report", "--home", str(home), "--out",
                                     str(out / "site"), "--quiet"])
    drawn, blank = open_pages(out / "site")
    size = sum(p.stat().st_size for p in (out / "site").rglob("*") if p.is_file())
    shutil.rmtree(out)
    result = {
        "report": site, "fit_all": fits, "figure_specs": specs,
        "report_over_parts": site.seconds / (fits.seconds + specs.seconds),
        "site_mb": size / 1e6, "pages": len(drawn),
        "page_open_median_s": statistics.median(drawn), "page_open_max_s": max(drawn),
        "libraries_only_median_s": statistics.median(blank),
    }
    path = save("report-full", result)
    print(f"curvekit report      {site.seconds:.1f} s, peak {site.peak_rss_mb:.0f} MB, "
          f"{size / 1e6:.1f} MB site")
    print(f"  parts: fit --all {fits.seconds:.1f} s + figure specs {specs.seconds:.1f} s; "
          f"report / parts = {result['report_over_parts']:.2f}")
    print(f"workload page drawn  median {statistics.median(drawn):.2f} s, max {max(drawn):.2f} s"
          f" over {len(drawn)} pages; libraries alone {statistics.median(blank):.2f} s")
    print(f"results in {path}")


if __name__ == "__main__":
    main()
