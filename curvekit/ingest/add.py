"""``curvekit add``: turn training runs into a workload of the store, all or nothing.

:func:`add` reads every run, checks everything (names, steps, values, batch sizes,
statuses), builds one :class:`~curvekit.store.update.WorkloadData` and hands it to
:func:`~curvekit.store.update.add_workload`, which refuses a name that is taken, writes a
new store snapshot and swaps it in atomically. Any problem stops the import before the
store is touched. Importing the same runs again changes nothing.

>>> import pathlib, tempfile
>>> logs = pathlib.Path(tempfile.mkdtemp())
>>> for bs, speed in ((32, 1.0), (64, 2.0)):
...     rows = "".join(f"{s},{max(0.05, 1 - speed * s / 1000):.3f}\\n" for s in range(0, 1001, 100))
...     _ = (logs / f"bs{bs}.csv").write_text("step,val_error\\n" + rows)
>>> _ = (logs / "runs.toml").write_text(
...     '[[runs]]\\nrun = "bs32.csv"\\nbatch_size = 32\\n'
...     '[[runs]]\\nrun = "bs64.csv"\\nbatch_size = 64\\n')
>>> result = add(logs, name="my_data/mlp/sgd", manifest=logs / "runs.toml",
...              home=pathlib.Path(tempfile.mkdtemp()))
>>> result.changed, result.studies, result.trials, result.measurements
(True, 2, 2, 22)
"""

from __future__ import annotations

import csv
import math
import os
import re
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import polars as pl

from curvekit._version import __version__
from curvekit.errors import IngestError
from curvekit.ingest import (
    FORMATS,
    csvlogs,
    csvtext,
    dvclive,
    sacred,
    timm,
    ultralytics,
    wandb_local,
)
from curvekit.ingest import manifest as manifest_
from curvekit.ingest.algoperf import is_trial_folder
from curvekit.ingest.files import SourceFiles, files_of
from curvekit.ingest.jsonlines import LOG_NAME, is_jsonl_log
from curvekit.ingest.metrics import CROSS_ENTROPY, apply_map, parse_overrides, target
from curvekit.ingest.mlflow_sqlite import SUFFIXES as SQLITE_SUFFIXES
from curvekit.ingest.mlflow_sqlite import is_mlflow_db
from curvekit.ingest.plan import ImportPlan, MetricPlan, RunPlan, StudyPlan, run_files
from curvekit.ingest.runs import (
    INT64_MAX,
    IngestWarning,
    ReadOptions,
    RunLog,
    all_problems,
    conflict_rule,
    epochs_to_steps,
    settle_axis,
    steps_per_epoch,
)
from curvekit.ingest.select import ALL, FileFilter
from curvekit.ingest.status import decide, explain
from curvekit.names import ColumnNames, check_name
from curvekit.records import StudyKey, StudyRecord, TrialRecord, Workload
from curvekit.store.update import AddResult, WorkloadData, add_workload
from curvekit.values import parameter_fix, parameter_problem

__all__ = ["FORMATS", "Format", "add", "add_plan", "build", "detect_format"]

Format = Literal["auto", "release", "csv", "tensorboard", "mlflow", "wandb", "algoperf",
                 "hf", "sacred", "dvclive", "timm", "ultralytics", "jsonl"]
BATCH_SIZE_PARAMS = ("batch_size", "batchsize", "batch-size", "train_batch_size",
                     "global_batch_size")
BUDGET_PARAMS = ("train_steps", "max_steps", "total_steps", "num_steps")
PARAM_ALIASES = {"lr": "learning_rate", "learning-rate": "learning_rate"}
_TAR = re.compile(r"\.(tar(\.(bz2|gz|xz))?|tgz|tbz2?|txz)$", re.IGNORECASE)

Reader = Callable[[Path, ReadOptions], list[RunLog]]


def _reader(fmt: str) -> Reader:
    """The reader of one format; a format read by a module of its own imports only that
    module (a CSV import need not load the TensorBoard, MLflow or Hugging Face readers)."""
    if fmt == "hf":
        from curvekit.ingest import hf
        return lambda s, o: hf.read_hf_runs(s, select=o.select, files=o.files)
    if fmt == "tensorboard":
        from curvekit.ingest import tensorboard
        return lambda s, o: tensorboard.read_tensorboard_runs(s, select=o.select,
                                                              files=o.files)
    if fmt == "mlflow":
        from curvekit.ingest import mlflow_sqlite
        return mlflow_sqlite.read_mlflow_any
    if fmt == "jsonl":
        from curvekit.ingest import jsonlines
        return jsonlines.read_jsonl_runs
    if fmt == "algoperf":
        from curvekit.ingest import algoperf
        return algoperf.read_algoperf_runs
    readers: dict[str, Reader] = {
        "csv": csvlogs.read_csv_runs,
        "wandb": wandb_local.read_wandb_any,
        "sacred": sacred.read_sacred_runs,
        "dvclive": dvclive.read_dvclive_runs,
        "timm": timm.read_timm_runs,
        "ultralytics": ultralytics.read_ultralytics_runs,
    }
    return readers[fmt]


# ---------------------------------------------------------------------- format detection
def _csv_kind(path: Path, key: str, files: SourceFiles) -> str:
    """``wandb`` for a W&B history (``_step``) or chart export; else ``csv``. A W&B runs
    table is refused here: it is no history of any format."""
    # bounded: a header of a million columns is no reason to read on
    raw = files.read_line(path, csvlogs.MAX_HEADER_BYTES)
    titled = csvtext.below_title(files.read_head(path, csvtext.TITLE_SNIFF_BYTES))
    line = (titled if titled is not None else raw).decode("utf-8-sig", errors="replace")
    try:
        names = [n.strip() for n in next(csv.reader([line]), [])]
    except csv.Error:  # a line break inside the header: the CSV reader refuses it, with the line
        return "csv"
    csvlogs.refuse_runs_table(names, str(path), key)
    if "_step" in names or csvlogs.chart_export_runs(names, companions=False) is not None:
        return "wandb"
    return "csv"


def _under_mlflow_artifacts(folder: Path, source: Path, files: SourceFiles) -> bool:
    """True for a folder inside an MLflow run's ``artifacts/`` (autolog copies TensorBoard
    logs there: a by-product of the run, whose metrics MLflow holds itself)."""
    rel = folder.relative_to(source).parts
    here = source
    for part in rel:
        if part == "artifacts" and files.exists(here / "meta.yaml"):
            return True
        here = here / part
    return False


