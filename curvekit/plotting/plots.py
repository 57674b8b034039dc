"""Plots of any workload in the store, drawn by the same builders as the paper's figures.

Examples
--------
>>> import tempfile, pathlib
>>> from curvekit.release.synthetic import generate_archive
>>> from curvekit.store.build import convert
>>> from curvekit.store.store import Store
>>> tmp = pathlib.Path(tempfile.mkdtemp())
>>> m = generate_archive(tmp / "a.tar.bz2", workloads=["cifar_10/resnet_8/sgd"],
...                      max_trials_per_study=6, evals_scale=0.1, jobs=1)
>>> _ = convert(tmp / "a.tar.bz2", tmp, manifest=m)
>>> sgd = Selection("cifar_10/resnet_8/sgd", "val/classification_error", 0.4)
>>> chart, meta = plot_steps_to_result(Store.open(tmp), sgd, fit=True)
>>> meta["plot"], len(chart.to_dict()["layer"])
('steps-to-result', 4)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import polars as pl

from curvekit.errors import QueryError
from curvekit.measure import (
    best,
    explain_empty,
    steps_to_result,
    trial_hits,
    trial_outcomes,
    warn_explained,
)
from curvekit.plotting.builders import best_chart, metaparameter_chart, scatter_chart, steps_chart
from curvekit.plotting.vegalite import Spec, subtitled, to_altair
from curvekit.selection import Selection
from curvekit.store.catalog import synthetic_note
from curvekit.store.store import Store

if TYPE_CHECKING:
    import altair as alt

    from curvekit.scaling import TableFit

__all__ = ["PARAMETERS", "Selection", "plot_best", "plot_metaparameters", "plot_scatter",
           "plot_steps_table", "plot_steps_to_result", "provenance"]

PARAMETERS = {"effective_learning_rate": ("Optimal Effective Learning Rate",
                                          "Learning Rate / (1 - Momentum)", True),
              "learning_rate": ("Optimal Learning Rate", "Learning Rate", True),
              "momentum": ("Optimal Momentum", "Momentum", False)}
"""Metaparameters ``plot metaparameters`` draws: (curve label, y title, heuristic lines)."""
WIDTH, HEIGHT = 360, 300


def provenance(store: Store, **fields: Any) -> dict[str, Any]:
    """What a chart was drawn from: the fields given plus the store's source and manifest."""
    source = store.metadata.get("source", {})
    manifest = store.manifest()
    return {**fields, "store": {"path": str(store.path), "source": source,
                                "manifest": None if manifest is None else {
                                    "dataset": manifest.dataset,
                                    "manifest_version": manifest.manifest_version,
                                    "sha256": manifest.archive.sha256}}}


def _marked(store: Store, chart: Spec, workloads: Sequence[str]) -> Spec:
    """``chart`` with a subtitle saying so when any of the ``workloads`` it draws holds
    generated data."""
    note = synthetic_note(store, workloads)
    return {**chart, "title": subtitled(chart.get("title"), note)} if note else chart


def _chosen(selection: Selection) -> dict[str, Any]:
    """The selection's choices for a chart's provenance (the workload is listed apart)."""
    fields = asdict(selection)
    del fields["workload"]
    fields["statuses"] = list(selection.statuses)
    fields["subset"] = None if selection.subset is None else list(selection.subset)
    return fields


