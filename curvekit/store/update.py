"""Add a workload of your own to the store, or remove one, as a new atomic snapshot.

A published store folder never changes. Adding a workload builds a new snapshot in a staging
folder: the new workload is written by :class:`~curvekit.store.writer.StoreBuilder` (same
layout, encodings and sorting as a converted release), every other file of the current store
is hard-linked beside it (no copy, so adding is cheap even next to the full release), and the
snapshot is published with the same atomic symlink swap as a conversion. A failure anywhere
leaves the current store exactly as it was.

Added workloads are recorded in ``_store.json`` under ``"added"`` with their origin and a
content hash: adding identical data again changes nothing, and ``curvekit fetch`` carries
them over when it rebuilds the release's part of the store.

>>> import tempfile, pathlib, pyarrow as pa
>>> from curvekit.records import StudyKey, StudyRecord, TrialRecord
>>> key = StudyKey("my_data", "mlp", "sgd", 32)
>>> data = WorkloadData(
...     studies=[StudyRecord(key, "my_data", False, 3, {}, {}, "runs.toml")],
...     trials=[TrialRecord(key, 0, "COMPLETE", 3, {"learning_rate": 0.1}, "run0.csv")],
...     measurements={(key, 0): pa.table({"step": [1, 2, 3],
...                                       "valid/error": [0.5, 0.3, 0.2]})},
...     origin={"format": "example"})
>>> home = pathlib.Path(tempfile.mkdtemp())
>>> add_workload(home, data).changed
True
>>> add_workload(home, data).changed      # the same data again: nothing to do
False
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from curvekit import structured
from curvekit._version import __version__
from curvekit.errors import StoreError
from curvekit.home import resolve_home
from curvekit.names import ColumnNames
from curvekit.records import (
    STATUSES,
    StudyKey,
    StudyRecord,
    TrialRecord,
    Workload,
    check_not_reserved,
)
from curvekit.store.layout import (
    METADATA_FILE,
    STORE_FORMAT,
    TABLES,
    fixed_schema,
    store_link,
    workload_dir,
)
from curvekit.store.metadata import ADDED_KEY, TABLE_COLUMNS_KEY, StoreMetadata
from curvekit.store.snapshots import FILES_FILE
from curvekit.store.transaction import Transaction, transaction
from curvekit.store.writer import (
    StoreBuilder,
    conform_snapshot,
    recorded_schemas,
    schema_record,
    snapshot_columns,
    union_schemas,
)
from curvekit.values import INT64_MAX, parameter_fix, parameter_problem

__all__ = ["AddResult", "WorkloadData", "add_workload", "carry_added", "remove_workload"]


@dataclass(frozen=True)
class WorkloadData:
    """One workload (``base_dir/model/optimizer``) ready to be written into the store.

    ``measurements`` maps (study key, trial id) to that trial's rows: an integer ``step``
    column, strictly increasing, and one float column per metric, named like the release's
    (``valid/ce_loss``, ...). ``origin`` says where the data came from; it is recorded in the
    store but not part of the content hash.
    """

    studies: Sequence[StudyRecord]
    trials: Sequence[TrialRecord]
    measurements: Mapping[tuple[StudyKey, int], pa.Table]
    origin: Mapping[str, Any] = field(default_factory=dict)

    @property
    def workload(self) -> str:
        """The workload's name (all keys share it; :func:`validate` checks)."""
        if not self.studies:
            raise StoreError("the workload has no studies: nothing to add")
        return self.studies[0].key.workload


@dataclass(frozen=True)
class AddResult:
    """What :func:`add_workload` did: ``changed`` is False when the data was already there."""

    workload: str
    changed: bool
    studies: int
    trials: int
    measurements: int
    path: Path