def detect_format(source: Path, select: FileFilter = ALL, *,
                  files: SourceFiles | None = None) -> str:
    """Which format ``source`` holds (a file or folder); :class:`IngestError` if unclear.

    Files a second format writes as a by-product of the first are not a second format:
    TensorBoard event files inside an MLflow run's ``artifacts/``, and the event files and
    ``measurements.csv`` in an AlgoPerf trial folder. The primary format is picked, and an
    :class:`~curvekit.ingest.runs.IngestWarning` says so. ``select`` leaves files out
    (``--include``/``--exclude``); ``files`` walks the folders and reads what detection
    needs (:mod:`curvekit.ingest.files`: no link is followed unless asked).

    >>> import pathlib, tempfile
    >>> d = pathlib.Path(tempfile.mkdtemp()); _ = (d / "run.csv").write_text("step,loss\\n")
    >>> detect_format(d)
    'csv'
    """
    if source.is_file():
        name = source.name.lower()
        own = _file_format(source, files_of(source, files))
        if own is not None:
            return own
        if _TAR.search(name):
            return "release"
        if ".tfevents." in name:
            return "tensorboard"
        if name == "trainer_state.json":
            return "hf"
        if name.endswith(".parquet"):
            return "wandb"
        if source.name == csvlogs.ALGOPERF_CURVE:
            return "algoperf"
        if name.endswith(".csv"):
            return _csv_kind(source, source.name, files_of(source, files))
        if csvlogs.is_csvlogger_log(source, files_of(source, files)):
            return "csv"
        raise IngestError("unknown format: not a .tar.* archive, an event file, a .csv or a "
                          ".parquet file; pass --log-format", path=str(source))
    files = files_of(source, files)
    found: set[str] = set()
    byproducts: dict[str, set[str]] = {}  # primary format -> what it made that was not read
    in_artifacts = False  # event files below an artifacts/ folder without MLflow's meta.yaml
    for here, dirs, listed in files.walk(source):
        rel = here.relative_to(source).as_posix()
        dirs[:] = [d for d in dirs if not csvlogs.skip_folder(here / d)
                   and not wandb_local.is_alias(here / d)
                   and select.keeps_folder(f"{rel}/{d}".removeprefix("./"))]
        names = {f for f in listed if select.keeps(f"{rel}/{f}".removeprefix("./"))}
        if "study.json" in names:
            found.add("release")
        if "trainer_state.json" in names:
            found.add("hf")
        if "meta.yaml" in names and ("metrics" in dirs
                                     or "experiment_id" in _peek(here, files)):
            found.add("mlflow")
        run = _run_folder_format(here, names, files)
        if run is not None:
            found.add(run[0])
            byproducts.setdefault(run[0], set()).update(run[1])
            if run[0] == "dvclive":
                dirs[:] = []
            continue
        if is_trial_folder(names):
            found.add("algoperf")
            made = {"TensorBoard event files" if ".tfevents." in f.lower() else f
                    for f in names if ".tfevents." in f.lower()
                    or f == csvlogs.ALGOPERF_STEPS}
            byproducts.setdefault("algoperf", set()).update(made)
            continue
        for f in sorted(names):
            low = f.lower()
            if ".tfevents." in low:
                if _under_mlflow_artifacts(here, source, files):
                    byproducts.setdefault("mlflow", set()).add(
                        "TensorBoard event files under its runs' artifacts/")
                elif here.name == "tf" and here != source and csvlogs.is_testtube_tags(
                        here.parent / csvlogs.TESTTUBE_TAGS, files.listdir(here.parent)):
                    byproducts.setdefault("csv", set()).add(
                        "TestTube's TensorBoard copy of its metrics.csv (tf/)")
                elif "artifacts" in Path(rel).parts:
                    in_artifacts = True  # an SQL store's artifact root has no meta.yaml
                else:
                    found.add("tensorboard")
            elif low.endswith(".parquet"):
                found.add("wandb")
            elif low.endswith(SQLITE_SUFFIXES) and is_mlflow_db(f, files.read_head(here / f, 16)):
                found.add("mlflow")
            elif (low == LOG_NAME or low.endswith(".jsonl")) \
                    and is_jsonl_log(f, files.read_head(here / f, 64)):
                found.add("jsonl")
            elif low.endswith(".csv") and "mlflow" not in found:
                found.add(_csv_kind(here / f, f"{rel}/{f}".removeprefix("./"), files))
            elif low.endswith(csvlogs.CSVLOGGER_LOG) and csvlogs.is_csvlogger_log(here / f,
                                                                                  files):
                found.add("csv")
    if in_artifacts:  # the artifacts of an MLflow store's runs, or logs of their own
        if "mlflow" in found:
            byproducts.setdefault("mlflow", set()).add(
                "TensorBoard event files under its runs' artifacts/")
        else:
            found.add("tensorboard")
    if "mlflow" in found or "release" in found:
        found.discard("csv")  # MLflow artifacts may be CSV files; the release's measurements are
    if "hf" in found and "tensorboard" in found:  # the Trainer's callback: the same scalars
        found.discard("tensorboard")
        byproducts.setdefault("hf", set()).add("TensorBoard event files (the Trainer's runs/)")
    if len(found) == 1:
        picked = found.pop()
        made = byproducts.get(picked, set())
        if made:
            others = _OTHERS.get(picked, "csv or tensorboard")
            warnings.warn(
                f"{source}: read as {picked}; not read: {', '.join(sorted(made))}, "
                f"by-products of the same runs (pass --log-format {others} to read those "
                "instead)", IngestWarning, stacklevel=2)
        return picked
    if not found:
        left_out = " that --include/--exclude left in" if select else ""
        raise IngestError("unknown format: found no study.json, MLflow meta.yaml, TensorBoard "
                          f"event file, .csv or .parquet log here{left_out}; pass --log-format, or "
                          "point at the folder that holds the logs", path=str(source))
    raise IngestError(f"holds logs of several formats ({', '.join(sorted(found))}); pass "
                      "--log-format to choose one, or leave files out with --exclude PATTERN",
                      path=str(source))


