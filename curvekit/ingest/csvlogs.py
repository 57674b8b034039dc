"""CSV logs, one file per run: PyTorch Lightning's and Keras's CSVLogger, or any CSV with a
step column.

* **Lightning** (``save_dir/name/version_N/metrics.csv``): columns ``epoch``, ``step`` and
  one per logged key; training and validation metrics land on *different rows* with the same
  step, empty elsewhere. Rows of one step are merged. An ``hparams.yaml`` beside the file
  supplies metaparameters. Lightning's ``step`` is the 0-based index of the batch just
  trained, so a run of ``max_steps`` logs its last row at ``max_steps - 1``: such a file (a
  ``metrics.csv`` with ``epoch`` and ``step`` columns) is read with ``step_offset=1``, and
  its completeness is judged on ``step + 1`` steps done. The rows keep the logged steps.
* **Keras** (``CSVLogger``): one row per epoch, columns ``epoch`` and every logged key. The
  step of a row is ``(epoch + 1) * steps_per_epoch`` (the manifest gives ``steps_per_epoch``,
  or ``train_examples`` to compute it from the batch size).
* **Any other CSV**: the step column is the first of ``step``, ``global_step``,
  ``trainer/global_step``, ``_step``, ``Step``, ``iteration``, ``iter`` (or the column given
  by ``--map COLUMN=step``); every other column must be numeric. Wall-clock columns
  (``_runtime``, ``_timestamp``, ``timestamp``, ``wall_time``, ``Wall time``), W&B's
  ``_step`` when another column is the step and, when there is a step column, ``epoch`` are
  left out.

Values are parsed by pyarrow's CSV reader: an empty cell (or ``NA``, which Keras writes for
a metric an epoch did not log) is missing; ``nan``/``inf``/``-inf`` are the values they
spell.

>>> import pathlib, tempfile
>>> p = pathlib.Path(tempfile.mkdtemp()) / "metrics.csv"
>>> _ = p.write_text("epoch,step,train_loss,val_loss\\n0,49,2.1,\\n0,49,,2.2\\n1,99,1.7,\\n")
>>> run = read_csv_run(p, "metrics.csv")
>>> run.frame.rows()
[(49, 2.1, 2.2), (99, 1.7, None)]
"""

from __future__ import annotations

import csv
import io
import re
import warnings
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from curvekit import structured
from curvekit.errors import IngestError
from curvekit.ingest import stacked
from curvekit.ingest.csvtext import dialect, is_number, plain_csv, without_title
from curvekit.ingest.files import SourceFiles, files_of
from curvekit.ingest.runs import (
    MAX_COLUMNS,
    IngestWarning,
    LineOf,
    ReadOptions,
    RunLog,
    data_line,
    epochs_to_steps,
    exact_integers,
    merge_rows,
    overflow_warning,
    read_each,
    steps_per_epoch,
)
from curvekit.ingest.select import ALL, FileFilter
from curvekit.ingest.yamlish import param_value, read_flat_yaml, scalar
from curvekit.names import name_problem

__all__ = [
    "ALGOPERF_CURVE",
    "ALGOPERF_STEPS",
    "AXIS_COLUMNS",
    "CHART_COMPANIONS",
    "INDEX_COLUMN",
    "LIGHTNING_STEP_OFFSET",
    "MAX_HEADER_BYTES",
    "NOT_METRICS",
    "RUNS_TABLE_COLUMNS",
    "STEP_COLUMNS",
    "TIME_COLUMNS",
    "chart_export_runs",
    "dialect",
    "epochs_to_steps",
    "frame_from_table",
    "is_csvlogger_log",
    "is_lightning_log",
    "is_testtube_tags",
    "log_files",
    "plain_csv",
    "read_csv_file",
    "read_csv_run",
    "read_csv_runs",
    "read_header_line",
    "read_table_bytes",
    "refuse_runs_table",
    "skip_folder",
    "steps_per_epoch",
]

# Training-step columns, most specific first: W&B's "_step" counts log calls, so a history
# that also has Lightning's "trainer/global_step" is placed by the latter.
STEP_COLUMNS = ("step", "global_step", "trainer/global_step", "_step", "Step", "iteration",
                "iter")
# Empty cells are missing, and "NA": Keras's CSVLogger writes it for a metric an epoch lacks.
MISSING = ("", "NA")
TIME_COLUMNS = frozenset({"_runtime", "_timestamp", "timestamp", "wall_time", "Wall time",
                          "created_at"})  # created_at: TestTube's (Lightning <= 0.7) clock
