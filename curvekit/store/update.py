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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import unquote

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
    MANIFEST_FILE,
    METADATA_FILE,
    STORE_FORMAT,
    TABLES,
    measurements_write,
    store_link,
    table_file,
    workload_dir,
)
from curvekit.store.metadata import ADDED_KEY, FILES_KEY, NAMES_KEY, StoreMetadata
from curvekit.store.snapshots import FILES_FILE
from curvekit.store.transaction import Transaction, transaction
from curvekit.store.upgrade import OLD_FORMATS, upgrade_into
from curvekit.store.writer import Evaluations, StoreBuilder
from curvekit.values import INT64_MAX, parameter_fix, parameter_problem

__all__ = ["AddResult", "WorkloadData", "add_workload", "carry_added", "remove_workload"]


@dataclass(frozen=True)
class WorkloadData:
    """One workload (``base_dir/model/optimizer``) ready to be written into the store.

    ``measurements`` maps (study key, trial id) to that trial's rows, in one of two forms:

    * **wide**: an integer ``step`` column, strictly increasing, and one numeric column per
      metric (every column but ``step`` is a metric, whatever its name: ``trial_id`` too);
    * **long**: exactly the columns ``step`` (integers), ``metric`` (text) and ``value``
      (numbers), one row per step and metric, each metric's steps strictly increasing. Any
      metric name fits this form, ``step`` included.

    Metric names are named like the release's (``val/classification_error``, ...) where
    they mean the same. ``origin`` says where the data came from; it is recorded in the
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


def validate(data: WorkloadData) -> dict[tuple[StudyKey, int], Evaluations]:
    """Check ``data`` and return each trial's evaluations, metrics sorted by name.

    Raises :class:`StoreError` naming the first problem found.
    """
    name = data.workload
    _split(name)  # a well-formed base_dir/model/optimizer
    # The one name rule (curvekit.names), whatever built ``data``, before the store is
    # locked; the writer applies it again to everything it writes.
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
            # Python ints are unbounded and floats may be NaN; the parameters table holds
            # int64 and finite numbers only (the one value rule, curvekit.values)
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
        rows = (_from_long(table, trial, member) if _is_long(table)
                else _from_wide(table, trial, member))
        for metric in rows.names:
            columns.metric(metric, member)
        out[(key, trial)] = rows
    return out


def _split(name: str) -> Workload:
    return Workload.parse(name, fix="choose another name", error=StoreError)


def _is_long(table: pa.Table) -> bool:
    """The long form: ``step``, ``metric`` (text) and ``value`` columns, nothing else."""
    return (set(table.column_names) == {"step", "metric", "value"}
            and (pa.types.is_string(table.schema.field("metric").type)
                 or pa.types.is_large_string(table.schema.field("metric").type)))


def _steps(step: pa.ChunkedArray | pa.Array, member: str, what: str = "") -> np.ndarray:
    """A ``step`` column as int64, checked: integers, no gaps, within int64, strictly
    increasing."""
    if not pa.types.is_integer(step.type):
        raise StoreError(f"{member}: 'step'{what} is {step.type}, expected integers")
    if step.null_count:
        raise StoreError(f"{member}: 'step'{what} has empty values")
    if pa.types.is_unsigned_integer(step.type) and len(step) \
            and pc.max(step).as_py() > INT64_MAX:
        raise StoreError(f"{member}: step {pc.max(step).as_py()} is beyond 2**63 - 1, the "
                         "largest step the store holds (int64)")
    steps: np.ndarray = step.to_numpy().astype(np.int64)
    if len(steps) and steps.min() < 0:
        raise StoreError(f"{member}: step {steps.min()} is negative; steps count from 0")
    if len(steps) > 1 and not bool(np.all(np.diff(steps) > 0)):
        i = int(np.argmax(np.diff(steps) <= 0))
        raise StoreError(f"{member}: steps{what} must strictly increase, but step "
                         f"{steps[i + 1]} follows step {steps[i]} (row {i + 2})")
    return steps


def _metric(name: str, column: pa.ChunkedArray | pa.Array, member: str) -> pa.Array:
    if not (pa.types.is_floating(column.type) or pa.types.is_integer(column.type)
            or pa.types.is_null(column.type)):
        raise StoreError(f"{member}: metric {name!r} is {column.type}, expected numbers")
    values = pc.cast(column, pa.float64())
    return values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values


def _from_wide(table: pa.Table, trial: int, member: str) -> Evaluations:
    if "step" not in table.column_names:
        raise StoreError(f"{member}: no 'step' column (columns: {', '.join(table.column_names)})")
    steps = _steps(table.column("step"), member)
    names = sorted(n for n in table.column_names if n != "step")
    return Evaluations(pa.array(np.full(len(steps), trial, dtype=np.int64)), pa.array(steps),
                       tuple(names), tuple(_metric(n, table.column(n), member) for n in names))


def _from_long(table: pa.Table, trial: int, member: str) -> Evaluations:
    """Long rows as evaluations: one per step any metric has, each metric's value there
    (null where it has no row at that step)."""
    metric = table.column("metric").combine_chunks()
    if metric.null_count:
        raise StoreError(f"{member}: 'metric' has empty values")
    value = _metric("value", table.column("value"), member)
    step = table.column("step").combine_chunks()
    encoded = pc.dictionary_encode(metric)
    codes = encoded.indices.to_numpy(zero_copy_only=False)
    order = np.argsort(codes, kind="stable")  # each metric's rows together, in their order
    starts = np.concatenate([[0], np.cumsum(np.bincount(codes,
                                                         minlength=len(encoded.dictionary)))])
    by_name: dict[str, tuple[np.ndarray, pa.Array]] = {}
    for code, name in sorted(enumerate(encoded.dictionary.to_pylist()), key=lambda x: x[1]):
        rows = pa.array(order[starts[code]:starts[code + 1]])
        by_name[name] = (_steps(step.take(rows), member, f" of metric {name!r}"),
                         value.take(rows))
    if not by_name:
        _steps(step, member)  # no rows: only the column's type is checked
    union = (np.unique(np.concatenate([s for s, _ in by_name.values()])) if by_name
             else np.array([], np.int64))
    values = []
    for steps, vals in by_name.values():
        at = np.searchsorted(union, steps)
        dense = np.zeros(len(union))
        dense[at] = vals.fill_null(0).to_numpy(zero_copy_only=False)
        valid = np.zeros(len(union), dtype=bool)
        valid[at] = vals.is_valid().to_numpy(zero_copy_only=False)
        values.append(pa.array(dense, mask=~valid))
    return Evaluations(pa.array(np.full(len(union), trial, dtype=np.int64)),
                       pa.array(union.astype(np.int64)), tuple(by_name), tuple(values))


def content_hash(data: WorkloadData, tables: Mapping[tuple[StudyKey, int], Evaluations]
                 ) -> str:
    """A sha256 of the workload's content (studies, trials, rows); the origin is left out.

    The rows are hashed as the columns ``trial_id``, ``step`` and the metrics by name, so
    the same data has the same hash in whichever form it came (and as curvekit hashed it
    before metrics became rows: adding it again is still a no-op).
    """
    return _hashes(data, tables)[0]


def _hashes(data: WorkloadData, tables: Mapping[tuple[StudyKey, int], Evaluations]
            ) -> tuple[str, dict[int, str]]:
    """:func:`content_hash`, and a sha256 of each study's content (its record, its trials,
    their rows) by batch size, from one pass over the rows: a study whose hash is unchanged
    keeps its files on a later save."""
    whole = hashlib.sha256()
    studies: dict[StudyKey, Any] = {}
    for s in sorted(data.studies, key=lambda s: s.key):
        record = _dumps([list(s.key), s.dataset, s.early_stopping, s.train_steps,
                         s.parameter_configs, s.extra])
        whole.update(record)
        studies[s.key] = hashlib.sha256(record)
    trials = {(t.key, t.trial_id): t for t in data.trials}
    for key in sorted(trials):
        t = trials[key]
        whole.update(_dumps([list(t.key), t.trial_id, t.status, t.steps, t.parameters]))
    for key in sorted(tables):
        rows, trial = tables[key], trials.get(key)
        mine = studies.get(key[0]) if trial is not None else None
        whole.update(_dumps([list(key[0]), key[1], ["trial_id", "step", *rows.names],
                             rows.num_rows]))
        if mine is not None and trial is not None:
            mine.update(_dumps([trial.trial_id, trial.status, trial.steps, trial.parameters]))
            mine.update(_dumps([rows.names, rows.num_rows]))
        for col in (rows.trial_id, rows.step, *rows.values):
            for part in (np.asarray(col.is_null()).tobytes(),
                         col.fill_null(0).to_numpy(zero_copy_only=False).tobytes()):
                whole.update(part)
                if mine is not None:
                    mine.update(part)
    return whole.hexdigest(), {k.batch_size: h.hexdigest() for k, h in studies.items()}


def _dumps(value: Any) -> bytes:
    return structured.dumps(value, sort_keys=True, default=str).encode()


def _workload_of(rel: Path) -> str:
    """``base_dir/model/optimizer`` of a table's ``base_dir=/model=/optimizer=`` folder."""
    return "/".join(unquote(p.partition("=")[2]) for p in rel.parts[:3])


