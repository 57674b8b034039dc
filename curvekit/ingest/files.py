"""The one door through which ``curvekit add`` finds and reads the files of a source.

Every importer (CSV, Lightning's ``hparams.yaml``, Keras, TensorBoard, MLflow, W&B, Hugging
Face, AlgoPerf, the release layout) lists folders with :meth:`SourceFiles.walk` or
:meth:`SourceFiles.listdir` and reads files with :meth:`SourceFiles.open` and the helpers
built on it; no other module of :mod:`curvekit.ingest` opens a file (a test reads their
source to check). The rules, for every file of every format:

* **Regular files only.** A FIFO, a socket, a character or block device, or a folder where
  a file is expected is refused with an :class:`~curvekit.errors.IngestError` naming it and
  what it is. Its kind is checked (``lstat``) before it is opened, it is opened with
  ``O_NONBLOCK`` and checked again on the open descriptor (``fstat``), so a file swapped for
  a FIFO in between is still refused and no read ever waits on a writer.
* **Nothing through a link.** Each folder below the source is opened from its parent's
  descriptor with ``O_NOFOLLOW``, and so is the file: a symbolic link anywhere on the way,
  to a file or a folder, inside the source or out of it, is refused, naming the link and
  where it points. A walk does not enter a linked folder; an
  :class:`~curvekit.errors.IngestWarning` names the folders it left out. The source itself,
  the folder or file the user names, may be a link: it is the user's own choice.
* **Links when asked** (``follow_links=True``, ``curvekit add --follow-links``): links are
  followed wherever they point, still to regular files only, and a walk enters each folder
  once (a link to a folder above it does not loop).
* **Small files stay small.** Files curvekit reads whole for a few values (YAML, MLflow
  params and tags) are read up to :data:`MAX_SIDE_FILE` bytes; a larger one is refused
  before it is read.
* Folders are walked iteratively, at most :data:`MAX_DEPTH` below the source, keeping one
  descriptor per level.

>>> import pathlib, tempfile
>>> root = pathlib.Path(tempfile.mkdtemp()); (root / "run").mkdir()
>>> _ = (root / "run" / "log.csv").write_text("step,loss\\n")
>>> files = SourceFiles.of(root)
>>> [(top.relative_to(root).as_posix(), names) for top, _, names in files.walk(root)]
[('.', []), ('run', ['log.csv'])]
>>> files.read_bytes(root / "run" / "log.csv")
b'step,loss\\n'
"""

from __future__ import annotations

import errno
import os
import stat
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from curvekit.errors import IngestError, IngestWarning
from curvekit.ingest.select import ALL, FileFilter

__all__ = ["MAX_DEPTH", "MAX_SIDE_FILE", "SourceFiles", "files_of", "read_named"]

MAX_SIDE_FILE = 16 << 20
"""The most bytes read from a file that holds a few values (``hparams.yaml``,
``meta.yaml``, MLflow's ``params/`` and ``tags/`` files): real ones are kilobytes."""
MAX_DEPTH = 64
"""The deepest folder a walk enters below the source; real logs nest a handful deep."""

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NONBLOCK | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISDIR, "a folder"), (stat.S_ISLNK, "a link"))


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _not_regular(path: Path, mode: int, rel: str) -> IngestError:
    return IngestError(f"{_kind(mode)}, not a regular file; curvekit add reads only regular "
                       f"files: leave it out with --exclude '{rel}'", path=str(path))


def _failed(path: Path, exc: OSError) -> IngestError:
    return IngestError(f"cannot read: {exc.strerror or exc}", path=str(path))


