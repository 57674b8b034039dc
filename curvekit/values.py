"""The one rule for values that enter the store: whole numbers, steps, metaparameters, flags.

Every door into the store (the release archive through ``fetch``, ``curvekit add`` for the
release layout and every log format, the run manifest, ``curvekit run``) and the store's
writer check values with these functions, so a value one door refuses, every door refuses.

* A **whole number** (a step, a trial id, a batch size, a step budget, a count) is an
  integer, or a float or text that spells one exactly, within int64 (at most
  :data:`INT64_MAX`); never a boolean, NaN, an infinity or a fraction. Text is converted
  exactly (decimal arithmetic, never through a float): ``9007199254740993`` (2**53 + 1)
  stays itself.
* A **metaparameter value** is text, true/false, an integer within int64, a finite float,
  empty (null), or a list or table of those; NaN, ±infinity, integers beyond int64 and
  other types (a TOML date, bytes) are refused.
* A **flag** (``early_stopping``) is true or false, never the text ``"false"``.

>>> exact_integer("9007199254740993"), exact_integer("1e3"), exact_integer("1.5")
(9007199254740993, 1000, None)
>>> parameter_problem({"lr": float("nan")})
"'lr' = nan is not a finite number"
>>> flag_problem("false")
"is the text 'false', not true or false; write it without quotes"
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from decimal import Decimal, InvalidOperation

__all__ = [
    "INT64_MAX",
    "INT64_MIN",
    "exact_integer",
    "flag_problem",
    "integer_problem",
    "merged_type",
    "parameter_fix",
    "parameter_problem",
]

INT64_MAX = 2**63 - 1
"""The largest step (and integer) the store holds: steps are int64 end to end."""
INT64_MIN = -(2**63)
"""The smallest integer metaparameter the store holds."""


def exact_integer(text: str) -> int | None:
    """The integer ``text`` spells exactly (``100``, ``100.0``, ``1e3``), else None.

    Decimal arithmetic, never a float: ``9007199254740993`` stays itself. The exponent is
    checked before converting, so ``1e999999999`` costs nothing: a number of 20 digits or
    more is returned as ``INT64_MAX + 1`` (or ``INT64_MIN - 1``), beyond int64 whatever it is.
    """
    stripped = text.strip()
    if len(stripped) <= 20:
        try:
            return int(stripped)
        except ValueError:
            pass
    try:
        number = Decimal(stripped)
    except InvalidOperation:
        return None
    if not number.is_finite():
        return None
    if number.adjusted() >= 19:  # |number| >= 10**19 > 2**63: beyond int64 whatever it is
        return INT64_MAX + 1 if number > 0 else INT64_MIN - 1
    if number != number.to_integral_value():
        return None
    return int(number)


def integer_problem(value: object, *, minimum: int = 0, maximum: int = INT64_MAX
                    ) -> str | None:
    """What is wrong with ``value`` as a whole number in ``minimum`` … ``maximum``, or None.

    An integral float (``200000.0``, as JSON writers emit) is a whole number; a boolean,
    NaN, an infinity, a fraction or text is not.

    >>> integer_problem(2**63), integer_problem(True), integer_problem(100.0)
    ('is beyond 2**63 - 1 = 9223372036854775807', 'is true/false, not an integer', None)
    """
    if isinstance(value, bool):
        return "is true/false, not an integer"
    if not isinstance(value, int | float):
        return f"is {type(value).__name__}, not an integer"
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        return "is not an integer"
    if value > maximum:
        return (f"is beyond 2**63 - 1 = {INT64_MAX}" if maximum == INT64_MAX
                else f"is more than {maximum}")
    if value < minimum:
        return f"is less than {minimum}"
    return None


def parameter_problem(value: object, name: str = "") -> str | None:
    """What is wrong with ``value`` as the value of the metaparameter ``name``, or None.

    Lists and tables are looked into (iteratively: their depth is bounded by whoever parsed
    them); the message names the part at fault (``name[2]``, ``name.key``).

    >>> parameter_problem([1, 2.5, "x", None, True], "shape") is None
    True
    >>> parameter_problem(2**70, "seed")
    "'seed' = 1180591620717411303424 does not fit in a 64-bit integer (-2**63 ... 2**63 - 1)"
    """
    todo: list[tuple[str, object]] = [(name, value)]
    while todo:
        where, item = todo.pop()
        shown = repr(where)
        if item is None or isinstance(item, bool | str):
            continue
        if isinstance(item, int):
            if not INT64_MIN <= item <= INT64_MAX:
                return f"{shown} = {item} does not fit in a 64-bit integer (-2**63 ... 2**63 - 1)"
        elif isinstance(item, float):
            if not math.isfinite(item):
                return f"{shown} = {item!r} is not a finite number"
        elif isinstance(item, dict):
            for key, sub in item.items():
                if not isinstance(key, str):
                    return f"{shown} has the key {key!r}, which is not text"
                todo.append((f"{where}.{key}" if where else key, sub))
        elif isinstance(item, list | tuple):
            todo.extend((f"{where}[{i}]", sub) for i, sub in enumerate(item))
        else:
            return (f"{shown} = {item!r} is {type(item).__name__}, not a number, text, "
                    "true/false or a list of them")
    return None


def parameter_fix(value: object) -> str:
    """How to give a metaparameter value that :func:`parameter_problem` refuses.

    >>> parameter_fix(2**70)
    'write it as a float (1.18059e+21) or as a string ("1180591620717411303424")'
    """
    if isinstance(value, int) and not isinstance(value, bool):
        return f"write it as a float ({float(value):.6g}) or as a string (\"{value}\")"
    return "give a finite number, a string or true/false"


def flag_problem(value: object) -> str | None:
    """What is wrong with ``value`` as a flag (true or false), or None.

    >>> flag_problem(False) is None, flag_problem(0)
    (True, 'is 0, not true or false')
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        return f"is the text {value!r}, not true or false; write it without quotes"
    return f"is {value!r}, not true or false"


def merged_type(kinds: Iterable[str]) -> str:
    """The one type of a metaparameter's column in the wide frames, from its values' own
    types (the ``type`` of its parameters rows; see
    :func:`curvekit.store.writer.parameter_type`).

    >>> merged_type(["null", "bool"]), merged_type(["null"]), merged_type(["json"])
    ('bool', 'null', 'string')
    """
    have = set(kinds) - {"null"}
    if not have:
        return "null"
    if have <= {"bool"}:
        return "bool"
    if have <= {"int64"}:
        return "int64"
    if have <= {"int64", "float64"}:
        return "float64"
    return "string"
