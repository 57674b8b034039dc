"""Figures a reader trusts at a glance, checked mechanically on the specs of all 24 figures,
the four plot kinds and the report's charts: tick labels never overlap at the output size,
text is never smaller than legible, every legend entry is a drawn mark, a panel that lacks
data says so, and PNG pixel size follows --scale."""

from __future__ import annotations

import json
import math
import struct
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner

import curvekit
from curvekit.cli import main
from curvekit.plotting.builders import legible_title, scatter_chart, steps_chart
from curvekit.plotting.layout import (
    CORNERS,
    LABEL_GAP,
    MIN_FONT,
    TEXT,
    TITLE_OVERHANG,
    power_label_expr,
    power_text,
    text_width,
)
from curvekit.plotting.paper import FIGURE1_PANELS, FIGURES
from curvekit.plotting.render import FigureNotesWarning, figure_spec
from curvekit.store.store import Store

Spec = dict[str, Any]

# Figure 1's nine workloads (Figures 1, 8, 13-15, 24 and the scatters of 19-20) and an
# SGD workload (no momentum).
WORKLOADS = [p[1] for p in FIGURE1_PANELS] + ["mnist/simple_cnn_base/sgd"]


@pytest.fixture(scope="module")
def home(converted_home: Callable[..., Path]) -> Path:
    return converted_home(WORKLOADS, max_trials=8, name="quality")


def _charts(spec: Spec) -> Iterator[Spec]:
    """Every layered chart (panel) of a spec."""
    if "layer" in spec:
        yield spec
    for key in ("vconcat", "hconcat"):
        for part in spec.get(key, []):
            yield from _charts(part)


def _labels(axis: Spec, values: list[float]) -> list[str]:
    """Tick labels as the spec's labelExpr writes them (2ᵏ or 10ᵏ, superscript exponents)."""
    expr = axis["labelExpr"]
    base = 2 if expr.startswith("'2'") else 10
    assert expr == power_label_expr(base)
    return [power_text(base, v) for v in values]


def _domain(encoding: Spec, axis: Spec) -> tuple[float, float]:
    domain = encoding.get("scale", {}).get("domain")
    values = axis["values"]
    return (domain[0], domain[1]) if domain else (values[0], values[-1])


def _axis_overlaps(chart: Spec) -> list[str]:
    """Pairs of neighbouring tick labels closer than their extent plus a gap, per axis."""
    config_size = TEXT["tick_label"]
    problems = []
    for layer in chart["layer"]:
        for name, length in (("x", chart["width"]), ("y", chart["height"])):
            encoding = layer.get("encoding", {}).get(name, {})
            axis = encoding.get("axis") or {}
            if encoding.get("scale", {}).get("type") == "log":
                # a log axis without chosen ticks would get Vega's dense default
                assert "values" in axis or encoding.get("axis") is None or "field" not in \
                    encoding, f"log axis without tick values: {encoding}"
            if "values" not in axis:
                continue
            values = axis["values"]
            lo, hi = _domain(encoding, axis)
            span = math.log(hi) - math.log(lo)
            pos = [length * (math.log(v) - math.log(lo)) / span for v in values]
            size = axis.get("labelFontSize", config_size)
            ext = ([text_width(t, size) for t in _labels(axis, values)] if name == "x"
                   else [size] * len(values))
            for i in range(len(values) - 1):
                if pos[i + 1] - pos[i] < (ext[i] + ext[i + 1]) / 2 + LABEL_GAP:
                    problems.append(f"{chart.get('title')}: {name} labels {values[i]} and "
                                    f"{values[i + 1]} overlap")
    return problems


