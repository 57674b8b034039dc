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

import altair as alt
import numpy as np
import polars as pl

from curvekit.fit import RegimeFit

__all__ = ["best_chart", "log2_axis", "metaparameter_chart", "steps_chart"]

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


def log2_axis(title: str, values: Sequence[float], domain: tuple[float, float] | None = None
              ) -> tuple[alt.Scale, alt.Axis]:
    """A log2 scale with power-of-two ticks labelled 2^k."""
    scale = alt.Scale(type="log", base=2) if domain is None else alt.Scale(
        type="log", base=2, domain=list(domain))
    ticks = _powers_of_two([*values, *(domain or ())])
    if len(ticks) > 12:  # keep labels readable: every other power
        ticks = ticks[:: math.ceil(len(ticks) / 12)]
    axis = alt.Axis(title=title, values=ticks, grid=True,
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
    width: float = 200,
    height: float = 175,
) -> alt.LayerChart:
    """Steps to result against batch size, log2 × log2.

    ``curves`` are (label, table with ``batch_size`` and ``step``). The curve named
    ``scaling_label`` gets the black dashed perfect-scaling line, drawn at its own batch
    sizes. ``normalize_at`` divides each curve by its steps at that batch size. ``fit``
    overlays a regime fit of the (single) curve: the fitted line and shaded regimes, both
    labelled as fits.
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
    if scaling_label is not None and scaling_label in labels:
        ref = data.filter(pl.col("curve") == scaling_label).sort("batch_size")
        if ref.height:
            b0, s0 = ref["batch_size"][0], ref["step"][0]
            anchor = (normalize_at / ref["batch_size"]) if normalize_at is not None else (
                s0 * b0 / ref["batch_size"])
            line = ref.select("batch_size", anchor.alias("step"))
    ys = data["step"].to_list() + ([] if line is None else line["step"].to_list())
    x_scale, x_axis = log2_axis("Batch Size", data["batch_size"].to_list())
    y_title = ("Steps" if normalize_at is None
               else f"Steps / (Steps at B={int(normalize_at)})")
    y_scale, y_axis = log2_axis(y_title, ys, ylim)
    color = alt.Color("curve:N", sort=labels, title=None,
                      legend=alt.Legend() if len(curves) > 1 else None)
    x = alt.X("batch_size:Q", scale=x_scale, axis=x_axis)
    y = alt.Y("step:Q", scale=y_scale, axis=y_axis)
    layers: list[alt.Chart] = []
    if fit is not None:
        layers += _fit_layers(fit, x_scale, y_scale)
    clip = ylim is not None  # fixed limits: keep marks inside the plot
    layers.append(alt.Chart(data).mark_line(
        clip=clip, point=alt.OverlayMarkDef(shape="triangle-up", filled=True, size=40)).encode(
        x=x, y=y, color=color, tooltip=["curve:N", "batch_size:Q", "step:Q"]))
    if line is not None:
        layers.append(alt.Chart(line).mark_line(color="black", strokeDash=[5, 4],
                                                strokeWidth=1, clip=clip).encode(x=x, y=y))
    chart: alt.LayerChart = alt.LayerChart(layer=layers).properties(
        title=title, width=width, height=height).resolve_scale(color="independent")
    return chart


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
        x=alt.X("start:Q", scale=x_scale), x2="end:Q",
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
    color = alt.Color("curve:N", scale=alt.Scale(domain=domain, range=colors), title=None)
    x = alt.X("batch_size:Q", scale=x_scale, axis=x_axis)
    y = alt.Y("value:Q", scale=y_scale, axis=y_axis)
    layers = [alt.Chart(data).mark_line(
        point=alt.OverlayMarkDef(shape="triangle-up", filled=True, size=40)).encode(
        x=x, y=y, color=color, tooltip=["curve:N", "batch_size:Q", "value:Q"])]
    if guides is not None:
        dash = alt.StrokeDash("curve:N", scale=alt.Scale(
            domain=["Linear Heuristic", "Square Root Heuristic"], range=[[5, 4], [6, 3, 1, 3]]),
            legend=None)
        layers.append(alt.Chart(guides).mark_line(strokeWidth=1).encode(
            x=x, y=y, color=color, strokeDash=dash, detail="curve:N"))
    chart: alt.LayerChart = alt.LayerChart(layer=layers).properties(
        title=title, width=width, height=height)
    return chart


def best_chart(
    curves: Sequence[tuple[str, pl.DataFrame]],
    *,
    title: str | alt.TitleParams,
    y_title: str,
    goal_line: float | None = None,
    ylim: tuple[float, float] | None = None,
    width: float = 200,
    height: float = 175,
) -> alt.LayerChart:
    """Best value per batch size: x log2, y linear; optionally a dotted goal line."""
    frames = [t.select(pl.col("batch_size").cast(pl.Float64), pl.col("value").cast(pl.Float64))
              .with_columns(pl.lit(label).alias("curve")) for label, t in curves]
    data = pl.concat(frames) if frames else pl.DataFrame(
        schema={"batch_size": pl.Float64, "value": pl.Float64, "curve": pl.String})
    x_scale, x_axis = log2_axis("Batch Size", data["batch_size"].to_list())
    y = alt.Y("value:Q", title=y_title, scale=alt.Scale(zero=False, domain=list(ylim))
              if ylim else alt.Scale(zero=False))
    labels = [label for label, _ in curves]
    color = alt.Color("curve:N", sort=labels, title=None,
                      legend=alt.Legend() if len(curves) > 1 else None)
    layers = [alt.Chart(data).mark_line(
        point=alt.OverlayMarkDef(shape="triangle-up", filled=True, size=40)).encode(
        x=alt.X("batch_size:Q", scale=x_scale, axis=x_axis), y=y, color=color,
        tooltip=["curve:N", "batch_size:Q", "value:Q"])]
    if goal_line is not None:
        rule = pl.DataFrame({"value": [goal_line], "label": ["Figure 1 goal"]})
        layers.append(alt.Chart(rule).mark_rule(color="grey", strokeDash=[1, 2],
                                                strokeWidth=1).encode(
            y="value:Q", opacity=alt.Opacity("label:N", title=None,
                                             legend=alt.Legend(labelFontSize=6))))
    chart: alt.LayerChart = alt.LayerChart(layer=layers).properties(
        title=title, width=width, height=height).resolve_scale(color="independent")
    return chart
