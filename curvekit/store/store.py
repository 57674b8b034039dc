"""A store on disk, opened for reading: tables as polars frames, SQL through DuckDB.

The store's tables have the fixed columns of ``data_manifest/store_schema.json``: metrics
and metaparameters are rows. :meth:`Store.trials` and :meth:`Store.measurements` return the
wide per-trial frames notebooks want (one column per metaparameter or metric), built by
polars pivots (:mod:`curvekit.store.wide`): a name is only ever a value in SQL.

>>> import tempfile, curvekit
>>> home = tempfile.mkdtemp()
>>> _ = curvekit.demo(home)  # the shipped demo data set
>>> store = Store.open(home)
>>> store.query("select count(*) from trials where status = ?", ["COMPLETE"]).item() > 0
True
>>> "demo/digits/fc_128_128_128/sgd" in store.workloads()
True
>>> store.sql("select count(*) as n from studies").item() > 0
True
"""

from __future__ import annotations

import difflib
import os
import re
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from curvekit.errors import QueryError, StoreError
from curvekit.home import parse_json, resolve_home
from curvekit.records import Workload
from curvekit.release.manifest import Manifest
from curvekit.store.layout import (
    EVALUATIONS_KEY,
    MANIFEST_FILE,
    METADATA_FILE,
    METRICS_KEY,
    STORE_FORMAT,
    TABLES,
    fixed_schema,
    partition_columns,
    store_link,
    workload_dir,
)
from curvekit.store.metadata import FILES_KEY, StoreMetadata
from curvekit.store.snapshots import Lease, acquire, repair_hint
from curvekit.store.sql import mentions
from curvekit.store.wide import frame_names, parameters_frame, pivot_measurements
from curvekit.values import merged_type

__all__ = ["MAX_BRANCHES", "MEASUREMENTS_COLUMNS", "Store", "evaluations", "footer_error",
           "footer_record", "measurements_view", "metrics_with_values", "open_store"]

# What DuckDB's Parquet reader says about a damaged file (its errors are not all typed).
_DAMAGED = re.compile(r"corrupt|thrift|tprotocol|magic bytes|payload value|decompress"
                      r"|parquet file|don't know what type", re.IGNORECASE)
_QUERY_ERRORS = (duckdb.BinderException, duckdb.ParserException, duckdb.CatalogException)
_TRIAL_COLUMNS = [n for n in fixed_schema("trials").names]
_EVALUATION_COLUMNS = ["batch_size", "trial_id", "step"]
MEASUREMENTS_COLUMNS = ("trial_id", "step", "metric", "value", "base_dir", "batch_size",
                        "model", "optimizer")
"""The columns of the ``measurements`` view, in their order (the order of the store of
format 2, whose ``batch_size`` was a partition: a query's answer did not change)."""
MAX_BRANCHES = 64
"""The most metrics that get a scan of their own in a ``measurements`` view (see
:func:`measurements_view`)."""
_VIEW_TYPES = {"trial_id": "bigint", "step": "bigint", "metric": "varchar", "value": "double",
               "base_dir": "varchar", "batch_size": "bigint", "model": "varchar",
               "optimizer": "varchar"}
_LONG_ROWS = {"batch_size": pl.Int64, "trial_id": pl.Int64, "step": pl.Int64,
              "metric": pl.String, "value": pl.Float64}


