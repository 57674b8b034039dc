"""Weights & Biases run histories exported to CSV or Parquet, one file per run.

The history's step column is ``_step`` -- unless it has ``step``, ``global_step`` or
``trainer/global_step`` (PyTorch Lightning's WandbLogger): ``_step`` counts log calls, those
count training steps. W&B's other bookkeeping columns (``_runtime``, ``_timestamp``,
``_wandb`` ...) are left out. In a Parquet history, columns that do not hold
numbers (media, tables) are left out too. No network access: export the history first
(``run.scan_history()`` to a file, or the run-history Parquet export; ``run.history()`` is
down-sampled, and CSV exports from the web UI can drop steps).

**Chart exports.** A chart's 'Export as CSV' in the W&B UI holds several runs in one file:
the x axis first (``Step``), then ``<run> - <metric>`` columns, each with companions
``<run> - <metric>__MIN`` and ``__MAX``. Each run becomes a run of its own, named by the text
before the last ``" - "``; its metrics take the text after it. The ``__MIN``/``__MAX``
companions are left out: they are the range of the points a sampled chart merged into one
(equal to the value when the chart was not sampled), not metrics of their own. Several chart
exports in one folder (one per chart) are joined by run name: a run's metrics from every
file become one run. Cells are quoted (``""`` is a missing value). A *runs table* export
(``Name``, ``State``, ... one row per run with summary values) is refused: it is not a
history (see :func:`curvekit.ingest.csvlogs.refuse_runs_table`).

>>> import pathlib, tempfile
>>> p = pathlib.Path(tempfile.mkdtemp()) / "run-1.csv"
>>> _ = p.write_text("_step,_runtime,val_loss\\n0,1.5,2.3\\n100,9.1,1.9\\n")
>>> [r.frame.rows() for r in read_wandb_runs(p)]
[[(0, 2.3), (100, 1.9)]]
>>> p.unlink(); c = p.with_name("chart.csv")
>>> _ = c.write_text('"Step","a - loss","a - loss__MIN","a - loss__MAX","b - loss"\\n'
...                  '"0","2.0","2.0","2.0",""\\n"10","1.5","1.5","1.5","1.7"\\n')
>>> [(r.key, r.frame.rows()) for r in read_wandb_runs(c)]
[('a', [(0, 2.0), (10, 1.5)]), ('b', [(0, None), (10, 1.7)])]
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from curvekit.errors import IngestError
from curvekit.ingest import csvlogs, csvtext
from curvekit.ingest.csvlogs import AXIS_COLUMNS, frame_from_table, log_files, read_csv_file
from curvekit.ingest.files import SourceFiles, files_of
from curvekit.ingest.runs import (
    MAX_COLUMNS,
    IngestWarning,
    LineOf,
    ReadOptions,
    RunLog,
    data_line,
    merge_rows,
)

__all__ = ["read_chart_export", "read_parquet_run", "read_wandb_runs"]


def read_parquet_run(path: Path, key: str, *, step_renames: Iterable[str] = (),
                     files: SourceFiles | None = None) -> RunLog:
    """One run from a Parquet history: numeric columns, ``_``-columns other than ``_step``
    left out. ``files`` reaches the file (:mod:`curvekit.ingest.files`)."""
    axes = AXIS_COLUMNS | set(step_renames)
    with files_of(path, files).open(path) as fh:
        try:
            width = len(pq.read_schema(fh))  # the footer alone: refuse a huge file unread
            if width > MAX_COLUMNS:
                raise IngestError(f"the history has {width:,} columns; curvekit reads at most "
                                  f"{MAX_COLUMNS:,} per log (one per metric); leave the "
                                  "columns you do not need out of the export", path=str(path))
            fh.seek(0)
            table = pq.read_table(fh)
        except (OSError, pa.ArrowException) as exc:
            raise IngestError(f"not a readable Parquet file: {exc}", path=str(path)) from exc
    keep = {}
    for name, column in zip(table.column_names, table.columns, strict=True):
        if name.startswith("_") and name != "_step":
            continue
        kind = column.type
        if pa.types.is_integer(kind) and name in axes:
            keep[name] = column  # a step column stays an exact integer
        elif pa.types.is_integer(kind) or pa.types.is_floating(kind) \
                or pa.types.is_boolean(kind):
            keep[name] = column.cast(pa.float64())
    frame, by_epoch = frame_from_table(pa.table(keep), str(path), None,
                                       step_renames=step_renames)
    stem = key[: -len(".parquet")] if key.endswith(".parquet") else key
    return RunLog(key, str(path), frame, {}, aliases=(stem,), by_epoch=by_epoch)


GROUP_PREFIX = "group:"
"""How a grouped chart names a group's line in its export: ``Group: <name> - <metric>``."""


