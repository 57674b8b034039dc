"""Structured text in and out: the one loader of users' JSON, TOML and YAML, the one JSON writer.

**Reading.** Every structured file curvekit reads from a user -- a run manifest, a search
space (``--space``), a sweep's ``plan.json``, a data manifest (``fetch --manifest``), the
release's ``study.json`` and ``metadata.json``, AlgoPerf's ``hparams.json``, a Hugging Face
``trainer_state.json``, Lightning's ``hparams.yaml`` -- is parsed by :func:`loads` (or
:func:`load`), which refuses, through the caller's error:

* text that does not parse, with the line where the parser says;
* nesting deeper than :data:`MAX_DEPTH` levels (a file nested 100,000 deep stops the parser
  at the interpreter's recursion limit, which is caught here; what parses is measured);
* values that are not JSON's (a TOML date or time, YAML's timestamps, bytes and sets), with
  the key that holds them and the fix (quote it as text);
* a top level of another type than the caller expects (a list where a table is wanted).

So a caller gets only dicts (with text or integer keys), lists, text, integers, floats,
booleans and None, at most :data:`MAX_DEPTH` deep.

**Writing.** :func:`dumps` is ``json.dumps`` with NaN and infinities written as ``null``:
``NaN`` and ``Infinity`` are not JSON, and other programs refuse them. Every JSON the CLI
and the library write (``--format json``, query output, plots, the report, the store's own
files) goes through it.

>>> loads('{"a": [1, 2.5]}', "json", where="x.json", error=lambda m, line: ValueError(m))
{'a': [1, 2.5]}
>>> loads("[1]", "json", where="space.json", error=lambda m, line: ValueError(m))
Traceback (most recent call last):
...
ValueError: space.json: expected a table (a JSON object) at the top, got a list
>>> dumps({"loss": float("nan"), "best": [1.0, float("inf")]})
'{"loss": null, "best": [1.0, null]}'
"""

from __future__ import annotations

import datetime
import json
import math
import re
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from curvekit.errors import CurvekitError

__all__ = ["KINDS", "MAX_DEPTH", "Fail", "dumps", "finite", "kind_of", "load", "loads"]

MAX_DEPTH = 64
"""The deepest nesting of lists and tables a structured file may have (a run manifest, a
search space or a plan is about five levels deep)."""
KINDS = {".json": "json", ".toml": "toml", ".yaml": "yaml", ".yml": "yaml"}
"""File suffixes and the kind of text they hold."""

Fail = Callable[[str, int | None], CurvekitError]
"""Makes the caller's error from a message and the 1-based line at fault (None if unknown)."""

_NAMES = {dict: "a table (a JSON object)", list: "a list", str: "text", int: "an integer",
          float: "a number", bool: "true/false", type(None): "null"}


def kind_of(path: str | Path) -> str | None:
    """The kind of text a file's suffix says it holds (``json``, ``toml``, ``yaml``), or None.

    >>> kind_of("runs.TOML"), kind_of("space.yml"), kind_of("notes.txt")
    ('toml', 'yaml', None)
    """
    return KINDS.get(Path(path).suffix.lower())


def load(path: str | Path, *, kind: str | None = None, expect: type | tuple[type, ...] = dict,
         error: Fail, yaml_loader: Any = None) -> Any:
    """Read and parse the file ``path`` (see :func:`loads`); ``kind`` defaults to what its
    suffix says. An unreadable file is ``error`` too."""
    path = Path(path)
    kind = kind or kind_of(path)
    if kind is None:
        raise error(f"{path}: unknown file type {path.suffix or '(no suffix)'!r}; name it "
                    ".toml, .yaml or .json", None)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"{path}: cannot read: {exc}", None) from exc
    return loads(text, kind, where=str(path), expect=expect, error=error,
                 yaml_loader=yaml_loader)