_OTHERS = {"mlflow": "tensorboard", "ultralytics": "tensorboard", "sacred": "csv",
           "timm": "csv", "hf": "tensorboard", "csv": "tensorboard"}
"""The format that reads what a primary format's runs made beside their logs."""


def _made(names: Iterable[str], logs: tuple[str, ...]) -> set[str]:
    """The files among ``names`` that another format would read: by-products of the run."""
    return {"TensorBoard event files" if ".tfevents." in n.lower() else n for n in names
            if ".tfevents." in n.lower() or n.lower().endswith(logs)}


def _run_folder_format(here: Path, names: set[str], files: SourceFiles
                       ) -> tuple[str, set[str]] | None:
    """The format of a folder that is one run of a logger keeping several files per run
    (Sacred, W&B, DVCLive, timm, Ultralytics), and the files in it that are by-products
    of the run (artifacts, TensorBoard copies of the same scalars), which are not read."""
    if sacred.is_run_folder(names):
        return "sacred", _made(names - {sacred.RUN_FILE}, (".csv", ".tsv", ".jsonl"))
    if wandb_local.is_local_run(names):
        return "wandb", set()
    if dvclive.is_dvclive_folder(here, files):
        return "dvclive", set()
    if timm.SUMMARY_FILE in names and timm.ARGS_FILE in names:
        return "timm", _made(names - {timm.SUMMARY_FILE}, (".csv",))
    if ultralytics.RESULTS_FILE in names and any(n in names for n in ultralytics.ARGS_FILES):
        return "ultralytics", _made(names - {ultralytics.RESULTS_FILE}, (".csv",))
    return None


def _file_format(source: Path, files: SourceFiles) -> str | None:
    """The format of a single file named as the source, for the formats that name their
    files (``summary.csv``, ``results.csv``, ``log.txt``, a SQLite store, W&B's history)."""
    names = set(files.listdir(source.parent)) if source.parent.is_dir() else set()
    run = _run_folder_format(source.parent, names, files) \
        if source.name in (timm.SUMMARY_FILE, ultralytics.RESULTS_FILE, sacred.RUN_FILE,
                           wandb_local.HISTORY_FILE) else None
    if run is not None:
        return run[0]
    low = source.name.lower()
    if not (low.endswith(SQLITE_SUFFIXES) or low == LOG_NAME or low.endswith(".jsonl")):
        return None
    head = files.read_head(source, 64)
    if is_mlflow_db(source.name, head):
        return "mlflow"
    if is_jsonl_log(source.name, head):
        return "jsonl"
    return None


def _peek(folder: Path, files: SourceFiles) -> str:
    return files.read_head(folder / "meta.yaml", 4096).decode(errors="replace")


# ---------------------------------------------------------------------- assembly
def _check_name(name: str | None, source: Path) -> tuple[str, str, str]:
    if not name:
        raise IngestError("the workload needs a name: pass --name base_dir/model/optimizer "
                          "(e.g. my_data/resnet_20/momentum), or set name in the manifest's "
                          "[workload] table", path=str(source))
    return Workload.parse(name.strip("/"), fix="pass another --name (or set name in the "
                          "manifest's [workload] table)")


def check_names(data: WorkloadData) -> WorkloadData:
    """``data`` if its workload, metric and metaparameter names follow :mod:`curvekit.names`
    (the one rule of every source) and its metaparameter values :mod:`curvekit.values`,
    else :class:`IngestError` naming the file at fault."""
    Workload.parse(data.workload, fix="pass another --name")
    columns = ColumnNames(IngestError,
                          metric_fix="rename it with --map 'OLD=NEW' (or [metrics] in the "
                          "manifest)",
                          parameter_fix="rename it in the log, or give the run's parameters "
                          "in a manifest ([[runs]] parameters = {...})")
    for trial in data.trials:
        for param, value in trial.parameters.items():
            columns.parameter(param, trial.member, error=_error_at(trial.member))
            _check_value(param, value, trial.member)
    members = {(t.key, t.trial_id): t.member for t in data.trials}
    for study_trial, table in data.measurements.items():
        member = members.get(study_trial) or ""
        for column in table.column_names:
            if column != "step":
                columns.metric(column, member, error=_error_at(member))
    return data


def _check_value(name: str, value: Any, where: str) -> None:
    """Refuse a metaparameter value the store cannot hold (curvekit.values): NaN, an
    infinity, an integer beyond int64, a date."""
    problem = parameter_problem(value, name)
    if problem is not None:
        raise IngestError(f"metaparameter {problem}; {parameter_fix(value)} where it is given",
                          path=where)


def _error_at(path: str | None, prefix: str = "") -> Callable[[str], IngestError]:
    return lambda message: IngestError(prefix + message, path=path)


def _specs_for(runs: Sequence[RunLog], specs: Sequence[manifest_.RunSpec], where: str
               ) -> dict[str, list[manifest_.RunSpec]]:
    out: dict[str, list[manifest_.RunSpec]] = {r.key: [] for r in runs}
    by_name: dict[str, list[RunLog]] = {}
    for r in runs:
        for n in dict.fromkeys(n.strip("/") for n in r.names):
            by_name.setdefault(n, []).append(r)
    for spec in specs:
        if any(c in spec.pattern for c in "*?["):
            hits = [r for r in runs if spec.matches(r.names)]
        else:  # a plain name: a lookup, so a manifest of thousands of runs stays fast
            hits = by_name.get(spec.pattern.strip("/"), [])
        if not hits:
            names = ", ".join(r.key for r in runs[:8]) + (" ..." if len(runs) > 8 else "")
            raise IngestError(f"{spec.where}: run {spec.pattern!r} matches no run of the "
                              f"source (its runs: {names or 'none'}); fix the name or the "
                              "pattern", path=where)
        for r in hits:
            out[r.key].append(spec)
    return out


def _count(value: Any) -> bool:
    """True for a number that can be a count in the store: finite, whole, within int64."""
    return isinstance(value, int | float) and not isinstance(value, bool) \
        and math.isfinite(value) and value == int(value) and abs(value) <= INT64_MAX


def _native_batch_size(run: RunLog) -> int | None:
    for name in BATCH_SIZE_PARAMS:
        value = run.params.get(name)
        if value is None:
            continue
        if not _count(value) or value < 1:
            raise IngestError(f"run {run.key!r}: its {name} parameter {value!r} is not a "
                              "positive integer; fix it, or give batch_size in the manifest",
                              path=run.path)
        return int(value)
    return None