def read_chart_export(path: Path, key: str, *, step_renames: Iterable[str] = (),
                      drop: Iterable[str] = (), files: SourceFiles | None = None
                      ) -> list[RunLog] | None:
    """The runs of a W&B chart export (see the module docs), or None if ``path`` is not one.

    ``drop`` (``--map NAME=``) leaves out a metric of every run (``train/loss``) or one
    column (``<run> - train/loss``), before values are parsed; so are ``_``-metrics
    (``<run> - _step``), W&B's bookkeeping, unless a run's ``_step`` places it (an x axis
    that is no step column). A grouped chart's export is refused. ``files`` reaches the
    file.
    """
    files = files_of(path, files)
    first = csvlogs.read_header_line(path, files)
    if not first.strip():
        return None  # read_csv_run says the file is empty and how to leave it out
    titled = csvtext.below_title(files.read_head(path, csvtext.TITLE_SNIFF_BYTES))
    names = csvlogs._header(titled if titled is not None else first, str(path))
    runs = csvlogs.chart_export_runs(names, companions=False)
    if runs is None:
        return None
    _refuse_groups(runs, str(path), key)
    axis = names[0]
    own = _own_steps(runs, axis, step_renames, str(path))
    data, _ = csvtext.without_title(files.read_bytes(path), str(path))
    dropped = set(drop)
    wanted = {run: [(col, metric) for col, metric in cols
                    if (not metric.startswith("_") or own.get(run) == col)
                    and metric not in dropped and col not in dropped]
              for run, cols in runs.items()}
    keep = {axis} | {col for cols in wanted.values() for col, _ in cols}
    table = csvlogs.read_table_bytes(data, str(path), names, text=[axis, *own.values()],
                                     skip=[n for n in names if n not in keep])
    stem = key[: -len(path.suffix)] if path.suffix else key
    line_of = data_line(data)
    out = []
    for run, cols in wanted.items():
        if run in own:  # placed by its own step column; rows without one are not its points
            sub = pa.table({metric: table.column(col) for col, metric in cols})
            rows = pc.indices_nonzero(pc.is_valid(table.column(own[run]))).to_pylist()
            sub = sub.take(pa.array(rows, pa.int64()))
            at = _lines_of(rows, line_of)
        else:
            sub = pa.table({axis: table.column(axis),
                            **{metric: table.column(col) for col, metric in cols}})
            at = line_of
        frame, by_epoch = frame_from_table(sub, str(path), data, step_renames=step_renames,
                                           line_of=at)
        out.append(RunLog(run, str(path), frame, {}, aliases=(f"{stem}/{run}",),
                          by_epoch=by_epoch))
    return out


def _lines_of(rows: list[int], line_of: LineOf) -> LineOf:
    """The file's lines of a table's ``rows`` taken apart."""
    return lambda r: line_of(rows[r])


def _refuse_groups(runs: Mapping[str, object], path: str, key: str) -> None:
    """Refuse a grouped chart's export: a group's line is an aggregate of its runs."""
    groups = [r for r in runs if r.lower().startswith(GROUP_PREFIX)]
    if not groups:
        return
    raise IngestError(
        f"this W&B chart export is grouped ({len(groups)} group(s), e.g. {groups[0]!r}): a "
        "group's line is an aggregate of its runs (their mean, with __MIN/__MAX their "
        "range), not the curve of one run, and curvekit measures each run (trial) apart; "
        "turn grouping off in the W&B workspace (the runs table's Group button) and export "
        f"the chart again, one '<run> - <metric>' column per run; to leave the file out: "
        f"--exclude '{key}'", path=path, line=1)


