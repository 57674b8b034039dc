"""Plots of any workload in the store, drawn by the same builders as the paper's figures.

>>> import tempfile, pathlib
>>> from curvekit.release.synthetic import generate_archive
>>> from curvekit.release.convert import convert
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

from typing import Any

import altair as alt

from curvekit.figures.builders import steps_chart
from curvekit.fit import fit_regimes
from curvekit.store.store import Store

__all__ = ["plot_steps_to_result", "provenance"]


def provenance(store: Store, **fields: Any) -> dict[str, Any]:
    """What a chart was drawn from: the fields given plus the store's source and manifest."""
    source = store.metadata.get("source", {})
    manifest = store.manifest()
    return {**fields, "store": {"path": str(store.path), "source": source,
                                "manifest": None if manifest is None else {
                                    "dataset": manifest.dataset,
                                    "manifest_version": manifest.manifest_version,
                                    "sha256": manifest.archive.sha256}}}


def plot_steps_to_result(store: Store, workload: str, metric: str, goal: float, *,
                         maximize: bool = False, trials: int | None = None,
                         step_budget: float | None = None,
                         example_budget: float | None = None,
                         fit: bool = False) -> tuple[alt.LayerChart, dict[str, Any]]:
    """Steps to result of one workload, with the perfect-scaling line and optionally the fit.

    Returns the chart and its provenance (for :func:`curvekit.figures.output.save`).
    """
    curve = store.steps_to_result(workload, metric, goal, maximize=maximize, trials=trials,
                                  step_budget=step_budget, example_budget=example_budget)
    regimes = fit_regimes(curve) if fit else None
    sign = ">" if maximize else "<"
    chart = steps_chart([(workload, curve)], title=f"{workload}, {metric} {sign} {goal}",
                        scaling_label=workload, fit=regimes, width=360, height=300)
    meta = provenance(store, plot="steps-to-result", workloads=[workload], metric=metric,
                      goal=goal, maximize=maximize, trials=trials, step_budget=step_budget,
                      example_budget=example_budget,
                      fit=None if regimes is None else {
                          "model": regimes.model, "breakpoints": list(regimes.breakpoints),
                          "note": regimes.note, "definition": "docs/fits.md"})
    return chart, meta
