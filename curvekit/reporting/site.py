"""``curvekit report``: a self-contained static site to explore the store in a browser.

The site needs no server and no network: Vega, Vega-Lite and vega-embed are bundled once in
``assets/vega.js``, and every chart's Vega-Lite spec is inlined in its page. Pages:

* ``index.html``: every workload with its batch sizes, trials and fitted quantities
  (end of perfect scaling, maximum useful batch size, B_crit) with bootstrap intervals;
* ``workloads/<name>.html``: steps to result (goal chosen in a drop-down), the optimal
  effective learning rate, the learning-rate/momentum scatter (batch size chosen in a
  drop-down) and the best value per batch size;
* ``figures/index.html`` and one page per figure of the paper.

The site is built in a temporary folder and moved into place at the end, so a failed run
leaves a previous report as it was.

>>> import tempfile, pathlib, curvekit
>>> from curvekit.store.store import Store
>>> tmp = pathlib.Path(tempfile.mkdtemp())
>>> _ = curvekit.demo(tmp)  # the shipped demo data set
>>> site = report(Store.open(tmp), tmp / "site", bootstrap=0, figures=False)
>>> sorted(p.name for p in site.iterdir())
['.curvekit-report', 'assets', 'figures', 'index.html', 'workloads']
"""

from __future__ import annotations

import os
import re
import shutil
import uuid
import warnings
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import polars as pl

from curvekit._version import __version__
from curvekit.errors import CurvekitError, OutputError, ReportError
from curvekit.goals import Goal, goal_source
from curvekit.outputs import name_max, write_file, writing
from curvekit.plotting.builders import (
    best_chart,
    metaparameter_chart,
    scatter_chart,
    steps_chart,
)
from curvekit.plotting.page import (
    EMBED_CSS,
    EMBED_JS,
    csp,
    csp_meta,
    escape,
    href,
    json_script,
    page_name,
)
from curvekit.progress import Progress
from curvekit.reporting.data import WorkloadPage, workload_data
from curvekit.runner.adaptive import round_rows
from curvekit.scaling import CORRECTED, bounded_value
from curvekit.store.catalog import synthetic_note, synthetic_workloads
from curvekit.store.store import Store

__all__ = ["report"]

MARKER = ".curvekit-report"

_STYLE = """
body{font-family:system-ui,sans-serif;margin:0;color:#222}
header{background:#24364b;color:#fff;padding:.6em 1.2em}
header a{color:#fff;margin-right:1.2em;text-decoration:none}
main{padding:1em 1.5em;max-width:1400px}
table{border-collapse:collapse;font-size:13px}
th,td{border-bottom:1px solid #ddd;padding:4px 8px;text-align:right}
th:first-child,td:first-child{text-align:left}
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(100%,560px),1fr));
  gap:1.5em}
.chart{min-height:200px}
.chart svg{width:100%;height:auto}
.figure{max-width:1300px}
.note{color:#666;font-size:13px}
.source{color:#444;font-size:13px}
.reconstruction{color:#8a4b00;font-size:13px}
.synthetic{background:#b00000;color:#fff;padding:.1em .5em;margin-left:1.2em}
.tag{color:#b00000;font-size:12px;margin-left:.5em}
"""
"""The site's styles. A chart's SVG is drawn at 72 dpi sizes (9 px tick labels); scaled
to its column (a workload's charts at 560 px or more, a figure up to 1300 px, about twice
its drawn size) its text matches the page's."""

def _page(title: str, body: str, *, depth: int, specs: Iterable[tuple[str, dict[str, Any]]] = (),
          note: str | None = None, heading: bool = True) -> str:
    """A page of the site; ``title`` is escaped here, ``body`` is markup built escaped;
    ``note`` (the synthetic-data note of the workloads the page shows) goes in its header;
    ``heading=False`` leaves out the heading (the page's chart carries the title)."""
    up = "../" * depth
    banner = f"<strong class='synthetic'>{escape(note)}</strong>" if note else ""
    scripts = "\n".join(json_script(i, s) for i, s in specs)
    return (
        "<!doctype html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"{csp_meta(csp())}<title>{escape(title)}</title><link rel='icon' href='data:,'>"
        f"<link rel='stylesheet' href='{up}assets/style.css'>"
        f"<script src='{up}assets/vega.js'></script></head><body>"
        f"<header><a href='{up}index.html'>Workloads</a>"
        f"<a href='{up}figures/index.html'>Figures of the paper</a>"
        f"<span class='note'>curvekit {escape(__version__)}</span>{banner}</header>"
        f"<main>{f'<h1>{escape(title)}</h1>' if heading else ''}{body}</main>\n{scripts}\n"
        f"<script src='{up}assets/report.js'></script></body></html>\n")


