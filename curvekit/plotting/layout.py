"""Legibility rules every chart follows: font sizes, tick spacing, title wrapping.

The builders choose ticks and wrap titles here, from the panel's size in pixels, so that a
figure reads the same at any number of panels: tick labels never overlap, text is never
smaller than :data:`MIN_FONT`, and a long panel title breaks into lines instead of running
into its neighbour. Text widths are estimated (``font size × characters × 0.6``, a little
wider than the average glyph of the sans-serif font Vega draws with), so the checks err
toward more room.

Examples
--------
>>> text_width("2¹⁰", 10)
18.0
>>> ticks = [2.0**k for k in range(0, 21)]
>>> spaced_ticks(ticks, 150, "x", lambda v: power_text(2, v))[:3]
[1.0, 8.0, 64.0]
>>> power_text(2, 1024.0), power_text(10, 1e-4)
('2¹⁰', '10⁻⁴')
>>> padded_log_domain([16.0, 256.0], 200)
(14.182962020497946, 288.7972197965592)
>>> wrap("imagenet/resnet_50/nesterov_momentum, goal 0.25", 130, 11)
['imagenet/resnet_50/', 'nesterov_momentum,', 'goal 0.25']
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import Any, Literal

__all__ = [
    "CONFIG",
    "EDGE_PAD",
    "GUIDE",
    "INSIDE",
    "LABEL_GAP",
    "LINE_WITH_TRIANGLE",
    "MIN_FONT",
    "OUTSIDE",
    "PALETTE",
    "TEXT",
    "TITLE_OVERHANG",
    "data_points",
    "fits",
    "fits_inside",
    "free_corner",
    "inside",
    "legend_box",
    "legend_corner",
    "legend_overlaps",
    "outside",
    "padded_linear_domain",
    "padded_log_domain",
    "place_legends",
    "power_label_expr",
    "power_text",
    "spaced_ticks",
    "text_width",
    "wrap",
]

TEXT = {"panel_title": 11.0, "figure_title": 14.0, "axis_title": 10.0, "tick_label": 9.0,
        "legend_label": 9.0, "note": 9.0}
"""The font sizes (px at scale 1, i.e. points at 72 dpi) the charts use."""

MIN_FONT = {"panel_title": 10.0, "axis_title": 9.0, "tick_label": 8.0, "legend_label": 8.0,
            "note": 8.0}
"""The smallest font size each kind of text may have at a figure's default size."""

TITLE_OVERHANG = 40.0
"""Pixels a panel title may run past its plot's width (half on each side, over the gap
between panels)."""

LABEL_GAP = 4.0
"""Pixels kept free between two neighbouring tick labels."""

CONFIG: dict[str, Any] = {
    "axis": {"labelFontSize": TEXT["tick_label"], "titleFontSize": TEXT["axis_title"],
             "labelOverlap": "greedy"},
    "title": {"fontSize": TEXT["panel_title"]},
    "legend": {"labelFontSize": TEXT["legend_label"], "titleFontSize": TEXT["axis_title"],
               "labelLimit": 260, "titleLimit": 260},
}
"""Vega-Lite ``config`` of every chart: the sizes above, and legend titles and labels long
enough to read in full (Vega cuts them at 180 px by default)."""

_CHAR = 0.6  # average glyph width in em, rounded up

PALETTE = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3",
           "#8c8c8c", "#ccb974", "#64b5cd")
"""The series colours ("seaborn-deep"), given in order of a series' first appearance in a
figure: a series keeps its colour in every panel of the figure."""

EDGE_PAD = 8.0
"""Pixels kept between the outermost data point and each end of a data-driven axis, so that
a marker (a triangle of size 40 is about 7 px across) is never cut by the frame."""

LINE_WITH_TRIANGLE = "M-1,0L1,0M-0.45,0.35L0,-0.45L0.45,0.35Z"
"""The legend symbol of a "^-" curve: a line with a triangle on it, as the curve is drawn."""

_SUPERSCRIPT = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")


def power_text(base: int, value: float) -> str:
    """The tick label of ``value`` on a log axis of ``base``: the base with its exponent as
    a superscript (``2¹⁰``, ``10⁻⁴``), as :func:`power_label_expr` writes it in Vega."""
    return f"{base}{str(round(math.log(value, base))).translate(_SUPERSCRIPT)}"


