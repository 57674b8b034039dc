"""Weights & Biases run histories exported to CSV or Parquet, one file per run.

The history's step column is ``_step`` -- unless it has ``step``, ``global_step`` or
``trainer/global_step`` (PyTorch Lightning's WandbLogger): ``_step`` counts log calls, those
count training steps. W&B's other bookkeeping columns (``_runtime``, ``_timestamp``,
``_wandb`` ...) are left out. In a Parquet history, columns that do not hold
numbers (media, tables) are left out too. No network access: export the history first
(``run.scan_history()`` to a file, or the run-history Parquet export; ``run.history()`` is
down-sampled, and CSV exports from the web UI can drop steps).

>>> import pathlib, tempfile
>>> p = pathlib.Path(tempfile.mkdtemp()) / "run-1.csv"
>>> _ = p.write_text("_step,_runtime,val_loss\\n0,1.5,2.3\\n100,9.1,1.9\\n")
>>> [r.frame.rows() for r in read_wandb_runs(p)]
[[(0, 2.3), (100, 1.9)]]
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from curvekit.errors import IngestError
from curvekit.ingest.csvlogs import AXIS_COLUMNS, frame_from_table, log_files, read_csv_run
from curvekit.ingest.runs import MAX_COLUMNS, RunLog

__all__ = ["read_parquet_run", "read_wandb_runs"]


def read_parquet_run(path: Path, key: str, *, step_renames: Iterable[str] = ()) -> RunLog:
    """One run from a Parquet history: numeric columns, ``_``-columns other than ``_step``
    left out."""
    axes = AXIS_COLUMNS | set(step_renames)
    try:
        width = len(pq.read_schema(path))  # the footer alone: refuse a huge file unread
        if width > MAX_COLUMNS:
            raise IngestError(f"the history has {width:,} columns; curvekit reads at most "
                              f"{MAX_COLUMNS:,} per log (one per metric); leave the columns "
                              "you do not need out of the export", path=str(path))
        table = pq.read_table(path)
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


def read_wandb_runs(source: Path, *, step_renames: Iterable[str] = ()) -> list[RunLog]:
    """Every ``*.csv`` and ``*.parquet`` history under ``source``, one run each."""
    renames = tuple(step_renames)

    def read(item: tuple[Path, str]) -> RunLog:
        path, key = item
        if path.name.lower().endswith(".parquet"):
            return read_parquet_run(path, key, step_renames=renames)
        return read_csv_run(path, key, step_renames=renames, drop_private=True)

    with ThreadPoolExecutor(min(4, os.cpu_count() or 1)) as pool:
        return list(pool.map(read, log_files(source, (".csv", ".parquet"))))
