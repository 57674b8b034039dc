"""The paper's measurements, computed in DuckDB over the store.

Definitions (Shallue et al. 2019; ``docs/measurements.md``):

* **Loaded trials** of a study: those with an allowed status (COMPLETE by default), and with
  ``trials=N`` only the first N of them by trial id.
* **Budgets** keep rows with ``step <= step_budget`` and ``batch_size * step <=
  example_budget``.
* **Steps to result** at a batch size: among the loaded trials' rows within the budgets, the
  rows whose metric is strictly below the goal (strictly above when maximizing) qualify;
  NaN and null never qualify. The first qualifying row by (step, trial_id) gives the steps
  and the winning trial. A batch size with no qualifying row is dropped.
* **Best measurement** at a batch size: the minimum (maximum when maximizing) of the metric
  over the same rows, NaN ignored; ties go to the smaller (step, trial_id).

Both return one row per batch size with the winning trial's metaparameters and its
effective learning rate ``learning_rate / (1 - momentum)`` (momentum 0 when the optimizer has
none). Filters on the workload reach DuckDB's Parquet scan, so only that workload's files
are read.

Examples
--------
>>> import tempfile, pathlib
>>> from curvekit.release.synthetic import tiny_archive
>>> from curvekit.release.convert import convert
>>> from curvekit.store.store import Store
>>> tmp = pathlib.Path(tempfile.mkdtemp())
>>> _ = convert(tmp / "a.tar.bz2", tmp, manifest=tiny_archive(tmp / "a.tar.bz2"))
>>> curve = steps_to_result(Store.open(tmp), "lm1b/lstm/nesterov_momentum",
...                         "val/cross_entropy_error", 6.0)
>>> curve.columns[:4]
['batch_size', 'step', 'trial_id', 'val/cross_entropy_error']
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import polars as pl

from curvekit.errors import QueryError
from curvekit.release.manifest import STATUSES
from curvekit.store.sql import quote_identifier

if TYPE_CHECKING:
    from curvekit.store.store import Store

__all__ = ["Subset", "best_measurement", "steps_to_result", "trial_hits", "trial_outcomes"]

Subset = tuple[str, float]
"""(parameter, value): the loaded trials whose parameter equals value (e.g. a label smoothing)."""


def _loaded_trials(store: Store, workload: str, trials: int | None,
                   statuses: Sequence[str], subset: Subset | None = None
                   ) -> tuple[str, list[object]]:
    """SQL (and parameters) of the loaded trials: (batch_size, trial_id).

    ``subset`` = (parameter, value) keeps, after the first-N selection, the trials whose
    parameter rounds to ``value`` at 2 decimals; a trial without the parameter counts as 0.
    """
    bad = sorted(set(statuses) - set(STATUSES))
    if bad or not statuses:
        raise QueryError(f"unknown statuses {bad or list(statuses)}; choose from "
                         f"{', '.join(STATUSES)}")
    if trials is not None and trials < 1:
        raise QueryError(f"trials must be a positive number of trials, got {trials}")
    status_list = ", ".join("?" for _ in statuses)
    loaded = (f"select batch_size, trial_id, row_number() over (partition by batch_size "
              f"order by trial_id) as rank from {store.source('trials', workload)} "
              f"where status in ({status_list})")
    params: list[object] = list(statuses)
    if subset is not None:
        name = subset[0]
        column = (f"coalesce({quote_identifier(name)}, 0)"
                  if name in store.parameter_columns(workload) else "0")
        loaded = loaded.replace(" as rank from", f" as rank, {column} as subset_value from", 1)
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


def _loaded_rows(store: Store, workload: str, metric: str, *, maximize: bool,
                 trials: int | None, step_budget: float | None,
                 example_budget: float | None, statuses: Sequence[str],
                 qualify: float | None, subset: Subset | None = None
                 ) -> tuple[str, list[object]]:
    """SQL (and parameters) of the loaded trials' rows within the budgets.

    With ``qualify`` set, only rows strictly beyond that goal are kept.
    """
    store.check_metric(workload, metric)
    loaded, trial_params = _loaded_trials(store, workload, trials, statuses, subset)
    col = quote_identifier(metric)
    where: list[str] = []
    params: list[object] = []
    if step_budget is not None:
        where.append("step <= ?")
        params.append(float(step_budget))
    if example_budget is not None:
        where.append("batch_size * step <= ?")
        params.append(float(example_budget))
    # DuckDB orders NaN above every number, so exclude it explicitly: NaN never qualifies.
    where.append(f"{col} is not null and not isnan({col})")
    if qualify is not None:
        where.append(f"{col} {'>' if maximize else '<'} ?")
        params.append(float(qualify))
    sql = (f"select m.batch_size, m.trial_id, m.step, m.{col} as value "
           f"from (select batch_size, trial_id, step, {col} "
           f"from {store.source('measurements', workload)} where {' and '.join(where)}) m "
           f"semi join ({loaded}) t on m.batch_size = t.batch_size and m.trial_id = t.trial_id")
    return sql, params + trial_params


def trial_hits(
    store: Store,
    workload: str,
    metric: str,
    goal: float,
    *,
    maximize: bool = False,
    trials: int | None = None,
    step_budget: float | None = None,
    example_budget: float | None = None,
    statuses: Sequence[str] = ("COMPLETE",),
    subset: Subset | None = None,
) -> pl.DataFrame:
    """Each loaded trial's first qualifying step (null if it never reaches the goal).

    Steps to result at a batch size is the minimum of these; resampling them is how
    :func:`curvekit.fit.bootstrap` measures uncertainty.
    """
    rows, params = _loaded_rows(store, workload, metric, maximize=maximize, trials=trials,
                                step_budget=step_budget, example_budget=example_budget,
                                statuses=statuses, qualify=goal, subset=subset)
    loaded, trial_params = _loaded_trials(store, workload, trials, statuses, subset)
    sql = (f"select t.batch_size, t.trial_id, h.step from ({loaded}) t left join "
           f"(select batch_size, trial_id, min(step) as step from ({rows}) group by all) h "
           f"on t.batch_size = h.batch_size and t.trial_id = h.trial_id "
           f"order by t.batch_size, t.trial_id")
    return store.query(sql, [*trial_params, *params])


def _first(rows: str, order: tuple[str, ...], maximize: bool) -> str:
    """Per batch size, the row that sorts first by ``order``, in one aggregation pass.

    ``key`` is the value, negated when maximizing; DuckDB compares structs field by field,
    so ``min`` of a struct is the first row in that order without sorting the rows.
    """
    fields = {"step": "step", "trial_id": "trial_id",
              "key": "-value" if maximize else "value"}
    struct = ", ".join(f"'{f}': {fields[f]}" for f in order)
    return (f"select batch_size, w.step as step, w.trial_id as trial_id, w.value as value "
            f"from (select batch_size, min({{{struct}, 'value': value}}) as w from ({rows}) "
            f"group by batch_size)")


def _lr_momentum(names: Sequence[str], prefix: str = "") -> tuple[str, str]:
    """SQL for a trial's learning rate (null if none) and momentum (0 when the optimizer has
    none), from the workload's metaparameter columns ``names``."""
    lr = f"{prefix}learning_rate" if "learning_rate" in names else "null"
    momentum = f"coalesce({prefix}momentum, 0)" if "momentum" in names else "0"
    return lr, momentum


