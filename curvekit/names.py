"""The one rule for names that enter the store: workloads, metrics and metaparameters.

Every import source (``curvekit add`` for each log format and the release layout, the run
manifest, ``curvekit run``) and the store's own writer check names with these functions,
so a name that one door accepts, every door accepts. The store treats names as data: they
become Parquet column names and percent-encoded folder names, never SQL.

A **name** (of a metric, a metaparameter, or one part of a workload) is refused when it is

* empty, or not text;
* not valid Unicode text (a lone surrogate, which is how Python spells bytes that are not
  UTF-8 in a file name);
* holding a control character (Unicode category Cc, e.g. a newline, a tab or NUL) or a
  line or paragraph separator (U+2028, U+2029);
* longer than :data:`MAX_NAME_CHARS` characters (metrics and metaparameters).

**Columns.** Until names are data, every metric is a column of the store's measurements and
every metaparameter a column of its trials, and DuckDB, which answers every query, matches
column names without regard to case. :class:`ColumnNames` is the one check of the columns
that meet in one store (or in what is about to be written into it), run by the store's
writer for every door and by the importers earlier, with the file at fault:

* a metric named, in any case, like one of the store's own or computed columns
  (:data:`RESERVED`) is refused;
* a metaparameter so named is stored as ``param_<name>`` (:func:`parameter_column`); two
  metaparameters that would then share a column (``optimizer`` beside ``param_optimizer``)
  are refused, naming both;
* two names that differ only in case (``val/err`` and ``VAL/ERR``, ``learning_rate`` and
  ``Learning_Rate``), or a metaparameter named like a metric, are refused, naming both;
* a byte-order mark (U+FEFF) inside a name is refused: it makes two names look alike.

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
    "PARAM_PREFIX",
    "RESERVED",
    "ColumnNames",
    "check_home_path",
    "check_name",
    "fold",
    "folder_problem",
    "is_reserved",
    "name_problem",
    "parameter_column",
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
RESERVED = frozenset({"base_dir", "model", "optimizer", "batch_size", "trial_id", "status",
                      "steps", "n_measurements", "step", "effective_learning_rate"})
"""Names no metric may take, in any case: the store's partition and fixed columns (of the
measurements and trials tables, which queries join) and the columns queries compute."""
PARAM_PREFIX = "param_"
"""The prefix of a metaparameter column whose name is, in any case, one of :data:`RESERVED`."""

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


def fold(name: str) -> str:
    """The form under which two column names are the same column to queries.

    DuckDB matches identifiers without regard to (ASCII) case; Unicode case folding is
    coarser, so every pair DuckDB would confuse folds to one form (and a few more do).

    >>> fold("Val/Loss") == fold("val/loss")
    True
    """
    return name.casefold()


def is_reserved(name: str) -> bool:
    """True when ``name`` is, in any case, one of the :data:`RESERVED` column names.

    >>> is_reserved("Step"), is_reserved("steps_per_epoch")
    (True, False)
    """
    return fold(name) in RESERVED


def parameter_column(name: str) -> str:
    """The trials column of the metaparameter ``name``: ``param_<name>`` for a reserved name.

    >>> parameter_column("optimizer"), parameter_column("Step"), parameter_column("momentum")
    ('param_optimizer', 'param_Step', 'momentum')
    """
    return PARAM_PREFIX + name if is_reserved(name) else name


class ColumnNames:
    """The metric and metaparameter columns of one store, checked as each name arrives.

    :meth:`metric` and :meth:`parameter` take a name and where it was found (a file, a
    member, a workload) and return its column, or raise ``error`` naming both names of a
    clash, where each came from and the fix. A name met again from the same or another
    place is the same column (no error). See the module docs for the rules.

    >>> from curvekit.errors import StoreError
    >>> names = ColumnNames(StoreError)
    >>> names.metric("val/err", "a.csv"), names.parameter("optimizer", "a.json")
    ('val/err', 'param_optimizer')
    >>> names.metric("VAL/ERR", "b.csv")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    curvekit.errors.StoreError: metric 'VAL/ERR' (column 'VAL/ERR', from b.csv) and metric \
