"""The report site: its pages and specs, atomic writes, and a real headless browser."""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import altair as alt
import pytest
from click.testing import CliRunner

from curvekit.cli import main
from curvekit.errors import CurvekitError
from curvekit.report.site import report
from curvekit.store.store import Store
from curvekit.store.update import add_workload
from tests.test_update import workload as own_workload

WORKLOADS = ["cifar_10/resnet_8/nesterov_momentum", "mnist/simple_cnn_base/nesterov_momentum",
             "imagenet/resnet_50/nesterov_momentum"]  # the last gives Figures 7 and 19
OWN = "my_data/mlp_64/momentum"
ARTIFACTS = Path(os.environ.get("CURVEKIT_ARTIFACTS",
                                Path(__file__).resolve().parent / "_artifacts"))


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from curvekit.release.convert import convert
    from curvekit.release.synthetic import generate_archive

    tmp = tmp_path_factory.mktemp("report")
    manifest = generate_archive(tmp / "a.tar.bz2", workloads=WORKLOADS,
                                max_trials_per_study=10, evals_scale=0.1, jobs=1)
    convert(tmp / "a.tar.bz2", tmp / "home", manifest=manifest)
    add_workload(tmp / "home", own_workload(OWN, batch_sizes=(8, 16, 32, 64), trials=4))
    return tmp / "home"


@pytest.fixture(scope="module")
def site(home: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site") / "report"
    result = CliRunner().invoke(main, ["report", "--home", str(home), "--out", str(out),
                                       "--bootstrap", "20", "--quiet"])
    assert result.exit_code == 0, result.output
    return out


def _specs(page: Path) -> dict[str, dict]:  # type: ignore[type-arg]
    found = re.findall(r'<script type="application/json" data-chart="([^"]+)">(.*?)</script>',
                       page.read_text(), flags=re.S)
    return {name: json.loads(text.replace("<\\/", "</")) for name, text in found}


def _slug(workload: str) -> str:
    return workload.replace("/", "--")


def test_overview_lists_every_workload_with_fits(site: Path, home: Path) -> None:
    index = (site / "index.html").read_text()
    for workload in Store.open(home).workloads():
        assert f"workloads/{_slug(workload)}.html" in index
        assert (site / "workloads" / f"{_slug(workload)}.html").is_file()
    assert "B_crit" in index and "max useful batch size" in index
    assert re.search(r"\[[\d,]+–[\d,]+\]", index)  # bootstrap intervals shown
    assert (site / "assets" / "vega.js").stat().st_size > 500_000  # bundled, no CDN
    assert "cdn" not in index.lower() and "https://" not in index


@pytest.mark.parametrize("workload", [*WORKLOADS, OWN])
def test_workload_page_charts(site: Path, workload: str) -> None:
    page = site / "workloads" / f"{_slug(workload)}.html"
    specs = _specs(page)
    assert list(specs) == ["chart-steps", "chart-optimal", "chart-scatter", "chart-best"]
    for spec in specs.values():
        alt.LayerChart.from_dict(spec)  # valid Vega-Lite
    goal = specs["chart-steps"]["params"][0]
    assert goal["bind"]["input"] == "select" and len(goal["bind"]["options"]) >= 2
    batch = specs["chart-scatter"]["params"][0]
    assert batch["bind"]["input"] == "select"
    assert batch["bind"]["options"] == sorted(batch["bind"]["options"])
    assert "https://" not in page.read_text().replace(
        "https://vega.github.io/schema/vega-lite", "")


def test_report_refuses_a_foreign_folder_and_keeps_the_old_report(
        home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    with pytest.raises(CurvekitError, match="not a curvekit report"):
        report(Store.open(home), foreign, bootstrap=0, figures=False)
    assert (foreign / "notes.txt").read_text() == "keep me"
    out = report(Store.open(home), tmp_path / "r", bootstrap=0, figures=False,
                 workloads=[OWN])
    before = sorted(p.relative_to(out) for p in out.rglob("*"))
    with pytest.raises(CurvekitError, match="unknown workload"):
        report(Store.open(home), out, bootstrap=0, figures=False, workloads=["no/such/one"])

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("killed halfway")

    monkeypatch.setattr("curvekit.report.site.workload_data", broken)
    with pytest.raises(RuntimeError, match="killed halfway"):
        report(Store.open(home), out, bootstrap=0, figures=False)
    assert sorted(p.relative_to(out) for p in out.rglob("*")) == before
    assert not list(tmp_path.glob(".r.tmp-*"))


def test_unknown_workload_fails_before_any_work(home: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["report", "--home", str(home), "--out",
                                       str(tmp_path / "x"), "--workload", "cifar_10/resnet8"])
    assert result.exit_code == 1 and "unknown workload" in result.output
    assert not (tmp_path / "x").exists()


# -- a real browser --------------------------------------------------------------------------

def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if path := shutil.which(name):
            return path
    return None


@pytest.fixture(scope="module")
def browser_page(site: Path) -> Iterator[tuple[object, str]]:
    sync_api = pytest.importorskip("playwright.sync_api")
    executable = _chromium()
    if executable is None:
        pytest.skip("no Chromium on this machine: apt install chromium")
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1300, "height": 1000})
        yield page, f"http://127.0.0.1:{server.server_port}"
        browser.close()
    server.shutdown()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def _open(page: object, url: str) -> list[str]:
    """Load ``url``, wait for every chart, and return the console errors."""
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)  # type: ignore[attr-defined]
    page.on("pageerror", lambda e: errors.append(str(e)))  # type: ignore[attr-defined]
    page.goto(url)  # type: ignore[attr-defined]
    charts = page.locator(".chart")  # type: ignore[attr-defined]
    for i in range(charts.count()):
        charts.nth(i).locator("svg.marks").wait_for(timeout=15_000)
    return errors


