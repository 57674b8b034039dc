"""One colour per series, in every figure, plot and report page.

A series (a model, a data set, an optimizer, a goal, a budget ...) is known by its label,
the name its legend gives it. The series the paper's figures compare have fixed colours,
in :data:`SERIES_COLORS`: FC-1024-1024-1024 is the same blue in Figures 3a, 3d, 16a and
16b, and the Transformer is the same blue whether it is called "Transformer" (Figure 3c),
"Base" (3f) or "LM1B, 3.9" (5c). Any other series gets a colour from its name
(:func:`name_color`, a hash: the same name, the same colour, in every chart and every
run). Colours come from one palette, :data:`~curvekit.plotting.layout.PALETTE`
("seaborn-deep").

Two series drawn together never share a colour: when a series' colour is taken by one
drawn before it in the same panel, it takes the palette's next free colour
(:func:`assign`). The table is made so that this never happens among the paper's series.
A series the table does not name, drawn alone (one curve per panel, as in Figure 1, or a
plot of one workload), is drawn in the palette's first colour, blue, as in the paper.

>>> series_color("FC-1024-1024-1024") == series_color("Base") == PALETTE[0]
True
>>> assign(["a", "b"]) == assign(["a", "b"])
True
>>> assign(["Simple CNN on MNIST"])
['#4c72b0']
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping, Sequence

from curvekit.plotting.layout import PALETTE

__all__ = ["SERIES_COLORS", "assign", "name_color", "series_color"]

_INDEX: dict[str, int] = {
    'goal classification error = 0.008': 0,
    'goal classification error = 0.01': 1,
    'goal classification error = 0.012': 2,
    'goal classification error = 0.014': 3,
    'goal classification error = 0.016': 4,
    'goal cross entropy = 3.8': 0,
    'goal cross entropy = 3.85': 1,
    'goal cross entropy = 3.9': 2,
    'goal cross entropy = 3.95': 3,
    'goal cross entropy = 4.0': 4,
    'goal cross entropy = 4.05': 5,
    'goal classification error = 0.25': 0,
    'goal classification error = 0.27': 1,
    'goal classification error = 0.29': 2,
    'goal classification error = 0.31': 3,
    'FC-1024-1024-1024': 0,
    'Simple CNN': 1,
    'ResNet-50': 0,
    'VGG-11': 1,
    'Transformer': 0,
    'LSTM': 1,
    'FC-1024': 1,
    'FC-128-128-128': 2,
    'FC-256-256-256': 3,
    'FC-512-512-512': 4,
    'FC-2048-2048-2048': 5,
    'Simple CNN Narrow': 0,
    'Simple CNN Wide': 2,
    'Wide': 1,
    'Base': 0,
    'Shallow': 2,
    'Narrow and Shallow': 3,
    'SGD': 0,
    'Momentum': 1,
    'Nesterov Momentum': 2,
    'MNIST, 0.01': 0,
    'Fashion MNIST, 0.1': 1,
    'ImageNet, 0.25': 0,
    'Open Images, 0.31': 1,
    'LM1B, 3.9': 0,
    'Common Crawl, 3.9': 1,
    '100% of images, 0.02': 0,
    '50% of images, 0.02': 1,
    '25% of images, 0.02': 2,
    '12.5% of images, 0.02': 3,
    '100% of images, 0.25': 0,
    '50% of images, 0.3': 1,
    '50% of classes, 0.3': 2,
    'Label Smoothing = 0.00': 0,
    'Label Smoothing = 0.01': 1,
    'Label Smoothing = 0.10': 2,
    '5k steps': 0,
    '10k steps': 1,
    '20k steps': 2,
    '50k steps': 3,
    '100k steps': 4,
    '200k steps': 5,
    '500k steps': 6,
    '1000k steps': 7,
    '2000k steps': 8,
    '5000k steps': 9,
    '10 epochs': 0,
    '20 epochs': 1,
    '50 epochs': 2,
    '100 epochs': 3,
    '200 epochs': 4,
    '500 epochs': 5,
    '1000 epochs': 6,
    '2000 epochs': 7,
    '5000 epochs': 8,
    '10000 epochs': 9,
    '0.2 epochs': 2,
    '0.5 epochs': 3,
    '1 epochs': 4,
    '2 epochs': 5,
    '5 epochs': 6,
    'goal 0.1': 0,
    'goal 0.13': 1,
    'goal 0.15': 2,
    'goal 0.3': 0,
    'goal 0.38': 1,
    'goal 0.45': 2,
    'goal 0.31': 0,
    'goal 0.28': 1,
    'goal 0.25': 2,
    'goal 3.9': 0,
    'goal 4.9': 1,
    'goal 5.9': 2,
    'goal 0.35': 0,
    'goal 0.44': 1,
    'goal 0.53': 2,
    'FC-1024-1024': 2,
    'FC-64-64-64': 1,
    'first 10 trials': 0,
    'first 20 trials': 1,
    'first 50 trials': 2,
    'first 100 trials': 3,
}

SERIES_COLORS: dict[str, str] = {label: PALETTE[i] for label, i in _INDEX.items()}
"""The colour of every series the paper's figures compare (the labels of their panels of
several curves), by label: no two series of one panel share a colour, and a model or data
set compared under two labels (ResNet-50 and "ImageNet, 0.25") has one colour."""


_NAMED = tuple(c for c in PALETTE if c != "#8c8c8c")
"""The colours a name may get: the palette but its grey, which reads as a guide line."""


def name_color(label: str) -> str:
    """The palette colour of a series no table names: from a hash of its name (CRC-32),
    the same in every process; never the palette's grey.

    >>> name_color("val/classification_error < 0.3") == name_color("val/classification_error < 0.3")
    True
    """
    return _NAMED[zlib.crc32(label.encode("utf-8")) % len(_NAMED)]


def series_color(label: str) -> str:
    """A series' own colour: the table's, else its name's."""
    return SERIES_COLORS.get(label) or name_color(label)


