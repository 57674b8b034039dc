"""The release of Shallue et al. 2019, "Measuring the Effects of Data Parallelism on Neural
Network Training": its description for the registry (its reader is
:mod:`curvekit.release.archive`, its manifest ``data_manifest/batch_science``).

>>> release_info().file_name
'batch_science_data.tar.bz2'
"""

from __future__ import annotations

from curvekit.release.about import Release
from curvekit.release.manifest import load_manifest

__all__ = ["NAME", "release_info"]

NAME = "batch_science"


def release_info() -> Release:
    """The release as the registry lists it (from its bundled manifest)."""
    manifest = load_manifest(NAME)
    raw, cite = manifest.raw, manifest.raw.get("citation", {})
    citation = (f"{cite.get('authors')}, \"{cite.get('title')}\", {cite.get('journal')} "
                f"{cite.get('volume')}({cite.get('number')}):{cite.get('pages')}, "
                f"{cite.get('year')}")
    return Release(NAME, str(raw.get("title", "")), citation, manifest.archive.url,
                   manifest.archive.file_name, manifest.archive.approx_size_bytes,
                   str(raw.get("license", "")),
                   "sha256 pinned in the manifest, checked before conversion")
