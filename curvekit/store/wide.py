"""The wide per-trial frames notebooks want, built from the store's rows by pivots.

The store holds names as values: ``measurements.metric`` and ``parameters.name``. The frames
curvekit returns (:meth:`~curvekit.store.store.Store.trials`,
:meth:`~curvekit.store.store.Store.measurements`, the answers of ``best`` and
``steps_to_result``) show one column per metric or metaparameter: there a name is the label
of a column of a DataFrame, built by polars, never an identifier in SQL.

A frame already has columns of its own (``batch_size``, ``trial_id``, ``step``, ...), and a
metaparameter may be named like a metric. :func:`frame_names` is the one rule for a name
whose column is taken: it is shown as ``<name> (<kind>)`` (``step (metric)``,
``trial_id (metaparameter)``), then ``<name> (<kind> 2)`` and so on, whatever the name.
Names that differ only in case are different columns (``val/err`` and ``VAL/ERR``).

>>> frame_names(["batch_size", "step", "trial_id"], ["Step", "step", "val/err"], "metric")
{'Step': 'Step', 'step': 'step (metric)', 'val/err': 'val/err'}
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import polars as pl

from curvekit import structured

__all__ = ["EVALUATION", "frame_names", "parameters_frame", "pivot_measurements"]

EVALUATION = "\x00evaluation"
"""A working column of the measurement pivots (no name the name rule accepts holds NUL)."""


def frame_names(taken: Iterable[str], names: Iterable[str], kind: str) -> dict[str, str]:
    """The column each of ``names`` takes in a frame whose columns ``taken`` come first.

    In order, each name keeps its own text unless a column already has it; then it becomes
    ``<name> (<kind>)``, or the first free ``<name> (<kind> N)``, N = 2, 3, ...
    """
    used = set(taken)
    out: dict[str, str] = {}
    for name in names:
        column = name
        n = 1
        while column in used:
            column = f"{name} ({kind})" if n == 1 else f"{name} ({kind} {n})"
            n += 1
        used.add(column)
        out[name] = column
    return out


_NUMBER = {"float64": pl.Float64, "int64": pl.Int64, "bool": pl.Boolean, "null": pl.Boolean}


def _as_text() -> pl.Expr:
    """A parameter row's value as the text a column of mixed types holds: the text itself,
    canonical JSON for anything else (``0.5``, ``true``, ``[1,2]``)."""
    number = pl.col("number").map_elements(lambda v: structured.dumps(float(v)),
                                           return_dtype=pl.String)
    return (pl.when(pl.col("type") == "string").then(pl.col("text"))
            .when(pl.col("type") == "json").then(pl.col("text"))
            .when(pl.col("type") == "int64").then(pl.col("integer").cast(pl.String))
            .when(pl.col("type") == "bool")
            .then(pl.when(pl.col("integer") != 0).then(pl.lit("true")).otherwise(pl.lit("false")))
            .when(pl.col("type") == "float64").then(number)
            .otherwise(pl.lit(None, pl.String)))


def _values(kind: str) -> pl.Expr:
    if kind == "float64":
        return pl.col("number")
    if kind == "int64":
        return pl.col("integer")
    if kind == "bool":
        return pl.col("integer").cast(pl.Boolean)
    return _as_text()


def parameters_frame(rows: pl.DataFrame, types: Mapping[str, str], columns: Mapping[str, str]
                     ) -> pl.DataFrame:
    """One row per (batch_size, trial_id) of ``rows`` (a workload's parameters rows), one
    column per metaparameter of ``types`` (name -> its type), labelled by ``columns`` (name
    -> column, from :func:`frame_names`), in that order; null where a trial lacks one."""
    keys = rows.select("batch_size", "trial_id").unique(maintain_order=True)
    out = keys
    for kind in ("float64", "int64", "bool", "string"):  # "null": a column of nulls
        names = [n for n, t in types.items() if t == kind]
        if not names:
            continue
        part = (rows.filter(pl.col("name").is_in(names))
                .select("batch_size", "trial_id",
                        pl.col("name").replace_strict(dict(columns), return_dtype=pl.String),
                        _values(kind).alias("value")))
        wide = part.pivot(on="name", on_columns=[columns[n] for n in names],
                          index=["batch_size", "trial_id"], values="value",
                          aggregate_function="first")
        out = out.join(wide, on=["batch_size", "trial_id"], how="left", coalesce=True)
    for name, kind in types.items():
        if columns[name] not in out.columns:
            out = out.with_columns(pl.lit(None, _NUMBER.get(kind, pl.String)).alias(columns[name]))
        elif kind in _NUMBER:
            out = out.with_columns(pl.col(columns[name]).cast(_NUMBER[kind]))
        else:
            out = out.with_columns(pl.col(columns[name]).cast(pl.String))
    return out.select("batch_size", "trial_id", *(columns[n] for n in types))


def pivot_measurements(rows: pl.LazyFrame, metrics: Sequence[str], columns: Mapping[str, str]
                       ) -> pl.LazyFrame:
    """The long ``rows`` (batch_size, trial_id, step, metric, value) of one workload as one
    row per evaluation (``batch_size, trial_id, step``, then one column per metric labelled
    by ``columns``), sorted by (batch_size, trial_id, step), evaluations of one step of a
    trial in their order.

    Every metric of a measurements file has one row per evaluation, in the file's order,
    so the k-th row of a metric at a (trial, step) and the k-th row of another belong to
    the same evaluation: that is the join.
    """
    keys = ["batch_size", "trial_id", "step"]
    numbered = rows.with_columns(
        pl.int_range(pl.len()).over([*keys, "metric"]).alias(EVALUATION))
    index = [*keys, EVALUATION]
    evaluations = numbered.select(index).unique()
    if metrics:
        valued = (numbered.filter(pl.col("metric").is_in(list(metrics)))
                  .with_columns(pl.col("metric").replace_strict(dict(columns),
                                                                return_dtype=pl.String))
                  .pivot(on="metric", on_columns=[columns[m] for m in metrics], index=index,
                         values="value", aggregate_function="first"))
        evaluations = evaluations.join(valued, on=index, how="left", coalesce=True)
    return (evaluations.sort(index)
            .select(*keys, *(pl.col(columns[m]).cast(pl.Float64) for m in metrics)))
