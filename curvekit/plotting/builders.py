"""Chart builders: a few functions that draw every figure and plot from plain tables.

A builder takes the numbers (never the store) and returns a Vega-Lite spec as a dict
(:mod:`curvekit.plotting.vegalite`), so figures of the paper, imported workloads and new
runs all get the same pictures; :func:`~curvekit.plotting.vegalite.to_altair` makes any of
them an Altair chart.

Examples
--------
>>> import polars as pl
>>> curve = pl.DataFrame({"batch_size": [16, 32, 64, 128], "step": [800, 400, 220, 200]})
>>> spec = steps_chart([("ResNet-8", curve)], title="demo", scaling_label="ResNet-8")
>>> spec["layer"][0]["encoding"]["x"]["scale"]["type"]
'log'
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import polars as pl

from curvekit.plotting.colors import assign
from curvekit.plotting.layout import (
    AUTO,
    CONFIG,
    GUIDE,
    INSIDE,
    LINE_WITH_TRIANGLE,
    MIN_FONT,
    PALETTE,
    TEXT,
    padded_linear_domain,
    padded_log_domain,
    place_legends,
    power_label_expr,
    power_text,
    spaced_ticks,
    text_width,
    wrap,
)
from curvekit.plotting.vegalite import Spec, channel, dataset, top_level, vega_string

if TYPE_CHECKING:
    from curvekit.scaling import CriticalBatchFit, RegimeFit

__all__ = [
    "HEURISTIC_COLORS",
    "OUTCOMES",
    "WITHIN",
    "Title",
    "align_titles",
    "axis_title",
    "best_chart",
    "broken_lines",
    "clipped_notes",
    "contour_lines",
    "grouped",
    "half_decade_limits",
    "legend_strip",
    "legible_title",
    "log2_axis",
    "log10_axis",
    "log10_domain",
    "metaparameter_chart",
    "note_layer",
    "noted",
    "recolor",
    "scatter_chart",
    "scatter_outcomes",
    "search_space_chart",
    "series_colors",
    "sizes_text",
    "steps_chart",
    "within_limits",
]

LegendOrient = Literal["left", "right", "top", "bottom", "top-left", "top-right",
                       "bottom-left", "bottom-right"]
"""Where a legend goes: outside (``left`` ... ``bottom``) or inside a corner of the plot."""

Title = str | dict[str, Any]
"""A chart title: its text, or Vega-Lite title properties (``{"text": ..., "fontSize": 9}``)."""

Datasets = dict[str, list[dict[str, Any]]]

_INDEPENDENT_COLOR = {"scale": {"color": "independent", "strokeDash": "independent"}}
_TRIANGLES = {"shape": "triangle-up", "filled": True, "size": 40}

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


def _tooltips(*fields: str) -> list[Spec]:
    return [channel(f) for f in fields]


def _legend(orient: LegendOrient | None, size: float) -> Spec:
    """A legend inside the plot where it covers no data: at ``orient`` (e.g. ``top-left``)
    if that corner is free, else at a free corner, else under the plot
    (:func:`~curvekit.plotting.layout.place_legends`), so that a legend never covers data
    and never widens a figure beyond its size. A ``left`` ... ``bottom`` orient puts it
    outside, for a chart that stands alone.

    Its labels are never smaller than the legible minimum, whatever the spec asks; its
    symbol is drawn as the series is (a "^-" curve: a line with a triangle).
    """
    size = max(size, MIN_FONT["legend_label"])
    legend: Spec = {"orient": orient or AUTO, "labelFontSize": size, "symbolSize": 60}
    if legend["orient"] in (AUTO, "top-left", "top-right", "bottom-left", "bottom-right"):
        legend.update(INSIDE)
    return legend


def _curve_legend(orient: LegendOrient | None, size: float,
                  dashes: Mapping[str, list[float]] | None = None) -> Spec:
    """The legend of "^-" curves: each entry a line with a triangle, in its colour; an
    entry of ``dashes`` (a reference line) a dashed line without one."""
    legend: Spec = {**_legend(orient, size), "symbolType": LINE_WITH_TRIANGLE,
                    "symbolStrokeWidth": 1.5}
    if dashes:  # expressions Vega evaluates for each entry (its datum)
        shape, dash = f"'{LINE_WITH_TRIANGLE}'", "[]"
        for label, pattern in dashes.items():
            shape = f"datum.label === {vega_string(label)} ? 'stroke' : {shape}"
            dash = f"datum.label === {vega_string(label)} ? {list(pattern)} : {dash}"
        legend["symbolType"] = {"expr": shape}
        legend["symbolDash"] = {"expr": dash}
    return legend


def series_colors(labels: Sequence[str], fixed: Mapping[str, str] | None = None
                  ) -> list[str]:
    """The colour of each series in ``labels``, drawn together: ``fixed`` ones as given,
    the others their own (:func:`curvekit.plotting.colors.assign`: the same series has
    the same colour in every chart).

    >>> series_colors(["Nesterov Momentum", "Linear Heuristic", "SGD"],
    ...               {"Linear Heuristic": "black"})
    ['#55a868', 'black', '#4c72b0']
    """
    return assign(labels, fixed=fixed)


def legend_strip(channels: Sequence[tuple[str, Spec, Any]], width: float,
                 datasets: Datasets) -> Spec:
    """A chart that draws nothing but the legends of ``channels`` ((channel name, encoding,
    the layer's mark) of a figure's panel, with its scale and legend), their entries in
    rows across ``width`` px: a figure's shared legend under its grid, when no panel has a
    corner free of data for it.

    Each entry is drawn as in the panels (the same scales, marks and symbols); no mark is
    drawn: the scales' domains list the entries.

    >>> color = channel("curve:N", scale={"domain": ["a", "b"], "range": ["red", "blue"]},
    ...                 legend={"orient": "top-right"})
    >>> strip = legend_strip([("color", color, "line")], 600, {})
    >>> (layer,) = strip["layer"]
    >>> legend = layer["encoding"].get("color").get("legend")
    >>> legend["orient"], legend["direction"], legend["columns"]
    ('top', 'horizontal', 2)
    """
    by_field: dict[str, dict[str, Spec]] = {}
    marks: dict[str, Any] = {}
    for name, enc, mark in channels:
        by_field.setdefault(str(enc["field"]), {})[name] = enc
        marks.setdefault(str(enc["field"]), mark)
    layers: list[Spec] = []
    for field, encodings in by_field.items():
        entries = next(list(e["scale"]["domain"]) for e in encodings.values())
        size = max(float((e.get("legend") or {}).get("labelFontSize", TEXT["legend_label"]))
                   for e in encodings.values())
        # as many entries to a row as fit the width (symbol, label and the gap after it)
        widest = max(text_width(str(e), size) for e in entries) + 16 + 16
        columns = max(1, min(len(entries), int(width // widest)))
        encoding: Spec = {}
        for name, enc in encodings.items():
            legend = enc.get("legend")
            if legend:
                legend = {k: v for k, v in legend.items()
                          if k not in ("fillColor", "strokeColor", "offset", "padding")}
                legend.update({"orient": "top", "direction": "horizontal",
                               "columns": columns})
            encoding[name] = {**enc, "legend": legend}
        rows = pl.DataFrame({field: [str(e) for e in entries]})
        layers.append({"data": dataset(rows, datasets), "transform": [{"filter": "false"}],
                       "mark": marks[field], "encoding": encoding})
    return {"layer": layers, "width": width, "height": 1, "view": {"stroke": None}}


def legible_title(title: Title, width: float | None) -> Title:
    """``title`` at no less than the legible size, broken into lines that fit ``width``
    (``None``: one line, for a chart that stands alone and has room for it).

    >>> legible_title({"text": "a/b", "fontSize": 6}, 200)
    {'text': 'a/b', 'fontSize': 10.0}
    >>> legible_title("Simple CNN on MNIST", 200)
    'Simple CNN on MNIST'
    """
    props: dict[str, Any] = dict(title) if isinstance(title, dict) else {"text": title}
    size = max(float(props.get("fontSize", TEXT["panel_title"])), MIN_FONT["panel_title"])
    if "fontSize" in props:
        props["fontSize"] = size
    text = props.get("text")
    if isinstance(text, str) and width is not None:
        lines = wrap(text, width, size)
        props["text"] = lines[0] if len(lines) == 1 else lines
    sub = props.get("subtitle")
    if sub is not None:
        sub_size = max(float(props.get("subtitleFontSize", TEXT["note"])), MIN_FONT["note"])
        props["subtitleFontSize"] = sub_size
        items = [sub] if isinstance(sub, str) else list(sub)
        props["subtitle"] = items if width is None else [
            line for item in items for line in wrap(item, width, sub_size)]
    if set(props) == {"text"} and isinstance(props["text"], str):
        return str(props["text"])
    return props


def _layers(layers: list[Spec], datasets: Datasets, *, title: Title, width: float,
            height: float, notes: Sequence[str] = (), **properties: Any) -> Spec:
    """A complete layered chart; properties that are None are left out. The title gets a
    legible size and ``notes`` as its subtitle (a figure also wraps it to its panel), its
    legends go where they cover the least data, and the legibility ``config`` goes with
    the chart (a figure lifts it to its top level, the one place Vega-Lite reads it).

    The notes are kept in ``usermeta["notes"]`` too, for the figure that gathers them.
    """
    spec = {"layer": layers, "title": legible_title(noted(title, notes), None),
            "width": width, "height": height,
            **{k: v for k, v in properties.items() if v is not None}, "config": CONFIG}
    if notes:
        spec["usermeta"] = {"notes": list(dict.fromkeys(notes))}
    out = top_level(spec, datasets)
    place_legends(out)
    return out


def _power_label(base: int) -> Any:
    def label(value: float) -> str:
        return power_text(base, value)
    return label


def axis_title(title: str, length: float) -> str | list[str]:
    """An axis title broken into lines no longer than the axis (``length`` px), so that a
    long y title ("Learning Rate / (1 - Momentum)") never runs past its panel.

    >>> axis_title("Learning Rate / (1 - Momentum)", 120)
    ['Learning Rate /', '(1 - Momentum)']
    """
    size = TEXT["axis_title"]
    if text_width(title, size) <= length:
        return title
    # break between the parts of a quotient or before a parenthesis, as balanced as fits
    cuts = [i + 2 if title[i:i + 3] == " / " else i for i in range(len(title))
            if title[i:i + 3] == " / " or title[i:i + 2] == " ("]
    splits = [(title[:i].rstrip(), title[i:].lstrip()) for i in cuts]
    fitting = [p for p in splits if max(text_width(p[0], size), text_width(p[1], size)) <= length]
    if fitting:
        first, rest = min(fitting, key=lambda pair: abs(len(pair[0]) - len(pair[1])))
        return [first, rest]
    lines = wrap(title, length, size)
    return lines[0] if len(lines) == 1 else lines


def log2_axis(title: str, values: Sequence[float], limits: tuple[float, float] | None = None,
              *, length: float = 200, orient: Literal["x", "y"] = "x") -> tuple[Spec, Spec]:
    """A log2 scale with power-of-two ticks labelled 2ᵏ: (scale, axis) properties.

    The domain is the values' range, or the spec's fixed ``limits``, padded by
    :data:`~curvekit.plotting.layout.EDGE_PAD` pixels at each end, so that no marker is
    cut by the frame, not even one exactly on a fixed limit (the chart leaves out what
    lies beyond fixed limits, and says so). The ticks are the powers of two inside the
    range (or the limits), every one, every other, every third ... as the axis's
    ``length`` in pixels allows without two labels overlapping.

    >>> scale, axis = log2_axis("Steps", [], (2.0**-11, 2.0), length=150, orient="y")
    >>> lo, hi = scale["domain"]
    >>> lo < 2.0**-11 and hi > 2.0
    True
    >>> 2.0**-11 <= min(axis["values"]) and max(axis["values"]) <= 2.0
    True
    """
    domain = padded_log_domain(list(limits) if limits is not None else values, length)
    scale: Spec = {"type": "log", "base": 2, "domain": list(domain), "nice": False}
    lo, hi = limits if limits is not None else domain
    ticks = [t for t in _powers_of_two([*values, lo, hi])
             if lo * (1 - 1e-12) <= t <= hi * (1 + 1e-12)]
    ticks = spaced_ticks(ticks, length, orient, _power_label(2), domain=domain)
    axis = {"title": axis_title(title, length), "values": ticks, "grid": True,
            "labelExpr": power_label_expr(2)}
    return scale, axis


def log10_axis(title: str, domain: tuple[float, float], *, length: float = 200,
               orient: Literal["x", "y"] = "x", limits: bool = False) -> tuple[Spec, Spec]:
    """A log10 scale over ``domain`` with power-of-ten ticks labelled 10ᵏ, spaced as
    :func:`log2_axis` spaces its ticks: (scale, axis) properties. With ``limits``,
    ``domain`` is a chart's limits (fixed, or the scatters' half decades): the scale is
    padded beyond them by :data:`~curvekit.plotting.layout.EDGE_PAD` pixels, so that a
    marker on a limit is whole, and the ticks stay inside them.

    >>> scale, axis = log10_axis("Learning Rate", (1e-4, 1e-1))
    >>> axis["values"] == [1e-4, 1e-3, 1e-2, 1e-1]
    True
    >>> scale, axis = log10_axis("Learning Rate", (1e-4, 1e-1), limits=True)
    >>> lo, hi = scale["domain"]
    >>> lo < 1e-4 and min(axis["values"]) == 1e-4
    True
    """
    lo, hi = math.ceil(math.log10(domain[0]) - 1e-9), math.floor(math.log10(domain[1]) + 1e-9)
    ticks = [float(f"1e{k}") for k in range(lo, hi + 1)]
    shown = padded_log_domain(list(domain), length) if limits else domain
    ticks = spaced_ticks(ticks, length, orient, _power_label(10), domain=shown)
    axis = {"title": axis_title(title, length), "values": ticks, "grid": True,
            "labelExpr": power_label_expr(10)}
    return {"type": "log", "domain": list(shown), "nice": False}, axis


def log10_domain(values: Sequence[float], length: float) -> tuple[float, float]:
    """A padded log10 domain for ``values`` that holds at least two powers of ten (widened
    to the decades around the data when it would hold fewer), so the axis has ticks.

    >>> log10_domain([0.05, 0.08], 100)
    (0.01, 0.1)
    """
    lo, hi = padded_log_domain(values, length)
    if math.floor(math.log10(hi) + 1e-9) - math.ceil(math.log10(lo) - 1e-9) < 1:
        lo = min(lo, 10.0 ** math.floor(math.log10(lo) + 1e-9))
        hi = max(hi, 10.0 ** math.ceil(math.log10(hi) - 1e-9))
    return lo, hi


def _select(label: str, value: Any, options: Sequence[Any], name: str) -> Spec:
    """A parameter bound to a drop-down of ``options``."""
    return {"name": label, "value": value,
            "bind": {"input": "select", "options": list(options), "name": name}}


def _only(field: str, param: str) -> list[Spec]:
    """A transform keeping the rows whose ``field`` equals the parameter's value."""
    return [{"filter": f"(datum.{field} === {param})"}]