@dataclass(frozen=True)
class Store:
    """A converted store on disk: its folder and its metadata.

    Table methods return polars DataFrames (``.to_pandas()`` gives pandas);
    :meth:`sql` runs DuckDB over the views ``studies``, ``trials``, ``parameters`` and
    ``measurements``.
    """

    path: Path
    metadata: StoreMetadata = field(repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    _local: threading.local = field(default_factory=threading.local, repr=False,
                                    compare=False)
    # A published store folder never changes (a new conversion publishes a new folder), so
    # per-workload facts read from footers and trials are computed once per opened store.
    _facts: dict[tuple[str, str], list[str]] = field(default_factory=dict, repr=False,
                                                      compare=False)
    _sources: dict[tuple[str, str], str] = field(default_factory=dict, repr=False,
                                                 compare=False)
    _tables: dict[tuple[object, ...], pl.DataFrame] = field(default_factory=dict,
                                                            repr=False, compare=False)
    _types: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict, repr=False,
                                                          compare=False)

    _lease: Lease = field(default_factory=lambda: Lease(None), repr=False, compare=False)

    @classmethod
    def open(cls, home: str | os.PathLike[str] | None = None) -> Store:
        """Open the current store of a curvekit home (or a store folder itself).

        The store holds a lease on the snapshot it opened: a ``fetch --force``, ``add`` or
        ``remove`` that swaps in a new snapshot meanwhile leaves this one readable until
        :meth:`close` (or the end of the process). Use it as a context manager to close it.
        """
        base = resolve_home(home)
        # A writer may swap the link and retire the snapshot between our resolving the link
        # and taking the lease: then the lease says so, and we look again.
        for _ in range(100):
            for candidate in (store_link(base), base):
                if (candidate / METADATA_FILE).is_file():
                    break
            else:
                raise StoreError(
                    f"no curvekit store at {base}; run `curvekit fetch` (or `curvekit fetch "
                    "--archive PATH` with an archive you already have) to create it, or "
                    "`curvekit demo` for a small data set to try, offline")
            path = candidate.resolve()
            lease = acquire(path)
            if lease is None:
                continue
            try:
                metadata = StoreMetadata.read(path)
            except StoreError:
                lease.release()
                raise
            if metadata is None:  # retired between the check and the lease: look again
                lease.release()
                continue
            if not metadata.current_format:
                lease.release()
                raise StoreError(_old_format(candidate, metadata.store_format))
            return cls(path, metadata, _lease=lease)
        raise StoreError(f"the store at {base} was replaced 100 times while it was being "
                         "opened; try again when no other curvekit process is writing it")

    def close(self) -> None:
        """Release the store's lease and its DuckDB connection; idempotent.

        A store that is never closed releases its lease when it is garbage-collected or the
        process ends.
        """
        self._lease.release()
        con = self.__dict__.get("_con")
        if con is not None:
            con.close()

    def _check_open(self) -> None:
        if self._lease.closed:
            raise StoreError(f"the store at {self.path} was closed; open it again with "
                             "curvekit.open()")

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def reading(self, what: str | Callable[[], str | None] | None = None, *,
                fixed_sql: bool = False) -> Iterator[None]:
        """Turn a failure to read the store's files into a :class:`StoreError`.

        The message names the file when the reader does (else ``what``, which may be a
        function called only on failure, or the store's folder) and says how to repair it.
        Errors of a query itself pass through, unless
        ``fixed_sql`` says the block runs only curvekit's own queries: then every DuckDB
        error there comes from the files.
        """
        try:
            yield
        except (duckdb.Error, pl.exceptions.ComputeError, pa.ArrowException, OSError,
                ValueError) as exc:
            error = self._unreadable(exc, what() if callable(what) else what, fixed_sql)
            if error is None:
                raise
            raise error from exc

    def _unreadable(self, exc: BaseException, what: str | None,
                    fixed_sql: bool = False) -> StoreError | None:
        text = str(exc)
        root = str(self.path)
        # DuckDB quotes the query after the first line: only the first line is the error
        first = text.strip().splitlines()[0] if text.strip() else ""
        if not fixed_sql and (isinstance(exc, _QUERY_ERRORS) or (
                isinstance(exc, duckdb.Error) and not (root in first or _DAMAGED.search(first)))):
            return None  # an error of the query itself, not of a file
        if (isinstance(exc, ValueError) and not isinstance(exc, pa.ArrowException)
                and what is None):
            return None  # only a footer read (which names its file) turns these into damage
        found = re.search(re.escape(root) + r"/[^'\"\s]+", text)
        name = found.group(0) if found else (what or f"a file under {root}")
        reason = first.rstrip(".") or type(exc).__name__
        hint = repair_hint(self.metadata, name)
        return StoreError(f"cannot read {name}: {reason}. The store is damaged or incomplete: "
                          f"`curvekit verify` lists every damaged file; to repair, {hint}")

    # -- files ---------------------------------------------------------------------------

    def glob(self, table: str) -> str:
        """The Parquet glob of a table, for DuckDB or polars."""
        if table not in TABLES:
            raise StoreError(f"unknown table {table!r}; tables are {', '.join(TABLES)}")
        return str(self.path / table / "**" / "*.parquet")

    def manifest(self) -> Manifest | None:
        """The manifest the store was built from, if it was built from one."""
        path = self.path / MANIFEST_FILE
        return Manifest.from_file(path) if path.is_file() else None

    def measurement_files(self) -> list[tuple[tuple[str, str, str], Path]]:
        """Every measurements file with its workload's (base_dir, model, optimizer)."""
        out = []
        for path in sorted((self.path / "measurements").glob("*/*/*/*.parquet")):
            parts = dict(p.split("=", 1) for p in path.relative_to(self.path).parts[1:-1])
            values = [unquote(parts[n]) for n in partition_columns("measurements")]
            out.append(((values[0], values[1], values[2]), path))
        return out

    def measurements_index(self, workload: str) -> dict[str, list[str]]:
        """The workload's measurements files (names in its folder), each with the metrics
        it holds rows of (an empty list: rows without a metric), as ``_store.json``
        records them: no footer is read."""
        index = (self.metadata.workload_names(workload) or {}).get(FILES_KEY)
        if index is None:
            raise StoreError(f"{self.path / METADATA_FILE} records no measurements files of "
                             f"{workload!r}; run `curvekit verify`, or `curvekit fetch --force`"
                             " to rebuild the store")
        return {str(f): list(m) for f, m in index.items()}

    # -- DuckDB --------------------------------------------------------------------------

    @cached_property
    def _con(self) -> duckdb.DuckDBPyConnection:
        return duckdb.connect()

    @cached_property
    def _views(self) -> duckdb.DuckDBPyConnection:
        # Binding a view lists every file of its table: done once, and only for SQL that
        # names the views (the measurements read one workload's folder directly). Every
        # file of a table has the table's fixed columns. Paths reach DuckDB through its
        # relation API, as values: a quote in the home path cannot change the SQL.
        with self._lock:
            for table in TABLES:
                if table == "measurements":
                    self._measurements_view(self.workloads()).create_view(table)
                    continue
                files = self._files(table, self.path / table, "**/*.parquet")
                self._con.read_parquet(files, hive_partitioning=True).create_view(table)
        return self._con

    def _measurements_view(self, workloads: Sequence[str]) -> duckdb.DuckDBPyRelation:
        """The measurements of ``workloads`` as one relation (see :func:`measurements_view`),
        from the files the index records."""
        holds: dict[str, list[str]] = {}
        for workload in workloads:
            folder = self.path / workload_dir("measurements", *self.split_workload(workload))
            for name, metrics in self.measurements_index(workload).items():
                holds[str(folder / name)] = metrics
        return measurements_view(self._con, holds)

    def _files(self, table: str, folder: Path, pattern: str) -> list[str]:
        """The Parquet files of ``table`` under ``folder``, listed here rather than by a
        DuckDB glob, which would read ``*``, ``?`` and ``[`` of the home path as patterns."""
        files = sorted(str(p) for p in folder.glob(pattern))
        if not files:
            raise StoreError(f"the store at {self.path} has no {table} files in {folder}; "
                             "run `curvekit verify`, or `curvekit fetch --force` to rebuild it")
        return files

    def source(self, table: str, workload: str) -> str:
        """SQL reading one workload's files of ``table`` (all partition columns included).

        Naming the workload's folder spares DuckDB from listing every file of the store,
        which costs more than the query itself for small workloads. The result is the name
        of a view over that folder's files, made once per workload and table; for the
        measurements, the union of one scan per metric (:func:`measurements_view`), so that
        ``where metric = ?`` reads that metric's files alone.
        """
        base_dir, model, optimizer = self.split_workload(workload)
        if table not in TABLES:
            raise StoreError(f"unknown table {table!r}; tables are {', '.join(TABLES)}")
        with self._lock:
            view = self._sources.get((table, workload))
            if view is None:
                folder = self.path / workload_dir(table, base_dir, model, optimizer)
                # The view's name is curvekit's own counter, never the workload's name.
                view = f"_{table}_{len(self._sources)}"
                with self.reading(str(folder), fixed_sql=True):
                    if table == "measurements":
                        relation = self._measurements_view([workload])
                    else:
                        relation = self._con.read_parquet(
                            self._files(table, folder, "*.parquet"), hive_partitioning=True)
                    relation.create_view(view)
                self._sources[(table, workload)] = view
        return view

    @contextmanager
    def one_thread_per_query(self) -> Iterator[None]:
        """Run each query on its calling thread alone while the block runs.

        For callers that run several queries at once from threads of their own: DuckDB's
        threads would only compete with theirs (nine queries of Figure 8 on two threads take
        0.50 s this way, 0.68 s with DuckDB's default of a thread per core).
        """
        with self._lock:
            (previous,), = self._con.sql("select current_setting('threads')").fetchall()
            self._con.execute("set threads = 1")
        try:
            yield
        finally:
            with self._lock:
                self._con.execute(f"set threads = {int(previous)}")

    def connect(self) -> duckdb.DuckDBPyConnection:
        """A new DuckDB cursor with views ``studies``, ``trials``, ``parameters`` and
        ``measurements``."""
        self._check_open()
        with self.reading("the store's tables"):
            return self._views.cursor()

    def _cursor(self) -> duckdb.DuckDBPyConnection:
        """This thread's cursor: threads query in parallel, each on its own cursor."""
        self._check_open()
        cursor: duckdb.DuckDBPyConnection | None = getattr(self._local, "cursor", None)
        if cursor is None:
            with self._lock:
                cursor = self._local.cursor = self._con.cursor()
        return cursor

    def query(self, sql: str, params: Sequence[object] | None = None) -> pl.DataFrame:
        """Run parameterised SQL over the views and return a polars DataFrame.

        The views ``studies``, ``trials``, ``parameters`` and ``measurements`` are there
        whenever ``sql`` names one of them. Pass values as ``params`` (``?`` in ``sql``),
        never inside it: a metric is ``where metric = ?``.
        """
        if mentions(sql, TABLES):
            with self.reading("the store's tables"):
                self._views  # noqa: B018 - the views are made once, when SQL first names them
        def read() -> str | None:
            # DuckDB does not always name the file it failed on: name the folders the query
            # reads (worked out only when a query fails)
            return ", ".join(str(self.path / workload_dir(table, *self.split_workload(name)))
                             for (table, name), view in list(self._sources.items())
                             if re.search(rf"\b{view}\b", sql)) or None

        try:
            with self.reading(read):
                frame: pl.DataFrame = self._cursor().sql(sql, params=list(params or [])).pl()
        except duckdb.Error as exc:
            raise QueryError(f"{exc}\nin the query:\n{sql}") from exc
        return frame

    def sql(self, query: str) -> pl.DataFrame:
        """Run SQL over the views ``studies``, ``trials``, ``parameters`` and
        ``measurements``.

        Example, with ``store = curvekit.open()`` (the module's example runs one)::

            store.sql("select distinct status from trials order by 1")
        """
        return self.query(query)

    # -- workloads -----------------------------------------------------------------------

    @cached_property
    def _workloads(self) -> tuple[str, ...]:
        names = self.metadata.get("workloads")
        if names is None:
            names = self.sql("select distinct base_dir || '/' || model || '/' || optimizer "
                             "from studies order by 1").to_series().to_list()
        return tuple(names)

    def workloads(self) -> list[str]:
        """Workload names, ``base_dir/model/optimizer``, sorted."""
        return list(self._workloads)

    def split_workload(self, workload: str) -> tuple[str, str, str]:
        """(base_dir, model, optimizer) of a known workload; unknown names get suggestions."""
        if workload not in self._workloads:
            close = difflib.get_close_matches(workload, self._workloads, n=5, cutoff=0.5)
            hint = (f"did you mean {', '.join(close)}?" if close else
                    "run `curvekit info` for the list")
            raise QueryError(f"unknown workload {workload!r}; {hint}")
        return Workload.known(workload)

    def metrics(self, workload: str) -> list[str]:
        """The names of the metrics with at least one value in ``workload``, sorted (from
        ``_store.json``, or the measurements files' footers)."""
        if ("metrics", workload) not in self._facts:
            recorded = self.metadata.workload_names(workload)
            self._facts[("metrics", workload)] = (
                list(recorded["metrics"]) if recorded is not None else self._metrics(workload))
        return list(self._facts[("metrics", workload)])

    def _metrics(self, workload: str) -> list[str]:
        base_dir, model, optimizer = self.split_workload(workload)
        root = self.path / workload_dir("measurements", base_dir, model, optimizer)
        seen: set[str] = set()
        for path in root.glob("*.parquet"):
            with self.reading(str(path)):
                seen |= metrics_with_values(pq.ParquetFile(path).metadata, path)
        return sorted(seen)

    def check_metric(self, workload: str, metric: str) -> None:
        """Raise a QueryError naming the workload's metrics if ``metric`` is not one."""
        have = self.metrics(workload)
        if metric not in have:
            raise QueryError(f"workload {workload!r} has no metric {metric!r}; its metrics are "
                             f"{', '.join(have) or '(none)'}")

    def parameter_types(self, workload: str) -> dict[str, str]:
        """The workload's metaparameter names, sorted, each with the type of its column in
        the wide frames (``bool``, ``int64``, ``float64``, ``string``, or ``null`` for one
        that no trial gives a value), decided by the workload's own values (see
        :func:`curvekit.store.writer.parameter_type`)."""
        key = ("parameters", workload)
        if key not in self._types:
            recorded = self.metadata.workload_names(workload)
            if recorded is not None:
                self._types[key] = dict(recorded["parameters"])
            else:
                kinds: dict[str, set[str]] = {}
                for name, kind in self._parameter_rows(workload).select("name", "type") \
                        .iter_rows():
                    kinds.setdefault(name, set()).add(kind)
                self._types[key] = {n: merged_type(kinds[n]) for n in sorted(kinds)}
        return dict(self._types[key])

    def parameter_columns(self, workload: str) -> list[str]:
        """The names of the metaparameters with at least one value in ``workload``, sorted:
        the columns the answers of ``best`` and ``steps_to_result`` show."""
        return [n for n, t in self.parameter_types(workload).items() if t != "null"]

    def _parameter_rows(self, workload: str) -> pl.DataFrame:
        """The workload's parameters rows (read from its file: no SQL, names are data)."""
        base_dir, model, optimizer = self.split_workload(workload)
        folder = self.path / workload_dir("parameters", base_dir, model, optimizer)
        with self._lock:
            cached = self._tables.get(("parameters", workload))
            if cached is None:
                files = self._files("parameters", folder, "*.parquet")
                with self.reading(str(folder)):
                    cached = pl.read_parquet(files, hive_partitioning=False, glob=False)
                self._tables[("parameters", workload)] = cached
        return cached

    def trial_parameters(self, workload: str, batch_size: int, trial_id: int
                         ) -> dict[str, object]:
        """One trial's metaparameters by name, each value as it was given (a list or an
        object as its JSON text)."""
        rows = self._parameter_rows(workload).filter(
            (pl.col("batch_size") == batch_size) & (pl.col("trial_id") == trial_id))
        out: dict[str, object] = {}
        for name, kind, number, integer, text in rows.select(
                "name", "type", "number", "integer", "text").iter_rows():
            out[name] = (None if kind == "null" else bool(integer) if kind == "bool"
                         else integer if kind == "int64" else number if kind == "float64"
                         else text)
        return out

    # -- tables --------------------------------------------------------------------------

    def _table(self, table: str, workload: str, extra: str = "",
               params: Sequence[object] = ()) -> pl.DataFrame:
        return self.query(f"select * exclude (base_dir, model, optimizer) from "
                          f"{self.source(table, workload)} where true{extra} order by all",
                          list(params))

    def studies(self, workload: str) -> pl.DataFrame:
        """The studies (batch sizes) of a workload."""
        return self._table("studies", workload)

    def parameters(self, workload: str, *, names: Sequence[str] | None = None,
                   taken: Sequence[str] = ("batch_size", "trial_id")) -> pl.DataFrame:
        """The workload's metaparameters as one row per trial: ``batch_size, trial_id``,
        then one column per metaparameter (``names``, default all), typed as
        :meth:`parameter_types` says. A name whose column the frame (with ``taken``)
        already has is labelled by :func:`curvekit.store.wide.frame_names`."""
        key = ("parameters", workload, tuple(names) if names is not None else None,
               tuple(taken))
        with self._lock:
            cached = self._tables.get(key)
        if cached is None:
            types = self.parameter_types(workload)
            if names is not None:
                types = {n: types[n] for n in names}
            columns = frame_names(taken, types, "metaparameter")
            cached = parameters_frame(self._parameter_rows(workload), types, columns)
            with self._lock:
                self._tables[key] = cached
        return cached

    def trials(self, workload: str, *, batch_size: int | None = None,
               statuses: Sequence[str] | None = None) -> pl.DataFrame:
        """The trials of a workload, optionally of one batch size and some statuses: the
        trials table's columns, then one column per metaparameter of the workload."""
        extra, params = _filters(batch_size, statuses)
        trials = self._table("trials", workload, extra, params)
        wide = self.parameters(workload, taken=_TRIAL_COLUMNS)
        return trials.join(wide, on=["batch_size", "trial_id"], how="left",
                           coalesce=True, maintain_order="left")

    def measurements(self, workload: str, *, batch_size: int | None = None,
                     metrics: Sequence[str] | None = None,
                     lazy: bool = False) -> pl.DataFrame | pl.LazyFrame:
        """The evaluation rows of a workload: ``batch_size, trial_id, step``, then one
        column per metric it reports (``metrics``, default all; a pivot of the long
        measurements table). A metric named like one of the first three columns is
        labelled by :func:`curvekit.store.wide.frame_names` (``step (metric)``).

        With ``lazy=True`` a polars LazyFrame over the workload's files is returned, so
        filters on the batch size and the trials are pushed into the Parquet scan.
        """
        base_dir, model, optimizer = self.split_workload(workload)
        folder = self.path / workload_dir("measurements", base_dir, model, optimizer)
        if batch_size is not None:
            have = self._batch_sizes(workload)
            if int(batch_size) not in have:
                raise QueryError(f"{workload} has no measurements at batch size {batch_size}; "
                                 f"its batch sizes are {', '.join(map(str, have)) or '(none)'}")
        known = self.metrics(workload)
        chosen = known if metrics is None else list(metrics)
        for metric in chosen:
            self.check_metric(workload, metric)
        wanted = set(chosen)
        # the files holding a chosen metric, and those of rows without a metric
        files = [str(folder / name) for name, held in self.measurements_index(workload).items()
                 if not held or wanted.intersection(held)]
        columns = frame_names(_EVALUATION_COLUMNS, chosen, "metric")
        # A list of files, not a glob: '*', '?' and '[' in the home path are plain characters.
        rows = (pl.scan_parquet(files, hive_partitioning=False, glob=False).select(
                    "batch_size", "trial_id", "step", "metric", "value") if files
                else pl.LazyFrame(schema=_LONG_ROWS))
        if batch_size is not None:
            rows = rows.filter(pl.col("batch_size") == int(batch_size))
        if chosen != known:
            rows = rows.filter(pl.col("metric").is_in(chosen) | pl.col("metric").is_null())
        frame = pivot_measurements(rows, chosen, columns)
        if lazy:
            return frame
        with self.reading(str(folder)):
            return frame.collect()

    def _batch_sizes(self, workload: str) -> list[int]:
        """The workload's batch sizes, from its studies."""
        return sorted(int(b) for b in self.studies(workload)["batch_size"].to_list())


