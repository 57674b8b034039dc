"""Convert a release archive into a store, in one streaming pass.

The pipeline: parallel bzip2 decompression → tar members → parsed records →
batched CSV parsing in a worker thread → per-study tables → Parquet in a staging folder →
atomic swap, in one snapshot transaction (:mod:`curvekit.store.transaction`). A failure
anywhere removes the staging folder and leaves the previous store exactly as it was.

>>> import tempfile, pathlib
>>> from curvekit.release.synthetic import tiny_archive
>>> tmp = pathlib.Path(tempfile.mkdtemp())
>>> manifest = tiny_archive(tmp / "tiny.tar.bz2")
>>> meta = convert(tmp / "tiny.tar.bz2", tmp / "home", manifest=manifest)
>>> meta["counts"]["trials"] == manifest.totals["trials"]
True
"""

from __future__ import annotations

import os
from pathlib import Path

from curvekit import structured
from curvekit.errors import ArchiveError
from curvekit.progress import StageCounter
from curvekit.records import TrialRecord
from curvekit.release.archive import CsvRecord, Decompressor, read_archive
from curvekit.release.csvparse import CsvBatcher
from curvekit.release.manifest import Manifest
from curvekit.store.layout import MANIFEST_FILE, STORE_FORMAT
from curvekit.store.metadata import StoreMetadata
from curvekit.store.transaction import conversion_room, transaction
from curvekit.store.update import carry_added
from curvekit.store.writer import StoreBuilder

__all__ = ["ConvertProgress", "convert"]
ConvertProgress = StageCounter
"""Called with (members read, members expected or None) as the conversion advances (the
counter of the ``convert`` stage of a :class:`curvekit.progress.Progress`)."""


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
) -> StoreMetadata:
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
    with transaction(home, action=f"converting {archive.name}",
                     needed=lambda: conversion_room(archive, home)) as tx:
        # the store's rules for names, steps and values, refused as faults of the archive
        builder = StoreBuilder(tx.staging, memory_limit=memory_limit, threads=threads,
                               error=ArchiveError)
        batcher = CsvBatcher(builder.add_measurements)
        n = 0
        try:
            # the reader refuses duplicated members and incomplete trials
            for n, record in enumerate(read_archive(archive, decompressor=decompressor,
                                                    threads=threads), 1):
                if isinstance(record, CsvRecord):
                    known = len(batcher.metrics)
                    batcher.add(record)
                    if len(batcher.metrics) > known:  # a new header: its names, checked now
                        builder.add_metrics(list(batcher.metrics)[known:], record.member)
                elif isinstance(record, TrialRecord):
                    builder.add_trial(record)
                else:
                    builder.add_study(record)
                if progress is not None and n % 2048 == 0:
                    progress(n, expected)
        finally:
            batcher.close()
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
        # the user's own workloads move into the new snapshot
        meta = carry_added(tx, meta)
        if manifest is not None:
            (tx.staging / MANIFEST_FILE).write_text(structured.dumps(manifest.to_dict(), indent=1))
        if progress is not None:
            progress(n, n)
        tx.publish((sha256 or "local")[:12], meta)
    return meta