def sizes_text(sizes: Sequence[float], most: int = 4) -> str:
    """Batch sizes as a short list for a note.

    >>> sizes_text([4096, 8192]), sizes_text([1, 2, 4, 8, 16, 32])
    ('4,096 and 8,192', '1, 2, 4, 8 and 2 more')
    """
    names = [f"{int(b):,}" if float(b).is_integer() else f"{b:g}" for b in sorted(sizes)]
    if len(names) > most:
        return f"{', '.join(names[:most])} and {len(names) - most} more"
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def broken_lines(data: pl.DataFrame, studies: Mapping[str, Sequence[float]] | None,
                 x: str = "batch_size") -> tuple[pl.DataFrame, list[str]]:
    """``data`` (``curve``, ``x``, ...) with a ``segment`` column that breaks each curve's
    line wherever one of its ``studies`` (label → the batch sizes its workload has) lies
    between two of its points, and the notes that say which batch sizes each curve lacks.

    A line then never bridges a batch size that did not reach the goal, so that a curve
    with a gap never looks faster than one without.

    >>> d = pl.DataFrame({"curve": ["a"] * 3, "batch_size": [1.0, 2.0, 8.0]})
    >>> out, notes = broken_lines(d, {"a": [1, 2, 4, 8, 16]})
    >>> out["segment"].to_list(), notes
    (['a 0', 'a 0', 'a 1'], ['a: goal not reached at B=4 and 16'])
    """
    notes: list[str] = []
    parts = []
    for (label,), part in data.group_by("curve", maintain_order=True):
        part = part.sort(x)
        have = part[x].to_list()
        sizes = sorted(float(b) for b in (studies or {}).get(str(label), ()))
        missing = [b for b in sizes if b not in set(have)]
        if missing:
            notes.append(f"{label}: goal not reached at B={sizes_text(missing)}")
        breaks = [sum(1 for b in missing if b < v) for v in have]
        parts.append(part.with_columns(pl.Series("segment", [f"{label} {k}" for k in breaks],
                                                 dtype=pl.String)))
    if not parts:
        return data.with_columns(pl.lit("").alias("segment")), notes
    return pl.concat(parts), notes


