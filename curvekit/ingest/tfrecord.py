"""TFRecord framing: the records of a TensorBoard event file, read in bounded memory and
checked as TensorBoard's own reader checks them.

A record is ``length | masked CRC-32C of length | data | masked CRC-32C of data``, the
length an unsigned 64-bit little-endian integer. :func:`read_records` reads a file
:data:`BLOCK` bytes at a time (plus the rest of a record that a block cuts), so memory never
grows with the file: at most a block and one record are held. Every record is checked
before its data is used:

* the checksum of its length: if it fails, the file is damaged (or not an event file) and
  an :class:`~curvekit.errors.IngestError` names the file, the record and its byte offset;
* its length: more than :data:`MAX_RECORD` bytes is refused, naming the same (an event
  holding a scalar is well under a kilobyte);
* the checksum of its data, always (vectorised over a block's records with numpy, so it
  costs little next to parsing the events).

**A file that ends inside a record** -- a run still writing, or one killed while writing --
is read up to that record; an :class:`~curvekit.errors.IngestWarning` names the file, the
byte offset of the record cut short and the bytes left unread. A length that points past
the end of the file cannot be told from such a cut, so it is read the same way, never in
silence.

>>> import io
>>> data = record(b"first") + record(b"second")
>>> [(n, offset, body) for n, offset, body in read_records(io.BytesIO(data), "x")]
[(1, 0, b'first'), (2, 21, b'second')]
>>> hex(masked_crc32c(b"123456789"))
'0xc78ab0e5'
"""

from __future__ import annotations

import struct
import warnings
from collections.abc import Iterator
from functools import cache, lru_cache
from typing import BinaryIO

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from curvekit.errors import IngestError, IngestWarning

__all__ = ["BLOCK", "MAX_RECORD", "crc32c", "masked_crc32c", "masked_crc32c_many",
           "read_blocks", "read_records", "record"]

BLOCK = 1 << 20
"""Bytes read at a time."""
MAX_RECORD = 64 << 20
"""The largest record read. Scalar events are tens of bytes, images and graphs rarely more
than a few megabytes; a longer record is refused before it is read."""

# ---------------------------------------------------------------------- CRC-32C (Castagnoli)
_POLY = 0x82F63B78
_LANE = 1024  # bytes of a long piece that one numpy lane checksums


def _byte_table() -> list[int]:
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ _POLY if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _byte_table()


def _word_tables() -> tuple[np.ndarray, np.ndarray]:
    """Slicing-by-4 with two 16-bit tables: the register after a 32-bit word is
    ``LOW[reg & 0xFFFF] ^ HIGH[reg >> 16]`` once the word is XORed in."""
    t = np.zeros((4, 256), np.uint32)  # row k: a byte followed by k zero bytes
    t[0] = _TABLE
    for k in range(1, 4):
        t[k] = (t[k - 1] >> 8) ^ t[0][t[k - 1] & 0xFF]
    i = np.arange(1 << 16)
    return t[3][i & 0xFF] ^ t[2][i >> 8], t[1][i & 0xFF] ^ t[0][i >> 8]


_LOW, _HIGH = _word_tables()


def _raw(register: int, data: bytes) -> int:
    table = _TABLE
    for b in data:
        register = table[(register ^ b) & 0xFF] ^ (register >> 8)
    return register


def crc32c(data: bytes) -> int:
    """CRC-32C of ``data`` (byte by byte, in Python: the reference for the fast path).

    >>> hex(crc32c(b"123456789"))
    '0xe3069283'
    """
    return _raw(0xFFFFFFFF, data) ^ 0xFFFFFFFF


def _mask(crc: int) -> int:
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def masked_crc32c(data: bytes) -> int:
    """TFRecord's masked CRC-32C of ``data`` (one piece: byte by byte when it is short)."""
    if len(data) < 256:
        return _mask(crc32c(data))
    return int(masked_crc32c_many(data, np.array([0]), np.array([len(data)]))[0])


