"""Parse many small ``measurements.csv`` files fast, by batching files that share a header.

Parsing hundreds of thousands of tiny CSV files one by one is dominated by per-call
overhead. :class:`CsvBatcher` concatenates the bodies of files with the same header into one
buffer, parses it with pyarrow in a worker thread (pyarrow releases the GIL), and cuts the
result back into per-trial rows by counting each file's lines. If anything about a batch is
irregular (a quote, a bad value), the batch is re-parsed file by file, so an error always
names the member and the problem.

Cutting by line counts is exact only if every line of a batch is one row. So each file is
first brought to one form on its own terms: a UTF-8 byte-order mark dropped, CRLF and lone
CR line ends turned into LF, blank lines removed, and exactly one LF at its end. The batch is
then parsed without quote handling (a quoted newline could otherwise join two lines into one
row): a quote makes its cell unreadable as a number, and the batch falls back to the per-file
path, which understands quotes. Either way, no row can move from one trial to another.

>>> from curvekit.records import StudyKey
>>> from curvekit.release.archive import CsvRecord
>>> key = StudyKey("mnist", "fc_1024", "sgd", 8)
>>> out = []
>>> b = CsvBatcher(lambda k, t: out.append((k, t)))
>>> b.add(CsvRecord(key, 3, b"step,val/error\\n0,0.9\\n100,nan\\n", "m.csv"))
>>> b.close()
>>> out[0][1].to_pydict()
{'trial_id': [3, 3], 'step': [0, 100], 'val/error': [0.9, nan]}
"""

from __future__ import annotations

import csv
import re
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from curvekit.errors import ArchiveError
from curvekit.records import StudyKey
from curvekit.release.archive import CsvRecord
from curvekit.values import exact_integer, integer_problem

__all__ = ["MAX_COLUMNS", "CsvBatcher", "normalize", "parse_header"]

MAX_COLUMNS = 10_000
"""The most columns a ``measurements.csv`` header may have (the release's have a few; the
importers of ``curvekit add`` take at most as many per log)."""
_BOM = b"\xef\xbb\xbf"
_BLANK_LINES = re.compile(rb"\n{2,}")
Sink = Callable[[StudyKey, pa.Table], None]
# Parsed tables per study, and the row count of every file by (study, trial id).
_Parsed = tuple[list[tuple[StudyKey, pa.Table]], dict[tuple[StudyKey, int], int]]


def parse_header(line: bytes, member: str) -> list[str]:
    """The column names of a CSV header line, checked for a ``step`` column, duplicates and
    at most :data:`MAX_COLUMNS` columns, in time linear in the line's length.

    >>> parse_header(b"step,val/error", "m.csv")
    ['step', 'val/error']
    """
    try:
        names = next(csv.reader([line.decode("utf-8")], strict=True))
    except (UnicodeDecodeError, StopIteration, csv.Error) as exc:
        raise ArchiveError(f"{member}: unreadable CSV header: {exc}", member=member) from exc
    if len(names) > MAX_COLUMNS:
        raise ArchiveError(
            f"{member}: the header has {len(names):,} columns; a measurements.csv has a step "
            f"column and one per metric, at most {MAX_COLUMNS:,} in all: this is not the "
            "release's file", member=member)
    if "step" not in names:
        shown = names if len(names) <= 30 else [*names[:30], "..."]
        raise ArchiveError(
            f"{member}: no 'step' column in the header {shown!r}; measurements.csv must have "
            "a step column and one column per metric", member=member)
    dupes = sorted(n for n, count in Counter(names).items() if count > 1)
    if dupes or "" in names or "trial_id" in names:
        raise ArchiveError(f"{member}: bad column names {(dupes or names)[:30]!r} in the "
                           "header", member=member)
    return names


def _convert_options(names: list[str], step: pa.DataType) -> pacsv.ConvertOptions:
    # Only an empty cell is missing; "nan", "inf" and "-inf" are the values they spell.
    # Steps are never read as floats, which would round those above 2**53.
    return pacsv.ConvertOptions(
        column_types={n: step if n == "step" else pa.float64() for n in names},
        null_values=[""],
        strings_can_be_null=False,
        quoted_strings_can_be_null=False,
    )


