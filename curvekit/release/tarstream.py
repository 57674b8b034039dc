"""A minimal, strict, streaming tar reader.

The release holds about 390,000 members of a few kilobytes each. Python's :mod:`tarfile`
spends tens of microseconds of pure-Python work on each member header; this reader parses
just what the converter needs (name, type, size, data) with a checksum test, and reads
from one large buffer, which makes the per-member cost a few microseconds.

It understands ustar, GNU (``L`` long names) and POSIX pax (``x`` and ``g``) headers, the
formats GNU tar and Python's tarfile write. It yields members; it never touches the file
system.

It trusts no number in a header: sizes must be non-negative octal, base-256 or pax decimal
numbers; a member may not claim more than :data:`MAX_MEMBER` bytes, nor more than the rest
of an uncompressed file; names must be UTF-8 and at most :data:`MAX_NAME` bytes. Memory
stays bounded whatever a member claims: the caller's ``limit`` says, per member, whether
its data is wanted and up to what size; data nobody wants is read and discarded in chunks,
never held.

>>> import io, tarfile
>>> raw = io.BytesIO()
>>> with tarfile.open(fileobj=raw, mode="w") as t:
...     info = tarfile.TarInfo("root/a.txt"); info.size = 2
...     t.addfile(info, io.BytesIO(b"hi"))
>>> [(m.name, m.type, m.data) for m in iter_members(io.BytesIO(raw.getvalue()))]
[('root/a.txt', 'file', b'hi')]
"""

from __future__ import annotations

import io
import os
import re
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO, Literal

from curvekit.errors import ArchiveError

__all__ = ["MAX_HEADER_DATA", "MAX_MEMBER", "MAX_NAME", "Limit", "TarMember", "iter_members"]

BLOCK = 512
MAX_NAME = 4096
"""Longest member name accepted, in UTF-8 bytes (Linux's PATH_MAX)."""
MAX_HEADER_DATA = 1 << 20
"""Largest GNU long-name or pax extended header accepted (they are held in memory)."""
MAX_MEMBER = 1 << 34
"""Largest size any member may claim (16 GiB): more than a whole uncompressed release."""

MemberType = Literal["file", "dir", "link", "other"]
Limit = Callable[[str, MemberType], "int | None"]
"""``limit(name, type)``: the most bytes of this member's data to hold, or None to skip it."""

_TYPES: dict[bytes, MemberType] = {
    b"0": "file", b"\0": "file", b"7": "file", b"5": "dir",
    b"1": "link", b"2": "link",
}
_OCTAL = re.compile(rb"[0-7]+")
_DECIMAL = re.compile(r"[0-9]{1,20}")
_SKIP_CHUNK = 1 << 20


@dataclass(frozen=True, slots=True)
class TarMember:
    """One member: its name, kind, data (files only) and link target (links only).

    ``size`` is the size the header states; ``data`` is empty when the caller's ``limit``
    asked to skip the member.
    """

    name: str
    type: MemberType
    data: bytes
    linkname: str = ""
    size: int = 0


class _Buffer:
    """Reads exact byte counts from a stream through one large buffer."""

    def __init__(self, raw: IO[bytes], chunk: int = 4 << 20) -> None:
        self._raw = raw
        self._chunk = chunk
        self._buf = b""
        self._pos = 0
        self.offset = 0  # bytes consumed, for error messages
        self._end = _file_end(raw)  # total bytes, when the stream is a plain file

    def remaining(self) -> int | None:
        """Bytes left in the stream, when it is a regular file; else None (unknown)."""
        return None if self._end is None else self._end - self.offset

    def read(self, n: int) -> bytes:
        # Callers pass bounded, non-negative sizes (checked in iter_members): the position
        # only ever moves forward, so no header can be read twice.
        assert n >= 0
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

    def skip(self, n: int) -> int:
        """Discard ``n`` bytes (fewer at the end of the stream) holding at most one chunk."""
        assert n >= 0
        take = min(n, len(self._buf) - self._pos)
        self._pos += take
        left = n - take
        while left:
            chunk = self._raw.read(min(left, _SKIP_CHUNK))
            if not chunk:
                break
            left -= len(chunk)
        skipped = n - left
        self.offset += skipped
        return skipped


def _file_end(raw: IO[bytes]) -> int | None:
    # Only a plain file opened by open(): a gzip or bz2 reader also has fileno(), but of
    # its compressed file, whose size says nothing about the decompressed stream.
    # The size counts from the current position, where the tar stream starts.
    # indexed_bzip2 hands out an io.BufferedReader too, over its own raw reader: look inside.
    inner = raw.raw if isinstance(raw, io.BufferedReader) else raw
    if not isinstance(inner, io.FileIO):
        return None
    try:
        st = os.fstat(inner.fileno())
        return st.st_size - raw.tell() if stat.S_ISREG(st.st_mode) else None
    except (OSError, ValueError):
        return None


def _escaped(raw: bytes) -> str:
    """``raw`` as printable text: bad UTF-8 bytes as ``\\xff``, control characters escaped."""
    text = raw.decode("utf-8", "backslashreplace")
    return text if text.isprintable() else "".join(
        c if c.isprintable() else repr(c)[1:-1] for c in text)


def _number(field: bytes, what: str, offset: int, member: str | None = None) -> int:
    if field and field[0] & 0x80:  # GNU base-256 for values that do not fit in octal
        if field[0] & 0x40:
            raise ArchiveError(
                f"corrupt tar header at byte {offset}"
                + (f" (member {member!r})" if member else "")
                + f": negative base-256 {what}; a tar {what} is never negative",
                member=member)
        return int.from_bytes(bytes([field[0] & 0x3F]) + field[1:], "big")
    text = field.split(b"\0", 1)[0].strip(b" ")
    if not text:
        return 0
    if not _OCTAL.fullmatch(text):
        raise ArchiveError(
            f"corrupt tar header at byte {offset}"
            + (f" (member {member!r})" if member else "")
            + f": bad {what} {text!r}, expected an octal number", member=member)
    return int(text, 8)


