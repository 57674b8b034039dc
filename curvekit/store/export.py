"""Query results written as DuckDB computes them: CSV and JSON in batches, in bounded memory.

:meth:`Store.sql <curvekit.store.store.Store.sql>` returns the whole result as one polars
DataFrame, which is right for a notebook but not for ``select * from measurements`` over
66 million rows. :func:`export` reads the result as Arrow record batches, gathers them
into blocks of :data:`BATCH_ROWS` rows and writes each block to a binary stream while the
next is read, so memory stays at a few blocks whatever the size of the result.
:func:`preview` keeps the first rows of a result for display and counts the rest.

The text written is the same as for the whole result at once: CSV as polars'
``DataFrame.write_csv`` (list columns joined with spaces), JSON as
``json.dumps(frame.to_dicts(), indent=1, default=str)`` plus a newline.

>>> import io, tempfile, pathlib
>>> from curvekit.release.synthetic import tiny_archive
>>> from curvekit.store.build import convert
>>> from curvekit.store.store import Store
>>> tmp = pathlib.Path(tempfile.mkdtemp())
>>> _ = convert(tmp / "a.tar.bz2", tmp, manifest=tiny_archive(tmp / "a.tar.bz2"))
>>> store = Store.open(tmp)
>>> out = io.BytesIO()
>>> export(store, "select distinct status from trials order by 1", out, "csv")
3
>>> out.getvalue().decode()
'status\\nCOMPLETE\\nINCOMPLETE\\nINFEASIBLE\\n'
>>> frame, total = preview(store, "select * from trials", 2)
>>> frame.height, total > 2
(2, True)
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import IO, TypeVar

import duckdb
import polars as pl
import pyarrow as pa

from curvekit import structured
from curvekit.errors import QueryError
from curvekit.store.store import Store

__all__ = ["BATCH_ROWS", "FORMATS", "export", "preview", "query"]

FORMATS = ("csv", "json")
BATCH_ROWS = 262_144
"""Rows per written batch: about 35 MB of Arrow data and 25 MB of CSV text for the
measurements, and few enough calls into polars that its fixed cost per call does not show."""

_NESTED = (pl.List, pl.Array, pl.Struct)
T = TypeVar("T")
_JSON_SLICE = 8192


def _batches(store: Store, sql: str, params: Sequence[object] | None, batch_rows: int
             ) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
    """The result's schema and its record batches, each computed when it is asked for."""
    try:
        relation = store.connect().sql(sql, params=list(params) if params else None)
        reader = relation.to_arrow_reader(batch_rows) if relation is not None else None
    except duckdb.Error as exc:
        raise QueryError(f"{exc}\nin the query:\n{sql}") from exc
    if reader is None:  # a statement without a result (e.g. SET): no rows, no columns
        return pa.schema([]), iter(())

    def read() -> Iterator[pa.RecordBatch]:
        try:
            yield from reader
        except (duckdb.Error, pa.ArrowException) as exc:
            raise QueryError(f"{exc}\nin the query:\n{sql}") from exc

    return reader.schema, read()


def _coalesced(batches: Iterator[pa.RecordBatch], schema: pa.Schema, rows: int
               ) -> Iterator[pa.Table]:
    """The record batches gathered into tables of at least ``rows`` rows (the last may have
    fewer). DuckDB hands over a batch per Parquet file, a few thousand rows for most of the
    store's files, and formatting them one by one costs about as much again as the text."""
    pending: list[pa.RecordBatch] = []
    have = 0
    for batch in batches:
        if not batch.num_rows:
            continue
        pending.append(batch)
        have += batch.num_rows
        if have >= rows:
            yield pa.Table.from_batches(pending, schema=schema)
            pending, have = [], 0
    if pending:
        yield pa.Table.from_batches(pending, schema=schema)