def _unlabelled(notes: Sequence[str], labels: Sequence[str]) -> list[str]:
    """A chart of one curve says its notes without the curve's label (its title names it)."""
    if len(labels) != 1:
        return list(notes)
    return [n.removeprefix(f"{labels[0]}: ") for n in notes]


def clipped_notes(data: pl.DataFrame, column: str, ylim: tuple[float, float] | None,
                  axis: str = "y") -> list[str]:
    """Notes naming each curve's points beyond fixed limits of the ``axis`` that draws
    ``column`` (they are not drawn).

    >>> d = pl.DataFrame({"curve": ["a", "a"], "batch_size": [2.0, 4.0], "step": [1.0, 8.0]})
    >>> clipped_notes(d, "step", (0.5, 4.0))
    ['a: B=4 beyond the y limits, not drawn']
    """
    if ylim is None:
        return []
    out = data.filter(_beyond(column, ylim))
    return [f"{label}: B={sizes_text(part['batch_size'].to_list())} beyond the {axis} "
            "limits, not drawn" for (label,), part in out.group_by("curve", maintain_order=True)]


def _beyond(column: str, lim: tuple[float, float]) -> pl.Expr:
    return (pl.col(column) < lim[0]) | (pl.col(column) > lim[1])


def within_limits(data: pl.DataFrame, column: str, lim: tuple[float, float] | None
                  ) -> pl.DataFrame:
    """``data`` (``curve``, ``batch_size``, ``column``, optionally ``segment``) with a
    ``within`` column, false for a point beyond fixed limits, and each curve's line broken
    where such a point lies.

    The axis is padded past its limits (so that a marker on one is whole), so a chart
    draws only the rows ``within`` them (:data:`WITHIN`); the others stay in its data,
    as the figure's numbers, and :func:`clipped_notes` names them. Applied twice (x, then
    y limits), a point is within if it is within both.

    >>> d = pl.DataFrame({"curve": ["a"] * 3, "batch_size": [1.0, 2.0, 4.0],
    ...                   "step": [1.0, 9.0, 2.0]})
    >>> out = within_limits(d, "step", (0.5, 4.0))
    >>> out["within"].to_list(), out.filter("within")["segment"].to_list()
    ([True, False, True], ['a 0', 'a 1'])
    """
    if "segment" not in data.columns:
        data = data.with_columns(pl.col("curve").cast(pl.String).alias("segment"))
    if "within" not in data.columns:
        data = data.with_columns(pl.lit(True).alias("within"))
    if lim is None:
        return data
    parts = []
    for _, part in data.group_by("curve", maintain_order=True):
        beyond = _beyond(column, lim).fill_null(False)
        part = part.sort("batch_size").with_columns(
            (pl.col("segment") + " " + beyond.cast(pl.Int64).cum_sum().cast(pl.String))
            .alias("segment"), (pl.col("within") & ~beyond).alias("within"))
        parts.append(part)
    return pl.concat(parts) if parts else data


WITHIN: Spec = {"filter": "datum.within"}
"""The transform that draws only the rows :func:`within_limits` keeps."""


