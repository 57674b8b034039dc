"""The streaming tar reader agrees with Python's tarfile and refuses damaged input."""

from __future__ import annotations

import io
import tarfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from curvekit.errors import ArchiveError
from curvekit.release.tarstream import iter_members

segment = st.text(st.characters(codec="utf-8", exclude_characters="/\0"), min_size=1,
                  max_size=40).filter(lambda s: s not in (".", ".."))
names = st.lists(segment, min_size=1, max_size=6).map("/".join)


def _tar(members: list[tuple[str, bytes]], fmt: int) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=fmt) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return raw.getvalue()


@settings(max_examples=60, deadline=None)
@given(members=st.lists(st.tuples(names, st.binary(max_size=1500)), max_size=8),
       fmt=st.sampled_from([tarfile.GNU_FORMAT, tarfile.PAX_FORMAT, tarfile.USTAR_FORMAT]))
def test_agrees_with_tarfile(members: list[tuple[str, bytes]], fmt: int) -> None:
    try:
        data = _tar(members, fmt)
    except ValueError:  # ustar cannot store some long names; tarfile refuses them
        return
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        want = [(m.name, tar.extractfile(m).read()) for m in tar]  # type: ignore[union-attr]
    got = [(m.name, m.data) for m in iter_members(io.BytesIO(data))]
    assert got == want


def test_long_names_and_kinds() -> None:
    long = "batch_science/" + "/".join(["d" * 60] * 4) + "/measurements.csv"
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as tar:
        tar.addfile(tarfile.TarInfo("batch_science/"), None)
        d = tarfile.TarInfo("batch_science/sub")
        d.type = tarfile.DIRTYPE
        tar.addfile(d)
        info = tarfile.TarInfo(long)
        info.size = 3
        tar.addfile(info, io.BytesIO(b"abc"))
        link = tarfile.TarInfo("batch_science/l")
        link.type, link.linkname = tarfile.SYMTYPE, "../../etc/passwd"
        tar.addfile(link)
        fifo = tarfile.TarInfo("batch_science/f")
        fifo.type = tarfile.FIFOTYPE
        tar.addfile(fifo)
    got = [(m.name, m.type, m.data, m.linkname) for m in iter_members(io.BytesIO(raw.getvalue()))]
    assert got[2] == (long, "file", b"abc", "")
    assert got[1][1] == "dir"
    assert got[3][1:] == ("link", b"", "../../etc/passwd")
    assert got[4][1] == "other"


def test_truncated_and_corrupt() -> None:
    data = _tar([("a/b.txt", b"x" * 2000)], tarfile.GNU_FORMAT)
    with pytest.raises(ArchiveError, match="truncated"):
        list(iter_members(io.BytesIO(data[:1000])))
    with pytest.raises(ArchiveError, match="truncated"):
        list(iter_members(io.BytesIO(data[:300])))
    bad = bytearray(data)
    bad[10] ^= 0xFF
    with pytest.raises(ArchiveError, match="checksum"):
        list(iter_members(io.BytesIO(bytes(bad))))


def _with_size(header: bytes, field: bytes) -> bytes:
    """``header`` with a new 12-byte size field and a checksum that matches it."""
    h = bytearray(header)
    h[124:136] = field
    h[148:156] = b" " * 8
    h[148:156] = f"{sum(h):06o}\0 ".encode()
    return bytes(h)


@pytest.mark.parametrize(("field", "needle"), [
    ((2**96 - 1536).to_bytes(12, "big"), "negative base-256 size"),
    (b"-0000003000\0", "bad size"),
    (b"00000_00010\0", "bad size"),
    (b"0x0000000010", "bad size"),
    (b"\x80" + (2**62).to_bytes(11, "big"), f"{2**62:,} bytes"),
])
def test_header_sizes_are_validated(field: bytes, needle: str) -> None:
    data = _tar([("root/a.txt", b"x" * 700)], tarfile.USTAR_FORMAT)
    bad = _with_size(data[:512], field) + data[512:]
    with pytest.raises(ArchiveError, match=needle) as info:
        list(iter_members(io.BytesIO(bad)))
    assert info.value.member == "root/a.txt"


def test_base256_size_agrees_with_tarfile() -> None:
    data = _tar([("root/a.txt", b"x" * 700)], tarfile.USTAR_FORMAT)
    field = b"\x80" + (700).to_bytes(11, "big")
    patched = _with_size(data[:512], field) + data[512:]
    with tarfile.open(fileobj=io.BytesIO(patched)) as tar:
        assert [m.size for m in tar] == [700]
    got = list(iter_members(io.BytesIO(patched)))
    assert [(m.name, m.data) for m in got] == [("root/a.txt", b"x" * 700)]


@pytest.mark.parametrize("record", [b"11 size=-1\n", b"12 size=1e3\n", b"10 size=\xff\n",
                                    b"5 size=7\n", b"99 size=7\n", b"x size=7\n"])
def test_bad_pax_records_are_refused(record: bytes) -> None:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        info = tarfile.TarInfo("root/a.txt")
        info.size, info.pax_headers = 3, {"comment": "c" * 7}
        tar.addfile(info, io.BytesIO(b"abc"))
    data = bytearray(raw.getvalue())
    data[512:1024] = record + bytes(512 - len(record))
    size = f"{len(record):011o}\0".encode()
    data[:512] = _with_size(bytes(data[:512]), size)
    with pytest.raises(ArchiveError, match="pax header"):
        list(iter_members(io.BytesIO(bytes(data))))


def test_limit_skips_or_refuses_before_reading() -> None:
    data = _tar([("root/keep.csv", b"k" * 10), ("root/skip.bin", b"s" * 5000),
                 ("root/big.csv", b"b" * 3000)], tarfile.GNU_FORMAT)

    def limit(name: str, kind: str) -> int | None:
        return 2000 if name.endswith(".csv") else None

    members = iter_members(io.BytesIO(data), limit=limit)
    assert next(members).data == b"k" * 10
    skipped = next(members)
    assert (skipped.name, skipped.data, skipped.size) == ("root/skip.bin", b"", 5000)
    with pytest.raises(ArchiveError, match="3,000 bytes, more than the 2,000 bytes allowed"):
        next(members)


class _Counting(io.BytesIO):
    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.reads = 0

    def read(self, n: int | None = -1) -> bytes:
        self.reads += 1
        return super().read(n)


@settings(max_examples=50, deadline=None)
@given(pos=st.integers(0, 1535), value=st.integers(0, 255), fix=st.booleans())
def test_damaged_header_bytes_end_quickly(pos: int, value: int, fix: bool) -> None:
    """Any byte of the first headers (pax included), damaged, with or without a matching
    checksum: the reader yields or refuses, and never reads the stream over and over."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        info = tarfile.TarInfo("root/" + "é" * 60)  # non-ASCII: tarfile writes a pax header
        info.size = 600
        tar.addfile(info, io.BytesIO(b"x" * 600))
    data = bytearray(raw.getvalue())
    data[pos] = value
    block = pos - pos % 512
    if fix and block != 512:  # block 1 is the pax data, not a header
        data[block:block + 512] = _with_size(bytes(data[block:block + 512]),
                                             bytes(data[block + 124:block + 136]))
    stream = _Counting(bytes(data))
    try:
        for i, _ in enumerate(iter_members(stream)):
            assert i < 3, "the reader went back and yields the same members again"
    except ArchiveError:
        pass
    assert stream.reads < 10