def record(data: bytes) -> bytes:
    """``data`` framed as one TFRecord."""
    length = struct.pack("<Q", len(data))
    return (length + struct.pack("<I", masked_crc32c(length)) + data
            + struct.pack("<I", masked_crc32c(data)))


def _apply(tables: np.ndarray, reg: np.ndarray) -> np.ndarray:
    """A linear map of registers given by its tables (one per byte of the register)."""
    out: np.ndarray = tables[3][reg >> 24] ^ tables[2][(reg >> 16) & 0xFF] \
        ^ tables[1][(reg >> 8) & 0xFF] ^ tables[0][reg & 0xFF]
    return out


def _tables(images: np.ndarray) -> np.ndarray:
    """The tables of the linear map that sends bit ``b`` to ``images[b]``."""
    tables = np.zeros((4, 256), np.uint32)
    values = np.arange(256)
    for k in range(4):
        for j in range(8):
            tables[k][(values >> j) & 1 == 1] ^= images[8 * k + j]
    return tables


@cache
def _shift(nbytes: int) -> np.ndarray:
    """Tables that move a register over ``nbytes`` zero bytes (by squaring: a few dozen
    steps for any length)."""
    bits = np.uint32(1) << np.arange(32, dtype=np.uint32)
    if nbytes <= 1:
        return _tables(np.array([_raw(int(b), bytes(nbytes)) for b in bits], np.uint32))
    half = _shift(nbytes // 2)
    images = _apply(half, _apply(half, bits))
    if nbytes % 2:
        images = _apply(_shift(1), images)
    return _tables(images)


def _lanes(rows: np.ndarray) -> np.ndarray:
    """The register (from 0) after each row of a C-ordered uint8 matrix whose width is a
    multiple of 4. Zero bytes in front leave a register of 0 as it is, so rows are padded
    on the left."""
    words = np.ascontiguousarray(rows.view("<u4").T)
    reg = np.zeros(rows.shape[0], np.uint32)
    for word in words:
        reg ^= word
        reg = _LOW[reg & 0xFFFF] ^ _HIGH[reg >> 16]
    return reg


def _tree(regs: np.ndarray, size: int) -> int:
    """The register over consecutive pieces of ``size`` bytes each, from theirs: pairs are
    joined level by level (a zero piece in front changes nothing)."""
    while len(regs) > 1:
        if len(regs) % 2:
            regs = np.concatenate([np.zeros(1, np.uint32), regs])
        regs = _apply(_shift(size), regs[0::2]) ^ regs[1::2]
        size *= 2
    return int(regs[0])


def masked_crc32c_many(buf: bytes | bytearray | memoryview, starts: np.ndarray,
                       lengths: np.ndarray) -> np.ndarray:
    """The masked CRC-32C of ``buf[s:s + n]`` for each start ``s`` and length ``n``.

    Vectorised over the pieces: numpy computes the registers of many pieces (or of a long
    piece's 1 KiB lanes) side by side, and a long piece's lanes are then joined. The
    register of a CRC starting at all ones equals the one starting at zero over the data
    with its first four bytes inverted, so every lane starts at zero.

    >>> import numpy as np
    >>> [hex(int(c)) for c in masked_crc32c_many(b"123456789", np.array([0]), np.array([9]))]
    ['0xc78ab0e5']
    """
    arr = np.frombuffer(buf, np.uint8)
    starts = np.asarray(starts, np.int64)
    lengths = np.asarray(lengths, np.int64)
    out = np.zeros(len(starts), np.uint32)
    for i in np.flatnonzero(lengths < 4):  # too short for the inversion: byte by byte
        s, n = int(starts[i]), int(lengths[i])
        out[i] = crc32c(bytes(arr[s:s + n]))
    big = np.flatnonzero(lengths >= 4)
    if len(big):
        out[big] = _pieces(arr, starts[big], lengths[big]) ^ np.uint32(0xFFFFFFFF)
    masked: np.ndarray = ((out >> 15) | (out << 17)) + np.uint32(0xA282EAD8)
    return masked.astype(np.uint32)


def _windows(arr: np.ndarray, ends: np.ndarray, width: int) -> np.ndarray:
    """Row i: the ``width`` bytes of ``arr`` that end at ``ends[i]`` (any before the start
    of ``arr`` are zeros)."""
    out = np.empty((len(ends), width), np.uint8)
    low = ends < width
    if not low.all():
        out[~low] = sliding_window_view(arr, width)[ends[~low] - width]
    if low.any():
        head = np.concatenate([np.zeros(width, np.uint8), arr[:width]])
        out[low] = sliding_window_view(head, width)[ends[low]]
    return out


def _pieces(arr: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Registers (from 0, first four bytes inverted) of pieces of at least 4 bytes: the
    first (or only) lane of each piece in groups of one width, then the 1 KiB lanes that
    follow in long pieces."""
    lanes = (lengths + _LANE - 1) // _LANE
    first = lengths - _LANE * (lanes - 1)
    short = (first < 4) & (lanes > 1)  # keep the four inverted bytes in the first lane
    first[short] += _LANE
    lanes[short] -= 1
    reg = np.zeros(len(starts), np.uint32)
    width = np.maximum(8, 1 << np.ceil(np.log2(first)).astype(np.int64))
    for w in map(int, np.unique(width)):
        rows = np.flatnonzero(width == w)
        for chunk in np.array_split(rows, len(rows) * w // (4 << 20) + 1):  # 4 MiB at a time
            pad = w - first[chunk]
            matrix = _windows(arr, starts[chunk] + first[chunk], w)
            matrix *= np.arange(w) >= pad[:, None]  # zeros before the piece's start
            matrix[np.arange(len(chunk))[:, None], pad[:, None] + np.arange(4)] ^= 0xFF
            reg[chunk] = _lanes(matrix)
    for i in np.flatnonzero(lanes > 1):
        begin, count = int(starts[i] + first[i]), int(lanes[i] - 1)
        body = arr[begin:begin + _LANE * count].reshape(count, _LANE)
        regs = np.concatenate([_lanes(body[p:p + 16384]) for p in range(0, count, 16384)])
        reg[i] = _apply(_shift(_LANE * count), reg[i:i + 1])[0] ^ _tree(regs, _LANE)
    return reg


# ---------------------------------------------------------------------- records
def _damaged(path: str, number: int, offset: int, what: str) -> IngestError:
    return IngestError(f"record {number} (byte {offset}) {what}", path=path, line=number)


_U64 = struct.Struct("<Q")


@lru_cache(maxsize=4096)
def _length_crc(length: int) -> int:
    """The masked checksum of a record's length field (lengths repeat: once each)."""
    return _mask(crc32c(_U64.pack(length)))


_CORRUPT_LENGTH = ("has a corrupt length; this is not a TensorBoard event file, or it is "
                   "damaged: leave it out")


def _length_ok(buf: bytes, pos: int) -> bool:
    crc: int = struct.unpack_from("<I", buf, pos + 8)[0]
    return crc == _mask(crc32c(buf[pos:pos + 8]))


def _frames(buf: bytes, path: str, base: int, number: int
            ) -> tuple[list[tuple[int, int]], int, IngestError | None]:
    """The complete records at the start of ``buf`` as (start, length), where the first
    incomplete one starts, and the error of that one if its length is damaged or too
    large. A record the buffer does not complete has its length checked at once, so that
    a damaged length never makes the reader wait for, or hold, the bytes it claims; its
    error is raised after the records before it are checked (the first damage is named)."""
    pos, size = 0, len(buf)
    out: list[tuple[int, int]] = []
    unpack, add = _U64.unpack_from, out.append
    while size - pos >= 12:
        (length,) = unpack(buf, pos)
        if length > MAX_RECORD or pos + 16 + length > size:
            n = number + len(out) + 1
            if not _length_ok(buf, pos):
                return out, pos, _damaged(path, n, base + pos, _CORRUPT_LENGTH)
            if length > MAX_RECORD:
                return out, pos, _damaged(
                    path, n, base + pos, f"claims {length:,} bytes, more than the "
                    f"{MAX_RECORD:,} a record may hold here (scalar events are tens of "
                    "bytes); the file is damaged or holds no training curve: leave it out "
                    "with --exclude")
            break
        add((pos, length))
        pos += 16 + length
    return out, pos, None


def _check(buf: bytes, frames: list[tuple[int, int]], path: str, base: int,
           number: int) -> None:
    """Every record's length and data checksums, at once; the first failure is an error."""
    if not frames:
        return
    at, size = np.array(frames, np.int64).T
    uniq, inverse = np.unique(size, return_inverse=True)
    crcs = np.concatenate([
        np.array([_length_crc(int(n)) for n in uniq], np.uint32)[inverse],
        masked_crc32c_many(buf, at + 12, size)])
    arr = np.frombuffer(buf, np.uint8)
    where = np.concatenate([at + 8, at + 12 + size])
    stored = arr[where].astype(np.uint32)
    for k in range(1, 4):
        stored |= arr[where + k].astype(np.uint32) << np.uint32(8 * k)
    bad = crcs != stored
    if not bad.any():
        return
    k = len(frames)
    first = int(min(i % k for i in np.flatnonzero(bad)))
    n, offset = number + first + 1, base + frames[first][0]
    if bad[first]:
        raise _damaged(path, n, offset, _CORRUPT_LENGTH)
    raise _damaged(path, n, offset, "fails its checksum; the file is damaged: leave it out")


def read_blocks(fh: BinaryIO, path: str, *, block: int = BLOCK
                ) -> Iterator[tuple[int, list[tuple[int, bytes]]]]:
    """The records of the open file ``fh`` a block at a time: (number of the block's first
    record, counting from 1, and its records as (byte offset, data)), every one checked by
    the rules of the module docs; ``path`` names the file in errors and warnings."""
    buf, base, number, want = b"", 0, 0, block
    while True:
        try:
            chunk = fh.read(want)
        except OSError as exc:
            raise IngestError(f"cannot read: {exc.strerror or exc}", path=path) from exc
        buf += chunk
        frames, pos, damaged = _frames(buf, path, base, number)
        _check(buf, frames, path, base, number)
        if damaged is not None:
            raise damaged
        if frames:
            yield number + 1, [(base + s, buf[s + 12:s + 12 + n]) for s, n in frames]
            number += len(frames)
        buf, base = buf[pos:], base + pos
        if not chunk:
            break
        # the rest of a record the block cut, in one read
        want = block if len(buf) < 12 else max(block, 16 + _U64.unpack_from(buf)[0] - len(buf))
    if buf:
        whole = f" of its {16 + _U64.unpack_from(buf)[0]:,}" if len(buf) >= 12 else ""
        warnings.warn(
            f"{path}: the file ends inside record {number + 1} (byte {base}): it holds "
            f"{len(buf):,}{whole} bytes; read the {number:,} records before it and left "
            "those bytes out (a run still writing, or killed while writing; or a damaged "
            "length)", IngestWarning, stacklevel=3)


def read_records(fh: BinaryIO, path: str, *, block: int = BLOCK
                 ) -> Iterator[tuple[int, int, bytes]]:
    """(record number from 1, byte offset, data) of every record of the open file ``fh``
    (:func:`read_blocks`, one record at a time)."""
    for first, records in read_blocks(fh, path, block=block):
        for k, (offset, data) in enumerate(records):
            yield first + k, offset, data