def validate(data: WorkloadData) -> dict[tuple[StudyKey, int], pa.Table]:
    """Check ``data`` and return its measurement tables in canonical form.

    Canonical: ``trial_id`` (int64) and ``step`` (int64) first, then float64 metrics sorted
    by name. Raises :class:`StoreError` naming the first problem found.
    """
    name = data.workload
    _split(name)  # a well-formed base_dir/model/optimizer
    # The store's column rule (curvekit.names), whatever built ``data``, before the store
    # is locked; the writer applies it again to everything it writes.
    columns = ColumnNames(StoreError)
    for t in data.trials:
        for param in t.parameters:
            columns.parameter(param, t.member)
    keys = [s.key for s in data.studies]
    if len(set(keys)) != len(keys):
        raise StoreError(f"{name}: two studies have the same batch size")
    for key in keys:
        if key.workload != name:
            raise StoreError(f"one workload per call: got {name!r} and {key.workload!r}")
        if key.batch_size <= 0:
            raise StoreError(f"{name}: batch size {key.batch_size} is not positive")
    known = set(keys)
    trial_keys = [(t.key, t.trial_id) for t in data.trials]
    if len(set(trial_keys)) != len(trial_keys):
        raise StoreError(f"{name}: two trials of one study have the same trial id")
    for t in data.trials:
        if t.key not in known:
            raise StoreError(f"{t.member}: trial {t.trial_id} belongs to {t.key.workload} batch "
                             f"size {t.key.batch_size}, which has no study")
        if t.status not in STATUSES:
            raise StoreError(f"{t.member}: status {t.status!r} is not one of "
                             f"{', '.join(STATUSES)}")
        if t.trial_id < 0:
            raise StoreError(f"{t.member}: trial id {t.trial_id} is negative")
        for pname, value in t.parameters.items():
            # Python ints are unbounded and floats may be NaN; the trials table holds int64
            # and finite numbers only (the one value rule, curvekit.values)
            problem = parameter_problem(value, pname)
            if problem is not None:
                raise StoreError(f"{t.member}: metaparameter {problem}; "
                                 f"{parameter_fix(value)}")
    missing = set(trial_keys) - set(data.measurements)
    extra = set(data.measurements) - set(trial_keys)
    for key, trial in sorted(missing):
        raise StoreError(f"{name} batch size {key.batch_size}: trial {trial} has no measurements")
    for key, trial in sorted(extra):
        raise StoreError(f"{name} batch size {key.batch_size}: measurements for trial {trial}, "
                         "which has no trial record")
    members = {(t.key, t.trial_id): t.member for t in data.trials}
    out = {}
    for (key, trial), table in data.measurements.items():
        member = members[(key, trial)]
        for metric in table.column_names:
            if metric not in ("step", "trial_id"):
                columns.metric(metric, member)
        out[(key, trial)] = _canonical(table, trial, member)
    return out


def _split(name: str) -> Workload:
    return Workload.parse(name, fix="choose another name", error=StoreError)


def _canonical(table: pa.Table, trial: int, member: str) -> pa.Table:
    if "step" not in table.column_names:
        raise StoreError(f"{member}: no 'step' column (columns: {', '.join(table.column_names)})")
    step = table.column("step")
    if not pa.types.is_integer(step.type):
        raise StoreError(f"{member}: 'step' is {step.type}, expected integers")
    if step.null_count:
        raise StoreError(f"{member}: 'step' has empty values")
    if pa.types.is_unsigned_integer(step.type) and len(step) \
            and pc.max(step).as_py() > INT64_MAX:
        raise StoreError(f"{member}: step {pc.max(step).as_py()} is beyond 2**63 - 1, the "
                         "largest step the store holds (int64)")
    steps = step.to_numpy().astype(np.int64)
    if len(steps) and steps.min() < 0:
        raise StoreError(f"{member}: step {steps.min()} is negative; steps count from 0")
    if len(steps) > 1 and not bool(np.all(np.diff(steps) > 0)):
        i = int(np.argmax(np.diff(steps) <= 0))
        raise StoreError(f"{member}: steps must strictly increase, but step {steps[i + 1]} "
                         f"follows step {steps[i]} (row {i + 2})")
    if "trial_id" in table.column_names:
        ids = table.column("trial_id")
        if len(ids) and not pc.all(pc.equal(ids, trial)).as_py():
            raise StoreError(f"{member}: trial_id column disagrees with trial {trial}")
    metrics = sorted(n for n in table.column_names if n not in ("step", "trial_id"))
    columns: dict[str, pa.Array] = {
        "trial_id": pa.array(np.full(len(steps), trial, dtype=np.int64)),
        "step": pa.array(steps),
    }
    for metric in metrics:
        col = table.column(metric)
        if not (pa.types.is_floating(col.type) or pa.types.is_integer(col.type)
                or pa.types.is_null(col.type)):
            raise StoreError(f"{member}: metric {metric!r} is {col.type}, expected numbers")
        columns[metric] = pc.cast(col, pa.float64()).combine_chunks()
    return pa.table(columns)


def content_hash(data: WorkloadData, tables: Mapping[tuple[StudyKey, int], pa.Table]) -> str:
    """A sha256 of the workload's content (studies, trials, rows); the origin is left out."""
    h = hashlib.sha256()
    for s in sorted(data.studies, key=lambda s: s.key):
        h.update(_dumps([list(s.key), s.dataset, s.early_stopping, s.train_steps,
                         s.parameter_configs, s.extra]))
    for t in sorted(data.trials, key=lambda t: (t.key, t.trial_id)):
        h.update(_dumps([list(t.key), t.trial_id, t.status, t.steps, t.parameters]))
    for key in sorted(tables):
        table = tables[key]
        h.update(_dumps([list(key[0]), key[1], table.column_names, table.num_rows]))
        for col in table.columns:
            h.update(np.asarray(col.is_null()).tobytes())
            h.update(col.fill_null(0).to_numpy().tobytes())
    return h.hexdigest()


