"""Benchmark: what a store-wide query over one metric costs in DuckDB, by layout of the rows.

The question it answers: can a long measurements table (names as rows) scan one metric as
cheaply as the wide one (every metric a column), and which arrangement of its files comes
closest? From a store of today's format (``--home``) and, optionally, one of the previous
wide format (``--old-home``, as ``benchmarks/store_layout.py --keep`` leaves them), it
writes two other arrangements of the same long rows (pyarrow, the store writer's Parquet
options) and times, in one process, the same query on each:

* ``wide``: the previous format, the metric a column (``where "M" < G``);
* ``long``: today's store, one file per study, one row group per metric (small metrics
  share one);
* ``file per row group``: today's row groups, each written as a file of its own, in the
  study's folder;
* ``file per metric``: one file per workload and metric, every batch size in it (the batch
  size a column), sorted by (metric, batch size, trial, step);
* ``union, …``: the files per row group, or per metric, behind a view that is a ``union
  all`` of one scan per metric whose ``metric`` is a constant (the scan of a file of one
  metric needs no filter; DuckDB drops the branches of other metrics at planning);
* ``format 3``: with ``--format3-home``, a store of format 3 behind curvekit's own view
  (:func:`curvekit.store.store.measurements_view` over the index in its ``_store.json``),
  the arrangement ``union, file per metric`` became.

The query (per workload, the rows of ``val/classification_error`` below 0.3 and their first
step) is the one of ``benchmarks/store_layout.py``. Each round opens a new connection,
builds its view (timed apart) and runs the query; the layouts alternate, ``--repeat`` rounds,
CPU time of the process (all of DuckDB's threads) with ``--threads`` threads. Every layout
must give the same answer, or the run fails. Results in
``benchmarks/results/query-layouts.json``.

Usage::

    python benchmarks/query_layouts.py --home benchmarks/_work/layout-full/home-new \\
        --old-home benchmarks/_work/layout-full/home-old --repeat 5
    python benchmarks/query_layouts.py --home HOME2 --old-home HOME1 --format3-home HOME3 \\
        --label f0.02   # results in query-layouts-f0.02.json
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import WORK, du, save

METRIC, GOAL = "val/classification_error", 0.3
LONG_SQL = ("select base_dir, model, optimizer, count(*) as n, min(step) as first "
            "from measurements where metric = ? and value < ? group by all order by all")
WIDE_SQL = ("select base_dir, model, optimizer, count(*) as n, min(step) as first "
            "from measurements where \"{metric}\" < ? group by all order by all")
OPTIONS: dict[str, Any] = dict(
    compression="zstd", compression_level=3, use_dictionary=["metric", "value"],
    dictionary_pagesize_limit=64 << 10, store_schema=False,
    column_encoding={"trial_id": "DELTA_BINARY_PACKED", "step": "DELTA_BINARY_PACKED"},
    write_statistics=["trial_id", "step", "metric"])
LONG = pa.schema([("trial_id", pa.int64()), ("step", pa.int64()), ("metric", pa.string()),
                  ("value", pa.float64())])


def files(root: Path) -> list[str]:
    return sorted(str(p) for p in root.rglob("*.parquet"))


def per_row_group(source: Path, out: Path) -> dict[str, list[str]]:
    """Each row group of each file as a file of its own; the metrics each file holds."""
    holds: dict[str, list[str]] = {}
    for path in files(source):
        parquet = pq.ParquetFile(path)
        folder = out / Path(path).parent.relative_to(source)
        folder.mkdir(parents=True, exist_ok=True)
        for group in range(parquet.metadata.num_row_groups):
            rows = parquet.read_row_group(group).cast(LONG)
            target = str(folder / f"part-{group}.parquet")
            pq.write_table(rows, target, row_group_size=1 << 30, **OPTIONS)
            holds[target] = sorted(set(rows["metric"].drop_null().to_pylist()))
    return holds


def per_metric(source: Path, out: Path) -> dict[str, list[str]]:
    """One file per workload and metric, the batch size a column; the metric of each file."""
    holds: dict[str, list[str]] = {}
    workloads = sorted({Path(p).parent.parent for p in files(source)})
    options = {**OPTIONS, "column_encoding": {**OPTIONS["column_encoding"],
                                              "batch_size": "DELTA_BINARY_PACKED"}}
    for workload in workloads:
        parts = []
        for folder in sorted(workload.glob("batch_size=*")):
            batch_size = int(folder.name.split("=", 1)[1])
            for path in sorted(folder.glob("*.parquet")):
                rows = pq.read_table(path).cast(LONG)
                parts.append(rows.add_column(0, "batch_size",
                                             pa.repeat(pa.scalar(batch_size), rows.num_rows)))
        rows = pa.concat_tables(parts)
        rows = rows.take(pc.sort_indices(rows, [(c, "ascending") for c in (
            "metric", "batch_size", "trial_id", "step")]))
        target = out / workload.relative_to(source)
        target.mkdir(parents=True, exist_ok=True)
        for i, name in enumerate(sorted(set(rows["metric"].drop_null().to_pylist()))):
            path = str(target / f"part-{i}.parquet")
            pq.write_table(rows.filter(pc.equal(rows["metric"], name)), path,
                           row_group_size=1 << 20, **options)
            holds[path] = [name]
    return holds


def union_view(con: duckdb.DuckDBPyConnection, holds: dict[str, list[str]]) -> None:
    """``measurements`` as a union of one scan per metric, its name a constant."""
    by_metric: dict[str, tuple[list[str], list[str]]] = collections.defaultdict(
        lambda: ([], []))
    for path, names in holds.items():
        for name in names:
            by_metric[name][len(names) > 1].append(path)
    column = duckdb.ColumnExpression
    union = None
    for name, (alone, shared) in sorted(by_metric.items()):
        for paths, filtered in ((alone, False), (shared, True)):
            if not paths:
                continue
            scan = con.read_parquet(paths, hive_partitioning=True)
            if filtered:
                scan = scan.filter(column("metric") == duckdb.ConstantExpression(name))
            scan = scan.select(column("trial_id"), column("step"),
                               duckdb.ConstantExpression(name).alias("metric"),
                               column("value"), column("base_dir"), column("model"),
                               column("optimizer"), column("batch_size"))
            union = scan if union is None else union.union(scan)
    assert union is not None
    union.create_view("measurements")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, required=True, help="a home of format 2")
    parser.add_argument("--format3-home", type=Path, help="a home of format 3 (its own view)")
    parser.add_argument("--label", default="", help="results in query-layouts-LABEL.json")
    parser.add_argument("--old-home", type=Path, help="a home of the previous wide format")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    work = WORK / "query-layouts"
    shutil.rmtree(work, ignore_errors=True)
    source = args.home / "store" / "measurements"
    started = time.perf_counter()
    holds = per_row_group(source, work / "per-row-group")
    metric_holds = per_metric(source, work / "per-metric")
    print(f"layouts written in {time.perf_counter() - started:.0f} s", flush=True)
    views: dict[str, Callable[[duckdb.DuckDBPyConnection], None]] = {}
    roots = {"long": source, "file per row group": work / "per-row-group",
             "file per metric": work / "per-metric"}
    if args.old_home:
        roots = {"wide": args.old_home / "store" / "measurements", **roots}
    for label, root in roots.items():
        if label == "format 3":
            continue
        listed = files(root)
        views[label] = lambda con, listed=listed: con.read_parquet(
            listed, hive_partitioning=True).create_view("measurements")
    views["union, file per row group"] = lambda con: union_view(con, holds)
    views["union, file per metric"] = lambda con: union_view(con, metric_holds)
    format3: dict[str, list[str]] = {}
    if args.format3_home:
        from curvekit.store.layout import workload_dir
        from curvekit.store.store import Store, measurements_view

        with Store.open(args.format3_home) as store:
            for workload in store.workloads():
                folder = store.path / workload_dir("measurements",
                                                   *store.split_workload(workload))
                for name, held in store.measurements_index(workload).items():
                    format3[str(folder / name)] = held
        roots["format 3"] = args.format3_home / "store" / "measurements"

        def view3(con: duckdb.DuckDBPyConnection) -> None:
            measurements_view(con, format3).create_view("measurements")

        views["format 3"] = view3
    cpu: dict[str, list[float]] = {k: [] for k in views}
    build: dict[str, list[float]] = {k: [] for k in views}
    answers: dict[str, Any] = {}
    loads = []
    for _ in range(args.repeat):
        loads.append(os.getloadavg()[0])
        for label, view in views.items():
            con = duckdb.connect()
            con.execute(f"set threads = {args.threads}")
            before = time.process_time()
            view(con)
            built = time.process_time()
            if label == "wide":
                result = con.execute(WIDE_SQL.format(metric=METRIC), [GOAL]).fetchall()
            else:
                result = con.execute(LONG_SQL, [METRIC, GOAL]).fetchall()
            cpu[label].append(time.process_time() - built)
            build[label].append(built - before)
            answers[label] = result
            con.close()
    if len({repr(a) for a in answers.values()}) != 1:
        raise SystemExit("the layouts gave different answers")
    base = "wide" if "wide" in views else "long"
    medians = {k: statistics.median(v) for k, v in cpu.items()}
    results = {
        "home": str(args.home), "old_home": str(args.old_home), "threads": args.threads,
        "repeat": args.repeat, "load": loads, "cpus": os.cpu_count(),
        "files": {k: len(files(r)) for k, r in roots.items()}
        | {"union, file per row group": len(holds), "union, file per metric": len(metric_holds)},
        "bytes": {k: du(r) for k, r in roots.items()},
        "query_cpu_s": cpu, "view_cpu_s": build,
        "median_query_cpu_s": medians,
        "median_view_cpu_s": {k: statistics.median(v) for k, v in build.items()},
        f"ratio_to_{base}": {k: v / medians[base] for k, v in medians.items()},
    }
    out = save("query-layouts" + (f"-{args.label}" if args.label else ""), results)
    for label in views:
        print(f"{label:20s} query {medians[label]:.3f} s CPU ({medians[label] / medians[base]:.2f}"
              f" × {base}), view {results['median_view_cpu_s'][label]:.3f} s, "
              f"{results['files'][label]} files")
    print(f"load average {min(loads):.1f}–{max(loads):.1f}; results in {out}")


if __name__ == "__main__":
    main()