NOT_METRICS = frozenset({"epoch", "_step", *TIME_COLUMNS})
"""Columns a log may hold that are never metrics: the epoch (it tells the time axis), W&B's
own step counter and the wall clock. A ``--map`` that names one as a metric is refused."""
# Columns that may hold the time axis: read as text and converted to int64 exactly.
AXIS_COLUMNS = frozenset({*STEP_COLUMNS, "epoch"})
MAX_HEADER_BYTES = 4 << 20
"""The longest header line read: 10,000 names of up to 400 bytes each. A longer one is
refused before the rest of the file is read."""
# Lightning logs the global step *before* the optimizer step is counted (the batch's 0-based
# index), so the row of the last batch of a max_steps run is at max_steps - 1.
LIGHTNING_STEP_OFFSET = 1


def is_lightning_log(path: Path, names: Iterable[str]) -> bool:
    """A file written by PyTorch Lightning's CSVLogger: ``metrics.csv`` with the ``epoch``
    and ``step`` columns its logger connector adds to every row (an ``hparams.yaml``
    beside it is usual but optional: a run that saved no hyperparameters may lack it).

    >>> is_lightning_log(Path("version_0/metrics.csv"), ["epoch", "step", "val_loss"])
    True
    >>> is_lightning_log(Path("run.csv"), ["epoch", "step", "val_loss"])
    False
    """
    have = set(names)
    return path.name == "metrics.csv" and {"epoch", "step"} <= have


def _header(data: bytes, path: str, line: int = 1) -> list[str]:
    """The column names of a CSV log's first non-blank line (linear in its length; at most
    :data:`~curvekit.ingest.runs.MAX_COLUMNS` of them); ``line`` is its line in the file."""
    first = data.lstrip(b"\r\n").split(b"\n", 1)[0].rstrip(b"\r")
    if not first.strip():
        raise IngestError("empty file or empty first line; a CSV log starts with a header "
                          "line naming its columns", path=path, line=line)
    if first.count(b",") >= MAX_COLUMNS:  # an upper bound: a quoted name may hold a comma
        _check_width(len(next(csv.reader([first.decode("utf-8-sig", errors="replace")]))),
                     path)
    try:
        # strict: a quote left open (a quoted line break) is refused, not read as a name
        names = next(csv.reader([first.decode("utf-8-sig")], strict=True))
    except (UnicodeDecodeError, csv.Error) as exc:
        raise IngestError(f"unreadable header: {exc} (a quote left open?); the header is "
                          "one line of column names", path=path, line=line) from exc
    for raw in names:  # the one name rule, before spaces are stripped (a tab would be)
        problem = name_problem(raw) if raw else None
        if problem is not None:
            raise IngestError(f"column name {raw!r} {problem}; rename the column in the file",
                              path=path, line=line)
    names = [n.strip() for n in names]
    dupes = sorted(n for n, count in Counter(names).items() if count > 1)
    # A nameless first column is the row index pandas' to_csv writes (read_csv_run checks
    # that it holds row numbers and leaves it out); a nameless column elsewhere is refused.
    if dupes or "" in names[1:] or names == [""]:
        shown = dupes or names[:20]
        raise IngestError(f"the header has {'repeated' if dupes else 'empty'} column names "
                          f"{shown!r}; give every column a distinct name",
                          path=path, line=line)
    return names


def _check_width(columns: int, path: str, *, at_least: bool = False) -> None:
    if columns > MAX_COLUMNS:
        raise IngestError(
            f"the header has {'at least ' if at_least else ''}{columns:,} columns; curvekit "
            f"reads at most {MAX_COLUMNS:,} per log (one per metric); leave the columns you "
            "do not need out of the file", path=path, line=1)


def read_header_line(path: Path, files: SourceFiles | None = None) -> bytes:
    """The first line of ``path``, read alone and at most :data:`MAX_HEADER_BYTES` long, so
    that a file with a million columns is refused without reading the rest of it."""
    first = files_of(path, files).read_line(path, MAX_HEADER_BYTES + 1)
    if len(first) > MAX_HEADER_BYTES:
        _check_width(first.count(b",") + 1, str(path), at_least=True)
        raise IngestError(f"the header line is longer than {MAX_HEADER_BYTES >> 20} MiB; a CSV "
                          "log starts with one line naming its columns", path=str(path), line=1)
    return first


