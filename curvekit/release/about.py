"""What curvekit says about a published release: :class:`Release`.

Each release curvekit knows is one module of :mod:`curvekit.release` that describes itself
with a :class:`Release` (``batch_science``, ``pd1``); :mod:`curvekit.release.registry`
names them.

>>> r = Release("x", "X curves", "A. Author, 2024", "https://example.org/x.tar.gz", "x.tar.gz",
...             None, "CC-BY 4.0", "md5 only")
>>> r.size_text
'not published'
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Release"]


@dataclass(frozen=True)
class Release:
    """A release: its name, title, citation, URL, archive file, size (None where nobody
    publishes one), licence, and how a download of it is checked."""

    name: str
    title: str
    citation: str
    url: str
    file_name: str
    size_bytes: int | None
    licence: str
    checksum: str

    @property
    def size_text(self) -> str:
        """The size in words: ``802 MB``, or ``not published``.

        >>> Release("x", "", "", "", "x", 802_000_000, "", "").size_text
        '802 MB'
        """
        if self.size_bytes is None:
            return "not published"
        return f"{self.size_bytes / 1e6:,.0f} MB"