def _link_store(source: Path, target: Path, keep: Callable[[str], bool], *,
                top: bool = True) -> None:
    """Hard-link the files of the workloads of ``source`` for which ``keep`` is true into
    ``target``, and with ``top`` the store's other files (its manifest).

    ``_store.json``, ``_files.json`` and the lease file are never shared: each snapshot
    writes its own (a shared ``_files.json`` rewritten in place would change the old one).
    Each folder is made once and paths stay strings: a store has hundreds of folders, and
    an add costs what this walk costs.
    """
    src, dst = str(source), str(target)
    for table in TABLES:
        for folder in sorted((source / table).glob("*/*/*")):
            if not folder.is_dir() or not keep(_workload_of(folder.relative_to(source / table))):
                continue
            for here, _, files in os.walk(folder):
                names = [n for n in files if not n.startswith(".")]
                if not names:
                    continue
                out = dst + here[len(src):]
                os.makedirs(out, exist_ok=True)
                for name in names:
                    _link(os.path.join(here, name), os.path.join(out, name))
    if top:
        for path in source.iterdir():
            if path.is_file() and not path.name.startswith(".") \
                    and path.name not in (METADATA_FILE, FILES_FILE):
                _link(str(path), str(target / path.name))


def _link(source: str, dest: str) -> None:
    try:
        os.link(source, dest)
    except FileExistsError as exc:
        raise StoreError(f"{dest} exists in the new snapshot; this is a bug") from exc
    except OSError:
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copy2(source, dest)