def _page_file(workload: str) -> str:
    """Where ``workload``'s page lies in the site (one file per workload, see page_name)."""
    return f"workloads/{page_name(workload)}.html"


def _goal(g: Goal) -> str:
    return f"{escape(g.metric)} {'&gt;' if g.maximize else '&lt;'} {g.goal!r}"


def _goal_cell(g: Goal) -> str:
    """The index's goal: a goal computed by the rule is marked (explained under the table)."""
    mark = " <span class='tag'>(rule)</span>" if g.source == "rule" else ""
    return _goal(g) + mark


def _value(fit: dict[str, Any], name: str, digits: int) -> str:
    return escape(bounded_value(fit, name, digits))


_COLUMNS = {"perfect_scaling_end": "perfect scaling ends",
            "max_useful_batch_size": "max useful batch size", "b_crit": "B_crit"}


def _missing(fit: dict[str, Any]) -> str:
    """Why the index shows "–" for some of a workload's fitted values ("" if none)."""
    absent = [label for name, label in _COLUMNS.items() if fit.get(name) is None]
    if not absent:
        return ""
    if fit.get("note"):
        why = str(fit["note"])
    elif fit.get("model"):
        why = f"the fitted model ({fit['model']}) has no such boundary"
    else:
        why = "not fitted"
    return f"{', '.join(absent)}: {why}"


def _cell(fit: dict[str, Any], name: str, digits: int = 0) -> str:
    if fit.get(name) is None:  # explained under the table
        return "<span class='dash'>–</span>"
    text = _value(fit, name, digits)
    if fit.get(f"{name}_low") is not None and fit.get(f"{name}_high") is not None:
        low, high = _value(fit, f"{name}_low", digits), _value(fit, f"{name}_high", digits)
        interval = low if low == high and low[0] == "&" else f"{low}–{high}"
        text += f" <span class='note'>[{interval}]</span>"
    if any(fit.get(f"{name}{end}_beyond") for end in ("", "_low", "_high")):
        text += f"<sup title='{escape(str(fit.get('range_note', '')))}'>†</sup>"
    return text


def _estimate(fit: dict[str, Any]) -> str:
    """What the B_crit row estimates (``docs/fits.md``): the tuned value or the plain fit."""
    kind = fit.get("critical_estimate")
    return "" if kind is None else f" <span class='note'>({escape(str(kind))})</span>"


def _plain_row(fit: dict[str, Any]) -> str:
    """The paper's plain fit to the best trials, beside a bias-corrected B_crit."""
    if fit.get("critical_estimate") != CORRECTED or fit.get("b_crit_plain") is None:
        return ""
    return (f"<tr><td>B_crit, plain fit to the best trials</td>"
            f"<td>{_value(fit, 'b_crit_plain', 0)}</td></tr>")


_W, _H = 300, 240
"""A workload chart's plot size: drawn at 72 dpi sizes and scaled to its column (about
650 px in a 1400 px window), its 9 px text reads at the page's 15 px."""


