"""Store snapshots: content checksums, reader leases, and retiring old snapshots safely.

Every published snapshot (a folder under ``home/stores``) carries

- ``_files.json``: the byte size and BLAKE2b digest of each of its files, recorded when the
  snapshot is sealed just before it is published, so that ``curvekit verify`` can tell a
  damaged file from a good one. A file hard-linked from the previous snapshot keeps the
  digest recorded for it there: damage is carried as damage, never blessed by re-hashing.
- ``.lease``: an empty file that readers hold a shared ``flock`` on while a
  :class:`~curvekit.store.store.Store` is open. A writer removes a snapshot that the
  ``store`` link no longer points to only when it can take an exclusive lock on that file,
  that is, when no reader holds it; otherwise the snapshot stays until a later writer finds
  it free (:func:`curvekit.store.confine.retire`, which also checks that curvekit made the
  snapshot). Locks die with their process, so a reader that crashed holds nothing. A reader
  never creates a lease file, and never opens one through a link.

>>> import tempfile, pathlib
>>> snap = pathlib.Path(tempfile.mkdtemp())
>>> _ = (snap / "part-0.parquet").write_bytes(b"PAR1")
>>> records = seal(snap)
>>> sorted(records)
['part-0.parquet']
>>> check_files(snap)
Checked(files=1, damaged=[], missing=[], unexpected=[], recorded=True)
>>> _ = (snap / "part-0.parquet").write_bytes(b"PAR2")
>>> check_files(snap).damaged
['part-0.parquet']
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import re
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from curvekit import structured
from curvekit.errors import StoreError
from curvekit.home import read_json
from curvekit.records import Workload
from curvekit.store.layout import METADATA_FILE, workload_dir

__all__ = [
    "FILES_FILE",
    "LEASE_FILE",
    "Checked",
    "Lease",
    "check_files",
    "file_digest",
    "is_snapshot_name",
    "read_records",
    "records_damaged",
    "repair_hint",
    "seal",
]

FILES_FILE = "_files.json"
LEASE_FILE = ".lease"
ALGORITHM = "blake2b-256"
_UNRECORDED = {FILES_FILE, METADATA_FILE}
_CHUNK = 1 << 20
# The folder names curvekit gives snapshots: <sha256[:12] or "local">-<id>,
# added-<content[:12]>-<id> and removed-<id>, each <id> twelve hex digits. Nothing else under
# ``stores`` is ever removed (a store folder moved there by hand is kept as previous-<id>).
_SNAPSHOT = re.compile(r"(?:[0-9A-Za-z]{1,12}|added-[0-9a-f]{12}|removed)-[0-9a-f]{12}")


def is_snapshot_name(name: str) -> bool:
    """True for the folder names curvekit gives the snapshots it publishes.

    >>> is_snapshot_name("added-0123456789ab-ba9876543210"), is_snapshot_name("previous-1a2b")
    (True, False)
    """
    return _SNAPSHOT.fullmatch(name) is not None


def file_digest(path: Path) -> str:
    """The BLAKE2b-256 hex digest of a file (fast in pure Python: about 1 GB/s a core)."""
    h = hashlib.blake2b(digest_size=32)
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _content_files(root: Path) -> list[str]:
    """Relative paths of a snapshot's recorded files.

    Dot files (the lease) and the record itself are left out, and so is ``_store.json``: it
    names the archive a snapshot came from, and leaving it out keeps ``_files.json`` the same
    for the same content (``verify`` checks the counts it states instead).
    """
    out = []
    top = os.fspath(root)
    # plain strings, not Path objects: a snapshot holds hundreds of folders
    for folder, dirs, files in os.walk(top):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        rel = os.path.relpath(folder, top).replace(os.sep, "/")
        prefix = "" if rel == "." else rel + "/"
        for name in sorted(files):
            if name.startswith(".") or (not prefix and name in _UNRECORDED):
                continue
            out.append(prefix + name)
    return out


def records_damaged(path: Path, problem: str) -> StoreError:
    """The error for a ``_files.json`` that cannot be trusted, with the one fix for it.

    Nothing is judged by a damaged record: no file is called damaged or unexpected, and no
    writer carries its checksums into a new snapshot or removes the snapshot it describes.
    """
    folder = path.parent
    home = folder.parent.parent if folder.parent.name == "stores" else None
    link = home / "store" if home is not None else folder
    return StoreError(
        f"{path} is damaged: {problem}. It holds the checksums of the snapshot's files, so "
        "no file can be checked against it and curvekit will not carry it into a new "
        f"snapshot; none of the data files was judged by it. To repair: remove {link} "
        "and run `curvekit fetch` (or `curvekit demo`) to build the store again, then add "
        f"your own workloads again; the old snapshot ({folder}) is kept, not deleted: "
        "remove it yourself once you no longer need it")


def _records_shape(path: Path, data: Any) -> dict[str, dict[str, Any]]:
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, dict):
        raise records_damaged(path, "it has no object \"files\"")
    for rel, record in files.items():
        if not (isinstance(record, dict) and isinstance(record.get("size"), int)
                and isinstance(record.get("digest"), str)):
            raise records_damaged(path, f"the record of {rel!r} is {record!r}, expected "
                                        "{\"size\": <bytes>, \"digest\": <hex>}")
    return files


def read_records(snapshot: Path) -> dict[str, dict[str, Any]] | None:
    """The recorded size and digest of each file of ``snapshot``; None when none were.

    A ``_files.json`` that cannot be read, is not JSON, nests too deep or has the wrong
    shape is a :class:`StoreError` naming it (:func:`records_damaged`).
    """
    path = snapshot / FILES_FILE
    try:
        data = read_json(path, lambda problem: records_damaged(path, problem))
    except FileNotFoundError:
        return None
    return _records_shape(path, data)


def seal(staging: Path, previous: Path | None = None) -> dict[str, dict[str, Any]]:
    """Record every file's size and digest in ``staging/_files.json``; create its lease file.

    A file that is a hard link of the file at the same place in ``previous`` (the snapshot
    being replaced) keeps the digest recorded there instead of being hashed again.
    """
    carried = (read_records(previous) or {}) if previous is not None else {}
    records: dict[str, dict[str, Any]] = {}
    here, there = os.fspath(staging), os.fspath(previous) if previous is not None else ""
    for rel in _content_files(staging):
        stat = os.stat(os.path.join(here, rel))
        old = carried.get(rel)
        if old is not None and there and _same_file(stat, os.path.join(there, rel)):
            records[rel] = dict(old)
        else:
            records[rel] = {"size": stat.st_size, "digest": file_digest(staging / rel)}
    body = structured.dumps({"algorithm": ALGORITHM, "files": records}, indent=1, sort_keys=True)
    (staging / FILES_FILE).write_text(body + "\n")
    (staging / LEASE_FILE).touch()
    return records


def _same_file(stat: os.stat_result, other: str | Path) -> bool:
    try:
        o = os.stat(other)
    except OSError:
        return False
    return (stat.st_dev, stat.st_ino) == (o.st_dev, o.st_ino)


@dataclass(frozen=True)
class Checked:
    """What :func:`check_files` found; paths are relative to the snapshot."""

    files: int
    damaged: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    recorded: bool = True


def check_files(snapshot: Path, skip: frozenset[str] = frozenset(),
                digests: Mapping[str, tuple[int, str]] | None = None) -> Checked:
    """Hash every file of ``snapshot`` again and compare with ``_files.json``.

    Files in ``skip`` (already known to be bad) are not hashed. ``digests`` gives the
    (size, digest) of files the caller has just read and hashed itself (``verify`` reads
    each file once); the others are hashed here. ``recorded`` is False for a snapshot
    written before checksums were recorded: nothing can then be compared.
    """
    records = read_records(snapshot)
    if records is None:
        return Checked(0, recorded=False)
    present = set(_content_files(snapshot))
    damaged = []
    for rel in sorted(set(records) & present - skip):
        want = records[rel]
        known = (digests or {}).get(rel)
        if known is not None:
            size, digest = known
            if size != want.get("size") or digest != want.get("digest"):
                damaged.append(rel)
            continue
        path = snapshot / rel
        if path.stat().st_size != want.get("size") or file_digest(path) != want.get("digest"):
            damaged.append(rel)
    return Checked(len(present & set(records)), damaged, sorted(set(records) - present),
                   sorted(present - set(records)))


class Lease:
    """A reader's shared lock on a snapshot; :meth:`release` (or process exit) ends it.

    A snapshot without a lease file that cannot be created (a read-only home) is read
    without a lease: nothing can then retire it under the reader anyway.
    """

    def __init__(self, fh: Any | None) -> None:
        self._fh = fh
        self.closed = False

    @property
    def held(self) -> bool:
        """True while the lease holds a lock."""
        return self._fh is not None

    def release(self) -> None:
        """Give the lease back; idempotent."""
        self.closed = True
        fh, self._fh = self._fh, None
        if fh is not None:
            fh.close()  # closing the last descriptor drops the flock


def acquire(snapshot: Path) -> Lease | None:
    """Take a shared lease on ``snapshot``; None when it was retired meanwhile (retry).

    The lease file is never created and never opened through a link: a snapshot without
    one (sealed before leases existed, or on a home that cannot be written) is read without
    a lease, and no writer retires a snapshot without its lease file.
    """
    path = snapshot / LEASE_FILE
    try:  # read-only is enough for flock
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        if not (snapshot / METADATA_FILE).is_file():
            return None  # retired between resolving the link and opening the lease
        return Lease(None)
    except OSError:
        return Lease(None)
    fh = open(fd, "rb")  # noqa: SIM115 - held open for the lease's lifetime
    fcntl.flock(fh, fcntl.LOCK_SH)
    try:
        now = path.stat()
    except FileNotFoundError:
        now = None
    mine = os.fstat(fh.fileno())
    if now is None or (now.st_dev, now.st_ino) != (mine.st_dev, mine.st_ino):
        fh.close()  # a writer retired the snapshot while we waited for the lock
        return None
    return Lease(fh)


# -- errors of writers -------------------------------------------------------------------

_FULL = {errno.ENOSPC, errno.EDQUOT}
_DENIED = {errno.EACCES, errno.EPERM, errno.EROFS}


def _size(n: float) -> str:
    for unit in ("bytes", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1000
    raise AssertionError("unreachable")


def write_failure(exc: OSError, home: Path, action: str,
                  needed: Callable[[], int] | None) -> str | None:
    """The message for a write into ``home`` that failed for want of room or permission.

    None when ``exc`` is another kind of failure (or concerns a file outside ``home``, such
    as an unreadable archive), which then propagates unchanged.
    """
    if exc.errno not in _FULL | _DENIED:
        return None
    if exc.filename is not None:
        try:
            Path(os.fsdecode(exc.filename)).resolve().relative_to(home.resolve())
        except ValueError:
            return None
    kept = "the current store was left as it was and the partial snapshot removed"
    reason = exc.strerror or str(exc)
    if exc.errno in _FULL:
        free = shutil.disk_usage(home).free if home.exists() else 0
        want = f"about {_size(needed())} needed, " if needed is not None else ""
        return (f"{action} failed: no space left on the disk holding {home} ({reason}): "
                f"{want}{_size(free)} free. Free some space there or choose another home "
                f"(--home or $CURVEKIT_HOME); {kept}")
    where = f" ({os.fsdecode(exc.filename)})" if exc.filename is not None else ""
    return (f"{action} failed: cannot write to {home}{where}: {reason}. curvekit needs a "
            "writable home to change the store: fix its permissions, or choose another home "
            f"(--home or $CURVEKIT_HOME); {kept}")


def folder_size(folder: Path) -> int:
    """Bytes of the files under ``folder`` (0 when it does not exist)."""
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            with contextlib.suppress(FileNotFoundError):
                total += (Path(root) / name).stat().st_size
    return total


def repair_hint(metadata: Mapping[str, Any], path: str) -> str:
    """How to repair a damaged file at ``path`` of a store with ``metadata``.

    A file of a workload added with ``curvekit add`` is repaired by adding it again (a
    conversion carries added workloads over as they are); every other file by converting
    the release again.

    >>> meta = {"added": {"my/mlp/sgd": {}}}
    >>> repair_hint(meta, "trials/base_dir=my/model=mlp/optimizer=sgd/part-0.parquet")[:33]
    'add my/mlp/sgd again (`curvekit a'
    >>> repair_hint(meta, "trials/base_dir=cifar_10/model=vgg_11/optimizer=sgd/part-0.parquet")
    'run `curvekit fetch --force` to rebuild the store'
    """
    for workload in metadata.get("added") or {}:
        folder = workload_dir("trials", *Workload.known(workload)).split("/", 1)[1]
        if f"/{folder}/" in f"/{path}/":
            return (f"add {workload} again (`curvekit add ... --name {workload} --replace`) "
                    f"or remove it (`curvekit.remove_workload(home, {workload!r})`)")
    return "run `curvekit fetch --force` to rebuild the store"
