"""The paper's measurements, computed in DuckDB over the store.

Definitions (Shallue et al. 2019; ``docs/querying.md``, "The paper's measurements"):

* **Loaded trials** of a study: those with an allowed status (COMPLETE by default), and with
  ``trials=N`` only the first N of them by trial id.
* **Budgets** keep rows with ``step <= step_budget`` and ``batch_size * step <=
  example_budget``.
* **Steps to result** at a batch size: among the loaded trials' rows within the budgets, the
  rows whose metric is strictly below the goal (strictly above when maximizing) qualify;
  NaN, null and ±infinity never qualify (an infinite loss is a diverged evaluation, not a
  result: the one deliberate difference from the paper's reproduction notebook, which
  changes nothing where every value is finite). The first qualifying row by
  (step, trial_id) gives the steps and the winning trial. A batch size with no qualifying
  row is dropped.
* **Best measurement** at a batch size: the minimum (maximum when maximizing) of the metric
  over the same rows, NaN and ±infinity ignored; ties go to the smaller (step, trial_id).

Both return one row per batch size with the winning trial's metaparameters and its
effective learning rate ``learning_rate / (1 - momentum)`` (momentum 0 when the optimizer has
none). Filters on the workload reach DuckDB's Parquet scan, so only that workload's files
are read.

**Empty answers are explained.** When a batch size of the workload is missing from a result
(or every one is), :func:`explain_empty` says why, and both functions give its lines as
:class:`EmptyResultWarning` warnings: no loaded trial reaches the goal there (and the best
value reached, at which batch size), trials left out by their status (how many, and whether
they would reach the goal), a ``trials=N`` cap, budgets that cut every row. Maximizing a
metric whose name says lower is better (an error, a loss), or the reverse, gives a
:class:`DirectionWarning`. ``explain=False`` turns both off (the figures and the report,
where partial curves are expected, pass it).

Every function here takes the store and a :class:`~curvekit.selection.Selection`, the one
value that says which rows count; it is carried whole down to the SQL.

Examples
--------
>>> import tempfile, curvekit
>>> from curvekit.store.store import Store
>>> home = tempfile.mkdtemp()
>>> _ = curvekit.demo(home)  # the shipped demo data set
>>> sgd = Selection("demo/digits/fc_128_128_128/sgd", "val/classification_error", 0.1)
>>> curve = steps_to_result(Store.open(home), sgd)
>>> curve.columns[:4]
['batch_size', 'step', 'trial_id', 'val/classification_error']
>>> explain_empty(Store.open(home), sgd.with_goal(0.001))[0][:67]
'demo/digits/fc_128_128_128/sgd: no loaded trial reaches val/classif'
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from curvekit.errors import DirectionWarning, EmptyResultWarning, QueryError
from curvekit.records import STATUSES
from curvekit.selection import SCATTER_STATUSES, Selection, Subset
from curvekit.store.wide import frame_names

if TYPE_CHECKING:
    from curvekit.store.store import Store

__all__ = ["DirectionWarning", "EmptyResultWarning", "Selection", "Subset", "best",
           "best_measurement", "direction_problem", "explain_empty", "metric_direction",
           "searched_metaparameters", "steps_to_result", "trial_hits", "trial_outcomes",
           "warn_explained"]


def _loaded_trials(store: Store, selection: Selection) -> tuple[str, list[object]]:
    """SQL (and parameters) of the loaded trials: (batch_size, trial_id).

    ``selection.subset`` = (parameter, value) keeps, after the first-N selection, the trials
    whose parameter rounds to ``value`` at 2 decimals; a trial without the parameter counts
    as 0. (The statuses and the trial cap were checked when the selection was made.)
    Metaparameters are rows: the subset's name is a value (``name = ?``), never SQL.
    """
    statuses, trials, subset = selection.statuses, selection.trials, selection.subset
    workload = selection.workload
    status_list = ", ".join("?" for _ in statuses)
    params: list[object] = []
    if subset is None:
        source = store.source("trials", workload)
        value = ""
    else:
        source = (f"(select t.*, coalesce(p.number, 0) as subset_value "
                  f"from {store.source('trials', workload)} t left join "
                  f"(select batch_size, trial_id, number from "
                  f"{store.source('parameters', workload)} where name = ?) p "
                  f"on t.batch_size = p.batch_size and t.trial_id = p.trial_id)")
        params.append(subset[0])
        value = ", subset_value"
    loaded = (f"select batch_size, trial_id, row_number() over (partition by batch_size "
              f"order by trial_id) as rank{value} from {source} "
              f"where status in ({status_list})")
    params += list(statuses)
    keep = []
    if trials is not None:
        keep.append(f"rank <= {int(trials)}")
    if subset is not None:
        keep.append("round(subset_value, 2) = round(?, 2)")
        params.append(float(subset[1]))
    if keep:
        loaded = (f"select batch_size, trial_id, rank from ({loaded}) "
                  f"where {' and '.join(keep)}")
    return loaded, params


def _metric_rows(store: Store, selection: Selection, *, qualify: bool
                 ) -> tuple[str, list[object]]:
    """SQL (and parameters) of the workload's rows of the selection's metric within the
    budgets, every trial's (:func:`_loaded_rows` keeps the loaded trials').

    With ``qualify``, only rows strictly beyond the selection's goal are kept. The metric is
    a value (``metric = ?``): its rows are one range of the workload's files, found by the
    row groups' metric statistics.
    """
    workload, metric = selection.workload, selection.metric
    store.check_metric(workload, metric)
    where: list[str] = ["metric = ?"]
    params: list[object] = [metric]
    if selection.step_budget is not None:
        where.append("step <= ?")
        params.append(float(selection.step_budget))
    if selection.example_budget is not None:
        where.append("batch_size * step <= ?")
        params.append(float(selection.example_budget))
    # The one rule for every measurement: only finite values are results. DuckDB orders NaN
    # above every number, and -inf would beat any goal (an infinite loss is a diverged
    # evaluation, not a result), so NaN and +-inf never qualify and are never best.
    where.append("value is not null and isfinite(value)")
    if qualify:
        where.append(f"value {'>' if selection.maximize else '<'} ?")
        params.append(float(_goal_of(selection)))
    return (f"select batch_size, trial_id, step, value "
            f"from {store.source('measurements', workload)} where {' and '.join(where)}",
            params)


def _loaded_rows(store: Store, selection: Selection, *, qualify: bool
                 ) -> tuple[str, list[object]]:
    """SQL (and parameters) of the loaded trials' rows within the budgets (see
    :func:`_metric_rows`)."""
    rows, params = _metric_rows(store, selection, qualify=qualify)
    loaded, trial_params = _loaded_trials(store, selection)
    sql = (f"select m.batch_size, m.trial_id, m.step, m.value from ({rows}) m "
           f"semi join ({loaded}) t on m.batch_size = t.batch_size and m.trial_id = t.trial_id")
    return sql, params + trial_params


def _goal_of(selection: Selection) -> float:
    """The selection's goal; a measurement against a goal refuses a selection without one."""
    if selection.goal is None:
        raise QueryError(f"steps to result of {selection.workload} needs a goal for "
                         f"{selection.metric}; give one (--goal G, Selection(..., goal=G))")
    return selection.goal


