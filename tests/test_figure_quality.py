"""Figures a reader trusts at a glance, checked mechanically on the specs of all 24 figures,
the four plot kinds and the report's charts: tick labels never overlap at the output size,
text is never smaller than legible, every legend entry is a drawn mark, a panel that lacks
data says so, and PNG pixel size follows --scale."""

from __future__ import annotations

import itertools
import json
import math
import re
import struct
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

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
                # a row beyond fixed limits is in the data, not drawn
                drawn |= {(field, str(r.get(field))) for r in rows if r.get("within") is not False}
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
    # inside a plot at a corner free of data, or in a row of its own under the grid, so
    # that the figure keeps its width
    for number in (8, 19):
        for chart in _charts(specs[number]):
            for layer in chart["layer"]:
                legend = layer.get("encoding", {}).get("color", {}).get("legend")
                assert not legend or legend["orient"] in CORNERS or (
                    legend["orient"] == "top" and specs[number]["vconcat"][-1] is chart)


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


# -- the shared layout rules, on every figure the fixture store draws ----------------------

def _layers_with(spec: Spec) -> Iterator[tuple[Spec, Spec]]:
    """(panel, layer) of every layer of every panel."""
    for chart in _charts(spec):
        for layer in chart["layer"]:
            yield chart, layer


def test_every_log_axis_writes_superscript_exponents(specs: dict[int, Spec]) -> None:
    from curvekit.plotting.static import draw

    axes = 0
    for spec in specs.values():
        for _, layer in _layers_with(spec):
            for enc in layer.get("encoding", {}).values():
                if not isinstance(enc, dict) or (enc.get("scale") or {}).get("type") != "log":
                    continue
                if (enc.get("axis") or {}).get("labelExpr"):
                    base = enc["scale"].get("base", 10)
                    assert enc["axis"]["labelExpr"] == power_label_expr(base)
                    axes += 1
    assert axes > 50
    svg = draw(json.dumps(specs[1]), "svg").decode()
    assert "2^" not in svg and re.search("2[⁰¹²³⁴⁵⁶⁷⁸⁹]{1,2}<", svg)  # drawn by Vega itself


def _pixel(value: float, scale: Spec, length: float) -> float:
    lo, hi = scale["domain"]
    if scale.get("type") == "log":
        return length * (math.log(value) - math.log(lo)) / (math.log(hi) - math.log(lo))
    return length * (value - lo) / (hi - lo)


def test_data_driven_axes_are_padded_so_no_marker_is_cut(specs: dict[int, Spec]) -> None:
    """Every point a panel draws on an axis it chose itself (no fixed limits: no clipping)
    lies at least EDGE_PAD - 1 pixels inside both ends."""
    from curvekit.plotting.layout import EDGE_PAD

    checked = 0
    for spec in specs.values():
        rows_of = spec["datasets"]
        for chart, layer in _layers_with(spec):
            mark = layer["mark"] if isinstance(layer["mark"], dict) else {"type": layer["mark"]}
            if mark.get("clip") or mark["type"] not in ("line", "rule"):
                continue
            for name, length in (("x", chart["width"]), ("y", chart["height"])):
                enc = layer["encoding"].get(name)
                if not isinstance(enc, dict) or "domain" not in (enc.get("scale") or {}):
                    continue
                for row in rows_of[layer["data"]["name"]]:
                    value = row.get(enc["field"])
                    if value is None:
                        continue
                    at = _pixel(value, enc["scale"], length)
                    assert EDGE_PAD - 1 <= at <= length - EDGE_PAD + 1, (chart["title"], name)
                    checked += 1
    assert checked > 500


def test_one_colour_per_series_across_each_figure(specs: dict[int, Spec]) -> None:
    for number, spec in specs.items():
        colour: dict[str, str] = {}
        for _, layer in _layers_with(spec):
            enc = layer.get("encoding", {}).get("color")
            if not isinstance(enc, dict) or enc.get("field") != "curve":
                continue
            scale = enc["scale"]
            assert len(set(scale["range"])) == len(scale["range"]), (number, scale)
            for label, c in zip(scale["domain"], scale["range"], strict=True):
                assert colour.setdefault(label, c) == c, (number, label)


