"""``_store.json``: a snapshot's record of its source, counts, columns and added workloads.

This module is the one place that reads or writes the file. :class:`StoreMetadata` is a
typed, read-only view of its JSON object: typed properties for the fields curvekit uses, and
the plain mapping (``meta["counts"]``) for everything else. It keeps the object's keys in
their order and any key it does not know, so a file read and saved again is the same file,
byte for byte (``json.dumps(..., indent=1)`` and a final newline).

A file that cannot be read, is not a JSON object, or holds a field of the wrong type is a
:class:`~curvekit.errors.StoreError` naming the file, the field and the fix, wherever it is
read (opening the store, ``fetch``, ``add``, ``remove``): the record is what tells curvekit
which workloads were added, so nothing is rebuilt on a guess.

>>> import tempfile, pathlib
>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> meta = StoreMetadata.empty().replace(workloads=["my/mlp/sgd"])
>>> _ = meta.save(folder)
>>> StoreMetadata.read(folder) == meta, meta.workloads, meta.source.sha256
(True, ['my/mlp/sgd'], None)
>>> _ = (folder / METADATA_FILE).write_text('{"store_format": "one"}')
>>> StoreMetadata.read(folder)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
curvekit.errors.StoreError: .../_store.json is damaged: store_format is 'one', expected an ...
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from curvekit import structured
from curvekit._version import __version__
from curvekit.errors import StoreError
from curvekit.home import read_json
from curvekit.store.layout import METADATA_FILE, STORE_FORMAT, measurements_write, store_link

__all__ = ["ADDED_KEY", "FILES_KEY", "METADATA_FILE", "NAMES_KEY", "TABLE_COLUMNS_KEY", "Source",
           "StoreMetadata"]

ADDED_KEY = "added"
"""The key recording the workloads added with ``curvekit add`` (and ``curvekit run``)."""
TABLE_COLUMNS_KEY = "table_columns"
"""The key under which a store of format 1 recorded each table's columns."""
NAMES_KEY = "names"
"""The key recording each workload's names, as data: ``{workload: {"metrics": [...],
"parameters": {name: type}, "files": {file: [...]}}}`` (the metrics with values, the
metaparameters with the type of their column in the wide per-trial frames, and the index of
the workload's measurements files: the metrics each holds rows of)."""
FILES_KEY = "files"
"""The key, in a workload's ``names``, of its measurements files' index (store format 3):
``{file name: [metric, ...]}``, read by the views without opening a Parquet footer."""

# What each known field must be; a file that says otherwise is damaged.
_STR_LIST = "a list of names"
_KINDS: dict[str, str] = {
    "store_format": "an integer",
    "curvekit_version": "text",
    "source": "an object",
    "counts": "an object of integers",
    "metric_columns": _STR_LIST,
    "parameter_columns": "an object of type names",
    "workloads": _STR_LIST,
    ADDED_KEY: "an object of objects",
    NAMES_KEY: "an object of {metrics: names, parameters: {name: type}, files: {file: names}}"
               " per workload, each file named part-<write>-<index>.parquet",
}


class Source(NamedTuple):
    """Where a store's release part came from (all None for a store of added data only)."""

    dataset: str | None
    archive: str | None
    sha256: str | None


def _fits(key: str, value: Any) -> bool:
    if key == "store_format":
        return isinstance(value, int) and not isinstance(value, bool)
    if key == "curvekit_version":
        return isinstance(value, str)
    if key == "source":
        return isinstance(value, dict) and all(
            value.get(k) is None or isinstance(value[k], str)
            for k in ("dataset", "archive", "sha256"))
    if key == "counts":
        return isinstance(value, dict) and all(
            isinstance(v, int) and not isinstance(v, bool) for v in value.values())
    if key in ("metric_columns", "workloads"):
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    if key == "parameter_columns":
        return isinstance(value, dict) and all(isinstance(v, str) for v in value.values())
    if key == ADDED_KEY:
        return isinstance(value, dict) and all(isinstance(v, dict) for v in value.values())
    if key == NAMES_KEY:
        return isinstance(value, dict) and all(_workload_names(v) for v in value.values())
    return True


def _workload_names(value: Any) -> bool:
    if not isinstance(value, dict):
        return False
    metrics, parameters = value.get("metrics"), value.get("parameters")
    files = value.get(FILES_KEY, {})
    return (isinstance(metrics, list) and all(isinstance(m, str) for m in metrics)
            and isinstance(parameters, dict)
            and all(isinstance(t, str) for t in parameters.values())
            and isinstance(files, dict)
            # a file of the index is a name curvekit gives (part-<w>-<k>.parquet), never a
            # path: the views join it onto the workload's folder
            and all(measurements_write(name) is not None for name in files)
            and all(isinstance(f, list) and all(isinstance(m, str) for m in f)
                    for f in files.values()))


def damaged(path: Path, problem: str) -> StoreError:
    """The error for a ``_store.json`` that cannot be trusted, with the one fix for it."""
    home = path.parent.parent.parent if path.parent.parent.name == "stores" else None
    link = store_link(home) if home is not None else path.parent
    return StoreError(
        f"{path} is damaged: {problem}; it records the store's source, counts and the "
        f"workloads you added, so curvekit will not guess them. Remove {link} and run "
        "`curvekit fetch` (or `curvekit demo`) to build the store again, then add your own "
        "workloads again")