def trial_hits(store: Store, selection: Selection) -> pl.DataFrame:
    """Each loaded trial's first step beyond the selection's goal (null if it never
    reaches it).

    Steps to result at a batch size is the minimum of these; resampling them is how
    :func:`curvekit.scaling.bootstrap` measures uncertainty.
    """
    rows, params = _loaded_rows(store, selection, qualify=True)
    loaded, trial_params = _loaded_trials(store, selection)
    sql = (f"select t.batch_size, t.trial_id, h.step from ({loaded}) t left join "
           f"(select batch_size, trial_id, min(step) as step from ({rows}) group by all) h "
           f"on t.batch_size = h.batch_size and t.trial_id = h.trial_id "
           f"order by t.batch_size, t.trial_id")
    return store.query(sql, [*trial_params, *params])


def searched_metaparameters(store: Store, selection: Selection) -> int:
    """How many metaparameters the loaded trials searched: the names that take more than
    one value among the loaded trials of at least one batch size (a value is its number,
    else its text, else its type; a trial without the metaparameter counts as one more
    value).

    The calibrated intervals of S_min read it (:func:`curvekit.intervals.critical_intervals`):
    the more metaparameters a search tunes, the more slowly its best trial approaches the
    optimum.

    >>> import tempfile, curvekit
    >>> from curvekit.store.store import Store
    >>> home = tempfile.mkdtemp()
    >>> _ = curvekit.demo(home)
    >>> searched_metaparameters(Store.open(home), Selection(
    ...     "demo/digits/fc_128_128_128/sgd", "val/classification_error", 0.1))
    3
    """
    loaded, params = _loaded_trials(store, selection)
    values = (f"select t.batch_size, t.trial_id, p.name, coalesce(cast(p.number as varchar), "
              f"p.text, p.type) as value from ({loaded}) t join "
              f"{store.source('parameters', selection.workload)} p "
              f"on t.batch_size = p.batch_size and t.trial_id = p.trial_id")
    counts = (f"select batch_size, name, count(distinct value) as different, count(*) as given "
              f"from ({values}) group by batch_size, name")
    trials = (f"select batch_size, count(*) as trials from ({loaded}) group by batch_size")
    sql = (f"select count(distinct c.name) as searched from ({counts}) c join ({trials}) n "
           f"on c.batch_size = n.batch_size where c.different > 1 or c.given < n.trials")
    frame = store.query(sql, [*params, *params])
    return int(frame["searched"][0]) if frame.height else 0