def _charts(data: WorkloadPage) -> list[tuple[str, dict[str, Any]]]:
    g = data.goal
    sign = ">" if g.maximize else "<"
    steps = [(f"{g.metric} {sign} {goal!r}", data.steps.filter(pl.col("goal") == goal))
             for goal in data.goals]
    main_label = f"{g.metric} {sign} {g.goal!r}"
    # without momentum (plain SGD) the effective learning rate is the learning rate
    momentum = data.scatter["momentum"] if "momentum" in data.scatter.columns else None
    with_momentum = momentum is not None and bool(
        (momentum.cast(pl.Float64).fill_null(0.0) != 0).any())
    what, y_title = (("Effective Learning Rate", "Learning Rate / (1 - Momentum)")
                     if with_momentum else ("Learning Rate", "Learning Rate"))
    charts: list[tuple[str, dict[str, Any]]] = [
        ("steps", steps_chart(steps, title="Steps to result", scaling_label=main_label,
                              select="goal", fit=data.regimes, critical=data.critical,
                              width=_W, height=_H)),
        ("optimal", metaparameter_chart(
            [(f"Optimal {what}", data.optimal)],
            title=f"Optimal {what.lower()} ({main_label})", y_title=y_title, width=_W,
            height=_H)),
    ]
    scatter = data.scatter.filter(pl.col("learning_rate").is_not_null())
    if scatter.height:
        sizes = sorted(set(scatter["batch_size"].to_list()))
        charts.append(("scatter", scatter_chart(
            scatter, title=f"Trials at {main_label}", select=sizes, width=_W, height=_H)))
    charts.append(("best", best_chart(
        [(data.workload, data.best)], title="Best value per batch size",
        y_title=f"Best {g.metric}", goal_line=g.goal,
        goal_label=f"goal {g.metric} {sign} {g.goal!r} ({goal_source(g)})", width=_W,
        height=_H)))
    return charts


def _workload_page(data: WorkloadPage, note: str | None = None) -> str:
    g, fit = data.goal, data.fit
    source = goal_source(g)
    facts = (
        f"<p>{len(data.batch_sizes)} batch sizes ({data.batch_sizes[0]:,}–"
        f"{data.batch_sizes[-1]:,}); trials: "
        + ", ".join(f"{n:,} {s}" for s, n in data.trial_counts.items())
        + f". Goal: {_goal(g)} "
        f"({source}), first {g.trials} COMPLETE trials per study.</p>"
        "<table><tr><th>fitted at the goal</th><th>value [95% interval]</th></tr>"
        f"<tr><td>perfect scaling ends at</td><td>{_cell(fit, 'perfect_scaling_end')}</td></tr>"
        f"<tr><td>maximum useful batch size</td>"
        f"<td>{_cell(fit, 'max_useful_batch_size')}</td></tr>"
        f"<tr><td>B_crit{_estimate(fit)}</td><td>{_cell(fit, 'b_crit')}</td></tr>"
        + _plain_row(fit)
        + f"<tr><td>model</td><td>{escape(str(fit.get('model', '–')))}</td></tr></table>"
        + "".join(f"<p class='note'>{escape(str(fit[k]))}</p>"
                  for k in ("note", "range_note", "critical_estimate_note") if fit.get(k))
        + _rounds(data.adaptive))
    specs = _charts(data)
    divs = "".join(f"<div class='chart' id='chart-{name}'></div>" for name, _ in specs)
    return _page(data.workload, facts + f"<div class='charts'>{divs}</div>", depth=1,
                 specs=[(f"chart-{name}", spec) for name, spec in specs], note=note)


def _rounds(record: dict[str, Any] | None) -> str:
    """An adaptive run's rounds: where each round's trials went, why, and B_crit after it."""
    if record is None:
        return ""
    rows = round_rows(record)
    sign = ">" if record.get("maximize") else "<"
    head = (f"<h2>Adaptive run</h2><p>{len(record.get('rounds', []))} rounds at "
            f"{escape(str(record.get('metric')))} {escape(sign)} "
            f"{escape(repr(record.get('goal')))}, "
            f"trial budget {escape(str(record.get('trial_budget')))}, target width "
            f"{escape(str(record.get('target_width') or '–'))}; stopped: "
            f"{escape(str(record.get('stopped') or 'not finished'))}"
            + (f" ({escape(str(record['reason']))})" if record.get("reason") else "") + ".</p>")
    if not rows:
        return head
    columns = list(rows[0])
    table = ("<table><tr>" + "".join(f"<th>{escape(c)}</th>" for c in columns) + "</tr>"
             + "".join("<tr>" + "".join(f"<td>{escape(str(row[c]))}</td>" for c in columns)
                       + "</tr>" for row in rows) + "</table>")
    return head + table


