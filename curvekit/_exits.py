"""How the command line ends after Ctrl-C or a reader that has gone: the statuses a shell
expects. The entry point (:mod:`curvekit.__main__`) and the CLI both end this way, so the
exits live below both of them.

>>> INTERRUPTED, BROKEN_PIPE
(130, 141)
"""

from __future__ import annotations

import os
import sys
from typing import NoReturn

__all__ = ["BROKEN_PIPE", "INTERRUPTED", "exit_broken_pipe", "exit_interrupted"]

# Shells report a command stopped by signal N as 128 + N: SIGINT is 2, SIGPIPE is 13.
INTERRUPTED = 130
BROKEN_PIPE = 141


def exit_interrupted() -> NoReturn:
    """End after Ctrl-C: one line on stderr, status 130."""
    try:
        sys.stderr.write("Aborted.\n")
        sys.stderr.flush()
    except (OSError, ValueError):  # stderr itself may be gone; the status still tells
        pass
    raise SystemExit(INTERRUPTED)


def exit_broken_pipe() -> NoReturn:
    """End quietly when the reader of stdout has gone (``| head``): status 141.

    Whatever is still buffered for stdout would fail again when Python flushes it at exit,
    and print "Exception ignored ... BrokenPipeError": pointing the descriptor at
    /dev/null first lets that flush succeed silently.
    """
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # stdout is not a file (tests capture it): nothing to do
        pass
    raise SystemExit(BROKEN_PIPE)
