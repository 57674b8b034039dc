"""How long operations report their progress: one callback type for all of them.

The library never prints. :func:`curvekit.store.fetch`, :func:`curvekit.reporting`,
:func:`curvekit.run` and :func:`curvekit.generate_archive` each take a ``progress``
argument of the one type :class:`Progress`, called as ``progress(stage, done, total)``; the
CLI draws one bar per stage from it. The stages and what they count are in :data:`STAGES`.

The building blocks of a stage (a download, a checksum, a conversion) count on their own,
``counter(done, total)`` (a :data:`StageCounter`); :func:`stage_counter` turns a
``progress`` into the counter of one stage.

>>> seen = []
>>> def progress(stage: str, done: int, total: int | None) -> None:
...     seen.append((stage, done, total))
>>> counter = stage_counter(progress, "convert")
>>> counter(2048, 4096)
>>> seen
[('convert', 2048, 4096)]
>>> stage_counter(None, "convert") is None
True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

__all__ = ["STAGES", "Progress", "StageCounter", "stage_counter"]

STAGES: dict[str, str] = {
    "download": "bytes of the archive received (resumed bytes included)",
    "verify": "bytes of the archive hashed for its sha256",
    "convert": "archive members converted",
    "workloads": "workload pages of the report written",
    "figures": "figures of the report drawn",
    "trials": "trials of a sweep finished (resumed ones included)",
    "generate": "members of a synthetic archive written",
}
"""Every stage a :class:`Progress` hears of, and what its ``done`` and ``total`` count."""


class Progress(Protocol):
    """``progress(stage, done, total)``: ``done`` of ``total`` units of ``stage`` (one of
    :data:`STAGES`) are finished; ``total`` is ``None`` while unknown.

    Calls of one stage come in order, ``done`` never decreasing; a new stage begins when
    the last one ends. An exception the callback raises stops the operation (a sweep keeps
    the trials finished so far).
    """

    def __call__(self, stage: str, done: int, total: int | None, /) -> None: ...


StageCounter = Callable[[int, int | None], None]
"""``counter(done, total)``: the progress of one stage, as its building blocks report it."""


def stage_counter(progress: Progress | None, stage: str) -> StageCounter | None:
    """The counter of ``stage`` that reports to ``progress`` (``None`` for no progress)."""
    if progress is None:
        return None

    def counter(done: int, total: int | None) -> None:
        progress(stage, done, total)

    return counter