def _locate_bad_value(data: bytes, names: list[str], path: str, detail: str,
                      skip: Iterable[str] = ()) -> IngestError:
    """Find the first cell that is not a number (the slow path, only after a failure).

    Every parse failure becomes an :class:`IngestError` naming the line, the column and a
    fix; pyarrow's own text is the last resort, still with the column it names.
    """
    left_out = set(skip)
    text = data.decode("utf-8-sig", errors="replace")
    reader = csv.reader(io.StringIO(text, newline=""))
    header_seen = False
    try:
        for row in reader:
            number = reader.line_num
            if not row or (len(row) == 1 and not row[0].strip()):
                continue
            if not header_seen:  # the header: the first line that is not blank
                header_seen = True
                continue
            if len(row) != len(names):
                return IngestError(
                    f"{len(row)} fields where the header has {len(names)} columns; every row "
                    "needs one value (or an empty cell) per column: fix the row, or remove it",
                    path=path, line=number)
            for name, cell in zip(names, row, strict=True):
                if name in left_out or cell.strip() in MISSING:
                    continue
                try:
                    float(cell)
                except ValueError:
                    return IngestError(
                        f"value {_cut(cell)!r} in column {name!r} is not a number; fix the "
                        f"value, or leave the column out with --map '{name}=' (or "
                        f"{_toml_key(name)} = \"\" in the manifest's [metrics] table)",
                        path=path, line=number)
    except csv.Error as exc:
        return IngestError(f"malformed CSV ({exc}); check the quoting of this line",
                           path=path, line=reader.line_num)
    found = re.search(r"CSV column #(\d+)", detail)
    column = names[int(found.group(1))] if found and int(found.group(1)) < len(names) else None
    row_no = re.search(r"Row #(\d+)", detail)
    value = re.search(r"invalid value '(.*)'", detail, re.DOTALL)
    what = (f"value {_cut(value.group(1))!r} is not a number (a quote left open?)" if value
            else (detail.splitlines()[0] if detail else "unknown error"))
    return IngestError(
        f"unreadable CSV{f' in column {column!r}' if column is not None else ''}: {what}; "
        "check the file's quoting and that every value is a number"
        + (f", or leave the column out with --map '{column}='" if column else ""),
        path=path, line=int(row_no.group(1)) if row_no else None)


def _cut(cell: str) -> str:
    return cell if len(cell) <= 40 else cell[:40] + "..."


def _toml_key(name: str) -> str:
    """``name`` as a TOML key: bare when it can be, quoted otherwise."""
    return name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else structured.dumps(name)


def read_table_bytes(data: bytes, path: str, names: list[str] | None = None, *,
                     text: Iterable[str] = (), skip: Iterable[str] = ()) -> pa.Table:
    """Parse CSV bytes with every column as float64 (empty cells, quoted or not, missing),
    except the columns in ``text``, kept as strings (the time axis, converted exactly
    later). Columns in ``skip`` are not parsed at all (``--map NAME=``: a text column the
    user drops never has to be a number)."""
    names = names if names is not None else _header(data, path)
    as_text, left_out = set(text), set(skip)
    keep = [n for n in names if n not in left_out]
    try:
        table = pacsv.read_csv(
            pa.py_buffer(data),
            read_options=pacsv.ReadOptions(use_threads=False, block_size=max(1 << 20,
                                                                             len(data) + 1)),
            convert_options=pacsv.ConvertOptions(
                column_types={n: pa.string() if n in as_text else pa.float64()
                              for n in keep},
                include_columns=keep,
                null_values=list(MISSING),
                # W&B's UI quotes every cell, so an empty value is written "": missing too
                strings_can_be_null=True, quoted_strings_can_be_null=True))
    except pa.ArrowInvalid as exc:
        raise _locate_bad_value(data, names, path, str(exc), left_out) from exc
    _warn_overflow(table, data, names, path)
    return table


def _warn_overflow(table: pa.Table, data: bytes, names: list[str], path: str) -> None:
    """Warn once for the file when a cell such as ``1e400`` became infinity silently.

    ``names`` are the file's columns, all of them (the table may hold fewer)."""
    position = {name: i for i, name in enumerate(names)}  # not names.index: linear
    infinite = [position[name] for name, column in zip(table.column_names, table.columns,
                                                       strict=True)
                if pa.types.is_floating(column.type) and pc.any(pc.is_inf(column)).as_py()]
    if not infinite:
        return  # the common case: no infinity at all, no second look at the text
    cells: dict[int, list[str]] = {i: [] for i in infinite}
    rows = csv.reader(io.StringIO(data.decode("utf-8-sig", errors="replace"), newline=""))
    next((r for r in rows if r), None)  # the header, after any blank lines above it
    for row in rows:
        for i in infinite:
            if i < len(row):
                cells[i].append(row[i])
    message = overflow_warning(path, [(names[i], cells[i]) for i in infinite])
    if message is not None:
        warnings.warn(message, IngestWarning, stacklevel=2)


def _step_column(names: list[str], path: str, renames: Iterable[str]) -> str | None:
    chosen = [n for n in renames if n in names]
    if len(chosen) > 1:
        raise IngestError(f"--map names several step columns ({', '.join(chosen)}); "
                          "keep one", path=path)
    if chosen:
        return chosen[0]
    return next((n for n in STEP_COLUMNS if n in names), None)


def _no_step_column(names: list[str], path: str, line: int | None) -> IngestError:
    shown = ", ".join(names[:30]) + (", ..." if len(names) > 30 else "")
    return IngestError(
        f"no step column: the header has {shown}; name the column that counts training "
        f"steps one of {', '.join(STEP_COLUMNS)}, or point at it with --map COLUMN=step (a "
        "table of one row per run, with final values only, is no training curve)",
        path=path, line=line)