def _index(rows: list[tuple[WorkloadPage | None, str, str]], note: str | None = None,
           synthetic: frozenset[str] = frozenset()) -> str:
    lines = ["<table><tr><th>workload</th><th>batch sizes</th><th>trials</th><th>goal</th>"
             "<th>perfect scaling ends</th><th>max useful batch size</th><th>B_crit</th></tr>"]
    for data, workload, problem in rows:
        link = (f"<a href=\"{escape(href(_page_file(workload)))}\">"
                f"{escape(workload)}</a>"
                + ("<span class='tag'>synthetic</span>" if workload in synthetic else ""))
        if data is None:
            lines.append(f"<tr><td>{escape(workload)}</td>"
                         f"<td colspan='6' class='note'>{escape(problem)}</td></tr>")
            continue
        g, fit = data.goal, data.fit
        lines.append(
            f"<tr><td>{link}</td><td>{len(data.batch_sizes)} ({data.batch_sizes[0]:,}–"
            f"{data.batch_sizes[-1]:,})</td><td>{sum(data.trial_counts.values()):,}</td>"
            f"<td>{_goal_cell(g)}</td>"
            f"<td>{_cell(fit, 'perfect_scaling_end')}</td>"
            f"<td>{_cell(fit, 'max_useful_batch_size')}</td><td>{_cell(fit, 'b_crit')}</td></tr>")
    lines.append("</table><p class='note'>Fits are curvekit's own definitions (see "
                 "docs/fits.md): 95% intervals, B_crit's calibrated for the finite number of "
                 "trials (none where that cannot be done), the regime boundaries' bootstrap "
                 "percentiles over trials.</p>")
    notes = [(w, d.fit["range_note"]) for d, w, _ in rows if d and d.fit.get("range_note")]
    if notes:  # † in the table: a value past the measured batch sizes
        lines.append("<ul class='note'>" + "".join(
            f"<li>† {escape(w)}: {escape(n)}.</li>" for w, n in notes) + "</ul>")
    dashes = [(w, _missing(d.fit)) for d, w, _ in rows if d and _missing(d.fit)]
    if dashes:  # – in the table: the fit gives no such value
        lines.append("<p class='note'>– : the fit gives no such value for the workload:</p>"
                     "<ul class='note'>" + "".join(
                         f"<li>– {escape(w)}: {escape(n)}</li>" for w, n in dashes) + "</ul>")
    if any(d is not None and d.goal.source == "rule" for d, _, _ in rows):
        lines.append("<p class='note'>(rule): a goal computed from the workload's best "
                     "values, which the paper does not give (see docs/fits.md).</p>")
    if synthetic:
        lines.append("<p class='note'><span class='tag'>synthetic</span>: data from an "
                     "archive made by <code>curvekit generate-archive</code>, not the "
                     "paper's.</p>")
    return _page("Workloads", "".join(lines), depth=0, note=note)


def _figures(store: Store, folder: Path, progress: Progress | None) -> None:
    from curvekit.plotting.paper import FIGURES
    from curvekit.plotting.render import SOURCES, FigureError, figure_spec, file_name

    items = []
    drawn: list[str] = []
    for i, number in enumerate(sorted(FIGURES), 1):
        figure = FIGURES[number]
        title = f"Figure {number}: {figure.title}"
        kind = "reconstruction" if figure.reconstruction else "source"
        said = f" <span class='{kind}'>— {escape(figure.source)}</span>"
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                spec, _ = figure_spec(number, store)
        except FigureError as exc:
            items.append(f"<li>{escape(title)}{said} <span class='note'>"
                         f"{escape(str(exc))}</span></li>")
            continue
        name = file_name(figure, "html")
        workloads = figure.workloads()
        drawn += workloads
        # the chart carries the figure's title and its source line: the page repeats neither
        write_file(folder / name, _page(
            title, "<div class='chart figure' id='chart-figure'></div>", depth=1,
            specs=[("chart-figure", spec)], note=synthetic_note(store, workloads),
            heading=False), _WHAT)
        items.append(f"<li><a href='{name}'>{escape(title)}</a>{said}</li>")
        if progress is not None:
            progress("figures", i, len(FIGURES))
    write_file(folder / "index.html", _page("Figures of the paper",
                                            f"<p>{escape(SOURCES)}</p><ul>" + "".join(items)
                                            + "</ul>", depth=1,
                                            note=synthetic_note(store, drawn)), _WHAT)


