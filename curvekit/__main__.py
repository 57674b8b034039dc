"""``python -m curvekit`` and the ``curvekit`` script: the command-line interface.

The entry point imports the CLI inside its own guard, so that Ctrl-C at any moment — while
click, polars or pandas are still importing too — ends the same way: ``Aborted.`` on
stderr and exit status 130, never a traceback. Output cut short by its reader (``curvekit
query ... | head``) ends quietly with status 141, as git and cat do.
"""

from __future__ import annotations

import sys

from curvekit._exits import BROKEN_PIPE, INTERRUPTED, exit_broken_pipe, exit_interrupted

__all__ = ["BROKEN_PIPE", "INTERRUPTED", "entry", "exit_broken_pipe", "exit_interrupted"]


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