def power_label_expr(base: int) -> str:
    """A Vega ``labelExpr`` writing each tick of a log axis of ``base`` as :func:`power_text`
    does: the exponent's digits and sign replaced by their superscripts.

    >>> power_label_expr(2)[:9]
    "'2' + rep"
    """
    text = f"toString(round(log(datum.value) / log({base})))"
    for plain, sup in zip("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻", strict=True):
        text = f"replace({text}, regexp('{plain}', 'g'), '{sup}')"
    return f"'{base}' + {text}"


def padded_log_domain(values: Sequence[float], length: float, *,
                      pad: float = EDGE_PAD) -> tuple[float, float]:
    """The log-scale domain of the positive finite ``values`` widened by ``pad`` pixels at
    each end of an axis ``length`` pixels long (a single value gets half an octave each
    side, so that it still has a neighbouring tick); ``(1, 2)`` when there is none."""
    finite = [v for v in values if v > 0 and math.isfinite(v)]
    if not finite:
        return 1.0, 2.0
    lo, hi = math.log(min(finite)), math.log(max(finite))
    span = hi - lo or math.log(2.0)
    margin = span * pad / max(length - 2 * pad, 1.0)
    if hi == lo:
        margin = max(margin, math.log(2.0) / 2)
    return math.exp(lo - margin), math.exp(hi + margin)


def padded_linear_domain(values: Sequence[float], length: float, *,
                         pad: float = EDGE_PAD) -> tuple[float, float]:
    """The linear domain of the finite ``values`` widened by ``pad`` pixels at each end.

    >>> padded_linear_domain([0.0, 1.0], 116)
    (-0.08, 1.08)
    """
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return 0.0, 1.0
    lo, hi = min(finite), max(finite)
    span = hi - lo or abs(hi) * 0.1 or 1.0
    margin = span * pad / max(length - 2 * pad, 1.0)
    return round(lo - margin, 12), round(hi + margin, 12)


def text_width(text: str, size: float) -> float:
    """Estimated width in pixels of ``text`` at font ``size``."""
    return len(text) * size * _CHAR


def spaced_ticks(candidates: Sequence[float], length: float, orient: Literal["x", "y"],
                 label: Callable[[float], str], *, size: float = TEXT["tick_label"],
                 domain: tuple[float, float] | None = None) -> list[float]:
    """Every k-th of the (log-spaced, ascending) ``candidates``, with the smallest k whose
    labels do not overlap on an axis ``length`` pixels long.

    Positions are log-linear over ``domain`` (default: the first and last candidate). On an
    x axis labels sit side by side (their widths must fit); on a y axis they are stacked
    (their heights must). Ticks are aligned on multiples of k, so that 2^0, 2^2, 2^4 ...
    rather than 2^1, 2^3 ... are kept whatever the data's range.
    """
    ticks = sorted(v for v in candidates if v > 0)
    if len(ticks) < 2:
        return ticks
    lo, hi = domain or (ticks[0], ticks[-1])
    span = math.log(hi) - math.log(lo) or 1.0
    exponents = [round(math.log(v) / math.log(ticks[1] / ticks[0])) for v in ticks]
    for k in range(1, len(ticks) + 1):
        kept = [v for v, e in zip(ticks, exponents, strict=True) if e % k == 0] or ticks[:1]
        if fits(kept, length, orient, label, size=size, domain=(lo, hi), span=span):
            return kept
    return ticks[:1]


def fits(ticks: Sequence[float], length: float, orient: Literal["x", "y"],
         label: Callable[[float], str], *, size: float, domain: tuple[float, float],
         span: float | None = None) -> bool:
    """Whether the labels of ``ticks`` leave :data:`LABEL_GAP` between neighbours."""
    lo, hi = domain
    span = span or (math.log(hi) - math.log(lo)) or 1.0
    position = [length * (math.log(v) - math.log(lo)) / span for v in ticks]
    extent = [text_width(label(v), size) if orient == "x" else size for v in ticks]
    return all(p1 - p0 >= (e0 + e1) / 2 + LABEL_GAP
               for p0, p1, e0, e1 in zip(position, position[1:], extent, extent[1:], strict=False))


