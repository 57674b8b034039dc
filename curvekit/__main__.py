"""``python -m curvekit`` and the ``curvekit`` script: the command-line interface.

The entry point imports the CLI inside its own guard, so that Ctrl-C at any moment — while
click, polars or pandas are still importing too — ends the same way: ``Aborted.`` on
stderr and exit status 130, never a traceback. Output cut short by its reader (``curvekit
query ... | head``) ends quietly with status 141, as git and cat do.
"""

from __future__ import annotations

import os
import sys
from typing import NoReturn

__all__ = ["BROKEN_PIPE", "INTERRUPTED", "entry", "exit_broken_pipe", "exit_interrupted"]

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


def entry() -> None:
    """Run the ``curvekit`` command with the exits above, the CLI's imports included."""
    try:
        from curvekit.cli import main

        try:
            main(prog_name="curvekit")
        finally:
            # Short output still sits in the buffer when click exits: flush it here, where
            # a reader that has gone is still caught below.
            sys.stdout.flush()
    except KeyboardInterrupt:
        exit_interrupted()
    except BrokenPipeError:
        exit_broken_pipe()


if __name__ == "__main__":
    entry()
