"""MLflow's SQLite tracking store (``mlflow.db``, ``mlruns.db``), read without MLflow.

``mlflow ui --backend-store-uri sqlite:///mlflow.db`` (and every ``MLFLOW_TRACKING_URI``
of ``sqlite:///...``) keeps the runs in one SQLite database instead of ``mlruns/``
folders. Its tables (MLflow's SQLAlchemy store, the same since MLflow 1.x): ``experiments``
(``experiment_id``, ``name``, ``lifecycle_stage``), ``runs`` (``run_uuid``, ``name``,
``status``, ``start_time``, ``lifecycle_stage``, ``experiment_id``), ``metrics`` (``key``,
``value``, ``timestamp``, ``step``, ``is_nan``, ``run_uuid``), ``params`` (``key``,
``value``, ``run_uuid``) and ``tags``. The database is read through the source's one door
(:mod:`curvekit.ingest.files`) into memory and queried there with Python's ``sqlite3``:
the file is never opened for writing, and MLflow is not needed.

The rules are the file store's (:mod:`curvekit.ingest.mlflow`): one experiment per workload
(a database with runs in several is refused, naming them: with the database file as SOURCE,
``--include '<experiment id>/*'`` picks one), runs in the trash skipped, a run answers to
its run id and its name, params are numbers where they spell one, a metric logged only at
step 0 is refused, and the step is whatever the caller passed (autologging's epochs are
settled by :func:`~curvekit.ingest.runs.settle_axis`). MLflow stores a NaN as ``is_nan``
with value 0, and an infinity as the largest float64: both are read back as they were
logged. Beyond the file store, **the run's status** is read: ``FINISHED`` is a finished
run; ``FAILED``, ``KILLED``, ``RUNNING`` and ``SCHEDULED`` did not finish (INCOMPLETE). A
run that logged no metric at all is left out, with a warning naming it.

>>> import sqlite3, tempfile, pathlib
>>> db = pathlib.Path(tempfile.mkdtemp()) / "mlflow.db"
>>> con = sqlite3.connect(db)
>>> con.executescript(SCHEMA)  # doctest: +ELLIPSIS
<sqlite3.Cursor object at ...>
>>> _ = con.execute("INSERT INTO experiments VALUES (1, 'sweep', '', 'active', 0, 0)")
>>> _ = con.execute("INSERT INTO runs (run_uuid, name, status, start_time, lifecycle_stage, "
...                 "experiment_id) VALUES ('abc', 'bs64', 'KILLED', 1, 'active', 1)")
>>> _ = con.execute("INSERT INTO params VALUES ('batch_size', '64', 'abc')")
>>> _ = con.executemany("INSERT INTO metrics VALUES ('val_loss', ?, 0, 'abc', ?, 0)",
...                     [(2.3, 100), (1.9, 200)])
>>> con.commit(); con.close()
>>> [(r.key, r.aliases, r.params, r.finished, r.frame.rows())
...  for r in read_mlflow_sqlite(db)]
[('abc', ('bs64',), {'batch_size': 64}, False, [(100, 2.3), (200, 1.9)])]
"""

from __future__ import annotations

import math
import sqlite3
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import polars as pl

from curvekit.errors import IngestError, IngestWarning
from curvekit.ingest.files import SourceFiles, files_of
from curvekit.ingest.runs import INT64_MAX, MAX_COLUMNS, ReadOptions, RunLog, merge_rows
from curvekit.ingest.select import ALL, FileFilter
from curvekit.ingest.yamlish import param_value, scalar
from curvekit.names import check_name

__all__ = ["FINISHED", "SCHEMA", "SUFFIXES", "databases", "is_mlflow_db", "read_mlflow_any",
           "read_mlflow_sqlite"]

SUFFIXES = (".db", ".sqlite", ".sqlite3")
MAX_DB_BYTES = 4 << 30
FINISHED = "FINISHED"
_MAGIC = b"SQLite format 3\x00"
_TABLES = frozenset({"experiments", "runs", "metrics", "params"})

