"""Render a :class:`~curvekit.plotting.spec.Figure` from a store.

>>> from curvekit.plotting.paper import FIGURES, PARTS
>>> sorted(FIGURES)[:2]
[1, 2]
"""

from __future__ import annotations

import html
import json
import math
import os
import re
import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from curvekit import structured
from curvekit.errors import FigureError, FigureNotesWarning
from curvekit.goals import paper_goal
from curvekit.measure import best, steps_to_result, trial_outcomes
from curvekit.outputs import write_file, writing
from curvekit.plotting.builders import (
    Title,
    align_titles,
    best_chart,
    half_decade_limits,
    legend_strip,
    legible_title,
    metaparameter_chart,
    note_layer,
    noted,
    recolor,
    scatter_chart,
    scatter_outcomes,
    search_space_chart,
    steps_chart,
)
from curvekit.plotting.layout import CONFIG, TEXT, TITLE_OVERHANG, inside, legend_corner
from curvekit.plotting.paper import FIGURES, PARTS
from curvekit.plotting.plots import provenance
from curvekit.plotting.spec import RECONSTRUCTED_FROM, Curve, Figure, Panel
from curvekit.plotting.vegalite import SCHEMA, Spec, to_altair
from curvekit.selection import Selection
from curvekit.store.catalog import synthetic_note
from curvekit.store.store import Store

if TYPE_CHECKING:
    import altair as alt

__all__ = ["FigureError", "FigureNotesWarning", "check_figure_number", "figure", "figure_spec",
           "file_name", "render_all", "source_html", "star_notes"]


Limits = tuple[tuple[float, float], tuple[float, float]]
"""(x limits, y limits) of a chart."""


def _resolve(store: Store, panel: Panel, notes: list[str] | None = None) -> Panel:
    """Fill in render-time choices: the paper's goal where a curve's goal is None, and the
    fallback metric of a curve whose workload lacks its metric (retitled, noted)."""
    curves, title = [], panel.title
    for c in panel.curves:
        if c.selection.goal is None and panel.kind in ("steps", "metaparameter",
                                                       "search_space"):
            g = paper_goal(store, c.workload)
            c = replace(c, selection=replace(c.selection, metric=g.metric, goal=g.goal,
                                             maximize=g.maximize, trials=g.trials))
            title = panel.title.format(workload=c.workload, goal=f"{g.goal!r}") + (
                " (rule)" if g.source == "rule" else "")
        metric = c.selection.metric
        if c.fallback_metric and metric not in store.metrics(c.workload):
            if notes is not None:
                # the panel's title names the workload; the note stays short
                notes.append(f"no {metric} in the store: drawn with "
                             f"{c.fallback_metric} instead")
            c = replace(c, selection=c.selection.with_metric(c.fallback_metric))
            title = title.replace(" (train)", " (validation)")
        curves.append(c)
    return replace(panel, curves=tuple(curves), title=title)


def _steps(store: Store, c: Curve) -> pl.DataFrame:
    # explain=False: the paper's figures leave out batch sizes by design
    return _eligible(store, c, steps_to_result(store, c.selection, explain=False))


def _eligible(store: Store, c: Curve, table: pl.DataFrame) -> pl.DataFrame:
    """Keep the batch sizes whose study ran at least the curve's budget in steps."""
    if not c.eligible:
        return table
    studies = store.studies(c.workload).select("batch_size", "train_steps")
    need = pl.lit(True)
    step_budget, example_budget = c.selection.step_budget, c.selection.example_budget
    if step_budget is not None:
        need = need & (pl.col("train_steps") >= step_budget)
    if example_budget is not None:
        need = need & (pl.col("train_steps") * pl.col("batch_size") >= example_budget)
    keep = studies.filter(need)["batch_size"]
    return table.filter(pl.col("batch_size").is_in(keep.implode()))


def _nearest(at: int, sizes: Sequence[int]) -> int:
    """The batch size of ``sizes`` nearest ``at`` on the log2 axis (the smaller on a tie)."""
    return min(sizes, key=lambda b: (abs(math.log2(b) - math.log2(at)), b))