# Names of the folders a run works in, beside the report: the whole site is built in the
# first and moved into place; the previous report waits in the second until it has been.
# The pid tells the next run whether the run that made a folder is still alive.
_WORK = re.compile(r"^\.(?P<name>.+)\.curvekit-(?P<kind>tmp|old)-(?P<pid>\d+)-[0-9a-f]{8}$")
_WHAT = "the report"
_SITE_ENTRIES = frozenset({MARKER, "index.html", "assets", "workloads", "figures"})


def _work_folder(out: Path, kind: str) -> Path:
    return out.parent / f".{out.name}.curvekit-{kind}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by another user
        return True
    return True


def _remove_stale(out: Path) -> list[Path]:
    """Remove the work folders earlier runs for ``out`` left when killed; return them.

    Only a real folder (no link) named as :func:`_work_folder` names them, made by a process
    that is gone, and empty or holding curvekit's marker file, is touched. A previous report
    left aside by a run killed while swapping goes back in place if ``out`` is missing.
    """
    removed: list[Path] = []
    if not out.parent.is_dir():
        return removed
    for entry in sorted(out.parent.iterdir()):
        match = _WORK.match(entry.name)
        if (match is None or match["name"] != out.name or _alive(int(match["pid"]))
                or entry.is_symlink() or not entry.is_dir()):
            continue
        marker = entry / MARKER
        if marker.is_file() and marker.read_text(errors="replace").startswith("curvekit"):
            if match["kind"] == "old" and not out.exists():
                entry.rename(out)
                continue
            shutil.rmtree(entry)
        elif not any(entry.iterdir()):
            entry.rmdir()  # killed before its marker was written
        else:
            continue
        removed.append(entry)
    return removed


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or path.is_relative_to(folder)


def check_out(store: Store, out: Path) -> None:
    """Raise a :class:`ReportError` unless ``out`` may be replaced by a new report.

    The report replaces its folder as a whole, so the folder may not hold the working
    directory, the store or anything but an earlier report, nor lie inside the store.
    """
    if out.is_symlink():
        raise ReportError(f"report folder {out} is a symbolic link; pass the folder it "
                            f"points to ({out.resolve()}) or a new folder")
    real = out.resolve()
    cwd = Path.cwd().resolve()
    if _inside(cwd, real):
        raise ReportError(
            f"report folder {out} contains the working directory {cwd}; the report replaces "
            "that folder as a whole, so run curvekit from elsewhere or choose another --out")
    stores = store.path.parent if store.path.parent.name == "stores" else store.path
    if _inside(store.path, real) or _inside(real, stores):
        raise ReportError(
            f"report folder {out} {'lies inside' if _inside(real, stores) else 'contains'} "
            f"the store {store.path}; choose a folder outside the store, e.g. ./report")
    if out.exists() and not out.is_dir():
        raise ReportError(f"report folder {out} exists and is a file; choose a new folder")
    if out.is_dir():
        entries = {p.name for p in out.iterdir()}
        if entries and MARKER not in entries:
            raise ReportError(f"report folder {out} exists and is not a curvekit report; "
                                "choose an empty or new folder")
        if extra := sorted(entries - _SITE_ENTRIES):
            raise ReportError(
                f"report folder {out} holds files a report does not write "
                f"({', '.join(repr(e) for e in extra[:5])}); move them out of it or choose "
                "another folder, since a new report replaces the folder as a whole")


