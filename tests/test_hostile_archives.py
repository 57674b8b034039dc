"""Hostile archives end quickly, in bounded memory, with the member at fault named; the
previous store stays as it was. Line endings are handled per file: no row ever moves from
one trial to another."""

from __future__ import annotations

import bz2
import contextlib
import hashlib
import io
import json
import signal
import subprocess
import sys
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from curvekit.errors import ArchiveError, IngestError
from curvekit.ingest.add import add
from curvekit.records import StudyKey
from curvekit.release.archive import CsvRecord, member_limit, read_archive
from curvekit.release.csvparse import CsvBatcher
from curvekit.release.synthetic import tiny_archive
from curvekit.release.tarstream import MAX_MEMBER, iter_members
from curvekit.store.build import convert
from curvekit.store.fetch import fetch
from curvekit.store.store import open_store
from tests.conftest import ROOT, metadata_json, small_members, snapshot, write_archive
from tests.patience import PATIENCE

STUDY = f"{ROOT}/mnist/fc_1024/sgd/8"
CSV_9 = f"{STUDY}/9/measurements.csv"
META_9 = f"{STUDY}/9/metadata.json"
HEADER = b"step,val/classification_error\n"


# -- crafting tar bytes by hand: tarfile refuses to write most of these -----------------------

def _header(name: bytes, size: bytes | int, kind: bytes = b"0") -> bytes:
    """A ustar header block; ``size`` is an int (octal) or the raw 12-byte size field."""
    h = bytearray(512)
    h[0:len(name)] = name
    h[100:108], h[108:116], h[116:124] = b"0000644\0", b"0000000\0", b"0000000\0"
    h[124:136] = f"{size:011o}\0".encode() if isinstance(size, int) else size
    h[136:148] = b"00000000000\0"
    h[156:157] = kind
    h[257:263], h[263:265] = b"ustar\0", b"00"
    h[148:156] = b" " * 8
    h[148:156] = f"{sum(h):06o}\0 ".encode()
    return bytes(h)


def _padded(data: bytes) -> bytes:
    return data + bytes(-len(data) % 512)


def _member(name: str | bytes, data: bytes) -> bytes:
    raw = name.encode() if isinstance(name, str) else name
    return _header(raw, len(data)) + _padded(data)


def _pax(**records: bytes) -> bytes:
    body = b""
    for key, value in records.items():
        rec = b" " + key.encode() + b"=" + value + b"\n"
        n = len(rec) + len(str(len(rec)))
        n = len(rec) + len(str(n))  # the length counts its own digits
        body += str(n).encode() + rec
    return _header(b"PaxHeaders/x", len(body), b"x") + _padded(body)


def _base256(value: int) -> bytes:
    return (value % (1 << 96)).to_bytes(12, "big") if value < 0 else \
        b"\x80" + value.to_bytes(11, "big")


def _good() -> bytes:
    return b"".join(_member(n, d) for n, d in small_members().items())


def _bz2(path: Path, tar: bytes) -> Path:
    path.write_bytes(bz2.compress(tar + bytes(1024)))
    return path


class _Stuck(BaseException):
    """Raised by _deadline; not an OSError (as TimeoutError is), so no handler wraps it."""


@contextlib.contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    """Fail instead of hanging: the attacks these tests replay used to loop forever.

    The bound is on this process's CPU time, not on the clock: a loop that never ends burns
    CPU without end, while a busy machine that keeps this process waiting adds nothing.
    """
    def expire(signum: int, frame: FrameType | None) -> None:
        raise _Stuck(f"still running after {seconds} s of CPU time")
    old = signal.signal(signal.SIGPROF, expire)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, old)


