"""What ``curvekit add`` inferred from the logs, before anything is written: the plan.

``curvekit add --dry-run`` (:func:`curvekit.add_plan`) reads and checks the logs exactly as
an import does, then returns this plan instead of writing: the runs found and the file or
folder each comes from, the step axis and the evidence for it, the rows and step range of
each run, each metric's logged name, stored name and transform (``1 - value``, percent), the
metaparameters, each run's status and why, and the notes the import raised (what was left
out and why, each ambiguity with the option that settles it).

>>> plan = ImportPlan("my_data/mlp/sgd", "csv", "logs")
>>> plan.runs.append(RunPlan("bs64.csv", "logs/bs64.csv", 64, 1, "step",
...                          "the log's step column", 21, (0, 2000), "COMPLETE",
...                          "its last step, 2000, reaches the budget of 2000 steps"))
>>> plan.as_dict()["runs"][0]["steps"]
[0, 2000]
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["ImportPlan", "MetricPlan", "RunPlan", "StudyPlan"]


@dataclass(frozen=True)
class MetricPlan:
    """One logged metric and the column it becomes (an empty ``stored`` name: dropped);
    ``why`` says why a loss got its name (the cross-entropy, or a loss of unknown kind)."""

    logged: str
    stored: str
    transform: str = "value"  # "1 - value", "value/100 (error rate in percent)", ...
    why: str = ""


@dataclass
class RunPlan:
    """One run as it would be imported: a trial of the study of its batch size."""

    run: str  # the run's name (a manifest entry matches it)
    path: str  # the file or folder it comes from
    batch_size: int
    trial_id: int
    axis: str  # "step", or "epoch x N" when epochs become steps
    axis_evidence: str
    rows: int
    steps: tuple[int, int] | None  # the smallest and largest step; None without rows
    status: str
    status_why: str
    batch_size_from: str = "the manifest"
    aliases: tuple[str, ...] = ()
    metrics: list[MetricPlan] = field(default_factory=list)
    parameters: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class StudyPlan:
    """One study (a batch size) and its step budget, with where the budget comes from."""

    batch_size: int
    budget: int
    budget_from: str
    trials: int


@dataclass
class ImportPlan:
    """Everything ``curvekit add`` would write, and why; :meth:`as_dict` is its JSON form."""

    workload: str
    format: str
    source: str
    runs: list[RunPlan] = field(default_factory=list)
    studies: list[StudyPlan] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # warnings: left out, ambiguities, fixes

    def as_dict(self) -> dict[str, Any]:
        """The plan as plain data (lists, dicts, numbers, text) for ``--format json``."""
        out = asdict(self)
        for run in out["runs"]:
            run["steps"] = list(run["steps"]) if run["steps"] is not None else None
            run["aliases"] = list(run["aliases"])
        return out
