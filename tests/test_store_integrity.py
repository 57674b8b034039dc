"""A damaged store is caught; readers survive swaps; killed and failed writers leave no litter."""

from __future__ import annotations

import errno
import itertools
import json
import math
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import curvekit
from curvekit.cli import main
from curvekit.errors import CurvekitError, StoreError
from curvekit.store import writer
from curvekit.store.build import convert
from curvekit.store.catalog import _counted, footer_parts, info, metric_layout, verify
from curvekit.store.snapshots import FILES_FILE, LEASE_FILE, file_digest
from curvekit.store.store import Store
from curvekit.store.update import add_workload
from curvekit.store.writer import Evaluations
from tests.conftest import small_members, snapshot, write_archive
from tests.patience import PATIENCE
from tests.test_update import workload

WORKLOAD = "cifar_10/resnet_8/sgd"
METRIC = "val/classification_error"
METRICS = ["train/classification_error", "train/cross_entropy_error",
           "val/classification_error", "val/cross_entropy_error"]
MEAS = "measurements/base_dir=cifar_10/model=resnet_8/optimizer=sgd/part-0-0.parquet"
TRIALS = "trials/base_dir=cifar_10/model=resnet_8/optimizer=sgd/part-0.parquet"


@pytest.fixture
def home(converted_home: Callable[..., Path]) -> Path:
    return converted_home(name="integrity")


def current(home: Path) -> Path:
    return (home / "store").resolve()


def snapshots(home: Path) -> list[str]:
    return sorted(p.name for p in (home / "stores").iterdir())


def invoke(*args: str | Path) -> Any:
    return CliRunner().invoke(main, [str(a) for a in args])


# -- damage --------------------------------------------------------------------------------