def _carried(tx: Transaction, keep: Callable[[str], bool], *, top: bool = True
             ) -> StoreMetadata:
    """Bring the current store's workloads for which ``keep`` is true into the staging
    folder, unchanged: hard links, or for a store of format 1 its upgrade
    (:mod:`curvekit.store.upgrade`). Returns the current metadata in the current form."""
    assert tx.current is not None and tx.metadata is not None
    meta = tx.metadata
    if meta.store_format in OLD_FORMATS:
        upgraded = upgrade_into(tx.current, meta, tx.staging, keep=keep)
        if top and (tx.current / MANIFEST_FILE).is_file():
            _link(str(tx.current / MANIFEST_FILE), str(tx.staging / MANIFEST_FILE))
        return upgraded
    if not meta.current_format:
        raise StoreError(f"{store_link(tx.home)} has store format {meta.store_format!r}; "
                         "run `curvekit fetch --force` to rebuild it")
    _link_store(tx.current, tx.staging, keep, top=top)
    return meta


STUDIES_KEY = "studies"
"""Key, in an added workload's record, of each study's content hash (by batch size)."""
WRITES_KEY = "writes"
"""Key, in an added workload's record, of the studies each write of its measurements files
holds (``{write: [batch sizes]}``)."""


@dataclass(frozen=True)
class _Kept:
    """The writes of a workload's measurements files a save keeps: their files' index
    entries, their studies, and the number of the save's own write."""

    files: dict[str, list[str]]
    writes: dict[str, list[int]]
    next_write: int

    @property
    def batch_sizes(self) -> set[int]:
        return {b for sizes in self.writes.values() for b in sizes}


