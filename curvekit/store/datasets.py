"""``curvekit.datasets()``: the releases curvekit knows, and which of them the store holds.

>>> import tempfile
>>> frame = datasets(tempfile.mkdtemp())
>>> frame.select("dataset", "in_store").rows()
[('batch_science', False), ('pd1', False)]
"""

from __future__ import annotations

import os
from typing import Any

import polars as pl

from curvekit.home import resolve_home
from curvekit.release.registry import releases
from curvekit.store.layout import store_link
from curvekit.store.metadata import ADDED_KEY, StoreMetadata

__all__ = ["datasets"]

_SCHEMA = {"dataset": pl.String, "title": pl.String, "size_bytes": pl.Int64,
           "size": pl.String, "licence": pl.String, "citation": pl.String, "url": pl.String,
           "file_name": pl.String, "checksum": pl.String, "in_store": pl.Boolean,
           "generated": pl.Boolean, "workloads": pl.Int64, "archive_sha256": pl.String}


def _in_store(meta: StoreMetadata | None, name: str) -> tuple[int, str | None, bool]:
    """How many of the store's workloads come from release ``name``, the sha256 of the
    archive they were converted from, and whether that archive was a generated look-alike
    (``<name>_synthetic``)."""
    if meta is None:
        return 0, None, False
    source = meta.get("source") or {}
    added: dict[str, Any] = meta.get(ADDED_KEY) or {}
    if source.get("dataset") in (name, f"{name}_synthetic"):
        mine = [w for w in (meta.workloads or []) if w not in added]
        return len(mine), source.get("sha256"), source.get("dataset") != name
    origins = [i.get("origin") or {} for i in added.values() if isinstance(i, dict)]
    found = [o for o in origins if o.get("dataset") == name]
    if not found:
        return 0, None, False
    return len(found), found[0].get("sha256"), bool(found[0].get("synthetic"))


def datasets(home: str | os.PathLike[str] | None = None) -> pl.DataFrame:
    """One row per release curvekit knows: name, title, size (``size_bytes`` null where
    none is published), licence, citation, URL, how a download is checked, and whether the
    store of ``home`` holds it (``in_store``; ``generated`` when it holds a look-alike
    written by curvekit's generator instead; its ``workloads`` and the ``archive_sha256``
    it was converted from).

    >>> import tempfile
    >>> pd1 = datasets(tempfile.mkdtemp()).row(1, named=True)
    >>> pd1["licence"]
    'CC-BY 4.0 (a LICENSE file is included in the archive)'
    """
    meta = StoreMetadata.read(store_link(resolve_home(home)))
    rows = []
    for r in releases():
        n, sha, generated = _in_store(meta, r.name)
        rows.append({"dataset": r.name, "title": r.title, "size_bytes": r.size_bytes,
                     "size": r.size_text, "licence": r.licence, "citation": r.citation,
                     "url": r.url, "file_name": r.file_name, "checksum": r.checksum,
                     "in_store": n > 0 and not generated, "generated": n > 0 and generated,
                     "workloads": n, "archive_sha256": sha})
    return pl.DataFrame(rows, schema=_SCHEMA)