def measurements_view(con: duckdb.DuckDBPyConnection,
                      holds: Mapping[str, Sequence[str]]) -> duckdb.DuckDBPyRelation:
    """The measurements files ``holds`` (path: the metrics it holds rows of) as one relation
    with the columns :data:`MEASUREMENTS_COLUMNS`, in that order.

    The union of one scan per metric over the files that hold that metric alone, its name
    a constant (names are values: :class:`duckdb.ConstantExpression`, never SQL text), and
    one scan of every other file (shared by small metrics, or rows without a metric) with
    its ``metric`` column as stored. A query ``where metric = ?`` then reads only that
    metric's own files and the shared ones: DuckDB drops the other branches when it plans
    the query, and the filter in the kept branch. At most :data:`MAX_BRANCHES` metrics get
    a branch (those with the most files, then by name): the files of the others join the
    scan of shared files, so a store of ten thousand names plans as fast as one of a few.
    A store without measurements files gives an empty relation of those columns.
    """
    alone: dict[str, list[str]] = {}
    rest: list[str] = []
    for path, metrics in sorted(holds.items()):
        if len(metrics) == 1:
            alone.setdefault(metrics[0], []).append(path)
        else:
            rest.append(path)
    ranked = sorted(alone, key=lambda m: (-len(alone[m]), m))
    for name in ranked[MAX_BRANCHES:]:
        rest += alone.pop(name)
    column = duckdb.ColumnExpression
    scans = []
    for name, paths in sorted(alone.items()):
        scan = con.read_parquet(paths, hive_partitioning=True)
        scans.append(scan.select(*(duckdb.ConstantExpression(name).alias("metric")
                                   if c == "metric" else column(c)
                                   for c in MEASUREMENTS_COLUMNS)))
    if rest:
        scan = con.read_parquet(sorted(rest), hive_partitioning=True)
        scans.append(scan.select(*(column(c) for c in MEASUREMENTS_COLUMNS)))
    if not scans:
        return con.sql("select " + ", ".join(
            f"null::{kind} as {name}" for name, kind in _VIEW_TYPES.items()) + " limit 0")
    union = scans[0]
    for scan in scans[1:]:
        union = union.union(scan)
    return union


