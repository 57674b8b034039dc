"""The goals the paper's figures use for each workload.

The manifest gives each release workload a ``paper_goal``: the metric, the goal and its
direction, from the figure spec's §5 (the Figure 1 goal, else the goal the figures use
most). Four workloads have no such goal; for them the spec's **rule** applies
(:func:`rule_goal`): the best measurement per batch size over the workload's first N
COMPLETE trials, the largest of these over batch sizes (the smallest for a maximized
metric), rounded *up* to two significant figures in decimal arithmetic (*down* for a
maximized metric), so that every batch size with a finite best value reaches it.

>>> round_significant(0.012345, up=True), round_significant(0.31999, up=False)
(0.013, 0.31)
>>> rule_goal([0.012, 0.0283, 0.02], maximize=False), rule_goal([0.3, 0.1], maximize=False)
(0.029, 0.31)
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from typing import TYPE_CHECKING

import polars as pl

from curvekit.errors import QueryError
from curvekit.measure import best
from curvekit.release.manifest import Manifest, load_manifest
from curvekit.selection import Selection, check_goal

if TYPE_CHECKING:
    from curvekit.store.store import Store

__all__ = ["PD1_RULE", "Goal", "above", "default_goal", "goal_source", "paper_goal", "pd1_goal",
           "round_significant", "rule_goal"]


@dataclass(frozen=True)
class Goal:
    """A steps-to-result target for a workload, and where it comes from."""

    workload: str
    metric: str
    goal: float
    maximize: bool
    trials: int
    source: str

    def __post_init__(self) -> None:
        check_goal(self.goal)  # a rule or a manifest never yields a goal NaN or ±infinity

    @property
    def selection(self) -> Selection:
        """What steps to result at this goal selects: the metric, the goal, its direction
        and the first ``trials`` trials of each study.

        >>> Goal("w/m/o", "val/error", 0.3, False, 100, "Fig 1").selection.target
        'val/error < 0.3'
        """
        return Selection(self.workload, self.metric, self.goal, self.maximize, self.trials)


def goal_source(goal: Goal) -> str:
    """Where ``goal`` comes from, in words, for charts and pages.

    >>> goal_source(Goal("w", "val/error", 0.3, False, 100, "Fig 1"))
    "the paper's goal (Fig 1)"
    >>> goal_source(Goal("w", "val/error", 0.3, False, 100, "origin"))
    'the goal recorded with the workload'
    """
    if goal.source == "rule":
        return "computed from the best values by a rule (docs/fits.md)"
    if goal.source == "origin":
        return "the goal recorded with the workload"
    if goal.source == PD1_RULE:
        return "computed: just above the worst batch size's best value (PD1 has no goals)"
    return f"the paper's goal ({goal.source})"


def round_significant(value: float, *, up: bool, digits: int = 2) -> float:
    """Round to ``digits`` significant figures, up or down, in decimal arithmetic."""
    d = Decimal(repr(value))
    if d == 0:
        return 0.0
    quantum = Decimal(1).scaleb(d.adjusted() - digits + 1)
    rounded = (d / quantum).to_integral_value(rounding=ROUND_CEILING if up else ROUND_FLOOR)
    return float(rounded * quantum)


def rule_goal(best_values: Sequence[float], *, maximize: bool, digits: int = 2) -> float:
    """The spec's rule for a workload the paper gives no goal (Figure 23): the largest of
    the best values per batch size (the smallest when maximizing), rounded up (down) to
    ``digits`` significant figures in decimal arithmetic. A goal must be beaten strictly,
    so where the rounding lands exactly on that value the next ``digits``-figure value
    beyond it is taken: every batch size with a finite best value reaches the goal.

    >>> rule_goal([0.31, 0.2], maximize=True), rule_goal([0.10, 0.2], maximize=True)
    (0.19, 0.099)
    >>> rule_goal([0.99], maximize=False)
    1.0
    """
    finite = [v for v in best_values if math.isfinite(v)]
    if not finite:
        raise QueryError("no finite best value to derive a goal from")
    worst = min(finite) if maximize else max(finite)
    goal = Decimal(repr(round_significant(worst, up=not maximize, digits=digits)))
    if goal == Decimal(repr(worst)):
        # a tenth of the last figure beyond, rounded outward: the next value of the grid
        nudge = Decimal(1).scaleb(goal.adjusted() - digits)
        goal = Decimal(repr(round_significant(float(goal - nudge if maximize else goal + nudge),
                                              up=not maximize, digits=digits)))
    return float(goal)


def paper_goal(store: Store, workload: str, manifest: Manifest | None = None) -> Goal:
    """The goal the paper's figures use for ``workload`` (see the module docstring).

    Looks in ``manifest`` (default: the one the store was built from), then in the
    release's manifest.
    """
    store.split_workload(workload)
    entry, spec = None, None
    for source in (manifest or store.manifest(), load_manifest()):
        entry = next((w for w in source.workloads if w.get("name") == workload), None) \
            if source is not None else None
        spec = None if entry is None else entry.get("paper_goal")
        if spec is not None:
            break
    if entry is None or spec is None:
        raise QueryError(f"the paper gives no goal for {workload!r}; pass --metric and --goal")
    trials = int(entry.get("default_trials", 100))
    metric, maximize = spec["metric"], bool(spec["maximize"])
    if spec.get("goal") is not None:
        return Goal(workload, metric, float(spec["goal"]), maximize, trials, spec["source"])
    values = best(store, Selection(workload, metric, maximize=maximize, trials=trials),
                  explain=False)
    if values.is_empty():
        raise QueryError(f"{workload!r} has no {metric} values to derive its goal from")
    return Goal(workload, metric, rule_goal(values[metric].to_list(), maximize=maximize),
                maximize, trials, "rule")


PD1_RULE = "pd1-rule"
"""The source of :func:`pd1_goal`'s goals."""
PD1_METRIC = "val/classification_error"


