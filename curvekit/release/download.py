"""Download the release archive: resumable, verified, and moved into place atomically.

The pipeline follows pooch: stream into ``<dest>.part``, hash while streaming, compare the
sha256, and only then ``os.replace`` the part onto ``dest``. A transfer that breaks midway
keeps its ``.part`` and the next call resumes it with an HTTP ``Range`` request, so a
connection lost at 4.99 of 5.1 GB costs 0.11 GB, not 5.1.

The library never prints: progress goes to a callback, failures are :class:`DownloadError`
(or its subclass :class:`ChecksumError`) with a message that says what to do next.

>>> from curvekit.release.download import download
>>> download("https://example.org/a.tar.bz2", "/tmp/a.tar.bz2", sha256="ab12...")  # doctest: +SKIP
PosixPath('/tmp/a.tar.bz2')
"""

from __future__ import annotations

import hashlib
import http.client
import os
import re
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from curvekit.errors import ChecksumError, DownloadError

__all__ = ["USER_AGENT", "ProgressCallback", "download", "file_sha256", "verify_file"]

ProgressCallback = Callable[[int, int | None], None]
"""``progress(done, total)``: bytes so far (resumed bytes included), total or ``None``."""

USER_AGENT = "curvekit"

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
) -> Path:
    """Download ``url`` to ``dest``, resumable and verified. Returns ``dest``.

    An existing ``dest`` is returned untouched when ``sha256`` is ``None`` or matches. If it
    does not match, the file is downloaded afresh and replaces ``dest`` only once it
    verifies. ``sha256=None`` skips verification; the
    file is still moved into place atomically. ``timeout`` is per socket operation, not for
    the whole transfer. ``urlopen`` replaces :func:`urllib.request.urlopen` (for tests).

    Examples
    --------
    >>> seen = []
    >>> path = download(  # doctest: +SKIP
    ...     "https://example.org/data.tar.bz2", "downloads/data.tar.bz2",
    ...     sha256="9f86d0...", progress=lambda done, total: seen.append((done, total)))
    """
    dest = Path(dest)
    expected = None if sha256 is None else _normalise_sha256(sha256)
    # An existing file that does not match is stale, not trusted: download afresh into the
    # part file and replace it only once the new bytes verify, so a mistyped --sha256 never
    # costs a good cached copy.
    if dest.exists() and (expected is None or file_sha256(dest, chunk_size=chunk_size) == expected):
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    got = _fetch_into(
        part,
        url,
        opener=urlopen or urllib.request.urlopen,
        progress=progress or _ignore_progress,
        timeout=timeout,
        chunk_size=chunk_size,
    )
    if expected is not None and got != expected:
        part.unlink(missing_ok=True)
        raise ChecksumError(
            f"the file downloaded from {url} does not have the expected sha256: expected "
            f"{expected}, got {got}. The partial file {part} was deleted. Re-run to download "
            f"it again; if it fails again the mirror serves different bytes: use --url for "
            f"another mirror, or pass --sha256 HEX to pin a different hash deliberately."
        )
    os.replace(part, dest)
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


def _fetch_into(
    part: Path,
    url: str,
    *,
    opener: Callable[..., Any],
    progress: ProgressCallback,
    timeout: float,
    chunk_size: int,
) -> str:
    """Bring ``part`` up to the full remote file; return its sha256."""
    offset = part.stat().st_size if part.is_file() else 0
    hasher = hashlib.sha256()
    if offset:
        # Hashed before the request, not after: a response left unread while we hash a
        # multi-GB part could be dropped by the server as idle.
        _hash_file_into(hasher, part, chunk_size, None)
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
            return _fetch_into(
                part, url, opener=opener, progress=progress, timeout=timeout, chunk_size=chunk_size
            )
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
            return _fetch_into(
                part, url, opener=opener, progress=progress, timeout=timeout, chunk_size=chunk_size
            )
        if offset and status == 206:
            if total is None and length is not None:
                total = offset + length
        else:
            # 200 (server ignored Range) or a file:// URL: the body is the whole file.
            offset, hasher, total = 0, hashlib.sha256(), length
        done = offset
        progress(done, total)
        try:
            with part.open("ab" if offset else "wb") as out:
                while True:
                    try:
                        chunk = response.read(chunk_size)
                    except (OSError, http.client.HTTPException) as exc:
                        raise _interrupted(url, part, done, total, exc) from exc
                    if not chunk:
                        break
                    out.write(chunk)
                    hasher.update(chunk)
                    done += len(chunk)
                    progress(done, total)
        except OSError as exc:
            raise DownloadError(f"cannot write {part} while downloading {url}: {exc}") from exc
    # http.client returns b"" rather than raising when the peer closes before Content-Length.
    if total is not None and done < total:
        raise _interrupted(url, part, done, total, "connection closed early")
    return hasher.hexdigest()


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
