"""Sacred runs, as its ``FileStorageObserver`` writes them (Sacred itself not needed).

The observer writes one folder per run (``<basedir>/<run id>/``) holding ``run.json`` (the
run's record: ``status``, ``start_time``, ...), ``config.json`` (its configuration) and
``metrics.json`` (every ``_run.log_scalar(name, value, step)``: for each metric its
``steps``, ``values`` and ``timestamps``); files the run added as artifacts lie beside them.

* **One run per folder** holding ``run.json``, named by its path relative to SOURCE
  (``models/6``; SOURCE may be the run folder itself).
* **Steps** are whatever the caller passed to ``log_scalar``; without a ``step``, Sacred
  numbers each metric's points 0, 1, 2, ... on its own. Metrics that count their own calls
  at different rates (``trainLoss`` at 0..299, ``validLoss`` at 0..149: every metric
  gapless from 0, with different lengths) cannot share one step axis and are refused,
  naming them; leave one group out with ``--map NAME=``. Steps 0, 1, 2, ... without a gap
  (Sacred's own numbering, or ``step=epoch``) are counts, not training steps: the run is
  read on the epoch axis and needs ``steps_per_epoch`` (or ``train_examples``) in the
  manifest -- ``steps_per_epoch = 1`` where each point is one training step.
* **Status** from ``run.json``: ``COMPLETED`` is a finished run (judged by the step budget
  as any other); ``FAILED``, ``INTERRUPTED``, ``TIMEOUT``, ``RUNNING`` (a run whose process
  died leaves that behind) and ``QUEUED`` are runs that did not finish: INCOMPLETE.
* **Metaparameters** from ``config.json`` by :func:`curvekit.ingest.configs.flatten`
  (``__doc__`` left out).
* A run with no metric at all is refused when ``run.json`` says it COMPLETED (its curves,
  if any, are in files of its own: a CSV it wrote is read with ``--log-format csv``), and
  is a trial without measurements otherwise. A run whose every metric is one value at step
  0 (a hyperparameter search's parent run) holds no curve and is refused.

>>> import json, pathlib, tempfile
>>> run = pathlib.Path(tempfile.mkdtemp()) / "1"
>>> run.mkdir()
>>> _ = (run / "run.json").write_text(json.dumps({"status": "FAILED",
...                                               "start_time": "2020-07-07T00:42:35.061832"}))
>>> _ = (run / "config.json").write_text(json.dumps({"batch_size": 64, "lr": 0.1}))
>>> _ = (run / "metrics.json").write_text(json.dumps({"loss": {"steps": [100, 200],
...     "values": [2.0, 1.5], "timestamps": ["2020-07-07T00:43:00", "2020-07-07T00:44:00"]}}))
>>> [(r.key, r.params, r.finished, r.frame.rows()) for r in read_sacred_runs(run.parent)]
[('1', {'batch_size': 64, 'lr': 0.1}, False, [(100, 2.0), (200, 1.5)])]
"""

from __future__ import annotations

import datetime
import math
from pathlib import Path
from typing import Any

import polars as pl

from curvekit import structured
from curvekit.errors import IngestError
from curvekit.ingest.configs import flatten
from curvekit.ingest.csvlogs import skip_folder
from curvekit.ingest.files import SourceFiles, files_of
from curvekit.ingest.runs import INT64_MAX, MAX_COLUMNS, ReadOptions, RunLog, merge_rows
from curvekit.names import check_name

__all__ = ["FINISHED", "RUN_FILE", "is_run_folder", "read_sacred_runs"]

RUN_FILE = "run.json"
METRICS_FILE = "metrics.json"
CONFIG_FILE = "config.json"
FINISHED = "COMPLETED"
"""The one status of ``run.json`` that says the run finished."""
MAX_METRICS_BYTES = 256 << 20


def is_run_folder(names: set[str] | frozenset[str]) -> bool:
    """True for the files of a Sacred run folder: ``run.json`` beside ``config.json`` or
    ``metrics.json``."""
    return RUN_FILE in names and (METRICS_FILE in names or CONFIG_FILE in names)


def _load(path: Path, files: SourceFiles, what: str) -> dict[str, Any]:
    data = files.read_bytes(path, limit=MAX_METRICS_BYTES,
                            refuse=f"a Sacred {what} is a few MB at most: is this the right "
                            "file?")
    loaded: dict[str, Any] = structured.loads(
        data, "json", where=str(path), expect=dict,
        error=lambda message, line: IngestError(message.removeprefix(f"{path}: "),
                                                path=str(path), line=line))
    return loaded


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _points(name: str, entry: Any, path: Path) -> pl.DataFrame:
    """One metric of ``metrics.json`` as (step, value) rows, one per step."""
    steps = entry.get("steps") if isinstance(entry, dict) else None
    values = entry.get("values") if isinstance(entry, dict) else None
    if not isinstance(steps, list) or not isinstance(values, list) \
            or len(steps) != len(values):
        raise IngestError(f"metric {name!r} is not Sacred's {{\"steps\": [...], \"values\": "
                          "[...]}} with as many steps as values; leave the run out with "
                          "--exclude, or repair the file", path=str(path))
    for number, (step, value) in enumerate(zip(steps, values, strict=True), 1):
        if not _number(step) or not math.isfinite(step) or step != int(step) \
                or not 0 <= step <= INT64_MAX:
            raise IngestError(f"metric {name!r}: point {number} has step {step!r}, not a "
                              "non-negative integer", path=str(path))
        if value is not None and not _number(value):
            raise IngestError(f"metric {name!r}: point {number} has value {value!r}, not a "
                              f"number; leave the metric out with --map '{name}='",
                              path=str(path))
    frame = pl.DataFrame({"step": pl.Series([int(s) for s in steps], dtype=pl.Int64),
                          name: pl.Series([None if v is None else float(v) for v in values],
                                          dtype=pl.Float64)})
    return merge_rows(frame, str(path), lambda row: row + 1)


