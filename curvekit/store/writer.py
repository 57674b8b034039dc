"""Write a store's tables into a staging folder, one schema per table.

:class:`StoreBuilder` receives studies, trials and measurement tables in any order, keeps
measurements in memory up to a budget and spills the rest to Arrow IPC files in the staging
folder. :meth:`StoreBuilder.finish` writes every table as zstd Parquet with one schema per
table (the union of metric and metaparameter columns, in sorted order), sorted by
(trial_id, step), so the same input always gives the same files whatever its member order.

A store keeps that one schema per table when workloads are added: :func:`union_schemas`
widens a table's schema by the columns a new workload brings (one type per column, see
:func:`merge_type`), and :func:`conform_snapshot` rewrites the files that lack a column, so
that a plain Parquet reader (DuckDB, polars, pandas) finds every column in every file.

:mod:`curvekit.store.transaction` gives the staging folder and publishes it.

>>> schema_record(union_schemas([]))["studies"]["dataset"]
'string'
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from curvekit import structured
from curvekit.errors import CurvekitError, StoreError
from curvekit.names import ColumnNames, ErrorType, parameter_column
from curvekit.records import STATUSES, StudyKey, StudyRecord, TrialRecord, Workload
from curvekit.store.layout import (
    FILE_NAME,
    METRICS_KEY,
    TABLES,
    fixed_schema,
    partition_dir,
)
from curvekit.store.metadata import TABLE_COLUMNS_KEY, StoreMetadata
from curvekit.store.snapshots import file_digest, read_records
from curvekit.values import (
    INT64_MAX,
    flag_problem,
    integer_problem,
    parameter_fix,
    parameter_problem,
)

__all__ = [
    "MAX_TABLE_COLUMNS",
    "Columns",
    "StoreBuilder",
    "conform_snapshot",
    "merge_type",
    "recorded_schemas",
    "schema_record",
    "snapshot_columns",
    "union_schemas",
]

PARQUET_OPTIONS: dict[str, Any] = {"compression": "zstd", "compression_level": 3}
MAX_TABLE_COLUMNS = 10_000
"""The most metric (or metaparameter) columns one table of a store holds.