def steps_chart(
    curves: Sequence[tuple[str, pl.DataFrame]],
    *,
    title: Title,
    scaling_label: str | None = None,
    normalize_at: int | None = None,
    anchors: Mapping[str, int] | None = None,
    ylim: tuple[float, float] | None = None,
    fit: RegimeFit | None = None,
    critical: CriticalBatchFit | None = None,
    notes: Sequence[str] = (),
    legend: LegendOrient | None = None,
    legend_size: float = 8,
    select: str | None = None,
    studies: Mapping[str, Sequence[float]] | None = None,
    keyed: bool | None = None,
    width: float = 200,
    height: float = 175,
) -> Spec:
    """Steps to result against batch size, log2 × log2.

    ``curves`` are (label, table with ``batch_size`` and ``step``). The curve named
    ``scaling_label`` gets the black dashed perfect-scaling line, drawn at its own batch
    sizes (a curve of one point has none to draw, and the chart says so). ``normalize_at``
    divides each curve by its steps at that batch size, or at the batch size ``anchors``
    names for it (a curve without a point at ``normalize_at``). ``studies`` (label → the
    batch sizes its workload has) breaks a line where a batch size did not reach the goal
    and says so (:func:`broken_lines`). Points beyond a fixed ``ylim`` are named in a note.
    ``fit`` overlays a regime fit of the curve ``scaling_label`` (the only curve, or the one
    selected): the fitted line and the shaded regimes the fitted model has, labelled as
    fits, with legend entries for the data and the perfect-scaling line; ``critical`` adds
    the critical-batch-size curve. With ``select`` (the selector's name, e.g. "goal"), one
    curve shows at a time, chosen in a drop-down (``scaling_label`` first), each with its
    own perfect-scaling line. ``notes`` are lines written under the title: what is missing
    from the chart and why. ``keyed``: whether the curves get a legend (default: when there
    are several, or notes).
    """
    anchors = dict(anchors or {})
    notes = list(notes)
    frames = []
    for label, table in curves:
        t = table.select(pl.col("batch_size").cast(pl.Float64), pl.col("step").cast(pl.Float64))
        if normalize_at is not None:
            at = t.filter(pl.col("batch_size") == anchors.get(label, normalize_at))["step"]
            t = t.with_columns(pl.col("step") / at[0])
        frames.append(t.with_columns(pl.lit(label).alias("curve")))
    data = pl.concat(frames) if frames else pl.DataFrame(
        schema={"batch_size": pl.Float64, "step": pl.Float64, "curve": pl.String})
    data, missing = broken_lines(data, studies)
    notes += missing + clipped_notes(data, "step", ylim)
    labels = [label for label, _ in curves]
    line = None
    scaled = labels if select is not None else (
        [scaling_label] if scaling_label in labels else [])
    lines = []
    for label in scaled:
        ref = data.filter(pl.col("curve") == label).sort("batch_size")
        if ref.height == 1 and select is None:
            notes.append(f"{label}: one batch size reaches the goal, so there is no "
                         "perfect-scaling line to draw")
        if ref.height:
            b0, s0 = ref["batch_size"][0], ref["step"][0]
            anchor = (anchors.get(label, normalize_at) / ref["batch_size"]
                      if normalize_at is not None else s0 * b0 / ref["batch_size"])
            lines.append(ref.select("batch_size", anchor.alias("step"), "curve",
                                    pl.lit("perfect scaling").alias("line")))
    if lines:
        line = pl.concat(lines)
    data = within_limits(data, "step", ylim)
    ys = data.filter("within")["step"].to_list() + ([] if line is None else line["step"].to_list())
    if fit is not None:
        ys += [float(v) for v in fit.predict(fit.batch_sizes)]
    x_scale, x_axis = log2_axis("Batch Size", data["batch_size"].to_list(), length=width)
    y_title = ("Steps" if normalize_at is None
               else f"Steps / (Steps at B={int(normalize_at)})")
    y_scale, y_axis = log2_axis(y_title, ys, ylim, length=height, orient="y")
    # A panel of several curves keeps its legend when only one is left to draw: the line
    # must still say which it is, and the note says where the others went. With a fit,
    # the data and the perfect-scaling line are keyed beside the fitted curves.
    # one curve that is the panel's only one: its title names it, the notes need not
    alone = select is None and keyed is not True and len(labels) == 1
    if keyed is None:
        keyed = len(curves) > 1 or bool(notes)
    keyed = keyed or fit is not None
    name = _param_name(select) if select is not None else None
    keys = _curve_legend(legend, legend_size) if keyed else None
    if keys is not None and name is not None:
        # one curve shows at a time: the legend keys that one, not every choice
        keys["values"] = {"expr": f"[{name}]"}
    color = channel("curve:N", sort=labels, title=None,
                    scale={"domain": labels, "range": series_colors(labels)}, legend=keys)
    x = channel("batch_size:Q", scale=x_scale, axis=x_axis)
    y = channel("step:Q", scale=y_scale, axis=y_axis)
    datasets: Datasets = {}
    layers: list[Spec] = []
    if fit is not None:
        # With a drop-down, the fit (made at the main goal) shows with that goal only.
        shown = (None if name is None else
                 [{"filter": f"{name} === "
                   f"{'null' if scaling_label is None else vega_string(scaling_label)}"}])
        layers += _fit_layers(fit, critical, x_scale, y_scale, datasets, shown)
    clip = ylim is not None  # fixed limits: keep marks inside the plot
    curve_layer: Spec = {
        "data": dataset(data, datasets),
        "mark": {"type": "line", "clip": clip, "point": _TRIANGLES},
        "encoding": {"x": x, "y": y, "color": color, "detail": channel("segment:N"),
                     "tooltip": _tooltips("curve:N", "batch_size:Q", "step:Q")}}
    if ylim is not None:  # what lies beyond the limits is noted, not drawn
        curve_layer["transform"] = [WITHIN]
    line_layer: Spec | None = None if line is None else {
        "data": dataset(line, datasets),
        "mark": {"type": "line", "color": "black", "strokeDash": [5, 4], "strokeWidth": 1,
                 "clip": clip},
        "encoding": {"x": x, "y": y}}
    if line_layer is not None and fit is not None:
        line_layer["encoding"]["strokeDash"] = channel(
            "line:N", title=None, scale={"domain": ["perfect scaling"], "range": [[5, 4]]},
            legend={**_legend(legend, legend_size), "symbolType": "stroke",
                    "symbolStrokeColor": "black"})
    params = None
    if name is not None and labels:
        params = [_select(name, scaling_label or labels[0], labels, f"{select} ")]
        curve_layer["transform"] = [*curve_layer.get("transform", []), *_only("curve", name)]
        if line_layer is not None:
            line_layer["transform"] = _only("curve", name)
    layers.append(curve_layer)
    if line_layer is not None:
        layers.append(line_layer)
    if alone:
        notes = _unlabelled(notes, labels)
    if notes and data.is_empty():
        layers.append(note_layer(notes, datasets, empty=True))
    return _layers(layers, datasets, title=title, notes=notes, width=width, height=height,
                   resolve=_INDEPENDENT_COLOR, params=params)