def test_series_keep_their_colour_in_every_panel() -> None:
    """FC-1024-1024-1024 is the first curve of one panel and the fifth of another."""
    from curvekit.plotting.builders import recolor

    curve = pl.DataFrame({"batch_size": [2, 4], "step": [100.0, 60.0]})
    a = steps_chart([(x, curve) for x in ("FC-1024-1024-1024", "Simple CNN")], title="a")
    d = steps_chart([(x, curve) for x in ("FC-1024", "FC-128", "FC-256", "FC-512",
                                          "FC-1024-1024-1024")], title="d")
    one = steps_chart([("Simple CNN", curve)], title="e")
    recolor([a, d, one])
    colours = [dict(zip(c["layer"][0]["encoding"]["color"]["scale"]["domain"],
                        c["layer"][0]["encoding"]["color"]["scale"]["range"], strict=True))
               for c in (a, d, one)]
    assert colours[0]["FC-1024-1024-1024"] == colours[1]["FC-1024-1024-1024"]
    assert colours[0]["Simple CNN"] == colours[2]["Simple CNN"]
    assert len(set(colours[1].values())) == 5


@pytest.mark.slow
def test_every_figure_keeps_the_spec_width(specs: dict[int, Spec]) -> None:
    """Drawn at scale 1, no figure is wider than its spec's width plus its axes' margin
    (legends outside the panels once made the 1×3 figures 1.5 times as wide)."""
    from curvekit.plotting.static import draw

    for number, spec in specs.items():
        svg = draw(json.dumps(spec), "svg").decode()
        width = float(re.search(r'<svg[^>]* width="([\d.]+)"', svg)[1])  # type: ignore[index]
        assert width <= FIGURES[number].size_px[0] * 1.1, (number, width)


def test_axis_titles_fit_their_axis(specs: dict[int, Spec]) -> None:
    for spec in specs.values():
        for chart, layer in _layers_with(spec):
            for name, length in (("x", chart["width"]), ("y", chart["height"])):
                enc = layer.get("encoding", {}).get(name)
                title = ((enc or {}).get("axis") or {}).get("title") if isinstance(
                    enc, dict) else None
                for line in [title] if isinstance(title, str) else (title or []):
                    assert text_width(line, TEXT["axis_title"]) <= length, (line, length)


def test_panels_of_a_row_keep_their_plots_aligned(specs: dict[int, Spec]) -> None:
    def lines(title: Any) -> int:
        if not isinstance(title, dict):
            return 1
        text, sub = title.get("text"), title.get("subtitle") or []
        return (len(text) if isinstance(text, list) else 1) + (
            len(sub) if isinstance(sub, list) else 1)

    def rows(node: Spec) -> Iterator[Spec]:  # a figure in parts nests its parts' rows
        if "hconcat" in node:
            yield node
        for part in node.get("vconcat", []):
            yield from rows(part)

    for spec in specs.values():
        for row in rows(spec):
            assert len({lines(p.get("title")) for p in row["hconcat"]}) == 1


def test_figure24_draws_its_goal_line_inside_the_axis(specs: dict[int, Spec]) -> None:
    goals = {title: goal for title, _, _, goal, _, _ in FIGURE1_PANELS}
    panels = list(_charts(specs[24]))
    assert len(panels) == 9
    for chart in panels:
        title = chart["title"]["text"] if isinstance(chart["title"], dict) else chart["title"]
        rules = [layer for layer in chart["layer"] if layer["mark"]["type"] == "rule"]
        assert len(rules) == 1, title
        rows = specs[24]["datasets"][rules[0]["data"]["name"]]
        assert [r["value"] for r in rows] == [goals[title]]
        assert [r["label"] for r in rows] == ["Figure 1 goal"]
        lo, hi = rules[0]["encoding"]["y"]["scale"]["domain"]
        assert lo < goals[title] < hi


