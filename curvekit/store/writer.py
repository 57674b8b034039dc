"""Build a store in a staging folder, then swap it in atomically.

:class:`StoreBuilder` receives studies, trials and measurement tables in any order, keeps
measurements in memory up to a budget and spills the rest to Arrow IPC files in the staging
folder. :meth:`StoreBuilder.finish` writes every table as zstd Parquet with one schema per
table (the union of metric and metaparameter columns, in sorted order), sorted by
(trial_id, step), so the same input always gives the same files whatever its member order.

:func:`publish` seals the finished staging folder (a checksum per file, see
:mod:`curvekit.store.snapshots`) and makes it the current store by replacing the ``store``
symlink in one ``rename``: readers see either the old store or the new one, never a
half-written one, and a reader that opened the old one keeps it until it closes.

>>> import tempfile, pathlib
>>> home = pathlib.Path(tempfile.mkdtemp())
>>> staging = new_staging(home)
>>> staging.parent.name
'stores'
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import uuid
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from curvekit.errors import StoreError
from curvekit.release.archive import StudyKey, StudyRecord, TrialRecord
from curvekit.store.layout import (
    FILE_NAME,
    METADATA_FILE,
    METRICS_KEY,
    fixed_schema,
    partition_columns,
    partition_dir,
    store_link,
)
from curvekit.store.snapshots import clean_home, folder_size, retire, seal, write_failure

__all__ = ["StoreBuilder", "conversion_room", "lock_home", "new_staging", "publish"]

PARQUET_OPTIONS: dict[str, Any] = {"compression": "zstd", "compression_level": 3}


def new_staging(home: Path) -> Path:
    """Create and return an empty staging folder under ``home/stores``."""
    path = home / "stores" / f".staging-{uuid.uuid4().hex[:12]}"
    path.mkdir(parents=True)
    return path


@contextlib.contextmanager
def lock_home(home: Path, *, action: str = "writing the store",
              needed: Callable[[], int] | None = None) -> Iterator[None]:
    """Hold an exclusive lock on ``home`` while the store is changed; tidy up around it.

    On entry, what killed runs left behind is removed (staging folders, snapshots renamed
    into place but never linked) and so are old snapshots no reader holds any more. A write
    that fails for want of room or permission becomes a :class:`StoreError` naming
    ``action``, the room ``needed()`` (bytes, an estimate) and the room free.
    """
    try:
        home.mkdir(parents=True, exist_ok=True)
        fd = os.open(home / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise _write_error(exc, home, action, needed) from exc
    with open(fd, "r+b") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            raise StoreError(f"another curvekit process is writing to {home}; "
                             "wait for it to finish") from exc
        try:
            for tmp in home.glob(".store-*"):  # a link swap a killed run never finished
                if tmp.is_symlink():
                    tmp.unlink()
            clean_home(home / "stores", _current_snapshot(home))
            yield
        except OSError as exc:
            raise _write_error(exc, home, action, needed) from exc
        finally:
            # a failed run's staging folder goes now, not at the next run
            for stale in (home / "stores").glob(".staging-*"):
                shutil.rmtree(stale, ignore_errors=True)
            fcntl.flock(fh, fcntl.LOCK_UN)


def _write_error(exc: OSError, home: Path, action: str,
                 needed: Callable[[], int] | None) -> OSError | StoreError:
    message = write_failure(exc, home, action, needed)
    return exc if message is None else StoreError(message)


def _current_snapshot(home: Path) -> Path | None:
    link = store_link(home)
    return link.resolve() if link.is_symlink() else None


def conversion_room(archive: Path, home: Path) -> int:
    """Bytes a conversion of ``archive`` needs, roughly: the larger of the archive and the
    current store (a converted store takes about 0.8× its bzip2 archive)."""
    current = _current_snapshot(home)
    return max(archive.stat().st_size if archive.exists() else 0,
               folder_size(current) if current is not None else 0)


def publish(staging: Path, home: Path, name: str) -> Path:
    """Make ``staging`` the current store, atomically, and retire the previous one.

    The staging folder is sealed first (a checksum per file, a lease file); the previous
    snapshot is removed at once if no reader holds it, else by a later writer.
    """
    link = store_link(home)
    previous = _current_snapshot(home)
    seal(staging, previous)
    final = home / "stores" / name
    if final.exists():
        shutil.rmtree(final)
    staging.rename(final)
    if link.exists() and not link.is_symlink():
        # A store folder moved here by hand: keep it beside the new one rather than lose it.
        link.rename(home / "stores" / f"previous-{uuid.uuid4().hex[:8]}")
    tmp = home / f".store-{uuid.uuid4().hex[:8]}"
    tmp.symlink_to(Path("stores") / name)
    os.replace(tmp, link)
    if previous is not None and previous != final.resolve() and previous.exists():
        # the new store is in place: failing to remove the old one now is no failure, the
        # next writer tries again
        with contextlib.suppress(OSError):
            retire(previous)
    return final


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _param_type(values: Iterable[Any]) -> pa.DataType:
    kinds = {type(v) for v in values if v is not None}
    if kinds <= {bool}:
        return pa.bool_()
    if kinds <= {int}:
        return pa.int64()
    if kinds <= {int, float}:
        return pa.float64()
    return pa.string()


def _param_value(value: Any, dtype: pa.DataType) -> Any:
    if value is None or dtype != pa.string():
        return value
    return value if isinstance(value, str) else _json(value)


class StoreBuilder:
    """Accumulate one store's content and write it into ``root`` (a staging folder)."""

    def __init__(self, root: Path, *, memory_limit: int = 512 << 20, threads: int = 2) -> None:
        self.root = root
        self.studies: dict[StudyKey, StudyRecord] = {}
        self.trials: dict[tuple[StudyKey, int], TrialRecord] = {}
        self.metrics: set[str] = set()
        self._pending: dict[StudyKey, list[pa.Table]] = {}
        self._pending_bytes = 0
        self._spills: dict[StudyKey, list[Path]] = {}
        self._memory_limit = memory_limit
        self._threads = threads

    def add_study(self, record: StudyRecord) -> None:
        """Add a parsed study.json."""
        self.studies[record.key] = record

    def add_trial(self, record: TrialRecord) -> None:
        """Add a parsed metadata.json."""
        self.trials[(record.key, record.trial_id)] = record

    def add_measurements(self, key: StudyKey, table: pa.Table) -> None:
        """Add rows of one study (``trial_id``, ``step``, metric columns)."""
        self.metrics.update(n for n in table.column_names if n not in ("trial_id", "step"))
        self._pending.setdefault(key, []).append(table)
        self._pending_bytes += table.nbytes
        if self._pending_bytes > self._memory_limit:
            self._spill()

    def _spill(self) -> None:
        spill_dir = self.root / "_spill"
        spill_dir.mkdir(exist_ok=True)
        for key, tables in self._pending.items():
            paths = self._spills.setdefault(key, [])
            path = spill_dir / f"{uuid.uuid4().hex}.arrow"
            table = _concat(tables)
            with ipc.new_file(path, table.schema) as writer:
                writer.write_table(table)
            paths.append(path)
        self._pending.clear()
        self._pending_bytes = 0

    def _study_rows(self, key: StudyKey) -> pa.Table | None:
        tables = [ipc.open_file(p).read_all() for p in self._spills.get(key, [])]
        tables += self._pending.get(key, [])
        return _concat(tables) if tables else None

    def finish(self, metadata: dict[str, Any],
               trial_rows: dict[tuple[StudyKey, int], int]) -> dict[str, Any]:
        """Write every table and ``_store.json`` into the staging folder.

        ``trial_rows`` gives each trial's number of measurement rows. Returns the store
        metadata (``metadata`` plus counts and column lists).
        """
        schema = pa.schema(list(fixed_schema("measurements"))
                           + [pa.field(m, pa.float64()) for m in sorted(self.metrics)])
        keys = sorted(set(self.studies) | {k for k, _ in self.trials})
        with ThreadPoolExecutor(self._threads) as pool:
            rows = sum(pool.map(lambda k: self._write_measurements(k, schema), keys))
        shutil.rmtree(self.root / "_spill", ignore_errors=True)
        params = self._write_trials(trial_rows)
        self._write_studies()
        workloads = sorted({k.workload for k in keys})
        meta = {
            **metadata,
            "counts": {"workloads": len(workloads), "studies": len(self.studies),
                       "trials": len(self.trials), "measurements": rows},
            "metric_columns": sorted(self.metrics),
            "parameter_columns": params,
            "workloads": workloads,
        }
        (self.root / METADATA_FILE).write_text(json.dumps(meta, indent=1) + "\n")
        return meta

    def _write_measurements(self, key: StudyKey, schema: pa.Schema) -> int:
        table = self._study_rows(key)
        table = schema.empty_table() if table is None else _sort(_conform(table, schema))
        self._write(table, partition_dir("measurements", *key), measurements=True)
        return int(table.num_rows)

    def _write(self, table: pa.Table, folder: str, *, measurements: bool = False) -> None:
        path = self.root / folder / FILE_NAME
        path.parent.mkdir(parents=True, exist_ok=True)
        if not measurements:
            pq.write_table(table, path, **PARQUET_OPTIONS)
            return
        dictionary, split = _float_encodings(table)
        present = [f.name for f in table.schema if pa.types.is_floating(f.type)
                   and table.column(f.name).null_count < table.num_rows]
        table = table.replace_schema_metadata({METRICS_KEY: json.dumps(present)})
        pq.write_table(
            table, path, **PARQUET_OPTIONS,
            use_dictionary=["trial_id", *dictionary],
            use_byte_stream_split=split or False,
            # steps rise within a trial: deltas pack them into a few bits
            column_encoding={"step": "DELTA_BINARY_PACKED"},
            # Parquet min/max statistics leave NaN out, and DuckDB then folds isnan() and
            # comparisons on NaN rows to false: no statistics for metrics keeps NaN exact.
            write_statistics=["trial_id", "step"],
        )

    def _by_workload(self, keys: Iterable[StudyKey]) -> dict[tuple[str, str, str], list[StudyKey]]:
        groups: dict[tuple[str, str, str], list[StudyKey]] = {}
        for key in sorted(keys):
            groups.setdefault((key.base_dir, key.model, key.optimizer), []).append(key)
        return groups

    def _write_trials(self, counts: dict[tuple[StudyKey, int], int]) -> dict[str, str]:
        names = sorted({n for t in self.trials.values() for n in t.parameters})
        fixed = fixed_schema("trials")
        # A metaparameter named like a column or a partition (e.g. "optimizer") is prefixed.
        reserved = set(fixed.names) | set(partition_columns("trials"))
        columns = {n: (f"param_{n}" if n in reserved else n) for n in names}
        types = {n: _param_type(t.parameters.get(n) for t in self.trials.values())
                 for n in names}
        schema = pa.schema(list(fixed) + [pa.field(columns[n], types[n]) for n in names])
        by_study: dict[StudyKey, list[TrialRecord]] = {}
        for (key, _), trial in sorted(self.trials.items()):
            by_study.setdefault(key, []).append(trial)
        for workload, keys in self._by_workload(by_study).items():
            trials = [t for k in keys for t in by_study[k]]
            data: dict[str, list[Any]] = {
                "batch_size": [t.key.batch_size for t in trials],
                "trial_id": [t.trial_id for t in trials],
                "status": [t.status for t in trials],
                "steps": [t.steps for t in trials],
                "n_measurements": [counts.get((t.key, t.trial_id), 0) for t in trials],
            }
            for n in names:
                data[columns[n]] = [_param_value(t.parameters.get(n), types[n]) for t in trials]
            self._write(pa.table(data, schema=schema), partition_dir("trials", *workload))
        return {columns[n]: str(types[n]) for n in names}

    def _write_studies(self) -> None:
        schema = fixed_schema("studies")
        for workload, keys in self._by_workload(self.studies).items():
            records = [self.studies[k] for k in keys]
            data = {
                "batch_size": [r.key.batch_size for r in records],
                "dataset": [r.dataset for r in records],
                "early_stopping": [r.early_stopping for r in records],
                "train_steps": [r.train_steps for r in records],
                "parameter_configs": [_json(r.parameter_configs) for r in records],
                "extra": [_json(r.extra) for r in records],
            }
            self._write(pa.table(data, schema=schema), partition_dir("studies", *workload))