class StoreMetadata(Mapping[str, Any]):
    """A snapshot's ``_store.json``: typed fields, and the JSON object as a mapping.

    Instances never change; :meth:`replace` gives a new one.
    """

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, Any], *, path: Path | None = None) -> None:
        where = path if path is not None else Path(METADATA_FILE)
        for key, kind in _KINDS.items():
            if key in data and not _fits(key, data[key]):
                raise damaged(where, f"{key} is {data[key]!r}, expected {kind}")
        self._data: dict[str, Any] = copy.deepcopy(dict(data))

    # -- the mapping: the JSON object as written ------------------------------------------

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, StoreMetadata):
            return self._data == other._data
        return isinstance(other, Mapping) and self._data == dict(other)

    __hash__ = None  # type: ignore[assignment]  # holds lists and dicts

    def __repr__(self) -> str:
        return f"StoreMetadata({self._data!r})"

    # -- typed fields ------------------------------------------------------------------------

    @property
    def store_format(self) -> int | None:
        """The layout version of the snapshot (:data:`~curvekit.store.layout.STORE_FORMAT`);
        None only while a snapshot is being written (a file read from disk always has it)."""
        value: int | None = self._data.get("store_format")
        return value

    @property
    def current_format(self) -> bool:
        """True when this curvekit reads the snapshot's format."""
        return self.store_format == STORE_FORMAT

    @property
    def curvekit_version(self) -> str:
        """The curvekit version that wrote the snapshot ("" when not recorded)."""
        return str(self._data.get("curvekit_version", ""))

    @property
    def source(self) -> Source:
        """The release archive the store was converted from."""
        source = self._data.get("source") or {}
        return Source(source.get("dataset"), source.get("archive"), source.get("sha256"))

    @property
    def counts(self) -> dict[str, int]:
        """Rows of each table and the number of workloads (a copy)."""
        return dict(self._data.get("counts") or {})

    @property
    def workloads(self) -> list[str] | None:
        """The workloads' names; None for a store that records none (read the studies)."""
        names = self._data.get("workloads")
        return None if names is None else list(names)

    @property
    def names(self) -> dict[str, dict[str, Any]]:
        """Each workload's metric names and metaparameter names with their types (a copy);
        empty for a store of format 1, whose names were its columns."""
        return copy.deepcopy(self._data.get(NAMES_KEY) or {})

    def workload_names(self, workload: str) -> dict[str, Any] | None:
        """One workload's entry of :attr:`names` (a copy), or None when none is recorded:
        its metrics, metaparameters with their types and measurements files. Cheaper than
        ``names[workload]``, which copies every workload's.

        >>> meta = StoreMetadata({"names": {"a/b/c": {"metrics": ["loss"], "parameters": {},
        ...                                           "files": {"part-0-0.parquet": ["loss"]}}}})
        >>> meta.workload_names("a/b/c")["files"], meta.workload_names("x/y/z")
        ({'part-0-0.parquet': ['loss']}, None)
        """
        recorded = (self._data.get(NAMES_KEY) or {}).get(workload)
        return None if recorded is None else copy.deepcopy(recorded)

    @property
    def added(self) -> dict[str, dict[str, Any]]:
        """The workloads added with ``curvekit add``: name -> sha256, origin, counts, ..."""
        return copy.deepcopy(self._data.get(ADDED_KEY) or {})

    # -- new versions ------------------------------------------------------------------------

    def replace(self, **changes: Any) -> StoreMetadata:
        """A copy with ``changes``; a known key keeps its place, a new one comes last.

        >>> StoreMetadata({"store_format": 1, "workloads": []}).replace(workloads=["a/b/c"])
        StoreMetadata({'store_format': 1, 'workloads': ['a/b/c']})
        """
        return StoreMetadata({**self._data, **changes})

    def to_dict(self) -> dict[str, Any]:
        """The JSON object (a deep copy)."""
        return copy.deepcopy(self._data)

    def text(self) -> str:
        """The file's text."""
        return structured.dumps(self._data, indent=1) + "\n"

    @classmethod
    def empty(cls) -> StoreMetadata:
        """The metadata of a store that holds nothing yet (before a first ``add``)."""
        return cls({"store_format": STORE_FORMAT, "curvekit_version": __version__,
                    "source": {"dataset": None, "archive": None, "sha256": None},
                    "counts": {"workloads": 0, "studies": 0, "trials": 0, "measurements": 0},
                    "workloads": [], NAMES_KEY: {}})

    # -- the file ------------------------------------------------------------------------

    @classmethod
    def read(cls, folder: Path) -> StoreMetadata | None:
        """The metadata of the snapshot (or store link) ``folder``; None when it has none."""
        path = folder / METADATA_FILE
        try:
            data = read_json(path, lambda problem: damaged(path, problem))
        except FileNotFoundError:
            return None
        if not isinstance(data, dict):
            raise damaged(path, f"it holds {type(data).__name__}, not a JSON object")
        if "store_format" not in data:
            raise damaged(path, "it has no store_format")
        return cls(data, path=path)

    def save(self, folder: Path) -> Path:
        """Write the metadata into the snapshot folder ``folder`` (a staging folder)."""
        path = folder / METADATA_FILE
        path.write_text(self.text(), encoding="utf-8")
        return path