def test_figures_14_and_22_plot_one_minus_momentum_on_log10(home: Path,
                                                             specs: dict[int, Spec]) -> None:
    for number in (14, 22):
        for panel in FIGURES[number].panels:
            assert (panel.y, panel.y_base, panel.y_title) == (
                "one_minus_momentum", 10, "1 − Momentum")
            assert panel.curves[0].label == "1 − Optimal Momentum"
            assert not panel.heuristics
    store = Store.open(home)
    chart = next(iter(_charts(specs[14])))
    layer = chart["layer"][0]
    y = layer["encoding"]["y"]
    assert y["scale"]["type"] == "log" and "base" not in y["scale"]
    assert y["axis"]["labelExpr"] == power_label_expr(10)
    rows = specs[14]["datasets"][layer["data"]["name"]]
    winners = curvekit.steps_to_result(store, curvekit.Selection(
        FIGURE1_PANELS[0][1], FIGURE1_PANELS[0][2], FIGURE1_PANELS[0][3], trials=100),
        explain=False)
    assert sorted(r["value"] for r in rows) == pytest.approx(
        sorted(1 - winners["momentum"]), rel=1e-12)


def test_figure18_legend_draws_the_curve_as_a_line_with_triangles(
        specs: dict[int, Spec]) -> None:
    from curvekit.plotting.layout import LINE_WITH_TRIANGLE

    legends = [enc["legend"] for _, layer in _layers_with(specs[18])
               for enc in [layer["encoding"].get("color")] if enc and enc.get("legend")]
    assert legends
    shape = legends[0]["symbolType"]["expr"]
    assert LINE_WITH_TRIANGLE in shape and "'square'" in shape


def test_lines_never_bridge_a_batch_size_that_missed_the_goal(home: Path,
                                                              specs: dict[int, Spec]) -> None:
    """Figure 17's prefixes: within one drawn line, no study of the workload lies between
    two neighbouring points; the panel names the batch sizes a curve lacks."""
    store = Store.open(home)
    workloads = {t: w for t, w, *_ in FIGURE1_PANELS}
    for chart in (c for c in _charts(specs[17]) if "title" in c):  # the legend row has none
        title = chart["title"]["text"] if isinstance(chart["title"], dict) else chart["title"]
        title = " ".join(title) if isinstance(title, list) else title
        studies = set(store.studies(workloads[title])["batch_size"].to_list())
        layer = chart["layer"][0]
        assert layer["encoding"]["detail"]["field"] == "segment"
        rows = specs[17]["datasets"][layer["data"]["name"]]
        subtitle = " ".join(chart["title"].get("subtitle", [])) if isinstance(
            chart["title"], dict) else ""
        for curve in {r["curve"] for r in rows}:
            have = sorted(r["batch_size"] for r in rows if r["curve"] == curve)
            missing = sorted(studies - set(have))
            if missing:
                assert f"{curve}" in subtitle and "goal not reached at B=" in subtitle
            for segment in {r["segment"] for r in rows if r["curve"] == curve}:
                xs = sorted(r["batch_size"] for r in rows if r["segment"] == segment)
                for a, b in itertools.pairwise(xs):
                    assert not [s for s in missing if a < s < b], (curve, a, b)


@given(st.sets(st.integers(0, 16), min_size=1, max_size=17),
       st.data())
def test_broken_lines_break_at_every_missing_study(exponents: set[int],
                                                   data: st.DataObject) -> None:
    from curvekit.plotting.builders import broken_lines

    studies = sorted(2.0**e for e in exponents)
    have = sorted(data.draw(st.sets(st.sampled_from(studies), min_size=1)))
    frame = pl.DataFrame({"curve": ["c"] * len(have), "batch_size": have})
    out, notes = broken_lines(frame, {"c": studies})
    missing = [b for b in studies if b not in have]
    segments: dict[str, list[float]] = {}
    for row in out.iter_rows(named=True):
        segments.setdefault(row["segment"], []).append(row["batch_size"])
    for xs in segments.values():
        assert not [m for m in missing if xs[0] < m < xs[-1]]
    gaps = sum(1 for a, b in itertools.pairwise(have)
               if any(a < m < b for m in missing))
    assert len(segments) == gaps + 1
    assert bool(notes) == bool(missing)


