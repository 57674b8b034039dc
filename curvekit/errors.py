"""The exceptions and warnings curvekit raises.

Every error curvekit raises on purpose is a :class:`CurvekitError`, so a caller (or the CLI)
can catch the root once; every warning it gives is a :class:`CurvekitWarning`. Each message
names the offending value, what was expected and how to fix it. The whole tree::

    CurvekitError
    ├── ManifestError        a data manifest is missing, malformed or does not know the data set
    ├── DownloadError        the archive could not be downloaded
    │   └── ChecksumError    a file does not have the expected sha256
    ├── ArchiveError         the archive is missing, corrupt, unsafe or off the release layout
    ├── StoreError           the Parquet store is missing, incomplete or cannot be written
    ├── QueryError           an unknown workload, metric or status, or failing SQL
    ├── IngestError          a training log or run manifest cannot be imported (add)
    ├── RunError             a training run cannot start or finish (run)
    ├── FitError             a curve cannot be fitted
    ├── FigureError          a figure or plot cannot be drawn or saved
    │   └── RendererError    drawing failed in the renderer's helper process
    ├── ReportError          the report cannot be written where asked
    └── OutputError          an output file, folder or stdout cannot be written (disk full, ...)

    CurvekitWarning (a UserWarning)
    ├── EmptyResultWarning   a measurement has no row at some batch sizes, and why
    ├── DirectionWarning     a metric maximized although its name says lower is better
    ├── FigureNotesWarning   a figure was drawn with gaps, each said on the figure
    ├── IngestWarning        an import went through, but a log deserves a look
    └── BatchingFallbackWarning  trials asked to train together ran one by one, and why

>>> from curvekit.errors import ChecksumError, CurvekitError, RendererError
>>> issubclass(ChecksumError, CurvekitError), issubclass(RendererError, CurvekitError)
(True, True)
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "ArchiveError",
    "BatchingFallbackWarning",
    "ChecksumError",
    "CurvekitError",
    "CurvekitWarning",
    "DirectionWarning",
    "DownloadError",
    "EmptyResultWarning",
    "FigureError",
    "FigureNotesWarning",
    "FitError",
    "IngestError",
    "IngestWarning",
    "ManifestError",
    "OutputError",
    "QueryError",
    "RendererError",
    "ReportError",
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
    """The archive is missing, corrupt, unsafe, or does not follow the release layout (or a
    synthetic one cannot be generated as asked).

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


class FitError(CurvekitError):
    """A curve cannot be fitted (too few points, non-positive or unsorted values)."""


class FigureError(CurvekitError):
    """A figure cannot be drawn or saved: unknown number, workloads missing from the store,
    an unknown output format."""


class RendererError(FigureError):
    """Drawing failed in the helper process (raised there, reported by
    :class:`curvekit.plotting.static.Renderer`)."""


class ReportError(CurvekitError):
    """The report cannot be written where asked: its folder is a file or a symbolic link,
    holds the working directory or the store, or holds files a report does not write."""


class OutputError(CurvekitError):
    """What a command writes cannot be written: a plot or figure file, the report, a sweep's
    work folder or the standard output, on a full disk, in a read-only folder, under a name
    too long for the file system, or where a file stands in place of a folder
    (:mod:`curvekit.outputs`). ``path`` names the file or folder at fault (None: stdout)."""

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class CurvekitWarning(UserWarning):
    """Root of the warnings curvekit gives: a result that is empty or partly empty, and why;
    a metric maximized although its name says lower is better.

    The library never prints; it warns, and the CLI prints each warning as ``Warning: ...``
    on stderr. Turn them into errors with
    ``warnings.simplefilter("error", curvekit.CurvekitWarning)``, or silence them with
    ``"ignore"``.
    """


class EmptyResultWarning(CurvekitWarning):
    """A measurement has no row at some batch sizes of the workload (or at any); the
    message says why (see :func:`curvekit.measure.explain_empty`)."""


class DirectionWarning(CurvekitWarning):
    """A metric is maximized although its name says lower is better, or the reverse."""


class FigureNotesWarning(CurvekitWarning):
    """A figure was drawn with gaps, each said on the figure itself: a curve normalized at
    another batch size, a curve or panel without points, a fallback metric.

    ``figure`` is the figure's number (its name, such as ``"9a"``, for one part of a figure)
    and ``notes`` the notes, one per gap (``panel: what``).
    """

    def __init__(self, figure: int | str, notes: Sequence[str]) -> None:
        self.figure, self.notes = figure, list(notes)
        super().__init__(f"Figure {figure}: " + "; ".join(self.notes))


class IngestWarning(CurvekitWarning):
    """An import went through, but something in a log deserves a look (a value too large
    for a 64-bit float, stored as infinity). ``curvekit add`` prints it as ``Warning: ...``."""


class BatchingFallbackWarning(CurvekitWarning):
    """Trials that were asked to train together run one by one (the message says why: a
    user model that cannot be batched, or the gradient noise scale).
    ``curvekit run`` prints it as ``Warning: ...``."""
