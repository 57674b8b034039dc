"""``curvekit.fetch()``: find → download → verify → convert, doing only what is missing.

>>> import tempfile, pathlib
>>> from curvekit.release.synthetic import tiny_archive
>>> tmp = pathlib.Path(tempfile.mkdtemp())
>>> m = tiny_archive(tmp / "tiny.tar.bz2")
>>> fetch(home=tmp / "home", archive=tmp / "tiny.tar.bz2", manifest=m).action
'converted'
>>> fetch(home=tmp / "home", archive=tmp / "tiny.tar.bz2", manifest=m).action
'up-to-date'
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from curvekit import structured
from curvekit._version import __version__
from curvekit.errors import ArchiveError, ChecksumError, ManifestError, StoreError
from curvekit.home import downloads_dir, read_json, resolve_home
from curvekit.outputs import write_file
from curvekit.progress import Progress, stage_counter
from curvekit.release.archive import Decompressor
from curvekit.release.download import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MIN_RATE,
    DEFAULT_RATE_WINDOW,
    download,
    file_sha256,
    size_bound,
)
from curvekit.release.manifest import Manifest, load_manifest
from curvekit.release.pd1 import NAME as PD1
from curvekit.release.pd1 import Pd1Manifest, file_hashes, load_pd1_manifest
from curvekit.release.registry import release
from curvekit.store.build import convert
from curvekit.store.confine import check_home
from curvekit.store.layout import store_link
from curvekit.store.metadata import StoreMetadata
from curvekit.store.pd1 import convert_pd1, pd1_workloads

__all__ = ["FetchResult", "Progress", "fetch"]


@dataclass(frozen=True)
class FetchResult:
    """What :func:`fetch` did: ``action`` is ``converted`` or ``up-to-date``."""

    action: Literal["converted", "up-to-date"]
    store: Path
    archive: Path | None
    metadata: StoreMetadata
    notes: tuple[str, ...] = ()
    """What was checked and recorded, in words (PD1: the md5, the sha256 recorded or
    checked)."""


def fetch(
    *,
    home: str | os.PathLike[str] | None = None,
    dataset: str = "batch_science",
    url: str | None = None,
    archive: str | os.PathLike[str] | None = None,
    sha256: str | None = None,
    manifest: Manifest | Pd1Manifest | str | os.PathLike[str] | None = None,
    force: bool = False,
    decompressor: Decompressor = "auto",
    progress: Progress | None = None,
    urlopen: Callable[..., Any] | None = None,
    max_bytes: int | None = None,
    min_rate: float = DEFAULT_MIN_RATE,
    rate_window: float = DEFAULT_RATE_WINDOW,
    deadline: float | None = None,
) -> FetchResult:
    """Download the release archive (if needed) and convert it into the store.

    A second call with everything in place does nothing and returns ``action="up-to-date"``.
    The archive is written only inside ``<home>/downloads``, under the manifest's
    ``archive.file_name`` (a bare file name, checked when the manifest is loaded).

    >>> import tempfile, pathlib, curvekit
    >>> tmp = pathlib.Path(tempfile.mkdtemp())
    >>> m = curvekit.generate_archive(tmp / "a.tar.bz2", workloads=["mnist/fc_1024/sgd"],
    ...                               max_trials_per_study=2, evals_scale=0.05)
    >>> result = fetch(home=tmp / "home", archive=tmp / "a.tar.bz2", manifest=m)
    >>> result.action, result.store.is_dir()
    ('converted', True)

    Parameters
    ----------
    home
        curvekit's home (default: ``$CURVEKIT_HOME`` or the platform data directory).
    url
        A mirror to download from instead of the manifest's URL.
    archive
        An archive already on disk: no download, but its sha256 is still checked.
    sha256
        Pin a different expected sha256 (e.g. for a mirror's re-packed file).
    manifest
        A manifest (object or JSON path) describing the archive, instead of ``dataset``'s.
    force
        Convert again even if the store is up to date.
    max_bytes
        Stop a download that grows past this many bytes. Default: the manifest's
        ``approx_size_bytes`` plus a quarter and 1 MiB (``size_bound``), or 16 GiB when
        ``sha256`` pins a file the manifest does not describe.
    min_rate, rate_window, deadline
        Stop a download that averages under ``min_rate`` bytes/s over ``rate_window``
        seconds (default 1 KiB/s over 60 s), or that takes more than ``deadline`` seconds in
        all (default: no deadline). What arrived is kept and the next call resumes it.
    dataset
        The release: ``batch_science`` (default) or ``pd1`` (see ``curvekit datasets``).
        PD1 is converted beside what the store holds; its archive is checked against the
        known md5, and the sha256 recorded at its first download (see
        ``docs/datasets.md``).
    progress
        Called as ``progress(stage, done, total)`` (a :class:`curvekit.progress.Progress`)
        through the stages ``download``, ``verify`` and ``convert``.
    """
    home = resolve_home(home)
    release(dataset)  # an unknown name is refused, naming the known ones
    if dataset == PD1 or isinstance(manifest, Pd1Manifest):
        if not isinstance(manifest, Pd1Manifest):
            if isinstance(manifest, Manifest):
                raise ManifestError(f"the manifest of {manifest.dataset!r} describes another "
                                    "release; pass a PD1 manifest, or no manifest")
            manifest = load_pd1_manifest(manifest)
        return _fetch_pd1(home, manifest, url=url, archive=archive, sha256=sha256,
                          force=force, progress=progress, urlopen=urlopen, max_bytes=max_bytes,
                          min_rate=min_rate, rate_window=rate_window, deadline=deadline)
    if manifest is None:
        manifest = load_manifest(dataset)
    elif not isinstance(manifest, Manifest):
        manifest = Manifest.from_file(Path(manifest))
    expected = (sha256 or manifest.archive.sha256).strip().lower()
    # links leading out of the home are refused before anything is read or downloaded
    check_home(home)
    # a damaged _store.json is an error naming it (not a reason to convert over it)
    current = None if force else StoreMetadata.read(store_link(home))
    if current is not None and current.current_format and current.source.sha256 == expected:
        return FetchResult("up-to-date", store_link(home), None, current)

    if archive is not None:
        path = Path(archive).expanduser()
        if not path.is_file():
            raise ArchiveError(f"--archive {path}: no such file")
        got = file_sha256(path, progress=stage_counter(progress, "verify"))
        if got != expected:
            raise ChecksumError(
                f"{path} does not have the expected sha256: expected {expected}, got {got}. "
                "Check that it is the right file, or pass --sha256 with its hash (or "
                "--manifest for a different dataset) if you trust it.")
    else:
        source = url or manifest.archive.url
        if max_bytes is None:
            # The manifest's size describes the manifest's file; a pinned other hash may
            # name a re-packed file of another size, bounded only by the general limit.
            describes = expected == manifest.archive.sha256.lower()
            max_bytes = (size_bound(manifest.archive.approx_size_bytes) if describes
                         else DEFAULT_MAX_BYTES)
        folder = downloads_dir(home)
        path = download(source, folder / manifest.archive.file_name, within=folder,
                        sha256=expected, progress=stage_counter(progress, "download"),
                        urlopen=urlopen,
                        max_bytes=max_bytes, min_rate=min_rate, rate_window=rate_window,
                        deadline=deadline)
    meta = convert(path, home, manifest=manifest, sha256=expected, decompressor=decompressor,
                   progress=stage_counter(progress, "convert"), version=__version__)
    link = store_link(home)
    if not link.exists():  # pragma: no cover - convert publishes or raises
        raise StoreError(f"conversion finished but {link} is missing")
    return FetchResult("converted", link, path, meta)


def _record_file(folder: Path, manifest: Pd1Manifest) -> Path:
    return folder / f"{manifest.file_name}.sha256.json"


def _recorded(path: Path) -> dict[str, Any] | None:
    """The sha256 recorded at PD1's first download, as ``{md5, sha256, recorded_at, url}``."""
    try:
        data = read_json(path, lambda problem: StoreError(
            f"{path}: {problem}; remove it, and the next download records the sha256 again"))
    except FileNotFoundError:
        return None
    if not (isinstance(data, dict) and isinstance(data.get("sha256"), str)
            and isinstance(data.get("md5"), str)):
        raise StoreError(f"{path}: expected an object with md5 and sha256; remove it, and the "
                         "next download records the sha256 again")
    return data


def _fetch_pd1(home: Path, manifest: Pd1Manifest, *, url: str | None,
               archive: str | os.PathLike[str] | None, sha256: str | None, force: bool,
               progress: Progress | None, urlopen: Callable[..., Any] | None,
               max_bytes: int | None, min_rate: float, rate_window: float,
               deadline: float | None) -> FetchResult:
    """PD1's find → download → verify → convert (see :func:`fetch`).

    PD1 publishes no sha256; the only known checksum is an md5 from a third party. So the
    archive must have that md5; at the first download its sha256 is recorded beside it
    (``<home>/downloads/pd1.tar.gz.sha256.json``) and every later download or ``--archive``
    with that md5 must have that sha256. ``sha256`` pins a hash instead (a re-packed
    mirror): then the md5 is not required.
    """
    pin = sha256.strip().lower() if sha256 else None
    check_home(home)
    folder = downloads_dir(home)
    record_path = _record_file(folder, manifest)
    recorded = _recorded(record_path)
    if recorded is not None and recorded["md5"] != manifest.md5:
        recorded = None  # recorded for another file of that name (another manifest)
    known = pin or manifest.sha256 or (recorded or {}).get("sha256")
    current = None if force else StoreMetadata.read(store_link(home))

    def up_to_date(sha: str | None) -> FetchResult | None:
        have = pd1_workloads(current) if current is not None and current.current_format \
            else {}
        if sha and have and all(i["origin"].get("sha256") == sha for i in have.values()):
            assert current is not None
            return FetchResult("up-to-date", store_link(home), None, current)
        return None

    done = up_to_date(known)
    if done is not None:
        return done
    if archive is not None:
        path = Path(archive).expanduser()
        if not path.is_file():
            raise ArchiveError(f"--archive {path}: no such file")
    else:
        if max_bytes is None:
            size = manifest.approx_size_bytes
            max_bytes = size_bound(size) if size and not pin else DEFAULT_MAX_BYTES
        path = download(url or manifest.url, folder / manifest.file_name, within=folder,
                        sha256=known, progress=stage_counter(progress, "download"),
                        urlopen=urlopen, max_bytes=max_bytes, min_rate=min_rate,
                        rate_window=rate_window, deadline=deadline)
    md5, sha = file_hashes(path, progress=stage_counter(progress, "verify"))
    fate = ("It was left in place; check that it is the right file." if archive is not None
            else "It was deleted; run curvekit fetch --dataset pd1 again to download it again.")
    notes: list[str] = []
    known_md5 = ("PD1's known md5 (published by a third party)"
                 if manifest.md5 == load_pd1_manifest().md5 else "the manifest's md5")
    if pin is not None:
        if sha != pin:
            if archive is None:
                path.unlink(missing_ok=True)
            raise ChecksumError(f"{path} does not have the sha256 you pinned: expected {pin}, "
                                f"got {sha}. {fate}")
        notes.append(f"sha256 {sha} is the one you pinned (--sha256); the md5 was not "
                     "required.")
    else:
        if md5 != manifest.md5:
            if archive is None:
                path.unlink(missing_ok=True)
            raise ChecksumError(
                f"{path} does not have PD1's known md5: expected {manifest.md5}, got {md5} "
                "(the md5 is the only checksum known for PD1, published by a third party; "
                f"no sha256 is published). {fate} If you trust the file, pass --sha256 {sha}.")
        expected_sha = manifest.sha256 or (recorded or {}).get("sha256")
        if expected_sha and sha != expected_sha:
            if archive is None:
                path.unlink(missing_ok=True)
            where = ("the manifest" if manifest.sha256
                     else f"{record_path} (recorded at the first download)")
            raise ChecksumError(
                f"{path} has the known md5 but not the sha256 in {where}: expected "
                f"{expected_sha}, got {sha}. {fate} If you trust this file, remove "
                f"{record_path} or pass --sha256 {sha}.")
        if expected_sha:
            notes.append(f"md5 {md5} is {known_md5}, and sha256 {sha} is the one in "
                         + ("the manifest." if manifest.sha256 else
                            f"{record_path.name}, recorded at the first download "
                            f"({(recorded or {}).get('recorded_at')})."))
        elif archive is None:
            write_file(record_path, structured.dumps(
                {"file_name": manifest.file_name, "md5": md5, "sha256": sha,
                 "recorded_at": datetime.now(UTC).isoformat(timespec="seconds"),
                 "url": url or manifest.url}, indent=1) + "\n", "the recorded sha256")
            notes.append(f"md5 {md5} is {known_md5}. No "
                         f"sha256 is published for PD1: this download's sha256 {sha} is now "
                         f"recorded in {record_path}, and later downloads must match it.")
        else:
            notes.append(f"md5 {md5} is {known_md5}. No "
                         "sha256 is published for PD1, and none was recorded by a download "
                         f"here: this file's sha256 is {sha} (not recorded; a download "
                         "records one).")
    done = up_to_date(sha)
    if done is not None:
        return FetchResult(done.action, done.store, None, done.metadata, tuple(notes))
    meta = convert_pd1(path, home, manifest=manifest, sha256=sha, md5=md5,
                       progress=stage_counter(progress, "convert"))
    return FetchResult("converted", store_link(home), path, meta, tuple(notes))