def _first_hits(store: Store, selection: Selection) -> pl.DataFrame:
    """Steps to result's winners, ``batch_size, step, trial_id, value`` ordered by batch
    size: per batch size, the first qualifying row by (step, trial_id), with the best value
    among the qualifying rows at that step of that trial (a log may repeat a step).

    One pass over the rows, in plain aggregates (one row per trial): each trial's two
    smallest qualifying steps and the value at its smallest; the loaded trials among those;
    the smallest (step, trial_id) per batch size. Where a winner's two smallest steps
    differ, the value read in that pass is the only one at its step. Only a winner that
    repeats its step (its two smallest are equal) has its rows at that step read again,
    for the best value among them. It is the first row by (step, trial_id, value) (value
    negated when maximizing).
    """
    rows, params = _metric_rows(store, selection, qualify=True)
    loaded, trial_params = _loaded_trials(store, selection)
    pick = "max" if selection.maximize else "min"
    hits = (f"select h.batch_size, h.trial_id, h.steps[1] as step, "
            f"coalesce(h.steps[2] = h.steps[1], false) as repeated, h.value "
            f"from (select batch_size, trial_id, min(step, 2) as steps, "
            f"arg_min(value, step) as value from ({rows}) group by batch_size, trial_id) h "
            f"semi join ({loaded}) t on h.batch_size = t.batch_size and h.trial_id = t.trial_id")
    # one row per trial: (step, trial_id) orders the rows, value and repeated ride along
    winners = store.query(
        f"select batch_size, w.step as step, w.trial_id as trial_id, w.value as value, "
        f"w.repeated as repeated from (select batch_size, min({{'step': step, "
        f"'trial_id': trial_id, 'value': value, 'repeated': repeated}}) as w "
        f"from ({hits}) group by batch_size) order by batch_size", [*params, *trial_params])
    repeated = winners.filter(pl.col("repeated"))
    if repeated.height:
        keys = ["batch_size", "trial_id", "step"]
        best = store.query(
            f"select m.batch_size, m.trial_id, m.step, {pick}(m.value) as value "
            f"from ({rows}) m semi join (select unnest(?) as batch_size, unnest(?) as trial_id, "
            f"unnest(?) as step) w on m.batch_size = w.batch_size "
            f"and m.trial_id = w.trial_id and m.step = w.step group by all",
            [*params, *(repeated.get_column(k).to_list() for k in keys)])
        winners = winners.join(best, on=keys, how="left", suffix="\x00best",
                               maintain_order="left").with_columns(
            pl.when(pl.col("repeated")).then(pl.col("value\x00best"))
            .otherwise(pl.col("value")).alias("value"))
    return winners.select("batch_size", "step", "trial_id", "value")


