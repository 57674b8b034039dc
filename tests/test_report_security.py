"""Hostile names in a store never become markup or script, in the report or in HTML plots;
the report's folder is replaced only when safe, and killed runs leave nothing behind."""

from __future__ import annotations

import functools
import http.server
import json
import math
import os
import re
import signal
import subprocess
import sys
import threading
import urllib.parse
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import pyarrow as pa
import pytest
from click.testing import CliRunner
from hypothesis import example, given, settings
from hypothesis import strategies as st

from curvekit.cli import main
from curvekit.errors import CurvekitError
from curvekit.ingest.add import add
from curvekit.plotting.page import (
    csp,
    escape,
    href,
    json_script,
    page_name,
    sha256_source,
    standalone_page,
    workload_of_page,
)
from curvekit.records import StudyKey, StudyRecord, TrialRecord
from curvekit.reporting.site import MARKER, report
from curvekit.store.store import Store
from curvekit.store.update import WorkloadData, add_workload
from tests.conftest import find_chromium
from tests.patience import PATIENCE, PATIENCE_MS, wait_for_charts

HOSTILE = ["x'><img src=x onerror=alert(1)>", "</script><script>alert(1)</script>",
           '"onmouseover=alert(1) x="', "javascript:alert(1)"]
CSV_WORKLOAD = "my_data/mlp/sgd"  # its metric and metaparameter names are hostile
TWINS = ["a--b/m/sgd", "a/b--m/sgd"]  # one page between them, once
ATTRIBUTES = {"lang", "charset", "http-equiv", "content", "rel", "href", "src", "type",
              "class", "id", "data-chart", "colspan"}
REPORT_TAGS = {"html", "head", "meta", "title", "link", "script", "body", "header", "a",
               "span", "main", "h1", "table", "tr", "th", "td", "p", "div", "ul", "li"}


# -- a store full of hostile names ------------------------------------------------------------

def _hostile_workload(name: str, metric: str, parameter: str,
                      sizes: tuple[int, ...] = (16, 64)) -> WorkloadData:
    base_dir, model, optimizer = name.rsplit("/", 2)
    studies, records, rows = [], [], {}
    for bs in sizes:
        key = StudyKey(base_dir, model, optimizer, bs)
        studies.append(StudyRecord(key, base_dir, False, 400, {}, {"source": name}, "m.toml"))
        for t in range(3):
            records.append(TrialRecord(key, t, "COMPLETE", 400,
                                       {"learning_rate": 0.1 * (t + 1), "momentum": 0.9,
                                        parameter: 1.0 + t}, f"{name}-{bs}-{t}.csv"))
            steps = list(range(0, 401, 100))
            err = [(1.0 - s / 500) ** (1 + math.log2(bs) / 4 + t / 10) for s in steps]
            rows[(key, t)] = pa.table({"step": pa.array(steps, pa.int64()), metric: err})
    return WorkloadData(studies, records, rows, {"format": "test", "note": name})


def _csv_logs(folder: Path) -> Path:
    """CSV logs whose metric columns and metaparameters are named to attack a page."""
    folder.mkdir(parents=True)
    entries = []
    for bs in (16, 64):
        for t in range(2):
            lines = [f"step,val/{HOSTILE[0]},{HOSTILE[1]}"]
            lines += [f"{s},{(1 - s / 500) ** (1 + bs / 64 + t / 10)!r},0.5"
                      for s in range(0, 401, 100)]
            (folder / f"bs{bs}_{t}.csv").write_text("\n".join(lines) + "\n")
            entries.append(f'[[runs]]\nrun = "bs{bs}_{t}.csv"\nbatch_size = {bs}\n'
                           f'parameters = {{ learning_rate = {0.1 * (t + 1)!r}, '
                           f'momentum = 0.9, "p_{HOSTILE[0]}" = 1.0 }}\n')
    (folder / "m.toml").write_text("[workload]\n" + "".join(entries))
    return folder


