"""The release's own layout, as a folder or a ``.tar``/``.tar.bz2``/``.tar.gz``/``.tar.xz``.

Studies, trials and measurements are read with the converter's parsers
(:mod:`curvekit.release.archive`, :mod:`curvekit.release.csvparse`), so the same checks
apply: safe member names, integer batch-size and trial folders, a ``step`` column, numbers
everywhere. Statuses are the ones ``metadata.json`` gives. The source may be

* the release root (the folder holding ``<base_dir>/<model>/<optimizer>/<batch_size>/``,
  like ``batch_science/``) or a folder holding that root, or an archive of it;
* one workload's folder (``.../<model>/<optimizer>`` holding ``<batch_size>/study.json``),
  named by ``--name`` or else by its last three path components.

A source holding several workloads needs ``--name`` to say which one to add; with one
workload, ``--name`` renames it.
"""

from __future__ import annotations

import contextlib
import gzip
import lzma
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO

import polars as pl
import pyarrow as pa

from curvekit._version import __version__
from curvekit.errors import ArchiveError, IngestError
from curvekit.ingest.manifest import RunManifest
from curvekit.ingest.metrics import apply_map
from curvekit.names import split_workload
from curvekit.release.archive import (
    CsvRecord,
    StudyKey,
    StudyRecord,
    TrialRecord,
    _records,
    member_limit,
    open_decompressed,
    parse_member_name,
    parse_study,
    parse_trial,
)
from curvekit.release.csvparse import CsvBatcher
from curvekit.store.update import WorkloadData

__all__ = ["build_release", "read_release"]

Record = StudyRecord | TrialRecord | CsvRecord


@contextlib.contextmanager
def _open_tar(path: Path) -> Iterator[IO[bytes]]:
    with open(path, "rb") as fh:
        magic = fh.read(6)
    if magic.startswith(b"BZh"):
        with open_decompressed(path) as stream:
            yield stream
        return
    opener = gzip.open if magic.startswith(b"\x1f\x8b") else \
        lzma.open if magic.startswith(b"\xfd7zXZ") else None
    if opener is None:
        with open(path, "rb") as stream:
            yield stream
        return
    with opener(path, "rb") as stream:
        yield stream  # type: ignore[misc]


def _folder_records(source: Path) -> Iterator[Record]:
    files = sorted(p for p in source.rglob("*") if p.is_file()
                   and p.name in ("study.json", "metadata.json", "measurements.csv"))
    studies = [p.relative_to(source) for p in files if p.name == "study.json"]
    depth = min((len(p.parts) for p in studies), default=0)
    if depth == 2:  # a workload's folder: <batch_size>/study.json
        prefix = "batch_science/" + "/".join(source.resolve().parts[-3:]) + "/"
    elif studies and studies[0].parts[0] == "batch_science" and depth >= 6:
        prefix = ""
    elif depth >= 5:
        prefix = "batch_science/"
    else:
        raise IngestError(
            "study.json files sit at an unexpected depth; point at the release root (holding "
            "<base_dir>/<model>/<optimizer>/<batch_size>/study.json) or at one workload's "
            "folder (holding <batch_size>/study.json)", path=str(source))
    for path in files:
        member = prefix + path.relative_to(source).as_posix()
        parsed = parse_member_name(member)
        if parsed is None:
            continue
        kind, key, trial = parsed
        limit, size = member_limit(member), path.stat().st_size
        if limit is not None and size > limit:  # the archive reader's limits, for folders too
            raise ArchiveError(f"{path}: {size:,} bytes, more than the {limit:,} bytes allowed "
                               f"for a {kind}; this is not the release's file",
                               member=str(path))
        data = path.read_bytes()
        if kind == "study.json":
            yield parse_study(data, key, str(path))
        elif kind == "metadata.json":
            assert trial is not None
            yield parse_trial(data, key, trial, str(path))
        else:
            assert trial is not None
            yield CsvRecord(key, trial, data, str(path))


