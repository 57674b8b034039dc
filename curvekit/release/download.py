"""Download the release archive: resumable, verified, and moved into place atomically.

The pipeline follows pooch: stream into ``<dest>.part``, hash while streaming, compare the
sha256, and only then ``os.replace`` the part onto ``dest``. A transfer that breaks midway
keeps its ``.part`` and the next call resumes it with an HTTP ``Range`` request, so a
connection lost at 4.99 of 5.1 GB costs 0.11 GB, not 5.1.

Every transfer ends. A server that goes silent hits the per-operation ``timeout``; one that
trickles hits the minimum average rate (``min_rate`` bytes/s over each ``rate_window``
seconds); an optional overall ``deadline`` bounds the whole transfer; and a server that sends
an endless body is cut off at ``max_bytes`` (or at its own Content-Length), its partial file
deleted. The part file is only ever written inside its folder (``within``), and a full disk
is reported with the room needed and the room free, keeping only a valid prefix for resume.

The library never prints: progress goes to a callback, failures are :class:`DownloadError`
(or its subclass :class:`ChecksumError`) with a message that says what to do next.

>>> from curvekit.release.download import download
>>> download("https://example.org/a.tar.bz2", "/tmp/a.tar.bz2", sha256="ab12...")  # doctest: +SKIP
PosixPath('/tmp/a.tar.bz2')
"""

from __future__ import annotations

import errno
import hashlib
import http.client
import os
import re
import shutil
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from curvekit.errors import ChecksumError, DownloadError
from curvekit.progress import StageCounter

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MIN_RATE",
    "DEFAULT_RATE_WINDOW",
    "RESUME_HINT",
    "USER_AGENT",
    "ProgressCallback",
    "download",
    "file_sha256",
    "size_bound",
    "verify_file",
]

ProgressCallback = StageCounter
"""``progress(done, total)``: bytes so far (resumed bytes included), total or ``None``
(the counter of one stage of a :class:`curvekit.progress.Progress`)."""

USER_AGENT = "curvekit"

DEFAULT_MIN_RATE = 1024
"""Bytes per second a transfer must average over each :data:`DEFAULT_RATE_WINDOW`."""

DEFAULT_RATE_WINDOW = 60.0
"""Seconds over which the average transfer rate is measured."""

DEFAULT_MAX_BYTES = 16 << 30
"""Most bytes accepted when nothing says how big the file is (16 GiB; the release is 0.8 GB)."""

RESUME_HINT = "run curvekit fetch again to resume"

_OFFLINE_HINT = (
    "If this machine cannot reach it, download it by other means and pass --archive PATH "
    "(or try another mirror with --url)."
)
_CONTENT_RANGE = re.compile(r"bytes\s+(?:(\d+)-\d+|\*)/(\d+|\*)")
_SHA256 = re.compile(r"[0-9a-f]{64}")


