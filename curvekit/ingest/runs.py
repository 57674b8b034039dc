"""A training run as read from a log, and the checks every format shares.

Readers return :class:`RunLog` objects: one table per run with a time axis (``step``, or
``epoch`` for loggers that only count epochs) and one float64 column per logged metric,
under the names the log used. :func:`merge_rows` turns raw rows into one row per step:
loggers such as PyTorch Lightning's CSVLogger write training and validation metrics on
separate rows that share a step, and those rows are merged; two *different* values of one
metric at one step are an error, never silently resolved.

>>> import polars as pl
>>> raw = pl.DataFrame({"step": [0.0, 0.0, 50.0], "loss": [2.0, None, 1.5],
...                     "val_loss": [None, 2.1, None]})
>>> merge_rows(raw, "metrics.csv", lambda row: row + 2).to_dicts()
[{'step': 0, 'loss': 2.0, 'val_loss': 2.1}, {'step': 50, 'loss': 1.5, 'val_loss': None}]
"""

from __future__ import annotations

import math
import os
import re
import warnings
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar, copy_context
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from curvekit.errors import IngestError, IngestWarning
from curvekit.ingest.files import SourceFiles
from curvekit.ingest.select import ALL, FileFilter
from curvekit.values import INT64_MAX, exact_integer

__all__ = [
    "CONFLICT_RULES",
    "EPOCH_COUNT_PARAMS",
    "INT64_MAX",
    "MAX_COLUMNS",
    "IngestWarning",
    "ReadOptions",
    "RunLog",
    "conflict_rule",
    "data_line",
    "epochs_to_steps",
    "exact_integers",
    "in_this_context",
    "merge_rows",
    "overflow_warning",
    "settle_axis",
    "steps_per_epoch",
]

MAX_COLUMNS = 10_000
"""The most columns one log may have.

A logger writes a few dozen metrics per run, and a model that logs per-layer statistics (a
ResNet-50's ~160 layers, a few statistics each) stays well below 10,000. Beyond that the
input is far more likely a wrong file (or a hostile one) than a training curve, and ``add``
refuses it after reading the header alone. A workload holds any number of metrics (its runs
together may bring more): names are values in the store, not columns."""

@dataclass(frozen=True)
class ReadOptions:
    """What a reader is told beyond the source: the columns ``--map`` makes the step
    (``step_renames``) or drops (``drop``, left out before any value is parsed), which
    files to read (``select``: ``--include``/``--exclude``), and how they are reached
    (``files``: every open goes through it; by default the source's own
    :class:`~curvekit.ingest.files.SourceFiles`, links not followed), and the column that
    tells apart the runs of a CSV log holding several (``run_column``: ``--run-column``)."""

    step_renames: tuple[str, ...] = ()
    drop: frozenset[str] = frozenset()
    select: FileFilter = ALL
    files: SourceFiles | None = None
    run_column: str | None = None


LineOf = Callable[[int], int]
"""Maps a 0-based data row of a table to the 1-based line (or record) of its file."""


