"""TensorBoard event files: framing, checksums and steps are checked as TensorBoard's own
reader checks them (docs/security.md, "`curvekit add`: TensorBoard event files").

A damaged record is an error naming the file and the record's byte offset; a file that ends
inside a record is read up to it, with a warning that names the offset and the bytes left
unread; a step outside 0 ... 2**63 - 1 is refused. Files come from the real writers
(tensorboardX, tensorboard's ``EventFileWriter``), hand-crafted damaged bytes and
hypothesis-generated record streams."""

from __future__ import annotations

import struct
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from curvekit.errors import IngestError, IngestWarning
from curvekit.ingest.tensorboard import read_tensorboard_runs
from curvekit.ingest.tfrecord import (
    MAX_RECORD,
    crc32c,
    masked_crc32c,
    masked_crc32c_many,
    record,
)
from tests.deadline import deadline

EVENTS = "events.out.tfevents.1.host"


def _varint(n: int) -> bytes:
    out = b""
    while True:
        out += bytes([n & 0x7F | (0x80 if n > 0x7F else 0)])
        n >>= 7
        if not n:
            return out


def _event(step: int | bytes, value: float, tag: str = "loss") -> bytes:
    """A scalar Event: wall_time, step (an int, or the raw varint bytes), simple_value."""
    value_msg = b"\x0a" + _varint(len(tag)) + tag.encode() + b"\x15" + struct.pack("<f", value)
    summary = b"\x0a" + _varint(len(value_msg)) + value_msg
    raw = step if isinstance(step, bytes) else _varint(step)
    return (b"\x09" + struct.pack("<d", 1.7e9) + b"\x10" + raw
            + b"\x2a" + _varint(len(summary)) + summary)


def _offsets(data: bytes) -> list[int]:
    """The byte offset of every record of a well-framed file."""
    out, pos = [], 0
    while pos < len(data):
        out.append(pos)
        pos += 16 + struct.unpack_from("<Q", data, pos)[0]
    return out


def _write(tmp_path: Path, data: bytes) -> Path:
    run = tmp_path / "logs" / "run"
    run.mkdir(parents=True, exist_ok=True)
    (run / EVENTS).write_bytes(data)
    return run / EVENTS


def _points(tmp_path: Path) -> list[tuple[int, float]]:
    frame = read_tensorboard_runs(tmp_path / "logs")[0].frame
    return [(s, v) for s, v in frame.rows()]


def _tensorboardx_file(tmp_path: Path, steps: list[int]) -> Path:
    tbx = pytest.importorskip("tensorboardX")
    writer = tbx.SummaryWriter(str(tmp_path / "logs" / "run"))
    for step in steps:
        writer.add_scalar("loss", 1.0 / (1 + step), step)
    writer.close()
    return next((tmp_path / "logs" / "run").glob("events.out.tfevents.*"))


# -- steps ---------------------------------------------------------------------------------

@pytest.mark.parametrize("step", [-5, -(2**63)])
def test_a_negative_step_written_by_tensorboard_is_refused(tmp_path: Path, step: int) -> None:
    """security.md: a step outside 0 ... 2**63 - 1 (an Event's int64 step below 0; 2**63
    is -2**63 as written) is refused, naming the file, the record and its byte offset;
    before, -5 was stored and erased the earlier points, and 2**63 became -2**63."""
    pytest.importorskip("tensorboard")
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    writer = EventFileWriter(str(tmp_path / "logs" / "run"))
    for s in (0, 100, 200, step, 300):
        value = summary_pb2.Summary.Value(tag="loss", simple_value=0.5)
        writer.add_event(event_pb2.Event(wall_time=1.7e9, step=s,
                                         summary=summary_pb2.Summary(value=[value])))
    writer.close()
    path = next((tmp_path / "logs" / "run").glob("events.out.tfevents.*"))
    offset = _offsets(path.read_bytes())[4]  # the file_version record, then 0, 100, 200
    with pytest.raises(IngestError) as info:
        read_tensorboard_runs(tmp_path / "logs")
    assert str(info.value).startswith(f"{path}, line 5: record 5 (byte {offset}) is not a "
                                      f"valid Event: its step is {step} (an int64; "
                                      f"{step % 2**64} as written), and steps are 0 ... "
                                      "2**63 - 1"), info.value


