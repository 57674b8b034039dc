"""Write a store's tables into a staging folder, in the one fixed schema.

:class:`StoreBuilder` receives studies, trials and evaluations in any order, keeps the
evaluations in memory up to a budget and spills the rest to Arrow IPC files in the staging
folder. :meth:`StoreBuilder.finish` writes every table as zstd Parquet with the columns
``data_manifest/store_schema.json`` fixes, so the same input always gives the same files
whatever its member order:

* ``measurements``: files of whole metrics per workload, one row per evaluation and metric
  (``batch_size, trial_id, step, metric, value``), sorted by (metric, batch_size,
  trial_id, step): a metric with :data:`GROUP_ROWS` rows or more has a file of its own,
  the smaller ones share one (:func:`write_workload_measurements`), and ``_store.json``
  records which metrics each file holds, so that a reader of one metric opens its files
  alone;
* ``trials``: one file per workload, its fixed columns only;
* ``parameters``: one file per workload, one row per metaparameter of each trial
  (:func:`parameter_rows`);
* ``studies``: one file per workload.

Names (of metrics, of metaparameters) are only ever values in these files: a workload with
new names writes its own files and nothing else, so adding one to a store never rewrites
another's.

:mod:`curvekit.store.transaction` gives the staging folder and publishes it.

>>> import pyarrow as pa
>>> rows = Evaluations.from_table(pa.table({"trial_id": [1, 1], "step": [0, 10],
...                                         "val/error": [0.9, 0.5]}))
>>> rows.names, rows.num_rows
(('val/error',), 2)
"""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from curvekit import structured
from curvekit.errors import CurvekitError, StoreError
from curvekit.names import ColumnNames, ErrorType
from curvekit.records import STATUSES, StudyKey, StudyRecord, TrialRecord, Workload
from curvekit.store.layout import (
    EVALUATIONS_KEY,
    METRICS_KEY,
    PARTS_KEY,
    STORE_FORMAT,
    fixed_schema,
    measurements_file,
    partition_dir,
    table_file,
)
from curvekit.store.metadata import FILES_KEY, NAMES_KEY, StoreMetadata
from curvekit.values import (
    INT64_MAX,
    flag_problem,
    integer_problem,
    merged_type,
    parameter_fix,
    parameter_problem,
)

__all__ = [
    "EVALUATIONS_KEY",
    "GROUP_ROWS",
    "PARTS_KEY",
    "Evaluations",
    "SpilledStudy",
    "StoreBuilder",
    "StudyRows",
    "WrittenMeasurements",
    "merged_type",
    "parameter_rows",
    "parameter_type",
    "write_table",
    "write_workload_measurements",
]

PARQUET_OPTIONS: dict[str, Any] = {"compression": "zstd", "compression_level": 3}
GROUP_ROWS = 1 << 16
"""A measurements row group takes the rows of further metrics until it holds this many:
small metrics share a row group, a large one has its own (split at :data:`MAX_GROUP_ROWS`)."""
MAX_GROUP_ROWS = 1 << 20
DICTIONARY_BYTES = 64 << 10
"""The dictionary page of a column chunk of values: 8,192 distinct values. A metric with
more falls back to plain values there; on the full-scale generated archive this limit gave
the smallest store (1 MiB: 1.33x the store of format 1, 64 KiB: 1.14x, on 30 files)."""

# the schema written: the metric column as a dictionary (one entry per row group), which
# readers see as text (the files store no Arrow schema, so the Parquet type is what counts)
_WRITTEN = pa.schema([pa.field("batch_size", pa.int64()),
                      pa.field("trial_id", pa.int64()), pa.field("step", pa.int64()),
                      pa.field("metric", pa.dictionary(pa.int32(), pa.string())),
                      pa.field("value", pa.float64())])


Column: TypeAlias = pa.Array | pa.ChunkedArray
"""An Arrow array, possibly in chunks."""


def _json(value: Any) -> str:
    return structured.dumps(value, sort_keys=True, separators=(",", ":"))


# -- evaluations: trial ids, steps and one aligned array per metric ------------------------

