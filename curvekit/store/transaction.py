"""One snapshot transaction: every change of a store goes lock → staging → write → publish.

A published snapshot never changes. A conversion, an ``add``, a ``remove`` (and the
runner's add) each open a :func:`transaction`: it takes the home's exclusive lock, gives a
fresh staging folder under ``home/stores``, and on :meth:`Transaction.publish` writes the
new ``_store.json``, seals the folder (a checksum per file, see
:mod:`curvekit.store.snapshots`) and makes it the current store by replacing the ``store``
symlink in one ``rename``: readers see either the old store or the new one, never a
half-written one, and a reader that opened the old one keeps it until it closes. An error
anywhere, or leaving the block without publishing, removes the staging folder and leaves
the current store exactly as it was.

>>> import tempfile, pathlib
>>> from curvekit.store.metadata import StoreMetadata
>>> home = pathlib.Path(tempfile.mkdtemp())
>>> with transaction(home, action="writing an empty store") as tx:
...     tx.current is None
...     _ = (tx.staging / "note.txt").write_text("hello")
...     path = tx.publish("local", StoreMetadata.empty())
True
>>> (home / "store" / "note.txt").read_text(), path.parent.name
('hello', 'stores')
>>> with transaction(home) as tx:
...     _ = (tx.staging / "half.txt").write_text("never published")
...     raise ValueError("interrupted")
Traceback (most recent call last):
...
ValueError: interrupted
>>> sorted(p.name for p in (home / "store").iterdir() if not p.name.startswith("."))
['_files.json', '_store.json', 'note.txt']
"""

from __future__ import annotations

import contextlib
import contextvars
import fcntl
import math
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

from curvekit.errors import StoreError
from curvekit.store.confine import (
    check_home,
    clean_home,
    make_staging,
    open_lock,
    remove_owned,
    retire,
    stores_dir,
    swap_link,
)
from curvekit.store.layout import store_link
from curvekit.store.metadata import StoreMetadata
from curvekit.store.snapshots import folder_size, read_records, seal, write_failure

__all__ = [
    "Transaction",
    "conversion_room",
    "lock_home",
    "new_staging",
    "publish",
    "transaction",
    "wait_for_writers",
]


class Transaction:
    """A change of one home's store in progress; see :func:`transaction`."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.published: Path | None = None
        self._staging: Path | None = None
        link = store_link(home)
        # Read under the lock: no other writer can swap the link until the change is done.
        # The link was checked (check_home): it leads to a folder inside the home, or none.
        self.metadata: StoreMetadata | None = StoreMetadata.read(link)
        self.current: Path | None = link.resolve() if self.metadata is not None else None
        """The current snapshot's folder (None for a home without a store)."""
        if self.current is not None:
            # checksums that cannot be read are refused now, not after a long conversion
            read_records(self.current)

    @property
    def staging(self) -> Path:
        """The new snapshot's folder, made on first use (a change refused before it is
        needed leaves no folder behind)."""
        if self._staging is None:
            self._staging = new_staging(self.home)
        return self._staging

    def publish(self, kind: str, metadata: StoreMetadata) -> Path:
        """Write ``metadata`` into the staging folder and make it the current store.

        The snapshot is named ``<kind>-<id>`` (``kind`` says what made it, e.g. the
        archive's sha256 prefix, ``added-<hash>`` or ``removed``). Returns its folder.
        """
        if self.published is not None:
            raise StoreError(f"this change was already published as {self.published}; "
                             "open another transaction for another change")
        staging = self.staging
        metadata.save(staging)
        self.published = publish(staging, self.home, f"{kind}-{staging.name[-12:]}")
        return self.published


@contextlib.contextmanager
def transaction(home: Path, *, action: str = "writing the store",
                needed: Callable[[], int] | None = None) -> Iterator[Transaction]:
    """Change the store of ``home``: lock → staging → write → :meth:`Transaction.publish`.

    ``action`` and ``needed()`` (bytes, an estimate) name the change in the error a full
    or read-only disk gives (see :func:`lock_home`). Leaving the block by an error, or
    without publishing, removes the staging folder; the current store stays as it was.
    """
    with lock_home(home, action=action, needed=needed):
        tx = Transaction(home)
        try:
            yield tx
        finally:
            if tx._staging is not None and tx.published is None:
                remove_owned(tx._staging, stores_dir(home))


def new_staging(home: Path) -> Path:
    """Create and return an empty staging folder under ``home/stores`` (with the marker
    that lets curvekit remove it, :mod:`curvekit.store.confine`)."""
    return make_staging(home)


@contextlib.contextmanager
def lock_home(home: Path, *, action: str = "writing the store",
              needed: Callable[[], int] | None = None) -> Iterator[None]:
    """Hold an exclusive lock on ``home`` while the store is changed; tidy up around it.

    First the home is checked (:func:`curvekit.store.confine.check_home`): a ``store``
    link, ``stores`` folder or ``.lock`` that leads outside the home is refused before
    anything is created. Under the lock, what killed runs left behind is removed (staging
    folders, snapshots renamed into place but never linked) and so are old snapshots no
    reader holds any more, only where curvekit made them. A write that fails for want of
    room or permission becomes a :class:`StoreError` naming ``action``, the room
    ``needed()`` (bytes, an estimate) and the room free; any other OSError a
    :class:`StoreError` naming the file and the system's reason.
    """
    check_home(home)  # a refusal touches nothing, not even the lock file
    try:
        home.mkdir(parents=True, exist_ok=True)
        fd = open_lock(home)
    except OSError as exc:
        raise _write_error(exc, home, action, needed) from exc
    with open(fd, "r+b") as fh:
        _take_lock(fh, home)
        try:
            clean_home(home, check_home(home))  # again, now that no writer can change it
            yield
        except OSError as exc:
            raise _write_error(exc, home, action, needed) from exc
        finally:
            # a failed run's staging folder goes now, not at the next run
            stores = stores_dir(home)
            for stale in stores.glob(".staging-*"):
                remove_owned(stale, stores)
            fcntl.flock(fh, fcntl.LOCK_UN)