def download(
    url: str,
    dest: str | os.PathLike[str],
    *,
    sha256: str | None,
    progress: ProgressCallback | None = None,
    timeout: float = 60.0,
    chunk_size: int = 1 << 20,
    urlopen: Callable[..., Any] | None = None,
    within: str | os.PathLike[str] | None = None,
    max_bytes: int | None = None,
    min_rate: float = DEFAULT_MIN_RATE,
    rate_window: float = DEFAULT_RATE_WINDOW,
    deadline: float | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Path:
    """Download ``url`` to ``dest``, resumable and verified. Returns ``dest``.

    An existing ``dest`` is returned untouched when ``sha256`` is ``None`` or matches. If it
    does not match, the file is downloaded afresh and replaces ``dest`` only once it
    verifies. ``sha256=None`` skips verification; the
    file is still moved into place atomically. ``timeout`` is per socket operation, not for
    the whole transfer. ``urlopen`` replaces :func:`urllib.request.urlopen` (for tests).

    Limits, each a :class:`DownloadError`:

    - ``within``: the folder ``dest`` must lie directly in, symlinks resolved (``fetch``
      passes the downloads folder), checked before anything is read or written.
    - ``max_bytes`` (default :data:`DEFAULT_MAX_BYTES`): a server announcing more is refused
      before any byte is written; a body running past it (or past the server's own
      Content-Length) is cut off and the partial file deleted.
    - ``min_rate`` bytes/s averaged over each ``rate_window`` seconds (default 1 KiB/s over
      60 s; ``0`` turns it off) and ``deadline`` seconds for the whole transfer (default
      none): the bytes received so far are a valid prefix and stay in ``<dest>.part`` for
      the next call to resume. Both are checked whenever a read returns, so they can be late
      by at most ``timeout``. ``clock`` replaces :func:`time.monotonic` (for tests).

    Examples
    --------
    >>> seen = []
    >>> path = download(  # doctest: +SKIP
    ...     "https://example.org/data.tar.bz2", "downloads/data.tar.bz2",
    ...     sha256="9f86d0...", progress=lambda done, total: seen.append((done, total)))
    """
    dest = Path(dest)
    part = dest.with_name(dest.name + ".part")
    if within is not None:
        # Before any read: a dest outside the folder (a symlink, a name that slipped past the
        # manifest's checks) must not even be hashed, let alone written.
        _check_within(Path(within), dest, part)
    expected = None if sha256 is None else _normalise_sha256(sha256)
    limit = DEFAULT_MAX_BYTES if max_bytes is None else max_bytes
    _check_limits(limit, min_rate, rate_window, deadline)
    # An existing file that does not match is stale, not trusted: download afresh into the
    # part file and replace it only once the new bytes verify, so a mistyped --sha256 never
    # costs a good cached copy.
    try:
        if dest.exists() and (expected is None
                              or file_sha256(dest, chunk_size=chunk_size) == expected):
            return dest
    except OSError as exc:
        raise DownloadError(f"cannot read {dest}: {exc}. Remove it and run again.") from exc
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _cannot_write(dest.parent, exc) from exc
    got = _fetch_into(
        part,
        url,
        opener=urlopen or urllib.request.urlopen,
        progress=progress or _ignore_progress,
        timeout=timeout,
        chunk_size=chunk_size,
        limits=_Limits(limit, min_rate, rate_window, deadline, clock, clock()),
    )
    if expected is not None and got != expected:
        part.unlink(missing_ok=True)
        raise ChecksumError(
            f"the file downloaded from {url} does not have the expected sha256: expected "
            f"{expected}, got {got}. The partial file {part} was deleted. Re-run to download "
            f"it again; if it fails again the mirror serves different bytes: use --url for "
            f"another mirror, or pass --sha256 HEX to pin a different hash deliberately."
        )
    try:
        os.replace(part, dest)
    except OSError as exc:
        raise _cannot_write(dest.parent, exc) from exc
    return dest


def file_sha256(
    path: str | os.PathLike[str],
    *,
    progress: ProgressCallback | None = None,
    chunk_size: int = 1 << 20,
) -> str:
    """The lowercase hex sha256 of a file, read in chunks (``OSError`` if unreadable).

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.NamedTemporaryFile() as f:
    ...     _ = f.write(b"test"); f.flush()
    ...     file_sha256(f.name)[:16]
    '9f86d081884c7d65'
    """
    hasher = hashlib.sha256()
    _hash_file_into(hasher, Path(path), chunk_size, progress)
    return hasher.hexdigest()


def verify_file(
    path: str | os.PathLike[str], sha256: str, *, delete_on_mismatch: bool = True
) -> None:
    """Raise :class:`ChecksumError` unless ``path`` has sha256 ``sha256`` (any case).

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.NamedTemporaryFile() as f:
    ...     _ = f.write(b"test"); f.flush()
    ...     verify_file(f.name, "9F86D081884C7D659A2FEAA0C55AD015A3BF4F1B2B0B822CD15D6C15B0F00A08")
    ...     try:
    ...         verify_file(f.name, "0" * 64, delete_on_mismatch=False)
    ...     except ChecksumError:
    ...         print("mismatch")
    mismatch
    """
    path = Path(path)
    expected = _normalise_sha256(sha256)
    got = file_sha256(path)
    if got == expected:
        return
    if delete_on_mismatch:
        path.unlink(missing_ok=True)
        fate = "It was deleted; re-run to download it again."
    else:
        fate = "It was left in place; check that it is the right file."
    raise ChecksumError(
        f"{path} does not have the expected sha256: expected {expected}, got {got}. {fate} "
        f"Pass --sha256 HEX to pin a different hash deliberately."
    )


def size_bound(approx_size: int) -> int:
    """The most bytes to accept for a file said to be about ``approx_size`` bytes long.

    A quarter more plus 1 MiB: room for a manifest's rounded size, never room for a server
    that sends without end.

    Examples
    --------
    >>> size_bound(802_000_000)
    1003548576
    """
    return approx_size + approx_size // 4 + (1 << 20)


@dataclass(frozen=True)
class _Limits:
    """What ends a transfer that does not end by itself (see :func:`download`)."""

    max_bytes: int
    min_rate: float
    rate_window: float
    deadline: float | None
    clock: Callable[[], float]
    started: float


def _fetch_into(
    part: Path,
    url: str,
    *,
    opener: Callable[..., Any],
    progress: ProgressCallback,
    timeout: float,
    chunk_size: int,
    limits: _Limits,
) -> str:
    """Bring ``part`` up to the full remote file; return its sha256."""

    def again() -> str:
        return _fetch_into(part, url, opener=opener, progress=progress, timeout=timeout,
                           chunk_size=chunk_size, limits=limits)

    hasher = hashlib.sha256()
    try:
        offset = part.stat().st_size if part.is_file() else 0
        if offset > limits.max_bytes:
            # Longer than any acceptable file, so it cannot be a prefix of one.
            part.unlink()
            offset = 0
        if offset:
            # Hashed before the request, not after: a response left unread while we hash a
            # multi-GB part could be dropped by the server as idle.
            _hash_file_into(hasher, part, chunk_size, None)
    except OSError as exc:
        raise _cannot_write(part.parent, exc) from exc
    try:
        request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})
        if offset and request.type in ("http", "https"):
            request.add_header("Range", f"bytes={offset}-")
        response = opener(request, timeout=timeout)
    except urllib.error.HTTPError as exc:
        exc.close()
        if exc.code == 416 and offset:
            # Nothing left to send: the part is complete, unless the server says the file
            # has another size (it changed, or the part is junk), then start over.
            _, size = _parse_content_range(exc.headers.get("Content-Range"))
            if size is None or size == offset:
                progress(offset, offset)
                return hasher.hexdigest()
            part.unlink()
            return again()
        raise _unreachable(url, f"HTTP {exc.code} {exc.reason}") from exc
    except urllib.error.URLError as exc:
        raise _unreachable(url, exc.reason) from exc
    except (OSError, http.client.HTTPException, ValueError) as exc:
        raise _unreachable(url, exc) from exc

    with response:
        status = getattr(response, "status", None)
        length = _parse_int(response.headers.get("Content-Length"))
        start, total = _parse_content_range(response.headers.get("Content-Range"))
        if offset and status == 206 and start != offset:
            # A 206 for bytes we did not ask for cannot be appended; ask for the whole file.
            response.close()
            part.unlink()
            return again()
        if offset and status == 206:
            if total is None and length is not None:
                total = offset + length
        else:
            # 200 (server ignored Range) or a file:// URL: the body is the whole file.
            offset, hasher, total = 0, hashlib.sha256(), length
        if total is not None and total > limits.max_bytes:
            # Refused before a byte is written; a part from an earlier call stays as it was.
            raise DownloadError(
                f"{url} announces {_size(total)}, more than the {_size(limits.max_bytes)} "
                f"expected at most for this file, so it is not the file expected; nothing "
                f"was downloaded. Use another mirror with --url, or a manifest that "
                f"describes this file with --manifest.")
        progress(offset, total)
        done = _receive(response, part, url, offset=offset, total=total, hasher=hasher,
                        progress=progress, chunk_size=chunk_size, limits=limits)
    # http.client returns b"" rather than raising when the peer closes before Content-Length.
    if total is not None and done < total:
        raise _interrupted(url, part, done, total, "connection closed early")
    return hasher.hexdigest()