def _name(raw: bytes, offset: int) -> str:
    if len(raw) > MAX_NAME:
        shown = _escaped(raw[:200]) + "…"
        raise ArchiveError(
            f"member name at byte {offset} is {len(raw):,} bytes long ('{shown}'); names "
            f"longer than {MAX_NAME:,} bytes are refused", member=shown)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        shown = _escaped(raw)
        raise ArchiveError(
            f"member name '{shown}' (at byte {offset}) is not valid UTF-8; the release names "
            "its members in UTF-8: re-create the archive with UTF-8 names", member=shown,
        ) from None


def _pax(data: bytes, offset: int, member: str) -> dict[str, bytes]:
    records: dict[str, bytes] = {}
    pos = 0
    while pos < len(data):
        space = data.find(b" ", pos, pos + 21)
        digits = data[pos:space]
        length = int(digits) if space > pos and digits.isdigit() else 0
        if length <= space - pos + 1 or pos + length > len(data) \
                or data[pos + length - 1] != 0x0A:
            raise ArchiveError(f"corrupt pax header at byte {offset} (member {member!r}): "
                               f"bad record at position {pos}", member=member)
        key, _, value = data[space + 1:pos + length - 1].partition(b"=")
        records[key.decode("utf-8", "backslashreplace")] = value
        pos += length  # length > 0: every record moves forward
    return records


def _pax_size(value: bytes, offset: int, member: str) -> int:
    text = value.decode("ascii", "backslashreplace")
    if not _DECIMAL.fullmatch(text):
        raise ArchiveError(
            f"corrupt pax header at byte {offset} (member {member!r}): size {text!r} is not "
            "a non-negative decimal number", member=member)
    return int(text)


def iter_members(stream: IO[bytes], *, limit: Limit | None = None) -> Iterator[TarMember]:
    """Yield the members of an uncompressed tar stream, in order.

    ``limit(name, type)`` returns the largest size whose data the caller wants held in
    memory, or None to skip the member's data (it is read and discarded in chunks); without
    it, every member's data is held, up to :data:`MAX_MEMBER` bytes.

    Raises :class:`ArchiveError` for a bad header checksum or number, a negative or
    impossible size, a member over its limit, a name that is not UTF-8 or is too long, or a
    truncated stream.
    """
    buf = _Buffer(stream)
    long_name: str | None = None
    pax: dict[str, bytes] = {}
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
        kind = header[156:157]
        raw_name = header[0:100].split(b"\0", 1)[0]
        if header[257:263] == b"ustar\x00" and header[345] != 0:
            raw_name = header[345:500].split(b"\0", 1)[0] + b"/" + raw_name
        # The header's own name field may be a long name cut at 100 bytes, even inside a
        # UTF-8 sequence: decode it only when no long-name or pax header replaces it.
        if kind in (b"L", b"x", b"g", b"K"):
            name = _escaped(raw_name)
        elif "path" in pax:
            name = _name(pax["path"], offset)
        elif long_name is not None:
            name = long_name
        else:
            name = _name(raw_name, offset)
        size = _number(header[124:136], "size", offset, name)
        if "size" in pax and kind not in (b"x", b"g"):
            size = _pax_size(pax["size"], offset, name)
        mtype = _TYPES.get(kind, "other")
        if kind in (b"L", b"x"):
            wanted: int | None = MAX_HEADER_DATA
        elif kind in (b"g", b"K") or mtype != "file":
            wanted = None  # global defaults, long link names, dirs and links: data unused
        else:
            wanted = MAX_MEMBER if limit is None else limit(name, mtype)
        _check_size(size, wanted, name, offset, buf.remaining())
        padded = size + (-size % BLOCK)
        if wanted is None:
            got = buf.skip(padded)
            data = b""
        else:
            data = buf.read(padded)[:size] if padded else b""
            got = len(data)
        if got < size:
            raise ArchiveError(f"tar stream ends inside member {name!r}: "
                               "the archive is truncated", member=name)
        if buf.offset <= offset:  # pragma: no cover - guarded by the checks above
            raise ArchiveError(f"tar reader made no progress at byte {offset}", member=name)
        if kind == b"L":
            long_name = _name(data.split(b"\0", 1)[0], offset)
            continue
        if kind == b"x":
            pax = _pax(data, offset, name)
            continue
        if kind in (b"g", b"K"):
            continue  # global defaults and long link names carry nothing the reader uses
        linkname = _escaped(pax.get("linkpath", header[157:257].split(b"\0", 1)[0]))
        long_name, pax = None, {}
        yield TarMember(name, mtype, data, linkname, size)


def _check_size(size: int, wanted: int | None, name: str, offset: int,
                remaining: int | None) -> None:
    """Refuse a size no release member can have, before reading a byte of the data."""
    if size > MAX_MEMBER:
        raise ArchiveError(
            f"{name}: the tar header at byte {offset} claims {size:,} bytes, more than any "
            f"member can hold (at most {MAX_MEMBER:,}); the archive is corrupt or crafted",
            member=name)
    if wanted is not None and size > wanted:
        raise ArchiveError(
            f"{name}: member claims {size:,} bytes, more than the {wanted:,} bytes allowed "
            "for it; the archive is corrupt, or this is not the release's file",
            member=name)
    if remaining is not None and size > remaining:
        raise ArchiveError(
            f"{name}: member claims {size:,} bytes but only {remaining:,} follow its header: "
            "the archive is truncated or corrupt", member=name)