@dataclass
class RunLog:
    """One run read from a log, before names are mapped and the status decided.

    ``key`` names the run (its path relative to the source, or an MLflow run id);
    ``aliases`` are other names a manifest entry may use for it. ``frame`` has the time axis
    ``step`` (Int64, strictly increasing) -- or ``epoch`` when ``by_epoch`` -- then Float64
    metric columns. ``params`` holds metaparameters the log itself records (MLflow params,
    TensorBoard hparams, Lightning's hparams.yaml). ``step_offset`` is the logger's step
    convention: the training steps done when a row is logged are ``step + step_offset``
    (1 for PyTorch Lightning, which logs the 0-based index of the batch just trained; 0 for
    loggers that log the count of steps done). Completeness is judged on steps done.

    ``axis_named`` is False where the logger lets the caller choose what its step counts
    (MLflow's ``step=``, TensorBoard's ``global_step``): :func:`settle_axis` then looks for
    evidence of an epoch axis, and a manifest's ``steps_per_epoch`` says so too.
    ``epoch_hint`` is such evidence found by the reader (MLflow autologging). ``final_only``
    names metrics logged as one value without a step (final values, not curves).
    ``finished`` is the logger's own record of how the run ended, where it keeps one
    (Sacred's and MLflow's run status): False for a run it records as failed, killed,
    interrupted or still running, which is then never COMPLETE
    (:func:`~curvekit.ingest.status.decide`); None where the log records nothing.
    ``finished_why`` says what the record was (``MLflow status FAILED``), for the plan.
    """

    key: str
    path: str
    frame: pl.DataFrame
    params: dict[str, Any] = field(default_factory=dict)
    aliases: tuple[str, ...] = ()
    by_epoch: bool = False
    started: float | None = None  # start time, when the log records one (MLflow)
    step_offset: int = 0
    axis_named: bool = True
    epoch_hint: str | None = None
    final_only: tuple[str, ...] = ()
    why_epochs: str = "the log counts epochs (an epoch column, no step column)"
    finished: bool | None = None  # the logger's own record of the run's end, where it keeps one
    finished_why: str = ""
    files: tuple[str, ...] = ()  # files it is read from besides path (chart exports joined)

    @property
    def order(self) -> tuple[float, list[Any]]:
        """Sort key for numbering trials: start time if known, then the name in natural
        order (``version_2`` before ``version_10``)."""
        parts: list[Any] = [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", self.key)]
        return (self.started if self.started is not None else 0.0, parts)

    @property
    def names(self) -> tuple[str, ...]:
        """Every name the run answers to in a manifest."""
        return (self.key, *self.aliases)


def data_line(data: bytes) -> LineOf:
    """Line numbers of a CSV file's data rows, counting the header (its first line that is
    not blank) and skipping blank lines.

    >>> data_line(b"step,a\\n0,1\\n\\n5,2\\n")(1), data_line(b"\\nstep,a\\n0,1\\n")(0)
    (4, 3)
    """
    def line_of(row: int) -> int:
        seen = -2  # the header is the first line that is not blank
        for number, text in enumerate(data.splitlines(), 1):
            if not text.strip():
                continue
            seen += 1
            if seen == row:
                return number
        return row + 2

    return line_of


def exact_integers(column: pa.Array | pa.ChunkedArray, axis: str, path: str,
                   line_of: LineOf, missing: Iterable[str] = ("",)) -> pa.Array:
    """A step (or epoch) column read as text, as exact int64; nulls (and ``missing``
    spellings) stay null for :func:`merge_rows` to report.

    Refuses, naming the line and the value, what is not an integer (``1.5``, ``nan``,
    ``inf``) or lies beyond int64 (``1e400``, ``9223372036854775808``): a float would round
    steps above 2**53, and a wrapped cast would store 2**63 as -2**63.

    >>> exact_integers(pa.array(["9007199254740993", "1e3", None]), "step", "x.csv",
    ...                lambda row: row + 2).to_pylist()
    [9007199254740993, 1000, None]
    """
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if pa.types.is_integer(array.type) or pa.types.is_null(array.type):
        return array.cast(pa.int64()) if not pa.types.is_unsigned_integer(array.type) \
            else _unsigned(array, axis, path, line_of)
    if pa.types.is_floating(array.type):
        return _whole_floats(array.cast(pa.float64()), axis, path, line_of)
    try:  # the common case, digits only: Arrow parses and range-checks them exactly
        return pc.cast(array, pa.int64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    skip = frozenset(missing)
    values: list[int | None] = []
    for row, text in enumerate(array.to_pylist()):
        if text is None or text.strip() in skip:
            values.append(None)
            continue
        value = exact_integer(str(text))
        shown = _shown(str(text))
        if value is None:
            raise IngestError(f"{axis} {shown} is not a non-negative integer",
                              path=path, line=line_of(row))
        if not -INT64_MAX - 1 <= value <= INT64_MAX:
            raise IngestError(f"{axis} {shown} is beyond 2**63 - 1 = {INT64_MAX}, the "
                              f"largest {axis} the store holds (64-bit integers); check the "
                              "column", path=path, line=line_of(row))
        values.append(value)
    return pa.array(values, pa.int64())


def _whole_floats(array: pa.Array, axis: str, path: str, line_of: LineOf) -> pa.Array:
    """A step column stored as floats (a Parquet history's ``_step`` written as doubles):
    whole values within int64 become those integers exactly; a fraction, NaN, an infinity
    or a value beyond int64 is refused naming its row."""
    whole = pc.and_(pc.is_finite(array), pc.equal(pc.floor(array), array))
    fits = pc.and_(pc.greater_equal(array, -(2.0**63)), pc.less(array, 2.0**63))
    ok = pc.fill_null(pc.and_(whole, fits), True)
    if pc.all(ok).as_py():
        return pc.cast(array, pa.int64())
    row = pc.index(ok, False).as_py()
    value = array[row].as_py()
    if math.isfinite(value) and value == int(value):
        raise IngestError(f"{axis} {value!r} is beyond 2**63 - 1 = {INT64_MAX}, the largest "
                          f"{axis} the store holds (64-bit integers); check the column",
                          path=path, line=line_of(row))
    raise IngestError(f"{axis} {value!r} is not a whole number: the column counts training "
                      f"{axis}s; fix it, or name the column that does with --map COLUMN=step",
                      path=path, line=line_of(row))


def _shown(text: str) -> str:
    """A cell for a message: a number as written, anything else quoted (and cut short)."""
    stripped = text.strip()
    try:
        float(stripped)
    except ValueError:
        return repr(stripped[:40] + ("..." if len(stripped) > 40 else ""))
    return stripped[:40] + ("..." if len(stripped) > 40 else "")


def _unsigned(array: pa.Array, axis: str, path: str, line_of: LineOf) -> pa.Array:
    too_big = pc.greater(array, pa.scalar(INT64_MAX, array.type)).fill_null(False)
    if pc.any(too_big).as_py():
        row = int(np.flatnonzero(too_big.to_numpy(zero_copy_only=False))[0])
        raise IngestError(f"{axis} {array[row].as_py()} is beyond 2**63 - 1 = {INT64_MAX}, the "
                          f"largest {axis} the store holds", path=path, line=line_of(row))
    return array.cast(pa.int64())


def _axis_checks(frame: pl.DataFrame, axis: str, path: str, line_of: LineOf) -> np.ndarray:
    """The axis column as int64, refusing empty, fractional, negative, infinite or too large
    values. Integer columns are checked as integers: never through a float, which would
    round steps above 2**53."""
    values = frame.get_column(axis)
    if values.null_count():
        row = int(values.is_null().arg_true()[0])
        raise IngestError(f"no {axis} value on this row; every row needs its {axis}",
                          path=path, line=line_of(row))
    if values.dtype.is_integer():
        ints = exact_integers(values.to_arrow(), axis, path, line_of).to_numpy(
            zero_copy_only=False)
        ok = ints >= 0
        if not ok.all():
            row = int(np.flatnonzero(~ok)[0])
            raise IngestError(f"{axis} {values[row]!r} is not a non-negative integer",
                              path=path, line=line_of(row))
        return np.asarray(ints, dtype=np.int64)
    raw = values.cast(pl.Float64).to_numpy()
    with np.errstate(invalid="ignore"):
        ok = np.isfinite(raw) & (raw == np.floor(raw)) & (raw >= 0)
    if not ok.all():
        row = int(np.flatnonzero(~ok)[0])
        raise IngestError(f"{axis} {values[row]!r} is not a non-negative integer",
                          path=path, line=line_of(row))
    big = raw >= 2.0**63  # float64(2**63 - 1) rounds up to 2**63, which int64 cannot hold
    if big.any():
        row = int(np.flatnonzero(big)[0])
        raise IngestError(f"{axis} {values[row]!r} is beyond 2**63 - 1 = {INT64_MAX}, the "
                          f"largest {axis} the store holds", path=path, line=line_of(row))
    return raw.astype(np.int64)


_INF_SPELLINGS = frozenset({"inf", "+inf", "-inf", "infinity", "+infinity", "-infinity"})


def overflow_warning(path: str, columns: Iterable[tuple[str, Iterable[str | None]]]
                     ) -> str | None:
    """The warning for cells that parsed as infinity without spelling it (``1e400``).

    ``columns`` gives, for each column holding an infinite value, its cells as text. A
    literal ``inf`` is a value (a diverged run); ``1e400`` is a number too large for a
    64-bit float that became one silently. Returns None when there is none.

    >>> overflow_warning("r.csv", [("loss", ["1.5", "inf", "1e400", "-2e999"])])
    "r.csv: values too large for a 64-bit float were stored as infinity: 2 in column 'loss' \
(e.g. '1e400'); check the log"
    """
    found = []
    for name, cells in columns:
        bad = []
        for cell in cells:
            if cell is None or cell.strip().lower() in _INF_SPELLINGS:
                continue
            try:
                if np.isinf(float(cell)):
                    bad.append(cell.strip())
            except ValueError:
                continue
        if bad:
            found.append(f"{len(bad)} in column {name!r} (e.g. {bad[0]!r})")
    if not found:
        return None
    return (f"{path}: values too large for a 64-bit float were stored as infinity: "
            f"{', '.join(found)}; check the log")


CONFLICT_RULES = ("refuse", "first", "last")
"""What :func:`merge_rows` does with one metric logged twice at one step with different
values (``--on-conflict``): refuse (the default), keep the first value logged, or the last."""

_CONFLICT: ContextVar[str] = ContextVar("curvekit_on_conflict", default="refuse")


@contextmanager
def conflict_rule(rule: str) -> Iterator[None]:
    """Within the block, :func:`merge_rows` resolves conflicts by ``rule`` (one of
    :data:`CONFLICT_RULES`): every reader merges rows through it, so one import's
    ``--on-conflict`` reaches them all without being passed down each reader.

    >>> with conflict_rule("last"), warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     merge_rows(pl.DataFrame({"step": [5, 5], "loss": [2.0, 1.0]}), "r.csv",
    ...                lambda row: row + 2).rows()
    [(5, 1.0)]
    >>> str(caught[0].message)
    "r.csv: steps logged twice with different values (1 of 'loss'): kept the value logged \
last (--on-conflict last)"
    """
    if rule not in CONFLICT_RULES:
        raise IngestError(f"--on-conflict {rule!r} is not a rule; choose one of "
                          f"{', '.join(CONFLICT_RULES)}")
    token = _CONFLICT.set(rule)
    try:
        yield
    finally:
        _CONFLICT.reset(token)


_T = TypeVar("_T")
_R = TypeVar("_R")


def in_this_context(function: Callable[[_T], _R]) -> Callable[[_T], _R]:
    """``function`` run, on whatever thread, in a copy of the caller's context: a reader
    that reads files on a thread pool keeps the import's :func:`conflict_rule`.

    >>> with conflict_rule("first"):
    ...     read = in_this_context(lambda _: _CONFLICT.get())
    >>> read(None)
    'first'
    """
    context = copy_context()
    return lambda item: context.copy().run(function, item)


MAX_PROBLEMS = 20
"""The most problems one refusal lists (the count of the rest is given)."""


def all_problems(problems: list[IngestError]) -> IngestError:
    """One error that reports every problem an import found, each with its own fix: the
    first as it is (its file first), then the others, so that one round of fixes is enough.

    >>> print(all_problems([IngestError("empty file", path="a.csv"),
    ...                     IngestError("empty file", path="b.csv")]))
    a.csv: empty file
    and 1 more problem in this import:
      - b.csv: empty file
    """
    first, rest = problems[0], problems[1:]
    if not rest:
        return first
    shown = [f"  - {p}" for p in rest[:MAX_PROBLEMS]]
    if len(rest) > MAX_PROBLEMS:
        shown.append(f"  - ... and {len(rest) - MAX_PROBLEMS} more")
    error = IngestError("\n".join([str(first), f"and {len(rest)} more "
                                   f"problem{'s' if len(rest) > 1 else ''} in this import:",
                                   *shown]))
    error.path, error.line = first.path, first.line
    return error


def read_each(items: Iterable[_T], read: Callable[[_T], _R], workers: int = 4) -> list[_R]:
    """``read`` applied to every item on a few threads (in this context: see
    :func:`in_this_context`), in order; every item is read even when some fail, and their
    problems are reported together (:func:`all_problems`).

    >>> read_each([1, 2], lambda n: n * 10)
    [10, 20]
    """
    def attempt(item: _T) -> _R | IngestError:
        try:
            return read(item)
        except IngestError as exc:
            return exc

    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max(1, min(workers, os.cpu_count() or 1))) as pool:
        results = list(pool.map(in_this_context(attempt), items))
    problems = [r for r in results if isinstance(r, IngestError)]
    if problems:
        raise all_problems(problems)
    return [r for r in results if not isinstance(r, IngestError)]


def merge_rows(frame: pl.DataFrame, path: str, line_of: LineOf, axis: str = "step",
               on_conflict: str | None = None) -> pl.DataFrame:
    """One row per ``axis`` value, sorted; sparse rows merged; conflicting values refused.

    ``frame`` has the ``axis`` column (any numeric type; it must hold non-negative integers)
    and Float64 metric columns. Rows of one step that hold different metrics are one row.
    The same metric at the same step with two different values is a conflict: refused,
    naming both lines, unless ``on_conflict`` (default: the :func:`conflict_rule` in force,
    ``refuse``) is ``first`` or ``last``, which keep the value logged first or last in the
    file, with an :class:`IngestWarning` counting what was resolved. Vectorized with
    NumPy: a log of thousands of rows merges in well under a millisecond.
    """
    rule = on_conflict or _CONFLICT.get()
    steps = _axis_checks(frame, axis, path, line_of)
    metrics = [c for c in frame.columns if c != axis]
    if len(steps) < 2 or bool(np.all(np.diff(steps) > 0)):
        return frame.with_columns(pl.Series(axis, steps, dtype=pl.Int64))
    order = np.argsort(steps, kind="stable")  # rows of one step keep their file order
    sorted_steps = steps[order]
    first = np.empty(len(order), dtype=bool)
    first[0] = True
    np.not_equal(sorted_steps[1:], sorted_steps[:-1], out=first[1:])
    group = np.cumsum(first) - 1
    n_groups = int(group[-1]) + 1
    columns: dict[str, pa.Array] = {axis: pa.array(sorted_steps[first])}
    conflict: tuple[int, int, str, int, int] | None = None  # (group, column no, name, rows)
    resolved: dict[str, int] = {}  # metric -> steps whose values differed (first/last)
    table = frame.to_arrow()
    for number, name in enumerate(metrics):
        column = table.column(name).combine_chunks().cast(pa.float64())
        valid = column.is_valid().to_numpy(zero_copy_only=False)[order]
        values = column.fill_null(0.0).to_numpy(zero_copy_only=False)[order]
        rows = np.flatnonzero(valid)
        groups = group[rows]
        uniq, head = np.unique(groups, return_index=True)  # rows are sorted by group
        out = np.zeros(n_groups)
        out[uniq] = values[rows[head]]
        if rule == "last":
            _, tail = np.unique(groups[::-1], return_index=True)
            last = values[rows[len(rows) - 1 - tail]]
        mask = np.ones(n_groups, dtype=bool)
        mask[uniq] = False
        reference = out[groups]
        mine = values[rows]
        same = (mine == reference) | (np.isnan(mine) & np.isnan(reference))
        if not same.all() and rule != "refuse":
            resolved[name] = int(np.unique(groups[~same]).size)
        elif not same.all():
            bad = int(np.flatnonzero(~same)[0])
            g = int(groups[bad])
            found = (g, number, name, int(order[rows[head[np.searchsorted(uniq, g)]]]),
                     int(order[rows[bad]]))
            conflict = found if conflict is None or found[:2] < conflict[:2] else conflict
        if rule == "last":
            out[uniq] = last
        columns[name] = pa.array(out, mask=mask)
    if conflict is not None:
        g, _, name, one, two = conflict
        step = int(sorted_steps[np.flatnonzero(first)[g]])
        a, b = frame.get_column(name)[one], frame.get_column(name)[two]
        raise IngestError(
            f"{axis} {step} appears twice with different {name!r} values "
            f"({a!r} on line {line_of(one)}, {b!r} on line {line_of(two)}); keep one row per "
            f"{axis} and metric (a resumed run repeats steps: remove the rows of the abandoned "
            "attempt, or import the attempts as separate runs"
            # an epoch that comes again is an appended run (CSVLogger(append=True)), which
            # keeping one value would splice into the first
            + ("; or keep the value logged first or last at each step with --on-conflict "
               "first|last)" if axis == "step" else ")"), path=path, line=line_of(two))
    if resolved:
        counts = ", ".join(f"{n} of {name!r}" for name, n in resolved.items())
        warnings.warn(f"{path}: {axis}s logged twice with different values ({counts}): "
                      f"kept the value logged {rule} (--on-conflict {rule})", IngestWarning,
                      stacklevel=2)
    merged = pl.from_arrow(pa.table(columns))
    assert isinstance(merged, pl.DataFrame)
    return merged


# ---------------------------------------------------------------------- the epoch axis
EPOCH_COUNT_PARAMS = ("epochs", "num_epochs", "n_epochs", "max_epochs", "num_train_epochs",
                      "nb_epoch")
"""Parameters that record how many epochs a run was asked to train (Keras's ``fit(epochs=)``
as MLflow autologging records it, Lightning's ``max_epochs``, Hugging Face's
``num_train_epochs``)."""


def _epoch_count(params: Mapping[str, object]) -> int | None:
    for name in EPOCH_COUNT_PARAMS:
        value = params.get(name)
        if isinstance(value, int | float) and not isinstance(value, bool) \
                and math.isfinite(value) and value == int(value) and value >= 2:
            return int(value)
    return None


_RATE_TAGS = frozenset({"lr", "learning_rate"})  # what Keras's LR callbacks add to the logs


def _keras_history(frame: pl.DataFrame, metrics: list[str]) -> str | None:
    """Why the run's metrics are a Keras history logged once per epoch, or None.

    Keras's ``History`` names a metric ``X`` and its validation ``val_X``; TF1-era Keras's
    TensorBoard callback logged those names as they are, at ``step = epoch``. The evidence:
    every metric is such a pair's half (or ``lr``), with at least one pair, and every one has
    a point at every step of a run of consecutive steps (0, 1, ..., or from a resumed
    ``initial_epoch``). A loop that logs a training loss each step and ``val_loss`` every
    few steps is not one (its validation has gaps).
    """
    if frame.height < 2 or not metrics:
        return None
    names = set(metrics)
    pairs = sorted(m for m in names if m.startswith("val_") and m[4:] in names)
    paired = set(pairs) | {m[4:] for m in pairs}
    if not pairs or names - paired - _RATE_TAGS:
        return None
    steps = frame.get_column("step")
    first = int(steps[0])
    if not bool((steps == pl.int_range(first, first + frame.height, eager=True)).all()):
        return None
    if any(frame.get_column(m).null_count() for m in metrics):
        return None
    shown = ", ".join(f"{m[4:]}/{m}" for m in pairs[:3]) + (", ..." if len(pairs) > 3 else "")
    return (f"its metrics are a Keras history ({shown}: a metric and its val_ twin), one "
            f"point at every step {first}..{first + frame.height - 1}: one per epoch, as "
            "Keras's TensorBoard callback logs them")


def settle_axis(run: RunLog, drop: Collection[str] = ()) -> RunLog:
    """``run`` with its time axis settled: steps, or epochs where the log says so.

    Never puts epochs on the step axis silently. The log says it counts epochs when:

    * a logged ``epoch`` series equals the step at every point (two points or more): the
      run was logged with ``step=epoch`` (an ``epoch`` series that differs from the step,
      as PyTorch Lightning logs it, says the steps are training steps);
    * every metric is one of Keras's per-epoch TensorBoard tags, ``epoch_*``;
    * the metrics are a Keras history (``loss``, ``acc``, ``val_loss``, ``val_acc``: each
      metric and its ``val_`` twin) logged at every step of a run of consecutive steps
      (TF1-era Keras's TensorBoard callback, ``step = epoch``; see :func:`_keras_history`);
    * the steps are exactly 0, 1, ..., *k* - 1 and the run's ``epochs`` parameter (see
      :data:`EPOCH_COUNT_PARAMS`) is at least *k* (a run stopped early logs fewer epochs
      than it was asked for), or the reader found a hint (MLflow autologging, which logs
      once per epoch) and the steps are 0, 1, ... without a gap.

    ``epoch`` is never kept as a metric. ``drop`` are columns left out before looking
    (``--map NAME=``), so that a user can leave out what confuses the rule. A run whose
    axis turns out to be epochs comes back with ``by_epoch`` and an ``epoch`` column, for
    :func:`epochs_to_steps`; ``why_epochs`` says why.

    >>> frame = pl.DataFrame({"step": [0, 1, 2], "epoch": [0.0, 1.0, 2.0], "loss": [3.0, 2.0, 1.0]})
    >>> run = settle_axis(RunLog("r", "r", frame, axis_named=False))
    >>> run.by_epoch, run.frame.columns, run.why_epochs
    (True, ['epoch', 'loss'], "its 'epoch' metric equals the step at every point")
    """
    frame = run.frame.drop([c for c in drop if c in run.frame.columns])
    if run.by_epoch:
        return replace(run, frame=frame)
    named, why = run.axis_named, None
    if "epoch" in frame.columns:
        logged = frame.select("step", "epoch").drop_nulls()
        frame = frame.drop("epoch")
        metrics = [c for c in frame.columns if c != "step"]
        if metrics:  # the rows that held only the epoch are no measurement
            frame = frame.filter(pl.any_horizontal(pl.col(c).is_not_null() for c in metrics))
        if logged.height:
            if bool((logged.get_column("epoch") != logged.get_column("step")
                     .cast(pl.Float64)).any()):
                named = True
            elif logged.get_column("step").n_unique() >= 2:
                why = "its 'epoch' metric equals the step at every point"
    if why is None and not named:
        metrics = [c for c in frame.columns if c != "step"]
        steps = frame.get_column("step")
        gapless = frame.height >= 2 and bool(
            (steps == pl.int_range(0, frame.height, eager=True)).all())
        count = _epoch_count(run.params)
        history = _keras_history(frame, metrics)
        if metrics and all(c.startswith("epoch_") for c in metrics):
            why = "its metrics are Keras's per-epoch TensorBoard tags (epoch_*)"
        elif history is not None:
            why = history
        elif metrics and any(c.startswith("epoch_") for c in metrics) \
                and any(c.startswith("batch_") for c in metrics):
            batch = next(c for c in metrics if c.startswith("batch_"))
            raise IngestError(
                f"run {run.key!r} mixes Keras's per-epoch tags (epoch_*, at epoch numbers) "
                f"and per-batch tags (batch_*, at steps) on one axis; import one kind: "
                f"--map '{batch}=' leaves a per-batch tag out", path=run.path)
        elif gapless and run.epoch_hint:
            why = run.epoch_hint
        elif gapless and count is not None and frame.height <= count:
            # one point at every step 0..k-1 with k <= the epochs asked for: a step per
            # epoch (early stopping ends before the last); a run logged per step would have
            # trained fewer steps than epochs, and then its steps are its epochs anyway
            why = (f"its steps run 0..{frame.height - 1} and its epochs "
                   f"parameter is {count}: one point per epoch")
    if why is None:
        return replace(run, frame=frame, axis_named=named)
    return replace(run, frame=frame.rename({"step": "epoch"}), by_epoch=True,
                   why_epochs=why, axis_named=True)


def epochs_to_steps(frame: pl.DataFrame, steps_per_epoch: int, path: str | None = None
                    ) -> pl.DataFrame:
    """A row logged at the end of 0-based epoch *e* is at step (*e* + 1) * steps_per_epoch
    (Keras, MLflow autologging and PyTorch Lightning all log an epoch's values when it ends).

    A product beyond int64 is refused rather than left to wrap around.

    >>> epochs_to_steps(pl.DataFrame({"epoch": [0, 1], "loss": [2.0, 1.0]}), 100).rows()
    [(100, 2.0), (200, 1.0)]
    """
    top = frame.get_column("epoch").max() if frame.height else None
    last = int(top) if isinstance(top, int) else 0  # merge_rows made the epochs Int64
    if (last + 1) * steps_per_epoch > INT64_MAX:
        raise IngestError(f"epoch {last} times {steps_per_epoch} steps per epoch is beyond "
                          f"2**63 - 1 = {INT64_MAX}, the largest step the store holds; check "
                          "the epoch column and steps_per_epoch", path=path)
    return frame.with_columns(((pl.col("epoch") + 1) * steps_per_epoch).alias("epoch")
                              ).rename({"epoch": "step"})


def steps_per_epoch(train_examples: int, batch_size: int) -> int:
    """Steps in one epoch when the last, partial batch is kept (Keras's and PyTorch's
    default).

    >>> steps_per_epoch(50_000, 128)
    391
    """
    return math.ceil(train_examples / batch_size)