_WAIT: contextvars.ContextVar[tuple[float, Callable[[str], None] | None]] = (
    contextvars.ContextVar("curvekit_wait_for_writers", default=(0.0, None)))
"""How long a writer that finds the home locked waits, and whom it tells (see
:func:`wait_for_writers`); by default it does not wait."""


@contextlib.contextmanager
def wait_for_writers(seconds: float, *,
                     notice: Callable[[str], None] | None = None) -> Iterator[None]:
    """Within the block, a change of a store that finds another curvekit process writing
    to the same home waits up to ``seconds`` for it to finish instead of failing at once.

    ``notice(message)`` is called once when a wait begins, with a message that says who is
    waiting for what (the CLI's ``--wait SECONDS`` prints it on stderr). A writer still
    there after ``seconds`` is a :class:`StoreError`, as without waiting; the store is
    unchanged either way. ``math.inf`` waits as long as it takes.

    >>> import tempfile, pathlib
    >>> from curvekit.store.metadata import StoreMetadata
    >>> home = pathlib.Path(tempfile.mkdtemp())
    >>> with wait_for_writers(30), transaction(home) as tx:
    ...     _ = tx.publish("local", StoreMetadata.empty())
    >>> (home / "store").is_symlink()
    True
    """
    if not (isinstance(seconds, (int, float)) and seconds >= 0):
        raise StoreError(f"cannot wait {seconds!r} seconds for another writer: expected a "
                         "number of seconds, 0 or more (math.inf to wait as long as it takes)")
    token = _WAIT.set((float(seconds), notice))
    try:
        yield
    finally:
        _WAIT.reset(token)


def _take_lock(fh: IO[bytes], home: Path) -> None:
    """Take the home's exclusive lock: at once, or within the wait of
    :func:`wait_for_writers`, checking again at growing intervals (at most 0.25 s apart)."""
    seconds, notice = _WAIT.get()
    deadline = time.monotonic() + seconds
    pause, told = 0.01, False
    while True:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError as exc:
            if seconds <= 0:
                raise StoreError(
                    f"another curvekit process is writing to {home}; wait for it to finish "
                    "and run this again, or give the command --wait SECONDS to wait for it"
                ) from exc
            left = deadline - time.monotonic()
            if left <= 0:
                raise StoreError(
                    f"another curvekit process is still writing to {home} after waiting "
                    f"{seconds:g} s; the store is unchanged. Wait for it to finish and run "
                    "this again, or give --wait a longer time") from exc
        if notice is not None and not told:
            limit = "as long as it takes" if math.isinf(seconds) else f"up to {seconds:g} s"
            notice(f"another curvekit process is writing to {home}; waiting {limit} for it "
                   "to finish")
            told = True
        time.sleep(min(pause, left))
        pause = min(pause * 2, 0.25)


def _write_error(exc: OSError, home: Path, action: str,
                 needed: Callable[[], int] | None) -> StoreError:
    """Any OSError met while the store is changed, as a :class:`StoreError`: for want of room
    or permission with the room needed and free (:func:`write_failure`), else naming the
    file and the system's reason (a name too long for the file system, an unreadable
    input, a device error)."""
    message = write_failure(exc, home, action, needed)
    if message is None:
        where = f" ({os.fsdecode(exc.filename)!r})" if exc.filename is not None else ""
        message = (f"{action} failed: {exc.strerror or exc}{where}; the current store was "
                   "left as it was and the partial snapshot removed")
    return StoreError(message)


def _current_snapshot(home: Path) -> Path | None:
    """The snapshot the ``store`` link points to, checked to lie inside the home."""
    return check_home(home)


def _linked(home: Path) -> Path | None:
    """The ``store`` link's target for an estimate of room: never raises."""
    try:
        return check_home(home)
    except StoreError:
        return None


def conversion_room(archive: Path, home: Path) -> int:
    """Bytes a conversion of ``archive`` needs, roughly: the larger of the archive and the
    current store (a converted store takes about 0.8× its bzip2 archive)."""
    current = _linked(home)
    return max(archive.stat().st_size if archive.exists() else 0,
               folder_size(current) if current is not None else 0)


def publish(staging: Path, home: Path, name: str) -> Path:
    """Make ``staging`` the current store, atomically, and retire the previous one.

    The staging folder is sealed first (a checksum per file, a lease file); the previous
    snapshot is removed at once if curvekit made it and no reader holds it, else by a
    later writer (or never, when it is not curvekit's to remove).
    """
    previous = _current_snapshot(home)
    seal(staging, previous)
    final = stores_dir(home) / name
    if os.path.lexists(final):
        raise StoreError(f"{final} exists already; curvekit publishes a snapshot only under a "
                         "new name and removes nothing it did not make: move it away and "
                         "run again")
    staging.rename(final)
    swap_link(home, name)
    if previous is not None and previous != final.resolve() and previous.exists():
        # the new store is in place: failing to remove the old one now is no failure, the
        # next writer tries again
        with contextlib.suppress(OSError):
            retire(previous, stores_dir(home))
    return final
