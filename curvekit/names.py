"""The one rule for names that enter the store: workloads, metrics and metaparameters.

Every import source (``curvekit add`` for each log format and the release layout, the run
manifest, ``curvekit run``) and the store's own writer check names with these functions,
so a name that one door accepts, every door accepts. The store treats names as data: a
metric or a metaparameter is a value in the store's rows (its columns are fixed), a
workload part a percent-encoded folder name; never a column, never SQL.

A **name** (of a metric, a metaparameter, or one part of a workload) is refused when it is

* empty, or not text;
* not valid Unicode text (a lone surrogate, which is how Python spells bytes that are not
  UTF-8 in a file name);
* holding a control character (Unicode category Cc, e.g. a newline, a tab or NUL) or a
  line or paragraph separator (U+2028, U+2029);
* longer than :data:`MAX_NAME_CHARS` characters (metrics and metaparameters).

**Names meet as data.** :class:`ColumnNames` is the one place the metric and metaparameter
names of one import (or of what the store's writer is given) meet, with the file each came
from. Since names are values in the store, none is reserved and none clashes: ``step``,
``batch_size`` or ``optimizer`` is a metric or a metaparameter like any other, ``val/err``
and ``VAL/ERR`` are two, a metaparameter may share a metric's name. On top of the rule
above, a name holding a byte-order mark (U+FEFF) is refused: invisible, it makes two names
look alike.

A **workload** ``base_dir/model/optimizer`` (``base_dir`` may hold ``/``, as the release's
``mnist_subsets/mnist_6875``) is refused, on top of that, when a part

* starts or ends with whitespace, is ``.`` or ``..``, or is empty (``a//b``);
* makes ``base_dir`` deeper than :data:`MAX_BASE_DIR_PARTS` folders;
* gives a partition folder (``base_dir=<percent-encoded>``) longer than
  :data:`MAX_FOLDER_BYTES` bytes, the file-name limit of common file systems (a CJK
  character costs 9 bytes there, an ASCII letter 1).

:meth:`curvekit.records.Workload.parse` applies the workload rule (it splits a name, once,
for every door); this module holds the rule for one name and one folder.

>>> check_name("val/classification_error", "metric")
'val/classification_error'
>>> check_name("lr\\n", "metaparameter")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
curvekit.errors.IngestError: metaparameter name 'lr\\n' holds a control character (U+000A ...
"""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Callable
from pathlib import Path

from curvekit.errors import CurvekitError, IngestError

__all__ = [
    "MAX_BASE_DIR_PARTS",
    "MAX_FOLDER_BYTES",
    "MAX_HOME_BYTES",
    "MAX_NAME_CHARS",
    "ColumnNames",
    "check_home_path",
    "check_name",
    "folder_problem",
    "name_problem",
]

MAX_FOLDER_BYTES = 255
"""Longest partition folder name (``base_dir=...``, percent-encoded), in bytes."""
MAX_BASE_DIR_PARTS = 8
"""Most ``/``-separated folders in a ``base_dir`` (the release uses at most 2)."""
MAX_NAME_CHARS = 255
"""Longest metric or metaparameter name, in characters."""
MAX_HOME_BYTES = 3072
"""Longest curvekit home path, in bytes: the store's folders below it take up to about
1,000 more bytes of the 4,096 that Linux allows a path."""

_SEPARATORS = {"\u2028", "\u2029"}

ErrorType = Callable[[str], CurvekitError]


def name_problem(value: object) -> str | None:
    """What is wrong with ``value`` as a name under the rules every name follows, or None.

    >>> name_problem("learning_rate") is None
    True
    >>> name_problem("")
    'is empty'
    """
    if not isinstance(value, str):
        return f"is {type(value).__name__}, not text"
    if not value:
        return "is empty"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        return (f"is not valid UTF-8 text (U+{ord(value[exc.start]):04X} at position "
                f"{exc.start}, bytes a file name or log could not decode)")
    for i, char in enumerate(value):
        if char in _SEPARATORS or unicodedata.category(char) == "Cc":
            return f"holds a control character (U+{ord(char):04X} at position {i})"
    return None


def check_name(value: object, what: str, *, fix: str = "rename it",
               error: ErrorType = IngestError) -> str:
    """``value`` if it is a valid metric or metaparameter name, else ``error`` saying why.

    ``what`` names the kind of name in the message ("metric", "metaparameter"); ``fix`` says
    how to rename it for the source at hand (e.g. "map it with --map 'OLD=NEW'").
    """
    problem = name_problem(value)
    if problem is None and isinstance(value, str) and len(value) > MAX_NAME_CHARS:
        problem = f"is {len(value)} characters long, more than {MAX_NAME_CHARS}"
    if problem is not None:
        raise error(f"{what} name {value!r} {problem}; {fix}")
    assert isinstance(value, str)
    return value


def folder_problem(folder: str) -> str | None:
    """What is wrong with one folder of a workload name (a part, or a piece of base_dir)."""
    if not folder:
        return "has an empty folder (as in 'a//b' or a leading '/')"
    problem = name_problem(folder)
    if problem is not None:
        return problem
    if folder != folder.strip():
        return "starts or ends with whitespace"
    if folder in (".", ".."):
        return f"is {folder!r}, which names a folder, not a workload"
    return None