def _seconds(text: Any) -> float | None:
    if not isinstance(text, str):
        return None
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is None:  # Sacred writes UTC without saying so
        moment = moment.replace(tzinfo=datetime.UTC)
    return moment.timestamp()


def _refuse_counters(frames: list[pl.DataFrame], path: Path, key: str) -> None:
    """Every metric numbered 0, 1, ... on its own, at different lengths: call counters."""
    lengths: dict[int, list[str]] = {}
    for frame in frames:
        steps = frame.get_column("step")
        if frame.height < 2 or not bool(
                (steps == pl.int_range(0, frame.height, eager=True)).all()):
            return
        lengths.setdefault(frame.height, []).append(frame.columns[1])
    if len(lengths) < 2:
        return
    groups = "; ".join(f"{', '.join(names)} at steps 0..{n - 1}"
                       for n, names in sorted(lengths.items(), reverse=True))
    some = min(lengths.items())[1]
    maps = " ".join(f"--map '{n}='" for n in some)
    raise IngestError(
        f"run {key!r}: its metrics number their own points 0, 1, 2, ... at different rates "
        f"({groups}): Sacred's counters of log_scalar calls made without step=, not one "
        f"training-step axis; import one group at a time ({maps} leaves out the shorter "
        "one; then give steps_per_epoch in the manifest if a point is an epoch), or log with "
        "_run.log_scalar(name, value, step=<training step>)", path=str(path))


def _read_run(folder: Path, key: str, files: SourceFiles, drop: frozenset[str]) -> RunLog:
    record = _load(folder / RUN_FILE, files, RUN_FILE)
    status = record.get("status")
    config_path = folder / CONFIG_FILE
    config = _load(config_path, files, CONFIG_FILE) if files.exists(config_path) else {}
    params = flatten(config, skip=("__doc__",))
    metrics_path = folder / METRICS_FILE
    logged = _load(metrics_path, files, METRICS_FILE) if files.exists(metrics_path) else {}
    if len(logged) > MAX_COLUMNS:
        raise IngestError(f"{len(logged):,} metrics; curvekit reads at most {MAX_COLUMNS:,} "
                          "per run", path=str(metrics_path))
    frames = []
    for name, entry in logged.items():
        if name in drop:
            continue
        check_name(name, "metric", fix=f"rename it with --map '{name}=<new name>'",
                   error=lambda m: IngestError(m, path=str(metrics_path)))
        frames.append(_points(name, entry, metrics_path))
    finished = status == FINISHED
    if not frames and finished:
        beside = sorted(n for n in files.listdir(folder)
                        if n.lower().endswith((".csv", ".tsv", ".txt", ".log")))
        elsewhere = (f" (it wrote {', '.join(beside[:4])}{' ...' if len(beside) > 4 else ''} "
                     "itself: a CSV log per run is read with --log-format csv)") if beside \
            else ""
        raise IngestError(
            f"run {key!r} is COMPLETED but logged no metric to Sacred (its {METRICS_FILE} "
            f"holds none){elsewhere}; leave it out with --exclude '{key}'",
            path=str(metrics_path))
    if frames and all(f.height == 1 and f.item(0, "step") == 0 for f in frames):
        names = ", ".join(f.columns[1] for f in frames)
        raise IngestError(
            f"run {key!r} holds no curve: each of its metrics ({names}) is one value at step "
            "0 (a hyperparameter search's parent run, or values logged once); leave it out "
            f"with --exclude '{key}'", path=str(metrics_path))
    _refuse_counters(frames, metrics_path, key)
    frame = pl.DataFrame({"step": pl.Series([], dtype=pl.Int64)})
    if frames:
        frame = merge_rows(pl.concat(frames, how="diagonal"), str(metrics_path),
                           lambda row: row + 1)
    steps = frame.get_column("step")
    counted = frame.height >= 2 and bool(
        (steps == pl.int_range(0, frame.height, eager=True)).all())
    hint = ("Sacred numbers a metric's points 0, 1, 2, ... when log_scalar is called without "
            "step=: counts of calls (once per epoch, typically), not training steps") \
        if counted else None
    return RunLog(key, str(folder), frame, params, started=_seconds(record.get("start_time")),
                  axis_named=False, epoch_hint=hint, finished=finished)


def read_sacred_runs(source: Path, options: ReadOptions | None = None) -> list[RunLog]:
    """Every Sacred run folder under ``source`` (or ``source`` itself), one run each; see
    the module docs."""
    opts = options or ReadOptions()
    files = files_of(source, opts.files)
    if source.is_file():
        source = source.parent
    folders: list[tuple[Path, str]] = []
    for here, dirs, names in files.walk(source):
        rel = here.relative_to(source).as_posix()
        dirs[:] = sorted(d for d in dirs if not skip_folder(here / d)
                         and opts.select.keeps_folder(f"{rel}/{d}".removeprefix("./")))
        kept = {n for n in names if opts.select.keeps(f"{rel}/{n}".removeprefix("./"))}
        if is_run_folder(kept):
            folders.append((here, source.name if rel == "." else rel))
            dirs[:] = []
    return [_read_run(folder, key, files, opts.drop) for folder, key in folders]