def _old_format(path: Path, found: object) -> str:
    """The message for a store whose format this curvekit does not read."""
    if found in (1, 2):
        what = ("every metric and metaparameter a column" if found == 1
                else "a measurements file per study")
        return (f"{path} has store format {found} ({what}); this curvekit reads format "
                f"{STORE_FORMAT} (names as rows, a workload's measurements in files of whole "
                "metrics): run `curvekit upgrade` to rewrite it, keeping every row and name "
                "(any `curvekit add`, `remove` or `fetch` upgrades it too)")
    return (f"{path} has store format {found!r}, this curvekit reads format {STORE_FORMAT}; "
            "run `curvekit fetch --force` to rebuild it")


def metrics_with_values(meta: pq.FileMetaData, path: Path | None = None) -> set[str]:
    """The metrics a measurements file holds rows of, as its footer records them.

    A footer whose list of metrics is not a JSON list of names (or nests too deep) is a
    :class:`StoreError` naming the file ``path``.
    """
    names = footer_record(meta, METRICS_KEY, path)
    if names is None:
        return set()
    if not (isinstance(names, list) and all(isinstance(n, str) for n in names)):
        raise footer_error(METRICS_KEY, path,
                           f"{type(names).__name__}, not a list of metric names")
    return set(names)


def footer_error(key: str, path: Path | None, problem: str) -> StoreError:
    """The error for a measurements file (``path``) whose footer's ``key`` record is
    ``problem``: missing, not JSON, or not of the record's shape."""
    return StoreError(f"cannot read {path or 'a measurements file'}: its footer's {key} is "
                      f"{problem}; `curvekit verify` lists every damaged file")


