"""What a measurement selects: one value carried whole from the command line to the SQL.

A :class:`Selection` names a workload, a metric and, for steps to result, a goal, with
the choices that decide which rows count: the direction, the first N trials of each study,
the step and example budgets, the trial statuses and a metaparameter subset. Every
measurement (:func:`curvekit.steps_to_result`, :func:`curvekit.best`,
:func:`curvekit.trial_outcomes`), fit and plot takes one, so a choice made once (a
``--step-budget`` on the command line, a figure's curve) reaches every query unchanged.

>>> s = Selection("cifar_10/resnet_8/sgd", "val/classification_error", 0.3, trials=100)
>>> s.target
'val/classification_error < 0.3'
>>> s.with_goal(0.25).goal, s.goal
(0.25, 0.3)
>>> Selection("w/m/o", "val/error", statuses=("DONE",))
Traceback (most recent call last):
...
curvekit.errors.QueryError: unknown statuses ['DONE']; choose from COMPLETE, INCOMPLETE, INFEASIBLE
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

from curvekit.errors import QueryError
from curvekit.records import STATUSES

__all__ = ["DEFAULT_STATUSES", "SCATTER_STATUSES", "Selection", "Subset", "check_goal"]

Subset = tuple[str, float]
"""(parameter, value): the loaded trials whose parameter equals value (e.g. a label smoothing)."""

DEFAULT_STATUSES: tuple[str, ...] = ("COMPLETE",)
"""The statuses a measurement loads unless told otherwise: the paper's (finished trials)."""
SCATTER_STATUSES: tuple[str, ...] = ("COMPLETE", "INFEASIBLE")
"""The statuses a learning-rate/momentum scatter shows (as the paper's scatters do)."""


def check_goal(goal: float | None) -> None:
    """Refuse a goal that is not a finite number (``None``, no goal, passes).

    Only finite values are results (NaN and ±infinity never qualify), so a goal of NaN or
    ±infinity could never be reached, or would be reached by everything; it is a mistake
    to say so at once rather than an empty answer.

    >>> check_goal(0.3)
    >>> check_goal(float("nan"))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    curvekit.errors.QueryError: goal nan is not a finite number; ... e.g. --goal 0.3 (goal=0.3)
    """
    if goal is None:
        return
    if isinstance(goal, bool) or not isinstance(goal, int | float) or not math.isfinite(goal):
        raise QueryError(
            f"goal {goal!r} is not a finite number; a goal is a value of the metric that a "
            "row must beat (strictly below it, or above it when maximizing): give a finite "
            "number, e.g. --goal 0.3 (goal=0.3)")


@dataclass(frozen=True)
class Selection:
    """The rows a measurement reads, and the goal it measures against.

    ``workload`` and ``metric`` name the column; ``goal`` is the target of steps to result
    (``None`` for the best measurement, or for a figure's curve at the paper's goal);
    ``maximize`` says higher is better. The loaded trials of a study are those whose status
    is in ``statuses``, with ``trials=N`` the first N of them by trial id, and with
    ``subset=(parameter, value)`` only those whose parameter rounds to ``value``;
    ``step_budget`` keeps rows with ``step <= step_budget`` and ``example_budget`` rows
    with ``batch_size * step <= example_budget``.

    Checked on construction: the statuses are known and not empty, the goal (if any) is a
    finite number (:func:`check_goal`), ``trials`` is at least 1 (a
    :class:`~curvekit.errors.QueryError` says which value is wrong). ``statuses`` may
    be any sequence and is kept as a tuple, so that selections compare and hash by value.

    >>> Selection("lm1b/lstm/nesterov_momentum", "val/cross_entropy_error", 3.9,
    ...           step_budget=25_000).step_budget
    25000
    >>> Selection("w/m/o", "val/error", trials=0)
    Traceback (most recent call last):
    ...
    curvekit.errors.QueryError: trials must be a positive number of trials, got 0
    """

    workload: str
    metric: str
    goal: float | None = None
    maximize: bool = False
    trials: int | None = None
    step_budget: float | None = None
    example_budget: float | None = None
    statuses: tuple[str, ...] = DEFAULT_STATUSES
    subset: Subset | None = None

    def __post_init__(self) -> None:
        statuses = tuple(self.statuses)
        # A frozen dataclass sets its fields once; a list given for statuses is kept as a
        # tuple so that two equal selections are equal values (and hashable).
        object.__setattr__(self, "statuses", statuses)
        bad = sorted(set(statuses) - set(STATUSES))
        if bad or not statuses:
            raise QueryError(f"unknown statuses {bad or list(statuses)}; choose from "
                             f"{', '.join(STATUSES)}")
        check_goal(self.goal)
        if self.trials is not None and self.trials < 1:
            raise QueryError(
                f"trials must be a positive number of trials, got {self.trials}")

    @property
    def budgeted(self) -> bool:
        """Whether a step or an example budget cuts the rows."""
        return self.step_budget is not None or self.example_budget is not None

    @property
    def target(self) -> str:
        """The goal in words, ``metric < goal`` (``>`` when maximizing); without a goal, the
        metric's name.

        >>> Selection("w/m/o", "val/average_precision", 0.31, maximize=True).target
        'val/average_precision > 0.31'
        """
        if self.goal is None:
            return self.metric
        return f"{self.metric} {'>' if self.maximize else '<'} {self.goal}"

    def with_goal(self, goal: float | None, *, maximize: bool | None = None) -> Selection:
        """The same selection measured against ``goal`` (and direction, if given)."""
        return dataclasses.replace(
            self, goal=goal, maximize=self.maximize if maximize is None else maximize)

    def with_metric(self, metric: str) -> Selection:
        """The same selection of another metric column (a figure's fallback metric)."""
        return dataclasses.replace(self, metric=metric)

    def with_workload(self, workload: str) -> Selection:
        """The same selection of another workload (a plot's compared workloads)."""
        return dataclasses.replace(self, workload=workload)

    def with_statuses(self, statuses: Sequence[str]) -> Selection:
        """The same selection loading trials of ``statuses``."""
        return dataclasses.replace(self, statuses=tuple(statuses))

    def with_trials(self, trials: int | None) -> Selection:
        """The same selection with another first-N cap (``None``: every trial)."""
        return dataclasses.replace(self, trials=trials)

    def without_budgets(self) -> Selection:
        """The same selection over every step."""
        return dataclasses.replace(self, step_budget=None, example_budget=None)
