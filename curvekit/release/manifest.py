"""Data manifests: what a published release contains, machine-readable.

Manifests live in the top-level ``data_manifest/`` folder (shipped inside the wheel as
``curvekit/_data_manifest``). ``data_manifest/index.json`` maps dataset names to manifest
files, so further datasets can be added beside the first.

>>> m = load_manifest("batch_science")
>>> m.totals["studies"], m.totals["workloads"]
(454, 35)
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from curvekit.errors import ManifestError

__all__ = ["ArchiveInfo", "Manifest", "StudyCounts", "load_manifest", "manifest_dir"]

STATUSES = ("COMPLETE", "INCOMPLETE", "INFEASIBLE")


def manifest_dir() -> Path:
    """The folder holding ``index.json`` and the manifests.

    Inside an installed wheel it is ``curvekit/_data_manifest``; in a source checkout it is
    the top-level ``data_manifest/`` folder.
    """
    here = Path(__file__).resolve().parent.parent
    for candidate in (here / "_data_manifest", here.parent / "data_manifest"):
        if (candidate / "index.json").is_file():
            return candidate
    raise ManifestError(
        f"no data manifest found next to {here}; reinstall curvekit (pip install curvekit)"
    )


@dataclass(frozen=True)
class ArchiveInfo:
    """Where a release's archive lives and how to check it."""

    url: str
    file_name: str
    sha256: str
    approx_size_bytes: int
    root: str


@dataclass(frozen=True)
class StudyCounts:
    """Published trial counts of one study, by status."""

    workload: str
    batch_size: int
    COMPLETE: int
    INCOMPLETE: int
    INFEASIBLE: int

    @property
    def total(self) -> int:
        """All trials of the study."""
        return self.COMPLETE + self.INCOMPLETE + self.INFEASIBLE


@dataclass(frozen=True)
class Manifest:
    """A parsed manifest (see ``data_manifest/README.md`` for the format)."""

    dataset: str
    manifest_version: int
    archive: ArchiveInfo
    totals: dict[str, int]
    studies: tuple[StudyCounts, ...]
    workloads: tuple[dict[str, Any], ...]
    measurements: int | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Manifest:
        """Build a manifest from its JSON form, checking that it is self-consistent.

        ``measurements`` (the number of evaluation rows in the archive) is optional: the
        published release does not state it, generated archives do.
        """
        try:
            archive = ArchiveInfo(**{k: data["archive"][k] for k in ArchiveInfo.__annotations__})
            studies = tuple(
                StudyCounts(
                    workload=s["workload"],
                    batch_size=int(s["batch_size"]),
                    **{k: int(s[k]) for k in STATUSES},
                )
                for s in data["studies"]
            )
            manifest = cls(
                dataset=data["dataset"],
                manifest_version=int(data["manifest_version"]),
                archive=archive,
                totals={k: int(v) for k, v in data["totals"].items()},
                studies=studies,
                workloads=tuple(data["workloads"]),
                measurements=data.get("measurements"),
                raw=data,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ManifestError(f"malformed manifest: missing or invalid field {exc}") from exc
        manifest._check()
        return manifest

    @classmethod
    def from_file(cls, path: str | Path) -> Manifest:
        """Read a manifest JSON file."""
        path = Path(path)
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise ManifestError(f"cannot read manifest {path}: {exc}") from exc
        return cls.from_dict(data)

    def _check(self) -> None:
        sums = {k: sum(getattr(s, k) for s in self.studies) for k in STATUSES}
        expected = {
            "studies": len(self.studies),
            "workloads": len({s.workload for s in self.studies}),
            "trials": sum(sums.values()),
            **sums,
        }
        wrong = {k: (self.totals.get(k), v) for k, v in expected.items() if self.totals.get(k) != v}
        if wrong:
            raise ManifestError(f"manifest {self.dataset!r}: totals disagree with studies {wrong}")

    def to_dict(self) -> dict[str, Any]:
        """The manifest's JSON form."""
        return dict(self.raw)


@cache
def _index() -> dict[str, str]:
    path = manifest_dir() / "index.json"
    data: dict[str, str] = json.loads(path.read_text())["datasets"]
    return data


def load_manifest(dataset: str = "batch_science") -> Manifest:
    """Load the manifest of a known dataset by name.

    Examples
    --------
    >>> load_manifest().archive.file_name
    'batch_science_data.tar.bz2'
    """
    index = _index()
    if dataset not in index:
        known = ", ".join(sorted(index))
        raise ManifestError(f"unknown dataset {dataset!r}; known datasets: {known}")
    return Manifest.from_file(manifest_dir() / index[dataset])