@pytest.mark.parametrize("raw", [_varint(2**64), _varint(2**70), b"\xff" * 10 + b"\x01",
                                 b"\x80" * 12], ids=["2^64", "2^70", "11-bytes", "unended"])
def test_a_step_varint_beyond_64_bits_is_refused(tmp_path: Path, raw: bytes) -> None:
    """security.md: a varint that does not fit in 64 bits (or runs past 10 bytes) is a
    damaged Event: an error naming the file and offset, never a traceback or a step of 0."""
    data = record(_event(0, 0.5)) + record(_event(raw, 0.25))
    path = _write(tmp_path, data)
    with pytest.raises(IngestError, match=rf"record 2 \(byte {_offsets(data)[1]}\) is not a "
                       r"valid Event: a varint (beyond 64 bits|longer than 10 bytes)"):
        read_tensorboard_runs(tmp_path / "logs")
    assert path.exists()


def test_the_largest_step_is_kept_exactly(tmp_path: Path) -> None:
    """security.md: steps up to 2**63 - 1 are stored as written."""
    _write(tmp_path, b"".join(record(_event(s, 0.5)) for s in (0, 2**53 + 1, 2**63 - 1)))
    assert [s for s, _ in _points(tmp_path)] == [0, 2**53 + 1, 2**63 - 1]


# -- framing and checksums -----------------------------------------------------------------

def test_a_huge_length_in_the_middle_is_an_error_naming_its_offset(tmp_path: Path) -> None:
    """security.md: a record claiming more than ``MAX_RECORD`` bytes (here 2**40, with a
    valid length checksum) is refused naming the file and its byte offset; before, the
    reader stopped there in silence and 15 of 20 points were lost."""
    head = struct.pack("<Q", 1 << 40)
    first = b"".join(record(_event(s, 0.5)) for s in range(5))
    data = first + head + struct.pack("<I", masked_crc32c(head)) + b"".join(
        record(_event(s, 0.5)) for s in range(5, 20))
    path = _write(tmp_path, data)
    with pytest.raises(IngestError) as info:
        read_tensorboard_runs(tmp_path / "logs")
    assert str(info.value).startswith(
        f"{path}, line 6: record 6 (byte {len(first)}) claims 1,099,511,627,776 bytes, more "
        f"than the {MAX_RECORD:,} a record may hold"), info.value


def test_a_length_past_the_end_reads_the_prefix_with_a_warning(tmp_path: Path) -> None:
    """security.md: a length that points past the end of the file cannot be told from a
    record cut short: the records before it are read, and a warning names the offset and
    the bytes left unread (never in silence)."""
    head = struct.pack("<Q", 10_000)
    first = b"".join(record(_event(s, 0.5)) for s in range(5))
    rest = b"".join(record(_event(s, 0.5)) for s in range(5, 20))
    path = _write(tmp_path, first + head + struct.pack("<I", masked_crc32c(head)) + rest)
    with pytest.warns(IngestWarning) as caught:
        points = _points(tmp_path)
    assert [s for s, _ in points] == [0, 1, 2, 3, 4]
    message = str(caught[0].message)
    assert message.startswith(f"{path}: the file ends inside record 6 (byte {len(first)}): "
                              f"it holds {12 + len(rest):,} of its 10,016 bytes; read the 5 "
                              "records before it"), message


def test_a_record_cut_short_by_a_killed_writer_warns(tmp_path: Path) -> None:
    """security.md: a file that ends inside its last record (a run still writing, or
    killed while writing) is read up to that record, with a warning."""
    path = _tensorboardx_file(tmp_path, list(range(0, 1000, 100)))
    data = path.read_bytes()
    path.write_bytes(data[:-7])
    with pytest.warns(IngestWarning, match=rf"{path.name}: the file ends inside record 11 "
                      rf"\(byte {_offsets(data)[-1]}\)"):
        points = _points(tmp_path)
    assert [s for s, _ in points] == list(range(0, 900, 100))


