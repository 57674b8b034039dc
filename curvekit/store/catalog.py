"""Open a store, describe it (``info``) and check it against its manifest (``verify``).

>>> import tempfile, pathlib
>>> from curvekit.release.synthetic import tiny_archive
>>> from curvekit.release.convert import convert
>>> tmp = pathlib.Path(tempfile.mkdtemp())
>>> _ = convert(tmp / "a.tar.bz2", tmp, manifest=tiny_archive(tmp / "a.tar.bz2"))
>>> store = Store.open(tmp)
>>> verify(store).ok
True
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import duckdb
import polars as pl
import pyarrow.parquet as pq

from curvekit.errors import StoreError
from curvekit.home import resolve_home
from curvekit.release.manifest import STATUSES, Manifest
from curvekit.store.layout import (
    MANIFEST_FILE,
    METADATA_FILE,
    STORE_FORMAT,
    TABLES,
    partition_columns,
)
from curvekit.store.writer import store_link

__all__ = ["Store", "VerifyReport", "info", "verify"]


@dataclass(frozen=True)
class Store:
    """A converted store on disk: its folder and its metadata."""

    path: Path
    metadata: dict[str, Any] = field(repr=False)

    @classmethod
    def open(cls, home: str | os.PathLike[str] | None = None) -> Store:
        """Open the current store of a curvekit home (or a store folder itself)."""
        base = resolve_home(home)
        for candidate in (store_link(base), base):
            meta_path = candidate / METADATA_FILE
            if meta_path.is_file():
                break
        else:
            raise StoreError(
                f"no curvekit store at {base}; run `curvekit fetch` (or `curvekit fetch "
                "--archive PATH` with an archive you already have) to create it")
        try:
            metadata = json.loads(meta_path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise StoreError(f"{meta_path} is unreadable ({exc}); run `curvekit fetch "
                             "--force` to rebuild the store") from exc
        if metadata.get("store_format") != STORE_FORMAT:
            raise StoreError(
                f"{candidate} has store format {metadata.get('store_format')!r}, this curvekit "
                f"reads format {STORE_FORMAT}; run `curvekit fetch --force` to rebuild it")
        return cls(candidate.resolve(), metadata)

    def glob(self, table: str) -> str:
        """The Parquet glob of a table, for DuckDB or polars."""
        if table not in TABLES:
            raise StoreError(f"unknown table {table!r}; tables are {', '.join(TABLES)}")
        return str(self.path / table / "**" / "*.parquet")

    def manifest(self) -> Manifest | None:
        """The manifest the store was built from, if it was built from one."""
        path = self.path / MANIFEST_FILE
        return Manifest.from_file(path) if path.is_file() else None

    def connect(self) -> duckdb.DuckDBPyConnection:
        """A DuckDB connection with views ``studies``, ``trials`` and ``measurements``."""
        con = duckdb.connect()
        for table in TABLES:
            con.execute(f"create view {table} as select * from read_parquet("
                        f"'{self.glob(table)}', hive_partitioning=true)")
        return con

    def measurement_files(self) -> list[tuple[tuple[str, str, str, int], Path]]:
        """Every measurements file with its (base_dir, model, optimizer, batch_size)."""
        out = []
        names = partition_columns("measurements")
        for path in sorted((self.path / "measurements").rglob("*.parquet")):
            parts = dict(p.split("=", 1) for p in path.relative_to(self.path).parts[1:-1])
            values = [unquote(parts[n]) for n in names]
            out.append(((values[0], values[1], values[2], int(values[3])), path))
        return out


def _workload(base_dir: str, model: str, optimizer: str) -> str:
    return f"{base_dir}/{model}/{optimizer}"


def info(store: Store) -> pl.DataFrame:
    """One row per workload: batch sizes, trials by status, metrics and row counts.

    Metric columns are listed for a workload only if it has a non-null value in them
    (read from the Parquet footers, so no data is scanned).
    """
    con = store.connect()
    trials = con.sql(
        "select base_dir || '/' || model || '/' || optimizer as workload, "
        "count(distinct batch_size) as studies, "
        + ", ".join(f"count(*) filter (where status = '{s}') as {s.lower()}" for s in STATUSES)
        + ", count(*) as trials from trials group by all").pl()
    studies = con.sql(
        "select base_dir || '/' || model || '/' || optimizer as workload, "
        "list(batch_size order by batch_size) as batch_sizes from studies group by all").pl()
    rows: dict[str, int] = {}
    metrics: dict[str, set[str]] = {}
    for (b, m, o, _), path in store.measurement_files():
        meta = pq.ParquetFile(path).metadata
        name = _workload(b, m, o)
        rows[name] = rows.get(name, 0) + meta.num_rows
        seen = metrics.setdefault(name, set())
        for g in range(meta.num_row_groups):
            group = meta.row_group(g)
            for c in range(group.num_columns):
                col = group.column(c)
                stats = col.statistics
                if col.path_in_schema not in ("trial_id", "step") and (
                        stats is None or stats.null_count < group.num_rows):
                    seen.add(col.path_in_schema)
    meas = pl.DataFrame({
        "workload": list(rows),
        "measurements": list(rows.values()),
        "metrics": [sorted(metrics[w]) for w in rows],
    }, schema={"workload": pl.String, "measurements": pl.Int64, "metrics": pl.List(pl.String)})
    out = (studies.join(trials, on="workload", how="full", coalesce=True)
           .join(meas, on="workload", how="full", coalesce=True)
           .with_columns(pl.col("studies", "trials", "complete", "incomplete", "infeasible",
                                "measurements").fill_null(0))
           .sort("workload"))
    result: pl.DataFrame = out.select(
        "workload", "batch_sizes", "studies", "trials", "complete", "incomplete", "infeasible",
        "metrics", "measurements")
    return result


@dataclass(frozen=True)
class VerifyReport:
    """The outcome of :func:`verify`: ``problems`` lists every mismatch found."""

    problems: list[str]
    checked: dict[str, int]

    @property
    def ok(self) -> bool:
        """True when nothing is wrong."""
        return not self.problems


def verify(store: Store, manifest: Manifest | None = None) -> VerifyReport:
    """Check the store against a manifest (default: the one it was built from).

    Checks that every study of the manifest is present with its published trial counts by
    status, that no study of the manifest's workloads is unexpected, that every Parquet file
    reads, that each study's rows equal the sum of its trials' ``n_measurements``, and that
    the total rows equal the store's record (and the manifest's, when it states one).
    """
    manifest = manifest or store.manifest()
    problems: list[str] = []
    con = store.connect()
    counts = con.sql(
        "select base_dir || '/' || model || '/' || optimizer, batch_size, status, count(*), "
        "sum(n_measurements) from trials group by all").fetchall()
    have: dict[tuple[str, int], dict[str, int]] = {}
    expected_rows: dict[tuple[str, int], int] = {}
    for workload, bs, status, n, rows in counts:
        have.setdefault((workload, bs), {})[status] = n
        expected_rows[(workload, bs)] = expected_rows.get((workload, bs), 0) + int(rows)
    study_keys = {(w, bs) for w, bs in con.sql(
        "select base_dir || '/' || model || '/' || optimizer, batch_size from studies").fetchall()}
    total = 0
    files = store.measurement_files()
    for (b, m, o, bs), path in files:
        try:
            n = pq.ParquetFile(path).metadata.num_rows
        except Exception as exc:  # any unreadable file is a finding, not a crash
            problems.append(f"{path}: unreadable Parquet file ({exc})")
            continue
        total += n
        want = expected_rows.get((_workload(b, m, o), bs), 0)
        if n != want:
            problems.append(f"{_workload(b, m, o)} batch size {bs}: {n} measurement rows, "
                            f"but its trials account for {want}")
    recorded = store.metadata.get("counts", {}).get("measurements")
    if recorded is not None and recorded != total:
        problems.append(f"measurements: {total} rows on disk, {recorded} written by the "
                        "conversion")
    if manifest is not None:
        listed = {(s.workload, s.batch_size): s for s in manifest.studies}
        for (workload, bs), s in sorted(listed.items()):
            if (workload, bs) not in study_keys:
                problems.append(f"{workload} batch size {bs}: study missing")
                continue
            got = have.get((workload, bs), {})
            for status in STATUSES:
                if got.get(status, 0) != getattr(s, status):
                    problems.append(f"{workload} batch size {bs}: {got.get(status, 0)} "
                                    f"{status} trials, manifest says {getattr(s, status)}")
        workloads = {w for w, _ in listed}
        for workload, bs in sorted(study_keys - set(listed)):
            if workload in workloads:
                problems.append(f"{workload} batch size {bs}: study not in the manifest")
        if manifest.measurements is not None:
            rows = sum(n for (w, _), n in expected_rows.items() if w in workloads)
            if rows != manifest.measurements:
                problems.append(f"measurements: {rows} rows, manifest says "
                                f"{manifest.measurements}")
    checked = {"studies": len(study_keys), "files": len(files), "measurements": total,
               "trials": sum(sum(v.values()) for v in have.values())}
    return VerifyReport(problems, checked)