def recolor(panels: Sequence[Spec]) -> None:
    """Give each series one colour across the ``panels`` of a figure, the one it has in
    every other figure (:func:`curvekit.plotting.colors.assign`).

    A series keeps its colour in every panel, the curves of one panel differ (a series
    whose own colour a neighbour drawn before it has takes the next free one), the fixed
    colours of the heuristic lines are kept, and a figure of one curve per panel draws
    them all in the first colour, as the paper does.
    """
    channels = []
    for panel in panels:
        for layer in panel.get("layer", []):
            enc = layer.get("encoding", {}).get("color")
            scale = enc.get("scale") if isinstance(enc, dict) else None
            if not isinstance(scale, dict) or enc.get("field") != "curve" or \
                    not isinstance(scale.get("domain"), list) or "range" not in scale:
                continue
            channels.append(scale)
    neighbours: dict[str, set[str]] = {}
    for scale in channels:
        labels = [str(label) for label in scale["domain"] if label not in HEURISTIC_COLORS]
        for label in labels:
            neighbours.setdefault(label, set()).update(x for x in labels if x != label)
    order = list(neighbours)
    colors = dict(zip(order, assign(order, neighbours=neighbours), strict=True))
    for scale in channels:
        scale["range"] = [HEURISTIC_COLORS.get(str(label), colors.get(str(label), "black"))
                          for label in scale["domain"]]


def align_titles(row: Sequence[Spec]) -> None:
    """Give the panels of one grid row the same number of title and note lines (blank
    lines added under the shorter ones), so that their plots stay aligned."""

    def lines(title: Any) -> tuple[int, int]:
        if not isinstance(title, dict):
            return 1, 0
        text, sub = title.get("text", ""), title.get("subtitle") or []
        return (len(text) if isinstance(text, list) else 1,
                len(sub) if isinstance(sub, list) else 1)

    counts = [lines(p.get("title")) for p in row]
    most = max((t + s for t, s in counts), default=0)
    for panel, (t, s) in zip(row, counts, strict=True):
        if t + s == most:
            continue
        title = panel.get("title")
        props: dict[str, Any] = dict(title) if isinstance(title, dict) else {"text": title}
        sub = props.get("subtitle") or []
        props["subtitle"] = [*([sub] if isinstance(sub, str) else sub), *[" "] * (most - t - s)]
        props.setdefault("subtitleFontSize", TEXT["note"])
        panel["title"] = props


def grouped(notes: Sequence[str]) -> list[str]:
    """Notes of the form ``label: reason`` with one line per reason, listing the labels.

    >>> grouped(["10k steps: no study ran the budget", "20k steps: no study ran the budget"])
    ['10k steps, 20k steps: no study ran the budget']
    """
    reasons: dict[str, list[str]] = {}
    for note in notes:
        label, sep, reason = note.partition(": ")
        if sep and ": " not in reason:
            reasons.setdefault(reason, []).append(label)
        else:
            reasons.setdefault(note, [])
    return [f"{', '.join(labels)}: {reason}" if labels else reason
            for reason, labels in reasons.items()]


def noted(title: Title, notes: Sequence[str]) -> Title:
    """``title`` with ``notes`` (what the panel lacks, and why) as its red subtitle.

    >>> title = noted("Figure", ["a: no point at B=64; normalized at B=128"])
    >>> " | ".join(title["subtitle"])
    'a: no point at B=64; normalized at B=128'
    """
    if not notes:
        return title
    base = dict(title) if isinstance(title, dict) else {"text": title}
    return {**base, "subtitle": grouped(notes), "subtitleColor": "#b00000",
            "subtitleFontSize": TEXT["note"]}


def note_layer(notes: Sequence[str], datasets: Datasets, *, empty: bool = False) -> Spec:
    """Text inside the plot saying what is missing from it: at its centre when nothing
    else is drawn, else along its bottom edge."""
    lines = ["Nothing to draw:", *grouped(notes)] if empty else grouped(notes)
    rows = pl.DataFrame({"note": ["\n".join(lines)]})  # one row: the text is drawn once
    size = TEXT["note"]
    # placed in data-free units: the panel's centre (an empty panel has no scales to use)
    return {"data": dataset(rows, datasets),
            "mark": {"type": "text", "fontSize": size, "color": "#b00000",
                     "lineHeight": size + 3},
            "encoding": {"text": {"value": lines}}}


def _param_name(label: str) -> str:
    """A Vega expression name for a selector labelled ``label``."""
    return "select_" + "".join(c if c.isascii() and c.isalnum() else "_" for c in label)


def _critical_label(critical: CriticalBatchFit) -> str:
    """The critical-batch curve's legend entry: which estimate it draws (``docs/fits.md``).

    The bias-corrected law lies below the measured best trials by their finite-trial bias.
    """
    if critical.plain is None:
        return f"critical batch fit (B_crit ≈ {critical.b_crit:,.0f})"
    return (f"critical batch law, bias-corrected (B_crit ≈ {critical.b_crit:,.0f}; "
            f"plain fit {critical.plain.b_crit:,.0f})")


def _fit_layers(fit: RegimeFit, critical: CriticalBatchFit | None, x_scale: Spec,
                y_scale: Spec, datasets: Datasets, shown: list[Spec] | None = None
                ) -> list[Spec]:
    """Shaded regimes, the fitted line and the critical-batch curve of a fit.

    The legend lists the regimes the chosen model has, in its order, under the model's
    name; the two lines are keyed by a second legend. ``shown`` filters every layer (a
    drop-down shows them with one curve only).
    """
    import numpy as np

    b = fit.batch_sizes
    lo, hi = float(b.min()), float(b.max())
    edges = [lo, *fit.breakpoints, hi]
    names = [f"{REGIME_LABELS[s]} (fit)" for s in fit.segments]
    bands = pl.DataFrame({"start": edges[:-1], "end": edges[1:], "regime": names})
    colors = [REGIME_COLORS[REGIME_LABELS[s]] for s in fit.segments]
    shade: Spec = {"data": dataset(bands, datasets),
                   "mark": {"type": "rect", "opacity": 0.12},
             "encoding": {
                 "x": channel("start:Q", scale=x_scale), "x2": {"field": "end"},
                 "color": channel("regime:N", scale={"domain": names, "range": colors},
                                  title=f"Regimes (fit: {fit.model.replace('+', ' + ')})",
                                  legend={"orient": "bottom", "titleLimit": 0,
                                          "direction": "vertical",
                                          "labelLimit": 0})}}
    grid = np.exp2(np.linspace(math.log2(lo), math.log2(hi), 64))
    lines = [pl.DataFrame({"batch_size": grid, "step": fit.predict(grid),
                           "fit": "regime fit"})]
    keys, strokes, dashes = ["regime fit"], ["#c44e52"], [[1, 0]]
    if critical is not None:
        lines.append(pl.DataFrame({"batch_size": grid, "step": critical.predict(grid),
                                   "fit": _critical_label(critical)}))
        keys.append(lines[-1]["fit"][0])
        strokes.append("#8172b3")
        dashes.append([2, 2])
    fitted: Spec = {"data": dataset(pl.concat(lines), datasets),
              "mark": {"type": "line", "strokeWidth": 1.5, "opacity": 0.9, "clip": True},
              "encoding": {"x": channel("batch_size:Q", scale=x_scale),
                           "y": channel("step:Q", scale=y_scale),
                           "stroke": channel("fit:N", scale={"domain": keys, "range": strokes},
                                             title="Fitted curves",
                                             legend={"orient": "bottom", "labelLimit": 0,
                                                     "direction": "vertical"}),
                           "strokeDash": channel("fit:N", scale={"domain": keys,
                                                                 "range": dashes},
                                                 legend=None)}}
    if shown is not None:
        shade["transform"] = fitted["transform"] = shown
    return [shade, fitted]


