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

import polars as pl

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
    TensorBoard hparams, Lightning's hparams.yaml).
    """

    key: str
    path: str
    frame: pl.DataFrame
    params: dict[str, Any] = field(default_factory=dict)
    aliases: tuple[str, ...] = ()
    by_epoch: bool = False
    started: float | None = None  # start time, when the log records one (MLflow)

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


def _axis_checks(frame: pl.DataFrame, axis: str, path: str, line_of: LineOf) -> pl.DataFrame:
    values = frame.get_column(axis)
    if values.null_count():
        row = int(values.is_null().arg_true()[0])
        raise IngestError(f"no {axis} value on this row; every row needs its {axis}",
                          path=path, line=line_of(row))
    ok = values.is_finite() & (values == values.floor()) & (values >= 0)
    if not ok.all():
        row = int((~ok).arg_true()[0])
        raise IngestError(f"{axis} {values[row]!r} is not a non-negative integer",
                          path=path, line=line_of(row))
    return frame.with_columns(pl.col(axis).cast(pl.Int64))


def merge_rows(frame: pl.DataFrame, path: str, line_of: LineOf, axis: str = "step"
               ) -> pl.DataFrame:
    """One row per ``axis`` value, sorted; sparse rows merged; conflicting values refused.

    ``frame`` has the ``axis`` column (any numeric type; it must hold non-negative integers)
    and Float64 metric columns.
    """
    frame = _axis_checks(frame, axis, path, line_of)
    steps = frame.get_column(axis)
    if len(steps) < 2 or bool((steps.diff().drop_nulls() > 0).all()):
        return frame
    metrics = [c for c in frame.columns if c != axis]
    if not metrics:
        return frame.unique(axis).sort(axis)
    counts = (frame.group_by(axis)
              .agg(pl.col(c).drop_nulls().n_unique() for c in metrics)
              .filter(pl.any_horizontal(pl.col(c) > 1 for c in metrics))
              .sort(axis))
    if counts.height:
        bad = counts.row(0, named=True)
        step = bad[axis]
        column = next(c for c in metrics if bad[c] > 1)
        rows = (frame.with_row_index("_row")
                .filter((pl.col(axis) == step) & pl.col(column).is_not_null()))
        first, second = rows.row(0, named=True), rows.row(1, named=True)
        raise IngestError(
            f"{axis} {step} appears twice with different {column!r} values "
            f"({first[column]!r} on line {line_of(first['_row'])}, {second[column]!r} on line "
            f"{line_of(second['_row'])}); keep one row per {axis} and metric (a resumed run "
            "repeats steps: remove the rows of the abandoned attempt, or import the attempts "
            "as separate runs)", path=path, line=line_of(second["_row"]))
    return (frame.group_by(axis)
            .agg(pl.col(c).drop_nulls().first() for c in metrics)
            .sort(axis)
            .select(frame.columns))