# -- fixtures ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def manifest(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return tiny_archive(tmp_path_factory.mktemp("tiny") / "tiny.tar.bz2")


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A home with a good store already in it."""
    home = tmp_path / "home"
    convert(write_archive(tmp_path / "good.tar.bz2", small_members()), home)
    return home


def _fetch(home: Path, path: Path, manifest: Any) -> Any:
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    return fetch(home=home, archive=path, manifest=manifest, sha256=sha, force=True)


def _refused_by_both(home: Path, path: Path, manifest: Any, needles: list[str],
                     member: str | None) -> None:
    """fetch and add both refuse ``path`` quickly, naming ``member``; the store is kept."""
    before = snapshot(home)
    with _deadline(20), pytest.raises(ArchiveError) as fetched:
        _fetch(home, path, manifest)
    with _deadline(20), pytest.raises(IngestError) as added:
        add(path, name="mine/fc_1024/sgd", home=home)
    cause = added.value.__cause__
    assert isinstance(cause, ArchiveError)
    for exc in (fetched.value, cause):
        if member is not None:
            assert exc.member == member, str(exc)
    for text in (str(fetched.value), str(added.value)):
        for needle in needles:
            assert needle in text, text
    assert snapshot(home) == before
    assert not list((home / "stores").glob(".staging-*"))


# -- impossible sizes --------------------------------------------------------------------------

SIZE_CASES: list[tuple[str, bytes, list[str]]] = [
    ("negative pax size", _pax(size=b"-1536") + _header(CSV_9.encode(), 0),
     ["size '-1536'", "not a non-negative decimal number"]),
    ("non-numeric pax size", _pax(size=b"0x20") + _header(CSV_9.encode(), 0),
     ["size '0x20'"]),
    ("negative base-256 size", _header(CSV_9.encode(), _base256(-1536)),
     ["negative base-256 size"]),
    ("octal size with a sign", _header(CSV_9.encode(), b"-0000003000\0"),
     ["bad size", "expected an octal number"]),
    ("2**62 bytes", _header(CSV_9.encode(), _base256(2**62)),
     [f"{2**62:,} bytes", f"at most {MAX_MEMBER:,}"]),
    ("10**18 bytes", _pax(size=str(10**18).encode()) + _header(CSV_9.encode(), 0),
     [f"{10**18:,} bytes"]),
    ("csv over its limit", _header(CSV_9.encode(), 100 << 20),
     [f"{100 << 20:,} bytes", f"{64 << 20:,} bytes allowed"]),
    ("json over its limit", _header(META_9.encode(), 2 << 20),
     [f"{2 << 20:,} bytes", f"{1 << 20:,} bytes allowed"]),
]


@pytest.mark.parametrize(("tail", "needles"), [c[1:] for c in SIZE_CASES],
                         ids=[c[0] for c in SIZE_CASES])
def test_impossible_size_is_refused_naming_the_member(
        tmp_path: Path, home: Path, manifest: Any, tail: bytes, needles: list[str]) -> None:
    path = _bz2(tmp_path / "hostile.tar.bz2", _good() + tail)
    assert path.stat().st_size < 2000  # a few hundred bytes of attack
    member = CSV_9 if CSV_9.encode() in tail else META_9
    _refused_by_both(home, path, manifest, [member, *needles], member)


def test_164_byte_archive_with_negative_pax_size_ends(tmp_path: Path) -> None:
    path = _bz2(tmp_path / "tiny.tar.bz2", _pax(size=b"-1536") + _header(b"a/b", 0))
    assert path.stat().st_size < 300
    with _deadline(5), pytest.raises(ArchiveError, match="-1536"):
        list(read_archive(path, decompressor="python"))


def test_size_beyond_the_rest_of_a_plain_tar(tmp_path: Path, home: Path) -> None:
    before = snapshot(home)
    path = tmp_path / "plain.tar"
    path.write_bytes(_good() + _header(CSV_9.encode(), 1 << 20) + b"step\n" + bytes(1024))
    with pytest.raises(IngestError, match="only 1,029 follow its header") as info:
        add(path, name="mine/fc_1024/sgd", home=home)
    assert CSV_9 in str(info.value)
    assert snapshot(home) == before


def test_member_claiming_more_than_the_stream_holds_is_truncated(tmp_path: Path) -> None:
    # Compressed streams have no known length: the skip reads to the end, a chunk at a time.
    path = _bz2(tmp_path / "short.tar.bz2", _good() + _header(b"batch_science/junk", 1 << 30))
    with _deadline(10), pytest.raises(ArchiveError, match="truncated") as info:
        list(read_archive(path, decompressor="python"))
    assert info.value.member == "batch_science/junk"


# -- names ---------------------------------------------------------------------------------------

def test_non_utf8_name_is_refused_with_escapes(tmp_path: Path, home: Path, manifest: Any) -> None:
    name = f"{STUDY}/".encode() + b"\xff\xfe/measurements.csv"
    path = _bz2(tmp_path / "latin.tar.bz2", _good() + _member(name, HEADER))
    shown = f"{STUDY}/\\xff\\xfe/measurements.csv"
    _refused_by_both(home, path, manifest, [shown, "not valid UTF-8"], shown)


def test_non_utf8_long_name_is_refused(tmp_path: Path) -> None:
    long = b"batch_science/" + b"\xe9" * 120
    tar = _header(b"././@LongLink", len(long) + 1, b"L") + _padded(long + b"\0") \
        + _header(long[:99], 0)
    with pytest.raises(ArchiveError, match=r"\\xe9\\xe9.*not valid UTF-8"):
        list(iter_members(io.BytesIO(tar + bytes(1024))))


def test_absurdly_long_name_is_refused(tmp_path: Path, home: Path, manifest: Any) -> None:
    long = ("batch_science/" + "d" * 5000 + "/x").encode()
    path = _bz2(tmp_path / "long.tar.bz2", _good() + _pax(path=long) + _header(b"x", 0))
    _refused_by_both(home, path, manifest, ["5,016 bytes long", "longer than 4,096"], None)


# -- memory stays bounded whatever a member claims ------------------------------------------------

class _Zeros(io.RawIOBase):
    """A tar stream of one small member then ``size`` zero bytes of a junk member, made on
    demand, so the test itself never holds them."""

    def __init__(self, size: int) -> None:
        self._head = io.BytesIO(_member(CSV_9, HEADER) + _header(b"batch_science/junk", size))
        self._left = size + (-size % 512) + 1024

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = self._head.readinto(buffer)
        if n:
            return n
        n = min(len(buffer), self._left)
        buffer[:n] = bytes(n)
        self._left -= n
        return n


def test_junk_member_is_streamed_past_not_held() -> None:
    stream = _Zeros(256 << 20)
    tracemalloc.start()
    try:
        members = [(m.name, len(m.data), m.size)
                   for m in iter_members(io.BufferedReader(stream, 1 << 16),
                                         limit=lambda name, kind: member_limit(name))]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert members == [(CSV_9, len(HEADER), len(HEADER)), ("batch_science/junk", 0, 256 << 20)]
    assert peak < 32 << 20, f"peak {peak:,} bytes of Python allocations"


# VmHWM, not getrusage: a child's ru_maxrss starts from its parent's (the test runner's).
_PEAK = """
import sys, pathlib
from curvekit.store.build import convert
meta = convert(sys.argv[1], pathlib.Path(sys.argv[2]), decompressor="python")
hwm = next(l for l in open("/proc/self/status") if l.startswith("VmHWM:")).split()[1]
print(meta["counts"]["trials"], hwm)
"""


def test_256_mib_junk_member_converts_in_bounded_memory(tmp_path: Path) -> None:
    """A 256 MiB member in a tiny bz2 (repeated streams of zeros) is skipped: the whole
    conversion peaks far below the member's size (it held 2x the member before)."""
    size, chunk = 256 << 20, 8 << 20
    zeros = bz2.compress(bytes(chunk), 9)
    path = tmp_path / "junk.tar.bz2"
    with open(path, "wb") as fh:
        fh.write(bz2.compress(_good() + _header(b"batch_science/junk.bin", size)))
        fh.writelines(zeros for _ in range(size // chunk))
        fh.write(bz2.compress(bytes(1024)))
    assert path.stat().st_size < 5000
    out = subprocess.run([sys.executable, "-c", _PEAK, str(path), str(tmp_path / "home")],
                         capture_output=True, text=True, timeout=PATIENCE, check=True)
    trials, peak_kib = map(int, out.stdout.split())
    assert trials == 4
    assert peak_kib * 1024 < size, f"peak RSS {peak_kib / 1024:.0f} MiB"


# -- JSON ----------------------------------------------------------------------------------------

def _meta(**fields: Any) -> bytes:
    obj = json.loads(metadata_json(2))
    obj.update(fields)
    return json.dumps(obj).encode()


JSON_CASES: list[tuple[str, bytes, list[str]]] = [
    ("nested 100k deep", b'{"trial_id": 2, "parameters": ' + b"[" * 100_000 + b"}",
     ["nested too deeply"]),
    ("NaN step count", _meta(steps=float("nan")), ["'steps' = nan", "not an integer"]),
    ("1e400 step count", _meta(steps=1).replace(b'"steps": 1', b'"steps": 1e400'),
     ["'steps' = inf", "not an integer"]),
    ("Infinity trial id", _meta().replace(b'"trial_id": 2', b'"trial_id": Infinity'),
     ["'trial_id' = inf"]),
    ("trial id beyond int64", _meta(trial_id=2**64), ["'trial_id'", "2**63 - 1"]),
    ("metaparameter 2**70", _meta(parameters={"learning_rate": 0.1, "decay_steps": 2**70}),
     ["'parameters.decay_steps'", str(2**70), "64-bit"]),
    ("metaparameter NaN", _meta(parameters={"learning_rate": float("nan")}),
     ["'parameters.learning_rate' = nan", "not a finite number"]),
    ("5000-digit integer", _meta().replace(b'"steps": 1000', b'"steps": ' + b"9" * 5000),
     ["malformed JSON"]),
]


@pytest.mark.parametrize(("data", "needles"), [c[1:] for c in JSON_CASES],
                         ids=[c[0] for c in JSON_CASES])
def test_hostile_json_is_refused_naming_member_and_field(
        tmp_path: Path, home: Path, manifest: Any, data: bytes, needles: list[str]) -> None:
    members = small_members()
    member = f"{STUDY}/2/metadata.json"
    members[member] = data
    path = write_archive(tmp_path / "json.tar.bz2", members)
    _refused_by_both(home, path, manifest, [member, *needles], member)


def test_study_json_number_beyond_int64_is_refused(tmp_path: Path, home: Path,
                                                   manifest: Any) -> None:
    members = small_members()
    member = f"{STUDY}/study.json"
    study = json.loads(members[member])
    study["parameter_configs"]["learning_rate"]["max_value"] = 2**70
    members[member] = json.dumps(study).encode()
    path = write_archive(tmp_path / "study.tar.bz2", members)
    _refused_by_both(home, path, manifest,
                     [member, "'parameter_configs.learning_rate.max_value'"], member)


def test_non_ascii_digit_directory_is_refused(tmp_path: Path, home: Path,
                                              manifest: Any) -> None:
    members = small_members()
    member = f"{STUDY}/\u0663/metadata.json"  # ARABIC-INDIC DIGIT THREE: isdigit() is True
    members[member] = metadata_json(3)
    members[f"{STUDY}/\u0663/measurements.csv"] = HEADER
    path = write_archive(tmp_path / "digit.tar.bz2", members)
    _refused_by_both(home, path, manifest, ["'\u0663'", "not a non-negative integer"], member)


# -- CSV line handling, per file -------------------------------------------------------------------

ROWS = {1: [(0, 0.9), (100, 0.5), (200, 0.25)], 2: [(0, 0.8), (100, 0.4), (200, 0.2)]}


def _rows(home: Path, workload: str = "mnist/fc_1024/sgd") -> dict[int, list[tuple[int, float]]]:
    frame = open_store(home).measurements(workload, batch_size=8)
    assert isinstance(frame, pl.DataFrame)
    out: dict[int, list[tuple[int, float]]] = {}
    for trial, step, value in frame.select("trial_id", "step",
                                           "val/classification_error").iter_rows():
        out.setdefault(trial, []).append((step, value))
    return out


def test_lone_cr_and_blank_line_keep_rows_in_their_trials(tmp_path: Path, home: Path,
                                                          manifest: Any) -> None:
    members = small_members()
    # Trial 1: a lone CR between two rows. Trial 2: a blank line. Counted by LF, trial 1
    # had 2 lines and trial 2 had 4, and the 6 rows pyarrow found matched the total: a row
    # moved from trial 1 to trial 2 without an error.
    members[f"{STUDY}/1/measurements.csv"] = HEADER + b"0,0.9\n100,0.5\r200,0.25\n"
    members[f"{STUDY}/2/measurements.csv"] = HEADER + b"0,0.8\n\n100,0.4\n200,0.2\n"
    path = write_archive(tmp_path / "cr.tar.bz2", members)
    _fetch(home, path, manifest)
    assert _rows(home) == ROWS
    add(path, name="mine/fc_1024/sgd", home=home)
    assert _rows(home, "mine/fc_1024/sgd") == ROWS


def test_every_line_style_per_file(tmp_path: Path, home: Path, manifest: Any) -> None:
    members = small_members()
    members[f"{STUDY}/1/measurements.csv"] = (
        b"\xef\xbb\xbfstep,val/classification_error\r\n0,0.9\r\n100,0.5\r\n200,0.25")
    members[f"{STUDY}/2/measurements.csv"] = (
        b"\n" + HEADER.replace(b"\n", b"\r") + b"0,0.8\r\r100,0.4\r200,0.2\r\r")
    path = write_archive(tmp_path / "styles.tar.bz2", members)
    _fetch(home, path, manifest)
    assert _rows(home) == ROWS


def test_quoted_values_are_parsed_per_file(tmp_path: Path, home: Path, manifest: Any) -> None:
    members = small_members()
    members[f"{STUDY}/1/measurements.csv"] = HEADER + b'0,"0.9"\n100,0.5\n200,"0.25"\n'
    path = write_archive(tmp_path / "quoted.tar.bz2", members)
    _fetch(home, path, manifest)
    assert _rows(home) == {1: ROWS[1], 2: ROWS[1]}  # trial 2 keeps small_members' rows


_ENDINGS = st.sampled_from([b"\n", b"\r\n", b"\r"])


@st.composite
def _csv_file(draw: st.DrawFn) -> tuple[bytes, list[tuple[int, float]]]:
    rows = draw(st.lists(st.tuples(st.integers(0, 10**6), st.sampled_from([0.5, 0.25, 1.0])),
                         max_size=6))
    lines = [b"step,val/x"] + [f"{s},{v}".encode() for s, v in rows]
    out = draw(st.sampled_from([b"", b"\xef\xbb\xbf"]))
    for i, line in enumerate(lines):
        out += line
        if i < len(lines) - 1 or draw(st.booleans()):
            out += draw(_ENDINGS)
            out += draw(_ENDINGS) * draw(st.integers(0, 2)) if i else b""  # blank lines
    return out, rows


@settings(max_examples=40, deadline=None)
@given(files=st.lists(_csv_file(), min_size=1, max_size=6))
def test_batched_rows_stay_in_their_file(files: list[tuple[bytes, list[tuple[int, float]]]]
                                         ) -> None:
    key = StudyKey("mnist", "fc_1024", "sgd", 8)
    tables: list[Any] = []
    batcher = CsvBatcher(lambda k, t: tables.append(t))
    for trial, (data, _) in enumerate(files):
        batcher.add(CsvRecord(key, trial, data, f"{trial}/measurements.csv"))
    batcher.close()
    got: dict[int, list[tuple[int, float]]] = {}
    for table in tables:
        for row in table.to_pylist():
            got.setdefault(row["trial_id"], []).append((row["step"], row["val/x"]))
    want = {trial: rows for trial, (_, rows) in enumerate(files) if rows}
    assert got == want
    assert batcher.rows == {(key, t): len(rows) for t, (_, rows) in enumerate(files)}



def test_oversized_file_in_a_release_folder_is_refused_unread(tmp_path: Path,
                                                              home: Path) -> None:
    before = snapshot(home)
    for name, data in small_members().items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(data)
    big = tmp_path / STUDY / "2" / "measurements.csv"
    with open(big, "r+b") as fh:
        fh.truncate(65 << 20)  # sparse: claims 65 MiB, costs no disk
    with _deadline(20), pytest.raises(IngestError, match="more than the 67,108,864 bytes") \
            as info:
        add(tmp_path / ROOT, name="mine/fc_1024/sgd", home=home)
    assert str(big) in str(info.value)
    assert snapshot(home) == before
