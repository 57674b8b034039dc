"""What a writer may create and remove in a curvekit home, checked in one place.

Every writer (conversion, ``add``, ``remove``, the runner's add) goes through
:func:`~curvekit.store.transaction.lock_home`, which calls :func:`check_home` before it
creates anything and again under the lock. The rule:

- **Inside the home only.** The ``stores`` folder, the ``store`` link and the downloads
  folder must lead to places inside the home (:func:`curvekit.home.confined`); the
  ``.lock`` file must be a plain file, never a link. A ``store`` link leading outside the
  home, or round in a loop, is refused naming the link and the fix: curvekit neither
  writes a new snapshot over what it points to nor retires it.
- **Only what curvekit made.** A folder under ``stores`` is removed only when it is a real
  folder (not a link) directly in ``stores``, named the way curvekit names its folders
  (``.staging-<id>``, a snapshot name ending in ``-<id>``, ``.retired-<snapshot>-<8 hex>``)
  and carrying curvekit's marker, the file ``.curvekit-snapshot`` holding that ``<id>``
  (written when the staging folder is made; a copy renamed by hand keeps the old id). A
  snapshot must moreover hold nothing but the files its own ``_files.json`` records (plus
  ``_store.json``, ``_files.json``, ``.lease`` and the marker), all plain files: a snapshot
  with a file of yours in it, a link, or a damaged ``_files.json`` is kept. The marker is
  removed last, so a removal cut short is finished by the next writer.

>>> import tempfile, pathlib
>>> home = pathlib.Path(tempfile.mkdtemp())
>>> staging = make_staging(home)
>>> marker(staging) == staging.name[-12:]
True
>>> mine = home / "stores" / "previous-1a2b3c4d"   # a store moved aside by hand
>>> mine.mkdir()
>>> clean_home(home, None) == [staging], mine.is_dir()
(True, True)
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import shutil
import stat
import uuid
from pathlib import Path

from curvekit.errors import StoreError
from curvekit.home import confined, real_home
from curvekit.store.layout import METADATA_FILE, store_link
from curvekit.store.snapshots import FILES_FILE, LEASE_FILE, is_snapshot_name, read_records

__all__ = ["MARKER", "check_home", "clean_home", "make_staging", "marker", "open_lock",
           "owned", "remove_owned", "retire", "store_target", "stores_dir", "swap_link"]

MARKER = ".curvekit-snapshot"
"""The file that marks a folder under ``stores`` as curvekit's: it holds the folder's id."""
_STAGING = re.compile(r"\.staging-(?P<id>[0-9a-f]{12})")
_RETIRED = re.compile(r"\.retired-(?P<name>.+)-[0-9a-f]{8}")
_SWAP = re.compile(r"\.store-[0-9a-f]{8}")
_ROOT_FILES = {METADATA_FILE, FILES_FILE, LEASE_FILE, MARKER}
_STORE_FIX = ("remove the link (`rm {link}`) and run `curvekit fetch` (or `curvekit demo`) "
              "to give this home a store of its own; to change the store it points to, use "
              "that store's own home (--home or $CURVEKIT_HOME)")


def stores_dir(home: Path) -> Path:
    """``home/stores``, where snapshots live; a ``stores`` link leading outside is refused."""
    return confined(home, home / "stores",
                    fix="remove the link (`rm {link}`); snapshots live in a folder of the "
                        "home's own, which curvekit creates")


def store_target(home: Path) -> Path | None:
    """The folder the ``store`` of ``home`` is (links followed), checked for a writer.

    None when there is no store (no ``store``, or a link to nothing inside the home). A
    ``store`` link leading outside the home or round in a loop, and a ``store`` that is
    neither a folder nor a link, are refused with a :class:`StoreError` naming it.
    """
    link = store_link(home)
    if not os.path.lexists(link):
        return None
    confined(home, link, fix=_STORE_FIX)
    if link.is_symlink():
        target = link.resolve()
        return target if target.is_dir() else None
    if link.is_dir():
        return link
    raise StoreError(f"{link} is a file, not a store folder nor a link to one; curvekit "
                     "touched nothing. Move the file away and run again")


def check_home(home: Path) -> Path | None:
    """Check the parts of ``home`` a writer touches; return the ``store`` link's target.

    Refused with a :class:`StoreError` naming the path (nothing is touched): a home that is
    a loop or a dangling link, a ``stores`` folder or ``store`` link leading outside the
    home, and a ``.lock`` that is a link or not a plain file. Returns the current snapshot
    when ``store`` is a link (None for no store, or a store folder moved there by hand).
    """
    real_home(home)
    stores_dir(home)
    lock = home / ".lock"
    if lock.is_symlink() or (os.path.lexists(lock) and not lock.is_file()):
        raise _not_a_lock(lock)
    target = store_target(home)
    return target if store_link(home).is_symlink() else None


def _not_a_lock(lock: Path) -> StoreError:
    what = f"a symbolic link to {os.readlink(lock)}" if lock.is_symlink() else "not a plain file"
    return StoreError(f"{lock} is {what}: curvekit's lock is a plain file it creates inside "
                      "its home, and it will not open or create one through a link, so it "
                      f"touched nothing. Remove it (`rm {lock}`) and run again")


def open_lock(home: Path) -> int:
    """Open (creating it) the home's ``.lock`` file, never through a link; a descriptor."""
    lock = home / ".lock"
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EISDIR, errno.ENXIO):
            raise _not_a_lock(lock) from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise _not_a_lock(lock)
    return fd


def make_staging(home: Path) -> Path:
    """Create and return an empty staging folder under ``home/stores``, with its marker."""
    stores = stores_dir(home)
    ident = uuid.uuid4().hex[:12]
    path = stores / f".staging-{ident}"
    path.mkdir(parents=True)
    (path / MARKER).write_text(ident + "\n", encoding="ascii")
    return path