def _normalized(panel: Panel, curves: list[tuple[str, pl.DataFrame]]
                ) -> tuple[int | None, dict[str, int], list[tuple[str, pl.DataFrame]],
                           list[str]]:
    """The panel's normalizing batch size, the curves normalized elsewhere (label → batch
    size), the curves to draw and the notes that say what changed.

    A curve without a point at the panel's batch size is normalized at its nearest measured
    one, and said so; a curve without any point is left out, and said so. ``common`` is the
    smallest batch size every curve reaches, else the one most curves reach.
    """
    notes = [f"{label}: no batch size reaches the goal" for label, t in curves if t.is_empty()]
    drawn = [(label, t) for label, t in curves if not t.is_empty()]
    nominal = panel.normalize_at
    if nominal is None or not drawn:
        return nominal if isinstance(nominal, int) else None, {}, drawn, notes
    at: int
    if nominal != "common":
        at = nominal
    else:
        counts: dict[int, int] = {}
        for _, table in drawn:
            for b in set(table["batch_size"].to_list()):
                counts[b] = counts.get(b, 0) + 1
        at = min(counts, key=lambda b: (-counts[b], b))
    anchors = {}
    for label, table in drawn:
        sizes = table["batch_size"].to_list()
        if at not in sizes:
            anchors[label] = _nearest(at, sizes)
            notes.append(f"{label}: no point at B={at}; normalized at B={anchors[label]}")
    return at, anchors, drawn, notes


def _scatter_data(store: Store, panel: Panel) -> pl.DataFrame:
    (c,) = panel.curves
    assert c.batch_size is not None
    return trial_outcomes(store, c.selection, c.batch_size)


def _search_space(store: Store, panel: Panel, title: Title, width: float, height: float
                  ) -> Spec:
    (c,) = panel.curves
    winners = _steps(store, c).select("batch_size", pl.col("learning_rate").alias("value"))
    band = []
    for bs, configs in store.studies(c.workload).select(
            "batch_size", "parameter_configs").iter_rows():
        config = json.loads(configs or "{}").get("learning_rate")
        if not config:
            continue
        points = config.get("feasible_points")
        low, high = ((min(points), max(points)) if points else
                     (config.get("min_value"), config.get("max_value")))
        if low is not None and high is not None:
            band.append((bs, float(low), float(high)))
    frame = pl.DataFrame(band, schema={"batch_size": pl.Int64, "low": pl.Float64,
                                       "high": pl.Float64}, orient="row")
    return search_space_chart(winners, frame, title=title, y_title=panel.y_title or
                              "Learning Rate", studies=_studies(store, panel)[c.label],
                              width=width, height=height)


def _panel(store: Store, panel: Panel, width: float, height: float,
           title_size: float | None = None, limits: Limits | None = None,
           scatter: pl.DataFrame | None = None, outcomes: set[str] | None = None
           ) -> tuple[Spec, list[str]]:
    """One panel's chart and its notes (what it lacks, and why); ``limits`` and
    ``scatter`` are a scatter's shared limits and its trials when the figure computed
    them already."""
    notes: list[str] = []
    panel = _resolve(store, panel, notes)
    title: Title = (panel.title if title_size is None
                    else {"text": panel.title, "fontSize": title_size})
    if panel.kind == "steps":
        at, anchors, curves, more = _normalized(
            panel, [(c.label, _steps(store, c)) for c in panel.curves])
        notes += more
        spec = steps_chart(curves, title=title, scaling_label=panel.scaling_label,
                           normalize_at=at, anchors=anchors, ylim=panel.ylim, width=width,
                           height=height, legend=panel.legend, legend_size=panel.legend_size,
                           notes=notes, studies=_studies(store, panel),
                           keyed=len(panel.curves) > 1 or len(curves) < len(panel.curves))
        spec["title"] = legible_title(spec["title"], width + TITLE_OVERHANG)
        return spec, spec.pop("usermeta", {}).get("notes", notes)
    if panel.kind == "metaparameter":
        curves = [(c.label, _steps(store, c).select(
            "batch_size", _metaparameter(panel.y).alias("value"))) for c in panel.curves]
        notes += [f"{label}: no batch size reaches the goal"
                  for label, t in curves if t.is_empty()]
        spec = metaparameter_chart([(label, t) for label, t in curves if not t.is_empty()],
                                   title=title, y_title=panel.y_title,
                                   heuristics=panel.heuristics, y_base=panel.y_base,
                                   studies=_studies(store, panel), width=width,
                                   height=height, legend=panel.legend,
                                   legend_size=panel.legend_size)
    elif panel.kind == "scatter":
        xlim, ylim = limits or (panel.xlim, panel.ylim)
        trials = scatter if scatter is not None else _scatter_data(store, panel)
        notes += star_notes(trials, panel.curves[0].selection, xlim, ylim)
        spec = scatter_chart(trials, title=title, xlim=xlim, ylim=ylim,
                             legend=panel.legend or "bottom-right",
                             legend_size=panel.legend_size, outcomes=outcomes, width=width,
                             height=height)
    elif panel.kind == "search_space":
        spec = _search_space(store, panel, title, width, height)
        if not spec["datasets"] or all(not rows for rows in spec["datasets"].values()):
            notes.append("no batch size reaches the goal")
    else:
        curves = []
        for c in panel.curves:
            values = _eligible(store, c, best(store, c.selection, explain=False))
            if values.is_empty():
                notes.append(f"{c.label}: no study ran the budget" if c.eligible
                             else f"{c.label}: no measurements")
                continue
            curves.append((c.label, values.select(
                "batch_size", pl.col(c.selection.metric).alias("value"))))
        first = panel.curves[0] if panel.curves else None
        goal = first.selection.goal if first is not None and panel.goal_line else None
        spec = best_chart(curves, title=title, y_title=panel.y_title, goal_line=goal,
                          goal_label=panel.goal_label or (
                              _goal_label(first) if first is not None else "goal"),
                          xlim=panel.xlim, ylim=panel.ylim, legend=panel.legend,
                          legend_size=panel.legend_size, width=width, height=height)
    notes += [n for n in spec.pop("usermeta", {}).get("notes", []) if n not in notes]
    # in a grid, a long title would run into the next panel's: break it into lines
    spec["title"] = legible_title(noted(spec["title"], notes), width + TITLE_OVERHANG)
    if notes and all(not rows for rows in spec["datasets"].values()):
        spec["layer"].append(note_layer(notes, spec["datasets"], empty=True))
    return spec, notes


