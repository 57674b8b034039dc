"""Test data in the release's exact layout: generated archives for tests and benchmarks.

>>> import tempfile, pathlib
>>> from curvekit.testing import tiny_archive
>>> tiny_archive(pathlib.Path(tempfile.mkdtemp()) / "tiny.tar.bz2").totals["workloads"]
4
"""

from __future__ import annotations

from curvekit.testing.synthetic import (
    full_scale_kwargs,
    generate_archive,
    tiny_archive,
    write_manifest,
)

__all__ = ["full_scale_kwargs", "generate_archive", "tiny_archive", "write_manifest"]