def test_one_flipped_bit_is_named_by_verify_with_the_repair(home: Path) -> None:
    path = current(home) / MEAS
    data = bytearray(path.read_bytes())
    data[len(data) // 3] ^= 0x10  # inside the column data: the footer still reads
    path.write_bytes(bytes(data))
    pq.ParquetFile(path).metadata  # noqa: B018 - the damage is invisible to a footer read
    report = verify(Store.open(home))
    assert not report.ok
    assert any(p.startswith(f"{MEAS}: damaged") and "curvekit fetch --force" in p
               for p in report.problems), report.problems
    result = invoke("verify", "--home", home)
    assert result.exit_code == 1
    assert MEAS in result.output and "curvekit fetch --force" in result.output


@pytest.fixture(scope="module")
def shared_home(converted_home: Callable[..., Path]) -> Path:
    return converted_home(name="flips")


@settings(max_examples=8, deadline=None)
@given(data=st.data())
def test_any_flipped_bit_is_caught_and_no_query_crashes(shared_home: Path,
                                                        data: st.DataObject) -> None:
    snap = current(shared_home)
    files = sorted(json.loads((snap / FILES_FILE).read_text())["files"])
    rel = data.draw(st.sampled_from(files))
    original = (snap / rel).read_bytes()
    at = data.draw(st.integers(0, len(original) - 1))
    bit = data.draw(st.integers(0, 7))
    damaged = bytearray(original)
    damaged[at] ^= 1 << bit
    (snap / rel).write_bytes(bytes(damaged))
    try:
        with Store.open(shared_home) as store:
            assert any(p.startswith(rel) for p in verify(store).problems)
        with Store.open(shared_home) as store:
            try:
                curvekit.best(store, curvekit.Selection(WORKLOAD, METRIC))
                info(store)
            except CurvekitError:
                pass  # a clear error, or (in the data pages) different numbers: never a crash
    finally:
        (snap / rel).write_bytes(original)


@pytest.mark.parametrize("victim", [MEAS, TRIALS])
@pytest.mark.parametrize("command", [
    ["best", WORKLOAD, "--metric", METRIC],
    ["steps-to-result", WORKLOAD, "--metric", METRIC, "--goal", "0.9"],
    ["info"],
])
def test_truncated_file_gives_an_error_naming_it(home: Path, victim: str,
                                                 command: list[str]) -> None:
    path = current(home) / victim
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    result = invoke(*command, "--home", home)
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    # info notes a generated store's origin first; the error is the last line
    assert result.output.splitlines()[-1].startswith("Error: cannot read "), result.output
    assert victim in result.output and "curvekit fetch --force" in result.output
    assert "Traceback" not in result.output


def test_missing_and_unexpected_files_are_named(home: Path) -> None:
    snap = current(home)
    (snap / MEAS).unlink()
    stray = (snap / MEAS).with_name("x.parquet")
    stray.write_bytes((snap / TRIALS).read_bytes())
    problems = verify(Store.open(home)).problems
    assert any(p.startswith(f"{MEAS}: missing") for p in problems), problems
    assert any(p.startswith(f"{stray.relative_to(snap).as_posix()}: unexpected")
               for p in problems)


def _move_one_row(path: Path) -> None:
    """Give one row of a trial to the next trial, keeping the file well-formed."""
    table = pq.read_table(path)
    schema_meta = table.schema.metadata
    ids = table.column("trial_id").to_pylist()
    first = ids[0]
    moved = [i + 1 if n == 0 else i for n, i in enumerate(ids)]
    assert first + 1 in ids  # the next trial exists in this study
    table = table.set_column(table.schema.get_field_index("trial_id"), "trial_id",
                             pa.array(moved, table.column("trial_id").type))
    pq.write_table(table.replace_schema_metadata(schema_meta), path, compression="zstd")


def test_a_row_moved_between_trials_is_caught_by_the_per_trial_counts(home: Path) -> None:
    snap = current(home)
    path = snap / MEAS
    _move_one_row(path)
    # Record the new file's checksum, as an attacker (or a buggy writer) would: only the
    # per-trial row counts can catch it now; the study's total is unchanged.
    record = json.loads((snap / FILES_FILE).read_text())
    record["files"][MEAS] = {"size": path.stat().st_size, "digest": file_digest(path)}
    (snap / FILES_FILE).write_text(json.dumps(record))
    problems = verify(Store.open(home)).problems
    assert len(problems) == 2, problems
    assert all(p.startswith(f"{WORKLOAD} batch size 2 trial ") for p in problems)
    assert f"measurement rows of {METRICS[0]!r} (the metric counted), its trial record says" \
        in problems[0]


def _record(snap: Path, rel: str) -> None:
    """Record a file's current checksum, as an attacker (or a buggy writer) would."""
    record = json.loads((snap / FILES_FILE).read_text())
    path = snap / rel
    record["files"][rel] = {"size": path.stat().st_size, "digest": file_digest(path)}
    (snap / FILES_FILE).write_text(json.dumps(record))


def _write_by_metric(table: pa.Table, path: Path) -> None:
    """Write ``table`` (sorted by metric) with one row group per metric, its footer's
    key-value metadata kept, as curvekit's writer groups a large study."""
    names = table.column("metric").to_pylist()
    writer = pq.ParquetWriter(path, table.schema, compression="zstd")
    try:
        at = 0
        for name in dict.fromkeys(names):
            rows = names.count(name)
            writer.write_table(table.slice(at, rows))
            at += rows
        writer.add_key_value_metadata({k.decode(): v.decode() for k, v in
                                       (table.schema.metadata or {}).items()})
    finally:
        writer.close()


def test_row_groups_of_several_metrics_hold_whole_metrics() -> None:
    """Metrics share a row group only while it holds fewer than GROUP_ROWS rows, and a
    group is split only beyond MAX_GROUP_ROWS: so a shared group is never split, and the
    footer check may count ``n`` rows for each metric a group spans."""
    assert writer.MAX_GROUP_ROWS >= 2 * writer.GROUP_ROWS


def test_rows_moved_from_one_metric_to_another_are_caught_from_the_footer(home: Path) -> None:
    """A row of the last metric relabelled as another (total rows, evaluations and the
    counted metric unchanged; the checksum recorded again), in row groups of one metric
    each, moves a row group's bounds off its footer's parts: caught from the row groups'
    statistics."""
    snap = current(home)
    path = snap / MEAS
    table = pq.read_table(path)
    metrics = table.column("metric").to_pylist()
    names = list(dict.fromkeys(metrics))
    assert len(names) >= 3 and names == METRICS
    last = metrics.index(names[-1])  # the last metric's first row: becomes the one before
    relabelled = [names[-2] if i == last else m for i, m in enumerate(metrics)]
    table = table.set_column(table.schema.get_field_index("metric"), "metric",
                             pa.array(relabelled, pa.string()))
    _write_by_metric(table, path)
    _record(snap, MEAS)
    problems = verify(Store.open(home)).problems
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"{MEAS}: row group ")
    assert f"{names[-2]!r}" in problems[0] and f"{names[-1]!r}" in problems[0]
    assert "curvekit fetch --force" in problems[0]