def frame_from_table(table: pa.Table, path: str, data: bytes | None = None, *,
                     step_renames: Iterable[str] = (), drop: Iterable[str] = (),
                     line_of: LineOf | None = None) -> tuple[pl.DataFrame, bool]:
    """One row per step (or per epoch) of a parsed log; returns (frame, by_epoch).

    Columns read as text (see :func:`read_table_bytes`) become int64 exactly when they are
    the time axis, float64 otherwise. ``line_of`` maps a row to its line in the file
    (by default counted in ``data``).
    """
    names = table.column_names
    if len(names) > MAX_COLUMNS:
        _check_width(len(names), path)
    step = _step_column(names, path, step_renames)
    by_epoch = False
    if step is None:
        if "epoch" not in names:
            raise _no_step_column(names, path, 1 if data is not None else None)
        step, by_epoch = "epoch", True
    axis = "epoch" if by_epoch else "step"
    skip = set(TIME_COLUMNS) | set(drop) | ({"epoch"} if not by_epoch else set()) | {"_step"}
    keep = [n for n in names if n == step or n not in skip]
    if line_of is None:
        line_of = data_line(data) if data is not None else (lambda row: row + 1)
    for i, name in enumerate(names):
        column = table.column(i)
        if name == step:
            table = table.set_column(i, name, exact_integers(column, axis, path, line_of,
                                                             MISSING))
        elif pa.types.is_string(column.type):  # checked even when left out, as before
            table = table.set_column(i, name, _floats(column, data, path))
    frame = pl.from_arrow(table.select(keep))
    assert isinstance(frame, pl.DataFrame)
    if axis in frame.columns and axis != step:
        frame = frame.drop(axis)  # e.g. a stray "step" metric beside "global_step"
    frame = frame.rename({step: axis})
    return merge_rows(frame, path, line_of, axis), by_epoch


def _floats(column: pa.ChunkedArray, data: bytes | None, path: str) -> pa.ChunkedArray:
    """A step-like column that is not the time axis (``global_step`` beside ``step``): a
    metric, as float64 like the others."""
    try:
        return pc.cast(column, pa.float64())
    except pa.ArrowInvalid as exc:
        if data is None:
            raise IngestError(f"unreadable column: {exc}", path=path) from exc
        raise _locate_bad_value(data, _header(data, path), path, str(exc)) from exc


TESTTUBE_TAGS = "meta_tags.csv"
"""TestTube's record of a run's hyperparameters (PyTorch Lightning <= 0.7's TestTubeLogger):
``key,value`` rows beside the run's ``metrics.csv``; the run's metaparameters, not a run."""


def is_testtube_tags(path: Path, names: Iterable[str]) -> bool:
    """True for TestTube's ``meta_tags.csv`` beside a ``metrics.csv`` (``names``: the files
    of its folder).

    >>> is_testtube_tags(Path("version_0/meta_tags.csv"), ["metrics.csv", "meta_tags.csv"])
    True
    """
    return path.name == TESTTUBE_TAGS and "metrics.csv" in set(names)


def _testtube_params(path: Path, files: SourceFiles) -> dict[str, Any]:
    """The ``key,value`` rows of TestTube's ``meta_tags.csv``, values read as YAML-ish
    scalars (numbers where they are numbers); an object's repr stays text."""
    text = files.read_bytes(path).decode("utf-8-sig", errors="replace")
    rows = list(csv.reader(text.splitlines()))
    if not rows or [c.strip() for c in rows[0]] != ["key", "value"]:
        raise IngestError(f"{TESTTUBE_TAGS} beside metrics.csv is TestTube's table of "
                          "hyperparameters, with the header key,value; fix the file, or leave "
                          f"it out with --exclude '{TESTTUBE_TAGS}'", path=str(path), line=1)
    return {row[0].strip(): param_value(scalar(row[1])) for row in rows[1:]
            if len(row) == 2 and row[0].strip()}


def _params(path: Path, files: SourceFiles) -> dict[str, Any]:
    if path.name != "metrics.csv":
        return {}
    tags = path.with_name(TESTTUBE_TAGS)
    out = _testtube_params(tags, files) if files.exists(tags) else {}
    hparams = path.with_name("hparams.yaml")
    if files.exists(hparams):
        out.update(read_flat_yaml(hparams, files=files))
    return out


CSVLOGGER_LOG = ".log"
"""Keras's ``CSVLogger`` writes ``training.log`` by default: a ``.log`` file whose first line
is a CSV header starting with ``epoch,`` is such a log and read as CSV."""


