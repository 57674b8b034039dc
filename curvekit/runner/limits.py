"""The bounds of a sweep's integer options: every one is bounded, so none makes a run that
never ends (``--steps 2**63``) or never starts.

The command line's options carry the same bounds (``click.IntRange``), and the library's
:func:`curvekit.run` and :meth:`curvekit.runner.plan.Sweep.create` check them with
:func:`check_count` before any work folder is made or anything trains.

>>> check_count(1000, "steps", 1, MAX_STEPS)
1000
"""

from __future__ import annotations

from curvekit.errors import RunError
from curvekit.values import integer_problem

__all__ = ["MAX_BATCH_SIZE", "MAX_SEED", "MAX_STEPS", "MAX_TRIALS", "MAX_WORKERS",
           "check_count"]

MAX_STEPS = 10**9
"""The largest step budget (and evaluation interval) a sweep takes: a billion steps, about
12 days at a millisecond a step; the paper's longest budgets are a few hundred thousand."""
MAX_TRIALS = 10_000
"""The most trials per study (the paper's studies have at most a few hundred)."""
MAX_BATCH_SIZE = 2**31 - 1
"""The largest batch size (and micro-batch or ghost batch size) a sweep takes."""
MAX_WORKERS = 1024
"""The most trials a sweep trains in parallel."""
MAX_SEED = 2**63 - 1
"""The largest seed (seeds are whole numbers from 0)."""


def check_count(value: object, name: str, minimum: int, maximum: int) -> int:
    """``value`` if it is a whole number from ``minimum`` to ``maximum``, else
    :class:`RunError` naming ``name``, the value and the range (every integer option of a
    sweep is bounded, so none can make a run that never ends or never starts).

    >>> check_count(2**63, "steps", 1, MAX_STEPS)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    curvekit.errors.RunError: steps 9223372036854775808 is more than 1000000000; give a whole ...
    """
    problem = integer_problem(value, minimum=minimum, maximum=maximum)
    if problem is not None:
        raise RunError(f"{name} {value!r} {problem}; give a whole number from {minimum:,} to "
                       f"{maximum:,}")
    assert isinstance(value, int | float)
    return int(value)