def wrap(text: str, width: float, size: float) -> list[str]:
    """``text`` broken into lines no wider than ``width`` px at font ``size``, after a
    space, a slash or a comma that ends a word (a single word longer than that stays on its
    own line; the comma inside a number such as ``1,024`` is no break).

    >>> wrap("goal not reached at B=64, 128, 1,024 and 2,048", 60, 10)
    ['goal not', 'reached at', 'B=64, 128,', '1,024 and', '2,048']
    """
    limit = max(1, int(width / (size * _CHAR)))
    pieces = re.findall(r"(?:[^\s/,]|,(?=\d))*[/,]?\s*", text)
    lines: list[str] = []
    line = ""
    for piece in filter(None, pieces):
        if line and len((line + piece).rstrip()) > limit:
            lines.append(line.rstrip())
            line = ""
        line += piece
    if line.strip():
        lines.append(line.rstrip())
    return lines or [text]


# -- legends inside the plot, where they cover the least data --------------------------------

AUTO = "auto"
"""A legend ``orient`` the builders write for "inside the plot, at the corner that covers
the least data": :func:`place_legends` replaces it before the chart leaves the builder."""

CORNERS = ("top-right", "top-left", "bottom-left", "bottom-right")
"""The inside corners tried, in order of preference when two cover the same data."""

LEGEND_OFFSET = 4.0
"""Pixels between an inside legend and the plot's frame."""

OUTSIDE = "bottom"
"""Where a legend goes when no corner of its plot is free of data: under the plot (a
figure's shared legend goes under the whole grid instead)."""

GUIDE = "guide: "
"""The start of the ``description`` of a layer that draws a guide, not data (the scatters'
contours of constant effective learning rate): a legend may cover a guide."""


def _position(value: Any, scale: dict[str, Any], length: float, flip: bool) -> float | None:
    """Pixel position of ``value`` on a quantitative scale with a known domain."""
    domain = scale.get("domain")
    if not isinstance(value, int | float) or not isinstance(domain, list) or len(domain) != 2:
        return None
    lo, hi = float(domain[0]), float(domain[1])
    if scale.get("type") == "log":
        if value <= 0 or lo <= 0 or hi <= lo:
            return None
        frac = (math.log(value) - math.log(lo)) / (math.log(hi) - math.log(lo))
    else:
        if hi == lo:
            return None
        frac = (value - lo) / (hi - lo)
    return length * (1 - frac) if flip else length * frac


def _field(enc: Any) -> str | None:
    return enc.get("field") if isinstance(enc, dict) else None