def is_csvlogger_log(path: Path, files: SourceFiles) -> bool:
    """True for a ``.log`` file written by Keras's ``CSVLogger`` (its header starts with
    ``epoch`` and a separator)."""
    if not path.name.lower().endswith(CSVLOGGER_LOG):
        return False
    head = files.read_head(path, 64).decode("utf-8-sig", errors="replace")
    return head.startswith(("epoch,", "epoch;"))


INDEX_COLUMN = ""
"""The name pandas' ``to_csv`` gives its row index in the header: none."""

RUNS_TABLE_COLUMNS = frozenset({"Name", "State"})
"""Columns of a W&B runs-table export (with ``Created`` or ``Runtime``): one row per run."""


def refuse_runs_table(names: list[str], path: str, key: str) -> None:
    """Refuse a Weights & Biases *runs table* export: one row per run with its config and
    summary (final) values, not a history of steps; say what to export instead."""
    # A config or summary key may be named like a step column ("iter"): not a history then
    if not set(names) >= RUNS_TABLE_COLUMNS or not {"Created", "Runtime"} & set(names):
        return
    raise IngestError(
        "this is a W&B runs table (columns Name, State, ...: one row per run with its "
        "summary values), not a training history; export each run's history instead: "
        "a chart's 'Export as CSV' in the W&B UI (one '<run> - <metric>' column per run), or "
        "run.scan_history() written to a CSV or Parquet file per run; give batch sizes and "
        f"parameters in a run manifest. To leave this file out: --exclude '{key}'",
        path=path, line=1)


def chart_export_runs(names: list[str], *, companions: bool = True
                      ) -> dict[str, list[tuple[str, str]]] | None:
    """The runs of a W&B chart export, or None if ``names`` are not one.

    A chart's 'Export as CSV' writes the x axis first, then for each run and metric a
    column ``<run> - <metric>`` and, for a sampled chart, its companions ``<run> -
    <metric>__MIN`` and ``__MAX`` (the range of the points merged into one). Returns run
    name -> [(column, metric)] without the companions; the run name is the text before the
    last ``" - "``. A header with companions is certainly one; without them
    (``companions=False`` allows it), every column after the first must be ``<run> -
    <metric>`` and every run must have the same metrics (a grid: one chart's metrics for
    each of its runs).

    >>> chart_export_runs(["Step", "a - loss", "a - loss__MIN", "a - loss__MAX", "b - loss"])
    {'a': [('a - loss', 'loss')], 'b': [('b - loss', 'loss')]}
    >>> chart_export_runs(["Step", "a - loss", "b - loss"], companions=False)
    {'a': [('a - loss', 'loss')], 'b': [('b - loss', 'loss')]}
    >>> chart_export_runs(["step", "loss", "val - loss"], companions=False) is None
    True
    """
    rest = names[1:]
    if not rest or not all(" - " in n for n in rest):
        return None
    present = set(rest)
    merged = {n for n in rest if n.endswith(CHART_COMPANIONS) and n[: -len("__MIN")] in present}
    if not merged and companions:
        return None
    runs: dict[str, list[tuple[str, str]]] = {}
    for n in rest:
        if n in merged:
            continue
        run, _, metric = n.rpartition(" - ")
        runs.setdefault(run.strip(), []).append((n, metric.strip()))
    if not merged and len({frozenset(m for _, m in cols) for cols in runs.values()}) > 1:
        return None  # no grid: metric names that hold " - ", not runs
    return runs


CHART_COMPANIONS = ("__MIN", "__MAX")


def _empty_file(path: Path, key: str) -> IngestError:
    return IngestError(
        "empty file or empty first line; a CSV log starts with a header line naming its "
        "columns (a log left empty by a run that never reached its first epoch?); leave the "
        f"file out with --exclude '{key}' (or exclude = [\"{key}\"] in the manifest's "
        "[workload] table)", path=str(path), line=1)


def read_csv_run(path: Path, key: str, *, step_renames: Iterable[str] = (),
                 drop_private: bool = False, drop: Iterable[str] = (),
                 files: SourceFiles | None = None) -> RunLog:
    """Read one CSV log as a run named ``key``.

    ``drop_private`` leaves out columns whose name starts with ``_`` other than ``_step``
    (the bookkeeping columns of a Weights & Biases history). Columns in ``drop`` (``--map
    NAME=``) are not parsed at all, so a text column can be left out. A nameless first
    column holding integers (pandas' index) is left out too. Title lines above the header
    are left out (:func:`without_title`). ``files`` reaches the file (see
    :mod:`curvekit.ingest.files`). A file of several runs is read by
    :func:`read_csv_file`.
    """
    return read_csv_file(path, key, step_renames=step_renames, drop_private=drop_private,
                         drop=drop, files=files, stacked=False)[0]