def _fonts(spec: Spec) -> list[str]:
    """Text smaller than legible: config sizes, panel titles, subtitles, legend labels."""
    problems = []
    config = spec.get("config", {})
    for where, key, kind in (("axis", "labelFontSize", "tick_label"),
                             ("axis", "titleFontSize", "axis_title"),
                             ("title", "fontSize", "panel_title"),
                             ("legend", "labelFontSize", "legend_label")):
        if config.get(where, {}).get(key, 0) < MIN_FONT[kind]:
            problems.append(f"config {where}.{key} below {MIN_FONT[kind]}")
    for chart in _charts(spec):
        title = chart.get("title")
        if isinstance(title, dict):
            if title.get("fontSize", TEXT["panel_title"]) < MIN_FONT["panel_title"]:
                problems.append(f"panel title {title} too small")
            if title.get("subtitleFontSize", TEXT["note"]) < MIN_FONT["note"]:
                problems.append(f"note {title} too small")
        for layer in chart["layer"]:
            for enc in layer.get("encoding", {}).values():
                legend = enc.get("legend") if isinstance(enc, dict) else None
                if legend and legend.get("labelFontSize", 99) < MIN_FONT["legend_label"]:
                    problems.append(f"legend of {enc.get('field')} too small")
                axis = enc.get("axis") if isinstance(enc, dict) else None
                if axis and axis.get("labelFontSize", 99) < MIN_FONT["tick_label"]:
                    problems.append(f"tick labels of {enc.get('field')} too small")
    return problems


def _legend_entries_drawn(spec: Spec) -> list[str]:
    """Legend entries no layer of the figure draws a mark for."""
    datasets = spec.get("datasets", {})
    shown: set[tuple[str, str]] = set()
    drawn: set[tuple[str, str]] = set()
    for chart in _charts(spec):
        for layer in chart["layer"]:
            rows = datasets.get(layer.get("data", {}).get("name"), [])
            for name, enc in layer.get("encoding", {}).items():
                if not isinstance(enc, dict) or enc.get("type") != "nominal" or \
                        name not in ("color", "shape", "stroke", "opacity", "strokeDash"):
                    continue
                field = enc["field"]
                drawn |= {(field, str(r.get(field))) for r in rows}
                if enc.get("legend", {}) is None:
                    continue
                domain = enc.get("scale", {}).get("domain") or enc.get("sort")
                entries = domain if isinstance(domain, list) else [r.get(field) for r in rows]
                shown |= {(field, str(e)) for e in entries}
    return sorted(f"{field}={entry}" for field, entry in shown - drawn)


def _legends(spec: Spec) -> int:
    """How many panels draw a colour legend (layers of one panel share theirs)."""
    return sum(1 for chart in _charts(spec) if any(
        isinstance(enc := layer.get("encoding", {}).get("color"), dict)
        and enc.get("type") == "nominal" and enc.get("legend", {}) is not None
        for layer in chart["layer"]))


@pytest.fixture(scope="module")
def specs(home: Path) -> dict[int, Spec]:
    """Every figure the fixture store can draw (the others need missing workloads)."""
    store = Store.open(home)
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FigureNotesWarning)
        for number in sorted(FIGURES):
            if all(w in store.workloads() for w in FIGURES[number].workloads()):
                out[number] = figure_spec(number, store)[0]
    return out


def test_tick_labels_never_overlap_in_any_figure(specs: dict[int, Spec]) -> None:
    assert {1, 8, 13, 14, 19, 20, 24} <= set(specs)
    problems = [p for spec in specs.values() for chart in _charts(spec)
                for p in _axis_overlaps(chart)]
    assert problems == []


@pytest.mark.parametrize("number", sorted(FIGURES))
def test_every_figure_spec_is_legible_on_synthetic_curves(number: int) -> None:
    """All 24 figure layouts at their default size, with curves spanning 2^0–2^20 (the
    widest the release has): ticks spaced, fonts legible, titles wrapped to the panel."""
    fig = FIGURES[number]
    width, height = fig.size_px
    panel_w, panel_h = width / fig.cols - 60, height / fig.rows - 60
    curve = pl.DataFrame({"batch_size": [2**k for k in range(0, 21)],
                          "step": [2.0 ** (20 - k / 2) for k in range(0, 21)]})
    for panel in fig.panels:
        title = panel.title.format(workload="lm1b/transformer_narrow_and_shallow/"
                                            "nesterov_momentum", goal="4.2")
        chart = steps_chart([(c.label or "x", curve) for c in panel.curves], title=title,
                            width=panel_w, height=panel_h, legend_size=panel.legend_size)
        assert _axis_overlaps(chart) == []
        chart["title"] = legible_title(chart["title"], panel_w + TITLE_OVERHANG)  # as drawn
        assert _fonts(chart) == []
        lines = chart["title"]["text"] if isinstance(chart["title"], dict) else [chart["title"]]
        for line in [lines] if isinstance(lines, str) else lines:
            # a single word may stay long; every broken line fits the panel and its gutter
            if " " in line.strip() or "/" in line.rstrip("/"):
                assert text_width(line, TEXT["panel_title"]) <= panel_w + TITLE_OVERHANG, line