def test_one_point_curve_and_clipped_points_say_so() -> None:
    one = pl.DataFrame({"batch_size": [64], "step": [1000.0]})
    spec = steps_chart([("SGD", one)], title="Transformer Shallow on LM1B",
                       scaling_label="SGD", studies={"SGD": [32.0, 64.0, 128.0]})
    sub = " ".join(spec["title"]["subtitle"])
    # one curve: the notes need not name it
    assert "one batch size reaches the goal" in sub and "perfect-scaling" in sub
    assert "goal not reached at B=32 and 128" in sub and "SGD:" not in sub
    curve = pl.DataFrame({"batch_size": [1, 2, 4], "step": [1.0, 0.5, 0.25]})
    spec = steps_chart([("FC", curve)], title="t", normalize_at=2, ylim=(2.0**-0.5, 2.0))
    assert spec["usermeta"]["notes"] == ["B=4 beyond the y limits, not drawn"]


def test_a_panel_kept_by_a_fallback_keeps_the_grid(home: Path,
                                                   specs: dict[int, Spec]) -> None:
    """Figure 15's Open Images panel falls back to validation AP with a note: the row's
    other panels get as many title lines, so the plots stay aligned."""
    assert 15 in specs
    row = specs[15]["vconcat"][1]["hconcat"]
    titles = [p["title"] if isinstance(p["title"], dict) else {"text": p["title"]}
              for p in row]
    assert any("instead" in " ".join(t.get("subtitle", [])) for t in titles)
    assert len({len(t.get("subtitle", [])) + (len(t["text"]) if isinstance(t["text"], list)
                                              else 1) for t in titles}) == 1


@given(st.lists(st.floats(1e-6, 1e3, allow_nan=False), min_size=1, max_size=20),
       st.booleans())
def test_rule_goal_is_reached_by_every_batch_size(values: list[float], maximize: bool
                                                  ) -> None:
    """Figure 23's rule: every finite best value strictly beats the goal, and the goal
    is a two-figure decimal."""
    from decimal import Decimal

    from curvekit.goals import rule_goal

    goal = rule_goal(values, maximize=maximize)
    assert all((v > goal) if maximize else (v < goal) for v in values)
    digits = Decimal(repr(goal)).normalize().as_tuple().digits
    assert len(digits) <= 2


# -- legends never cover data -----------------------------------------------------------------

def _covered_points(chart: Spec, datasets: dict[str, Any]) -> int:
    """Data points under the chart's inside legends, and legends overlapping another, the
    boxes estimated here on their own: per legend (one per field) the widest label, a
    symbol and padding, one row per entry."""
    from curvekit.plotting.layout import data_points

    fields: dict[str, tuple[list[str], float, str]] = {}
    for layer in chart["layer"]:
        for enc in layer.get("encoding", {}).values():
            legend = enc.get("legend") if isinstance(enc, dict) else None
            if not legend or legend.get("orient") not in CORNERS:
                continue
            entries = [str(e) for e in enc["scale"]["domain"]]
            if isinstance(legend.get("values"), dict):
                entries = [max(entries, key=len)]
            size = legend.get("labelFontSize", TEXT["legend_label"])
            fields[enc["field"]] = (entries, size, legend["orient"])
    width, height = chart["width"], chart["height"]
    points = data_points(chart["layer"], datasets, width, height)
    boxes = []
    for entries, size, corner in fields.values():
        w = max(len(e) for e in entries) * size * 0.6 + 24 + 4
        h = len(entries) * (size + 4) + 8 + 4
        if w > width or h > height:
            return 1_000_000  # no corner can hold it
        x0 = width - w if corner.endswith("right") else 0.0
        y0 = height - h if corner.startswith("bottom") else 0.0
        boxes.append((x0, y0, x0 + w, y0 + h))
    covered = sum(1 for x, y in points for x0, y0, x1, y1 in boxes
                  if x0 - 4 <= x <= x1 + 4 and y0 - 4 <= y <= y1 + 4)
    return covered + sum(1 for a, b in itertools.combinations(boxes, 2)
                         if a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3])