def data_points(layers: Sequence[dict[str, Any]], datasets: dict[str, list[dict[str, Any]]],
                width: float, height: float) -> list[tuple[float, float]]:
    """Pixel positions of what the layers draw: every point, points along each line, and
    points along a horizontal rule (a goal line), for :func:`place_legends`."""
    scales: dict[str, dict[str, Any]] = {}
    for layer in layers:  # a layer may share its neighbour's scale without repeating it
        for name in ("x", "y"):
            enc = layer.get("encoding", {}).get(name)
            if isinstance(enc, dict) and isinstance(enc.get("scale"), dict) and \
                    "domain" in enc["scale"]:
                scales.setdefault(name, enc["scale"])
    points: list[tuple[float, float]] = []
    for layer in layers:
        if str(layer.get("description", "")).startswith(GUIDE):
            continue
        enc = layer.get("encoding", {})
        rows = datasets.get((layer.get("data") or {}).get("name", ""), [])
        fx, fy = _field(enc.get("x")), _field(enc.get("y"))
        mark = layer.get("mark")
        kind = mark.get("type") if isinstance(mark, dict) else mark
        if fx is None and fy is not None and kind == "rule":
            for row in rows:
                py = _position(row.get(fy), scales.get("y", {}), height, True)
                if py is not None:
                    points += [(width * i / 20, py) for i in range(21)]
            continue
        if fx is None or fy is None or "x" not in scales or "y" not in scales:
            continue
        group = _field(enc.get("detail")) or _field(enc.get("color")) or ""
        last: dict[Any, tuple[float, float]] = {}
        for row in sorted(rows, key=lambda r: (str(r.get(group)), r.get(fx) or 0)):
            if row.get("within") is False:  # beyond fixed limits: not drawn
                continue
            px = _position(row.get(fx), scales["x"], width, False)
            py = _position(row.get(fy), scales["y"], height, True)
            if px is None or py is None:
                continue
            key = row.get(group)
            if kind == "line" and key in last:  # the segment's inside, every ~5 px
                x0, y0 = last[key]
                steps = int(math.hypot(px - x0, py - y0) // 5)
                points += [(x0 + (px - x0) * i / (steps + 1), y0 + (py - y0) * i / (steps + 1))
                           for i in range(1, steps + 1)]
            last[key] = (px, py)
            points.append((px, py))
    return points


def legend_box(labels: Sequence[str], size: float) -> tuple[float, float]:
    """Estimated width and height in pixels of an inside legend of ``labels``."""
    widest = max((text_width(str(label), size) for label in labels), default=0.0)
    return widest + 16 + 8, len(labels) * (size + 4) + 8


def _covered(points: Sequence[tuple[float, float]], box: tuple[float, float], width: float,
             height: float, corner: str) -> int:
    """How many ``points`` a legend of size ``box`` at ``corner`` covers (within 4 px)."""
    w, h = box[0] + LEGEND_OFFSET, box[1] + LEGEND_OFFSET
    x0 = width - w if corner.endswith("right") else 0.0
    y0 = height - h if corner.startswith("bottom") else 0.0
    return sum(1 for px, py in points
               if x0 - 4 <= px <= x0 + w + 4 and y0 - 4 <= py <= y0 + h + 4)


def fits_inside(box: tuple[float, float], width: float, height: float) -> bool:
    """Whether a legend of size ``box`` fits inside a ``width`` × ``height`` plot at all."""
    return box[0] + LEGEND_OFFSET <= width and box[1] + LEGEND_OFFSET <= height


def free_corner(points: Sequence[tuple[float, float]], box: tuple[float, float],
                width: float, height: float, prefer: Sequence[str] = CORNERS) -> str | None:
    """The first corner (of ``prefer``, then the others) where a legend of size ``box``
    covers none of the ``points``, or None: a legend must then go outside the plot.

    >>> free_corner([(5.0, 5.0), (190.0, 5.0)], (40, 20), 200, 100)
    'bottom-left'
    >>> free_corner([(5.0, 5.0), (190.0, 5.0)], (250, 20), 200, 100) is None
    True
    """
    if not fits_inside(box, width, height):
        return None
    order = [*prefer, *(c for c in CORNERS if c not in prefer)]
    return next((c for c in order if _covered(points, box, width, height, c) == 0), None)


Legend = tuple[str, list[dict[str, Any]], tuple[float, float]]
"""One legend of a chart: its field, the legend properties of the channels that draw it
(a scatter's colour and shape share one), and its estimated size."""


def _inside_legends(spec: dict[str, Any], orients: Sequence[str]) -> list[Legend]:
    """The legends of a layered chart with one of ``orients``, one per field (Vega draws
    the channels of one field as one legend), in the order the layers give them."""
    layers = spec.get("layer", [])
    datasets = spec.get("datasets", {})
    fields: dict[str, tuple[list[dict[str, Any]], list[str], float]] = {}
    for layer in layers:
        rows = datasets.get((layer.get("data") or {}).get("name", ""), [])
        for enc in layer.get("encoding", {}).values():
            legend = enc.get("legend") if isinstance(enc, dict) else None
            if not isinstance(legend, dict) or legend.get("orient") not in orients:
                continue
            domain = (enc.get("scale") or {}).get("domain") or enc.get("sort")
            field = str(enc.get("field"))
            entries = domain if isinstance(domain, list) else list(
                dict.fromkeys(r.get(field) for r in rows))
            if isinstance(legend.get("values"), dict) and entries:
                # one entry at a time (the one chosen in a drop-down): room for the widest
                entries = [max(entries, key=lambda e: len(str(e)))]
            size = float(legend.get("labelFontSize", TEXT["legend_label"]))
            found, labels, largest = fields.get(field, ([], [], 0.0))
            fields[field] = ([*found, legend], list(dict.fromkeys([*labels, *map(str, entries)])),
                             max(largest, size))
    return [(field, found, legend_box(labels, size))
            for field, (found, labels, size) in fields.items()]


def _box_points(corner: str, box: tuple[float, float], width: float, height: float
                ) -> list[tuple[float, float]]:
    """Points filling a legend's box at ``corner`` (every 5 px), so that the next legend
    keeps clear of it."""
    w, h = box[0] + LEGEND_OFFSET, box[1] + LEGEND_OFFSET
    x0 = width - w if corner.endswith("right") else 0.0
    y0 = height - h if corner.startswith("bottom") else 0.0
    return [(x0 + i * 5.0, y0 + j * 5.0) for i in range(int(w // 5) + 1)
            for j in range(int(h // 5) + 1)]


def _corners(spec: dict[str, Any], datasets: dict[str, list[dict[str, Any]]],
             orients: Sequence[str]) -> list[tuple[Legend, str | None]]:
    """Each legend of a chart with a corner free of its data and of the legends placed
    before it (the corner it asks for first, each legend a corner of its own), or None."""
    width, height = float(spec.get("width", 200)), float(spec.get("height", 175))
    points = data_points(spec.get("layer", []), datasets, width, height)
    out: list[tuple[Legend, str | None]] = []
    used: list[str] = []
    for legend in _inside_legends({**spec, "datasets": datasets}, orients):
        asked = [str(a["orient"]) for a in legend[1] if a["orient"] in CORNERS]
        order = [c for c in [*asked[:1], *CORNERS] if c not in used]
        corner = free_corner(points, legend[2], width, height, order) if order else None
        if corner is not None and corner not in used:
            used.append(corner)
            points = [*points, *_box_points(corner, legend[2], width, height)]
        else:
            corner = None
        out.append((legend, corner))
    return out


def place_legends(spec: dict[str, Any]) -> None:
    """Put the legends of a layered chart where they cover no data: each inside the plot,
    at the corner it asks for (:data:`AUTO`: any) if that is free of data and of the
    legends placed before it, else at the first such corner, else :data:`OUTSIDE` the
    plot, under it. Legends the chart puts outside itself (``left`` ... ``bottom``) stay."""
    for (_, legends, _), corner in _corners(spec, spec.get("datasets", {}), (AUTO, *CORNERS)):
        for legend in legends:
            if corner is None:
                outside(legend)
            else:
                inside(legend, corner)


INSIDE = {"fillColor": "rgba(255,255,255,0.85)", "padding": 3, "strokeColor": "#ccc",
          "offset": LEGEND_OFFSET, "rowPadding": 2}
"""The frame of a legend inside a plot."""


def inside(legend: dict[str, Any], corner: str) -> None:
    """Put a legend inside its plot at ``corner``, in its frame."""
    legend.update({**INSIDE, "orient": corner})
    legend.pop("direction", None)


def outside(legend: dict[str, Any]) -> None:
    """Move an inside legend :data:`OUTSIDE` the plot, under it, without its frame."""
    legend["orient"] = OUTSIDE
    legend["direction"] = "vertical"
    for key in ("fillColor", "strokeColor", "offset"):
        legend.pop(key, None)


def legend_corner(spec: dict[str, Any], datasets: dict[str, list[dict[str, Any]]]
                  ) -> dict[str, str] | None:
    """The corner (by field) where each legend of a layered chart, wherever it is now,
    would cover none of its data nor another legend, or None if one has no such corner:
    a figure keeps a shared legend on a panel that has them, or draws it under the grid."""
    placed = _corners(spec, datasets, (AUTO, *CORNERS, OUTSIDE))
    if not placed or any(corner is None for _, corner in placed):
        return None
    return {field: str(corner) for (field, _, _), corner in placed}


def legend_overlaps(spec: dict[str, Any], datasets: dict[str, list[dict[str, Any]]]) -> int:
    """How many drawn points the inside legends of a layered chart cover where they are,
    and how many of them overlap another (0 for legends outside the plot): the rule
    :func:`place_legends` keeps is that this is always 0."""
    width, height = float(spec.get("width", 200)), float(spec.get("height", 175))
    points = data_points(spec.get("layer", []), datasets, width, height)
    covered = 0
    taken: list[str] = []
    for _, legends, box in _inside_legends({**spec, "datasets": datasets}, CORNERS):
        corner = str(legends[0]["orient"])
        if not fits_inside(box, width, height):
            covered += len(points) or 1
            continue
        covered += _covered(points, box, width, height, corner) + taken.count(corner)
        taken.append(corner)
        points = [*points, *_box_points(corner, box, width, height)]
    return covered