HEURISTIC_COLORS = {"Linear Heuristic": "black", "Square Root Heuristic": "#55a868"}
"""The heuristic lines' fixed colours (black dashed, green dash-dot)."""
_HEURISTIC_DASHES = {"Linear Heuristic": [5.0, 4.0], "Square Root Heuristic": [6.0, 3.0, 1.0, 3.0]}


def metaparameter_chart(
    curves: Sequence[tuple[str, pl.DataFrame]],
    *,
    title: Title,
    y_title: str,
    heuristics: bool = True,
    y_base: int = 2,
    notes: Sequence[str] = (),
    studies: Mapping[str, Sequence[float]] | None = None,
    legend: LegendOrient | None = None,
    legend_size: float = 8,
    width: float = 200,
    height: float = 175,
) -> Spec:
    """A winning trial's metaparameter against batch size, x log2, y log2 (``y_base`` 10:
    log10, as for 1 − momentum).

    ``curves`` are (label, table with ``batch_size`` and ``value``). With ``heuristics``,
    the linear (y0·B/B0, black dashed) and square-root (y0·√(B/B0), green dash-dot) lines,
    anchored at each curve's smallest batch size, drawn at its batch sizes. ``studies``
    breaks a line where a batch size did not reach the goal, as :func:`steps_chart` does.
    """
    notes = list(notes)
    frames = [t.select(pl.col("batch_size").cast(pl.Float64), pl.col("value").cast(pl.Float64))
              .with_columns(pl.lit(label).alias("curve")) for label, t in curves]
    data = pl.concat(frames) if frames else pl.DataFrame(
        schema={"batch_size": pl.Float64, "value": pl.Float64, "curve": pl.String})
    data, missing = broken_lines(data, studies)
    notes += missing
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
    x_scale, x_axis = log2_axis("Batch Size", data["batch_size"].to_list(), length=width)
    if y_base == 10:
        y_scale, y_axis = log10_axis(y_title, log10_domain(ys, height), length=height,
                                     orient="y")
    else:
        y_scale, y_axis = log2_axis(y_title, ys, length=height, orient="y")
    labels = [label for label, _ in curves]
    domain = [*labels, *(list(HEURISTIC_COLORS) if guides is not None else [])]
    color = channel("curve:N", scale={"domain": domain,
                                      "range": series_colors(domain, HEURISTIC_COLORS)},
                    title=None, legend=_curve_legend(
                        legend, legend_size, _HEURISTIC_DASHES if guides is not None else None))
    x = channel("batch_size:Q", scale=x_scale, axis=x_axis)
    y = channel("value:Q", scale=y_scale, axis=y_axis)
    datasets: Datasets = {}
    layers: list[Spec] = [{
        "data": dataset(data, datasets), "mark": {"type": "line", "point": _TRIANGLES},
        "encoding": {"x": x, "y": y, "color": color, "detail": channel("segment:N"),
                     "tooltip": _tooltips("curve:N", "batch_size:Q", "value:Q")}}]
    if guides is not None:
        dash = channel("curve:N", scale={"domain": list(_HEURISTIC_DASHES),
                                         "range": list(_HEURISTIC_DASHES.values())},
                       legend=None)
        layers.append({"data": dataset(guides, datasets),
                       "mark": {"type": "line", "strokeWidth": 1},
                       "encoding": {"x": x, "y": y, "color": color, "strokeDash": dash,
                                    "detail": channel("curve:N")}})
    return _layers(layers, datasets, title=title, notes=_unlabelled(notes, labels),
                   width=width, height=height)


def best_chart(
    curves: Sequence[tuple[str, pl.DataFrame]],
    *,
    title: Title,
    y_title: str,
    goal_line: float | None = None,
    goal_label: str = "Figure 1 goal",
    xlim: tuple[float, float] | None = None,
    ylim: tuple[float, float] | None = None,
    notes: Sequence[str] = (),
    legend: LegendOrient | None = None,
    legend_size: float = 8,
    width: float = 200,
    height: float = 175,
) -> Spec:
    """Best value per batch size: x log2, y linear; optionally a dotted goal line.

    Without fixed limits, the y axis spans the values and the goal, padded so that no
    marker and no goal line lies on the frame: the goal line is always drawn, and the
    axis does not zoom into noise far from it. ``legend`` places the legend inside the
    plot (``top-right``, ``top-left``, ...; default: where it covers the least data).
    """
    notes = list(notes)
    frames = [t.select(pl.col("batch_size").cast(pl.Float64), pl.col("value").cast(pl.Float64))
              .with_columns(pl.lit(label).alias("curve")) for label, t in curves]
    data = pl.concat(frames) if frames else pl.DataFrame(
        schema={"batch_size": pl.Float64, "value": pl.Float64, "curve": pl.String})
    x_scale, x_axis = log2_axis("Batch Size", data["batch_size"].to_list(), xlim,
                                length=width)
    values = data["value"].to_list() + ([] if goal_line is None else [goal_line])
    # fixed limits are padded too, so that a marker on one is whole
    y_domain = padded_linear_domain(list(ylim) if ylim else values, height)
    y_scale: Spec = {"zero": False, "domain": list(y_domain), "nice": False}
    notes += clipped_notes(data, "batch_size", xlim, "x") + clipped_notes(data, "value", ylim)
    data = within_limits(within_limits(data, "batch_size", xlim), "value", ylim)
    labels = [label for label, _ in curves]
    color = channel("curve:N", sort=labels, title=None,
                    scale={"domain": labels, "range": series_colors(labels)},
                    legend=_curve_legend(legend, legend_size) if len(curves) > 1 else None)
    datasets: Datasets = {}
    layers: list[Spec] = [{
        "data": dataset(data, datasets),
        "mark": {"type": "line", "clip": xlim is not None or ylim is not None,
                 "point": _TRIANGLES},
        **({"transform": [WITHIN]} if xlim is not None or ylim is not None else {}),
        "encoding": {"x": channel("batch_size:Q", scale=x_scale, axis=x_axis),
                     "y": channel("value:Q", title=y_title, scale=y_scale,
                                  axis={"title": axis_title(y_title, height)}),
                     "color": color, "detail": channel("segment:N"),
                     "tooltip": _tooltips("curve:N", "batch_size:Q", "value:Q")}}]
    if goal_line is not None:
        rule = pl.DataFrame({"value": [goal_line], "label": [goal_label]})
        layers.append({
            "data": dataset(rule, datasets),
            "mark": {"type": "rule", "color": "grey", "strokeDash": [1, 2], "strokeWidth": 1,
                     "clip": True},
            "encoding": {"y": channel("value:Q", scale=y_scale),
                         "opacity": channel("label:N", title=None,
                                            scale={"domain": [goal_label], "range": [1]},
                                            legend={**_legend(legend, legend_size),
                                                    "symbolType": "stroke",
                                                    "symbolStrokeColor": "grey",
                                                    "symbolDash": [1, 2]})}})
    return _layers(layers, datasets, title=title, notes=notes, width=width, height=height,
                   resolve=_INDEPENDENT_COLOR)