def read_csv_file(path: Path, key: str, *, step_renames: Iterable[str] = (),
                  drop_private: bool = False, drop: Iterable[str] = (),
                  files: SourceFiles | None = None, run_column: str | None = None,
                  stacked: bool = True) -> list[RunLog]:
    """The runs of one CSV log: one, or one per value of its run column when it holds
    several runs one after another (``stacked``; see :mod:`curvekit.ingest.stacked`);
    ``run_column`` (``--run-column``) names that column. Other arguments as for
    :func:`read_csv_run`.
    """
    files = files_of(path, files)
    first = read_header_line(path, files)  # a huge header stops here
    if not first.strip():
        raise _empty_file(path, key)
    data, at = without_title(files.read_bytes(path), str(path))
    if at > 1:
        first = data.lstrip(b"\r\n").split(b"\n", 1)[0]
    if dialect(first) != (",", False):  # semicolons, tabs, padded cells: rewritten as plain
        data = plain_csv(data, *dialect(first))
        first = data.lstrip(b"\r\n").split(b"\n", 1)[0]
    names = _header(first, str(path), at)
    refuse_runs_table(names, str(path), key)
    charts = chart_export_runs(names)
    if charts is not None:
        raise IngestError(
            f"this is a W&B chart export holding {len(charts)} run(s) (columns '<run> - "
            f"<metric>', e.g. {next(iter(charts.values()))[0][0]!r}); read it with --log-format "
            "wandb, which makes one trial of each run", path=str(path), line=at)
    step = _step_column(names, str(path), step_renames)
    if step is None and "epoch" not in names:
        raise _no_step_column(names, str(path), at)  # before any value: a summary table
    axis = step or "epoch"
    axes = AXIS_COLUMNS | set(step_renames) | {INDEX_COLUMN}
    dropped = {n for n in (*drop, *TIME_COLUMNS) if n in names and n not in step_renames}
    if drop_private:
        dropped |= {n for n in names if n.startswith("_") and n != "_step"}
    if run_column is not None and run_column not in names:
        run_column = None  # a log of one run among logs of several: read as it is
        stacked = False
    if run_column is not None and (run_column in dropped or run_column == axis):
        shown = ", ".join(names[:30]) + (", ..." if len(names) > 30 else "")
        raise IngestError(f"--run-column {run_column!r} names no column of this log that can "
                          f"tell runs apart (its columns: {shown}); name the column whose "
                          "value says which run each row belongs to", path=str(path), line=at)
    table = failed = None
    alike: list[str] = []
    if run_column is None:
        try:
            table = read_table_bytes(data, str(path), names,
                                     text=[n for n in names if n in axes], skip=dropped)
        except IngestError as exc:
            if not stacked:
                raise
            failed = exc
        if stacked:
            run_column, alike = _stacked_column(data, str(path), names, axis, dropped, table)
        if run_column is None and failed is not None:
            words = _words(data, str(path), names, dropped | axes) \
                if failed.line is not None and failed.line > at else []
            which = f"--run-column '{words[0]}'" if len(words) == 1 else "--run-column NAME"
            raise IngestError(
                f"{_message(failed)}; or, if that column names the run of each row (several "
                f"runs in one file), make one run of each with {which}",
                path=failed.path, line=failed.line) from failed
    stem = key[: -len(path.suffix)] if path.suffix else key
    offset = LIGHTNING_STEP_OFFSET if is_lightning_log(path, names) else 0
    if run_column is not None:
        return _stacked_runs(data, path, key, stem, names, axis, run_column, dropped,
                             step_renames, offset, files, alike)
    assert table is not None
    if names[0] == INDEX_COLUMN:
        exact_integers(table.column(0), "nameless first column (a row index)", str(path),
                       data_line(data), MISSING)
        table = table.drop_columns([INDEX_COLUMN])
    try:
        frame, by_epoch = frame_from_table(table, str(path), data, step_renames=step_renames)
    except IngestError as exc:
        back = _restarts(table, axis, data, str(path))
        if not back:
            raise
        raise IngestError(
            f"{_message(exc)}; if this file holds several runs one after another ({axis!r} "
            f"goes back on line {data_line(data)(back[0])}), name the column that tells them "
            "apart with --run-column NAME", path=exc.path, line=exc.line) from exc
    aliases = (str(Path(key).parent),) if path.name == "metrics.csv" else ()
    return [RunLog(key, str(path), frame, _params(path, files),
                   aliases=(*aliases, stem) if stem != key else aliases, by_epoch=by_epoch,
                   step_offset=offset)]


def _message(exc: IngestError) -> str:
    """``exc``'s message without the file and line it starts with."""
    text = str(exc)
    where = f"{exc.path}, line {exc.line}: " if exc.path and exc.line \
        else f"{exc.path}: " if exc.path else ""
    return text.removeprefix(where)