def _best_rows(store: Store, selection: Selection) -> tuple[str, list[object]]:
    """SQL (and parameters) of best's winners: per batch size, the loaded trials' best
    value, and among the rows that have it the first by (step, trial_id).

    Aggregating first keeps the work on plain numbers: each trial's best value (one row
    per trial), the loaded trials' best per batch size; then only the rows holding it are
    ordered. It is the first row by (value, step, trial_id) (value negated when maximizing).
    """
    rows, params = _metric_rows(store, selection, qualify=False)
    loaded, trial_params = _loaded_trials(store, selection)
    pick = "max" if selection.maximize else "min"
    per_trial = (f"select h.batch_size, h.value from (select batch_size, trial_id, "
                 f"{pick}(value) as value from ({rows}) group by batch_size, trial_id) h "
                 f"semi join ({loaded}) t on h.batch_size = t.batch_size "
                 f"and h.trial_id = t.trial_id")
    best_values = (f"select batch_size, {pick}(value) as value from ({per_trial}) "
                   f"group by batch_size")
    holders = (f"select m.batch_size, m.trial_id, m.step, m.value from ({rows}) m "
               f"join ({best_values}) b on m.batch_size = b.batch_size and m.value = b.value "
               f"semi join ({loaded}) t on m.batch_size = t.batch_size "
               f"and m.trial_id = t.trial_id")
    sql = (f"select batch_size, w.step as step, w.trial_id as trial_id, w.value as value "
           f"from (select batch_size, min({{'step': step, 'trial_id': trial_id, "
           f"'value': value}}) as w from ({holders}) group by batch_size)")
    # the parameters in the order their ``?`` appear in the text
    return sql, [*params, *params, *trial_params, *trial_params]


_OWN = ("batch_size", "step", "trial_id", "effective_learning_rate")
"""The columns of a measurement's answer that are curvekit's own (see
:func:`curvekit.store.wide.frame_names` for a metric or metaparameter named like one)."""


def _lr_momentum(store: Store, workload: str) -> pl.DataFrame:
    """Each trial's learning rate (null if none) and momentum (0 when the optimizer has
    none): ``batch_size, trial_id, learning_rate, momentum``, read by name from the
    workload's metaparameters."""
    names = [n for n in ("learning_rate", "momentum") if n in store.parameter_columns(workload)]
    frame = store.parameters(workload, names=names, taken=("batch_size", "trial_id"))
    lr = pl.col("learning_rate") if "learning_rate" in names else pl.lit(None, pl.Float64)
    momentum = (pl.col("momentum").fill_null(0) if "momentum" in names else pl.lit(0))
    return frame.select("batch_size", "trial_id", lr.cast(pl.Float64).alias("learning_rate"),
                        momentum.cast(pl.Float64).alias("momentum"))


def _with_parameters(store: Store, selection: Selection, winners: pl.DataFrame
                     ) -> pl.DataFrame:
    """The winners (``batch_size, step, trial_id, value``, by batch size) with the winning
    trials' metaparameters and effective learning rate."""
    workload = selection.workload
    names = store.parameter_columns(workload)
    metric = frame_names(_OWN, [selection.metric], "metric")[selection.metric]
    wide = store.parameters(workload, names=names, taken=(*_OWN, metric))
    # working columns named with NUL, which no metaparameter's column can be
    rates = _lr_momentum(store, workload).rename({"learning_rate": "\x00lr",
                                                  "momentum": "\x00momentum"})
    frame: pl.DataFrame = (
        winners.rename({"value": metric})
        .join(wide, on=["batch_size", "trial_id"], how="left", maintain_order="left")
        .join(rates, on=["batch_size", "trial_id"], how="left", maintain_order="left")
        .with_columns((pl.col("\x00lr") / (1 - pl.col("\x00momentum")))
                      .alias("effective_learning_rate"))
        .drop("\x00lr", "\x00momentum"))
    return frame