def _own_steps(runs: Mapping[str, list[tuple[str, str]]], axis: str,
               step_renames: Iterable[str], path: str) -> dict[str, str]:
    """For a chart whose x axis is no step column (``epoch``, ``epoch_id``, a wall clock):
    each run's own step column (``<run> - _step``, the first of STEP_COLUMNS each run has),
    by which it is placed, as a history's step column wins over its epochs; {} when the x
    axis is a step column, or ``epoch`` and some run has no step of its own (epochs then
    place every run)."""
    if (axis in AXIS_COLUMNS and axis != "epoch") or axis in set(step_renames):
        return {}
    own = {}
    for run, cols in runs.items():
        by_metric = {metric: col for col, metric in cols}
        found = next((by_metric[s] for s in csvlogs.STEP_COLUMNS if s in by_metric), None)
        if found is None and axis == "epoch":
            return {}
        if found is None:
            raise IngestError(
                f"the chart's x axis {axis!r} is no step column, and run {run!r} has no step "
                f"column of its own ('<run> - _step'); export the chart with the x axis Step, "
                f"or, if {axis!r} counts training steps, --map '{axis}=step'",
                path=path, line=1)
        own[run] = found
    warnings.warn(
        f"{path}: the chart's x axis {axis!r} is no step column: each of its {len(own)} "
        f"run(s) is placed by its own step column ({next(iter(own.values()))!r}, ...), "
        f"{axis!r} is left out; to place them by {axis!r}, --map '{axis}=step'",
        IngestWarning, stacklevel=3)
    return own


def _join(runs: list[RunLog]) -> RunLog:
    """One run from the runs of one name in several chart exports: rows of one step
    merged, two different values of one metric at one step refused."""
    if len(runs) == 1:
        return runs[0]
    first = runs[0]
    axis = "epoch" if first.by_epoch else "step"
    if any(r.by_epoch != first.by_epoch for r in runs):
        raise IngestError(f"run {first.key!r} is placed by steps in one chart export and by "
                          f"epochs in another ({', '.join(r.path for r in runs)}); export "
                          "every chart with the same x axis", path=runs[-1].path)
    frame = pl.concat([r.frame for r in runs], how="diagonal_relaxed")
    merged = merge_rows(frame, " and ".join(r.path for r in runs), lambda row: row + 2, axis)
    aliases = tuple(dict.fromkeys(a for r in runs for a in r.aliases))
    return RunLog(first.key, first.path, merged, {}, aliases=aliases, by_epoch=first.by_epoch,
                  files=tuple(r.path for r in runs[1:]))


def read_wandb_runs(source: Path, options: ReadOptions | None = None) -> list[RunLog]:
    """Every ``*.csv`` and ``*.parquet`` history under ``source``, one run each; every run
    of a chart export, one run each, joined by name across files."""
    opts = options or ReadOptions()
    files = files_of(source, opts.files)

    def read(item: tuple[Path, str]) -> tuple[bool, list[RunLog]]:
        path, key = item
        if path.name.lower().endswith(".parquet"):
            return False, [read_parquet_run(path, key, step_renames=opts.step_renames,
                                            files=files)]
        charts = read_chart_export(path, key, step_renames=opts.step_renames, drop=opts.drop,
                                   files=files)
        if charts is not None:
            return True, charts
        return False, read_csv_file(path, key, step_renames=opts.step_renames,
                                    drop_private=True, drop=opts.drop, files=files,
                                    run_column=opts.run_column)

    with ThreadPoolExecutor(min(4, os.cpu_count() or 1)) as pool:
        found = list(pool.map(read, log_files(source, (".csv", ".parquet"), opts.select,
                                              files)))
    histories = [r for chart, runs in found if not chart for r in runs]
    by_name: dict[str, list[RunLog]] = {}
    for chart, runs in found:
        for r in runs if chart else ():
            by_name.setdefault(r.key, []).append(r)
    taken = {r.key: r.path for r in histories}
    for name, runs in by_name.items():
        if name in taken:
            raise IngestError(f"run {name!r} of a chart export has the name of the history "
                              f"file {taken[name]}; rename the file, or leave one out with "
                              "--exclude", path=runs[0].path)
    return histories + [_join(runs) for runs in by_name.values()]
