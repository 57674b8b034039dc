"""The store: plain Parquet readers, exact values, determinism, atomicity."""

from __future__ import annotations

import math
import os
import random
import re
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import duckdb
import polars as pl
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import curvekit
from curvekit.store.build import convert
from curvekit.store.catalog import info, verify
from curvekit.store.confine import MARKER
from curvekit.store.fetch import fetch
from curvekit.store.store import Store
from tests.conftest import ROOT, metadata_json, small_members, snapshot, study_json, write_archive

TWO = "mnist_subsets/mnist_6875/simple_cnn_base/nesterov_momentum"


def quirky_members() -> dict[str, bytes]:
    """Two workloads (one with a two-component base_dir) with the release's quirks."""
    m = small_members()
    b = f"{ROOT}/{TWO}/16"
    m[f"{b}/study.json"] = study_json(16, train_steps=0, surprise={"x": 1})
    m[f"{b}/4/metadata.json"] = metadata_json(4, momentum=0.9, learning_rate=0.5)
    # columns in another order, step not first, no trailing newline, nan/inf, blank line
    m[f"{b}/4/measurements.csv"] = (b"val/cross_entropy_error,step,val/classification_error\n"
                                    b"2.5,0,0.9\n\nnan,1000,inf\n-inf,4500,0.125")
    m[f"{b}/9/metadata.json"] = metadata_json(9, status="INFEASIBLE", momentum=0.99)
    m[f"{b}/9/measurements.csv"] = b"step,val/cross_entropy_error,val/classification_error\n"
    return m


@pytest.fixture
def store(tmp_path: Path) -> Store:
    archive = write_archive(tmp_path / "q.tar.bz2", quirky_members())
    convert(archive, tmp_path / "home")
    return Store.open(tmp_path / "home")


def test_plain_duckdb_and_polars_read_the_layout(store: Store) -> None:
    glob = str(store.path / "measurements" / "**" / "*.parquet")
    con = duckdb.connect()
    rows = con.sql(f"select base_dir, model, optimizer, batch_size, trial_id, step, metric, "
                   f"value from read_parquet('{glob}', hive_partitioning=true) "
                   f"where base_dir = 'mnist_subsets/mnist_6875' order by metric, step"
                   ).fetchall()
    key = ("mnist_subsets/mnist_6875", "simple_cnn_base", "nesterov_momentum", 16, 4)
    assert [r[:7] for r in rows] == [
        (*key, s, m) for m in ("val/classification_error", "val/cross_entropy_error")
        for s in (0, 1000, 4500)]
    err, ce = [r[7] for r in rows[:3]], [r[7] for r in rows[3:]]
    assert err == [0.9, math.inf, 0.125]
    assert ce[0] == 2.5 and math.isnan(ce[1]) and ce[2] == -math.inf
    # NaN must stay visible to SQL: no min/max statistics on values that leave it out
    assert con.sql(f"select count(*) from read_parquet('{glob}') "
                   f"where metric = 'val/cross_entropy_error' and isnan(value)"
                   ).fetchall() == [(1,)]
    frame = pl.scan_parquet(glob, hive_partitioning=True).filter(
        pl.col("base_dir") == "mnist_subsets/mnist_6875").collect()
    assert frame.height == 6
    assert set(frame["model"]) == {"simple_cnn_base"}
    assert frame.schema["batch_size"] == pl.Int64
    assert frame.columns == ["batch_size", "trial_id", "step", "metric", "value", "base_dir",
                             "model", "optimizer"]
    # the fc workload lacks cross entropy: it has no rows of it, and one schema everywhere
    whole = pl.scan_parquet(glob, hive_partitioning=True).collect()
    assert set(whole.filter(pl.col("model") == "fc_1024")["metric"]) == {
        "val/classification_error"}
    trials = pl.scan_parquet(str(store.path / "trials" / "**" / "*.parquet"),
                             hive_partitioning=True).collect()
    assert set(trials.columns) == {"base_dir", "model", "optimizer", "batch_size", "trial_id",
                                   "status", "steps", "n_measurements"}
    assert trials.filter(pl.col("trial_id") == 9)["n_measurements"].to_list() == [0]
    parameters = pl.scan_parquet(str(store.path / "parameters" / "**" / "*.parquet"),
                                 hive_partitioning=True).collect()
    assert parameters.filter(pl.col("trial_id") == 4).select(
        "name", "type", "number").rows() == [("learning_rate", "float64", 0.5),
                                             ("momentum", "float64", 0.9)]
    studies = con.sql(f"select base_dir, train_steps, extra from read_parquet("
                      f"'{store.path}/studies/**/*.parquet', hive_partitioning=true) "
                      f"where batch_size = 16").fetchall()
    assert studies == [("mnist_subsets/mnist_6875", 0, '{"surprise":{"x":1}}')]