def test_the_four_plot_kinds_are_legible(home: Path) -> None:
    from curvekit.plotting.plots import (
        plot_best,
        plot_metaparameters,
        plot_scatter,
        plot_steps_to_result,
    )
    from curvekit.plotting.vegalite import from_altair
    from curvekit.selection import SCATTER_STATUSES

    store = Store.open(home)
    w, m = "mnist/simple_cnn_base/sgd", "val/classification_error"
    batch = int(store.studies(w)["batch_size"][0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        at = curvekit.Selection(w, m, 0.3)
        charts = [plot_steps_to_result(store, at, fit=True)[0],
                  plot_metaparameters(store, at, parameter="learning_rate")[0],
                  plot_scatter(store, at.with_statuses(SCATTER_STATUSES), batch)[0],
                  plot_best(store, at)[0]]
    for chart in charts:
        spec = from_altair(chart)
        assert [p for c in _charts(spec) for p in _axis_overlaps(c)] == []
        assert _fonts(spec) == []
        assert _legend_entries_drawn(spec) == []


def test_fonts_are_legible_in_every_figure(specs: dict[int, Spec]) -> None:
    problems = [p for spec in specs.values() for p in _fonts(spec)]
    assert problems == []


def test_every_legend_entry_is_a_drawn_mark(specs: dict[int, Spec]) -> None:
    problems = {n: _legend_entries_drawn(spec) for n, spec in specs.items()}
    assert {n: p for n, p in problems.items() if p} == {}


def test_figure8_and_scatter_figures_have_one_shared_legend(specs: dict[int, Spec]) -> None:
    assert _legends(specs[8]) == 1
    assert _legends(specs[19]) == 1
    # and it sits inside a plot, so that the figure keeps its width
    for number in (8, 19):
        for chart in _charts(specs[number]):
            for layer in chart["layer"]:
                legend = layer.get("encoding", {}).get("color", {}).get("legend")
                assert not legend or legend["orient"] in CORNERS


def test_scatter_legend_has_the_best_trial_star() -> None:
    trials = pl.DataFrame({"learning_rate": [0.01, 0.1], "momentum": [0.9, 0.99],
                           "outcome": ["Goal Achieved", "Goal Not Achieved"],
                           "winner": [True, False], "trial_id": [1, 2]})
    spec = scatter_chart(trials, title="t")
    star = spec["layer"][-1]
    assert star["encoding"]["shape"]["scale"]["domain"][-1] == "Best Trial"
    rows = spec["datasets"][star["data"]["name"]]
    assert [r["outcome"] for r in rows] == ["Best Trial"]


def test_scatter_without_momentum_draws_learning_rate_against_outcome() -> None:
    trials = pl.DataFrame({"learning_rate": [0.01, 0.1, 1.0], "momentum": [None, None, None],
                           "outcome": ["Goal Achieved", "Goal Not Achieved", "Infeasible"],
                           "winner": [True, False, False], "trial_id": [1, 2, 3]},
                          schema_overrides={"momentum": pl.Float64})
    spec = scatter_chart(trials, title="SGD")
    points = spec["layer"][-2]
    assert points["encoding"]["y"]["field"] == "outcome"
    assert all("one_minus_momentum" not in json.dumps(layer["encoding"].get("y", {}))
               for layer in spec["layer"])


def test_fit_legend_lists_only_the_chosen_models_regimes() -> None:
    from curvekit.scaling import fit_critical_batch, fit_regimes

    b = [2**k for k in range(4, 14)]
    steps = [max(2.0**16 / x, 2.0**8) for x in b]  # perfect scaling, then a plateau
    curve = pl.DataFrame({"batch_size": b, "step": steps})
    fit = fit_regimes(curve)
    assert "diminishing" not in fit.segments
    spec = steps_chart([("w", curve)], title="t", scaling_label="w", fit=fit,
                       critical=fit_critical_batch(curve))
    shade = spec["layer"][0]["encoding"]["color"]
    assert shade["scale"]["domain"] == [f"{s} (fit)" for s in (
        "perfect scaling", "maximal data parallelism")]
    assert shade["title"] == f"Regimes (fit: {fit.model.replace('+', ' + ')})"
    assert shade["legend"]["titleLimit"] == 0  # never cut short
    assert any("critical batch" in r["fit"] for r in spec["datasets"][
        spec["layer"][1]["data"]["name"]])


def test_figure2_goal_legend_names_the_metric() -> None:
    labels = [c.label for p in FIGURES[2].panels for c in p.curves]
    assert "goal cross entropy = 3.8" in labels
    assert not any(label.startswith("goal error") for label in labels)


def test_missing_normalizing_points_are_noted_on_the_panel(home: Path, tmp_path: Path
                                                           ) -> None:
    """Figure 3's panels: a curve without a point at the normalizing batch size is drawn,
    normalized at its nearest one, and the panel says so; the CLI prints one summary."""
    from curvekit.plotting.spec import Curve, Figure, Panel

    store = Store.open(home)
    w = "mnist/simple_cnn_base/sgd"
    curve = curvekit.steps_to_result(
        store, curvekit.Selection(w, "val/classification_error", 0.3), explain=False)
    assert curve.height >= 2
    absent = 3  # never a power of two: no curve has a point there
    at = curvekit.Selection(w, "val/classification_error", trials=100)
    fig = Figure(99, "t", 1, 2, (
        Panel("A", "steps", (Curve(at.with_goal(0.3), "one"), Curve(at.with_goal(1e-9), "none")),
              scaling_label="one", normalize_at=absent),
        Panel("B", "steps", (Curve(at.with_goal(1e-9), "none"),))))
    FIGURES[99] = fig
    try:
        with pytest.warns(FigureNotesWarning) as caught:
            spec, meta = figure_spec(99, store)
        a, b = list(_charts(spec))
        sub = " ".join(a["title"]["subtitle"])
        assert "one: no point at B=3; normalized at B=" in sub
        assert "none: no batch size reaches the goal" in sub
        assert a["layer"][0]["encoding"]["color"]["legend"] is not None  # a labeled line
        # panel B has nothing to draw: a note in its middle says why
        assert any(layer["mark"]["type"] == "text" for layer in b["layer"])
        assert len(meta["notes"]) == 3 and caught[0].message.figure == 99  # type: ignore[union-attr]
        result = CliRunner().invoke(main, ["figure", "99", "--home", str(home), "--format",
                                           "json", "--out", str(tmp_path / "f.json")])
        assert result.exit_code == 0, result.output
        assert "Note: 1 figure(s) drawn with 3 gap(s)" in result.stderr
        assert "UserWarning" not in result.stderr and "warnings.warn" not in result.stderr
    finally:
        del FIGURES[99]


def test_png_pixel_size_follows_scale(home: Path, tmp_path: Path) -> None:
    sizes = {}
    for scale in ("1", "2"):
        out = tmp_path / f"p{scale}.png"
        result = CliRunner().invoke(main, [
            "plot", "best", "mnist/simple_cnn_base/sgd", "--metric", "val/classification_error",
            "--home", str(home), "--out", str(out), "--scale", scale])
        assert result.exit_code == 0, result.output
        sizes[scale] = struct.unpack(">II", out.read_bytes()[16:24])
    (w1, h1), (w2, h2) = sizes["1"], sizes["2"]
    assert abs(w2 - 2 * w1) <= 2 and abs(h2 - 2 * h1) <= 2