def test_legends_never_cover_data_in_any_figure(specs: dict[int, Spec]) -> None:
    """Inside a plot only at a corner free of data; else under the plot, or (a figure's
    shared legend) under the grid."""
    from curvekit.plotting.layout import OUTSIDE

    found = 0
    for number, spec in specs.items():
        for chart in _charts(spec):
            for layer in chart["layer"]:
                for enc in layer.get("encoding", {}).values():
                    legend = enc.get("legend") if isinstance(enc, dict) else None
                    if legend:
                        found += 1
                        assert legend["orient"] in (*CORNERS, OUTSIDE) or (
                            "width" in chart and "x" not in layer["encoding"]), number
            assert _covered_points(chart, spec["datasets"]) == 0, (number, chart.get("title"))
    assert found > 0


def test_figure8_shared_legend_covers_no_panel(specs: dict[int, Spec]) -> None:
    """The legend Figure 8's nine panels share once covered a heuristic line of one."""
    spec = specs[8]
    keyed = [c for c in _charts(spec) if any(
        (layer.get("encoding", {}).get("color") or {}).get("legend") for layer in c["layer"])]
    assert len(keyed) == 1
    (chart,) = keyed
    assert _covered_points(chart, spec["datasets"]) == 0
    if "x" not in chart["layer"][0]["encoding"]:  # under the grid: the last row, no data
        assert spec["vconcat"][-1] is chart
        assert all(spec["datasets"][layer["data"]["name"]] for layer in chart["layer"])


_CURVES = st.lists(st.lists(st.tuples(st.integers(0, 16), st.floats(-4, 20)), min_size=1,
                            max_size=12, unique_by=lambda p: p[0]), min_size=1, max_size=6)


@given(_CURVES, st.sampled_from([(156.0, 129.0), (264.0, 223.0), (300.0, 240.0)]),
       st.sampled_from([None, "top-left", "bottom-right"]))
def test_a_legend_never_covers_generated_curves(curves: list[list[tuple[int, float]]],
                                                size: tuple[float, float],
                                                legend: Any) -> None:
    from curvekit.plotting.builders import metaparameter_chart
    from curvekit.plotting.layout import OUTSIDE, legend_overlaps

    tables = [(f"curve {i}", pl.DataFrame({"batch_size": [2.0**b for b, _ in pts],
                                           "step": [2.0**v for _, v in pts]}))
              for i, pts in enumerate(curves)]
    charts = [steps_chart(tables, title="t", scaling_label="curve 0", keyed=True,
                          legend=legend, width=size[0], height=size[1]),
              metaparameter_chart([(label, t.rename({"step": "value"})) for label, t in tables],
                                  title="t", y_title="Learning Rate", heuristics=True,
                                  legend=legend, width=size[0], height=size[1])]
    for chart in charts:
        orients = {enc["legend"]["orient"] for layer in chart["layer"]
                   for enc in layer["encoding"].values()
                   if isinstance(enc, dict) and enc.get("legend")}
        assert len(orients) == 1 and orients <= {*CORNERS, OUTSIDE}
        assert legend_overlaps(chart, chart["datasets"]) == 0
        assert _covered_points(chart, chart["datasets"]) == 0


@given(st.lists(_CURVES, min_size=2, max_size=9))
def test_a_shared_legend_covers_no_panel(panels: list[list[list[tuple[int, float]]]]) -> None:
    """A figure's shared legend sits in a panel's free corner, or under the grid."""
    from curvekit.plotting.builders import metaparameter_chart
    from curvekit.plotting.render import _share_legends

    charts = [metaparameter_chart([("Optimal Effective Learning Rate", pl.DataFrame({
        "batch_size": [2.0**b for b, _ in curve[0]], "value": [2.0**v for _, v in curve[0]]}))],
        title="t", y_title="Learning Rate", heuristics=True, width=156, height=129)
        for curve in panels]
    datasets: dict[str, Any] = {}
    strip = _share_legends(charts, 3, 588, datasets)
    keyed = [c for c in charts if any((layer["encoding"].get("color") or {}).get("legend")
                                      for layer in c["layer"])]
    assert len(keyed) == (0 if strip is not None else 1)
    for chart in keyed:
        assert _covered_points(chart, chart["datasets"]) == 0
    if strip is not None:
        legend = strip["layer"][0]["encoding"]["color"]["legend"]
        assert legend["orient"] == "top" and strip["width"] == 588