SCHEMA = """
CREATE TABLE experiments (experiment_id INTEGER NOT NULL, name VARCHAR(256) NOT NULL,
  artifact_location VARCHAR(256), lifecycle_stage VARCHAR(32), creation_time BIGINT,
  last_update_time BIGINT, CONSTRAINT experiment_pk PRIMARY KEY (experiment_id));
CREATE TABLE runs (run_uuid VARCHAR(32) NOT NULL, name VARCHAR(250), source_type VARCHAR(20),
  source_name VARCHAR(500), entry_point_name VARCHAR(50), user_id VARCHAR(256),
  status VARCHAR(9), start_time BIGINT, end_time BIGINT, source_version VARCHAR(50),
  lifecycle_stage VARCHAR(20), artifact_uri VARCHAR(200), experiment_id INTEGER,
  deleted_time BIGINT, CONSTRAINT run_pk PRIMARY KEY (run_uuid),
  FOREIGN KEY(experiment_id) REFERENCES experiments (experiment_id));
CREATE TABLE metrics ("key" VARCHAR(250) NOT NULL, value FLOAT NOT NULL,
  timestamp BIGINT NOT NULL, run_uuid VARCHAR(32) NOT NULL, step BIGINT DEFAULT '0' NOT NULL,
  is_nan BOOLEAN DEFAULT '0' NOT NULL,
  CONSTRAINT metric_pk PRIMARY KEY ("key", timestamp, step, run_uuid, value, is_nan),
  FOREIGN KEY(run_uuid) REFERENCES runs (run_uuid));
CREATE TABLE latest_metrics ("key" VARCHAR(250) NOT NULL, value FLOAT NOT NULL,
  timestamp BIGINT, step BIGINT NOT NULL, is_nan BOOLEAN NOT NULL,
  run_uuid VARCHAR(32) NOT NULL, CONSTRAINT latest_metric_pk PRIMARY KEY ("key", run_uuid),
  FOREIGN KEY(run_uuid) REFERENCES runs (run_uuid));
CREATE TABLE params ("key" VARCHAR(250) NOT NULL, value VARCHAR(8000) NOT NULL,
  run_uuid VARCHAR(32) NOT NULL, CONSTRAINT param_pk PRIMARY KEY ("key", run_uuid),
  FOREIGN KEY(run_uuid) REFERENCES runs (run_uuid));
CREATE TABLE tags ("key" VARCHAR(250) NOT NULL, value VARCHAR(8000),
  run_uuid VARCHAR(32) NOT NULL, CONSTRAINT tag_pk PRIMARY KEY ("key", run_uuid),
  FOREIGN KEY(run_uuid) REFERENCES runs (run_uuid));
CREATE TABLE experiment_tags ("key" VARCHAR(250) NOT NULL, value VARCHAR(5000),
  experiment_id INTEGER NOT NULL, CONSTRAINT experiment_tag_pk PRIMARY KEY ("key", experiment_id),
  FOREIGN KEY(experiment_id) REFERENCES experiments (experiment_id));
CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL,
  CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num));
INSERT INTO alembic_version VALUES ('1b5f0d9ad7c1');
"""
"""MLflow's tables that curvekit reads, as its SQLAlchemy store creates them (for tests and
examples; a real store has more tables, which are not read)."""


def is_mlflow_db(name: str, head: bytes) -> bool:
    """True for a SQLite database file by its name and first bytes (its tables are checked
    when it is read)."""
    return name.lower().endswith(SUFFIXES) and head.startswith(_MAGIC)


@contextmanager
def _database(path: Path, files: SourceFiles) -> Iterator[sqlite3.Connection]:
    wal = path.with_name(path.name + "-wal")
    if files.exists(wal) and files.read_head(wal, 1):
        raise IngestError(f"a write-ahead log ({wal.name}) beside the database holds writes "
                          "not yet in it (a tracking server still running?); stop the "
                          "server, or open the database once with sqlite3 to checkpoint it",
                          path=str(path))
    data = files.read_bytes(path, limit=MAX_DB_BYTES,
                            refuse="an MLflow store that large: import a copy of it holding "
                            "one experiment")
    if not data.startswith(_MAGIC):
        raise IngestError("not a SQLite database (MLflow's SQLite store is one)",
                          path=str(path))
    con = sqlite3.connect(":memory:")
    try:
        con.deserialize(data)
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except sqlite3.DatabaseError as exc:
        con.close()
        raise IngestError(f"unreadable SQLite database: {exc}", path=str(path)) from exc
    if not tables >= _TABLES:
        con.close()
        raise IngestError(f"not an MLflow tracking store: it lacks the tables "
                          f"{', '.join(sorted(_TABLES - tables))}", path=str(path))
    try:
        yield con
    finally:
        con.close()


