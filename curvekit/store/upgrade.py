"""Upgrade a store of format 1 (metrics and metaparameters as columns) to format 2.

A store written by curvekit before format 2 kept every metric as a float64 column of the
measurements files and every metaparameter as a column of the trials files. This module is
the one reader of that layout: :func:`upgrade_into` writes such a snapshot's content into a
staging folder in the current layout, with every row, value and name kept:

* studies files are hard-linked (their columns did not change);
* each trials file becomes a trials file of the fixed columns and a parameters file, one
  row per non-null cell of a metaparameter column (its type is the column's, so the wide
  per-trial frames show the same values as before; a metaparameter that was stored as
  ``param_<name>`` because its name was a fixed column keeps that stored name);
* each measurements file becomes a long one (:func:`~curvekit.store.writer.write_measurements`):
  a row per evaluation and metric holding a value in that file (the columns that are null
  in every row of the file, which the store-wide schema added, are left out).

It runs on the first change of such a store (``add``, ``remove``, the runner's add, a
conversion that carries added workloads) inside that change's transaction, or on its own
with :func:`curvekit.upgrade` (``curvekit upgrade``). Until then, opening the store for
reading says to upgrade it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq

from curvekit.errors import StoreError
from curvekit.home import resolve_home
from curvekit.records import StudyKey, TrialRecord
from curvekit.store.layout import (
    FILE_NAME,
    MANIFEST_FILE,
    STORE_FORMAT,
    fixed_schema,
    store_link,
)
from curvekit.store.metadata import NAMES_KEY, TABLE_COLUMNS_KEY, StoreMetadata
from curvekit.store.snapshots import folder_size
from curvekit.store.transaction import transaction
from curvekit.store.writer import Evaluations, parameter_rows, write_measurements, write_table

__all__ = ["OLD_FORMAT", "UpgradeResult", "upgrade", "upgrade_into"]

OLD_FORMAT = 1
"""The one earlier store format curvekit upgrades."""
_OLD_KEYS = ("metric_columns", "parameter_columns", TABLE_COLUMNS_KEY)
_TYPES = {pa.float64(): "float64", pa.int64(): "int64", pa.bool_(): "bool",
          pa.string(): "string"}


def _workload(rel: Path) -> str:
    """``base_dir/model/optimizer`` of a table folder's ``base_dir=/model=/optimizer=``."""
    return "/".join(unquote(p.partition("=")[2]) for p in rel.parts[:3])


def _folders(root: Path, table: str) -> list[Path]:
    """The workload folders of ``table``, relative to the table's folder."""
    base = root / table
    return sorted(p.relative_to(base) for p in base.glob("*/*/*") if p.is_dir())


def _cannot(path: Path, exc: BaseException) -> StoreError:
    return StoreError(f"cannot read {path} to upgrade the store to format {STORE_FORMAT}: "
                      f"{exc}; run `curvekit verify` to see what is damaged, or `curvekit "
                      "fetch --force` to rebuild the store")


def _trials(source: Path, target: Path, folder: Path) -> dict[str, str]:
    """Split one format-1 trials file into trials and parameters files; return the
    workload's metaparameter names with their column types."""
    path = source / "trials" / folder / FILE_NAME
    try:
        data = pq.ParquetFile(path).read()
    except (OSError, pa.ArrowException) as exc:
        raise _cannot(path, exc) from exc
    fixed = fixed_schema("trials")
    columns = [f for f in data.schema if f.name not in fixed.names]
    write_table(data.select(fixed.names).cast(fixed),
                target / "trials" / folder / FILE_NAME)
    base_dir, model, optimizer = (unquote(p.partition("=")[2]) for p in folder.parts[:3])
    types = {f.name: _TYPES.get(f.type, "string") for f in columns
             if data.column(f.name).null_count < data.num_rows}
    values = {name: data.column(name).to_pylist() for name in types}
    records = []
    for i, (bs, trial) in enumerate(zip(data.column("batch_size").to_pylist(),
                                        data.column("trial_id").to_pylist(), strict=True)):
        params: dict[str, Any] = {n: v[i] for n, v in values.items() if v[i] is not None}
        records.append(TrialRecord(StudyKey(base_dir, model, optimizer, bs), trial,
                                   "COMPLETE", 0, params, str(path)))
    rows, _ = parameter_rows(records)
    write_table(rows, target / "parameters" / folder / FILE_NAME)
    return types