@dataclass(frozen=True)
class Evaluations:
    """Evaluations of one study (all or some of its trials): a row per evaluation.

    ``trial_id`` and ``step`` are int64 arrays of one length; ``values`` holds, for each
    metric in ``names``, a float64 array of that length (null where the evaluation has no
    value). The names are data: any text, ``step`` and ``trial_id`` included. Arrays may
    be chunked: a study's parts are joined without copying them.
    """

    trial_id: Column
    step: Column
    names: tuple[str, ...]
    values: tuple[Column, ...]

    @property
    def num_rows(self) -> int:
        """The number of evaluations."""
        return len(self.step)

    @property
    def nbytes(self) -> int:
        """Bytes of Arrow memory the arrays take."""
        return int(self.trial_id.nbytes + self.step.nbytes + sum(v.nbytes for v in self.values))

    @classmethod
    def from_table(cls, table: pa.Table) -> Evaluations:
        """A table whose first two columns are the trial ids and the steps, and every
        further column a metric (the CSV reader's tables; its columns are kept, not
        copied)."""
        columns = table.columns

        def typed(column: pa.ChunkedArray, kind: pa.DataType) -> Column:
            return column if column.type == kind else pc.cast(column, kind)

        return cls(typed(columns[0], pa.int64()), typed(columns[1], pa.int64()),
                   tuple(table.column_names[2:]),
                   tuple(typed(c, pa.float64()) for c in columns[2:]))

    def kept(self) -> list[str]:
        """The metrics with at least one value (NaN counts), by name."""
        return sorted(n for n, v in zip(self.names, self.values, strict=True)
                      if v.null_count < len(v))

    def metric(self, name: str) -> tuple[Column, Column, Column]:
        """The trial ids, steps and values of one metric."""
        return self.trial_id, self.step, self.values[self.names.index(name)]

    def evaluations(self) -> tuple[Column, Column]:
        """The trial ids and steps."""
        return self.trial_id, self.step

    def to_ipc(self) -> pa.Table:
        """A table with positional column names (the names go in its schema metadata)."""
        names = ["trial_id", "step", *(str(i) for i in range(len(self.names)))]
        table = pa.Table.from_arrays([self.trial_id, self.step, *self.values], names=names)
        return table.replace_schema_metadata({"curvekit.names": structured.dumps(self.names)})

    @classmethod
    def from_ipc(cls, table: pa.Table) -> Evaluations:
        """The inverse of :meth:`to_ipc`."""
        names = tuple(json.loads((table.schema.metadata or {})[b"curvekit.names"]))
        columns = table.columns
        return cls(columns[0], columns[1], names, tuple(columns[2:]))


def _chunks(column: Column) -> list[pa.Array]:
    return list(column.chunks) if isinstance(column, pa.ChunkedArray) else [column]


def _join(parts: Sequence[Evaluations]) -> Evaluations:
    """One study's parts as one (their arrays as chunks: nothing is copied), sorted by
    (trial_id, step) (stable: repeated steps of a trial keep their order), with every
    metric of any part (nulls where a part lacks it)."""
    names = sorted({n for p in parts for n in p.names})
    values = []
    for name in names:
        pieces: list[pa.Array] = []
        for p in parts:
            i = p.names.index(name) if name in p.names else None
            pieces += (_chunks(p.values[i]) if i is not None
                       else [pa.nulls(p.num_rows, pa.float64())])
        values.append(pa.chunked_array(pieces, pa.float64()))
    trial = pa.chunked_array([c for p in parts for c in _chunks(p.trial_id)], pa.int64())
    step = pa.chunked_array([c for p in parts for c in _chunks(p.step)], pa.int64())
    joined = Evaluations(trial, step, tuple(names), tuple(values))
    order = _order(trial, step)
    if order is not None:
        joined = Evaluations(trial.take(order), step.take(order), joined.names,
                             tuple(v.take(order) for v in values))
    return joined


def _order(trial: pa.ChunkedArray, step: pa.ChunkedArray) -> pa.Array | None:
    """Indices that sort by (trial_id, step), stably; None when already sorted (checked
    chunk by chunk, without copying)."""
    if len(trial) < 2:
        return None
    previous: tuple[int, int] | None = None
    ordered = True
    for t_chunk, s_chunk in zip(trial.chunks, _aligned(step, trial), strict=True):
        if not len(t_chunk):
            continue
        t, s = t_chunk.to_numpy(zero_copy_only=False), s_chunk.to_numpy(zero_copy_only=False)
        if previous is not None and (t[0], s[0]) < previous:
            ordered = False
            break
        dt, ds = np.diff(t), np.diff(s)
        if not bool(np.all((dt > 0) | ((dt == 0) & (ds >= 0)))):
            ordered = False
            break
        previous = (int(t[-1]), int(s[-1]))
    if ordered:
        return None
    t = trial.to_numpy()
    s = step.to_numpy()
    return pa.array(np.lexsort((s, t)))  # numpy's lexsort is stable