def _ahead(items: Iterator[T]) -> Iterator[T]:
    """``items``, each next one computed in a worker thread while the caller handles the
    current one: DuckDB reads the next batch while this one is formatted (both release the
    GIL), and memory holds two batches at most."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        pending = pool.submit(next, items, None)
        while (item := pending.result()) is not None:
            pending = pool.submit(next, items, None)
            yield item


def _frame(data: pa.RecordBatch | pa.Table, sql: str) -> pl.DataFrame:
    try:
        # In the table's chunks: the writers read them in place, and joining them costs a copy.
        frame = pl.from_arrow(data, rechunk=False)
    except pl.exceptions.PolarsError as exc:  # e.g. two result columns with the same name
        raise QueryError(f"the result cannot be written ({exc}); give every column its own "
                         f"name (`select ... as name`)\nin the query:\n{sql}") from exc
    assert isinstance(frame, pl.DataFrame)
    return frame


def _flat(frame: pl.DataFrame, sql: str) -> pl.DataFrame:
    """List columns as space-joined text, which CSV can hold; nested values are refused."""
    for name, dtype in frame.schema.items():
        inner = dtype.inner if isinstance(dtype, pl.List | pl.Array) else dtype
        if isinstance(inner, _NESTED):
            raise QueryError(f"column {name!r} holds nested values ({dtype}), which CSV "
                             "cannot; select their parts (e.g. `column.field`, "
                             f"`column[1]`) or use the json format\nin the query:\n{sql}")
    return frame.with_columns(
        pl.col(c).cast(pl.List(t.inner)).list.eval(pl.element().cast(pl.String)).list.join(" ")
        for c, t in frame.schema.items() if isinstance(t, pl.List | pl.Array))


def _write_all(out: IO[bytes], data: bytes | memoryview) -> None:
    """Write all of ``data``. Unbuffered stdout (``python -u``, ``PYTHONUNBUFFERED``) is a raw
    file whose ``write`` may take only part of a large block, when a signal interrupts it or
    the reader of a pipe goes away: the rest is written again, so that nothing is lost
    without a word (a reader that has gone then raises BrokenPipeError, as it should)."""
    view = memoryview(data).cast("B")
    while view:
        written = out.write(view)
        if written is None:  # a non-blocking stream that cannot take more now
            raise QueryError(f"the output {out!r} is non-blocking and took no more of the "
                             "result; write to a file or to a blocking pipe")
        view = view[written:]


def _json_values(series: pl.Series) -> list[str]:
    """Each value of ``series`` as the text ``json.dumps(..., indent=1)`` gives it inside a
    record of the top-level array (two levels deep)."""
    values = series.to_list()
    if isinstance(series.dtype, _NESTED):
        return [structured.dumps(v, indent=1, default=str).replace("\n", "\n  ") for v in values]
    # The C encoder (used only without indent) encodes the whole column in one call. A line
    # break cannot occur inside an encoded scalar (strings escape it), so it separates them.
    text = structured.dumps(values, separators=("\n", ": "), default=str)
    return text[1:-1].split("\n") if values else []


class _JsonWriter:
    """Writes records as one JSON array, byte for byte as ``json.dumps(rows, indent=1)``."""

    def __init__(self, out: IO[bytes]) -> None:
        self.out = out
        self.rows = 0
        self.template = ""

    def write(self, frame: pl.DataFrame) -> None:
        if not frame.height:
            return
        if not self.template:
            keys = [structured.dumps(c).replace("%", "%%") for c in frame.columns]
            self.template = " {\n" + ",\n".join(f"  {k}: %s" for k in keys) + "\n }"
        # In slices: a batch's values as Python objects would take ~100 MB.
        for part in frame.iter_slices(_JSON_SLICE):
            columns = [_json_values(part.to_series(i)) for i in range(part.width)]
            records = ",\n".join(self.template % row for row in zip(*columns, strict=True))
            _write_all(self.out, ("[\n" if not self.rows else ",\n").encode()
                       + records.encode())
            self.rows += part.height

    def close(self) -> None:
        _write_all(self.out, b"\n]\n" if self.rows else b"[]\n")


def export(store: Store, sql: str, out: IO[bytes], fmt: str = "csv", *,
           params: Sequence[object] | None = None, batch_rows: int = BATCH_ROWS) -> int:
    """Run SQL over the views ``studies``, ``trials``, ``parameters`` and ``measurements``
    and write every row of the result to the binary stream ``out``; return the number of
    rows.

    ``fmt`` is ``csv`` (a header line, then the rows; list columns joined with spaces) or
    ``json`` (one array of records, as ``json.dumps(rows, indent=1)``). Rows are written in
    batches of ``batch_rows`` as DuckDB produces them, so memory does not grow with the
    result. An SQL error found while the rows are read raises a
    :class:`~curvekit.errors.QueryError`; what was written before it stays written.

    Examples
    --------
    >>> import sys
    >>> export(store, "select * from measurements", sys.stdout.buffer)  # doctest: +SKIP
    """
    if fmt not in FORMATS:
        raise QueryError(f"unknown output format {fmt!r}; choose one of {', '.join(FORMATS)}")
    if batch_rows < 1:
        raise QueryError(f"batch_rows must be a positive number of rows, got {batch_rows}")
    schema, batches = _batches(store, sql, params, batch_rows)
    frames = _ahead(_frame(table, sql) for table in _coalesced(batches, schema, batch_rows))
    rows = 0
    if fmt == "json":
        writer = _JsonWriter(out)
        for frame in frames:
            writer.write(frame)
        writer.close()
        return writer.rows
    header = True
    buffer = io.BytesIO()
    for frame in frames:
        if not frame.height:
            continue
        # Through a buffer, so that ``out`` sees plain writes (a closed pipe then raises
        # BrokenPipeError as for any Python write).
        buffer.seek(0)
        buffer.truncate()
        _flat(frame, sql).write_csv(buffer, include_header=header)
        _write_all(out, buffer.getbuffer())
        header = False
        rows += frame.height
    if header and len(schema):  # no rows: the header alone, as for an empty DataFrame
        # (from no batches rather than ``schema.empty_table()``, which imports pandas: 0.4 s)
        empty = pa.Table.from_batches([], schema=schema)
        _write_all(out, _flat(_frame(empty, sql), sql).write_csv().encode())
    return rows


def preview(store: Store, sql: str, limit: int, *, params: Sequence[object] | None = None
            ) -> tuple[pl.DataFrame, int]:
    """The first ``limit`` rows of a query's result, and the number of rows it has in all.

    Rows past the limit are counted as they stream by, not kept, so a preview of a huge
    result takes little memory.
    """
    if limit < 0:
        raise QueryError(f"limit must be zero or more rows, got {limit}")
    schema, batches = _batches(store, sql, params, BATCH_ROWS)
    kept: list[pa.RecordBatch] = []
    have = total = 0
    for batch in batches:
        total += batch.num_rows
        if have < limit:
            kept.append(batch.slice(0, limit - have))
            have += kept[-1].num_rows
    frame = _frame(pa.Table.from_batches(kept, schema=schema), sql)
    return frame, total


def query(sql: str, home: str | os.PathLike[str] | None = None, *,
          params: Sequence[object] | None = None) -> pl.DataFrame:
    """Run SQL over the views ``studies``, ``trials``, ``parameters`` and ``measurements``
    of the store of ``home`` (default: ``$CURVEKIT_HOME`` or the platform data directory)
    and return the whole result as a polars DataFrame: ``curvekit query`` as a function.

    Pass values as ``params`` (``?`` in ``sql``), never inside it. For a result too large
    to hold in memory, :func:`export` writes it in batches; :func:`preview` keeps its
    first rows. A failing query raises :class:`~curvekit.errors.QueryError`.

    >>> import tempfile, curvekit
    >>> home = tempfile.mkdtemp()
    >>> _ = curvekit.demo(home)
    >>> curvekit.query("select count(*) as n from trials where batch_size = ?", home,
    ...                params=[64]).item()
    48
    """
    return Store.open(home).query(sql, params)
