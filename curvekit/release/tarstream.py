"""A minimal, strict, streaming tar reader.

The release holds about 390,000 members of a few kilobytes each. Python's :mod:`tarfile`
spends tens of microseconds of pure-Python work on each member header; this reader parses
just what the converter needs (name, type, size, data) with a checksum test, and reads
from one large buffer, which makes the per-member cost a few microseconds.

It understands ustar, GNU (``L`` long names) and POSIX pax (``x`` and ``g``) headers, the
formats GNU tar and Python's tarfile write. It yields members; it never touches the file
system.

>>> import io, tarfile
>>> raw = io.BytesIO()
>>> with tarfile.open(fileobj=raw, mode="w") as t:
...     info = tarfile.TarInfo("root/a.txt"); info.size = 2
...     t.addfile(info, io.BytesIO(b"hi"))
>>> [(m.name, m.type, m.data) for m in iter_members(io.BytesIO(raw.getvalue()))]
[('root/a.txt', 'file', b'hi')]
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Literal

from curvekit.errors import ArchiveError

__all__ = ["TarMember", "iter_members"]

BLOCK = 512
MemberType = Literal["file", "dir", "link", "other"]
_TYPES: dict[bytes, MemberType] = {
    b"0": "file", b"\0": "file", b"7": "file", b"5": "dir",
    b"1": "link", b"2": "link",
}


@dataclass(frozen=True, slots=True)
class TarMember:
    """One member: its name, kind, data (files only) and link target (links only)."""

    name: str
    type: MemberType
    data: bytes
    linkname: str = ""


class _Buffer:
    """Reads exact byte counts from a stream through one large buffer."""

    def __init__(self, raw: IO[bytes], chunk: int = 4 << 20) -> None:
        self._raw = raw
        self._chunk = chunk
        self._buf = b""
        self._pos = 0
        self.offset = 0  # bytes consumed, for error messages

    def read(self, n: int) -> bytes:
        end = self._pos + n
        if end <= len(self._buf):
            out = self._buf[self._pos:end]
            self._pos = end
        else:
            parts = [self._buf[self._pos:]]
            have = len(parts[0])
            while have < n:
                chunk = self._raw.read(max(self._chunk, n - have))
                if not chunk:
                    break
                parts.append(chunk)
                have += len(chunk)
            joined = b"".join(parts)
            out, self._buf, self._pos = joined[:n], joined, min(n, len(joined))
        self.offset += len(out)
        return out


def _number(field: bytes, what: str, offset: int) -> int:
    if field and field[0] & 0x80:  # GNU base-256 for values that do not fit in octal
        value = int.from_bytes(field[1:], "big")
        return -value if field[0] & 0x40 else value
    text = field.split(b"\0", 1)[0].strip()
    try:
        return int(text, 8) if text else 0
    except ValueError:
        raise ArchiveError(f"corrupt tar header at byte {offset}: bad {what} {text!r}") from None


def _text(field: bytes) -> str:
    return field.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")


def _pax(data: bytes, offset: int) -> dict[str, str]:
    records: dict[str, str] = {}
    pos = 0
    while pos < len(data):
        space = data.find(b" ", pos)
        try:
            length = int(data[pos:space])
        except ValueError:
            raise ArchiveError(f"corrupt pax header at byte {offset}") from None
        if length <= 0 or space < 0:
            raise ArchiveError(f"corrupt pax header at byte {offset}")
        key, _, value = data[space + 1:pos + length - 1].partition(b"=")
        records[key.decode("utf-8", "surrogateescape")] = value.decode("utf-8", "surrogateescape")
        pos += length
    return records


def iter_members(stream: IO[bytes]) -> Iterator[TarMember]:
    """Yield the members of an uncompressed tar stream, in order.

    Raises :class:`ArchiveError` for a bad header checksum, a truncated stream, or a member
    type the reader does not know.
    """
    buf = _Buffer(stream)
    long_name: str | None = None
    pax: dict[str, str] = {}
    while True:
        offset = buf.offset
        header = buf.read(BLOCK)
        if len(header) < BLOCK:
            raise ArchiveError(f"tar stream ends inside a header at byte {offset}: "
                               "the archive is truncated")
        if header.count(0) == BLOCK:
            return  # end-of-archive marker
        stored = _number(header[148:156], "checksum", offset)
        if stored != sum(header) - sum(header[148:156]) + 8 * 32:
            raise ArchiveError(f"corrupt tar header at byte {offset} (checksum mismatch)")
        size = _number(header[124:136], "size", offset)
        kind = header[156:157]
        name = _text(header[0:100])
        if header[257:263] == b"ustar\x00" and header[345] != 0:
            name = _text(header[345:500]) + "/" + name
        if "size" in pax:
            size = int(pax["size"])
        padded = size + (-size % BLOCK)
        data = buf.read(padded)[:size] if padded else b""
        if len(data) < size:
            raise ArchiveError(f"tar stream ends inside member {long_name or name!r}: "
                               "the archive is truncated")
        if kind == b"L":
            long_name = _text(data)
            continue
        if kind == b"x":
            pax = _pax(data, offset)
            continue
        if kind in (b"g", b"K"):
            continue  # global defaults and long link names carry nothing the reader uses
        name = pax.get("path", long_name or name)
        linkname = pax.get("linkpath", _text(header[157:257]))
        long_name, pax = None, {}
        yield TarMember(name, _TYPES.get(kind, "other"), data, linkname)
