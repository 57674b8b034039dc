"""curvekit: neural-network training-curve data as partitioned Parquet.

Fetch the Shallue et al. (2019) data-parallelism release, convert it into a hive-partitioned
Parquet store, and query, fit and plot it.

>>> import curvekit
>>> curvekit.__version__ >= "0.1"
True

The public names below are imported on first use, so ``import curvekit`` stays fast and a
query does not pay for the converter's imports.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from curvekit._version import __version__
from curvekit.errors import (
    ArchiveError,
    BatchingFallbackWarning,
    ChecksumError,
    CurvekitError,
    CurvekitWarning,
    DirectionWarning,
    DownloadError,
    EmptyResultWarning,
    FigureError,
    FigureNotesWarning,
    FitError,
    IngestError,
    IngestWarning,
    ManifestError,
    OutputError,
    QueryError,
    RendererError,
    ReportError,
    RunError,
    StoreError,
)

if TYPE_CHECKING:
    from curvekit.goals import paper_goal
    from curvekit.ingest.add import add, add_plan
    from curvekit.ingest.plan import ImportPlan
    from curvekit.ingest.steps_table import fit_table
    from curvekit.measure import best, best_measurement, steps_to_result, trial_outcomes
    from curvekit.plotting.plots import (
        plot_best,
        plot_metaparameters,
        plot_scatter,
        plot_steps_to_result,
    )
    from curvekit.plotting.render import figure
    from curvekit.plotting.render import render_all as figures
    from curvekit.progress import Progress
    from curvekit.release.manifest import Manifest, load_manifest
    from curvekit.release.pd1_synthetic import generate_pd1
    from curvekit.release.synthetic import generate_archive
    from curvekit.reporting.site import report
    from curvekit.runner.adaptive import Adaptive, AdaptiveResult
    from curvekit.runner.demo import demo
    from curvekit.runner.sweep import RunResult, run
    from curvekit.scaling import bootstrap, fit, fit_critical_batch, fit_regimes, fit_workload
    from curvekit.selection import Selection
    from curvekit.store.catalog import VerifyReport, info, verify
    from curvekit.store.datasets import datasets
    from curvekit.store.export import query
    from curvekit.store.fetch import FetchResult, fetch
    from curvekit.store.store import Store
    from curvekit.store.store import open_store as open
    from curvekit.store.transaction import wait_for_writers
    from curvekit.store.update import AddResult, WorkloadData, add_workload, remove_workload
    from curvekit.store.upgrade import UpgradeResult, upgrade

_LAZY = {
    "FetchResult": ("curvekit.store.fetch", "FetchResult"),
    "fetch": ("curvekit.store.fetch", "fetch"),
    "Manifest": ("curvekit.release.manifest", "Manifest"),
    "load_manifest": ("curvekit.release.manifest", "load_manifest"),
    "VerifyReport": ("curvekit.store.catalog", "VerifyReport"),
    "info": ("curvekit.store.catalog", "info"),
    "datasets": ("curvekit.store.datasets", "datasets"),
    "generate_pd1": ("curvekit.release.pd1_synthetic", "generate_pd1"),
    "verify": ("curvekit.store.catalog", "verify"),
    "Store": ("curvekit.store.store", "Store"),
    "open": ("curvekit.store.store", "open_store"),
    "Selection": ("curvekit.selection", "Selection"),
    "steps_to_result": ("curvekit.measure", "steps_to_result"),
    "best": ("curvekit.measure", "best"),
    "best_measurement": ("curvekit.measure", "best_measurement"),
    "trial_outcomes": ("curvekit.measure", "trial_outcomes"),
    "plot_steps_to_result": ("curvekit.plotting.plots", "plot_steps_to_result"),
    "plot_metaparameters": ("curvekit.plotting.plots", "plot_metaparameters"),
    "plot_scatter": ("curvekit.plotting.plots", "plot_scatter"),
    "plot_best": ("curvekit.plotting.plots", "plot_best"),
    # the function ``fit`` shadows the module ``curvekit.scaling`` on the package only once it
    # is looked up here; ``import curvekit.scaling`` still finds the module in sys.modules
    "fit": ("curvekit.scaling", "fit"),
    "fit_regimes": ("curvekit.scaling", "fit_regimes"),
    "fit_critical_batch": ("curvekit.scaling", "fit_critical_batch"),
    "fit_workload": ("curvekit.scaling", "fit_workload"),
    "fit_table": ("curvekit.ingest.steps_table", "fit_table"),
    "bootstrap": ("curvekit.scaling", "bootstrap"),
    "paper_goal": ("curvekit.goals", "paper_goal"),
    "add": ("curvekit.ingest.add", "add"),
    "add_plan": ("curvekit.ingest.add", "add_plan"),
    "ImportPlan": ("curvekit.ingest.plan", "ImportPlan"),
    "figure": ("curvekit.plotting.render", "figure"),
    "figures": ("curvekit.plotting.render", "render_all"),
    "generate_archive": ("curvekit.release.synthetic", "generate_archive"),
    "Progress": ("curvekit.progress", "Progress"),
    "query": ("curvekit.store.export", "query"),
    "report": ("curvekit.reporting.site", "report"),
    "AddResult": ("curvekit.store.update", "AddResult"),
    "WorkloadData": ("curvekit.store.update", "WorkloadData"),
    "add_workload": ("curvekit.store.update", "add_workload"),
    "remove_workload": ("curvekit.store.update", "remove_workload"),
    "UpgradeResult": ("curvekit.store.upgrade", "UpgradeResult"),
    "upgrade": ("curvekit.store.upgrade", "upgrade"),
    "RunResult": ("curvekit.runner.sweep", "RunResult"),
    "run": ("curvekit.runner.sweep", "run"),
    "Adaptive": ("curvekit.runner.adaptive", "Adaptive"),
    "AdaptiveResult": ("curvekit.runner.adaptive", "AdaptiveResult"),
    "demo": ("curvekit.runner.demo", "demo"),
    "wait_for_writers": ("curvekit.store.transaction", "wait_for_writers"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'curvekit' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "Adaptive",
    "AdaptiveResult",
    "AddResult",
    "ArchiveError",
    "BatchingFallbackWarning",
    "ChecksumError",
    "CurvekitError",
    "CurvekitWarning",
    "DirectionWarning",
    "DownloadError",
    "EmptyResultWarning",
    "FetchResult",
    "FigureError",
    "FigureNotesWarning",
    "FitError",
    "ImportPlan",
    "IngestError",
    "IngestWarning",
    "Manifest",
    "ManifestError",
    "OutputError",
    "Progress",
    "QueryError",
    "RendererError",
    "ReportError",
    "RunError",
    "RunResult",
    "Selection",
    "Store",
    "StoreError",
    "UpgradeResult",
    "VerifyReport",
    "WorkloadData",
    "__version__",
    "add",
    "add_plan",
    "add_workload",
    "best",
    "best_measurement",
    "bootstrap",
    "datasets",
    "demo",
    "fetch",
    "figure",
    "figures",
    "fit",
    "fit_critical_batch",
    "fit_regimes",
    "fit_table",
    "fit_workload",
    "generate_archive",
    "generate_pd1",
    "info",
    "load_manifest",
    "open",
    "paper_goal",
    "plot_best",
    "plot_metaparameters",
    "plot_scatter",
    "plot_steps_to_result",
    "query",
    "remove_workload",
    "report",
    "run",
    "steps_to_result",
    "trial_outcomes",
    "upgrade",
    "verify",
    "wait_for_writers",
]