def star_notes(trials: pl.DataFrame, selection: Selection,
               xlim: tuple[float, float] | None, ylim: tuple[float, float] | None
               ) -> list[str]:
    """What a scatter panel's best-trial star cannot show, in words: no trial reaches the
    goal (so there is no star), or the winning trial lies outside the panel's fixed limits
    (so its star would be clipped away); ``[]`` when the star is drawn.

    ``trials`` is :func:`~curvekit.measure.trial_outcomes` of one study; limits of
    ``None`` are computed from the trials themselves and hold every one.

    >>> trials = pl.DataFrame({"learning_rate": [0.96, 0.01], "momentum": [0.99, 0.9],
    ...                        "winner": [True, False]})
    >>> s = Selection("w/m/o", "val/cross_entropy_error", 3.9)
    >>> star_notes(trials, s, (1e-4, 0.3), (1e-6, 10.0))
    ['best trial off the axes: lr 0.96, 1 − momentum 0.01']
    >>> star_notes(trials.with_columns(winner=False), s, None, None)
    ['no star: no trial gets below 3.9']
    """
    winners = trials.filter(pl.col("winner"))
    if winners.is_empty():
        return [f"no star: no trial gets {'above' if selection.maximize else 'below'} "
                f"{selection.goal!r}"]
    lr = winners["learning_rate"][0]
    momentum = winners["momentum"][0]
    # a study whose trials have no momentum draws its outcomes on the y axis instead
    with_momentum = bool(trials["momentum"].fill_null(0).ne(0).any())
    one_minus = None if momentum is None else round(1 - momentum, 12)

    def outside(value: float | None, lim: tuple[float, float] | None) -> bool:
        return value is not None and lim is not None and not lim[0] <= value <= lim[1]

    if outside(lr, xlim) or (with_momentum and outside(one_minus, ylim)):
        where = f"lr {lr:.2g}" + (f", 1 − momentum {one_minus:.2g}"
                                  if with_momentum and one_minus is not None else "")
        return [f"best trial off the axes: {where}"]
    return []


def _metaparameter(column: str) -> pl.Expr:
    """A winning trial's metaparameter as a panel draws it: ``one_minus_momentum`` is
    1 − momentum (plain SGD, without momentum, counts as momentum 0)."""
    if column == "one_minus_momentum":
        return 1 - pl.col("momentum").cast(pl.Float64).fill_null(0.0)
    return pl.col(column)