def _dumps(value: Any) -> bytes:
    return structured.dumps(value, sort_keys=True, default=str).encode()


def _current(tx: Transaction) -> tuple[Path, StoreMetadata] | None:
    """The current snapshot and its metadata, of a format this curvekit can add to."""
    if tx.current is None or tx.metadata is None:
        return None
    if not tx.metadata.current_format:
        raise StoreError(f"{store_link(tx.home)} has store format {tx.metadata.store_format!r}; "
                         "run `curvekit fetch --force` to rebuild it before adding workloads")
    return tx.current, tx.metadata


def _workload_dirs(name: str) -> list[str]:
    base_dir, model, optimizer = _split(name)
    return [workload_dir(t, base_dir, model, optimizer) for t in TABLES]


def _link_store(source: Path, target: Path, *, skip: AbstractSet[str] = frozenset(),
                only: AbstractSet[str] | None = None) -> None:
    """Hard-link the files of ``source`` into ``target``.

    Folders in ``skip`` are left out; with ``only``, nothing outside those folders is linked.
    ``_store.json``, ``_files.json`` and the lease file are never shared: each snapshot
    writes its own (a shared ``_files.json`` rewritten in place would change the old one).
    """
    for folder, _, files in os.walk(source):
        rel = Path(folder).relative_to(source)
        if any(rel == Path(s) or Path(s) in rel.parents for s in skip):
            continue
        if only is not None and not any(rel == Path(s) or Path(s) in rel.parents
                                        for s in only):
            continue
        for name in files:
            # each snapshot writes its own metadata, checksums and lease file
            if name.startswith(".") or (rel == Path(".") and name in (METADATA_FILE,
                                                                        FILES_FILE)):
                continue
            dest = target / rel / name
            if dest.exists():
                raise StoreError(f"{dest} exists in the new snapshot; this is a bug")
            dest.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(Path(folder) / name, dest)
            except OSError:
                shutil.copy2(Path(folder) / name, dest)


def _columns(schemas: dict[str, pa.Schema]) -> dict[str, Any]:
    """The store's one schema per table, as ``_store.json`` records it: every column of its
    files, and the metric and metaparameter columns beyond the fixed ones."""
    fixed = {t: set(fixed_schema(t).names) for t in TABLES}
    return {TABLE_COLUMNS_KEY: schema_record(schemas),
            "metric_columns": [f.name for f in schemas["measurements"]
                               if f.name not in fixed["measurements"]],
            "parameter_columns": {f.name: str(f.type) for f in schemas["trials"]
                                  if f.name not in fixed["trials"]}}


def _shifted(counts: Mapping[str, int], workloads: list[str],
             change: Mapping[str, int], sign: int) -> dict[str, int]:
    """``counts`` with a workload's ``change`` added (``sign`` +1) or taken away (-1)."""
    total = dict(counts)
    for k in ("studies", "trials", "measurements"):
        total[k] = int(total.get(k, 0)) + sign * int(change.get(k, 0))
    total["workloads"] = len(workloads)
    return total