def above(value: float, digits: int = 2) -> float:
    """The smallest number of ``digits`` significant figures strictly above ``value``.

    >>> above(0.3961), above(0.32), above(0.0)
    (0.4, 0.33, 0.0)
    """
    up = round_significant(value, up=True, digits=digits)
    if up > value or value == 0:
        return up
    d = Decimal(repr(value))
    return float(Decimal(repr(up)) + Decimal(1).scaleb(d.adjusted() - digits + 1))


def pd1_goal(store: Store, workload: str) -> Goal:
    """PD1's default goal for a PD1 workload (PD1 publishes no goals): on
    ``val/classification_error``, over every COMPLETE trial, the best value of each batch
    size; the goal is the smallest two-significant-figure number strictly above the
    largest of them, so that every batch size of the workload reaches it (``<`` is strict).

    The paper's rule (the median over batch sizes) would leave half of a PD1 workload's
    two or three batch sizes short of the goal.
    """
    counts = store.trials(workload).group_by("batch_size").len()["len"].to_list()
    values = best(store, Selection(workload, PD1_METRIC, maximize=False), explain=False)
    if values.is_empty():
        raise QueryError(f"{workload!r} has no {PD1_METRIC} values to derive its goal from; "
                         "pass --metric and --goal")
    worst = max(values[PD1_METRIC].to_list())
    return Goal(workload, PD1_METRIC, above(worst), False, max(counts, default=1), PD1_RULE)


# Metrics tried, in order, for a workload the paper gives no goal (imported, new runs).
_PREFERRED = ("val/classification_error", "val/cross_entropy_error", "val/average_precision",
              "val/loss", "valid/classification_error", "valid/cross_entropy_error")
_HIGHER_IS_BETTER = ("accuracy", "average_precision", "auc", "precision", "recall", "f1")


def _with_curves(store: Store, workload: str, metrics: list[str]) -> set[str]:
    """The metrics of ``workload`` that some trial logged at two steps or more."""
    frame = store.measurements(workload, lazy=True)
    assert isinstance(frame, pl.LazyFrame)
    names = frame.collect_schema().names()[3:]  # batch_size, trial_id, step, then metrics
    most = frame.group_by("batch_size", "trial_id").agg(
        pl.col(n).count() for n in names).select(pl.col(n).max() for n in names).collect()
    return {m for m, n in zip(metrics, names, strict=False)
            if most.height and int(most.get_column(n)[0] or 0) >= 2}


def default_goal(store: Store, workload: str) -> Goal:
    """The paper's goal for a release workload; for a PD1 workload :func:`pd1_goal`; for
    any other, the goal its origin records
    (``origin["goal"]`` given to :func:`curvekit.store.update.add_workload`, as the demo
    does), else the rule on a default metric.

    The default metric is the first of ``val/classification_error``,
    ``val/cross_entropy_error``, ``val/average_precision``, ``val/loss`` (an imported loss
    not known to be the cross-entropy) the workload has, else its first
    validation metric, else its first metric, among the metrics with a curve (two values or
    more in some trial): a one-value summary (``avg_test_acc``, logged once at the end) is
    never the default while a curve exists. Names containing accuracy, precision, AUC,
    recall or F1 are maximized. The goal is the median over batch sizes of the best value
    (over all COMPLETE trials), rounded as the spec's rule rounds: a goal about half the
    batch sizes reach, for a workload of unknown difficulty.

    >>> import tempfile, curvekit
    >>> from curvekit.store.store import Store
    >>> home = tempfile.mkdtemp()
    >>> _ = curvekit.demo(home)  # the shipped demo data set
    >>> default_goal(Store.open(home), "demo/digits/fc_128_128_128/sgd").metric
    'val/classification_error'
    """
    try:
        return paper_goal(store, workload)
    except QueryError:
        pass
    # every trial of each study: the largest study's trial count
    counts = store.trials(workload).group_by("batch_size").len()["len"].to_list()
    trials = max(counts, default=1)
    origin = store.metadata.get("added", {}).get(workload, {}).get("origin", {})
    if origin.get("dataset") == "pd1":
        return pd1_goal(store, workload)
    recorded = origin.get("goal")
    if recorded:  # a goal the workload's origin states (e.g. the demo's documented goal)
        return Goal(workload, str(recorded["metric"]), float(recorded["goal"]),
                    bool(recorded.get("maximize", False)), trials, "origin")
    metrics = store.metrics(workload)
    if not metrics:
        raise QueryError(f"{workload!r} has no metric values")
    curves = _with_curves(store, workload, metrics)
    ranked = [m for m in metrics if m in curves] or metrics  # a one-value summary is no curve
    metric = next((m for m in _PREFERRED if m in ranked), None) or next(
        (m for m in ranked if m.startswith(("val", "valid"))), ranked[0])
    maximize = any(word in metric.lower() for word in _HIGHER_IS_BETTER)
    values = best(store, Selection(workload, metric, maximize=maximize), explain=False)
    if values.is_empty():
        raise QueryError(f"{workload!r} has no {metric} values to derive a goal from")
    median = statistics.median(values[metric].to_list())
    return Goal(workload, metric, round_significant(median, up=not maximize), maximize, trials,
                "rule")