def steps_to_result(store: Store, selection: Selection, *,
                    explain: bool = True) -> pl.DataFrame:
    """Steps to reach the selection's goal at each batch size (see the module docstring).

    Returns columns ``batch_size, step, trial_id, <metric>``, the winning trial's
    metaparameters, and ``effective_learning_rate``. Batch sizes left out are explained by
    :class:`EmptyResultWarning` warnings unless ``explain=False``. The command
    ``curvekit steps-to-result`` prints this table.

    >>> import tempfile, pathlib, curvekit
    >>> home = pathlib.Path(tempfile.mkdtemp())
    >>> _ = curvekit.demo(home)
    >>> store = curvekit.open(home)
    >>> demo = store.workloads()[0]
    >>> curve = curvekit.steps_to_result(store, curvekit.Selection(
    ...     demo, "val/classification_error", 0.1), explain=False)
    >>> curve.columns[:3], curve.height > 0
    (['batch_size', 'step', 'trial_id'], True)
    """
    _goal_of(selection)
    # Duplicate rows at one (trial, step) cannot change the step or the trial; the best
    # value among them is reported.
    frame = _with_parameters(store, selection, _first_hits(store, selection))
    if explain:
        warn_explained(store, selection, frame)
    return frame


def best(store: Store, selection: Selection, *, explain: bool = True) -> pl.DataFrame:
    """The best value of the selection's metric at each batch size and the row it came from.

    Returns the same columns as :func:`steps_to_result`; ``step`` is where the best value
    was measured. The selection's goal plays no part (the best value is the best, whatever
    the goal). Batch sizes left out (no loaded row there) are explained by
    :class:`EmptyResultWarning` warnings unless ``explain=False``. The command
    ``curvekit best`` prints this table; ``best_measurement`` is its former name.

    >>> import tempfile, pathlib, curvekit
    >>> home = pathlib.Path(tempfile.mkdtemp())
    >>> _ = curvekit.demo(home)
    >>> store = curvekit.open(home)
    >>> table = curvekit.best(store, curvekit.Selection(
    ...     store.workloads()[0], "val/classification_error"))
    >>> bool((table["val/classification_error"] < 0.5).all())
    True
    """
    selection = selection.with_goal(None)
    first, params = _best_rows(store, selection)
    frame = _with_parameters(store, selection, store.query(
        f"select w.batch_size, w.step, w.trial_id, w.value from ({first}) w "
        f"order by w.batch_size", params))
    if explain:
        warn_explained(store, selection, frame)
    return frame


best_measurement = best
"""The former name of :func:`best`, kept for code written against it."""


def trial_outcomes(store: Store, selection: Selection, batch_size: int | None
                   ) -> pl.DataFrame:
    """Every loaded trial of one study with its outcome, for a learning-rate/momentum scatter.

    Returns ``batch_size, trial_id, status, learning_rate, momentum, step, outcome, winner``:
    ``step`` is the trial's first row beating the goal within the budgets (null if none);
    ``outcome`` is "Goal Achieved" or "Goal Not Achieved" for a COMPLETE trial and
    "Infeasible" for an INFEASIBLE one; ``winner`` marks the trial that wins steps to result
    over all the loaded rows, INFEASIBLE trials' rows included when the selection loads
    them (as the paper's scatter does: ``statuses=SCATTER_STATUSES``).
    ``batch_size=None`` returns every study, with a winner in each.
    """
    bad = sorted(set(selection.statuses) - set(SCATTER_STATUSES))
    if bad:
        raise QueryError(f"a scatter shows COMPLETE and INFEASIBLE trials, not {bad}")
    workload = selection.workload
    hits = trial_hits(store, selection)
    if batch_size is not None:
        hits = hits.filter(pl.col("batch_size") == batch_size)
        if hits.is_empty():
            have = store.studies(workload)["batch_size"].to_list()
            raise QueryError(f"{workload} has no loaded trials at batch size {batch_size}; "
                             f"its batch sizes are {', '.join(map(str, have))}")
    params = store.query(f"select batch_size, trial_id, status "
                         f"from {store.source('trials', workload)}").join(
        _lr_momentum(store, workload), on=["batch_size", "trial_id"], how="left")
    table = hits.join(params, on=["batch_size", "trial_id"], how="left")
    winners = (table.filter(pl.col("step").is_not_null()).sort("batch_size", "step", "trial_id")
               .group_by("batch_size", maintain_order=True).first()
               .select("batch_size", pl.col("trial_id").alias("winning_trial")))
    outcome = (pl.when(pl.col("status") == "INFEASIBLE").then(pl.lit("Infeasible"))
               .when(pl.col("step").is_not_null()).then(pl.lit("Goal Achieved"))
               .otherwise(pl.lit("Goal Not Achieved")))
    return table.join(winners, on="batch_size", how="left").select(
        "batch_size", "trial_id", "status", pl.col("learning_rate").cast(pl.Float64),
        pl.col("momentum").cast(pl.Float64), "step", outcome.alias("outcome"),
        (pl.col("trial_id") == pl.col("winning_trial")).fill_null(False).alias("winner"),
    ).sort("batch_size", "trial_id")