def test_one_goal_at_a_time_keys_only_that_goal() -> None:
    """The report's steps chart shows one goal at a time: its legend keys that goal, not
    every goal of the drop-down."""
    curve = pl.DataFrame({"batch_size": [2, 4, 8], "step": [100.0, 60.0, 50.0]})
    goals = [f"val/classification_error < {g}" for g in (0.021, 0.024, 0.029, 0.03)]
    spec = steps_chart([(g, curve) for g in goals], title="Steps to result",
                       scaling_label=goals[-1], select="goal", width=300, height=240)
    legend = spec["layer"][0]["encoding"]["color"]["legend"]
    param = spec["params"][0]["name"]
    assert legend["values"] == {"expr": f"[{param}]"}
    assert spec["layer"][0]["transform"] == [{"filter": f"(datum.curve === {param})"}]


# -- fixed limits are padded too ----------------------------------------------------------------

def _inside_by(value: float, scale: Spec, length: float) -> float:
    """How many pixels ``value`` lies inside the nearer end of the axis."""
    at = _pixel(value, scale, length)
    return min(at, length - at)


@given(st.integers(-12, 4), st.integers(1, 12), st.lists(st.integers(-14, 18), min_size=1,
                                                          max_size=10),
       st.sampled_from([(156.0, 129.0), (264.0, 223.0)]))
def test_a_marker_on_a_fixed_limit_is_whole(lo: int, span: int, exponents: list[int],
                                            size: tuple[float, float]) -> None:
    """Steps on the limits are drawn EDGE_PAD px inside the frame; steps beyond them are
    left out, the line broken there, and named in a note."""
    from curvekit.plotting.layout import EDGE_PAD

    ylim = (2.0**lo, 2.0 ** (lo + span))
    steps = [2.0**e for e in exponents] + [ylim[0], ylim[1]]
    curve = pl.DataFrame({"batch_size": [2.0**k for k in range(len(steps))], "step": steps})
    spec = steps_chart([("c", curve)], title="t", ylim=ylim, width=size[0], height=size[1])
    layer = spec["layer"][0]
    scale = layer["encoding"]["y"]["scale"]
    for limit in ylim:
        assert _inside_by(limit, scale, size[1]) >= EDGE_PAD - 1e-6
    assert layer["transform"] == [{"filter": "datum.within"}]
    rows = [r for r in spec["datasets"][layer["data"]["name"]] if r["within"]]
    assert sorted(r["step"] for r in rows) == sorted(s for s in steps
                                                     if ylim[0] <= s <= ylim[1])
    beyond = [s for s in steps if not ylim[0] <= s <= ylim[1]]
    assert bool(beyond) == any("beyond the y limits" in n
                               for n in spec.get("usermeta", {}).get("notes", []))
    ticks = layer["encoding"]["y"]["axis"]["values"]
    assert all(ylim[0] <= t <= ylim[1] for t in ticks)
    # no line bridges a point left out
    kept = [i for i in range(len(steps)) if ylim[0] <= steps[i] <= ylim[1]]
    segment = {r["batch_size"]: r["segment"] for r in rows}
    for a, b in itertools.pairwise(kept):
        if any(not ylim[0] <= steps[i] <= ylim[1] for i in range(a + 1, b)):
            assert segment[2.0**a] != segment[2.0**b]


@given(st.lists(st.sampled_from([1e-5, 1e-4, 1e-3, 0.1, 0.3]), min_size=1, max_size=8))
def test_scatter_limits_are_padded_and_say_what_lies_beyond(rates: list[float]) -> None:
    from curvekit.plotting.layout import EDGE_PAD

    trials = pl.DataFrame({"learning_rate": rates, "momentum": [0.9] * len(rates),
                           "outcome": ["Goal Not Achieved"] * len(rates),
                           "winner": [False] * len(rates), "trial_id": list(range(len(rates)))})
    spec = scatter_chart(trials, title="t", xlim=(1e-4, 1e-1), ylim=(1e-4, 1e-1))
    points = spec["layer"][-2]
    scale = points["encoding"]["x"]["scale"]
    assert _inside_by(1e-4, scale, spec["width"]) >= EDGE_PAD - 1e-6
    assert {"filter": "datum.within"} in points["transform"]
    drawn = [r["learning_rate"] for r in spec["datasets"][points["data"]["name"]]
             if r["within"]]
    assert sorted(drawn) == sorted(r for r in rates if 1e-4 <= r <= 1e-1)
    hidden = len(rates) - len(drawn)
    notes = spec.get("usermeta", {}).get("notes", [])
    assert (f"{hidden} trial" in " ".join(notes)) == bool(hidden)


