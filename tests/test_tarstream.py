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