# -- explaining empty and partial answers ------------------------------------------------

# Words in a metric's name that say which way is better. goals.py infers the direction of a
# default goal from the higher-is-better words; these are the two lists for warnings.
_LOWER_IS_BETTER = ("error", "loss", "cross_entropy", "perplexity")
_HIGHER_IS_BETTER = ("accuracy", "average_precision", "auc", "precision", "recall", "f1")
_LISTED = 6  # batch sizes named in one line before "and N more"
_PACKAGE = str(Path(__file__).resolve().parent)


def metric_direction(metric: str) -> bool | None:
    """True if the metric's name says higher is better, False if lower, None if it says
    neither (or both).

    >>> metric_direction("val/cross_entropy_error"), metric_direction("val/accuracy")
    (False, True)
    >>> metric_direction("lr") is None
    True
    """
    name = metric.lower()
    higher = any(word in name for word in _HIGHER_IS_BETTER)
    lower = any(word in name for word in _LOWER_IS_BETTER)
    return None if higher == lower else higher


def direction_problem(metric: str, maximize: bool) -> str | None:
    """A sentence when ``maximize`` goes against what the metric's name says, else None.

    >>> direction_problem("val/classification_error", True)[:60]
    "--maximize (maximize=True) on 'val/classification_error', wh"
    >>> direction_problem("val/classification_error", False) is None
    True
    """
    higher = metric_direction(metric)
    if higher is None or higher == maximize:
        return None
    if maximize:
        return (f"--maximize (maximize=True) on {metric!r}, whose name says lower is better "
                "(an error or a loss): a row qualifies when it is above the goal, so the "
                "first rows of training (step 0) win, and 'best' is the worst value; "
                "drop --maximize")
    return (f"{metric!r} is minimized, but its name says higher is better: a row qualifies "
            "when it is below the goal, so the first rows of training (step 0) win, and "
            "'best' is the worst value; pass --maximize (maximize=True)")


def _sizes(batch_sizes: Iterable[int]) -> str:
    items = sorted(batch_sizes)
    text = ", ".join(map(str, items[:_LISTED]))
    return text + (f" and {len(items) - _LISTED} more" if len(items) > _LISTED else "")


def _plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else (many or one + 's')}"


def _statuses_hint(statuses: Sequence[str]) -> str:
    options = " ".join(f"--status {s}" for s in statuses)
    return f"{options} (statuses={tuple(statuses)!r})"


