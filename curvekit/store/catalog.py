"""Describe a store (``info``) and check it against its manifest (``verify``).

>>> import tempfile, pathlib
>>> from curvekit.release.synthetic import tiny_archive
>>> from curvekit.release.convert import convert
>>> tmp = pathlib.Path(tempfile.mkdtemp())
>>> _ = convert(tmp / "a.tar.bz2", tmp, manifest=tiny_archive(tmp / "a.tar.bz2"))
>>> from curvekit.store.store import Store, metrics_with_values
>>> store = Store.open(tmp)
>>> verify(store).ok
True
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl
import pyarrow.parquet as pq

from curvekit.release.manifest import STATUSES, Manifest
from curvekit.store.store import Store, metrics_with_values

__all__ = ["VerifyReport", "info", "verify"]


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
        + ", ".join(f"count(*) filter (where status = ?) as {s.lower()}" for s in STATUSES)
        + ", count(*) as trials from trials group by all", params=list(STATUSES)).pl()
    studies = con.sql(
        "select base_dir || '/' || model || '/' || optimizer as workload, "
        "list(batch_size order by batch_size) as batch_sizes from studies group by all").pl()
    rows: dict[str, int] = {}
    metrics: dict[str, set[str]] = {}
    for (b, m, o, _), path in store.measurement_files():
        meta = pq.ParquetFile(path).metadata
        name = _workload(b, m, o)
        rows[name] = rows.get(name, 0) + meta.num_rows
        metrics.setdefault(name, set()).update(metrics_with_values(meta))
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
