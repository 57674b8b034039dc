"""curvekit: neural-network training-curve data as partitioned Parquet.

Fetch the Shallue et al. (2019) data-parallelism release, convert it into a hive-partitioned
Parquet store, and query, fit and plot it.

>>> import curvekit
>>> curvekit.__version__ >= "0.1"
True
"""

from __future__ import annotations

from curvekit.errors import (
    ArchiveError,
    ChecksumError,
    CurvekitError,
    DownloadError,
    ManifestError,
    StoreError,
)
from curvekit.release.manifest import Manifest, load_manifest

__version__ = "0.1.0"

__all__ = [
    "ArchiveError",
    "ChecksumError",
    "CurvekitError",
    "DownloadError",
    "Manifest",
    "ManifestError",
    "StoreError",
    "__version__",
    "load_manifest",
]