def _studies(store: Store, panel: Panel) -> dict[str, list[float]]:
    """Each curve's batch sizes that could be drawn (label → its workload's studies, those
    that ran the budget for an eligible curve), so that a line breaks where one lacks."""
    out = {}
    for c in panel.curves:
        sizes = store.studies(c.workload).select("batch_size", "train_steps")
        out[c.label] = [float(b) for b in _eligible(store, c, sizes)["batch_size"].to_list()]
    return out


def _goal_label(c: Curve) -> str:
    """A goal line's legend entry: the goal with the metric it is a goal of."""
    s = c.selection
    return f"goal {s.metric} {'>' if s.maximize else '<'} {s.goal!r}"


def _shared_limits(store: Store, spec: Figure
                   ) -> tuple[Limits | None, dict[int, pl.DataFrame]]:
    """Half-decade limits over every scatter panel of a figure that shares them, and each
    scatter panel's trials (by panel index), so that no study is queried twice."""
    frames = {i: _scatter_data(store, _resolve(store, p)) for i, p in enumerate(spec.panels)
              if p.kind == "scatter"}
    if not spec.shared_limits or not frames:
        return None, frames
    data = pl.concat(list(frames.values()))
    return (half_decade_limits(data["learning_rate"].to_list()),
            half_decade_limits((1 - data["momentum"]).to_list())), frames


_NAME = re.compile(r"0*(?P<number>[0-9]+)(?P<part>[a-z]?)")


def check_figure_number(number: int | str) -> Figure:
    """The spec of the paper's figure ``number`` (1–24), or of one part of it (``"9a"``,
    ``"9b"``); FigureError for any other.

    >>> check_figure_number(9).name, check_figure_number("9b").title
    ('9', 'Fixed step budget: 25,000 steps')
    """
    text = str(number).strip().lower()
    match = _NAME.fullmatch(text) if not isinstance(number, bool) else None
    found = None
    if match:
        whole = FIGURES.get(int(match["number"]))
        found = (whole if not match["part"] else
                 PARTS.get(f"{int(match['number'])}{match['part']}"))
    if found is None:
        parts = " and ".join(PARTS)
        raise FigureError(f"there is no figure {number}; the paper's figures are "
                          f"{min(FIGURES)}–{max(FIGURES)}, and {parts} draw one part of "
                          f"Figure {next(iter(PARTS.values())).number} each")
    return found


def _check(number: int | str, store: Store) -> Figure:
    spec = check_figure_number(number)
    missing = [w for w in spec.workloads() if w not in store.workloads()]
    if missing:
        raise FigureError(
            f"figure {spec.name} needs workloads missing from the store: "
            f"{', '.join(missing)}; run `curvekit fetch` for the release "
            "(or `curvekit fetch --archive PATH`)")
    return spec


def file_name(spec: Figure, fmt: str) -> str:
    """The file a figure is written to by default: ``figure-09.png``, ``figure-09a.png``.

    >>> file_name(check_figure_number("9a"), "svg")
    'figure-09a.svg'
    """
    return f"figure-{spec.number:02d}{spec.part}.{fmt}"


def _charts(spec: Figure, store: Store) -> tuple[list[Spec], list[str]]:
    """Every panel's chart, and the notes of all of them (``panel title: note``)."""
    width, height = spec.size_px
    panel_w, panel_h = width / spec.cols - 60, height / spec.rows - 60
    limits, scatters = _shared_limits(store, spec)
    # the scatters' legend lists what any of them draws, so that they share one
    outcomes = set().union(*(
        scatter_outcomes(trials, *(limits or (spec.panels[i].xlim, spec.panels[i].ylim)))
        for i, trials in scatters.items())) if scatters else None
    # DuckDB releases the GIL: two panels query at once, each on its thread's cursor.
    with store.one_thread_per_query(), ThreadPoolExecutor(max_workers=2) as pool:
        drawn = list(pool.map(
            lambda i: _panel(store, spec.panels[i], panel_w, panel_h, spec.title_size, limits,
                             scatters.get(i), outcomes),
            range(len(spec.panels))))
    notes = [f"{_plain(chart.get('title'))}: {note}" for chart, panel_notes in drawn
             for note in panel_notes]
    return [chart for chart, _ in drawn], notes


def _plain(title: Any) -> str:
    """A chart title as one line of text."""
    if isinstance(title, dict):
        title = title.get("text", "")
    return " ".join(title) if isinstance(title, list) else str(title or "")


