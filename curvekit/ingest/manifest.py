"""The run manifest: what the logs do not say (batch sizes, metaparameters, statuses).

A manifest is TOML, YAML (if PyYAML is installed) or JSON, with the same keys in each.
:data:`EXAMPLE` is the documented template that ``curvekit add --example-run-manifest`` prints.
Run entries are matched to runs by name (a path relative to the source, a run folder, an
MLflow run id or name); glob patterns (``bs128/*``) match several runs, and a run matched by
several entries takes the keys of each, later entries winning.

>>> import tomllib
>>> m = parse_manifest(tomllib.loads(EXAMPLE), "example.toml")
>>> m.name, m.train_steps_for(128), m.runs[0].batch_size, m.runs[0].parameters
('my_data/resnet_20/momentum', 20000, 128, {'learning_rate': 0.1, 'momentum': 0.9})
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from curvekit import structured
from curvekit.errors import IngestError
from curvekit.ingest.files import read_named
from curvekit.ingest.select import ALL, FileFilter
from curvekit.names import check_name
from curvekit.records import STATUSES, Workload
from curvekit.values import flag_problem, parameter_fix, parameter_problem

__all__ = ["EXAMPLE", "RunManifest", "RunSpec", "load_run_manifest", "parse_manifest"]

EXAMPLE = '''\
# curvekit run manifest: one workload, one [[runs]] entry per run (or per glob pattern).
# Use it with: curvekit add LOGS --run-manifest this-file.toml
# The same keys work in YAML and JSON.

[workload]
name = "my_data/resnet_20/momentum"  # base_dir/model/optimizer (--name overrides it)
dataset = "cifar_10"                 # optional; default: base_dir
train_steps = 20000                  # the step budget: a run that stopped before it is
                                     # INCOMPLETE; 0 = a time budget (every run that did not
                                     # diverge is COMPLETE); per batch size: { 128 = 20000 }
                                     # default: the longest run of each batch size
early_stopping = false               # optional, recorded with each study
# source = "logs"                    # the logs, relative to this file, when SOURCE is omitted
# include = ["trial_*/*"]            # only files matching these globs (relative to the
# exclude = ["*/measurements.csv"]   # source), none matching these; like --include/--exclude
# Only for logs that count epochs instead of steps (Keras's CSVLogger):
# steps_per_epoch = 391              # or: train_examples = 50000 (steps per epoch =
                                     # ceil(train_examples / batch_size))

[metrics]                            # optional, like --map OLD=NEW (which wins over it)
# val_top1 = "1-val/classification_error"   # "1-" stores 1 - value
# lr = ""                                   # "" drops the column

# Optional: the search space in the release's format (default: derived from the runs).
# [parameter_configs.learning_rate]
# type = "DOUBLE"
# min_value = 0.001
# max_value = 10.0
# scale = "LOG_SCALE"

[[runs]]
run = "bs128_lr0.1"                  # a run's name: its path relative to SOURCE (a CSV or
                                     # Parquet file, a TensorBoard run folder), or an MLflow
                                     # run id or run name; glob patterns allowed
batch_size = 128
parameters = { learning_rate = 0.1, momentum = 0.9 }
# status = "INCOMPLETE"              # overrides the inferred status
# trial_id = 1                       # default: 1, 2, ... by run name within each batch size

[[runs]]
run = "bs256_*"
batch_size = 256
parameters = { learning_rate = 0.2, momentum = 0.9 }
'''

MAX_MANIFEST = 64 << 20
"""The largest run manifest read: one of a hundred thousand runs is a few megabytes."""
_WORKLOAD_KEYS = {"name", "dataset", "train_steps", "early_stopping", "source",
                  "steps_per_epoch", "train_examples", "include", "exclude"}
_RUN_KEYS = {"run", "batch_size", "parameters", "status", "trial_id", "steps_per_epoch"}
_TOP_KEYS = {"workload", "metrics", "parameter_configs", "runs"}


@dataclass(frozen=True)
class RunSpec:
    """One ``[[runs]]`` entry."""

    pattern: str
    where: str
    batch_size: int | None = None
    parameters: dict[str, Any] = field(default_factory=dict)
    status: str | None = None
    trial_id: int | None = None
    steps_per_epoch: int | None = None

    def matches(self, names: tuple[str, ...]) -> bool:
        """True if any of the run's names matches this entry's pattern."""
        pattern = self.pattern.strip("/")
        return any(fnmatchcase(n.strip("/"), pattern) for n in names)


@dataclass(frozen=True)
class RunManifest:
    """A parsed run manifest (every key optional)."""

    path: str = ""
    name: str | None = None
    dataset: str | None = None
    train_steps: int | dict[int, int] | None = None
    early_stopping: bool = False
    source: Path | None = None
    steps_per_epoch: int | None = None
    train_examples: int | None = None
    metrics: dict[str, str] = field(default_factory=dict)
    parameter_configs: dict[str, Any] | None = None
    runs: list[RunSpec] = field(default_factory=list)
    select: FileFilter = ALL

    def train_steps_for(self, batch_size: int) -> int | None:
        """The step budget the manifest gives a batch size, if any."""
        if isinstance(self.train_steps, dict):
            return self.train_steps.get(batch_size)
        return self.train_steps


def _fail(path: str, where: str, problem: str) -> IngestError:
    return IngestError(f"{where}: {problem}", path=path)


def _failing(path: str, where: str) -> Callable[[str], IngestError]:
    """An error factory for :mod:`curvekit.names` checks, pointing at ``where``."""
    return lambda problem: _fail(path, where, problem)


def _int(value: Any, path: str, where: str, *, minimum: int = 0) -> int:
    # nan, inf (TOML spells both) and integers beyond int64 are no count the store can hold
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not math.isfinite(value) or value != int(value) or value < minimum \
            or value > 2**63 - 1:
        raise _fail(path, where, f"{value!r} is not an integer >= {minimum} (and at most "
                    "2**63 - 1)")
    return int(value)


def _flag(value: Any, path: str, where: str) -> bool:
    problem = flag_problem(value)
    if problem is not None:
        raise _fail(path, where, f"{value!r} {problem}")
    return bool(value)


def _value(value: Any, name: str, path: str, where: str) -> Any:
    """``value`` if the store can hold it as a metaparameter (or search-space) value."""
    problem = parameter_problem(value, name)
    if problem is not None:
        raise _fail(path, where, f"{problem}; {parameter_fix(value)}")
    return value


def _key(key: Any) -> Any:
    # TOML and JSON table keys are strings; a batch size is written as one.
    return int(key) if isinstance(key, str) and key.isdigit() else key


def _table(value: Any, path: str, where: str, known: set[str] | None = None) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _fail(path, where, f"expected a table of keys, got {type(value).__name__}")
    if known is not None:
        unknown = sorted(set(value) - known)
        if unknown:
            raise _fail(path, where, f"unknown key {unknown[0]!r}; the keys are "
                        f"{', '.join(sorted(known))} (see curvekit add --example-run-manifest)")
    return value


def _run(entry: Any, path: str, where: str) -> RunSpec:
    entry = _table(entry, path, where, _RUN_KEYS)
    if not isinstance(entry.get("run"), str) or not entry["run"].strip():
        raise _fail(path, where, "every run needs run = \"<name or glob pattern>\"")
    status = entry.get("status")
    if status is not None and status not in STATUSES:
        raise _fail(path, f"{where}.status",
                    f"{status!r} is not one of {', '.join(STATUSES)}")
    params = _table(entry.get("parameters", {}), path, f"{where}.parameters")
    for key, value in params.items():
        check_name(key, "metaparameter", fix="rename it in the manifest",
                   error=_failing(path, f"{where}.parameters"))
        _value(value, key, path, f"{where}.parameters")
    return RunSpec(
        pattern=entry["run"], where=where,
        batch_size=None if entry.get("batch_size") is None
        else _int(entry["batch_size"], path, f"{where}.batch_size", minimum=1),
        parameters=dict(params), status=status,
        trial_id=None if entry.get("trial_id") is None
        else _int(entry["trial_id"], path, f"{where}.trial_id"),
        steps_per_epoch=None if entry.get("steps_per_epoch") is None
        else _int(entry["steps_per_epoch"], path, f"{where}.steps_per_epoch", minimum=1))


def parse_manifest(obj: Any, path: str) -> RunManifest:
    """Check a loaded manifest object and return it as a :class:`RunManifest`."""
    top = _table(obj, path, "manifest", _TOP_KEYS)
    wl = _table(top.get("workload", {}), path, "[workload]", _WORKLOAD_KEYS)
    budget: int | dict[int, int] | None = None
    raw = wl.get("train_steps")
    if isinstance(raw, dict):
        budget = {_int(_key(k), path, "[workload].train_steps key", minimum=1):
                  _int(v, path, f"[workload].train_steps.{k}") for k, v in raw.items()}
    elif raw is not None:
        budget = _int(raw, path, "[workload].train_steps")
    metrics = _table(top.get("metrics", {}), path, "[metrics]")
    for old, new in metrics.items():
        if not isinstance(new, str):
            raise _fail(path, f"[metrics].{old}", f"{new!r} is not a column name (a string)")
        if new.removeprefix("1-"):  # an empty name drops the column
            check_name(new.removeprefix("1-"), "metric", fix="choose another name",
                       error=_failing(path, f"[metrics].{old}"))
    runs = top.get("runs", [])
    if not isinstance(runs, list):
        raise _fail(path, "runs", "expected a list of run entries ([[runs]] in TOML)")
    configs = top.get("parameter_configs")
    base = Path(path).parent
    for key in ("name", "dataset", "source"):
        if key in wl and not isinstance(wl[key], str):
            raise _fail(path, f"[workload].{key}", f"{wl[key]!r} is not a string")
    if wl.get("name"):
        Workload.parse(wl["name"].strip("/"), fix="fix name in the manifest (or pass --name)",
                       error=_failing(path, "[workload].name"))
    patterns = {}
    for key in ("include", "exclude"):
        value = wl.get(key, [])
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise _fail(path, f"[workload].{key}", f"{value!r} is not a list of glob patterns "
                        "(e.g. [\"*/measurements.csv\"])")
        patterns[key] = value
    select = FileFilter.of(patterns["include"], patterns["exclude"],
                           where=f"{path}: [workload].include/exclude")
    return RunManifest(
        select=select, path=path, name=wl.get("name"), dataset=wl.get("dataset"),
        train_steps=budget,
        early_stopping=_flag(wl.get("early_stopping", False), path, "[workload].early_stopping"),
        source=base / wl["source"] if wl.get("source") else None,
        steps_per_epoch=None if wl.get("steps_per_epoch") is None
        else _int(wl["steps_per_epoch"], path, "[workload].steps_per_epoch", minimum=1),
        train_examples=None if wl.get("train_examples") is None
        else _int(wl["train_examples"], path, "[workload].train_examples", minimum=1),
        metrics=dict(metrics),
        parameter_configs=None if configs is None
        else _value(_table(configs, path, "[parameter_configs]"), "", path,
                    "[parameter_configs]"),
        runs=[_run(r, path, f"runs[{i}]") for i, r in enumerate(runs)])


def load_run_manifest(path: str | Path) -> RunManifest:
    """Read a run manifest from a ``.toml``, ``.yaml``/``.yml`` or ``.json`` file (with the
    one loader of users' structured files, :mod:`curvekit.structured`)."""
    path = Path(path)

    def fail(message: str, line: int | None) -> IngestError:
        # the loader names the file first: the error names it once, with the line
        return IngestError(message.removeprefix(f"{path}: "), path=str(path), line=line)

    kind = structured.kind_of(path)
    if kind is None:
        raise IngestError(f"unknown manifest type {path.suffix.lower() or '(no suffix)'!r}; "
                          "name it .toml, .yaml or .json", path=str(path))
    # a regular file only (a FIFO would block), of sane size
    data = read_named(path, limit=MAX_MANIFEST, what="run manifest")
    obj = structured.loads(data, kind, where=str(path), expect=dict, error=fail)
    return parse_manifest(obj, str(path))