def _aligned(column: pa.ChunkedArray, like: pa.ChunkedArray) -> list[pa.Array]:
    """``column``'s values cut into chunks of the lengths of ``like``'s chunks."""
    out, at = [], 0
    for chunk in like.chunks:
        out.append(column.slice(at, len(chunk)).combine_chunks())
        at += len(chunk)
    return out


# -- the measurements files of a workload ----------------------------------------------------

@dataclass(frozen=True)
class WrittenMeasurements:
    """What :func:`write_workload_measurements` wrote: each file's metrics (the index
    ``_store.json`` keeps), each study's evaluations, and the metrics with a value."""

    files: dict[str, list[str]]
    evaluations: dict[int, int]
    metrics: list[str]


class StudyRows(Protocol):
    """One study's evaluations as :func:`write_workload_measurements` reads them: in
    memory (:class:`Evaluations`) or from the builder's spill (:class:`SpilledStudy`), one
    metric at a time."""

    @property
    def num_rows(self) -> int:
        """The number of evaluations."""

    def kept(self) -> list[str]:
        """The metrics with at least one value, by name."""

    def metric(self, name: str) -> tuple[Column, Column, Column]:
        """The trial ids, steps and values of one metric."""

    def evaluations(self) -> tuple[Column, Column]:
        """The trial ids and steps."""


@dataclass(frozen=True)
class SpilledStudy:
    """A study's evaluations, sorted, in an Arrow IPC file of the staging folder (columns
    ``trial_id``, ``step``, then its metrics with a value, positionally, their names
    ``names``): each metric is read from the memory-mapped file when it is written, so a
    workload's files are written without holding its studies in memory."""

    path: Path
    num_rows: int
    names: tuple[str, ...]

    @classmethod
    def write(cls, rows: Evaluations, path: Path) -> SpilledStudy:
        """Spill ``rows`` (its metrics with a value only) to ``path``."""
        kept = rows.kept()
        table = pa.Table.from_arrays(
            [rows.trial_id, rows.step, *(rows.metric(n)[2] for n in kept)],
            names=["trial_id", "step", *(str(i) for i in range(len(kept)))])
        with ipc.new_file(path, table.schema) as writer:
            writer.write_table(table)
        return cls(path, rows.num_rows, tuple(kept))

    def kept(self) -> list[str]:
        """The metrics with at least one value, by name."""
        return list(self.names)

    def metric(self, name: str) -> tuple[Column, Column, Column]:
        """The trial ids, steps and values of one metric (views of the mapped file)."""
        table = self._mapped()
        return table.column(0), table.column(1), table.column(2 + self.names.index(name))

    def evaluations(self) -> tuple[Column, Column]:
        """The trial ids and steps (views of the mapped file)."""
        table = self._mapped()
        return table.column(0), table.column(1)

    def _mapped(self) -> pa.Table:
        return ipc.open_file(pa.memory_map(str(self.path))).read_all()


_Piece: TypeAlias = tuple[str | None, int, StudyRows]
"""One metric's rows of one study (None: the study's rows without a metric)."""