def test_every_drawn_marker_is_whole_in_every_figure(specs: dict[int, Spec]) -> None:
    """Fixed limits or not, every point a panel draws with a marker lies at least EDGE_PAD
    - 1 px inside the frame, on both axes."""
    from curvekit.plotting.layout import EDGE_PAD

    checked = 0
    for spec in specs.values():
        for chart, layer in _layers_with(spec):
            mark = layer["mark"] if isinstance(layer["mark"], dict) else {"type": layer["mark"]}
            if mark["type"] != "point" and not mark.get("point"):
                continue
            for name, length in (("x", chart["width"]), ("y", chart["height"])):
                enc = layer["encoding"].get(name)
                if not isinstance(enc, dict) or "domain" not in (enc.get("scale") or {}):
                    continue
                for row in spec["datasets"][layer["data"]["name"]]:
                    value = row.get(enc["field"])
                    if value is None or row.get("within") is False:  # not drawn
                        continue
                    assert _inside_by(value, enc["scale"], length) >= EDGE_PAD - 1, (
                        chart["title"], name, value)
                    checked += 1
    assert checked > 500


# -- one colour per series, in every figure -----------------------------------------------------

def _figure_colours(number: int) -> list[dict[str, str]]:
    """Each panel's colours (label → colour) of a figure drawn from generated curves."""
    from curvekit.plotting.builders import recolor

    fig = FIGURES[number]
    curve = pl.DataFrame({"batch_size": [2, 4, 8], "step": [100.0, 60.0, 50.0]})
    charts = [steps_chart([(c.label or p.title, curve) for c in p.curves], title=p.title)
              for p in fig.panels]
    recolor(charts)
    return [dict(zip(c["layer"][0]["encoding"]["color"]["scale"]["domain"],
                     c["layer"][0]["encoding"]["color"]["scale"]["range"], strict=True))
            for c in charts]


def test_a_series_has_one_colour_in_every_figure() -> None:
    """FC-1024-1024-1024 in Figures 3a, 3d, 16a and 16b, and every other series the
    figures compare: one colour everywhere, and the curves of a panel differ."""
    from curvekit.plotting.colors import SERIES_COLORS

    seen: dict[str, set[str]] = {}
    for number in FIGURES:
        for panel in _figure_colours(number):
            assert len(set(panel.values())) == len(panel), (number, panel)
            for label, colour in panel.items():
                seen.setdefault(label, set()).add(colour)
    assert {label: c for label, c in seen.items() if len(c) > 1} == {}
    fc = "FC-1024-1024-1024"
    fig3, fig16 = _figure_colours(3), _figure_colours(16)
    assert fig3[0][fc] == fig3[3][fc] == fig16[0][fc] == fig16[1][fc] == SERIES_COLORS[fc]
    # a model compared under two labels keeps its colour: LM1B's Transformer in 3c, 3f, 5c
    assert fig3[2]["Transformer"] == fig3[5]["Base"] == _figure_colours(5)[2]["LM1B, 3.9"]
    # one curve per panel: all in the first colour, as the paper draws them
    assert {c for panel in _figure_colours(1) for c in panel.values()} == {"#4c72b0"}


def test_series_colour_table_covers_every_compared_series() -> None:
    from curvekit.plotting.colors import SERIES_COLORS

    compared = {c.label for f in FIGURES.values() for p in f.panels if len(p.curves) > 1
                for c in p.curves}
    assert compared == set(SERIES_COLORS)