Every file of a table carries every column, so each column costs each file a footer entry
(about 350 bytes for a column of nulls): the 10,000 metrics one log may bring, no more.
"""


def _json(value: Any) -> str:
    return structured.dumps(value, sort_keys=True, separators=(",", ":"))


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
    """Accumulate one store's content and write it into ``root`` (a staging folder).

    The one door every way into the store goes through (the conversion of the release, and
    :func:`~curvekit.store.update.add_workload` for ``curvekit add`` and ``curvekit run``), so
    it applies the store's rules to whatever it is given, before anything is written:
    workload names (:meth:`curvekit.records.Workload.parse`), metric and metaparameter
    columns (:class:`curvekit.names.ColumnNames`), steps, trial ids and budgets (whole
    numbers within int64, steps never negative), statuses, flags and metaparameter values
    (:mod:`curvekit.values`). A refusal raises ``error`` (a :class:`StoreError` unless the
    caller names its own, e.g. an ``ArchiveError`` for the release) naming the file.
    """

    def __init__(self, root: Path, *, memory_limit: int = 512 << 20, threads: int = 2,
                 error: ErrorType = StoreError) -> None:
        self.root = root
        self.studies: dict[StudyKey, StudyRecord] = {}
        self.trials: dict[tuple[StudyKey, int], TrialRecord] = {}
        self.metrics: set[str] = set()
        self._pending: dict[StudyKey, list[pa.Table]] = {}
        self._pending_bytes = 0
        self._spills: dict[StudyKey, list[Path]] = {}
        self._memory_limit = memory_limit
        self._threads = threads
        self._error = error
        self._names = ColumnNames(error, metric_fix="rename the metric where it is given",
                                  parameter_fix="rename the metaparameter where it is given")
        self._workloads: set[str] = set()

    def _fail(self, where: str, message: str) -> CurvekitError:
        return self._error(f"{where}: {message}")

    def _check_key(self, key: StudyKey, where: str) -> None:
        if key.workload not in self._workloads:
            Workload.parse(key.workload, fix="rename it where it is given",
                           error=lambda m: self._fail(where, m))
            self._workloads.add(key.workload)
        problem = integer_problem(key.batch_size, minimum=1)
        if problem is not None:
            raise self._fail(where, f"batch size {key.batch_size!r} {problem}")

    def add_study(self, record: StudyRecord) -> None:
        """Add a parsed study.json (its values checked, see the class docs)."""
        where = record.member
        self._check_key(record.key, where)
        for field, problem in (("train_steps", integer_problem(record.train_steps)),
                               ("early_stopping", flag_problem(record.early_stopping))):
            if problem is not None:
                value = getattr(record, field)
                raise self._fail(where, f"{field} {value!r} {problem}")
        problem = parameter_problem(record.parameter_configs, "parameter_configs")
        if problem is not None:
            raise self._fail(where, problem)
        self.studies[record.key] = record

    def add_trial(self, record: TrialRecord) -> None:
        """Add a parsed metadata.json (its names and values checked, see the class docs)."""
        where = record.member
        self._check_key(record.key, where)
        for field in ("trial_id", "steps"):
            value = getattr(record, field)
            problem = integer_problem(value)
            if problem is not None:
                raise self._fail(where, f"{field} {value!r} {problem}")
        if record.status not in STATUSES:
            raise self._fail(where, f"status {record.status!r} is not one of "
                             f"{', '.join(STATUSES)}")
        for name, value in record.parameters.items():
            self._names.parameter(name, where)
            problem = parameter_problem(value, name)
            if problem is not None:
                raise self._fail(where, f"metaparameter {problem}; {parameter_fix(value)}")
        self.trials[(record.key, record.trial_id)] = record

    def add_metrics(self, names: Iterable[str], where: str) -> None:
        """Add metric columns that may hold no value (a header without rows)."""
        for name in names:
            self.metrics.add(self._names.metric(name, where))

    def add_measurements(self, key: StudyKey, table: pa.Table) -> None:
        """Add rows of one study (``trial_id``, ``step``, metric columns)."""
        where = f"{key.path()}/<trial>/measurements"
        self._check_key(key, where)
        _check_steps(table, lambda m: self._fail(where, m))
        self.add_metrics((n for n in table.column_names if n not in ("trial_id", "step")),
                         where)
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

    def columns(self, label: str) -> list[Columns]:
        """This builder's own columns of each table, as sources for :func:`union_schemas`.

        A metaparameter without a value in any trial has type null here: it takes the
        type the other workloads give that column.
        """
        metrics = pa.schema([pa.field(m, pa.float64()) for m in sorted(self.metrics)])
        params, types = self._parameters()
        trials = pa.schema([pa.field(column, types[name]) for name, column in params.items()])
        return [Columns("studies", label, pa.schema([]), frozenset()),
                Columns("trials", label, trials,
                        frozenset(f.name for f in trials if f.type != pa.null())),
                Columns("measurements", label, metrics, frozenset(metrics.names))]

    def finish(self, metadata: Mapping[str, Any],
               trial_rows: dict[tuple[StudyKey, int], int], *,
               schemas: dict[str, pa.Schema] | None = None) -> StoreMetadata:
        """Write every table and ``_store.json`` into the staging folder.

        ``trial_rows`` gives each trial's number of measurement rows. ``schemas`` (from
        :func:`union_schemas`, with this builder's :meth:`columns` among its sources) gives
        each table's columns when the files join a store that has more; by default each
        table has the columns of this builder's content. Returns the store metadata
        (``metadata`` plus counts and this content's column lists).
        """
        if schemas is None:
            schemas = union_schemas(self.columns("the new content"))
        keys = sorted(set(self.studies) | {k for k, _ in self.trials})
        with ThreadPoolExecutor(self._threads) as pool:
            rows = sum(pool.map(lambda k: self._write_measurements(k, schemas["measurements"]),
                                keys))
        shutil.rmtree(self.root / "_spill", ignore_errors=True)
        self._write_trials(trial_rows, schemas["trials"])
        self._write_studies()
        params, _ = self._parameters()
        trial_types = {f.name: str(f.type) for f in schemas["trials"]}
        workloads = sorted({k.workload for k in keys})
        meta = StoreMetadata({
            **metadata,
            "counts": {"workloads": len(workloads), "studies": len(self.studies),
                       "trials": len(self.trials), "measurements": rows},
            "metric_columns": sorted(self.metrics),
            "parameter_columns": {c: trial_types[c] for c in sorted(params.values())},
            "workloads": workloads,
            TABLE_COLUMNS_KEY: schema_record(schemas),
        })
        meta.save(self.root)
        return meta

    def _write_measurements(self, key: StudyKey, schema: pa.Schema) -> int:
        table = self._study_rows(key)
        table = schema.empty_table() if table is None else _sort(_conform(table, schema))
        write_table(table, self.root / partition_dir("measurements", *key) / FILE_NAME,
                    measurements=True)
        return int(table.num_rows)

    def _by_workload(self, keys: Iterable[StudyKey]) -> dict[tuple[str, str, str], list[StudyKey]]:
        groups: dict[tuple[str, str, str], list[StudyKey]] = {}
        for key in sorted(keys):
            groups.setdefault((key.base_dir, key.model, key.optimizer), []).append(key)
        return groups

    def _parameters(self) -> tuple[dict[str, str], dict[str, pa.DataType]]:
        """Each metaparameter's column name and type (null when no trial gives it a value)."""
        names = sorted({n for t in self.trials.values() for n in t.parameters})
        # A metaparameter named like a column (e.g. "optimizer") is prefixed; add_trial
        # refused two names that would share a column.
        columns = {n: parameter_column(n) for n in names}
        types = {}
        for n in names:
            values = [t.parameters.get(n) for t in self.trials.values()]
            types[n] = (_param_type(values) if any(v is not None for v in values)
                        else pa.null())
        return columns, types

    def _write_trials(self, counts: dict[tuple[StudyKey, int], int],
                      schema: pa.Schema) -> None:
        columns, _ = self._parameters()
        param_of = {column: name for name, column in columns.items()}
        fixed = set(fixed_schema("trials").names)
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
            for f in schema:
                if f.name in fixed:
                    continue
                name = param_of.get(f.name)
                data[f.name] = ([None] * len(trials) if name is None else
                                [_param_value(t.parameters.get(name), f.type) for t in trials])
            try:
                table = pa.table(data, schema=schema)
            except pa.ArrowInvalid as exc:  # an int beyond 2**53 in a float64 column
                raise StoreError(f"{'/'.join(workload)}: a metaparameter does not fit the "
                                 f"store's column type: {exc}; store those values as floats "
                                 "or strings") from exc
            write_table(table, self.root / partition_dir("trials", *workload) / FILE_NAME)

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
            write_table(pa.table(data, schema=schema),
                        self.root / partition_dir("studies", *workload) / FILE_NAME)


def _check_steps(table: pa.Table, error: ErrorType) -> None:
    """Refuse a step column that is not whole numbers in 0 … 2**63 - 1 (int64 exactly)."""
    if "step" not in table.column_names:
        raise error("no step column")
    step = table.column("step")
    if not pa.types.is_integer(step.type):
        raise error(f"steps are {step.type}, not integers: steps are stored exactly as int64 "
                    "(a float would round those above 2**53)")
    if step.null_count:
        raise error("a row has no step")
    for chunk in step.chunks:  # NumPy's min and max: microseconds per table, no copy
        values = chunk.to_numpy(zero_copy_only=False)
        if not values.size:
            continue
        low, high = int(values.min()), int(values.max())
        if low < 0:
            raise error(f"step {low} is negative; steps count from 0")
        if high > INT64_MAX:
            raise error(f"step {high} is beyond 2**63 - 1 = {INT64_MAX}, the largest step "
                        "the store holds (int64)")


def write_table(table: pa.Table, path: Path, *, measurements: bool = False) -> None:
    """Write one file of the store with the store's encodings (``path``'s folder is made)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not measurements:
        pq.write_table(table, path, **PARQUET_OPTIONS)
        return
    dictionary, split = _float_encodings(table)
    present = [f.name for f in table.schema if pa.types.is_floating(f.type)
               and table.column(f.name).null_count < table.num_rows]
    table = table.replace_schema_metadata({METRICS_KEY: structured.dumps(present)})
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


# -- one schema per table ----------------------------------------------------------------

@dataclass(frozen=True)
class Columns:
    """The dynamic columns one source (a workload, a file) gives a table.

    ``valued`` names the columns holding at least one value: only those vote on a column's
    type (a column of nulls takes any type).
    """

    table: str
    label: str
    schema: pa.Schema
    valued: frozenset[str]


_WIDER = {frozenset({pa.int64(), pa.float64()}): pa.float64()}


def merge_type(a: pa.DataType, b: pa.DataType) -> pa.DataType | None:
    """The one type a column takes when two sources give it ``a`` and ``b``; None if none.

    Equal types stay; null (a column without values) takes the other type; int64 and
    float64 make float64. Anything else (a string beside a number, a bool beside an
    integer) has no common type: the writer refuses it rather than turn numbers into text.

    >>> merge_type(pa.int64(), pa.float64()), merge_type(pa.null(), pa.string())
    (DataType(double), DataType(string))
    >>> merge_type(pa.string(), pa.float64()) is None
    True
    """
    if a == b or pa.types.is_null(b):
        return a
    if pa.types.is_null(a):
        return b
    return _WIDER.get(frozenset({a, b}))


def union_schemas(sources: Iterable[Columns]) -> dict[str, pa.Schema]:
    """Each table's one schema: its fixed columns, then every source's columns by name.

    A column that no source gives a value is typed as the writer would type it alone
    (bool for a metaparameter, float64 for a metric). Raises :class:`StoreError` when two
    sources give one column types without a common one (see :func:`merge_type`), when a
    table would exceed :data:`MAX_TABLE_COLUMNS` columns, or when two sources' columns
    would clash in queries (:class:`curvekit.names.ColumnNames`: names that differ only in
    case, a metric named like a column of the store), whichever workloads they come from.

    >>> a = Columns("trials", "a/m/sgd", pa.schema([("lr", pa.int64())]), frozenset({"lr"}))
    >>> b = Columns("trials", "b/m/sgd", pa.schema([("lr", pa.float64()), ("x", pa.null())]),
    ...             frozenset({"lr"}))
    >>> union_schemas([a, b])["trials"].names[-2:], union_schemas([a, b])["trials"].types[-2:]
    (['lr', 'x'], [DataType(double), DataType(bool)])
    """
    types: dict[str, dict[str, pa.DataType]] = {t: {} for t in TABLES}
    holder: dict[tuple[str, str], str] = {}
    names = {t: ColumnNames(StoreError, metric_fix="rename the metric (or remove a workload)",
                            parameter_fix="rename the metaparameter (or remove a workload)")
             for t in TABLES}
    for source in sources:
        fixed = set(fixed_schema(source.table).names)
        have = types[source.table]
        for f in source.schema:
            if f.name in fixed:
                continue
            if source.table == "measurements":
                names[source.table].metric(f.name, source.label)
            elif source.table == "trials":
                names[source.table].parameter(f.name, source.label, column=True)
            new = f.type if f.name in source.valued else pa.null()
            old = have.get(f.name, pa.null())
            merged = merge_type(old, new)
            if merged is None:
                raise StoreError(
                    f"the {source.table} column {f.name!r} holds {new} values in "
                    f"{source.label} but {old} values in {holder[(source.table, f.name)]}; "
                    "every file of a table has one type per column: give the values the "
                    f"same type ({old}) or rename the column, then add the workload again")
            if not pa.types.is_null(new) and (source.table, f.name) not in holder:
                holder[(source.table, f.name)] = source.label
            have[f.name] = merged
    out = {}
    default = {"trials": pa.bool_(), "measurements": pa.float64(), "studies": pa.string()}
    for table, have in types.items():
        if len(have) > MAX_TABLE_COLUMNS:
            raise StoreError(
                f"the store's {table} table would have {len(have):,} columns besides its "
                f"fixed ones; it holds at most {MAX_TABLE_COLUMNS:,} (every file carries "
                "every column): leave out columns you do not need, or use another home "
                "(--home) for this data")
        fields = [pa.field(n, default[table] if pa.types.is_null(t) else t)
                  for n, t in sorted(have.items())]
        out[table] = pa.schema(list(fixed_schema(table)) + fields)
    return out


def _table_files(root: Path, table: str) -> list[Path]:
    return sorted((root / table).rglob("*.parquet")) if (root / table).is_dir() else []


def _workload_label(root: Path, path: Path) -> str:
    """``base_dir/model/optimizer`` of a file, from its hive folders (for messages)."""
    parts = path.relative_to(root).parts[1:4]
    return "/".join(unquote(p.partition("=")[2]) for p in parts)


def snapshot_columns(root: Path, skip: Iterable[str] = (), *,
                     recorded: dict[str, pa.Schema] | None = None) -> list[Columns]:
    """The columns each file of the store folder ``root`` gives its table.

    Files under the relative folders ``skip`` are left out (a workload being replaced).
    Trials files are read whole (one small file per workload) to see which columns hold
    values. Studies and measurements files are read by their footers, or, given the
    ``recorded`` schemas of a store that keeps one schema per table (see
    :func:`recorded_schemas`), not at all: their columns are the recorded ones.
    """
    prefixes = tuple(f"{s.rstrip('/')}/" for s in skip)
    out = []
    for table in TABLES:
        if recorded is not None and table != "trials":
            schema = recorded[table]
            out.append(Columns(table, f"the store's {table}", schema, frozenset(schema.names)))
            continue
        for path in _table_files(root, table):
            if path.relative_to(root).as_posix().startswith(prefixes):
                continue
            label = _workload_label(root, path)
            try:
                if table == "trials":
                    data = pq.ParquetFile(path).read()
                    schema = data.schema
                    valued = frozenset(c for c in data.column_names
                                       if data.column(c).null_count < data.num_rows)
                else:
                    schema = pq.read_schema(path)
                    valued = frozenset(schema.names)
            except (OSError, pa.ArrowException):
                # A damaged file gives no columns: it is carried as it is, damage and all
                # (conform_snapshot leaves it), and `curvekit verify` names it.
                continue
            out.append(Columns(table, label, schema.remove_metadata(), valued))
    return out


_TYPE_NAMES = {str(t): t for t in (pa.string(), pa.int64(), pa.float64(), pa.bool_())}


def schema_record(schemas: dict[str, pa.Schema]) -> dict[str, dict[str, str]]:
    """The form ``_store.json`` records the tables' schemas in: column name -> type name,
    in the files' order (partition columns are in the paths, not the files).

    >>> schema_record(union_schemas([]))["measurements"]
    {'trial_id': 'int64', 'step': 'int64'}
    """
    return {t: {f.name: str(f.type) for f in schemas[t]} for t in TABLES}


def recorded_schemas(meta: Mapping[str, Any]) -> dict[str, pa.Schema] | None:
    """The tables' schemas a store's metadata records; None for a store that records none
    (one written before curvekit kept one schema per table) or records a type it does
    not know: its files must then be read.

    >>> recorded_schemas({}) is None
    True
    >>> recorded_schemas({"table_columns": schema_record(union_schemas([]))})["trials"].names
    ['batch_size', 'trial_id', 'status', 'steps', 'n_measurements']
    """
    record = meta.get(TABLE_COLUMNS_KEY)
    if not isinstance(record, dict) or set(record) != set(TABLES):
        return None
    out = {}
    for table, columns in record.items():
        if not isinstance(columns, dict) or not all(t in _TYPE_NAMES for t in columns.values()):
            return None
        out[table] = pa.schema([pa.field(str(n), _TYPE_NAMES[t]) for n, t in columns.items()])
    return out


def conform_snapshot(root: Path, schemas: dict[str, pa.Schema], *,
                     tables: Iterable[str] = TABLES, previous: Path | None = None,
                     threads: int = 2) -> list[str]:
    """Rewrite each file of the store folder ``root`` whose columns differ from ``schemas``.

    The missing columns are added as nulls of their type, int64 columns widened to
    float64 where the schema says so, and the columns put in the schema's order. A
    file is written beside the old one and renamed over it: a file hard-linked from the
    previous snapshot gets a new inode here and the previous snapshot keeps its own
    (:func:`~curvekit.store.snapshots.seal` then hashes the new file). Files are rewritten
    in ``threads`` threads (Parquet decoding and encoding release the GIL). Only the files
    of ``tables`` are looked at. A file hard-linked from ``previous`` (the snapshot being
    replaced) whose content no longer matches the digest recorded there is left as it is:
    rewriting it would give damaged data a fresh digest, so it is carried as damage for
    ``curvekit verify`` to name. Returns the rewritten files, relative to ``root``, sorted.
    """
    records = (read_records(previous) or {}) if previous is not None else {}
    work = [(table, path) for table in tables for path in _table_files(root, table)]
    with ThreadPoolExecutor(threads) as pool:
        done = list(pool.map(lambda job: _conform_file(root, job[0], schemas[job[0]], job[1],
                                                       previous, records), work))
    return sorted(rel for rel in done if rel is not None)


def _damaged_link(path: Path, rel: str, previous: Path | None,
                  records: dict[str, dict[str, Any]]) -> bool:
    """True when ``path`` is ``previous``'s file at ``rel`` and differs from its record."""
    if previous is None:
        return False
    try:
        mine, theirs = path.stat(), (previous / rel).stat()
    except OSError:
        return False
    if (mine.st_dev, mine.st_ino) != (theirs.st_dev, theirs.st_ino):
        return False  # written for this snapshot
    want = records.get(rel)
    return want is None or mine.st_size != want.get("size") \
        or file_digest(path) != want.get("digest")


def _conform_file(root: Path, table: str, schema: pa.Schema, path: Path,
                  previous: Path | None, records: dict[str, dict[str, Any]]) -> str | None:
    rel = path.relative_to(root).as_posix()
    try:
        if pq.read_schema(path).equals(schema):
            return None
        if _damaged_link(path, rel, previous, records):
            return None
        data = pq.ParquetFile(path).read()
    except (OSError, pa.ArrowException) as exc:
        if _damaged_link(path, rel, previous, records):
            return None
        raise StoreError(f"cannot read {path}: {exc}; run `curvekit verify` to see "
                         "what is damaged and how to repair it") from exc
    try:
        data = _conform(data, schema)
    except pa.ArrowInvalid as exc:  # an int64 beyond 2**53 does not fit a float64
        raise StoreError(f"{_workload_label(root, path)}: cannot widen its {table} to the "
                         f"store's column types: {exc}; store those values as floats or "
                         "strings in every workload") from exc
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}")
    write_table(data, tmp, measurements=table == "measurements")
    os.replace(tmp, path)
    return rel


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
    """Give ``table`` exactly ``schema``'s columns, types and order, nulls where it has none.

    A cast is safe (an int64 beyond 2**53 raises rather than round); types come from
    :func:`union_schemas`, so only lossless widenings and nulls are ever cast.
    """
    n = table.num_rows
    have = set(table.column_names)  # a set: one lookup per column, linear in the width
    columns = []
    for f in schema:
        if f.name not in have:
            columns.append(pa.nulls(n, f.type))
            continue
        column = table.column(f.name)
        columns.append(column if column.type == f.type else pc.cast(column, f.type))
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