def test_every_records_data_checksum_is_verified(tmp_path: Path) -> None:
    """security.md: the checksum of every record's data is verified (before, only when an
    optional package was installed): a changed value is an error naming the record's
    offset, not a different curve."""
    path = _tensorboardx_file(tmp_path, list(range(0, 1000, 100)))
    data = bytearray(path.read_bytes())
    offset = _offsets(bytes(data))[4]
    data[offset + 16 + 8 + 10] ^= 0x01  # inside the Event, well before its checksum
    path.write_bytes(bytes(data))
    with pytest.raises(IngestError, match=rf"{path.name}, line 5: record 5 \(byte {offset}\) "
                       r"fails its checksum"):
        read_tensorboard_runs(tmp_path / "logs")


# -- generated streams: cut anywhere, flip any bit, any event bytes ------------------------

_STREAM = st.lists(st.tuples(st.integers(0, 2**20), st.floats(-1e6, 1e6, width=32),
                             st.sampled_from(["loss", "val/error", "x" * 130])),
                   min_size=1, max_size=25)


def _stream(events: list[tuple[int, float, str]]) -> tuple[bytes, list[int]]:
    """The records of ``events`` (step increments, value, tag) and their steps: steps never
    go back, and a tag is logged at most once per step (a second value of a tag at its last
    step replaces the first, with a warning of its own, which is not what these tests test)."""
    steps = np.cumsum([s for s, _, _ in events]).tolist()  # increasing: no step goes back
    kept = list({(int(s), t): (int(s), v, t)
                 for s, (_, v, t) in zip(steps, events, strict=True)}.values())
    data = b"".join(record(_event(s, v, t)) for s, v, t in kept)
    return data, [s for s, _, _ in kept]


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(events=_STREAM, cut=st.floats(0, 1, exclude_max=True))
@example(events=[(0, 0.0, "loss")] * 3, cut=0.75)  # one tag logged thrice at one step
def test_a_stream_cut_anywhere_reads_the_complete_records(
        tmp_path_factory: pytest.TempPathFactory, events: list[tuple[int, float, str]],
        cut: float) -> None:
    """security.md: a file cut at any byte gives exactly the points of the records before
    the cut, with a warning when the cut falls inside a record; never another exception."""
    tmp = tmp_path_factory.mktemp("cut")
    data, steps = _stream(events)
    at = int(cut * len(data))
    _write(tmp, data[:at])
    starts = _offsets(data)
    complete = sum(1 for s in [*starts[1:], len(data)] if s <= at)
    with deadline(60), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        runs = read_tensorboard_runs(tmp / "logs")
    got = sorted({s for r in runs for s in r.frame.get_column("step").to_list()})
    assert got == sorted(set(steps[:complete]))
    inside = at not in (*starts, len(data))
    assert [str(w.message).split(": the file ends inside record")[1].split(" (byte ")[1]
            .split(")")[0] for w in caught] == ([str(starts[complete])] if inside else [])


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(events=_STREAM, where=st.floats(0, 1, exclude_max=True), bit=st.integers(0, 7))
def test_a_bit_flipped_anywhere_is_an_error_naming_its_record(
        tmp_path_factory: pytest.TempPathFactory, events: list[tuple[int, float, str]],
        where: float, bit: int) -> None:
    """security.md: one bit changed anywhere in a file is an error naming the file and the
    byte offset of the record that holds it (length, data or either checksum)."""
    tmp = tmp_path_factory.mktemp("flip")
    data, _ = _stream(events)
    at = int(where * len(data))
    flipped = bytearray(data)
    flipped[at] ^= 1 << bit
    path = _write(tmp, bytes(flipped))
    starts = _offsets(data)
    n = sum(1 for s in starts if s <= at)
    with deadline(60), pytest.raises(IngestError) as info:
        read_tensorboard_runs(tmp / "logs")
    assert str(info.value).startswith(f"{path}, line {n}: record {n} (byte {starts[n - 1]}) "
                                      ), info.value


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.binary(max_size=200))
def test_any_event_bytes_are_read_or_refused_by_name(tmp_path_factory: pytest.TempPathFactory,
                                                     body: bytes) -> None:
    """security.md: whatever a well-framed record holds, the reader returns runs or raises
    an error naming the file and the record: never another exception, never a hang."""
    tmp = tmp_path_factory.mktemp("body")
    first = record(_event(1, 0.5))
    path = _write(tmp, first + record(body))
    try:
        with deadline(60):
            read_tensorboard_runs(tmp / "logs")
    except IngestError as exc:
        assert str(exc).startswith(f"{path}, line 2: record 2 (byte {len(first)}) is not a "
                                   "valid Event: "), exc


