"""The store's on-disk layout: table folders, hive partitions and the one fixed schema.

The documented schema lives in ``data_manifest/store_schema.json``; this module reads it, so
the documentation and the code cannot drift apart. Every table's columns are fixed there:
no name read from any input (a metric, a metaparameter) is ever a column of the store or an
identifier in its SQL. Metrics are values of ``measurements.metric`` and metaparameters
rows of ``parameters``.

A store is a folder::

    _store.json
    studies/base_dir=<b>/model=<m>/optimizer=<o>/part-<w>.parquet
    trials/base_dir=<b>/model=<m>/optimizer=<o>/part-<w>.parquet
    parameters/base_dir=<b>/model=<m>/optimizer=<o>/part-<w>.parquet
    measurements/base_dir=<b>/model=<m>/optimizer=<o>/part-<w>-<k>.parquet

``<w>`` counts the writes of a workload (the release's, and a workload's first add, are
write 0; a save that replaces an added workload writes its new and changed studies as the
next): each write has its studies, trials and parameters files (:func:`table_file`) and its
measurements files, which hold whole metrics, with ``batch_size`` a column (``<k>`` numbers
the files of one write: never a name; :func:`measurements_file`).

Partition values are percent-encoded, so ``mnist_subsets/mnist_6875`` becomes
``base_dir=mnist_subsets%2Fmnist_6875``; DuckDB and polars decode it back.

>>> partition_dir("measurements", "mnist_subsets/mnist_6875", "simple_cnn_base", "sgd")
'measurements/base_dir=mnist_subsets%2Fmnist_6875/model=simple_cnn_base/optimizer=sgd'
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pyarrow as pa

from curvekit._resources import manifest_dir

__all__ = [
    "EVALUATIONS_KEY",
    "FILE_NAME",
    "MANIFEST_FILE",
    "METADATA_FILE",
    "METRICS_KEY",
    "PARTS_KEY",
    "STORE_FORMAT",
    "TABLES",
    "fixed_schema",
    "measurements_file",
    "measurements_numbers",
    "measurements_write",
    "partition_dir",
    "store_link",
    "store_schema",
    "table_file",
    "workload_dir",
]

FILE_NAME = "part-0.parquet"
"""The studies, trials or parameters file of a workload's first write (:func:`table_file`)."""
METADATA_FILE = "_store.json"
MANIFEST_FILE = "_manifest.json"
# Footer key of a measurements file: JSON list of the metrics it holds rows of, in order.
METRICS_KEY = "curvekit.metrics"
EVALUATIONS_KEY = "curvekit.evaluations"
"""Footer key of a measurements file: the evaluations (rows of its CSV files) of each study
it holds rows of, a JSON object by batch size."""
PARTS_KEY = "curvekit.parts"
"""Footer key of a measurements file: its rows in order, a JSON list of ``[metric,
batch_size]`` (the metric null for a study's rows without a metric), each part holding its
study's evaluations."""
_MEASUREMENTS_FILE = re.compile(r"part-(0|[1-9][0-9]{0,17})-(0|[1-9][0-9]{0,17})\.parquet")

_TYPES: dict[str, pa.DataType] = {
    "string": pa.string(),
    "int64": pa.int64(),
    "float64": pa.float64(),
    "bool": pa.bool_(),
}


@cache
def store_schema() -> dict[str, Any]:
    """The documented store schema (``data_manifest/store_schema.json``)."""
    data: dict[str, Any] = json.loads((manifest_dir() / "store_schema.json").read_text())
    return data


STORE_FORMAT: int = store_schema()["store_format"]
"""The layout version this curvekit writes: 3, metrics and metaparameters as rows, a
workload's measurements in files of whole metrics. Formats 1 (every metric and
metaparameter a column) and 2 (a measurements file per study) are read only to upgrade
them (:mod:`curvekit.store.upgrade`)."""
TABLES: tuple[str, ...] = tuple(store_schema()["tables"])
"""The store's tables, in the order the schema documents them."""


def partition_columns(table: str) -> list[str]:
    """The hive partition columns of a table, outermost first."""
    cols: list[str] = store_schema()["tables"][table]["partition_by"]
    return cols


def fixed_schema(table: str) -> pa.Schema:
    """The columns every file of ``table`` holds, in their order.

    Partition columns are part of the path, not of the files, so they are left out.

    >>> fixed_schema("measurements").names
    ['batch_size', 'trial_id', 'step', 'metric', 'value']
    """
    spec = store_schema()["tables"][table]
    part = set(spec["partition_by"])
    return pa.schema(
        [pa.field(c["name"], _TYPES[c["type"]]) for c in spec["columns"] if c["name"] not in part]
    )


def store_link(home: Path) -> Path:
    """The path of the current store in a curvekit home (a symlink into ``home/stores``)."""
    return home / "store"


def workload_dir(table: str, base_dir: str, model: str, optimizer: str) -> str:
    """The relative folder holding one workload's files of ``table``.

    >>> workload_dir("trials", "cifar_10", "resnet_8", "sgd")
    'trials/base_dir=cifar_10/model=resnet_8/optimizer=sgd'
    """
    parts = [f"{n}={quote(v, safe='')}" for n, v in
             zip(("base_dir", "model", "optimizer"), (base_dir, model, optimizer), strict=True)]
    return "/".join([table, *parts])


def measurements_file(write: int, index: int) -> str:
    """The name of the ``index``-th measurements file of a workload's ``write``-th write.

    >>> measurements_file(0, 2)
    'part-0-2.parquet'
    """
    return f"part-{int(write)}-{int(index)}.parquet"


def table_file(write: int) -> str:
    """The name of a workload's studies, trials or parameters file of its ``write``-th write.

    >>> table_file(0), table_file(3)
    ('part-0.parquet', 'part-3.parquet')
    """
    return f"part-{int(write)}.parquet"


def measurements_numbers(name: str) -> tuple[int, int] | None:
    """The (write, index) a measurements file's name gives (None for a name curvekit does
    not give): :func:`measurements_file` read back.

    >>> measurements_numbers("part-3-1.parquet"), measurements_numbers("part-0.parquet")
    ((3, 1), None)
    """
    found = _MEASUREMENTS_FILE.fullmatch(name)
    return None if found is None else (int(found.group(1)), int(found.group(2)))


def measurements_write(name: str) -> int | None:
    """The write a measurements file's name counts (None for a name curvekit does not give).

    >>> measurements_write("part-3-0.parquet"), measurements_write("part-0.parquet")
    (3, None)
    """
    numbers = measurements_numbers(name)
    return None if numbers is None else numbers[0]


def partition_dir(table: str, *values: str | int) -> str:
    """The relative folder of one partition of ``table``, values outermost first."""
    names = partition_columns(table)
    if len(values) != len(names):
        raise ValueError(f"{table} is partitioned by {names}, got {values!r}")
    parts = [f"{n}={quote(str(v), safe='')}" for n, v in zip(names, values, strict=True)]
    return "/".join([table, *parts])