def _experiment(con: sqlite3.Connection, path: Path, select: FileFilter) -> list[tuple[Any, ...]]:
    """The runs of the one experiment with runs that ``select`` keeps."""
    rows = con.execute(
        "SELECT r.run_uuid, r.name, r.status, r.start_time, r.experiment_id, e.name "
        "FROM runs r JOIN experiments e ON e.experiment_id = r.experiment_id "
        "WHERE coalesce(r.lifecycle_stage, 'active') != 'deleted' "
        "AND coalesce(e.lifecycle_stage, 'active') != 'deleted' "
        "ORDER BY r.start_time, r.run_uuid").fetchall()
    rows = [r for r in rows if select.keeps_folder(f"{r[4]}/{r[0]}")
            and (not select.include or select.keeps(f"{r[4]}/{r[0]}"))]
    experiments = dict.fromkeys((r[4], r[5]) for r in rows)
    if len(experiments) > 1:
        names = ", ".join(f"{i} ({n})" for i, n in experiments)
        first = next(iter(experiments))[0]
        raise IngestError(f"holds several MLflow experiments with runs: {names}; one workload "
                          f"is one experiment: name this database file as the source and "
                          f"pick one with --include '{first}/*' (runs are "
                          "'<experiment id>/<run id>')", path=str(path))
    return rows


def _final_only(points: dict[str, list[tuple[int, float, int]]]) -> tuple[str, ...]:
    """As the file store: metrics logged once at step 0 after the run's curves."""
    curves = [max(t for _, _, t in p) for p in points.values() if any(s > 0 for s, _, _ in p)]
    end = max(curves, default=None)
    return tuple(k for k, p in points.items()
                 if len(p) == 1 and p[0][0] == 0 and (end is None or p[0][2] >= end))


def _value(value: float, is_nan: Any) -> float:
    if is_nan:
        return math.nan
    if abs(value) == sys.float_info.max:  # MLflow's SQL store keeps an infinity so
        return math.copysign(math.inf, value)
    return float(value)


def _run(con: sqlite3.Connection, path: Path, row: tuple[Any, ...]) -> RunLog | None:
    run_id, name, status, start, _, _ = row
    where = f"run {run_id!r}"
    points: dict[str, list[tuple[int, float, int]]] = {}
    for key, value, step, is_nan, stamp in con.execute(
            'SELECT "key", value, step, is_nan, timestamp FROM metrics WHERE run_uuid = ? '
            "ORDER BY timestamp, step", (run_id,)):
        if not isinstance(step, int) or not 0 <= step <= INT64_MAX:
            raise IngestError(f"{where}: metric {key!r} has step {step!r}, not a non-negative "
                              "integer", path=str(path))
        points.setdefault(str(key), []).append((step, _value(value, is_nan), int(stamp or 0)))
    if not points:
        return None
    if len(points) > MAX_COLUMNS:
        raise IngestError(f"{where} logs {len(points):,} metrics; curvekit reads at most "
                          f"{MAX_COLUMNS:,} per run", path=str(path))
    frames = []
    for key, series in points.items():
        check_name(key, "metric", fix=f"rename it with --map '{key}=<new name>'",
                   error=lambda m: IngestError(f"{where}: {m}", path=str(path)))
        if len(series) > 1 and all(s == 0 for s, _, _ in series):
            raise IngestError(
                f"{where}: all {len(series)} points of metric {key!r} are at step 0 (logged "
                "without a step); curvekit needs the training step of each evaluation: log "
                "it with mlflow.log_metric(key, value, step=...)", path=str(path))
        frame = pl.DataFrame({"step": pl.Series([s for s, _, _ in series], dtype=pl.Int64),
                              key: pl.Series([v for _, v, _ in series], dtype=pl.Float64)})
        frames.append(merge_rows(frame, f"{path} ({where}, metric {key!r})",
                                 lambda r: r + 1))
    frame = merge_rows(pl.concat(frames, how="diagonal"), str(path), lambda r: r + 1)
    params: dict[str, Any] = {}
    for key, value in con.execute('SELECT "key", value FROM params WHERE run_uuid = ? '
                                  'ORDER BY "key"', (run_id,)):
        check_name(str(key), "metaparameter", fix="give the run's parameters in a manifest",
                   error=lambda m: IngestError(f"{where}: {m}", path=str(path)))
        params[str(key)] = param_value(scalar(str(value)))
    tags = dict(con.execute('SELECT "key", value FROM tags WHERE run_uuid = ?', (run_id,)))
    flavor = str(tags.get("mlflow.autologging") or "")[:40]
    hint = (f"MLflow autologging ({flavor}) logs once per epoch, with step = the epoch "
            "number") if flavor else None
    name = name or tags.get("mlflow.runName")
    return RunLog(str(run_id), str(path), frame, params,
                  aliases=(str(name),) if name and str(name) != run_id else (),
                  started=float(start) if isinstance(start, int | float) else None,
                  axis_named=False, epoch_hint=hint, final_only=_final_only(points),
                  finished=status == FINISHED)


