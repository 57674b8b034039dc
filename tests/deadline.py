"""Fail instead of hanging: a test that replays an attack which used to block or loop forever
runs its call under a deadline far above what the fixed code needs."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from types import FrameType


class Stuck(BaseException):
    """Raised when a deadline passes; not an OSError (as TimeoutError is), so no handler
    in the code under test turns it into an error of its own."""


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Raise :class:`Stuck` in the main thread if the block runs past ``seconds`` (a blocked
    ``open`` or ``read`` of a FIFO is interrupted too)."""
    def expire(signum: int, frame: FrameType | None) -> None:
        raise Stuck(f"still running after {seconds} s")
    old = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
