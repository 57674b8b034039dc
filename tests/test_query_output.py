"""Query output: csv and json streamed in batches give the text of the whole result at once;
the table shows the first rows and says how many more there are."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from curvekit import structured
from curvekit.cli import TABLE_ROWS, emit, main
from curvekit.errors import QueryError
from curvekit.store.export import export, preview
from curvekit.store.store import Store
from tests.patience import PATIENCE

QUERIES = [
    "select * from measurements order by all",
    "select * from trials",
    "select * from studies",
    "select status, count(*) as n, sum(steps) as total from trials group by all order by 1",
    "select * from trials where false",
]
# Every kind of value the previous output had to get right: lists, structs, decimals,
# dates, NaN and infinities, nulls, quotes, '%' and non-ASCII text, line breaks.
ODD = ("select [1, 2] as l, []::int[] as e, 'a%s\"b, c' as \"k%s\", date '2020-01-02' as d, "
       "timestamp '2020-01-02 03:04:05' as ts, 1.5::decimal(5, 2) as dec, "
       "'nan'::double as n, 'inf'::double as i, null as z, 'é\nx' as u, true as b, "
       "1e-7 as small, 123456789012345678.0 as big, trial_id from trials order by trial_id")
NESTED = "select {'x': 1, 'y': [1.5, null]} as s, [[1], []] as ll"


@pytest.fixture(scope="module")
def store(converted_home: Callable[..., Path]) -> Store:
    return Store.open(converted_home(name="query-output"))


def _export(store: Store, sql: str, fmt: str, batch_rows: int = 65_536) -> str:
    out = io.BytesIO()
    export(store, sql, out, fmt, batch_rows=batch_rows)
    return out.getvalue().decode()


def _previous(frame: pl.DataFrame, fmt: str, capsys: pytest.CaptureFixture[str]) -> str:
    """What ``curvekit query`` printed before streaming: the whole frame through emit."""
    capsys.readouterr()
    emit(frame, fmt)
    return capsys.readouterr().out


@settings(max_examples=30, deadline=None)
@given(sql=st.sampled_from(QUERIES), batch_rows=st.integers(1, 700))
def test_streamed_csv_equals_write_csv(store: Store, sql: str, batch_rows: int) -> None:
    assert _export(store, sql, "csv", batch_rows) == store.sql(sql).write_csv()


@settings(max_examples=30, deadline=None)
@given(sql=st.sampled_from([*QUERIES, ODD]), batch_rows=st.integers(1, 700))
def test_streamed_json_equals_the_previous_output(store: Store, sql: str,
                                                  batch_rows: int) -> None:
    rows = store.sql(sql).to_dicts()
    # the one JSON writer: json.dumps's text, with NaN and infinities as null
    assert _export(store, sql, "json", batch_rows) == structured.dumps(rows, indent=1,
                                                                      default=str) + "\n"


def test_odd_values_as_before(store: Store, capsys: pytest.CaptureFixture[str]) -> None:
    frame = store.sql(ODD)
    for fmt in ("csv", "json"):
        assert _export(store, ODD, fmt, batch_rows=7) == _previous(frame, fmt, capsys)
    assert _export(store, NESTED, "json") == structured.dumps(
        store.sql(NESTED).to_dicts(), indent=1, default=str) + "\n"


def test_empty_results(store: Store) -> None:
    assert _export(store, "select * from trials where false", "json") == "[]\n"
    header = _export(store, "select * from trials where false", "csv")
    assert header == store.sql("select * from trials limit 0").write_csv()
    assert header.count("\n") == 1 and header.startswith("batch_size,trial_id")


def test_nested_values_in_csv_are_refused_with_a_hint(store: Store) -> None:
    with pytest.raises(QueryError, match=r"column 's' holds nested values.*json format"):
        _export(store, NESTED, "csv")


def test_sql_errors(store: Store) -> None:
    with pytest.raises(QueryError, match="in the query:\nselect nope from trials"):
        _export(store, "select nope from trials", "csv")
    with pytest.raises(QueryError, match="in the query"):  # found while rows are read
        _export(store, "select cast(status as integer) from trials", "json")
    with pytest.raises(QueryError, match="its own name"):
        _export(store, "select 1 as a, 2 as a", "csv")
    with pytest.raises(QueryError, match="unknown output format 'xml'"):
        _export(store, "select 1", "xml")


def test_preview_keeps_the_first_rows_and_counts_all(store: Store) -> None:
    whole = store.sql(QUERIES[0])
    frame, total = preview(store, QUERIES[0], 10)
    assert total == whole.height > 10
    assert frame.equals(whole.head(10))
    empty, none = preview(store, "select * from trials where false", 10)
    assert (empty.height, none, empty.columns[:2]) == (0, 0, ["batch_size", "trial_id"])


def test_cli_csv_and_json_as_before(store: Store, capsys: pytest.CaptureFixture[str]) -> None:
    runner = CliRunner()
    for sql in (QUERIES[0], ODD):
        frame = store.sql(sql)
        for fmt in ("csv", "json"):
            result = runner.invoke(main, ["query", sql, "--home", str(store.path), "--format",
                                          fmt])
            assert result.exit_code == 0, result.output
            assert result.stdout == _previous(frame, fmt, capsys)


def test_cli_table_shows_the_first_rows_and_says_how_many_more(store: Store) -> None:
    whole = store.sql(QUERIES[0])
    assert whole.height > TABLE_ROWS
    result = CliRunner().invoke(main, ["query", QUERIES[0], "--home", str(store.path)])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert len(lines) == 2 + TABLE_ROWS  # header, rule, rows
    assert lines[0].split() == whole.columns
    more = whole.height - TABLE_ROWS
    assert result.stderr == (f"{more:,} more rows ({whole.height:,} in all); use --format "
                             "csv or --format json for every row.\n")
    small = CliRunner().invoke(main, ["query", QUERIES[3], "--home", str(store.path)])
    assert small.exit_code == 0 and small.stderr == ""
    assert len(small.stdout.splitlines()) == 2 + store.sql(QUERIES[3]).height


def test_cli_errors(store: Store) -> None:
    result = CliRunner().invoke(main, ["query", NESTED, "--home", str(store.path), "--format",
                                       "csv"])
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: column 's' holds nested values")
    bad = CliRunner().invoke(main, ["query", "select nope", "--home", str(store.path)])
    assert bad.exit_code == 1 and "Error: " in bad.stderr and "nope" in bad.stderr


def _lines(stream: io.BufferedReader, n: int) -> Iterator[bytes]:
    for _ in range(n):
        yield stream.readline()


def _read_two_lines_and_close(store: Store, fmt: str, env: dict[str, str]
                              ) -> tuple[int, str, list[bytes]]:
    """`curvekit query ... | head -2`: the exit status, stderr and the two lines read."""
    sql = "select * from measurements, range(20)"  # about 2 MB: more than a pipe holds
    proc = subprocess.Popen([sys.executable, "-m", "curvekit", "query", sql, "--home",
                             str(store.path), "--format", fmt], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)
    assert proc.stdout is not None and proc.stderr is not None
    first = list(_lines(proc.stdout, 2))  # type: ignore[arg-type]
    proc.stdout.close()
    err = proc.stderr.read().decode()
    return proc.wait(timeout=PATIENCE), err, first


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_a_reader_that_stops_early_ends_quietly_with_141(store: Store, fmt: str) -> None:
    # `curvekit query ... | head -2`: the pipe closes while rows are still being written.
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    status, err, first = _read_two_lines_and_close(store, fmt, env)
    assert status == 141, err  # as git and cat end on a closed pipe
    assert err == "" and first[0].startswith(b"trial_id" if fmt == "csv" else b"[")


@pytest.mark.parametrize("unbuffered", [False, True])
@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_a_reader_that_stops_during_one_large_write_ends_with_141(
        store: Store, fmt: str, unbuffered: bool) -> None:
    # The whole result is one write, larger than a pipe holds; unbuffered stdout is a raw
    # file, whose write takes part of the block when the reader goes away.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parent.parent)
    if unbuffered:
        env["PYTHONUNBUFFERED"] = "1"
    status, err, first = _read_two_lines_and_close(store, fmt, env)  # one 2 MB batch
    assert status == 141, err
    assert err == "" and first[0].startswith(b"trial_id" if fmt == "csv" else b"[")


class _Trickle(io.RawIOBase):
    """A raw stream that takes at most ``most`` bytes per write, as a pipe may."""

    def __init__(self, most: int) -> None:
        self.most, self.data, self.calls = most, bytearray(), 0

    def writable(self) -> bool:
        return True

    def write(self, b: object) -> int:
        view = memoryview(b).cast("B")  # type: ignore[arg-type]
        self.data += view[:self.most]
        self.calls += 1
        return min(self.most, len(view))


@settings(max_examples=25, deadline=None)
@given(most=st.integers(1, 70_000), fmt=st.sampled_from(["csv", "json"]))
def test_partial_writes_lose_nothing(store: Store, most: int, fmt: str) -> None:
    raw = _Trickle(most)
    export(store, QUERIES[0], raw, fmt)  # type: ignore[arg-type]
    assert raw.data.decode() == _export(store, QUERIES[0], fmt)


def test_a_stream_that_takes_nothing_is_an_error(store: Store) -> None:
    class Full(_Trickle):
        def write(self, b: object) -> None:  # type: ignore[override]
            return None  # a non-blocking file that is full

    with pytest.raises(QueryError, match="non-blocking"):
        export(store, QUERIES[1], Full(0), "csv")  # type: ignore[arg-type]


def test_small_batches_are_written_together(store: Store) -> None:
    # DuckDB hands over a batch per Parquet file; they are formatted and written as one
    # block of batch_rows rows, since a call into the CSV writer per file costs as much
    # again as the text.
    files = len(list((store.path / "measurements").rglob("*.parquet")))
    total = store.sql("select count(*) from measurements").item()
    raw = _Trickle(1 << 30)
    assert export(store, "select * from measurements", raw, "csv",  # type: ignore[arg-type]
                  batch_rows=total) == total
    assert files > 1 and raw.calls == 1
    raw = _Trickle(1 << 30)
    export(store, "select * from measurements", raw, "csv",  # type: ignore[arg-type]
           batch_rows=total // 3 + 1)
    assert raw.calls <= 3


def test_csv_output_does_not_import_pandas(store: Store) -> None:
    # pandas takes 0.4 s to import; `schema.empty_table()` would import it for an empty result.
    code = ("import io, sys\nfrom curvekit.store.store import Store\n"
            "from curvekit.store.export import export\n"
            "store = Store.open(sys.argv[1])\n"
            "for sql in ('select * from trials where false', 'select * from measurements'):\n"
            "    export(store, sql, io.BytesIO(), 'csv')\n"
            "print('pandas' in sys.modules)\n")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    done = subprocess.run([sys.executable, "-c", code, str(store.path)], capture_output=True,
                          env=env, text=True, timeout=PATIENCE)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "False\n"