def _receive(
    response: Any,
    part: Path,
    url: str,
    *,
    offset: int,
    total: int | None,
    hasher: Any,
    progress: ProgressCallback,
    chunk_size: int,
    limits: _Limits,
) -> int:
    """Append the body to ``part`` (from ``offset``) within ``limits``; return its new size.

    Written unbuffered and hashed only once written, so at any failure the part holds
    exactly the ``done`` bytes hashed so far: a valid prefix to resume from.
    """
    # read1 returns what has arrived instead of waiting for a whole chunk, so a trickling
    # server is measured every time a few bytes come, not once per megabyte.
    read = getattr(response, "read1", None) or response.read
    # The server's own size when it states one, else the caller's bound: a byte past it
    # means the body is not the file.
    cap = total if total is not None else limits.max_bytes
    done = offset
    window_start, window_done = limits.clock(), done
    try:
        out: BinaryIO = part.open("ab" if offset else "wb", buffering=0)
    except OSError as exc:
        if not offset:  # a stale part that was to be overwritten is no prefix of this body
            part.unlink(missing_ok=True)
        raise _write_failed(part, url, exc, done, total, limits, kept=bool(offset)) from exc
    with out:
        while True:
            try:
                chunk = read(min(chunk_size, cap - done + 1))
            except (OSError, http.client.HTTPException) as exc:
                raise _interrupted(url, part, done, total, exc) from exc
            if not chunk:
                return done
            if done + len(chunk) > cap:
                out.close()
                part.unlink(missing_ok=True)
                source = ("its own Content-Length" if total is not None
                          else "the most expected for this file")
                raise DownloadError(
                    f"{url} sent more than {_size(cap)} ({source}); the download was stopped "
                    f"and the partial file {part} deleted. The server is not serving the "
                    f"expected file: use another mirror with --url.")
            try:
                _write_all(out, chunk)
            except OSError as exc:
                kept = _cut_back(out, part, done)
                raise _write_failed(part, url, exc, done, total, limits, kept=kept) from exc
            hasher.update(chunk)
            done += len(chunk)
            progress(done, total)
            now = limits.clock()
            if limits.deadline is not None and now - limits.started > limits.deadline:
                raise _stopped(url, part, done, total,
                               f"it did not finish within the deadline of {limits.deadline:g} s")
            elapsed = now - window_start
            if limits.min_rate > 0 and elapsed >= limits.rate_window and elapsed > 0:
                rate = (done - window_done) / elapsed
                if rate < limits.min_rate:
                    raise _stopped(
                        url, part, done, total,
                        f"it is too slow: {done - window_done} bytes in the last {elapsed:.3g} "
                        f"s ({rate:.3g} bytes/s), below the minimum of {limits.min_rate:g} "
                        f"bytes/s")
                window_start, window_done = now, done