def report(store: Store, out: str | os.PathLike[str], *, bootstrap: int = 200,
           figures: bool = True, workloads: Iterable[str] | None = None,
           progress: Progress | None = None) -> Path:
    """Write the report site for ``store`` into the folder ``out`` and return it.

    ``bootstrap`` resamples per fit (0: no intervals); ``figures=False`` leaves out the
    gallery of the paper's figures; ``workloads`` limits the workload pages.

    The site is built complete beside ``out`` and only then swapped in; ``out`` must be new,
    empty or an earlier report (see :func:`check_out`). Work folders that killed runs left
    beside ``out`` are removed first.

    >>> import tempfile, pathlib, curvekit
    >>> home = pathlib.Path(tempfile.mkdtemp())
    >>> _ = curvekit.demo(home)
    >>> site = report(curvekit.open(home), home / "report", bootstrap=0, figures=False)
    >>> (site / "index.html").is_file()
    True
    """
    out = Path(os.path.abspath(out))
    names = list(workloads) if workloads is not None else store.workloads()
    for name in names:
        store.split_workload(name)  # an unknown name fails before any work
    staging = _work_folder(out, "tmp")
    # A full disk, a read-only folder, a name too long: an OutputError; the old report stays.
    with writing("the report", out, staging):
        extra = len(os.fsencode(staging.name)) - len(os.fsencode(out.name))
        limit = name_max(out.parent)
        if len(os.fsencode(staging.name)) > limit:
            raise OutputError(
                f"cannot write the report {out}: its name is {len(os.fsencode(out.name))} "
                f"bytes, and the report is built beside it in a folder named after it with "
                f"{extra} bytes more ({staging.name[:24]}...), while names here have at most "
                f"{limit} bytes; choose a name of at most {limit - extra} bytes",
                path=str(out))
        check_out(store, out)
        _remove_stale(out)
        _build(store, out, staging, names, bootstrap=bootstrap, figures=figures,
               progress=progress)
    return out


def _build(store: Store, out: Path, staging: Path, names: list[str], *, bootstrap: int,
           figures: bool, progress: Progress | None) -> None:
    """Build the site in ``staging`` and swap it in for ``out`` (see :func:`report`)."""
    import vl_convert as vlc

    try:
        staging.mkdir(parents=True)
        write_file(staging / MARKER, f"curvekit {__version__}\n", _WHAT)
        for sub in ("assets", "workloads", "figures"):
            (staging / sub).mkdir()
        bundle: str = vlc.javascript_bundle()  # type: ignore[call-arg]
        write_file(staging / "assets" / "vega.js", bundle, _WHAT)
        write_file(staging / "assets" / "style.css", _STYLE + EMBED_CSS, _WHAT)
        write_file(staging / "assets" / "report.js", EMBED_JS, _WHAT)
        rows: list[tuple[WorkloadPage | None, str, str]] = []

        def page(workload: str) -> tuple[WorkloadPage | None, str, str]:
            try:
                data = workload_data(store, workload, bootstrap=bootstrap)
            except CurvekitError as exc:
                return None, workload, str(exc)
            write_file(staging / _page_file(workload),
                       _workload_page(data, synthetic_note(store, [workload])), _WHAT)
            return data, workload, ""

        # Two workloads at a time: DuckDB and the fits' numerics release the GIL.
        with ThreadPoolExecutor(max_workers=2) as pool:
            for i, row in enumerate(pool.map(page, names), 1):
                rows.append(row)
                if progress is not None:
                    progress("workloads", i, len(names))
        synthetic = frozenset(synthetic_workloads(store)) & frozenset(names)
        # the header says so when every workload listed is synthetic; else their rows do
        every = synthetic == frozenset(names)
        write_file(staging / "index.html",
                   _index(rows, synthetic_note(store, names) if every else None, synthetic),
                   _WHAT)
        if figures:
            _figures(store, staging / "figures", progress)
        else:
            write_file(staging / "figures" / "index.html",
                       _page("Figures of the paper", "<p>Not drawn in this report.</p>",
                             depth=1), _WHAT)
        _swap(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _swap(staging: Path, out: Path) -> None:
    """Put the complete site ``staging`` in the place of ``out``; the old report is deleted
    only once the new one is in place (a kill in between leaves both, named for cleanup)."""
    if not out.exists():
        staging.rename(out)
        return
    old = _work_folder(out, "old")
    out.rename(old)
    try:
        staging.rename(out)
    except BaseException:
        old.rename(out)
        raise
    shutil.rmtree(old, ignore_errors=True)