def explain_empty(store: Store, selection: Selection, *,
                  result: pl.DataFrame | None = None) -> list[str]:
    """Why a measurement has no row at some of the workload's batch sizes: one sentence per
    reason, each starting with the workload's name; ``[]`` when every batch size is there.

    With a goal in ``selection`` the measurement is :func:`steps_to_result`, without one
    :func:`best`, under the same selection (trials, budgets, statuses, subset). ``result``
    is the measurement already made (its ``batch_size`` column is all that is read); it is
    computed when not given. The sentences say, for the missing batch sizes: the best value
    reached where no trial reaches the goal, and at which batch size; batch sizes where
    nothing is left to measure, and why (no trial of an allowed status, budgets below the
    first measurement, no values); trials left out by their status, by ``trials=N`` or by
    the budgets, and whether with them the goal would be reached (with the option that
    includes them).
    """
    workload, metric, goal = selection.workload, selection.metric, selection.goal
    statuses = selection.statuses
    if result is None:
        result = _measure(store, selection)
    have = set(result["batch_size"].to_list())
    missing = sorted(set(store.studies(workload)["batch_size"].to_list()) - have)
    if not missing:
        return []
    target = selection.target if goal is not None else f"a {metric} value"
    lines: list[str] = []
    reached_best = (best(store, selection, explain=False)
                    .filter(pl.col("batch_size").is_in(missing)) if goal is not None
                    else pl.DataFrame({"batch_size": []}, schema={"batch_size": pl.Int64}))
    if reached_best.height:
        reached = ", ".join(
            f"{value:.6g} at batch size {b} (trial {t}, step {step})"
            for b, value, t, step in reached_best.select("batch_size", metric, "trial_id",
                                                         "step").head(_LISTED).iter_rows())
        more = (f" and {reached_best.height - _LISTED} more"
                if reached_best.height > _LISTED else "")
        lines.append(f"{workload}: no loaded trial reaches {target} at batch "
                     f"{'size' if reached_best.height == 1 else 'sizes'} "
                     f"{_sizes(reached_best['batch_size'].to_list())}; the best value "
                     f"reached is {reached}{more}")
    empty = [b for b in missing if b not in set(reached_best["batch_size"].to_list())]
    counts = store.query(
        f"select batch_size, status, count(*) as n from {store.source('trials', workload)} "
        f"where batch_size in ({', '.join('?' for _ in missing)}) group by all", missing)
    by_size: dict[int, dict[str, int]] = {}
    for b, status, n in counts.iter_rows():
        by_size.setdefault(int(b), {})[str(status)] = int(n)
    allowed = {b: sum(n for s, n in by_size.get(b, {}).items() if s in statuses)
               for b in missing}
    no_status = [b for b in empty if not allowed[b]]
    if no_status:
        seen: dict[str, int] = {}
        for b in no_status:
            for status, n in by_size.get(b, {}).items():
                seen[status] = seen.get(status, 0) + n
        have_text = ", ".join(f"{n} {s}" for s, n in sorted(seen.items())) or "no trials"
        lines.append(f"{workload}: at batch {'size' if len(no_status) == 1 else 'sizes'} "
                     f"{_sizes(no_status)} no trial has an allowed status "
                     f"({', '.join(statuses)}); there are {have_text}")
    rest = [b for b in empty if allowed[b]]
    if rest and selection.budgeted:
        first = _first_steps(store, selection, rest)
        cut = [b for b in rest if b in first]
        if cut:
            where = ", ".join(f"step {first[b]} at batch size {b}" for b in cut[:_LISTED])
            lines.append(f"{workload}: the budgets ({_budget_text(selection)})"
                         f" leave no rows at batch {'size' if len(cut) == 1 else 'sizes'} "
                         f"{_sizes(cut)}; the first measurements are at {where}")
        rest = [b for b in rest if b not in cut]
    if rest:
        lines.append(f"{workload}: the loaded trials have no {metric} value at batch "
                     f"{'size' if len(rest) == 1 else 'sizes'} {_sizes(rest)}")
    lines += _relaxations(store, selection, missing, by_size, allowed)
    return lines


