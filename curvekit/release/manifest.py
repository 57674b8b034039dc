"""Data manifests: what a published release contains, machine-readable.

Manifests live in the top-level ``data_manifest/`` folder (shipped inside the wheel as
``curvekit/_data_manifest``). ``data_manifest/index.json`` maps dataset names to manifest
files, so further datasets can be added beside the first.

>>> m = load_manifest("batch_science")
>>> m.totals["studies"], m.totals["workloads"]
(454, 35)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from curvekit import structured
from curvekit._resources import manifest_dir, manifest_path
from curvekit.errors import ManifestError
from curvekit.records import STATUSES

__all__ = [
    "MAX_ARCHIVE_BYTES",
    "MAX_FILE_NAME_LENGTH",
    "ArchiveInfo",
    "Manifest",
    "StudyCounts",
    "check_file_name",
    "load_manifest",
    "manifest_dir",
]

MAX_FILE_NAME_LENGTH = 200
"""Longest ``archive.file_name`` accepted, in UTF-8 bytes: below the usual 255-byte limit of one
path component, with room for the ``.part`` suffix of a download in progress."""

MAX_ARCHIVE_BYTES = 1 << 40
"""Largest ``archive.approx_size_bytes`` accepted (1 TiB; the release is 0.8 GB)."""

URL_SCHEMES = ("http", "https", "file")

_SHA256 = re.compile(r"[0-9a-fA-F]{64}")
# A separator or a drive colon would let the name leave the downloads folder (on some
# platform); control characters (NUL included) cannot be in a file name or mislead a terminal.
_UNSAFE_NAME_CHARS = re.compile(r"[/\\:\x00-\x1f\x7f]")


def check_file_name(name: object, *, field_name: str = "archive.file_name") -> str:
    """Return ``name`` if it is a bare file name, else raise :class:`ManifestError`.

    A manifest is input like any other: the archive's file name becomes a path inside the
    downloads folder, so it may not name a folder, a parent (``..``), an absolute path, a
    drive, or contain control characters, and it is at most ``MAX_FILE_NAME_LENGTH`` bytes
    long in UTF-8.

    Examples
    --------
    >>> check_file_name("batch_science_data.tar.bz2")
    'batch_science_data.tar.bz2'
    >>> check_file_name("../../x.tar.bz2")
    Traceback (most recent call last):
    ...
    curvekit.errors.ManifestError: archive.file_name '../../x.tar.bz2' is not a bare file name: ...
    """
    fix = (f"expected a bare file name such as 'batch_science_data.tar.bz2' (no folder, no "
           f"'..', no drive, no control characters, at most {MAX_FILE_NAME_LENGTH} "
           f"bytes in UTF-8): it names the file inside the downloads folder. Fix {field_name} in "
           f"the manifest")
    if not isinstance(name, str):
        raise ManifestError(f"{field_name} {name!r} is not a bare file name: {fix}")
    try:
        size: int | None = len(name.encode("utf-8"))
    except UnicodeEncodeError:  # a lone surrogate: no file system can store it
        size = None
    if (size is None or size > MAX_FILE_NAME_LENGTH or name in ("", ".", "..")
            or name != name.strip() or _UNSAFE_NAME_CHARS.search(name)):
        raise ManifestError(f"{field_name} {name!r} is not a bare file name: {fix}")
    return name


@dataclass(frozen=True)
class ArchiveInfo:
    """Where a release's archive lives and how to check it.

    Every field is checked on construction (:class:`ManifestError` names the bad value):
    ``file_name`` and ``root`` are bare names (see :func:`check_file_name`), ``url`` is
    http(s) or file, ``sha256`` is 64 hexadecimal digits, and ``approx_size_bytes`` is a
    whole number from 1 to ``MAX_ARCHIVE_BYTES``.
    """

    url: str
    file_name: str
    sha256: str
    approx_size_bytes: int
    root: str

    def __post_init__(self) -> None:
        check_file_name(self.file_name)
        check_file_name(self.root, field_name="archive.root")
        scheme = self.url.partition(":")[0].lower() if isinstance(self.url, str) else ""
        if scheme not in URL_SCHEMES or not self.url.partition(":")[2]:
            raise ManifestError(
                f"archive.url {self.url!r} is not a download URL: expected an http://, "
                f"https:// or file:// URL. Fix archive.url in the manifest")
        if not isinstance(self.sha256, str) or not _SHA256.fullmatch(self.sha256):
            raise ManifestError(
                f"archive.sha256 {self.sha256!r} is not a sha256: expected 64 hexadecimal "
                f"digits. Fix archive.sha256 in the manifest")
        size = self.approx_size_bytes
        if (isinstance(size, bool) or not isinstance(size, int)
                or not 1 <= size <= MAX_ARCHIVE_BYTES):
            raise ManifestError(
                f"archive.approx_size_bytes {size!r} is not a plausible archive size: expected "
                f"a whole number of bytes from 1 to {MAX_ARCHIVE_BYTES} (1 TiB). Fix "
                f"archive.approx_size_bytes in the manifest")


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
        except (KeyError, TypeError, ValueError, OverflowError, AttributeError) as exc:
            raise ManifestError(f"malformed manifest: missing or invalid field {exc}") from exc
        manifest._check()
        return manifest

    @classmethod
    def from_file(cls, path: str | Path) -> Manifest:
        """Read a manifest JSON file."""
        path = Path(path)
        data = structured.load(path, kind="json", error=lambda m, _: ManifestError(
            f"cannot read manifest: {m}"))
        try:
            return cls.from_dict(data)
        except ManifestError as exc:
            raise ManifestError(f"manifest {path}: {exc}") from exc

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


def load_manifest(dataset: str = "batch_science") -> Manifest:
    """Load the manifest of a known dataset by name.

    Examples
    --------
    >>> load_manifest().archive.file_name
    'batch_science_data.tar.bz2'
    """
    return Manifest.from_file(manifest_path(dataset))