def read_mlflow_sqlite(path: Path, *, select: FileFilter = ALL,
                       files: SourceFiles | None = None) -> list[RunLog]:
    """The runs of the one experiment in the MLflow SQLite store ``path``; runs are named
    ``<experiment id>/<run id>`` for ``select`` (``--include``/``--exclude``)."""
    files = files_of(path, files)
    with _database(path, files) as con:
        rows = _experiment(con, path, select)
        runs = [(row, _run(con, path, row)) for row in rows]
    empty = [str(row[1] or row[0]) for row, run in runs if run is None]
    if empty:
        warnings.warn(f"{path}: left out {len(empty)} run(s) that logged no metric "
                      f"({', '.join(empty[:5])}{', ...' if len(empty) > 5 else ''})",
                      IngestWarning, stacklevel=2)
    return [run for _, run in runs if run is not None]


def databases(source: Path, files: SourceFiles, select: FileFilter = ALL) -> list[Path]:
    """The SQLite databases under ``source`` (or ``source`` itself), by name and first
    bytes, that ``select`` keeps."""
    if source.is_file():
        return [source] if is_mlflow_db(source.name, files.read_head(source, 16)) else []
    found = []
    for here, dirs, names in files.walk(source):
        rel = here.relative_to(source).as_posix()
        dirs[:] = sorted(d for d in dirs if not d.startswith(".")
                         and select.keeps_folder(f"{rel}/{d}".removeprefix("./")))
        for name in sorted(names):
            path = here / name
            if name.lower().endswith(SUFFIXES) and select.keeps(
                    f"{rel}/{name}".removeprefix("./")) \
                    and is_mlflow_db(name, files.read_head(path, 16)):
                found.append(path)
    return found


def read_mlflow_any(source: Path, options: ReadOptions | None = None) -> list[RunLog]:
    """MLflow runs from a file store (:mod:`curvekit.ingest.mlflow`) or a SQLite store:
    ``source`` a database file, or a folder holding one with runs (a folder whose several
    databases hold runs is refused: name one)."""
    from curvekit.ingest.mlflow import read_mlflow_runs

    opts = options or ReadOptions()
    files = files_of(source, opts.files)
    found = databases(source, files, opts.select)
    if not found:
        return read_mlflow_runs(source, select=opts.select, files=opts.files)
    runs = {db: read_mlflow_sqlite(db, select=opts.select, files=files) for db in found}
    with_runs = [db for db, r in runs.items() if r]
    if len(with_runs) > 1:
        raise IngestError(f"holds several MLflow SQLite stores with runs "
                          f"({', '.join(p.name for p in with_runs)}); import one: pass its "
                          "file as the source", path=str(source))
    return runs[with_runs[0]] if with_runs else []