def _relaxations(store: Store, selection: Selection, missing: list[int],
                 by_size: dict[int, dict[str, int]], allowed: dict[int, int]) -> list[str]:
    """Trials the selection leaves out at the missing batch sizes, and what they would add."""
    workload, goal = selection.workload, selection.goal
    verb = "reach the goal" if goal is not None else "have values"
    lines = []
    statuses = selection.statuses
    for status in (s for s in STATUSES if s not in statuses):
        n = sum(by_size.get(b, {}).get(status, 0) for b in missing)
        if not n:
            continue
        wider = (*statuses, status)
        gained = _reached(store, selection.with_statuses(wider), missing)
        head = (f"{workload}: {_plural(n, status + ' trial')} at the batch sizes left out "
                f"{'is' if n == 1 else 'are'} excluded by status (allowed: "
                f"{', '.join(statuses)}); ")
        them = "it" if n == 1 else "them"
        lines.append(head + (f"with {them}, batch {'size' if len(gained) == 1 else 'sizes'} "
                             f"{_sizes(gained)} would {verb}: use {_statuses_hint(wider)}"
                             if gained else f"with {them}, none would {verb} either"))
    trials = selection.trials
    capped = [b for b in missing if trials is not None and allowed[b] > trials]
    if capped:
        assert trials is not None
        gained = _reached(store, selection.with_trials(None), capped)
        more = sum(allowed[b] - trials for b in capped)
        lines.append(f"{workload}: --trials {trials} (trials={trials}) leaves out "
                     f"{_plural(more, 'trial')} of an allowed status at batch "
                     f"{'size' if len(capped) == 1 else 'sizes'} {_sizes(capped)}; "
                     + (f"with them, batch {'size' if len(gained) == 1 else 'sizes'} "
                        f"{_sizes(gained)} would {verb}" if gained
                        else f"with them, none would {verb} either"))
    if goal is not None and selection.budgeted:
        gained = _reached(store, selection.without_budgets(), missing)
        if gained:
            lines.append(f"{workload}: without the budgets ({_budget_text(selection)}), batch "
                         f"{'size' if len(gained) == 1 else 'sizes'} {_sizes(gained)} would "
                         f"{verb}")
    return lines


def _measure(store: Store, selection: Selection) -> pl.DataFrame:
    """Steps to result (with a goal) or the best measurement under ``selection``,
    unexplained."""
    if selection.goal is not None:
        return steps_to_result(store, selection, explain=False)
    return best(store, selection, explain=False)


def _reached(store: Store, selection: Selection, among: Iterable[int]) -> list[int]:
    """The batch sizes of ``among`` that the measurement under ``selection`` has."""
    have = set(_measure(store, selection)["batch_size"].to_list())
    return sorted(set(among) & have)


def _budget_text(selection: Selection) -> str:
    parts = []
    if selection.step_budget is not None:
        parts.append(f"step <= {selection.step_budget:g}")
    if selection.example_budget is not None:
        parts.append(f"batch_size * step <= {selection.example_budget:g}")
    return ", ".join(parts)


def _first_steps(store: Store, selection: Selection, batch_sizes: list[int]
                 ) -> dict[int, int]:
    """The first step with a value of each batch size's loaded trials, budgets ignored."""
    rows, params = _loaded_rows(store, selection.without_budgets(), qualify=False)
    frame = store.query(f"select batch_size, min(step) as step from ({rows}) group by all",
                        params)
    return {int(b): int(s) for b, s in frame.iter_rows() if int(b) in batch_sizes}


def _stacklevel() -> int:
    """The stack level of the first caller outside curvekit, so that a warning points at the
    user's line (``warnings.warn``'s ``skip_file_prefixes`` needs Python 3.12)."""
    level, frame = 1, sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1  # type: ignore[assignment]
    return level


def warn_explained(store: Store, selection: Selection, result: pl.DataFrame) -> list[str]:
    """Give :func:`direction_problem` as a :class:`DirectionWarning` and
    :func:`explain_empty`'s sentences as :class:`EmptyResultWarning` warnings; return the
    latter. The one place steps to result, best, fits and plots explain themselves."""
    problem = direction_problem(selection.metric, selection.maximize)
    if problem is not None:
        warnings.warn(DirectionWarning(problem), stacklevel=_stacklevel())
    lines = explain_empty(store, selection, result=result)
    for line in lines:
        warnings.warn(EmptyResultWarning(line), stacklevel=_stacklevel())
    return lines
