"""What the report shows for one workload, computed from the store.

>>> import tempfile, curvekit
>>> from curvekit.store.store import Store
>>> home = tempfile.mkdtemp()
>>> _ = curvekit.demo(home)  # the shipped demo data set
>>> data = workload_data(Store.open(home), "demo/digits/fc_128_128_128/sgd", bootstrap=0)
>>> data.goal.metric, data.goal.goal in data.goals
('val/classification_error', True)
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from curvekit.errors import CurvekitError
from curvekit.goals import Goal, default_goal, round_significant
from curvekit.measure import best, steps_to_result, trial_outcomes
from curvekit.runner.adaptive import adaptive_record
from curvekit.scaling import CriticalBatchFit, RegimeFit, fit_workload
from curvekit.selection import SCATTER_STATUSES
from curvekit.store.store import Store

__all__ = ["WorkloadPage", "goal_choices", "workload_data"]


@dataclass
class WorkloadPage:
    """Everything one workload's report page draws."""

    workload: str
    goal: Goal
    goals: list[float]
    batch_sizes: list[int]
    trial_counts: dict[str, int]
    steps: pl.DataFrame = field(repr=False)  # goal, batch_size, step
    optimal: pl.DataFrame = field(repr=False)  # batch_size, value
    scatter: pl.DataFrame = field(repr=False)  # trial_outcomes of every study
    best: pl.DataFrame = field(repr=False)  # batch_size, value
    fit: dict[str, Any] = field(default_factory=dict)
    regimes: RegimeFit | None = field(default=None, repr=False)  # drawn on the steps chart
    critical: CriticalBatchFit | None = field(default=None, repr=False)
    adaptive: dict[str, Any] | None = field(default=None, repr=False)  # its rounds, if any


def goal_choices(goal: Goal, best_values: list[float], *, limit: int = 5) -> list[float]:
    """The goal and the rule's goal at the quartiles of the best value per batch size.

    Each quartile is rounded to two significant figures toward the easier side (up for a
    metric to minimize), so every choice is reached by some batch sizes.

    >>> g = Goal("w", "val/error", 0.3, False, 100, "paper")
    >>> goal_choices(g, [0.1, 0.2, 0.25, 0.4])
    [0.18, 0.23, 0.29, 0.3]
    """
    values = [v for v in best_values if math.isfinite(v)]  # NaN and ±inf never count
    choices = {goal.goal}
    if len(values) >= 2:
        for q in statistics.quantiles(values, n=4, method="inclusive"):
            choices.add(round_significant(q, up=not goal.maximize))
    return sorted(choices)[:limit]


def workload_data(store: Store, workload: str, *, bootstrap: int = 200,
                  seed: int = 0) -> WorkloadPage:
    """Compute one workload's page: goals, curves, scatter, best values and the fit."""
    goal = default_goal(store, workload)
    selection, metric = goal.selection, goal.metric
    # Partial curves are the report's subject (it shows every goal), not a surprise.
    best_values = best(store, selection, explain=False)
    goals = goal_choices(goal, best_values[metric].to_list())
    curves = {g: steps_to_result(store, selection.with_goal(g), explain=False)
              for g in goals}  # goals includes goal.goal
    frames = [c.select(pl.lit(g).alias("goal"), "batch_size", "step") for g, c in curves.items()]
    optimal = curves[goal.goal].select("batch_size",
                                       pl.col("effective_learning_rate").alias("value"))
    # every trial of every study, COMPLETE and INFEASIBLE, as the paper's scatters show them
    scatter = trial_outcomes(store, selection.with_trials(None).with_statuses(SCATTER_STATUSES),
                             None)
    studies = store.trials(workload)
    counts = {s: int((studies["status"] == s).sum()) for s in
              ("COMPLETE", "INCOMPLETE", "INFEASIBLE")}
    regimes, critical = None, None
    try:
        result = fit_workload(store, selection, bootstrap_samples=bootstrap, seed=seed,
                              explain=False)
        fitted, regimes, critical = result.summary(), result.regimes, result.critical
    except CurvekitError as exc:
        fitted = {"note": str(exc)}
    return WorkloadPage(
        workload=workload, goal=goal, goals=goals,
        batch_sizes=sorted(store.studies(workload)["batch_size"].to_list()),
        trial_counts=counts, steps=pl.concat(frames), optimal=optimal, scatter=scatter,
        best=best_values.select("batch_size", pl.col(metric).alias("value")), fit=fitted,
        regimes=regimes, critical=critical, adaptive=adaptive_record(store, workload))