def _shot(page: object, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)  # type: ignore[attr-defined]


def test_every_page_renders_without_errors(browser_page: tuple[object, str],
                                           site: Path) -> None:
    page, base = browser_page
    pages = [p.relative_to(site).as_posix() for p in sorted(site.rglob("*.html"))]
    assert "index.html" in pages and "figures/index.html" in pages
    assert {"figures/figure-07.html", "figures/figure-19.html"} <= set(pages)
    for rel in pages:
        errors = _open(page, f"{base}/{rel}")
        assert errors == [], (rel, errors)
        rendered = page.locator(".chart[data-rendered='true']").count()  # type: ignore[attr-defined]
        assert rendered == page.locator(".chart").count()  # type: ignore[attr-defined]
        if rel.startswith("workloads/"):
            assert rendered == 4
            assert page.locator(".chart svg path").count() > 20  # type: ignore[attr-defined]
        _shot(page, rel.replace("/", "_").removesuffix(".html"))


def test_batch_size_selector_changes_the_scatter(browser_page: tuple[object, str]) -> None:
    page, base = browser_page
    assert _open(page, f"{base}/workloads/{_slug(WORKLOADS[0])}.html") == []
    scatter = page.locator("#chart-scatter")  # type: ignore[attr-defined]
    select = scatter.locator("select")
    options = select.locator("option").all_inner_texts()
    assert len(options) >= 2

    def points() -> list[str]:
        marks = scatter.locator("svg g.mark-symbol path")
        return sorted(marks.nth(i).get_attribute("transform") or ""
                      for i in range(marks.count()))

    before = points()
    select.select_option(options[-1])
    page.wait_for_timeout(300)  # type: ignore[attr-defined]
    after = points()
    assert before and after and before != after
    _shot(page, "scatter-after-select")
    goal = page.locator("#chart-steps select")  # type: ignore[attr-defined]
    goals = goal.locator("option").all_inner_texts()
    line = page.locator("#chart-steps svg g.mark-line path").first  # type: ignore[attr-defined]
    first = line.get_attribute("d")
    goal.select_option(goals[0] if goals[0] != goal.input_value() else goals[-1])
    page.wait_for_timeout(300)  # type: ignore[attr-defined]
    assert line.get_attribute("d") != first