'val/err' (column 'val/err', from a.csv) would clash: names that differ only in case are one \
column to queries; rename one of them
    """

    def __init__(self, error: ErrorType = IngestError, *,
                 metric_fix: str = "rename the metric",
                 parameter_fix: str = "rename the metaparameter where it is given",
                 clash_fix: str = "rename one of them") -> None:
        self._error = error
        self._fixes = {"metric": metric_fix, "metaparameter": parameter_fix}
        self._clash_fix = clash_fix
        # fold(column) -> (column, name as given, where); one dict per kind
        self._seen: dict[str, dict[str, tuple[str, str, str]]] = {"metric": {},
                                                                   "metaparameter": {}}

    @property
    def metric_count(self) -> int:
        """How many metric columns were met so far."""
        return len(self._seen["metric"])

    def metric(self, name: object, where: str, *, fix: str | None = None,
               clash_fix: str | None = None, error: ErrorType | None = None,
               logged: str | None = None) -> str:
        """The column of the metric ``name`` found in ``where``.

        ``fix`` (how to rename this name), ``clash_fix`` (how to part two names) and
        ``error`` replace the defaults for this name; ``logged`` is the name the log used,
        when a map renamed it into ``name`` (messages show it)."""
        return self._add("metric", name, where, fix, clash_fix, error=error, logged=logged)

    def parameter(self, name: object, where: str, *, fix: str | None = None,
                  clash_fix: str | None = None, error: ErrorType | None = None,
                  column: bool = False) -> str:
        """The column of the metaparameter ``name`` found in ``where`` (``column``: the name
        is already a stored column, not prefixed again)."""
        return self._add("metaparameter", name, where, fix, clash_fix, error=error,
                         as_column=column)

    def _add(self, kind: str, name: object, where: str, fix: str | None,
             clash_fix: str | None, *, error: ErrorType | None = None,
             as_column: bool = False, logged: str | None = None) -> str:
        fix = fix or self._fixes[kind]
        clash_fix = clash_fix or self._clash_fix
        fail = error or self._error
        mine = self._seen[kind]
        if isinstance(name, str):
            # The same column again, from here or elsewhere: a metric is its column (two
            # logged names may map to one), a metaparameter its name as given.
            if kind == "metric":
                known = mine.get(fold(name))
                if known is not None and known[0] == name:
                    return name
            else:
                known = mine.get(fold(name if as_column else parameter_column(name)))
                if known is not None and known[1] == name:
                    return known[0]
        given = check_name(name, kind, fix=fix, error=fail)
        shown = logged or given
        if "\ufeff" in given:
            raise fail(
                f"{kind} {shown!r} has a byte-order mark (U+FEFF) in its name, an invisible "
                f"character that makes two names look alike; {fix}")
        if kind == "metric" and is_reserved(given):
            raise fail(
                f"metric {shown!r} (from {where}) is named like the store's column "
                f"{fold(given)!r} (names "
                f"in {', '.join(sorted(RESERVED))} are the store's, in any case); {fix}")
        stored = given if kind == "metric" or as_column else parameter_column(given)
        key = fold(stored)
        other, other_kind = mine.get(key), kind
        if other is None:
            other_kind = "metaparameter" if kind == "metric" else "metric"
            other = self._seen[other_kind].get(key)
        if other is not None:
            if other_kind != kind:
                why = "a metaparameter named like a metric shadows it in query answers"
            elif other[0] == stored:
                why = f"both would be stored as the column {stored!r}"
            else:
                why = "names that differ only in case are one column to queries"
            raise fail(
                f"{kind} {shown!r} (column {stored!r}, from {where}) and {other_kind} "
                f"{other[1]!r} (column {other[0]!r}, from {other[2]}) would clash: {why}; "
                f"{clash_fix}")
        mine[key] = (stored, shown, where)
        return stored
