"""curvekit: neural-network training-curve data as partitioned Parquet.

Fetch the Shallue et al. (2019) data-parallelism release, convert it into a hive-partitioned
Parquet store, and query, fit and plot it.

>>> import curvekit
>>> curvekit.__version__ >= "0.1"
True
"""

from __future__ import annotations

from curvekit._version import __version__
from curvekit.errors import (
    ArchiveError,
    ChecksumError,
    CurvekitError,
    DownloadError,
    ManifestError,
    QueryError,
    StoreError,
)
from curvekit.fetch import FetchResult, fetch
from curvekit.release.manifest import Manifest, load_manifest
from curvekit.store.catalog import VerifyReport, info, verify
from curvekit.store.store import Store, open_store

open = open_store

__all__ = [
    "ArchiveError",
    "ChecksumError",
    "CurvekitError",
    "DownloadError",
    "FetchResult",
    "Manifest",
    "ManifestError",
    "QueryError",
    "Store",
    "StoreError",
    "VerifyReport",
    "__version__",
    "fetch",
    "info",
    "load_manifest",
    "open",
    "verify",
]