def marker(folder: Path) -> str | None:
    """The id in ``folder``'s marker; None when it has none (or a link, or not one)."""
    try:
        fd = os.open(folder / MARKER, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with open(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        text = fh.read(64).decode("ascii", "replace").strip()
    return text if re.fullmatch(r"[0-9a-f]{12}", text) else None


def _expected_id(name: str) -> str | None:
    """The id a folder of this name under ``stores`` must carry; None: not curvekit's name."""
    if (m := _STAGING.fullmatch(name)) is not None:
        return m["id"]
    if (m := _RETIRED.fullmatch(name)) is not None and is_snapshot_name(m["name"]):
        return m["name"][-12:]
    if is_snapshot_name(name):
        return name[-12:]
    return None


def _accounted(snapshot: Path) -> bool:
    """True when ``snapshot`` holds only plain files its own ``_files.json`` records (and
    the files every snapshot has beside them)."""
    try:
        records = read_records(snapshot)
    except StoreError:
        return False  # a damaged record vouches for nothing
    if records is None:
        return False
    folders = [(snapshot, "")]
    while folders:
        folder, prefix = folders.pop()
        with os.scandir(folder) as entries:  # the kind of each entry without a stat call
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    folders.append((Path(entry.path), f"{prefix}{entry.name}/"))
                elif not entry.is_file(follow_symlinks=False):
                    return False  # a link, a fifo, ...: not something curvekit writes
                elif f"{prefix}{entry.name}" not in records and not (
                        prefix == "" and entry.name in _ROOT_FILES):
                    return False
    return True


def owned(entry: Path, stores: Path) -> bool:
    """True when curvekit made ``entry`` and may remove it (the rule in the module docs).

    >>> import tempfile, pathlib
    >>> stores = pathlib.Path(tempfile.mkdtemp())
    >>> (stores / "local-0123456789ab").mkdir()   # the right name, but no marker
    >>> owned(stores / "local-0123456789ab", stores)
    False
    """
    if entry.is_symlink() or not entry.is_dir():
        return False
    if entry.parent.resolve() != stores.resolve():
        return False
    want = _expected_id(entry.name)
    if want is None or marker(entry) != want:
        return False
    if _STAGING.fullmatch(entry.name) or _RETIRED.fullmatch(entry.name):
        return True  # work in progress, or a snapshot checked before it was retired
    return _accounted(entry)


def remove_owned(entry: Path, stores: Path) -> bool:
    """Remove ``entry`` if :func:`owned`; its marker goes last. True when removed."""
    if not owned(entry, stores):
        return False
    _remove(entry)
    return True


def _remove(folder: Path) -> None:
    for child in folder.iterdir():
        if child.name == MARKER:
            continue
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                child.unlink()
    with contextlib.suppress(FileNotFoundError):
        (folder / MARKER).unlink()
    with contextlib.suppress(OSError):
        folder.rmdir()


def retire(snapshot: Path, stores: Path) -> bool:
    """Remove ``snapshot`` if curvekit made it and no reader holds a lease on it.

    Under an exclusive lock on its lease file the snapshot is renamed to a ``.retired-*``
    folder, so a reader that was waiting for the lock finds its path gone and opens the
    current store instead. True when it is gone.
    """
    if _RETIRED.fullmatch(snapshot.name) or not owned(snapshot, stores):
        return False
    try:  # read-only is enough for flock; never created, never followed
        fd = os.open(snapshot / LEASE_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False  # no lease file: a reader may hold it without one, so keep it
    with open(fd, "rb") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False  # a reader still has it open: a later writer removes it
        grave = snapshot.parent / f".retired-{snapshot.name}-{uuid.uuid4().hex[:8]}"
        snapshot.rename(grave)
    _remove(grave)
    return True


def clean_home(home: Path, current: Path | None) -> list[Path]:
    """Remove what killed or finished runs left in ``home``; return what was removed.

    Unfinished link swaps (``.store-<8 hex>`` links) and curvekit's staging and
    half-removed folders go at once; a snapshot that the ``store`` link does not point to
    (an old one, or one a killed run renamed into place without swapping the link) is
    retired when no reader holds it. Nothing :func:`owned` refuses is touched. Call with
    the home's lock held, after :func:`check_home`.
    """
    removed: list[Path] = []
    for swap in home.glob(".store-*"):
        if _SWAP.fullmatch(swap.name) and swap.is_symlink():
            swap.unlink()
    stores = stores_dir(home)
    if not stores.is_dir():
        return removed
    for entry in sorted(stores.iterdir()):
        if entry.is_symlink() or not entry.is_dir():
            continue
        if _STAGING.fullmatch(entry.name) or _RETIRED.fullmatch(entry.name):
            if remove_owned(entry, stores):
                removed.append(entry)
        elif (is_snapshot_name(entry.name) and (current is None or entry.resolve() != current)
              and retire(entry, stores)):
            removed.append(entry)
    return removed


def swap_link(home: Path, name: str) -> None:
    """Point the ``store`` link of ``home`` at ``stores/name`` in one ``rename``.

    A store folder moved to ``store`` by hand is kept beside the snapshots
    (``stores/previous-<8 hex>``) rather than lost.
    """
    link = store_link(home)
    if link.is_dir() and not link.is_symlink():
        link.rename(stores_dir(home) / f"previous-{uuid.uuid4().hex[:8]}")
    tmp = home / f".store-{uuid.uuid4().hex[:8]}"
    tmp.symlink_to(Path("stores") / name)
    os.replace(tmp, link)