@pytest.fixture(scope="module")
def hostile_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("hostile")
    home = tmp / "home"
    logs = _csv_logs(tmp / "logs")
    add(logs, name=CSV_WORKLOAD, manifest=logs / "m.toml", home=home)
    for i, name in enumerate(HOSTILE):
        # The store quotes parameter names badly when they hold '"'; names elsewhere may.
        add_workload(home, _hostile_workload(f"{name}/m{i}/sgd", f"val/{name}",
                                             f"p_{name}".replace('"', "")))
    for twin in TWINS:
        add_workload(home, _hostile_workload(twin, "valid/error", "warmup"))
    return home


@pytest.fixture(scope="module")
def hostile_site(hostile_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("hostile-site") / "report"
    return report(Store.open(hostile_home), out, bootstrap=0, figures=False)


# -- what a parser sees -----------------------------------------------------------------------

class _Elements(HTMLParser):
    """Every start tag with its attributes, the text, and the contents of each script."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.text: list[str] = []
        self.scripts: list[tuple[dict[str, str | None], str]] = []
        self._script: dict[str, str | None] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))
        if tag == "script":
            self._script = dict(attrs)
            self.scripts.append((self._script, ""))

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._script = None

    def handle_data(self, data: str) -> None:
        if self._script is not None:
            attrs, text = self.scripts[-1]
            self.scripts[-1] = (attrs, text + data)
        else:
            self.text.append(data)


def _parse(text: str) -> _Elements:
    parser = _Elements()
    parser.feed(text)
    parser.close()
    return parser


def _assert_no_markup_from_names(page: str, allowed_tags: set[str]) -> _Elements:
    parsed = _parse(page)
    for tag, attrs in parsed.tags:
        assert tag in allowed_tags, (tag, attrs)
        for name, value in attrs:
            assert name in ATTRIBUTES, (tag, name, value)
            if name in ("href", "src"):
                assert value is not None
                assert urllib.parse.urlsplit(value).scheme in ("", "data"), value
                assert not value.lower().startswith(("javascript", "data:text")), value
    return parsed


def _csp_of(parsed: _Elements) -> str:
    policies = [dict(a)["content"] for t, a in parsed.tags
                if t == "meta" and dict(a).get("http-equiv") == "Content-Security-Policy"]
    assert len(policies) == 1
    tags = [(t, dict(a).get("http-equiv")) for t, a in parsed.tags]
    first_script = [t for t, _ in tags].index("script")
    # in force before anything runs
    assert tags.index(("meta", "Content-Security-Policy")) < first_script
    return str(policies[0])


def test_report_pages_hold_names_as_text_only(hostile_site: Path, hostile_home: Path) -> None:
    workloads = Store.open(hostile_home).workloads()
    assert len(workloads) == len(HOSTILE) + 3
    index = _assert_no_markup_from_names((hostile_site / "index.html").read_text(),
                                         REPORT_TAGS)
    links = [dict(a)["href"] for t, a in index.tags if t == "a"]
    for workload in workloads:
        assert workload in index.text  # the name is shown, as text
        link = href(f"workloads/{page_name(workload)}.html")
        assert link in links
        target = hostile_site / urllib.parse.unquote(link)
        assert target.is_file() and target.parent == hostile_site / "workloads"
    for page in sorted(hostile_site.rglob("*.html")):
        parsed = _assert_no_markup_from_names(page.read_text(), REPORT_TAGS)
        assert _csp_of(parsed) == csp()
        for attrs, body in parsed.scripts:  # only the bundled files and JSON islands
            if attrs.get("type") == "application/json":
                json.loads(body)
                assert not re.search(r"[<>&\u2028\u2029]", body)
            else:
                assert attrs["src"] in ("assets/vega.js", "assets/report.js",
                                        "../assets/vega.js", "../assets/report.js")
                assert body == ""


def test_workload_page_charts_carry_the_names_as_data(hostile_site: Path) -> None:
    workload = f"{HOSTILE[1]}/m1/sgd"
    page = hostile_site / "workloads" / f"{page_name(workload)}.html"
    parsed = _parse(page.read_text())
    assert parsed.text.count(workload) == 2  # the title and the heading, as text
    specs = {a["data-chart"]: json.loads(b) for a, b in parsed.scripts
             if a.get("type") == "application/json"}
    assert list(specs) == ["chart-steps", "chart-optimal", "chart-scatter", "chart-best"]
    steps = specs["chart-steps"]
    assert any(HOSTILE[1] in option for option in steps["params"][0]["bind"]["options"])
    assert specs["chart-best"]["layer"][0]["encoding"]["y"]["title"] == f"Best val/{HOSTILE[1]}"


def test_page_names_are_injective(hostile_site: Path) -> None:
    names = {page_name(w) for w in TWINS}
    assert len(names) == 2
    for twin in TWINS:
        page = (hostile_site / "workloads" / f"{page_name(twin)}.html").read_text()
        assert f"<h1>{twin}</h1>" in page


def test_html_plot_holds_names_as_data_and_runs_only_its_own_scripts(
        hostile_home: Path, tmp_path: Path) -> None:
    out = tmp_path / "p.html"
    workload = f"{HOSTILE[0]}/m0/sgd"
    result = CliRunner().invoke(main, [
        "plot", "steps-to-result", workload, "--metric", f"val/{HOSTILE[0]}", "--goal", "0.5",
        "--home", str(hostile_home), "--out", str(out), "--format", "html"])
    assert result.exit_code == 0, result.output
    parsed = _assert_no_markup_from_names(
        out.read_text(), {"html", "head", "meta", "title", "link", "style", "script", "body",
                          "div"})
    policy = _csp_of(parsed)
    assert "'unsafe-inline'" not in policy and "'unsafe-eval'" not in policy
    code = [body for attrs, body in parsed.scripts if attrs.get("type") is None]
    assert len(code) == 2  # the bundled libraries and the embedding script, nothing else
    for body in code:
        assert sha256_source(body) in policy
    (island,) = [b for a, b in parsed.scripts if a.get("type") == "application/json"]
    spec = json.loads(island)
    assert spec["title"] == f"{workload}, val/{HOSTILE[0]} < 0.5"
    assert spec["title"] in parsed.text  # the page's <title>, as text


def test_csv_metric_and_metaparameter_names_plot_safely(hostile_home: Path,
                                                         tmp_path: Path) -> None:
    out = tmp_path / "m.html"
    result = CliRunner().invoke(main, [
        "plot", "metaparameters", CSV_WORKLOAD, "--metric", f"val/{HOSTILE[0]}", "--goal",
        "0.9", "--parameter", f"p_{HOSTILE[0]}", "--home", str(hostile_home), "--out",
        str(out), "--format", "html"])
    assert result.exit_code == 0, result.output
    parsed = _assert_no_markup_from_names(
        out.read_text(), {"html", "head", "meta", "title", "link", "style", "script", "body",
                          "div"})
    (island,) = [b for a, b in parsed.scripts if a.get("type") == "application/json"]
    spec = json.loads(island)
    assert spec["layer"][0]["encoding"]["y"]["axis"]["title"] == f"p_{HOSTILE[0]}"


# -- the escaping helpers, for any text --------------------------------------------------------

@settings(max_examples=50, deadline=None)
@given(st.text())
def test_escaped_text_parses_back_as_the_text(text: str) -> None:
    parsed = _parse(f"<p>{escape(text)}</p>")
    assert [t for t, _ in parsed.tags] == ["p"]
    assert "".join(parsed.text) == text
    attr = _parse(f'<a title="{escape(text)}">x</a>')
    assert attr.tags == [("a", [("title", text)])]


@settings(max_examples=50, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(),
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=8))
def test_json_islands_hold_any_value(value: object) -> None:
    island = json_script("c", value)
    parsed = _parse(island)
    assert [t for t, _ in parsed.tags] == ["script"] and parsed.text == []
    ((attrs, body),) = parsed.scripts
    assert attrs == {"type": "application/json", "data-chart": "c"}
    assert json.loads(body) == value
    assert not re.search(r"[<>&\u2028\u2029]", body)


@settings(max_examples=50, deadline=None)
@given(st.text(min_size=1), st.text(min_size=1))
def test_page_names_are_distinct_safe_file_names(a: str, b: str) -> None:
    for name in (a, b):
        page = page_name(name)
        assert re.fullmatch(r"[A-Za-z0-9_+\-~%][A-Za-z0-9_.+\-~%]*(![0-9a-f]{32})?", page)
        assert len(page.encode()) <= 160
        if "!" not in page:
            assert workload_of_page(page) == name
        assert urllib.parse.unquote(href(page)) == page
    if a != b:
        assert page_name(a) != page_name(b)


def test_long_names_are_shortened_by_hash() -> None:
    long = "x" * 300
    assert page_name(long) != page_name(long + "y")
    assert page_name(long).startswith("x" * 120 + "!")
    with pytest.raises(ValueError, match="shortened"):
        workload_of_page(page_name(long))


def test_standalone_page_refuses_a_bundle_that_ends_its_tag() -> None:
    with pytest.raises(ValueError, match="</script"):
        standalone_page({}, "t", "var a = '</SCRIPT>';")


# -- the output folder ------------------------------------------------------------------------

ONE = [f"{HOSTILE[3]}/m3/sgd"]


def _report(home: Path, out: Path | str) -> Path:
    return report(Store.open(home), out, bootstrap=0, figures=False, workloads=ONE)


def _tree(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


def test_report_out_dot_inside_a_report_is_refused(
        hostile_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = _report(hostile_home, tmp_path / "site")
    before = _tree(site)
    for cwd, out in ((site, "."), (site / "workloads", ".."), (site / "workloads", str(site))):
        monkeypatch.chdir(cwd)
        result = CliRunner().invoke(main, ["report", "--home", str(hostile_home), "--out",
                                           out, "--no-figures", "--bootstrap", "0", "--quiet",
                                           "--workload", ONE[0]])
        assert result.exit_code == 1, result.output
        assert result.output.startswith("Error: ") and "working directory" in result.output
        assert _tree(site) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site"]


def test_report_out_in_or_around_the_store_is_refused(hostile_home: Path) -> None:
    store = Store.open(hostile_home)
    for out in (hostile_home, store.path, store.path / "report", store.path.parent / "r",
                store.path / "measurements"):
        with pytest.raises(CurvekitError, match="the store"):
            _report(hostile_home, out)
    assert Store.open(hostile_home).workloads() == store.workloads()


def test_report_out_with_foreign_files_is_refused(hostile_home: Path, tmp_path: Path) -> None:
    site = _report(hostile_home, tmp_path / "site")
    (site / "notes.txt").write_text("keep me")
    with pytest.raises(CurvekitError, match=r"'notes\.txt'"):
        _report(hostile_home, site)
    assert (site / "notes.txt").read_text() == "keep me"
    (tmp_path / "file").write_text("x")
    with pytest.raises(CurvekitError, match="is a file"):
        _report(hostile_home, tmp_path / "file")
    (tmp_path / "link").symlink_to(site)
    with pytest.raises(CurvekitError, match="symbolic link"):
        _report(hostile_home, tmp_path / "link")
    assert (site / "notes.txt").read_text() == "keep me"


def test_a_new_report_replaces_the_old_one_completely(hostile_home: Path,
                                                      tmp_path: Path) -> None:
    site = _report(hostile_home, tmp_path / "site")
    (site / "workloads" / "stale.html").write_text("from an older report")
    _report(hostile_home, site)
    assert not (site / "workloads" / "stale.html").exists()
    assert (site / MARKER).is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site"]


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_stale_work_folders_are_removed_and_only_those(hostile_home: Path,
                                                       tmp_path: Path) -> None:
    dead = _dead_pid()
    stale = tmp_path / f".site.curvekit-tmp-{dead}-0123abcd"
    (stale / "workloads").mkdir(parents=True)
    (stale / MARKER).write_text("curvekit 1\n")
    empty = tmp_path / f".site.curvekit-tmp-{dead}-4567abcd"
    empty.mkdir()
    keep = {  # folder name: whether it holds curvekit's marker
        f".site.curvekit-tmp-{os.getppid()}-89abcdef": True,  # a run still going
        f".site.curvekit-tmp-{dead}-89abcdef": False,  # not curvekit's: no marker
        f".other.curvekit-tmp-{dead}-89abcdef": True,  # another report's
        f".site.curvekit-tmp-{dead}-zzzz": True,  # a name curvekit never makes
    }
    for name, marker in keep.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "mine.txt").write_text("keep")
        if marker:
            (tmp_path / name / MARKER).write_text("curvekit 1\n")
    (tmp_path / f".site.curvekit-tmp-{dead}-fedcba98").symlink_to(tmp_path / "elsewhere")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / MARKER).write_text("curvekit 1\n")
    _report(hostile_home, tmp_path / "site")
    assert not stale.exists() and not empty.exists()
    for name in keep:
        assert (tmp_path / name / "mine.txt").read_text() == "keep", name
    assert (tmp_path / "elsewhere" / MARKER).exists()


def test_a_report_left_aside_by_a_killed_swap_comes_back(hostile_home: Path,
                                                         tmp_path: Path) -> None:
    site = _report(hostile_home, tmp_path / "site")
    aside = tmp_path / f".site.curvekit-old-{_dead_pid()}-0123abcd"
    site.rename(aside)
    store = Store.open(hostile_home)
    from curvekit.reporting.site import _remove_stale

    assert _remove_stale(site) == [] and (site / MARKER).is_file() and not aside.exists()
    assert store.workloads()


# The report stops where it writes its first workload page (its work folder made and
# marked), says so on stdout and waits there to be killed.
_STOPPED_REPORT = """
import sys, threading
import curvekit.reporting.site as site
from curvekit.store.store import Store
first = threading.Lock()
def stop(*args, **kwargs):  # pages are written by several threads: one line, once
    if first.acquire(blocking=False):
        sys.stdout.write("writing the workload pages\\n")
        sys.stdout.flush()
    threading.Event().wait()
site.workload_data = stop
site.report(Store.open(sys.argv[1]), sys.argv[2], bootstrap=0, figures=False)
"""


def test_a_killed_report_leaves_litter_the_next_run_removes(hostile_home: Path,
                                                            tmp_path: Path) -> None:
    site = _report(hostile_home, tmp_path / "site")
    before = _tree(site)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    child = subprocess.Popen([sys.executable, "-c", _STOPPED_REPORT, str(hostile_home),
                              str(site)], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == "writing the workload pages\n"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=PATIENCE)
    litter = list(tmp_path.glob(".site.curvekit-tmp-*"))
    assert len(litter) == 1 and (litter[0] / MARKER).is_file()
    assert _tree(site) == before  # killed: the old report untouched
    _report(hostile_home, site)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site"]


# -- a real browser ---------------------------------------------------------------------------

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync"]


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def browser(hostile_site: Path, hostile_home: Path, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[tuple[object, str]]:
    sync_api = pytest.importorskip("playwright.sync_api",
                                   reason="needs playwright (pip install playwright)")
    executable = find_chromium()
    assert executable is not None  # needs_chromium skipped the test otherwise
    plot = hostile_site.parent / "plot.html"  # served beside the report
    result = CliRunner().invoke(main, [
        "plot", "steps-to-result", f"{HOSTILE[0]}/m0/sgd", "--metric", f"val/{HOSTILE[0]}",
        "--goal", "0.5", "--home", str(hostile_home), "--out", str(plot), "--format", "html"])
    assert result.exit_code == 0, result.output
    handler = functools.partial(_QuietHandler, directory=str(hostile_site.parent))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with sync_api.sync_playwright() as p:
            chrome = p.chromium.launch(executable_path=executable, args=CHROMIUM_FLAGS)
            yield chrome, f"http://127.0.0.1:{server.server_port}"
            chrome.close()
    finally:
        server.shutdown()


_INJECTED = """() => {
  const all = [...document.querySelectorAll('*')];
  return {
    images: document.querySelectorAll('img, iframe, object, embed').length,
    handlers: all.filter(e => [...e.attributes].some(a => a.name.startsWith('on'))).length,
    scripts: [...document.scripts].filter(s => !s.src && s.type !== 'application/json')
      .length,
    charts: document.querySelectorAll('.chart').length,
    rendered: document.querySelectorAll(".chart[data-rendered='true']").length,
  };
}"""


def _visit(chrome: object, url: str, *, charts: bool = True
           ) -> tuple[dict[str, int], list[str], list[str], object]:
    page = chrome.new_page()  # type: ignore[attr-defined]
    dialogs: list[str] = []
    errors: list[str] = []

    def dialog(d: object) -> None:  # an alert() that ran: recorded, then dismissed
        dialogs.append(d.message)  # type: ignore[attr-defined]
        d.dismiss()  # type: ignore[attr-defined]

    page.on("dialog", dialog)
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(url)
    if charts:
        wait_for_charts(page)
    return page.evaluate(_INJECTED), dialogs, errors, page


BROWSED = ["report/index.html", "plot.html",
           *(f"report/workloads/{page_name(w)}.html" for w in
             [CSV_WORKLOAD, *(f"{h}/m{i}/sgd" for i, h in enumerate(HOSTILE)), *TWINS])]


@pytest.mark.needs_chromium
@pytest.mark.parametrize("rel", BROWSED)
def test_browser_runs_nothing_a_name_says(browser: tuple[object, str], rel: str) -> None:
    chrome, base = browser
    found, dialogs, errors, page = _visit(chrome, f"{base}/{href(rel)}")
    assert dialogs == [] and errors == [], (dialogs, errors)
    assert found["images"] == 0 and found["handlers"] == 0, found
    assert found["rendered"] == found["charts"], found
    if rel.startswith("report/workloads/"):
        assert found["charts"] == 4 and found["scripts"] == 0
    page.close()  # type: ignore[attr-defined]


@pytest.mark.needs_chromium
def test_hovering_shows_hostile_names_as_text(browser: tuple[object, str]) -> None:
    chrome, base = browser
    workload = f"{HOSTILE[0]}/m0/sgd"
    found, dialogs, errors, page = _visit(
        chrome, f"{base}/{href(f'report/workloads/{page_name(workload)}.html')}")
    assert found["rendered"] == 4
    point = page.locator("#chart-steps svg g.mark-symbol path").first  # type: ignore[attr-defined]
    point.hover(force=True)
    tooltip = page.locator("#vg-tooltip-element")  # type: ignore[attr-defined]
    tooltip.wait_for(state="visible", timeout=PATIENCE_MS)
    assert HOSTILE[0] in tooltip.inner_text()
    assert tooltip.locator("img").count() == 0
    options = page.locator("#chart-steps select option").all_inner_texts()  # type: ignore[attr-defined]
    assert any(HOSTILE[0] in o for o in options)
    assert page.evaluate(_INJECTED)["images"] == 0  # type: ignore[attr-defined]
    assert dialogs == [] and errors == []
    page.close()  # type: ignore[attr-defined]


@pytest.mark.needs_chromium
def test_pages_open_from_the_file_system_under_their_policy(browser: tuple[object, str],
                                                            hostile_site: Path) -> None:
    chrome, _ = browser
    workload = f"{HOSTILE[1]}/m1/sgd"
    for path in (hostile_site / "index.html",
                 hostile_site / "workloads" / f"{page_name(workload)}.html"):
        found, dialogs, errors, page = _visit(chrome, path.as_uri())
        assert dialogs == [] and errors == [] and found["images"] == 0
        assert found["rendered"] == found["charts"]
        page.close()  # type: ignore[attr-defined]


@pytest.mark.needs_chromium
def test_the_policy_blocks_an_injected_handler(browser: tuple[object, str],
                                               tmp_path: Path) -> None:
    """Were a name ever to slip through, the page's policy would still stop it."""
    chrome, _ = browser
    page_file = tmp_path / "p.html"
    page_file.write_text(standalone_page({"mark": "point"}, "t", "window.x = 1;").replace(
        "<body>", "<body><img src=x onerror=alert(1)><script>alert(2)</script>"))
    found, dialogs, errors, page = _visit(chrome, page_file.as_uri(), charts=False)
    assert dialogs == [] and found["images"] == 1
    assert any("Content Security Policy" in e for e in errors)
    page.close()  # type: ignore[attr-defined]


# -- names in Vega and Vega-Lite's own expressions (descriptions, tooltips, filters) -----------

VEGA_NAMES = ['a\\"b ${x} </script> [0].c', "end\\", "x\"]);alert(1);'", "\\u0041\\x41\\"]
"""Names that Vega-Lite would copy into an expression: a backslash before a quote, a
trailing backslash, quotes that close a string, escape-like sequences, ``${``, brackets and
dots (a path in a field), ``</script>``."""


@pytest.fixture(scope="module")
def vega_pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("vega-names")
    home = tmp / "home"
    for i, name in enumerate(VEGA_NAMES):
        add_workload(home, _hostile_workload(f"v{i}{name}/m/sgd", f"val/{name}",
                                             f"p_{name}".replace('"', ""), (16, 32, 64, 128)))
    site = report(Store.open(home), tmp / "report", bootstrap=0, figures=False)
    pages = {f"report {i}": site / "workloads" / f"{page_name(f'v{i}{n}/m/sgd')}.html"
             for i, n in enumerate(VEGA_NAMES)}
    for i, name in enumerate(VEGA_NAMES):
        workload, metric = f"v{i}{name}/m/sgd", f"val/{name}"
        plots = {"best": [], "steps-to-result": ["--goal", "0.5", "--fit"]}
        if i == 0:  # every other chart once, with the name holding every hostile feature
            plots |= {"metaparameters": ["--goal", "0.9", "--parameter",
                                         f"p_{name}".replace('"', "")],
                      "scatter": ["--goal", "0.5", "--batch-size", "16"]}
        for plot, options in plots.items():
            out = tmp / f"{plot}-{i}.html"
            result = CliRunner().invoke(main, [
                "plot", plot, workload, "--metric", metric, *options, "--home", str(home),
                "--out", str(out), "--format", "html"])
            assert result.exit_code == 0, result.output
            pages[f"{plot} {i}"] = out
    return pages


@pytest.mark.needs_chromium
def test_names_in_vega_expressions_draw_every_chart(
        browser: tuple[object, str], vega_pages: dict[str, Path]) -> None:
    """Each chart draws, runs nothing, and describes its marks with the names as given
    (Vega-Lite's accessibility descriptions are expressions it writes from the titles)."""
    chrome, _ = browser
    for label, path in vega_pages.items():
        found, dialogs, errors, page = _visit(chrome, path.as_uri())
        assert dialogs == [] and errors == [], (label, dialogs, errors)
        assert found["rendered"] == found["charts"] > 0, (label, found)
        if label.startswith(("best", "report")):
            i = int(label.split()[-1])
            best = "#chart-best " if label.startswith("report") else ""
            described = page.locator(  # type: ignore[attr-defined]
                f"{best}svg path[aria-label*='batch_size:']").first.get_attribute("aria-label")
            assert f"; Best val/{VEGA_NAMES[i]}: " in described, (label, described)
        page.close()  # type: ignore[attr-defined]


_HOSTILE_TEXT = st.text(alphabet=st.sampled_from(list('\\"\'${}<>/[].:;&`# aZé中²')),
                        min_size=1, max_size=10)


@pytest.fixture(scope="module")
def regimes() -> object:
    from curvekit.scaling import fit_regimes

    sizes = [16, 32, 64, 128, 256, 512]
    return fit_regimes(sizes, [6400 / b if b < 128 else 50 + 0.1 * b for b in sizes])


@settings(max_examples=12, deadline=None)
@given(name=_HOSTILE_TEXT)
@example(name='a\\"b')
@example(name="end\\")
@example(name="x.y[0]²")
def test_any_name_draws_in_every_chart_and_is_described_as_given(
        name: str, regimes: object) -> None:
    """Wherever a builder puts a name (titles, axis titles, labels, drop-down options and
    the filters they drive, a selector's name keeping only ASCII letters and digits), the
    chart draws, and Vega-Lite's descriptions read it."""
    import html as html_module

    import polars as pl

    from curvekit.plotting.builders import (
        best_chart,
        metaparameter_chart,
        scatter_chart,
        steps_chart,
    )
    from curvekit.plotting.static import draw

    sizes = [16.0, 32.0, 64.0, 128.0, 256.0, 512.0]
    curve = pl.DataFrame({"batch_size": sizes, "step": [6400 / b for b in sizes],
                          "value": [0.1 * b for b in sizes]})
    trials = pl.DataFrame({"learning_rate": [0.1, 0.2], "momentum": [0.9, 0.5],
                           "outcome": ["Goal Achieved", "Infeasible"], "winner": [True, False],
                           "trial_id": [1, 2], "batch_size": [16, 16]})
    specs = {
        "best": best_chart([(name, curve), ("other", curve)], title=name,
                           y_title=f"Best {name}", goal_line=0.5, goal_label=name),
        "steps": steps_chart([(name, curve), (f"{name}2", curve)], title=name,
                             scaling_label=name, select=name, fit=regimes),  # type: ignore[arg-type]
        "optimal": metaparameter_chart([(name, curve.select("batch_size", "value"))],
                                       title=name, y_title=name),
        "scatter": scatter_chart(trials, title=name, select=[16]),
    }
    for chart, spec in specs.items():
        svg = html_module.unescape(draw(json.dumps(spec), "svg").decode())
        assert svg.startswith("<svg"), chart
        if chart == "best":
            assert f"; Best {name}: " in svg and f"curve: {name};" in svg


@settings(max_examples=12, deadline=None)
@given(column=_HOSTILE_TEXT)
@example(column="a.b[0]")
@example(column="end\\")
def test_a_column_name_is_read_as_a_column_never_a_path(column: str) -> None:
    """A column reaches Vega-Lite through ``channel()``: ``.``, ``[``, ``]`` and ``\\`` in its
    name are escaped, so the value drawn is the column's own."""
    import html as html_module

    from curvekit.plotting.static import draw
    from curvekit.plotting.vegalite import channel, top_level

    spec = top_level({"data": {"values": [{column: 7.25}]}, "mark": "text",
                      "encoding": {"text": channel(f"{column}:Q")}}, {})
    svg = html_module.unescape(draw(json.dumps(spec), "svg").decode())
    assert ">7.25</text>" in svg and f'aria-label="{column}: 7.25"' in svg