def _legend_channels(panel: Spec) -> list[tuple[str, Spec, Any]]:
    """The encoding channels of a panel that draw a legend: (channel name, encoding, its
    layer's mark)."""
    return [(name, enc, layer.get("mark")) for layer in panel.get("layer", [])
            for name, enc in layer.get("encoding", {}).items()
            if name in _LEGEND_CHANNELS and enc.get("type") == "nominal"
            and enc.get("legend", {}) is not None and "field" in enc]


_LEGEND_CHANNELS = ("color", "fill", "stroke", "shape", "size", "opacity", "strokeDash")


def _share_legends(panels: list[Spec], cols: int, width: float, datasets: dict[str, Any]
                   ) -> Spec | None:
    """One legend for a figure whose panels all have the same one, where it covers no
    data: inside the plot of a panel with a corner free of data (the first row's last
    panel if it has one, else the first that has), dropped from the others; or, when no
    panel has a free corner, under the grid: the returned strip (a row of its own,
    ``width`` px wide, its data in ``datasets``). A figure of panels with different
    legends keeps each panel's, each placed by its builder where it covers no data."""
    if len(panels) < 2:
        return None

    def signature(panel: Spec) -> str:
        return structured.dumps([(c["field"], c.get("scale", {}).get("domain"), c.get("sort"))
                                 for _, c, _ in _legend_channels(panel)])

    first = signature(panels[0])
    if first == "[]" or any(signature(p) != first for p in panels[1:]):
        return None
    preferred = min(cols, len(panels)) - 1
    order = [preferred, *(i for i in range(len(panels)) if i != preferred)]
    corners = {i: legend_corner(panels[i], panels[i].get("datasets", {})) for i in order}
    keep = next((i for i in order if corners[i] is not None), None)
    strip = None
    if keep is None:
        strip = legend_strip(_legend_channels(panels[preferred]), width, datasets)
    for i, panel in enumerate(panels):
        for _, enc, _ in _legend_channels(panel):
            if i != keep:
                enc["legend"] = None
            else:
                inside(enc["legend"], (corners[i] or {})[str(enc["field"])])
    return strip


def _provenance(spec: Figure, store: Store) -> dict[str, Any]:
    curves = [(c, c.selection) for p in spec.panels for c in p.curves]
    return provenance(store, figure=spec.number, part=spec.part or None,
                      parts=[p.name for p in spec.parts], source=spec.source,
                      reconstruction=spec.reconstruction, workloads=spec.workloads(),
                      curves=[{"workload": s.workload, "label": c.label, "metric": s.metric,
                               "goal": s.goal, "maximize": s.maximize, "trials": s.trials,
                               "statuses": list(s.statuses), "step_budget": s.step_budget,
                               "example_budget": s.example_budget, "subset": s.subset,
                               "batch_size": c.batch_size, "eligible": c.eligible}
                              for c, s in curves])


# Each panel keeps its own legend, and its own scales: merged across the grid, the
# scatters' outcome scales of panels (or parts) that show different outcomes would pair
# one panel's entries with another's colours and shapes.
_OWN = {name: "independent" for name in ("color", "shape", "opacity", "strokeDash", "size")}
_LEGENDS = {"legend": dict(_OWN), "scale": dict(_OWN)}


def _title(spec: Figure) -> str:
    """``Figure 1: ...``; one part of a figure names the figure, then the part's caption."""
    if spec.part:
        caption = spec.title[:1].lower() + spec.title[1:]
        return f"{spec.label}: {FIGURES[spec.number].title}, {caption}"
    return f"{spec.label}: {spec.title}"


def _outer_axis_titles(panels: list[Spec], cols: int) -> None:
    """Keep the y axis titles of the left column and the x axis titles of the bottom row
    only (the panels of a grid on the same axes say them once)."""
    bottom = len(panels) - ((len(panels) - 1) % cols + 1)
    for i, panel in enumerate(panels):
        for layer in panel.get("layer", []):
            for name, keep in (("x", i >= bottom), ("y", i % cols == 0)):
                enc = layer.get("encoding", {}).get(name)
                if keep or not isinstance(enc, dict):
                    continue
                enc["title"] = None
                if isinstance(enc.get("axis"), dict):
                    enc["axis"]["title"] = None


