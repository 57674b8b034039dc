"""Describe a store (``info``) and check its content and its manifest (``verify``).

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
from pathlib import Path
from urllib.parse import unquote

import duckdb
import polars as pl
import pyarrow.parquet as pq

from curvekit.errors import CurvekitError
from curvekit.release.manifest import STATUSES, Manifest
from curvekit.store.layout import MANIFEST_FILE, TABLES
from curvekit.store.snapshots import FILES_FILE, check_files, repair_hint
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
    with store.reading("the store's tables", fixed_sql=True):
        return _info(store, con)


def _info(store: Store, con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
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
        with store.reading(str(path)):
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


# Trials whose rows disagree with their record are listed up to this many, then counted:
# a file damaged wholesale would otherwise print one line per trial.
_LISTED_TRIALS = 20


def verify(store: Store, manifest: Manifest | None = None) -> VerifyReport:
    """Check the store's content: its files against their checksums, its tables against
    each other, and its studies against a manifest (default: the one it was built from).

    - every Parquet file reads, and every file of the snapshot has the size and BLAKE2b
      digest recorded when it was written (damaged, missing and unexpected files are named,
      with how to repair them);
    - every trial's measurement rows equal its ``n_measurements`` (a row moved from one trial
      to another is caught), and the total rows equal the store's record;
    - every study of the manifest is present with its published trial counts by status, no
      study of the manifest's workloads is unexpected, and the rows equal the manifest's
      total when it states one.
    """
    problems: list[str] = []
    bad = _check_files(store, problems)
    good = {t: [p for p in sorted((store.path / t).rglob("*.parquet"))
                if p.relative_to(store.path).as_posix() not in bad] for t in TABLES}
    con = duckdb.connect()
    with store.reading("the store's tables", fixed_sql=True):
        have, expected_rows, study_keys = _trial_counts(con, good)
        _check_trials(con, good, bad, problems)
    total = 0
    for path in good["measurements"]:
        total += pq.ParquetFile(path).metadata.num_rows
    recorded = store.metadata.get("counts", {}).get("measurements")
    if recorded is not None and recorded != total and not bad:
        problems.append(f"measurements: {total} rows on disk, {recorded} written by the "
                        "conversion; run `curvekit fetch --force` to rebuild the store")
    try:
        manifest = manifest or store.manifest()
    except (CurvekitError, OSError, ValueError) as exc:  # a damaged manifest is a finding
        problems.append(f"{MANIFEST_FILE}: unreadable ({exc}); run `curvekit fetch --force` "
                        "to rebuild the store")
        manifest = None
    if manifest is not None:
        _check_manifest(manifest, have, expected_rows, study_keys, problems)
    checked = {"studies": len(study_keys), "files": len(good["measurements"]),
               "measurements": total, "trials": sum(sum(v.values()) for v in have.values())}
    return VerifyReport(problems, checked)


def _check_files(store: Store, problems: list[str]) -> set[str]:
    """Report unreadable, damaged, missing and unexpected files; return their paths."""
    bad: set[str] = set()
    for table in TABLES:
        for path in sorted((store.path / table).rglob("*.parquet")):
            rel = path.relative_to(store.path).as_posix()
            try:
                pq.ParquetFile(path).metadata  # noqa: B018 - reading the footer is the check
            except Exception as exc:  # any unreadable file is a finding, not a crash
                problems.append(f"{rel}: unreadable Parquet file ({exc}); to repair, "
                                f"{repair_hint(store.metadata, rel)}")
                bad.add(rel)
    found = check_files(store.path, skip=frozenset(bad))
    if not found.recorded:
        problems.append(f"{store.path}: no checksums recorded ({FILES_FILE} is missing), so "
                        "damaged files cannot be found; run `curvekit fetch --force` to "
                        "rebuild the store with them")
    for rel in found.damaged:
        problems.append(f"{rel}: damaged: its content differs from the checksum recorded "
                        f"when it was written; to repair, {repair_hint(store.metadata, rel)}")
    for rel in found.missing:
        problems.append(f"{rel}: missing; to repair, {repair_hint(store.metadata, rel)}")
    for rel in found.unexpected:
        problems.append(f"{rel}: unexpected file, not written with this snapshot (queries "
                        "may read it); delete it, or run `curvekit fetch --force`")
    return bad | set(found.damaged) | set(found.unexpected)


def _read(files: list[Path]) -> str:
    names = ", ".join("'" + str(p).replace("'", "''") + "'" for p in files)
    return f"read_parquet([{names}], hive_partitioning=true, union_by_name=true)"


_WORKLOAD = "base_dir || '/' || model || '/' || optimizer"


def _trial_counts(con: duckdb.DuckDBPyConnection, good: dict[str, list[Path]]
                  ) -> tuple[dict[tuple[str, int], dict[str, int]], dict[tuple[str, int], int],
                             set[tuple[str, int]]]:
    have: dict[tuple[str, int], dict[str, int]] = {}
    expected_rows: dict[tuple[str, int], int] = {}
    if good["trials"]:
        for workload, bs, status, n, rows in con.sql(
                f"select {_WORKLOAD}, batch_size, status, count(*), sum(n_measurements) "
                f"from {_read(good['trials'])} group by all").fetchall():
            have.setdefault((workload, bs), {})[status] = n
            expected_rows[(workload, bs)] = expected_rows.get((workload, bs), 0) + int(rows)
    study_keys: set[tuple[str, int]] = set()
    if good["studies"]:
        study_keys = {(w, bs) for w, bs in con.sql(
            f"select {_WORKLOAD}, batch_size from {_read(good['studies'])}").fetchall()}
    return have, expected_rows, study_keys


def _check_trials(con: duckdb.DuckDBPyConnection, good: dict[str, list[Path]], bad: set[str],
                  problems: list[str]) -> None:
    """Each trial's rows in the measurements against its ``n_measurements``."""
    if not good["trials"]:
        return
    # Studies whose measurements file or workloads whose trials file is bad are already
    # reported: comparing their trials would only repeat that.
    skip_studies = {_partition_key(rel) for rel in bad if rel.startswith("measurements/")}
    skip_workloads = {_partition_key(rel)[0] for rel in bad if rel.startswith("trials/")}
    meas = (f"(select {_WORKLOAD} as workload, batch_size, trial_id, count(*) as n "
            f"from {_read(good['measurements'])} group by all)" if good["measurements"] else
            "(select null::varchar as workload, null::bigint as batch_size, "
            "null::bigint as trial_id, null::bigint as n where false)")
    rows = con.sql(
        f"select workload, batch_size, trial_id, m.n, t.n from {meas} m full join "
        f"(select {_WORKLOAD} as workload, batch_size, trial_id, n_measurements as n "
        f"from {_read(good['trials'])}) t using (workload, batch_size, trial_id) "
        "where m.n is distinct from t.n and not (m.n is null and t.n = 0) "
        "order by all").fetchall()
    wrong = [r for r in rows if r[0] not in skip_workloads and (r[0], r[1]) not in skip_studies]
    for workload, bs, trial, got, want in wrong[:_LISTED_TRIALS]:
        said = (f"its trial record says {want}" if want is not None
                else "but the trials table has no such trial")
        problems.append(f"{workload} batch size {bs} trial {trial}: {got or 0} measurement "
                        f"rows, {said}; run `curvekit fetch --force` to rebuild the store")
    if len(wrong) > _LISTED_TRIALS:
        problems.append(f"... and {len(wrong) - _LISTED_TRIALS} more trials whose measurement "
                        "rows disagree with their trial record")


def _partition_key(rel: str) -> tuple[str, int | None]:
    """(workload, batch size or None) of a store file's relative path."""
    parts = dict(p.split("=", 1) for p in rel.split("/")[1:-1] if "=" in p)
    workload = "/".join(unquote(parts.get(n, "")) for n in ("base_dir", "model", "optimizer"))
    bs = parts.get("batch_size")
    return workload, int(bs) if bs is not None and bs.isdigit() else None


def _check_manifest(manifest: Manifest, have: dict[tuple[str, int], dict[str, int]],
                    expected_rows: dict[tuple[str, int], int],
                    study_keys: set[tuple[str, int]], problems: list[str]) -> None:
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