def _parse(names: list[str], body: bytes, *, quoting: bool) -> pa.Table:
    # The header is parsed once per group by parse_header; pyarrow sees data lines only.
    return pacsv.read_csv(
        pa.py_buffer(body),
        read_options=pacsv.ReadOptions(use_threads=False, block_size=1 << 26,
                                       column_names=names),
        parse_options=pacsv.ParseOptions(quote_char='"' if quoting else False),
        # Batches read steps as int64 (exact, range-checked by Arrow); a file read alone
        # reads them as text, converted exactly by _step_column ("100.0", "1e3").
        convert_options=_convert_options(names, pa.string() if quoting else pa.int64()),
    )


def normalize(data: bytes) -> bytes:
    """One file's bytes with LF line ends, no BOM, no blank lines and one final LF.

    >>> normalize(b"\\xef\\xbb\\xbfstep,x\\r\\n0,1\\r\\r2,3\\r4,5")
    b'step,x\\n0,1\\n2,3\\n4,5\\n'
    """
    if data.startswith(_BOM):
        data = data[3:]
    if b"\r" in data:
        data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    if data.startswith(b"\n"):
        data = data.lstrip(b"\n")
    if b"\n\n" in data:
        data = _BLANK_LINES.sub(b"\n", data)
    if data and not data.endswith(b"\n"):
        data += b"\n"
    return data


def _step_column(table: pa.Table, member: str) -> pa.Array:
    """The step column as exact int64: whole numbers in 0 … 2**63 - 1, else an
    :class:`ArchiveError` naming the member, the data row and the value."""
    step = table.column("step").combine_chunks()
    if not pa.types.is_integer(step.type):
        try:  # digits only: Arrow parses and range-checks them exactly
            step = pc.cast(step, pa.int64())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return _exact_steps(step, member)
    if step.null_count:
        return _exact_steps(step.cast(pa.string()), member)  # names the empty cell
    if len(step) and pc.min(step).as_py() < 0:
        bad = pc.index(pc.less(step, 0), True).as_py()
        raise ArchiveError(f"{member}: step on data row {bad + 1} is {step[bad].as_py()}, "
                           "negative; steps count from 0", member=member)
    return step


def _exact_steps(column: pa.Array, member: str) -> pa.Array:
    """Steps read as text, converted exactly (never through a float)."""
    out: list[int] = []
    for row, text in enumerate(column.to_pylist()):
        value = None if text is None else exact_integer(str(text))
        problem = ("is empty" if text is None or not str(text).strip() else
                   "is not an integer" if value is None else
                   integer_problem(value))
        if problem is not None:
            raise ArchiveError(f"{member}: step on data row {row + 1} ({str(text)[:40]!r}) "
                               f"{problem}; steps are whole numbers from 0 to 2**63 - 1",
                               member=member)
        assert value is not None
        out.append(value)
    return pa.array(out, pa.int64())


@dataclass
class _Group:
    header: bytes
    names: list[str]
    bodies: list[bytes] = field(default_factory=list)
    files: list[tuple[StudyKey, int, int, str]] = field(default_factory=list)
    size: int = 0


