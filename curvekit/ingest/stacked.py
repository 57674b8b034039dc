"""Several runs stacked in one long-format CSV log, and the column that tells them apart.

A sweep's results written as one table hold the rows of one run, then the rows of the next:
a column names the run (``run``, ``run_id``, ``trial``, ``seed``, ``name``, ...) and the step
starts again where each run begins. The rule, whatever the column is called: **a column is
a run column when its value is never missing and changes exactly where the time axis (the
step column, or ``epoch``) goes back, at least once, and nowhere else.** A per-run constant
that changes between runs without a restart of the step (a learning-rate schedule, the
epoch) is no run column; neither is a column of several values within one run.

Several columns may qualify (``run`` and ``seed`` both change at every restart): they split
the rows the same way, and the run column is the first text column, else the first of
:data:`RUN_COLUMN_NAMES`, else the first in the file. ``curvekit add --run-column NAME``
names the column instead, and then the step need not start again (the rows of each value
are one run, in file order).

>>> run_column_candidates([0, 10, 0, 10], {"seed": ["1", "1", "2", "2"],
...                                        "lr": ["0.1", "0.1", "0.1", "0.1"]})
['seed']
>>> run_column_candidates([0, 10, 20, 30], {"seed": ["1", "1", "2", "2"]})
[]
>>> groups(["a", "a", "b", "b", "a"])
{'a': [0, 1, 4], 'b': [2, 3]}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = ["RUN_COLUMN_NAMES", "choose", "groups", "restarts", "run_column_candidates"]

RUN_COLUMN_NAMES = ("run", "run_id", "run_name", "name", "trial", "trial_id", "seed",
                    "experiment", "config", "group")
"""Names preferred for the run column when several numeric columns qualify by the rule."""


def restarts(axis: Sequence[int | None]) -> list[int]:
    """The rows where the time axis goes back below the row before it (missing values are
    passed over).

    >>> restarts([0, 5, 10, 0, 5, None, 0])
    [3, 6]
    """
    out, last = [], None
    for row, value in enumerate(axis):
        if value is None:
            continue
        if last is not None and value < last:
            out.append(row)
        last = value
    return out


def _changes(values: Sequence[object]) -> list[int] | None:
    """The rows where ``values`` differ from the row before; None when one is missing."""
    if any(v is None for v in values):
        return None
    return [row for row in range(1, len(values)) if values[row] != values[row - 1]]


def run_column_candidates(axis: Sequence[int | None],
                          columns: Mapping[str, Sequence[object]]) -> list[str]:
    """The columns of ``columns`` that the rule makes run columns (module docs), in order."""
    back = restarts(axis)
    if not back or all(b - a < 2 for a, b in zip([0, *back], [*back, len(axis)],
                                                  strict=True)):
        return []  # runs of one row each: any column that varies would do; no curves
    return [name for name, values in columns.items()
            if all(_names_a_run(v) for v in values) and _changes(values) == back]


def _names_a_run(value: object) -> bool:
    """A value that may name a run: text, or a whole number (a seed, a trial id); a
    fraction (``0.5``) is a measurement."""
    if not isinstance(value, str):
        return False
    try:
        number = float(value)
    except ValueError:
        return True
    return number.is_integer() and "." not in value and "e" not in value.lower()


def choose(candidates: Sequence[str], text: Sequence[str]) -> str:
    """The run column among ``candidates`` (all split the rows alike): the first text
    column, else the first of :data:`RUN_COLUMN_NAMES`, else the first.

    >>> choose(["seed", "run"], text=[]), choose(["seed", "tag"], text=["tag"])
    ('run', 'tag')
    """
    for name in candidates:
        if name in text:
            return name
    named = [n for n in RUN_COLUMN_NAMES if n in candidates]
    return named[0] if named else candidates[0]


def groups(values: Sequence[str]) -> dict[str, list[int]]:
    """The rows of each value, values in order of first appearance."""
    out: dict[str, list[int]] = {}
    for row, value in enumerate(values):
        out.setdefault(value, []).append(row)
    return out