def write_workload_measurements(studies: Sequence[tuple[int, StudyRows]], folder: Path,
                                write: int = 0, *, pool: Executor | None = None
                                ) -> WrittenMeasurements:
    """Write one workload's evaluations (``(batch_size, rows)`` per study) as the long
    measurements files of its ``write``-th write into ``folder``.

    Each metric with at least one value in a study gets one row per evaluation of that
    study, null where it has none; a study whose evaluations hold no metric at all keeps one
    row per evaluation with a null metric. A metric with at least :data:`GROUP_ROWS` rows
    has a file of its own; the smaller ones share one file, so ten thousand small metrics
    make one file; the rows without a metric have a file of their own, so that the index
    (``files``: each file's metrics) tells a file of one metric from every other (a write
    without any evaluation has one such file, of no rows). Files are named
    :func:`~curvekit.store.layout.measurements_file` ``(write, k)``: the metrics' own
    files first, by name, then the shared one, then the one without a metric. Each is sorted
    by (metric, batch_size, trial_id, step), in row groups of at most :data:`MAX_GROUP_ROWS`
    rows (the shared file's groups hold whole metrics, a new group once one holds
    :data:`GROUP_ROWS`). Each footer records its metrics in order
    (``curvekit.metrics``), each study's evaluations (``curvekit.evaluations``, by batch
    size) and which studies each metric has rows of, in order (``curvekit.parts``).

    A file is written one metric of one study at a time, in order, and a row group is
    encoded once it is full: memory holds a row group's rows, not the workload's. With
    ``pool``, the files are written side by side on its threads.

    Encodings: a dictionary for the metric, the batch size and the values (a
    classification error takes few distinct values, k / N_eval, which a dictionary stores
    in a few bits; continuous values overflow its :data:`DICTIONARY_BYTES` soon and are
    written plain), deltas for the trial ids and steps (runs and rises: a few bits).

    >>> import tempfile, pathlib
    >>> rows = Evaluations.from_table(pa.table({"trial_id": [1, 1], "step": [0, 10],
    ...                                         "val/error": [0.9, 0.5]}))
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> written = write_workload_measurements([(32, rows)], folder)
    >>> written.files, written.evaluations
    ({'part-0-0.parquet': ['val/error']}, {32: 2})
    """
    ordered = sorted(studies, key=lambda item: item[0])
    evaluations = {bs: rows.num_rows for bs, rows in ordered}
    by_metric: dict[str, list[_Piece]] = {}
    unnamed: list[_Piece] = []
    for bs, rows in ordered:
        kept = rows.kept()
        for name in kept:
            by_metric.setdefault(name, []).append((name, bs, rows))
        if not kept and rows.num_rows:
            unnamed.append((None, bs, rows))
    names = sorted(by_metric)
    size = {n: sum(rows.num_rows for _, _, rows in by_metric[n]) for n in names}
    own = [n for n in names if size[n] >= GROUP_ROWS]
    shared = [n for n in names if size[n] < GROUP_ROWS]
    files: dict[str, list[str]] = {}
    jobs: list[tuple[Path, list[list[_Piece]], list[_Piece]]] = []
    folder.mkdir(parents=True, exist_ok=True)
    for k, name in enumerate(own):
        file = measurements_file(write, k)
        jobs.append((folder / file, [], by_metric[name]))
        files[file] = [name]
    if shared:
        groups: list[list[_Piece]] = [[]]
        rows_in = 0
        for name in shared:
            if rows_in >= GROUP_ROWS:
                groups.append([])
                rows_in = 0
            groups[-1] += by_metric[name]
            rows_in += size[name]
        file = measurements_file(write, len(files))
        jobs.append((folder / file, groups, []))
        files[file] = list(shared)
    if unnamed or not files:
        # a write without evaluations still has a file (of no rows), so that every workload
        # has one and a plain reader's glob over the table finds its schema
        file = measurements_file(write, len(files))
        jobs.append((folder / file, [], unnamed))
        files[file] = []

    def one(job: tuple[Path, list[list[_Piece]], list[_Piece]]) -> None:
        _write_file(job[0], job[1], job[2], evaluations)

    list(pool.map(one, jobs) if pool is not None else map(one, jobs))  # raises a failure
    return WrittenMeasurements(files, evaluations, names)


def _write_file(path: Path, groups: list[list[_Piece]], stream: list[_Piece],
                evaluations: dict[int, int]) -> None:
    """One measurements file: ``groups`` of whole small metrics, a row group each; or the
    pieces of ``stream`` (one large metric's, or the rows without a metric), in row groups
    of :data:`MAX_GROUP_ROWS` rows but the last."""
    writer = pq.ParquetWriter(
        path, _WRITTEN, **PARQUET_OPTIONS, store_schema=False,
        use_dictionary=["batch_size", "metric", "value"],
        dictionary_pagesize_limit=DICTIONARY_BYTES,
        column_encoding={"trial_id": "DELTA_BINARY_PACKED", "step": "DELTA_BINARY_PACKED"},
        # Parquet min/max statistics leave NaN out, and DuckDB then folds isnan() and
        # comparisons on NaN rows to false: no statistics for values keeps NaN exact.
        write_statistics=["batch_size", "trial_id", "step", "metric"])
    parts: list[list[object]] = []
    try:
        for group in groups:
            writer.write_table(_group(group), row_group_size=MAX_GROUP_ROWS)
        pending: list[pa.Table] = []
        count = 0
        for piece in stream:
            pending.append(_group([piece]))
            count += pending[-1].num_rows
            while count >= MAX_GROUP_ROWS:
                table = pa.concat_tables(pending).unify_dictionaries()
                writer.write_table(table.slice(0, MAX_GROUP_ROWS),
                                   row_group_size=MAX_GROUP_ROWS)
                rest = table.slice(MAX_GROUP_ROWS)
                pending, count = ([rest] if rest.num_rows else []), rest.num_rows
        if count:
            writer.write_table(pa.concat_tables(pending).unify_dictionaries(),
                               row_group_size=MAX_GROUP_ROWS)
        pieces = [p for group in groups for p in group] + stream
        parts = [[name, bs] for name, bs, _ in pieces]
        metrics = list(dict.fromkeys(name for name, _, _ in pieces if name is not None))
        writer.add_key_value_metadata({
            METRICS_KEY: structured.dumps(metrics),
            EVALUATIONS_KEY: structured.dumps({str(bs): evaluations[bs]
                                               for bs in sorted({bs for _, bs, _ in pieces})}),
            PARTS_KEY: structured.dumps(parts)})
    finally:
        writer.close()


