"""The demo data set: real training curves made by ``curvekit run``, shipped in the package.

Two workloads, ``demo/digits/fc_128_128_128/sgd`` and
``demo/digits/fc_128_128_128/nesterov_momentum``: a fully connected network with three
hidden layers of 128 ReLU units on scikit-learn's 8×8 digits, eleven batch sizes from 2 to
the full training set (1,197), 24 quasi-random trials per study, trained on a CPU with the
paper's protocol. :data:`DEMO_SWEEP` is the exact sweep; ``benchmarks/run.py``
regenerates the files from it. :func:`demo` adds them to the store in about a second,
without torch and without a network.

The files in ``curvekit/_demo/``: ``studies.parquet``, ``trials.parquet`` and
``measurements.parquet`` (the tables of :mod:`curvekit.runner.collect`) and ``demo.json``
(the plan, how long it took, and the files' sha256).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from curvekit import structured
from curvekit._resources import demo_dir
from curvekit.errors import RunError
from curvekit.home import resolve_home

__all__ = ["DEMO_DIR", "DEMO_GOAL", "DEMO_SWEEP", "DemoResult", "demo", "export_demo",
           "load_demo_tables"]

DEMO_DIR = demo_dir()
TABLES = ("studies", "trials", "measurements")
DEMO_SWEEP: dict[str, Any] = {
    "name": "demo/digits",
    "dataset": "digits",
    "model": "fc_128_128_128",
    "optimizers": ["sgd", "nesterov_momentum"],
    "batch_sizes": [2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, "full"],
    "trials": 24,
    "steps": {2: 5000, 4: 3500, 8: 2500, 16: 1600, 32: 1200, 64: 800, 128: 600, 256: 500,
              512: 500, 1024: 500, 1197: 500},
    "eval_every": 10,
    "seed": 0,
}
"""The keyword arguments of :func:`curvekit.run` that made the demo."""
DEMO_GOAL = ("val/classification_error", 0.05)
"""The steps-to-result goal ``docs/running.md`` reads the demo at."""


@dataclass(frozen=True)
class DemoResult:
    """What :func:`demo` did; ``changed`` is False when the store already had it."""

    workloads: list[str]
    changed: bool
    trials: int
    measurements: int
    metric: str = DEMO_GOAL[0]
    goal: float = DEMO_GOAL[1]
    added: list[Any] = field(default_factory=list, repr=False)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def load_demo_tables(folder: str | os.PathLike[str] | None = None
                     ) -> tuple[dict[str, pa.Table], dict[str, Any]]:
    """The demo's three tables and its ``demo.json``, checked against their sha256."""
    root = Path(folder) if folder is not None else DEMO_DIR
    info_path = root / "demo.json"
    if not info_path.is_file():
        raise RunError(f"the demo data set is missing from {root}; reinstall curvekit "
                       "(pip install --force-reinstall curvekit)")
    info: dict[str, Any] = json.loads(info_path.read_text())
    tables = {}
    for name in TABLES:
        path = root / f"{name}.parquet"
        expected = info["files"][f"{name}.parquet"]
        got = _sha256(path) if path.is_file() else "missing"
        if got != expected:
            raise RunError(f"{path} is damaged: sha256 {got}, expected {expected}; reinstall "
                           "curvekit")
        tables[name] = pq.read_table(path)
    return tables, info


def demo(home: str | os.PathLike[str] | None = None) -> DemoResult:
    """Add the demo's workloads to the store at ``home`` (offline, in about a second).

    Examples
    --------
    >>> import tempfile
    >>> result = demo(tempfile.mkdtemp())
    >>> result.workloads[0], result.trials
    ('demo/digits/fc_128_128_128/sgd', 528)
    """
    from curvekit.runner.collect import workload_data
    from curvekit.store.update import add_workload

    tables, info = load_demo_tables()
    origin = {"format": "curvekit-demo", "tool": "curvekit demo",
              "plan": info["plan"], "command": info["command"],
              # the documented goal: reports and `fit --all` use it for these workloads
              "goal": {"metric": DEMO_GOAL[0], "goal": DEMO_GOAL[1], "maximize": False}}
    home_path = resolve_home(home)
    added = [add_workload(home_path, data, replace=True)
             for data in workload_data(tables, origin)]
    return DemoResult([a.workload for a in added], any(a.changed for a in added),
                      tables["trials"].num_rows, tables["measurements"].num_rows,
                      added=added)


def export_demo(tables: Mapping[str, pa.Table], info: Mapping[str, Any], work_dir: Path,
                out: str | os.PathLike[str] | None = None) -> Path:
    """Write a finished demo sweep's tables and ``demo.json`` into ``out`` (the package's
    ``_demo`` folder by default); member paths are made relative to ``work_dir``."""
    folder = Path(out) if out is not None else DEMO_DIR
    folder.mkdir(parents=True, exist_ok=True)
    prefix = str(work_dir).rstrip("/") + "/"
    files = {}
    for name in TABLES:
        table = tables[name]
        if "member" in table.column_names:
            members = [m.removeprefix(prefix) for m in table["member"].to_pylist()]
            table = table.set_column(table.schema.get_field_index("member"), "member",
                                     pa.array(members, pa.string()))
        path = folder / f"{name}.parquet"
        pq.write_table(table, path, compression="zstd", compression_level=19)
        files[path.name] = _sha256(path)
    (folder / "demo.json").write_text(structured.dumps({**info, "files": files}, indent=1,
                                                 sort_keys=True) + "\n")
    return folder