def test_a_row_moved_in_another_metric_is_caught_by_the_digest(home: Path) -> None:
    """verify counts one metric per study; any byte of another metric's rows is vouched for
    by the file's digest (here not recorded again)."""
    snap = current(home)
    path = snap / MEAS
    table = pq.read_table(path)
    metrics = table.column("metric").to_pylist()
    ids = table.column("trial_id").to_pylist()
    last = metrics.index(metrics[-1])  # the last metric's first row
    assert ids[last] + 1 in ids[last:]
    moved = [i + 1 if n == last else i for n, i in enumerate(ids)]
    table = table.set_column(table.schema.get_field_index("trial_id"), "trial_id",
                             pa.array(moved, table.column("trial_id").type))
    _write_by_metric(table, path)
    problems = verify(Store.open(home)).problems
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"{MEAS}: damaged: its content differs from the checksum")


_METRIC_NAMES = st.lists(st.sampled_from(["a", "B", "step", "val/err", "VAL/ERR", "é", "z" * 9]),
                         unique=True, max_size=5)


@st.composite
def _evaluations(draw: st.DrawFn) -> Evaluations:
    """A study's evaluations as imports give them: trials of any length, repeated steps,
    and metrics logged at different steps (null elsewhere, NaN kept)."""
    names = draw(_METRIC_NAMES)
    lengths = draw(st.lists(st.integers(0, 40), min_size=1, max_size=6))
    ids = [t for t, k in enumerate(lengths) for _ in range(k)]
    steps = [s for k in lengths for s in sorted(draw(st.lists(st.integers(0, 50), min_size=k,
                                                              max_size=k)))]
    value = st.one_of(st.none(), st.just(math.nan), st.floats(0, 1))
    values = tuple(pa.array(draw(st.lists(value, min_size=len(ids), max_size=len(ids))),
                            pa.float64()) for _ in names)
    return Evaluations(pa.array(ids, pa.int64()), pa.array(steps, pa.int64()), tuple(names),
                       values)


@settings(max_examples=60, deadline=None)
@given(studies=st.lists(_evaluations(), min_size=1, max_size=3), group=st.integers(1, 64),
       data=st.data())
