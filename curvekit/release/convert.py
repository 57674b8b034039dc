"""Convert a release archive into a store, in one streaming pass.

The pipeline: parallel bzip2 decompression → tar members → parsed records →
batched CSV parsing in a worker thread → per-study tables → Parquet in a staging folder →
atomic swap. A failure anywhere removes the staging folder and leaves the previous store
exactly as it was.

>>> import tempfile, pathlib
>>> from curvekit.release.synthetic import tiny_archive
>>> tmp = pathlib.Path(tempfile.mkdtemp())
>>> manifest = tiny_archive(tmp / "tiny.tar.bz2")
>>> meta = convert(tmp / "tiny.tar.bz2", tmp / "home", manifest=manifest)
>>> meta["counts"]["trials"] == manifest.totals["trials"]
True
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from curvekit.errors import ArchiveError
from curvekit.progress import StageCounter
from curvekit.release.archive import (
    CsvRecord,
    Decompressor,
    StudyKey,
    StudyRecord,
    TrialRecord,
    read_archive,
)
from curvekit.release.csvparse import CsvBatcher
from curvekit.release.manifest import Manifest
from curvekit.store.layout import MANIFEST_FILE, METADATA_FILE, STORE_FORMAT
from curvekit.store.update import carry_added
from curvekit.store.writer import (
    StoreBuilder,
    conversion_room,
    lock_home,
    new_staging,
    publish,
)

__all__ = ["ConvertProgress", "convert"]
ConvertProgress = StageCounter
"""Called with (members read, members expected or None) as the conversion advances (the
counter of the ``convert`` stage of a :class:`curvekit.progress.Progress`)."""


def _check_complete(builder: StoreBuilder, csv_seen: set[tuple[StudyKey, int]]) -> None:
    """Every trial needs its metadata, its measurements and its study.json."""
    trials = set(builder.trials)
    for key, trial in sorted(csv_seen - trials):
        member = f"{key.path()}/{trial}/measurements.csv"
        raise ArchiveError(f"{member}: trial {trial} has measurements but no metadata.json",
                           member=member)
    for key, trial in sorted(trials - csv_seen):
        member = f"{key.path()}/{trial}/metadata.json"
        raise ArchiveError(f"{member}: trial {trial} has metadata but no measurements.csv",
                           member=member)
    for key in sorted({k for k, _ in trials} - set(builder.studies)):
        raise ArchiveError(f"{key.path()}/study.json: study has trials but no study.json",
                           member=f"{key.path()}/study.json")


def convert(
    archive: str | os.PathLike[str],
    home: str | os.PathLike[str],
    *,
    manifest: Manifest | None = None,
    sha256: str | None = None,
    decompressor: Decompressor = "auto",
    threads: int | None = None,
    memory_limit: int = 512 << 20,
    progress: ConvertProgress | None = None,
    version: str = "",
) -> dict[str, Any]:
    """Convert ``archive`` into the store at ``home/store``; return the store metadata.

    ``manifest`` describes what the archive should hold; it is saved in the store so that
    ``verify`` can check against it later. ``sha256`` is the archive's verified hash, recorded
    so that a later ``fetch`` knows the store is up to date.
    """
    archive, home = Path(archive), Path(home)
    threads = threads or os.cpu_count() or 2
    expected = None
    if manifest is not None:
        expected = manifest.totals["trials"] * 2 + manifest.totals["studies"]
    with lock_home(home, action=f"converting {archive.name}",
                   needed=lambda: conversion_room(archive, home)):
        staging = new_staging(home)
        try:
            builder = StoreBuilder(staging, memory_limit=memory_limit, threads=threads)
            batcher = CsvBatcher(builder.add_measurements)
            seen: set[tuple[str, StudyKey, int | None]] = set()
            csv_seen: set[tuple[StudyKey, int]] = set()
            try:
                for n, record in enumerate(read_archive(archive, decompressor=decompressor,
                                                        threads=threads), 1):
                    _dispatch(record, builder, batcher, seen, csv_seen)
                    if progress is not None and n % 2048 == 0:
                        progress(n, expected)
            finally:
                batcher.close()
            _check_complete(builder, csv_seen)
            builder.metrics.update(batcher.metrics)
            meta = builder.finish(
                {
                    "store_format": STORE_FORMAT,
                    "curvekit_version": version,
                    "source": {
                        "dataset": manifest.dataset if manifest else None,
                        "archive": archive.name,
                        "sha256": sha256,
                    },
                },
                batcher.rows,
            )
            carried = carry_added(home, staging, meta)
            if carried is not meta:  # the user's own workloads move into the new snapshot
                meta = carried
                (staging / METADATA_FILE).write_text(json.dumps(meta, indent=1) + "\n")
            if manifest is not None:
                (staging / MANIFEST_FILE).write_text(json.dumps(manifest.to_dict(), indent=1))
            if progress is not None:
                progress(len(seen), len(seen))
            publish(staging, home, f"{(sha256 or 'local')[:12]}-{staging.name[-12:]}")
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    return meta


def _dispatch(record: StudyRecord | TrialRecord | CsvRecord, builder: StoreBuilder,
              batcher: CsvBatcher, seen: set[tuple[str, StudyKey, int | None]],
              csv_seen: set[tuple[StudyKey, int]]) -> None:
    if isinstance(record, CsvRecord):
        ident: tuple[str, StudyKey, int | None] = ("csv", record.key, record.trial_id)
    elif isinstance(record, TrialRecord):
        ident = ("meta", record.key, record.trial_id)
    else:
        ident = ("study", record.key, None)
    if ident in seen:
        raise ArchiveError(f"{record.member}: appears twice in the archive",
                           member=record.member)
    seen.add(ident)
    if isinstance(record, CsvRecord):
        csv_seen.add((record.key, record.trial_id))
        batcher.add(record)
    elif isinstance(record, TrialRecord):
        builder.add_trial(record)
    else:
        builder.add_study(record)