def _parameters(run: RunLog, specs: Iterable[manifest_.RunSpec], manifest: str,
                columns: ColumnNames, batch_size: int) -> dict[str, tuple[Any, str, str]]:
    """The log's parameters updated by the manifest's; batch-size names left out (the batch
    size is the study), ``lr`` stored as ``learning_rate`` (unless the run has that too).
    Every other name is stored as given, in any case: names are values in the store, so
    ``optimizer`` beside ``param_optimizer`` or ``LR`` beside ``lr`` are different
    metaparameters.

    Returns stored name -> (value, name as given, where it was given). Names are checked by
    the one name rule before any renaming, then by ``columns``
    (:class:`curvekit.names.ColumnNames`); values the store cannot hold (NaN, an infinity,
    an integer beyond int64) are refused. A batch-size name in a
    manifest's ``parameters`` must agree with the run's batch size (``batch_size``): the
    batch size is the study's, never a metaparameter column.
    """
    merged: dict[str, tuple[Any, str]] = {k: (v, run.path) for k, v in run.params.items()}
    for spec in specs:
        merged.update({k: (v, f"{manifest}, {spec.where}") for k, v in spec.parameters.items()})
    out: dict[str, tuple[Any, str, str]] = {}
    for given, (value, where) in merged.items():
        at = _error_at(where, f"run {run.key!r}: ")
        if given in BATCH_SIZE_PARAMS:
            if where != run.path and value != batch_size:  # given in the manifest
                raise at(f"the parameter named {given!r} = {value!r} disagrees with the run's "
                         f"batch size {batch_size}: the batch size is the study's, not a "
                         "metaparameter; "
                         "give it once, as the entry's batch_size")
            continue
        check_name(given, "metaparameter", fix="rename it where it is given", error=at)
        key = given
        alias = PARAM_ALIASES.get(key)
        if alias is not None and alias not in merged:
            key = alias
        problem = parameter_problem(value, given)
        if problem is not None:
            raise at(f"metaparameter {problem}; {parameter_fix(value)} where it is given")
        column = columns.parameter(key, where, error=at)
        out[column] = (value, given, where)
    return dict(sorted(out.items()))


def _workload_columns() -> ColumnNames:
    """The names of one import: every run's metrics and metaparameters meet here."""
    return ColumnNames(IngestError, parameter_fix="rename it where it is given")


def _derived_configs(trials: Sequence[TrialRecord]) -> dict[str, Any]:
    """A search space read off the runs: the observed values or range of each parameter."""
    configs: dict[str, Any] = {}
    names = sorted({n for t in trials for n in t.parameters})
    for name in names:
        values = [t.parameters[name] for t in trials if t.parameters.get(name) is not None]
        numbers = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
        if numbers and len(numbers) == len(values) and len(set(numbers)) > 10:
            integer = all(isinstance(v, int) for v in numbers)
            configs[name] = {"type": "INTEGER" if integer else "DOUBLE",
                             "min_value": min(numbers), "max_value": max(numbers), "scale": ""}
        else:
            points = sorted({v if isinstance(v, int | float | str) else repr(v) for v in values},
                            key=lambda v: (isinstance(v, str), v))
            configs[name] = {"type": "DISCRETE", "feasible_points": points, "scale": ""}
    return configs


def _budget(man: manifest_.RunManifest, batch_size: int, runs: Sequence[RunLog],
            last_steps: Sequence[int]) -> int:
    given = man.train_steps_for(batch_size)
    if given is not None:
        return given
    for r in runs:
        for n in BUDGET_PARAMS:
            v = r.params.get(n)
            if isinstance(v, int | float) and not isinstance(v, bool) and not (
                    math.isfinite(v) and abs(v) <= INT64_MAX):
                raise IngestError(f"run {r.key!r}: its {n} parameter {v!r} is not a step count "
                                  f"(a whole number up to 2**63 - 1); fix it, or give "
                                  "train_steps in the manifest's [workload] table", path=r.path)
    native = [int(v) for r in runs for n in BUDGET_PARAMS
              if isinstance(v := r.params.get(n), int | float) and not isinstance(v, bool)
              and v > 0]
    if native:
        return max(native)
    return max(last_steps, default=0)


def _check_final_only(run: RunLog) -> None:
    """Refuse metrics logged once, without a step (final values): stored at step 0 they
    would read as the model's state before training."""
    final = [c for c in run.final_only if c in run.frame.columns]
    if not final:
        return
    metrics = [c for c in run.frame.columns if c not in ("step", "epoch")]
    if len(final) == len(metrics):
        raise IngestError(
            f"run {run.key!r} holds final values only: each of its metrics "
            f"({', '.join(final)}) is one value at step 0, logged without a step; curvekit "
            "imports curves (a value per evaluation): log them during training with "
            "mlflow.log_metric(key, value, step=<training step>)", path=run.path)
    names = ", ".join(repr(c) for c in final)
    maps = " ".join(f"--map '{c}='" for c in final)
    raise IngestError(
        f"run {run.key!r}: {'metrics' if len(final) > 1 else 'metric'} {names} "
        f"{'are' if len(final) > 1 else 'is'} one value at step 0, logged after the run's "
        f"curves (final values, not measurements at step 0); leave "
        f"{'them' if len(final) > 1 else 'it'} out with {maps} (or the manifest's [metrics] "
        "table)", path=run.path)


def _count_param(params: Mapping[str, Any], name: str) -> int | None:
    value: Any = params.get(name)
    if not _count(value) or value < 1:
        return None
    return int(value)