def _grid(spec: Figure, store: Store, datasets: dict[str, Any]
          ) -> tuple[list[Spec], list[str]]:
    """The rows of one figure's (or part's) grid of panels, their data moved into
    ``datasets``, and their notes."""
    panels, notes = _charts(spec, store)
    if spec.outer_axis_titles:
        _outer_axis_titles(panels, spec.cols)
    recolor(panels)
    strip = _share_legends(panels, spec.cols, spec.size_px[0] - 60, datasets)
    for panel in panels:
        datasets.update(panel.pop("datasets"))
        del panel["$schema"]
        panel.pop("config", None)  # Vega-Lite reads config at the top level only
    for i in range(0, len(panels), spec.cols):
        align_titles(panels[i:i + spec.cols])
    rows = [{"hconcat": panels[i:i + spec.cols], "resolve": _LEGENDS}
            for i in range(0, len(panels), spec.cols)]
    return rows + ([strip] if strip is not None else []), notes


def figure_spec(number: int | str, store: Store | None = None
                ) -> tuple[Spec, dict[str, Any]]:
    """The paper's figure ``number`` drawn from ``store`` as a Vega-Lite spec, and its
    provenance.

    The spec is a grid (rows of ``hconcat`` in a ``vconcat``) of one layered chart per
    panel, with the panels' data in its ``datasets``; when the panels share a legend that
    no panel has a corner free of data for, a last row (a layered chart, no ``hconcat``)
    draws only that legend. A figure in parts (Figure 9) is a
    ``vconcat`` of its parts, each titled and holding its own grid; ``"9a"`` or ``"9b"``
    draws one part alone. Under the figure's title a line says where its definition comes
    from: the paper's reproduction notebook (Figures 1–11), or a reconstruction not checked
    against the paper (Figures 12–24); the provenance says the same (``source``,
    ``reconstruction``). ``store`` defaults to the current store of curvekit's home.

    A panel that lacks a curve, or draws one normalized at another batch size than the
    others, says so in a note inside it; the provenance lists the notes under ``notes``,
    and one :class:`FigureNotesWarning` carries them all.
    """
    store = store or Store.open()
    spec = _check(number, store)
    datasets: dict[str, Any] = {}
    notes: list[str] = []
    if spec.parts:
        blocks: list[Spec] = []
        for part in spec.parts:
            rows, part_notes = _grid(part, store, datasets)
            notes += [f"({part.part}) {note}" for note in part_notes]
            blocks.append({"vconcat": rows, "resolve": _LEGENDS,
                           "title": {"text": f"({part.part}) {part.title}",
                                     "fontSize": TEXT["panel_title"] + 1,
                                     "anchor": "start"}})
    else:
        blocks, notes = _grid(spec, store, datasets)
    note = synthetic_note(store, spec.workloads())
    lines = [spec.source, *([note] if note else [])]
    title: Spec = {"text": _title(spec), "fontSize": TEXT["figure_title"], "subtitle": lines,
                   "subtitleColor": "#b00000" if note else "#444444",
                   "subtitleFontSize": TEXT["panel_title"]}
    out = {"$schema": SCHEMA, "vconcat": blocks, "resolve": _LEGENDS, "title": title,
           "config": CONFIG, "datasets": datasets}
    meta = _provenance(spec, store)
    meta["notes"] = notes
    if notes:
        warnings.warn(FigureNotesWarning(spec.name if spec.part else spec.number, notes),
                      stacklevel=2)
    return out, meta


def figure(number: int | str, store: Store | None = None
           ) -> tuple[alt.TopLevelMixin, dict[str, Any]]:
    """The paper's figure ``number`` as an Altair chart (for notebooks), and its provenance.

    The chart wraps :func:`figure_spec`'s spec: ``chart.properties(...)``,
    ``chart.configure_axis(...)`` and ``chart.save(...)`` work as on any Altair chart.
    ``curvekit figure NUMBER`` writes it to a file (:func:`curvekit.plotting.output.save`).

    >>> import tempfile, pathlib, curvekit
    >>> from curvekit.store.fetch import fetch
    >>> tmp = pathlib.Path(tempfile.mkdtemp())
    >>> m = curvekit.generate_archive(tmp / "oi.tar.bz2", max_trials_per_study=3,
    ...     workloads=["open_images_v4/resnet_50/nesterov_momentum"], evals_scale=0.05)
    >>> _ = fetch(home=tmp, archive=tmp / "oi.tar.bz2", manifest=m)
    >>> store = curvekit.open(tmp)
    >>> chart, meta = figure(20, store)
    >>> " ".join(meta["workloads"])
    'open_images_v4/resnet_50/nesterov_momentum'
    """
    spec, meta = figure_spec(number, store)
    return to_altair(spec), meta