def _with_parameters(store: Store, workload: str, rows: str, params: list[object],
                     metric: str) -> pl.DataFrame:
    names = store.parameter_columns(workload)
    extra = "".join(f", t.{quote_identifier(n)}" for n in names)
    lr, momentum = _lr_momentum(names, "t.")
    sql = (f"select w.batch_size, w.step, w.trial_id, "
           f"w.value as {quote_identifier(metric)}{extra}, "
           f"{lr} / (1 - {momentum}) as effective_learning_rate "
           f"from ({rows}) w join {store.source('trials', workload)} t "
           f"on w.batch_size = t.batch_size and w.trial_id = t.trial_id order by w.batch_size")
    frame: pl.DataFrame = store.query(sql, params)
    return frame


def steps_to_result(
    store: Store,
    workload: str,
    metric: str,
    goal: float,
    *,
    maximize: bool = False,
    trials: int | None = None,
    step_budget: float | None = None,
    example_budget: float | None = None,
    statuses: Sequence[str] = ("COMPLETE",),
    subset: Subset | None = None,
) -> pl.DataFrame:
    """Steps to reach ``goal`` at each batch size (see the module docstring).

    Returns columns ``batch_size, step, trial_id, <metric>``, the winning trial's
    metaparameters, and ``effective_learning_rate``.
    """
    rows, params = _loaded_rows(store, workload, metric, maximize=maximize, trials=trials,
                                step_budget=step_budget, example_budget=example_budget,
                                statuses=statuses, qualify=goal, subset=subset)
    # Duplicate rows at one (trial, step) cannot change the step or the trial; the best
    # value among them is reported.
    first = _first(rows, ("step", "trial_id", "key"), maximize)
    return _with_parameters(store, workload, first, params, metric)