def plot_steps_to_result(store: Store, selection: Selection, *, fit: bool = False,
                         compare: Sequence[str] = ()
                         ) -> tuple[alt.TopLevelMixin, dict[str, Any]]:
    """Steps to result of one workload, with the perfect-scaling line and optionally the fit.

    Returns the chart and its provenance (for :func:`curvekit.plotting.output.save`).
    Batch sizes that do not reach the goal are left out and explained by
    :class:`curvekit.measure.EmptyResultWarning` warnings; when none reaches it there is
    nothing to draw, and a :class:`~curvekit.errors.QueryError` says why instead of a blank
    chart. ``compare`` overlays more workloads, measured the same way (e.g. the tuned
    frontier and a scaling protocol's runs, ``.../sgd`` and ``.../sgd+linear-scaling``):
    one series each, in a legend; the perfect-scaling line and the fit belong to the
    selection's workload. The command ``curvekit plot steps-to-result`` saves this chart.

    >>> import tempfile, pathlib, curvekit
    >>> home = pathlib.Path(tempfile.mkdtemp())
    >>> _ = curvekit.demo(home)
    >>> store = curvekit.open(home)
    >>> chart, meta = curvekit.plot_steps_to_result(store, curvekit.Selection(
    ...     store.workloads()[0], "val/classification_error", 0.1))
    >>> meta["plot"], meta["goal"]
    ('steps-to-result', 0.1)
    """
    workload = selection.workload
    others = list(dict.fromkeys(w for w in compare if w != workload))
    curve = _curve_or_refuse(store, selection)
    extra = [(other, _curve_or_refuse(store, selection.with_workload(other)))
             for other in others]
    from curvekit.scaling import FitError, critical_point, fit_regimes, hits_by_batch_size

    if fit and curve.height < 3:
        raise FitError(f"--fit needs at least 3 batch sizes on the curve, {workload} has "
                       f"{curve.height} reaching {selection.target}; "
                       "drop --fit, or widen the selection as the warnings say")
    regimes = fit_regimes(curve) if fit else None
    critical = None
    if fit:
        try:
            critical = critical_point(hits_by_batch_size(trial_hits(store, selection)),
                                      curve["batch_size"], curve["step"])
        except FitError:  # the regime fit still draws; the curve has no critical-batch fit
            critical = None
    # Compared, the title names every workload, and the legend which line is which.
    title = f"{' vs '.join([workload, *others])}, {selection.target}"
    chart = steps_chart([(workload, curve), *extra], title=title, scaling_label=workload,
                        fit=regimes, critical=critical, legend="bottom" if others else None,
                        width=WIDTH, height=HEIGHT)
    meta = provenance(store, plot="steps-to-result", workloads=[workload, *others],
                      **_chosen(selection),
                      fit=None if regimes is None else {
                          "model": regimes.model, "breakpoints": list(regimes.breakpoints),
                          "b_crit": None if critical is None else critical.b_crit,
                          "b_crit_estimate": None if critical is None else critical.estimate,
                          "b_crit_plain": (None if critical is None
                                           else critical.plain_fit.b_crit),
                          "note": regimes.note, "definition": "docs/fits.md"})
    return to_altair(_marked(store, chart, [workload, *others])), meta


def plot_steps_table(table: TableFit, *, fit: bool = False
                     ) -> tuple[alt.TopLevelMixin, dict[str, Any]]:
    """Steps to result of a table (:func:`curvekit.fit_table`), drawn like a workload's:
    the perfect-scaling line and, with ``fit``, the regime fit and the critical-batch-size
    curve. ``curvekit plot steps-to-result --table FILE`` saves this chart.

    >>> import curvekit
    >>> table = curvekit.fit_table({"batch_size": [64, 128, 256, 512, 1024, 2048],
    ...                             "steps": [46000, 23000, 13282, 7000, 3840, 2528]})
    >>> chart, meta = plot_steps_table(table, fit=True)
    >>> meta["plot"], meta["table"]
    ('steps-to-result', 'table')
    """
    regimes = table.regimes if fit else None
    critical = table.critical if fit else None
    chart = steps_chart([(table.name, table.curve())], title=f"{table.name}, steps to result",
                        scaling_label=table.name, fit=regimes, critical=critical,
                        width=WIDTH, height=HEIGHT)
    meta = {"plot": "steps-to-result", "table": table.name,
            "batch_sizes": table.batch_sizes.tolist(), "steps": table.steps.tolist(),
            "fit": None if regimes is None else {
                "model": regimes.model, "breakpoints": list(regimes.breakpoints),
                "b_crit": table.critical.b_crit, "s_min": table.critical.s_min,
                "note": regimes.note, "definition": "docs/fits.md"}}
    return to_altair(chart), meta


def _curve_or_refuse(store: Store, selection: Selection) -> pl.DataFrame:
    """Steps to result, explained by warnings when partial; an empty curve is refused with
    the explanation, since a chart of it would be blank."""
    curve = steps_to_result(store, selection, explain=False)
    if curve.is_empty():
        workload = selection.workload
        why = explain_empty(store, selection, result=curve)
        raise QueryError(
            f"nothing to plot: no batch size of {workload} reaches {selection.target}, so "
            "no chart was written"
            + "".join(f"; {line.removeprefix(workload + ': ')}" for line in why))
    warn_explained(store, selection, curve)
    return curve