SOURCES = ("Figures 1–11 follow the paper's reproduction notebook (its cells \"Figure 1\" to "
           "\"Figure 11\"; \"Figure 9a\" and \"Figure 9b\" are the two parts of Figure 9). "
           f"Figures {RECONSTRUCTED_FROM}–24 are reconstructions from the released data, not "
           "checked against the paper.")
"""Where the figures come from, in one sentence (the gallery and the report say it)."""


def source_html(spec: Figure) -> str:
    """A figure's source line as an HTML paragraph (class ``reconstruction`` or
    ``source``), for the gallery and the report.

    >>> source_html(check_figure_number(14))
    '<p class="reconstruction">Reconstruction: not checked against the paper&#x27;s Figure 14</p>'
    """
    kind = "reconstruction" if spec.reconstruction else "source"
    return f'<p class="{kind}">{html.escape(spec.source)}</p>'


def render_all(store: Store, folder: str | os.PathLike[str], *, fmt: str = "png",
               scale: float = 1.0) -> list[Path]:
    """Render every available figure into ``folder`` plus an ``index.html`` gallery.

    A figure whose workloads are missing from the store is listed in the gallery with the
    reason instead of failing the whole run. ``scale`` multiplies a PNG's pixel size.
    Each figure drawn with gaps gives a :class:`FigureNotesWarning`. Returns the files
    written; ``curvekit figures`` as a function.

    >>> import tempfile, pathlib, curvekit
    >>> from curvekit.store.fetch import fetch
    >>> tmp = pathlib.Path(tempfile.mkdtemp())
    >>> m = curvekit.generate_archive(tmp / "oi.tar.bz2", max_trials_per_study=3,
    ...     workloads=["open_images_v4/resnet_50/nesterov_momentum"], evals_scale=0.05)
    >>> _ = fetch(home=tmp, archive=tmp / "oi.tar.bz2", manifest=m)
    >>> store = curvekit.open(tmp)
    >>> " ".join(p.name for p in render_all(store, tmp / "figures", fmt="json"))
    'figure-20.json'
    >>> (tmp / "figures" / "index.html").is_file()
    True
    """
    from curvekit.plotting.output import save

    folder = Path(folder)
    with writing("the figures' folder", folder):
        folder.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    items = []
    drawn: list[str] = []  # the workloads of the figures drawn: the banner is about them
    for number in sorted(FIGURES):
        spec = FIGURES[number]
        name = file_name(spec, fmt)
        heading = f"<h2>{html.escape(_title(spec))}</h2>" + source_html(spec)
        try:
            chart, meta = figure_spec(number, store)
        except FigureError as exc:
            items.append(f"<li>{heading}<p>{html.escape(str(exc))}</p></li>")
            continue
        written.append(save(chart, folder / name, meta, fmt=fmt, scale=scale))
        drawn += spec.workloads()
        # an image carries the figure's title: the gallery does not repeat it
        items.append(f'<li id="figure-{number}"><img src="{name}" '
                     f'alt="{html.escape(_title(spec))}">{source_html(spec)}</li>'
                     if fmt in ("png", "svg") else
                     f'<li>{heading}<a href="{name}">{name}</a></li>')
    note = synthetic_note(store, drawn)
    banner = (f"<p class='synthetic'><strong>{html.escape(note)}</strong>: drawn from an "
              "archive made by <code>curvekit generate-archive</code>.</p>" if note else "")
    gallery = (
        "<!doctype html><meta charset='utf-8'><title>curvekit figures</title>"
        "<style>body{font-family:sans-serif;max-width:1100px;margin:auto}"
        "li{list-style:none;margin:2em 0}img{max-width:100%}.synthetic{color:#b00000}"
        ".reconstruction{color:#8a4b00}</style>"
        "<h1>Figures of Shallue et al. (2019), drawn by curvekit</h1>" + banner
        + f"<p>{html.escape(SOURCES)}</p><ul>" + "".join(items) + "</ul>\n")
    write_file(folder / "index.html", gallery, "the figures' gallery")
    return written
