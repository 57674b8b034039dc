"""A local MLflow tracking folder (``mlruns/``), read from its files (MLflow not needed).

The file store keeps one folder per experiment (``mlruns/<experiment id>/meta.yaml``) and
one per run below it (``<run id>/meta.yaml``, ``params/<name>``, ``metrics/<key>``,
``tags/``). A metric file holds one line per logged point, ``timestamp value step``; keys
with ``/`` are nested folders. Runs in MLflow's trash (``lifecycle_stage: deleted``) are
skipped.

``SOURCE`` is the ``mlruns`` folder when it holds one experiment with runs, else the folder
of one experiment (``mlruns/<id>``) or of one run: runs of different experiments are never
mixed by accident. A run answers to its run id and its run name in the manifest; trials are
numbered in the order the runs started. Params are read as numbers where they spell one
(MLflow stores them as text), by the one rule of :func:`~curvekit.ingest.yamlish.param_value`.

MLflow's ``step`` is whatever the caller passed: autologging (Keras, PyTorch) passes the
epoch number, and :func:`~curvekit.ingest.runs.settle_axis` decides which axis a run has.
A metric logged once without a step (a final value, at step 0) is marked, and refused
unless left out with ``--map NAME=``.

Since MLflow 3 the file store must be allowed explicitly to *write* one
(``MLFLOW_ALLOW_FILE_STORE=true``); reading it here needs nothing.

>>> import pathlib, tempfile
>>> run = pathlib.Path(tempfile.mkdtemp()) / "1" / "abc"
>>> (run / "metrics").mkdir(parents=True); (run / "params").mkdir()
>>> _ = (run.parent / "meta.yaml").write_text("experiment_id: '1'\\nname: sweep\\n")
>>> _ = (run / "meta.yaml").write_text("run_id: abc\\nrun_name: bs64\\nlifecycle_stage: active\\n")
>>> _ = (run / "params" / "batch_size").write_text("64")
>>> _ = (run / "metrics" / "val_loss").write_text("1700000000000 2.3 0\\n1700000000100 1.9 100\\n")
>>> [(r.key, r.aliases, r.params, r.frame.rows()) for r in read_mlflow_runs(run.parent)]
[('abc', ('bs64',), {'batch_size': 64}, [(0, 2.3), (100, 1.9)])]
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from curvekit.errors import IngestError
from curvekit.ingest.files import SourceFiles, files_of
from curvekit.ingest.runs import (
    IngestWarning,
    LineOf,
    RunLog,
    exact_integers,
    merge_rows,
    overflow_warning,
    read_each,
)
from curvekit.ingest.select import ALL, FileFilter
from curvekit.ingest.yamlish import param_value, read_flat_yaml, scalar
from curvekit.names import check_name

__all__ = ["read_mlflow_runs"]


def _experiments(source: Path, files: SourceFiles) -> list[Path]:
    """The experiment folders to read: ``source`` itself, or its one experiment with runs."""
    if files.exists(source / "meta.yaml") and not files.exists(source / "metrics"):
        return [source]
    found = [p for p in (source / n for n in files.listdir(source))
             if files.is_dir(p) and not p.name.startswith(".") and files.exists(p / "meta.yaml")
             and any(_runs(p, files))]
    if len(found) > 1:
        names = ", ".join(
            f"{p.name} ({read_flat_yaml(p / 'meta.yaml', files=files).get('name', '?')})"
            for p in found)
        raise IngestError(f"holds several MLflow experiments with runs: {names}; one workload "
                          "is one experiment: pass the experiment's folder, e.g. "
                          f"{found[0]}", path=str(source))
    return found


def _runs(experiment: Path, files: SourceFiles) -> list[Path]:
    return [p for p in (experiment / n for n in files.listdir(experiment))
            if files.is_dir(p) and files.exists(p / "meta.yaml")
            and files.exists(p / "metrics")]


def _tree(folder: Path, files: SourceFiles) -> list[Path]:
    """Every file below ``folder`` (keys with ``/`` are nested folders) that ``--exclude``
    does not leave out, sorted."""
    found: list[Path] = []
    for here, dirs, names in files.walk(folder):
        dirs[:] = [d for d in dirs if not files.excluded(here / d)]
        found.extend(p for p in (here / n for n in names) if not files.excluded(p))
    return sorted(found)


def _metric(path: Path, key: str, files: SourceFiles) -> tuple[pl.DataFrame, float | None]:
    """One metric file as (step, value) rows, one per step, and the time of its last point
    (milliseconds; None for an empty file)."""
    data = files.read_bytes(path)
    if not data.strip():
        return pl.DataFrame(schema={"step": pl.Int64, key: pl.Float64}), None
    width = len(data.split(b"\n", 1)[0].split())
    if width not in (2, 3, 4, 5):
        raise IngestError("not an MLflow metric file: lines must be 'timestamp value step'",
                          path=str(path), line=1)
    names = ["timestamp", "value", "step", "x", "y"][:width]
    try:
        table = pacsv.read_csv(
            pa.py_buffer(data),
            read_options=pacsv.ReadOptions(column_names=names, use_threads=False),
            parse_options=pacsv.ParseOptions(delimiter=" "),
            convert_options=pacsv.ConvertOptions(
                # the step as text, made int64 exactly below: a float rounds above 2**53
                column_types={"timestamp": pa.float64(), "value": pa.float64(),
                              "step": pa.string()}, include_columns=names[:3],
                # "nan" and "inf" are values (a diverged run), not missing ones
                null_values=[], strings_can_be_null=False))
    except pa.ArrowInvalid as exc:
        for number, line in enumerate(data.decode(errors="replace").splitlines(), 1):
            cells = line.split()
            try:
                [float(c) for c in cells[:3]]
            except ValueError:
                raise IngestError(f"{line!r} is not 'timestamp value step' with numbers",
                                  path=str(path), line=number) from exc
            if len(cells) != width:
                raise IngestError(f"{len(cells)} fields where the first line has {width}",
                                  path=str(path), line=number) from exc
        raise IngestError(f"unreadable metric file: {exc}", path=str(path)) from exc
    line_of: LineOf = lambda row: row + 1  # noqa: E731 - one line per point, no header
    if "step" in table.column_names:
        table = table.set_column(table.column_names.index("step"), "step",
                                 exact_integers(table.column("step"), "step", str(path),
                                                line_of))
    message = overflow_warning(str(path), [(key, _values(data, 1))]) \
        if pc.any(pc.is_inf(table.column("value"))).as_py() else None
    if message is not None:
        warnings.warn(message, IngestWarning, stacklevel=2)
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    if "step" not in frame.columns:
        frame = frame.with_columns(pl.lit(0, dtype=pl.Int64).alias("step"))
    if frame.height > 1 and bool((frame.get_column("step") == 0).all()):
        raise IngestError(
            f"all {frame.height} points of metric {key!r} are at step 0 (logged without a "
            "step); curvekit needs the training step of each evaluation: log it with "
            "mlflow.log_metric(key, value, step=...)", path=str(path), line=2)
    last = frame.get_column("timestamp").max() if frame.height else None
    frame = frame.rename({"value": key}).select("step", key)
    return merge_rows(frame, str(path), line_of), \
        float(last) if isinstance(last, int | float) else None


def _values(data: bytes, field: int) -> list[str | None]:
    """Field ``field`` of each line of a metric file, as text."""
    cells = [line.split() for line in data.decode(errors="replace").splitlines()]
    return [c[field] if len(c) > field else None for c in cells if c]


def _at(path: Path) -> Callable[[str], IngestError]:
    return lambda message: IngestError(message, path=str(path))


def _read_run(folder: Path, files: SourceFiles) -> RunLog | None:
    meta = read_flat_yaml(folder / "meta.yaml", files=files)
    if meta.get("lifecycle_stage") == "deleted":
        return None
    run_id = str(meta.get("run_id") or folder.name)
    name = meta.get("run_name")
    tag = folder / "tags" / "mlflow.runName"
    if not name and files.exists(tag):
        name = files.read_text(tag, errors="replace").strip()
    params: dict[str, Any] = {}
    tags = folder / "tags" / "mlflow.autologging"
    flavor = files.read_text(tags, errors="replace").strip()[:40] \
        if files.exists(tags) else ""
    params_dir = folder / "params"
    if files.exists(params_dir):  # a link there is refused by the walk
        for p in _tree(params_dir, files):
            key = check_name(p.relative_to(params_dir).as_posix(), "metaparameter",
                             fix="rename the params file", error=_at(p))
            params[key] = param_value(scalar(files.read_text(p, errors="replace")))
    metrics_dir = folder / "metrics"
    # A file name is the metric's name: checked before it becomes a column (the one rule).
    read = [_metric(p, check_name(p.relative_to(metrics_dir).as_posix(), "metric",
                                  fix="rename the metrics file",
                                  error=_at(p)), files)
            for p in _tree(metrics_dir, files)]
    frames = [f for f, _ in read]
    frame: pl.DataFrame
    if frames:
        frame = pl.concat(frames, how="diagonal").group_by("step").agg(
            pl.col(c).drop_nulls().first() for f in frames for c in f.columns if c != "step")
        frame = merge_rows(frame.sort("step"), str(metrics_dir), lambda row: row + 1)
    else:
        frame = pl.DataFrame({"step": pl.Series([], dtype=pl.Int64)})
    aliases = (str(name),) if name and str(name) != run_id else ()
    start = meta.get("start_time")
    hint = (f"MLflow autologging ({flavor}) logs once per epoch, with step = the epoch "
            "number") if flavor else None
    status = RUN_STATUSES.get(str(meta.get("status", "")).upper(), meta.get("status"))
    return RunLog(run_id, str(folder), frame, params, aliases=aliases,
                  started=float(start) if isinstance(start, int | float) else None,
                  axis_named=False, epoch_hint=hint, final_only=_final_only(read),
                  finished=None if status is None else status == "FINISHED",
                  finished_why=f"MLflow status {status}" if status is not None else "")


RUN_STATUSES = {"1": "RUNNING", "2": "SCHEDULED", "3": "FINISHED", "4": "FAILED", "5": "KILLED",
                **{s: s for s in ("RUNNING", "SCHEDULED", "FINISHED", "FAILED", "KILLED")}}
"""MLflow's run statuses (``RunStatus``: the file store's meta.yaml keeps the number, the
SQLite store the name). Only FINISHED is a run that ended normally; RUNNING is also what a
killed process leaves behind."""


def _final_only(read: list[tuple[pl.DataFrame, float | None]]) -> tuple[str, ...]:
    """Metrics logged as one value at step 0 after the run's curves (or in a run without
    curves): ``mlflow.log_metric(key, value)`` at the end of training, a final value.

    One point at step 0 logged *before* another metric's later points is an evaluation
    before training, and stays (the timestamps tell them apart).
    """
    curves = [t for f, t in read if t is not None
              and bool((f.get_column("step") > 0).any())]
    end = max(curves, default=None)
    return tuple(f.columns[1] for f, t in read
                 if f.height == 1 and f.item(0, "step") == 0
                 and (end is None or (t is not None and t >= end)))


def read_mlflow_runs(source: Path, *, select: FileFilter = ALL,
                     files: SourceFiles | None = None) -> list[RunLog]:
    """The runs of the one experiment under ``source`` (see the module docs); a run folder
    that ``select`` leaves out (``--exclude '<run id>'``) is not read; ``files`` reaches
    the files (:mod:`curvekit.ingest.files`)."""
    if source.is_file():
        raise IngestError("an MLflow source is a folder (mlruns/ or mlruns/<experiment id>)",
                          path=str(source))
    files = files_of(source, files)
    if files.exists(source / "meta.yaml") and files.exists(source / "metrics"):
        folders = [source]  # one run's folder
    else:
        folders = [r for e in _experiments(source, files) for r in _runs(e, files)
                   if select.keeps_folder(r.relative_to(source).as_posix())
                   and (not select.include or select.keeps(r.relative_to(source).as_posix()))]
    # every run is read, and every problem found is reported at once
    return [r for r in read_each(folders, lambda f: _read_run(f, files)) if r is not None]
