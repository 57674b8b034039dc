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
``ce``, ``xent``, ``nll``, ``cross entropy``,           ``<split>/cross_entropy_error``
``crossentropy``, ``log loss``, ``bce``,
``categorical crossentropy``, ...
``loss``                                               ``<split>/loss``, or
                                                       ``<split>/cross_entropy_error`` when
                                                       the run says its loss is one
``error``, ``err``, ``error rate``, ``top1 error``      ``<split>/classification_error``
``acc``, ``accuracy``, ``top1``, ``categorical         ``<split>/classification_error`` as
accuracy``, ``sparse categorical accuracy``             1 - value
``ap``, ``average precision``                          ``<split>/average_precision``
=====================================================  ======================================

**A loss is the cross-entropy only where the log says so**: its own name names it (the
first row), or a parameter of the run names a cross-entropy loss (:func:`loss_evidence`:
``loss = "categorical_crossentropy"``, ``criterion = "torch.nn.CrossEntropyLoss"``). A loss
of unknown kind (a regression's, fastMRI's SSIM/L1 loss) is ``<split>/loss``: stored as the
cross-entropy it would be compared with the release's cross-entropies. ``--map
'loss=train/cross_entropy_error'`` stores it so when the user knows it is one.

Logging libraries decorate these names; the decorated forms (siblings) are mapped too:

* ``X_epoch`` (PyTorch Lightning's ``on_epoch`` mean, ``train_loss_epoch``) and ``epoch_X``
  (Keras's per-epoch TensorBoard tags, ``epoch_loss``): the column of ``X``;
* ``X_step`` (Lightning's ``on_step`` value, ``train_loss_step``) and ``batch_X`` (Keras's
  per-batch tags, ``batch_loss``): the column of ``X`` with ``_step`` appended
  (``train/loss_step``), the value of one batch;
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
(('val/classification_error', True), ('train/loss', False), ('val/loss', False), ('lr', False))
>>> target("val_acc", {"val_acc": "val/top1"})
('val/top1', False)
>>> target("train_loss_epoch"), target("epoch_accuracy"), target("acc_step")
(('train/loss', False), ('train/classification_error', True), \
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

__all__ = ["CROSS_ENTROPY", "LOSS", "RATES", "MetricMap", "apply_map", "fold", "is_rate",
           "loss_evidence", "parse_overrides", "says_cross_entropy", "target"]

SPLITS = {"train": "train", "training": "train", "val": "val", "valid": "val",
          "validation": "val", "eval": "val", "dev": "val", "test": "test"}
LOSS = "loss"
"""The stored metric name (after the split) of a loss not known to be the cross-entropy."""
CROSS_ENTROPY = "cross_entropy_error"
"""The release's name of the cross-entropy (after the split)."""
_SYNONYMS: list[tuple[list[str], tuple[str, bool]]] = [
    # a loss of unknown kind: the cross-entropy only where the run says so (loss_evidence)
    (["loss"], (LOSS, False)),
    (["ce", "xent", "nll", "cross entropy", "crossentropy", "cross entropy error",
      "cross entropy loss", "crossentropy loss", "ce loss", "xent loss", "log loss", "logloss",
      "bce", "bce loss", "categorical crossentropy", "sparse categorical crossentropy",
      "binary crossentropy", "categorical cross entropy", "binary cross entropy"],
     (CROSS_ENTROPY, False)),
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


def _known(name: str, cross_entropy: bool = False) -> tuple[str, bool] | None:
    """The column of a name whose words are a split and a known kind, else None; a loss
    is the cross-entropy only when ``cross_entropy`` (the run says so)."""
    words = _words(name)
    split = "train"
    if words and words[0] in SPLITS:
        split, words = SPLITS[words[0]], words[1:]
    elif words and words[-1] in SPLITS:
        split, words = SPLITS[words[-1]], words[:-1]
    kind = KINDS.get(tuple(words))
    if kind is None:
        return None
    metric = CROSS_ENTROPY if kind[0] == LOSS and cross_entropy else kind[0]
    return f"{split}/{metric}", kind[1]


def _base(name: str, train_siblings: frozenset[str], cross_entropy: bool = False
          ) -> tuple[str, bool] | None:
    """The column of an undecorated name, or None when it keeps its own name."""
    known = _known(name, cross_entropy)
    if known is not None:
        return known
    split = _split_rest(name)
    if split is not None:
        return f"{split[0]}/{split[1]}", False
    if fold(name) in train_siblings:
        return f"train/{name}", False
    return None


def target(name: str, overrides: MetricMap | None = None,
           train_siblings: frozenset[str] = frozenset(), *, cross_entropy: bool = False
           ) -> tuple[str, bool]:
    """The column a logged metric goes to, and whether it is stored as ``1 - value``.

    An empty column name means the metric is dropped. ``train_siblings`` are names (in
    :func:`fold` form) that have a validation or test sibling in the same run, and so are
    training metrics (see the module docs); :func:`apply_map` computes them.
    ``cross_entropy`` says the run's loss is the cross-entropy (:func:`loss_evidence`):
    only then is a name of the ``loss`` kind stored as ``<split>/cross_entropy_error``.

    >>> target("val_loss"), target("val_loss", cross_entropy=True), target("val_xent")
    (('val/loss', False), ('val/cross_entropy_error', False), \
('val/cross_entropy_error', False))
    """
    if overrides and name in overrides:
        new = overrides[name].strip()
        if new.startswith("1-"):
            return new[2:].strip(), True
        return new, False
    known = _known(name, cross_entropy)
    if known is not None:
        return known
    for pattern, step in ((r"^(.+)_epoch$", False), (r"^epoch_(.+)$", False),
                          (r"^(.+)_step$", True), (r"^batch_(.+)$", True)):
        match = re.match(pattern, name)
        if match is None:
            continue
        inner = _base(match.group(1), train_siblings, cross_entropy)
        # whether the rest maps to another column does not depend on the kind of loss:
        # train/loss_epoch is train/loss's epoch mean, as train/xent_epoch is train/xent's
        maps = _base(match.group(1), train_siblings, True)
        if inner is not None and maps is not None and maps[0] != match.group(1):
            return (inner[0] + "_step" if step else inner[0]), inner[1]
    base = _base(name, train_siblings, cross_entropy)
    return base if base is not None else (name, False)


# Words of a parameter's name that make it the run's loss: ``loss``, ``loss_fn``,
# ``lossFunction``, ``criterion``, Hydra's ``criterion._target_``, ``objective``.
_LOSS_KEYS = frozenset({"loss", "losses", "criterion", "objective"})
# One word, or words in a row, that name the cross-entropy in a loss's name: Keras's
# categorical_crossentropy, PyTorch's CrossEntropyLoss / NLLLoss / BCEWithLogitsLoss,
# scikit-learn's log_loss, TensorFlow's softmax_cross_entropy_with_logits, "xent", "ce".
_CE_WORDS = frozenset({"crossentropy", "xent", "nll", "bce", "ce", "logloss", "nllloss",
                       "celoss", "bceloss"})
_CE_RUNS = (("cross", "entropy"), ("log", "loss"), ("negative", "log", "likelihood"))
_TOKENS = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")


def _tokens(text: str) -> list[str]:
    """The words of a name, split at separators and case changes (``BCEWithLogitsLoss``:
    bce, with, logits, loss)."""
    return [t.lower() for t in _TOKENS.findall(text)]


def says_cross_entropy(text: str) -> bool:
    """True if a loss's name (a parameter's value or name) names the cross-entropy.

    >>> [says_cross_entropy(t) for t in ("sparse_categorical_crossentropy",
    ...  "torch.nn.modules.loss.BCEWithLogitsLoss", "NLLLoss", "CrossEntropyLoss()",
    ...  "mse", "L1Loss", "ssim", "huber")]
    [True, True, True, True, False, False, False, False]
    """
    words = _tokens(text)
    if _CE_WORDS.intersection(words):
        return True
    return any(tuple(words[i:i + len(run)]) == run
               for run in _CE_RUNS for i in range(len(words) - len(run) + 1))


def loss_evidence(params: Mapping[str, object]) -> str | None:
    """Why the run's loss is the cross-entropy, from its own parameters, or None when they
    do not say so.

    A parameter whose name makes it the loss (words ``loss``, ``criterion``, ``objective``:
    ``loss``, ``loss_fn``, ``criterion``, ``criterion._target_``) with a text value that
    names one cross-entropy loss (:func:`says_cross_entropy`; a list of several losses is
    not one), or a switch whose own name says cross-entropy set to true (timm's
    ``bce_loss: true``).

    >>> loss_evidence({"loss": "categorical_crossentropy", "lr": 0.1})
    "its parameter 'loss' = 'categorical_crossentropy' names a cross-entropy loss"
    >>> loss_evidence({"criterion": "torch.nn.MSELoss"}) is None
    True
    """
    for key, value in params.items():
        if value is True and says_cross_entropy(key):
            return f"its parameter {key!r} = true names a cross-entropy loss"
        if not isinstance(value, str) or not _LOSS_KEYS.intersection(_tokens(key)):
            continue
        text = value.strip()
        if text.startswith(("[", "{")):  # several losses (a list or table as JSON text)
            continue
        if says_cross_entropy(text):
            shown = text if len(text) <= 80 else text[:77] + "..."
            return f"its parameter {key!r} = {shown!r} names a cross-entropy loss"
    return None


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
    why: dict[str, str] = field(default_factory=dict)  # new loss column -> why that name


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


def _loss_why(name: str, new: str, evidence: str | None) -> str | None:
    """Why a logged loss got its stored name (for the plan), or None for other metrics."""
    kind = new.rsplit("/", 1)[-1].removesuffix("_step")
    if kind == CROSS_ENTROPY:
        return f"the cross-entropy: {evidence or 'its name says so'}"
    if kind != LOSS:
        return None
    return (f"a loss not known to be the cross-entropy (neither its name nor a loss or "
            f"criterion parameter of the run says so); if it is the cross-entropy, "
            f"--map '{name}={new.removesuffix(LOSS + '_step').removesuffix(LOSS)}"
            f"{CROSS_ENTROPY}{'_step' if new.endswith('_step') else ''}' stores it so")


def apply_map(frame: pl.DataFrame, axis: str, path: str, overrides: MetricMap | None = None,
              params: Mapping[str, object] | None = None) -> Mapped:
    """Rename (and complement) a run's metric columns; refuse two columns with one name,
    unless they hold the same values (see the module docs).

    ``params`` are the run's metaparameters: a loss is stored as the cross-entropy only
    when its name or they say so (:func:`loss_evidence`); ``Mapped.why`` says, for each
    loss column, why it got its name.

    >>> frame = pl.DataFrame({"step": [100], "loss": [0.5], "val_loss": [0.6]})
    >>> apply_map(frame, "step", "r.csv").frame.columns
    ['step', 'train/loss', 'val/loss']
    >>> apply_map(frame, "step", "r.csv", params={"loss_fn": "CrossEntropyLoss"}).frame.columns
    ['step', 'train/cross_entropy_error', 'val/cross_entropy_error']
    """
    columns: dict[str, pl.Series] = {axis: frame.get_column(axis)}
    sources: dict[str, str] = {}
    transforms: dict[str, str] = {}
    why: dict[str, str] = {}
    siblings = _train_siblings([c for c in frame.columns if c != axis])
    evidence = loss_evidence(params or {})
    for name in frame.columns:
        if name == axis:
            continue
        new, complement = target(name, overrides, siblings,
                                 cross_entropy=evidence is not None)
        if not new:
            continue
        if not (overrides and name in overrides):
            plain = target(name, None, siblings)[0]  # the name alone
            named = _loss_why(name, new, None if plain == new else evidence)
            if named is not None:
                why.setdefault(new, named)
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
    return Mapped(pl.DataFrame(list(columns.values())), sources, transforms, why)


def _same(one: pl.Series, two: pl.Series) -> pl.Series | None:
    """The two columns as one if they agree wherever both hold a value, else None."""
    both = one.is_not_null() & two.is_not_null()
    a, b = one.filter(both), two.filter(both)
    equal = (a == b) | (a.is_nan() & b.is_nan())
    if not bool(equal.all()):
        return None
    return pl.select(pl.coalesce(one, two).alias(one.name)).to_series()
