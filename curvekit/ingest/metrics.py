"""Map logged metric names onto the release's ``<split>/<metric>`` convention.

The release names its metric columns ``train/cross_entropy_error``,
``val/classification_error``, ``test/...`` and ``val/average_precision``. Logging libraries
use names such as ``val_loss``, ``val_acc``, ``accuracy`` or ``loss/train``. A name is split
into words (at ``/ _ - . space``); a leading or trailing split word (``train``, ``training``,
``val``, ``valid``, ``validation``, ``eval``, ``dev``, ``test``) gives the split, a name with
no split word is a training metric; the remaining words name the metric:

=====================================================  ======================================
words                                                  column
=====================================================  ======================================
``loss``, ``ce``, ``xent``, ``nll``, ``cross entropy``  ``<split>/cross_entropy_error``
``error``, ``err``, ``error rate``, ``top1 error``      ``<split>/classification_error``
``acc``, ``accuracy``, ``top1``, ``categorical         ``<split>/classification_error`` as
accuracy``, ``sparse categorical accuracy``             1 - value
``ap``, ``average precision``                          ``<split>/average_precision``
=====================================================  ======================================

Anything else keeps its own name. An override ``old=new`` (``--map``, or the manifest's
``[metrics]`` table) wins over the defaults; ``old=1-new`` stores ``1 - value``; ``old=``
(nothing after ``=``) drops the column; ``old=step`` makes ``old`` the step column.

>>> target("val_acc"), target("loss"), target("Loss/Validation"), target("lr")
(('val/classification_error', True), ('train/cross_entropy_error', False), \
('val/cross_entropy_error', False), ('lr', False))
>>> target("val_acc", {"val_acc": "val/top1"})
('val/top1', False)
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

import polars as pl

from curvekit.errors import IngestError

__all__ = ["RESERVED", "MetricMap", "apply_map", "fold", "is_reserved", "parse_overrides",
           "target"]

SPLITS = {"train": "train", "training": "train", "val": "val", "valid": "val",
          "validation": "val", "eval": "val", "dev": "val", "test": "test"}
_SYNONYMS: list[tuple[list[str], tuple[str, bool]]] = [
    (["loss", "ce", "xent", "nll", "cross entropy", "cross entropy error", "cross entropy loss",
      "ce loss"], ("cross_entropy_error", False)),
    (["error", "err", "error rate", "classification error", "top1 error", "top 1 error"],
     ("classification_error", False)),
    (["acc", "accuracy", "top1", "top 1", "top1 accuracy", "top 1 accuracy", "top1 acc",
      "categorical accuracy", "sparse categorical accuracy", "classification accuracy"],
     ("classification_error", True)),
    (["ap", "average precision", "avg precision"], ("average_precision", False)),
]
# words -> (metric, stored as 1 - value)
KINDS: dict[tuple[str, ...], tuple[str, bool]] = {
    tuple(words.split()): kind for names, kind in _SYNONYMS for words in names}

_SEPARATORS = re.compile(r"[/_\-.\s]+")
RESERVED = frozenset({"base_dir", "model", "optimizer", "batch_size", "trial_id", "status",
                      "steps", "n_measurements", "step", "effective_learning_rate"})
"""Names no metric may take, in any case: the store's partition and fixed columns (of the
measurements and trials tables, which queries join) and the columns queries compute."""
MetricMap = Mapping[str, str]
"""Overrides ``old name -> new name`` (``1-new`` for 1 - value, empty to drop)."""


def fold(name: str) -> str:
    """The form under which two column names are the same column: DuckDB, which answers
    every query, matches identifiers without regard to case (``Loss`` is ``loss``).

    >>> fold("Val/Loss") == fold("val/loss")
    True
    """
    return name.casefold()


def is_reserved(name: str) -> bool:
    """True when ``name`` is, in any case, one of the :data:`RESERVED` column names."""
    return fold(name) in RESERVED


def _words(name: str) -> list[str]:
    return [w for w in _SEPARATORS.split(name.lower()) if w]


def target(name: str, overrides: MetricMap | None = None) -> tuple[str, bool]:
    """The column a logged metric goes to, and whether it is stored as ``1 - value``.

    An empty column name means the metric is dropped.
    """
    if overrides and name in overrides:
        new = overrides[name].strip()
        if new.startswith("1-"):
            return new[2:].strip(), True
        return new, False
    words = _words(name)
    split = "train"
    if words and words[0] in SPLITS:
        split, words = SPLITS[words[0]], words[1:]
    elif words and words[-1] in SPLITS:
        split, words = SPLITS[words[-1]], words[:-1]
    kind = KINDS.get(tuple(words))
    if kind is None:
        return name, False
    return f"{split}/{kind[0]}", kind[1]


def parse_overrides(items: list[str] | tuple[str, ...], where: str = "--map"
                    ) -> dict[str, str]:
    """Parse ``old=new`` strings (the CLI's ``--map``) into a mapping.

    >>> parse_overrides(["val_top1=1-val/classification_error", "lr="])
    {'val_top1': '1-val/classification_error', 'lr': ''}
    """
    out: dict[str, str] = {}
    for item in items:
        old, sep, new = item.partition("=")
        if not sep or not old.strip():
            raise IngestError(f"{where} {item!r} is not OLD=NEW; write e.g. "
                              "--map val_top1=1-val/classification_error (or OLD= to drop)")
        out[old.strip()] = new.strip()
    return out


@dataclass(frozen=True)
class Mapped:
    """A run's metrics after mapping: the frame and which logged name became which column."""

    frame: pl.DataFrame
    sources: dict[str, str]  # new column -> logged name


def apply_map(frame: pl.DataFrame, axis: str, path: str, overrides: MetricMap | None = None
              ) -> Mapped:
    """Rename (and complement) a run's metric columns; refuse two columns with one name."""
    exprs: list[pl.Expr] = [pl.col(axis)]
    sources: dict[str, str] = {}
    for name in frame.columns:
        if name == axis:
            continue
        new, complement = target(name, overrides)
        if not new:
            continue
        if is_reserved(new):
            raise IngestError(
                f"metric {name!r} would become the column {new!r}, a name the store reserves "
                f"({', '.join(sorted(RESERVED))}, in any case); rename it with "
                f"--map '{name}=<new name>' (or the manifest's [metrics] table) or drop it "
                f"with --map '{name}='", path=path)
        if new in sources:
            raise IngestError(
                f"metrics {sources[new]!r} and {name!r} would both become the column {new!r}; "
                f"keep one: --map '{name}=<another name>' renames it, --map '{name}=' drops it",
                path=path)
        sources[new] = name
        column = pl.col(name).cast(pl.Float64)
        exprs.append((1.0 - column if complement else column).alias(new))
    return Mapped(frame.select(exprs), sources)