def _keep_writes(tx: Transaction, name: str, record: Mapping[str, Any],
                 hashes: Mapping[int, str]) -> _Kept:
    """Hard-link into the staging folder the files of each earlier write of ``name`` whose
    studies are all in the new data unchanged (their content hashes equal); the save
    writes the other studies as a new write. A record without hashes (an add by an
    earlier curvekit) keeps nothing."""
    assert tx.current is not None and tx.metadata is not None
    studies, writes = record.get(STUDIES_KEY), record.get(WRITES_KEY)
    index = (tx.metadata.workload_names(name) or {}).get(FILES_KEY)
    if not (isinstance(studies, dict) and isinstance(writes, dict) and isinstance(index, dict)):
        return _Kept({}, {}, 0)
    # a new write is numbered after every earlier one, kept or not: a file name is never
    # given twice in a workload's history
    numbers = [int(w) for w in writes if str(w).isdigit()]
    following = max(numbers) + 1 if numbers else 0
    kept = {str(w): list(sizes) for w, sizes in writes.items()
            if sizes and all(studies.get(str(b)) == hashes.get(b) for b in sizes)}
    # each kept write's studies, trials and parameters files (a write of studies without
    # trials has none of the last two); a write whose studies file is not there (damaged)
    # is written again
    workload = _split(name)
    tables = {t: workload_dir(t, *workload) for t in ("studies", "trials", "parameters")}
    kept = {w: sizes for w, sizes in kept.items()
            if (tx.current / tables["studies"] / table_file(int(w))).is_file()}
    if not kept:
        return _Kept({}, {}, following)
    folder = workload_dir("measurements", *workload)
    files = {f: list(m) for f, m in index.items() if str(measurements_write(f)) in kept}
    links = [f"{folder}/{file}" for file in files] + [
        f"{table}/{table_file(int(w))}" for table in tables.values() for w in kept
        if (tx.current / table / table_file(int(w))).is_file()]
    for rel in links:
        (tx.staging / rel).parent.mkdir(parents=True, exist_ok=True)
        _link(str(tx.current / rel), str(tx.staging / rel))
    return _Kept(files, kept, following)


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
    The new snapshot holds the workload's own new files and hard links of every other
    file: nothing else is rewritten, whatever names the workload brings. Replacing a
    workload added before (as ``curvekit run`` does after each round) keeps, as hard links,
    the files (studies, trials, parameters, measurements) of each earlier write whose
    studies are all unchanged, and writes the other studies (new ones, changed ones) as a
    new write (``part-<w>.parquet``, ``part-<w>-*``).
    """
    base = resolve_home(home)
    tables = validate(data)
    name = data.workload
    check_not_reserved(name, error=StoreError,
                       fix="choose another name (base_dir/model/optimizer) for your own data")
    digest, hashes = _hashes(data, tables)
    counts = {"studies": len(data.studies), "trials": len(data.trials),
              "measurements": sum(t.num_rows for t in tables.values())}
    room = sum(t.nbytes for t in tables.values()) + (1 << 20)  # Arrow size: an upper bound
    with transaction(base, action=f"adding {name}", needed=lambda: room) as tx:
        meta = tx.metadata if tx.metadata is not None else StoreMetadata.empty()
        added = meta.added
        if meta.current_format and name in added and added[name].get("sha256") == digest:
            return AddResult(name, False, path=store_link(base), **counts)
        if name in (meta.workloads or []) and name not in added:
            raise StoreError(f"{name!r} is a workload of the store's release; choose another "
                             "name for your own data")
        if name in added and not replace and added[name].get("sha256") != digest:
            raise StoreError(f"the store already has a workload {name!r} with different data; "
                             "pass --replace (replace=True) to overwrite it, or choose another "
                             "name")
        current = tx.metadata is not None and tx.metadata.current_format
        if tx.current is not None:
            meta = _carried(tx, lambda w: w != name)
        builder = StoreBuilder(tx.staging)
        kept = (_keep_writes(tx, name, added[name], hashes)
                if current and name in added else _Kept({}, {}, 0))
        if kept.writes:
            builder.measured = {s.key for s in data.studies
                                if s.key.batch_size not in kept.batch_sizes}
        builder.write = kept.next_write
        for study in data.studies:
            builder.add_study(study)
        for trial in data.trials:
            builder.add_trial(trial)
        members = {(t.key, t.trial_id): t.member for t in data.trials}
        for (key, trial_id), rows in sorted(tables.items(), key=lambda item: item[0]):
            builder.add_evaluations(key, rows, members[(key, trial_id)])
        written = builder.finish({}, {k: t.num_rows for k, t in tables.items()})
        mine = written.names[name]
        mine["metrics"] = sorted(set(mine["metrics"]).union(*kept.files.values()))
        mine[FILES_KEY] = {**kept.files, **mine[FILES_KEY]}
        writes = dict(kept.writes)
        fresh = sorted(s.key.batch_size for s in data.studies
                       if s.key.batch_size not in kept.batch_sizes)
        if fresh:
            writes[str(kept.next_write)] = fresh
        workloads = sorted(set(meta.workloads or []) | {name})
        total = meta.counts
        if name in added:
            total = _shifted(total, workloads, added[name]["counts"], -1)
        added[name] = {"sha256": digest, "origin": dict(data.origin), "counts": counts,
                       "added_at": datetime.now(UTC).isoformat(timespec="seconds"),
                       "curvekit_version": __version__,
                       STUDIES_KEY: {str(b): h for b, h in sorted(hashes.items())},
                       WRITES_KEY: writes}
        names = {**meta.names, name: mine}
        path = tx.publish(f"added-{digest[:12]}", meta.replace(
            workloads=workloads, counts=_shifted(total, workloads, counts, +1),
            **{NAMES_KEY: dict(sorted(names.items())), ADDED_KEY: dict(sorted(added.items()))}))
    return AddResult(name, True, path=path, **counts)


def remove_workload(home: str | os.PathLike[str] | None, workload: str) -> None:
    """Remove a workload that was added to the store (the release's cannot be removed).

    The new snapshot hard-links every other file; nothing is rewritten.
    """
    base = resolve_home(home)
    # a new snapshot of links: room for its folders and metadata files only
    with transaction(base, action=f"removing {workload}", needed=lambda: 1 << 20) as tx:
        added = tx.metadata.added if tx.metadata is not None else {}
        if tx.current is None or workload not in added:
            have = ", ".join(added) or "none"
            raise StoreError(f"{workload!r} is not an added workload (added workloads: {have})")
        meta = _carried(tx, lambda w: w != workload)
        workloads = sorted(set(meta.workloads or []) - {workload})
        counts = _shifted(meta.counts, workloads, added.pop(workload)["counts"], -1)
        names = {w: n for w, n in meta.names.items() if w != workload}
        tx.publish("removed", meta.replace(workloads=workloads, counts=counts,
                                           **{NAMES_KEY: names, ADDED_KEY: added}))


def carry_added(tx: Transaction, meta: StoreMetadata) -> StoreMetadata:
    """Link the current store's added workloads into a new release snapshot being built.

    Called by the conversion before it publishes, in its transaction. Returns the new
    snapshot's metadata with the added workloads merged in (those of a store of format 1
    are upgraded on the way).
    """
    if tx.current is None or tx.metadata is None or not tx.metadata.added:
        return meta
    added = tx.metadata.added
    if not (tx.metadata.current_format or tx.metadata.store_format in OLD_FORMATS):
        raise StoreError(
            f"{store_link(tx.home)} has store format {tx.metadata.store_format!r} and workloads "
            f"you added ({', '.join(added)}), which cannot be carried into a store of format "
            f"{STORE_FORMAT}; remove them (curvekit.remove_workload) with the curvekit that "
            "added them, or remove the store link and add them again after the conversion")
    clash = sorted(set(added) & set(meta.workloads or []))
    if clash:
        raise StoreError(f"the new release has workloads you added yourself: {', '.join(clash)};"
                         " remove them (curvekit.remove_workload) or rename them first")
    previous = _carried(tx, lambda w: w in added, top=False)
    workloads = sorted(set(meta.workloads or []) | set(added))
    counts = meta.counts
    for info in added.values():
        counts = _shifted(counts, workloads, info["counts"], +1)
    names = {**meta.names, **{w: n for w, n in previous.names.items() if w in added}}
    return meta.replace(workloads=workloads, counts=counts,
                        **{NAMES_KEY: dict(sorted(names.items())), ADDED_KEY: added})