def add_workload(home: str | os.PathLike[str] | None, data: WorkloadData, *,
                 replace: bool = False) -> AddResult:
    """Write ``data`` into the store of ``home`` as a new workload; see the module docs.

    A workload of the release cannot be replaced; one added before can, with
    ``replace=True``. Adding the same content again is a no-op (``changed`` is False).
    """
    base = resolve_home(home)
    tables = validate(data)
    name = data.workload
    check_not_reserved(name, error=StoreError,
                       fix="choose another name (base_dir/model/optimizer) for your own data")
    digest = content_hash(data, tables)
    counts = {"studies": len(data.studies), "trials": len(data.trials),
              "measurements": sum(t.num_rows for t in tables.values())}
    room = sum(t.nbytes for t in tables.values()) + (1 << 20)  # Arrow size: an upper bound
    with transaction(base, action=f"adding {name}", needed=lambda: room) as tx:
        current = _current(tx)
        meta = current[1] if current else StoreMetadata.empty()
        added = meta.added
        if name in added and added[name].get("sha256") == digest:
            return AddResult(name, False, path=store_link(base), **counts)
        if name in (meta.workloads or []) and name not in added:
            raise StoreError(f"{name!r} is a workload of the store's release; choose another "
                             "name for your own data")
        if name in added and not replace:
            raise StoreError(f"the store already has a workload {name!r} with different data; "
                             "pass --replace (replace=True) to overwrite it, or choose another "
                             "name")
        builder = StoreBuilder(tx.staging)
        for study in data.studies:
            builder.add_study(study)
        for trial in data.trials:
            builder.add_trial(trial)
        members = {(t.key, t.trial_id): t.member for t in data.trials}
        for (key, trial_id), table in sorted(tables.items()):
            builder.add_metrics(table.column_names[2:], members[(key, trial_id)])
            builder.add_measurements(key, table)
        # One schema per table: the store's columns and the new workload's. The new
        # files are written with all of them; older files that lack one are rewritten.
        # A store that records its schemas needs its measurements footers not read.
        skip = set(_workload_dirs(name))
        recorded = recorded_schemas(meta) if current is not None else None
        schemas = union_schemas([
            *(snapshot_columns(current[0], skip, recorded=recorded)
              if current is not None else []),
            *builder.columns(name)])
        written = builder.finish({}, {k: t.num_rows for k, t in tables.items()},
                                 schemas=schemas)
        if current is not None:
            _link_store(current[0], tx.staging, skip=skip)
            conform_snapshot(tx.staging, schemas, previous=current[0], tables=[
                t for t in TABLES if recorded is None or not recorded[t].equals(schemas[t])])
        workloads = sorted(set(meta.workloads or []) | {name})
        total = meta.counts
        if name in added:
            total = _shifted(total, workloads, added[name]["counts"], -1)
        added[name] = {"sha256": digest, "origin": dict(data.origin), "counts": counts,
                       "metric_columns": written.metric_columns,
                       "parameter_columns": written.parameter_columns,
                       "added_at": datetime.now(UTC).isoformat(timespec="seconds"),
                       "curvekit_version": __version__}
        path = tx.publish(f"added-{digest[:12]}", meta.replace(
            workloads=workloads, counts=_shifted(total, workloads, counts, +1),
            **_columns(schemas), **{ADDED_KEY: dict(sorted(added.items()))}))
    return AddResult(name, True, path=path, **counts)


def remove_workload(home: str | os.PathLike[str] | None, workload: str) -> None:
    """Remove a workload that was added to the store (the release's cannot be removed)."""
    base = resolve_home(home)
    # a new snapshot of links: room for its folders and metadata files only
    with transaction(base, action=f"removing {workload}", needed=lambda: 1 << 20) as tx:
        current = _current(tx)
        added = current[1].added if current else {}
        if current is None or workload not in added:
            have = ", ".join(added) or "none"
            raise StoreError(f"{workload!r} is not an added workload (added workloads: {have})")
        path, meta = current
        _link_store(path, tx.staging, skip=set(_workload_dirs(workload)))
        workloads = sorted(set(meta.workloads or []) - {workload})
        counts = _shifted(meta.counts, workloads, added.pop(workload)["counts"], -1)
        tx.publish("removed", meta.replace(workloads=workloads, counts=counts,
                                           **{ADDED_KEY: added}))


def carry_added(tx: Transaction, meta: StoreMetadata) -> StoreMetadata:
    """Link the current store's added workloads into a new release snapshot being built.

    Called by the conversion before it publishes, in its transaction. Returns the new
    snapshot's metadata with the added workloads merged in.
    """
    if tx.current is None or tx.metadata is None or not tx.metadata.added:
        return meta
    path, added = tx.current, tx.metadata.added
    if not tx.metadata.current_format:
        raise StoreError(
            f"{store_link(tx.home)} has store format {tx.metadata.store_format!r} and workloads "
            f"you added ({', '.join(added)}), which cannot be carried into a store of format "
            f"{STORE_FORMAT}; remove them (curvekit.remove_workload) with the curvekit that "
            "added them, or remove the store link and add them again after the conversion")
    clash = sorted(set(added) & set(meta.workloads or []))
    if clash:
        raise StoreError(f"the new release has workloads you added yourself: {', '.join(clash)};"
                         " remove them (curvekit.remove_workload) or rename them first")
    _link_store(path, tx.staging, only={d for name in added for d in _workload_dirs(name)})
    # The new release and the added workloads share one schema per table: whichever files
    # lack a column of the other are rewritten (the added ones get new inodes, so the
    # current snapshot's files stay as they are).
    schemas = union_schemas(snapshot_columns(tx.staging))
    conform_snapshot(tx.staging, schemas, previous=path)
    workloads = sorted(set(meta.workloads or []) | set(added))
    counts = meta.counts
    for info in added.values():
        counts = _shifted(counts, workloads, info["counts"], +1)
    return meta.replace(workloads=workloads, counts=counts, **_columns(schemas),
                        **{ADDED_KEY: added})