def _write_all(out: BinaryIO, data: bytes) -> None:
    """Write all of ``data`` to an unbuffered file (a raw write may write only part)."""
    view = memoryview(data)
    while view:
        written = out.write(view)
        view = view[written:]


def _cut_back(out: BinaryIO, part: Path, size: int) -> bool:
    """Cut ``part`` back to its first ``size`` bytes after a failed write; ``False`` if it was
    deleted instead (empty, or not cut back), so nothing partial confuses a resume."""
    try:
        if size:
            out.truncate(size)
            return True
    except OSError:
        pass
    out.close()
    part.unlink(missing_ok=True)
    return False


def _check_limits(
    max_bytes: int, min_rate: float, rate_window: float, deadline: float | None
) -> None:
    checks = (
        ("max_bytes", max_bytes, max_bytes >= 1, "a positive number of bytes"),
        ("min_rate", min_rate, min_rate >= 0, "bytes per second, or 0 for no minimum"),
        ("rate_window", rate_window, rate_window > 0, "a positive number of seconds"),
        ("deadline", deadline, deadline is None or deadline > 0,
         "a positive number of seconds, or None for no deadline"),
    )
    for name, value, ok, expected in checks:
        if not ok:
            raise DownloadError(f"{name}={value!r} is out of range: expected {expected}")


