"""The releases curvekit knows, one module each.

A release is a module of :mod:`curvekit.release` with a ``NAME`` and a ``release_info()``
returning its :class:`~curvekit.release.about.Release`; adding one (LCBench, TaskSet) is
that module plus its name in :data:`MODULES`.

>>> ", ".join(r.name for r in releases())
'batch_science, pd1'
>>> release("pd1").licence
'CC-BY 4.0 (a LICENSE file is included in the archive)'
"""

from __future__ import annotations

from types import ModuleType

from curvekit.errors import ManifestError
from curvekit.release import batch_science, pd1
from curvekit.release.about import Release

__all__ = ["MODULES", "release", "releases"]

MODULES: tuple[ModuleType, ...] = (batch_science, pd1)
"""Every release module, in the order ``curvekit datasets`` lists them."""


def releases() -> list[Release]:
    """Every release curvekit knows."""
    return [m.release_info() for m in MODULES]


def release(name: str) -> Release:
    """The release called ``name``; :class:`ManifestError` names the known ones otherwise."""
    for module in MODULES:
        if name == module.NAME:
            info: Release = module.release_info()
            return info
    known = ", ".join(m.NAME for m in MODULES)
    raise ManifestError(f"unknown dataset {name!r}: expected one of {known}")