def footer_record(meta: pq.FileMetaData, key: str, path: Path | None = None) -> Any:
    """The JSON value a measurements file's footer records under ``key`` (None when it
    records none); a record that is not JSON, or nests too deep, is a :class:`StoreError`
    naming the file ``path``."""
    recorded = (meta.metadata or {}).get(key.encode())
    if recorded is None:
        return None
    return parse_json(recorded.decode("utf-8", "replace"),
                      lambda problem: footer_error(key, path, f"damaged ({problem})"))


def evaluations(meta: pq.FileMetaData, path: Path | None = None) -> dict[int, int]:
    """The evaluations of each study a measurements file holds rows of, by batch size, as
    its footer records them (a footer without the record, or whose record is not an object
    of whole numbers, is a :class:`StoreError` naming the file ``path``)."""
    counts = footer_record(meta, EVALUATIONS_KEY, path)
    if counts is None:
        raise footer_error(EVALUATIONS_KEY, path, "missing")
    if not (isinstance(counts, dict) and all(
            k.isdecimal() and isinstance(v, int) and not isinstance(v, bool) and v >= 0
            for k, v in counts.items())):
        raise footer_error(EVALUATIONS_KEY, path,
                           f"{counts!r}, not an object of evaluations by batch size")
    return {int(k): int(v) for k, v in counts.items()}


def _filters(batch_size: int | None, statuses: Sequence[str] | None
             ) -> tuple[str, list[object]]:
    extra, params = "", list[object]()
    if batch_size is not None:
        extra += " and batch_size = ?"
        params.append(int(batch_size))
    if statuses is not None:
        extra += " and status in (" + ", ".join("?" for _ in statuses) + ")"
        params.extend(statuses)
    return extra, params


def open_store(home: str | os.PathLike[str] | None = None) -> Store:
    """Open the store of a curvekit home (``curvekit.open``).

    Examples
    --------
    >>> import curvekit
    >>> store = curvekit.open()  # doctest: +SKIP
    >>> curvekit.steps_to_result(store, curvekit.Selection(  # doctest: +SKIP
    ...     "cifar_10/resnet_8/nesterov_momentum", "val/classification_error", 0.3, trials=100))
    """
    return Store.open(home)
