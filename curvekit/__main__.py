"""``python -m curvekit`` and the ``curvekit`` script: the command-line interface.

The entry point imports the CLI inside its own guard, so that Ctrl-C at any moment — while
click, polars or pandas are still importing too — ends the same way: ``Aborted.`` on
stderr and exit status 130, never a traceback. Output cut short by its reader (``curvekit
query ... | head``) ends quietly with status 141, as git and cat do; output that cannot be
written (a full disk behind ``>``) ends with ``Error: ...`` and status 1.
"""

from __future__ import annotations

import contextlib
import sys

from curvekit._exits import BROKEN_PIPE, INTERRUPTED, exit_broken_pipe, exit_interrupted
from curvekit.errors import OutputError
from curvekit.outputs import stdout_guard

__all__ = ["BROKEN_PIPE", "INTERRUPTED", "entry", "exit_broken_pipe", "exit_interrupted"]


def entry() -> None:
    """Run the ``curvekit`` command with the exits above, the CLI's imports included."""
    try:
        from curvekit.cli import main

        try:
            main(prog_name="curvekit")
        finally:
            # Short output still sits in the buffer when click exits: flush it here, where
            # a reader that has gone, or a full disk, is still caught below.
            with stdout_guard():
                sys.stdout.flush()
    except KeyboardInterrupt:
        exit_interrupted()
    except BrokenPipeError:
        exit_broken_pipe()
    except OutputError as exc:  # the last output could not be written (a full disk)
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.write(f"Error: {exc}\n")
        raise SystemExit(1) from None


if __name__ == "__main__":
    entry()