def _check_within(folder: Path, *paths: Path) -> None:
    try:
        root = folder.resolve()
        resolved = [(path, path.resolve()) for path in paths]
    except (OSError, RuntimeError) as exc:  # RuntimeError: a symlink loop
        raise DownloadError(f"cannot resolve the download path under {folder}: {exc}") from exc
    for path, target in resolved:
        if target.parent != root:
            raise DownloadError(
                f"refusing to write {path}: it resolves to {target}, which is not inside the "
                f"downloads folder {root}. Downloads are only written there, under a bare file "
                f"name: fix the manifest's archive.file_name or remove the link.")


def _unreachable(url: str, reason: object) -> DownloadError:
    return DownloadError(f"could not download {url}: {reason}. {_OFFLINE_HINT}")


def _interrupted(
    url: str, part: Path, done: int, total: int | None, reason: object
) -> DownloadError:
    of_total = f" of {total}" if total is not None else ""
    return DownloadError(
        f"the download of {url} was interrupted after {done}{of_total} bytes ({reason}). "
        f"The {done} bytes are kept in {part}; re-run to resume from there. {_OFFLINE_HINT}"
    )


def _stopped(url: str, part: Path, done: int, total: int | None, why: str) -> DownloadError:
    of_total = f" of {total}" if total is not None else ""
    return DownloadError(
        f"the download of {url} was stopped after {done}{of_total} bytes: {why}. The {done} "
        f"bytes received are kept in {part}, a valid prefix of the file: {RESUME_HINT}, or "
        f"use a faster mirror with --url.")


def _write_failed(part: Path, url: str, exc: OSError, done: int, total: int | None,
                  limits: _Limits, *, kept: bool) -> DownloadError:
    folder = part.parent
    if kept and done:
        fate = (f"The {done} bytes written so far are kept in {part}, a valid prefix of the "
                f"file, so nothing is downloaded twice")
    else:
        fate = f"No partial file is kept in {folder}"
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        need = (f"{_size(total - done)} more are needed" if total is not None
                else f"up to {_size(limits.max_bytes - done)} more may be needed (the server "
                     f"did not say the size)")
        try:
            free = f"{_size(shutil.disk_usage(folder).free)} are free"
        except OSError:
            free = "the free space cannot be read"
        return DownloadError(
            f"no room left in {folder} while downloading {url} ({exc.strerror}): {need} and "
            f"{free}. {fate}. Free up space there (or choose another home with --home DIR or "
            f"CURVEKIT_HOME) and {RESUME_HINT}.")
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return _cannot_write(folder, exc)
    return DownloadError(f"cannot write {part} while downloading {url}: {exc}. {fate}.")


def _cannot_write(folder: Path, exc: OSError) -> DownloadError:
    return DownloadError(
        f"cannot write in the downloads folder {folder}: {exc.strerror or exc}. Make it "
        f"writable, or choose another home with --home DIR or CURVEKIT_HOME.")


def _size(n: int) -> str:
    """``802000000 bytes (802.0 MB)``: exact for the record, rounded for the reader."""
    for unit, scale in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if abs(n) >= scale:
            return f"{n} bytes ({n / scale:.1f} {unit})"
    return f"{n} bytes"


def _hash_file_into(
    hasher: hashlib._Hash, path: Path, chunk_size: int, progress: ProgressCallback | None
) -> None:
    total = path.stat().st_size
    done = 0
    with path.open("rb") as f:
        while chunk := f.read(chunk_size):
            hasher.update(chunk)
            done += len(chunk)
            if progress is not None:
                progress(done, total)


def _normalise_sha256(sha256: str) -> str:
    # Checked up front so a typo in --sha256 fails now, not after a 5 GB download.
    value = sha256.strip().lower()
    if not _SHA256.fullmatch(value):
        raise ChecksumError(f"{sha256!r} is not a sha256: expected 64 hexadecimal digits")
    return value


def _parse_content_range(header: str | None) -> tuple[int | None, int | None]:
    """``(start, total)`` of ``bytes a-b/n`` or ``bytes */n``; ``None`` where unknown."""
    match = _CONTENT_RANGE.fullmatch(header.strip()) if header else None
    if match is None:
        return None, None
    start, total = match.groups()
    return _parse_int(start), _parse_int(total)


def _parse_int(value: str | None) -> int | None:
    return int(value) if value is not None and value.strip().isdigit() else None


def _ignore_progress(done: int, total: int | None) -> None:
    pass
