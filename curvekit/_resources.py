"""Where curvekit's package data is: the data manifests, the demo tables, the package itself
(which :mod:`curvekit._processes` loads in every Python process it starts).

One place finds them through :mod:`importlib.resources`, so an installed wheel and a source
checkout behave the same. The wheel ships ``data_manifest/`` inside the package as
``curvekit/_data_manifest`` (``pyproject.toml``'s ``force-include``); a checkout keeps it at
the repository's top level, beside the package.

>>> (manifest_dir() / "index.json").is_file()
True
>>> manifest_path("batch_science").name
'manifest.json'
"""

from __future__ import annotations

import json
from functools import cache
from importlib.resources import files
from pathlib import Path

from curvekit.errors import ManifestError

__all__ = ["demo_dir", "manifest_dir", "manifest_path", "package_dir"]


def package_dir() -> Path:
    """The folder of the ``curvekit`` package (installed or checked out)."""
    root = files("curvekit")
    if not isinstance(root, Path):  # pragma: no cover - a zip import, which curvekit is not
        raise ManifestError(f"curvekit is imported from {root}, not from a folder; install it "
                            "with pip so that its data files are on disk")
    return root


def manifest_dir() -> Path:
    """The folder holding ``index.json`` and the data manifests.

    Inside an installed wheel it is ``curvekit/_data_manifest``; in a source checkout it is
    the top-level ``data_manifest/`` folder.
    """
    here = package_dir()
    for candidate in (here / "_data_manifest", here.parent / "data_manifest"):
        if (candidate / "index.json").is_file():
            return candidate
    raise ManifestError(
        f"no data manifest found next to {here}; reinstall curvekit (pip install curvekit)"
    )


@cache
def _index() -> dict[str, str]:
    path = manifest_dir() / "index.json"
    data: dict[str, str] = json.loads(path.read_text())["datasets"]
    return data


def manifest_path(dataset: str) -> Path:
    """The bundled manifest file of ``dataset``; :class:`ManifestError` for an unknown name."""
    index = _index()
    if dataset not in index:
        known = ", ".join(sorted(index))
        raise ManifestError(f"unknown dataset {dataset!r}; known datasets: {known}")
    return manifest_dir() / index[dataset]


def demo_dir() -> Path:
    """The folder of the demo's bundled tables (``curvekit/_demo``)."""
    return package_dir() / "_demo"