def _on_steps(run: RunLog, specs: Sequence[manifest_.RunSpec], man: manifest_.RunManifest,
              batch_size: int) -> tuple[pl.DataFrame, bool, str, str]:
    """The run's rows on the step axis, whether the manifest's steps per epoch (or
    train examples) were used, the axis (``step``, or ``epoch x N``) and its evidence.

    The one rule for every format: a run that counts epochs (see
    :func:`~curvekit.ingest.runs.settle_axis`) gets steps_per_epoch from the manifest's
    ``[[runs]]`` entry, its ``[workload]`` table, the log's own ``steps_per_epoch``
    parameter (Keras's autologging records it), or ``train_examples`` and the batch size,
    in that order; without one it is refused. A run whose logger lets the caller choose
    the step (MLflow, TensorBoard) and a manifest that gives steps per epoch: the steps are
    epochs, as the manifest says. A run whose log names its step axis and a ``[[runs]]``
    entry that gives steps per epoch is refused: the value would be ignored.
    """
    own = next((s for s in reversed(specs) if s.steps_per_epoch), None)
    if own is not None and run.axis_named and not run.by_epoch:
        raise IngestError(
            f"{own.where}: steps_per_epoch = {own.steps_per_epoch} is given for run "
            f"{run.key!r}, but its log counts training steps (a step column, or an epoch "
            "series apart from its steps); remove steps_per_epoch from the entry",
            path=man.path or run.path)
    from_manifest = (own.steps_per_epoch if own is not None else None) or man.steps_per_epoch
    per_epoch = from_manifest or _count_param(run.params, "steps_per_epoch")
    if per_epoch is None and man.train_examples:
        from_manifest = per_epoch = steps_per_epoch(man.train_examples, batch_size)
    frame = run.frame
    why = run.why_epochs
    if not run.by_epoch:
        if from_manifest is None or run.axis_named:
            evidence = ("the log names its step (a step column or the logger's own step "
                        "count)" if run.axis_named else "the logger's step, as the caller "
                        "logged it; no sign of an epoch axis (if it counts epochs, give "
                        "steps_per_epoch in the manifest)")
            return frame, False, "step", evidence
        frame = frame.rename({"step": "epoch"})  # the manifest says the steps are epochs
        why = "the manifest gives steps_per_epoch for a logger whose step is the caller's"
    elif per_epoch is None:
        raise IngestError(
            f"run {run.key!r} counts epochs, not training steps: {run.why_epochs}; give "
            "steps_per_epoch = N (training steps in one epoch) in the manifest's [workload] "
            "table (or its [[runs]] entry), or train_examples = N to compute it from the "
            "batch size, so that epochs become steps", path=run.path)
    assert per_epoch is not None
    given = "the manifest" if from_manifest is not None else "the log's steps_per_epoch"
    return (epochs_to_steps(frame, per_epoch, run.path), from_manifest is not None,
            f"epoch x {per_epoch}", f"{why}; {per_epoch} steps per epoch from {given}")


def _trial_ids(runs: Sequence[RunLog], explicit: Mapping[str, int | None], where: str
               ) -> dict[str, int]:
    """Trial ids: the manifest's, else 1, 2, ... in run order (see RunLog.order)."""
    keys = [r.key for r in sorted(runs, key=lambda r: r.order)]
    taken: dict[int, str] = {}
    for key in keys:
        tid = explicit.get(key)
        if tid is None:
            continue
        if tid in taken:
            raise IngestError(f"runs {taken[tid]!r} and {key!r} of one batch size both have "
                              f"trial_id {tid}; give each a distinct trial_id", path=where)
        taken[tid] = key
    out = {v: k for k, v in taken.items()}
    next_id = 1
    for key in (k for k in keys if explicit.get(k) is None):
        while next_id in taken:
            next_id += 1
        out[key] = next_id
        taken[next_id] = key
    return out


def build(source: str | os.PathLike[str] | None = None, *, name: str | None = None,
          format: Format | str = "auto", manifest: str | os.PathLike[str] | None = None,
          metric_map: Mapping[str, str] | Sequence[str] | None = None,
          include: Sequence[str] = (), exclude: Sequence[str] = (),
          follow_links: bool = False, on_conflict: str = "refuse",
          run_column: str | None = None, plan: ImportPlan | None = None) -> WorkloadData:
    """Read and check every run; return the workload, ready to be written (nothing is).

    Arguments as for :func:`add`; ``plan``, when given, is filled with what was inferred
    (see :func:`add_plan`).
    """
    man = manifest_.load_run_manifest(Path(manifest)) if manifest is not None \
        else manifest_.RunManifest()
    if source is not None:
        src = Path(source)
    elif man.source is not None:
        src = man.source
    elif manifest is not None:
        src = Path(manifest).parent
    else:
        raise IngestError("nothing to import: give the logs (SOURCE) or a manifest")
    if not src.exists():
        raise IngestError("no such file or folder; check the path of the logs",
                          path=str(src))
    if format not in FORMATS:
        raise IngestError(f"unknown format {format!r}; choose one of {', '.join(FORMATS)}")
    select = man.select.merged(FileFilter.of(include, exclude))
    # every file of the source is found and read through this one door
    files = SourceFiles.of(src, follow_links=follow_links, select=select)
    fmt = detect_format(src, select, files=files) if format == "auto" else format
    overrides = dict(man.metrics)
    overrides.update(metric_map if isinstance(metric_map, Mapping)
                     else parse_overrides(list(metric_map or [])))
    for old, new in overrides.items():  # new names follow the one rule; "" drops a column
        if new.removeprefix("1-"):
            check_name(new.removeprefix("1-"), "metric",
                       fix=f"give another name in --map '{old}=NEW'")
        if old in csvlogs.NOT_METRICS and new not in ("", "step"):
            raise IngestError(  # a map that no reader would apply is no silent no-op
                f"--map {old!r}={new!r}: {old!r} is never a metric (the epoch tells the time "
                f"axis; {', '.join(sorted(csvlogs.NOT_METRICS - {'epoch'}))} are the logger's "
                f"own counters and clocks), so it cannot become one; leave the map out, or use "
                f"--map '{old}=step' to make it the step column")
    if fmt == "release":
        if select:
            raise IngestError("--include/--exclude choose files of a folder of logs; a release "
                              "archive is read whole: leave them out", path=str(src))
        from curvekit.ingest.release import build_release

        return check_names(build_release(src, name=name or man.name, overrides=overrides,
                                         manifest=man, files=files))
    wl_name = _check_name(name or man.name, src)
    if run_column is not None and fmt not in ("csv", "wandb"):
        raise IngestError(f"--run-column {run_column!r} tells apart the runs of a CSV log "
                          f"holding several; these logs are read as {fmt}, whose runs are "
                          "apart already: leave --run-column out", path=str(src))
    renames = tuple(old for old, new in overrides.items() if new == "step")
    drop = frozenset(old for old, new in overrides.items() if not new)
    with conflict_rule(on_conflict):  # every reader merges rows through merge_rows
        runs = _reader(fmt)(src, ReadOptions(renames, drop, select, files, run_column))
    if run_column is not None and not any(run_column in r.params for r in runs):
        raise IngestError(f"--run-column {run_column!r} names no column of any log here; "
                          "name the column whose value says which run each row belongs to, "
                          "or leave --run-column out", path=str(src))
    if not runs:
        left_out = " (or --include/--exclude left every file out)" if select else ""
        raise IngestError(f"no {fmt} runs found here{left_out}; check the path, or pass "
                          "--log-format", path=str(src))
    if all(r.frame.height == 0 or set(r.frame.columns) <= {"step", "epoch"} for r in runs):
        raise IngestError(
            f"nothing to import: the {len(runs)} {fmt} run(s) found here "
            f"({', '.join(r.key for r in runs[:5])}{', ...' if len(runs) > 5 else ''}) hold no "
            "curve (no scalar logged at a step: only images, histograms, text, or Lightning's "
            "hp_metric placeholder); point at the logs that hold the training curves, or pass "
            "--log-format to read another format", path=str(src))
    data = check_names(_assemble(runs, wl_name, fmt, src, man, overrides, plan))
    if plan is not None:  # every file each run is read from, by the one rule of run_files
        made = run_files([(r.key, r.path, r.files) for r in runs], files.read())
        for planned in plan.runs:
            planned.files = made.get(planned.run, [planned.path])
        plan.unused = made[""]
    return data