@dataclass(frozen=True)
class SourceFiles:
    """The files of one source (``root``, a folder) as ``curvekit add`` may read them.

    ``named`` is the file the user named as the source, if any (read even through a link);
    ``follow_links`` lets every link be followed (see the module docs); a file that
    ``select``'s ``--exclude`` patterns leave out does not :meth:`exist` (the files read
    beside a log, such as ``hparams.yaml``, are left out like the logs).
    """

    root: Path
    follow_links: bool = False
    named: Path | None = None
    select: FileFilter = ALL
    _warned: set[str] = field(default_factory=set, compare=False, repr=False)
    _read: set[str] = field(default_factory=set, compare=False, repr=False)

    @classmethod
    def of(cls, source: Path, *, follow_links: bool = False,
           select: FileFilter = ALL) -> SourceFiles:
        """The files of ``source``: a folder, or a file (then its folder, for files read
        beside it, such as an ``hparams.yaml``)."""
        source = Path(source)
        if source.is_dir():
            return cls(source, follow_links, select=select)
        return cls(source.parent, follow_links, named=source, select=select)

    # -------------------------------------------------------------- where a path lies
    def _parts(self, path: Path) -> tuple[str, ...]:
        """``path``'s components below the root; refused if it is not below it."""
        try:
            parts = Path(path).relative_to(self.root).parts
        except ValueError:
            parts = ("..",)
        if ".." in parts:
            raise IngestError(f"outside the source folder {self.root}; curvekit add reads "
                              "only files inside the folder it is given", path=str(path))
        return parts

    def _rel(self, path: Path) -> str:
        try:
            return Path(path).relative_to(self.root).as_posix()
        except ValueError:
            return Path(path).name

    def _link(self, path: Path, target: str) -> IngestError:
        where = Path(target) if os.path.isabs(target) else path.parent / target
        inside = not os.path.relpath(os.path.normpath(where), self.root).startswith("..")
        return IngestError(
            f"a link (to {target!r}, {'inside' if inside else 'outside'} the source folder); "
            "curvekit add reads only regular files inside the folder it is given, never "
            f"through a link: copy the file in, leave it out with --exclude "
            f"'{self._rel(path)}', or pass --follow-links to read through links",
            path=str(path))

    def _open_dir(self, path: Path) -> int:
        """A descriptor of the folder ``path`` (the root or below it), reached without
        following a link below the root unless links are followed."""
        fd = os.open(self.root, _DIR_FLAGS)
        try:
            here = self.root
            for part in self._parts(path):
                here = here / part
                child = self._child_dir(fd, part, here)
                os.close(fd)
                fd = child
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _child_dir(self, parent: int, name: str, path: Path) -> int:
        if not self.follow_links:
            info = os.stat(name, dir_fd=parent, follow_symlinks=False)
            if stat.S_ISLNK(info.st_mode):
                raise self._link(path, os.readlink(name, dir_fd=parent))
            if not stat.S_ISDIR(info.st_mode):
                raise _not_regular(path, info.st_mode, self._rel(path))
        flags = _DIR_FLAGS | (0 if self.follow_links else os.O_NOFOLLOW)
        try:
            return os.open(name, flags, dir_fd=parent)
        except OSError as exc:  # made a link since it was checked
            raise self._swapped(exc, parent, name, path) from None

    # -------------------------------------------------------------- reading
    def _open_fd(self, path: Path) -> int:
        path = Path(path)
        if self.named is not None and path == self.named:
            fd = os.open(path, _FILE_FLAGS)  # the user's own choice: links followed
            return self._regular(fd, path)
        parts = self._parts(path)
        if not parts:
            raise IngestError("a folder, not a file", path=str(path))
        parent = self._open_dir(path.parent)
        try:
            name = parts[-1]
            info = os.stat(name, dir_fd=parent, follow_symlinks=self.follow_links)
            if stat.S_ISLNK(info.st_mode):
                raise self._link(path, os.readlink(name, dir_fd=parent))
            if not stat.S_ISREG(info.st_mode):
                raise _not_regular(path, info.st_mode, self._rel(path))
            flags = _FILE_FLAGS | (0 if self.follow_links else os.O_NOFOLLOW)
            try:
                fd = os.open(name, flags, dir_fd=parent)
            except OSError as exc:  # made a link since it was checked
                raise self._swapped(exc, parent, name, path) from None
            return self._regular(fd, path)
        finally:
            os.close(parent)

    def _swapped(self, exc: OSError, parent: int, name: str, path: Path) -> Exception:
        """The error for an open that ``O_NOFOLLOW`` stopped: the link, named."""
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and not self.follow_links:
            try:
                return self._link(path, os.readlink(name, dir_fd=parent))
            except OSError:
                pass
        return exc

    def _regular(self, fd: int, path: Path) -> int:
        """``fd`` if it is a regular file (checked on the descriptor: no race), else
        closed and refused."""
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            os.close(fd)
            raise _not_regular(path, mode, self._rel(path))
        return fd

    def open(self, path: Path) -> BinaryIO:
        """``path`` opened for reading in binary, by the rules of the module docs; it is
        one of the files :meth:`read` lists."""
        fh = self._open(path)
        self._read.add(str(path))
        return fh

    def _open(self, path: Path) -> BinaryIO:
        try:
            fd = self._open_fd(path)
        except OSError as exc:
            raise _failed(Path(path), exc) from exc
        return os.fdopen(fd, "rb")

    def read(self) -> list[str]:
        """Every file opened or read whole so far, sorted: the files the runs are made of.
        A first line or a first few bytes looked at to tell a format (:meth:`read_line`,
        :meth:`read_head`) do not count."""
        return sorted(self._read)

    def read_bytes(self, path: Path, *, limit: int | None = None,
                   refuse: str | None = None) -> bytes:
        """The bytes of ``path``; with ``limit``, a file larger than that is refused unread
        (``refuse`` says why and what to do)."""
        with self.open(path) as fh:
            try:
                if limit is None:
                    return fh.read()
                size = os.fstat(fh.fileno()).st_size
                data = fh.read(limit + 1) if size <= limit else b""
            except OSError as exc:
                raise _failed(Path(path), exc) from exc
        if size > limit or len(data) > limit:
            raise IngestError(f"{max(size, len(data)):,} bytes, more than the {limit:,} read "
                              f"from such a file; {refuse or 'is this the right file?'}",
                              path=str(path))
        return data

    def read_text(self, path: Path, *, limit: int = MAX_SIDE_FILE, errors: str = "strict",
                  refuse: str | None = None) -> str:
        """The UTF-8 text of a small file (at most ``limit`` bytes)."""
        data = self.read_bytes(path, limit=limit, refuse=refuse)
        try:
            return data.decode("utf-8", errors=errors)
        except UnicodeDecodeError as exc:
            raise IngestError(f"not UTF-8 text: {exc}", path=str(path)) from exc

    def read_line(self, path: Path, limit: int) -> bytes:
        """The first line of ``path``, at most ``limit`` bytes of it."""
        with self._open(path) as fh:
            try:
                return fh.readline(limit)
            except OSError as exc:
                raise _failed(Path(path), exc) from exc

    def read_head(self, path: Path, size: int) -> bytes:
        """The first ``size`` bytes of ``path`` (fewer if it is shorter)."""
        with self._open(path) as fh:
            try:
                return fh.read(size)
            except OSError as exc:
                raise _failed(Path(path), exc) from exc

    # -------------------------------------------------------------- folders
    def _follows(self, path: Path) -> bool:
        return self.follow_links or Path(path) in (self.root, self.named)

    def excluded(self, path: Path) -> bool:
        """Whether an ``--exclude`` pattern leaves ``path`` out."""
        return not self.select.keeps_folder(self._rel(path))

    def exists(self, path: Path) -> bool:
        """Whether anything is at ``path`` that ``--exclude`` does not leave out: a link
        or a FIFO too, so that reading it is refused, naming it, rather than passed over
        in silence."""
        return not self.excluded(path) and os.path.lexists(path)

    def is_dir(self, path: Path) -> bool:
        """Whether ``path`` is a folder (not a link to one, unless links are followed)."""
        try:
            return stat.S_ISDIR(os.stat(path, follow_symlinks=self._follows(path)).st_mode)
        except (OSError, ValueError):
            return False

    def listdir(self, path: Path) -> list[str]:
        """The sorted names in the folder ``path``."""
        try:
            fd = self._open_dir(path)
        except OSError as exc:
            raise _failed(Path(path), exc) from exc
        try:
            return sorted(os.listdir(fd))
        finally:
            os.close(fd)

    def walk(self, top: Path | None = None) -> Iterator[tuple[Path, list[str], list[str]]]:
        """Like :func:`os.walk` (top-down; remove names from the folder list to leave those
        folders out), for ``top`` (the root by default) and the folders below it.

        The file list holds everything that is not a folder: links, FIFOs and devices
        too, so that a reader that wants one of them refuses it by name. A linked folder
        is listed among the folders; if it is still there when the walk goes on, it is
        entered only when links are followed, and otherwise left out with a warning.
        """
        top = self.root if top is None else Path(top)
        try:
            fd = self._open_dir(top)
        except OSError as exc:
            raise _failed(top, exc) from exc
        stack: list[tuple[Path, int, Iterator[str], set[str]]] = []
        seen: set[tuple[int, int]] = set()
        try:
            while fd >= 0:
                info = os.fstat(fd)
                seen.add((info.st_dev, info.st_ino))
                dirs, files, linked = self._list(fd, top)
                # iter() reads the list as the caller leaves it after the yield
                stack.append((top, fd, iter(dirs), linked))
                fd = -1
                yield top, dirs, files
                while stack and fd < 0:
                    here, parent, names, links = stack[-1]
                    name = next(names, None)
                    if name is None:
                        stack.pop()
                        os.close(parent)
                    else:
                        fd = self._enter(parent, here / name, name in links, len(stack), seen)
                        top = here / name
        finally:
            if fd >= 0:
                os.close(fd)
            for _, parent, _, _ in stack:
                os.close(parent)

    def _list(self, fd: int, top: Path) -> tuple[list[str], list[str], set[str]]:
        dirs, files, linked = [], [], set()
        try:
            entries = list(os.scandir(fd))
        except OSError as exc:
            raise _failed(top, exc) from exc
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                dirs.append(entry.name)
            elif entry.is_symlink() and entry.is_dir(follow_symlinks=True):
                dirs.append(entry.name)
                linked.add(entry.name)
            else:
                files.append(entry.name)
        return sorted(dirs), sorted(files), linked

    def _enter(self, parent: int, path: Path, linked: bool, depth: int,
               seen: set[tuple[int, int]]) -> int:
        """A descriptor of the child folder ``path``, or -1 where the walk passes it by."""
        if linked and not self.follow_links:
            self._warn_link(path, parent)
            return -1
        if depth > MAX_DEPTH:
            raise IngestError(f"folders nested more than {MAX_DEPTH} deep below the source; "
                              "point at a folder nearer the logs, or leave this one out with "
                              f"--exclude '{self._rel(path)}'", path=str(path))
        try:
            fd = self._child_dir(parent, path.name, path)
        except FileNotFoundError:
            return -1  # removed while the walk went on
        except OSError as exc:
            raise _failed(path, exc) from exc
        info = os.fstat(fd)
        if (info.st_dev, info.st_ino) in seen:  # a link back to a folder already walked
            os.close(fd)
            return -1
        return fd

    def _warn_link(self, path: Path, parent: int) -> None:
        rel = self._rel(path)
        if rel in self._warned:
            return
        self._warned.add(rel)
        try:
            target = os.readlink(path.name, dir_fd=parent)
        except OSError:
            target = "?"
        warnings.warn(f"{path}: not read: a link to the folder {target!r}; curvekit add does "
                      "not follow links: copy the folder in, or pass --follow-links",
                      IngestWarning, stacklevel=4)


def files_of(path: Path, files: SourceFiles | None) -> SourceFiles:
    """``files``, or, for a reader called on its own, the files of ``path`` (the folder or
    file it was given)."""
    return files if files is not None else SourceFiles.of(path)


def read_named(path: Path, *, limit: int, what: str) -> bytes:
    """A file the user names outright (a run manifest): links followed, as for any file
    given by name, but only a regular file, opened without blocking, at most ``limit``
    bytes (``what`` names it in the error)."""
    files = SourceFiles(Path(path).parent, named=Path(path))
    return files.read_bytes(Path(path), limit=limit,
                            refuse=f"a {what} is a few kilobytes: is this the right file?")
