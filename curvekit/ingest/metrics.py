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

Logging libraries decorate these names; the decorated forms (siblings) are mapped too:

* ``X_epoch`` (PyTorch Lightning's ``on_epoch`` mean, ``train_loss_epoch``) and ``epoch_X``
  (Keras's per-epoch TensorBoard tags, ``epoch_loss``): the column of ``X``;
* ``X_step`` (Lightning's ``on_step`` value, ``train_loss_step``) and ``batch_X`` (Keras's
  per-batch tags, ``batch_loss``): the column of ``X`` with ``_step`` appended
  (``train/cross_entropy_error_step``), the value of one batch;
* a split word and words of no known kind (``val_mean_absolute_error``):
  ``<split>/<the other words>`` (``val/mean_absolute_error``); a name without a split word
  beside such a sibling (``mean_absolute_error``) is its training form
  (``train/mean_absolute_error``).

A decoration is dropped (or becomes ``_step``) only when the rest of the name maps to
another column: ``grad_norm_epoch`` and ``epoch_lr`` keep their names. Two logged names that
become one column and hold equal values wherever both have one (MLflow's autologging of a
Lightning run logs ``acc`` and ``acc_epoch``, the same numbers) are one column; different
values are refused. ``epoch`` is no metric: it tells the time axis (see
:func:`curvekit.ingest.runs.settle_axis`). Anything else keeps its own name.

An override ``old=new`` (``--map``, or the manifest's ``[metrics]`` table) wins over the
defaults; ``old=1-new`` stores ``1 - value``; ``old=`` (nothing after ``=``) drops the
column; ``old=step`` makes ``old`` the step column.

**Units.** A column stored as an error rate (``*/classification_error``, whether logged as an
error or as an accuracy) is a fraction of examples, between 0 and 1. A logged accuracy or
error whose values lie between 0 and 100 with one above 1 was logged in percent: it is
divided by 100, and an :class:`~curvekit.errors.IngestWarning` says so. A value below 0 or
above 100 is refused, naming the column and the ``--map`` that stores it under a name of its
own. The unit is decided per run and column, on the values the run logged.

>>> target("val_acc"), target("loss"), target("Loss/Validation"), target("lr")
(('val/classification_error', True), ('train/cross_entropy_error', False), \
('val/cross_entropy_error', False), ('lr', False))
>>> target("val_acc", {"val_acc": "val/top1"})
('val/top1', False)
>>> target("train_loss_epoch"), target("epoch_accuracy"), target("acc_step")
(('train/cross_entropy_error', False), ('train/classification_error', True), \
('train/classification_error_step', True))
>>> target("val_mean_absolute_error"), target("grad_norm_epoch")
(('val/mean_absolute_error', False), ('grad_norm_epoch', False))
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field

import polars as pl

from curvekit.errors import IngestError, IngestWarning
from curvekit.names import check_name

__all__ = ["RATES", "MetricMap", "apply_map", "fold", "is_rate", "parse_overrides", "target"]

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
MetricMap = Mapping[str, str]
"""Overrides ``old name -> new name`` (``1-new`` for 1 - value, empty to drop)."""


def fold(name: str) -> str:
    """The form under which two logged names are one kind of metric when matching siblings
    (``Loss`` beside ``val_loss``); stored names keep their case.

    >>> fold("Val/Loss") == fold("val/loss")
    True
    """
    return name.casefold()


def _words(name: str) -> list[str]:
    return [w for w in _SEPARATORS.split(name.lower()) if w]


_FIRST = re.compile(r"^([^/_\-.\s]+)[/_\-.\s]+(.+)$")
_LAST = re.compile(r"^(.+?)[/_\-.\s]+([^/_\-.\s]+)$")


def _split_rest(name: str) -> tuple[str, str] | None:
    """(split, the rest of the name as written) for a name with a leading or trailing split
    word and other words, else None."""
    first = _FIRST.match(name)
    if first and first.group(1).lower() in SPLITS:
        return SPLITS[first.group(1).lower()], first.group(2)
    last = _LAST.match(name)
    if last and last.group(2).lower() in SPLITS:
        return SPLITS[last.group(2).lower()], last.group(1)
    return None


def _known(name: str) -> tuple[str, bool] | None:
    """The column of a name whose words are a split and a known kind, else None."""
    words = _words(name)
    split = "train"
    if words and words[0] in SPLITS:
        split, words = SPLITS[words[0]], words[1:]
    elif words and words[-1] in SPLITS:
        split, words = SPLITS[words[-1]], words[:-1]
    kind = KINDS.get(tuple(words))
    return None if kind is None else (f"{split}/{kind[0]}", kind[1])


def _base(name: str, train_siblings: frozenset[str]) -> tuple[str, bool] | None:
    """The column of an undecorated name, or None when it keeps its own name."""
    known = _known(name)
    if known is not None:
        return known
    split = _split_rest(name)
    if split is not None:
        return f"{split[0]}/{split[1]}", False
    if fold(name) in train_siblings:
        return f"train/{name}", False
    return None


def target(name: str, overrides: MetricMap | None = None,
           train_siblings: frozenset[str] = frozenset()) -> tuple[str, bool]:
    """The column a logged metric goes to, and whether it is stored as ``1 - value``.

    An empty column name means the metric is dropped. ``train_siblings`` are names (in
    :func:`fold` form) that have a validation or test sibling in the same run, and so are
    training metrics (see the module docs); :func:`apply_map` computes them.
    """
    if overrides and name in overrides:
        new = overrides[name].strip()
        if new.startswith("1-"):
            return new[2:].strip(), True
        return new, False
    known = _known(name)
    if known is not None:
        return known
    for pattern, step in ((r"^(.+)_epoch$", False), (r"^epoch_(.+)$", False),
                          (r"^(.+)_step$", True), (r"^batch_(.+)$", True)):
        match = re.match(pattern, name)
        if match is None:
            continue
        inner = _base(match.group(1), train_siblings)
        if inner is not None and inner[0] != match.group(1):
            return (inner[0] + "_step" if step else inner[0]), inner[1]
    base = _base(name, train_siblings)
    return base if base is not None else (name, False)


_DECORATED = re.compile(r"^(?:epoch_|batch_)(.+)$|^(.+?)(?:_epoch|_step)$")


def _train_siblings(names: list[str]) -> frozenset[str]:
    """Names without a split word that another name repeats after a val/test split word,
    decorations set aside (``epoch_mae`` beside ``epoch_val_mae``: ``mae``)."""
    names = [next(g for g in m.groups() if g) if (m := _DECORATED.match(n)) else n
             for n in names]
    rests = set()
    for name in names:
        split = _split_rest(name)
        if split is not None and split[0] != "train":
            rests.add(fold(split[1]))
    return frozenset(fold(n) for n in names if fold(n) in rests and _split_rest(n) is None)


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
    transforms: dict[str, str] = field(default_factory=dict)  # new column -> what was done


RATES = ("classification_error", "classification_error_step")
"""Stored metric names (after the split) that hold a fraction of examples, 0 to 1."""


def is_rate(column: str) -> bool:
    """True for a stored column that holds an error rate (a fraction between 0 and 1).

    >>> is_rate("val/classification_error"), is_rate("val/cross_entropy_error")
    (True, False)
    """
    return column.rsplit("/", 1)[-1] in RATES


def _units(values: pl.Series, name: str, new: str, complement: bool, path: str
           ) -> tuple[pl.Series, str]:
    """``values`` as a fraction for the rate column ``new`` and what was done (see the
    module docs: percent is divided by 100; a value outside 0..100 is refused)."""
    what = "accuracy" if complement else "error rate"
    done = "1 - value" if complement else "value"
    finite = values.filter(values.is_finite())
    if finite.is_empty():
        return (1.0 - values if complement else values), done
    low, high = float(finite.min()), float(finite.max())  # type: ignore[arg-type]
    if low < 0 or high > 100:
        bad = low if low < 0 else high
        raise IngestError(
            f"metric {name!r} becomes the error rate {new!r} (as {done}), but it holds "
            f"{bad!r}: an {what} lies between 0 and 1 (or 0 and 100 in percent); if it is "
            f"no {what}, store it under a name of its own with --map '{name}={name}' (or "
            "the manifest's [metrics] table)", path=path)
    if high > 1:
        warnings.warn(
            f"{path}: metric {name!r} holds values up to {high!r}: an {what} in percent, "
            f"divided by 100 for {new!r}; if it is no {what}, keep it as it is with "
            f"--map '{name}={name}'", IngestWarning, stacklevel=3)
        values = values / 100.0
        done = f"1 - value/100 ({what} in percent)" if complement \
            else f"value/100 ({what} in percent)"
    return (1.0 - values if complement else values), done


def apply_map(frame: pl.DataFrame, axis: str, path: str, overrides: MetricMap | None = None
              ) -> Mapped:
    """Rename (and complement) a run's metric columns; refuse two columns with one name,
    unless they hold the same values (see the module docs)."""
    columns: dict[str, pl.Series] = {axis: frame.get_column(axis)}
    sources: dict[str, str] = {}
    transforms: dict[str, str] = {}
    siblings = _train_siblings([c for c in frame.columns if c != axis])
    for name in frame.columns:
        if name == axis:
            continue
        new, complement = target(name, overrides, siblings)
        if not new:
            continue
        # The one name rule, on the name as logged, before any renaming: a split word and
        # a control character would otherwise vanish into the new name ("train\tloss").
        check_name(name, "metric", fix=f"rename the column in the log, or drop it with "
                   f"--map {name!r}=", error=lambda m: IngestError(m, path=path))
        values = frame.get_column(name).cast(pl.Float64)
        done = "1 - value" if complement else ""
        if is_rate(new):
            values, done = _units(values, name, new, complement, path)
        elif complement:
            values = 1.0 - values
        values = values.alias(new)
        if new in sources:
            merged = _same(columns[new], values)
            if merged is None:
                raise IngestError(
                    f"metrics {sources[new]!r} and {name!r} would both become the column "
                    f"{new!r}; keep one: --map '{name}=<another name>' renames it, "
                    f"--map '{name}=' drops it", path=path)
            columns[new] = merged
            continue
        sources[new] = name
        columns[new] = values
        if done and done != "value":
            transforms[new] = done
    return Mapped(pl.DataFrame(list(columns.values())), sources, transforms)


def _same(one: pl.Series, two: pl.Series) -> pl.Series | None:
    """The two columns as one if they agree wherever both hold a value, else None."""
    both = one.is_not_null() & two.is_not_null()
    a, b = one.filter(both), two.filter(both)
    equal = (a == b) | (a.is_nan() & b.is_nan())
    if not bool(equal.all()):
        return None
    return pl.select(pl.coalesce(one, two).alias(one.name)).to_series()