def check_home_path(path: str | os.PathLike[str], error: ErrorType) -> Path:
    """``path`` if DuckDB and polars can read a store under it, else ``error`` saying why.

    Refused: a NUL character (no file system allows it), bytes that are not UTF-8 (DuckDB
    takes paths as UTF-8 text), a folder named with ``=`` (``step=7``: readers of hive
    partitions would take it for a column of every table), a backslash (DuckDB may read
    it as a Windows path separator), a folder name longer than
    :data:`MAX_FOLDER_BYTES` bytes and a path longer than :data:`MAX_HOME_BYTES` bytes.

    >>> check_home_path("/tmp/my data/o'brien", CurvekitError).name
    "o'brien"
    """
    text = os.fspath(path)
    where = "the curvekit home"
    if "\0" in text:
        raise error(f"{where} {text!r} holds a NUL character; choose another folder "
                    "(--home or CURVEKIT_HOME)")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise error(f"{where} {text!r} is not valid UTF-8 (at position {exc.start}); choose "
                    "a folder whose name is UTF-8 text (--home or CURVEKIT_HOME)") from None
    out = Path(text).expanduser()
    size = len(os.fsencode(out))
    if size > MAX_HOME_BYTES:
        raise error(f"{where} {text[:60]!r}... is {size} bytes long, more than the "
                    f"{MAX_HOME_BYTES} bytes that leave room for the store's folders below it "
                    "within the system's path limit; choose a shorter path (--home or "
                    "CURVEKIT_HOME)")
    long = next((p for p in out.parts if len(p.encode()) > MAX_FOLDER_BYTES), None)
    if long is not None:
        raise error(f"{where} has a folder name of {len(long.encode())} bytes ({long[:40]!r}"
                    f"...), more than the {MAX_FOLDER_BYTES} bytes file systems allow; choose "
                    "a shorter path (--home or CURVEKIT_HOME)")
    try:
        folders = [out, out.resolve()]
    except (OSError, RuntimeError):  # a symlink loop: the store's opening reports it
        folders = [out]
    if "\\" in text:
        # DuckDB reads some backslash sequences as Windows path prefixes ("\\?" fails to open)
        raise error(f"{where} {text!r} holds a backslash, which DuckDB may read as a Windows "
                    "path separator; choose a folder without '\\' (--home or CURVEKIT_HOME)")
    for folder in folders:
        hive = [p for p in folder.parts if "=" in p]
        if hive:
            raise error(f"{where} {str(folder)!r} has a folder named with '=' ({hive[0]!r}), "
                        "which Parquet readers take for a partition column of every table; "
                        "choose a folder without '=' (--home or CURVEKIT_HOME)")
    return out


class ColumnNames:
    """The metric and metaparameter names of one import (or one write), checked as each
    arrives, with where it was found (a file, a member, a workload).

    :meth:`metric` and :meth:`parameter` apply the one name rule (:func:`check_name`) and
    refuse a byte-order mark, raising ``error`` with the fix; they return the name as it is
    stored: as given. Names are data in the store, so no two of them clash.

    >>> from curvekit.errors import StoreError
    >>> names = ColumnNames(StoreError)
    >>> names.metric("val/err", "a.csv"), names.metric("VAL/ERR", "b.csv")
    ('val/err', 'VAL/ERR')
    >>> names.parameter("optimizer", "a.json"), names.metric_count
    ('optimizer', 2)
    """

    def __init__(self, error: ErrorType = IngestError, *,
                 metric_fix: str = "rename the metric",
                 parameter_fix: str = "rename the metaparameter where it is given",
                 clash_fix: str = "") -> None:
        self._error = error
        self._fixes = {"metric": metric_fix, "metaparameter": parameter_fix}
        self._seen: dict[str, set[str]] = {"metric": set(), "metaparameter": set()}

    @property
    def metric_count(self) -> int:
        """How many distinct metric names were met so far."""
        return len(self._seen["metric"])

    def metric(self, name: object, where: str, *, fix: str | None = None,
               clash_fix: str | None = None, error: ErrorType | None = None,
               logged: str | None = None) -> str:
        """The metric ``name`` found in ``where``, checked (``logged``: the name the log
        used, when a map renamed it into ``name``; messages show it)."""
        return self._add("metric", name, fix, error, logged)

    def parameter(self, name: object, where: str, *, fix: str | None = None,
                  clash_fix: str | None = None, error: ErrorType | None = None,
                  column: bool = False) -> str:
        """The metaparameter ``name`` found in ``where``, checked."""
        return self._add("metaparameter", name, fix, error, None)

    def _add(self, kind: str, name: object, fix: str | None, error: ErrorType | None,
             logged: str | None) -> str:
        mine = self._seen[kind]
        if isinstance(name, str) and name in mine:
            return name
        fix = fix or self._fixes[kind]
        fail = error or self._error
        given = check_name(name, kind, fix=fix, error=fail)
        if "\ufeff" in given:
            raise fail(
                f"{kind} {logged or given!r} has a byte-order mark (U+FEFF) in its name, an "
                f"invisible character that makes two names look alike; {fix}")
        mine.add(given)
        return given
