"""Chart builders: a few functions that draw every figure and plot from plain tables.

A builder takes the numbers (never the store) and returns an Altair chart, so figures of
the paper, imported workloads and new runs all get the same pictures.

>>> import polars as pl
>>> curve = pl.DataFrame({"batch_size": [16, 32, 64, 128], "step": [800, 400, 220, 200]})
>>> chart = steps_chart([("ResNet-8", curve)], title="demo", scaling_label="ResNet-8")
>>> spec = chart.to_dict()
>>> spec["layer"][0]["encoding"]["x"]["scale"]
{'base': 2, 'type': 'log'}
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

import altair as alt
import numpy as np
import polars as pl

if TYPE_CHECKING:
    from curvekit.fit import RegimeFit

__all__ = [
    "OUTCOMES",
    "best_chart",
    "contour_lines",
    "half_decade_limits",
    "log2_axis",
    "metaparameter_chart",
    "scatter_chart",
    "search_space_chart",
    "steps_chart",
    "to_spec",
]

LegendOrient = Literal["left", "right", "top", "bottom", "top-left", "top-right",
                       "bottom-left", "bottom-right"]
"""Where a legend goes: outside (``left`` ... ``bottom``) or inside a corner of the plot."""

# Charts are built in one constructor call each: every chained Altair method deep-copies
# the whole chart, which dominated the time to draw a figure.
_INDEPENDENT_COLOR = alt.Resolve(scale=alt.ScaleResolveMap(color="independent"))

REGIME_LABELS = {"perfect": "perfect scaling", "diminishing": "diminishing returns",
                 "plateau": "maximal data parallelism"}
REGIME_COLORS = {"perfect scaling": "#4c72b0", "diminishing returns": "#dd8452",
                 "maximal data parallelism": "#55a868"}


def _powers_of_two(values: Sequence[float]) -> list[float]:
    finite = [v for v in values if v > 0 and math.isfinite(v)]
    if not finite:
        return []
    lo, hi = math.floor(math.log2(min(finite))), math.ceil(math.log2(max(finite)))
    return [2.0**k for k in range(lo, hi + 1)]


def to_spec(chart: alt.TopLevelMixin) -> dict[str, Any]:
    """The chart's Vega-Lite spec, with its data inlined however many rows it has.

    Altair refuses more than 5,000 rows by default; a scatter of every trial of a large
    workload has more, and the static pages need them all. Schema validation is skipped:
    the tests validate the builders' specs.
    """
    with alt.data_transformers.disable_max_rows():
        spec: dict[str, Any] = chart.to_dict(validate=False)
    return spec


def _tooltips(*fields: str) -> list[alt.Tooltip]:
    """Tooltip channels as objects: Altair parses shorthand lists far more slowly."""
    return [alt.Tooltip(f) for f in fields]


def _legend(orient: LegendOrient | None, size: float) -> alt.Legend:
    """A legend outside on the right, or inside the plot at ``orient`` (e.g. ``top-left``)."""
    if orient is None:
        return alt.Legend(labelFontSize=size)
    return alt.Legend(orient=orient, labelFontSize=size, fillColor="white", padding=3,
                      strokeColor="#ccc")


def log2_axis(title: str, values: Sequence[float], domain: tuple[float, float] | None = None
              ) -> tuple[alt.Scale, alt.Axis]:
    """A log2 scale with power-of-two ticks labelled 2^k."""
    scale = alt.Scale(type="log", base=2) if domain is None else alt.Scale(
        type="log", base=2, domain=list(domain))
    ticks = _powers_of_two([*values, *(domain or ())])
    if len(ticks) > 12:  # keep labels readable: every other power
        ticks = ticks[:: math.ceil(len(ticks) / 12)]
    axis = alt.Axis(title=title, values=ticks, grid=True, labelOverlap="greedy",
                    labelExpr="'2^' + round(log(datum.value) / log(2))")
    return scale, axis


def steps_chart(
    curves: Sequence[tuple[str, pl.DataFrame]],
    *,
    title: str | alt.TitleParams,
    scaling_label: str | None = None,
    normalize_at: int | None = None,
    ylim: tuple[float, float] | None = None,
    fit: RegimeFit | None = None,
    legend: LegendOrient | None = None,
    legend_size: float = 8,
    select: str | None = None,
    width: float = 200,
    height: float = 175,
) -> alt.LayerChart:
    """Steps to result against batch size, log2 × log2.

    ``curves`` are (label, table with ``batch_size`` and ``step``). The curve named
    ``scaling_label`` gets the black dashed perfect-scaling line, drawn at its own batch
    sizes. ``normalize_at`` divides each curve by its steps at that batch size. ``fit``
    overlays a regime fit of the (single) curve: the fitted line and shaded regimes, both
    labelled as fits. With ``select`` (the selector's name, e.g. "goal"), one curve shows
    at a time, chosen in a drop-down (``scaling_label`` first), each with its own
    perfect-scaling line.
    """
    frames = []
    for label, table in curves:
        t = table.select(pl.col("batch_size").cast(pl.Float64), pl.col("step").cast(pl.Float64))
        if normalize_at is not None:
            at = t.filter(pl.col("batch_size") == normalize_at)["step"]
            t = t.with_columns(pl.col("step") / at[0])
        frames.append(t.with_columns(pl.lit(label).alias("curve")))
    data = pl.concat(frames) if frames else pl.DataFrame(
        schema={"batch_size": pl.Float64, "step": pl.Float64, "curve": pl.String})
    labels = [label for label, _ in curves]
    line = None
    scaled = labels if select is not None else (
        [scaling_label] if scaling_label in labels else [])
    lines = []
    for label in scaled:
        ref = data.filter(pl.col("curve") == label).sort("batch_size")
        if ref.height:
            b0, s0 = ref["batch_size"][0], ref["step"][0]
            anchor = (normalize_at / ref["batch_size"]) if normalize_at is not None else (
                s0 * b0 / ref["batch_size"])
            lines.append(ref.select("batch_size", anchor.alias("step"), "curve"))
    if lines:
        line = pl.concat(lines)
    ys = data["step"].to_list() + ([] if line is None else line["step"].to_list())
    x_scale, x_axis = log2_axis("Batch Size", data["batch_size"].to_list())
    y_title = ("Steps" if normalize_at is None
               else f"Steps / (Steps at B={int(normalize_at)})")
    y_scale, y_axis = log2_axis(y_title, ys, ylim)
    color = alt.Color("curve:N", sort=labels, title=None,
                      legend=_legend(legend, legend_size) if len(curves) > 1 else None)
    x = alt.X("batch_size:Q", scale=x_scale, axis=x_axis)
    y = alt.Y("step:Q", scale=y_scale, axis=y_axis)
    layers: list[alt.Chart] = []
    if fit is not None:
        layers += _fit_layers(fit, x_scale, y_scale)
    clip = ylim is not None  # fixed limits: keep marks inside the plot
    curve_layer = alt.Chart(data).mark_line(
        clip=clip, point=alt.OverlayMarkDef(shape="triangle-up", filled=True, size=40)).encode(
        x=x, y=y, color=color, tooltip=_tooltips("curve:N", "batch_size:Q", "step:Q"))
    line_layer = None if line is None else alt.Chart(line).mark_line(
        color="black", strokeDash=[5, 4], strokeWidth=1, clip=clip).encode(x=x, y=y)
    params: list[Any] = []
    if select is not None and labels:
        param = alt.param(name=_param_name(select), value=scaling_label or labels[0],
                          bind=alt.binding_select(options=labels, name=f"{select} "))
        params.append(param.param)
        curve_layer = curve_layer.transform_filter(alt.datum.curve == param)
        if line_layer is not None:
            line_layer = line_layer.transform_filter(alt.datum.curve == param)
    layers.append(curve_layer)
    if line_layer is not None:
        layers.append(line_layer)
    chart = alt.LayerChart(layer=layers, title=title, width=width, height=height,
                           resolve=_INDEPENDENT_COLOR, params=params or alt.Undefined)
    return chart


def _param_name(label: str) -> str:
    """A Vega expression name for a selector labelled ``label``."""
    return "select_" + "".join(c if c.isalnum() else "_" for c in label)


def _fit_layers(fit: RegimeFit, x_scale: alt.Scale, y_scale: alt.Scale) -> list[alt.Chart]:
    """Shaded regimes and the fitted line of a regime fit."""
    b = fit.batch_sizes
    lo, hi = float(b.min()), float(b.max())
    edges = [lo, *fit.breakpoints, hi]
    bands = pl.DataFrame({
        "start": edges[:-1], "end": edges[1:],
        "regime": [f"{REGIME_LABELS[s]} (fit)" for s in fit.segments]})
    domain = [f"{name} (fit)" for name in REGIME_COLORS]
    shade = alt.Chart(bands).mark_rect(opacity=0.12).encode(
        x=alt.X("start:Q", scale=x_scale), x2=alt.X2("end"),
        color=alt.Color("regime:N", scale=alt.Scale(domain=domain,
                                                    range=list(REGIME_COLORS.values())),
                        title=f"Regimes (fit: {fit.model})"))
    grid = np.exp2(np.linspace(math.log2(lo), math.log2(hi), 64))
    line = pl.DataFrame({"batch_size": grid, "step": fit.predict(grid)})
    fitted = alt.Chart(line).mark_line(color="#c44e52", strokeWidth=1.5, opacity=0.9).encode(
        x=alt.X("batch_size:Q", scale=x_scale), y=alt.Y("step:Q", scale=y_scale))
    return [shade, fitted]


def metaparameter_chart(
    curves: Sequence[tuple[str, pl.DataFrame]],
    *,
    title: str | alt.TitleParams,
    y_title: str,
    heuristics: bool = True,
    legend: LegendOrient | None = None,
    legend_size: float = 8,
    width: float = 200,
    height: float = 175,
) -> alt.LayerChart:
    """A winning trial's metaparameter against batch size, log2 × log2.

    ``curves`` are (label, table with ``batch_size`` and ``value``). With ``heuristics``,
    the linear (y0·B/B0, black dashed) and square-root (y0·√(B/B0), green dash-dot) lines,
    anchored at each curve's smallest batch size, drawn at its batch sizes.
    """
    frames = [t.select(pl.col("batch_size").cast(pl.Float64), pl.col("value").cast(pl.Float64))
              .with_columns(pl.lit(label).alias("curve")) for label, t in curves]
    data = pl.concat(frames) if frames else pl.DataFrame(
        schema={"batch_size": pl.Float64, "value": pl.Float64, "curve": pl.String})
    lines = []
    if heuristics:
        for frame in frames:
            ref = frame.sort("batch_size")
            if not ref.height:
                continue
            b0, y0 = ref["batch_size"][0], ref["value"][0]
            ratio = ref["batch_size"] / b0
            lines.append(ref.select("batch_size", (y0 * ratio).alias("value"),
                                    pl.lit("Linear Heuristic").alias("curve")))
            lines.append(ref.select("batch_size", (y0 * ratio.sqrt()).alias("value"),
                                    pl.lit("Square Root Heuristic").alias("curve")))
    guides = pl.concat(lines) if lines else None
    ys = data["value"].to_list() + ([] if guides is None else guides["value"].to_list())
    x_scale, x_axis = log2_axis("Batch Size", data["batch_size"].to_list())
    y_scale, y_axis = log2_axis(y_title, ys)
    labels = [label for label, _ in curves]
    domain = [*labels, *(["Linear Heuristic", "Square Root Heuristic"] if guides is not None
                         else [])]
    palette = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860"]
    colors = [palette[i % len(palette)] for i in range(len(labels))]
    if guides is not None:
        colors += ["black", "#55a868"]
    color = alt.Color("curve:N", scale=alt.Scale(domain=domain, range=colors), title=None,
                      legend=_legend(legend, legend_size))
    x = alt.X("batch_size:Q", scale=x_scale, axis=x_axis)
    y = alt.Y("value:Q", scale=y_scale, axis=y_axis)
    layers = [alt.Chart(data).mark_line(
        point=alt.OverlayMarkDef(shape="triangle-up", filled=True, size=40)).encode(
        x=x, y=y, color=color, tooltip=_tooltips("curve:N", "batch_size:Q", "value:Q"))]
    if guides is not None:
        dash = alt.StrokeDash("curve:N", scale=alt.Scale(
            domain=["Linear Heuristic", "Square Root Heuristic"], range=[[5, 4], [6, 3, 1, 3]]),
            legend=None)
        layers.append(alt.Chart(guides).mark_line(strokeWidth=1).encode(
            x=x, y=y, color=color, strokeDash=dash, detail=alt.Detail("curve:N")))
    chart = alt.LayerChart(layer=layers, title=title, width=width, height=height)
    return chart


def best_chart(
    curves: Sequence[tuple[str, pl.DataFrame]],
    *,
    title: str | alt.TitleParams,
    y_title: str,
    goal_line: float | None = None,
    goal_label: str = "Figure 1 goal",
    xlim: tuple[float, float] | None = None,
    ylim: tuple[float, float] | None = None,
    legend: LegendOrient | None = None,
    legend_size: float = 8,
    width: float = 200,
    height: float = 175,
) -> alt.LayerChart:
    """Best value per batch size: x log2, y linear; optionally a dotted goal line.

    ``legend`` places the legend inside the plot (``top-right``, ``top-left``, ...).
    """
    frames = [t.select(pl.col("batch_size").cast(pl.Float64), pl.col("value").cast(pl.Float64))
              .with_columns(pl.lit(label).alias("curve")) for label, t in curves]
    data = pl.concat(frames) if frames else pl.DataFrame(
        schema={"batch_size": pl.Float64, "value": pl.Float64, "curve": pl.String})
    x_scale, x_axis = log2_axis("Batch Size", data["batch_size"].to_list(), xlim)
    y = alt.Y("value:Q", title=y_title, scale=alt.Scale(zero=False, domain=list(ylim))
              if ylim else alt.Scale(zero=False))
    labels = [label for label, _ in curves]
    color = alt.Color("curve:N", sort=labels, title=None,
                      legend=_legend(legend, legend_size) if len(curves) > 1 else None)
    layers = [alt.Chart(data).mark_line(clip=xlim is not None or ylim is not None,
        point=alt.OverlayMarkDef(shape="triangle-up", filled=True, size=40)).encode(
        x=alt.X("batch_size:Q", scale=x_scale, axis=x_axis), y=y, color=color,
        tooltip=_tooltips("curve:N", "batch_size:Q", "value:Q"))]
    if goal_line is not None:
        rule = pl.DataFrame({"value": [goal_line], "label": [goal_label]})
        layers.append(alt.Chart(rule).mark_rule(color="grey", strokeDash=[1, 2],
                                                strokeWidth=1).encode(
            y=alt.Y("value:Q"), opacity=alt.Opacity("label:N", title=None,
                                             legend=alt.Legend(labelFontSize=6))))
    chart = alt.LayerChart(layer=layers, title=title, width=width, height=height,
                           resolve=_INDEPENDENT_COLOR)
    return chart


OUTCOMES = ("Goal Achieved", "Goal Not Achieved", "Infeasible")
# A filled "x" (a polygon, so legends draw it like the scatter does) and a five-point star.
X_SHAPE = ("M-1,-0.75L-0.75,-1L0,-0.25L0.75,-1L1,-0.75L0.25,0L1,0.75L0.75,1L0,0.25"
           "L-0.75,1L-1,0.75L-0.25,0Z")
STAR_SHAPE = ("M0,-1L0.2245,-0.309L0.9511,-0.309L0.3633,0.118L0.5878,0.809L0,0.382"
              "L-0.5878,0.809L-0.3633,0.118L-0.9511,-0.309L-0.2245,-0.309Z")


def contour_lines(xlim: tuple[float, float], ylim: tuple[float, float],
                  levels: int = 10) -> pl.DataFrame:
    """Lines of constant effective learning rate ``x / y`` across a log–log box.

    The levels are ``levels`` evenly spaced values of log10(x / y) strictly inside its range
    over the box (the range a 50 × 50 log-spaced grid spans). In log–log coordinates each
    line is straight, so two end points clipped to the box draw it exactly.

    >>> lines = contour_lines((1e-4, 1e-1), (1e-4, 1e-1))
    >>> lines["level"].n_unique(), lines.height
    (10, 20)
    """
    (x0, x1), (y0, y1) = (map(math.log10, xlim)), (map(math.log10, ylim))
    lo, hi = x0 - y1, x1 - y0
    rows: list[tuple[int, float, float]] = []
    for i, level in enumerate(np.linspace(lo, hi, levels + 2)[1:-1]):
        start, end = max(x0, y0 + level), min(x1, y1 + level)
        rows += [(i, 10.0**start, 10.0 ** (start - level)), (i, 10.0**end, 10.0 ** (end - level))]
    return pl.DataFrame(rows, schema={"level": pl.Int64, "x": pl.Float64, "y": pl.Float64},
                        orient="row")


def half_decade_limits(values: Sequence[float]) -> tuple[float, float]:
    """From the largest 10^(k/2) strictly below min to the smallest strictly above max.

    >>> half_decade_limits([0.02, 0.5])
    (0.01, 1.0)
    """
    finite = [v for v in values if v > 0 and math.isfinite(v)]
    if not finite:
        return 1e-4, 1.0
    low, high = min(finite), max(finite)
    lo = math.floor(2 * math.log10(low))
    while 10.0 ** (lo / 2) >= low:  # strictly below, whatever the rounding of log10
        lo -= 1
    while 10.0 ** ((lo + 1) / 2) < low:
        lo += 1
    hi = math.ceil(2 * math.log10(high))
    while 10.0 ** (hi / 2) <= high:
        hi += 1
    while 10.0 ** ((hi - 1) / 2) > high:
        hi -= 1
    return 10.0 ** (lo / 2), 10.0 ** (hi / 2)


def scatter_chart(
    trials: pl.DataFrame,
    *,
    title: str | alt.TitleParams,
    xlim: tuple[float, float] | None = None,
    ylim: tuple[float, float] | None = None,
    legend: LegendOrient | None = "bottom-right",
    legend_size: float = 8,
    select: Sequence[int] | None = None,
    width: float = 200,
    height: float = 175,
) -> alt.LayerChart:
    """Learning rate against 1 − momentum, log10 × log10, one mark per trial.

    With ``select`` (batch sizes; ``trials`` then has a ``batch_size`` column), one study
    shows at a time, chosen in a drop-down, on limits shared by all of them.

    ``trials`` has ``learning_rate``, ``momentum``, ``outcome`` (one of
    :data:`OUTCOMES`) and ``winner``. Goal achieved: blue circles; not achieved: red
    triangles; infeasible: black crosses; a yellow star on the winning trial; ten black
    contours of constant effective learning rate.
    """
    data = trials.select(
        pl.col("learning_rate").cast(pl.Float64),
        # rounded so that 1 - 0.9 lands on 0.1, not a hair below it
        (1 - pl.col("momentum").cast(pl.Float64)).round(12).alias("one_minus_momentum"),
        "outcome", "winner", pl.col("trial_id"),
        *(["batch_size"] if select is not None else []))
    if xlim is None or ylim is None:
        xlim = xlim or half_decade_limits(data["learning_rate"].to_list())
        ylim = ylim or half_decade_limits(data["one_minus_momentum"].to_list())
    x = alt.X("learning_rate:Q", title="Learning Rate",
              scale=alt.Scale(type="log", domain=list(xlim)), axis=alt.Axis(grid=True))
    y = alt.Y("one_minus_momentum:Q", title="1 - Momentum",
              scale=alt.Scale(type="log", domain=list(ylim)), axis=alt.Axis(grid=True))
    lines = contour_lines(xlim, ylim)
    contours = alt.Chart(lines).mark_line(color="black", opacity=0.5, strokeWidth=0.8,
                                          clip=True).encode(
        x=alt.X("x:Q", scale=alt.Scale(type="log", domain=list(xlim))),
        y=alt.Y("y:Q", scale=alt.Scale(type="log", domain=list(ylim))),
        detail=alt.Detail("level:N"))
    keys = _legend(legend, legend_size) if legend else None
    points = alt.Chart(data).mark_point(filled=True, clip=True).encode(
        x=x, y=y,
        color=alt.Color("outcome:N", scale=alt.Scale(domain=list(OUTCOMES),
                                                     range=["#4c72b0", "#c44e52", "black"]),
                        legend=keys, title=None),
        shape=alt.Shape("outcome:N", scale=alt.Scale(domain=list(OUTCOMES),
                                                     range=["circle", "triangle-up", X_SHAPE]),
                        legend=keys, title=None),
        size=alt.Size("outcome:N", scale=alt.Scale(domain=list(OUTCOMES), range=[40, 40, 25]),
                      legend=None),
        opacity=alt.Opacity("outcome:N", scale=alt.Scale(domain=list(OUTCOMES),
                                                         range=[1.0, 0.7, 0.7]), legend=None),
        tooltip=_tooltips("trial_id:Q", "outcome:N", "learning_rate:Q", "one_minus_momentum:Q"))
    star = alt.Chart(data.filter(pl.col("winner"))).mark_point(
        filled=True, shape=STAR_SHAPE, size=400, color="#f2d03b", stroke="black",
        strokeWidth=0.5, clip=True).encode(x=x, y=y)
    params: list[Any] = []
    if select:
        param = alt.param(name="select_batch_size", value=int(select[0]),
                          bind=alt.binding_select(options=[int(b) for b in select],
                                                  name="batch size "))
        params.append(param.param)
        points = points.transform_filter(alt.datum.batch_size == param)
        star = star.transform_filter(alt.datum.batch_size == param)
    chart = alt.LayerChart(layer=[contours, points, star], title=title, width=width,
                           height=height, params=params or alt.Undefined)
    return chart


def search_space_chart(
    winners: pl.DataFrame,
    band: pl.DataFrame,
    *,
    title: str | alt.TitleParams,
    y_title: str = "Learning Rate",
    width: float = 200,
    height: float = 175,
) -> alt.LayerChart:
    """The winning learning rate per batch size inside the searched range, x log2, y log10.

    ``winners`` has ``batch_size`` and ``value``; ``band`` has ``batch_size``, ``low`` and
    ``high``. A non-positive ``low`` is drawn at the axis floor.
    """
    positive = [v for v in [*winners["value"].to_list(), *band["low"].to_list(),
                            *band["high"].to_list()] if v is not None and v > 0]
    floor = 10.0 ** math.floor(math.log10(min(positive))) if positive else 1e-6
    band = band.with_columns(pl.when(pl.col("low") > 0).then(pl.col("low"))
                             .otherwise(floor).alias("low"),
                             pl.lit("Search Space").alias("series"))
    xs = [*winners["batch_size"].to_list(), *band["batch_size"].to_list()]
    x_scale, x_axis = log2_axis("Batch Size", xs)
    x = alt.X("batch_size:Q", scale=x_scale, axis=x_axis)
    top = 10.0 ** math.ceil(math.log10(max(positive))) if positive else 1.0
    y_scale = alt.Scale(type="log", domain=[floor, top])
    color = alt.Color("series:N", scale=alt.Scale(
        domain=["Optimal Learning Rate", "Search Space"], range=["#4c72b0", "grey"]), title=None)
    area = alt.Chart(band).mark_area(opacity=0.2, stroke="grey", strokeWidth=0.5).encode(
        x=x, y=alt.Y("low:Q", scale=y_scale, title=y_title, axis=alt.Axis(grid=True)),
        y2=alt.Y2("high"), color=color)
    line = alt.Chart(winners.with_columns(pl.lit("Optimal Learning Rate").alias("series"))
                     ).mark_line(point=alt.OverlayMarkDef(shape="triangle-up", filled=True,
                                                          size=40)).encode(
        x=x, y=alt.Y("value:Q", scale=y_scale), color=color,
        tooltip=_tooltips("batch_size:Q", "value:Q"))
    chart = alt.LayerChart(layer=[area, line], title=title, width=width, height=height)
    return chart