def _field(number: int, wire: int, payload: bytes | int) -> bytes:
    key = _varint(number << 3 | wire)
    if wire == 0:
        value = payload if isinstance(payload, int) else int.from_bytes(payload[:9], "little")
        return key + _varint(value)
    data = payload if isinstance(payload, bytes) else b""
    if wire == 2:
        return key + _varint(len(data)) + data
    return key + (data + bytes(8))[:8 if wire == 1 else 4]


def _message(children: st.SearchStrategy[bytes]) -> st.SearchStrategy[bytes]:
    """Fields of the numbers Event, Summary, Value, TensorProto and the hparams plugin
    use, of any wire type, holding numbers, bytes or nested messages."""
    field = st.builds(_field, st.integers(1, 10), st.sampled_from([0, 1, 2, 5]),
                      st.one_of(st.integers(0, 2**64 - 1), st.binary(max_size=12), children))
    return st.lists(field, max_size=5).map(b"".join)


_EVENTS = st.recursive(st.binary(max_size=8), _message, max_leaves=30)


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=_EVENTS)
def test_any_nested_fields_are_read_or_refused_by_name(
        tmp_path_factory: pytest.TempPathFactory, body: bytes) -> None:
    """security.md: Events of any shape (summaries, tensors, hparams of any wire types and
    nesting) are read or refused naming the file and record: never another exception."""
    tmp = tmp_path_factory.mktemp("nested")
    first = record(_event(1, 0.5))
    path = _write(tmp, first + record(body) + record(_event(2, 0.25)))
    try:
        with deadline(60), warnings.catch_warnings():
            warnings.simplefilter("ignore", IngestWarning)
            read_tensorboard_runs(tmp / "logs")
    except IngestError as exc:
        assert str(exc).startswith(f"{path}, line 2: record 2 (byte {len(first)}) is not a "
                                   "valid Event: "), exc


@given(data=st.binary(max_size=3000), cuts=st.lists(st.integers(0, 3000), max_size=8))
def test_the_vectorised_checksum_is_the_checksum(data: bytes, cuts: list[int]) -> None:
    """The numpy CRC-32C of many pieces at once equals the byte-by-byte reference."""
    bounds = sorted({0, len(data), *(min(c, len(data)) for c in cuts)})
    starts = np.array(bounds[:-1], np.int64)
    lengths = np.diff(bounds).astype(np.int64)
    got = masked_crc32c_many(data, starts, lengths)
    want = [((c >> 15 | c << 17) + 0xA282EAD8) & 0xFFFFFFFF
            for c in (crc32c(data[s:s + n]) for s, n in zip(bounds, lengths, strict=False))]
    assert [int(x) for x in got] == want


@pytest.mark.parametrize("size", [4, 1023, 1024, 1025, 1027, 4096 * 3 + 1, 1 << 20])
def test_the_checksum_of_long_pieces(size: int) -> None:
    """Long pieces are cut into lanes whose checksums are joined: the result is the
    reference checksum for every length around the lane size."""
    data = np.random.default_rng(size).integers(0, 256, size + 7, dtype=np.uint8).tobytes()
    got = masked_crc32c_many(data, np.array([7]), np.array([size]))
    c = crc32c(data[7:])
    assert int(got[0]) == ((c >> 15 | c << 17) + 0xA282EAD8) & 0xFFFFFFFF
