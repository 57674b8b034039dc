"""Upgrade a store of format 1 or 2 to the current format (3).

A store written by curvekit before format 2 kept every metric as a float64 column of the
measurements files and every metaparameter as a column of the trials files; format 2 kept
them as rows, with one measurements file per study (``batch_size=<n>/part-0.parquet``).
This module is the one reader of those layouts: :func:`upgrade_into` writes such a
snapshot's content into a staging folder in the current layout, with every row, value and
name kept:

* studies files are hard-linked (their columns did not change), and so are the trials and
  parameters files of format 2;
* each trials file of format 1 becomes a trials file of the fixed columns and a parameters
  file, one row per non-null cell of a metaparameter column (its type is the column's, so
  the wide per-trial frames show the same values as before; a metaparameter that was
  stored as ``param_<name>`` because its name was a fixed column keeps that stored name);
* each workload's measurements files (one per study) become its files of whole metrics
  (:func:`~curvekit.store.writer.write_workload_measurements`): a row per evaluation and
  metric holding a value in that study (in format 1, the columns that are null in every
  row of a file, which the store-wide schema added, are left out), every evaluation in
  its order.

It runs on the first change of such a store (``add``, ``remove``, the runner's add, a
conversion that carries added workloads) inside that change's transaction, or on its own
with :func:`curvekit.upgrade` (``curvekit upgrade``). Until then, opening the store for
reading says to upgrade it.
"""

from __future__ import annotations

import json
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
    METRICS_KEY,
    STORE_FORMAT,
    fixed_schema,
    store_link,
)
from curvekit.store.metadata import FILES_KEY, NAMES_KEY, TABLE_COLUMNS_KEY, StoreMetadata
from curvekit.store.snapshots import folder_size
from curvekit.store.transaction import transaction
from curvekit.store.writer import (
    Evaluations,
    parameter_rows,
    write_table,
    write_workload_measurements,
)

__all__ = ["OLD_FORMATS", "UpgradeResult", "upgrade", "upgrade_into"]

OLD_FORMATS = (1, 2)
"""The earlier store formats curvekit upgrades."""
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


def _study_rows(path: Path, old_format: int) -> Evaluations:
    """One study's evaluations from its measurements file of format 1 (a column per
    metric) or 2 (long rows, metric after metric in its footer's order, each metric's rows
    the study's evaluations in one order)."""
    try:
        reader = pq.ParquetFile(path)
        data = reader.read()
    except (OSError, pa.ArrowException) as exc:
        raise _cannot(path, exc) from exc
    if old_format == 1:
        return Evaluations.from_table(data.select(
            ["trial_id", "step",
             *(n for n in data.column_names if n not in ("trial_id", "step"))]))
    recorded = (reader.metadata.metadata or {}).get(METRICS_KEY.encode(), b"[]")
    try:
        names = json.loads(recorded)
    except ValueError as exc:
        raise _cannot(path, exc) from exc
    if not (isinstance(names, list) and all(isinstance(m, str) for m in names)):
        raise _cannot(path, ValueError(f"its footer's {METRICS_KEY} is {names!r}"))
    n = data.num_rows // max(1, len(names))
    if n * max(1, len(names)) != data.num_rows:
        raise _cannot(path, ValueError(f"its {data.num_rows} rows are not one per evaluation "
                                       f"of each of its metrics {names!r}"))
    values = []
    for i, name in enumerate(names):
        part = data.slice(i * n, n)
        if part.column("metric").to_pylist() != [name] * n:
            raise _cannot(path, ValueError(f"rows {i * n} to {(i + 1) * n - 1} are not all of "
                                           f"metric {name!r}, as its footer says"))
        values.append(part.column("value"))
    first = data.slice(0, n)
    return Evaluations(first.column("trial_id"), first.column("step"), tuple(names),
                       tuple(values))


def _measurements(source: Path, target: Path, folder: Path, old_format: int
                  ) -> tuple[list[str], dict[str, list[str]]]:
    """Rewrite one workload's measurements files of an earlier format (one per study, in
    ``batch_size=<n>`` folders) as its files of the current layout; return its metrics and
    its files' index."""
    studies = []
    for path in sorted((source / "measurements" / folder).glob("batch_size=*/*.parquet")):
        batch_size = int(unquote(path.parent.name.partition("=")[2]))
        studies.append((batch_size, _study_rows(path, old_format)))
    written = write_workload_measurements(studies, target / "measurements" / folder)
    return written.metrics, written.files


def upgrade_into(source: Path, meta: StoreMetadata, target: Path, *,
                 keep: Callable[[str], bool] = lambda workload: True,
                 threads: int | None = None) -> StoreMetadata:
    """Write the workloads of the snapshot ``source`` of an earlier format
    (:data:`OLD_FORMATS`) for which ``keep`` is true into the folder ``target`` in the
    current format; return ``meta`` in the current form (format, names per workload with
    its measurements files' index; the column records of format 1 dropped).

    The counts and the added workloads' records are carried as they are; the caller
    adjusts them for what it leaves out.
    """
    old = meta.store_format
    if old not in OLD_FORMATS:
        raise StoreError(f"{source} has store format {old!r}; curvekit upgrades formats "
                         f"{' and '.join(map(str, OLD_FORMATS))}: run `curvekit fetch --force` "
                         "to rebuild it")
    recorded = meta.names
    names: dict[str, dict[str, Any]] = {}
    linked = ("studies",) if old == 1 else ("studies", "trials", "parameters")
    for table in linked:
        for folder in _folders(source, table):
            workload = _workload(folder)
            if not keep(workload):
                continue
            for file in (source / table / folder).glob("*.parquet"):
                dest = target / table / folder / file.name
                dest.parent.mkdir(parents=True, exist_ok=True)
                try:
                    os.link(file, dest)
                except OSError:
                    dest.write_bytes(file.read_bytes())
            names.setdefault(workload, {"metrics": [], "parameters": dict(
                recorded.get(workload, {}).get("parameters", {}))})
    if old == 1:
        for folder in _folders(source, "trials"):
            workload = _workload(folder)
            if keep(workload):
                names.setdefault(workload, {"metrics": [], "parameters": {}})
                names[workload]["parameters"] = _trials(source, target, folder)
    folders = [f for f in _folders(source, "measurements") if keep(_workload(f))]
    with ThreadPoolExecutor(threads or min(2, os.cpu_count() or 2)) as pool:
        found = list(pool.map(lambda f: _measurements(source, target, f, old), folders))
    for folder, (metrics, files) in zip(folders, found, strict=True):
        entry = names.setdefault(_workload(folder), {"metrics": [], "parameters": {}})
        entry["metrics"], entry[FILES_KEY] = metrics, files
    for entry in names.values():
        entry.setdefault(FILES_KEY, {})
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

    A store of format 1 (written by curvekit before metrics became rows) or 2 (a
    measurements file per study) is read only to be upgraded; the first ``add``,
    ``remove`` or conversion upgrades it too. Every row, value
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