def _restarts(table: pa.Table, axis: str, data: bytes, path: str) -> list[int]:
    """The rows where the time axis goes back (see :mod:`curvekit.ingest.stacked`); none
    when the axis cannot be read (the import then says why)."""
    try:
        values = exact_integers(table.column(axis), axis, path, data_line(data), MISSING)
    except IngestError:
        return []
    array = values.to_numpy(zero_copy_only=False)
    if values.null_count == 0 and bool((array[1:] >= array[:-1]).all()):
        return []  # the common case, a log of one run, in one vectorized pass
    return stacked.restarts(values.to_pylist())


def _text_table(data: bytes, path: str, names: list[str], dropped: set[str]) -> pa.Table:
    return read_table_bytes(data, path, names, text=[n for n in names if n not in dropped],
                            skip=dropped)


def _rows_lines(rows: list[int], line_of: LineOf) -> LineOf:
    """The file's lines of a table's ``rows`` taken apart."""
    return lambda r: line_of(rows[r])


def _words(data: bytes, path: str, names: list[str], dropped: set[str]) -> list[str]:
    """The columns of a log holding a cell that is not a number (read only after a
    failure, to name them in its message)."""
    try:
        text = _text_table(data, path, names, {n for n in names if n in dropped})
    except IngestError:
        return []
    return [n for n in text.column_names if not _numeric(text.column(n))]