@given(st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=12, unique=True))
def test_any_series_gets_its_own_stable_colour(labels: list[str]) -> None:
    """A series no table names: a colour from its name, the same in any chart, unless a
    series drawn before it in the same chart has it; the curves of a chart differ (up to
    the palette's ten)."""
    from curvekit.plotting.colors import SERIES_COLORS, assign, name_color, series_color
    from curvekit.plotting.layout import PALETTE

    colours = assign(labels)
    assert colours == assign(labels)
    if len(labels) > 1:
        assert len(set(colours)) == min(len(labels), len(PALETTE))
        assert colours[0] == series_color(labels[0])
        assert name_color(labels[0]) != "#8c8c8c"  # grey reads as a guide line
    else:  # alone: the table's colour, else blue
        assert colours == [SERIES_COLORS.get(labels[0], "#4c72b0")]


def test_panels_keep_their_own_scales(specs: dict[int, Spec]) -> None:
    """Merged across a grid (or across Figure 9's two parts), the scatters' outcome
    scales paired one panel's entries with another's colours and shapes: stars drawn as
    black crosses, achieved trials as red triangles."""
    def concats(node: Spec) -> Iterator[Spec]:
        if "vconcat" in node or "hconcat" in node:
            yield node
        for part in node.get("vconcat", []) + node.get("hconcat", []):
            yield from concats(part)

    for spec in specs.values():
        for node in concats(spec):
            for channel in ("color", "shape", "opacity", "size", "strokeDash"):
                assert node["resolve"]["scale"][channel] == "independent"
    for chart in _charts(specs[19]):
        points = chart["layer"][-2]["encoding"]
        styles = dict(zip(points["shape"]["scale"]["domain"], points["shape"]["scale"]["range"],
                          strict=True))
        assert styles.get("Goal Achieved", "circle") == "circle"
        assert styles.get("Best Trial", "M0,-1").startswith("M0,-1")  # the star's path


def test_figure23_titles_its_outer_axes_only() -> None:
    from curvekit.plotting.render import _outer_axis_titles

    assert FIGURES[23].outer_axis_titles and not FIGURES[1].outer_axis_titles
    curve = pl.DataFrame({"batch_size": [2, 4], "step": [100.0, 60.0]})
    panels = [steps_chart([("w", curve)], title=str(i), scaling_label="w") for i in range(33)]
    _outer_axis_titles(panels, 5)
    for i, panel in enumerate(panels):
        enc = panel["layer"][0]["encoding"]
        assert (enc["y"]["axis"]["title"] is not None) == (i % 5 == 0), i
        assert (enc["x"]["axis"]["title"] is not None) == (i >= 30), i  # the last row


def test_search_space_line_breaks_where_the_goal_was_missed() -> None:
    from curvekit.plotting.builders import search_space_chart

    winners = pl.DataFrame({"batch_size": [16, 32, 128], "value": [0.01, 0.02, 0.05]})
    band = pl.DataFrame({"batch_size": [16, 32, 64, 128], "low": [1e-4] * 4,
                         "high": [1.0] * 4})
    spec = search_space_chart(winners, band, title="t", studies=[16.0, 32.0, 64.0, 128.0])
    line = spec["layer"][1]
    assert line["encoding"]["detail"]["field"] == "segment"
    rows = spec["datasets"][line["data"]["name"]]
    segments = {r["batch_size"]: r["segment"] for r in rows}
    assert segments[16] == segments[32] != segments[128]
    assert spec["usermeta"]["notes"] == ["goal not reached at B=64"]


@given(st.lists(st.integers(min_value=1, max_value=10**7), min_size=1, max_size=12),
       st.floats(min_value=20, max_value=400))
def test_a_wrapped_note_never_splits_a_number(values: list[int], width: float) -> None:
    """A panel's note lists batch sizes with thousands separators; a line break may come
    after the comma between two of them, never inside one (``1,`` / ``024``)."""
    from curvekit.plotting.layout import wrap

    numbers = [f"{v:,}" for v in values]
    lines = wrap("goal not reached at B=" + ", ".join(numbers), width, 11)
    words = " ".join(lines).replace("B=", "B= ").split()
    assert [w.rstrip(",") for w in words[5:]] == numbers