class CsvBatcher:
    """Collect ``measurements.csv`` records and deliver parsed per-study tables to ``sink``.

    ``sink(key, table)`` is always called from the thread that calls :meth:`add` and
    :meth:`close`; each table has ``trial_id`` (int64), ``step`` (int64) and one float64
    column per metric in header order. ``rows`` maps (study, trial id) to the file's row count.
    """

    def __init__(self, sink: Sink, *, batch_bytes: int = 16 << 20, threads: int = 1,
                 max_pending: int = 2) -> None:
        self._sink = sink
        self._batch_bytes = batch_bytes
        self._groups: dict[bytes, _Group] = {}
        self._pool = ThreadPoolExecutor(max_workers=max(threads, 1))
        self._pending: list[Future[_Parsed]] = []
        self._max_pending = max_pending
        self.rows: dict[tuple[StudyKey, int], int] = {}
        # every metric named in a header, rows or not, and the first member naming it
        self.metrics: dict[str, str] = {}

    def add(self, record: CsvRecord) -> None:
        """Queue one file; parse its group's batch when the batch is big enough."""
        head, _sep, body = normalize(record.data).partition(b"\n")
        if not head.strip():
            raise ArchiveError(f"{record.member}: empty measurements.csv (not even a header)",
                               member=record.member)
        group = self._groups.get(head)
        if group is None:
            group = self._groups[head] = _Group(head, parse_header(head, record.member))
            for name in group.names:
                if name != "step":
                    self.metrics.setdefault(name, record.member)
        lines = body.count(b"\n")  # one row per line: normalize() made that so
        group.bodies.append(body)
        group.files.append((record.key, record.trial_id, lines, record.member))
        group.size += len(body)
        if group.size >= self._batch_bytes:
            self._submit(head)

    def _submit(self, head: bytes) -> None:
        group = self._groups.pop(head)
        self._pending.append(self._pool.submit(_parse_group, group))
        while len(self._pending) > self._max_pending:
            self._deliver(self._pending.pop(0))

    def _deliver(self, future: Future[_Parsed]) -> None:
        tables, counts = future.result()
        self.rows.update(counts)
        for key, table in tables:
            self._sink(key, table)

    def close(self) -> None:
        """Parse what is left and deliver everything."""
        try:
            for head in list(self._groups):
                self._submit(head)
            while self._pending:
                self._deliver(self._pending.pop(0))
        finally:
            self._pool.shutdown(wait=True, cancel_futures=True)


def _parse_group(group: _Group) -> _Parsed:
    expected = sum(n for *_, n, _ in group.files)
    if not expected:
        return [], {(key, trial): 0 for key, trial, _, _ in group.files}
    try:
        table = _parse(group.names, b"".join(group.bodies), quoting=False)
        if table.num_rows != expected:  # pragma: no cover - normalize() makes them equal
            return _parse_files(group)
        steps = _step_column(table, "")
    except (pa.ArrowInvalid, ArchiveError):
        return _parse_files(group)  # find and name the bad file
    counts = np.fromiter((n for *_, n, _ in group.files), dtype=np.int64, count=len(group.files))
    trials = np.fromiter((t for _, t, _, _ in group.files), dtype=np.int64,
                         count=len(group.files))
    metrics = [n for n in group.names if n != "step"]
    full = pa.table([pa.array(np.repeat(trials, counts)), steps,
                     *(table.column(n) for n in metrics)], names=["trial_id", "step", *metrics])
    rows = {(key, trial): n for key, trial, n, _ in group.files}
    return _split_by_study(full, group.files), rows


def _split_by_study(table: pa.Table, files: list[tuple[StudyKey, int, int, str]]
                    ) -> list[tuple[StudyKey, pa.Table]]:
    out: list[tuple[StudyKey, pa.Table]] = []
    start = offset = 0
    current = files[0][0] if files else None
    for key, _, n, _ in files:
        if key != current:
            if offset > start:
                out.append((current, table.slice(start, offset - start)))  # type: ignore[arg-type]
            current, start = key, offset
        offset += n
    if current is not None and offset > start:
        out.append((current, table.slice(start, offset - start)))
    return out


def _parse_files(group: _Group) -> _Parsed:
    """The slow path: parse each file alone, so an error names its member and row."""
    tables: list[tuple[StudyKey, pa.Table]] = []
    rows: dict[tuple[StudyKey, int], int] = {}
    metrics = [n for n in group.names if n != "step"]
    for body, (key, trial, _, member) in zip(group.bodies, group.files, strict=True):
        if not body:  # a header-only file: no rows, whichever way its batch is read
            rows[(key, trial)] = 0
            continue
        try:
            table = _parse(group.names, body, quoting=True)
        except pa.ArrowInvalid as exc:
            raise ArchiveError(f"{member}: {exc}", member=member) from exc
        rows[(key, trial)] = table.num_rows
        if table.num_rows:
            trial_col = pa.array(np.full(table.num_rows, trial, dtype=np.int64))
            tables.append((key, pa.table(
                [trial_col, _step_column(table, member), *(table.column(n) for n in metrics)],
                names=["trial_id", "step", *metrics])))
    return tables, rows
