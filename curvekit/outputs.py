"""Writing what a command makes, with one rule for when the writing fails.

Plot and figure files, the figures' folder, the report, a sweep's work folder and the
command line's standard output are written through this module. An ``OSError`` met there
(a full disk, a read-only or forbidden folder, a name longer than the file system allows,
a file where a folder should be) becomes an :class:`~curvekit.errors.OutputError` that
names the path, says what is wrong in words, and how to fix it, never a traceback:

* :func:`writing` translates the errors of a block that writes the paths it names;
* :func:`write_file` and :func:`output_stream` write one file whole or not at all: into a
  work file beside it, then renamed over it, so a failure leaves an earlier file of that
  name as it was;
* :func:`stdout_guard` does the same for the standard output, where what was written
  before the failure stays written.

An ``OSError`` about another file (an input that cannot be read) is not rewritten.

>>> import tempfile, pathlib
>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> write_file(folder / "a.txt", "hello", "the note").read_text()
'hello'
>>> _ = (folder / "f").write_text("")
>>> try:
...     write_file(folder / "f" / "b", "x", "the note")
... except OutputError as exc:
...     print(str(exc).replace(str(folder), "DIR"))
cannot write the note DIR/f/b: DIR/f is a file, not a folder; remove it or choose another place
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from curvekit.errors import OutputError

__all__ = ["name_max", "output_error", "output_stream", "stdout_guard", "write_file",
           "writing"]

_FULL = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
_DENIED = {errno.EROFS, errno.EACCES, errno.EPERM}
_NOT_A_FOLDER = {errno.ENOTDIR, errno.EEXIST}


def _size(n: int) -> str:
    for unit, scale in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def _mode(path: Path) -> int | None:
    """The file type bits of ``path`` (links followed), None if it cannot be looked at."""
    try:
        return stat.S_IFMT(path.stat().st_mode)
    except (OSError, ValueError):
        return None


def _existing(path: Path) -> Path | None:
    """``path`` or its nearest ancestor that exists (None if none can be looked at)."""
    for candidate in (path, *path.parents):
        with contextlib.suppress(OSError):
            if candidate.exists():
                return candidate
    return None


def name_max(folder: str | os.PathLike[str] | None) -> int:
    """The most bytes a file name may have in ``folder`` (or the nearest folder above it
    that exists); 255 where the system does not say."""
    place = _existing(Path(folder)) if folder is not None else None
    with contextlib.suppress(OSError, ValueError, AttributeError):
        return os.pathconf(place or "/", "PC_NAME_MAX")
    return 255


def _too_long(path: Path) -> str:
    limit = name_max(path.parent)
    for part in path.parts:
        size = len(os.fsencode(part))
        if size > limit:
            shown = part if len(part) <= 40 else part[:37] + "..."
            return (f"the name {shown!r} is {size} bytes, more than the {limit} a file or "
                    "folder name may have on this file system; choose a shorter name")
    size = len(os.fsencode(str(path.absolute())))
    return (f"the path is {size} bytes long, more than this file system allows; choose a "
            "place with a shorter path")


def output_error(exc: OSError, path: str | os.PathLike[str] | None,
                 what: str) -> OutputError:
    """The :class:`OutputError` for ``exc``, met writing ``what`` (e.g. "the plot") to
    ``path`` (None: the standard output)."""
    reason = exc.strerror or str(exc)
    if path is None:
        where = "the standard output"
        if exc.errno in _FULL:
            fix = "free some space where it goes, or send it elsewhere"
        else:
            fix = "send it to a file or program that takes it"
        return OutputError(f"cannot write {what} to {where}: {reason} "
                           f"[{errno.errorcode.get(exc.errno or 0, exc.errno)}]; {fix}; what "
                           "was written before stays written")
    target = Path(os.fsdecode(exc.filename)) if exc.filename is not None else Path(path)
    head = f"cannot write {what} {os.fspath(path)}"
    kind = _mode(target)
    special = kind is not None and kind not in (stat.S_IFREG, stat.S_IFDIR)
    if exc.errno in _FULL and special:  # /dev/full, a pipe: no disk to free
        message = f"{head}: {target} takes no more data ({reason}); choose another place"
    elif exc.errno in _FULL:
        folder = _existing(target.parent)
        free = ""
        if folder is not None:
            with contextlib.suppress(OSError):
                free = f", {_size(shutil.disk_usage(folder).free)} free"
        message = (f"{head}: no space left on the disk that holds {folder or target.parent} "
                   f"({reason}{free}); free some space there or choose another place")
    elif exc.errno in _DENIED:
        folder = _existing(target) or target
        message = (f"{head}: {folder} cannot be written ({reason}); choose a writable "
                   "place, or fix its permissions")
    elif exc.errno == errno.ENAMETOOLONG:
        message = f"{head}: {_too_long(target)}"
    elif exc.errno in _NOT_A_FOLDER or exc.errno == errno.EISDIR:
        blocker = next((p for p in (target, *target.parents)
                        if _mode(p) not in (None, stat.S_IFDIR)), None)
        if blocker is not None and blocker != Path(path):
            message = (f"{head}: {blocker} is a file, not a folder; remove it or choose "
                       "another place")
        elif exc.errno == errno.EISDIR or kind == stat.S_IFDIR:
            message = f"{head}: {target} is a folder; give the name of a file to write"
        else:
            message = f"{head}: {reason} ({target}); check that place, or choose another"
    else:
        message = f"{head}: {reason} ({target}); check that place, or choose another"
    return OutputError(message, path=os.fspath(target))


def _concerns(exc: OSError, paths: tuple[Path, ...]) -> bool:
    """Whether ``exc`` is about one of ``paths``: no file named (a write to an open file),
    one of them, a file inside one, or a folder above one (made for it)."""
    if exc.filename is None:
        return True
    name = Path(os.path.abspath(os.fsdecode(exc.filename)))
    for path in paths:
        path = Path(os.path.abspath(path))
        if name == path or name.is_relative_to(path) or path.is_relative_to(name):
            return True
    return False


@contextlib.contextmanager
def writing(what: str, *paths: str | os.PathLike[str]) -> Iterator[None]:
    """Turn an ``OSError`` of the block about ``paths`` (what it writes, and their work
    files) into an :class:`OutputError` about ``what``, the first path."""
    try:
        yield
    except OSError as exc:
        targets = tuple(Path(p) for p in paths)
        if isinstance(exc, BrokenPipeError) or not _concerns(exc, targets):
            raise
        raise output_error(exc, paths[0], what) from exc


@contextlib.contextmanager
def output_stream(path: str | os.PathLike[str], what: str) -> Iterator[BinaryIO]:
    """A binary stream that writes ``path`` whole or not at all (its folders made as
    needed); errors as :func:`writing` says.

    A new or regular file is written beside it and renamed over it when the block ends
    without error: a failure leaves the file it would have replaced. Anything else
    (``/dev/stdout``, a pipe, a link) is written in place.
    """
    path = Path(path)
    # Short, so that a name near the file system's limit still has a work file beside it.
    work = path.with_name(f".curvekit-{uuid.uuid4().hex[:8]}.tmp")
    with writing(what, path, work):
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_symlink() or _mode(path) not in (None, stat.S_IFREG):
            with open(path, "wb") as stream:
                yield stream
            return
        try:
            with open(work, "xb") as stream:
                yield stream
            os.replace(work, path)
        except BaseException:
            with contextlib.suppress(OSError):
                work.unlink()
            raise


def write_file(path: str | os.PathLike[str], data: bytes | str, what: str) -> Path:
    """Write ``data`` to ``path`` through :func:`output_stream` and return the path."""
    with output_stream(path, what) as stream:
        stream.write(data.encode() if isinstance(data, str) else data)
    return Path(path)


@contextlib.contextmanager
def stdout_guard(what: str = "the output") -> Iterator[None]:
    """The one guard of the command line's writes to stdout: a failing write (a full disk
    behind ``>``, ``/dev/full``) becomes an :class:`OutputError`; a reader that has gone
    (``| head``) stays a ``BrokenPipeError`` (the quiet exit 141). After a failure, stdout
    is pointed at the null device, so that Python's own flush at exit cannot fail again."""
    try:
        yield
    except BrokenPipeError:
        raise
    except OSError as exc:
        if exc.filename is not None:  # a file, not the standard output
            raise
        with contextlib.suppress(OSError, ValueError, AttributeError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
        raise output_error(exc, None, what) from exc