def _assemble(runs: list[RunLog], name: tuple[str, str, str], fmt: str, src: Path,
              man: manifest_.RunManifest, overrides: dict[str, str],
              plan: ImportPlan | None = None) -> WorkloadData:
    where = man.path or str(src)
    specs = _specs_for(runs, man.runs, where)
    prepared: dict[int, list[tuple[RunLog, list[manifest_.RunSpec], pl.DataFrame,
                                   dict[str, str]]]] = {}
    renames = {old for old, new in overrides.items() if new == "step"}
    params: dict[str, dict[str, tuple[Any, str, str]]] = {}
    metric_names: list[tuple[str, str, str]] = []
    per_epoch_used = False
    axes: dict[str, tuple[str, str, str]] = {}  # run -> axis, its evidence, batch size from
    transforms: dict[str, dict[str, str]] = {}
    named: dict[str, dict[str, str]] = {}  # run -> loss column -> why that name
    dropped: dict[str, list[str]] = {}
    problems: list[IngestError] = []  # every run is checked; all problems reported at once
    for run in runs:
        mine = specs[run.key]
        batch_size = next((s.batch_size for s in reversed(mine) if s.batch_size), None)
        try:
            batch_size = batch_size or _native_batch_size(run)
        except IngestError as exc:
            problems.append(exc)
        if batch_size is None:
            problems.append(IngestError(
                f"run {run.key!r} has no batch size; give it in the manifest ([[runs]] "
                f"run = \"{run.key}\", batch_size = N) or log it as a parameter named "
                "batch_size", path=run.path))
        try:  # the other checks go on without a batch size, to find every problem now
            run = settle_axis(run, {old for old, new in overrides.items() if not new})
            declared = bool(man.steps_per_epoch or man.train_examples
                            or any(s.steps_per_epoch for s in mine))
            if not (declared and run.epoch_hint and run.frame.height == 1):
                # (an autologged run of one epoch logs its only epoch at step 0: with steps
                # per epoch given, that point is epoch 0, not a final value)
                _check_final_only(run)
            frame, used, axis, evidence = _on_steps(run, mine, man, batch_size or 1)
            run_params = dict(run.params)  # the log's parameters, then the manifest's
            for spec in mine:
                run_params.update(spec.parameters)
            mapped = apply_map(frame, "step", run.path,
                               {k: v for k, v in overrides.items() if k not in renames},
                               params=run_params)
        except IngestError as exc:
            problems.append(exc)
            continue
        if batch_size is None:
            continue
        axes[run.key] = (axis, evidence, "the manifest" if any(s.batch_size for s in mine)
                         else "the log's parameters")
        per_epoch_used = per_epoch_used or used
        metrics = [c for c in mapped.frame.columns if c != "step"]
        out = mapped.frame
        if metrics:
            out = out.filter(pl.any_horizontal(pl.col(c).is_not_null() for c in metrics))
        prepared.setdefault(batch_size, []).append((run, mine, out, mapped.sources))
        transforms[run.key] = mapped.transforms
        named[run.key] = mapped.why
        dropped[run.key] = [c for c in frame.columns if c != "step"
                            and c not in mapped.sources.values()]
        metric_names.extend((new, old, run.path) for new, old in mapped.sources.items())
    if problems:
        raise all_problems(problems)
    _two_kinds_of_loss(prepared, named)
    if not per_epoch_used and (man.steps_per_epoch or man.train_examples):
        given = "steps_per_epoch" if man.steps_per_epoch else "train_examples"
        value = man.steps_per_epoch or man.train_examples
        raise IngestError(
            f"[workload] {given} = {value} is given, but no run counts epochs: "
            f"{runs[0].key!r} logs training steps (a step column, or an epoch series apart "
            f"from its steps); remove {given} from the manifest", path=where)
    # The one place where the metric and metaparameter names of all runs meet (names are
    # data in the store: a workload holds any number of metrics, none clashes).
    columns = _workload_columns()
    for new, old, path in metric_names:
        columns.metric(new, path, logged=old, error=_error_at(path),
                       fix=f"rename it with --map '{old}=<new name>' (or the manifest's "
                       f"[metrics] table), or drop it with --map '{old}='")
    for batch_size, group in prepared.items():
        for run, mine, _, _ in group:
            params[run.key] = _parameters(run, mine, where, columns, batch_size)
    _note_alike(prepared, params, transforms)
    base_dir, model, optimizer = name
    studies, trials, measurements = [], [], {}
    origin_runs: dict[str, str] = {}
    for batch_size in sorted(prepared):
        group = prepared[batch_size]
        key = StudyKey(base_dir, model, optimizer, batch_size)
        lasts = [int(f.get_column("step").max() or 0) if f.height else 0  # type: ignore[arg-type]
                 for _, _, f, _ in group]
        # Steps done follow each logger's convention (Lightning logs step + 1 done).
        done = [last + r.step_offset for (r, *_), last in zip(group, lasts, strict=True)]
        budget = _budget(man, batch_size, [r for r, *_ in group], done)
        explicit = {r.key: next((s.trial_id for s in reversed(m) if s.trial_id is not None),
                                None) for r, m, _, _ in group}
        ids = _trial_ids([r for r, *_ in group], explicit, where)
        study_trials = []
        for (run, mine, frame, sources), last in zip(group, lasts, strict=True):
            told = next((s.status for s in reversed(mine) if s.status), None)
            status = decide(frame, sources, budget, told, step_offset=run.step_offset,
                            finished=run.finished)
            tid = ids[run.key]
            values = {k: v[0] for k, v in params[run.key].items()}
            if plan is not None:
                plan.runs.append(_run_plan(run, batch_size, tid, frame, sources, status,
                                           explain(frame, sources, budget, told,
                                                   step_offset=run.step_offset,
                                                   finished=run.finished,
                                                   finished_why=run.finished_why),
                                           axes[run.key], transforms[run.key],
                                           dropped[run.key], values, named[run.key]))
            study_trials.append(TrialRecord(key, tid, status, last, values, run.path))
            measurements[(key, tid)] = frame.to_arrow()
            origin_runs[f"{batch_size}/{tid}"] = run.key
        study_trials.sort(key=lambda t: t.trial_id)
        trials.extend(study_trials)
        configs = man.parameter_configs if man.parameter_configs is not None \
            else _derived_configs(study_trials)
        studies.append(StudyRecord(key, man.dataset or base_dir, man.early_stopping, budget,
                                   configs, {"imported_from": fmt}, where))
        if plan is not None:
            plan.studies.append(StudyPlan(batch_size, budget, _budget_from(
                man, batch_size, [r for r, *_ in group]), len(study_trials)))
    origin = {"format": fmt, "source": str(src.resolve()),
              "manifest": str(Path(man.path).resolve()) if man.path else None,
              "metric_map": dict(sorted(overrides.items())),
              "tool": f"curvekit {__version__} add", "runs": origin_runs}
    return WorkloadData(studies, trials, measurements, origin)