def test_every_file_the_writer_writes_has_its_rows_per_metric(
        tmp_path_factory: pytest.TempPathFactory, studies: list[Evaluations], group: int,
        data: st.DataObject) -> None:
    """The footer check accepts whatever the writer writes, whatever its files and row
    groups (small limits here stand for 65,536 and 1,048,576 rows); every row of every
    study is in the files, once; one row moved to another metric, in groups of one metric
    each, is caught."""
    folder = tmp_path_factory.mktemp("layout")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(writer, "GROUP_ROWS", group)
        # the writer's row groups of several metrics hold whole metrics because a group
        # splits at MAX_GROUP_ROWS only, at least twice GROUP_ROWS (checked below)
        patch.setattr(writer, "MAX_GROUP_ROWS", 2 * group + data.draw(st.integers(0, 64)))
        written = writer.write_workload_measurements(
            [(8 * (i + 1), rows) for i, rows in enumerate(studies)], folder, 3)
    assert written.evaluations == {8 * (i + 1): r.num_rows for i, r in enumerate(studies)}
    assert sorted(p.name for p in folder.iterdir()) == sorted(written.files)
    seen: dict[tuple[object, int], list[tuple[int, int, float | None]]] = {}
    for name, held in written.files.items():
        path = folder / name
        meta = pq.ParquetFile(path).metadata
        assert metric_layout(meta, path) is None
        table = pq.read_table(path)
        assert sorted(set(table.column("metric").drop_null().to_pylist())) == sorted(held)
        # verify's per-trial counts, over parts spanning and sharing row groups
        parts = footer_parts(meta, path)
        ids = table.column("trial_id").to_pylist()
        for part, (size, trials, runs) in zip(
                parts, _counted(pq.ParquetFile(path), parts), strict=True):
            want = [(t, len(list(g))) for t, g in
                    itertools.groupby(ids[part.start:part.start + part.rows])]
            assert size == part.batch_size
            assert list(zip(trials.tolist(), runs.tolist(), strict=True)) == want
        for row in table.to_pylist():
            seen.setdefault((row["metric"], row["batch_size"]), []).append(
                (row["trial_id"], row["step"], row["value"]))
    for i, rows in enumerate(studies):
        kept = [n for n, v in zip(rows.names, rows.values, strict=True)
                if v.null_count < len(v)]
        for name in kept or ([None] if rows.num_rows else []):
            values = (rows.values[rows.names.index(name)].to_pylist() if name is not None
                      else [None] * rows.num_rows)
            want = list(zip(rows.trial_id.to_pylist(), rows.step.to_pylist(), values,
                            strict=True))
            got = seen.pop((name, 8 * (i + 1)))
            assert [(t, s) for t, s, _ in got] == [(t, s) for t, s, _ in want]
            assert all((g is None and w is None) or g == w or (g != g and w != w)
                       for (_, _, g), (_, _, w) in zip(got, want, strict=True))
    assert not seen
    shared = [n for n, held in written.files.items() if len(held) >= 2]
    if shared:
        path = folder / shared[0]
        table = pq.read_table(path)
        kept = list(dict.fromkeys(table.column("metric").to_pylist()))
        source, target = data.draw(st.sampled_from(
            [(a, b) for a in kept for b in kept if a != b]))
        names = table.column("metric").to_pylist()
        at = names.index(source)
        names[at] = target
        order = sorted(range(len(names)), key=lambda i: (names[i], i))
        _write_by_metric(table.set_column(table.schema.get_field_index("metric"), "metric",
                                          pa.array(names, pa.string())).take(order), path)
        problem = metric_layout(pq.ParquetFile(path).metadata, path)
        assert problem is not None and "row group" in problem


def test_a_row_moved_to_another_study_inside_a_row_group_is_caught(home: Path) -> None:
    """A row of the counted metric relabelled with the batch size of another study in the
    same row group leaves every footer record and statistic as it was (the checksum
    recorded again): the counted rows' batch sizes catch it."""
    snap = current(home)
    path = snap / MEAS
    reader = pq.ParquetFile(path)
    table = reader.read()
    sizes = table.column("batch_size").to_pylist()
    metrics = table.column("metric").to_pylist()
    first = [i for i, m in enumerate(metrics) if m == METRICS[0]]
    studies = sorted({sizes[i] for i in first})
    assert len(studies) >= 2 and reader.metadata.num_row_groups == 1
    moved = first[0]  # the first study's first row, given the next study's batch size
    sizes[moved] = studies[1]
    table = table.set_column(table.schema.get_field_index("batch_size"), "batch_size",
                             pa.array(sizes, table.column("batch_size").type))
    pq.write_table(table, path, compression="zstd")
    _record(snap, MEAS)
    problems = verify(Store.open(home)).problems
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"{MEAS}: unreadable Parquet file (rows 0 to ")
    assert f"batch size {studies[0]}, hold batch sizes {sorted(studies[:2])}" in problems[0]