def best_measurement(
    store: Store,
    workload: str,
    metric: str,
    *,
    maximize: bool = False,
    trials: int | None = None,
    step_budget: float | None = None,
    example_budget: float | None = None,
    statuses: Sequence[str] = ("COMPLETE",),
    subset: Subset | None = None,
) -> pl.DataFrame:
    """The best value of ``metric`` at each batch size and the row it came from.

    Returns the same columns as :func:`steps_to_result`; ``step`` is where the best value
    was measured.
    """
    rows, params = _loaded_rows(store, workload, metric, maximize=maximize, trials=trials,
                                step_budget=step_budget, example_budget=example_budget,
                                statuses=statuses, qualify=None, subset=subset)
    best = _first(rows, ("key", "step", "trial_id"), maximize)
    return _with_parameters(store, workload, best, params, metric)


def trial_outcomes(
    store: Store,
    workload: str,
    metric: str,
    goal: float,
    batch_size: int | None,
    *,
    maximize: bool = False,
    trials: int | None = None,
    step_budget: float | None = None,
    example_budget: float | None = None,
    statuses: Sequence[str] = ("COMPLETE", "INFEASIBLE"),
) -> pl.DataFrame:
    """Every loaded trial of one study with its outcome, for a learning-rate/momentum scatter.

    Returns ``batch_size, trial_id, status, learning_rate, momentum, step, outcome, winner``:
    ``step`` is the trial's first row beating the goal within the budgets (null if none);
    ``outcome`` is "Goal Achieved" or "Goal Not Achieved" for a COMPLETE trial and
    "Infeasible" for an INFEASIBLE one; ``winner`` marks the trial that wins steps to result
    over all the loaded rows, INFEASIBLE trials' rows included (as the paper's scatter does).
    ``batch_size=None`` returns every study, with a winner in each.
    """
    bad = sorted(set(statuses) - {"COMPLETE", "INFEASIBLE"})
    if bad:
        raise QueryError(f"a scatter shows COMPLETE and INFEASIBLE trials, not {bad}")
    hits = trial_hits(store, workload, metric, goal, maximize=maximize, trials=trials,
                      step_budget=step_budget, example_budget=example_budget,
                      statuses=statuses)
    if batch_size is not None:
        hits = hits.filter(pl.col("batch_size") == batch_size)
        if hits.is_empty():
            have = store.studies(workload)["batch_size"].to_list()
            raise QueryError(f"{workload} has no loaded trials at batch size {batch_size}; "
                             f"its batch sizes are {', '.join(map(str, have))}")
    lr, momentum = _lr_momentum(store.parameter_columns(workload))
    params = store.query(
        f"select batch_size, trial_id, status, {lr} as learning_rate, {momentum} as momentum "
        f"from {store.source('trials', workload)}")
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
