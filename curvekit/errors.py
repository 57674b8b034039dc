"""The exceptions curvekit raises.

Every error curvekit raises on purpose is a :class:`CurvekitError`, so a caller (or the CLI)
can catch the root once. Each message names the offending value, what was expected and how
to fix it.

>>> from curvekit.errors import ChecksumError, CurvekitError
>>> issubclass(ChecksumError, CurvekitError)
True
"""

from __future__ import annotations

__all__ = [
    "ArchiveError",
    "ChecksumError",
    "CurvekitError",
    "CurvekitWarning",
    "DownloadError",
    "IngestError",
    "ManifestError",
    "QueryError",
    "RunError",
    "StoreError",
]


class CurvekitError(Exception):
    """Root of every error curvekit raises on purpose."""


class ManifestError(CurvekitError):
    """A data manifest is missing, malformed, or does not know the requested dataset."""


class DownloadError(CurvekitError):
    """The archive could not be downloaded (network down, HTTP error, interrupted transfer)."""


class ChecksumError(DownloadError):
    """A downloaded or given file does not have the expected sha256."""


class ArchiveError(CurvekitError):
    """The archive is corrupt, unsafe, or does not follow the release layout.

    ``member`` names the archive member at fault when there is one.
    """

    def __init__(self, message: str, *, member: str | None = None) -> None:
        super().__init__(message)
        self.member = member


class StoreError(CurvekitError):
    """The Parquet store is missing, incomplete, or cannot be written."""


class QueryError(CurvekitError):
    """A query names an unknown workload, metric or status, or its SQL fails."""


class IngestError(CurvekitError):
    """A training log or run manifest cannot be imported (``curvekit add``).

    ``path`` names the file at fault and ``line`` its 1-based line (or record) when known;
    the message says what is wrong there and how to fix it.
    """

    def __init__(self, message: str, *, path: str | None = None,
                 line: int | None = None) -> None:
        where = f"{path}, line {line}: " if path and line else f"{path}: " if path else ""
        super().__init__(where + message)
        self.path = path
        self.line = line


class RunError(CurvekitError):
    """A training run cannot start or finish: a bad search space, an unknown model or data
    set, a missing optional dependency (torch, Ray), or a work folder of another sweep."""


class CurvekitWarning(UserWarning):
    """Root of the warnings curvekit gives: a result that is empty or partly empty, and why;
    a metric maximized although its name says lower is better.

    The library never prints; it warns, and the CLI prints each warning as ``Warning: ...``
    on stderr. Turn them into errors with
    ``warnings.simplefilter("error", curvekit.CurvekitWarning)``, or silence them with
    ``"ignore"``.
    """