def loads(text: str | bytes, kind: str, *, where: str, expect: type | tuple[type, ...] = dict,
          error: Fail, yaml_loader: Any = None) -> Any:
    """Parse ``text`` of ``kind`` (``json``, ``toml`` or ``yaml``) and check it (see the
    module docs); ``where`` names it in messages, ``error`` makes the caller's error.

    An empty YAML document is an empty table. ``yaml_loader`` replaces PyYAML's
    ``SafeLoader`` (a loader derived from it, e.g. one that reads Python tags as text).
    """
    try:
        obj = _parse(text, kind, where, error, yaml_loader)
    except RecursionError:
        raise error(f"{where}: nested too deeply (the parser gave up before the end; at most "
                    f"{MAX_DEPTH} levels are read); "
                    "this is no file curvekit writes or expects: check it", None) from None
    if obj is None and kind == "yaml":
        obj = {}
    _check(obj, where, error)
    wanted = expect if isinstance(expect, tuple) else (expect,)
    if not isinstance(obj, wanted) or (isinstance(obj, bool) and bool not in wanted):
        names = " or ".join(_NAMES.get(t, t.__name__) for t in wanted)
        got = _NAMES.get(type(obj), type(obj).__name__)
        raise error(f"{where}: expected {names} at the top, got {got}", None)
    return obj


def _parse(text: str | bytes, kind: str, where: str, error: Fail, yaml_loader: Any) -> Any:
    if kind == "json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise error(f"{where}: malformed JSON: {exc.msg} (line {exc.lineno} column "
                        f"{exc.colno})", exc.lineno) from exc
        except ValueError as exc:  # not UTF-8, or an integer of over 4,300 digits
            raise error(f"{where}: malformed JSON: {exc}", None) from exc
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise error(f"{where}: not UTF-8 text: {exc}", None) from exc
    if kind == "toml":
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            found = re.search(r"at line (\d+)", str(exc))
            raise error(f"{where}: malformed TOML: {exc}",
                        int(found.group(1)) if found else None) from exc
    if kind == "yaml":
        try:
            import yaml
        except ImportError as exc:
            raise error(f"{where}: reading YAML needs PyYAML: pip install pyyaml, or write the "
                        "file as TOML or JSON", None) from exc
        try:
            return yaml.load(text, Loader=yaml_loader or yaml.SafeLoader)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            raise error(f"{where}: malformed YAML: {exc}",
                        mark.line + 1 if mark is not None else None) from exc
    raise error(f"{where}: unknown kind of file {kind!r}; give .toml, .yaml or .json", None)


_PLAIN = frozenset({str, int, float, bool, type(None)})


def _check(obj: Any, where: str, error: Fail) -> None:
    """Refuse nesting beyond MAX_DEPTH and values that are not JSON's, naming the key.

    Plain values are passed over without building their key's name, so a flat file (the
    release's metadata.json) costs about as much again as parsing it."""
    todo: list[tuple[Any, str, int]] = [(obj, "", 0)]
    while todo:
        value, key, depth = todo.pop()
        if type(value) in _PLAIN:
            continue
        if isinstance(value, dict | list):
            if depth >= MAX_DEPTH:
                raise error(f"{where}: nested too deeply (more than {MAX_DEPTH} levels, at "
                            f"{key or 'the top'}); this is no file curvekit writes or "
                            "expects: check it", None)
            if isinstance(value, list):
                todo.extend((v, f"{key}[{i}]", depth + 1) for i, v in enumerate(value)
                            if type(v) not in _PLAIN)
                continue
            for k, v in value.items():
                if type(k) is not str and (isinstance(k, bool) or not isinstance(k, int)):
                    raise error(f"{where}: the key {k!r} (in {key or 'the top'}) is "
                                f"{type(k).__name__}, not text; quote it", None)
                if type(v) not in _PLAIN:
                    todo.append((v, f"{key}.{k}" if key else str(k), depth + 1))
        elif isinstance(value, datetime.date | datetime.time):
            raise error(f"{where}: {key or 'the top'} is a date or time ({value}), which "
                        f"curvekit does not read; write it as text in quotes "
                        f"(\"{value}\")", None)
        elif not isinstance(value, str | int | float):
            raise error(f"{where}: {key or 'the top'} is {type(value).__name__} "
                        f"({str(value)[:40]!r}), not a number, text, true/false, a list or "
                        "a table; write it as text in quotes", None)


def finite(value: Any) -> Any:
    """``value`` with every NaN and infinity (in lists and tables too) as None.

    >>> finite([1.0, float("-inf"), {"x": float("nan")}])
    [1.0, None, {'x': None}]
    """
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


def dumps(value: Any, **options: Any) -> str:
    """``json.dumps(value, **options)`` with NaN and infinities written as ``null``.

    The text is byte for byte ``json.dumps``'s wherever every number is finite; only then
    is the value copied (with :func:`finite`).
    """
    try:
        return json.dumps(value, allow_nan=False, **options)
    except ValueError as exc:
        if "JSON compliant" not in str(exc):
            raise
    return json.dumps(finite(value), allow_nan=False, **options)