OUTCOMES = ("Goal Achieved", "Goal Not Achieved", "Infeasible")
# A filled "x" (a polygon, so legends draw it like the scatter does) and a five-point star.
X_SHAPE = ("M-1,-0.75L-0.75,-1L0,-0.25L0.75,-1L1,-0.75L0.25,0L1,0.75L0.75,1L0,0.25"
           "L-0.75,1L-1,0.75L-0.25,0Z")
STAR_SHAPE = ("M0,-1L0.2245,-0.309L0.9511,-0.309L0.3633,0.118L0.5878,0.809L0,0.382"
              "L-0.5878,0.809L-0.3633,0.118L-0.9511,-0.309L-0.2245,-0.309Z")


def contour_lines(xlim: tuple[float, float], ylim: tuple[float, float],
                  levels: int = 10, *,
                  box: tuple[tuple[float, float], tuple[float, float]] | None = None
                  ) -> pl.DataFrame:
    """Lines of constant effective learning rate ``x / y`` across a log–log box.

    The levels are ``levels`` evenly spaced values of log10(x / y) strictly inside its range
    over the limits (the range a 50 × 50 log-spaced grid spans). In log–log coordinates
    each line is straight, so two end points clipped to the ``box`` (default: the limits;
    a plot padded past its limits passes its padded domain) draw it exactly.

    >>> lines = contour_lines((1e-4, 1e-1), (1e-4, 1e-1))
    >>> lines["level"].n_unique(), lines.height
    (10, 20)
    """
    (x0, x1), (y0, y1) = (map(math.log10, xlim)), (map(math.log10, ylim))
    lo, hi = x0 - y1, x1 - y0
    if box is not None:
        (x0, x1), (y0, y1) = (map(math.log10, box[0])), (map(math.log10, box[1]))
    rows: list[tuple[int, float, float]] = []
    step = (hi - lo) / (levels + 1)
    for i in range(levels):
        level = (i + 1) * step + lo
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


BEST_TRIAL = "Best Trial"
"""The legend entry of the winning trial's star."""


def scatter_outcomes(trials: pl.DataFrame, xlim: tuple[float, float] | None = None,
                     ylim: tuple[float, float] | None = None) -> set[str]:
    """The legend entries a scatter of ``trials`` draws: the outcomes of the trials it
    draws (those within ``xlim`` on learning rate and ``ylim`` on 1 − momentum, when
    given), and the star if the winner is among them.

    >>> t = pl.DataFrame({"learning_rate": [0.01, 0.5], "momentum": [0.9, 0.9],
    ...                   "outcome": ["Goal Not Achieved", "Goal Achieved"],
    ...                   "winner": [False, True]})
    >>> sorted(scatter_outcomes(t)), sorted(scatter_outcomes(t, (1e-4, 0.1)))
    (['Best Trial', 'Goal Achieved', 'Goal Not Achieved'], ['Goal Not Achieved'])
    """
    drawn = trials.filter(~_beyond("learning_rate", xlim).fill_null(False)) if xlim else trials
    momentum = drawn["momentum"].cast(pl.Float64)
    if ylim and bool(momentum.fill_null(0).ne(0).any()):
        one_minus = (1 - pl.col("momentum").cast(pl.Float64)).round(12)
        drawn = drawn.filter(~((one_minus < ylim[0]) | (one_minus > ylim[1])).fill_null(False))
    found = set(drawn["outcome"].to_list())
    return found | ({BEST_TRIAL} if drawn["winner"].any() else set())