def _numeric(column: pa.ChunkedArray) -> bool:
    try:
        pc.cast(column, pa.float64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return False
    return True


def _stacked_column(data: bytes, path: str, names: list[str], axis: str, dropped: set[str],
                    table: pa.Table | None) -> tuple[str | None, list[str]]:
    """The run column of a log holding several runs one after another, by the rule of
    :mod:`curvekit.ingest.stacked`, and the other columns that tell the runs apart alike
    (per-run constants: metaparameters), or (None, []); a warning says which and why."""
    if table is not None and not _restarts(table, axis, data, path):
        return None, []  # one run: no second parse
    text = _text_table(data, path, names, dropped)
    back = _restarts(text, axis, data, path)
    if not back:
        return None, []
    columns = {n: [None if v is None else v.strip() for v in text.column(n).to_pylist()]
               for n in text.column_names if n not in (axis, INDEX_COLUMN)}
    found = stacked.run_column_candidates(
        exact_integers(text.column(axis), axis, path, data_line(data), MISSING).to_pylist(),
        columns)
    if not found:
        return None, []
    words = [n for n in found if not _numeric(text.column(n))]
    chosen = stacked.choose(found, words)
    runs = len(stacked.groups([str(v) for v in columns[chosen]]))
    line_of = data_line(data)
    lines = ", ".join(str(line_of(r)) for r in back[:5]) + (", ..." if len(back) > 5 else "")
    others = [n for n in found if n != chosen]
    warnings.warn(
        f"{path}: holds {runs} runs one after another: column {chosen!r} changes exactly "
        f"where {axis!r} starts again (line{'s' if len(back) > 1 else ''} {lines})"
        f"{' as do ' if others else ''}"
        f"{', '.join(repr(n) for n in others)}; read as {runs} runs, one per value of "
        f"{chosen!r}{', the others their metaparameters' if others else ''}; to tell the "
        "runs apart by another column, --run-column NAME", IngestWarning, stacklevel=4)
    return chosen, others


def _stacked_runs(data: bytes, path: Path, key: str, stem: str, names: list[str], axis: str,
                  column: str, dropped: set[str], step_renames: Iterable[str], offset: int,
                  files: SourceFiles, alike: Iterable[str] = ()) -> list[RunLog]:
    """One run per value of ``column``, rows in file order: the column's value, the columns
    in ``alike`` (which tell the runs apart as it does) and every text column constant
    within each run become the run's metaparameters."""
    text = _text_table(data, str(path), names, dropped | {INDEX_COLUMN})
    line_of = data_line(data)
    values = text.column(column).to_pylist()
    missing = next((row for row, v in enumerate(values) if v is None or not v.strip()), None)
    if missing is not None:
        raise IngestError(f"no value in the run column {column!r}; every row needs the name "
                          "of its run there", path=str(path), line=line_of(missing))
    rows = stacked.groups([v.strip() for v in values])
    if len(rows) > 1 and all(len(where) == 1 for where in rows.values()):
        raise IngestError(
            f"each of its {len(rows)} runs (by column {column!r}) has one row: a table of one "
            "row per run holds final values (a runs table), not training curves; export "
            "each run's history (a value per evaluation) instead", path=str(path))
    words = [n for n in text.column_names if n not in (axis, column)
             and n not in AXIS_COLUMNS | set(step_renames)
             and (n in alike or not _numeric(text.column(n)))]
    constant: dict[str, list[str]] = {}
    for name in words:
        cells = text.column(name).to_pylist()
        for where in rows.values():
            seen = {cells[r] for r in where}
            if len(seen) > 1:  # not a metaparameter: a metric, with a cell that is no number
                bad = next((r for r, c in enumerate(cells)
                            if c is not None and c.strip() not in MISSING
                            and not is_number(c)), where[0])
                raise IngestError(
                    f"value {_cut(str(cells[bad]))!r} in column {name!r} is not a number (nor "
                    "a value the same on every row of its run, a metaparameter); fix the "
                    f"value, or leave the column out with --map '{name}='", path=str(path),
                    line=line_of(bad))
        constant[name] = cells
    numbers = {n: (pc.cast(text.column(n), pa.float64())
                   if n not in AXIS_COLUMNS | set(step_renames) else text.column(n))
               for n in text.column_names if n not in words and n != column}
    table = pa.table(numbers)
    out = []
    base = _params(path, files)
    for run, where in rows.items():
        sub = table.take(pa.array(where))
        frame, by_epoch = frame_from_table(sub, str(path), step_renames=step_renames,
                                           line_of=_rows_lines(where, line_of))
        params = {**base, column: param_value(scalar(run))}
        params.update({n: param_value(scalar(cells[where[0]] or ""))
                       for n, cells in constant.items() if cells[where[0]]})
        out.append(RunLog(f"{stem}/{run}", str(path), frame, params,
                          aliases=(run, f"{key}/{run}"), by_epoch=by_epoch,
                          step_offset=offset))
    return out


def skip_folder(path: Path) -> bool:
    """Folders never read as logs: hidden ones, and curvekit homes and stores (a home may
    sit inside the logs' folder)."""
    return path.name.startswith(".") or (path / "_store.json").is_file() \
        or (path / "store").is_symlink()


def log_files(source: Path, suffixes: tuple[str, ...], select: FileFilter = ALL,
              files: SourceFiles | None = None) -> list[tuple[Path, str]]:
    """Files with one of ``suffixes`` under ``source`` (or ``source`` itself) and their run
    names (paths relative to ``source``), sorted; see :func:`skip_folder`. Files and folders
    that ``select`` leaves out (``--include``/``--exclude``) are not listed. The folders are
    walked by ``files`` (:meth:`~curvekit.ingest.files.SourceFiles.walk`: no link is
    followed unless asked)."""
    if source.is_file():
        return [(source, source.name)] if select.keeps(source.name) else []
    found = []
    for here, dirs, names in files_of(source, files).walk(source):
        dirs[:] = [d for d in dirs if not skip_folder(here / d)
                   and select.keeps_folder((here / d).relative_to(source).as_posix())]
        for name in names:
            if name.lower().endswith(suffixes):
                path = here / name
                rel = path.relative_to(source).as_posix()
                if select.keeps(rel):
                    found.append((path, rel))
    return sorted(found, key=lambda item: item[1])


def read_csv_runs(source: Path, options: ReadOptions | None = None) -> list[RunLog]:
    """Every ``*.csv`` under ``source`` as one run each (read in parallel).

    In an AlgoPerf trial folder, ``measurements.csv`` (the per-step log beside the curve
    ``eval_measurements.csv``) is not a run of its own: it is skipped with a warning (see
    :mod:`curvekit.ingest.algoperf`).
    """
    opts = options or ReadOptions()
    files = files_of(source, opts.files)
    found = [(p, rel) for p, rel in log_files(source, (".csv", CSVLOGGER_LOG), opts.select,
                                                 files)
             if not p.name.lower().endswith(CSVLOGGER_LOG) or is_csvlogger_log(p, files)]
    names = {rel for _, rel in found}
    kept, skipped = [], []
    for path, rel in found:
        beside = (Path(rel).parent / ALGOPERF_CURVE).as_posix().removeprefix("./")
        if path.name == TESTTUBE_TAGS and is_testtube_tags(path, files.listdir(path.parent)):
            continue  # the run's metaparameters, read with its metrics.csv
        if path.name == ALGOPERF_STEPS and beside in names:
            skipped.append(rel)
        else:
            kept.append((path, rel))
    if skipped:
        warnings.warn(f"{source}: skipped {len(skipped)} AlgoPerf per-step log(s) "
                      f"({skipped[0]}{', ...' if len(skipped) > 1 else ''}): a "
                      f"{ALGOPERF_STEPS} beside {ALGOPERF_CURVE} (the curve) is not a run "
                      f"of its own; to read one anyway, --include '{skipped[0]}'",
                      IngestWarning, stacklevel=2)
    # every file is read, and every problem found is reported at once
    read = read_each(kept, lambda f: read_csv_file(f[0], f[1], step_renames=opts.step_renames,
                                                   drop=opts.drop, files=files,
                                                   run_column=opts.run_column))
    return [run for runs in read for run in runs]


ALGOPERF_CURVE = "eval_measurements.csv"
"""AlgoPerf's curve: one row per evaluation, placed by ``global_step``."""
ALGOPERF_STEPS = "measurements.csv"
"""AlgoPerf's per-step log (training loss, gradient norm) beside the curve."""
