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
from pathlib import Path
from typing import Any, Literal

from curvekit._version import __version__
from curvekit.errors import ArchiveError, ChecksumError, StoreError
from curvekit.home import downloads_dir, resolve_home
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
from curvekit.store.build import convert
from curvekit.store.confine import check_home
from curvekit.store.layout import store_link
from curvekit.store.metadata import StoreMetadata

__all__ = ["FetchResult", "Progress", "fetch"]


@dataclass(frozen=True)
class FetchResult:
    """What :func:`fetch` did: ``action`` is ``converted`` or ``up-to-date``."""

    action: Literal["converted", "up-to-date"]
    store: Path
    archive: Path | None
    metadata: StoreMetadata


def fetch(
    *,
    home: str | os.PathLike[str] | None = None,
    dataset: str = "batch_science",
    url: str | None = None,
    archive: str | os.PathLike[str] | None = None,
    sha256: str | None = None,
    manifest: Manifest | str | os.PathLike[str] | None = None,
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
    progress
        Called as ``progress(stage, done, total)`` (a :class:`curvekit.progress.Progress`)
        through the stages ``download``, ``verify`` and ``convert``.
    """
    home = resolve_home(home)
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
