"""Readers in linear time and bounded memory (docs/security.md, "`curvekit add`: time and
memory"): the attacks that made them quadratic or hold a whole file are replayed at sizes
where the old code takes minutes (or a file's size in memory) and the fixed code a second
(or a few megabytes). Also: W&B Parquet histories whose step column holds floats."""

from __future__ import annotations

import struct
import tracemalloc
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from curvekit.errors import ArchiveError, IngestError, IngestWarning
from curvekit.ingest.add import add, build
from curvekit.ingest.tensorboard import read_tensorboard_runs
from curvekit.ingest.tfrecord import BLOCK, record
from curvekit.ingest.wandb import read_wandb_runs
from curvekit.release.csvparse import MAX_COLUMNS
from curvekit.store.build import convert
from tests.conftest import ROOT, small_members, snapshot, write_archive
from tests.deadline import deadline

EVENTS = "events.out.tfevents.1.host"


def _varint(n: int) -> bytes:
    out = b""
    while True:
        out += bytes([n & 0x7F | (0x80 if n > 0x7F else 0)])
        n >>= 7
        if not n:
            return out


def _scalar(step: int, tag: str = "loss", value: float = 0.5) -> bytes:
    value_msg = b"\x0a" + _varint(len(tag)) + tag.encode() + b"\x15" + struct.pack("<f", value)
    summary = b"\x0a" + _varint(len(value_msg)) + value_msg
    return b"\x10" + _varint(step) + b"\x2a" + _varint(len(summary)) + summary


def _run(tmp_path: Path, data: bytes) -> Path:
    run = tmp_path / "logs" / "run"
    run.mkdir(parents=True)
    (run / EVENTS).write_bytes(data)
    return tmp_path / "logs"


# -- TensorBoard ---------------------------------------------------------------------------

def test_steps_that_go_back_are_read_in_linear_time(tmp_path: Path) -> None:
    """security.md: a step that goes back finds its place by bisection. 40,000 steps then
    40,000 repeats of the last took minutes when each repeat rescanned the history."""
    n = 40_000
    repeat = record(_scalar(n - 1))
    logs = _run(tmp_path, b"".join(record(_scalar(s)) for s in range(n)) + repeat * n)
    with deadline(60), pytest.warns(IngestWarning, match=f"{n} of 'loss'"):
        frame = read_tensorboard_runs(logs)[0].frame
    assert frame.height == n and frame.get_column("step").to_list()[-1] == n - 1


def test_restarts_over_many_tags_are_read_in_linear_time(tmp_path: Path) -> None:
    """security.md: a restart (SessionLog.START) is applied to a tag when it is next
    touched. 5,000 tags then 100,000 restarts took minutes when each restart walked every
    tag's points; the points before the restarts' step stay."""
    tags = b"".join(record(_scalar(1, f"tag{i}")) for i in range(5_000))
    restart = record(b"\x10" + _varint(1_000_000) + b"\x3a\x02\x08\x01")
    logs = _run(tmp_path, tags + restart * 100_000 + record(_scalar(2_000_000, "tag7")))
    with deadline(60):
        frame = read_tensorboard_runs(logs)[0].frame
    assert frame.width == 5_001 and frame.get_column("step").to_list() == [1, 2_000_000]


def test_restarts_drop_the_points_from_their_step_on(tmp_path: Path) -> None:
    """The lazy restarts keep TensorBoard's rule: every tag loses its points from the
    restart's step on, whenever the tag is touched again (or never)."""
    events = [_scalar(s, t) for s in (0, 100, 200, 300) for t in ("a", "b")]
    events += [b"\x10" + _varint(200) + b"\x3a\x02\x08\x01", _scalar(250, "a"),
               b"\x10" + _varint(400) + b"\x3a\x02\x08\x01",
               b"\x10" + _varint(100) + b"\x3a\x02\x08\x01", _scalar(150, "b")]
    logs = _run(tmp_path, b"".join(record(e) for e in events))
    with pytest.warns(IngestWarning, match=r"steps go back.*4 of 'a', 3 of 'b'"):
        frame = read_tensorboard_runs(logs)[0].frame
    assert frame.rows() == [(0, 0.5, 0.5), (150, None, 0.5)]