def read_release(source: Path) -> Iterator[Record]:
    """The records of a release folder or archive (see the module docs)."""
    try:
        if source.is_dir():
            yield from _folder_records(source)
            return
        with _open_tar(source) as stream:
            yield from _records(stream)
    except ArchiveError as exc:
        # folder records already name their file; archive members need the archive's path
        raise IngestError(str(exc), path=None if str(source) in str(exc) else str(source)
                          ) from exc
    except (OSError, EOFError, RuntimeError, lzma.LZMAError) as exc:
        raise IngestError(f"corrupt or unreadable archive ({exc}); check the file, or "
                          "extract it and pass the folder", path=str(source)) from exc


def build_release(source: Path, *, name: str | None, overrides: Mapping[str, str],
                  manifest: RunManifest) -> WorkloadData:
    """One workload of a release source as :class:`WorkloadData` (renamed to ``name``)."""
    if manifest.runs:
        raise IngestError("a release source takes batch sizes and statuses from study.json "
                          "and metadata.json; leave [[runs]] out of the manifest",
                          path=manifest.path)
    studies: dict[StudyKey, StudyRecord] = {}
    trials: dict[tuple[StudyKey, int], TrialRecord] = {}
    tables: dict[StudyKey, list[pa.Table]] = {}
    csv_seen: set[tuple[StudyKey, int]] = set()
    batcher = CsvBatcher(lambda key, table: tables.setdefault(key, []).append(table))
    try:
        for record in read_release(source):
            if isinstance(record, StudyRecord):
                studies[record.key] = record
            elif isinstance(record, TrialRecord):
                trials[(record.key, record.trial_id)] = record
            else:
                csv_seen.add((record.key, record.trial_id))
                batcher.add(record)
    except ArchiveError as exc:
        raise IngestError(str(exc)) from exc
    finally:
        try:
            batcher.close()
        except ArchiveError as exc:
            raise IngestError(str(exc)) from exc
    for key, trial in sorted(set(trials) ^ csv_seen):
        what = "measurements but no metadata.json" if (key, trial) in csv_seen \
            else "metadata.json but no measurements.csv"
        raise IngestError(f"trial {trial} of {key.path()} has {what}", path=str(source))
    for key in sorted({k for k, _ in trials} - set(studies)):
        raise IngestError(f"{key.path()} has trials but no study.json", path=str(source))
    workloads = sorted({k.workload for k in studies})
    if not workloads:
        raise IngestError("no study.json found: not the release's layout", path=str(source))
    chosen = workloads[0]
    if len(workloads) > 1:
        if name not in workloads:
            raise IngestError(f"holds {len(workloads)} workloads ({', '.join(workloads)}); "
                              "pass --name with the one to add", path=str(source))
        chosen = name
    base_dir, model, optimizer = split_workload(
        (name or chosen).strip("/"), fix="pass --name base_dir/model/optimizer",
        error=lambda m: IngestError(m, path=str(source)))

    def renamed(key: StudyKey) -> StudyKey:
        return StudyKey(base_dir, model, optimizer, key.batch_size)

    out_studies = [StudyRecord(renamed(s.key), s.dataset, s.early_stopping, s.train_steps,
                               s.parameter_configs, s.extra, s.member)
                   for k, s in sorted(studies.items()) if k.workload == chosen]
    out_trials = [TrialRecord(renamed(t.key), t.trial_id, t.status, t.steps, t.parameters,
                              t.member)
                  for (k, _), t in sorted(trials.items()) if k.workload == chosen]
    rows: dict[tuple[StudyKey, int], pa.Table] = {}
    for key, parts in tables.items():
        if key.workload != chosen:
            continue
        frame = pl.from_arrow(pa.concat_tables(parts, promote_options="default"))
        assert isinstance(frame, pl.DataFrame)
        for (trial,), group in frame.partition_by("trial_id", as_dict=True).items():
            member = trials[(key, int(trial))].member
            mapped = apply_map(group.drop("trial_id").sort("step"), "step", member, overrides)
            rows[(renamed(key), int(trial))] = mapped.frame.to_arrow()
    for t in out_trials:
        rows.setdefault((t.key, t.trial_id), pa.table({"step": pa.array([], pa.int64())}))
    origin = {"format": "release", "source": str(source.resolve()), "workload": chosen,
              "metric_map": dict(sorted(overrides.items())), "manifest": manifest.path or None,
              "tool": f"curvekit {__version__} add"}
    return WorkloadData(out_studies, out_trials, rows, origin)
