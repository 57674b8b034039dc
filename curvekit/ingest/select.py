"""Which files of a source folder ``curvekit add`` reads: ``--include`` and ``--exclude``.

Patterns are globs (``*``, ``?``, ``[...]``) matched against paths relative to the source,
with ``/`` as the separator whatever the system. A pattern without ``/`` matches a file or
folder name at any depth (``*.log``, ``measurements.csv``, ``version_3``); a pattern with
``/`` matches the relative path of a file or of one of its folders (``trial_2/*``,
``runs/bs64``). A file is read when no ``--exclude`` pattern matches it and, if
``--include`` patterns are given, at least one of them does. Excluding a folder excludes
everything under it.

>>> f = FileFilter(include=("*.csv",), exclude=("trial_2", "*/measurements.csv"))
>>> [f.keeps(p) for p in ("trial_1/eval.csv", "trial_2/eval.csv",
...                       "trial_1/measurements.csv", "trial_1/run.log")]
[True, False, False, False]
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase

from curvekit.errors import IngestError

__all__ = ["ALL", "FileFilter"]


def _prefixes(rel: str) -> list[str]:
    """``a/b/c`` -> ``a``, ``a/b``, ``a/b/c``: the path and each folder above it."""
    parts = rel.strip("/").split("/")
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


def _hits(pattern: str, rel: str) -> bool:
    pattern = pattern.strip("/")
    if "/" in pattern:
        return any(fnmatchcase(p, pattern) for p in _prefixes(rel))
    return any(fnmatchcase(part, pattern) for part in rel.strip("/").split("/"))


@dataclass(frozen=True)
class FileFilter:
    """``--include``/``--exclude`` patterns; :meth:`keeps` says whether a file is read."""

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    @classmethod
    def of(cls, include: Iterable[str] = (), exclude: Iterable[str] = (),
           where: str = "--include/--exclude") -> FileFilter:
        """Checked patterns: an empty pattern (or one that is only ``/``) is refused, since
        it would match nothing and silently read everything."""
        inc, exc = tuple(include), tuple(exclude)
        for pattern in (*inc, *exc):
            if not isinstance(pattern, str) or not pattern.strip().strip("/"):
                raise IngestError(f"{where}: {pattern!r} is not a file pattern; give a glob "
                                  "relative to the source, e.g. 'measurements.csv' or "
                                  "'trial_*/*.csv'")
        return cls(tuple(p.strip() for p in inc), tuple(p.strip() for p in exc))

    def __bool__(self) -> bool:
        return bool(self.include or self.exclude)

    def keeps(self, rel: str) -> bool:
        """True if the file at ``rel`` (relative to the source) is read."""
        if any(_hits(p, rel) for p in self.exclude):
            return False
        return not self.include or any(_hits(p, rel) for p in self.include)

    def keeps_folder(self, rel: str) -> bool:
        """False if an ``--exclude`` pattern removes the folder at ``rel`` and all it holds
        (folders are never left out for not matching ``--include``: files below may)."""
        return rel in ("", ".") or not any(_hits(p, rel) for p in self.exclude)

    def merged(self, other: FileFilter) -> FileFilter:
        """Both filters' patterns (the manifest's and the command line's)."""
        return FileFilter(self.include + other.include, self.exclude + other.exclude)


ALL = FileFilter()
"""The filter that keeps every file."""