def _group(pieces: Sequence[_Piece]) -> pa.Table:
    """The rows of ``pieces`` (a metric of a study each, in order) as one table with one
    metric dictionary. The trial ids, steps and values are the studies' own arrays, as
    chunks (no copy)."""
    names = sorted({name for name, _, _ in pieces if name is not None})
    code = {name: i for i, name in enumerate(names)}
    indices, mask, sizes, ids, steps, values = [], [], [], [], [], []
    for name, bs, rows in pieces:
        n = rows.num_rows
        if name is None:
            (trial_id, step), value = rows.evaluations(), None
        else:
            trial_id, step, value = rows.metric(name)
        indices.append(np.full(n, code[name] if name is not None else 0, np.int32))
        mask.append(np.full(n, name is None))
        sizes.append(pa.repeat(pa.scalar(bs, pa.int64()), n))
        ids += _chunks(trial_id)
        steps += _chunks(step)
        values += _chunks(value) if value is not None else [pa.nulls(n, pa.float64())]
    index = pa.array(np.concatenate(indices) if indices else np.array([], np.int32),
                     mask=np.concatenate(mask) if mask else None)
    metric = pa.DictionaryArray.from_arrays(index, pa.array(names, pa.string()), safe=False)
    return pa.Table.from_arrays(
        [pa.chunked_array(sizes, pa.int64()), pa.chunked_array(ids, pa.int64()),
         pa.chunked_array(steps, pa.int64()), pa.chunked_array([metric]),
         pa.chunked_array(values, pa.float64())], schema=_WRITTEN)


def _check_steps(step: Column, error: ErrorType) -> None:
    """Refuse steps that are not whole numbers in 0 … 2**63 - 1 (int64 exactly)."""
    if not pa.types.is_integer(step.type):
        raise error(f"steps are {step.type}, not integers: steps are stored exactly as int64 "
                    "(a float would round those above 2**53)")
    if step.null_count:
        raise error("a row has no step")
    for chunk in _chunks(step):  # NumPy's min and max: microseconds per table, no copy
        values = chunk.to_numpy(zero_copy_only=False)
        if not values.size:
            continue
        low, high = int(values.min()), int(values.max())
        if low < 0:
            raise error(f"step {low} is negative; steps count from 0")
        if high > INT64_MAX:
            raise error(f"step {high} is beyond 2**63 - 1 = {INT64_MAX}, the largest step "
                        "the store holds (int64)")