def _float_encodings(table: pa.Table) -> tuple[list[str], list[str]]:
    """Split float columns into those worth a dictionary and those worth byte-stream-split.

    Metrics such as a classification error take few distinct values (k / N_eval): a
    dictionary stores them in a few bits. Continuous metrics read from decimal text have
    noisy low mantissa bytes: splitting the bytes into streams lets zstd compress the
    regular high bytes instead.
    """
    dictionary: list[str] = []
    split: list[str] = []
    for f in table.schema:
        if not pa.types.is_floating(f.type):
            continue
        distinct = pc.count_distinct(table.column(f.name)).as_py()
        (dictionary if distinct * 8 <= table.num_rows else split).append(f.name)
    return dictionary, split


def _concat(tables: list[pa.Table]) -> pa.Table:
    if len(tables) == 1:
        return tables[0]
    return pa.concat_tables(tables, promote_options="default")


def _conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """Give ``table`` exactly ``schema``'s columns and order, nulls where it has none."""
    n = table.num_rows
    have = set(table.column_names)  # a set: one lookup per column, linear in the width
    columns = [table.column(f.name) if f.name in have else pa.nulls(n, f.type)
               for f in schema]
    return pa.Table.from_arrays(columns, schema=schema)


def _sort(table: pa.Table) -> pa.Table:
    trial = table.column("trial_id")
    step = table.column("step")
    if len(trial) < 2:
        return table
    # Trials usually arrive whole with increasing steps: skip the sort when already ordered.
    t_prev, t_next = trial.slice(0, len(trial) - 1), trial.slice(1)
    s_prev, s_next = step.slice(0, len(step) - 1), step.slice(1)
    ordered = pc.all(pc.or_(pc.less(t_prev, t_next),
                            pc.and_(pc.equal(t_prev, t_next),
                                    pc.less_equal(s_prev, s_next)))).as_py()
    if ordered:
        return table
    order = pc.sort_indices(table, sort_keys=[("trial_id", "ascending"), ("step", "ascending")])
    return table.take(order)
