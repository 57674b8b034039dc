"""What ``curvekit add`` inferred from the logs, before anything is written: the plan.

``curvekit add --dry-run`` (:func:`curvekit.add_plan`) reads and checks the logs exactly as
an import does, then returns this plan instead of writing: the runs found and the file or
folder each comes from, the step axis and the evidence for it, the rows and step range of
each run, each metric's logged name, stored name and transform (``1 - value``, percent), the
metaparameters, each run's status and why, every file each run is read from (see
:func:`run_files`), and the notes the import raised (what was left
out and why, each ambiguity with the option that settles it).

>>> plan = ImportPlan("my_data/mlp/sgd", "csv", "logs")
>>> plan.runs.append(RunPlan("bs64.csv", "logs/bs64.csv", 64, 1, "step",
...                          "the log's step column", 21, (0, 2000), "COMPLETE",
...                          "its last step, 2000, reaches the budget of 2000 steps"))
>>> plan.as_dict()["runs"][0]["steps"]
[0, 2000]
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["ImportPlan", "MetricPlan", "RunPlan", "StudyPlan", "run_files"]


def run_files(runs: Sequence[tuple[str, str, Iterable[str]]], read: Iterable[str]
              ) -> dict[str, list[str]]:
    """The files each run is made of, out of the files an import ``read`` (every file
    :class:`~curvekit.ingest.files.SourceFiles` opened): ``runs`` are (name, path, files
    the reader names besides its path). The one rule for every format: a file belongs to
    the run whose path it is or names it, else to the run whose folder holds it (the
    deepest such folder: TensorBoard's event files, an MLflow run's metric files, a
    Hugging Face run's checkpoints), else, beside a run's file, to every run read from a
    file of that folder (Lightning's ``hparams.yaml``, timm's ``args.yaml``), else to every
    run below its folder (an MLflow experiment's ``meta.yaml``); the files of no run (read,
    then left out: an MLflow run that logged no metric) are listed under ``""``.

    >>> run_files([("v0", "logs/v0/metrics.csv", ()), ("tb", "logs/tb", ())],
    ...           ["logs/tb/a/events.1", "logs/v0/hparams.yaml", "logs/v0/metrics.csv"])
    {'': [], 'v0': ['logs/v0/hparams.yaml', 'logs/v0/metrics.csv'], 'tb': ['logs/tb/a/events.1']}
    """
    done = set(read)
    out: dict[str, set[str]] = {"": set()}  # "": files of no run (a run left out)
    out.update({name: set() for name, _, _ in runs})
    named: dict[str, list[str]] = {}
    beside: dict[str, list[str]] = {}  # a folder -> the runs read from a file in it
    for name, path, extra in runs:
        for f in (path, *extra):
            named.setdefault(f, []).append(name)
        if path in done:
            beside.setdefault(str(Path(path).parent), []).append(name)
    below: dict[str, list[str]] = {}  # a folder -> the runs below it
    for name, path, _ in runs:
        for folder in Path(path).parents:
            below.setdefault(str(folder), []).append(name)
    for f in sorted(done):
        owners = named.get(f) \
            or next((named[str(p)] for p in Path(f).parents if str(p) in named), None) \
            or beside.get(str(Path(f).parent)) \
            or below.get(str(Path(f).parent), [""])
        for name in owners:
            out[name].add(f)
    return {name: sorted(files) for name, files in out.items()}


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
    files: list[str] = field(default_factory=list)  # every file the run is read from


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
    unused: list[str] = field(default_factory=list)  # files read that make no imported run

    def as_dict(self) -> dict[str, Any]:
        """The plan as plain data (lists, dicts, numbers, text) for ``--format json``."""
        out = asdict(self)
        for run in out["runs"]:
            run["steps"] = list(run["steps"]) if run["steps"] is not None else None
            run["aliases"] = list(run["aliases"])
        return out