def write_table(table: pa.Table, path: Path) -> None:
    """Write one studies, trials or parameters file (``path``'s folder is made).

    No file keeps min/max statistics of a float column (they leave NaN out, which makes
    DuckDB fold ``isnan()`` to false); a parameters file, sorted by name, is written in row
    groups of :data:`GROUP_ROWS` whose ``name`` statistics let a reader skip the others.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    floats = {f.name for f in table.schema if pa.types.is_floating(f.type)}
    pq.write_table(table, path, **PARQUET_OPTIONS, row_group_size=GROUP_ROWS,
                   write_statistics=[n for n in table.column_names if n not in floats])


# -- metaparameters as rows ----------------------------------------------------------------

def parameter_type(values: Iterable[Any]) -> str:
    """The one type of a workload's values of one metaparameter, for its column in the wide
    per-trial frames: ``bool``, ``int64``, ``float64`` (integers beside floats), ``string``
    (anything else; numbers then shown as JSON text), or ``null`` when no trial gives it a
    value (a column of nulls).

    >>> parameter_type([1, 2]), parameter_type([1, 0.5]), parameter_type([1, "a"])
    ('int64', 'float64', 'string')
    """
    return merged_type(_kind(v) for v in values)


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, str):
        return "string"
    return "json"


_KINDS = {float: "float64", int: "int64", bool: "bool", str: "string", type(None): "null"}
_MISSING = object()


def parameter_rows(trials: Iterable[TrialRecord]) -> tuple[pa.Table, dict[str, str]]:
    """The ``parameters`` rows of ``trials`` (one workload), sorted by (name, batch_size,
    trial_id), every value kept exactly in the column its type uses; and each name's type
    for the wide frames (:func:`parameter_type`).

    A name whose values all have one type is converted in one call; only a name with values
    of several types is read value by value.

    >>> from curvekit.records import StudyKey
    >>> key = StudyKey("my", "mlp", "sgd", 32)
    >>> rows, types = parameter_rows([TrialRecord(key, 0, "COMPLETE", 3,
    ...                               {"lr": 0.1, "warmup": 100, "step": True}, "m")])
    >>> rows.select(["name", "type", "number", "integer"]).to_pylist()[1]
    {'name': 'step', 'type': 'bool', 'number': 1.0, 'integer': 1}
    >>> types
    {'lr': 'float64', 'step': 'bool', 'warmup': 'int64'}
    """
    ordered = sorted(trials, key=lambda t: (t.key.batch_size, t.trial_id))
    sizes = pa.array([t.key.batch_size for t in ordered], pa.int64())
    ids = pa.array([t.trial_id for t in ordered], pa.int64())
    params = [t.parameters for t in ordered]
    names = sorted({n for p in params for n in p})
    parts, types = [], {}
    for name in names:
        values = [p.get(name, _MISSING) for p in params]
        present = [i for i, v in enumerate(values) if v is not _MISSING]
        kept = [values[i] for i in present] if len(present) < len(values) else values
        kinds = {_KINDS.get(type(v), "json") for v in kept}
        types[name] = merged_type(kinds)
        where = pa.array(present, pa.int64())
        parts.append(_name_rows(name, sizes.take(where), ids.take(where), kept, kinds))
    schema = fixed_schema("parameters")
    try:
        return (pa.concat_tables(parts) if parts else schema.empty_table(), types)
    except pa.ArrowInvalid as exc:  # pragma: no cover - parts share the schema
        raise StoreError(f"cannot write the metaparameters: {exc}") from exc


def _name_rows(name: str, sizes: pa.Array, ids: pa.Array, values: list[Any],
               kinds: set[str]) -> pa.Table:
    """The rows of one metaparameter: ``values`` of the trials at ``sizes`` and ``ids``."""
    n = len(values)
    try:
        if len(kinds) == 1 and kinds <= {"float64", "int64", "bool", "null"}:
            (kind,) = kinds
            typed = {"float64": pa.float64(), "int64": pa.int64(), "bool": pa.bool_(),
                     "null": pa.null()}[kind]
            array = pa.array(values, typed)
            integer = (array.cast(pa.int64()) if kind in ("int64", "bool")
                       else pa.nulls(n, pa.int64()))
            number = (pc.cast(array, pa.float64(), safe=False) if kind != "null"
                      else pa.nulls(n, pa.float64()))
            text = pa.nulls(n, pa.string())
            type_ = pa.repeat(pa.scalar(kind), n)
        elif kinds == {"string"}:
            integer, number = pa.nulls(n, pa.int64()), pa.nulls(n, pa.float64())
            text, type_ = pa.array(values, pa.string()), pa.repeat(pa.scalar("string"), n)
        else:
            each = [_kind(v) for v in values]
            type_ = pa.array(each, pa.string())
            number = pa.array([float(v) if k in ("bool", "int64", "float64") else None
                               for v, k in zip(values, each, strict=True)], pa.float64())
            integer = pa.array([int(v) if k in ("bool", "int64") else None
                                for v, k in zip(values, each, strict=True)], pa.int64())
            text = pa.array([v if k == "string" else _json(v) if k == "json" else None
                             for v, k in zip(values, each, strict=True)], pa.string())
    except (OverflowError, pa.ArrowInvalid) as exc:  # an int beyond int64
        raise StoreError(f"the metaparameter {name!r} does not fit the store's 64-bit "
                         f"integers: {exc}; store it as a float or a string") from exc
    return pa.Table.from_arrays(
        [sizes, ids, pa.repeat(pa.scalar(name), n), type_, number, integer, text],
        schema=fixed_schema("parameters"))


# -- the builder ---------------------------------------------------------------------------

class StoreBuilder:
    """Accumulate one store's content and write it into ``root`` (a staging folder).

    The one door every way into the store goes through (the conversion of the release, and
    :func:`~curvekit.store.update.add_workload` for ``curvekit add`` and ``curvekit run``), so
    it applies the store's rules to whatever it is given, before anything is written:
    workload names (:meth:`curvekit.records.Workload.parse`), metric and metaparameter names
    (:class:`curvekit.names.ColumnNames`: the one name rule; names are data, none clashes),
    steps, trial ids and budgets (whole numbers within int64, steps never negative),
    statuses, flags and metaparameter values (:mod:`curvekit.values`). A refusal raises
    ``error`` (a :class:`StoreError` unless the caller names its own, e.g. an
    ``ArchiveError`` for the release) naming the file.
    """

    def __init__(self, root: Path, *, memory_limit: int = 512 << 20, threads: int = 2,
                 error: ErrorType = StoreError) -> None:
        self.root = root
        self.studies: dict[StudyKey, StudyRecord] = {}
        self.trials: dict[tuple[StudyKey, int], TrialRecord] = {}
        self.metrics: set[str] = set()
        """Metric names seen in the input, with values or not (only those with a value are
        written and recorded)."""
        self._pending: dict[StudyKey, list[Evaluations]] = {}
        self._pending_bytes = 0
        self._spills: dict[StudyKey, list[Path]] = {}
        self._spilled = False
        self._memory_limit = memory_limit
        self._threads = threads
        self._error = error
        self._names = ColumnNames(error, metric_fix="rename the metric where it is given",
                                  parameter_fix="rename the metaparameter where it is given")
        self._workloads: set[str] = set()
        self.write = 0
        """The number of this write among the workload's (its files' ``<w>``)."""
        self.measured: set[StudyKey] | None = None
        """The studies this write writes (None: all): their studies, trials, parameters and
        measurements rows; the others' files are carried from an earlier write by the caller
        (:func:`~curvekit.store.update.add_workload`), which then merges their counts and
        index. The workload's metaparameter types are still those of every trial given."""

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
        """Add metric names that may hold no value (a header without rows)."""
        for name in names:
            self.metrics.add(self._names.metric(name, where))

    def add_measurements(self, key: StudyKey, table: pa.Table) -> None:
        """Add rows of one study: ``trial_id``, ``step``, then one column per metric."""
        where = f"{key.path()}/<trial>/measurements"
        self._check_key(key, where)
        _check_steps(table.column(1), lambda m: self._fail(where, m))
        self.add_metrics(table.column_names[2:], where)
        self._add(key, Evaluations.from_table(table))

    def add_evaluations(self, key: StudyKey, rows: Evaluations, where: str = "") -> None:
        """Add evaluations of one study (``where``: the file they came from)."""
        where = where or f"{key.path()}/<trial>/measurements"
        self._check_key(key, where)
        _check_steps(rows.step, lambda m: self._fail(where, m))
        self.add_metrics(rows.names, where)
        self._add(key, rows)

    def _add(self, key: StudyKey, rows: Evaluations) -> None:
        self._pending.setdefault(key, []).append(rows)
        self._pending_bytes += rows.nbytes
        if self._pending_bytes > self._memory_limit:
            self._spill()

    def _spill(self) -> None:
        spill_dir = self.root / "_spill"
        spill_dir.mkdir(exist_ok=True)
        for key, parts in self._pending.items():
            paths = self._spills.setdefault(key, [])
            for part in parts:
                path = spill_dir / f"{uuid.uuid4().hex}.arrow"
                table = part.to_ipc()
                with ipc.new_file(path, table.schema) as writer:
                    writer.write_table(table)
                paths.append(path)
        self._pending.clear()
        self._pending_bytes = 0

    def _study_rows(self, key: StudyKey) -> Evaluations | None:
        """The study's evaluations, joined and sorted; its parts are let go (``finish``
        reads each study once), so that a sorted copy does not sit beside them."""
        parts = [Evaluations.from_ipc(ipc.open_file(p).read_all())
                 for p in self._spills.pop(key, [])]
        parts += self._pending.pop(key, [])
        return _join(parts) if parts else None

    def finish(self, metadata: Mapping[str, Any],
               trial_rows: dict[tuple[StudyKey, int], int]) -> StoreMetadata:
        """Write every table and ``_store.json`` into the staging folder.

        ``trial_rows`` gives each trial's number of evaluations. Returns the store metadata:
        ``metadata`` plus the counts, the workloads and each workload's names, and the
        format the files have (the current one, whatever ``metadata`` says).
        """
        keys = sorted(set(self.studies) | {k for k, _ in self.trials})
        self._spilled = bool(self._spills)
        workloads = self._by_workload(keys)
        measured = self._by_workload(k for k in keys if self._writes(k))
        with ThreadPoolExecutor(self._threads) as pool:
            # one workload at a time, its studies joined (and spilled again, sorted) side by
            # side, then its files written side by side: the threads share the work of one
            # workload (their sizes differ a lot), and memory holds one workload's sorted
            # studies at most (a study's parts may share buffers with other studies')
            written = {}
            for w, ks in measured.items():
                studies = [(k.batch_size, rows) for k, rows in
                           zip(ks, pool.map(self._prepared, ks), strict=True)]
                written[w] = write_workload_measurements(
                    studies, self.root / partition_dir("measurements", *w), self.write,
                    pool=pool)
                del studies
        shutil.rmtree(self.root / "_spill", ignore_errors=True)
        rows = sum(sum(w.evaluations.values()) for w in written.values())
        parameters = self._write_trials(trial_rows)
        self._write_studies()
        none = WrittenMeasurements({}, {}, [])
        names: dict[str, dict[str, Any]] = {
            "/".join(w): {"metrics": written.get(w, none).metrics,
                          "parameters": parameters.get("/".join(w), {}),
                          FILES_KEY: written.get(w, none).files}
            for w in sorted(workloads)}
        meta = StoreMetadata({
            **metadata,
            "store_format": STORE_FORMAT,
            "counts": {"workloads": len(names), "studies": len(self.studies),
                       "trials": len(self.trials), "measurements": rows},
            "workloads": sorted(names),
            NAMES_KEY: dict(sorted(names.items())),
        })
        meta.save(self.root)
        return meta

    def _prepared(self, key: StudyKey) -> StudyRows:
        """One study's evaluations, joined and sorted, for its workload's files: in memory,
        or when the builder spilled, written back to the spill sorted (read then one metric
        at a time), so that only the studies being joined are in memory."""
        rows = self._study_rows(key) or Evaluations(pa.array([], pa.int64()),
                                                    pa.array([], pa.int64()), (), ())
        if not self._spilled:
            return rows
        return SpilledStudy.write(rows, self.root / "_spill" / f"{uuid.uuid4().hex}.arrow")

    def _by_workload(self, keys: Iterable[StudyKey]) -> dict[tuple[str, str, str], list[StudyKey]]:
        groups: dict[tuple[str, str, str], list[StudyKey]] = {}
        for key in sorted(keys):
            groups.setdefault((key.base_dir, key.model, key.optimizer), []).append(key)
        return groups

    def _write_trials(self, counts: dict[tuple[StudyKey, int], int]
                      ) -> dict[str, dict[str, str]]:
        """Write the trials and parameters files; return each workload's metaparameter
        names with their wide-frame types."""
        schema = fixed_schema("trials")
        by_study: dict[StudyKey, list[TrialRecord]] = {}
        for (key, _), trial in sorted(self.trials.items()):
            by_study.setdefault(key, []).append(trial)
        types: dict[str, dict[str, str]] = {}
        name = table_file(self.write)
        for workload, keys in self._by_workload(by_study).items():
            every = [t for k in keys for t in by_study[k]]
            # the types are the workload's, every write's trials; the rows this write's
            rows, types["/".join(workload)] = parameter_rows(every)
            trials = [t for t in every if self._writes(t.key)]
            if not trials:
                continue
            if len(trials) < len(every):
                rows = parameter_rows(trials)[0]
            data: dict[str, list[Any]] = {
                "batch_size": [t.key.batch_size for t in trials],
                "trial_id": [t.trial_id for t in trials],
                "status": [t.status for t in trials],
                "steps": [t.steps for t in trials],
                "n_measurements": [counts.get((t.key, t.trial_id), 0) for t in trials],
            }
            write_table(pa.table(data, schema=schema),
                        self.root / partition_dir("trials", *workload) / name)
            write_table(rows, self.root / partition_dir("parameters", *workload) / name)
        return types

    def _writes(self, key: StudyKey) -> bool:
        """Whether this write writes the study's rows (see :attr:`measured`)."""
        return self.measured is None or key in self.measured

    def _write_studies(self) -> None:
        schema = fixed_schema("studies")
        for workload, keys in self._by_workload(k for k in self.studies
                                                if self._writes(k)).items():
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
                        self.root / partition_dir("studies", *workload)
                        / table_file(self.write))
