"""Figures are data: a declarative description of each panel, rendered by a few builders.

A :class:`Figure` is a grid of :class:`Panel`; a panel is one chart kind (``steps``,
``metaparameter``, ``best``) over one or more :class:`Curve`; a curve is a label with the
:class:`~curvekit.selection.Selection` that produces its points (workload, metric, goal,
trial limit, statuses, budgets).

>>> fig = Figure(99, "demo", rows=1, cols=3, panels=(Panel("A", "steps", (
...     Curve(Selection("cifar_10/resnet_8/sgd", CLS, 0.3, trials=100)),),
...     scaling_label=""),))
>>> fig.size_px, fig.workloads()
((648, 189), ['cifar_10/resnet_8/sgd'])
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from curvekit.selection import Selection

if TYPE_CHECKING:
    from curvekit.plotting.builders import LegendOrient

__all__ = ["AP", "CE", "CLS", "PAPER_TRIALS", "RECONSTRUCTED_FROM", "Curve", "Figure", "Panel",
           "Selection"]

CLS = "val/classification_error"
CE = "val/cross_entropy_error"
AP = "val/average_precision"
PAPER_TRIALS = 100
"""Trials per study most of the paper's curves load (the first 100 by trial id)."""

Kind = Literal["steps", "metaparameter", "best", "scatter", "search_space"]


@dataclass(frozen=True)
class Curve:
    """One line of a panel: a label and the selection that produces its points.

    A ``selection`` without a goal means the paper's goal for the workload (resolved at
    render time, with its metric, direction and trial count) on steps, metaparameter and
    search-space panels. Its ``subset`` = (parameter, value) keeps only the loaded trials
    with that metaparameter value (label smoothing groups). ``fallback_metric`` is used,
    with a warning, when the workload has no ``selection.metric``. ``eligible`` applies the
    budget eligibility rule: a batch size is drawn only if its study ran at least the
    budget in steps. ``batch_size`` is the study a scatter shows.
    """

    selection: Selection
    label: str = ""
    fallback_metric: str | None = None
    eligible: bool = False
    batch_size: int | None = None

    @property
    def workload(self) -> str:
        """The workload the curve is drawn from."""
        return self.selection.workload


@dataclass(frozen=True)
class Panel:
    """One chart of a figure.

    ``kind``: ``steps`` (steps to result), ``metaparameter`` (a winning trial's
    metaparameter, column ``y``, with the linear and square-root heuristics if
    ``heuristics``), ``best`` (best value per batch size, with the first curve's goal as a
    dotted line if ``goal_line``), ``scatter`` (learning rate vs 1 − momentum of one study),
    ``search_space`` (the winning learning rate inside the searched range).
    ``scaling_label`` names the curve that gets the perfect-scaling line (``None``: none).
    ``normalize_at="common"`` normalizes at the smallest batch size every curve reaches.
    ``legend`` places the legend inside the plot (``top-left``, ``bottom-right``, ...;
    default: the corner where it covers the least data). ``y_base`` is the base of a
    metaparameter panel's log y axis (10 for 1 − momentum). ``goal_label`` is the goal
    line's legend entry (default: the goal with its metric).
    """

    title: str
    kind: Kind
    curves: tuple[Curve, ...]
    scaling_label: str | None = None
    normalize_at: int | Literal["common"] | None = None
    xlim: tuple[float, float] | None = None
    ylim: tuple[float, float] | None = None
    y: str = "effective_learning_rate"
    y_title: str = ""
    heuristics: bool = False
    goal_line: bool = False
    legend: LegendOrient | None = None
    legend_size: float = 8
    y_base: int = 2
    goal_label: str = ""


RECONSTRUCTED_FROM = 12
"""Figures from this number on are reconstructions: the paper's appendix figures, rebuilt
from the released data, not checked against the paper. Figures 1–11 follow the paper's
reproduction notebook."""


@dataclass(frozen=True)
class Figure:
    """A figure of the paper: a grid of panels, sized as the spec's §2 says.

    ``shared_limits``: scatter panels share half-decade limits computed over all of them.
    ``outer_axis_titles``: axis titles on the left column (y) and the bottom row (x) only,
    as in a grid of many panels on the same axes (Figure 23).
    A figure in parts (the paper's Figure 9: (a) above (b)) lists them in ``parts``, each a
    figure of its own with the same ``number``, its letter in ``part`` and its caption in
    ``title``; the whole figure's ``panels`` are the parts' panels, in order, and its
    ``rows`` the parts' rows together.

    >>> a = Figure(9, "fixed epoch budget", 2, 3, (), part="a")
    >>> a.name, a.reconstruction, Figure(14, "t", 3, 3, ()).source
    ('9a', False, "Reconstruction: not checked against the paper's Figure 14")
    """

    number: int
    title: str
    rows: int
    cols: int
    panels: tuple[Panel, ...]
    width_in: float = 9.0
    aspect: float = 8 / 7
    title_size: float | None = None
    shared_limits: bool = False
    parts: tuple[Figure, ...] = ()
    part: str = ""
    outer_axis_titles: bool = False

    @property
    def name(self) -> str:
        """The figure's name on the command line and in file names: ``9``, ``9a``."""
        return f"{self.number}{self.part}"

    @property
    def label(self) -> str:
        """How the figure is referred to in text: ``Figure 9``, ``Figure 9(a)``."""
        return f"Figure {self.number}" + (f"({self.part})" if self.part else "")

    @property
    def reconstruction(self) -> bool:
        """Whether the figure is a reconstruction, not checked against the paper."""
        return self.number >= RECONSTRUCTED_FROM

    @property
    def source(self) -> str:
        """Where the figure's definition comes from, in one line (drawn under its title)."""
        if self.reconstruction:
            return f"Reconstruction: not checked against the paper's Figure {self.number}"
        cells = [f'"Figure {p.name}"' for p in self.parts] or [f'"Figure {self.name}"']
        return (f"As in the paper's reproduction notebook (its {' and '.join(cells)} "
                f"{'cells' if len(cells) > 1 else 'cell'})")

    @property
    def size_px(self) -> tuple[int, int]:
        """Width and height at 72 dpi: W × rows·W/cols/aspect."""
        width = self.width_in * 72
        return round(width), round(self.rows * width / self.cols / self.aspect)

    def workloads(self) -> list[str]:
        """Every workload the figure draws, in order of first use."""
        seen: dict[str, None] = {}
        for panel in self.panels:
            for curve in panel.curves:
                seen.setdefault(curve.workload, None)
        return list(seen)
