"""Render a :class:`~curvekit.figures.spec.Figure` from a store.

>>> from curvekit.figures.paper import FIGURES
>>> sorted(FIGURES)[:2]
[1, 2]
"""

from __future__ import annotations

import html
import os
import warnings
from dataclasses import replace
from pathlib import Path
from typing import Any

import altair as alt
import polars as pl

from curvekit.errors import CurvekitError
from curvekit.figures.builders import best_chart, metaparameter_chart, steps_chart
from curvekit.figures.paper import FIGURES
from curvekit.figures.plots import provenance
from curvekit.figures.spec import Curve, Figure, Panel
from curvekit.goals import paper_goal
from curvekit.store.store import Store

__all__ = ["FigureError", "figure", "render_all"]


class FigureError(CurvekitError):
    """A figure cannot be drawn: unknown number, or workloads missing from the store."""


def _steps(store: Store, c: Curve) -> pl.DataFrame:
    assert c.goal is not None
    return store.steps_to_result(c.workload, c.metric, c.goal, maximize=c.maximize,
                                 trials=c.trials, step_budget=c.step_budget,
                                 example_budget=c.example_budget, statuses=c.statuses)


def _paper_goals(store: Store, panel: Panel) -> Panel:
    """Fill in curves whose goal is None with the paper's goal for their workload."""
    if all(c.goal is not None for c in panel.curves):
        return panel
    curves, title = [], panel.title
    for c in panel.curves:
        if c.goal is None:
            g = paper_goal(store, c.workload)
            c = replace(c, metric=g.metric, goal=g.goal, maximize=g.maximize, trials=g.trials)
            title = panel.title.format(workload=c.workload, goal=f"{g.goal!r}") + (
                " (rule)" if g.source == "rule" else "")
        curves.append(c)
    return replace(panel, curves=tuple(curves), title=title)


def _panel(store: Store, panel: Panel, width: float, height: float,
           title_size: float | None = None) -> alt.LayerChart:
    panel = _paper_goals(store, panel)
    title: str | alt.TitleParams = (panel.title if title_size is None
                                    else alt.TitleParams(panel.title, fontSize=title_size))
    if panel.kind == "steps":
        curves = [(c.label, _steps(store, c)) for c in panel.curves]
        if panel.normalize_at is not None:
            kept = []
            for label, table in curves:
                if panel.normalize_at in table["batch_size"].to_list():
                    kept.append((label, table))
                else:
                    warnings.warn(f"{label}: no point at batch size {panel.normalize_at}; "
                                  "left out of the normalized panel", stacklevel=2)
            curves = kept
        scaling = panel.scaling_label
        return steps_chart(curves, title=title, scaling_label=scaling,
                           normalize_at=panel.normalize_at, ylim=panel.ylim, width=width,
                           height=height)
    if panel.kind == "metaparameter":
        curves = [(c.label, _steps(store, c).select(
            "batch_size", pl.col(panel.y).alias("value"))) for c in panel.curves]
        return metaparameter_chart(curves, title=title, y_title=panel.y_title,
                                   heuristics=panel.heuristics, width=width, height=height)
    curves = []
    for c in panel.curves:
        best = store.best_measurement(c.workload, c.metric, maximize=c.maximize,
                                      trials=c.trials, step_budget=c.step_budget,
                                      example_budget=c.example_budget, statuses=c.statuses)
        curves.append((c.label, best.select("batch_size", pl.col(c.metric).alias("value"))))
    goal = panel.curves[0].goal if panel.curves else None
    return best_chart(curves, title=title, y_title=panel.y_title, goal_line=goal,
                      ylim=panel.ylim, width=width, height=height)


def figure(number: int, store: Store) -> tuple[alt.VConcatChart, dict[str, Any]]:
    """The paper's figure ``number`` drawn from ``store``, and its provenance."""
    if number not in FIGURES:
        known = ", ".join(str(n) for n in sorted(FIGURES))
        raise FigureError(f"figure {number} is not available; figures drawn so far: {known}")
    spec: Figure = FIGURES[number]
    missing = [w for w in spec.workloads() if w not in store.workloads()]
    if missing:
        raise FigureError(
            f"figure {number} needs workloads missing from the store: {', '.join(missing)}; "
            "run `curvekit fetch` for the release (or `curvekit fetch --archive PATH`)")
    width, height = spec.size_px
    panel_w, panel_h = width / spec.cols - 60, height / spec.rows - 60
    charts = [_panel(store, p, panel_w, panel_h, spec.title_size) for p in spec.panels]
    rows = [alt.hconcat(*charts[i:i + spec.cols]) for i in range(0, len(charts), spec.cols)]
    chart = alt.vconcat(*rows).properties(title=f"Figure {number}: {spec.title}")
    curves = [c for p in spec.panels for c in p.curves]
    meta = provenance(store, figure=number, workloads=spec.workloads(),
                      curves=[{"workload": c.workload, "label": c.label, "metric": c.metric,
                               "goal": c.goal, "maximize": c.maximize, "trials": c.trials,
                               "statuses": list(c.statuses), "step_budget": c.step_budget,
                               "example_budget": c.example_budget} for c in curves])
    return chart, meta


def render_all(store: Store, folder: str | os.PathLike[str], *, fmt: str = "png"
               ) -> list[Path]:
    """Render every available figure into ``folder`` plus an ``index.html`` gallery.

    A figure whose workloads are missing from the store is listed in the gallery with the
    reason instead of failing the whole run.
    """
    from curvekit.figures.output import save

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    items = []
    for number in sorted(FIGURES):
        name = f"figure-{number:02d}.{fmt}"
        try:
            chart, meta = figure(number, store)
        except FigureError as exc:
            items.append(f"<li><h2>Figure {number}</h2><p>{html.escape(str(exc))}</p></li>")
            continue
        written.append(save(chart, folder / name, meta, fmt=fmt))
        title = html.escape(FIGURES[number].title)
        body = (f'<img src="{name}" alt="Figure {number}">' if fmt in ("png", "svg")
                else f'<a href="{name}">{name}</a>')
        items.append(f"<li><h2>Figure {number}: {title}</h2>{body}</li>")
    (folder / "index.html").write_text(
        "<!doctype html><meta charset='utf-8'><title>curvekit figures</title>"
        "<style>body{font-family:sans-serif;max-width:1100px;margin:auto}"
        "li{list-style:none;margin:2em 0}img{max-width:100%}</style>"
        "<h1>Figures of Shallue et al. (2019), drawn by curvekit</h1><ul>"
        + "".join(items) + "</ul>\n")
    return written