def test_rows_that_do_not_decode_are_named_unreadable(home: Path) -> None:
    """A file whose footer reads but whose pages do not (its checksum recorded again) is
    named as unreadable, with the repair; the other files are still checked."""
    snap = current(home)
    path = snap / MEAS
    data = bytearray(path.read_bytes())
    for at in range(4, 64):  # the first data page's bytes, after the magic
        data[at] ^= 0xFF
    path.write_bytes(bytes(data))
    pq.ParquetFile(path).metadata  # noqa: B018 - the footer still reads
    _record(snap, MEAS)
    problems = verify(Store.open(home)).problems
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"{MEAS}: unreadable Parquet file (")
    assert "curvekit fetch --force" in problems[0]


def test_rows_of_an_added_workload_that_do_not_decode_say_add_it_again(home: Path) -> None:
    """The repair of a file whose pages do not decode is that of its workload: an added
    workload is added again, not the release converted again."""
    add_workload(home, workload())
    snap = current(home)
    rel = next((snap / "measurements" / "base_dir=my_data").rglob("*.parquet")
               ).relative_to(snap).as_posix()
    data = bytearray((snap / rel).read_bytes())
    for at in range(4, 40):  # the first data page's bytes, after the magic
        data[at] ^= 0xFF
    (snap / rel).write_bytes(bytes(data))
    _record(snap, rel)
    problems = verify(Store.open(home)).problems
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"{rel}: unreadable Parquet file (")
    assert "add my_data/mlp_64/momentum again" in problems[0]


def test_a_store_without_checksums_says_it_cannot_be_checked(home: Path) -> None:
    (current(home) / FILES_FILE).unlink()
    problems = verify(Store.open(home)).problems
    assert len(problems) == 1 and "no checksums recorded" in problems[0]


def test_damage_in_an_added_workload_says_add_it_again(home: Path) -> None:
    add_workload(home, workload())
    snap = current(home)
    assert verify(Store.open(home)).ok
    victim = next((snap / "measurements" / "base_dir=my_data").rglob("*.parquet"))
    data = bytearray(victim.read_bytes())
    data[8] ^= 0x01  # in the first column chunk: a small file is mostly footer
    victim.write_bytes(bytes(data))
    problems = verify(Store.open(home)).problems
    assert any("damaged" in p and "add my_data/mlp_64/momentum again" in p for p in problems)
    # fetch carries added workloads with the checksums recorded when they were written:
    # the damage is carried as damage, not blessed by hashing the file again
    convert(home.parent / "tiny.tar.bz2", home)
    assert any("damaged" in p for p in verify(Store.open(home)).problems)


# -- readers and writers at the same time --------------------------------------------------


def test_a_reader_keeps_its_snapshot_until_it_closes(home: Path) -> None:
    old = Store.open(home)
    before = curvekit.best(old, curvekit.Selection(WORKLOAD, METRIC))
    archive = write_archive(home.parent / "b.tar.bz2", small_members())
    convert(archive, home)  # swaps the link; the old snapshot is leased: kept
    assert old.path.exists() and old.path != current(home)
    assert curvekit.best(old, curvekit.Selection(WORKLOAD, METRIC)).equals(before)
    assert old.sql("select count(*) from trials").item() == 48
    with Store.open(home) as new:
        assert new.sql("select count(*) from trials").item() == 4
    old.close()
    old.close()  # idempotent
    with pytest.raises(StoreError, match="was closed"):
        old.sql("select 1")
    convert(archive, home)  # the next writer removes what no reader holds any more
    assert snapshots(home) == [current(home).name]