def _two_kinds_of_loss(prepared: Mapping[int, Sequence[tuple[RunLog, Any, Any,
                                                             Mapping[str, str]]]],
                       named: Mapping[str, Mapping[str, str]]) -> None:
    """Warn when a logged loss is the cross-entropy in some runs (their parameters say so)
    and a loss of unknown kind in others: a workload's runs share their loss."""
    said: dict[str, str] = {}  # logged loss -> its cross-entropy column
    plain: set[str] = set()
    runs: tuple[list[str], list[str]] = ([], [])  # runs that say cross-entropy, runs that don't
    for group in prepared.values():
        for run, _, _, sources in group:
            mine = [(new, old) for new, old in sources.items() if new in named.get(run.key, {})]
            ce = [(new, old) for new, old in mine if new.endswith(CROSS_ENTROPY)
                  and target(old)[0] != new]  # not by its name: by the run's parameters
            for new, old in ce:
                said[old] = new
            plain.update(old for new, old in mine if not new.endswith(CROSS_ENTROPY))
            if mine:
                runs[0 if ce else 1].append(run.key)
    both = sorted(set(said) & plain)
    if not both:
        return

    def shown(keys: list[str]) -> str:
        return ", ".join(map(repr, keys[:3])) + (", ..." if len(keys) > 3 else "")

    maps = " ".join(f"--map '{old}={said[old]}'" for old in both)
    warnings.warn(
        f"{'metrics' if len(both) > 1 else 'metric'} {shown(both)} "
        f"{'are' if len(both) > 1 else 'is'} stored as the cross-entropy in "
        f"{len(runs[0])} run(s) ({shown(runs[0])}: their parameters name a cross-entropy "
        f"loss) and as a loss of unknown kind (*/loss) in {len(runs[1])} "
        f"({shown(runs[1])}: nothing says so); if every run trained on one loss, give it "
        f"to all: {maps} (or the loss in the manifest's [[runs]] parameters)",
        IngestWarning, stacklevel=4)


def _note_alike(prepared: Mapping[int, Sequence[tuple[RunLog, Any, pl.DataFrame,
                                                     Mapping[str, str]]]],
                params: Mapping[str, Mapping[str, Any]],
                transforms: Mapping[str, Mapping[str, str]]) -> None:
    """Say when a metric is named like a metaparameter of its run (``learning_rate``
    logged as a curve and given in the config): both are kept, as names are data, and
    ``--map`` renames the metric."""
    alike: dict[str, str] = {}  # stored metric name -> the --map that renames it
    for group in prepared.values():
        for run, _, _, sources in group:
            for new, old in sources.items():
                if new in params.get(run.key, {}):
                    # the same transform as before: 1 - value stays 1 - value
                    flip = transforms.get(run.key, {}).get(new, "").startswith("1 - ")
                    alike.setdefault(new, f"--map '{old}={'1-' if flip else ''}logged/{new}'")
    if not alike:
        return
    new = min(alike)
    maps = " ".join(m for _, m in sorted(alike.items()))
    warnings.warn(
        f"metric {new!r} is named like a metaparameter of the same run(s)"
        f"{f' (and {len(alike) - 1} more)' if len(alike) > 1 else ''}: both are kept (names "
        "are data in the store: the curve as a metric, the setting as a metaparameter); to "
        f"store the metric under another name, {maps} (or the manifest's [metrics] table)",
        IngestWarning, stacklevel=4)


def _run_plan(run: RunLog, batch_size: int, trial_id: int, frame: pl.DataFrame,
              sources: Mapping[str, str], status: str, why: str,
              axis: tuple[str, str, str], transforms: Mapping[str, str],
              dropped: Sequence[str], parameters: Mapping[str, Any],
              named: Mapping[str, str]) -> RunPlan:
    steps = frame.get_column("step")
    span = (int(steps.min()), int(steps.max())) if frame.height else None  # type: ignore[arg-type]
    metrics = [MetricPlan(old, new, transforms.get(new, "value"), named.get(new, ""))
               for new, old in sorted(sources.items(), key=lambda item: item[1])]
    metrics += [MetricPlan(old, "", "dropped (--map)") for old in dropped]
    return RunPlan(run.key, run.path, batch_size, trial_id, axis[0], axis[1], frame.height,
                   span, status, why, axis[2], run.aliases, metrics, dict(parameters))


