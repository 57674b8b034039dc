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
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from curvekit.errors import IngestError

__all__ = ["RunLog", "data_line", "merge_rows"]

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


def _axis_checks(frame: pl.DataFrame, axis: str, path: str, line_of: LineOf) -> np.ndarray:
    """The axis column as int64, refusing empty, fractional, negative or infinite values."""
    values = frame.get_column(axis)
    if values.null_count():
        row = int(values.is_null().arg_true()[0])
        raise IngestError(f"no {axis} value on this row; every row needs its {axis}",
                          path=path, line=line_of(row))
    raw = values.cast(pl.Float64).to_numpy()
    with np.errstate(invalid="ignore"):
        ok = np.isfinite(raw) & (raw == np.floor(raw)) & (raw >= 0)
    if not ok.all():
        row = int(np.flatnonzero(~ok)[0])
        raise IngestError(f"{axis} {values[row]!r} is not a non-negative integer",
                          path=path, line=line_of(row))
    return raw.astype(np.int64)


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