def test_a_large_metric_has_a_file_of_its_own_that_a_query_reads_alone(tmp_path: Path
                                                                        ) -> None:
    """docs/store.md: a metric with GROUP_ROWS rows or more in a write has a file of its
    own, sorted by (batch_size, trial_id, step); the index in _store.json names it, and a
    query of that metric through the measurements view reads that file alone."""
    from curvekit.store.writer import GROUP_ROWS

    members = small_members(batch_sizes=(8,), trials=(1, 2))
    steps = range(0, GROUP_ROWS // 2 * 100, 100)  # two trials: GROUP_ROWS rows per metric
    for t in (1, 2):
        lines = ["step,b/loss,a/error,c/x"] + [
            f"{s},{s / 7!r},{t / (1 + s)!r},{'1.5' if s == 100 else ''}" for s in steps]
        members[f"{ROOT}/mnist/fc_1024/sgd/8/{t}/measurements.csv"] = "\n".join(lines).encode()
    convert(write_archive(tmp_path / "a.tar.bz2", members), tmp_path / "h")
    store = Store.open(tmp_path / "h")
    index = store.measurements_index("mnist/fc_1024/sgd")
    assert index == {"part-0-0.parquet": ["a/error"], "part-0-1.parquet": ["b/loss"],
                     "part-0-2.parquet": ["c/x"]}
    folder = store.path / "measurements" / "base_dir=mnist" / "model=fc_1024" / "optimizer=sgd"
    for name, (metric,) in index.items():
        rows = pq.read_table(folder / name)
        assert set(rows["metric"].to_pylist()) == {metric}
        keys = list(zip(rows["batch_size"].to_pylist(), rows["trial_id"].to_pylist(),
                        rows["step"].to_pylist(), strict=True))
        assert keys == sorted(keys)
        meta = pq.ParquetFile(folder / name).metadata
        value = meta.schema.names.index("value")
        assert meta.row_group(0).column(value).statistics is None or \
            not meta.row_group(0).column(value).statistics.has_min_max
    plan = store.query("explain analyze select sum(value) from measurements "
                       "where metric = ?", ["b/loss"]).row(0)[1]
    # the plan names no files: it counts them
    assert re.findall(r"Total Files Read:\s+(\d+)", plan) == ["1"]
    assert store.query("select count(*) from measurements where metric = ?",
                       ["c/x"]).item() == 2 * len(steps)


def test_query_for_one_workload_reads_only_its_files(store: Store) -> None:
    plan = duckdb.sql(
        f"explain analyze select count(*) from read_parquet('{store.glob('measurements')}', "
        f"hive_partitioning=true) where model = 'simple_cnn_base'").fetchall()[0][1]
    assert "Total Files Read: 1" in plan


def test_one_thread_per_query_gives_the_same_answers_and_restores(store: Store) -> None:
    from concurrent.futures import ThreadPoolExecutor

    def threads() -> int:
        return int(store.query("select current_setting('threads')").item())

    before = threads()
    workloads = store.workloads()
    expected = [curvekit.best(store, curvekit.Selection(w, "val/classification_error"))
                for w in workloads]
    with store.one_thread_per_query(), ThreadPoolExecutor(max_workers=2) as pool:
        assert threads() == 1
        got = list(pool.map(
            lambda w: curvekit.best(store, curvekit.Selection(w, "val/classification_error")),
            workloads))
    assert threads() == before
    assert all(a.equals(b) for a, b in zip(expected, got, strict=True))
    with pytest.raises(RuntimeError), store.one_thread_per_query():
        raise RuntimeError("a failing block")
    assert threads() == before


def test_info_and_verify(store: Store) -> None:
    frame = info(store)
    row = frame.filter(pl.col("workload") == TWO).row(0, named=True)
    assert row["batch_sizes"] == [16] and row["trials"] == 2 and row["infeasible"] == 1
    assert row["metrics"] == ["val/classification_error", "val/cross_entropy_error"]
    assert row["measurements"] == 3
    assert verify(store).ok


def test_same_archive_any_member_order_gives_the_same_store(tmp_path: Path) -> None:
    members = quirky_members()
    names = list(members)
    random.Random(1).shuffle(names)
    a = write_archive(tmp_path / "a.tar.bz2", members)
    b = write_archive(tmp_path / "b.tar.bz2", {n: members[n] for n in names})
    convert(a, tmp_path / "ha")
    convert(b, tmp_path / "hb", memory_limit=1)  # spill after every table
    files = [{k: v for k, v in snapshot(h / "store").items() if k != "<link>"}
             for h in (tmp_path / "ha", tmp_path / "hb")]
    for found in files:  # what differs by design: the source, and each snapshot's own id
        found.pop("_store.json")
        found.pop(MARKER)
    assert files[0] == files[1]


def test_spilled_studies_write_the_same_files_in_row_groups_of_any_size(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A conversion that spills (each study then read back one metric at a time) writes the
    same files as one that holds everything, also where a metric has files of its own split
    into several row groups (small limits standing for 65,536 and 1,048,576 rows)."""
    from curvekit.store import writer

    monkeypatch.setattr(writer, "GROUP_ROWS", 3)
    monkeypatch.setattr(writer, "MAX_GROUP_ROWS", 7)
    archive = write_archive(tmp_path / "a.tar.bz2", quirky_members())
    convert(archive, tmp_path / "ha")
    convert(archive, tmp_path / "hb", memory_limit=1)
    files = [{k: v for k, v in snapshot(h / "store").items() if k not in ("<link>", MARKER)}
             for h in (tmp_path / "ha", tmp_path / "hb")]
    for found in files:
        found.pop("_store.json")
    assert files[0] == files[1]
    store = Store.open(tmp_path / "hb")
    assert any(len(m) == 1 for w in store.workloads()
               for m in store.measurements_index(w).values())
    groups = [pq.ParquetFile(p).metadata.num_row_groups
              for p in (store.path / "measurements").rglob("*.parquet")]
    assert max(groups) > 1
    assert verify(store).ok, verify(store).problems


def test_fetch_twice_does_nothing_the_second_time(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from curvekit.cli import main

    archive = write_archive(tmp_path / "a.tar.bz2", small_members())
    sha = __import__("hashlib").sha256(archive.read_bytes()).hexdigest()
    args = ["fetch", "--home", str(tmp_path / "h"), "--archive", str(archive), "--sha256", sha]
    first = CliRunner().invoke(main, args)
    assert first.exit_code == 0, first.output
    assert "Converted" in first.output and "4 trials" in first.output
    before = snapshot(tmp_path / "h")
    second = CliRunner().invoke(main, args)
    assert second.exit_code == 0
    assert "Nothing to do" in second.output
    assert snapshot(tmp_path / "h") == before


def test_wrong_sha256_for_a_given_archive_keeps_the_file(tmp_path: Path) -> None:
    from curvekit.errors import ChecksumError

    archive = write_archive(tmp_path / "a.tar.bz2", small_members())
    with pytest.raises(ChecksumError, match=r"expected 0{64}, got [0-9a-f]{64}"):
        fetch(home=tmp_path / "h", archive=archive, sha256="0" * 64)
    assert archive.exists()
    assert not (tmp_path / "h" / "store").exists()


_KILLER = """
import os, signal, sys
from curvekit.store.build import convert
def progress(done, total):
    os.kill(os.getpid(), signal.SIGKILL)
convert(sys.argv[1], sys.argv[2], progress=progress)
"""


def test_killed_conversion_leaves_the_previous_store(tmp_path: Path,
                                                     make_archive: Callable[..., Path]) -> None:
    home = tmp_path / "home"
    convert(make_archive(), home)
    before = snapshot(home)
    big = make_archive(small_members(trials=tuple(range(1, 3000))))
    proc = subprocess.run([sys.executable, "-c", _KILLER, str(big), str(home)],
                          env={**os.environ, "PYTHONPATH": os.getcwd()}, check=False)
    assert proc.returncode == -signal.SIGKILL
    assert list((home / "stores").glob(".staging-*"))  # the killed run's leftovers
    after = {k: v for k, v in snapshot(home).items() if ".staging-" not in k}
    assert after == before
    convert(make_archive(), home)  # the next run cleans up
    assert not list((home / "stores").glob(".staging-*"))
    assert len(list((home / "stores").iterdir())) == 1


finite = st.floats(allow_nan=True, allow_infinity=True, width=64)


@settings(max_examples=25, deadline=None)
@given(values=st.lists(st.tuples(st.integers(0, 10**9), finite, finite), min_size=0,
                       max_size=30))
def test_round_trip_is_lossless(tmp_path_factory: pytest.TempPathFactory,
                                values: list[tuple[int, float, float]]) -> None:
    tmp = tmp_path_factory.mktemp("rt")
    members = small_members(batch_sizes=(8,), trials=(1,))
    lines = ["step,train/x,val/y"] + [f"{s},{a!r},{b!r}" for s, a, b in values]
    members[f"{ROOT}/mnist/fc_1024/sgd/8/1/measurements.csv"] = "\n".join(lines).encode()
    convert(write_archive(tmp / "a.tar.bz2", members), tmp / "h")
    store = Store.open(tmp / "h")
    want = sorted(values, key=lambda v: v[0])  # sorted by step, stable
    wide = store.measurements("mnist/fc_1024/sgd")
    assert isinstance(wide, pl.DataFrame)
    rows = pl.read_parquet(store.glob("measurements"))
    for col, i in (("train/x", 1), ("val/y", 2)):
        long = rows.filter(pl.col("metric") == col)
        assert long["step"].to_list() == [v[0] for v in want]
        for got in (long["value"].to_list(), wide[col].to_list() if values else []):
            for g, w in zip(got, want, strict=True):
                same_sign = math.copysign(1, g) == math.copysign(1, w[i])
                assert (math.isnan(g) and math.isnan(w[i])) or (g == w[i] and same_sign)
    assert wide["step"].to_list() == [v[0] for v in want]