def assign(labels: Sequence[str], *, fixed: Mapping[str, str] | None = None,
           neighbours: Mapping[str, Iterable[str]] | None = None) -> list[str]:
    """The colour of each of ``labels``, drawn together (one chart, or one figure).

    ``fixed`` colours are kept (the heuristic lines'). The others take their own colour
    (:func:`series_color`), unless a series before them that shares a panel with them has
    it: then the palette's next colour that none of those has. ``neighbours`` says which
    series share a panel (default: all of ``labels`` do). A lone series, one that shares
    no panel with another (besides fixed ones), keeps its table colour, else is blue.

    >>> assign(["x", "Linear Heuristic"], fixed={"Linear Heuristic": "black"})
    ['#4c72b0', 'black']
    >>> colours = assign(["FC-1024", "FC-128-128-128", "FC-1024-1024-1024"])
    >>> colours == [SERIES_COLORS[s] for s in ("FC-1024", "FC-128-128-128", "FC-1024-1024-1024")]
    True
    """
    fixed = fixed or {}
    free = [label for label in dict.fromkeys(labels) if label not in fixed]
    near: dict[str, set[str]] = {label: set() for label in free}
    if neighbours is None:
        for label in free:
            near[label] = {other for other in free if other != label}
    else:
        for label in free:
            near[label] = {o for o in neighbours.get(label, ()) if o in near and o != label}
    chosen: dict[str, str] = {}
    for label in free:
        if not near[label]:
            chosen[label] = SERIES_COLORS.get(label, PALETTE[0])
            continue
        taken = {chosen[o] for o in near[label] if o in chosen}
        own = PALETTE.index(series_color(label))
        ring = [PALETTE[(own + k) % len(PALETTE)] for k in range(len(PALETTE))]
        chosen[label] = next((c for c in ring if c not in taken), ring[0])
    return [fixed[label] if label in fixed else chosen[label] for label in labels]
