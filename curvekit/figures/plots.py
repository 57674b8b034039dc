"""Plots of any workload in the store, drawn by the same builders as the paper's figures.

Examples
--------
>>> import tempfile, pathlib
>>> from curvekit.testing import generate_archive
>>> from curvekit.store.build import convert
>>> from curvekit.store.store import Store
>>> tmp = pathlib.Path(tempfile.mkdtemp())
>>> m = generate_archive(tmp / "a.tar.bz2", workloads=["cifar_10/resnet_8/sgd"],
...                      max_trials_per_study=6, evals_scale=0.1, jobs=1)
>>> _ = convert(tmp / "a.tar.bz2", tmp, manifest=m)
>>> chart, meta = plot_steps_to_result(Store.open(tmp), "cifar_10/resnet_8/sgd",
...                                    "val/classification_error", 0.4, fit=True)
>>> meta["plot"], len(chart.to_dict()["layer"])
('steps-to-result', 4)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import polars as pl

from curvekit.errors import QueryError
from curvekit.figures.builders import best_chart, metaparameter_chart, scatter_chart, steps_chart
from curvekit.figures.vegalite import Spec, subtitled, to_altair
from curvekit.measure import explain_empty, warn_explained
from curvekit.store.catalog import synthetic_note
from curvekit.store.store import Store

if TYPE_CHECKING:
    import altair as alt

__all__ = ["PARAMETERS", "plot_best", "plot_metaparameters", "plot_scatter",
           "plot_steps_to_result", "provenance"]

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


def _marked(store: Store, chart: Spec) -> Spec:
    """``chart`` with a subtitle saying so when the store holds generated data."""
    note = synthetic_note(store)
    return {**chart, "title": subtitled(chart.get("title"), note)} if note else chart


def plot_steps_to_result(store: Store, workload: str, metric: str, goal: float, *,
                         maximize: bool = False, trials: int | None = None,
                         step_budget: float | None = None,
                         example_budget: float | None = None,
                         statuses: Sequence[str] = ("COMPLETE",),
                         fit: bool = False, compare: Sequence[str] = ()
                         ) -> tuple[alt.TopLevelMixin, dict[str, Any]]:
    """Steps to result of one workload, with the perfect-scaling line and optionally the fit.

    Returns the chart and its provenance (for :func:`curvekit.figures.output.save`).
    Batch sizes that do not reach the goal are left out and explained by
    :class:`curvekit.measure.EmptyResultWarning` warnings; when none reaches it there is
    nothing to draw, and a :class:`~curvekit.errors.QueryError` says why instead of a blank
    chart. ``compare`` overlays more workloads, measured the same way (e.g. the tuned
    frontier and a scaling protocol's runs, ``.../sgd`` and ``.../sgd+linear-scaling``):
    one series each, in a legend; the perfect-scaling line and the fit belong to
    ``workload``.
    """
    selection: dict[str, Any] = dict(maximize=maximize, trials=trials,
                                     step_budget=step_budget, example_budget=example_budget,
                                     statuses=tuple(statuses))
    others = list(dict.fromkeys(w for w in compare if w != workload))
    curve = _curve_or_refuse(store, workload, metric, goal, selection)
    extra = [(other, _curve_or_refuse(store, other, metric, goal, selection))
             for other in others]
    from curvekit.fit import FitError, fit_critical_batch, fit_regimes

    if fit and curve.height < 3:
        raise FitError(f"--fit needs at least 3 batch sizes on the curve, {workload} has "
                       f"{curve.height} reaching {_goal_text(metric, goal, maximize)}; "
                       "drop --fit, or widen the selection as the warnings say")
    regimes = fit_regimes(curve) if fit else None
    critical = None
    if fit:
        try:
            critical = fit_critical_batch(curve)
        except FitError:  # the regime fit still draws; the curve has no critical-batch fit
            critical = None
    sign = ">" if maximize else "<"
    # Compared, the legend names the workloads: the title keeps only what they share.
    title = f"{metric} {sign} {goal}" if others else f"{workload}, {metric} {sign} {goal}"
    chart = steps_chart([(workload, curve), *extra], title=title, scaling_label=workload,
                        fit=regimes, critical=critical, legend="bottom" if others else None,
                        width=WIDTH, height=HEIGHT)
    meta = provenance(store, plot="steps-to-result", workloads=[workload, *others],
                      metric=metric,
                      goal=goal, maximize=maximize, trials=trials, step_budget=step_budget,
                      example_budget=example_budget, statuses=list(statuses),
                      fit=None if regimes is None else {
                          "model": regimes.model, "breakpoints": list(regimes.breakpoints),
                          "b_crit": None if critical is None else critical.b_crit,
                          "note": regimes.note, "definition": "docs/fits.md"})
    return to_altair(_marked(store, chart)), meta


def _goal_text(metric: str, goal: float, maximize: bool) -> str:
    return f"{metric} {'>' if maximize else '<'} {goal}"


def _curve_or_refuse(store: Store, workload: str, metric: str, goal: float,
                     selection: dict[str, Any]) -> pl.DataFrame:
    """Steps to result, explained by warnings when partial; an empty curve is refused with
    the explanation, since a chart of it would be blank."""
    curve = store.steps_to_result(workload, metric, goal, explain=False, **selection)
    if curve.is_empty():
        why = explain_empty(store, workload, metric, goal, result=curve, **selection)
        raise QueryError(
            f"nothing to plot: no batch size of {workload} reaches "
            f"{_goal_text(metric, goal, selection['maximize'])}, so no chart was written"
            + "".join(f"; {line.removeprefix(workload + ': ')}" for line in why))
    warn_explained(store, workload, metric, goal, curve, **selection)
    return curve


def plot_metaparameters(store: Store, workload: str, metric: str, goal: float, *,
                        parameter: str = "effective_learning_rate", maximize: bool = False,
                        trials: int | None = None, step_budget: float | None = None,
                        example_budget: float | None = None
                        ) -> tuple[alt.TopLevelMixin, dict[str, Any]]:
    """The winning trial's metaparameter per batch size (Figures 8, 13 and 14 for any workload).

    ``parameter`` is ``effective_learning_rate`` or ``learning_rate`` (both with the linear
    and square-root heuristics) or ``momentum`` (without), or any metaparameter column.
    """
    curve = _curve_or_refuse(store, workload, metric, goal, dict(
        maximize=maximize, trials=trials, step_budget=step_budget,
        example_budget=example_budget))
    if parameter not in curve.columns:
        have = ", ".join(c for c in curve.columns
                         if c not in ("batch_size", "step", "trial_id", metric))
        raise QueryError(f"workload {workload!r} has no metaparameter {parameter!r}; "
                         f"choose one of {have}")
    label, y_title, heuristics = PARAMETERS.get(
        parameter, (f"Optimal {parameter}", parameter, False))
    chart = metaparameter_chart(
        [(label, curve.select("batch_size", pl.col(parameter).alias("value")))],
        title=f"{workload}, {_goal_text(metric, goal, maximize)}", y_title=y_title,
        heuristics=heuristics, width=WIDTH, height=HEIGHT)
    meta = provenance(store, plot="metaparameters", workloads=[workload], metric=metric,
                      goal=goal, maximize=maximize, parameter=parameter, trials=trials,
                      step_budget=step_budget, example_budget=example_budget)
    return to_altair(_marked(store, chart)), meta


def plot_scatter(store: Store, workload: str, metric: str, goal: float, batch_size: int, *,
                 maximize: bool = False, trials: int | None = None,
                 step_budget: float | None = None, example_budget: float | None = None
                 ) -> tuple[alt.TopLevelMixin, dict[str, Any]]:
    """Learning rate vs 1 − momentum of one study's trials (Figures 9–11, 19, 20)."""
    from curvekit.measure import trial_outcomes

    trials_table = trial_outcomes(store, workload, metric, goal, batch_size,
                                  maximize=maximize, trials=trials, step_budget=step_budget,
                                  example_budget=example_budget)
    if trials_table["learning_rate"].null_count() == trials_table.height:
        raise QueryError(f"workload {workload!r} has no learning_rate metaparameter to plot")
    chart = scatter_chart(trials_table, title=f"{workload}, Batch Size {batch_size}",
                          width=WIDTH, height=HEIGHT)
    meta = provenance(store, plot="scatter", workloads=[workload], metric=metric, goal=goal,
                      maximize=maximize, batch_size=batch_size, trials=trials,
                      statuses=["COMPLETE", "INFEASIBLE"], step_budget=step_budget,
                      example_budget=example_budget)
    return to_altair(_marked(store, chart)), meta


def plot_best(store: Store, workload: str, metric: str, *, goal: float | None = None,
              maximize: bool = False, trials: int | None = None,
              step_budget: float | None = None, example_budget: float | None = None
              ) -> tuple[alt.TopLevelMixin, dict[str, Any]]:
    """The best value of ``metric`` per batch size (Figures 12 and 24), with ``goal`` dotted."""
    best = store.best_measurement(workload, metric, maximize=maximize, trials=trials,
                                  step_budget=step_budget, example_budget=example_budget)
    chart = best_chart([(workload, best.select("batch_size", pl.col(metric).alias("value")))],
                       title=workload, y_title=f"Best {metric}", goal_line=goal,
                       goal_label="goal", width=WIDTH, height=HEIGHT)
    meta = provenance(store, plot="best", workloads=[workload], metric=metric, goal=goal,
                      maximize=maximize, trials=trials, step_budget=step_budget,
                      example_budget=example_budget)
    return to_altair(_marked(store, chart)), meta