# The swapper converts one archive after the other into the same home, each time once the
# reader says "go", and says "swapped" when the new store is in place: every round's swap
# runs while the reader queries, and the reader sees every round's store, however the two
# processes are scheduled.
_SWAPPER = """
import sys
from curvekit.store.build import convert
home, archives, rounds = sys.argv[1], sys.argv[2:4], int(sys.argv[4])
for n in range(rounds):
    assert sys.stdin.readline() == "go\\n"
    convert(archives[n % 2], home)
    print("swapped", flush=True)
"""


def _answer(store: Store) -> tuple[Any, ...]:
    row = store.sql("select count(*), sum(step), sum(trial_id) from measurements").row(0)
    best = curvekit.best(store, curvekit.Selection("mnist/fc_1024/sgd", METRIC))
    return (*row, tuple(best["trial_id"].to_list()), store.trials("mnist/fc_1024/sgd").height)


def test_queries_during_repeated_swaps_never_fail_nor_mix(tmp_path: Path) -> None:
    home = tmp_path / "home"
    archives = [write_archive(tmp_path / "a.tar.bz2", small_members()),
                write_archive(tmp_path / "b.tar.bz2", small_members(trials=(1, 2, 3, 5)))]
    expected = set()
    for n, archive in enumerate(archives):
        convert(archive, tmp_path / f"h{n}")
        with Store.open(tmp_path / f"h{n}") as s:
            expected.add(_answer(s))
    assert len(expected) == 2
    convert(archives[0], home)
    long_lived = Store.open(home)
    first = _answer(long_lived)
    count = "select count(*), sum(step) from measurements"
    first_count = long_lived.sql(count).row(0)
    rounds = 16
    proc = subprocess.Popen([sys.executable, "-c", _SWAPPER, str(home), *map(str, archives),
                             str(rounds)], env={**os.environ, "PYTHONPATH": os.getcwd()},
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdin is not None and proc.stdout is not None
    swapped = threading.Semaphore(0)
    said: list[str] = []

    def listen(stdout: IO[str]) -> None:
        for line in stdout:
            said.append(line)
            swapped.release()
        swapped.release()  # the swapper is gone: wake the reader

    listener = threading.Thread(target=listen, args=(proc.stdout,), daemon=True)
    listener.start()
    answers, errors, opened = [], [], set()

    def query() -> None:
        try:
            with Store.open(home) as fresh:
                opened.add(fresh.path.name)
                answers.append(_answer(fresh))
            assert long_lived.sql(count).row(0) == first_count
        except Exception as exc:  # every failure is counted, none may happen
            errors.append(repr(exc))

    try:
        for _ in range(rounds):
            before = Store.open(home)  # opened before the swap, queried after it
            proc.stdin.write("go\n")
            proc.stdin.flush()
            query()  # while the swapper converts (at least one query per round)
            while not swapped.acquire(blocking=False):
                query()
            query()  # the round's new store
            try:
                answers.append(_answer(before))
            except Exception as exc:
                errors.append(repr(exc))
            before.close()
        proc.stdin.close()
    finally:
        assert proc.wait(timeout=PATIENCE) == 0
        listener.join(timeout=PATIENCE)
    assert said == ["swapped\n"] * rounds
    assert errors == []
    assert len(answers) >= 3 * rounds
    assert len(opened) > rounds  # each round's query after its swap opened its new store
    assert _answer(long_lived) == first
    assert set(answers) <= expected
    print(f"{len(answers)} answers from {len(opened)} snapshots during {rounds} swaps")
    long_lived.close()
    convert(archives[0], home)
    assert snapshots(home) == [current(home).name]


_KILL_AT_SWAP = """
import os, signal, sys
import curvekit.store.transaction as transaction
from curvekit.store.build import convert
def killed(src, dst):
    os.kill(os.getpid(), signal.SIGKILL)
transaction.os.replace = killed  # the new snapshot is renamed into place, the link not swapped
convert(sys.argv[1], sys.argv[2])
"""


def test_snapshot_orphaned_by_a_kill_at_the_swap_is_removed_next_time(
        home: Path, make_archive: Callable[..., Path]) -> None:
    before = snapshot(home)
    proc = subprocess.run([sys.executable, "-c", _KILL_AT_SWAP, str(make_archive()),
                           str(home)], env={**os.environ, "PYTHONPATH": os.getcwd()},
                          check=False)
    assert proc.returncode == -signal.SIGKILL
    assert len(snapshots(home)) == 2  # the orphan, complete but never linked
    assert list(home.glob(".store-*"))  # and the link it never swapped in
    kept = {k: v for k, v in snapshot(home).items() if k.startswith(("store/", "<link>"))}
    assert kept == {k: v for k, v in before.items() if k.startswith(("store/", "<link>"))}
    assert verify(Store.open(home)).ok
    convert(make_archive(), home)
    assert snapshots(home) == [current(home).name]
    assert not list(home.glob(".store-*"))


def test_only_folders_curvekit_made_are_removed(home: Path) -> None:
    mine = home / "stores" / "previous-1a2b3c4d"  # a store moved aside by hand
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    convert(home.parent / "tiny.tar.bz2", home)
    assert (mine / "notes.txt").read_text() == "keep me"


def test_lease_file_and_checksums_are_not_shared_between_snapshots(home: Path) -> None:
    add_workload(home, workload())
    old = Store.open(home)
    add_workload(home, workload(scale=0.5), replace=True)
    new = current(home)
    for name in (LEASE_FILE, FILES_FILE):
        assert (old.path / name).stat().st_ino != (new / name).stat().st_ino
    old.close()
    assert verify(Store.open(home)).ok


# -- full disks and read-only homes --------------------------------------------------------


def _fill_disk_after(monkeypatch: pytest.MonkeyPatch, calls: int) -> None:
    """Make the store writer's Parquet writes hit a full disk after ``calls`` of them."""
    real = pq.write_table
    count = iter(range(10**6))

    def write(table: Any, where: Any, **options: Any) -> None:
        if next(count) < calls:
            real(table, where, **options)
            return
        Path(where).write_bytes(b"PAR1 half a file")  # what got written before it filled
        # the error pyarrow raises when a write meets a full disk (errno set, no file name)
        raise OSError(errno.ENOSPC, "Error writing bytes to file. Detail: [errno 28] No space "
                                    "left on device")

    monkeypatch.setattr(pq, "write_table", write)  # the module the store writer calls


def test_disk_full_during_fetch_force_keeps_the_store(home: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    before = snapshot(home)
    _fill_disk_after(monkeypatch, 3)
    archive = home.parent / "tiny.tar.bz2"
    manifest = home.parent / "m.json"
    manifest.write_text((current(home) / "_manifest.json").read_text())
    result = invoke("fetch", "--home", home, "--archive", archive, "--manifest", manifest,
                    "--force", "--quiet")
    assert result.exit_code == 1
    message = result.output
    assert message.startswith(f"Error: converting tiny.tar.bz2 failed: no space left on the "
                              f"disk holding {home}")
    assert " needed, " in message and " free." in message
    assert "left as it was" in message
    assert snapshot(home) == before
    assert not list((home / "stores").glob(".staging-*"))


def test_disk_full_during_add_keeps_the_store(home: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    before = snapshot(home)
    _fill_disk_after(monkeypatch, 1)
    with pytest.raises(StoreError, match=r"adding my_data/mlp_64/momentum failed: no space "
                                         r"left .* about [\d.]+ MB needed, .* free"):
        add_workload(home, workload())
    assert snapshot(home) == before
    assert not list((home / "stores").glob(".staging-*"))


def test_read_only_home_is_a_clear_error(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = snapshot(home)
    real = os.open

    def denied(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        # as a read-only home answers (root ignores chmod, so it is simulated here)
        if str(path).startswith(str(home)) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", denied)
    with pytest.raises(StoreError, match=r"adding my_data/mlp_64/momentum failed: cannot "
                                         r"write to .*Permission denied.*--home"):
        add_workload(home, workload())
    monkeypatch.undo()
    assert snapshot(home) == before