def _measurements(source: Path, target: Path, rel: Path) -> list[str]:
    """Rewrite one format-1 measurements file in the long layout; return its metrics."""
    path = source / "measurements" / rel
    try:
        data = pq.ParquetFile(path).read()
    except (OSError, pa.ArrowException) as exc:
        raise _cannot(path, exc) from exc
    rows = Evaluations.from_table(data.select(
        ["trial_id", "step", *(n for n in data.column_names if n not in ("trial_id", "step"))]))
    write_measurements(rows, target / "measurements" / rel)
    return [n for n, v in zip(rows.names, rows.values, strict=True) if v.null_count < len(v)]


def upgrade_into(source: Path, meta: StoreMetadata, target: Path, *,
                 keep: Callable[[str], bool] = lambda workload: True,
                 threads: int | None = None) -> StoreMetadata:
    """Write the workloads of the format-1 snapshot ``source`` for which ``keep`` is true
    into the folder ``target`` in the current format; return ``meta`` in the current form
    (format, names per workload; the column records of format 1 dropped).

    The counts and the added workloads' records are carried as they are; the caller
    adjusts them for what it leaves out.
    """
    if meta.store_format != OLD_FORMAT:
        raise StoreError(f"{source} has store format {meta.store_format!r}; curvekit upgrades "
                         f"format {OLD_FORMAT} only: run `curvekit fetch --force` to rebuild it")
    names: dict[str, dict[str, Any]] = {}
    for folder in _folders(source, "studies"):
        workload = _workload(folder)
        if not keep(workload):
            continue
        for file in (source / "studies" / folder).glob("*.parquet"):
            dest = target / "studies" / folder / file.name
            dest.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(file, dest)
            except OSError:
                dest.write_bytes(file.read_bytes())
        names[workload] = {"metrics": [], "parameters": {}}
    for folder in _folders(source, "trials"):
        workload = _workload(folder)
        if keep(workload):
            names.setdefault(workload, {"metrics": [], "parameters": {}})
            names[workload]["parameters"] = _trials(source, target, folder)
    files = [p.relative_to(source / "measurements")
             for p in sorted((source / "measurements").glob("*/*/*/*/*.parquet"))
             if keep(_workload(p.relative_to(source / "measurements")))]
    with ThreadPoolExecutor(threads or min(4, os.cpu_count() or 2)) as pool:
        found = list(pool.map(lambda rel: _measurements(source, target, rel), files))
    metrics: dict[str, set[str]] = {}
    for rel, holds in zip(files, found, strict=True):
        metrics.setdefault(_workload(rel), set()).update(holds)
    for workload, seen in metrics.items():
        names.setdefault(workload, {"metrics": [], "parameters": {}})
        names[workload]["metrics"] = sorted(seen)
    data = {k: v for k, v in meta.to_dict().items() if k not in _OLD_KEYS}
    data["store_format"] = STORE_FORMAT
    data[NAMES_KEY] = dict(sorted(names.items()))
    return StoreMetadata(data)


class UpgradeResult:
    """What :func:`upgrade` did: ``changed`` is False when the store had the current format."""

    def __init__(self, path: Path, changed: bool, workloads: Iterable[str]) -> None:
        self.path = path
        self.changed = changed
        self.workloads = list(workloads)

    def __repr__(self) -> str:
        return (f"UpgradeResult(path={self.path!r}, changed={self.changed}, "
                f"workloads={len(self.workloads)})")


def upgrade(home: str | os.PathLike[str] | None = None) -> UpgradeResult:
    """Rewrite the store of ``home`` in the current format, as a new snapshot.

    A store of format 1 (written by curvekit before metrics became rows) is read only to be
    upgraded; the first ``add``, ``remove`` or conversion upgrades it too. Every row, value
    and name is kept. A store already in the current format is left as it is.

    >>> import tempfile, curvekit
    >>> home = tempfile.mkdtemp()
    >>> _ = curvekit.demo(home)
    >>> upgrade(home).changed  # already current
    False
    """
    base = resolve_home(home)
    with transaction(base, action="upgrading the store",
                     needed=lambda: folder_size(store_link(base).resolve())) as tx:
        if tx.current is None or tx.metadata is None:
            raise StoreError(f"no curvekit store at {base}; nothing to upgrade")
        if tx.metadata.current_format:
            return UpgradeResult(tx.current, False, tx.metadata.workloads or [])
        meta = upgrade_into(tx.current, tx.metadata, tx.staging)
        if (tx.current / MANIFEST_FILE).is_file():
            os.link(tx.current / MANIFEST_FILE, tx.staging / MANIFEST_FILE)
        path = tx.publish("upgraded", meta)
    return UpgradeResult(path, True, meta.workloads or [])