def _budget_from(man: manifest_.RunManifest, batch_size: int, runs: Sequence[RunLog]) -> str:
    if man.train_steps_for(batch_size) is not None:
        return "the manifest's train_steps"
    for r in runs:
        for n in BUDGET_PARAMS:
            v = r.params.get(n)
            if isinstance(v, int | float) and not isinstance(v, bool) and v > 0:
                return f"the log's {n} parameter"
    return ("the longest run of this batch size; give train_steps in the manifest for the "
            "budget you trained for")


def add_plan(source: str | os.PathLike[str] | None = None, *, name: str | None = None,
             format: Format | str = "auto", manifest: str | os.PathLike[str] | None = None,
             metric_map: Mapping[str, str] | Sequence[str] | None = None,
             include: Sequence[str] = (), exclude: Sequence[str] = (),
             follow_links: bool = False, on_conflict: str = "refuse",
             run_column: str | None = None) -> ImportPlan:
    """What :func:`add` would import, and why, without writing anything (``curvekit add
    --dry-run``): the logs are read and checked exactly as :func:`add` reads them, so a
    problem raises the same :class:`~curvekit.errors.IngestError`. The warnings the import
    raises are the plan's ``notes`` (and are raised too).

    >>> import pathlib, tempfile
    >>> logs = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (logs / "bs64.csv").write_text("step,val_acc\\n100,0.5\\n200,0.75\\n")
    >>> _ = (logs / "runs.toml").write_text('[[runs]]\\nrun = "*"\\nbatch_size = 64\\n')
    >>> plan = add_plan(logs / "bs64.csv", name="my_data/mlp/sgd", manifest=logs / "runs.toml")
    >>> run = plan.runs[0]
    >>> run.rows, run.steps, run.metrics[0].stored, run.metrics[0].transform
    (2, (100, 200), 'val/classification_error', '1 - value')
    """
    plan = ImportPlan(name or "", format, str(source) if source is not None else "")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", IngestWarning)
            data = build(source, name=name, format=format, manifest=manifest,
                         metric_map=metric_map, include=include, exclude=exclude,
                         follow_links=follow_links, on_conflict=on_conflict,
                         run_column=run_column, plan=plan)
    finally:  # raised again, for whoever listens (the CLI prints them)
        for warning in caught:
            warnings.warn_explicit(warning.message, warning.category, warning.filename,
                                   warning.lineno)
    plan.notes.extend(str(w.message) for w in caught if issubclass(w.category, IngestWarning))
    plan.workload = data.workload
    plan.format = str(data.origin.get("format", format))
    plan.source = str(data.origin.get("source", plan.source))
    if not plan.runs:  # the release's layout: its trials as they are
        for trial in data.trials:
            table = data.measurements[(trial.key, trial.trial_id)]
            steps = table.column("step").to_pylist()
            names = sorted(set(table.column("metric").to_pylist())) \
                if set(table.column_names) == {"step", "metric", "value"} \
                else [c for c in table.column_names if c != "step"]
            plan.runs.append(RunPlan(
                trial.member, trial.member, trial.key.batch_size, trial.trial_id, "step",
                "the release's measurements.csv", table.num_rows,
                (min(steps), max(steps)) if steps else None, trial.status,
                "the release's metadata.json", "the release's study.json",
                metrics=[MetricPlan(c, c) for c in names],
                parameters=dict(trial.parameters)))
    return plan


def add(source: str | os.PathLike[str] | None = None, *, name: str | None = None,
        format: Format | str = "auto", manifest: str | os.PathLike[str] | None = None,
        metric_map: Mapping[str, str] | Sequence[str] | None = None, replace: bool = False,
        home: str | os.PathLike[str] | None = None, include: Sequence[str] = (),
        exclude: Sequence[str] = (), follow_links: bool = False,
        on_conflict: str = "refuse", run_column: str | None = None) -> AddResult:
    """Import the training runs at ``source`` as the workload ``name`` of the store.

    ``format`` is one of :data:`FORMATS` (``auto`` detects it). ``manifest`` is a run
    manifest (TOML, YAML or JSON; see :data:`curvekit.ingest.manifest.EXAMPLE`) giving
    batch sizes, metaparameters and statuses; ``source`` may be omitted when the manifest
    says where the logs are. ``metric_map`` overrides metric names (``{"old": "new"}`` or
    ``["old=new"]``; ``1-new`` stores ``1 - value``, an empty new name drops the column).
    ``replace`` overwrites a workload added before under the same name. ``include`` and
    ``exclude`` are glob patterns relative to ``source`` choosing the files read (see
    :mod:`curvekit.ingest.select`; the manifest's ``[workload]`` ``include``/``exclude``
    add to them). Only regular files inside ``source`` are read, never through a symbolic
    link (see :mod:`curvekit.ingest.files`); ``follow_links`` follows links wherever they
    point (still to regular files only): use it for a folder of links you made yourself.
    ``on_conflict`` says what to do with one metric logged twice at one step with different
    values: ``refuse`` (the default), keep the ``first`` or the ``last`` value logged (see
    :func:`~curvekit.ingest.runs.merge_rows`). ``run_column`` names the column of a CSV log
    holding several runs one after another that says which run each row belongs to (one
    trial per value; without it such a column is found by the rule of
    :mod:`curvekit.ingest.stacked`).

    Raises :class:`~curvekit.errors.IngestError` naming the file, line and problem when an
    input is bad, and :class:`~curvekit.errors.StoreError` when the name is taken; the store
    is then unchanged.

    Examples
    --------
    >>> import curvekit
    >>> curvekit.add("lightning_logs", name="my_data/resnet_20/momentum",  # doctest: +SKIP
    ...              manifest="runs.toml", metric_map=["val_top1=1-val/classification_error"])
    AddResult(workload='my_data/resnet_20/momentum', changed=True, studies=6, trials=60, ...)

    A complete example that runs is in the module's documentation and in
    ``docs/adding-workloads.md``.
    """
    data = build(source, name=name, format=format, manifest=manifest, metric_map=metric_map,
                 include=include, exclude=exclude, follow_links=follow_links,
                 on_conflict=on_conflict, run_column=run_column)
    return add_workload(home, data, replace=replace)