@pytest.mark.slow
def test_an_event_file_is_read_in_bounded_memory(tmp_path: Path) -> None:
    """security.md: an event file is read a block at a time: 48 MiB of 512 KiB records
    (an image-sized event each) peak at a few MiB of Python memory, not the file's size
    (before: the whole file, 1.1 GB for a 1 GiB file)."""
    blob = b"\x10\x05\xfa\x01" + _varint(512 << 10) + bytes(512 << 10)  # step, unknown field
    chunk = record(blob) * 8
    logs = _run(tmp_path, b"")
    with open(logs / "run" / EVENTS, "wb") as fh:
        for _ in range(12):
            fh.write(chunk)
        fh.write(record(_scalar(7)))
    tracemalloc.start()
    try:
        frame = read_tensorboard_runs(logs)[0].frame
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert frame.rows() == [(7, 0.5)]
    assert peak < 8 * BLOCK, f"peak {peak / 2**20:.1f} MiB"


# -- the release's measurements.csv header -------------------------------------------------

def _wide(columns: int) -> dict[str, bytes]:
    members = small_members(batch_sizes=(8,), trials=(1,))
    header = "step," + ",".join(f"m{i}" for i in range(columns - 1))
    members[f"{ROOT}/mnist/fc_1024/sgd/8/1/measurements.csv"] = (
        header + "\n0" + ",1" * (columns - 1) + "\n").encode()
    return members


def test_a_header_of_200000_columns_is_refused_at_once(tmp_path: Path) -> None:
    """security.md: the release reader checks a measurements.csv header in linear time and
    refuses more than 10,000 columns, for ``fetch`` (the converter) and ``add`` alike; a
    small archive of 200,000 columns took over a minute (quadratic) before. The store is
    left as it was."""
    archive = write_archive(tmp_path / "wide.tar.bz2", _wide(200_000))
    home = tmp_path / "home"
    add(write_archive(tmp_path / "ok.tar.bz2", small_members()), name="mine/first/sgd",
        home=home)
    before = snapshot(home)
    with deadline(60), pytest.raises(IngestError, match="the header has 200,000 columns"):
        add(archive, name="mine/wide/sgd", home=home)
    assert snapshot(home) == before
    with deadline(60), pytest.raises(ArchiveError, match=f"at most {MAX_COLUMNS:,} in all"):
        convert(archive, tmp_path / "converted")


def test_a_header_of_the_most_columns_is_read(tmp_path: Path) -> None:
    """security.md: a header of exactly 10,000 columns is within the limit."""
    data = build(write_archive(tmp_path / "w.tar.bz2", _wide(MAX_COLUMNS)), name="m/w/sgd")
    (table,) = data.measurements.values()
    assert table.num_columns == MAX_COLUMNS


# -- W&B Parquet histories with a float step -----------------------------------------------

def _parquet(tmp_path: Path, steps: list[float | None]) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"_step": pa.array(steps, pa.float64()),
                             "val_loss": [1.0] * len(steps)}), tmp_path / "run.parquet")
    return tmp_path


def test_a_float_step_column_of_whole_numbers_is_read_exactly(tmp_path: Path) -> None:
    """security.md: a Parquet history whose ``_step`` holds floats: whole values are read
    as the integers they are (2**53 + 2 and 2**62 exactly); before, any float step column
    with a value Arrow could not cast gave a traceback."""
    runs = read_wandb_runs(_parquet(tmp_path, [0.0, 2.0**53 + 2, 2.0**62]))
    assert runs[0].frame.get_column("step").to_list() == [0, 2**53 + 2, 2**62]


@pytest.mark.parametrize(("value", "expected"), [
    (100.5, "step 100.5 is not a whole number"),
    (float("nan"), "step nan is not a whole number"),
    (float("inf"), "step inf is not a whole number"),
    (2.0**63, r"step 9\.223372036854776e\+18 is beyond 2\*\*63 - 1"),
])
def test_a_float_step_that_is_no_step_is_refused(tmp_path: Path, value: float,
                                                 expected: str) -> None:
    """security.md: a fractional, NaN, infinite or too large float step is refused naming
    the file, its row and the value (before: AttributeError)."""
    source = _parquet(tmp_path, [0.0, value])
    with pytest.raises(IngestError, match=rf"run\.parquet, line 2: {expected}"):
        read_wandb_runs(source)
