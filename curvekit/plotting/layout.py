"""Legibility rules every chart follows: font sizes, tick spacing, title wrapping.

The builders choose ticks and wrap titles here, from the panel's size in pixels, so that a
figure reads the same at any number of panels: tick labels never overlap, text is never
smaller than :data:`MIN_FONT`, and a long panel title breaks into lines instead of running
into its neighbour. Text widths are estimated (``font size × characters × 0.6``, a little
wider than the average glyph of the sans-serif font Vega draws with), so the checks err
toward more room.

Examples
--------
>>> text_width("2^10", 10)
24.0
>>> ticks = [2.0**k for k in range(0, 21)]
>>> spaced_ticks(ticks, 150, "x", lambda v: f"2^{round(math.log2(v))}")[:3]
[1.0, 16.0, 256.0]
>>> wrap("imagenet/resnet_50/nesterov_momentum, goal 0.25", 130, 11)
['imagenet/resnet_50/', 'nesterov_momentum,', 'goal 0.25']
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import Any, Literal

__all__ = ["CONFIG", "LABEL_GAP", "MIN_FONT", "TEXT", "TITLE_OVERHANG", "fits", "spaced_ticks",
           "text_width", "wrap"]

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
    space, a slash or a comma (a single word longer than that stays on its own line)."""
    limit = max(1, int(width / (size * _CHAR)))
    pieces = re.findall(r"[^\s/,]*[/,]?\s*", text)
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
