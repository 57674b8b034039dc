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

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from curvekit.errors import IngestError
from curvekit.ingest.select import ALL, FileFilter

__all__ = ["INT64_MAX", "MAX_COLUMNS", "IngestWarning", "ReadOptions", "RunLog", "data_line",
           "exact_integers", "merge_rows", "overflow_warning"]

MAX_COLUMNS = 10_000
"""The most columns one log may have, and the most metric columns one workload may have.

Every metric is a column of the workload's Parquet files and of the store's views, and
each query binds them all: a logger writes a few dozen metrics, and a model that logs
per-layer statistics (a ResNet-50's ~160 layers, a few statistics each) stays well below
10,000. Beyond that the input is far more likely a wrong file (or a hostile one) than a
training curve, and ``add`` refuses it after reading the header alone."""

INT64_MAX = 2**63 - 1
"""The largest step (and integer metaparameter) the store holds: steps are int64 end to end."""


@dataclass(frozen=True)
class ReadOptions:
    """What a reader is told beyond the source: the columns ``--map`` makes the step
    (``step_renames``) or drops (``drop``, left out before any value is parsed), and which
    files to read (``select``: ``--include``/``--exclude``)."""

    step_renames: tuple[str, ...] = ()
    drop: frozenset[str] = frozenset()
    select: FileFilter = ALL


class IngestWarning(UserWarning):
    """An import went through, but something in a log deserves a look (a value too large
    for a 64-bit float, stored as infinity). ``curvekit add`` prints it as ``Warning: ...``."""

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
    """

    key: str
    path: str
    frame: pl.DataFrame
    params: dict[str, Any] = field(default_factory=dict)
    aliases: tuple[str, ...] = ()
    by_epoch: bool = False
    started: float | None = None  # start time, when the log records one (MLflow)
    step_offset: int = 0

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
    """Line numbers of a CSV file's data rows, counting the header and skipping blank lines.

    >>> data_line(b"step,a\\n0,1\\n\\n5,2\\n")(1)
    4
    """
    def line_of(row: int) -> int:
        seen = -1
        for number, text in enumerate(data.splitlines(), 1):
            if number == 1 or not text.strip():
                continue
            seen += 1
            if seen == row:
                return number
        return row + 2

    return line_of


def _exact_integer(text: str) -> int | None:
    """The integer ``text`` spells exactly (``100``, ``100.0``, ``1e3``), else None.

    Decimal arithmetic, never a float: ``9007199254740993`` stays itself. The exponent is
    checked before converting, so ``1e999999999`` costs nothing.
    """
    stripped = text.strip()
    if len(stripped) <= 20:
        try:
            return int(stripped)
        except ValueError:
            pass
    try:
        number = Decimal(stripped)
    except InvalidOperation:
        return None
    if not number.is_finite():
        return None
    if number.adjusted() >= 19:  # |number| >= 10**19 > 2**63: beyond int64 whatever it is
        return INT64_MAX + 1 if number > 0 else -INT64_MAX - 2
    if number != number.to_integral_value():
        return None
    return int(number)


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
        value = _exact_integer(str(text))
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


def merge_rows(frame: pl.DataFrame, path: str, line_of: LineOf, axis: str = "step"
               ) -> pl.DataFrame:
    """One row per ``axis`` value, sorted; sparse rows merged; conflicting values refused.

    ``frame`` has the ``axis`` column (any numeric type; it must hold non-negative integers)
    and Float64 metric columns. Vectorized with NumPy: a log of thousands of rows merges in
    well under a millisecond.
    """
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
        mask = np.ones(n_groups, dtype=bool)
        mask[uniq] = False
        reference = out[groups]
        mine = values[rows]
        same = (mine == reference) | (np.isnan(mine) & np.isnan(reference))
        if not same.all():
            bad = int(np.flatnonzero(~same)[0])
            g = int(groups[bad])
            found = (g, number, name, int(order[rows[head[np.searchsorted(uniq, g)]]]),
                     int(order[rows[bad]]))
            conflict = found if conflict is None or found[:2] < conflict[:2] else conflict
        columns[name] = pa.array(out, mask=mask)
    if conflict is not None:
        g, _, name, one, two = conflict
        step = int(sorted_steps[np.flatnonzero(first)[g]])
        a, b = frame.get_column(name)[one], frame.get_column(name)[two]
        raise IngestError(
            f"{axis} {step} appears twice with different {name!r} values "
            f"({a!r} on line {line_of(one)}, {b!r} on line {line_of(two)}); keep one row per "
            f"{axis} and metric (a resumed run repeats steps: remove the rows of the abandoned "
            "attempt, or import the attempts as separate runs)", path=path, line=line_of(two))
    merged = pl.from_arrow(pa.table(columns))
    assert isinstance(merged, pl.DataFrame)
    return merged