def plot_metaparameters(store: Store, selection: Selection, *,
                        parameter: str = "effective_learning_rate"
                        ) -> tuple[alt.TopLevelMixin, dict[str, Any]]:
    """The winning trial's metaparameter per batch size (Figures 8, 13 and 14 for any workload).

    ``parameter`` is ``effective_learning_rate`` or ``learning_rate`` (both with the linear
    and square-root heuristics) or ``momentum`` (without), or any metaparameter column. The
    winners are those of steps to result under ``selection``. The command ``curvekit plot
    metaparameters`` saves this chart.

    >>> import tempfile, pathlib, curvekit
    >>> home = pathlib.Path(tempfile.mkdtemp())
    >>> _ = curvekit.demo(home)
    >>> store = curvekit.open(home)
    >>> chart, meta = curvekit.plot_metaparameters(store, curvekit.Selection(
    ...     store.workloads()[0], "val/classification_error", 0.1), parameter="learning_rate")
    >>> meta["plot"], meta["parameter"]
    ('metaparameters', 'learning_rate')
    """
    workload, metric = selection.workload, selection.metric
    curve = _curve_or_refuse(store, selection)
    if parameter not in curve.columns:
        have = ", ".join(c for c in curve.columns
                         if c not in ("batch_size", "step", "trial_id", metric))
        raise QueryError(f"workload {workload!r} has no metaparameter {parameter!r}; "
                         f"choose one of {have}")
    label, y_title, heuristics = PARAMETERS.get(
        parameter, (f"Optimal {parameter}", parameter, False))
    chart = metaparameter_chart(
        [(label, curve.select("batch_size", pl.col(parameter).alias("value")))],
        title=f"{workload}, {selection.target}", y_title=y_title,
        heuristics=heuristics, width=WIDTH, height=HEIGHT)
    meta = provenance(store, plot="metaparameters", workloads=[workload], parameter=parameter,
                      **_chosen(selection))
    return to_altair(_marked(store, chart, [workload])), meta


def plot_scatter(store: Store, selection: Selection, batch_size: int
                 ) -> tuple[alt.TopLevelMixin, dict[str, Any]]:
    """Learning rate vs 1 − momentum of one study's trials (Figures 9, 10, 19, 20).

    Each loaded trial of the study at ``batch_size`` is a point: goal achieved, not
    achieved, or infeasible. The paper's scatters load COMPLETE and INFEASIBLE trials
    (``statuses=curvekit.selection.SCATTER_STATUSES``, the command's default). The command
    ``curvekit plot scatter`` saves this chart.

    >>> import tempfile, pathlib, curvekit
    >>> from curvekit.selection import SCATTER_STATUSES
    >>> home = pathlib.Path(tempfile.mkdtemp())
    >>> _ = curvekit.demo(home)
    >>> store = curvekit.open(home)
    >>> demo = store.workloads()[0]
    >>> size = store.studies(demo).get_column("batch_size").min()
    >>> chart, meta = curvekit.plot_scatter(store, curvekit.Selection(
    ...     demo, "val/classification_error", 0.1, statuses=SCATTER_STATUSES), size)
    >>> meta["plot"], meta["statuses"]
    ('scatter', ['COMPLETE', 'INFEASIBLE'])
    """
    workload = selection.workload
    trials_table = trial_outcomes(store, selection, batch_size)
    if trials_table["learning_rate"].null_count() == trials_table.height:
        raise QueryError(f"workload {workload!r} has no learning_rate metaparameter to plot")
    chart = scatter_chart(trials_table, title=f"{workload}, Batch Size {batch_size}",
                          width=WIDTH, height=HEIGHT)
    meta = provenance(store, plot="scatter", workloads=[workload], batch_size=batch_size,
                      **_chosen(selection))
    return to_altair(_marked(store, chart, [workload])), meta


def plot_best(store: Store, selection: Selection
              ) -> tuple[alt.TopLevelMixin, dict[str, Any]]:
    """The best value of the selection's metric per batch size (Figures 12 and 24), with
    its goal, if it has one, as a dotted line. The command ``curvekit plot best`` saves
    this chart.

    >>> import tempfile, pathlib, curvekit
    >>> home = pathlib.Path(tempfile.mkdtemp())
    >>> _ = curvekit.demo(home)
    >>> store = curvekit.open(home)
    >>> chart, meta = curvekit.plot_best(store, curvekit.Selection(
    ...     store.workloads()[0], "val/classification_error", step_budget=200))
    >>> meta["plot"], meta["step_budget"]
    ('best', 200)
    """
    workload, metric = selection.workload, selection.metric
    values = best(store, selection)
    chart = best_chart([(workload, values.select("batch_size", pl.col(metric).alias("value")))],
                       title=workload, y_title=f"Best {metric}", goal_line=selection.goal,
                       goal_label=f"goal: {selection.target}", width=WIDTH, height=HEIGHT)
    meta = provenance(store, plot="best", workloads=[workload], **_chosen(selection))
    return to_altair(_marked(store, chart, [workload])), meta