def scatter_chart(
    trials: pl.DataFrame,
    *,
    title: Title,
    xlim: tuple[float, float] | None = None,
    ylim: tuple[float, float] | None = None,
    legend: LegendOrient | None = "bottom-right",
    legend_size: float = 8,
    select: Sequence[int] | None = None,
    outcomes: Collection[str] | None = None,
    width: float = 200,
    height: float = 175,
) -> Spec:
    """Learning rate against 1 − momentum, log10 × log10, one mark per trial.

    The legend lists ``outcomes`` (default: those the trials have, and the star if there
    is a winner); a figure passes the outcomes of all its panels so that they share it.

    With ``select`` (batch sizes; ``trials`` then has a ``batch_size`` column), one study
    shows at a time, chosen in a drop-down, on limits shared by all of them.

    ``trials`` has ``learning_rate``, ``momentum``, ``outcome`` (one of
    :data:`OUTCOMES`) and ``winner``. Goal achieved: blue circles; not achieved: red
    triangles; infeasible: black crosses; a yellow star on the winning trial (a legend
    entry of its own); ten black contours of constant effective learning rate.

    Trials without momentum (plain SGD: every momentum missing or 0) have no 1 − momentum
    to draw: the chart then shows learning rate against the outcome, one row per outcome.
    """
    momentum = trials["momentum"].cast(pl.Float64)
    with_momentum = momentum.drop_nulls().filter(momentum.drop_nulls() != 0).len() > 0
    data = trials.select(
        pl.col("learning_rate").cast(pl.Float64),
        # rounded so that 1 - 0.9 lands on 0.1, not a hair below it
        (1 - pl.col("momentum").cast(pl.Float64)).round(12).alias("one_minus_momentum"),
        "outcome", "winner", pl.col("trial_id"),
        *(["batch_size"] if select is not None else []))
    xlim = xlim or half_decade_limits(data["learning_rate"].to_list())
    # the limits are padded, so that a marker on one is whole; what lies beyond them is
    # left out, and said so
    x_scale, x_axis = log10_axis("Learning Rate", xlim, length=width, limits=True)
    x = channel("learning_rate:Q", scale=x_scale, axis=x_axis)
    beyond = _beyond("learning_rate", xlim)
    datasets: Datasets = {}
    layers: list[Spec] = []
    if with_momentum:
        ylim = ylim or half_decade_limits(data["one_minus_momentum"].to_list())
        y_scale, y_axis = log10_axis("1 - Momentum", ylim, length=height, orient="y",
                                     limits=True)
        y = channel("one_minus_momentum:Q", scale=y_scale, axis=y_axis)
        beyond = beyond | _beyond("one_minus_momentum", ylim)
        box = (x_scale["domain"][0], x_scale["domain"][1])
        layers.append({
            "description": f"{GUIDE}contours of constant effective learning rate",
            "data": dataset(contour_lines(xlim, ylim, box=(box, (y_scale["domain"][0],
                                                                y_scale["domain"][1]))),
                            datasets),
            "mark": {"type": "line", "color": "black", "opacity": 0.5, "strokeWidth": 0.8,
                     "clip": True},
            "encoding": {"x": channel("x:Q", scale=x_scale), "y": channel("y:Q", scale=y_scale),
                         "detail": channel("level:N")}})
    else:
        y = channel("outcome:N", title=None, sort=list(OUTCOMES),
                    scale={"domain": list(OUTCOMES)}, axis={"grid": False})
    # a trial beyond a limit stays in the data (the figure's numbers), is not drawn (the
    # axes are padded past the limits) and is counted in a note
    data = data.with_columns((~beyond.fill_null(False)).alias("within"))
    hidden = data.height - data["within"].sum()
    notes = ([f"{hidden} trial{'s' if hidden > 1 else ''} beyond the axes' limits, not "
              "drawn"] if hidden else [])
    keys = _legend(legend, legend_size) if legend else None
    if outcomes is None:
        outcomes = scatter_outcomes(trials, xlim, ylim if with_momentum else None)
    entries = [e for e in (*OUTCOMES, BEST_TRIAL) if e in outcomes]

    def by_outcome(values: list[Any], **properties: Any) -> Spec:
        styles = dict(zip((*OUTCOMES, BEST_TRIAL), values, strict=True))
        return channel("outcome:N", scale={"domain": entries,
                                           "range": [styles[e] for e in entries]},
                       **properties)

    color = by_outcome(["#4c72b0", "#c44e52", "black", "#f2d03b"], legend=keys, title=None)
    shape = by_outcome(["circle", "triangle-up", X_SHAPE, STAR_SHAPE], legend=keys, title=None)
    points: Spec = {
        "data": dataset(data, datasets), "mark": {"type": "point", "filled": True, "clip": True},
        "encoding": {
            "x": x, "y": y, "color": color, "shape": shape,
            "size": by_outcome([40, 40, 25, 300], legend=None),
            "opacity": by_outcome([1.0, 0.7, 0.7, 1.0], legend=None),
            "tooltip": _tooltips("trial_id:Q", "outcome:N", "learning_rate:Q",
                                 *(["one_minus_momentum:Q"] if with_momentum else []))}}
    # The star is the winner drawn again on top, as a "Best Trial" row: the shared scales
    # give it its legend entry beside the three outcomes.
    winners = data.filter(pl.col("winner")).with_columns(pl.lit(BEST_TRIAL).alias("outcome"),
                                                         pl.lit(OUTCOMES[0]).alias("row"))
    star: Spec = {
        "data": dataset(winners, datasets),
        "mark": {"type": "point", "filled": True, "stroke": "black", "strokeWidth": 0.5,
                 "size": 300, "opacity": 1, "clip": True},
        # without momentum, the winner's star sits on the Goal Achieved row
        "encoding": {"x": x, "y": y if with_momentum else {**y, "field": "row"},
                     "color": color, "shape": shape}}
    params = None
    points["transform"] = [WITHIN]
    if select:
        params = [_select("select_batch_size", int(select[0]), [int(b) for b in select],
                          "batch size ")]
        points["transform"] += _only("batch_size", "select_batch_size")
    star["transform"] = points["transform"]
    return _layers([*layers, points, star], datasets, title=title, width=width,
                   height=height, params=params, notes=notes)


def search_space_chart(
    winners: pl.DataFrame,
    band: pl.DataFrame,
    *,
    title: Title,
    y_title: str = "Learning Rate",
    studies: Sequence[float] | None = None,
    width: float = 200,
    height: float = 175,
) -> Spec:
    """The winning learning rate per batch size inside the searched range, x log2, y log10.

    ``winners`` has ``batch_size`` and ``value``; ``band`` has ``batch_size``, ``low`` and
    ``high``. A non-positive ``low`` is drawn at the axis floor. ``studies`` (the batch
    sizes the workload has) breaks the line where a batch size did not reach the goal, and
    the chart says which (:func:`broken_lines`).
    """
    positive = [v for v in [*winners["value"].to_list(), *band["low"].to_list(),
                            *band["high"].to_list()] if v is not None and v > 0]
    floor = 10.0 ** math.floor(math.log10(min(positive))) if positive else 1e-6
    band = band.with_columns(pl.when(pl.col("low") > 0).then(pl.col("low"))
                             .otherwise(floor).alias("low"),
                             pl.lit("Search Space").alias("series"))
    xs = [*winners["batch_size"].to_list(), *band["batch_size"].to_list()]
    x_scale, x_axis = log2_axis("Batch Size", xs, length=width)
    x = channel("batch_size:Q", scale=x_scale, axis=x_axis)
    top = 10.0 ** math.ceil(math.log10(max(positive))) if positive else 1.0
    y_scale, y_axis = log10_axis(y_title, padded_log_domain([floor, top], height),
                                 length=height, orient="y")
    series = ["Optimal Learning Rate", "Search Space"]
    is_band = "datum.label === 'Search Space'"
    # one legend, each entry drawn as its mark is: the curve a line with a triangle in
    # its blue, the band a grey square
    keys = {**_legend(None, 8), "symbolStrokeWidth": 1.5, "symbolOpacity": 1,
            "symbolType": {"expr": f"{is_band} ? 'square' : '{LINE_WITH_TRIANGLE}'"},
            "symbolFillColor": {"expr": f"{is_band} ? 'rgba(128,128,128,0.3)' : "
                                        f"'{PALETTE[0]}'"},
            "symbolStrokeColor": {"expr": f"{is_band} ? 'grey' : '{PALETTE[0]}'"}}
    color = channel("series:N", scale={"domain": series, "range": [PALETTE[0], "grey"]},
                    title=None, legend=keys)
    datasets: Datasets = {}
    area = {"data": dataset(band, datasets),
            "mark": {"type": "area", "opacity": 0.2, "stroke": "grey", "strokeWidth": 0.5},
            "encoding": {"x": x, "y": channel("low:Q", scale=y_scale, axis=y_axis),
                         "y2": {"field": "high"}, "color": color}}
    winners, notes = broken_lines(
        winners.select(pl.col("batch_size").cast(pl.Float64), "value")
        .with_columns(pl.lit("Optimal Learning Rate").alias("curve")),
        None if studies is None else {"Optimal Learning Rate": studies})
    winners = winners.with_columns(pl.lit("Optimal Learning Rate").alias("series"))
    line = {"data": dataset(winners, datasets), "mark": {"type": "line", "point": _TRIANGLES},
            "encoding": {"x": x, "y": channel("value:Q", scale=y_scale), "color": color,
                         "detail": channel("segment:N"),
                         "tooltip": _tooltips("batch_size:Q", "value:Q")}}
    return _layers([area, line], datasets, title=title, width=width, height=height,
                   notes=_unlabelled(notes, ["Optimal Learning Rate"]))
